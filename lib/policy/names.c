/*
** The names of the policy's enums (sluice_name()), as the metrics text,
** the events, the configuration file and the CLI spell them: one table
** each, so that a new value is named once.
*/
#include "policy_int.h"

static const char *outcome_name(int o) {
  static const char *const n[SLUICE_OUTCOME__COUNT] = {
      "allow",       "throttled", "boxed",      "suspended",
      "concurrency", "conflict",  "unavailable"};
  return (o >= 0 && o < SLUICE_OUTCOME__COUNT) ? n[o] : "unknown";
}

static const char *event_name(int t) {
  static const char *const n[SLUICE_EVENT__COUNT] = {
      "unknown",     "box_trip", "edge_deny",   "alert",        "suspend",
      "page",        "ip_ban",   "stuffing",    "release",      "lift",
      "degraded_on", "degraded_off", "lease_denied", "store_full"};
  return (t > 0 && t < SLUICE_EVENT__COUNT) ? n[t] : "unknown";
}

/* A feature's name by its bit (SLUICE_SHADOW_BUCKETS is bit 0). */
static const char *shadow_name(int feature) {
  static const char *const n[] = {"buckets", "penalty", "leases",
                                  "fail_closed"};
  int i;
  for (i = 0; i < 4; i++)
    if (feature == 1 << i)
      return n[i];
  return "unknown";
}

const char *sluice_name(int kind, int value) {
  switch (kind) {
  case SLUICE_NAME_OUTCOME:
    return outcome_name(value);
  case SLUICE_NAME_EVENT:
    return event_name(value);
  case SLUICE_NAME_SHADOW:
    return shadow_name(value);
  default:
    return "unknown";
  }
}

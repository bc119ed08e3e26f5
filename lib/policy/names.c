/*
** The names of the policy's enums (sluice_name()), as the metrics text,
** the events, the configuration file and the CLI spell them: one table
** each, so that a new value is named once.
*/
#include "policy_int.h"

const char *sluice_name(int kind, int value) {
  static const char *const outcomes[SLUICE_OUTCOME__COUNT] = {
      "allow",       "throttled", "boxed",      "suspended",
      "concurrency", "conflict",  "unavailable"};
  static const char *const events[SLUICE_EVENT__COUNT] = {
      "unknown",     "box_trip",     "edge_deny",    "alert",     "suspend",
      "page",        "ip_ban",       "stuffing",     "release",   "lift",
      "degraded_on", "degraded_off", "lease_denied", "store_full"};
  /* A shadow feature by its bit: SLUICE_SHADOW_BUCKETS is bit 0. */
  static const char *const features[] = {"buckets", "penalty", "leases",
                                         "fail_closed"};
  int i;
  if (kind == SLUICE_NAME_OUTCOME && value >= 0 &&
      value < SLUICE_OUTCOME__COUNT)
    return outcomes[value];
  if (kind == SLUICE_NAME_EVENT && value > 0 && value < SLUICE_EVENT__COUNT)
    return events[value];
  for (i = 0; kind == SLUICE_NAME_SHADOW && i < 4; i++)
    if (value == 1 << i)
      return features[i];
  return "unknown";
}

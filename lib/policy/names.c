/*
** The names of the policy's enums, as the metrics text, the events and
** the CLI print them: one table each, so that a new value is named once.
*/
#include "policy_int.h"

const char *sluice_outcome_name(int o) {
  static const char *const n[SLUICE_OUTCOME__COUNT] = {
      "allow",       "throttled", "boxed",      "suspended",
      "concurrency", "conflict",  "unavailable"};
  return (o >= 0 && o < SLUICE_OUTCOME__COUNT) ? n[o] : "unknown";
}

const char *sluice_event_name(int t) {
  static const char *const n[SLUICE_EVENT__COUNT] = {
      "unknown",     "box_trip", "edge_deny",   "alert",        "suspend",
      "page",        "ip_ban",   "stuffing",    "release",      "lift",
      "degraded_on", "degraded_off", "lease_denied", "store_full"};
  return (t > 0 && t < SLUICE_EVENT__COUNT) ? n[t] : "unknown";
}

/*
** The settings of declared limits and routes (docs/policy.md, "Declared
** limits"), in one table: the loader (declared_conf.c) reads each number's
** bounds from it, `sluice settings` prints it (sluice_policy_limit_setting_at)
** and docs/policy.md shows that output, compared by the docs test.  The
** rows that are not numbers say the form their value takes.
*/
#include <stddef.h>

#include "declared.h"
#include "policy_int.h"

#define MS SLUICE__NS_PER_MS
#define DAY_MS (INT64_C(86400) * 1000)

/* The numbers' rows come first, in the order of SLUICE__LS_* (declared.h). */
static const sluice_limit_setting table[] = {
    [SLUICE__LS_RATE] = {"limits", "rate", "gcra", 1, 1, INT64_C(1) << 32,
                         NULL, "tokens that come back per period_ms"},
    [SLUICE__LS_PERIOD] = {"limits", "period_ms", "gcra", MS, 1, 30 * DAY_MS,
                           NULL, "the period `rate` is counted over"},
    [SLUICE__LS_BURST] = {"limits", "burst", "gcra", 1, 1, SLUICE_COUNT_MAX,
                          NULL, "the bucket's capacity"},
    [SLUICE__LS_SLIMIT] = {"limits", "limit", "sliding_window", 1, 1,
                           INT64_C(1) << 31, NULL,
                           "cost a window admits"},
    [SLUICE__LS_LIMIT] = {"limits", "limit", "fixed_window, cap", 1, 1,
                          SLUICE_COUNT_MAX, NULL,
                          "cost (cap: requests) a window admits"},
    [SLUICE__LS_WINDOW] = {"limits", "window_ms", "sliding_window, "
                           "fixed_window, cap", MS, 1, 366 * DAY_MS, NULL,
                           "the window's length"},
    [SLUICE__LS_MAX] = {"limits", "max", "concurrency", 1, 1,
                        SLUICE_LEASE_COUNT_MAX, NULL,
                        "leases held at once (above 32: one counted record)"},
    [SLUICE__LS_TTL] = {"limits", "ttl_ms", "concurrency, lock", MS, 1,
                        7 * DAY_MS, NULL,
                        "a lease's life unless released or renewed"},
    [SLUICE__LS_RETRY_MAX] = {"limits", "retry_after_max_ms", "every", MS, 1,
                              7 * DAY_MS, NULL,
                              "the longest Retry-After its refusals send "
                              "(a lease held for its TTL: poll meanwhile)"},
    {"limits", "algorithm", "every", 0, 0, 0,
     "gcra, sliding_window, fixed_window, concurrency, lock, cap",
     "what counts (required)"},
    {"limits", "scope", "every", 0, 0, 0, "[ ATTR, ... ] (1..4)",
     "the key template: tenant, key, ip, method, route, pattern, tier or "
     "a declared attribute (required)"},
    {"limits", "status", "every", 0, 0, 0, "429 or 409",
     "a denial's status (a lock: 409)"},
    {"limits", "unit", "every", 0, 0, 0, "a name",
     "what is counted (points; cap: requests; leases: concurrent)"},
    {"limits", "by", "every", 0, 0, 0, "an attribute",
     "the attribute whose value picks a parameter set"},
    {"limits", "params", "every", 0, 0, 0,
     "{ VALUE = { numbers }; ... } or ( { when = { ATTR = VALUE; ... }; "
     "numbers }, ... )",
     "the numbers for some values of `by`, or for the requests a set's "
     "`when` matches (the first; up to 32)"},
    {"routes", "method", "every", 0, 0, 0, "GET, POST, ... or *",
     "the method a route entry matches"},
    {"routes", "route", "every", 0, 0, 0,
     "a path; a segment * or {ATTR} any one, a final * the rest",
     "the path it matches, the query cut"},
    {"routes", "when", "every", 0, 0, 0,
     "{ ATTR = VALUE; ... } (1..4; VALUE \"*\": given, any value)",
     "attributes the request must have too (all of them)"},
    {"routes", "limits", "every", 0, 0, 0, "( NAME or { limit = NAME; cost = ...; }, ... )",
     "the limits a request passes, in order (0..8; none and no penalty: "
     "exempt, no store call)"},
    {"routes", "penalty", "every", 0, 0, 0, "a name in `penalties`",
     "the penalty its requests' strikes and box count toward"},
    {"routes", "failure", "every", 0, 0, 0, "closed or degraded",
     "a store failure: 503, or its rate limits on the degraded limiter"},
    {"routes", "limits[].group", "gcra", 0, 0, 0,
     "{ group = [ NAME, ... ]; cost = N; }",
     "buckets decided as one step, both charged or neither"},
    {"routes", "limits[].cost", "gcra, sliding_window, fixed_window", 0, 0, 0,
     "N; or { GET = N; other = N; }; or { by = ATTR; ranges = ( { upto = "
     "N; cost = N; }, ... ); }; or { attr = ATTR; max = N; }",
     "what the request takes of the limit (1 by default)"},
};

const sluice_limit_setting *sluice_policy_limit_setting_at(int i) {
  if (i < 0 || (size_t)i >= sizeof table / sizeof table[0])
    return NULL;
  return &table[i];
}

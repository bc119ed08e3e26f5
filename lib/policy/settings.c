/*
** The policy's scalar settings, one row each: where the file puts it
** (group.name), the sluice__conf field, the unit, the default and
** the bounds.  The defaults, the file loader (which bounds each setting
** as it reads it) and the settings table of docs/policy.md (`sluice
** settings` prints it, the docs test compares) all read this table, so a
** setting is spelled once.
**
** Settings with structure of their own stay in code: tiers, shadow and
** shadow_features, host; the declared limits, routes and penalties have
** their own table (declared_settings.c).
*/
#include <stddef.h>

#include "policy_int.h"

#define S SLUICE__NS_PER_S
#define MS SLUICE__NS_PER_MS
#define DMAX SLUICE_DURATION_MAX

typedef struct row {
  sluice_policy_setting pub;
  size_t offset; /* of the int64_t field in sluice__conf */
} row;

#define ROW(group, name, field, unit, dflt, lo, hi, what)                      \
  {{group, name, #field, unit, dflt, lo, hi, what},                            \
   offsetof(sluice__conf, field)}
/* A duration: at least one unit, at most what fits in ns. */
#define DUR(group, name, field, unit, dflt, what)                              \
  ROW(group, name, field, unit, dflt, 1, DMAX / (unit), what)

static const row rows[] = {
    ROW("failure", "retry_after_s", fail_closed_retry_after_ns, S, 15, 1,
        86400, "Retry-After of a fail-closed 503"),
    ROW("failure", "degraded_percent", degraded_percent, 1, 25, 1, 100,
        "the degraded limiter's share of each limit's rate and burst"),
    ROW("failure", "probe_interval_ms", degraded_probe_ns, MS, 1000, 0,
        3600 * 1000,
        "how long an open breaker leaves the store alone before probing"),
    ROW("breaker", "window_ms", breaker_window_ns, MS, 1000, 10, 3600 * 1000,
        "the window the failure share is taken over (10 slots)"),
    ROW("breaker", "min_calls", breaker_min_calls, 1, 20, 1, 65535,
        "store calls the window must hold before its share counts"),
    ROW("breaker", "failure_percent", breaker_failure_percent, 1, 50, 1, 100,
        "the share of failed calls that opens the breaker"),
    ROW("breaker", "consecutive_failures", breaker_run, 1, 0, 0, 1000000,
        "failed calls in a row that open it (0: off)"),
    ROW("breaker", "probes", breaker_probes, 1, 3, 1, 1000,
        "trial requests at a time when half-open"),
    ROW("ip_backstop", "limit", ip_limit, 1, 0, 0, SLUICE_COUNT_MAX,
        "requests one client address may make per window (0: off)"),
    DUR("ip_backstop", "window_s", ip_window_ns, S, 60,
        "the backstop's fixed window"),
    ROW("client_ip", "ipv6_prefix", ipv6_prefix, 1, 64, 1, 128,
        "an IPv6 client is one scope per prefix of this many bits (backstop, "
        "the ip attribute of scopes); IPv4 counts whole"),
};

#define NROWS ((int)(sizeof rows / sizeof rows[0]))

const sluice_policy_setting *sluice_policy_setting_at(int i) {
  return i >= 0 && i < NROWS ? &rows[i].pub : NULL;
}

int64_t *sluice__setting_field(sluice__conf *c, int i) {
  return (int64_t *)(void *)((char *)c + rows[i].offset);
}

const int64_t *sluice__setting_cfield(const sluice__conf *c, int i) {
  return (const int64_t *)(const void *)((const char *)c + rows[i].offset);
}

/*
** The policy's scalar settings, one row each: where the file puts it
** (group.name), the sluice__conf field, the unit, the default and
** the bounds.  The defaults, the file loader, the validator and the
** settings table of docs/policy.md (`sluice settings` prints it, the docs
** test compares) all read this table, so a setting is spelled once.
**
** Settings with structure of their own stay in code: tiers and their
** buckets, routes, failure.fail_closed, shadow and shadow_features, host.
** So do the checks that relate settings (costs within the smallest burst:
** max 0 below; costs.export_long at least costs.export).
*/
#include <stddef.h>

#include "policy_int.h"

#define S SLUICE__NS_PER_S
#define MS SLUICE__NS_PER_MS
#define DAY (86400 * S)
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
    ROW("costs", "standard", cost[SLUICE_EP_STANDARD], 1, 1, 1, 0,
        "points a standard request takes from both buckets"),
    ROW("costs", "reconcile", cost[SLUICE_EP_RECONCILE], 1, 10, 1, 0,
        "points a reconcile takes"),
    ROW("costs", "export", cost[SLUICE_EP_EXPORT], 1, 25, 1, 0,
        "points an export takes"),
    ROW("costs", "export_long", export_long_cost, 1, 50, 1, 0,
        "points an export over export_long_range_days takes (>= export)"),
    ROW("costs", "export_long_range_days", export_long_range_ns, DAY, 90, 1,
        100000, "the date range beyond which an export is long"),
    ROW("costs", "job_poll", cost[SLUICE_EP_JOB_POLL], 1, 1, 1, 0,
        "points a job poll takes"),
    DUR("penalty", "strike_window_ms", strike_window_ns, MS, 60000,
        "the window a tier's strikes are counted in"),
    DUR("penalty", "level1_box_s", level1_box_ns, S, 300,
        "the first box (level 1)"),
    DUR("penalty", "level2_box_s", level2_box_ns, S, 3600,
        "the box of a second offense (level 2, edge deny)"),
    DUR("penalty", "enterprise_level3_box_s", enterprise_level3_box_ns, S,
        3600, "level 3 box of a tier with level3 = \"page\""),
    DUR("penalty", "offense_ttl_s", offense_ttl_ns, S, 86400,
        "how long offenses are remembered after the last trip"),
    ROW("penalty", "strike_every_denial", strike_every_denial, 1, 0, 0, 1,
        "1: every 429 is a strike (the section-6 script); 0: only one sent "
        "before the last Retry-After ended"),
    ROW("auth", "subject_failures", auth_subject_failures, 1, 5, 1,
        (int64_t)1 << 31, "failed logins of one subject per window"),
    ROW("auth", "ip_failures", auth_ip_failures, 1, 20, 1, (int64_t)1 << 31,
        "failed logins from one IP per window"),
    DUR("auth", "window_s", auth_window_ns, S, 900,
        "the sliding window of failed logins"),
    DUR("auth", "level1_box_s", auth_box_ns[0], S, 300, "first lockout"),
    DUR("auth", "level2_box_s", auth_box_ns[1], S, 3600, "second lockout"),
    DUR("auth", "level3_box_s", auth_box_ns[2], S, 86400,
        "third lockout, and an IP's ban for credential stuffing"),
    ROW("auth", "stuffing_failures", stuffing_failures, 1, 500, 1,
        SLUICE_COUNT_MAX, "failures from one IP that can make it stuffing"),
    ROW("auth", "stuffing_subjects", stuffing_subjects, 1, 50, 1, 200,
        "... if they span this many distinct subjects"),
    ROW("auth", "stuffing_ips", stuffing_ips, 1, 20, 1, 200,
        "distinct IPs failing on one subject that lock it"),
    DUR("auth", "stuffing_window_s", stuffing_window_ns, S, 600,
        "the window of the stuffing counts"),
    DUR("heavy", "reconcile_lease_ttl_s", reconcile_lease_ttl_ns, S, 900,
        "a reconcile lease's life if never released"),
    DUR("heavy", "export_lease_ttl_s", export_lease_ttl_ns, S, 1800,
        "an export lease's life if never released"),
    DUR("heavy", "export_cap_window_s", export_cap_window_ns, S, 3600,
        "the window of a tier's exports_per_window"),
    DUR("heavy", "lease_retry_after_max_s", lease_retry_after_max_ns, S, 30,
        "cap on the Retry-After of a lease denial"),
    ROW("failure", "retry_after_s", fail_closed_retry_after_ns, S, 15, 1,
        86400, "Retry-After of a fail-closed 503"),
    ROW("failure", "degraded_percent", degraded_percent, 1, 25, 1, 100,
        "the degraded limiter's share of each tier's rates"),
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
        "auth windows, stuffing, boxes); IPv4 counts whole"),
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

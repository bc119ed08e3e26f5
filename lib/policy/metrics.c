/*
** The decision counters, read one at a time or as Prometheus text.
*/
#include <stdarg.h>
#include <stdio.h>

#include "declared.h"
#include "policy_int.h"

static const char *scope_name(int s) {
  static const char *const n[5] = {"none", "key", "ip", "subject", "tenant"};
  return (s >= 0 && s < 5) ? n[s] : "none";
}

uint64_t sluice_policy_count(const sluice_policy *p, const char *tier,
                             int outcome) {
  int row;
  if (!p || outcome < 0 || outcome >= SLUICE_OUTCOME__COUNT)
    return 0;
  if (!tier || !tier[0])
    row = SLUICE_POLICY_TIERS_MAX;
  else if ((row = sluice__policy_tier(p, tier)) < 0)
    return 0;
  return atomic_load_explicit(&p->ctr->decisions[row][outcome],
                              memory_order_relaxed);
}

void sluice__put(sluice__out *o, const char *fmt, ...) {
  va_list ap;
  int n;
  char *dst = (o->buf && o->used < o->len) ? o->buf + o->used : NULL;
  size_t room = dst ? o->len - o->used : 0;
  va_start(ap, fmt);
  n = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (n > 0)
    o->used += (size_t)n;
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* A counter by route: its HELP and TYPE lines (help: the text after the
** name), then a line per declared route and one for none (the label:
** sluice__route_label, escaped as the text format wants). */
static void by_route(sluice__out *o, const sluice_policy *p, const char *name,
                     const char *help, const _Atomic uint64_t *c) {
  char label[SLUICE__CTR_LABEL], esc[2 * SLUICE__CTR_LABEL];
  int i, r, n = p->decl ? p->decl->nroutes : 0;
  size_t k;
  const char *s;
  sluice__put(o, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
  for (i = 0; i <= n; i++) {
    r = i < n ? i : -1;
    sluice__route_label(p, r, label);
    for (s = label, k = 0; *s; s++) {
      if (*s == '\\' || *s == '"' || *s == '\n')
        esc[k++] = '\\';
      esc[k++] = *s == '\n' ? 'n' : *s;
    }
    esc[k] = '\0';
    sluice__put(o, "%s{route=\"%s\"} %llu\n", name, esc,
                (unsigned long long)LOAD(c[SLUICE__CTR_ROW(p, r)]));
  }
}

static const char *tier_name(const sluice_policy *p, int t) {
  return t < p->cfg.ntiers ? p->cfg.tiers[t].name : "none";
}

/* A counter by tier: its HELP and TYPE lines, then a line per tier of
** the configuration and one for none. */
static void by_tier(sluice__out *o, const sluice_policy *p, const char *name,
                    const char *help, const _Atomic uint64_t *c) {
  int t;
  sluice__put(o, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
  for (t = 0; t <= SLUICE_POLICY_TIERS_MAX; t++)
    if (t < p->cfg.ntiers || t == SLUICE_POLICY_TIERS_MAX)
      sluice__put(o, "%s{tier=\"%s\"} %llu\n", name, tier_name(p, t),
                  (unsigned long long)LOAD(c[t]));
}

int sluice_policy_metrics(const sluice_policy *cp, char *buf, size_t len,
                          size_t *needed) {
  sluice_policy *p = (sluice_policy *)cp;
  sluice__out o = {buf, len, 0};
  int t, i, l;
  if (!p || (!buf && len))
    return SLUICE_EINVAL;
  if (buf && len)
    buf[0] = '\0';
  sluice__put(&o,
              "# HELP sluice_policy_decisions_total Decisions by tier and "
              "outcome (in shadow mode: the outcome that was not enforced).\n"
              "# TYPE sluice_policy_decisions_total counter\n");
  for (t = 0; t <= SLUICE_POLICY_TIERS_MAX; t++)
    for (i = 0; i < SLUICE_OUTCOME__COUNT &&
                (t < p->cfg.ntiers || t == SLUICE_POLICY_TIERS_MAX);
         i++)
      sluice__put(
          &o,
          "sluice_policy_decisions_total{tier=\"%s\",outcome=\"%s\"} %llu\n",
          tier_name(p, t), sluice_name(SLUICE_NAME_OUTCOME, i),
          (unsigned long long)LOAD(p->ctr->decisions[t][i]));
  by_tier(&o, p, "sluice_policy_degraded_decisions_total",
          "Decisions made by the local degraded limiter.",
          p->ctr->degraded_decisions);
  by_tier(&o, p, "sluice_policy_shadow_passed_total",
          "Requests shadow mode let through that enforcement would have "
          "refused.",
          p->ctr->shadow_passed);
  by_route(&o, p, "sluice_policy_fail_closed_total",
           "503s because the store failed, by declared route.",
           p->ctr->fail_closed);
  by_route(&o, p, "sluice_policy_lease_denials_total",
           "Denials by a lease set or a lock, by declared route.",
           p->ctr->lease_denials);
  by_route(&o, p, "sluice_policy_store_full_total",
           "Decisions that found the store full (no room for a record: not "
           "an outage), by declared route.",
           p->ctr->store_full);
  sluice__put(&o,
              "# HELP sluice_policy_box_trips_total Penalty box trips by scope "
              "and level.\n# TYPE sluice_policy_box_trips_total counter\n");
  for (i = SLUICE_SCOPE_KEY; i <= SLUICE_SCOPE_SUBJECT; i++)
    for (l = 0; l < 3; l++)
      sluice__put(
          &o, "sluice_policy_box_trips_total{scope=\"%s\",level=\"%d\"} %llu\n",
          scope_name(i), l + 1, (unsigned long long)LOAD(p->ctr->trips[i][l]));
  sluice__put(&o, "# HELP sluice_policy_events_total Events emitted, by type.\n"
                  "# TYPE sluice_policy_events_total counter\n");
  for (i = 1; i < SLUICE_EVENT__COUNT; i++)
    sluice__put(&o, "sluice_policy_events_total{event=\"%s\"} %llu\n",
                sluice_name(SLUICE_NAME_EVENT, i),
                (unsigned long long)LOAD(p->ctr->events[i]));
  sluice__put(&o,
              "# HELP sluice_policy_degraded 1 while the store is failing "
              "(rl_degraded).\n# TYPE sluice_policy_degraded gauge\n"
              "sluice_policy_degraded %d\n",
              (LOAD(p->degraded) ||
               sluice__breaker_state(&p->brk) != SLUICE__BRK_CLOSED)
                  ? 1
                  : 0);
  sluice__put(&o,
              "# HELP sluice_policy_breaker_state The store's circuit breaker "
              "in this process: 0 closed, 1 open, 2 half-open.\n"
              "# TYPE sluice_policy_breaker_state gauge\n"
              "sluice_policy_breaker_state %d\n",
              sluice__breaker_state(&p->brk));
  {
    uint64_t h, st, f;
    sluice__deny_stats(p, &h, &st, &f);
    sluice__put(
        &o,
        "# HELP sluice_policy_deny_cache_total Deny cache: decisions it "
        "made (hit), boxes it took (stored), boxes that found no slot "
        "(full).\n# TYPE sluice_policy_deny_cache_total counter\n"
        "sluice_policy_deny_cache_total{result=\"hit\"} %llu\n"
        "sluice_policy_deny_cache_total{result=\"stored\"} %llu\n"
        "sluice_policy_deny_cache_total{result=\"full\"} %llu\n",
        (unsigned long long)h, (unsigned long long)st, (unsigned long long)f);
  }
  if (needed)
    *needed = o.used;
  return buf && o.used >= len ? SLUICE_ERANGE : SLUICE_OK;
}

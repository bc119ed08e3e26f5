/*
** When the store cannot decide (decide.c, "Store failure" and "Degraded
** mode"): the deny
** cache's boxes, fail-closed answers, and the degraded limiter a route's
** `failure` declares.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"

static void reset_verdict(sluice_decision *d) {
  d->outcome = SLUICE_OUTCOME_ALLOW;
  d->flags = 0;
  d->binding = SLUICE_BINDING_NONE;
  d->limit = d->remaining = d->reset_ns = 0;
  d->policy_quota = d->policy_window_ns = 0;
  d->refill_rate = d->refill_period_ns = 0;
  d->retry_after_ns = 0;
  d->penalty_status = SLUICE_PENALTY_NONE;
  d->penalty_level = 0;
  d->lockout_end_ns = 0;
  d->strikes_remaining = 0;
  d->lease_id = 0;
  d->lease_ttl_ns = 0;
  d->cap_limit = 0;
}

/* The deny cache's answer for this request: 1 when a cached box decides
** it (declared_penalty.c). */
int sluice__cached_box(sluice__ctx *c, int degraded, sluice_decision *d) {
  return c->droute >= 0 && sluice__pen_cached(c, degraded, d);
}

void sluice__failure_mode(sluice__ctx *c, int err, sluice_decision *d) {
  sluice_policy *p = c->p;
  reset_verdict(d);
  d->store_error = err;
  /* A boxed key stays out through the outage. */
  if (sluice__cached_box(c, 1, d))
    return;
  /* The degraded limiter when the route's `failure` says so. */
  if (c->droute >= 0 && sluice__decl_degraded(c, d))
    return;
  d->outcome = SLUICE_OUTCOME_UNAVAILABLE;
  d->flags |= SLUICE_DECISION_FAIL_CLOSED;
  d->retry_after_ns = p->cfg.fail_closed_retry_after_ns;
  atomic_fetch_add_explicit(&p->ctr->fail_closed[SLUICE__CTR_ROW(p, c->droute)],
                            1, memory_order_relaxed);
}

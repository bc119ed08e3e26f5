/*
** When the store cannot decide (decide.c choices c and d): the deny
** cache's boxes, fail-closed answers, and the degraded limiter at
** degraded_percent of the tier rates.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"

static void bucket_keys(sluice__ctx *c, char tb[SLUICE__KEYLEN],
                        char kb[SLUICE__KEYLEN], sluice_key k[2]) {
  k[0] = sluice__key_tenant_bucket(tb, c->T);
  k[1] = sluice__key_key_bucket(kb, c->T, c->K);
}

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
  d->cap_limit = d->cap_window_ns = 0;
  d->other_quota = d->other_window_ns = 0;
}

/* The deny cache's answer for this request: 1 when a cached box decides
** it.  A box in shadow is not enforced, so it is not looked up.  Before
** the store only a shared cache is read: a release (sluice release, another
** process) drops the entry from the segment it opens too, never from this
** process's own cache.  Auth: a
** failed attempt from a cached IP still goes to the store unless its
** subject is cached too (choice g counts it against the subject). */
int sluice__cached_box(sluice__ctx *c, int degraded, sluice_decision *d) {
  sluice__deny e[2];
  int n = 0, w;
  if (c->droute >= 0)
    return sluice__pen_cached(c, degraded, d); /* declared_penalty.c */
  if (sluice__shadow_past_box(c->shadow) ||
      (!degraded && !sluice__deny_shared(c->p)))
    return 0;
  if (c->tier >= 0 && c->cls != SLUICE_EP_AUTH) {
    n = sluice__deny_get(c->p, SLUICE_SCOPE_KEY, c->K, c->now, &e[0]);
  } else {
    int s = c->has_subject &&
            sluice__deny_get(c->p, SLUICE_SCOPE_SUBJECT, c->S, c->now, &e[0]);
    int i = sluice__deny_get(c->p, SLUICE_SCOPE_IP, c->I, c->now, &e[s]);
    if (!s && i && !degraded &&
        c->req->auth_result >= SLUICE_AUTH_UNKNOWN_CLIENT && c->has_subject)
      return 0;
    n = s + i;
  }
  if (!n)
    return 0;
  w = n == 2 && e[1].until_ns > e[0].until_ns;
  {
    sluice_verdict v;
    memset(&v, 0, sizeof v);
    v.level = e[w].level;
    if (e[w].until_ns == SLUICE_FOREVER)
      v.flags = SLUICE_V_SUSPENDED;
    else
      v.retry_after_ns = e[w].until_ns - c->now;
    sluice__fill_box(c, &v, d);
  }
  d->flags |= SLUICE_DECISION_DENY_CACHED;
  return 1;
}

void sluice__failure_mode(sluice__ctx *c, int err, sluice_decision *d) {
  sluice_policy *p = c->p;
  reset_verdict(d);
  d->store_error = err;
  /* A boxed key stays out through the outage. */
  if (sluice__cached_box(c, 1, d))
    return;
  /* A declared route: the degraded limiter when its `failure` says so. */
  if (c->droute >= 0 && sluice__decl_degraded(c, d))
    return;
  /* Auth has no tier rate to degrade to: it always fails closed. */
  if (c->cls == SLUICE_EP_AUTH || c->tier < 0 || c->droute >= 0 ||
      (p->cfg.fail_closed_mask & (1u << c->cls))) {
    d->outcome = SLUICE_OUTCOME_UNAVAILABLE;
    d->flags |= SLUICE_DECISION_FAIL_CLOSED;
    d->retry_after_ns = p->cfg.fail_closed_retry_after_ns;
    atomic_fetch_add_explicit(&p->ctr->fail_closed[c->cls], 1,
                              memory_order_relaxed);
    return;
  }
  {
    const sluice__tier_rt *r = &p->rt[c->tier];
    char tb[SLUICE__KEYLEN], kb[SLUICE__KEYLEN];
    sluice_key kbk[2];
    sluice_op op = {0}; /* the reserved words too */
    sluice_verdict v;
    int rc;
    int64_t cap = r->degraded[0].burst < r->degraded[1].burst
                      ? r->degraded[0].burst
                      : r->degraded[1].burst;
    d->flags |= SLUICE_DECISION_DEGRADED;
    bucket_keys(c, tb, kb, kbk);
    if (c->cost > cap) {
      d->outcome = SLUICE_OUTCOME_THROTTLED;
      d->retry_after_ns = p->cfg.fail_closed_retry_after_ns;
      return;
    }
    op.algo = SLUICE_ALGO_GCRA;
    op.kind = SLUICE_OP_CONSUME;
    op.nkeys = 2;
    op.keys = kbk;
    op.params = r->degraded;
    op.arg = c->cost;
    op.id = 0;
    rc = sluice_limiter_apply_at(p->local, &op, c->now, &v);
    if (rc != SLUICE_OK) {
      d->flags = SLUICE_DECISION_FAIL_CLOSED;
      d->outcome = SLUICE_OUTCOME_UNAVAILABLE;
      d->retry_after_ns = p->cfg.fail_closed_retry_after_ns;
      atomic_fetch_add_explicit(&p->ctr->fail_closed[c->cls], 1,
                                memory_order_relaxed);
      return;
    }
    sluice__fill_bucket(c, r->degraded, &v, d);
    if (!v.allowed) {
      d->outcome = SLUICE_OUTCOME_THROTTLED;
      d->retry_after_ns = v.retry_after_ns;
    }
  }
}

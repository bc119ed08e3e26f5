/*
** The tenant flow (every endpoint class but auth): one program over the
** tenant's hash-tag group {t:T} -- box check, the tenant and key buckets,
** the Retry-After notice and strikes, then for heavy endpoints the ledger
** lock or export cap and the lease set.  See decide.c for the diagram and
** choices a and b.
*/
#include "flow.h"

static int64_t cap_retry(const sluice__ctx *c, int64_t ra) {
  int64_t m = c->p->cfg.lease_retry_after_max_ns;
  return ra > m ? m : ra;
}

static void lease_denied(sluice__ctx *c, int outcome, int64_t limit, int64_t ra,
                         sluice_decision *d) {
  d->outcome = outcome;
  d->cap_limit = limit;
  d->retry_after_ns = cap_retry(c, ra);
  atomic_fetch_add_explicit(&c->p->ctr->lease_denials[c->cls], 1,
                            memory_order_relaxed);
  sluice__emit(c, SLUICE_EVENT_LEASE_DENIED, SLUICE_SCOPE_TENANT, 0, c->T, 0,
               outcome);
}

/* The hourly export cap refused: the wait is its window's, not a lease's
** (no lease_retry_after_max cap), and the decision carries the cap. */
static void export_capped(sluice__ctx *c, const sluice_window_params *cap,
                          int64_t ra, sluice_decision *d) {
  d->outcome = SLUICE_OUTCOME_EXPORT_CAP;
  d->retry_after_ns = ra;
  d->cap_limit = cap->limit;
  d->cap_window_ns = cap->window_ns;
  atomic_fetch_add_explicit(&c->p->ctr->lease_denials[c->cls], 1,
                            memory_order_relaxed);
  sluice__emit(c, SLUICE_EVENT_LEASE_DENIED, SLUICE_SCOPE_TENANT, 0, c->T, 0,
               d->outcome);
}

/* Step indices of the tenant program (-1: not in it). */
enum { S_BOX, S_BUCKET, S_RENEW, S_NOTICE, S_STRIKE, S_TENANT_STEPS };

/* One program over the tenant's group {t:T}:
**
**   0 box CHECK                       gate
**   1 buckets CONSUME (heavy: PEEK)   gate, if passed
**   2 notice RENEW  (TTL: step 1's Retry-After)  note, if 1 denied
**   3 notice ACQUIRE (same TTL)       note, if 2 denied (no live notice)
**   4 box STRIKE                      note, if 2 allowed (notice ignored);
**                                     strike_every_denial: if 1 denied
**   heavy:
**   5 ledger ACQUIRE / export cap CONSUME   gate, if passed
**   6 lease slots ACQUIRE                   gate, if passed
**   7 buckets CONSUME                       gate, if passed
**
** A gate's denial undoes every earlier write, so a heavy request that is
** refused holds no lease and is charged nothing (choice b). */
static void tenant_prog(sluice__ctx *c, sluice__prog *g, uint64_t id,
                        sluice__heavy_steps *h) {
  const sluice__tier_rt *r = &c->p->rt[c->tier];
  int heavy_cls = c->cls == SLUICE_EP_RECONCILE || c->cls == SLUICE_EP_EXPORT;
  int pb, tb, ra, s;
  g->nk = g->ns = g->rclass = 0;
  pb = SLUICE__REC(g, sluice__key_key_box, c->T, c->K);
  tb = SLUICE__REC(g, sluice__key_tenant_bucket, c->T);
  (void)SLUICE__REC(g, sluice__key_key_bucket, c->T, c->K);
  ra = SLUICE__REC(g, sluice__key_notice, c->T, c->K);
  s = sluice__step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, pb, 1, &r->penalty,
                   0, 0);
  /* Staged rollout: a box in shadow only records what it would have done,
  ** so the request goes on through the buckets (see shadow_apply()). */
  if (sluice__shadow_past_box(c->shadow))
    sluice__when(g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  s = sluice__step(g, SLUICE_ALGO_GCRA,
                   heavy_cls ? SLUICE_OP_PEEK : SLUICE_OP_CONSUME, tb, 2,
                   r->bucket, c->cost, 0);
  sluice__when(g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
  sluice__strike_steps(c, g, pb, ra, S_BUCKET, S_BOX, &r->penalty,
                       (int)c->p->cfg.strike_every_denial, NULL);
  h->gate = h->slots = h->charge = -1;
  if (!heavy_cls)
    return;
  if (c->cls == SLUICE_EP_RECONCILE) {
    int lk = SLUICE__REC(g, sluice__key_ledger, c->T, c->L);
    h->gate = sluice__step(g, SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, lk, 1,
                           &c->p->ledger, 0, id);
  } else {
    int xh = SLUICE__REC(g, sluice__key_export_cap, c->T);
    h->gate = sluice__step(g, SLUICE_ALGO_FWINDOW, SLUICE_OP_CONSUME, xh, 1,
                           &r->export_cap, 1, 0);
  }
  sluice__when(g, h->gate, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
  {
    const sluice_lease_params *lp =
        c->cls == SLUICE_EP_RECONCILE ? &r->reconcile : &r->export_;
    int first = g->nk;
    sluice__slot_recs(c, g, c->cls, (int)lp->max);
    h->slots = sluice__step(g, SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, first,
                            (int)lp->max, lp, 0, id);
    sluice__when(g, h->slots, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
  }
  h->charge = sluice__step(g, SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, tb, 2,
                           r->bucket, c->cost, 0);
  sluice__when(g, h->charge, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
}

/* A denial by the bucket: a strike if the client ignored the Retry-After
** of an earlier denial (choice a); the program already did the store work. */
static void throttled(sluice__ctx *c, const sluice_program_result *r,
                      sluice_decision *d) {
  const sluice_verdict *pv = &r->v[S_STRIKE];
  d->outcome = SLUICE_OUTCOME_THROTTLED;
  d->retry_after_ns = r->v[S_BUCKET].retry_after_ns;
  d->penalty_status = SLUICE_PENALTY_WARNING;
  if (!sluice__ran(r, S_STRIKE))
    return;
  d->flags |= SLUICE_DECISION_STRIKE;
  if (pv->flags & SLUICE_V_TRIPPED) {
    if (sluice__shadow_past_box(c->shadow)) {
      c->box_shadowed = 1; /* the throttle stands unless it is shadowed */
      c->box = *pv;
    } else {
      sluice__fill_box(c, pv, d);
    }
    sluice__tripped(c, SLUICE_SCOPE_KEY, c->K, pv, d);
  } else {
    d->strikes_remaining = pv->strikes_remaining;
  }
}

int sluice__tenant_build(sluice__ctx *c, sluice__tenant_call *t) {
  int rc;
  t->id = 0;
  if ((c->cls == SLUICE_EP_RECONCILE || c->cls == SLUICE_EP_EXPORT) &&
      (rc = sluice__random_id(c, &t->id)) != SLUICE_OK)
    return rc;
  tenant_prog(c, &t->g, t->id, &t->h);
  return SLUICE_OK;
}

int sluice__decide_tenant(sluice__ctx *c, sluice_decision *d) {
  sluice_program_result res;
  sluice__tenant_call t;
  int rc = sluice__tenant_build(c, &t);
  if (rc == SLUICE_OK)
    rc = sluice__run(c, &t.g, &res);
  return rc == SLUICE_OK ? sluice__tenant_read(c, &t, &res, d) : rc;
}

int sluice__tenant_read(sluice__ctx *c, const sluice__tenant_call *t,
                        const sluice_program_result *res, sluice_decision *d) {
  const sluice__tier_rt *r = &c->p->rt[c->tier];
  const sluice__heavy_steps *h = &t->h;
  uint64_t id = t->id;

  sluice__box_seen(c, SLUICE_SCOPE_KEY, c->K, &res->v[S_BOX]);
  if (res->denied_by == S_BOX) {
    sluice__fill_box(c, &res->v[S_BOX], d);
    return SLUICE_OK;
  }
  if (!res->v[S_BOX].allowed) { /* boxed, the box in shadow */
    c->box_shadowed = 1;
    c->box = res->v[S_BOX];
  }
  d->strikes_remaining = res->v[S_BOX].strikes_remaining;
  sluice__fill_bucket(
      c, r->bucket,
      sluice__ran(res, h->charge) ? &res->v[h->charge] : &res->v[S_BUCKET], d);
  if (res->denied_by == S_BUCKET) {
    throttled(c, res, d);
  } else if (res->denied_by >= 0 && res->denied_by == h->gate) {
    if (c->cls == SLUICE_EP_RECONCILE)
      lease_denied(c, SLUICE_OUTCOME_CONFLICT, 0,
                   res->v[h->gate].retry_after_ns, d);
    else
      export_capped(c, &r->export_cap, res->v[h->gate].retry_after_ns, d);
  } else if (res->denied_by >= 0 && res->denied_by == h->slots) {
    lease_denied(c, SLUICE_OUTCOME_CONCURRENCY,
                 c->cls == SLUICE_EP_RECONCILE ? r->reconcile.max
                                               : r->export_.max,
                 res->v[h->slots].retry_after_ns, d);
  } else if (res->denied_by >= 0) {
    /* The charge after a bucket check that passed in the same atomic
    ** program cannot be denied; if it is, it is a throttle all the same. */
    d->outcome = SLUICE_OUTCOME_THROTTLED;
    d->retry_after_ns = res->v[res->denied_by].retry_after_ns;
  } else if (h->slots >= 0) {
    d->lease_id = id;
    d->lease_ttl_ns = c->cls == SLUICE_EP_RECONCILE ? r->reconcile.ttl_ns
                                                    : r->export_.ttl_ns;
  }
  return SLUICE_OK;
}

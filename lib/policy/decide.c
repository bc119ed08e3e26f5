/*
** The policy layer: one call per request runs the flow of the spec's
** section 1 diagram over the algorithm layer, on whatever backend the
** limiter has.  This file is its entry (sluice_policy_decide): the
** deny cache, the breaker, the store's part, the failure mode and shadow
** mode, in that order.  The flow's parts live beside it: request.c (the
** request context), programs.c (programs and the store calls),
** declared.c and declared_penalty.c (the file's limits and boxes),
** verdict.c (results into the decision), failure.c; flow.h declares what
** they share.  The other files cite the choices below by their names.
**
** Every decision is a program (sluice/program.h) per hash-tag group, run
** as ONE atomic store call: no other process's operation lands between a
** request's box check and its charge, and a request never half-happens.
**
** Route of declared limits (a policy file's `limits`, declared.c): one
** program per hash-tag group of its scopes' first attributes, each limit a
** gate in the route's order, a later group's refusal given back to the
** earlier groups; its box, notice and failure mode as the file declares.
**
** Choices where the spec is silent or loose, in the order a decision
** meets them:
**
**  Deny cache first.  The boxes the store reported are kept in the deny
**     cache (deny_cache.c); a shared one is read before the store and
**     before the breaker is asked, a private one in degraded mode (a
**     failed call or an open breaker alike).
**
**  A denial consumes nothing.  Every step of a request's program is a
**     gate, and a gate's denial undoes what the steps before it wrote (a
**     cap's slot, a lock, a lease), all inside the one atomic call.
**
**  A strike needs a notice.  The spec says a strike is a request "sent
**     before its Retry-After elapsed" and that an honest client "never
**     accumulates strikes"; counting every 429 (its Lua) would charge an
**     honest client one strike per throttle episode.  So each denial
**     leaves a notice (a one-slot lease that lives for the Retry-After
**     given); a denial while a notice is live is a strike.
**
**  Suspension.  A level whose action is suspend is SUSPENDED / 403
**     without a Retry-After: no wait helps.
**
**  Store failure.  SLUICE_ETIMEDOUT, SLUICE_EUNAVAIL, SLUICE_EBACKEND,
**     SLUICE_EIO, SLUICE_EFULL (a store full of live records cannot decide
**     either) and SLUICE_ENOMEM switch to the failure mode (the route's
**     `failure`: closed, or degraded for a route with a rate limit); any
**     other error is a bug in the request and is returned.  Every request
**     makes its own attempt, so a short stall costs only the requests it
**     delays; a circuit breaker (breaker.c) that sees failures sustained
**     leaves the store alone for degraded_probe_ns, then lets trial
**     requests probe it, so a dead store does not cost every request its
**     timeout.  SLUICE_EFULL is not an outage: the store answered.  It is
**     flagged (SLUICE_DECISION_STORE_FULL), counted and raised as
**     STORE_FULL, and the breaker does not count it: strangers who fill
**     their records' bound must not take the tenants off the store.
**
**  Degraded mode.  The degraded limiter is a "mem" limiter, or a shm
**     store the host's processes share (degraded.c), with the same keys at
**     degraded_percent of the limits' rates and bursts; it has no penalty
**     box, and the deny cache keeps the boxes out meanwhile.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"

static int status_of(int outcome) {
  switch (outcome) {
  case SLUICE_OUTCOME_ALLOW:
    return 200;
  case SLUICE_OUTCOME_SUSPENDED:
    return 403;
  case SLUICE_OUTCOME_CONFLICT:
    return 409;
  case SLUICE_OUTCOME_UNAVAILABLE:
    return 503;
  default:
    return 429;
  }
}

/* Shadow mode, whole or per feature: a refusal of a feature not enforced
** is served, d->outcome keeping what enforcement would have done.  A box
** passed over (declared_penalty.c) is that outcome when nothing enforced
** refused. */
static void shadow_apply(sluice__ctx *c, int row, sluice_decision *d) {
  if (c->box_shadowed &&
      (d->outcome == SLUICE_OUTCOME_ALLOW ||
       (c->shadow & (unsigned)sluice__shadow_feature_of(d->outcome)))) {
    sluice__fill_box(c, &c->box, d);
    d->verdict_status = d->status = status_of(d->outcome);
    d->allowed = 0; /* passed below: the box is in shadow */
  }
  if (!c->shadow)
    return;
  d->flags |= SLUICE_DECISION_SHADOW;
  if (!d->allowed &&
      (c->shadow & (unsigned)sluice__shadow_feature_of(d->outcome))) {
    atomic_fetch_add_explicit(&c->p->ctr->shadow_passed[row], 1,
                              memory_order_relaxed);
    d->allowed = 1;
    d->status = 200;
  }
}

/* The store's part of a decision: the per-IP backstop first, then the
** request's own programs. */
static int decide_store(sluice__ctx *c, sluice_decision *d) {
  int rc, refused = 0;
  if (c->p->cfg.ip_limit > 0 && c->req->client_ip) {
    rc = sluice__backstop(c, d, &refused);
    if (rc == SLUICE_EFULL) {
      /* No room for the address's window (the untrusted records' bound
      ** is full of boxes): the request is decided on its own limits,
      ** flagged, rather than a stranger's flood failing the tenant. */
      c->full = 1;
      rc = SLUICE_OK;
    }
    if (rc != SLUICE_OK && sluice__store_failure(rc) && !c->store_err)
      c->store_err = rc;
    if (rc != SLUICE_OK || refused)
      return rc;
  }
  return sluice__decide_declared(c, d);
}

int sluice__decide_begin(sluice_policy *p, const sluice_request *q,
                         int64_t now, sluice__ctx *c, sluice_decision *d) {
  int rc;
  memset(d, 0, sizeof *d);
  if (!p || !q) {
    d->invalid_field = p ? "request" : "policy";
    return SLUICE_EINVAL;
  }
  rc = sluice__resolve(p, q, c, d);
  if (rc != SLUICE_OK)
    return rc;
  c->shadow = sluice__shadow_mask(&p->cfg, p->shadow);
  if (c->droute >= 0) /* the file's shadow_when, by the request */
    c->shadow = (c->shadow | sluice__shadow_when(c)) & SLUICE_SHADOW_ALL;
  c->box_shadowed = 0;
  c->now = now >= 0 ? now : sluice_limiter_now(p->lim);
  d->now_ns = c->now;
  d->cost = c->cost;
  if (c->tier >= 0)
    memcpy(d->tier, p->cfg.tiers[c->tier].name,
           strnlen(p->cfg.tiers[c->tier].name, sizeof d->tier - 1));
  return SLUICE_OK;
}

/* The shared deny cache first: a live box seen before costs no store
** call, and takes no ticket from the breaker (a half-open trial is not
** spent on a request that never reaches the store).  Then the breaker:
** while it is open the request is decided as failed, and failure_mode()
** reads the deny cache again, private or shared, so a boxed key stays
** out whatever the breaker does. */
void sluice__decide_admit(sluice__ctx *c, sluice_decision *d) {
  if (sluice__decl_exempt(c)) {
    /* An exempt route: admitted with no store call at all (no backstop,
    ** no breaker ticket), so it says nothing of the store's health. */
    c->cached = 1;
    c->ticket = SLUICE__BRK_SKIP;
    c->skipped = 0;
    return;
  }
  c->cached = sluice__cached_box(c, 0, d);
  c->ticket = c->cached ? SLUICE__BRK_SKIP
                        : sluice__breaker_admit(&c->p->brk, c->now);
  c->skipped = !c->cached && SLUICE__BRK_KIND(c->ticket) == SLUICE__BRK_SKIP;
}

int sluice__decide_store(sluice__ctx *c, sluice_decision *d) {
  if (c->cached)
    return SLUICE_OK; /* a live box seen before: no store call */
  if (c->skipped) {
    /* Circuit open: the store failed for a sustained stretch. */
    int last = atomic_load_explicit(&c->p->degraded, memory_order_relaxed);
    c->store_err = last < 0 ? last : SLUICE_EUNAVAIL;
    return c->store_err;
  }
  return decide_store(c, d);
}

/* A full store: counted, flagged, an event at most once per
** SLUICE_POLICY_FULL_EVENT_NS (the CAS picks one request of the many that
** find it full at once). */
static void store_full(sluice__ctx *c, sluice_decision *d) {
  sluice_policy *p = c->p;
  int64_t last = atomic_load_explicit(&p->full_event_ns, memory_order_relaxed);
  d->flags |= SLUICE_DECISION_STORE_FULL;
  atomic_fetch_add_explicit(&p->ctr->store_full[SLUICE__CTR_ROW(p, c->droute)],
                            1, memory_order_relaxed);
  if ((last == 0 || c->now - last >= SLUICE_POLICY_FULL_EVENT_NS ||
       c->now < last) &&
      atomic_compare_exchange_strong(&p->full_event_ns, &last,
                                     c->now ? c->now : 1)) {
    int err = c->store_err;
    c->store_err = SLUICE_EFULL;
    sluice__emit(c, SLUICE_EVENT_STORE_FULL, 0, 0, NULL, 0, 0);
    c->store_err = err;
  }
}

int sluice__decide_end(sluice__ctx *c, int rc, sluice_decision *d) {
  sluice_policy *p = c->p;
  int row, full = rc == SLUICE_EFULL && !c->skipped;
  if (rc != SLUICE_OK && !sluice__store_failure(rc)) {
    sluice__breaker_abandon(&p->brk, c->ticket);
    return rc; /* nothing recorded that matters: a bug, not a decision */
  }
  /* A full store answered: not a failure for the breaker (a flood that
  ** fills the strangers' bound must not take the tenants off the store). */
  if (!c->skipped)
    sluice__breaker_done(&p->brk,
                         rc != SLUICE_OK ? sluice_limiter_now(p->lim) : c->now,
                         c->ticket, rc != SLUICE_OK && !full);
  if (rc != SLUICE_OK && (c->skipped || full)) {
    sluice__failure_mode(c, rc, d);
  } else if (rc != SLUICE_OK) {
    int was = atomic_exchange(&p->degraded, rc);
    if (!was)
      sluice__emit(c, SLUICE_EVENT_DEGRADED_ON, 0, 0, NULL, 0, 0);
    sluice__failure_mode(c, rc, d);
  } else if (!c->cached &&
             atomic_load_explicit(&p->degraded, memory_order_relaxed) &&
             atomic_exchange(&p->degraded, 0)) {
    sluice__emit(c, SLUICE_EVENT_DEGRADED_OFF, 0, 0, NULL, 0, 0);
  }

  if (full || c->full)
    store_full(c, d);
  d->verdict_status = status_of(d->outcome);
  d->allowed = d->outcome == SLUICE_OUTCOME_ALLOW;
  d->status = d->verdict_status;
  row = c->tier >= 0 ? c->tier : SLUICE_POLICY_TIERS_MAX;
  shadow_apply(c, row, d);
  atomic_fetch_add_explicit(&p->ctr->decisions[row][d->outcome], 1,
                            memory_order_relaxed);
  if (d->flags & SLUICE_DECISION_DEGRADED)
    atomic_fetch_add_explicit(&p->ctr->degraded_decisions[row], 1,
                              memory_order_relaxed);
  return SLUICE_OK;
}

/* n requests in order at one time (the clock read once); kept out of
** the one-request path's frame. */
__attribute__((noinline)) static int decide_n(sluice_policy *p, int n,
                                              const sluice_request *qs,
                                              sluice_decision *ds, int *rcs) {
  int64_t now = n > 1 ? sluice_limiter_now(p->lim) : -1;
  int i, rc, first = SLUICE_OK;
  for (i = 0; i < n; i++) {
    rc = sluice__decide_at(p, &qs[i], now, &ds[i]);
    if (rcs)
      rcs[i] = rc;
    else if (first == SLUICE_OK)
      first = rc;
  }
  return first;
}

int sluice_policy_decide(sluice_policy *p, int n, const sluice_request *qs,
                         sluice_decision *ds, int *rcs) {
  if (!p || n < 0 || (n > 0 && (!qs || !ds)))
    return SLUICE_EINVAL;
  /* One request, the usual call: straight into the flow, which reads the
  ** clock where it needs it (-1). */
  if (n == 1 && !rcs)
    return sluice__decide_at(p, qs, -1, ds);
  return decide_n(p, n, qs, ds, rcs);
}

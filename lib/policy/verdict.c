/*
** Store verdicts into the decision: the bucket's RateLimit facts, a box,
** a box trip's events, and the deny cache entry every box the store
** reports leaves (decide.c, "Deny cache first").
*/
#include <string.h>

#include "declared.h"
#include "flow.h"

void sluice__emit(sluice__ctx *c, int type, int scope_kind, int level,
                  const char *scope_id, int64_t until, int outcome) {
  sluice_policy *p = c->p;
  sluice_event ev;
  atomic_fetch_add_explicit(&p->ctr->events[type], 1, memory_order_relaxed);
  if (!p->on_event)
    return;
  memset(&ev, 0, sizeof ev);
  ev.type = type;
  ev.scope = scope_kind;
  ev.level = level;
  ev.outcome = outcome;
  ev.store_error = c->store_err;
  ev.scope_id = scope_id;
  ev.tenant_scope_id = c->droute >= 0 ? sluice__decl_tenant_hex(c) : NULL;
  ev.tier = c->tier >= 0 ? p->cfg.tiers[c->tier].name : NULL;
  ev.request = c->req;
  ev.who = c->who;
  ev.why = c->why;
  ev.now_ns = c->now;
  ev.until_ns = until;
  p->on_event(p->userdata, &ev);
}

/* A box the store reported on a scope: into the deny cache (deny_cache.c),
** which keeps it out without a store call, and through an outage. */
void sluice__box_seen(sluice__ctx *c, int kind, const char *id,
                      const sluice_verdict *v) {
  if (!v->allowed)
    sluice__deny_put(c->p, kind, id, c->now,
                     (v->flags & SLUICE_V_SUSPENDED)
                         ? SLUICE_FOREVER
                         : c->now + v->retry_after_ns,
                     v->level);
}

void sluice__fill_box(sluice__ctx *c, const sluice_verdict *v,
                      sluice_decision *d) {
  d->penalty_status = SLUICE_PENALTY_ACTIVE_LOCKOUT;
  d->penalty_level = v->level;
  d->strikes_remaining = 0;
  if (v->flags & SLUICE_V_SUSPENDED) {
    d->outcome = SLUICE_OUTCOME_SUSPENDED;
    d->lockout_end_ns = SLUICE_FOREVER;
    d->retry_after_ns = 0;
  } else {
    d->outcome = SLUICE_OUTCOME_BOXED;
    d->retry_after_ns = v->retry_after_ns;
    d->lockout_end_ns = c->now + v->retry_after_ns;
  }
  if (v->level >= 2)
    d->flags |= SLUICE_DECISION_EDGE_DENY;
}

/*
** A declared route's penalty (declared_penalty.h) inside its one program,
** over the penalty's own scope:
**
**   0   box CHECK                         gate (a box in shadow: note)
**   ... each limit, a gate; after each rate limit k (gcra, windows):
**   k+1 notice RENEW  (TTL: k's Retry-After)   note, if k denied
**   k+2 notice ACQUIRE (same TTL)              note, if k+1 denied
**   k+3 box STRIKE                             note, if k+1 allowed
**                                              ("every": if k denied),
**                                              and the box allowed
**
** Gates stop at the first denial, so at most one limit denies and at most
** one strike is counted per request; the notice is the scope's, whichever
** limit gave the Retry-After (decide.c, "A strike needs a notice").
** Leases, locks and caps take no strikes.  A box trip does what its
** level's actions say; the boxes seen go to the deny cache under the
** penalty's scope id, so that they hold through an outage and, with a
** shared cache, cost no store call.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"
#include "scope_id.h"
#include "siphash.h"

const sluice__pset *sluice__pen_pick(const sluice__ctx *c,
                                     const sluice__penalty *pn) {
  int i;
  for (i = 0; i < pn->npsets; i++) /* the first set the request matches */
    if (sluice__match_ok(c, &pn->psw[i]))
      return &pn->ps[i];
  return &pn->base;
}


/* The box's scope kind in events, counters and the deny cache: an
** address's (the scope starts with `ip`), a subject's (it starts with an
** attribute the caller names: an account, a project), else a key's. */
int sluice__pen_scope_kind(const sluice__penalty *pn) {
  return pn->scope[0] == SLUICE__A_IP         ? SLUICE_SCOPE_IP
         : pn->scope[0] >= SLUICE__A__BUILTIN ? SLUICE_SCOPE_SUBJECT
                                              : SLUICE_SCOPE_KEY;
}

int sluice__pen_skipped(const sluice__ctx *c, const sluice__penalty *pn) {
  size_t n = 0;
  const char *v;
  if (!sluice__decl_optional(c->p->decl, pn->scope[0]))
    return 0;
  v = sluice__decl_attr_value(c, pn->scope[0], &n);
  return !v || n == 0;
}

static unsigned level_actions(const sluice__pset *ps, int level) {
  return ps->actions[(level < 1 ? 1 : level > 3 ? 3 : level) - 1];
}

/* A box into the decision; EDGE_DENY as the level's actions say. */
static void fill_box(sluice__ctx *c, const sluice__penalty *pn,
                     const sluice__pset *ps, const sluice_verdict *v,
                     sluice_decision *d) {
  sluice__fill_box(c, v, d);
  d->box_detail = pn->detail[0] ? pn->detail : NULL;
  if (level_actions(ps, v->level) & SLUICE__ACT_EDGE_DENY)
    d->flags |= SLUICE_DECISION_EDGE_DENY;
  else
    d->flags &= ~SLUICE_DECISION_EDGE_DENY;
}

/* The box's scope id in hex, into buf. */
static const char *pen_id(const sluice__pen_run *pr,
                          char buf[SLUICE_SCOPE_ID_LEN + 1]) {
  sluice__id_hex((const uint8_t *)pr->idh, buf);
  return buf;
}

/* A box seen (sluice__box_seen()): its id spelled only when it is up. */
static void seen(sluice__ctx *c, const sluice__pen_run *pr,
                 const sluice_verdict *v) {
  char id[SLUICE_SCOPE_ID_LEN + 1];
  if (!v->allowed)
    sluice__box_seen(c, pr->kind, pen_id(pr, id), v);
}

/* A trip's counters and events, as its level's actions say. */
static void tripped(sluice__ctx *c, const sluice__pen_run *pr,
                    const sluice_verdict *v, sluice_decision *d) {
  static const int acts[5][2] = {
      {SLUICE__ACT_EDGE_DENY, SLUICE_EVENT_EDGE_DENY},
      {SLUICE__ACT_ALERT, SLUICE_EVENT_ALERT},
      {SLUICE__ACT_BAN, SLUICE_EVENT_IP_BAN},
      {SLUICE__ACT_SUSPEND, SLUICE_EVENT_SUSPEND},
      {SLUICE__ACT_PAGE, SLUICE_EVENT_PAGE}};
  int i, lvl = v->level < 1 ? 1 : v->level > 3 ? 3 : v->level;
  unsigned a = level_actions(pr->ps, lvl);
  int64_t until = (v->flags & SLUICE_V_SUSPENDED) ? SLUICE_FOREVER
                                                  : c->now + v->retry_after_ns;
  char id[SLUICE_SCOPE_ID_LEN + 1];
  pen_id(pr, id);
  d->flags |= SLUICE_DECISION_TRIPPED;
  sluice__box_seen(c, pr->kind, id, v);
  atomic_fetch_add_explicit(&c->p->ctr->trips[pr->kind][lvl - 1], 1,
                            memory_order_relaxed);
  sluice__emit(c, SLUICE_EVENT_BOX_TRIP, pr->kind, lvl, id, until, 0);
  for (i = 0; i < 5; i++) /* each action's event, in this order */
    if (a & acts[i][0])
      sluice__emit(c, acts[i][1], pr->kind, lvl, id, until, 0);
}

/* 1 when the request is a report to penalty pn. */
static int reports(const sluice__ctx *c, const sluice__penalty *pn) {
  size_t n = 0;
  const char *v;
  int i;
  if (!pn || pn->strike != SLUICE__STRIKE_REPORTED ||
      !(v = sluice__decl_attr_value(c, pn->report, &n)))
    return 0;
  for (i = 0; i < pn->nvalues; i++)
    if (strlen(pn->values[i]) == n && !memcmp(pn->values[i], v, n))
      return 1;
  return 0;
}

int sluice__pen_is_report(const sluice__ctx *c) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  int i;
  for (i = 0; i < dr->ntg; i++)
    if (dr->gpen[i] && reports(c, &c->p->decl->penalties[dr->gpen[i] - 1]))
      return 1;
  return 0;
}

/* 1 when box verdict v ends later than the box d reports (or d reports
** none): of two boxes, the longer is reported, as that is when a retry
** can pass. */
static int longer(const sluice_verdict *v, const sluice_decision *d) {
  if (d->outcome == SLUICE_OUTCOME_ALLOW)
    return 1;
  if (d->outcome == SLUICE_OUTCOME_SUSPENDED)
    return 0;
  return (v->flags & SLUICE_V_SUSPENDED) || v->retry_after_ns > d->retry_after_ns;
}

/* A report: a strike on the box (a trip at its threshold), and with
** stuffing detection, the reports' fixed window and the distinct values
** of `of`; both at their limits trip level 3 at once:
**
**   0 box CHECK            gate
**   f failures COUNT       note, if 0 allowed (window = "sliding")
**   x spread ADD           note, if 0 allowed (spread: `of`'s values)
**   1 stuffing COUNT       note, if 0 allowed
**   2 distinct ADD         note, if 0 allowed
**   3 box TRIP level 3     note, if 1 reached its limit and 2 denied
**   4 box STRIKE           note, if 0 allowed and 3 did not run
**     (sliding: box TRIP level 1, if f reached its limit and 3 did not
**     run)
** An earlier box's spread that reached its limit (pr->force3) makes 3 a
** TRIP level 3 if 0 allowed, whatever the stuffing counts say. */
int sluice__pen_report(sluice__ctx *c, sluice__prog *g, sluice__pen_run *pr,
                       sluice_decision *d) {
  const sluice__penalty *pn = pr->pn;
  int box = g->st[pr->box].key, s, w, k, rc;
  size_t n = 0;
  const char *v;
  pr->report = reports(c, pn);
  pr->rstrike = pr->rtrip3 = pr->rfail = pr->rspread = -1;
  if (!pr->report)
    return sluice__pen_is_report(c) ? 2 : 0;
  if (pn->spread_of >= 0) {
    char ip[SLUICE_SCOPE_ID_LEN + 1];
    uint64_t h;
    if (!(v = sluice__decl_attr_value(c, pn->spread_of, &n)) || n == 0) {
      d->invalid_field = sluice__attr_name(c->p->decl, pn->spread_of);
      return SLUICE_EINVAL;
    }
    if (pn->spread_of == SLUICE__A_IP) {
      /* By prefix, as everywhere; the value the built-in auth flow counts
      ** (the address's scope id), so that both estimate alike. */
      sluice__ip_scope(c->p, v, ip);
      v = ip;
      n = strlen(ip);
    }
    h = sluice__siphash64(c->p->secret, v, n);
    k = g->nk;
    if ((rc = sluice__decl_pen_rec(c, pn, g, 'x', d)))
      return rc;
    pr->rspread = sluice__step(g, SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, k, 1,
                               &pn->spread, 0, h);
    sluice__when(g, pr->rspread, SLUICE_WHEN_ALLOWED, pr->box,
                 SLUICE_FOLD_NOTE);
  }
  if (pn->sliding) {
    k = g->nk;
    if ((rc = sluice__decl_pen_rec(c, pn, g, 'f', d)))
      return rc;
    pr->fails = (sluice_window_params){pr->ps->pp.strike_threshold,
                                       pr->ps->pp.strike_window_ns};
    pr->rfail = sluice__step(g, SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, k, 1,
                             &pr->fails, 1, 0);
    sluice__when(g, pr->rfail, SLUICE_WHEN_ALLOWED, pr->box, SLUICE_FOLD_NOTE);
  }
  if (pn->of >= 0) {
    if (!(v = sluice__decl_attr_value(c, pn->of, &n)) || n == 0) {
      if (!sluice__decl_optional(c->p->decl, pn->of)) {
        d->invalid_field = sluice__attr_name(c->p->decl, pn->of);
        return SLUICE_EINVAL;
      }
      v = ""; /* not given: the value "", one more distinct value */
      n = 0;
    }
    k = g->nk;
    if ((rc = sluice__decl_pen_stuffing_recs(c, pn, g, d)))
      return rc;
    s = sluice__step(g, SLUICE_ALGO_FWINDOW, SLUICE_OP_COUNT, k, 1,
                     &pn->stuffing, 1, 0);
    sluice__when(g, s, SLUICE_WHEN_ALLOWED, pr->box, SLUICE_FOLD_NOTE);
    w = sluice__step(g, SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, k + 1, 1,
                     &pn->distinct, 0, sluice__siphash64(c->p->secret, v, n));
    sluice__when(g, w, SLUICE_WHEN_ALLOWED, pr->box, SLUICE_FOLD_NOTE);
    if (!pr->force3) {
      pr->rtrip3 = sluice__step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, box,
                                1, &pr->ps->pp, 3, 0);
      sluice__when(g, pr->rtrip3, SLUICE_WHEN_REACHED, s, SLUICE_FOLD_NOTE);
      g->st[pr->rtrip3].when2 = SLUICE_WHEN_DENIED;
      g->st[pr->rtrip3].ref2 = w;
    }
  }
  if (pr->force3) {
    pr->rtrip3 = sluice__step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, box, 1,
                              &pr->ps->pp, 3, 0);
    sluice__when(g, pr->rtrip3, SLUICE_WHEN_ALLOWED, pr->box,
                 SLUICE_FOLD_NOTE);
  }
  /* The strike (sliding: the trip at the failures' limit), unless stuffing
  ** tripped level 3 already. */
  if (pn->sliding) {
    pr->rstrike = sluice__step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, box, 1,
                               &pr->ps->pp, 1, 0);
    sluice__when(g, pr->rstrike, SLUICE_WHEN_REACHED, pr->rfail,
                 SLUICE_FOLD_NOTE);
  } else {
    pr->rstrike = sluice__step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, box,
                               1, &pr->ps->pp, 0, 0);
    sluice__when(g, pr->rstrike, SLUICE_WHEN_ALLOWED, pr->box,
                 SLUICE_FOLD_NOTE);
  }
  if (pr->rtrip3 >= 0) {
    g->st[pr->rstrike].when2 = SLUICE_WHEN_SKIPPED;
    g->st[pr->rstrike].ref2 = pr->rtrip3;
  }
  return 1;
}

void sluice__pen_report_read(sluice__ctx *c, const sluice__pen_run *pr,
                             const sluice_program_result *r,
                             sluice_decision *d) {
  const sluice_verdict *v = NULL;
  if (sluice__ran(r, pr->rtrip3)) {
    char id[SLUICE_SCOPE_ID_LEN + 1];
    d->flags |= SLUICE_DECISION_STUFFING;
    sluice__emit(c, SLUICE_EVENT_STUFFING, pr->kind, 3, pen_id(pr, id), 0,
                 0);
    v = &r->v[pr->rtrip3];
  } else if (pr->pn->sliding) {
    /* Failures, not strikes: the fewest left before a box, of every box
    ** the report counts for (the caller starts from INT64_MAX). */
    if (sluice__ran(r, pr->rfail) &&
        r->v[pr->rfail].remaining < d->strikes_remaining)
      d->strikes_remaining = r->v[pr->rfail].remaining;
    if (sluice__ran(r, pr->rstrike))
      v = &r->v[pr->rstrike];
  } else if (sluice__ran(r, pr->rstrike)) {
    v = &r->v[pr->rstrike];
    /* Several boxes counting one report: the fewest strikes left. */
    if (v->strikes_remaining < d->strikes_remaining)
      d->strikes_remaining = v->strikes_remaining;
    d->flags |= SLUICE_DECISION_STRIKE;
    if (!(v->flags & SLUICE_V_TRIPPED))
      return;
  }
  if (!v)
    return;
  if (v->flags & SLUICE_V_TRIPPED)
    tripped(c, pr, v, d);
  if (longer(v, d))
    fill_box(c, pr->pn, pr->ps, v, d);
}

int sluice__pen_head(sluice__ctx *c, sluice__prog *g, sluice__pen_run *pr,
                     struct sluice__keyparts *kp, sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  int i, rc, notice = 0, first = g->nk;
  pr->ps = sluice__pen_pick(c, pr->pn);
  pr->kind = sluice__pen_scope_kind(pr->pn);
  pr->report = 0;
  pr->rstrike = pr->rtrip3 = pr->rfail = pr->rspread = -1;
  for (i = 0; i < SLUICE__RLIMITS_MAX; i++)
    pr->renew[i] = pr->strike[i] = -1;
  for (i = 0; i < dr->n && pr->pn->strike != SLUICE__STRIKE_REPORTED; i++)
    notice |= dr->gpen[dr->tg[i]] - 1 == pr->pn - c->p->decl->penalties &&
              sluice__decl_strikes(c->p->decl->limits[dr->limit[i]].algo);
  if ((rc = sluice__decl_pen_recs(c, pr->pn, g, notice, NULL, kp, d)))
    return rc;
  sluice__decl_kp_id(kp, pr->idh);
  pr->box = sluice__step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, first, 1,
                         &pr->ps->pp, 0, 0);
  /* Staged rollout: a box in shadow only records what it would have done,
  ** so the request goes on through the limits (decide.c shadow_apply()). */
  if (sluice__shadow_past_box(c->shadow))
    sluice__when(g, pr->box, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  return SLUICE_OK;
}

void sluice__pen_after(sluice__ctx *c, sluice__prog *g, sluice__pen_run *pr,
                       int i, int s) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  int box = g->st[pr->box].key, ra = box + 1, r, k;
  if (!sluice__decl_strikes(c->p->decl->limits[dr->limit[i]].algo) ||
      pr->pn->strike == SLUICE__STRIKE_REPORTED)
    return; /* reported strikes come from reports, not from denials */
  k = sluice__strike_steps(c, g, box, ra, s, pr->box, &pr->ps->pp,
                           pr->pn->strike == SLUICE__STRIKE_EVERY, &r);
  pr->renew[i] = r;
  pr->strike[i] = k;
}

int sluice__pen_boxed(sluice__ctx *c, const sluice__pen_run *pr,
                      const sluice_program_result *r, sluice_decision *d) {
  const sluice_verdict *v = &r->v[pr->box];
  seen(c, pr, v);
  if (r->denied_by == pr->box) {
    fill_box(c, pr->pn, pr->ps, v, d);
    return 1;
  }
  if (!v->allowed) { /* boxed, the box in shadow */
    c->box_shadowed = 1;
    c->box = *v;
  }
  d->strikes_remaining = v->strikes_remaining;
  return 0;
}

void sluice__pen_denied(sluice__ctx *c, const sluice__pen_run *pr,
                        const sluice_program_result *r, int i,
                        sluice_decision *d) {
  const sluice_verdict *pv;
  if (pr->strike[i] < 0)
    return; /* a lease, lock or cap: no strikes */
  d->penalty_status = SLUICE_PENALTY_WARNING;
  if (!sluice__ran(r, pr->strike[i]))
    return;
  pv = &r->v[pr->strike[i]];
  d->flags |= SLUICE_DECISION_STRIKE;
  if (pv->flags & SLUICE_V_TRIPPED) {
    if (sluice__shadow_past_box(c->shadow)) {
      c->box_shadowed = 1; /* the throttle stands unless it is shadowed */
      c->box = *pv;
    } else {
      fill_box(c, pr->pn, pr->ps, pv, d);
    }
    tripped(c, pr, pv, d);
  } else {
    d->strikes_remaining = pv->strikes_remaining;
  }
}

int sluice__pen_cached(sluice__ctx *c, int degraded, sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  sluice_decision scratch;
  sluice__deny e;
  sluice_verdict v;
  char id[SLUICE_SCOPE_ID_LEN + 1];
  int i, found = 0;
  if (!dr->pen || sluice__shadow_past_box(c->shadow) ||
      (!degraded && !sluice__deny_shared(c->p)))
    return 0;
  /* Every box of the route; of several cached, the longer one. */
  for (i = 0; i < dr->npen; i++) {
    const sluice__penalty *pn =
        &c->p->decl->penalties[dr->gpen[dr->pord[i]] - 1];
    /* A request whose scope cannot be built has no box to find: the store
    ** call (or the failure mode) says what is wrong with it. */
    memset(&scratch, 0, sizeof scratch);
    if (sluice__pen_skipped(c, pn) ||
        sluice__decl_pen_recs(c, pn, NULL, 0, id, NULL, &scratch) !=
            SLUICE_OK ||
        !sluice__deny_get(c->p, sluice__pen_scope_kind(pn), id, c->now, &e))
      continue;
    memset(&v, 0, sizeof v);
    v.level = e.level;
    if (e.until_ns == SLUICE_FOREVER)
      v.flags = SLUICE_V_SUSPENDED;
    else
      v.retry_after_ns = e.until_ns - c->now;
    if (!found || longer(&v, d))
      fill_box(c, pn, sluice__pen_pick(c, pn), &v, d);
    found = 1;
  }
  if (found)
    d->flags |= SLUICE_DECISION_DENY_CACHED;
  return found;
}

void sluice__pen_look_read(sluice__ctx *c, const sluice__pen_run *pr,
                           const sluice_program_result *r,
                           sluice_decision *d) {
  const sluice_verdict *v = &r->v[pr->box];
  seen(c, pr, v);
  if (!v->allowed && longer(v, d))
    fill_box(c, pr->pn, pr->ps, v, d);
}

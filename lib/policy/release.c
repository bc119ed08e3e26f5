/*
** sluice_policy_release() and sluice_policy_renew(): a lease goes to
** leases.c; a penalty box is released, its suspension lifted or a level 3
** box renewed here (the operator's "sluice release", "lift", "renew"): the
** box is read, then released (or renewed), and the deny cache follows.
**
** Choices:
**  a) The release and lift events carry the caller's request, so a sink
**     that acts on addresses (the nftables sink) knows which one; the
**     request holds only what the operator typed.
**  b) A renewal is one program on the box record: CHECK, then RELEASE and
**     TRIP at level 3 when it was still boxed.  TRIP on a released scope
**     starts a new box of the level's length from now; a scope released
**     by someone else between the read and the program stays released.
**     Renewal is for level 3 boxes (the 24 h IP ban, an enterprise key's
**     level 3 box): a lower level would climb the ladder instead, and a
**     suspension has no end to renew.  It emits EDGE_DENY with the new
**     end, the event that puts an address into the kernel's sets.
**  c) A policy file's boxes are its declared penalties': the one of the
**     scope kind asked (SLUICE_SCOPE_KEY, _IP, _SUBJECT: a scope of the
**     tenant, of the address, of an attribute the caller names) among
**     the penalties of the route the request's method and route match,
**     else the first in the file whose scope the request's attributes
**     fill.  Its box is keyed, hashed and numbered as a decision's, and
**     its id is the one its events and the deny cache use.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"

/* One step of kind `kind` on the box record k: a note, its writes kept
** whatever it says. */
static int apply(sluice__ctx *c, int kind, const sluice_key *k,
                 const sluice_penalty_params *pp, sluice_verdict *v) {
  sluice__prog g;
  sluice_program_result r;
  int rc;
  memset(&g, 0, sizeof g);
  g.keys[0] = *k;
  g.nk = 1;
  sluice__when(&g, sluice__step(&g, SLUICE_ALGO_PENALTY, kind, 0, 1, pp, 0, 0),
               SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  if ((rc = sluice__run(c, &g, &r)) == SLUICE_OK)
    *v = r.v[0];
  return rc;
}

enum { RELEASE = 0, LIFT = 1, RENEW = 2 };

/* RELEASE, TRIP 3 on a box still there: one store call (choice b). */
static int renew(sluice__ctx *c, const sluice_key *k,
                 const sluice_penalty_params *pp, sluice_verdict *v) {
  sluice__prog g;
  sluice_program_result r;
  int rc, chk, rel, trip;
  memset(&g, 0, sizeof g);
  g.keys[0] = *k;
  g.nk = 1;
  chk = sluice__step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, pp, 0, 0);
  sluice__when(&g, chk, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  rel = sluice__step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_RELEASE, 0, 1, pp, 0,
                     0);
  sluice__when(&g, rel, SLUICE_WHEN_DENIED, chk, SLUICE_FOLD_NOTE);
  trip = sluice__step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 0, 1, pp, 3, 0);
  sluice__when(&g, trip, SLUICE_WHEN_DENIED, chk, SLUICE_FOLD_NOTE);
  if ((rc = sluice__run(c, &g, &r)))
    return rc;
  if (!sluice__ran(&r, trip))
    return SLUICE_ENOTFOUND; /* released in between */
  *v = r.v[trip];
  return SLUICE_OK;
}

/* The declared penalty of kind scope_kind for request c->req (choice c):
** its box record into g (g->keys[0]), its parameter set, its scope id;
** SLUICE_ENOTFOUND when no penalty of that kind fits the request. */
static int declared_box(sluice__ctx *c, int scope_kind, sluice__prog *g,
                        const sluice_penalty_params **pp, char *sid) {
  const sluice__decl *dl = c->p->decl;
  sluice_decision d;
  int i, rc = SLUICE_ENOTFOUND;
  c->droute = sluice__decl_match(c->p, c->req);
  for (i = 0; i < dl->npenalties; i++) {
    const sluice__penalty *pn = &dl->penalties[i];
    if (sluice__pen_scope_kind(pn) != scope_kind)
      continue;
    if (c->droute >= 0) { /* the matched route's penalties alone */
      const sluice__droute *dr = &dl->routes[c->droute];
      int k, on = 0;
      for (k = 0; k < dr->ntg; k++)
        on |= dr->gpen[k] - 1 == i;
      if (!on)
        continue;
    }
    memset(&d, 0, sizeof d);
    g->nk = g->ns = 0;
    rc = sluice__decl_pen_recs(c, pn, g, 0, sid, NULL, &d);
    if (rc == SLUICE_OK) {
      *pp = &sluice__pen_pick(c, pn)->pp;
      return SLUICE_OK;
    }
  }
  return rc;
}

static int release(sluice_policy *p, int scope_kind, const sluice_request *q,
                   const char *who, const char *why, int mode) {
  int lift = mode == LIFT;
  sluice_key k;
  const sluice_penalty_params *pp;
  const char *sid;
  char did[SLUICE_SCOPE_ID_LEN + 1];
  sluice__prog g;
  sluice_verdict v;
  sluice__ctx c;
  int rc;

  if (!p || !q || !who || !who[0] || !why || !why[0])
    return SLUICE_EINVAL;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.tier = -1;
  c.droute = -1; /* not a route of declared limits */
  c.req = q; /* the operator's request, who and why go with the events */
  c.who = who;
  c.why = why;
  if (scope_kind != SLUICE_SCOPE_KEY && scope_kind != SLUICE_SCOPE_IP &&
      scope_kind != SLUICE_SCOPE_SUBJECT)
    return SLUICE_EINVAL;
  if (!p->decl || p->decl->npenalties == 0)
    return SLUICE_ENOTFOUND; /* the file declares no boxes */
  c.now = sluice_limiter_now(p->lim);
  if ((rc = declared_box(&c, scope_kind, &g, &pp, did)))
    return rc;
  k = g.keys[0];
  sid = did;
  if ((rc = apply(&c, SLUICE_OP_CHECK, &k, pp, &v)))
    return rc;
  if (v.allowed) {
    sluice__deny_drop(p, scope_kind, sid); /* released elsewhere */
    return SLUICE_ENOTFOUND;
  }
  if (!lift && (v.flags & SLUICE_V_SUSPENDED))
    return SLUICE_EPERM;
  if (lift && !(v.flags & SLUICE_V_SUSPENDED))
    return SLUICE_ENOTFOUND;
  if (mode == RENEW) {
    int64_t until;
    if (v.level < 3)
      return SLUICE_ENOTFOUND;
    if ((rc = renew(&c, &k, pp, &v)))
      return rc;
    until = (v.flags & SLUICE_V_SUSPENDED) ? SLUICE_FOREVER
                                           : c.now + v.retry_after_ns;
    sluice__deny_put(p, scope_kind, sid, c.now, until, v.level);
    sluice__emit(&c, SLUICE_EVENT_EDGE_DENY, scope_kind, v.level, sid, until,
                 0);
    return SLUICE_OK;
  }
  {
    int level = v.level;
    if ((rc = apply(&c, SLUICE_OP_RELEASE, &k, pp, &v)))
      return rc;
    sluice__deny_drop(p, scope_kind, sid);
    sluice__emit(&c, lift ? SLUICE_EVENT_LIFT : SLUICE_EVENT_RELEASE,
                 scope_kind, level, sid, 0, 0);
  }
  return SLUICE_OK;
}

int sluice_policy_release(sluice_policy *p, const sluice_request *q,
                          const sluice_hold *h) {
  if (!h)
    return SLUICE_EINVAL;
  switch (h->kind) {
  case SLUICE_HOLD_LEASE:
    return sluice__lease_op(p, q, h->lease_id, SLUICE_OP_LEASE_RELEASE);
  case SLUICE_HOLD_BOX:
    return release(p, h->scope, q, h->who, h->why, RELEASE);
  case SLUICE_HOLD_SUSPENSION:
    return release(p, h->scope, q, h->who, h->why, LIFT);
  default:
    return SLUICE_EINVAL;
  }
}

int sluice_policy_renew(sluice_policy *p, const sluice_request *q,
                        const sluice_hold *h) {
  if (!h)
    return SLUICE_EINVAL;
  switch (h->kind) {
  case SLUICE_HOLD_LEASE:
    return sluice__lease_op(p, q, h->lease_id, SLUICE_OP_RENEW);
  case SLUICE_HOLD_BOX:
    return release(p, h->scope, q, h->who, h->why, RENEW);
  default:
    return SLUICE_EINVAL;
  }
}

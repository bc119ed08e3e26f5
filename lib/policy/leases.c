/*
** Releasing and renewing a heavy endpoint's lease (and a reconcile's
** ledger lock) after the request is done.
*/
#include <string.h>

#include "flow.h"

/* Release or renew: the lease set and (reconcile) the ledger lock are in
** the tenant's group, so both go in one program.  The store's part, on a
** resolved context (halves.c runs it in two halves). */
int sluice__lease_store(sluice__ctx *c, uint64_t id, int kind) {
  sluice_policy *p = c->p;
  sluice_program_result r;
  const sluice_lease_params *lp;
  sluice__prog g;
  int rc, s, ok = 1;
  if (c->droute >= 0)
    return sluice__declared_lease_op(c, id, kind);
  if (c->cls != SLUICE_EP_RECONCILE && c->cls != SLUICE_EP_EXPORT)
    return SLUICE_EINVAL;
  lp = c->cls == SLUICE_EP_RECONCILE ? &p->reconcile_all : &p->export_all;
  g.nk = g.ns = g.rclass = 0;
  sluice__slot_recs(c, &g, c->cls, (int)lp->max);
  s = sluice__step(&g, SLUICE_ALGO_LEASE, kind, 0, (int)lp->max, lp, 0, id);
  sluice__when(&g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  if (c->cls == SLUICE_EP_RECONCILE) {
    int lk = SLUICE__REC(&g, sluice__key_ledger, c->T, c->L);
    s = sluice__step(&g, SLUICE_ALGO_LEASE, kind, lk, 1, &p->ledger, 0, id);
    sluice__when(&g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  }
  rc = sluice__run(c, &g, &r);
  if (rc)
    return rc;
  for (s = 0; s < g.ns; s++)
    ok = ok && r.v[s].allowed;
  return ok ? SLUICE_OK : SLUICE_ENOTFOUND;
}

/* The request's context for a lease op: SLUICE_OK, or why not. */
int sluice__lease_ctx(sluice_policy *p, const sluice_request *q, uint64_t id,
                      sluice__ctx *c) {
  sluice_decision d;
  int rc;
  if (!p || !q || id == 0)
    return SLUICE_EINVAL;
  memset(&d, 0, sizeof d);
  rc = sluice__resolve(p, q, c, &d);
  if (rc != SLUICE_OK)
    return rc;
  c->now = sluice_limiter_now(p->lim);
  return SLUICE_OK;
}

static int lease_op(sluice_policy *p, const sluice_request *q, uint64_t id,
                    int kind) {
  sluice__ctx c;
  int rc = sluice__lease_ctx(p, q, id, &c);
  return rc != SLUICE_OK ? rc : sluice__lease_store(&c, id, kind);
}

int sluice_policy_release_lease(sluice_policy *p, const sluice_request *q,
                                uint64_t id) {
  return lease_op(p, q, id, SLUICE_OP_LEASE_RELEASE);
}

int sluice_policy_renew_lease(sluice_policy *p, const sluice_request *q,
                              uint64_t id) {
  return lease_op(p, q, id, SLUICE_OP_RENEW);
}

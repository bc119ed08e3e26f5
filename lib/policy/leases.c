/*
** Releasing and renewing a route's leases (and locks) after the request
** is done (sluice_policy_release() and _renew() of a SLUICE_HOLD_LEASE).
*/
#include <string.h>

#include "flow.h"

/* Release or renew: the store's part, on a resolved context (halves.c
** runs it in two halves). */
int sluice__lease_store(sluice__ctx *c, uint64_t id, int kind) {
  return sluice__declared_lease_op(c, id, kind);
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

int sluice__lease_op(sluice_policy *p, const sluice_request *q, uint64_t id,
                     int kind) {
  sluice__ctx c;
  int rc = sluice__lease_ctx(p, q, id, &c);
  return rc != SLUICE_OK ? rc : sluice__lease_store(&c, id, kind);
}

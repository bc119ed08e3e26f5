/*
** Settling a request's cost after the response (issue 37 point 4;
** docs/policy.md "Settling a request's real cost"): the caller reports what
** the request really cost (the tokens it used, the rows it wrote) as the
** attributes its route's costs read, and each limit whose cost changes is
** charged or refunded the difference, in one program over the route's one
** hash-tag group (the ADJUST step, lib/algo/adjust.c).
**
**  a) Only what the decision charged can be settled.  An admitted decision
**     on a route of declared limits records a check of its charges (the
**     route, its scopes' values, every limit's cost, the store's time;
**     declared.c); settle recomputes it from the request it is given and
**     refuses a request that does not give the same (another request's
**     decision, another scope, attributes changed since), and refuses a
**     decision it has settled already (the flag SLUICE_DECISION_SETTLED),
**     so a refund never exceeds the charge.
**  b) A decision that charged nothing (denied, failed closed, shadow
**     denials, the per-IP backstop's refusal) has no check: SLUICE_ENOTFOUND,
**     no store call.
**  c) The report may name only attributes the route's costs read: the
**     scope attributes stay the request's (a settle moves no scope), and
**     an attribute nothing reads is a mistake worth saying.  A value is a
**     decimal 0..the cost's `max`: 0 is a real cost here (nothing used).
**  d) Leases, locks and count caps (requests, not cost) are never
**     settled; a limit whose cost comes out the same gets no step.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"

/* A reported value: decimal, 0..10^18 - 1 (the cost's own max is checked
** when the cost is worked out). */
static int value_ok(const char *v) {
  size_t n, i;
  if (!v || !*v)
    return SLUICE_EINVAL;
  if (v[0] == '-')
    return SLUICE_ERANGE;
  n = strnlen(v, 19);
  for (i = 0; i < n; i++)
    if (v[i] < '0' || v[i] > '9')
      return SLUICE_EINVAL;
  return n > 18 ? SLUICE_ERANGE : SLUICE_OK;
}

/* Check the report (c): every name one the route's costs read, once, with
** a decimal value.  d->invalid_field names the attribute at fault. */
static int report_ok(const sluice__ctx *c, const sluice_attr *a, size_t n,
                     sluice_decision *d) {
  const sluice__decl *dl = c->p->decl;
  const sluice__droute *dr = &dl->routes[c->droute];
  size_t i, j;
  int k, rc;
  for (i = 0; i < n; i++) {
    int found = -1;
    if (!a[i].name) {
      d->invalid_field = "attrs";
      return SLUICE_EINVAL;
    }
    for (k = 0; k < dr->n && found < 0; k++) {
      const sluice__cost *co = &dr->cost[k];
      if ((co->kind == SLUICE__C_RANGE || co->kind == SLUICE__C_ATTR) &&
          !strcmp(sluice__attr_name(dl, co->attr), a[i].name))
        found = co->attr;
    }
    for (j = 0; j < i && found >= 0; j++)
      if (!strcmp(a[j].name, a[i].name))
        found = -1; /* given twice */
    if (found < 0) {
      d->invalid_field = "attrs";
      return SLUICE_EINVAL;
    }
    if ((rc = value_ok(a[i].value))) {
      d->invalid_field = sluice__attr_name(dl, found);
      return rc;
    }
  }
  return SLUICE_OK;
}

/* Everything of a settle but its store call: the report checked against
** the decision (a-c) and the difference per limit in delta[] (*any: one is
** not 0), c ready for sluice__decl_adjust().  The blocking settle and its
** halves (halves.c) share it, and the store call after it. */
int sluice__settle_ctx(sluice_policy *p, const sluice_request *req,
                       sluice_decision *d, const sluice_attr *actual,
                       size_t nactual, sluice__ctx *c, int64_t delta[],
                       int *any) {
  int64_t charged[SLUICE__RLIMITS_MAX];
  sluice_decision scratch;
  int i, rc;
  *any = 0;
  if (!p || !req || !d || (nactual && !actual))
    return SLUICE_EINVAL;
  if (d->flags & SLUICE_DECISION_SETTLED)
    return SLUICE_EEXIST;
  if (d->settle_check == 0)
    return SLUICE_ENOTFOUND; /* it charged nothing (b) */
  memset(&scratch, 0, sizeof scratch);
  d->invalid_field = NULL;
  rc = sluice__resolve(p, req, c, &scratch);
  if (rc == SLUICE_OK && c->droute < 0) {
    scratch.invalid_field = "route";
    rc = SLUICE_EINVAL;
  }
  if (rc == SLUICE_OK)
    rc = sluice__decl_costs(c, charged, &scratch);
  if (rc == SLUICE_OK &&
      sluice__settle_check(c, charged, d->now_ns) != d->settle_check) {
    scratch.invalid_field = "request"; /* not this decision's (a) */
    rc = SLUICE_EINVAL;
  }
  if (rc == SLUICE_OK)
    rc = report_ok(c, actual, nactual, &scratch);
  if (rc == SLUICE_OK) {
    c->settle = actual;
    c->nsettle = nactual;
    sluice__decl_pick(c); /* the report's values may pick other sets */
    rc = sluice__decl_costs(c, delta, &scratch);
  }
  if (rc != SLUICE_OK) {
    d->invalid_field = scratch.invalid_field;
    return rc;
  }
  for (i = 0; i < p->decl->routes[c->droute].n; i++) {
    delta[i] -= charged[i];
    *any |= delta[i] != 0;
  }
  c->now = sluice_limiter_now(p->lim);
  return SLUICE_OK;
}

int sluice_policy_settle(sluice_policy *p, const sluice_request *req,
                         sluice_decision *d, const sluice_attr *actual,
                         size_t nactual) {
  int64_t delta[SLUICE__RLIMITS_MAX];
  sluice__ctx c;
  int rc, any;
  rc = sluice__settle_ctx(p, req, d, actual, nactual, &c, delta, &any);
  if (rc == SLUICE_OK && any)
    rc = sluice__decl_adjust(&c, delta, (uint64_t)d->now_ns);
  if (rc == SLUICE_OK)
    d->flags |= SLUICE_DECISION_SETTLED;
  return rc;
}

/*
** TEMPORARY (issue 37 stage B; removed with the fields): sluice_request's
** old fields on a policy file.  A caller not yet ported to method + route
** + attributes still sets endpoint_class, ledger_id, the export range,
** auth_subject or auth_result; on a policy of declared routes the request
** is translated before it is resolved (request.c), into a copy the
** decision's context holds:
**
**   endpoint_class     the ledger file's route entry for it (STANDARD: a
**                      path under /v1/ no other entry matches)
**   ledger_id          attribute "ledger"
**   export_from/to_ns  attribute "export_range_s", whole seconds rounded
**                      up (absent when both are 0)
**   auth_subject       attribute "subject" (absent when NULL or "")
**   auth_result        attribute "result": "ok", "unknown_client",
**                      "bad_secret" (absent while PENDING)
**
** The caller's own attributes come first.
*/
#include <stdio.h>
#include <string.h>

#include "declared.h"
#include "flow.h"

int sluice__shim_needed(const sluice_policy *p, const sluice_request *q) {
  return p->decl && p->decl->nroutes > 0 &&
         (q->endpoint_class || q->ledger_id || q->auth_subject ||
          q->auth_result || q->export_from_ns || q->export_to_ns);
}

int sluice__shim(sluice__ctx *c, const sluice_request *q, sluice_decision *d) {
  static const char *const routes[SLUICE_EP__COUNT][2] = {
      [SLUICE_EP_STANDARD] = {"GET", "/v1/standard"},
      [SLUICE_EP_RECONCILE] = {"POST", "/v1/ledgers/reconcile"},
      [SLUICE_EP_EXPORT] = {"GET", "/v1/reports/audit-export"},
      [SLUICE_EP_JOB_POLL] = {"GET", "/v1/jobs/job"},
      [SLUICE_EP_AUTH] = {"POST", "/v1/auth/token"}};
  static const char *const results[] = {NULL, "ok", "unknown_client",
                                        "bad_secret"};
  sluice_request *r = &c->shim;
  sluice_attr *a = c->shim_attrs;
  size_t n = q->nattrs;
  if (q->endpoint_class < 0 || q->endpoint_class >= SLUICE_EP__COUNT) {
    d->invalid_field = "endpoint_class";
    return SLUICE_EINVAL;
  }
  if (q->auth_result < SLUICE_AUTH_PENDING ||
      q->auth_result > SLUICE_AUTH_BAD_SECRET) {
    d->invalid_field = "auth_result";
    return SLUICE_EINVAL;
  }
  if (q->export_to_ns < q->export_from_ns) {
    d->invalid_field = "export_to_ns";
    return SLUICE_EINVAL;
  }
  if ((n && !q->attrs) || n > SLUICE__SHIM_ATTRS - 4) {
    d->invalid_field = "attrs";
    return SLUICE_EINVAL;
  }
  *r = *q;
  if (n)
    memcpy(a, q->attrs, n * sizeof *a);
  if (q->endpoint_class) {
    r->method = routes[q->endpoint_class][0];
    r->route = routes[q->endpoint_class][1];
  }
  if (q->ledger_id)
    a[n++] = (sluice_attr){"ledger", q->ledger_id};
  if (q->export_from_ns || q->export_to_ns) {
    /* Unsigned: to - from cannot overflow once to >= from. */
    uint64_t ns = (uint64_t)q->export_to_ns - (uint64_t)q->export_from_ns;
    snprintf(c->shim_range, sizeof c->shim_range, "%llu",
             (unsigned long long)(ns / 1000000000u + (ns % 1000000000u != 0)));
    a[n++] = (sluice_attr){"export_range_s", c->shim_range};
  }
  if (q->auth_subject && q->auth_subject[0])
    a[n++] = (sluice_attr){"subject", q->auth_subject};
  if (results[q->auth_result])
    a[n++] = (sluice_attr){"result", results[q->auth_result]};
  r->attrs = n ? a : NULL;
  r->nattrs = n;
  r->endpoint_class = SLUICE_EP_AUTO;
  r->ledger_id = r->auth_subject = NULL;
  r->auth_result = 0;
  r->export_from_ns = r->export_to_ns = 0;
  c->req = r;
  return SLUICE_OK;
}

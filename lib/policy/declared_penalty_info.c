/*
** The declared penalties read back for tools (`sluice inspect`): one
** scope's box as the store holds it, read the way
** sluice_policy_inspect() reads a built-in box (inspect.c), with the keys
** and the parameter set a decision of that request would use.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"

int sluice__inspect_penalty(sluice_policy *p, const char *penalty,
                            const sluice_request *req,
                            sluice_inspect_report *out, const char **field) {
  const sluice__penalty *pn = NULL;
  const sluice__pset *ps;
  sluice__ctx c;
  sluice__prog g;
  sluice_decision d;
  sluice_inspect_report r;
  int i, rc, notice;
  if (field)
    *field = NULL;
  if (!p || !penalty || !req || !out)
    return SLUICE_EINVAL;
  for (i = 0; p->decl && i < p->decl->npenalties; i++)
    if (!strcmp(p->decl->penalties[i].name, penalty))
      pn = &p->decl->penalties[i];
  if (!pn)
    return SLUICE_ENOTFOUND;
  if ((rc = sluice__inspect_ctx(p, req, &c, &d, field)))
    return rc;
  memset(&r, 0, sizeof r);
  ps = sluice__pen_pick(&c, pn);
  r.scope = sluice__pen_scope_kind(pn);
  r.now_ns = c.now;
  g.nk = g.ns = 0;
  notice = pn->strike != SLUICE__STRIKE_REPORTED;
  if ((rc = sluice__decl_pen_recs(&c, pn, &g, notice, r.scope_id, NULL,
                                  &d)) ||
      (rc = sluice__inspect_box(p, g.keys[0], &ps->pp, &r)))
    goto out;
  if (notice) { /* the Retry-After notice a strike is measured against */
    sluice_state s;
    int err = 0, got = sluice__inspect_get(p, g.keys[1], &s, &err);
    if (got < 0) {
      rc = err;
      goto out;
    }
    if (got)
      r.present |= SLUICE_INSPECT_NOTICE;
    if (s.w[0] != 0 && (int64_t)s.w[1] > c.now)
      r.notice_until_ns = (int64_t)s.w[1];
  }
  if (pn->sliding) { /* reported failures, in their sliding window */
    sluice_window_params w = {ps->pp.strike_threshold,
                              ps->pp.strike_window_ns};
    g.nk = 0;
    if ((rc = sluice__decl_pen_rec(&c, pn, &g, 'f', &d)) ||
        (rc = sluice__inspect_window(p, g.keys[0], SLUICE_INSPECT_FAILURES, 1,
                                     &w, &r, &r.failures, &r.failures_limit,
                                     &r.failures_window_ns)))
      goto out;
  }
  if (pn->of >= 0) { /* the stuffing window's reports */
    g.nk = 0;
    if ((rc = sluice__decl_pen_rec(&c, pn, &g, 's', &d)) ||
        (rc = sluice__inspect_window(p, g.keys[0], SLUICE_INSPECT_STUFFING, 0,
                                     &pn->stuffing, &r, &r.stuffing_failures,
                                     &r.stuffing_limit,
                                     &r.stuffing_window_ns)))
      goto out;
  }
  *out = r;
  return SLUICE_OK;
out:
  if (field)
    *field = d.invalid_field;
  return rc;
}

int sluice__inspect_declared(sluice_policy *p, const sluice_inspect_query *q,
                             sluice_inspect_report *out) {
  const sluice__decl *dl = p->decl;
  int i, rc = SLUICE_ENOTFOUND;
  for (i = 0; i < dl->npenalties; i++) {
    const sluice__penalty *pn = &dl->penalties[i];
    sluice_request r;
    sluice_attr a;
    if (sluice__pen_scope_kind(pn) != q->scope)
      continue;
    memset(&r, 0, sizeof r);
    r.tenant_id = q->tenant_id;
    r.api_key_id = q->api_key_id;
    r.tier = q->tier;
    r.client_ip = q->client_ip;
    if (q->scope == SLUICE_SCOPE_SUBJECT) { /* the subject: its attribute */
      a.name = sluice__attr_name(dl, pn->scope[0]);
      a.value = q->auth_subject;
      r.attrs = &a;
      r.nattrs = 1;
    }
    rc = sluice__inspect_penalty(p, pn->name, &r, out, NULL);
    if (rc != SLUICE_EINVAL && rc != SLUICE_EKEY)
      return rc; /* read (or the store failed); else: the next one */
  }
  return rc;
}

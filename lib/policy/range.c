/*
** The store's range, asked once at open (SLUICE_CTL_PARAMS_IN_RANGE): every
** parameter set a decision sends, so that a tier the store cannot decide
** exactly is a configuration error at open, naming the setting, rather
** than SLUICE_ERANGE on every request that uses it.  The redis store
** decides GCRA buckets up to burst * period_ns = 2^52 ns (a bucket of
** 100,000 points at one a minute is beyond it); the others have no range
** narrower than the algorithms'.  Each of the policy file's parameter sets
** is named by its path in the file.
*/
#include <stdio.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"
#include "op.h"

/* One parameter set, as the op that sends it.  A set the policy never
** sends as given (an off backstop's zero limit) fails the shape check and
** is not asked about. */
static int ask(sluice_policy *p, int algo, int kind, int nkeys,
               const void *params, const char *what, char *msg, size_t len) {
  static const sluice_key k[SLUICE_GROUP_MAX] = {{"{range}", 7}};
  sluice_op op;
  int rc;
  memset(&op, 0, sizeof op);
  op.algo = algo;
  op.kind = kind;
  op.nkeys = nkeys;
  op.keys = k;
  op.params = params;
  op.id = 1;
  if (sluice__op_validate_params(&op) != SLUICE_OK)
    return SLUICE_OK;
  rc = sluice_limiter_control(p->lim, SLUICE_CTL_PARAMS_IN_RANGE, &op);
  if (rc == SLUICE_OK || rc == SLUICE_ENOTFOUND)
    return SLUICE_OK;
  snprintf(msg, len, "%s: the store cannot decide it: %s", what,
           sluice_limiter_errmsg(p->lim));
  return rc;
}

/* A policy file's declared limits: each one's own numbers and every
** parameter set, "limits.NAME" or "limits.NAME.params.VALUE". */
static int decl_check(sluice_policy *p, char *msg, size_t len) {
  const sluice__decl *dl = p->decl;
  char what[128];
  int i, j, rc;
  for (i = 0; dl && i < dl->nlimits; i++) {
    const sluice__limit *lm = &dl->limits[i];
    int algo = sluice__decl_step_algo(lm->algo);
    int kind = algo == SLUICE_ALGO_LEASE ? SLUICE_OP_ACQUIRE : SLUICE_OP_PEEK;
    for (j = -1; j < lm->npsets; j++) {
      const sluice__lparams *ps = j < 0 ? &lm->base : &lm->ps[j];
      snprintf(what, sizeof what, "limits.%s%s%s", lm->name,
               j < 0 ? "" : ".params.", j < 0 ? "" : lm->psval[j]);
      if ((rc = ask(p, algo, kind,
                    algo != SLUICE_ALGO_LEASE        ? 1
                    : ps->l.max > SLUICE_GROUP_MAX ? 1 /* counted */
                                                   : (int)ps->l.max,
                    ps, what,
                    msg, len)))
        return rc;
    }
  }
  return SLUICE_OK;
}

/* Its penalties: each set's ladder, and the stuffing windows. */
static int pen_check(sluice_policy *p, char *msg, size_t len) {
  const sluice__decl *dl = p->decl;
  char what[128];
  int i, j, rc;
  for (i = 0; dl && i < dl->npenalties; i++) {
    const sluice__penalty *pn = &dl->penalties[i];
    for (j = -1; j < pn->npsets; j++) {
      snprintf(what, sizeof what, "penalties.%s%s%s", pn->name,
               j < 0 ? "" : ".params.", j < 0 ? "" : pn->psval[j]);
      if ((rc = ask(p, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 1,
                    j < 0 ? &pn->base.pp : &pn->ps[j].pp, what, msg, len)))
        return rc;
    }
    snprintf(what, sizeof what, "penalties.%s.stuffing", pn->name);
    if (pn->of >= 0 &&
        ((rc = ask(p, SLUICE_ALGO_FWINDOW, SLUICE_OP_PEEK, 1, &pn->stuffing,
                   what, msg, len)) ||
         (rc = ask(p, SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 1, &pn->distinct,
                   what, msg, len))))
      return rc;
  }
  return SLUICE_OK;
}

int sluice__range_check(sluice_policy *p, char *msg, size_t len) {
  int rc;
  /* The per-IP backstop's window (an off one's zero limit is not sent). */
  if ((rc = ask(p, SLUICE_ALGO_FWINDOW, SLUICE_OP_PEEK, 1, &p->ip_window,
                "ip_backstop.window_s", msg, len)))
    return rc;
  if ((rc = decl_check(p, msg, len)))
    return rc;
  return pen_check(p, msg, len);
}

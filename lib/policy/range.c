/*
** The store's range, asked once at open (SLUICE_CTL_PARAMS_IN_RANGE): every
** parameter set a decision sends, so that a tier the store cannot decide
** exactly is a configuration error at open, naming the setting, rather
** than SLUICE_ERANGE on every request of that tier.  The redis store
** decides GCRA buckets up to burst * period_ns = 2^52 ns (a tenant bucket
** of 100,000 points at one a minute is beyond it); the others have no range
** narrower than the algorithms'.  A policy file's declared limits are asked
** about too, each parameter set named by its path in the file.
*/
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"

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
  if (sluice_op_validate_params(&op) != SLUICE_OK)
    return SLUICE_OK;
  rc = sluice_limiter_control(p->lim, SLUICE_CTL_PARAMS_IN_RANGE, &op);
  if (rc == SLUICE_OK || rc == SLUICE_ENOTFOUND)
    return SLUICE_OK;
  snprintf(msg, len, "%s: the store cannot decide it: %s", what,
           sluice_limiter_errmsg(p->lim));
  return rc;
}

/* The parameter sets a decision sends: per tier (offsets in its
** sluice__tier_rt, "%s" the tier's name) and the policy's own. */
typedef struct set {
  int algo, kind;
  size_t off;
  const char *what;
} set;

#define TIER(a, k, f, w) {a, k, offsetof(sluice__tier_rt, f), "tiers.%s" w}
static const set tier_sets[] = {
    TIER(SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, bucket[0], ".tenant"),
    TIER(SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, bucket[1], ".key"),
    TIER(SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, penalty, " (penalty)"),
    TIER(SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, reconcile, " (reconcile)"),
    TIER(SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, export_, " (export)"),
    TIER(SLUICE_ALGO_FWINDOW, SLUICE_OP_PEEK, export_cap, ".exports_per_window"),
};

#define POL(a, k, f, w) {a, k, offsetof(sluice_policy, f), w}
static const set policy_sets[] = {
    POL(SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, auth_penalty, "auth (boxes)"),
    POL(SLUICE_ALGO_SWINDOW, SLUICE_OP_PEEK, auth_subject,
        "auth.subject_failures"),
    POL(SLUICE_ALGO_SWINDOW, SLUICE_OP_PEEK, auth_ip, "auth.ip_failures"),
    POL(SLUICE_ALGO_SWINDOW, SLUICE_OP_PEEK, auth_unknown, "auth.window_s"),
    POL(SLUICE_ALGO_FWINDOW, SLUICE_OP_PEEK, stuffing, "auth.stuffing_window_s"),
    POL(SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, stuffing_subjects,
        "auth.stuffing_window_s"),
    POL(SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, ledger,
        "heavy.reconcile_lease_ttl_s"),
    POL(SLUICE_ALGO_FWINDOW, SLUICE_OP_PEEK, ip_window, "ip_backstop.window_s"),
};

#define NSETS(a) (sizeof a / sizeof a[0])

/* A lease set's width is its max; everything else here is one record. */
static int width(const set *s, const void *params) {
  return s->algo == SLUICE_ALGO_LEASE
             ? (int)((const sluice_lease_params *)params)->max
             : 1;
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
      if (j < 0)
        snprintf(what, sizeof what, "limits.%s", lm->name);
      else
        snprintf(what, sizeof what, "limits.%s.params.%s", lm->name,
                 lm->psval[j]);
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
      if (j < 0)
        snprintf(what, sizeof what, "penalties.%s", pn->name);
      else
        snprintf(what, sizeof what, "penalties.%s.params.%s", pn->name,
                 pn->psval[j]);
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
  char what[96];
  size_t j;
  int i, rc;
  for (i = 0; i < p->cfg.ntiers; i++)
    for (j = 0; j < NSETS(tier_sets); j++) {
      const set *s = &tier_sets[j];
      const void *params = (const char *)&p->rt[i] + s->off;
      snprintf(what, sizeof what, s->what, p->cfg.tiers[i].name);
      if ((rc = ask(p, s->algo, s->kind, width(s, params), params, what, msg,
                    len)))
        return rc;
    }
  for (j = 0; j < NSETS(policy_sets); j++) {
    const set *s = &policy_sets[j];
    const void *params = (const char *)p + s->off;
    if ((rc = ask(p, s->algo, s->kind, width(s, params), params, s->what, msg,
                  len)))
      return rc;
  }
  if ((rc = decl_check(p, msg, len)))
    return rc;
  return pen_check(p, msg, len);
}

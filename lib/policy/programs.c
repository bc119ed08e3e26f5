/*
** Building a decision's programs (one per hash-tag group, run as one
** atomic store call) and running them, noting the first store failure
** on the context for the failure mode (decide.c, "Store failure").
*/
#include <string.h>

#include "flow.h"
#include "split.h"

int sluice__store_failure(int rc) {
  return rc == SLUICE_ETIMEDOUT || rc == SLUICE_EUNAVAIL ||
         rc == SLUICE_EBACKEND || rc == SLUICE_EIO || rc == SLUICE_EFULL ||
         rc == SLUICE_ENOMEM;
}

/* Add a step; returns its index (guards and folds are set by the caller
** when they are not "always, gate"). */
int sluice__step(sluice__prog *g, int algo, int kind, int key, int nkeys,
                 const void *params, int64_t arg, uint64_t id) {
  sluice_step *s = &g->st[g->ns];
  memset(s, 0, sizeof *s);
  s->algo = algo;
  s->kind = kind;
  s->key = key;
  s->nkeys = nkeys;
  s->params = params;
  s->arg = arg;
  s->id = id;
  return g->ns++;
}

void sluice__when(sluice__prog *g, int i, int w, int ref, int fold) {
  g->st[i].when = w;
  g->st[i].ref = ref;
  g->st[i].fold = fold;
}

void sluice__prog_program(const sluice__prog *g, sluice_program *pr) {
  memset(pr, 0, sizeof *pr);
  pr->nkeys = g->nk;
  pr->keys = g->keys;
  pr->nsteps = g->ns;
  pr->steps = g->st;
  pr->record_class = g->rclass;
}

int sluice__run_as(sluice__ctx *c, sluice__prog *g, sluice_program_result *r,
                   int built) {
  sluice_program pr;
  int rc;
  sluice__prog_program(g, &pr);
  rc = c->tape    ? sluice__store_call(c, NULL, &pr, NULL, r)
       : built ? sluice__limiter_run_built(c->p->lim, &pr, c->now, r)
               : sluice_limiter_decide(c->p->lim, 1, &pr, c->now, r, NULL);
  if (rc != SLUICE_OK && sluice__store_failure(rc) && !c->store_err)
    c->store_err = rc;
  return rc;
}

int sluice__run(sluice__ctx *c, sluice__prog *g, sluice_program_result *r) {
  return sluice__run_as(c, g, r, 0);
}

int sluice__ran(const sluice_program_result *r, int i) {
  return i >= 0 && ((r->ran >> i) & 1u);
}

int sluice__strike_steps(sluice__ctx *c, sluice__prog *g, int box, int ra,
                         int denier, int box_step,
                         const sluice_penalty_params *pp, int every,
                         int *renew) {
  int r, k;
  r = sluice__step(g, SLUICE_ALGO_LEASE, SLUICE_OP_RENEW, ra, 1, &c->p->notice,
                   0, 1);
  sluice__when(g, r, SLUICE_WHEN_DENIED, denier, SLUICE_FOLD_NOTE);
  g->st[r].ttl_from = SLUICE_TTL_OF(denier);
  k = sluice__step(g, SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, ra, 1,
                   &c->p->notice, 0, 1);
  sluice__when(g, k, SLUICE_WHEN_DENIED, r, SLUICE_FOLD_NOTE);
  g->st[k].ttl_from = SLUICE_TTL_OF(denier);
  k = sluice__step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, box, 1, pp, 0, 0);
  if (every)
    sluice__when(g, k, SLUICE_WHEN_DENIED, denier, SLUICE_FOLD_NOTE);
  else
    sluice__when(g, k, SLUICE_WHEN_ALLOWED, r, SLUICE_FOLD_NOTE);
  /* A boxed scope takes no strikes; only a box in shadow gets this far. */
  g->st[k].when2 = SLUICE_WHEN_ALLOWED;
  g->st[k].ref2 = box_step;
  if (renew)
    *renew = r;
  return k;
}

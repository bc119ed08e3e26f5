/*
** An operation (sluice_op) decided as the one-step program it is, for the
** tests, tools and benchmarks written in operations.  The step is a NOTE:
** its writes stay whatever it decides, as a plain operation's do (a GATE
** would undo a window's COUNT past its limit); its verdict is the
** program's v[0].
*/
#ifndef SLUICE_TESTS_ONE_STEP_H
#define SLUICE_TESTS_ONE_STEP_H

#include <stdlib.h>
#include <string.h>

#include "sluice.h"

static inline void one_step(const sluice_op *op, sluice_step *st,
                            sluice_program *p) {
  *st = (sluice_step){.algo = op->algo, .kind = op->kind, .key = 0,
                      .nkeys = op->nkeys, .params = op->params,
                      .arg = op->arg, .id = op->id,
                      .fold = SLUICE_FOLD_NOTE};
  *p = (sluice_program){.nkeys = op->nkeys, .keys = op->keys, .nsteps = 1,
                        .steps = st, .record_class = op->record_class};
}

/* One op at now_ns (SLUICE_NOW: the limiter's clock) into *v (zeroed on
** an error). */
static inline int op_decide(sluice_limiter *l, const sluice_op *op,
                            int64_t now_ns, sluice_verdict *v) {
  sluice_step st;
  sluice_program p;
  sluice_program_result r;
  int rc;
  if (!op || !v)
    return SLUICE_EINVAL;
  one_step(op, &st, &p);
  rc = sluice_limiter_decide(l, 1, &p, now_ns, &r, NULL);
  if (rc == SLUICE_OK)
    *v = r.v[0];
  else
    memset(v, 0, sizeof *v);
  return rc;
}

/* n ops as one batch of n programs: vs[i] and rcs[i] are op i's. */
static inline int ops_decide(sluice_limiter *l, int n, const sluice_op *ops,
                             int64_t now_ns, sluice_verdict *vs, int *rcs) {
  sluice_step *st;
  sluice_program *p;
  sluice_program_result *r;
  int i, rc;
  if (n < 1 || !ops || !vs || !rcs)
    return sluice_limiter_decide(l, n, NULL, now_ns, NULL, rcs);
  st = calloc((size_t)n, sizeof *st);
  p = calloc((size_t)n, sizeof *p);
  r = calloc((size_t)n, sizeof *r);
  if (!st || !p || !r) {
    free(st);
    free(p);
    free(r);
    return SLUICE_ENOMEM;
  }
  for (i = 0; i < n; i++)
    one_step(&ops[i], &st[i], &p[i]);
  rc = sluice_limiter_decide(l, n, p, now_ns, r, rcs);
  for (i = 0; i < n; i++)
    if (rc == SLUICE_OK && rcs[i] == SLUICE_OK)
      vs[i] = r[i].v[0];
    else
      memset(&vs[i], 0, sizeof vs[i]);
  free(st);
  free(p);
  free(r);
  return rc;
}

/* The same on a store (sluice_store_run(), at now_ns). */
static inline int store_op(sluice_store *s, const sluice_op *op,
                           int64_t now_ns, sluice_verdict *v) {
  sluice_step st;
  sluice_program p;
  sluice_program_result r;
  int rc, one;
  if (!op || !v)
    return SLUICE_EINVAL;
  one_step(op, &st, &p);
  rc = sluice_store_run(s, 1, &p, now_ns, &r, &one);
  rc = rc != SLUICE_OK ? rc : one;
  if (rc == SLUICE_OK)
    *v = r.v[0];
  else
    memset(v, 0, sizeof *v);
  return rc;
}

/* One program on a store: its own code. */
static inline int store_prog(sluice_store *s, const sluice_program *p,
                             int64_t now_ns, sluice_program_result *res) {
  int one, rc = sluice_store_run(s, 1, p, now_ns, res, &one);
  return rc != SLUICE_OK ? rc : one;
}

/* n ops as one batch of n programs on a store. */
static inline int store_ops(sluice_store *s, int n, const sluice_op *ops,
                            int64_t now_ns, sluice_verdict *vs, int *rcs) {
  sluice_step *st;
  sluice_program *p;
  sluice_program_result *r;
  int i, rc;
  if (n < 1 || !ops || !vs || !rcs)
    return sluice_store_run(s, n, NULL, now_ns, NULL, rcs);
  st = calloc((size_t)n, sizeof *st);
  p = calloc((size_t)n, sizeof *p);
  r = calloc((size_t)n, sizeof *r);
  if (!st || !p || !r) {
    free(st);
    free(p);
    free(r);
    return SLUICE_ENOMEM;
  }
  for (i = 0; i < n; i++)
    one_step(&ops[i], &st[i], &p[i]);
  rc = sluice_store_run(s, n, p, now_ns, r, rcs);
  for (i = 0; i < n; i++)
    if (rc == SLUICE_OK && rcs[i] == SLUICE_OK)
      vs[i] = r[i].v[0];
    else
      memset(&vs[i], 0, sizeof vs[i]);
  free(st);
  free(p);
  free(r);
  return rc;
}

#endif

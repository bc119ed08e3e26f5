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

/* Where a batch of programs goes: the limiter (at now_ns, or SLUICE_NOW
** for its clock) or a bare store (at now_ns). */
typedef int (*one_step_run)(void *to, int n, const sluice_program *ps,
                            int64_t now_ns, sluice_program_result *r,
                            int *rcs);

static inline int one_step_limiter(void *to, int n, const sluice_program *ps,
                                   int64_t now_ns, sluice_program_result *r,
                                   int *rcs) {
  return sluice_limiter_decide(to, n, ps, now_ns, r, rcs);
}

static inline int one_step_store(void *to, int n, const sluice_program *ps,
                                 int64_t now_ns, sluice_program_result *r,
                                 int *rcs) {
  return sluice_store_run(to, n, ps, now_ns, r, rcs);
}

/* n ops as one batch of n programs: vs[i] and rcs[i] are op i's (vs[i]
** zeroed where it failed).  One op's arrays stay on the stack, so a timed
** loop of single ops allocates nothing. */
static inline int one_step_batch(one_step_run run, void *to, int n,
                                 const sluice_op *ops, int64_t now_ns,
                                 sluice_verdict *vs, int *rcs) {
  sluice_step st1, *st = &st1;
  sluice_program p1, *p = &p1;
  sluice_program_result r1, *r = &r1;
  int i, rc;
  if (n < 1 || !ops || !vs || !rcs)
    return run(to, n, NULL, now_ns, NULL, rcs);
  if (n > 1) {
    st = calloc((size_t)n, sizeof *st);
    p = calloc((size_t)n, sizeof *p);
    r = calloc((size_t)n, sizeof *r);
    if (!st || !p || !r) {
      free(st);
      free(p);
      free(r);
      return SLUICE_ENOMEM;
    }
  }
  for (i = 0; i < n; i++)
    one_step(&ops[i], &st[i], &p[i]);
  rc = run(to, n, p, now_ns, r, rcs);
  for (i = 0; i < n; i++)
    if (rc == SLUICE_OK && rcs[i] == SLUICE_OK)
      vs[i] = r[i].v[0];
    else
      memset(&vs[i], 0, sizeof vs[i]);
  if (n > 1) {
    free(st);
    free(p);
    free(r);
  }
  return rc;
}

/* One op: its own code, *v zeroed on an error. */
static inline int one_step_one(one_step_run run, void *to,
                               const sluice_op *op, int64_t now_ns,
                               sluice_verdict *v) {
  int one, rc;
  if (!op || !v)
    return SLUICE_EINVAL;
  rc = one_step_batch(run, to, 1, op, now_ns, v, &one);
  return rc != SLUICE_OK ? rc : one;
}

/* On a limiter. */
static inline int op_decide(sluice_limiter *l, const sluice_op *op,
                            int64_t now_ns, sluice_verdict *v) {
  return one_step_one(one_step_limiter, l, op, now_ns, v);
}

static inline int ops_decide(sluice_limiter *l, int n, const sluice_op *ops,
                             int64_t now_ns, sluice_verdict *vs, int *rcs) {
  return one_step_batch(one_step_limiter, l, n, ops, now_ns, vs, rcs);
}

/* On a store. */
static inline int store_op(sluice_store *s, const sluice_op *op,
                           int64_t now_ns, sluice_verdict *v) {
  return one_step_one(one_step_store, s, op, now_ns, v);
}

static inline int store_ops(sluice_store *s, int n, const sluice_op *ops,
                            int64_t now_ns, sluice_verdict *vs, int *rcs) {
  return one_step_batch(one_step_store, s, n, ops, now_ns, vs, rcs);
}

/* One program on a store: its own code. */
static inline int store_prog(sluice_store *s, const sluice_program *p,
                             int64_t now_ns, sluice_program_result *res) {
  int one, rc = sluice_store_run(s, 1, p, now_ns, res, &one);
  return rc != SLUICE_OK ? rc : one;
}

#endif

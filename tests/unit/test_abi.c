/*
** The reserved words of the structs that cross the API by value or in
** arrays (docs/abi.md): a caller-filled struct with a reserved word not zero
** is refused with SLUICE_EINVAL and changes nothing, so that a later
** version can give the word a meaning; a library-filled struct comes back
** with its reserved words zeroed, whatever the caller's memory held.  Here
** the pure layer and the mem store; tests/conformance repeats the store
** half on every backend, and each backend's suite its control structs.
*/
#include "unit.h"

#define NRES(s) ((int)(sizeof(s).reserved / sizeof(s).reserved[0]))

static const sluice_gcra_params gp = {1, SEC, 5};
static const sluice_penalty_params pp = {3, 60 * SEC, {SEC, 2 * SEC, 3 * SEC},
                                         600 * SEC};
static const sluice_key key1 = {"abi:k", 5};
static const sluice_key keys2[2] = {{"{abi}a", 6}, {"{abi}b", 6}};

static sluice_op gcra_op(int64_t cost) {
  sluice_op op = {0};
  op.algo = SLUICE_ALGO_GCRA;
  op.kind = SLUICE_OP_CONSUME;
  op.nkeys = 1;
  op.keys = &key1;
  op.params = &gp;
  op.arg = cost;
  return op;
}

/* Two steps over two records: a box check, then a bucket. */
static void two_steps(sluice_step st[2], sluice_program *p) {
  memset(st, 0, 2 * sizeof *st);
  memset(p, 0, sizeof *p);
  st[0].algo = SLUICE_ALGO_PENALTY;
  st[0].kind = SLUICE_OP_CHECK;
  st[0].key = 0;
  st[0].nkeys = 1;
  st[0].params = &pp;
  st[1].algo = SLUICE_ALGO_GCRA;
  st[1].kind = SLUICE_OP_CONSUME;
  st[1].key = 1;
  st[1].nkeys = 1;
  st[1].params = &gp;
  st[1].arg = 1;
  st[1].when = SLUICE_WHEN_PASSED;
  p->nkeys = 2;
  p->keys = keys2;
  p->nsteps = 2;
  p->steps = st;
}

static sluice_limiter *open_mem(void) {
  sluice_limiter *l = NULL;
  cr_assert_eq(sluice_limiter_open(NULL, &l), SLUICE_OK);
  return l;
}

static void assert_zero(const int64_t *r, int n, const char *what) {
  for (int i = 0; i < n; i++)
    cr_assert_eq(r[i], 0, "%s.reserved[%d] = %lld, not zeroed", what, i,
                 (long long)r[i]);
}

/* The bucket of key1 still full: nothing was charged. */
static void assert_untouched(sluice_limiter *l) {
  sluice_op peek = gcra_op(0);
  sluice_verdict v;
  peek.kind = SLUICE_OP_PEEK;
  cr_assert_eq(sluice_limiter_apply(l, &peek, &v), SLUICE_OK);
  cr_assert_eq(v.remaining, gp.burst, "a refused op charged the bucket");
}

/* ------------------------------------------------------------- refused --- */

Test(abi, op_reserved_refused) {
  sluice_limiter *l = open_mem();
  sluice_state in = zst(), out;
  sluice_verdict v, vs[3];
  int rcs[3];
  for (int k = 0; k < NRES(gcra_op(1)); k++) {
    sluice_op op = gcra_op(1), ops[3];
    op.reserved[k] = k % 2 ? -1 : 1;
    cr_assert_eq(sluice_op_validate(&op), SLUICE_EINVAL, "reserved[%d]", k);
    cr_assert_eq(sluice_op_step(&op, &in, &out, SEC, &v), SLUICE_EINVAL);
    cr_assert_eq(sluice_limiter_apply(l, &op, &v), SLUICE_EINVAL);
    assert_untouched(l);
    ops[0] = gcra_op(0);
    ops[0].kind = SLUICE_OP_PEEK;
    ops[1] = op;
    ops[2] = ops[0];
    cr_assert_eq(sluice_limiter_apply_many(l, 3, ops, vs, rcs), SLUICE_OK);
    cr_assert_eq(rcs[0], SLUICE_OK);
    cr_assert_eq(rcs[1], SLUICE_EINVAL, "batch: reserved[%d]", k);
    cr_assert_eq(rcs[2], SLUICE_OK);
    assert_untouched(l);
  }
  sluice_limiter_close(l);
}

/* Each of the program's and each step's reserved words, through the pure
** sequencer, a store's run and a batch of programs. */
Test(abi, program_and_step_reserved_refused) {
  sluice_limiter *l = open_mem();
  sluice_step st[2];
  sluice_program p, ps[2];
  sluice_program_result r, rs[2];
  sluice_state rec[2] = {{{0, 0}}, {{0, 0}}};
  int rcs[2];
  /* case c: 0..1 the program's words, 2.. a step's (step, word) */
  int nprog = NRES(p), nstep = NRES(st[0]);
  for (int c = 0; c < nprog + 2 * nstep; c++) {
    two_steps(st, &p);
    cr_assert_eq(sluice_program_validate(&p), SLUICE_OK);
    if (c < nprog)
      p.reserved[c] = 1;
    else
      st[(c - nprog) / nstep].reserved[(c - nprog) % nstep] = INT64_MIN;
    cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL, "case %d", c);
    cr_assert_eq(sluice_program_run(&p, rec, rec, SEC, &r), SLUICE_EINVAL);
    cr_assert_eq(sluice_limiter_run(l, &p, &r), SLUICE_EINVAL, "case %d", c);
    ps[0] = ps[1] = p;
    cr_assert_eq(sluice_limiter_run_many(l, 2, ps, rs, rcs), SLUICE_OK);
    cr_assert_eq(rcs[0], SLUICE_EINVAL, "case %d", c);
    cr_assert_eq(rcs[1], SLUICE_EINVAL, "case %d", c);
  }
  /* Nothing ran: the bucket record is still absent. */
  cr_assert_eq(sluice_limiter_get(l, keys2[1].data, keys2[1].len, rec, NULL),
               SLUICE_ENOTFOUND);
  sluice_limiter_close(l);
}

/* -------------------------------------------------------------- zeroed --- */

Test(abi, verdict_reserved_zeroed) {
  sluice_limiter *l = open_mem();
  sluice_state in = zst(), out;
  sluice_op ops[2] = {gcra_op(1), gcra_op(1)};
  sluice_verdict v, vs[2];
  int rcs[2];
  ops[1].algo = SLUICE_ALGO_PENALTY; /* the general path, beside GCRA's own */
  ops[1].kind = SLUICE_OP_STRIKE;
  ops[1].params = &pp;
  ops[1].keys = &keys2[0];
  ops[1].arg = 0;
  for (int i = 0; i < 2; i++) {
    memset(&v, 0xa5, sizeof v);
    cr_assert_eq(sluice_op_step(&ops[i], &in, &out, SEC, &v), SLUICE_OK);
    assert_zero(v.reserved, NRES(v), "sluice_op_step: verdict");
    memset(&v, 0xa5, sizeof v);
    cr_assert_eq(sluice_limiter_apply(l, &ops[i], &v), SLUICE_OK);
    assert_zero(v.reserved, NRES(v), "sluice_limiter_apply: verdict");
  }
  memset(&v, 0xa5, sizeof v);
  cr_assert_eq(sluice_gcra_step(&gp, &in, SEC, SLUICE_OP_CONSUME, 1, &out, &v),
               SLUICE_OK);
  assert_zero(v.reserved, NRES(v), "sluice_gcra_step: verdict");
  memset(vs, 0xa5, sizeof vs);
  cr_assert_eq(sluice_limiter_apply_many(l, 2, ops, vs, rcs), SLUICE_OK);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(rcs[i], SLUICE_OK);
    assert_zero(vs[i].reserved, NRES(vs[i]), "apply_many: verdict");
  }
  sluice_limiter_close(l);
}

static void assert_result_zero(const sluice_program_result *r, int nsteps,
                               const char *what) {
  assert_zero(r->reserved, NRES(*r), what);
  for (int i = 0; i < nsteps; i++)
    assert_zero(r->v[i].reserved, NRES(r->v[i]), what);
}

Test(abi, program_result_reserved_zeroed) {
  sluice_limiter *l = open_mem();
  sluice_step st[2];
  sluice_program p, ps[2];
  sluice_program_result r, rs[2];
  sluice_state rec[2] = {{{0, 0}}, {{0, 0}}};
  int rcs[2];
  two_steps(st, &p);
  /* Step 1 runs only if the box check denied, which it does not: a step
  ** that did not run has its verdict's reserved words zeroed too. */
  st[1].when = SLUICE_WHEN_DENIED;
  st[1].ref = 0;
  memset(&r, 0xa5, sizeof r);
  cr_assert_eq(sluice_program_run(&p, rec, rec, SEC, &r), SLUICE_OK);
  cr_assert_eq(r.ran, 0x1u);
  assert_result_zero(&r, 2, "sluice_program_run");
  memset(&r, 0xa5, sizeof r);
  cr_assert_eq(sluice_limiter_run(l, &p, &r), SLUICE_OK);
  assert_result_zero(&r, 2, "sluice_limiter_run");
  ps[0] = ps[1] = p;
  memset(rs, 0xa5, sizeof rs);
  cr_assert_eq(sluice_limiter_run_many(l, 2, ps, rs, rcs), SLUICE_OK);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(rcs[i], SLUICE_OK);
    assert_result_zero(&rs[i], 2, "sluice_limiter_run_many");
  }
  sluice_limiter_close(l);
}

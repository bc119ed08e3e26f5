/*
** The hot path's shortcuts against the general code they stand in for:
**  - sluice__op_validate() passes a valid single-key GCRA op without the
**    general dispatch (op.h, sluice__gcra1_ok); it must give the general
**    path's code for every op, valid or not.
**  - sluice__program_single() (a one-step program run, folded and its
**    record's expiry found in one call, a GCRA bucket straight to its
**    step) must equal sluice_program_run() then sluice_program_expiry(),
**    for every algorithm, gate or note.
**  - sluice__program_plain() (the inline check of the commonest program)
**    must never pass a program sluice_program_validate() refuses.
*/
#include "algo/algo_int.h"
#include "algo/program_int.h"
#include "unit.h"
#include "job.h"
#include "op.h"

#define ROUNDS 300000

static int64_t pick(rng *r, const int64_t *edges, size_t n) {
  int64_t e = edges[rng_next(r) % n];
  switch (rng_next(r) % 4) {
  case 0:
    return e == INT64_MIN ? e : e - 1;
  case 1:
    return e == INT64_MAX ? e : e + 1;
  default:
    return e;
  }
}

static void random_gcra(rng *r, sluice_gcra_params *p) {
  static const int64_t rates[] = {0, 1, 100, INT64_C(1) << 32, INT64_MAX};
  static const int64_t periods[] = {0, 1, SEC, SLUICE_DURATION_MAX, INT64_MAX};
  static const int64_t bursts[] = {0, 1, 200, SLUICE_COUNT_MAX, INT64_MIN,
                                   INT64_C(1) << 22};
  p->rate = pick(r, rates, 5);
  p->period_ns = pick(r, periods, 5);
  p->burst = pick(r, bursts, 6);
}

/* The general path, as sluice__op_validate() ran before it had a shortcut. */
static int validate_general(const sluice_op *op) {
  int rc = sluice__op_validate_params(op);
  return rc != SLUICE_OK ? rc : sluice__keys_check(op);
}

Test(op_fast, gcra_single_key_validation_matches_the_general_path) {
  static char big[SLUICE_KEY_MAX + 2];
  static const int kinds[] = {SLUICE_OP_CONSUME, SLUICE_OP_PEEK,
                              SLUICE_OP_COUNT,   SLUICE_OP_TRIP,
                              -1,                1000};
  static const int64_t args[] = {INT64_MIN, -1, 0, 1, 2, 200,
                                 SLUICE_COUNT_MAX, INT64_MAX};
  rng r = {UINT64_C(0x0b5e55ed)};
  long ok = 0, einval = 0, erange = 0, ekey = 0;
  memset(big, 'k', sizeof big);
  for (int i = 0; i < ROUNDS; i++) {
    sluice_gcra_params p;
    sluice_key k = {big, 1 + rng_next(&r) % 20};
    sluice_op op = {SLUICE_ALGO_GCRA, kinds[rng_next(&r) % 6], 1, &k, &p,
                    pick(&r, args, 8), 0};
    int rc;
    random_gcra(&r, &p);
    if (rng_next(&r) % 2 == 0) { /* a fine op: reach the later checks */
      p = (sluice_gcra_params){100, SEC, 200};
      op.kind = kinds[rng_next(&r) % 2];
      op.arg = rng_next(&r) % 3 ? rng_range(&r, 1, 200) : pick(&r, args, 8);
    }
    switch (rng_next(&r) % 12) {
    case 0:
      k.data = NULL;
      break;
    case 1:
      k.len = 0;
      break;
    case 2:
      k.len = SLUICE_KEY_MAX + rng_next(&r) % 2;
      break;
    case 3:
      op.keys = NULL;
      break;
    case 4:
      op.params = NULL;
      break;
    }
    rc = sluice__op_validate(&op);
    cr_assert_eq(rc, validate_general(&op),
                 "op kind %d arg %lld rate %lld period %lld burst %lld key %p "
                 "len %zu keys %p params %p: %d, general %d",
                 op.kind, (long long)op.arg, (long long)p.rate,
                 (long long)p.period_ns, (long long)p.burst, k.data, k.len,
                 (const void *)op.keys, op.params, rc, validate_general(&op));
    ok += rc == SLUICE_OK;
    einval += rc == SLUICE_EINVAL;
    erange += rc == SLUICE_ERANGE;
    ekey += rc == SLUICE_EKEY;
  }
  /* Every code came up often enough for the comparison to mean something. */
  cr_assert_gt(ok, ROUNDS / 20, "SLUICE_OK %ld", ok);
  cr_assert_gt(einval, ROUNDS / 20, "SLUICE_EINVAL %ld", einval);
  cr_assert_gt(erange, ROUNDS / 100, "SLUICE_ERANGE %ld", erange);
  cr_assert_gt(ekey, ROUNDS / 100, "SLUICE_EKEY %ld", ekey);
}

/* A valid op of any single-key algorithm, with a plausible record. */
static void random_op(rng *r, sluice_op *op, sluice_gcra_params *g,
                      sluice_window_params *w, sluice_penalty_params *pp,
                      sluice_distinct_params *dp, sluice_state *in,
                      int64_t now) {
  do {
    switch (rng_next(r) % 5) {
    case 0:
    case 1:
      random_gcra(r, g);
      if (rng_next(r) % 2)
        *g = (sluice_gcra_params){1 + rng_range(r, 0, 1000),
                                  1 + rng_range(r, 0, 100 * SEC),
                                  1 + rng_range(r, 0, 1000)};
      op->algo = SLUICE_ALGO_GCRA;
      op->kind = rng_next(r) % 2 ? SLUICE_OP_CONSUME : SLUICE_OP_PEEK;
      op->params = g;
      break;
    case 2:
      *w = (sluice_window_params){1 + rng_range(r, 0, 50),
                                  1 + rng_range(r, 0, 10 * SEC)};
      op->algo = rng_next(r) % 2 ? SLUICE_ALGO_SWINDOW : SLUICE_ALGO_FWINDOW;
      op->kind = rng_next(r) % 2 ? SLUICE_OP_CONSUME : SLUICE_OP_PEEK;
      op->params = w;
      break;
    case 3:
      *pp = (sluice_penalty_params){1 + rng_range(r, 0, 5), SEC,
                                    {SEC, 10 * SEC, 100 * SEC}, 1000 * SEC};
      op->algo = SLUICE_ALGO_PENALTY;
      op->kind = SLUICE_OP_CHECK + (int)(rng_next(r) % 4);
      op->params = pp;
      break;
    default:
      *dp = (sluice_distinct_params){1 + rng_range(r, 0, 100), SEC};
      op->algo = SLUICE_ALGO_DISTINCT;
      op->kind = SLUICE_OP_ADD;
      op->params = dp;
      op->id = rng_next(r);
      break;
    }
    op->arg = rng_range(r, 0, 3);
  } while (sluice__op_validate(op) != SLUICE_OK);
  in->w[0] = rng_next(r) % 2 ? (uint64_t)(now + rng_range(r, -SEC, SEC))
                             : rng_next(r) >> (rng_next(r) % 64);
  in->w[1] = rng_next(r) >> (rng_next(r) % 64);
}

Test(op_fast, single_program_equals_run_then_expiry) {
  rng r = {UINT64_C(0x57e9)};
  static const char kb[] = "k";
  sluice_key k = {kb, 1};
  long gcra = 0, other = 0, denied = 0;
  for (int i = 0; i < ROUNDS; i++) {
    sluice_gcra_params g;
    sluice_window_params w;
    sluice_penalty_params pp;
    sluice_distinct_params dp;
    sluice_op op = {0, 0, 1, &k, NULL, 0, 0};
    sluice_step st;
    sluice_program p = {1, &k, 1, &st, 0};
    sluice_state in, out1, out2;
    sluice_program_result r1, r2;
    int64_t now = rng_next(&r) % 2 ? INT64_C(1764800000) * SEC
                                   : rng_range(&r, 0, INT64_MAX);
    int64_t e1 = -7, e2;
    int rc1, rc2;
    random_op(&r, &op, &g, &w, &pp, &dp, &in, now);
    st = (sluice_step){.algo = op.algo, .kind = op.kind, .nkeys = 1,
                       .params = op.params, .arg = op.arg, .id = op.id,
                       .fold = rng_next(&r) % 4 ? SLUICE_FOLD_GATE
                                                 : SLUICE_FOLD_NOTE};
    memset(&r1, 0x5a, sizeof r1); /* every field it writes must be written */
    memset(&r2, 0xa5, sizeof r2);
    rc1 = sluice__program_single(&p, &in, &out1, now, &r1, &e1);
    rc2 = sluice_program_run(&p, &in, &out2, now, &r2);
    cr_assert_eq(rc1, rc2);
    if (rc2 != SLUICE_OK)
      continue;
    e2 = sluice_program_expiry(&p, 0, &out2);
    gcra += op.algo == SLUICE_ALGO_GCRA;
    other += op.algo != SLUICE_ALGO_GCRA;
    denied += !r2.allowed;
    cr_assert(st_eq(&out1, &out2), "algo %d kind %d", op.algo, op.kind);
    cr_assert_eq(e1, e2, "expiry, algo %d", op.algo);
    cr_assert_eq(r1.allowed, r2.allowed, "algo %d", op.algo);
    cr_assert_eq(r1.denied_by, r2.denied_by, "algo %d", op.algo);
    cr_assert_eq(r1.ran, r2.ran, "algo %d", op.algo);
    cr_assert_eq(r1.now_ns, r2.now_ns, "algo %d", op.algo);
    assert_verdict_eq(r1.v[0], r2.v[0], "algo %d kind %d", op.algo, op.kind);
  }
  cr_assert_gt(gcra, ROUNDS / 4, "GCRA steps %ld", gcra);
  cr_assert_gt(other, ROUNDS / 4, "other steps %ld", other);
  cr_assert_gt(denied, ROUNDS / 20, "denials %ld", denied);
}

/* sluice__program_plain() vouches for a program only when all the checks
** of sluice_program_validate() find it valid, and takes the plain ones it
** was made for: programs near its shape, each field pushed off it in turn. */
Test(op_fast, plain_check_never_passes_an_invalid_program) {
  static char big[SLUICE_KEY_MAX + 2];
  static const int64_t args[] = {INT64_MIN, -1, 0, 1, 2, 200,
                                 SLUICE_COUNT_MAX, INT64_MAX};
  rng r = {UINT64_C(0x91a1)};
  long plain = 0, valid_other = 0, invalid = 0;
  memset(big, 'k', sizeof big);
  for (int i = 0; i < ROUNDS; i++) {
    /* Room for any algorithm's parameters (a step's algorithm is pushed
    ** off GCRA below, and a group's buckets read one set each). */
    sluice_gcra_params ga[3] = {{100, SEC, 200}, {100, SEC, 200}, {0, 0, 0}};
    sluice_gcra_params *gp = ga;
    sluice_key k[2] = {{big, 1 + rng_next(&r) % 20}, {"x", 1}};
    /* Two steps, so that a program of two (nsteps pushed off) reads a
    ** second one: any step, all zero. */
    sluice_step sts[2] = {{.algo = SLUICE_ALGO_GCRA,
                           .kind = SLUICE_OP_CONSUME, .nkeys = 1,
                           .params = gp, .arg = rng_range(&r, 1, 200)}};
    sluice_step *st = sts;
    sluice_program p = {1, k, 1, sts, 0};
    int rc, fast;
    if (rng_next(&r) % 3 == 0)
      random_gcra(&r, gp);
    switch (rng_next(&r) % 20) {
    case 0: p.nsteps = (int)rng_range(&r, -1, 2); break;
    case 1: p.nkeys = (int)rng_range(&r, -1, 2); st->nkeys = p.nkeys; break;
    case 2: p.keys = NULL; break;
    case 3: p.steps = NULL; break;
    case 4: p.record_class = rng_range(&r, -1, 5); break;
    case 5: st->algo = (int)rng_range(&r, -1, 6); break;
    case 6: st->kind = (int)rng_range(&r, -1, 12); break;
    case 7: st->key = (int)rng_range(&r, -1, 1); break;
    case 8: st->nkeys = (int)rng_range(&r, 0, 2); break;
    case 9: st->when = (int)rng_range(&r, -1, 6); break;
    case 10: st->ref = (int)rng_range(&r, -1, 1); break;
    case 11: st->when2 = (int)rng_range(&r, -1, 6); break;
    case 12: st->ref2 = (int)rng_range(&r, -1, 1); break;
    case 13: st->fold = (int)rng_range(&r, -1, 2); break;
    case 14: st->ttl_from = (int)rng_range(&r, -1, 1); break;
    case 15: st->params = NULL; break;
    case 16: st->arg = pick(&r, args, 8); break;
    case 17: k[0].data = NULL; break;
    case 18: k[0].len = rng_next(&r) % 2 ? 0 : SLUICE_KEY_MAX + rng_next(&r) % 2; break;
    default: break;
    }
    fast = sluice__program_plain(&p);
    rc = sluice__program_validate_full(&p);
    cr_assert_eq(sluice_program_validate(&p), rc);
    cr_assert(!fast || rc == SLUICE_OK, "plain passed a program validate "
              "refuses (%d): nsteps %d nkeys %d algo %d kind %d arg %lld",
              rc, p.nsteps, p.nkeys, st->algo, st->kind, (long long)st->arg);
    plain += fast;
    valid_other += !fast && rc == SLUICE_OK;
    invalid += rc != SLUICE_OK;
  }
  cr_assert_gt(plain, ROUNDS / 8, "plain %ld", plain);
  cr_assert_gt(valid_other, ROUNDS / 100, "valid, not plain %ld", valid_other);
  cr_assert_gt(invalid, ROUNDS / 10, "invalid %ld", invalid);
}

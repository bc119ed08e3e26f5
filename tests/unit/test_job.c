/*
** The public fast path of backend.h: jobs (one program decided over
** records a backend loaded), sluice__op_step_validated(),
** sluice__op_validate_params() and sluice__op_validate_keys().
** Every call checks its own pointers; a job decides exactly what the plain
** calls (sluice__op_step, sluice_program_run) decide.
*/
#include "unit.h"
#include "job.h"
#include "../common/one_step.h"

static const sluice_gcra_params G = {.rate = 1, .period_ns = SEC, .burst = 2};
static const sluice_key K[2] = {{"{t}b", 4}, {"{t}p", 4}};

/* Record 0 a bucket (gate), record 1 a penalty strike when it denied. */
static sluice_program prog(sluice_step st[2]) {
  sluice_program p;
  memset(&p, 0, sizeof p);
  memset(st, 0, 2 * sizeof *st);
  st[0] = (sluice_step){.algo = SLUICE_ALGO_GCRA, .kind = SLUICE_OP_CONSUME,
                        .key = 0, .nkeys = 1, .params = &G, .arg = 1};
  st[1] = (sluice_step){.algo = SLUICE_ALGO_PENALTY, .kind = SLUICE_OP_STRIKE,
                        .key = 1, .nkeys = 1, .params = &UNIT_LADDER,
                        .when = SLUICE_WHEN_DENIED, .ref = 0,
                        .fold = SLUICE_FOLD_NOTE};
  p.nkeys = 2;
  p.keys = K;
  p.nsteps = 2;
  p.steps = st;
  return p;
}

static sluice_op bucket_op(void) { return op_take(K, &G, 1); }

Test(job, null_pointers_are_refused) {
  sluice__job j;
  sluice_op op = bucket_op();
  sluice_step st1;
  sluice_program p1;
  sluice_program_result r;
  sluice_state s = zst(), o;
  one_step(&op, &st1, &p1);
  cr_assert_eq(sluice__job_program(&j, NULL, &r), SLUICE_EINVAL);
  cr_assert_eq(sluice__job_program(&j, &p1, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice__job_program(NULL, NULL, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice__job_run(NULL, &s, &o, 0), SLUICE_EINVAL);
  memset(&j, 0, sizeof j); /* no program */
  cr_assert_eq(sluice__job_run(&j, &s, &o, 0), SLUICE_EINVAL);
  cr_assert_eq(sluice__job_undo(&j, 0, &s, &s, &s, 0, &o), 0);
  cr_assert_eq(sluice__job_read_only(&j), 0);
  cr_assert_eq(sluice__job_expiry(NULL, 0, &s), 0);
  cr_assert_eq(sluice__job_read_only(NULL), 0);
  cr_assert_eq(sluice__job_watched(NULL, 0), 0);
  cr_assert_eq(sluice__job_undo(NULL, 0, &s, &s, &s, 0, &o), 0);
  cr_assert_eq(sluice__job_program(&j, &p1, &r), SLUICE_OK);
  cr_assert_eq(sluice__job_run(&j, &s, NULL, 0), SLUICE_EINVAL);
  cr_assert_eq(sluice__job_run(&j, &s, &o, -1), SLUICE_EINVAL);
  cr_assert_eq(sluice__job_undo(&j, 1, &s, &s, &s, 0, &o), 0, "i out of range");
  cr_assert_eq(sluice__job_undo(&j, 0, &s, &s, &s, 0, NULL), 0);
  cr_assert_eq(sluice__op_step_validated(&op, &s, &o, 0, NULL), SLUICE_EINVAL);
}

Test(job, constructor_fills_every_field) {
  sluice__job j;
  sluice_step st[2];
  sluice_program p = prog(st);
  sluice_program_result r;
  memset(&j, 0xa5, sizeof j);
  cr_assert_eq(sluice__job_program(&j, &p, &r), SLUICE_OK);
  cr_assert(j.prog == &p && j.res == &r);
  cr_assert(j.v == NULL && j.nkeys == 2 && j.keys == K);
}

/* A job decides what the plain calls decide, record for record. */
Test(job, agrees_with_the_plain_calls) {
  sluice_step st[2];
  sluice_program p = prog(st);
  sluice_op op = bucket_op();
  sluice_state a[2], b[2], o1 = zst(), o2 = zst();
  int i, k;
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  for (i = 0; i < 12; i++) {
    int64_t now = SEC + i * (SEC / 3);
    sluice_program_result ra, rb;
    sluice_verdict va;
    sluice_step st1;
    sluice_program p1;
    sluice__job j;
    cr_assert_eq(sluice_program_run(&p, a, a, now, &ra), SLUICE_OK);
    cr_assert_eq(sluice__job_program(&j, &p, &rb), SLUICE_OK);
    cr_assert_eq(sluice__job_run(&j, b, b, now), SLUICE_OK);
    cr_assert_eq(memcmp(a, b, sizeof a), 0, "records at step %d", i);
    cr_assert_eq(ra.allowed, rb.allowed);
    cr_assert_eq(ra.ran, rb.ran);
    for (k = 0; k < 2; k++)
      cr_assert_eq(sluice__job_expiry(&j, k, &b[k]),
                   sluice_program_expiry(&p, k, &a[k]));
    /* A one-step program's job decides what its op decides. */
    cr_assert_eq(sluice__op_step(&op, &o1, &o1, now, &va), SLUICE_OK);
    one_step(&op, &st1, &p1);
    cr_assert_eq(sluice__job_program(&j, &p1, &rb), SLUICE_OK);
    cr_assert_eq(sluice__job_run(&j, &o2, &o2, now), SLUICE_OK);
    cr_assert_eq(memcmp(&va, &rb.v[0], sizeof va), 0);
    cr_assert_eq(memcmp(&o1, &o2, sizeof o1), 0);
    cr_assert_eq(sluice__job_expiry(&j, 0, &o2), sluice__op_expiry(&op, 0, &o1));
  }
}

Test(job, read_only_and_watched) {
  sluice_step st[2];
  sluice_program p = prog(st);
  sluice_program_result r;
  sluice_state rec[2];
  sluice__job j;
  sluice_op op = bucket_op();
  sluice_step st1;
  sluice_program p1;
  one_step(&op, &st1, &p1);
  cr_assert_eq(sluice__job_program(&j, &p1, &r), SLUICE_OK);
  cr_assert_eq(sluice__job_read_only(&j), 0);
  st1.kind = SLUICE_OP_PEEK;
  cr_assert_eq(sluice__job_read_only(&j), 1, "the job borrows the program");
  st[0].kind = SLUICE_OP_PEEK;
  memset(rec, 0, sizeof rec);
  cr_assert_eq(sluice__job_program(&j, &p, &r), SLUICE_OK);
  cr_assert_eq(sluice__job_read_only(&j), 0, "the strike writes");
  cr_assert_eq(sluice__job_run(&j, rec, rec, SEC), SLUICE_OK);
  cr_assert_eq(sluice__job_watched(&j, 0), 1, "the peek decided, unwritten");
  cr_assert_eq(sluice__job_watched(&j, 1), 0, "the strike did not run");
}

/* One apply per step its guard lets run, stopping at the first error. */
typedef struct tally {
  int calls, fail_at;
  sluice_state rec[2];
  const sluice_program *p;
} tally;

Test(job, validate_params_skips_only_the_keys) {
  sluice_op op = bucket_op();
  static const sluice_key two_tags[2] = {{"{a}x", 4}, {"{b}y", 4}};
  static const sluice_gcra_params g2[2] = {{1, SEC, 2}, {1, SEC, 2}};
  cr_assert_eq(sluice__op_validate_params(NULL), SLUICE_EINVAL);
  op.keys = two_tags;
  op.nkeys = 2;
  op.params = g2;
  cr_assert_eq(sluice__op_validate(&op), SLUICE_EKEY);
  cr_assert_eq(sluice__op_validate_params(&op), SLUICE_OK);
  op.arg = 3; /* more than the burst: can never fit */
  cr_assert_eq(sluice__op_validate_params(&op), SLUICE_ERANGE);
  op.algo = 99;
  cr_assert_eq(sluice__op_validate_params(&op), SLUICE_EINVAL);
}

Test(job, validate_keys_checks_only_the_keys) {
  sluice_op op = bucket_op();
  static const sluice_key two_tags[2] = {{"{a}x", 4}, {"{b}y", 4}};
  static const sluice_key twice[2] = {{"{a}x", 4}, {"{a}x", 4}};
  static const sluice_key one_tag[2] = {{"{a}x", 4}, {"{a}y", 4}};
  static const sluice_gcra_params g2[2] = {{1, SEC, 2}, {1, SEC, 2}};
  cr_assert_eq(sluice__op_validate_keys(NULL), SLUICE_EKEY);
  op.nkeys = 2;
  op.params = g2;
  op.keys = one_tag;
  cr_assert_eq(sluice__op_validate_keys(&op), SLUICE_OK);
  op.keys = two_tags;
  cr_assert_eq(sluice__op_validate_keys(&op), SLUICE_EKEY);
  op.keys = twice;
  cr_assert_eq(sluice__op_validate_keys(&op), SLUICE_EKEY);
  op.keys = one_tag;
  op.arg = 3; /* more than the burst: not the keys' business */
  op.algo = 99;
  cr_assert_eq(sluice__op_validate_keys(&op), SLUICE_OK);
  op.keys = NULL;
  cr_assert_eq(sluice__op_validate_keys(&op), SLUICE_EKEY);
}

/*
** The program sequencer (sluice/program.h): guards, folds, the undo of a
** gate's denial, the TTL taken from an earlier step, validation, and the
** property that a program's steps are exactly the ops they name: run one
** by one over the same records, the ops give the same verdicts and records
** whenever no gate denies after a write.  Then the same programs through
** the stores: mem's xRun against the pure run, and the step-by-step
** fallback of a store without xRun.
*/
#include "unit.h"
#include "../common/one_step.h"
#include "op.h"

static const sluice_penalty_params pen = {
    3, 10 * SEC, {1 * MIN, 5 * MIN, SLUICE_FOREVER}, HOUR};
static const sluice_gcra_params buckets[2] = {{10, SEC, 10}, {2, SEC, 2}};
static const sluice_lease_params notice = {1, SEC};

/* Records: 0 box, 1-2 tenant + key buckets, 3 notice (one hash tag). */
static const sluice_key std_keys[4] = {
    {"pb:{t}:k", 8}, {"rl:{t}:tb", 9}, {"rl:{t}:kb", 9}, {"ra:{t}:k", 8}};

static void std_steps(sluice_step st[5], int64_t cost) {
  memset(st, 0, 5 * sizeof *st);
  st[0] = (sluice_step){SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &pen};
  st[1] = (sluice_step){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, 2, buckets,
                        cost};
  st[1].when = SLUICE_WHEN_PASSED;
  st[2] = (sluice_step){SLUICE_ALGO_LEASE, SLUICE_OP_RENEW, 3, 1, &notice, 0,
                        1};
  st[2].when = SLUICE_WHEN_DENIED;
  st[2].ref = 1;
  st[2].fold = SLUICE_FOLD_NOTE;
  st[2].ttl_from = SLUICE_TTL_OF(1);
  st[3] = st[2];
  st[3].kind = SLUICE_OP_ACQUIRE;
  st[3].ref = 2;
  st[4] = (sluice_step){SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 0, 1, &pen};
  st[4].when = SLUICE_WHEN_ALLOWED;
  st[4].ref = 2;
  st[4].fold = SLUICE_FOLD_NOTE;
}

static sluice_program std_prog(sluice_step st[5], int64_t cost) {
  sluice_program p = {4, std_keys, 5, st};
  std_steps(st, cost);
  return p;
}

Test(program, standard_request_flow) {
  sluice_step st[5];
  sluice_program p = std_prog(st, 1);
  sluice_state rec[4];
  sluice_program_result r;
  int64_t now = 100 * SEC;
  int i;
  memset(rec, 0, sizeof rec);
  /* The key bucket holds 2: two admissions, charged to both buckets. */
  for (i = 0; i < 2; i++) {
    cr_assert_eq(sluice_program_run(&p, rec, rec, now, &r), SLUICE_OK);
    cr_assert(r.allowed);
    cr_assert_eq(r.denied_by, -1);
    cr_assert_eq(r.ran, 0x3u, "box and buckets only");
    cr_assert_eq(r.v[1].remaining, 1 - i);
  }
  cr_assert(st_eq(&rec[3], &(sluice_state){{0, 0}}), "no notice yet");
  /* Third: throttled; the notice is taken for the Retry-After given. */
  cr_assert_eq(sluice_program_run(&p, rec, rec, now, &r), SLUICE_OK);
  cr_assert(!r.allowed);
  cr_assert_eq(r.denied_by, 1);
  cr_assert_eq(r.ran, 0xfu, "renew failed, so acquire; no strike");
  cr_assert(!r.v[2].allowed);
  cr_assert(r.v[3].allowed);
  cr_assert_eq((int64_t)rec[3].w[1], now + r.v[1].retry_after_ns,
               "notice TTL = the bucket's Retry-After");
  /* Back before the Retry-After: a strike, three of them trip the box. */
  for (i = 0; i < 3; i++) {
    cr_assert_eq(sluice_program_run(&p, rec, rec, now + 1, &r), SLUICE_OK);
    cr_assert_eq(r.ran, 0x17u, "renew held: strike, no acquire");
    cr_assert_eq(r.v[4].strikes_remaining, i < 2 ? 2 - i : 0);
  }
  cr_assert(r.v[4].flags & SLUICE_V_TRIPPED);
  /* Boxed: nothing but the check runs. */
  cr_assert_eq(sluice_program_run(&p, rec, rec, now + 2 * SEC, &r), SLUICE_OK);
  cr_assert_eq(r.denied_by, 0);
  cr_assert_eq(r.ran, 0x1u);
  cr_assert_eq(r.v[0].level, 1);
}

Test(program, gate_denial_undoes_earlier_writes) {
  static const sluice_window_params cap = {1, HOUR};
  static const sluice_key k[3] = {{"a{g}", 4}, {"b{g}", 4}, {"c{g}", 4}};
  sluice_step st[3];
  sluice_program p = {3, k, 3, st};
  sluice_state in[3], out[3];
  sluice_program_result r;
  memset(st, 0, sizeof st);
  memset(in, 0, sizeof in);
  st[0] = (sluice_step){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, buckets, 3};
  st[1] = (sluice_step){SLUICE_ALGO_FWINDOW, SLUICE_OP_CONSUME, 1, 1, &cap, 1};
  st[1].when = SLUICE_WHEN_PASSED;
  /* A note that runs on the denial and keeps its write. */
  st[2] = (sluice_step){SLUICE_ALGO_FWINDOW, SLUICE_OP_COUNT, 2, 1, &cap, 1};
  st[2].when = SLUICE_WHEN_DENIED;
  st[2].ref = 1;
  st[2].fold = SLUICE_FOLD_NOTE;
  cr_assert_eq(sluice_program_run(&p, in, out, SEC, &r), SLUICE_OK);
  cr_assert(r.allowed);
  cr_assert(!st_eq(&out[0], &in[0]) && !st_eq(&out[1], &in[1]));
  cr_assert(st_eq(&out[2], &in[2]), "note skipped");
  memcpy(in, out, sizeof in);
  /* The cap is spent: step 1 denies, so step 0's charge is undone. */
  cr_assert_eq(sluice_program_run(&p, in, out, 2 * SEC, &r), SLUICE_OK);
  cr_assert(!r.allowed);
  cr_assert_eq(r.denied_by, 1);
  cr_assert(r.v[0].allowed, "step 0 ran and allowed, then was undone");
  cr_assert(st_eq(&out[0], &in[0]), "a denied program charges nothing");
  cr_assert(st_eq(&out[1], &in[1]));
  cr_assert_eq(out[2].w[1], 1, "the note after the denial is kept");
}

Test(program, reached_and_skipped_guards) {
  static const sluice_window_params w = {2, MIN};
  static const sluice_key k[3] = {{"f{i}", 4}, {"p{i}", 4}, {"q{i}", 4}};
  sluice_step st[3];
  sluice_program p = {3, k, 3, st};
  sluice_state rec[3];
  sluice_program_result r;
  int i;
  memset(st, 0, sizeof st);
  memset(rec, 0, sizeof rec);
  st[0] = (sluice_step){SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, 0, 1, &w, 1};
  st[0].fold = SLUICE_FOLD_NOTE;
  /* Trip when the counter reaches its limit; the second trip only when the
  ** first did not run (both conditions). */
  st[1] = (sluice_step){SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 1, 1, &pen, 1};
  st[1].when = SLUICE_WHEN_REACHED;
  st[1].fold = SLUICE_FOLD_NOTE;
  st[2] = (sluice_step){SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 2, 1, &pen, 1};
  st[2].when = SLUICE_WHEN_SKIPPED;
  st[2].ref = 1;
  st[2].when2 = SLUICE_WHEN_ALLOWED;
  st[2].ref2 = 0;
  st[2].fold = SLUICE_FOLD_NOTE;
  for (i = 0; i < 2; i++) {
    cr_assert_eq(sluice_program_run(&p, rec, rec, SEC, &r), SLUICE_OK);
    cr_assert(r.allowed, "notes never deny");
  }
  /* i = 0: count 1 of 2, not reached: step 2 ran.  i = 1: reached: step 1
  ** ran, step 2 did not. */
  cr_assert_eq(r.ran, 0x3u);
  cr_assert(r.v[1].flags & SLUICE_V_TRIPPED);
  cr_assert_neq(rec[2].w[0], 0, "the first run tripped record 2");
}

/* After a gate's denial an ALWAYS step still runs and a PASSED one does
** not, whichever the step's second condition: ALWAYS (none) or a real one
** (the guard answers the first shape without its general path). */
Test(program, always_and_passed_after_a_denial) {
  static const sluice_window_params w = {1, MIN};
  static const sluice_key k[5] = {
      {"g{i}", 4}, {"a{i}", 4}, {"p{i}", 4}, {"b{i}", 4}, {"c{i}", 4}};
  sluice_step st[5];
  sluice_program p = {5, k, 5, st};
  sluice_state rec[5];
  sluice_program_result r;
  int i;
  memset(st, 0, sizeof st);
  memset(rec, 0, sizeof rec);
  st[0] = (sluice_step){SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, 0, 1, &w, 1};
  for (i = 1; i < 5; i++) {
    st[i] = (sluice_step){SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, i, 1, &w, 1};
    st[i].fold = SLUICE_FOLD_NOTE;
  }
  st[2].when = SLUICE_WHEN_PASSED;
  st[3].when2 = SLUICE_WHEN_DENIED; /* ALWAYS, and step 0 denied */
  st[3].ref2 = 0;
  st[4].when = SLUICE_WHEN_PASSED;
  st[4].when2 = SLUICE_WHEN_DENIED;
  st[4].ref2 = 0;
  cr_assert_eq(sluice_program_run(&p, rec, rec, SEC, &r), SLUICE_OK);
  cr_assert(r.allowed);
  cr_assert_eq(r.ran, 0x7u, "no denial: steps 0-2, not the DENIED ones");
  cr_assert_eq(sluice_program_run(&p, rec, rec, SEC, &r), SLUICE_OK);
  cr_assert_not(r.allowed);
  cr_assert_eq(r.denied_by, 0);
  cr_assert_eq(r.ran, 0xbu, "denied: 0, 1 (ALWAYS) and 3, not 2 or 4");
}

Test(program, validation) {
  sluice_step st[5];
  sluice_program p = std_prog(st, 1);
  sluice_key mixed[4];
  sluice_state rec[4];
  sluice_program_result r;
  memset(rec, 0, sizeof rec);
  cr_assert_eq(sluice_program_validate(&p), SLUICE_OK);
  cr_assert_eq(sluice_program_validate(NULL), SLUICE_EINVAL);
  st[2].ref = 2; /* a guard looking at itself */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p = std_prog(st, 1);
  st[3].when2 = 9;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p = std_prog(st, 1);
  st[1].ttl_from = SLUICE_TTL_OF(0); /* only leases take a TTL */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p = std_prog(st, 1);
  st[3].ttl_from = SLUICE_TTL_OF(3); /* not an earlier step */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p = std_prog(st, 1);
  st[1].key = 3; /* past the record table */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p = std_prog(st, 1);
  st[4].key = 1; /* a bucket record stepped as a penalty */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p = std_prog(st, 1);
  {
    /* The strike with other parameters than the check on the same box: the
    ** record's expiry would depend on which step is asked. */
    sluice_penalty_params other = pen;
    other.strike_threshold = 4;
    st[4].params = &other;
    cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
    other = pen; /* equal values in another struct are fine */
    cr_assert_eq(sluice_program_validate(&p), SLUICE_OK);
  }
  p = std_prog(st, 1);
  p.nsteps = 2; /* the notice record is never used */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p = std_prog(st, 1);
  st[3].fold = 2;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p = std_prog(st, 100); /* more than the key bucket can ever hold */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_ERANGE);
  p = std_prog(st, 1);
  memcpy(mixed, std_keys, sizeof mixed);
  mixed[3] = (sluice_key){"ra:{u}:k", 8};
  p.keys = mixed;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EKEY);
  mixed[3] = mixed[0]; /* the same key twice */
  cr_assert_eq(sluice_program_run(&p, rec, rec, SEC, &r), SLUICE_EKEY);
  p = std_prog(st, 1);
  p.nsteps = SLUICE_PROGRAM_STEPS + 1;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
}

/* Validation keeps the last valid shape a thread saw and checks only the
** keys of a program of the same bytes: no change may hide behind it. */
Test(program, a_kept_shape_never_hides_a_change) {
  sluice_step st[5];
  sluice_gcra_params b[2] = {{10, SEC, 10}, {2, SEC, 2}};
  sluice_penalty_params pp = pen;
  sluice_program p = std_prog(st, 1);
  sluice_key five[5], mixed[4];
  st[1].params = b;
  st[0].params = st[4].params = &pp;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_OK);
  cr_assert_eq(sluice_program_validate(&p), SLUICE_OK, "the same again");
  b[1].rate = 0; /* in place: the same pointer, other bytes */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  b[1].rate = 2;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_OK);
  pp.strike_threshold = 0;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  pp = pen;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_OK);
  /* The keys are checked every time. */
  memcpy(mixed, std_keys, sizeof mixed);
  mixed[3] = (sluice_key){"ra:{u}:k", 8};
  p.keys = mixed;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EKEY);
  mixed[3] = mixed[0];
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EKEY, "a key twice");
  p.keys = std_keys;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_OK);
  /* The same steps over one record more: that record is never used. */
  memcpy(five, std_keys, sizeof std_keys);
  five[4] = (sluice_key){"xx:{t}:y", 8};
  p.keys = five;
  p.nkeys = 5;
  cr_assert_eq(sluice_program_validate(&p), SLUICE_EINVAL);
  p.keys = std_keys;
  p.nkeys = 4;
  st[1].arg = 100; /* a step's own field */
  cr_assert_eq(sluice_program_validate(&p), SLUICE_ERANGE);
}

/* Property: with nothing denied by a gate, a program is its ops in order. */
Test(program, equals_its_ops_in_order) {
  static const sluice_window_params w = {5, 3 * SEC};
  static const sluice_distinct_params dp = {4, 10 * SEC};
  static const sluice_lease_params lp = {2, 5 * SEC};
  static const sluice_key k[5] = {
      {"a{x}", 4}, {"b{x}", 4}, {"c{x}", 4}, {"d{x}", 4}, {"e{x}", 4}};
  rng g = {42};
  sluice_state prog_rec[5], op_rec[5];
  int round;
  memset(prog_rec, 0, sizeof prog_rec);
  memset(op_rec, 0, sizeof op_rec);
  for (round = 0; round < 2000; round++) {
    sluice_step st[4];
    sluice_program p = {5, k, 4, st};
    sluice_program_result r;
    int64_t now = SEC + round * (SEC / 7);
    int i;
    memset(st, 0, sizeof st);
    st[0] = (sluice_step){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, buckets,
                          rng_range(&g, 1, 3)};
    st[1] = (sluice_step){SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, 1, 1, &w, 1};
    st[2] = (sluice_step){SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 2, 1, &dp, 0,
                          rng_next(&g)};
    st[3] = (sluice_step){SLUICE_ALGO_LEASE,
                          rng_range(&g, 0, 1) ? SLUICE_OP_ACQUIRE
                                              : SLUICE_OP_LEASE_RELEASE,
                          3, 2, &lp, 0, (uint64_t)rng_range(&g, 1, 3)};
    for (i = 0; i < 4; i++)
      st[i].fold = SLUICE_FOLD_NOTE; /* no gate: nothing is undone */
    cr_assert_eq(sluice_program_run(&p, prog_rec, prog_rec, now, &r),
                 SLUICE_OK);
    cr_assert_eq(r.ran, 0xfu);
    for (i = 0; i < 4; i++) {
      sluice_op op;
      sluice_verdict v;
      sluice__program_step_op(&p, i, &op);
      cr_assert_eq(sluice__op_step(&op, op_rec + st[i].key,
                                  op_rec + st[i].key, now, &v),
                   SLUICE_OK);
      assert_verdict_eq(v, r.v[i], "round %d step %d", round, i);
    }
    cr_assert_eq(memcmp(prog_rec, op_rec, sizeof op_rec), 0, "round %d",
                 round);
    for (i = 0; i < 5; i++) {
      sluice_op op;
      int s = i < 3 ? i : 3;
      sluice__program_step_op(&p, s, &op);
      cr_assert_eq(sluice_program_expiry(&p, i, &prog_rec[i]),
                   sluice__op_expiry(&op, i - st[s].key, &prog_rec[i]));
    }
  }
}

/* Each record's expiry is the one its own step's op gives it, a group's
** later record included (the key bucket is record 1 of its step), after
** a run that wrote every record: box, both buckets, notice. */
Test(program, expiry_of_every_record) {
  sluice_step st[5];
  sluice_program p = std_prog(st, 1);
  sluice_state rec[4];
  sluice_program_result r;
  sluice_op op;
  int64_t now = 100 * SEC;
  int i;
  memset(rec, 0, sizeof rec);
  for (i = 0; i < 3; i++) /* the third is refused: a notice, a strike */
    cr_assert_eq(sluice_program_run(&p, rec, rec, now, &r), SLUICE_OK);
  cr_assert_not(r.allowed);
  for (i = 0; i < 4; i++) {
    int s = i == 0 ? 0 : i < 3 ? 1 : 3;
    sluice__program_step_op(&p, s, &op);
    if (i == 1 || i == 2) /* both buckets were charged */
      cr_assert_gt(sluice_program_expiry(&p, i, &rec[i]), now, "record %d",
                   i);
    cr_assert_eq(sluice_program_expiry(&p, i, &rec[i]),
                 sluice__op_expiry(&op, i - st[s].key, &rec[i]), "record %d",
                 i);
  }
  cr_assert_eq(sluice_program_expiry(&p, 4, &rec[3]), 0); /* no record 4 */
}

/* ------------------------------------------------------- through stores */

static sluice_clock *clk; /* manual, at 1 s: xGet reads at its time */

static sluice_limiter *open_store(const sluice_backend *b) {
  sluice_limiter_options o;
  sluice_limiter *l;
  if (!clk)
    cr_assert_eq(sluice_clock_manual(SEC, &clk), SLUICE_OK);
  memset(&o, 0, sizeof o);
  o.backend = b;
  o.clock = clk;
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_OK);
  return l;
}

/* The same trace through mem's xRun and the pure run. */
Test(program, stores_agree_with_the_pure_run) {
  sluice_limiter *mem = open_store(sluice_backend_find("mem"));
  sluice_step st[5];
  sluice_program p = std_prog(st, 1);
  sluice_state rec[4];
  int i;
  memset(rec, 0, sizeof rec);
  for (i = 0; i < 40; i++) {
    int64_t now = SEC + i * (SEC / 5);
    sluice_program_result a, b;
    int j;
    cr_assert_eq(sluice_program_run(&p, rec, rec, now, &a), SLUICE_OK);
    cr_assert_eq(sluice_limiter_decide(mem, 1, &p, now, &b, NULL), SLUICE_OK);
    cr_assert_eq(a.ran, b.ran, "step %d", i);
    cr_assert_eq(a.denied_by, b.denied_by);
    for (j = 0; j < 5; j++) {
      assert_verdict_eq(a.v[j], b.v[j], "mem step %d/%d", i, j);
    }
  }
  sluice_clock_set(clk, SEC + 39 * (SEC / 5));
  for (i = 0; i < 4; i++) {
    sluice_state s;
    int64_t e;
    int rc = sluice_limiter_get(mem, std_keys[i].data, std_keys[i].len, &s,
                                &e);
    if (sluice_program_expiry(&p, i, &rec[i]) <= SEC + 39 * (SEC / 5))
      continue; /* fresh again: the store dropped it */
    cr_assert_eq(rc, SLUICE_OK, "record %d", i);
    cr_assert(st_eq(&s, &rec[i]), "record %d: %llx %llx vs %llx %llx", i,
              (unsigned long long)s.w[0], (unsigned long long)s.w[1],
              (unsigned long long)rec[i].w[0], (unsigned long long)rec[i].w[1]);
  }
  sluice_limiter_close(mem);
}

Test(program, run_many_keeps_each_result) {
  sluice_limiter *mem = open_store(sluice_backend_find("mem"));
  sluice_step st[5], bad[5];
  sluice_program ps[3];
  sluice_program_result res[3];
  int rcs[3];
  ps[0] = std_prog(st, 1);
  ps[1] = std_prog(bad, 1);
  bad[1].key = 9;
  ps[2] = std_prog(st, 2);
  cr_assert_eq(sluice_limiter_decide(mem, 3, ps, SLUICE_NOW, res, rcs), SLUICE_OK);
  cr_assert_eq(rcs[0], SLUICE_OK);
  cr_assert_eq(rcs[1], SLUICE_EINVAL);
  cr_assert_eq(rcs[2], SLUICE_OK);
  cr_assert(res[0].allowed);
  cr_assert(!res[2].allowed, "the key bucket (2) had 1 left");
  cr_assert_eq(res[2].denied_by, 1);
  sluice_limiter_close(mem);
}

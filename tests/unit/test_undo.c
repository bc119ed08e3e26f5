/*
** The per-record undo a lock-free store runs when its rollback loses a CAS
** race (sluice__job_undo): taking one write back out of a record that
** others have written since must leave exactly what their writes alone
** would have left (the invariant "a denial leaves no charge behind"), in
** the regimes where that is decidable from the record, and never less.
**
** Method: pre --(ours)--> post --(others)--> cur, and separately
** pre --(others)--> want; then undo(pre, post, cur) must equal want.
*/
#include "unit.h"
#include "algo/algo_int.h"
#include "algo/program_int.h"
#include "job.h"

#define ROUNDS 4000

/* Others' charges after ours, all at `now` (a contended bucket).  Run on
** `post` it records which were admitted (*mask); run on `pre` with a mask
** it replays just those: the history without our charge, in which each of
** them is admitted too (there is more room). */
static sluice_state gcra_others(const sluice_gcra_params *p, sluice_state s,
                                int64_t now, uint64_t seed, unsigned *mask,
                                int replay) {
  rng o = {seed};
  int k, n = (int)rng_range(&o, 0, 6);
  for (k = 0; k < n; k++) {
    sluice_verdict v;
    sluice_state out;
    int64_t c = rng_range(&o, 1, p->burst);
    if (replay && !((*mask >> k) & 1u))
      continue;
    cr_assert_eq(sluice__gcra_step(p, &s, now, SLUICE_OP_CONSUME, c, &out, &v),
                 SLUICE_OK);
    if (replay)
      cr_assert(v.allowed, "admitted with our charge, denied without it");
    else if (v.allowed)
      *mask |= 1u << k;
    s = out;
  }
  return s;
}

static sluice_gcra_params rand_gcra(rng *r) {
  sluice_gcra_params p;
  p.rate = rng_range(r, 1, 1000);
  p.period_ns = rng_range(r, 1, 10) * SEC;
  p.burst = rng_range(r, 1, 5000);
  return p;
}

Test(undo, gcra_takes_out_exactly_the_charge) {
  rng r = {11};
  int i, undone = 0;
  for (i = 0; i < ROUNDS; i++) {
    sluice_gcra_params p = rand_gcra(&r);
    int64_t now = rng_range(&r, 1, 1000) * SEC + rng_range(&r, 0, SEC);
    sluice_state pre, post, cur, want, got;
    sluice_verdict v;
    uint64_t seed = rng_next(&r);
    /* pre: anywhere from full (fresh) to deep in debt. */
    pre = zst();
    if (rng_range(&r, 0, 3)) {
      sluice_state t;
      cr_assert_eq(sluice__gcra_step(&p, &pre, now - rng_range(&r, 0, SEC),
                                    SLUICE_OP_CONSUME,
                                    rng_range(&r, 1, p.burst), &t, &v),
                   SLUICE_OK);
      pre = t;
    }
    cr_assert_eq(sluice__gcra_step(&p, &pre, now, SLUICE_OP_CONSUME,
                                  rng_range(&r, 1, p.burst), &post, &v),
                 SLUICE_OK);
    if (!v.allowed)
      continue;
    {
      unsigned mask = 0;
      cur = gcra_others(&p, post, now, seed, &mask, 0);
      want = gcra_others(&p, pre, now, seed, &mask, 1);
    }
    cr_assert(sluice__gcra_undo(&p, &pre, &post, &cur, now, &got));
    /* The same bucket: equal TATs, where a TAT at or before now is a full
    ** bucket whatever its value (compared scaled: exact). */
    {
      __int128 n = (__int128)now * p.rate;
      __int128 a = (__int128)got.w[0] * p.rate + got.w[1];
      __int128 b = (__int128)want.w[0] * p.rate + want.w[1];
      cr_assert_eq(a > n ? a : n, b > n ? b : n,
                   "round %d: undo left a different bucket", i);
    }
    undone++;
  }
  cr_assert_gt(undone, ROUNDS / 2);
}

Test(undo, gcra_without_a_charge_or_after_a_reset_changes_nothing) {
  sluice_gcra_params p = {10, SEC, 20};
  sluice_state pre = zst(), post, cur = zst(), got;
  sluice_verdict v;
  /* A PEEK writes nothing: there is nothing to take out. */
  cr_assert_eq(sluice__gcra_step(&p, &pre, 5 * SEC, SLUICE_OP_PEEK, 3, &post,
                                &v),
               SLUICE_OK);
  cr_assert_not(sluice__gcra_undo(&p, &pre, &post, &post, 5 * SEC, &got));
  /* A record below what we wrote was reset (expired and recreated). */
  cr_assert_eq(sluice__gcra_step(&p, &pre, 5 * SEC, SLUICE_OP_CONSUME, 3,
                                &post, &v),
               SLUICE_OK);
  cr_assert_not(sluice__gcra_undo(&p, &pre, &post, &cur, 5 * SEC, &got));
}

static sluice_state win_others(int algo, const sluice_window_params *p,
                               sluice_state s, int64_t now, uint64_t seed) {
  rng o = {seed};
  int k, n = (int)rng_range(&o, 0, 5);
  for (k = 0; k < n; k++) {
    sluice_verdict v;
    sluice_state out;
    int64_t c = rng_range(&o, 1, 3);
    int rc = algo == SLUICE_ALGO_SWINDOW
                 ? sluice__swindow_step(p, &s, now, SLUICE_OP_COUNT, c, &out, &v)
                 : sluice__fwindow_step(p, &s, now, SLUICE_OP_COUNT, c, &out,
                                       &v);
    cr_assert_eq(rc, SLUICE_OK);
    s = out;
  }
  return s;
}

/* Others in the same window, or (sliding) in the next one. */
static void windows(int algo) {
  rng r = {algo};
  int i, undone = 0;
  for (i = 0; i < ROUNDS; i++) {
    sluice_window_params p = {rng_range(&r, 5, 100), rng_range(&r, 1, 60) * SEC};
    int64_t now = rng_range(&r, 100, 10000) * SEC + rng_range(&r, 0, SEC);
    int64_t later = now;
    sluice_state pre = zst(), post, cur, want, got;
    sluice_verdict v;
    uint64_t seed = rng_next(&r);
    if (rng_range(&r, 0, 2))
      pre = win_others(algo, &p, pre, now - rng_range(&r, 0, p.window_ns),
                       rng_next(&r));
    cr_assert_eq(algo == SLUICE_ALGO_SWINDOW
                     ? sluice__swindow_step(&p, &pre, now, SLUICE_OP_COUNT, 2,
                                           &post, &v)
                     : sluice__fwindow_step(&p, &pre, now, SLUICE_OP_COUNT, 2,
                                           &post, &v),
                 SLUICE_OK);
    if (algo == SLUICE_ALGO_SWINDOW && rng_range(&r, 0, 1))
      later = now + p.window_ns; /* the record rolls over once */
    cur = win_others(algo, &p, post, later, seed);
    want = win_others(algo, &p, pre, later, seed);
    cr_assert(algo == SLUICE_ALGO_SWINDOW
                  ? sluice__swindow_undo(&p, &pre, &post, &cur, now, &got)
                  : sluice__fwindow_undo(&p, &pre, &post, &cur, now, &got),
              "round %d", i);
    /* Same estimate at `later` for every further count. */
    {
      sluice_verdict a, b;
      sluice_state o;
      int64_t c = rng_range(&r, 1, p.limit);
      int (*step)(const sluice_window_params *, const sluice_state *, int64_t,
                  int, int64_t, sluice_state *, sluice_verdict *) =
          algo == SLUICE_ALGO_SWINDOW ? sluice__swindow_step
                                      : sluice__fwindow_step;
      cr_assert_eq(step(&p, &got, later, SLUICE_OP_PEEK, c, &o, &a), SLUICE_OK);
      cr_assert_eq(step(&p, &want, later, SLUICE_OP_PEEK, c, &o, &b), SLUICE_OK);
      cr_assert_eq(a.remaining, b.remaining, "round %d: remaining %lld vs %lld",
                   i, (long long)a.remaining, (long long)b.remaining);
      cr_assert_eq(a.allowed, b.allowed, "round %d", i);
    }
    undone++;
  }
  cr_assert_eq(undone, ROUNDS);
}

Test(undo, swindow_takes_out_its_count) { windows(SLUICE_ALGO_SWINDOW); }
Test(undo, fwindow_takes_out_its_count) { windows(SLUICE_ALGO_FWINDOW); }

Test(undo, fwindow_rolled_past_keeps_the_record) {
  sluice_window_params p = {10, 10 * SEC};
  sluice_state pre = zst(), post, cur, got;
  sluice_verdict v;
  cr_assert_eq(sluice__fwindow_step(&p, &pre, 5 * SEC, SLUICE_OP_COUNT, 2,
                                   &post, &v),
               SLUICE_OK);
  cr_assert_eq(sluice__fwindow_step(&p, &post, 15 * SEC, SLUICE_OP_COUNT, 1,
                                   &cur, &v),
               SLUICE_OK);
  cr_assert_not(sluice__fwindow_undo(&p, &pre, &post, &cur, 5 * SEC, &got));
}

Test(undo, lease_frees_only_its_own_slot) {
  sluice_lease_params p = {1, 10 * SEC};
  sluice_state pre = zst(), post, other, got;
  sluice_verdict v;
  cr_assert_eq(sluice__lease_step(&p, &pre, SEC, SLUICE_OP_ACQUIRE, 7, &post,
                                 &v),
               SLUICE_OK);
  cr_assert(sluice__lease_undo(&p, &pre, &post, &post, SEC, &got));
  cr_assert(st_eq(&got, &(sluice_state){{0, 0}}));
  /* Ours expired and another holder took the slot: not ours to free. */
  cr_assert_eq(sluice__lease_step(&p, &post, 20 * SEC, SLUICE_OP_ACQUIRE, 9,
                                 &other, &v),
               SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_not(sluice__lease_undo(&p, &pre, &post, &other, SEC, &got));
  /* A renewal of a slot already ours gives nothing back. */
  cr_assert_not(sluice__lease_undo(&p, &post, &post, &post, SEC, &got));
}

/* Through the job: record i of a program maps to its own step's algorithm
** and parameters (tenant and key buckets differ). */
Test(undo, program_records_use_their_own_steps_parameters) {
  sluice_gcra_params gp[2] = {{100, SEC, 1000}, {1, SEC, 5}};
  sluice_window_params wp = {3, 3600 * SEC};
  sluice_key keys[3] = {KEY("{t}tb"), KEY("{t}kb"), KEY("{t}cap")};
  sluice_step steps[2];
  sluice_program prog = {3, keys, 2, steps};
  sluice_program_result res;
  sluice__job job;
  sluice_state pre[3], post[3], cur[3], got;
  int64_t now = 50 * SEC;
  int i;
  memset(steps, 0, sizeof steps);
  steps[0].algo = SLUICE_ALGO_GCRA;
  steps[0].kind = SLUICE_OP_CONSUME;
  steps[0].key = 0;
  steps[0].nkeys = 2;
  steps[0].params = gp;
  steps[0].arg = 2;
  steps[0].when = SLUICE_WHEN_ALWAYS;
  steps[0].fold = SLUICE_FOLD_GATE;
  steps[1].algo = SLUICE_ALGO_FWINDOW;
  steps[1].kind = SLUICE_OP_CONSUME;
  steps[1].key = 2;
  steps[1].nkeys = 1;
  steps[1].params = &wp;
  steps[1].arg = 1;
  steps[1].when = SLUICE_WHEN_PASSED;
  steps[1].fold = SLUICE_FOLD_GATE;
  cr_assert_eq(sluice_program_validate(&prog), SLUICE_OK);
  for (i = 0; i < 3; i++)
    pre[i] = zst();
  sluice__job_program(&job, &prog, &res);
  cr_assert_eq(sluice__job_run(&job, pre, post, now), SLUICE_OK);
  cr_assert(res.allowed);
  /* Another run on top, then each record's undo leaves one run's worth. */
  cr_assert_eq(sluice__job_run(&job, post, cur, now), SLUICE_OK);
  cr_assert(res.allowed);
  for (i = 0; i < 3; i++) {
    cr_assert(sluice__job_undo(&job, i, &pre[i], &post[i], &cur[i], now, &got),
              "record %d", i);
    cr_assert(st_eq(&got, &post[i]), "record %d: not one run's worth", i);
  }
}

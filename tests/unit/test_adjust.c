/*
** ADJUST (lib/algo/adjust.c): settling a charge after the fact.  By hand:
** a refund gives back exactly its points and never past full, a charge
** never denies and leaves at most one burst (or limit) of debt, a window
** refunds only while the settled charge's window still weighs.  A random
** run checks the bounds after every step; the undo of a refund (shm's
** rollback) puts it back; the shape checks refuse nonsense.
*/
#include "sluice/backend.h"
#include "unit.h"
#include "job.h"
#include "../common/one_step.h"

#define S 1000000000LL

static const char kname[] = "k";

static int step(int algo, int kind, const void *p, int nkeys, sluice_state *s,
                int64_t now, int64_t arg, uint64_t id, sluice_verdict *v) {
  sluice_key k[2] = {{kname, 1}, {"{x}", 3}};
  sluice_op op = {0};
  sluice_state out[2];
  int rc;
  op.algo = algo;
  op.kind = kind;
  op.nkeys = nkeys;
  op.keys = k;
  op.params = p;
  op.arg = arg;
  op.id = id;
  if (nkeys == 2) { /* one hash tag */
    k[0].data = "{x}a";
    k[0].len = 4;
    k[1].data = "{x}b";
    k[1].len = 4;
  }
  rc = sluice__op_step(&op, s, out, now, v);
  if (rc == SLUICE_OK)
    memcpy(s, out, sizeof(sluice_state) * (size_t)nkeys);
  return rc;
}

static sluice_verdict g(const sluice_gcra_params *p, sluice_state *s,
                        int64_t now, int kind, int64_t arg) {
  sluice_verdict v;
  cr_assert_eq(step(SLUICE_ALGO_GCRA, kind, p, 1, s, now, arg, 0, &v),
               SLUICE_OK);
  return v;
}

/* 10 points, one per second. */
static const sluice_gcra_params G = {1, S, 10};

Test(adjust, gcra_refund_gives_back_exactly) {
  sluice_state s = zst();
  int64_t t = 1000 * S;
  sluice_verdict v = g(&G, &s, t, SLUICE_OP_CONSUME, 8);
  cr_assert_eq(v.remaining, 2);
  v = g(&G, &s, t, SLUICE_OP_ADJUST, -5);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 7);
  cr_assert_eq(v.reset_ns, 3 * S, "3 points short of full");
  cr_assert(g(&G, &s, t, SLUICE_OP_CONSUME, 7).allowed);
  cr_assert_not(g(&G, &s, t, SLUICE_OP_CONSUME, 1).allowed);
}

Test(adjust, gcra_refund_never_past_full) {
  sluice_state s = zst(), before;
  int64_t t = 1000 * S;
  sluice_verdict v = g(&G, &s, t, SLUICE_OP_ADJUST, -5);
  cr_assert_eq(v.remaining, 10);
  cr_assert(s.w[0] == 0 && s.w[1] == 0, "a full bucket is left as it is");
  g(&G, &s, t, SLUICE_OP_CONSUME, 3);
  v = g(&G, &s, t + S, SLUICE_OP_ADJUST, -10); /* 1 s later: 2 owed */
  cr_assert_eq(v.remaining, 10);
  cr_assert_eq(v.reset_ns, 0);
  cr_assert_eq(sluice__gcra_step(&G, &s, t + S, SLUICE_OP_PEEK, 0, &before, &v),
               SLUICE_OK);
  cr_assert_eq(v.remaining, 10);
  /* Still exactly one burst: 11 points never fit. */
  cr_assert(g(&G, &s, t + S, SLUICE_OP_CONSUME, 10).allowed);
  cr_assert_not(g(&G, &s, t + S, SLUICE_OP_CONSUME, 1).allowed);
}

Test(adjust, gcra_charge_never_denies_and_debt_is_one_burst) {
  sluice_state s = zst();
  int64_t t = 1000 * S;
  sluice_verdict v;
  g(&G, &s, t, SLUICE_OP_CONSUME, 10);
  v = g(&G, &s, t, SLUICE_OP_ADJUST, 6);
  cr_assert(v.allowed, "a charge never turns the decision around");
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.reset_ns, 16 * S);
  v = g(&G, &s, t, SLUICE_OP_ADJUST, 10); /* 16 + 10 > 20: capped */
  cr_assert(v.allowed);
  cr_assert_eq(v.reset_ns, 20 * S, "at most one burst of debt");
  v = g(&G, &s, t, SLUICE_OP_CONSUME, 1);
  cr_assert_not(v.allowed);
  cr_assert_eq(v.retry_after_ns, 11 * S, "the debt (10) and the point");
  /* 11 s later one point fits, the next does not. */
  cr_assert(g(&G, &s, t + 11 * S, SLUICE_OP_CONSUME, 1).allowed);
  cr_assert_not(g(&G, &s, t + 11 * S, SLUICE_OP_CONSUME, 1).allowed);
}

Test(adjust, gcra_charge_on_a_full_bucket_is_a_late_consume) {
  sluice_state a = zst(), b = zst();
  int64_t t = 5000 * S + 123;
  sluice_verdict va = g(&G, &a, t, SLUICE_OP_ADJUST, 7);
  sluice_verdict vb = g(&G, &b, t, SLUICE_OP_CONSUME, 7);
  cr_assert(memcmp(&a, &b, sizeof a) == 0);
  cr_assert_eq(va.remaining, vb.remaining);
  cr_assert_eq(va.reset_ns, vb.reset_ns);
}

Test(adjust, gcra_group_adjusts_every_bucket) {
  sluice_gcra_params p[2] = {{1, S, 10}, {1, S, 4}};
  sluice_state s[2];
  sluice_verdict v;
  int64_t t = 1000 * S;
  memset(s, 0, sizeof s);
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, p, 2, s, t, 4, 0, &v),
               SLUICE_OK);
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_ADJUST, p, 2, s, t, -3, 0, &v),
               SLUICE_OK);
  cr_assert_eq(v.binding, 1);
  cr_assert_eq(v.remaining, 3);
  cr_assert_eq(v.limit, 4);
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_ADJUST, p, 2, s, t, 4, 0, &v),
               SLUICE_OK);
  cr_assert_eq(v.binding, 1);
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.reset_ns, 5 * S, "the small bucket: 1 + 4 points owed");
  /* ... and the big one was charged the same 5: 5 left. */
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, p, 1, s, t, 0, 0, &v),
               SLUICE_OK);
  cr_assert_eq(v.remaining, 5);
}

static sluice_verdict w(int algo, const sluice_window_params *p,
                        sluice_state *s, int64_t now, int kind, int64_t arg,
                        int64_t at) {
  sluice_verdict v;
  cr_assert_eq(step(algo, kind, p, 1, s, now, arg, (uint64_t)at, &v),
               SLUICE_OK);
  return v;
}

/* 10 per minute. */
static const sluice_window_params WP = {10, 60 * S};

Test(adjust, fixed_refund_only_in_the_charge_window) {
  sluice_state s = zst();
  int64_t t0 = 600 * S + 5 * S; /* window [600 s, 660 s) */
  sluice_verdict v;
  w(SLUICE_ALGO_FWINDOW, &WP, &s, t0, SLUICE_OP_CONSUME, 8, 0);
  v = w(SLUICE_ALGO_FWINDOW, &WP, &s, t0 + S, SLUICE_OP_ADJUST, -5, t0);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 7);
  v = w(SLUICE_ALGO_FWINDOW, &WP, &s, t0 + S, SLUICE_OP_ADJUST, -9, t0);
  cr_assert_eq(v.remaining, 10, "never below zero");
  cr_assert_eq(s.w[1], 0);
  /* A charge made in the previous window is refunded by nothing. */
  w(SLUICE_ALGO_FWINDOW, &WP, &s, t0, SLUICE_OP_CONSUME, 6, 0);
  w(SLUICE_ALGO_FWINDOW, &WP, &s, t0 + 60 * S, SLUICE_OP_CONSUME, 6, 0);
  v = w(SLUICE_ALGO_FWINDOW, &WP, &s, t0 + 61 * S, SLUICE_OP_ADJUST, -6, t0);
  cr_assert_eq(v.remaining, 4, "the new window keeps its own count");
}

Test(adjust, fixed_charge_up_to_twice_the_limit) {
  sluice_state s = zst();
  int64_t t0 = 600 * S;
  sluice_verdict v;
  w(SLUICE_ALGO_FWINDOW, &WP, &s, t0, SLUICE_OP_CONSUME, 9, 0);
  v = w(SLUICE_ALGO_FWINDOW, &WP, &s, t0, SLUICE_OP_ADJUST, 10, t0);
  cr_assert(v.allowed);
  cr_assert_eq(s.w[1], 19);
  cr_assert_eq(v.remaining, 0);
  w(SLUICE_ALGO_FWINDOW, &WP, &s, t0, SLUICE_OP_ADJUST, 10, t0);
  cr_assert_eq(s.w[1], 20, "at most one limit of debt");
  v = w(SLUICE_ALGO_FWINDOW, &WP, &s, t0, SLUICE_OP_CONSUME, 1, 0);
  cr_assert_not(v.allowed);
  cr_assert_eq(v.retry_after_ns, 60 * S);
}

Test(adjust, sliding_refund_from_the_charge_window) {
  sluice_state s = zst();
  int64_t t0 = 600 * S + 30 * S; /* window [600 s, 660 s) */
  sluice_verdict v;
  w(SLUICE_ALGO_SWINDOW, &WP, &s, t0, SLUICE_OP_CONSUME, 8, 0);
  v = w(SLUICE_ALGO_SWINDOW, &WP, &s, t0, SLUICE_OP_ADJUST, -3, t0);
  cr_assert_eq(s.w[1] & 0xffffffffu, 5);
  cr_assert_eq(v.remaining, 5);
  /* Rolled once: the charge is the previous window's count. */
  v = w(SLUICE_ALGO_SWINDOW, &WP, &s, t0 + 60 * S, SLUICE_OP_ADJUST, -4, t0);
  cr_assert_eq(s.w[1] >> 32, 1, "taken from the previous window");
  cr_assert_eq(s.w[1] & 0xffffffffu, 0);
  cr_assert_eq(v.remaining, 9, "10 - 1 * 30/60, floored");
  /* Rolled twice: it no longer weighs, nothing to take. */
  w(SLUICE_ALGO_SWINDOW, &WP, &s, t0 + 120 * S, SLUICE_OP_CONSUME, 2, 0);
  w(SLUICE_ALGO_SWINDOW, &WP, &s, t0 + 120 * S, SLUICE_OP_ADJUST, -2, t0);
  cr_assert_eq(s.w[1] & 0xffffffffu, 2);
}

Test(adjust, sliding_charge_up_to_twice_the_limit) {
  sluice_state s = zst();
  int64_t t0 = 600 * S;
  sluice_verdict v;
  w(SLUICE_ALGO_SWINDOW, &WP, &s, t0, SLUICE_OP_CONSUME, 10, 0);
  /* Next window, half way: the previous 10 weigh 5, so the current one
  ** may count up to 15 before the estimate passes 20. */
  v = w(SLUICE_ALGO_SWINDOW, &WP, &s, t0 + 90 * S, SLUICE_OP_ADJUST, 10, t0);
  cr_assert(v.allowed);
  cr_assert_eq(s.w[1] & 0xffffffffu, 10);
  w(SLUICE_ALGO_SWINDOW, &WP, &s, t0 + 90 * S, SLUICE_OP_ADJUST, 10, t0);
  cr_assert_eq(s.w[1] & 0xffffffffu, 15);
  cr_assert_eq(v.remaining, 0);
}

Test(adjust, shape_checks) {
  sluice_state s = zst();
  sluice_verdict v;
  static const sluice_lease_params lp = {1, S};
  static const sluice_penalty_params pp = {3, S, {S, S, S}, S};
  static const sluice_distinct_params dp = {10, S};
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_ADJUST, &G, 1, &s, S, 0, 0, &v),
               SLUICE_ERANGE, "nothing to settle");
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_ADJUST, &G, 1, &s, S, 11, 0,
                    &v),
               SLUICE_ERANGE, "more than a burst");
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_ADJUST, &G, 1, &s, S, -11, 0,
                    &v),
               SLUICE_ERANGE, "more than a burst back");
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_ADJUST, &G, 1, &s, S, INT64_MIN,
                    0, &v),
               SLUICE_ERANGE);
  cr_assert_eq(step(SLUICE_ALGO_FWINDOW, SLUICE_OP_ADJUST, &WP, 1, &s, S, -1,
                    (uint64_t)INT64_MAX + 1, &v),
               SLUICE_ERANGE, "a time past INT64_MAX");
  cr_assert_eq(step(SLUICE_ALGO_SWINDOW, SLUICE_OP_ADJUST, &WP, 1, &s, S, 11,
                    0, &v),
               SLUICE_ERANGE);
  cr_assert_eq(step(SLUICE_ALGO_LEASE, SLUICE_OP_ADJUST, &lp, 1, &s, S, 1, 1,
                    &v),
               SLUICE_EINVAL);
  cr_assert_eq(step(SLUICE_ALGO_PENALTY, SLUICE_OP_ADJUST, &pp, 1, &s, S, 1, 0,
                    &v),
               SLUICE_EINVAL);
  cr_assert_eq(step(SLUICE_ALGO_DISTINCT, SLUICE_OP_ADJUST, &dp, 1, &s, S, 1,
                    0, &v),
               SLUICE_EINVAL);
  cr_assert_eq(step(SLUICE_ALGO_GCRA, SLUICE_OP_ADJUST, &G, 1, &s, S, 10, 0,
                    &v),
               SLUICE_OK, "a whole burst is fine");
}

/* Random consumes, charges and refunds: a bucket never holds more than a
** burst nor owes more than one (TAT - now <= 2 tau, at the step's time),
** and a window never counts past twice its limit by a charge. */
Test(adjust, random_bounds) {
  rng r = {42};
  sluice_gcra_params p = {3, 7 * S, 9};
  sluice_window_params wp = {7, 13 * S};
  sluice_state gs = zst(), fs = zst(), ss = zst();
  int64_t t = 100000 * S;
  int i;
  for (i = 0; i < 20000; i++) {
    int64_t a = rng_range(&r, -9, 9);
    sluice_verdict v;
    int kind = rng_next(&r) % 3 ? SLUICE_OP_ADJUST : SLUICE_OP_CONSUME;
    t += rng_range(&r, 0, 3 * S);
    if (kind == SLUICE_OP_CONSUME && a < 0)
      a = -a;
    if (a == 0)
      a = 1;
    cr_assert_eq(step(SLUICE_ALGO_GCRA, kind, &p, 1, &gs, t, a, 0, &v),
                 SLUICE_OK);
    {
      i128 tat = (i128)gs.w[0] * p.rate + gs.w[1];
      i128 ahead = tat - (i128)t * p.rate;
      cr_assert(ahead <= (i128)2 * p.burst * p.period_ns, "debt past a burst");
      cr_assert(v.remaining >= 0 && v.remaining <= p.burst);
    }
    if (a > 7)
      a = 7;
    if (a < -7)
      a = -7;
    cr_assert_eq(step(SLUICE_ALGO_FWINDOW, kind, &wp, 1, &fs, t, a,
                      (uint64_t)(t - rng_range(&r, 0, 20 * S)), &v),
                 SLUICE_OK);
    cr_assert(fs.w[1] <= 14, "count past twice the limit: %llu",
              (unsigned long long)fs.w[1]);
    cr_assert_eq(step(SLUICE_ALGO_SWINDOW, kind, &wp, 1, &ss, t, a,
                      (uint64_t)(t - rng_range(&r, 0, 20 * S)), &v),
                 SLUICE_OK);
    cr_assert((ss.w[1] & 0xffffffffu) <= 14);
  }
}

/* shm's rollback of a refund that lost its race: the undo puts the points
** back on what the record holds now (others charged meanwhile). */
Test(adjust, undo_puts_a_refund_back) {
  sluice_key k = {kname, 1};
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_ADJUST, 1, &k, &G, -4, 0};
  sluice_op fo = {SLUICE_ALGO_FWINDOW, SLUICE_OP_ADJUST, 1, &k, &WP, -4, 0};
  sluice__job j;
  sluice_step st;
  sluice_program p;
  sluice_program_result r;
  sluice_state pre = zst(), post, cur, fixed;
  sluice_verdict v;
  int64_t t = 1000 * S;
  g(&G, &pre, t, SLUICE_OP_CONSUME, 8);
  post = pre;
  g(&G, &post, t, SLUICE_OP_ADJUST, -4);
  cur = post;
  g(&G, &cur, t, SLUICE_OP_CONSUME, 2); /* another process, after it */
  one_step(&op, &st, &p);
  cr_assert_eq(sluice__job_program(&j, &p, &r), SLUICE_OK);
  cr_assert_eq(sluice__job_undo(&j, 0, &pre, &post, &cur, t, &fixed), 1);
  cr_assert_eq(sluice__gcra_step(&G, &fixed, t, SLUICE_OP_PEEK, 0, &cur, &v),
               SLUICE_OK);
  cr_assert_eq(v.remaining, 0, "8 + 2 charged, the refund taken back");
  /* A fixed window: the same. */
  fo.id = (uint64_t)t;
  pre = zst();
  w(SLUICE_ALGO_FWINDOW, &WP, &pre, t, SLUICE_OP_CONSUME, 8, 0);
  post = pre;
  w(SLUICE_ALGO_FWINDOW, &WP, &post, t, SLUICE_OP_ADJUST, -4, t);
  cur = post;
  w(SLUICE_ALGO_FWINDOW, &WP, &cur, t, SLUICE_OP_CONSUME, 1, 0);
  one_step(&fo, &st, &p);
  cr_assert_eq(sluice__job_program(&j, &p, &r), SLUICE_OK);
  cr_assert_eq(sluice__job_undo(&j, 0, &pre, &post, &cur, t, &fixed), 1);
  cr_assert_eq(fixed.w[1], 9);
}

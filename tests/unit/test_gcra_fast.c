/*
** The single-bucket GCRA step's int64 fast path against the exact 128-bit
** path, each forced: wherever the fast path decides, record and verdict are
** the same to the bit, over random and edge-case parameters, records, times
** and costs (edges: the int64 limits, the points where a product or sum
** just overflows, records past INT64_MAX, fractions at and past the rate).
** fuzz/fuzz_algo.c checks the same property (g) on fuzzed trajectories.
*/
#include "algo/algo_int.h"
#include "unit.h"
#include "op.h"

#define ROUNDS 400000

/* A value near an interesting boundary, or anywhere. */
static int64_t pick(rng *r, const int64_t *edges, size_t n, int64_t lo,
                    int64_t hi) {
  uint64_t c = rng_next(r) % 4;
  if (c == 0) /* rng_range() takes spans below 2^63 only */
    return lo < 0 ? (int64_t)rng_next(r) : rng_range(r, lo, hi);
  if (c == 1) { /* uniform in bit length: small and large alike */
    int bits = (int)(rng_next(r) % 63);
    int64_t x = (int64_t)(rng_next(r) >> (63 - bits) >> 1);
    return x < lo ? lo : x > hi ? hi : x;
  }
  {
    int64_t e = edges[rng_next(r) % n], d = rng_range(r, -3, 3);
    if (d > 0 && e > hi - d)
      return hi;
    if (d < 0 && e < lo - d)
      return lo;
    e += d;
    return e < lo ? lo : e > hi ? hi : e;
  }
}

static void random_params(rng *r, sluice_gcra_params *p) {
  static const int64_t rates[] = {1, 2, 3, 7, 100, 3000, 1000000,
                                  INT64_C(1) << 31, INT64_C(1) << 32};
  static const int64_t periods[] = {1, 7, 1000, SEC, MIN, HOUR,
                                    INT64_C(1) << 40, INT64_C(1) << 62};
  static const int64_t bursts[] = {1, 2, 200, 3000, INT64_C(1) << 20,
                                   INT64_C(1) << 40};
  do {
    p->rate = pick(r, rates, 9, 1, INT64_C(1) << 32);
    p->period_ns = pick(r, periods, 8, 1, INT64_C(1) << 62);
    p->burst = pick(r, bursts, 6, 1, INT64_C(1) << 40);
  } while (sluice__gcra_params_check(p) != SLUICE_OK);
}

/* Times and records placed where the int64 path's products and sums cross
** INT64_MAX for these parameters, as well as ordinary ones. */
static void random_case(rng *r, const sluice_gcra_params *p, int64_t *now,
                        sluice_state *s, int64_t *cost) {
  const int64_t edge_now[] = {0, 1, SEC, INT64_MAX / p->rate,
                              (INT64_MAX - p->burst * p->period_ns) / p->rate,
                              INT64_MAX, INT64_C(1) << 60};
  const int64_t edge_cost[] = {0, 1, p->burst, p->burst + 1,
                               INT64_MAX / p->period_ns,
                               INT64_C(1) << 40};
  int64_t w0, w1;
  uint64_t c = rng_next(r) % 6;
  *now = pick(r, edge_now, 7, 0, INT64_MAX);
  *cost = pick(r, edge_cost, 6, 0, INT64_C(1) << 40);
  if (c <= 2) { /* a TAT near now: the common case */
    w0 = *now > INT64_MAX - 2 * SEC ? *now
                                    : *now + rng_range(r, -2 * SEC, 2 * SEC);
    w1 = rng_range(r, 0, p->rate - 1);
  } else if (c == 3) { /* anything, as a damaged record hands it over */
    s->w[0] = rng_next(r);
    s->w[1] = rng_next(r) >> (rng_next(r) % 64);
    return;
  } else {
    const int64_t edge_w0[] = {0, *now, INT64_MAX / p->rate,
                               (INT64_MAX - p->rate) / p->rate, INT64_MAX};
    const int64_t edge_w1[] = {0, p->rate - 1, p->rate, INT64_MAX};
    w0 = pick(r, edge_w0, 5, INT64_MIN, INT64_MAX);
    w1 = pick(r, edge_w1, 4, 0, INT64_MAX);
  }
  s->w[0] = (uint64_t)w0;
  s->w[1] = (uint64_t)w1;
}

Test(gcra_fast, int64_path_equals_128_bit_path) {
  static const int kinds[] = {SLUICE_OP_CONSUME, SLUICE_OP_PEEK};
  rng r = {UINT64_C(0x5eed21)};
  long fast = 0, wide = 0, allowed = 0, denied = 0;
  for (int i = 0; i < ROUNDS; i++) {
    sluice_gcra_params p;
    sluice_state in, o64, o128;
    sluice_verdict v64, v128;
    int64_t now, cost;
    int kind = kinds[rng_next(&r) % 2];
    random_params(&r, &p);
    random_case(&r, &p, &now, &in, &cost);
    sluice__verdict_reset(&v64, now);
    sluice__verdict_reset(&v128, now);
    cr_assert_eq(sluice__gcra_single_path(SLUICE__GCRA_PATH_128, &p, kind,
                                          cost, &in, &o128, now, &v128),
                 1);
    if (!sluice__gcra_single_path(SLUICE__GCRA_PATH_64, &p, kind, cost, &in,
                                  &o64, now, &v64)) {
      wide++;
      continue;
    }
    fast++;
    allowed += v128.allowed;
    denied += !v128.allowed;
    cr_assert(st_eq(&o64, &o128),
              "record differs: rate %lld period %lld burst %lld in %llu %llu "
              "now %lld cost %lld kind %d: %llu %llu vs %llu %llu",
              (long long)p.rate, (long long)p.period_ns, (long long)p.burst,
              (unsigned long long)in.w[0], (unsigned long long)in.w[1],
              (long long)now, (long long)cost, kind,
              (unsigned long long)o64.w[0], (unsigned long long)o64.w[1],
              (unsigned long long)o128.w[0], (unsigned long long)o128.w[1]);
    assert_verdict_eq(v64, v128,
                      "verdict differs: rate %lld period %lld burst %lld in "
                      "%llu %llu now %lld cost %lld kind %d",
                      (long long)p.rate, (long long)p.period_ns,
                      (long long)p.burst, (unsigned long long)in.w[0],
                      (unsigned long long)in.w[1], (long long)now,
                      (long long)cost, kind);
  }
  /* The cases reach both paths and both verdicts, or the comparison above
  ** proves little. */
  cr_assert_gt(fast, ROUNDS / 4, "fast path took only %ld steps", fast);
  cr_assert_gt(wide, ROUNDS / 20, "128-bit fallback taken %ld times", wide);
  cr_assert_gt(allowed, ROUNDS / 20, "allowed %ld", allowed);
  cr_assert_gt(denied, ROUNDS / 20, "denied %ld", denied);
}

/* The public step (which takes the fast path when it can) and the step with
** every decision forced down the 128-bit path agree along a trajectory. */
Test(gcra_fast, forced_wide_step_equals_default_step) {
  rng r = {UINT64_C(0xfa57)};
  for (int t = 0; t < 2000; t++) {
    sluice_gcra_params p;
    sluice_state a = zst(), b = zst();
    /* half at a wall-clock now, half anywhere that leaves room to walk */
    int64_t now = t % 2 ? INT64_C(1764800000) * SEC + rng_range(&r, 0, HOUR)
                        : rng_range(&r, 0, INT64_C(1) << 61);
    int64_t gap;
    random_params(&r, &p);
    gap = p.period_ns / p.rate + 1;
    if (gap > INT64_C(1) << 55)
      gap = INT64_C(1) << 55;
    for (int i = 0; i < 50; i++) {
      sluice_verdict va, vb;
      int64_t cost = rng_range(&r, 1, p.burst);
      now += rng_range(&r, 0, gap);
      sluice__gcra_force_wide = 0;
      cr_assert_eq(sluice__gcra_step(&p, &a, now, SLUICE_OP_CONSUME, cost, &a,
                                    &va),
                   SLUICE_OK);
      sluice__gcra_force_wide = 1;
      cr_assert_eq(sluice__gcra_step(&p, &b, now, SLUICE_OP_CONSUME, cost, &b,
                                    &vb),
                   SLUICE_OK);
      sluice__gcra_force_wide = 0;
      cr_assert(st_eq(&a, &b));
      assert_verdict_eq(va, vb, "step %d", i);
    }
  }
}

/* The fast path is there for ordinary decisions: a wall-clock now (past
** 2^63 once multiplied by the rate) with a fresh record (a TAT at 1970)
** or one near now must take it. */
Test(gcra_fast, wall_clock_decisions_take_the_int64_path) {
  static const sluice_gcra_params ps[] = {
      {3000, MIN, 3000}, {7, SEC, 7}, {INT64_C(1) << 32, HOUR, 100}};
  int64_t now = INT64_C(1764800000) * SEC;
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    sluice_state s = zst(), out;
    sluice_verdict v;
    for (int k = 0; k < 10; k++, now += 1000) {
      cr_assert_eq(sluice__gcra_single_path(SLUICE__GCRA_PATH_64, &ps[i],
                                            SLUICE_OP_CONSUME, 1, &s, &out,
                                            now, &v),
                   1, "params %zu step %d", i, k);
      cr_assert_eq(v.allowed, k < ps[i].burst);
      s = out;
    }
  }
}

/* A single-bucket op runs in place (sluice__op_step_validated passes the record
** as both in and out): on either path, a step with in == out leaves the
** record and verdict a step with separate records gives. */
Test(gcra_fast, in_place_step_equals_separate_records) {
  static const int kinds[] = {SLUICE_OP_CONSUME, SLUICE_OP_PEEK};
  rng r = {UINT64_C(0x1a91ace)};
  for (int i = 0; i < ROUNDS / 4; i++) {
    sluice_gcra_params p;
    sluice_state in, out, io;
    sluice_verdict v1, v2;
    sluice_key k = {"k", 1};
    sluice_op op = {SLUICE_ALGO_GCRA, kinds[rng_next(&r) % 2], 1, &k, &p, 0,
                    0};
    int64_t now, cost;
    random_params(&r, &p);
    random_case(&r, &p, &now, &in, &cost);
    op.arg = cost;
    sluice__gcra_force_wide = i % 3 == 0;
    io = in;
    cr_assert_eq(sluice__op_step_validated(&op, &in, &out, now, &v1), SLUICE_OK);
    cr_assert_eq(sluice__op_step_validated(&op, &io, &io, now, &v2), SLUICE_OK);
    sluice__gcra_force_wide = 0;
    cr_assert(st_eq(&out, &io), "record differs in place: in %llu %llu",
              (unsigned long long)in.w[0], (unsigned long long)in.w[1]);
    assert_verdict_eq(v1, v2, "verdict differs in place");
  }
}

/*
** Distinct-item estimate (linear counting over a 64-bit bitmap in an aligned
** fixed window): the estimate table against round(-64 ln(1 - b/64)) computed
** here in floating point (tests may; the library may not), monotonicity,
** exactness for small counts, duplicates, threshold, window roll, PEEK,
** validation.
*/
#include <math.h>

#include "unit.h"
#include "op.h"
#include "siphash.h"

static int add(const sluice_distinct_params *p, sluice_state *s, int64_t now,
               uint64_t h, sluice_verdict *v) {
  sluice_state out;
  int rc = sluice__distinct_step(p, s, now, h, &out, v);
  cr_assert_eq(rc, SLUICE_OK, "%s", sluice_err_name(rc));
  *s = out;
  return v->allowed;
}

static int peek(const sluice_distinct_params *p, const sluice_state *s,
                int64_t now, sluice_verdict *v) {
  sluice_key k = KEY("k");
  sluice_op op = {SLUICE_ALGO_DISTINCT, SLUICE_OP_PEEK, 1, &k, p, 0, 0};
  sluice_state out;
  cr_assert_eq(sluice__op_step(&op, s, &out, now, v), SLUICE_OK);
  cr_assert(st_eq(&out, s), "PEEK changed the record");
  return v->allowed;
}

/* An item hash that lands on bit b (the top 6 bits pick the bit). */
static uint64_t on_bit(int b, uint64_t low) {
  return ((uint64_t)b << 58) | (low & ((UINT64_C(1) << 58) - 1));
}

static int64_t lc(int b) {
  if (b >= 63)
    return 266; /* -64 ln(1/64) = 266.2; all 64 bits saturate there too */
  return (int64_t)llround(-64.0 * log(1.0 - (double)b / 64.0));
}

Test(distinct, estimate_table_is_linear_counting) {
  const sluice_distinct_params p = {200, HOUR};
  sluice_state s = zst();
  sluice_verdict v;
  int b;
  for (b = 0; b < 64; b++) {
    int64_t est = lc(b + 1);
    add(&p, &s, SEC, on_bit(b, (uint64_t)b * 977), &v);
    cr_assert_eq(v.limit, 200);
    if (est < 200) {
      cr_assert(v.allowed, "%d bits", b + 1);
      cr_assert_eq(v.remaining, 200 - est, "%d bits: estimate %lld", b + 1,
                   (long long)est);
    } else {
      cr_assert(!v.allowed, "%d bits", b + 1);
      cr_assert_eq(v.remaining, 0);
    }
  }
}

Test(distinct, exact_for_small_counts) {
  /* Up to 7 distinct bits the estimate is the count itself. */
  const sluice_distinct_params p = {200, HOUR};
  sluice_state s = zst();
  sluice_verdict v;
  int b;
  for (b = 0; b < 7; b++) {
    add(&p, &s, SEC, on_bit(b * 9, 0), &v);
    cr_assert_eq(200 - v.remaining, b + 1);
  }
}

Test(distinct, duplicates_count_once) {
  const sluice_distinct_params p = {3, HOUR};
  sluice_state s = zst();
  sluice_verdict v;
  int i;
  for (i = 0; i < 1000; i++)
    cr_assert(add(&p, &s, SEC + i, UINT64_C(0xdeadbeefcafef00d), &v));
  cr_assert_eq(v.remaining, 2);
  /* Same top bits, different low bits: the same bit, so the same item. */
  cr_assert(add(&p, &s, SEC, UINT64_C(0xdeadbeefcafef00d) ^ 0xffff, &v));
  cr_assert_eq(v.remaining, 2);
}

Test(distinct, monotone_and_near_unbiased) {
  /* Keyed hashes of distinct subjects, as the policy would compute them. */
  static const int ns[] = {5, 10, 20, 50, 100};
  uint8_t key[16] = {7};
  size_t k;
  for (k = 0; k < sizeof ns / sizeof ns[0]; k++) {
    int64_t sum = 0;
    int trial;
    for (trial = 0; trial < 50; trial++) {
      const sluice_distinct_params p = {200, HOUR};
      sluice_state s = zst();
      sluice_verdict v;
      int64_t last = 0;
      int i;
      for (i = 0; i < ns[k]; i++) {
        char subj[32];
        int64_t est;
        snprintf(subj, sizeof subj, "subject-%d-%d", trial, i);
        add(&p, &s, SEC, sluice__siphash64(key, subj, strlen(subj)), &v);
        est = 200 - v.remaining;
        cr_assert_geq(est, last, "estimate went down");
        cr_assert_leq(est, 266);
        last = est;
      }
      sum += last;
    }
    /* Mean of 50 estimates within 10 % of the true count. */
    cr_assert(sum * 10 >= (int64_t)ns[k] * 50 * 9 &&
                  sum * 10 <= (int64_t)ns[k] * 50 * 11,
              "n = %d: mean estimate %lld / 50", ns[k], (long long)sum);
  }
}

Test(distinct, threshold_and_window) {
  /* 5 distinct subjects in a 10 min window trip it. */
  const sluice_distinct_params p = {5, 10 * MIN};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = 20 * MIN + 30 * SEC; /* window [20 min, 30 min) */
  int b;
  for (b = 0; b < 4; b++) {
    cr_assert(add(&p, &s, t, on_bit(b, 0), &v));
    cr_assert_eq(v.remaining, 5 - (b + 1));
    cr_assert_eq(v.reset_ns, 9 * MIN + 30 * SEC);
    cr_assert_eq(v.retry_after_ns, 0);
  }
  cr_assert(!add(&p, &s, t, on_bit(4, 0), &v), "the 5th distinct item");
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.retry_after_ns, 9 * MIN + 30 * SEC);
  cr_assert(!peek(&p, &s, 30 * MIN - 1, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  /* A repeat of a known item is still over. */
  cr_assert(!add(&p, &s, t + SEC, on_bit(0, 0), &v));
  /* Next window: forgotten. */
  cr_assert(peek(&p, &s, 30 * MIN, &v));
  cr_assert_eq(v.remaining, 5);
  cr_assert(add(&p, &s, 30 * MIN, on_bit(4, 0), &v));
  cr_assert_eq(v.remaining, 4);
}

Test(distinct, expiry_and_clock_backwards) {
  const sluice_distinct_params p = {3, 100};
  sluice_op op = {SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 1, &KEY("k"), &p, 0, 1};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert_eq(sluice__op_expiry(&op, 0, &s), 0);
  add(&p, &s, 250, on_bit(1, 0), &v);
  add(&p, &s, 260, on_bit(2, 0), &v);
  cr_assert(!add(&p, &s, 270, on_bit(3, 0), &v));
  cr_assert_eq(sluice__op_expiry(&op, 0, &s), 300);
  /* Going back in time does not reopen the window. */
  cr_assert(!peek(&p, &s, 150, &v));
  cr_assert(!add(&p, &s, 10, on_bit(4, 0), &v));
  cr_assert(peek(&p, &s, 300, &v));
}

Test(distinct, validation) {
  static const sluice_distinct_params bad[] = {
      {0, SEC}, {-1, SEC}, {201, SEC}, {1, 0}, {1, -1},
      {1, SLUICE_DURATION_MAX + 1}};
  const sluice_distinct_params ok = {200, SLUICE_DURATION_MAX};
  sluice_state o;
  sluice_verdict v;
  size_t i;
  cr_assert_eq(sluice__distinct_params_check(NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice__distinct_params_check(&ok), SLUICE_OK);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(sluice__distinct_params_check(&bad[i]), SLUICE_EINVAL);
    cr_assert_eq(sluice__distinct_step(&bad[i], NULL, 0, 1, &o, &v),
                 SLUICE_EINVAL);
  }
  {
    sluice_op op = {SLUICE_ALGO_DISTINCT, SLUICE_OP_CONSUME, 1, &KEY("k"), &ok,
                    1, 1};
    cr_assert_eq(sluice__op_step(&op, NULL, &o, 0, &v), SLUICE_EINVAL);
    op.kind = SLUICE_OP_COUNT;
    cr_assert_eq(sluice__op_step(&op, NULL, &o, 0, &v), SLUICE_EINVAL);
  }
}

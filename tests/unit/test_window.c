/*
** Sliding window counter (two aligned windows, the previous weighted by its
** overlap) and fixed window: hand-worked examples, CONSUME / COUNT / PEEK,
** roll-over, retry-after exactness (fits after exactly retry_after_ns, not
** 1 ns earlier), reset, an independent reference model over random traces,
** validation and counter limits.
*/
#include "unit.h"
#include "op.h"

static int sw(const sluice_window_params *p, sluice_state *s, int64_t now,
              int kind, int64_t n, sluice_verdict *v) {
  sluice_state out;
  int rc = sluice__swindow_step(p, s, now, kind, n, &out, v);
  if (rc == SLUICE_OK)
    *s = out;
  return rc;
}

static int fw(const sluice_window_params *p, sluice_state *s, int64_t now,
              int kind, int64_t n, sluice_verdict *v) {
  sluice_state out;
  int rc = sluice__fwindow_step(p, s, now, kind, n, &out, v);
  if (rc == SLUICE_OK)
    *s = out;
  return rc;
}

static int sw_ok(const sluice_window_params *p, sluice_state *s, int64_t now,
                 int kind, int64_t n, sluice_verdict *v) {
  cr_assert_eq(sw(p, s, now, kind, n, v), SLUICE_OK);
  return v->allowed;
}

static int fw_ok(const sluice_window_params *p, sluice_state *s, int64_t now,
                 int kind, int64_t n, sluice_verdict *v) {
  cr_assert_eq(fw(p, s, now, kind, n, v), SLUICE_OK);
  return v->allowed;
}

/* ---------------------------------------------------- sliding: by hand --- */

Test(swindow, fills_to_limit_in_one_window) {
  const sluice_window_params p = {10, 60 * SEC};
  sluice_state s = zst();
  sluice_verdict v;
  int i;
  for (i = 1; i <= 10; i++) {
    cr_assert(sw_ok(&p, &s, 61 * SEC + i, SLUICE_OP_CONSUME, 1, &v));
    cr_assert_eq(v.remaining, 10 - i);
    cr_assert_eq(v.limit, 10);
    /* Until the estimate is empty: end of the next window. */
    cr_assert_eq(v.reset_ns, 2 * 60 * SEC - (1 * SEC + i));
  }
  cr_assert(!sw_ok(&p, &s, 61 * SEC + 11, SLUICE_OP_CONSUME, 1, &v));
  cr_assert_eq(v.remaining, 0);
}

Test(swindow, weighted_previous_window_worked_example) {
  /* limit 100 per 10 s.  80 in [0, 10 s).  At 12.5 s the previous window
  ** still overlaps [2.5 s, 12.5 s) by 75 %: estimate 60, 40 left. */
  const sluice_window_params p = {100, 10 * SEC};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = 12500 * MS;
  cr_assert(sw_ok(&p, &s, 1 * SEC, SLUICE_OP_CONSUME, 80, &v));
  cr_assert_eq(v.remaining, 20);
  cr_assert(sw_ok(&p, &s, t, SLUICE_OP_PEEK, 0, &v));
  cr_assert_eq(v.remaining, 40);
  cr_assert_eq(v.reset_ns, 10 * SEC - 2500 * MS); /* only prev is non-zero */
  cr_assert(!sw_ok(&p, &s, t, SLUICE_OP_CONSUME, 41, &v));
  cr_assert_eq(v.remaining, 40);
  /* 41 fits when 80 * (10 - el) / 10 <= 59: el >= 2.625 s. */
  cr_assert_eq(v.retry_after_ns, 125 * MS);
  cr_assert(sw_ok(&p, &s, t, SLUICE_OP_CONSUME, 40, &v));
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.reset_ns, 20 * SEC - 2500 * MS);
  /* One more: 80 (10 - el) + 41 * 10 <= 1000  =>  el >= 2.625 s. */
  cr_assert(!sw_ok(&p, &s, t, SLUICE_OP_CONSUME, 1, &v));
  cr_assert_eq(v.retry_after_ns, 125 * MS);
  cr_assert(!sw_ok(&p, &s, t + 125 * MS - 1, SLUICE_OP_CONSUME, 1, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  cr_assert(sw_ok(&p, &s, t + 125 * MS, SLUICE_OP_CONSUME, 1, &v));
}

Test(swindow, roll_over_and_gap) {
  const sluice_window_params p = {10, 100};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert(sw_ok(&p, &s, 50, SLUICE_OP_CONSUME, 10, &v));
  /* Next window start: the previous one counts in full. */
  cr_assert(!sw_ok(&p, &s, 100, SLUICE_OP_CONSUME, 1, &v));
  cr_assert_eq(v.retry_after_ns, 10); /* 10 * (100 - el) <= 900: el >= 10 */
  cr_assert(sw_ok(&p, &s, 150, SLUICE_OP_PEEK, 0, &v));
  cr_assert_eq(v.remaining, 5);
  cr_assert(sw_ok(&p, &s, 150, SLUICE_OP_CONSUME, 5, &v));
  cr_assert_eq(v.remaining, 0);
  /* Skip a whole window: nothing of [100, 200) is previous to [300, 400). */
  cr_assert(sw_ok(&p, &s, 300, SLUICE_OP_CONSUME, 10, &v));
  cr_assert_eq(v.remaining, 0);
  /* At 400 prev = 10 (full weight); at 499 it weighs 0.1 -> 9 left... */
  cr_assert(sw_ok(&p, &s, 499, SLUICE_OP_PEEK, 0, &v));
  cr_assert_eq(v.remaining, 9);
  cr_assert_eq(v.reset_ns, 1);
  cr_assert(sw_ok(&p, &s, 500, SLUICE_OP_PEEK, 0, &v));
  cr_assert_eq(v.remaining, 10);
  cr_assert_eq(v.reset_ns, 0);
}

Test(swindow, retry_into_next_window) {
  /* cur alone is over: must wait for the roll, then for the weight to fall. */
  const sluice_window_params p = {10, 100};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert(sw_ok(&p, &s, 20, SLUICE_OP_CONSUME, 8, &v));
  cr_assert(!sw_ok(&p, &s, 30, SLUICE_OP_CONSUME, 3, &v));
  /* At el' in the next window: 8 (100 - el') + 3 * 100 <= 1000
  ** => el' >= 12.5 -> 13; from 30 that is 70 + 13. */
  cr_assert_eq(v.retry_after_ns, 83);
  cr_assert(!sw_ok(&p, &s, 112, SLUICE_OP_PEEK, 3, &v));
  cr_assert(sw_ok(&p, &s, 113, SLUICE_OP_PEEK, 3, &v));
  /* A request of the whole limit waits for the window after next. */
  cr_assert(!sw_ok(&p, &s, 30, SLUICE_OP_CONSUME, 10, &v));
  cr_assert_eq(v.retry_after_ns, 170);
  cr_assert(!sw_ok(&p, &s, 199, SLUICE_OP_PEEK, 10, &v));
  cr_assert(sw_ok(&p, &s, 200, SLUICE_OP_PEEK, 10, &v));
}

Test(swindow, count_mode_always_adds) {
  /* Failure counting: 5 failures per 15 min lock out on the 6th. */
  const sluice_window_params p = {5, 15 * MIN};
  sluice_state s = zst();
  sluice_verdict v;
  int i;
  for (i = 1; i <= 5; i++) {
    cr_assert(sw_ok(&p, &s, HOUR + i * SEC, SLUICE_OP_COUNT, 1, &v));
    cr_assert_eq(v.remaining, 5 - i);
  }
  cr_assert(!sw_ok(&p, &s, HOUR + 6 * SEC, SLUICE_OP_COUNT, 1, &v));
  cr_assert_eq(v.remaining, 0);
  cr_assert_gt(v.retry_after_ns, 0);
  /* It was counted: 6 now, so a PEEK for 0 is over the limit. */
  cr_assert(!sw_ok(&p, &s, HOUR + 7 * SEC, SLUICE_OP_PEEK, 0, &v));
  cr_assert_eq((s.w[1] & 0xffffffffu), 6);
  /* COUNT may add more than the limit in one go. */
  s = zst();
  cr_assert(!sw_ok(&p, &s, 0, SLUICE_OP_COUNT, 7, &v));
  cr_assert_eq((s.w[1] & 0xffffffffu), 7);
}

Test(swindow, peek_and_denial_change_nothing) {
  const sluice_window_params p = {3, 1000};
  sluice_state s = zst(), o, before;
  sluice_verdict v;
  cr_assert(sw_ok(&p, &s, 10, SLUICE_OP_CONSUME, 3, &v));
  before = s;
  cr_assert_eq(sluice__swindow_step(&p, &s, 20, SLUICE_OP_PEEK, 1, &o, &v), 0);
  cr_assert(!v.allowed);
  cr_assert(st_eq(&o, &s));
  cr_assert(!sw_ok(&p, &s, 20, SLUICE_OP_CONSUME, 1, &v));
  cr_assert(st_eq(&s, &before));
}

Test(swindow, clock_backwards_does_not_reopen) {
  const sluice_window_params p = {4, 100};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert(sw_ok(&p, &s, 250, SLUICE_OP_CONSUME, 4, &v));
  /* Back into the previous window: the full current window still counts. */
  cr_assert(!sw_ok(&p, &s, 150, SLUICE_OP_CONSUME, 1, &v));
  cr_assert(!sw_ok(&p, &s, 0, SLUICE_OP_CONSUME, 1, &v));
  cr_assert(!sw_ok(&p, &s, 299, SLUICE_OP_CONSUME, 1, &v));
  /* Forward again: the count is carried as previous. */
  cr_assert(!sw_ok(&p, &s, 300, SLUICE_OP_CONSUME, 1, &v));
  cr_assert(sw_ok(&p, &s, 325, SLUICE_OP_CONSUME, 1, &v));
}

Test(swindow, expiry) {
  const sluice_window_params p = {4, 100};
  sluice_op op = {SLUICE_ALGO_SWINDOW, SLUICE_OP_PEEK, 1, &KEY("k"), &p, 0, 0};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert_eq(sluice__op_expiry(&op, 0, &s), 0);
  cr_assert(sw_ok(&p, &s, 250, SLUICE_OP_CONSUME, 1, &v));
  cr_assert_eq(sluice__op_expiry(&op, 0, &s), 400);
  cr_assert(sw_ok(&p, &s, 399, SLUICE_OP_PEEK, 4, &v) == 0);
  cr_assert(sw_ok(&p, &s, 400, SLUICE_OP_PEEK, 4, &v));
}

Test(swindow, limit_above_32_bit_counter_never_over_admits) {
  /* Counts are stored in 32 bits; a limit above that must still hold. */
  const sluice_window_params p = {SLUICE_COUNT_MAX, HOUR};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t admitted = 0;
  int i;
  cr_assert_eq(sluice__window_params_check(&p), SLUICE_OK);
  for (i = 0; i < 8; i++) {
    int rc = sw(&p, &s, SEC + i, SLUICE_OP_CONSUME, SLUICE_COUNT_MAX / 2, &v);
    if (rc == SLUICE_OK && v.allowed)
      admitted += SLUICE_COUNT_MAX / 2;
  }
  cr_assert_leq(admitted, SLUICE_COUNT_MAX,
                "admitted %lld in one window, limit %lld", (long long)admitted,
                (long long)SLUICE_COUNT_MAX);
}

Test(swindow, count_beyond_32_bits_is_over_limit) {
  /* COUNT of more than the limit must report the limit as exceeded even if
  ** the stored counter saturates, now and on later reads.  (A limit the
  ** 32-bit counters cannot enforce may instead be refused: EINVAL.) */
  static const int64_t limits[] = {INT64_C(1) << 31, UINT32_MAX - 1,
                                   UINT32_MAX};
  size_t i;
  for (i = 0; i < sizeof limits / sizeof limits[0]; i++) {
    const sluice_window_params p = {limits[i], HOUR};
    sluice_state s = zst();
    sluice_verdict v;
    int rc = sw(&p, &s, SEC, SLUICE_OP_COUNT, SLUICE_COUNT_MAX, &v);
    if (i == 0)
      cr_assert_eq(rc, SLUICE_OK, "limit 2^31 is valid for SWINDOW");
    if (rc == SLUICE_EINVAL)
      continue;
    cr_assert_eq(rc, SLUICE_OK);
    cr_assert(!v.allowed, "counted 2^40 against a limit of %lld",
              (long long)limits[i]);
    cr_assert(!sw_ok(&p, &s, SEC + 1, SLUICE_OP_PEEK, 0, &v),
              "saturated counter reads as within limit %lld",
              (long long)limits[i]);
    cr_assert(!sw_ok(&p, &s, SEC + HOUR, SLUICE_OP_PEEK, 0, &v),
              "saturated counter, next window, limit %lld",
              (long long)limits[i]);
  }
}

/* ------------------------------------------------------ fixed window --- */

Test(fwindow, basic_roll_and_retry) {
  const sluice_window_params p = {3, 60 * SEC};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = 125 * SEC; /* window [120 s, 180 s) */
  int i;
  for (i = 1; i <= 3; i++) {
    cr_assert(fw_ok(&p, &s, t, SLUICE_OP_CONSUME, 1, &v));
    cr_assert_eq(v.remaining, 3 - i);
    cr_assert_eq(v.reset_ns, 55 * SEC);
    cr_assert_eq(v.limit, 3);
  }
  cr_assert(!fw_ok(&p, &s, t, SLUICE_OP_CONSUME, 1, &v));
  cr_assert_eq(v.retry_after_ns, 55 * SEC);
  cr_assert_eq(v.remaining, 0);
  cr_assert(!fw_ok(&p, &s, 180 * SEC - 1, SLUICE_OP_CONSUME, 1, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  cr_assert(fw_ok(&p, &s, 180 * SEC, SLUICE_OP_CONSUME, 3, &v));
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.reset_ns, 60 * SEC);
}

Test(fwindow, count_peek_and_expiry) {
  const sluice_window_params p = {2, 10};
  sluice_op op = {SLUICE_ALGO_FWINDOW, SLUICE_OP_PEEK, 1, &KEY("k"), &p, 0, 0};
  sluice_state s = zst(), o;
  sluice_verdict v;
  cr_assert(fw_ok(&p, &s, 23, SLUICE_OP_COUNT, 2, &v));
  cr_assert_eq(v.remaining, 0);
  cr_assert(!fw_ok(&p, &s, 24, SLUICE_OP_COUNT, 1, &v));
  cr_assert_eq(s.w[1], 3);
  cr_assert_eq(v.retry_after_ns, 6);
  cr_assert_eq(sluice__fwindow_step(&p, &s, 25, SLUICE_OP_PEEK, 0, &o, &v), 0);
  cr_assert(!v.allowed);
  cr_assert(st_eq(&o, &s));
  cr_assert_eq(sluice__op_expiry(&op, 0, &s), 30);
  cr_assert(fw_ok(&p, &s, 30, SLUICE_OP_PEEK, 2, &v));
}

Test(fwindow, clock_backwards_holds_window) {
  const sluice_window_params p = {2, 10};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert(fw_ok(&p, &s, 35, SLUICE_OP_CONSUME, 2, &v));
  cr_assert(!fw_ok(&p, &s, 25, SLUICE_OP_CONSUME, 1, &v));
  cr_assert(!fw_ok(&p, &s, 5, SLUICE_OP_CONSUME, 1, &v));
  cr_assert(fw_ok(&p, &s, 40, SLUICE_OP_CONSUME, 1, &v));
}

Test(fwindow, count_saturation_still_over_limit) {
  const sluice_window_params p = {SLUICE_COUNT_MAX, HOUR};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert(fw_ok(&p, &s, SEC, SLUICE_OP_COUNT, SLUICE_COUNT_MAX, &v));
  cr_assert(!fw_ok(&p, &s, SEC, SLUICE_OP_COUNT, 1, &v),
            "2^40 + 1 counted against a limit of 2^40");
}

/* --------------------------------------------------------- validation --- */

Test(window, validation) {
  static const struct {
    sluice_window_params p;
    int rc;
  } cases[] = {
      {{1, 1}, SLUICE_OK},
      {{0, SEC}, SLUICE_EINVAL},
      {{-1, SEC}, SLUICE_EINVAL},
      {{INT64_C(1) << 31, SEC}, SLUICE_OK},
      {{SLUICE_COUNT_MAX, SEC}, SLUICE_OK},
      {{SLUICE_COUNT_MAX + 1, SEC}, SLUICE_EINVAL},
      {{1, 0}, SLUICE_EINVAL},
      {{1, -1}, SLUICE_EINVAL},
      {{1, SLUICE_DURATION_MAX}, SLUICE_OK},
      {{1, SLUICE_DURATION_MAX + 1}, SLUICE_EINVAL},
  };
  const sluice_window_params ok = {5, SEC};
  sluice_state o;
  sluice_verdict v;
  size_t i;
  cr_assert_eq(sluice__window_params_check(NULL), SLUICE_EINVAL);
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int src = sluice__swindow_step(&cases[i].p, NULL, 0, SLUICE_OP_CONSUME, 1,
                                  &o, &v);
    cr_assert_eq(sluice__window_params_check(&cases[i].p), cases[i].rc);
    /* SWINDOW may refuse limits its 32-bit counters cannot hold. */
    if (cases[i].p.limit > (INT64_C(1) << 31) && src == SLUICE_EINVAL)
      ;
    else
      cr_assert_eq(src, cases[i].rc, "swindow case %zu", i);
    cr_assert_eq(sluice__fwindow_step(&cases[i].p, NULL, 0, SLUICE_OP_CONSUME, 1,
                                     &o, &v),
                 cases[i].rc);
  }
#define BOTH(kind, n, want)                                                    \
  do {                                                                         \
    cr_assert_eq(sluice__swindow_step(&ok, NULL, 0, (kind), (n), &o, &v), want); \
    cr_assert_eq(sluice__fwindow_step(&ok, NULL, 0, (kind), (n), &o, &v), want); \
  } while (0)
  BOTH(SLUICE_OP_CONSUME, 0, SLUICE_ERANGE);
  BOTH(SLUICE_OP_CONSUME, -3, SLUICE_ERANGE);
  BOTH(SLUICE_OP_CONSUME, 6, SLUICE_ERANGE);
  BOTH(SLUICE_OP_CONSUME, 5, SLUICE_OK);
  BOTH(SLUICE_OP_COUNT, 0, SLUICE_ERANGE);
  BOTH(SLUICE_OP_COUNT, 6, SLUICE_OK);
  BOTH(SLUICE_OP_COUNT, SLUICE_COUNT_MAX, SLUICE_OK);
  BOTH(SLUICE_OP_COUNT, SLUICE_COUNT_MAX + 1, SLUICE_ERANGE);
  BOTH(SLUICE_OP_PEEK, 0, SLUICE_OK);
  BOTH(SLUICE_OP_PEEK, 6, SLUICE_ERANGE);
  BOTH(SLUICE_OP_STRIKE, 1, SLUICE_EINVAL);
  BOTH(SLUICE_OP_ACQUIRE, 1, SLUICE_EINVAL);
#undef BOTH
  {
    const sluice_key ks[2] = {{"{a}1", 4}, {"{a}2", 4}};
    sluice_op op = {SLUICE_ALGO_SWINDOW, SLUICE_OP_CONSUME, 2, ks, &ok, 1, 0};
    sluice_state in[2] = {{{0, 0}}, {{0, 0}}}, out[2];
    cr_assert_eq(sluice__op_step(&op, in, out, 0, &v), SLUICE_EINVAL,
                 "windows take one key");
    op.algo = SLUICE_ALGO_FWINDOW;
    cr_assert_eq(sluice__op_step(&op, in, out, 0, &v), SLUICE_EINVAL);
  }
}

/* ------------------------------------------------ reference models --- */

/* Counts per aligned window, kept as a short log of (window index, count):
** the sliding estimate at t is prev(t) * (W - el) / W + cur(t). */
typedef struct wlog {
  int64_t idx[4096];
  int64_t cnt[4096];
  int n;
} wlog;

static int64_t wlog_get(const wlog *l, int64_t idx) {
  int i;
  for (i = l->n - 1; i >= 0; i--)
    if (l->idx[i] == idx)
      return l->cnt[i];
  return 0;
}

static void wlog_add(wlog *l, int64_t idx, int64_t n) {
  if (l->n > 0 && l->idx[l->n - 1] == idx) {
    l->cnt[l->n - 1] += n;
    return;
  }
  cr_assert_lt(l->n, 4096);
  l->idx[l->n] = idx;
  l->cnt[l->n] = n;
  l->n++;
}

/* Estimate * W at t. */
static i128 sw_est(const wlog *l, int64_t W, int64_t t) {
  int64_t idx = t / W, el = t % W;
  return (i128)wlog_get(l, idx - 1) * (W - el) + (i128)wlog_get(l, idx) * W;
}

/* Smallest d >= 0 with est(t + d) + n <= limit, by bisection over the
** non-increasing estimate (independent of the closed forms in window.c). */
static int64_t sw_wait(const wlog *l, const sluice_window_params *p, int64_t t,
                       int64_t n) {
  int64_t lo = 0, hi = 2 * p->window_ns; /* two windows on: estimate 0 */
  i128 lim = (i128)p->limit * p->window_ns;
  if (sw_est(l, p->window_ns, t) + (i128)n * p->window_ns <= lim)
    return 0;
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (sw_est(l, p->window_ns, t + mid) + (i128)n * p->window_ns <= lim)
      hi = mid;
    else
      lo = mid;
  }
  return hi;
}

static void sw_expect(wlog *l, const sluice_window_params *p, int64_t t,
                      int kind, int64_t n, sluice_verdict *ev) {
  int64_t W = p->window_ns, idx = t / W, el = t % W;
  i128 lim = (i128)p->limit * W, est = sw_est(l, W, t), rem;
  memset(ev, 0, sizeof *ev);
  ev->now_ns = t;
  ev->limit = p->limit;
  ev->allowed = est + (i128)n * W <= lim;
  if (!ev->allowed && kind != SLUICE_OP_COUNT)
    ev->retry_after_ns = sw_wait(l, p, t, n);
  if (kind == SLUICE_OP_COUNT || (kind == SLUICE_OP_CONSUME && ev->allowed)) {
    wlog_add(l, idx, n);
    est = sw_est(l, W, t);
    if (kind == SLUICE_OP_COUNT)
      ev->allowed = est <= lim;
  }
  rem = (lim - est) / W;
  ev->remaining = rem < 0 ? 0 : (int64_t)rem;
  if (wlog_get(l, idx) > 0)
    ev->reset_ns = 2 * W - el;
  else if (wlog_get(l, idx - 1) > 0)
    ev->reset_ns = W - el;
}

Test(swindow, matches_reference_model) {
  static const sluice_window_params ps[] = {
      {10, 100}, {1, 7}, {100, 10 * SEC}, {7, 1000003}, {3, 1}, {50, 64}};
  size_t k;
  for (k = 0; k < sizeof ps / sizeof ps[0]; k++) {
    const sluice_window_params *p = &ps[k];
    static wlog l;
    rng r = {0xabc0 + k};
    sluice_state s = zst();
    int64_t t = rng_range(&r, 0, 10 * p->window_ns);
    int i;
    memset(&l, 0, sizeof l);
    for (i = 0; i < 3000; i++) {
      sluice_verdict v, ev;
      int64_t roll = rng_range(&r, 0, 9);
      int kind = roll == 0 ? SLUICE_OP_PEEK
                 : roll == 1 ? SLUICE_OP_COUNT
                             : SLUICE_OP_CONSUME;
      int64_t n = rng_range(&r, kind == SLUICE_OP_PEEK ? 0 : 1,
                            p->limit < 4 ? p->limit : 4);
      t += rng_range(&r, 0, 4) == 0 ? rng_range(&r, 0, 3 * p->window_ns)
                                    : rng_range(&r, 0, p->window_ns / 8 + 1);
      sw_expect(&l, p, t, kind, n, &ev);
      sw_ok(p, &s, t, kind, n, &v);
      if (kind == SLUICE_OP_COUNT)
        ev.retry_after_ns = v.retry_after_ns; /* not specified for COUNT */
      cr_assert(verdict_eq(&v, &ev),
                "params %zu step %d kind %d n %lld t %lld: allowed %d/%d "
                "rem %lld/%lld retry %lld/%lld reset %lld/%lld",
                k, i, kind, (long long)n, (long long)t, v.allowed, ev.allowed,
                (long long)v.remaining, (long long)ev.remaining,
                (long long)v.retry_after_ns, (long long)ev.retry_after_ns,
                (long long)v.reset_ns, (long long)ev.reset_ns);
    }
  }
}

Test(fwindow, matches_reference_model) {
  static const sluice_window_params ps[] = {{10, 100}, {1, 7}, {5, 1000003}};
  size_t k;
  for (k = 0; k < sizeof ps / sizeof ps[0]; k++) {
    const sluice_window_params *p = &ps[k];
    rng r = {0xf00 + k};
    sluice_state s = zst();
    int64_t t = rng_range(&r, 0, 10 * p->window_ns), widx = -1, cnt = 0;
    int i;
    for (i = 0; i < 3000; i++) {
      sluice_verdict v, ev;
      int64_t roll = rng_range(&r, 0, 9);
      int kind = roll == 0 ? SLUICE_OP_PEEK
                 : roll == 1 ? SLUICE_OP_COUNT
                             : SLUICE_OP_CONSUME;
      int64_t n = rng_range(&r, kind == SLUICE_OP_PEEK ? 0 : 1,
                            p->limit < 4 ? p->limit : 4);
      t += rng_range(&r, 0, p->window_ns / 3 + 1);
      if (t / p->window_ns != widx) {
        widx = t / p->window_ns;
        cnt = 0;
      }
      memset(&ev, 0, sizeof ev);
      ev.now_ns = t;
      ev.limit = p->limit;
      ev.allowed = cnt + n <= p->limit;
      if (kind == SLUICE_OP_COUNT || (kind == SLUICE_OP_CONSUME && ev.allowed))
        cnt += n;
      if (kind == SLUICE_OP_COUNT)
        ev.allowed = cnt <= p->limit;
      ev.remaining = cnt >= p->limit ? 0 : p->limit - cnt;
      if (cnt > 0)
        ev.reset_ns = (widx + 1) * p->window_ns - t;
      if (!ev.allowed)
        ev.retry_after_ns = ev.reset_ns;
      fw_ok(p, &s, t, kind, n, &v);
      cr_assert(verdict_eq(&v, &ev), "params %zu step %d", k, i);
    }
  }
}

/* Property: for a denied CONSUME, the same request fits after exactly
** retry_after_ns and not 1 ns earlier, on random states. */
static void retry_property(int algo) {
  rng r = {algo == SLUICE_ALGO_SWINDOW ? 0x5111 : 0xf111};
  int trials = 0, i;
  for (i = 0; i < 20000 && trials < 3000; i++) {
    sluice_window_params p = {rng_range(&r, 1, 40), rng_range(&r, 1, 2000)};
    sluice_key k = KEY("k");
    sluice_op op = {algo, SLUICE_OP_CONSUME, 1, &k, &p, 1, 0};
    sluice_state s = zst(), o;
    sluice_verdict v, w;
    int64_t t = rng_range(&r, 0, 50 * p.window_ns);
    int j, m = (int)rng_range(&r, 0, 3 * p.limit);
    for (j = 0; j < m; j++) {
      op.arg = rng_range(&r, 1, p.limit);
      t += rng_range(&r, 0, p.window_ns / 4);
      cr_assert_eq(sluice__op_step(&op, &s, &o, t, &v), 0);
      s = o;
    }
    op.arg = rng_range(&r, 1, p.limit);
    t += rng_range(&r, 0, p.window_ns / 4);
    cr_assert_eq(sluice__op_step(&op, &s, &o, t, &v), 0);
    if (v.allowed)
      continue;
    trials++;
    if (algo == SLUICE_ALGO_FWINDOW)
      cr_assert(st_eq(&o, &s), "denial changed the record");
    cr_assert_gt(v.retry_after_ns, 0);
    cr_assert_eq(sluice__op_step(&op, &o, &o, t + v.retry_after_ns, &w), 0);
    cr_assert(w.allowed, "limit %lld W %lld n %lld: not admitted after retry",
              (long long)p.limit, (long long)p.window_ns, (long long)op.arg);
    cr_assert_eq(sluice__op_step(&op, &s, &o, t + v.retry_after_ns - 1, &w), 0);
    cr_assert(!w.allowed, "limit %lld W %lld n %lld: admitted 1 ns early",
              (long long)p.limit, (long long)p.window_ns, (long long)op.arg);
  }
  cr_assert_gt(trials, 1000);
}

Test(swindow, retry_after_is_exact) { retry_property(SLUICE_ALGO_SWINDOW); }
Test(fwindow, retry_after_is_exact) { retry_property(SLUICE_ALGO_FWINDOW); }

Test(window, near_int64_max) {
  const sluice_window_params p = {3, HOUR};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = INT64_MAX - 10;
  int64_t admitted = 0;
  int i;
  for (i = 0; i < 10; i++)
    admitted += sw_ok(&p, &s, t + i, SLUICE_OP_CONSUME, 1, &v);
  cr_assert_eq(admitted, 3);
  cr_assert_geq(v.reset_ns, 0);
  s = zst();
  admitted = 0;
  for (i = 0; i < 10; i++)
    admitted += fw_ok(&p, &s, t + i, SLUICE_OP_CONSUME, 1, &v);
  cr_assert_eq(admitted, 3);
  cr_assert_geq(v.retry_after_ns, 0);
  cr_assert_geq(v.reset_ns, 0);
}

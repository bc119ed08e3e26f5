/*
** The client backoff planner: every rule of spec section 7, and the
** jitter bounds over many draws.  The random source is injected, so each
** plan is reproducible.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "sluice.h"
#include "../common/splitmix.h"
#include "../common/units.h"

#define T0 (INT64_C(5000) * MS) /* the caller's clock: any origin */

static uint64_t zero_rand(void *ud) {
  (void)ud;
  return 0;
}

static uint64_t seq_rand(void *ud) {
  uint64_t *s = ud;
  return splitmix64(s);
}

/* A scripted source: returns the values in order. */
typedef struct script {
  const uint64_t *v;
  size_t n, i;
} script;
static uint64_t script_rand(void *ud) {
  script *s = ud;
  cr_assert_lt(s->i, s->n, "more draws than scripted");
  return s->v[s->i++];
}

static sluice_backoff *planner(uint64_t (*r)(void *), void *ud) {
  sluice_backoff_options o = {0};
  sluice_backoff *b = NULL;
  o.rand = r;
  o.rand_ud = ud;
  cr_assert_eq(sluice_backoff_open(&o, &b), SLUICE_OK);
  return b;
}

static sluice_backoff_input req(int attempt, int status) {
  sluice_backoff_input in = {0};
  in.attempt = attempt;
  in.status = status;
  in.flags = SLUICE_REQ_IDEMPOTENT;
  in.now_ns = T0;
  return in;
}

static sluice_backoff_plan plan(sluice_backoff *b,
                                const sluice_backoff_input *in) {
  sluice_backoff_plan p;
  memset(&p, 0xa5, sizeof p);
  cr_assert_eq(sluice_backoff_plan_next(b, in, &p), SLUICE_OK);
  return p;
}

/* ----------------------------------------------------- what to do next --- */

Test(planner, success_is_done) {
  sluice_backoff *b = planner(zero_rand, NULL);
  int st[] = {200, 201, 202, 204, 304};
  size_t i;
  for (i = 0; i < sizeof st / sizeof st[0]; i++) {
    sluice_backoff_input in = req(1, st[i]);
    sluice_backoff_plan p = plan(b, &in);
    cr_assert_eq(p.action, SLUICE_BACKOFF_STOP);
    cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_DONE);
  }
  sluice_backoff_close(b);
}

Test(planner, retryable_statuses_only) {
  sluice_backoff *b = planner(zero_rand, NULL);
  int yes[] = {0, 408, 429, 500, 502, 503, 504};
  int no[] = {400, 401, 403, 404, 405, 410, 413, 422, 501, 505};
  size_t i;
  for (i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    sluice_backoff_input in = req(1, yes[i]);
    sluice_backoff_plan p = plan(b, &in);
    cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY, "status %d", yes[i]);
    cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_RETRYABLE);
  }
  for (i = 0; i < sizeof no / sizeof no[0]; i++) {
    sluice_backoff_input in = req(1, no[i]);
    sluice_backoff_plan p = plan(b, &in);
    cr_assert_eq(p.action, SLUICE_BACKOFF_STOP, "status %d", no[i]);
    cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_NOT_RETRYABLE);
  }
  sluice_backoff_close(b);
}

Test(planner, never_before_retry_after) {
  uint64_t seed = 7;
  sluice_backoff *b = planner(seq_rand, &seed);
  int i, attempt;
  for (attempt = 1; attempt <= 4; attempt++)
    for (i = 0; i < 5000; i++) {
      sluice_backoff_input in = req(attempt, 429);
      sluice_backoff_plan p;
      in.retry_after = "12";
      p = plan(b, &in);
      cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
      cr_assert_eq(p.floor_ms, 12000);
      cr_assert_geq(p.wait_ms, 12000);
      cr_assert_leq(p.wait_ms, 13200); /* max(12 s, <= 4 s) + 10% */
    }
  sluice_backoff_close(b);
}

Test(planner, wait_is_max_of_floor_and_backoff_plus_ten_percent) {
  /* Scripted draws: backoff draw first, then the 0-10% addition. */
  static const uint64_t v[] = {1000, 100, 200, 40};
  script s = {v, 4, 0};
  sluice_backoff *b = planner(script_rand, &s);
  sluice_backoff_input in = req(4, 429); /* window 500 * 2^3 = 4000 ms */
  sluice_backoff_plan p;
  in.retry_after = "1";
  p = plan(b, &in); /* backoff 1000 >= floor 1000; + 100 */
  cr_assert_eq(p.wait_ms, 1100);
  in.retry_after = "2";
  p = plan(b, &in); /* backoff 200 < floor 2000; + 40 */
  cr_assert_eq(p.wait_ms, 2040);
  sluice_backoff_close(b);
}

Test(planner, full_jitter_bounds_per_attempt) {
  /* attempt n draws from [0, min(30 s, 0.5 s * 2^(n-1))], then adds up to
  ** 10%: every plan is within the bound, and over 20000 draws both ends of
  ** the interval are reached (it really is full jitter, not a fixed
  ** delay). */
  sluice_backoff_options o = {0};
  sluice_backoff *b;
  uint64_t seed = 2026;
  int attempt;
  o.rand = seq_rand;
  o.rand_ud = &seed;
  o.max_attempts = 12;
  cr_assert_eq(sluice_backoff_open(&o, &b), SLUICE_OK);
  for (attempt = 1; attempt <= 10; attempt++) {
    int64_t window = 500, lo = INT64_MAX, hi = 0;
    int i, k;
    for (k = 1; k < attempt; k++)
      window *= 2;
    if (window > 30000)
      window = 30000;
    for (i = 0; i < 20000; i++) {
      sluice_backoff_input in = req(attempt, 503);
      sluice_backoff_plan p = plan(b, &in);
      cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
      cr_assert_geq(p.wait_ms, 0);
      cr_assert_leq(p.wait_ms, window + window / 10, "attempt %d", attempt);
      if (p.wait_ms < lo)
        lo = p.wait_ms;
      if (p.wait_ms > hi)
        hi = p.wait_ms;
    }
    cr_assert_leq(lo, window / 100 + 1, "attempt %d: low end never drawn",
                  attempt);
    cr_assert_geq(hi, window, "attempt %d: high end never drawn", attempt);
  }
  sluice_backoff_close(b);
}

Test(planner, retry_after_date_read_against_date_header_not_clock) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  in.retry_after = "Wed, 14 Oct 2026 15:00:00 GMT";
  in.date = "Wed, 14 Oct 2026 14:59:30 GMT";
  p = plan(b, &in);
  cr_assert_eq(p.floor_ms, 30000);
  cr_assert_eq(p.wait_ms, 30000);
  /* The caller's clock is irrelevant to the floor. */
  in.now_ns = INT64_C(123);
  p = plan(b, &in);
  cr_assert_eq(p.floor_ms, 30000);
  /* Obsolete forms are read too. */
  in.date = "Wednesday, 14-Oct-26 14:59:00 GMT";
  in.retry_after = "Wed Oct 14 15:00:00 2026";
  p = plan(b, &in);
  cr_assert_eq(p.floor_ms, 60000);
  /* A date already past is no floor at all. */
  in.date = "Wed, 14 Oct 2026 15:00:05 GMT";
  in.retry_after = "Wed, 14 Oct 2026 15:00:00 GMT";
  p = plan(b, &in);
  cr_assert_eq(p.floor_ms, 0);
  cr_assert_eq(p.flags, 0);
  sluice_backoff_close(b);
}

Test(planner, unreadable_retry_after_waits_the_cap) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  in.retry_after = "Wed, 14 Oct 2026 15:00:00 GMT"; /* no Date */
  p = plan(b, &in);
  cr_assert_eq(p.flags, SLUICE_BACKOFF_F_NO_DATE);
  cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
  cr_assert_geq(p.wait_ms, SLUICE_BACKOFF_CAP_MS);
  in.date = "yesterday";
  p = plan(b, &in);
  cr_assert_eq(p.flags, SLUICE_BACKOFF_F_NO_DATE);
  cr_assert_geq(p.wait_ms, SLUICE_BACKOFF_CAP_MS);
  in.date = NULL;
  in.retry_after = "soon";
  p = plan(b, &in);
  cr_assert_eq(p.flags, SLUICE_BACKOFF_F_BAD_RETRY_AFTER);
  cr_assert_geq(p.wait_ms, SLUICE_BACKOFF_CAP_MS);
  in.retry_after = "-3";
  p = plan(b, &in);
  cr_assert_eq(p.flags, SLUICE_BACKOFF_F_BAD_RETRY_AFTER);
  sluice_backoff_close(b);
}

Test(planner, huge_retry_after_is_honoured_not_clamped) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  in.retry_after = "999999999999999999999";
  p = plan(b, &in);
  cr_assert(p.flags & SLUICE_BACKOFF_F_BAD_RETRY_AFTER);
  cr_assert_gt(p.wait_ms, INT64_C(1) << 60);
  in.deadline_ns = T0 + INT64_C(3600) * 1000 * MS;
  p = plan(b, &in);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_DEADLINE);
  sluice_backoff_close(b);
}

Test(planner, lockout_stops_until_it_elapses) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  in.penalty_box = "Active-Lockout";
  in.retry_after = "300";
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_STOP);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_LOCKOUT);
  cr_assert_eq(p.wait_ms, 300000);
  /* Field values are case-insensitive tokens with optional spaces. */
  in.penalty_box = " active-LOCKOUT\t";
  p = plan(b, &in);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_LOCKOUT);
  /* An hour-long box sent as a date. */
  in.retry_after = "Wed, 14 Oct 2026 15:00:00 GMT";
  in.date = "Wed, 14 Oct 2026 14:00:00 GMT";
  p = plan(b, &in);
  cr_assert_eq(p.wait_ms, 3600000);
  /* No Retry-After (a suspension): the end is unknown. */
  in.retry_after = NULL;
  p = plan(b, &in);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_LOCKOUT);
  cr_assert_eq(p.wait_ms, -1);
  /* Lockout wins over every budget: it is surfaced, not retried. */
  in = req(1, 429);
  in.penalty_box = "Active-Lockout";
  in.flags = 0;
  p = plan(b, &in);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_LOCKOUT);
  sluice_backoff_close(b);
}

Test(planner, warning_still_retries) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  in.penalty_box = "Warning";
  in.retry_after = "12";
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
  cr_assert_eq(p.wait_ms, 12000);
  sluice_backoff_close(b);
}

Test(planner, auth_endpoint_at_most_two_retries) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  in.flags = SLUICE_REQ_AUTH | SLUICE_REQ_IDEMPOTENCY_KEY;
  p = plan(b, &in); /* first request failed: retry 1 */
  cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
  in.attempt = 2; /* retry 2 */
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
  in.attempt = 3; /* a third retry is refused */
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_STOP);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_AUTH_LIMIT);
  /* The same attempt off the auth endpoint still retries. */
  in.flags = SLUICE_REQ_IDEMPOTENT;
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
  sluice_backoff_close(b);
}

Test(planner, auth_retry_budget_configurable) {
  sluice_backoff_options o = {0};
  sluice_backoff *b;
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  o.rand = zero_rand;
  o.auth_max_retries = SLUICE_BACKOFF_NONE;
  cr_assert_eq(sluice_backoff_open(&o, &b), SLUICE_OK);
  in.flags = SLUICE_REQ_AUTH | SLUICE_REQ_IDEMPOTENT;
  p = plan(b, &in);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_AUTH_LIMIT);
  sluice_backoff_close(b);
}

Test(planner, non_idempotent_needs_idempotency_key) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  in.flags = 0; /* a POST */
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_STOP);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_NOT_IDEMPOTENT);
  in.status = 0; /* a timeout is no safer: the POST may have landed */
  p = plan(b, &in);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_NOT_IDEMPOTENT);
  in.flags = SLUICE_REQ_IDEMPOTENCY_KEY;
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
  sluice_backoff_close(b);
}

Test(planner, conflict_polls_the_job) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 409);
  sluice_backoff_plan p;
  in.flags = 0; /* a reconcile POST: never resubmitted, the job is polled */
  in.retry_after = "5";
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_POLL);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_CONFLICT);
  cr_assert_eq(p.wait_ms, 5000);
  in.deadline_ns = T0 + 4000 * MS;
  p = plan(b, &in);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_DEADLINE);
  sluice_backoff_close(b);
}

Test(planner, max_attempts) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(4, 503);
  sluice_backoff_plan p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
  in.attempt = 5;
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_STOP);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_MAX_ATTEMPTS);
  sluice_backoff_close(b);
}

Test(planner, deadline_fails_fast) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 429);
  sluice_backoff_plan p;
  in.retry_after = "10";
  in.deadline_ns = T0 + 10000 * MS; /* exactly enough */
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY);
  cr_assert_eq(p.wait_ms, 10000);
  in.deadline_ns = T0 + 9999 * MS; /* a millisecond short */
  p = plan(b, &in);
  cr_assert_eq(p.action, SLUICE_BACKOFF_STOP);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_DEADLINE);
  cr_assert_eq(p.wait_ms, 10000, "reports the server's floor");
  in.deadline_ns = T0 - 1; /* already past */
  in.retry_after = NULL;
  p = plan(b, &in);
  cr_assert_eq(p.reason, SLUICE_BACKOFF_WHY_DEADLINE);
  sluice_backoff_close(b);
}

Test(planner, exposes_ratelimit_remaining) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in = req(1, 200);
  sluice_backoff_plan p;
  p = plan(b, &in);
  cr_assert_eq(p.remaining, -1);
  in.remaining = " 2412";
  p = plan(b, &in);
  cr_assert_eq(p.remaining, 2412);
  in.remaining = "12abc";
  in.remaining_len = 2; /* not NUL-terminated where it ends */
  p = plan(b, &in);
  cr_assert_eq(p.remaining, 12);
  in.remaining_len = 0;
  p = plan(b, &in);
  cr_assert_eq(p.remaining, -1);
  cr_assert_eq(p.flags, SLUICE_BACKOFF_F_BAD_REMAINING);
  sluice_backoff_close(b);
}

Test(planner, validates_input) {
  sluice_backoff *b = planner(zero_rand, NULL);
  sluice_backoff_input in;
  sluice_backoff_plan p;
#define BAD(stmt)                                                              \
  do {                                                                         \
    in = req(1, 429);                                                          \
    stmt;                                                                      \
    cr_assert_eq(sluice_backoff_plan_next(b, &in, &p), SLUICE_EINVAL,          \
                 "accepted: %s", #stmt);                                       \
  } while (0)
  BAD(in.attempt = 0);
  BAD(in.status = 99);
  BAD(in.status = 600);
  BAD(in.status = -1);
  BAD(in.flags = 0x100);
  BAD(in.now_ns = -1);
  BAD(in.deadline_ns = -1);
#undef BAD
  in = req(1, 429);
  cr_assert_eq(sluice_backoff_plan_next(NULL, &in, &p), SLUICE_EINVAL);
  cr_assert_eq(sluice_backoff_plan_next(b, NULL, &p), SLUICE_EINVAL);
  cr_assert_eq(sluice_backoff_plan_next(b, &in, NULL), SLUICE_EINVAL);
  sluice_backoff_close(b);
  sluice_backoff_close(NULL);
}

Test(planner, validates_options) {
  sluice_backoff_options o = {0};
  sluice_backoff *b = (sluice_backoff *)&o;
  o.base_ms = 1000;
  o.cap_ms = 500;
  cr_assert_eq(sluice_backoff_open(&o, &b), SLUICE_EINVAL);
  cr_assert_null(b);
  o.cap_ms = 0;
  o.base_ms = -1;
  cr_assert_eq(sluice_backoff_open(&o, &b), SLUICE_EINVAL);
  o.base_ms = 0;
  o.max_attempts = -2;
  cr_assert_eq(sluice_backoff_open(&o, &b), SLUICE_EINVAL);
  o.max_attempts = 0;
  o.auth_max_retries = -2;
  cr_assert_eq(sluice_backoff_open(&o, &b), SLUICE_EINVAL);
  cr_assert_eq(sluice_backoff_open(NULL, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_backoff_open(NULL, &b), SLUICE_OK);
  sluice_backoff_close(b);
}

Test(retry_after_parse, direct) {
  int64_t w = -7;
  cr_assert_eq(sluice_backoff_parse_retry_after("120", 3, NULL, 0, &w),
               SLUICE_OK);
  cr_assert_eq(w, 120000);
  cr_assert_eq(sluice_backoff_parse_retry_after("0", 1, NULL, 0, &w),
               SLUICE_OK);
  cr_assert_eq(w, 0);
  w = -7;
  cr_assert_eq(sluice_backoff_parse_retry_after("12s", 3, NULL, 0, &w),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_backoff_parse_retry_after("1.5", 3, NULL, 0, &w),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_backoff_parse_retry_after("", 0, NULL, 0, &w),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_backoff_parse_retry_after(
                   "Wed, 14 Oct 2026 15:00:00 GMT", 29, NULL, 0, &w),
               SLUICE_EINVAL, "a date needs the Date header");
  cr_assert_eq(w, -7, "wrote on failure");
}

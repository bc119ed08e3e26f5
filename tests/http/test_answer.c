/*
** The server side: status, headers and problem+json bodies, checked
** against spec section 5's examples field for field.  Bodies are parsed
** back with jansson, so what is checked is the JSON a client sees.
*/
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"
#include "../common/splitmix.h"
#include "../common/units.h"

/* 2026-10-14T14:00:00Z, the hour before the spec's lockout example. */
#define NOW_NS (INT64_C(1791986400) * SEC)

/* ------------------------------------------------------- test helpers --- */

/* A random source that returns a fixed value: 0 gives no jitter, ~0 the
** most the rejection sampler keeps. */
static uint64_t fixed_rand(void *ud) { return *(uint64_t *)ud; }

/* A reproducible generator (SplitMix64 of its own) for the jitter draws. */
static uint64_t seq_rand(void *ud) {
  uint64_t *s = ud;
  return splitmix64(s);
}

static uint64_t g_zero = 0;

static sluice_http *open_h(int form, unsigned flags, uint64_t (*r)(void *),
                           void *ud) {
  sluice_http_options o = {0};
  sluice_http *h = NULL;
  o.problem_base = "https://api.yourdomain.com/errors";
  o.header_form = form;
  o.flags = flags;
  o.rand = r;
  o.rand_ud = ud;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  return h;
}

typedef struct hdrs {
  size_t n;
  sluice_http_header h[SLUICE_HTTP_MAX_HEADERS];
  char buf[SLUICE_HTTP_HEADER_BUF];
} hdrs;

static void render(sluice_http *h, const sluice_http_answer *a, hdrs *out) {
  size_t need = 0;
  cr_assert_eq(sluice_http_answer_headers(h, a, out->h, SLUICE_HTTP_MAX_HEADERS,
                                          &out->n, out->buf, sizeof out->buf,
                                          &need),
               SLUICE_OK);
}

static const char *get(const hdrs *x, const char *name) {
  size_t i;
  for (i = 0; i < x->n; i++)
    if (strcmp(x->h[i].name, name) == 0)
      return x->h[i].value;
  return NULL;
}

static void expect_headers(const hdrs *x, const char *const *want,
                           size_t nwant) {
  size_t i;
  cr_assert_eq(x->n, nwant / 2, "got %zu headers, want %zu", x->n, nwant / 2);
  for (i = 0; i < x->n; i++) {
    cr_assert_str_eq(x->h[i].name, want[2 * i]);
    cr_assert_str_eq(x->h[i].value, want[2 * i + 1], "%s", want[2 * i]);
  }
}

static json_t *body_json(sluice_http *h, const sluice_http_answer *a) {
  char buf[4096];
  size_t len = 0;
  json_error_t err;
  json_t *j;
  cr_assert_eq(sluice_http_answer_body(h, a, buf, sizeof buf, &len),
               SLUICE_OK);
  cr_assert_eq(strlen(buf), len);
  j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
  cr_assert_not_null(j, "invalid JSON (%s): %s", err.text, buf);
  return j;
}

/* The spec's throttled example as facts. */
static sluice_http_facts spec_throttled(void) {
  sluice_http_facts f = {0};
  f.outcome = SLUICE_HTTP_THROTTLED;
  f.penalty = SLUICE_HTTP_PENALTY_WARNING;
  f.flags = SLUICE_HTTP_F_STRIKES;
  f.quota = 3000;
  f.window_s = 60;
  f.limit = 3000;
  f.remaining = 0;
  f.reset_ns = 12 * SEC;
  f.retry_after_ns = 11 * SEC + 400000000; /* 11.4 s: sent as 12 */
  f.strikes_remaining = 14;
  f.cost = 10;
  f.refill_per_s = 50;
  f.tier = "growth";
  f.method = "POST";
  f.route = "/v1/ledgers/reconcile";
  f.instance = "/v1/ledgers/reconcile";
  f.request_id = "req_01HV...";
  return f;
}

/* --------------------------------------------------- spec's examples --- */

Test(answer, spec_200_headers) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_LEGACY, 0, fixed_rand, &g_zero);
  sluice_http_facts f = {0};
  sluice_http_answer a;
  hdrs x;
  char body[8];
  size_t len = 99;
  static const char *const want[] = {
      "RateLimit-Policy", "3000;w=60", "RateLimit-Limit", "3000",
      "RateLimit-Remaining", "2412", "RateLimit-Reset", "18"};
  f.outcome = SLUICE_HTTP_ALLOWED;
  f.quota = 3000;
  f.window_s = 60;
  f.limit = 3000;
  f.remaining = 2412;
  f.reset_ns = 17 * SEC + 1; /* just over 17 s: rounds up to 18 */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 200);
  cr_assert_str_eq(sluice_http_reason(a.status), "OK");
  render(h, &a, &x);
  expect_headers(&x, want, sizeof want / sizeof want[0]);
  cr_assert_eq(sluice_http_answer_body(h, &a, body, sizeof body, &len),
               SLUICE_OK);
  cr_assert_eq(len, 0, "a 200 has no problem body");
  sluice_http_close(h);
}

Test(answer, spec_429_headers) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_LEGACY, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  static const char *const want[] = {
      "Content-Type", "application/problem+json", "Retry-After", "12",
      "RateLimit-Policy", "3000;w=60", "RateLimit-Limit", "3000",
      "RateLimit-Remaining", "0", "RateLimit-Reset", "12",
      "X-Penalty-Box-Status", "Warning"};
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 429);
  cr_assert_str_eq(sluice_http_reason(a.status), "Too Many Requests");
  render(h, &a, &x);
  expect_headers(&x, want, sizeof want / sizeof want[0]);
  sluice_http_close(h);
}

/* The payload of spec section 5, verbatim. */
static const char k_spec_body[] =
    "{\n"
    "  \"type\": \"https://api.yourdomain.com/errors/rate-limit-exceeded\",\n"
    "  \"title\": \"Too Many Requests\",\n"
    "  \"status\": 429,\n"
    "  \"detail\": \"Quota for tier 'growth' exhausted (3000 points/min). "
    "POST /v1/ledgers/reconcile costs 10 points. Capacity refills at 50 "
    "points/second; retry in 12 seconds.\",\n"
    "  \"instance\": \"/v1/ledgers/reconcile\",\n"
    "  \"retry_after_seconds\": 12,\n"
    "  \"recommended_backoff\": \"exponential_with_full_jitter\",\n"
    "  \"quota_tier\": \"growth\",\n"
    "  \"penalty_strikes_remaining\": 14,\n"
    "  \"request_id\": \"req_01HV...\"\n"
    "}";

Test(answer, spec_payload_field_for_field_in_order) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_LEGACY, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  json_t *got, *want;
  void *gi, *wi;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  got = body_json(h, &a);
  want = json_loads(k_spec_body, 0, NULL);
  cr_assert_not_null(want);
  /* Same members in the same order with equal values. */
  gi = json_object_iter(got);
  wi = json_object_iter(want);
  while (gi && wi) {
    cr_assert_str_eq(json_object_iter_key(gi), json_object_iter_key(wi));
    cr_assert(json_equal(json_object_iter_value(gi),
                         json_object_iter_value(wi)),
              "member %s differs", json_object_iter_key(wi));
    gi = json_object_iter_next(got, gi);
    wi = json_object_iter_next(want, wi);
  }
  cr_assert_null(gi, "extra member %s", gi ? json_object_iter_key(gi) : "");
  cr_assert_null(wi, "missing member %s", wi ? json_object_iter_key(wi) : "");
  json_decref(got);
  json_decref(want);
  sluice_http_close(h);
}

Test(answer, pretty_body_is_byte_identical_to_spec) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_LEGACY, SLUICE_HTTP_PRETTY,
                          fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  char buf[2048];
  size_t len;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_body(h, &a, buf, sizeof buf, &len),
               SLUICE_OK);
  cr_assert_str_eq(buf, k_spec_body);
  sluice_http_close(h);
}

/* ------------------------------------------------------ header forms --- */

Test(answer, structured_draft10_form) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_SF, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  static const char *const want[] = {
      "Content-Type", "application/problem+json", "Retry-After", "12",
      "RateLimit-Policy", "\"growth-key\";q=3000;w=60", "RateLimit",
      "\"growth-key\";r=0;t=12", "X-Penalty-Box-Status", "Warning"};
  f.policy_name = "growth-key";
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  expect_headers(&x, want, sizeof want / sizeof want[0]);
  sluice_http_close(h);
}

Test(answer, structured_reset_not_after_retry_after) {
  /* Draft-10 section 6: Retry-After SHOULD NOT be earlier than t.  The
  ** bucket is full in 60 s but a retry passes in 12: t says 12, while the
  ** legacy RateLimit-Reset keeps "until full". */
  sluice_http *h = open_h(SLUICE_HTTP_FORM_BOTH, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  f.reset_ns = 60 * SEC;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "Retry-After"), "12");
  cr_assert_str_eq(get(&x, "RateLimit"), "\"default\";r=0;t=12");
  cr_assert_str_eq(get(&x, "RateLimit-Reset"), "60");
  sluice_http_close(h);
}

Test(answer, structured_default_name_and_escaping) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_SF, 0, fixed_rand, &g_zero);
  sluice_http_facts f = {0};
  sluice_http_answer a;
  hdrs x;
  f.limit = 100;
  f.remaining = 50;
  f.reset_ns = 30 * SEC;
  f.quota = 100;
  f.window_s = 10;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "RateLimit-Policy"), "\"default\";q=100;w=10");
  cr_assert_str_eq(get(&x, "RateLimit"), "\"default\";r=50;t=30");
  cr_assert_null(get(&x, "RateLimit-Limit"));
  f.policy_name = "a\"b\\c";
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "RateLimit"), "\"a\\\"b\\\\c\";r=50;t=30");
  f.policy_name = "caf\xc3\xa9"; /* sf-string is ASCII only */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.policy_name = "x\ny";
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  sluice_http_close(h);
}

Test(answer, both_forms) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_BOTH, 0, fixed_rand, &g_zero);
  sluice_http_facts f = {0};
  sluice_http_answer a;
  hdrs x;
  static const char *const want[] = {
      "RateLimit-Policy", "\"default\";q=3000;w=60", "RateLimit-Limit",
      "3000", "RateLimit-Remaining", "2412", "RateLimit-Reset", "18",
      "RateLimit", "\"default\";r=2412;t=18"};
  f.quota = 3000;
  f.window_s = 60;
  f.limit = 3000;
  f.remaining = 2412;
  f.reset_ns = 18 * SEC;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  expect_headers(&x, want, sizeof want / sizeof want[0]);
  sluice_http_close(h);
}

Test(answer, no_limit_no_ratelimit_headers) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_BOTH, 0, fixed_rand, &g_zero);
  sluice_http_facts f = {0};
  sluice_http_answer a;
  hdrs x;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_eq(x.n, 0);
  sluice_http_close(h);
}

/* ------------------------------------------------------- Retry-After --- */

Test(retry_after, ceil_and_minimum_one_second) {
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  f.retry_after_ns = 12 * SEC; /* exact: stays 12 */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 12);
  f.retry_after_ns = 12 * SEC + 1; /* a nanosecond more: 13 */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 13);
  f.retry_after_ns = 0; /* a denial never says "now" */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 1);
  f.retry_after_ns = 1;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 1);
  sluice_http_close(h);
}

Test(retry_after, jitter_bounds_over_many_draws) {
  /* For each wait, 20000 draws: every value sent is within
  ** [S, S + floor(S/10)], never below the true wait, and every value of
  ** that range turns up (the jitter really spreads). */
  static const int64_t waits_ms[] = {400, 9999, 10000, 12345, 59000, 299001};
  uint64_t seed = 12345;
  sluice_http *h = open_h(0, 0, seq_rand, &seed);
  size_t w;
  for (w = 0; w < sizeof waits_ms / sizeof waits_ms[0]; w++) {
    sluice_http_facts f = spec_throttled();
    sluice_http_answer a;
    int64_t s = (waits_ms[w] + 999) / 1000, span = s / 10, i;
    int seen[64] = {0};
    f.retry_after_ns = waits_ms[w] * 1000000;
    for (i = 0; i < 20000; i++) {
      cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
      cr_assert_geq(a.retry_after_s * SEC, f.retry_after_ns);
      cr_assert_geq(a.retry_after_s, s);
      cr_assert_leq(a.retry_after_s, s + span);
      seen[a.retry_after_s - s]++;
    }
    for (i = 0; i <= span; i++)
      cr_assert_gt(seen[i], 0, "wait %lld ms: +%lld never drawn",
                   (long long)waits_ms[w], (long long)i);
  }
  sluice_http_close(h);
}

Test(retry_after, header_and_body_agree_with_jitter) {
  uint64_t top = 12; /* 12 mod 13: the largest jitter for S = 120 */
  sluice_http *h = open_h(0, 0, fixed_rand, &top);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  json_t *j;
  char want[32];
  f.retry_after_ns = 120 * SEC;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 132);
  render(h, &a, &x);
  snprintf(want, sizeof want, "%lld", (long long)a.retry_after_s);
  cr_assert_str_eq(get(&x, "Retry-After"), want);
  j = body_json(h, &a);
  cr_assert_eq(json_integer_value(json_object_get(j, "retry_after_seconds")),
               a.retry_after_s);
  cr_assert(strstr(json_string_value(json_object_get(j, "detail")), want));
  json_decref(j);
  sluice_http_close(h);
}

Test(retry_after, default_generator_stays_in_bounds) {
  sluice_http *h = open_h(0, 0, NULL, NULL);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  int i;
  f.retry_after_ns = 100 * SEC;
  for (i = 0; i < 2000; i++) {
    cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
    cr_assert(a.retry_after_s >= 100 && a.retry_after_s <= 110);
  }
  sluice_http_close(h);
}

/* ------------------------------------------------------------ lockout --- */

static sluice_http_facts boxed(int level, int64_t left_ns) {
  sluice_http_facts f = {0};
  f.outcome = SLUICE_HTTP_BOXED;
  f.penalty = SLUICE_HTTP_PENALTY_LOCKOUT;
  f.penalty_level = level;
  f.retry_after_ns = left_ns;
  f.tier = "growth";
  f.instance = "/v1/entries";
  f.request_id = "req_42";
  return f;
}

Test(lockout, short_box_delta_seconds) {
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  sluice_http_facts f = boxed(1, 300 * SEC);
  sluice_http_answer a;
  hdrs x;
  json_t *j;
  static const char *const want[] = {
      "Content-Type", "application/problem+json", "Retry-After", "300",
      "X-Penalty-Box-Status", "Active-Lockout"};
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 429);
  render(h, &a, &x);
  expect_headers(&x, want, sizeof want / sizeof want[0]);
  j = body_json(h, &a);
  cr_assert_str_eq(json_string_value(json_object_get(j, "type")),
                   "https://api.yourdomain.com/errors/penalty-box-active");
  cr_assert_eq(json_integer_value(json_object_get(j, "penalty_level")), 1);
  cr_assert_str_eq(json_string_value(json_object_get(j, "lockout_ends_at")),
                   "2026-10-14T14:05:00Z");
  cr_assert_eq(json_integer_value(json_object_get(j, "retry_after_seconds")),
               300);
  cr_assert_null(json_object_get(j, "recommended_backoff"));
  json_decref(j);
  sluice_http_close(h);
}

Test(lockout, hour_long_box_sends_imf_fixdate) {
  /* The spec's example: an L2 box of 60 min ending at 15:00:00 GMT. */
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER | SLUICE_HTTP_DATE_HEADER,
                          NULL, NULL);
  sluice_http_facts f = boxed(2, 3600 * SEC);
  sluice_http_answer a;
  hdrs x;
  int64_t at, date;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "Retry-After"), "Wed, 14 Oct 2026 15:00:00 GMT");
  cr_assert_str_eq(get(&x, "Date"), "Wed, 14 Oct 2026 14:00:00 GMT");
  /* What a client computes from the two is the true wait. */
  cr_assert_eq(sluice_backoff_parse_retry_after(get(&x, "Retry-After"), 29,
                                                get(&x, "Date"), 29, &at),
               SLUICE_OK);
  cr_assert_eq(at, 3600 * 1000);
  (void)date;
  sluice_http_close(h);
}

Test(lockout, date_never_earlier_than_true_end) {
  /* Now is mid-second and the box ends mid-second: the date rounds the
  ** end up, the Date header rounds now down, so the difference a client
  ** reads covers the true wait. */
  uint64_t seed = 99;
  sluice_http *h = open_h(0, 0, seq_rand, &seed);
  int64_t now = NOW_NS + 700000000, left = 3600 * SEC + 500000000;
  sluice_http_facts f = boxed(2, left);
  sluice_http_answer a;
  int i;
  for (i = 0; i < 500; i++) {
    cr_assert_eq(sluice_http_answer_make(h, &f, now, &a), SLUICE_OK);
    cr_assert(a.retry_is_date);
    cr_assert_geq(a.retry_at_s * SEC, now + left);
    cr_assert_eq(a.now_s, now / SEC);
    cr_assert_geq((a.retry_at_s - a.now_s) * SEC, left);
    cr_assert_leq(a.retry_at_s - a.lockout_ends_s, 360); /* X <= S/10 */
  }
  sluice_http_close(h);
}

Test(lockout, date_threshold_and_no_dates) {
  sluice_http_options o = {0};
  sluice_http *h;
  sluice_http_facts f = boxed(1, 300 * SEC);
  sluice_http_answer a;
  o.flags = SLUICE_HTTP_NO_JITTER;
  o.date_after_s = 300;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert(a.retry_is_date, "300 s box with date_after_s=300");
  sluice_http_close(h);
  o.flags |= SLUICE_HTTP_NO_DATES;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  f.retry_after_ns = 7200 * SEC;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert(!a.retry_is_date);
  cr_assert_eq(a.retry_after_s, 7200);
  sluice_http_close(h);
}

Test(lockout, end_time_from_lockout_ends_ns) {
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  sluice_http_facts f = boxed(1, 0);
  sluice_http_answer a;
  f.lockout_ends_ns = NOW_NS + 90 * SEC;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 90);
  /* Both given: the later one wins, so the wait is never short. */
  f.retry_after_ns = 60 * SEC;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 90);
  f.retry_after_ns = 120 * SEC;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 120);
  /* Neither: not a box. */
  f.retry_after_ns = 0;
  f.lockout_ends_ns = NOW_NS;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  sluice_http_close(h);
}

Test(lockout, suspension_promises_no_time) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = boxed(3, SLUICE_FOREVER);
  sluice_http_answer a;
  hdrs x;
  json_t *j;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_null(get(&x, "Retry-After"));
  cr_assert_str_eq(get(&x, "X-Penalty-Box-Status"), "Active-Lockout");
  j = body_json(h, &a);
  cr_assert_null(json_object_get(j, "retry_after_seconds"));
  cr_assert_null(json_object_get(j, "lockout_ends_at"));
  cr_assert_eq(json_integer_value(json_object_get(j, "penalty_level")), 3);
  cr_assert(strstr(json_string_value(json_object_get(j, "detail")),
                   "suspended"));
  json_decref(j);
  sluice_http_close(h);
}

/* ----------------------------------------------------- status and types --- */

Test(status, every_outcome) {
  static const struct {
    int outcome, status;
    const char *type;
    const char *title;
  } k[] = {
      {SLUICE_HTTP_THROTTLED, 429, "rate-limit-exceeded", "Too Many Requests"},
      {SLUICE_HTTP_CONCURRENCY, 429, "concurrency-limit-exceeded",
       "Too Many Requests"},
      {SLUICE_HTTP_CONFLICT, 409, "ledger-conflict", "Conflict"},
      {SLUICE_HTTP_FAIL_CLOSED, 503, "service-unavailable",
       "Service Unavailable"},
  };
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  size_t i;
  for (i = 0; i < sizeof k / sizeof k[0]; i++) {
    sluice_http_facts f = {0};
    sluice_http_answer a;
    json_t *j;
    hdrs x;
    char type[128];
    f.outcome = k[i].outcome;
    f.retry_after_ns = 15 * SEC;
    f.tier = "sandbox";
    cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
    cr_assert_eq(a.status, k[i].status);
    render(h, &a, &x);
    cr_assert_str_eq(get(&x, "Retry-After"), "15");
    cr_assert_str_eq(get(&x, "Content-Type"), "application/problem+json");
    cr_assert_null(get(&x, "X-Penalty-Box-Status"));
    j = body_json(h, &a);
    snprintf(type, sizeof type, "https://api.yourdomain.com/errors/%s",
             k[i].type);
    cr_assert_str_eq(json_string_value(json_object_get(j, "type")), type);
    cr_assert_str_eq(json_string_value(json_object_get(j, "title")),
                     k[i].title);
    cr_assert_eq(json_integer_value(json_object_get(j, "status")),
                 k[i].status);
    cr_assert_null(json_object_get(j, "penalty_level"));
    json_decref(j);
  }
  sluice_http_close(h);
}

/* A suspension is a 403 of its own type: no Retry-After, no box end, no
** "Too Many Requests". */
Test(status, suspended_is_forbidden) {
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  sluice_http_facts f = {0};
  sluice_http_answer a;
  json_t *j;
  hdrs x;
  f.outcome = SLUICE_HTTP_SUSPENDED;
  f.retry_after_ns = 15 * SEC; /* ignored: no wait lifts a suspension */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 403);
  render(h, &a, &x);
  cr_assert_null(get(&x, "Retry-After"));
  cr_assert_str_eq(get(&x, "X-Penalty-Box-Status"), "Active-Lockout");
  j = body_json(h, &a);
  cr_assert_str_eq(json_string_value(json_object_get(j, "type")),
                   "https://api.yourdomain.com/errors/key-suspended");
  cr_assert_str_eq(json_string_value(json_object_get(j, "title")),
                   "Forbidden");
  cr_assert_eq(json_integer_value(json_object_get(j, "penalty_level")), 3);
  cr_assert_null(json_object_get(j, "lockout_ends_at"));
  cr_assert_null(json_object_get(j, "retry_after_seconds"));
  json_decref(j);
  sluice_http_close(h);
}

Test(status, accepted_async_job) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = {0};
  sluice_http_answer a;
  hdrs x;
  size_t len = 5;
  char b[4];
  f.outcome = SLUICE_HTTP_ACCEPTED;
  f.location = "/v1/jobs/job_123";
  f.limit = 3000;
  f.remaining = 2990;
  f.reset_ns = SEC / 5;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 202);
  render(h, &a, &x);
  cr_assert_str_eq(x.h[0].name, "Location");
  cr_assert_str_eq(x.h[0].value, "/v1/jobs/job_123");
  cr_assert_null(get(&x, "Retry-After"));
  cr_assert_null(get(&x, "Content-Type"));
  cr_assert_str_eq(get(&x, "RateLimit-Reset"), "1");
  cr_assert_eq(sluice_http_answer_body(h, &a, b, sizeof b, &len), SLUICE_OK);
  cr_assert_eq(len, 0);
  f.location = "/v1/jobs/a b"; /* a space cannot be in a Location */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.location = "/v1/jobs/a\r\nSet-Cookie: x=1";
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  sluice_http_close(h);
}

Test(status, override_ranges) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  json_t *j;
  f.status = 503;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 503);
  j = body_json(h, &a);
  cr_assert_eq(json_integer_value(json_object_get(j, "status")), 503);
  /* RFC 9457: the title is the type's, whatever the status. */
  cr_assert_str_eq(json_string_value(json_object_get(j, "title")),
                   "Too Many Requests");
  json_decref(j);
  f.status = 200; /* a denial cannot be a success */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.status = 600;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f = (sluice_http_facts){0};
  f.status = 201;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 201);
  f.status = 429; /* a success cannot be a denial */
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  sluice_http_close(h);
}

/* --------------------------------------------------- safety of bodies --- */

Test(body, escapes_every_caller_string) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  json_t *j;
  const char *nasty = "a\"b\\c\n\t\x01</script>\xe2\x82\xac";
  f.tier = nasty;
  f.route = nasty;
  f.method = nasty;
  f.instance = nasty;
  f.request_id = nasty;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  j = body_json(h, &a); /* parses: the escaping is right */
  cr_assert_str_eq(json_string_value(json_object_get(j, "quota_tier")), nasty);
  cr_assert_str_eq(json_string_value(json_object_get(j, "instance")), nasty);
  cr_assert_str_eq(json_string_value(json_object_get(j, "request_id")), nasty);
  cr_assert(strstr(json_string_value(json_object_get(j, "detail")), nasty));
  json_decref(j);
  sluice_http_close(h);
}

Test(body, rejects_invalid_utf8_and_long_strings) {
  static const char *const bad[] = {"\xff", "\xc0\xaf", "\xed\xa0\x80",
                                    "\xf4\x90\x80\x80", "ab\xe2\x82"};
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  char buf[4096], big[1100];
  size_t len, i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    f.request_id = bad[i];
    cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
    cr_assert_eq(sluice_http_answer_body(h, &a, buf, sizeof buf, &len),
                 SLUICE_EINVAL, "accepted bad UTF-8 #%zu", i);
  }
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  f.request_id = big;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_body(h, &a, buf, sizeof buf, &len),
               SLUICE_EINVAL);
  sluice_http_close(h);
}

Test(body, only_documented_members) {
  /* With every fact set, the body holds the spec's members and nothing
  ** else: there is nowhere for a key name or backend detail to come from. */
  static const char *const allowed[] = {
      "type", "title", "status", "detail", "instance", "retry_after_seconds",
      "recommended_backoff", "quota_tier", "penalty_strikes_remaining",
      "penalty_level", "lockout_ends_at", "request_id"};
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  int outcome;
  for (outcome = SLUICE_HTTP_THROTTLED; outcome <= SLUICE_HTTP_FAIL_CLOSED;
       outcome++) {
    sluice_http_facts f = spec_throttled();
    sluice_http_answer a;
    const char *k;
    json_t *v, *j;
    f.outcome = outcome;
    if (outcome == SLUICE_HTTP_BOXED) {
      f.penalty = SLUICE_HTTP_PENALTY_LOCKOUT;
      f.penalty_level = 2;
    }
    cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
    j = body_json(h, &a);
    json_object_foreach(j, k, v) {
      size_t i;
      int ok = 0;
      (void)v;
      for (i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        ok |= strcmp(k, allowed[i]) == 0;
      cr_assert(ok, "unexpected member %s", k);
    }
    json_decref(j);
  }
  sluice_http_close(h);
}

Test(body, base_uri_configurable_and_required) {
  sluice_http_options o = {0};
  sluice_http *h;
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  char buf[2048];
  size_t len;
  json_t *j;
  o.problem_base = "urn:example:problems/";
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  j = body_json(h, &a);
  cr_assert_str_eq(json_string_value(json_object_get(j, "type")),
                   "urn:example:problems/rate-limit-exceeded");
  json_decref(j);
  sluice_http_close(h);
  cr_assert_eq(sluice_http_open(NULL, &h), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_body(h, &a, buf, sizeof buf, &len),
               SLUICE_ECONFIG);
  sluice_http_close(h);
  o.problem_base = "/errors/"; /* relative */
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_EINVAL);
  cr_assert_null(h);
  o.problem_base = "https://x/\"y";
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_EINVAL);
  o.problem_base = "1http://x/";
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_EINVAL);
}

/* ---------------------------------------------------- buffers, errors --- */

Test(buffers, body_erange_reports_size_and_keeps_buffer) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  char small[16], big[2048];
  size_t need = 0, len = 0;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  memset(small, 'Z', sizeof small);
  cr_assert_eq(sluice_http_answer_body(h, &a, small, sizeof small, &need),
               SLUICE_ERANGE);
  cr_assert_eq(small[0], 'Z', "buffer touched on SLUICE_ERANGE");
  cr_assert_eq(small[15], 'Z');
  cr_assert_eq(sluice_http_answer_body(h, &a, big, need, &len), SLUICE_OK);
  cr_assert_eq(len + 1, need);
  cr_assert_eq(sluice_http_answer_body(h, &a, big, need - 1, &len),
               SLUICE_ERANGE);
  sluice_http_close(h);
}

Test(buffers, headers_erange_reports_sizes) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  sluice_http_header hv[SLUICE_HTTP_MAX_HEADERS];
  char buf[256];
  size_t n = 0, need = 0, n2, need2;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_headers(h, &a, hv, 2, &n, buf, sizeof buf,
                                          &need),
               SLUICE_ERANGE);
  cr_assert_eq(n, 7);
  cr_assert_eq(sluice_http_answer_headers(h, &a, hv, 7, &n2, buf, 10, &need2),
               SLUICE_ERANGE);
  cr_assert_eq(need2, need);
  cr_assert_eq(sluice_http_answer_headers(h, &a, hv, n, &n2, buf, need,
                                          &need2),
               SLUICE_OK);
  cr_assert_eq(n2, 7);
  cr_assert_str_eq(hv[6].value, "Warning");
  sluice_http_close(h);
}

static int count_cb(const char *name, const char *value, void *ud) {
  (void)name;
  (void)value;
  return ++*(int *)ud == 3 ? 77 : 0;
}

/* The documented sizes hold for the longest answer of every outcome: a
** 2048-byte Location, two 64-byte policy names and a 32-byte unit that are
** all escaped, the largest numbers, a century-long wait, both forms. */
Test(buffers, documented_sizes_suffice_for_the_longest_answer) {
  static char loc[2049], nm[65], nm2[65], qu[33];
  sluice_http_options o = {0};
  sluice_http *h;
  int oc;
  memset(loc, 'a', 2048);
  loc[0] = '/';
  memset(nm, '"', 64);
  memset(nm2, '\\', 64);
  memset(qu, '"', 32);
  o.header_form = SLUICE_HTTP_FORM_BOTH;
  o.flags = SLUICE_HTTP_DATE_HEADER;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  for (oc = SLUICE_HTTP_ALLOWED; oc <= SLUICE_HTTP_SUSPENDED; oc++) {
    sluice_http_facts f = {0};
    sluice_http_answer a;
    size_t n = 0, need = 0;
    int box = oc == SLUICE_HTTP_BOXED || oc == SLUICE_HTTP_SUSPENDED;
    f.outcome = oc;
    f.location = loc;
    f.policy_name = nm;
    f.other_policy_name = nm2;
    f.quota_unit = qu;
    f.quota = f.window_s = f.other_quota = f.other_window_s = INT64_MAX;
    f.limit = f.remaining = f.reset_ns = f.next_ns = INT64_MAX;
    f.retry_after_ns = INT64_C(100) * 365 * 86400 * SEC;
    f.penalty = box ? SLUICE_HTTP_PENALTY_LOCKOUT : SLUICE_HTTP_PENALTY_WARNING;
    f.penalty_level = box ? 3 : 0;
    /* ... and every policy a declared route may list, at its longest. */
    f.npolicies = SLUICE_HTTP_POLICIES_MAX;
    for (int i = 0; i < SLUICE_HTTP_POLICIES_MAX; i++) {
      f.policies[i].name = i % 2 ? nm : nm2;
      f.policies[i].unit = qu;
      f.policies[i].quota = f.policies[i].window_s = INT64_MAX;
    }
    cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK,
                 "outcome %d", oc);
    cr_assert_eq(sluice_http_answer_headers(h, &a, NULL, 0, &n, NULL, 0,
                                            &need),
                 n ? SLUICE_ERANGE : SLUICE_OK);
    cr_assert_leq(n, SLUICE_HTTP_MAX_HEADERS, "outcome %d", oc);
    cr_assert_leq(need, SLUICE_HTTP_HEADER_BUF, "outcome %d: %zu", oc, need);
  }
  sluice_http_close(h);
}

/* A list of policies (a policy file's declared limits): every one in
** the structured RateLimit-Policy, in the order given, w left out where a
** policy has no window; RateLimit names policy_name; the body names every
** policy flagged violated; the legacy form is the binding one's alone. */
Test(answer, policy_list) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_SF, 0, fixed_rand, &g_zero);
  sluice_http *hl = open_h(SLUICE_HTTP_FORM_LEGACY, 0, fixed_rand, &g_zero);
  sluice_http_facts f = {0};
  sluice_http_answer a;
  hdrs x;
  json_t *j, *v;
  f.outcome = SLUICE_HTTP_THROTTLED;
  f.flags = SLUICE_HTTP_F_NAMED;
  f.policy_name = "tokens";
  f.quota_unit = "tokens";
  f.quota = 200000;
  f.window_s = 60;
  f.limit = 200000;
  f.remaining = 12;
  f.reset_ns = 59 * SEC;
  f.retry_after_ns = 2 * SEC;
  f.npolicies = 3;
  f.policies[0] = (sluice_http_policy){"rpm", NULL, 500, 60, 0, 0};
  f.policies[1] = (sluice_http_policy){"tokens", "tokens", 200000, 60,
                                       SLUICE_HTTP_P_VIOLATED, 0};
  f.policies[2] = (sluice_http_policy){"in \"flight\"", "concurrent", 4, 0,
                                       SLUICE_HTTP_P_VIOLATED, 0};
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "RateLimit-Policy"),
                   "\"rpm\";q=500;w=60, \"tokens\";q=200000;qu=\"tokens\";"
                   "w=60, \"in \\\"flight\\\"\";q=4;qu=\"concurrent\"");
  cr_assert_str_eq(get(&x, "RateLimit"), "\"tokens\";r=12;t=2");
  j = body_json(h, &a);
  v = json_object_get(j, "violated-policies");
  cr_assert_eq(json_array_size(v), 2);
  cr_assert_str_eq(json_string_value(json_array_get(v, 0)), "tokens");
  cr_assert_str_eq(json_string_value(json_array_get(v, 1)), "in \"flight\"");
  json_decref(j);
  cr_assert_eq(sluice_http_answer_make(hl, &f, NOW_NS, &a), SLUICE_OK);
  render(hl, &a, &x);
  cr_assert_str_eq(get(&x, "RateLimit-Policy"), "200000;w=60");
  cr_assert_str_eq(get(&x, "RateLimit-Limit"), "200000");
  cr_assert_null(get(&x, "RateLimit"));
  /* Malformed lists are refused. */
  f.policies[0].name = NULL;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.policies[0].name = "rpm";
  f.policies[0].window_s = -1;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.policies[0].window_s = 60;
  f.policies[0].flags = 0x10;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.policies[0].flags = 0;
  f.policies[0].unit = "t\x01";
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.policies[0].unit = NULL;
  f.npolicies = SLUICE_HTTP_POLICIES_MAX + 1;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.npolicies = 3;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  sluice_http_close(h);
  sluice_http_close(hl);
}

Test(buffers, callback_form_and_early_stop) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  int n = 0;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_foreach_header(h, &a, count_cb, &n), 77);
  cr_assert_eq(n, 3);
  cr_assert_eq(sluice_http_answer_foreach_header(h, &a, NULL, &n),
               SLUICE_EINVAL);
  sluice_http_close(h);
}

Test(validation, bad_facts) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_answer a;
  sluice_http_facts f;
#define BAD(stmt)                                                              \
  do {                                                                         \
    f = spec_throttled();                                                      \
    stmt;                                                                      \
    cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_EINVAL,    \
                 "accepted: %s", #stmt);                                       \
  } while (0)
  BAD(f.outcome = 8); /* one past SLUICE_HTTP_SUSPENDED */
  BAD(f.outcome = -1);
  BAD(f.box_reason = 2);
  BAD(f.concurrency_limit = -1);
  BAD(f.next_ns = -1);
  BAD(f.other_quota = 10); /* without window or name */
  BAD(f.other_quota = 10; f.other_window_s = 60);
  BAD(f.other_quota = 10; f.other_policy_name = "key");
  BAD(f.quota_unit = "");
  BAD(f.quota_unit = "a-unit-name-longer-than-thirty-two-bytes");
  BAD(f.quota_unit = "p\x01oints");
  BAD(f.other_quota = 10; f.other_window_s = 60;
      f.other_policy_name = "k\x7f");
  BAD(f.outcome = SLUICE_HTTP_SUSPENDED; f.penalty_level = 2);
  BAD(f.outcome = SLUICE_HTTP_SUSPENDED; f.penalty = SLUICE_HTTP_PENALTY_WARNING);
  BAD(f.penalty = 3);
  BAD(f.penalty = SLUICE_HTTP_PENALTY_LOCKOUT); /* not boxed */
  BAD(f.penalty_level = 4);
  BAD(f.flags = 0x80);
  BAD(f.remaining = 3001);
  BAD(f.remaining = -1);
  BAD(f.reset_ns = -1);
  BAD(f.retry_after_ns = -5);
  BAD(f.retry_after_ns = SLUICE_FOREVER); /* only a box is forever */
  BAD(f.window_s = 0);
  BAD(f.strikes_remaining = -1);
  BAD(f.outcome = SLUICE_HTTP_BOXED; f.penalty_level = 0);
  BAD(f.outcome = SLUICE_HTTP_BOXED; f.penalty_level = 1;
      f.penalty = SLUICE_HTTP_PENALTY_WARNING);
#undef BAD
  f = spec_throttled();
  cr_assert_eq(sluice_http_answer_make(h, &f, -1, &a), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_answer_make(NULL, &f, 0, &a), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_answer_make(h, NULL, 0, &a), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_answer_make(h, &f, 0, NULL), SLUICE_EINVAL);
  sluice_http_close(h);
  sluice_http_close(NULL);
}

Test(validation, bad_options) {
  sluice_http_options o = {0};
  sluice_http *h = (sluice_http *)&o;
  o.header_form = 3;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_EINVAL);
  cr_assert_null(h);
  o.header_form = 0;
  o.flags = 0x100;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_EINVAL);
  o.flags = 0;
  o.date_after_s = -1;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_open(&o, NULL), SLUICE_EINVAL);
}

Test(validation, strikes_member_only_when_known) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  json_t *j;
  f.flags = 0;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  j = body_json(h, &a);
  cr_assert_null(json_object_get(j, "penalty_strikes_remaining"));
  json_decref(j);
  f.flags = SLUICE_HTTP_F_STRIKES;
  f.strikes_remaining = 0;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  j = body_json(h, &a);
  cr_assert_eq(
      json_integer_value(json_object_get(j, "penalty_strikes_remaining")), 0);
  cr_assert_not_null(json_object_get(j, "penalty_strikes_remaining"));
  json_decref(j);
  sluice_http_close(h);
}

/* jansson allocates through process-wide hooks; Criterion runs each test
** in its own process, so failing them here touches nothing else.  The
** k-th allocation fails, for every k until a body gets through: each
** failure must be SLUICE_ENOMEM with the buffer untouched, and nothing may
** leak (LeakSanitizer checks the process at exit in the ASan build). */
static long g_allocs_left;
static void *failing_malloc(size_t n) {
  if (g_allocs_left-- <= 0)
    return NULL;
  return malloc(n);
}

Test(buffers, body_out_of_memory_is_enomem_at_every_allocation) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_facts f = spec_throttled();
  sluice_http_answer a;
  char buf[2048];
  size_t len = 0;
  long k;
  int rc = SLUICE_ENOMEM;
  cr_assert_eq(sluice_http_answer_make(h, &f, NOW_NS, &a), SLUICE_OK);
  json_set_alloc_funcs(failing_malloc, free);
  for (k = 0; k < 1000 && rc == SLUICE_ENOMEM; k++) {
    g_allocs_left = k;
    buf[0] = 'Z';
    rc = sluice_http_answer_body(h, &a, buf, sizeof buf, &len);
    if (rc == SLUICE_ENOMEM)
      cr_assert_eq(buf[0], 'Z', "buffer touched at k=%ld", k);
  }
  json_set_alloc_funcs(malloc, free);
  cr_assert_eq(rc, SLUICE_OK);
  cr_assert_gt(k, 5, "a body needs more than a handful of allocations");
  sluice_http_close(h);
}

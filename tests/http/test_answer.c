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

/* What an answer is made from: a decision, filled by hand as a caller
** without a policy fills one (sluice/http.h), the request it decided and
** the request id. */
typedef struct said {
  sluice_decision d;
  sluice_request q;
  const char *rid;
} said;

static int make(sluice_http *h, const said *s, int64_t now_ns,
                sluice_http_answer *a) {
  return sluice_http_answer_make(h, &s->d, &s->q, s->rid, now_ns, a);
}

static void set_tier(said *s, const char *tier) {
  snprintf(s->d.tier, sizeof s->d.tier, "%s", tier);
}

/* The spec's throttled example. */
static said spec_throttled(void) {
  said f = {0};
  f.d.outcome = SLUICE_OUTCOME_THROTTLED;
  f.d.penalty_status = SLUICE_PENALTY_WARNING;
  f.d.policy_window_ns = 60 * SEC;
  f.d.limit = 3000;
  f.d.remaining = 0;
  f.d.reset_ns = 12 * SEC;
  f.d.retry_after_ns = 11 * SEC + 400000000; /* 11.4 s: sent as 12 */
  f.d.strikes_remaining = 14;
  f.d.cost = 10;
  f.d.refill_rate = 50;
  f.d.refill_period_ns = SEC;
  set_tier(&f, "growth");
  f.q.method = "POST";
  f.q.route = "/v1/ledgers/reconcile";
  f.rid = "req_01HV...";
  return f;
}

/* --------------------------------------------------- spec's examples --- */

Test(answer, spec_200_headers) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_LEGACY, 0, fixed_rand, &g_zero);
  said f = {0};
  sluice_http_answer a;
  hdrs x;
  char body[8];
  size_t len = 99;
  static const char *const want[] = {
      "RateLimit-Policy", "3000;w=60", "RateLimit-Limit", "3000",
      "RateLimit-Remaining", "2412", "RateLimit-Reset", "18"};
  f.d.outcome = SLUICE_OUTCOME_ALLOW;
  f.d.policy_window_ns = 60 * SEC;
  f.d.limit = 3000;
  f.d.remaining = 2412;
  f.d.reset_ns = 17 * SEC + 1; /* just over 17 s: rounds up to 18 */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  static const char *const want[] = {
      "Content-Type", "application/problem+json", "Retry-After", "12",
      "RateLimit-Policy", "3000;w=60", "RateLimit-Limit", "3000",
      "RateLimit-Remaining", "0", "RateLimit-Reset", "12",
      "X-Penalty-Box-Status", "Warning"};
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  json_t *got, *want;
  void *gi, *wi;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  char buf[2048];
  size_t len;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_body(h, &a, buf, sizeof buf, &len),
               SLUICE_OK);
  cr_assert_str_eq(buf, k_spec_body);
  sluice_http_close(h);
}

/* ------------------------------------------------------ header forms --- */

Test(answer, structured_draft10_form) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_SF, 0, fixed_rand, &g_zero);
  said f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  static const char *const want[] = {
      "Content-Type", "application/problem+json", "Retry-After", "12",
      "RateLimit-Policy", "\"growth-key\";q=3000;w=60", "RateLimit",
      "\"growth-key\";r=0;t=1", "X-Penalty-Box-Status", "Warning"};
  /* t: the next of 50 points a second is back within 1 s, long before
  ** the 10 points the request needs (Retry-After 12). */
  f.d.binding = SLUICE_BINDING_LIMIT;
  f.d.limit_name = "growth-key";
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  expect_headers(&x, want, sizeof want / sizeof want[0]);
  sluice_http_close(h);
}

Test(answer, structured_reset_not_after_retry_after) {
  /* Draft-10 section 6: Retry-After SHOULD NOT be earlier than t.  The
  ** bucket is full in 60 s but a retry passes in 12: t says 12, while the
  ** legacy RateLimit-Reset keeps "until full". */
  sluice_http *h = open_h(SLUICE_HTTP_FORM_BOTH, 0, fixed_rand, &g_zero);
  said f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  f.d.reset_ns = 60 * SEC;
  f.d.refill_rate = 0; /* no refill given: t is until full, 60 s */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "Retry-After"), "12");
  cr_assert_str_eq(get(&x, "RateLimit"), "\"default\";r=0;t=12");
  cr_assert_str_eq(get(&x, "RateLimit-Reset"), "60");
  sluice_http_close(h);
}

Test(answer, structured_default_name_and_escaping) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_SF, 0, fixed_rand, &g_zero);
  said f = {0};
  sluice_http_answer a;
  hdrs x;
  f.d.limit = 100;
  f.d.remaining = 50;
  f.d.reset_ns = 30 * SEC;
  f.d.policy_window_ns = 10 * SEC;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "RateLimit-Policy"),
                   "\"default\";q=100;qu=\"points\";w=10");
  cr_assert_str_eq(get(&x, "RateLimit"), "\"default\";r=50;t=30");
  cr_assert_null(get(&x, "RateLimit-Limit"));
  f.d.binding = SLUICE_BINDING_LIMIT;
  f.d.limit_name = "a\"b\\c";
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "RateLimit"), "\"a\\\"b\\\\c\";r=50;t=30");
  f.d.binding = SLUICE_BINDING_LIMIT;
  f.d.limit_name = "caf\xc3\xa9"; /* sf-string is ASCII only */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.d.binding = SLUICE_BINDING_LIMIT;
  f.d.limit_name = "x\ny";
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  sluice_http_close(h);
}

Test(answer, both_forms) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_BOTH, 0, fixed_rand, &g_zero);
  said f = {0};
  sluice_http_answer a;
  hdrs x;
  static const char *const want[] = {
      "RateLimit-Policy", "\"default\";q=3000;qu=\"points\";w=60",
      "RateLimit-Limit",
      "3000", "RateLimit-Remaining", "2412", "RateLimit-Reset", "18",
      "RateLimit", "\"default\";r=2412;t=18"};
  f.d.policy_window_ns = 60 * SEC;
  f.d.limit = 3000;
  f.d.remaining = 2412;
  f.d.reset_ns = 18 * SEC;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  expect_headers(&x, want, sizeof want / sizeof want[0]);
  sluice_http_close(h);
}

Test(answer, no_limit_no_ratelimit_headers) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_BOTH, 0, fixed_rand, &g_zero);
  said f = {0};
  sluice_http_answer a;
  hdrs x;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_eq(x.n, 0);
  sluice_http_close(h);
}

/* ------------------------------------------------------- Retry-After --- */

Test(retry_after, ceil_and_minimum_one_second) {
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  said f = spec_throttled();
  sluice_http_answer a;
  f.d.retry_after_ns = 12 * SEC; /* exact: stays 12 */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 12);
  f.d.retry_after_ns = 12 * SEC + 1; /* a nanosecond more: 13 */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 13);
  f.d.retry_after_ns = 0; /* a denial never says "now" */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 1);
  f.d.retry_after_ns = 1;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
    said f = spec_throttled();
    sluice_http_answer a;
    int64_t s = (waits_ms[w] + 999) / 1000, span = s / 10, i;
    int seen[64] = {0};
    f.d.retry_after_ns = waits_ms[w] * 1000000;
    for (i = 0; i < 20000; i++) {
      cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
      cr_assert_geq(a.retry_after_s * SEC, f.d.retry_after_ns);
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
  said f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  json_t *j;
  char want[32];
  f.d.retry_after_ns = 120 * SEC;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  int i;
  f.d.retry_after_ns = 100 * SEC;
  for (i = 0; i < 2000; i++) {
    cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
    cr_assert(a.retry_after_s >= 100 && a.retry_after_s <= 110);
  }
  sluice_http_close(h);
}

/* ------------------------------------------------------------ lockout --- */

static said boxed(int level, int64_t left_ns) {
  said f = {0};
  f.d.outcome = SLUICE_OUTCOME_BOXED;
  f.d.penalty_status = SLUICE_PENALTY_ACTIVE_LOCKOUT;
  f.d.penalty_level = level;
  f.d.retry_after_ns = left_ns;
  set_tier(&f, "growth");
  f.rid = "req_42";
  return f;
}

Test(lockout, short_box_delta_seconds) {
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  said f = boxed(1, 300 * SEC);
  sluice_http_answer a;
  hdrs x;
  json_t *j;
  static const char *const want[] = {
      "Content-Type", "application/problem+json", "Retry-After", "300",
      "X-Penalty-Box-Status", "Active-Lockout"};
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = boxed(2, 3600 * SEC);
  sluice_http_answer a;
  hdrs x;
  int64_t at, date;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = boxed(2, left);
  sluice_http_answer a;
  int i;
  for (i = 0; i < 500; i++) {
    cr_assert_eq(make(h, &f, now, &a), SLUICE_OK);
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
  said f = boxed(1, 300 * SEC);
  sluice_http_answer a;
  o.flags = SLUICE_HTTP_NO_JITTER;
  o.date_after_s = 300;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert(a.retry_is_date, "300 s box with date_after_s=300");
  sluice_http_close(h);
  o.flags |= SLUICE_HTTP_NO_DATES;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  f.d.retry_after_ns = 7200 * SEC;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert(!a.retry_is_date);
  cr_assert_eq(a.retry_after_s, 7200);
  sluice_http_close(h);
}

Test(lockout, end_time_from_lockout_ends_ns) {
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  said f = boxed(1, 0);
  sluice_http_answer a;
  f.d.lockout_end_ns = NOW_NS + 90 * SEC;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 90);
  /* Both given: the later one wins, so the wait is never short. */
  f.d.retry_after_ns = 60 * SEC;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 90);
  f.d.retry_after_ns = 120 * SEC;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.retry_after_s, 120);
  /* Neither: not a box. */
  f.d.retry_after_ns = 0;
  f.d.lockout_end_ns = NOW_NS;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  sluice_http_close(h);
}

Test(lockout, suspension_promises_no_time) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  said f = boxed(3, SLUICE_FOREVER);
  sluice_http_answer a;
  hdrs x;
  json_t *j;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
      {SLUICE_OUTCOME_THROTTLED, 429, "rate-limit-exceeded", "Too Many Requests"},
      {SLUICE_OUTCOME_CONCURRENCY, 429, "concurrency-limit-exceeded",
       "Too Many Requests"},
      {SLUICE_OUTCOME_CONFLICT, 409, "ledger-conflict", "Conflict"},
      {SLUICE_OUTCOME_UNAVAILABLE, 503, "service-unavailable",
       "Service Unavailable"},
  };
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  size_t i;
  for (i = 0; i < sizeof k / sizeof k[0]; i++) {
    said f = {0};
    sluice_http_answer a;
    json_t *j;
    hdrs x;
    char type[128];
    f.d.outcome = k[i].outcome;
    f.d.retry_after_ns = 15 * SEC;
    set_tier(&f, "sandbox");
    cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = {0};
  sluice_http_answer a;
  json_t *j;
  hdrs x;
  f.d.outcome = SLUICE_OUTCOME_SUSPENDED;
  f.d.retry_after_ns = 15 * SEC; /* ignored: no wait lifts a suspension */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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

/* A service answering an admission with its own 2xx (202 for an accepted
** job): the status is the decision's, the RateLimit fields stay, no body. */
Test(status, admission_status_of_the_service) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  said f = {0};
  sluice_http_answer a;
  hdrs x;
  size_t len = 5;
  char b[4];
  f.d.allowed = 1;
  f.d.status = 202;
  f.d.limit = 3000;
  f.d.remaining = 2990;
  f.d.reset_ns = SEC / 5;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 202);
  render(h, &a, &x);
  cr_assert_null(get(&x, "Retry-After"));
  cr_assert_null(get(&x, "Content-Type"));
  cr_assert_str_eq(get(&x, "RateLimit-Reset"), "1");
  cr_assert_eq(sluice_http_answer_body(h, &a, b, sizeof b, &len), SLUICE_OK);
  cr_assert_eq(len, 0);
  sluice_http_close(h);
}

/* Shadow mode: a decision the policy would have refused but let through
** is answered as the admission it was, with its figures. */
Test(status, allowed_wins_over_outcome) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  said f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  f.d.allowed = 1;
  f.d.status = 200;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 200);
  cr_assert_eq(a.outcome, SLUICE_OUTCOME_ALLOW);
  cr_assert_eq(a.has_body, 0);
  render(h, &a, &x);
  cr_assert_null(get(&x, "Retry-After"));
  cr_assert_null(get(&x, "X-Penalty-Box-Status"));
  cr_assert_str_eq(get(&x, "RateLimit-Remaining"), "0");
  sluice_http_close(h);
}

Test(status, override_ranges) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  said f = spec_throttled();
  sluice_http_answer a;
  json_t *j;
  f.d.status = 503;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 503);
  j = body_json(h, &a);
  cr_assert_eq(json_integer_value(json_object_get(j, "status")), 503);
  /* RFC 9457: the title is the type's, whatever the status. */
  cr_assert_str_eq(json_string_value(json_object_get(j, "title")),
                   "Too Many Requests");
  json_decref(j);
  f.d.status = 200; /* a denial cannot be a success */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.d.status = 600;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f = (said){0};
  f.d.allowed = 1;
  f.d.status = 201;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 201);
  f.d.status = 429; /* a success cannot be a denial */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  sluice_http_close(h);
}

/* --------------------------------------------------- safety of bodies --- */

Test(body, escapes_every_caller_string) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  said f = spec_throttled();
  sluice_http_answer a;
  json_t *j;
  const char *nasty = "a\"b\\c\n\t\x01</script>\xe2\x82\xac";
  set_tier(&f, nasty);
  f.q.route = nasty;
  f.q.method = nasty;
  f.rid = nasty;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  char buf[4096], big[1100];
  size_t len, i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    f.rid = bad[i];
    cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
    cr_assert_eq(sluice_http_answer_body(h, &a, buf, sizeof buf, &len),
                 SLUICE_EINVAL, "accepted bad UTF-8 #%zu", i);
  }
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  f.rid = big;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  for (outcome = SLUICE_OUTCOME_THROTTLED; outcome <= SLUICE_OUTCOME_UNAVAILABLE;
       outcome++) {
    said f = spec_throttled();
    sluice_http_answer a;
    const char *k;
    json_t *v, *j;
    f.d.outcome = outcome;
    if (outcome == SLUICE_OUTCOME_BOXED) {
      f.d.penalty_status = SLUICE_PENALTY_ACTIVE_LOCKOUT;
      f.d.penalty_level = 2;
    }
    cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  char buf[2048];
  size_t len;
  json_t *j;
  o.problem_base = "urn:example:problems/";
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  j = body_json(h, &a);
  cr_assert_str_eq(json_string_value(json_object_get(j, "type")),
                   "urn:example:problems/rate-limit-exceeded");
  json_decref(j);
  sluice_http_close(h);
  cr_assert_eq(sluice_http_open(NULL, &h), SLUICE_OK);
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  char small[16], big[2048];
  size_t need = 0, len = 0;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  sluice_http_header hv[SLUICE_HTTP_MAX_HEADERS];
  char buf[256];
  size_t n = 0, need = 0, n2, need2;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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

/* The documented sizes hold for the longest answer of every outcome:
** every limit a route may list, with 64-byte names and 32-byte units that
** are all escaped, the largest numbers, a century-long wait, both forms. */
Test(buffers, documented_sizes_suffice_for_the_longest_answer) {
  static char nm[65], nm2[65], qu[33];
  sluice_http_options o = {0};
  sluice_http *h;
  int oc;
  memset(nm, '"', 64);
  memset(nm2, '\\', 64);
  memset(qu, '"', 32);
  o.header_form = SLUICE_HTTP_FORM_BOTH;
  o.flags = SLUICE_HTTP_DATE_HEADER;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  for (oc = SLUICE_OUTCOME_ALLOW; oc < SLUICE_OUTCOME__COUNT; oc++) {
    said f = {0};
    sluice_http_answer a;
    size_t n = 0, need = 0;
    int box = oc == SLUICE_OUTCOME_BOXED || oc == SLUICE_OUTCOME_SUSPENDED;
    f.d.allowed = oc == SLUICE_OUTCOME_ALLOW;
    f.d.outcome = oc;
    f.d.binding = SLUICE_BINDING_LIMIT;
    f.d.limit_name = nm;
    f.d.limit_unit = qu;
    f.d.policy_window_ns = INT64_MAX;
    f.d.limit = f.d.remaining = f.d.reset_ns = INT64_MAX;
    f.d.retry_after_ns = INT64_C(100) * 365 * 86400 * SEC;
    f.d.penalty_status = box ? SLUICE_PENALTY_ACTIVE_LOCKOUT
                             : SLUICE_PENALTY_WARNING;
    f.d.penalty_level = box ? 3 : 0;
    /* ... and every limit a declared route may list, at its longest. */
    f.d.nlimits = SLUICE_DECISION_LIMITS_MAX;
    for (int i = 0; i < SLUICE_DECISION_LIMITS_MAX; i++) {
      f.d.limits[i].name = i % 2 ? nm : nm2;
      f.d.limits[i].unit = qu;
      f.d.limits[i].quota = f.d.limits[i].window_ns = INT64_MAX;
    }
    cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK, "outcome %d", oc);
    cr_assert_eq(sluice_http_answer_headers(h, &a, NULL, 0, &n, NULL, 0,
                                            &need),
                 n ? SLUICE_ERANGE : SLUICE_OK);
    cr_assert_leq(n, SLUICE_HTTP_MAX_HEADERS, "outcome %d", oc);
    cr_assert_leq(need, SLUICE_HTTP_HEADER_BUF, "outcome %d: %zu", oc, need);
  }
  sluice_http_close(h);
}

/* A route of declared limits: every one in the structured
** RateLimit-Policy, in the route's order, w left out where a limit has no
** window; RateLimit names the binding one; the body names every limit
** flagged denied; the legacy form is the binding one's alone. */
Test(answer, policy_list) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_SF, 0, fixed_rand, &g_zero);
  sluice_http *hl = open_h(SLUICE_HTTP_FORM_LEGACY, 0, fixed_rand, &g_zero);
  said f = {0};
  sluice_http_answer a;
  hdrs x;
  json_t *j, *v;
  f.d.outcome = SLUICE_OUTCOME_THROTTLED;
  f.d.binding = SLUICE_BINDING_LIMIT;
  f.d.limit_name = "tokens";
  f.d.limit_unit = "tokens";
  f.d.policy_window_ns = 60 * SEC;
  f.d.limit = 200000;
  f.d.remaining = 12;
  f.d.reset_ns = 59 * SEC;
  f.d.retry_after_ns = 2 * SEC;
  f.d.nlimits = 3;
  f.d.limits[0].name = "rpm";
  f.d.limits[0].quota = 500;
  f.d.limits[0].window_ns = 60 * SEC;
  f.d.limits[1].name = "tokens";
  f.d.limits[1].unit = "tokens";
  f.d.limits[1].quota = 200000;
  f.d.limits[1].window_ns = 60 * SEC - 1; /* w rounds up */
  f.d.limits[1].flags = SLUICE_LIMIT_DENIED | SLUICE_LIMIT_BINDING;
  f.d.limits[2].name = "in \"flight\"";
  f.d.limits[2].unit = "concurrent";
  f.d.limits[2].quota = 4;
  f.d.limits[2].flags = SLUICE_LIMIT_DENIED;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  cr_assert(strstr(json_string_value(json_object_get(j, "detail")),
                   "Limit 'tokens' exhausted (200000 tokens per minute)."));
  json_decref(j);
  cr_assert_eq(make(hl, &f, NOW_NS, &a), SLUICE_OK);
  render(hl, &a, &x);
  cr_assert_str_eq(get(&x, "RateLimit-Policy"), "200000;w=60");
  cr_assert_str_eq(get(&x, "RateLimit-Limit"), "200000");
  cr_assert_null(get(&x, "RateLimit"));
  /* No limit flagged: the binding one is the violated policy. */
  f.d.limits[1].flags = f.d.limits[2].flags = 0;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  j = body_json(h, &a);
  v = json_object_get(j, "violated-policies");
  cr_assert_eq(json_array_size(v), 1);
  cr_assert_str_eq(json_string_value(json_array_get(v, 0)), "tokens");
  json_decref(j);
  /* Malformed lists are refused. */
  f.d.limits[0].name = NULL;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.d.limits[0].name = "rpm";
  f.d.limits[0].window_ns = -1;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.d.limits[0].window_ns = 60 * SEC;
  f.d.limits[0].unit = "t\x01";
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.d.limits[0].unit = NULL;
  f.d.nlimits = SLUICE_DECISION_LIMITS_MAX + 1;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL);
  f.d.nlimits = 3;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  sluice_http_close(h);
  sluice_http_close(hl);
}

/* The per-IP backstop's window: named "ip", counted in requests, its t
** the window's end (a window has no refill). */
Test(answer, ip_backstop_window) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_SF, 0, fixed_rand, &g_zero);
  said f = {0};
  sluice_http_answer a;
  hdrs x;
  f.d.outcome = SLUICE_OUTCOME_THROTTLED;
  f.d.binding = SLUICE_BINDING_IP;
  f.d.limit = 300;
  f.d.remaining = 0;
  f.d.reset_ns = 41 * SEC + 1;
  f.d.policy_window_ns = 60 * SEC;
  f.d.retry_after_ns = 41 * SEC + 1;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_str_eq(get(&x, "RateLimit-Policy"),
                   "\"ip\";q=300;qu=\"requests\";w=60");
  cr_assert_str_eq(get(&x, "RateLimit"), "\"ip\";r=0;t=42");
  sluice_http_close(h);
}

/* A declared lease set's refusal quotes how many at a time; a lock's
** (409) does not: one at a time is what a lock is. */
Test(answer, named_refusal_quotes_a_cap_only_for_concurrency) {
  sluice_http *h = open_h(0, SLUICE_HTTP_NO_JITTER, NULL, NULL);
  said f = {0};
  sluice_http_answer a;
  json_t *j;
  f.d.outcome = SLUICE_OUTCOME_CONCURRENCY;
  f.d.binding = SLUICE_BINDING_LIMIT;
  f.d.limit_name = "jobs";
  f.d.limit = 2;
  f.d.cap_limit = 2;
  f.d.retry_after_ns = SEC;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  j = body_json(h, &a);
  cr_assert_str_eq(json_string_value(json_object_get(j, "detail")),
                   "Limit 'jobs' reached (2 at a time). Retry in 1 second.");
  json_decref(j);
  f.d.outcome = SLUICE_OUTCOME_CONFLICT;
  f.d.limit_name = "ledger_lock";
  f.d.limit = 1;
  f.d.cap_limit = 1;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 409);
  j = body_json(h, &a);
  cr_assert_str_eq(json_string_value(json_object_get(j, "detail")),
                   "Limit 'ledger_lock' reached. Retry in 1 second.");
  json_decref(j);
  sluice_http_close(h);
}

/* The values are in buf one after the other, each with its NUL, in the
** order of the headers (a binding that joins them may rely on it). */
Test(buffers, values_follow_one_another_in_buf) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  said f = spec_throttled();
  sluice_http_answer a;
  hdrs x;
  size_t i, need = 0, at = 0;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_headers(h, &a, x.h, SLUICE_HTTP_MAX_HEADERS,
                                          &x.n, x.buf, sizeof x.buf, &need),
               SLUICE_OK);
  for (i = 0; i < x.n; i++) {
    cr_assert_eq(x.h[i].value, x.buf + at, "header %zu", i);
    at += strlen(x.h[i].value) + 1;
  }
  cr_assert_eq(at, need);
  a.decision = NULL;
  cr_assert_eq(sluice_http_answer_headers(h, &a, x.h, SLUICE_HTTP_MAX_HEADERS,
                                          &x.n, x.buf, sizeof x.buf, &need),
               SLUICE_EINVAL);
  sluice_http_close(h);
}

Test(validation, bad_decision) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  sluice_http_answer a;
  said f;
#define BAD(stmt)                                                              \
  do {                                                                         \
    f = spec_throttled();                                                      \
    stmt;                                                                      \
    cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_EINVAL, "accepted: %s",       \
                 #stmt);                                                       \
  } while (0)
  BAD(f.d.outcome = SLUICE_OUTCOME__COUNT);
  BAD(f.d.outcome = -1);
  BAD(f.d.allowed = 2);
  BAD(f.d.binding = 1);
  BAD(f.d.cap_limit = -1);
  BAD(f.d.cost = -1);
  BAD(f.d.binding = SLUICE_BINDING_LIMIT; f.d.limit_name = "tokens";
      f.d.limit_unit = "");
  BAD(f.d.binding = SLUICE_BINDING_LIMIT; f.d.limit_name = "tokens";
      f.d.limit_unit = "a-unit-name-longer-than-thirty-two-bytes");
  BAD(f.d.binding = SLUICE_BINDING_LIMIT; f.d.limit_name = "tokens";
      f.d.limit_unit = "p\x01oints");
  BAD(f.d.binding = SLUICE_BINDING_LIMIT; f.d.limit_name = "k\x7f");
  BAD(f.d.penalty_status = 3);
  BAD(f.d.penalty_level = 4);
  BAD(f.d.penalty_level = -1);
  BAD(f.d.retry_after_ns = SLUICE_FOREVER); /* only a box is forever */
  BAD(f.d.outcome = SLUICE_OUTCOME_BOXED; f.d.penalty_level = 0);
#undef BAD
  f = spec_throttled();
  cr_assert_eq(make(h, &f, -1, &a), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_answer_make(NULL, &f.d, NULL, NULL, 0, &a),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_http_answer_make(h, NULL, NULL, NULL, 0, &a),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_http_answer_make(h, &f.d, NULL, NULL, 0, NULL),
               SLUICE_EINVAL);
  /* Outcome ALLOW is an admission whatever `allowed` says: a zero-filled
  ** decision is answered 200. */
  f.d.outcome = SLUICE_OUTCOME_ALLOW;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  cr_assert_eq(a.status, 200);
  sluice_http_close(h);
  sluice_http_close(NULL);
}

/* Figures that cannot be said are left out, not refused: a decision's
** remaining of -1 (not known), a limit of 0. */
Test(validation, figures_out_of_range_are_not_sent) {
  sluice_http *h = open_h(SLUICE_HTTP_FORM_BOTH, 0, fixed_rand, &g_zero);
  sluice_http_answer a;
  hdrs x;
  said f = spec_throttled();
  f.d.remaining = -1;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_null(get(&x, "RateLimit-Limit"));
  cr_assert_null(get(&x, "RateLimit"));
  cr_assert_str_eq(get(&x, "Retry-After"), "12");
  f.d.remaining = 3001;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_null(get(&x, "RateLimit-Limit"));
  f = spec_throttled();
  f.d.outcome = SLUICE_OUTCOME_UNAVAILABLE; /* a store that failed */
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  render(h, &a, &x);
  cr_assert_null(get(&x, "RateLimit-Policy"));
  cr_assert_null(get(&x, "RateLimit-Remaining"));
  sluice_http_close(h);
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

Test(validation, strikes_member_only_with_warning) {
  sluice_http *h = open_h(0, 0, fixed_rand, &g_zero);
  said f = spec_throttled();
  sluice_http_answer a;
  json_t *j;
  f.d.penalty_status = SLUICE_PENALTY_NONE;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
  j = body_json(h, &a);
  cr_assert_null(json_object_get(j, "penalty_strikes_remaining"));
  json_decref(j);
  f.d.penalty_status = SLUICE_PENALTY_WARNING;
  f.d.strikes_remaining = 0;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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
  said f = spec_throttled();
  sluice_http_answer a;
  char buf[2048];
  size_t len = 0;
  long k;
  int rc = SLUICE_ENOMEM;
  cr_assert_eq(make(h, &f, NOW_NS, &a), SLUICE_OK);
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

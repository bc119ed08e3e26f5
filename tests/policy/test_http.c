/*
** The decision -> HTTP facts bridge, rendered through the real HTTP layer:
** every outcome the policy produces gives facts the HTTP surface accepts,
** with the status, headers and problem fields the spec's section 5 asks
** for.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

typedef struct rendered {
  sluice_http_answer a;
  char headers[SLUICE_HTTP_HEADER_BUF * 2];
  char body[4096];
} rendered;

static int collect(const char *name, const char *value, void *ud) {
  char *out = ud;
  size_t n = strlen(out);
  snprintf(out + n, SLUICE_HTTP_HEADER_BUF * 2 - n, "%s: %s\n", name, value);
  return 0;
}

static void render(const sluice_decision *d, const sluice_request *r,
                   rendered *out) {
  sluice_http_options o;
  sluice_http *h;
  sluice_http_facts f;
  size_t len = 0;
  memset(&o, 0, sizeof o);
  memset(out, 0, sizeof *out);
  o.problem_base = "https://api.example.com/errors/";
  o.flags = SLUICE_HTTP_NO_JITTER;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  cr_assert_eq(sluice_decision_http_facts(d, r, "req_1", &f), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_make(h, &f, d->now_ns, &out->a), SLUICE_OK,
               "facts of outcome %s refused", sluice_outcome_name(d->outcome));
  cr_assert_eq(sluice_http_answer_foreach_header(h, &out->a, collect,
                                                 out->headers),
               SLUICE_OK);
  cr_assert_eq(sluice_http_answer_body(h, &out->a, out->body,
                                       sizeof out->body, &len),
               SLUICE_OK);
  sluice_http_close(h);
}

Test(policy_http, allowed_carries_the_binding_bucket) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_decision d;
  rendered out;
  fx_open(&f, NULL, 0);
  d = decide(&f, &r);
  render(&d, &r, &out);
  cr_assert_eq(out.a.status, 200);
  cr_assert(strstr(out.headers, "RateLimit-Policy: 1500;w=60\n"), "%s",
            out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Limit: 1500\n"), "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Remaining: 1499\n"), "%s",
            out.headers);
  cr_assert_null(strstr(out.headers, "Retry-After"));
  fx_close(&f);
}

Test(policy_http, throttled_warns_with_strikes_and_retry_after) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_decision d;
  rendered out;
  fx_open(&f, NULL, 0);
  r.cost = 1500;
  decide(&f, &r);
  r.cost = 0;
  decide(&f, &r); /* the warning */
  d = decide(&f, &r); /* a strike */
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  render(&d, &r, &out);
  cr_assert_eq(out.a.status, 429);
  cr_assert(strstr(out.headers, "X-Penalty-Box-Status: Warning\n"), "%s",
            out.headers);
  cr_assert(strstr(out.headers, "Retry-After: 1\n"), "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Remaining: 0\n"), "%s",
            out.headers);
  cr_assert(strstr(out.body, "\"penalty_strikes_remaining\":19"), "%s",
            out.body);
  cr_assert(strstr(out.body, "\"quota_tier\":\"growth\""), "%s", out.body);
  cr_assert(strstr(out.body, "rate-limit-exceeded"), "%s", out.body);
  fx_close(&f);
}

Test(policy_http, boxed_and_suspended_are_active_lockouts) {
  sluice_policy_config cfg;
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  rendered out;
  int level = 0, i;
  sluice_policy_config_defaults(&cfg);
  cfg.tiers[0].strike_threshold = 1;
  fx_open(&f, &cfg, 0);
  r.cost = 300;
  for (i = 0; i < 3; i++) {
    decide(&f, &r); /* drain */
    decide(&f, &r); /* warning */
    d = decide(&f, &r); /* one strike trips */
    cr_assert_neq(d.flags & SLUICE_DECISION_TRIPPED, 0);
    level = d.penalty_level;
    render(&d, &r, &out);
    cr_assert(strstr(out.headers, "X-Penalty-Box-Status: Active-Lockout\n"),
              "%s", out.headers);
    cr_assert(strstr(out.body, "penalty-box-active"), "%s", out.body);
    if (level < 3) {
      cr_assert_eq(out.a.status, 429);
      cr_assert_neq(out.a.retry_after_s, 0);
      sluice_clock_advance(f.clock, level == 1 ? 5 * MINUTE : HOUR);
    }
  }
  cr_assert_eq(level, 3);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_SUSPENDED);
  cr_assert_eq(out.a.status, 403);
  cr_assert_null(strstr(out.headers, "Retry-After"), "%s", out.headers);
  fx_close(&f);
}

Test(policy_http, lease_denials_and_fail_closed) {
  fixture f;
  sluice_request a = rq_class("acme", "key-1", "growth", SLUICE_EP_RECONCILE);
  sluice_decision d;
  rendered out;
  fx_open(&f, NULL, 0);
  a.ledger_id = "L";
  decide(&f, &a);
  d = decide(&f, &a);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONFLICT);
  render(&d, &a, &out);
  cr_assert_eq(out.a.status, 409);
  cr_assert(strstr(out.headers, "Retry-After: "), "%s", out.headers);
  a.ledger_id = "M";
  decide(&f, &a);
  a.ledger_id = "N";
  d = decide(&f, &a);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONCURRENCY);
  render(&d, &a, &out);
  cr_assert_eq(out.a.status, 429);
  cr_assert(strstr(out.body, "concurrency-limit-exceeded"), "%s", out.body);
  fx_fail(&f, SLUICE_ETIMEDOUT, 0);
  d = decide(&f, &a);
  render(&d, &a, &out);
  cr_assert_eq(out.a.status, 503);
  cr_assert(strstr(out.headers, "Retry-After: 15\n"), "%s", out.headers);
  cr_assert_null(strstr(out.headers, "RateLimit-Limit"));
  fx_close(&f);
}

Test(policy_http, shadow_answers_as_allowed) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  rendered out;
  fx_open(&f, NULL, SLUICE_POLICY_SHADOW);
  r.cost = 300;
  decide(&f, &r);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  render(&d, &r, &out);
  cr_assert_eq(out.a.status, 200);
  cr_assert_null(strstr(out.headers, "Retry-After"));
  cr_assert_eq(sluice_decision_http_facts(NULL, &r, NULL,
                                          &(sluice_http_facts){0}),
               SLUICE_EINVAL);
  fx_close(&f);
}

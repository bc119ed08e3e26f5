/*
** The decision -> HTTP facts bridge, rendered through the real HTTP layer:
** every outcome the policy produces gives facts the HTTP surface accepts,
** with the status, headers and problem fields the spec's section 5 asks
** for.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "helpers.h"
#include "../common/headers.h"

typedef struct rendered {
  sluice_http_answer a;
  char headers[SLUICE_HTTP_HEADER_BUF * 2];
  char body[4096];
} rendered;


static void render_form(const sluice_decision *d, const sluice_request *r,
                        rendered *out, int form) {
  sluice_http_options o;
  sluice_http *h;
  size_t len = 0;
  memset(&o, 0, sizeof o);
  memset(out, 0, sizeof *out);
  o.problem_base = "https://api.example.com/errors/";
  o.flags = SLUICE_HTTP_NO_JITTER;
  o.header_form = form;
  cr_assert_eq(sluice_http_open(&o, &h), SLUICE_OK);
  cr_assert_eq(sluice_http_answer_make(h, d, r, "req_1", d->now_ns, &out->a),
               SLUICE_OK, "a decision of outcome %s refused",
               sluice_name(SLUICE_NAME_OUTCOME, d->outcome));
  cr_assert_eq(headers_text(h, &out->a, "%s: %s\n", out->headers,
                            sizeof out->headers),
               SLUICE_OK);
  cr_assert_eq(sluice_http_answer_body(h, &out->a, out->body,
                                       sizeof out->body, &len),
               SLUICE_OK);
  sluice_http_close(h);
}

static void render(const sluice_decision *d, const sluice_request *r,
                   rendered *out) {
  render_form(d, r, out, SLUICE_HTTP_FORM_LEGACY);
}

/* n admitted requests of r at this instant (the file's routes take no
** caller cost: a bucket is spent one request at a time); the last
** decision. */
static sluice_decision spend(fixture *f, const sluice_request *r, int n) {
  sluice_decision d;
  int i;
  for (i = 0; i < n; i++) {
    d = decide(f, r);
    cr_assert_eq(d.allowed, 1, "request %d of %d", i + 1, n);
  }
  return d;
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
  spend(&f, &r, 1500);
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
  sluice_policy_config *cfg;
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  rendered out;
  int level = 0, i;
  cfg = cfg_new();
  cfg_set(cfg, "penalties.keys.strikes", 1);
  fx_open(&f, cfg, 0);
  for (i = 0; i < 3; i++) {
    spend(&f, &r, 300); /* drain */
    decide(&f, &r); /* warning */
    d = decide(&f, &r); /* one strike trips */
    cr_assert_neq(d.flags & SLUICE_DECISION_TRIPPED, 0);
    level = d.penalty_level;
    render(&d, &r, &out);
    cr_assert(strstr(out.headers, "X-Penalty-Box-Status: Active-Lockout\n"),
              "%s", out.headers);
    cr_assert(strstr(out.body, level < 3 ? "/penalty-box-active\""
                                         : "/key-suspended\""),
              "%s", out.body);
    /* The strikes wording is true of this client. */
    if (level < 3)
      cr_assert(strstr(out.body, "Requests kept arriving before Retry-After"),
                "%s", out.body);
    if (level < 3) {
      cr_assert_eq(out.a.status, 429);
      cr_assert_neq(out.a.retry_after_s, 0);
      sluice_clock_advance(f.clock, level == 1 ? 5 * MIN : HOUR);
    }
  }
  cr_assert_eq(level, 3);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_SUSPENDED);
  cr_assert_eq(out.a.status, 403);
  cr_assert_null(strstr(out.headers, "Retry-After"), "%s", out.headers);
  /* A suspension is not "Too Many Requests". */
  cr_assert(strstr(out.body, "\"title\":\"Forbidden\""), "%s", out.body);
  cr_assert_null(strstr(out.body, "Too Many Requests"), "%s", out.body);
  cr_assert(strstr(out.body, "\"penalty_level\":3"), "%s", out.body);
  cr_assert(strstr(out.body, "suspended"), "%s", out.body);
  fx_close(&f);
}

Test(policy_http, lease_denials_and_fail_closed) {
  fixture f;
  sluice_request a = rq_reconcile("acme", "key-1", "growth", "L");
  sluice_decision d;
  rendered out;
  fx_open(&f, NULL, 0);
  decide(&f, &a);
  d = decide(&f, &a);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONFLICT);
  render(&d, &a, &out);
  cr_assert_eq(out.a.status, 409);
  cr_assert(strstr(out.headers, "Retry-After: "), "%s", out.headers);
  a = rq_with(a, "ledger", "M");
  decide(&f, &a);
  a = rq_with(a, "ledger", "N");
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
  spend(&f, &r, 300);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  render(&d, &r, &out);
  cr_assert_eq(out.a.status, 200);
  cr_assert_null(strstr(out.headers, "Retry-After"));
  fx_close(&f);
}

/* The structured form lists both buckets that bind, by scope, in points;
** RateLimit reports the binding one, with t the draft's "until additional
** quota is made available": the next point, none when full. */
Test(policy_http, structured_form_names_both_policies_in_points) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_decision d;
  rendered out;
  fx_open(&f, NULL, 0);
  d = spend(&f, &r, 10);
  assert_binding(d, "key");
  render_form(&d, &r, &out, SLUICE_HTTP_FORM_SF);
  /* Both, in the route's order (the built-in put the binding one first). */
  cr_assert(strstr(out.headers,
                   "RateLimit-Policy: \"tenant\";q=3000;qu=\"points\";w=60, "
                   "\"key\";q=1500;qu=\"points\";w=60\n"),
            "%s", out.headers);
  /* 10 points short at 25 points/s: full in 0.4 s, the next point in
  ** 40 ms, which rounds up to 1 s. */
  cr_assert(strstr(out.headers, "RateLimit: \"key\";r=1490;t=1\n"), "%s",
            out.headers);
  cr_assert_null(strstr(out.headers, "default"), "%s", out.headers);
  /* A full bucket gets no more quota: no t. */
  sluice_clock_advance(f.clock, 10 * SEC);
  r = rq_poll("acme", "key-1", "growth");
  d = decide(&f, &r);
  sluice_clock_advance(f.clock, 10 * SEC);
  cr_assert_eq(d.allowed, 1);
  d.remaining = d.limit; /* as a PEEK of a full bucket reports it */
  d.reset_ns = 0;
  render_form(&d, &r, &out, SLUICE_HTTP_FORM_SF);
  cr_assert(strstr(out.headers, "RateLimit: \"key\";r=1500\n"), "%s",
            out.headers);
  fx_close(&f);
}

Test(policy_http, structured_t_is_until_the_next_point) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  rendered out;
  cfg = cfg_new();
  /* Sandbox key bucket: 1 point per 4 s, so the next point is seconds
  ** away and t can be told from the time until full. */
  cfg_set(cfg, "limits.key.rate", 1);
  cfg_set_ns(cfg, "limits.key.period_ms", 4 * SEC);
  fx_open(&f, cfg, 0);
  d = spend(&f, &r, 3);
  render_form(&d, &r, &out, SLUICE_HTTP_FORM_BOTH);
  cr_assert(strstr(out.headers, "RateLimit-Reset: 12\n"), "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit: \"key\";r=297;t=4\n"), "%s",
            out.headers);
  sluice_clock_advance(f.clock, 3 * SEC);
  d = spend(&f, &r, 3); /* 5.25 points short: the next point in 1 s */
  render_form(&d, &r, &out, SLUICE_HTTP_FORM_SF);
  cr_assert(strstr(out.headers, "RateLimit: \"key\";r=294;t=1\n"), "%s",
            out.headers);
  fx_close(&f);
}

Test(policy_http, a_concurrency_denial_quotes_the_concurrency_limit) {
  fixture f;
  sluice_request a = rq_reconcile("acme", "key-1", "growth", "L");
  sluice_decision d;
  rendered out;
  fx_open(&f, NULL, 0);
  a = rq_with(a, "ledger", "L1");
  cr_assert_eq(decide(&f, &a).allowed, 1);
  a = rq_with(a, "ledger", "L2");
  cr_assert_eq(decide(&f, &a).allowed, 1);
  a = rq_with(a, "ledger", "L3");
  d = decide(&f, &a);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONCURRENCY);
  assert_binding(d, "reconciles");
  cr_assert_eq(d.limit, 2);
  render(&d, &a, &out);
  /* The file's detail speaks of the limit (the built-in: "Concurrency
  ** limit for tier 'growth' reached (2 at a time)"). */
  cr_assert(strstr(out.body, "Limit 'reconciles' reached (2 at a time)"),
            "%s", out.body);
  cr_assert_null(strstr(out.body, "1500 at a time"), "%s", out.body);
  fx_close(&f);
}

/* The hourly export cap: its own type, and the cap's numbers in every
** header and in the body, not a full bucket beside an hour's wait. */
Test(policy_http, the_export_cap_is_its_own_answer) {
  fixture f;
  sluice_request e = rq_export("acme", "key-1", "growth", 0);
  sluice_decision d;
  rendered out;
  int i;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 10; i++) {
    d = decide(&f, &e);
    cr_assert_eq(d.allowed, 1, "export %d", i + 1);
    cr_assert_eq(sluice_policy_release(f.pol, &e,
                                       &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                      .lease_id = d.lease_id}),
                 SLUICE_OK);
  }
  sluice_clock_advance(f.clock, 10 * MIN);
  d = decide(&f, &e);
  /* A declared cap's refusal is THROTTLED, naming the cap, its numbers
  ** the binding ones. */
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  assert_binding(d, "exports_per_hour");
  cr_assert_eq(d.limit, 10);
  cr_assert_eq(d.policy_window_ns, HOUR);
  render(&d, &e, &out);
  cr_assert_eq(out.a.status, 429);
  /* The file's type follows the outcome, its detail the limit (the
  ** built-in: export-cap-exceeded, "Export cap for tier 'growth' reached
  ** (10 exports/hour)"). */
  cr_assert(strstr(out.body, "errors/rate-limit-exceeded\""), "%s", out.body);
  cr_assert(strstr(out.body, "Limit 'exports_per_hour' exhausted (10 "
                             "requests per hour)."),
            "%s", out.body);
  cr_assert(strstr(out.body, "Retry in 3000 seconds."), "%s", out.body);
  cr_assert(strstr(out.body, "\"violated-policies\":[\"exports_per_hour\"]"),
            "%s", out.body);
  cr_assert_null(strstr(out.body, "concurrency"), "%s", out.body);
  cr_assert(strstr(out.headers, "Retry-After: 3000\n"), "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Policy: 10;w=3600\n"), "%s",
            out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Limit: 10\n"), "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Remaining: 0\n"), "%s",
            out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Reset: 3000\n"), "%s",
            out.headers);
  render_form(&d, &e, &out, SLUICE_HTTP_FORM_SF);
  cr_assert(strstr(out.headers, "\"exports_per_hour\";q=10;"
                                "qu=\"requests\";w=3600"),
            "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit: \"exports_per_hour\";r=0;t=3000\n"),
            "%s", out.headers);
  fx_close(&f);
}

/* An hourly cap's refusal is a throttle naming its limit (the built-in's
** separate export-cap answer went with the endpoint classes): 429, the
** limit in violated-policies, a Retry-After until the window frees. */
Test(policy_http, an_export_cap_refusal_names_its_limit) {
  fixture f;
  sluice_request e = rq_export("acme", "key-1", "sandbox", 0);
  sluice_decision d;
  rendered out;
  int i;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 2; i++) {
    d = decide(&f, &e);
    cr_assert_eq(d.allowed, 1, "export %d", i + 1);
    cr_assert_eq(sluice_policy_release(f.pol, &e,
                                       &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                      .lease_id = d.lease_id}),
                 SLUICE_OK);
  }
  d = decide(&f, &e);
  cr_assert_eq(d.allowed, 0);
  assert_binding(d, "exports_per_hour");
  render(&d, &e, &out);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_gt(d.retry_after_ns, 0);
  cr_assert_not_null(strstr(out.body, "\"exports_per_hour\""), "%s", out.body);
  cr_assert_not_null(strstr(out.body, "rate-limit-exceeded"), "%s", out.body);
  fx_close(&f);
}

/* A failed-login lockout is not about ignoring Retry-After. */
Test(policy_http, an_auth_lockout_says_why) {
  fixture f;
  sluice_request r = rq_signin("10.0.0.1", "alice", "bad_secret");
  sluice_decision d;
  rendered out;
  int i;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 5; i++)
    d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  render(&d, &r, &out);
  cr_assert_eq(out.a.status, 429);
  cr_assert(strstr(out.body, "penalty-box-active"), "%s", out.body);
  cr_assert(strstr(out.body, "Too many failed sign-in attempts; sign-in is "
                             "locked out (penalty level 1) until "),
            "%s", out.body);
  cr_assert_null(strstr(out.body, "Retry-After elapsed"), "%s", out.body);
  fx_close(&f);
}

/* The per-IP backstop's 429: its window as the RateLimit facts, in
** requests, and problem+json like every refusal. */
Test(policy_http, ip_backstop_refusal) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request a = rq_signin("203.0.113.9", "alice", NULL);
  sluice_decision d;
  rendered out;
  cfg = cfg_new();
  cfg_set(cfg, "ip_backstop.limit", 2);
  cfg_set_ns(cfg, "ip_backstop.window_s", 60 * SEC);
  fx_open(&f, cfg, 0);
  sluice_clock_advance(f.clock, 20 * SEC);
  decide(&f, &a);
  decide(&f, &a);
  d = decide(&f, &a);
  render(&d, &a, &out);
  cr_assert_eq(out.a.status, 429);
  cr_assert(strstr(out.headers, "RateLimit-Policy: 2;w=60\n"), "%s",
            out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Limit: 2\n"), "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Remaining: 0\n"), "%s",
            out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Reset: 40\n"), "%s", out.headers);
  cr_assert(strstr(out.headers, "Retry-After: 40\n"), "%s", out.headers);
  cr_assert_null(strstr(out.headers, "X-Penalty-Box-Status"), "%s",
                 out.headers);
  cr_assert(strstr(out.body, "\"status\":429"), "%s", out.body);
  render_form(&d, &a, &out, SLUICE_HTTP_FORM_SF);
  cr_assert(strstr(out.headers,
                   "RateLimit-Policy: \"ip\";q=2;qu=\"requests\";w=60\n"),
            "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit: \"ip\";r=0;t=40\n"), "%s",
            out.headers);
  fx_close(&f);
}

/* A declared limit (etc/github.conf) is named in the headers and the body
** by its own name and unit. */
Test(policy_http, a_declared_limit_speaks_of_itself) {
  fixture f;
  sluice_attr u = {"user", "octocat"};
  sluice_request r;
  sluice_decision d;
  rendered out;
  int i;
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = "/gists";
  r.attrs = &u;
  r.nattrs = 1;
  cr_assert_eq(fx_open_file(&f, SLUICE_ETC "/github.conf", NULL, 0),
               SLUICE_OK);
  for (i = 0; i < 80; i++)
    cr_assert_eq(decide(&f, &r).allowed, 1);
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_unit, "requests");
  render_form(&d, &r, &out, SLUICE_HTTP_FORM_SF);
  cr_assert_eq(out.a.status, 429);
  /* Every limit of the route, in the file's order, each in its unit;
  ** RateLimit names the one that refused. */
  cr_assert(strstr(out.headers,
                   "RateLimit-Policy: \"core\";q=5000;qu=\"requests\";"
                   "w=3600, \"points\";q=900;qu=\"points\";w=60, "
                   "\"content_minute\";q=80;qu=\"requests\";w=60, "
                   "\"content_hour\";q=500;qu=\"requests\";w=3600, "
                   "\"concurrent\";q=100;qu=\"requests\"\n"),
            "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit: \"content_minute\";r=0"), "%s",
            out.headers);
  cr_assert(strstr(out.body, "\"violated-policies\":[\"content_minute\"]"),
            "%s", out.body);
  cr_assert(strstr(out.body, "Limit 'content_minute' exhausted (80 requests "
                             "per minute). POST /gists costs 1 request."),
            "%s", out.body);
  /* The legacy form keeps its three headers and one policy, the binding
  ** limit's. */
  render_form(&d, &r, &out, SLUICE_HTTP_FORM_LEGACY);
  cr_assert(strstr(out.headers, "RateLimit-Policy: 80;w=60\n"), "%s",
            out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Limit: 80\n"), "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit-Remaining: 0\n"), "%s",
            out.headers);
  cr_assert_null(strstr(out.headers, "RateLimit: "), "%s", out.headers);
  /* An admitted request lists them all too, RateLimit the binding one. */
  sluice_clock_advance(f.clock, 3600 * SEC);
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1);
  render_form(&d, &r, &out, SLUICE_HTTP_FORM_SF);
  cr_assert(strstr(out.headers, "RateLimit-Policy: \"core\";q=5000;"), "%s",
            out.headers);
  cr_assert(strstr(out.headers, "\"content_hour\";q=500;qu=\"requests\";"
                                "w=3600, \"concurrent\";q=100;"
                                "qu=\"requests\"\n"),
            "%s", out.headers);
  cr_assert(strstr(out.headers, "RateLimit: \"content_minute\";r=79;"), "%s",
            out.headers);
  fx_close(&f);
}

/* A declared concurrency limit's refusal: its own name, leases at a time,
** no window in its policy item, and no cost sentence (a request takes one
** lease whatever its cost). */
Test(policy_http, a_declared_concurrency_limit_speaks_of_leases) {
  static const char conf[] =
      "attributes = [ \"user\" ];\n"
      "limits = {\n"
      "  per_user = { algorithm = \"gcra\"; scope = [ \"user\" ]; rate = 10;\n"
      "               period_ms = 1000; burst = 10; unit = \"requests\"; };\n"
      "  jobs = { algorithm = \"concurrency\"; scope = [ \"user\" ]; max = 2;\n"
      "           ttl_ms = 60000; };\n"
      "};\n"
      "routes = ( { method = \"POST\"; route = \"/jobs\";\n"
      "             limits = ( \"per_user\", \"jobs\" ); } );\n";
  fixture f;
  sluice_attr u = {"user", "u1"};
  sluice_request r;
  sluice_decision d;
  rendered out;
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = "/jobs";
  r.attrs = &u;
  r.nattrs = 1;
  fx_open_text(&f, conf);
  cr_assert_eq(decide(&f, &r).allowed, 1);
  cr_assert_eq(decide(&f, &r).allowed, 1);
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 0);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONCURRENCY);
  render_form(&d, &r, &out, SLUICE_HTTP_FORM_SF);
  cr_assert(strstr(out.headers,
                   "RateLimit-Policy: \"per_user\";q=10;qu=\"requests\";w=1, "
                   "\"jobs\";q=2;qu=\"concurrent\"\n"),
            "%s", out.headers);
  cr_assert(strstr(out.body, "\"detail\":\"Limit 'jobs' reached (2 at a "
                             "time). Retry in "),
            "%s", out.body);
  cr_assert_null(strstr(out.body, "costs"), "%s", out.body);
  cr_assert(strstr(out.body, "\"violated-policies\":[\"jobs\"]"), "%s",
            out.body);
  fx_close(&f);
}

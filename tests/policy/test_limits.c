/*
** Declared limits (docs/policy.md "Declared limits"): a policy file's
** `limits` and the routes that apply them, decided on a manual clock.
** Every number below is derived from the file written in the test.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/rmtree.h"
#include "helpers.h"

/* Load text; returns the loader's rc, err its message. */
static int load(const char *text, char *err, size_t len) {
  sluice_policy_config *c;
  const char *path = fx_write_conf(text);
  int rc = cfg_load(&c, path, err, len);
  unlink(path);
  return rc;
}

static sluice_request rq(const char *method, const char *route,
                         const sluice_attr *a, size_t n) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.method = method;
  r.route = route;
  r.attrs = a;
  r.nattrs = n;
  return r;
}

/* A GitHub-like file: a core budget per user, points per user and
** endpoint with a per-method cost, and content creation under two
** windows shared by two routes; /v1 is exempt. */
static const char *github =
    "attributes = [ \"user\" ];\n"
    "limits = {\n"
    "  core = { algorithm = \"gcra\"; scope = [ \"user\" ]; rate = 50;\n"
    "           period_ms = 3600000; burst = 50; unit = \"requests\"; };\n"
    "  points = { algorithm = \"gcra\"; scope = [ \"user\", \"pattern\" ];\n"
    "             rate = 20; period_ms = 60000; burst = 20; };\n"
    "  content_min = { algorithm = \"sliding_window\"; scope = [ \"user\" ];\n"
    "                  limit = 3; window_ms = 60000; };\n"
    "  content_hour = { algorithm = \"fixed_window\"; scope = [ \"user\" ];\n"
    "                   limit = 5; window_ms = 3600000; };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"POST\"; route = \"/issues\";\n"
    "    limits = ( \"core\", { limit = \"points\"; cost = { GET = 1; "
    "other = 5; }; },\n"
    "               \"content_min\", \"content_hour\" ); },\n"
    "  { method = \"POST\"; route = \"/gists\";\n"
    "    limits = ( \"core\", \"content_min\", \"content_hour\" ); },\n"
    "  { method = \"*\"; route = \"/repos/*\";\n"
    "    limits = ( \"core\", { limit = \"points\"; cost = { GET = 1; HEAD = "
    "1; other = 5; }; } ); },\n"
    "  { method = \"*\"; route = \"/v1/*\"; limits = ( ); }\n"
    ");\n";

Test(policy_limits, costs_bindings_and_denials_consume_nothing) {
  fixture f;
  sluice_attr u = {"user", "octocat"};
  sluice_request get = rq("GET", "/repos/a/b", &u, 1);
  sluice_request put = rq("PUT", "/repos/a/b", &u, 1);
  sluice_decision d;
  int i;
  fx_open_text(&f, github);
  d = decide(&f, &get);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.binding, SLUICE_BINDING_LIMIT);
  /* core: 49 of 50 left; points: 19 of 20: the lower fraction binds. */
  cr_assert_str_eq(d.limit_name, "points");
  cr_assert_eq(d.remaining, 19);
  cr_assert_eq(d.limit, 20);
  /* A PUT costs 5 points: 19 - 5*3 = 4 left, then a fourth is refused. */
  for (i = 0; i < 3; i++)
    cr_assert_eq(decide(&f, &put).allowed, 1, "put %d", i);
  d = decide(&f, &put);
  cr_assert_eq(d.allowed, 0);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(d.status, 429);
  cr_assert_str_eq(d.limit_name, "points");
  cr_assert_eq(d.remaining, 4);
  cr_assert(d.retry_after_ns > 0);
  /* The refused PUT took nothing from core: 50 - 4 = 46 requests left,
  ** seen by a GET that leaves points at 3 (3/20 < 45/50). */
  d = decide(&f, &get);
  cr_assert_eq(d.allowed, 1);
  cr_assert_str_eq(d.limit_name, "points");
  cr_assert_eq(d.remaining, 3);
  fx_close(&f);
}

Test(policy_limits, shared_budget_two_windows_and_no_charge_on_denial) {
  fixture f;
  sluice_attr u = {"user", "hubot"};
  sluice_request issue = rq("POST", "/issues", &u, 1);
  sluice_request gist = rq("POST", "/gists", &u, 1);
  sluice_request get = rq("GET", "/repos/a/b", &u, 1);
  sluice_decision d;
  fx_open_text(&f, github);
  /* content_min (3 per minute) is shared by both routes. */
  cr_assert_eq(decide(&f, &issue).allowed, 1);
  cr_assert_eq(decide(&f, &gist).allowed, 1);
  cr_assert_eq(decide(&f, &gist).allowed, 1);
  d = decide(&f, &issue);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "content_min");
  /* The refused issue charged core nothing: 50 - 3 - 1 = 46 after a GET,
  ** whose points (scoped by the repos pattern, not the issue route's) are
  ** at 19 of 20: core's 46 of 50 is the lower fraction. */
  d = decide(&f, &get);
  cr_assert_str_eq(d.limit_name, "core");
  cr_assert_eq(d.remaining, 46);
  /* After a minute the sliding window has room, the hourly one binds at
  ** 5: two more creations pass, the third is refused by content_hour. */
  sluice_clock_advance(f.clock, 2 * MIN);
  cr_assert_eq(decide(&f, &gist).allowed, 1);
  d = decide(&f, &gist);
  cr_assert_eq(d.allowed, 1);
  cr_assert_str_eq(d.limit_name, "content_hour");
  cr_assert_eq(d.remaining, 0);
  d = decide(&f, &gist);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "content_hour");
  fx_close(&f);
}

/* The decision reports every limit of the route, in the route's order:
** each one's quota, window, remaining, reset and cost, which one binds,
** which refused, and that those after a refusal did not run. */
Test(policy_limits, a_decision_reports_every_limit_of_its_route) {
  fixture f;
  sluice_attr u = {"user", "mona"};
  sluice_request issue = rq("POST", "/issues", &u, 1);
  sluice_decision d;
  const sluice_decision_limit *l;
  int i;
  fx_open_text(&f, github);
  d = decide(&f, &issue);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.nlimits, 4);
  l = d.limits;
  cr_assert_str_eq(l[0].name, "core");
  cr_assert_str_eq(l[0].unit, "requests");
  cr_assert_eq(l[0].quota, 50);
  cr_assert_eq(l[0].window_ns, 3600 * SEC); /* 50 per hour: 1 h from empty */
  cr_assert_eq(l[0].remaining, 49);
  cr_assert_eq(l[0].cost, 1);
  cr_assert_str_eq(l[1].name, "points");
  cr_assert_str_eq(l[1].unit, "points");
  cr_assert_eq(l[1].quota, 20);
  cr_assert_eq(l[1].window_ns, MIN);
  cr_assert_eq(l[1].cost, 5); /* POST: other = 5 */
  cr_assert_eq(l[1].remaining, 15);
  /* A bucket one point short is full again in period / rate = 3 s per
  ** point: 5 points, 15 s. */
  cr_assert_eq(l[1].reset_ns, 15 * SEC);
  cr_assert_str_eq(l[2].name, "content_min");
  cr_assert_eq(l[2].quota, 3);
  cr_assert_eq(l[2].window_ns, MIN);
  cr_assert_eq(l[2].remaining, 2);
  cr_assert_str_eq(l[3].name, "content_hour");
  cr_assert_eq(l[3].quota, 5);
  cr_assert_eq(l[3].window_ns, 60 * MIN);
  cr_assert_eq(l[3].remaining, 4);
  cr_assert_eq(l[3].reset_ns, 60 * MIN); /* the hour started now */
  /* content_min at 2 of 3 is the lowest fraction: it binds. */
  cr_assert_str_eq(d.limit_name, "content_min");
  for (i = 0; i < 4; i++)
    cr_assert_eq(l[i].flags, i == 2 ? SLUICE_LIMIT_BINDING : 0u, "%d", i);
  /* Two more use content_min up; the fourth is refused by it: core and
  ** points ran (and gave back what they took), content_hour did not. */
  cr_assert_eq(decide(&f, &issue).allowed, 1);
  cr_assert_eq(decide(&f, &issue).allowed, 1);
  d = decide(&f, &issue);
  cr_assert_eq(d.allowed, 0);
  cr_assert_eq(d.nlimits, 4);
  l = d.limits;
  cr_assert_eq(l[0].flags, 0u);
  cr_assert_eq(l[0].remaining, 46); /* 50 - 3 admitted - this one */
  cr_assert_eq(l[1].flags, 0u);
  cr_assert_eq(l[1].remaining, 0); /* 20 - 4 * 5 */
  cr_assert_eq(l[2].flags, SLUICE_LIMIT_DENIED | SLUICE_LIMIT_BINDING);
  cr_assert_eq(l[2].remaining, 0);
  cr_assert_eq(l[3].flags, SLUICE_LIMIT_NOT_RUN);
  cr_assert_eq(l[3].remaining, -1);
  cr_assert_eq(l[3].reset_ns, -1);
  cr_assert_eq(l[3].quota, 5); /* its figures are still the file's */
  cr_assert_eq(l[3].cost, 1);
  /* An exempt route reports no limit. */
  {
    sluice_request std = rq("GET", "/v1/ledgers/L1", NULL, 0);
    std.tenant_id = "t1";
    std.api_key_id = "k1";
    std.tier = "growth";
    d = decide(&f, &std);
    cr_assert_eq(d.allowed, 1);
    cr_assert_eq(d.nlimits, 0);
    cr_assert_null(d.limits[0].name);
  }
  fx_close(&f);
}

Test(policy_limits, scopes_keep_users_apart_and_attributes_are_required) {
  fixture f;
  sluice_attr a = {"user", "a"}, b = {"user", "b"};
  sluice_request ra = rq("PUT", "/repos/x", &a, 1);
  sluice_request rb = rq("PUT", "/repos/x", &b, 1);
  sluice_request none = rq("GET", "/repos/x", NULL, 0);
  sluice_request bad = rq("GET", "/repos/x", NULL, 1);
  sluice_decision d;
  int i;
  fx_open_text(&f, github);
  for (i = 0; i < 4; i++)
    cr_assert_eq(decide(&f, &ra).allowed, 1);
  cr_assert_eq(decide(&f, &ra).allowed, 0);
  cr_assert_eq(decide(&f, &rb).allowed, 1, "another user's own budget");
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &none, &d, NULL), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "user");
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &bad, &d, NULL), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "attrs");
  ra.cost = 3;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &ra, &d, NULL), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "cost");
  fx_close(&f);
}

/* Shopify-like: a bucket per store and app whose leak rate the plan
** chooses. */
static const char *shopify =
    "attributes = [ \"store\", \"app\", \"plan\" ];\n"
    "limits = { rest = { algorithm = \"gcra\"; scope = [ \"store\", \"app\" "
    "];\n"
    "  burst = 40; rate = 2; period_ms = 1000; unit = \"requests\";\n"
    "  by = \"plan\"; params = { plus = { rate = 20; }; }; }; };\n"
    "routes = ( { method = \"*\"; route = \"/admin/*\"; limits = ( \"rest\" "
    "); } );\n";

Test(policy_limits, parameter_sets_by_attribute) {
  fixture f;
  sluice_attr std[] = {{"store", "s1"}, {"app", "a"}, {"plan", "basic"}};
  sluice_attr plus[] = {{"store", "s2"}, {"app", "a"}, {"plan", "plus"}};
  sluice_request r1 = rq("GET", "/admin/orders.json", std, 3);
  sluice_request r2 = rq("GET", "/admin/orders.json", plus, 3);
  sluice_decision d;
  int i;
  fx_open_text(&f, shopify);
  for (i = 0; i < 40; i++) {
    cr_assert_eq(decide(&f, &r1).allowed, 1);
    cr_assert_eq(decide(&f, &r2).allowed, 1);
  }
  d = decide(&f, &r1);
  cr_assert_eq(d.allowed, 0);
  cr_assert_eq(d.retry_after_ns, 500 * MS, "basic leaks 2/s");
  d = decide(&f, &r2);
  cr_assert_eq(d.allowed, 0);
  cr_assert_eq(d.retry_after_ns, 50 * MS, "plus leaks 20/s");
  cr_assert_eq(d.refill_rate, 20);
  fx_close(&f);
}

static const char *heavy =
    "attributes = [ \"ledger\", \"days\", \"tokens\" ];\n"
    "limits = {\n"
    "  points = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 1;\n"
    "             period_ms = 1000; burst = 100; };\n"
    "  jobs = { algorithm = \"concurrency\"; scope = [ \"tenant\" ]; max = 2;\n"
    "           ttl_ms = 60000; };\n"
    "  ledger_lock = { algorithm = \"lock\"; scope = [ \"tenant\", \"ledger\" "
    "]; ttl_ms = 60000; };\n"
    "  exports = { algorithm = \"cap\"; scope = [ \"tenant\" ]; limit = 3;\n"
    "              window_ms = 3600000; };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"POST\"; route = \"/reconcile\";\n"
    "    limits = ( { limit = \"points\"; cost = 10; }, \"ledger_lock\", "
    "\"jobs\" ); },\n"
    "  { method = \"GET\"; route = \"/export\";\n"
    "    limits = ( \"exports\", { limit = \"points\"; cost = { by = "
    "\"days\";\n"
    "      ranges = ( { upto = 90; cost = 25; }, { cost = 50; } ); }; } ); "
    "},\n"
    "  { method = \"POST\"; route = \"/complete\";\n"
    "    limits = ( { limit = \"points\"; cost = { attr = \"tokens\"; max = "
    "60; }; } ); }\n"
    ");\n";

Test(policy_limits, locks_leases_caps_and_costs) {
  fixture f;
  sluice_attr l1[] = {{"ledger", "L1"}}, l2[] = {{"ledger", "L2"}},
              l3[] = {{"ledger", "L3"}};
  sluice_request a = rq("POST", "/reconcile", l1, 1);
  sluice_request b = rq("POST", "/reconcile", l2, 1);
  sluice_request c = rq("POST", "/reconcile", l3, 1);
  sluice_decision da, db, d;
  sluice_attr days90[] = {{"days", "90"}}, days91[] = {{"days", "91"}};
  sluice_attr tok[] = {{"tokens", "60"}}, big[] = {{"tokens", "61"}},
              junk[] = {{"tokens", "6x"}};
  sluice_request x90 = rq("GET", "/export", days90, 1);
  sluice_request x91 = rq("GET", "/export", days91, 1);
  sluice_request t = rq("POST", "/complete", tok, 1);
  a.tenant_id = b.tenant_id = c.tenant_id = "acme";
  x90.tenant_id = x91.tenant_id = t.tenant_id = "acme";
  fx_open_text(&f, heavy);
  da = decide(&f, &a);
  cr_assert_eq(da.allowed, 1);
  cr_assert_neq(da.lease_id, 0);
  cr_assert_eq(da.lease_ttl_ns, 60 * SEC);
  d = decide(&f, &a);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONFLICT);
  cr_assert_eq(d.status, 409);
  cr_assert_str_eq(d.limit_name, "ledger_lock");
  db = decide(&f, &b);
  cr_assert_eq(db.allowed, 1);
  d = decide(&f, &c);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONCURRENCY);
  cr_assert_eq(d.status, 429);
  cr_assert_str_eq(d.limit_name, "jobs");
  cr_assert_eq(d.cap_limit, 2);
  /* The refused ones charged nothing: 100 - 10 - 10 = 80 points. */
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = da.lease_id}),
               SLUICE_OK);
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = da.lease_id}),
               SLUICE_ENOTFOUND);
  d = decide(&f, &c);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(sluice_policy_release(f.pol, &c,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  cr_assert_eq(sluice_policy_release(f.pol, &b,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = db.lease_id}),
               SLUICE_OK);
  /* 70 points left; exports cost 25 up to 90 days, 50 beyond. */
  d = decide(&f, &x90);
  cr_assert_eq(d.allowed, 1);
  cr_assert_str_eq(d.limit_name, "points");
  cr_assert_eq(d.remaining, 45);
  d = decide(&f, &x91);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "points");
  cr_assert_eq(d.remaining, 45);
  /* Caller costs are bounded by the file's max. */
  d = decide(&f, &t);
  cr_assert_eq(d.allowed, 0, "60 tokens > 45 points left");
  t.attrs = big;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &t, &d, NULL), SLUICE_ERANGE);
  cr_assert_str_eq(d.invalid_field, "tokens");
  t.attrs = junk;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &t, &d, NULL), SLUICE_EINVAL);
  /* The export cap counts requests: 3 per hour whatever they cost. */
  sluice_clock_advance(f.clock, 200 * SEC);
  cr_assert_eq(decide(&f, &x90).allowed, 1);
  cr_assert_eq(decide(&f, &x90).allowed, 1);
  d = decide(&f, &x90);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "exports");
  fx_close(&f);
}

Test(policy_limits, store_failure_fails_closed) {
  fixture f;
  sluice_attr u = {"user", "u"};
  sluice_request r = rq("GET", "/repos/x", &u, 1);
  sluice_decision d;
  fx_open_text(&f, github);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_UNAVAILABLE);
  cr_assert_eq(d.status, 503);
  fx_close(&f);
}

/* The loader's errors: FILE:LINE: SETTING: problem. */
static void refused(const char *text, const char *want_line, const char *want) {
  char err[512];
  cr_assert_eq(load(text, err, sizeof err), SLUICE_ECONFIG, "%s", text);
  cr_assert(strstr(err, want_line) != NULL, "line %s in: %s", want_line, err);
  cr_assert(strstr(err, want) != NULL, "%s in: %s", want, err);
}

#define LIM_A                                                                  \
  "limits = { a = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = "     \
  "1; period_ms = 1000; burst = 10; };\n"                                      \
  "  b = { algorithm = \"sliding_window\"; scope = [ \"key\" ]; limit = 5; "   \
  "window_ms = 1000; }; };\n"

Test(policy_limits, bad_files_name_the_line_and_setting) {
  refused("limits = { a = { algorithm = \"gcra\"; scope = [ \"model\" ];\n"
          "rate = 1; period_ms = 1; burst = 1; }; };\n",
          ":1: limits.a.scope", "unknown attribute \"model\"");
  refused(LIM_A "routes = ( { method = \"GET\"; route = \"/x\";\n"
                "  limits = ( \"a\", \"nope\" ); } );\n",
          ":4: routes.[0].limits.[1]", "no limit \"nope\"");
  /* A route without `limits` at all: the route's own line (the fuzzer
  ** found this one dereferencing the missing setting). */
  refused(LIM_A "routes = ( { method = \"GET\";\n"
                "  route = \"/x\"; } );\n",
          ":3: routes.[0].limits", "must be a list");
  refused(LIM_A "routes = ( { method = \"GET\"; route = \"/x\";\n"
                "  limits = ( { limit = \"a\"; cost = 11; } ); } );\n",
          ":4: routes.[0].limits.[0].cost",
          "the smallest burst of limit \"a\"");
  refused(LIM_A "routes = ( { method = \"GET\"; route = \"/x\";\n"
                "  limits = ( { limit = \"a\"; cost = { GET = 2;\n"
                "  other = 12; }; } ); } );\n",
          ":5: routes.[0].limits.[0].cost", "(got 12)");
  /* Two hash-tag groups run as two programs (test_groups.c); the buckets
  ** of one group step must share theirs, and a route spans at most 4. */
  refused("limits = { a = { algorithm = \"gcra\"; scope = [ \"tenant\" ];\n"
          "rate = 1; period_ms = 1000; burst = 10; };\n"
          "  b = { algorithm = \"gcra\"; scope = [ \"key\" ]; rate = 1;\n"
          "period_ms = 1000; burst = 10; }; };\n"
          "routes = ( { method = \"GET\"; route = \"/x\";\n"
          "  limits = ( { group = [ \"a\", \"b\" ]; } ); } );\n",
          ":6: routes.[0].limits.[0]", "one step in one hash-tag group");
  refused("attributes = [ \"u\" ];\n"
          "limits = { a = { algorithm = \"cap\"; scope = [ \"tenant\" ];\n"
          "limit = 1; window_ms = 1000; };\n"
          "  b = { algorithm = \"cap\"; scope = [ \"key\" ]; limit = 1;\n"
          "window_ms = 1000; };\n"
          "  c = { algorithm = \"cap\"; scope = [ \"ip\" ]; limit = 1;\n"
          "window_ms = 1000; };\n"
          "  d = { algorithm = \"cap\"; scope = [ \"u\" ]; limit = 1;\n"
          "window_ms = 1000; };\n"
          "  e = { algorithm = \"cap\"; scope = [ \"route\" ]; limit = 1;\n"
          "window_ms = 1000; }; };\n"
          "routes = ( { method = \"GET\"; route = \"/x\";\n"
          "  limits = ( \"a\", \"b\", \"c\", \"d\", \"e\" ); } );\n",
          ":13: routes.[0].limits.[4]", "at most 4 hash-tag groups");
  refused("limits = { a = { algorithm = \"gcra\"; scope = [ \"tenant\" ];\n"
          "rate = 1; period_ms = 1000; burst = 10; by = \"tier\";\n"
          "params = { gold = { burst = 2; }; }; }; };\n"
          "routes = ( { method = \"GET\"; route = \"/x\";\n"
          "  limits = ( { limit = \"a\"; cost = 3; } ); } );\n",
          ":5: routes.[0].limits.[0].cost", "1..2");
  refused("limits = { a = { algorithm = \"leaky\"; scope = [ \"tenant\" ]; }; "
          "};\n",
          ":1: limits.a.algorithm", "must be one of");
  refused("limits = { a = { algorithm = \"gcra\"; scope = [ \"tenant\" ];\n"
          "rate = 1; burst = 10; }; };\n",
          ":1: limits.a", "period_ms is missing");
  refused("limits = { a = { algorithm = \"concurrency\"; scope = [ \"tenant\" "
          "];\n max = 1048577; ttl_ms = 1; }; };\n",
          ":2: limits.a.max", "1..1048576");
  refused("limits = { a = { algorithm = \"lock\"; scope = [ \"tenant\" ];\n"
          " ttl_ms = 1; }; };\n"
          "routes = ( { method = \"GET\"; route = \"/x\";\n"
          "  limits = ( { limit = \"a\"; cost = 2; } ); } );\n",
          ":4: routes.[0].limits.[0].cost", "must be 1");
  /* A counted set's grant makes the lease id: it cannot share one. */
  refused("limits = { a = { algorithm = \"concurrency\"; scope = [ \"tenant\" "
          "];\n max = 100; ttl_ms = 1000; };\n"
          " l = { algorithm = \"lock\"; scope = [ \"tenant\" ]; ttl_ms = 1; "
          "}; };\n"
          "routes = ( { method = \"GET\"; route = \"/x\";\n"
          "  limits = ( \"l\", \"a\" ); } );\n",
          ":5: routes.[0].limits.[1]", "the route's only concurrency or lock");
}

Test(policy_limits, an_unused_limit_is_a_warning) {
  char buf[512];
  const char *path = fx_write_conf(LIM_A "routes = ( { method = \"GET\"; route = "
                                "\"/x\"; limits = ( \"a\" ); } );\n");
  cr_assert_eq(cfg_warnings(path, buf, sizeof buf), SLUICE_OK);
  cr_assert(strstr(buf, ":2: limits.b: no route applies it"), "%s", buf);
  unlink(path);
  path = fx_write_conf(LIM_A "routes = ( { method = \"GET\"; route = \"/x\"; "
                          "limits = ( \"a\" ); },\n"
                          "{ method = \"GET\"; route = \"/y\"; limits = ( "
                          "\"b\" ); } );\n");
  cr_assert_eq(cfg_warnings(path, buf, sizeof buf), SLUICE_OK);
  cr_assert_str_eq(buf, "");
  unlink(path);
}

/* A decide of n requests gives routes of declared limits the decisions
** one by one would (they go alone, in order, between batches). */
Test(policy_limits, decide_many_matches_one_by_one) {
  fixture a, b;
  sluice_attr u = {"user", "octocat"};
  sluice_request rs[12];
  sluice_decision ds[12], d;
  int rcs[12], i;
  fx_open_text(&a, github);
  fx_open_text(&b, github);
  for (i = 0; i < 12; i++) {
    rs[i] = rq(i % 3 ? "PUT" : "GET", "/repos/a/b", &u, 1);
    if (i % 4 == 3) { /* an exempt route's request between them */
      rs[i] = rq("GET", "/v1/things", NULL, 0);
      rs[i].tenant_id = "acme";
      rs[i].api_key_id = "k";
      rs[i].tier = "sandbox";
    }
  }
  cr_assert_eq(sluice_policy_decide(a.pol, 12, rs, ds, rcs), SLUICE_OK);
  for (i = 0; i < 12; i++) {
    cr_assert_eq(rcs[i], SLUICE_OK);
    d = decide(&b, &rs[i]);
    cr_assert_eq(ds[i].allowed, d.allowed, "request %d", i);
    cr_assert_eq(ds[i].remaining, d.remaining, "request %d", i);
    cr_assert_eq(ds[i].binding, d.binding, "request %d", i);
  }
  cr_assert_eq(ds[10].allowed, 0, "the points ran out in the batch");
  cr_assert_str_eq(ds[10].limit_name, "points");
  fx_close(&a);
  fx_close(&b);
}

/* Shadow mode serves a declared limit's refusal, saying what it was. */
Test(policy_limits, shadow_serves_and_records) {
  fixture f;
  sluice_attr u = {"user", "u"};
  sluice_request put = rq("PUT", "/repos/x", &u, 1);
  sluice_decision d;
  const char *path = fx_write_conf(github);
  int i;
  cr_assert_eq(fx_open_file(&f, path, NULL, 0), SLUICE_OK);
  unlink(path);
  sluice_policy_close(f.pol);
  {
    sluice_policy_options po;
    memset(&po, 0, sizeof po);
    po.limiter = f.lim;
    po.config_path = path = fx_write_conf(github);
    po.flags = SLUICE_POLICY_SHADOW;
    po.secret[0] = 9;
    cr_assert_eq(sluice_policy_open(&po, &f.pol), SLUICE_OK);
    unlink(path);
  }
  for (i = 0; i < 4; i++)
    cr_assert_eq(decide(&f, &put).allowed, 1);
  d = decide(&f, &put);
  cr_assert_eq(d.allowed, 1, "served in shadow");
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert(d.flags & SLUICE_DECISION_SHADOW);
  cr_assert_str_eq(d.limit_name, "points");
  cr_assert_eq(sluice_policy_count(f.pol, NULL, SLUICE_OUTCOME_THROTTLED), 1);
  fx_close(&f);
}

/* Scope values are hashed before they become keys: an LMDB store's file
** holds the declared limits' records (dl:{...) but no raw value. */
Test(policy_limits, raw_values_never_reach_the_store) {
  char dir[] = "/tmp/sluice-limits-lmdb-XXXXXX", spec[96], file[128];
  static char buf[1 << 20];
  sluice_attr u = {"user", "octocat-raw-value"};
  sluice_request r = rq("GET", "/repos/raw-route-value", &u, 1);
  fixture f;
  size_t n;
  FILE *fp;
  const char *path = fx_write_conf(github);
  cr_assert_not_null(mkdtemp(dir));
  snprintf(spec, sizeof spec, "lmdb:path=%s;sync=nosync", dir);
  cr_assert_eq(fx_open_file(&f, path, spec, SLUICE_OPEN_CREATE), SLUICE_OK);
  unlink(path);
  cr_assert_eq(decide(&f, &r).allowed, 1);
  fx_close(&f);
  snprintf(file, sizeof file, "%s/data.mdb", dir);
  fp = fopen(file, "rb");
  cr_assert_not_null(fp);
  n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  cr_assert(memmem(buf, n, "dl:{", 4) != NULL, "the records are there");
  cr_assert(memmem(buf, n, "octocat-raw-value", 17) == NULL);
  cr_assert(memmem(buf, n, "raw-route-value", 15) == NULL);
  cr_expect_eq(rmtree(dir), 0, "%s left behind", dir);
}

/* An `ip` scope counts an IPv6 client by its prefix (/64 by default), as
** the rest of the policy does. */
Test(policy_limits, ipv6_clients_count_by_prefix) {
  fixture f;
  sluice_request r = rq("GET", "/x", NULL, 0);
  fx_open_text(&f, "limits = { per_ip = { algorithm = \"cap\"; scope = [ \"ip\" "
                "]; limit = 1; window_ms = 60000; }; };\n"
                "routes = ( { method = \"*\"; route = \"/x\"; limits = ( "
                "\"per_ip\" ); } );\n");
  r.client_ip = "2001:db8::1";
  cr_assert_eq(decide(&f, &r).allowed, 1);
  r.client_ip = "2001:db8::ffff:2";
  cr_assert_eq(decide(&f, &r).allowed, 0, "the same /64");
  r.client_ip = "2001:db8:0:1::1";
  cr_assert_eq(decide(&f, &r).allowed, 1, "another /64");
  r.client_ip = "192.0.2.1";
  cr_assert_eq(decide(&f, &r).allowed, 1);
  r.client_ip = "::ffff:192.0.2.1";
  cr_assert_eq(decide(&f, &r).allowed, 0, "IPv4-mapped: the IPv4 client");
  fx_close(&f);
}

/* The settings table (sluice settings, docs/policy.md) is the loader's:
** each number's bounds are the ones the loader enforces, naming the
** setting, and every member the table lists is one the loader knows. */
Test(policy_limits, the_settings_table_is_the_loaders) {
  static const char *algo_of[] = {"gcra", "sliding_window", "fixed_window",
                                  "concurrency", "lock", "cap"};
  const sluice_limit_setting *st;
  char text[1024], err[512], want[128];
  int i, a, numbers = 0, members = 0;
  for (i = 0; (st = sluice_policy_limit_setting_at(i)) != NULL; i++) {
    if (strcmp(st->group, "limits"))
      continue;
    if (st->unit_ns) {
      /* One past the top, on the first algorithm the row names. */
      for (a = 0; a < 6 && strncmp(st->algorithms, algo_of[a],
                                   strlen(algo_of[a])); a++)
        ;
      if (!strcmp(st->algorithms, "every"))
        a = 0;
      cr_assert_lt(a, 6, "%s: %s", st->name, st->algorithms);
      snprintf(text, sizeof text,
               "limits = { l = { algorithm = \"%s\"; scope = [ \"tenant\" ];"
               " %s = %lldL; }; };\nroutes = ( { method = \"GET\"; "
               "route = \"/x\"; limits = ( \"l\" ); } );\n",
               algo_of[a], st->name, (long long)st->max + 1);
      cr_assert_neq(load(text, err, sizeof err), SLUICE_OK, "%s", st->name);
      snprintf(want, sizeof want, "limits.l.%s: must be %lld..%lld", st->name,
               (long long)st->min, (long long)st->max);
      cr_assert(strstr(err, want), "%s: %s", want, err);
      numbers++;
    } else {
      snprintf(text, sizeof text,
               "limits = { l = { algorithm = \"gcra\"; scope = [ \"tenant\" ];"
               " %s = 0; }; };\n", st->name);
      load(text, err, sizeof err);
      cr_assert_null(strstr(err, "unknown setting"), "%s: %s", st->name, err);
      members++;
    }
  }
  cr_assert_eq(numbers, 9);
  cr_assert_geq(members, 6);
  /* A member the table does not list is unknown to the loader too. */
  load("limits = { l = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; "
       "rates = 1; }; };\n", err, sizeof err);
  cr_assert(strstr(err, "unknown setting"), "%s", err);
}

/* A group of buckets is one step that reports its binding bucket only:
** that one has its figures, the others are GROUPED with -1. */
Test(policy_limits, a_group_reports_its_binding_bucket) {
  static const char *text =
      "limits = {\n"
      "  tb = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 10;\n"
      "         period_ms = 1000; burst = 100; };\n"
      "  kb = { algorithm = \"gcra\"; scope = [ \"tenant\", \"key\" ];\n"
      "         rate = 5; period_ms = 1000; burst = 30; };\n"
      "};\n"
      "routes = ( { method = \"GET\"; route = \"/g\";\n"
      "  limits = ( { group = [ \"tb\", \"kb\" ]; cost = 10; } ); } );\n";
  fixture f;
  sluice_request q = rq("GET", "/g", NULL, 0);
  sluice_decision d;
  q.tenant_id = "t";
  q.api_key_id = "k";
  fx_open_text(&f, text);
  d = decide(&f, &q);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.nlimits, 2);
  /* kb: 20 of 30 points left beats tb's 90 of 100: the fewest points. */
  cr_assert_str_eq(d.limit_name, "kb");
  cr_assert_eq(d.limits[1].flags, SLUICE_LIMIT_BINDING | SLUICE_LIMIT_GROUPED);
  cr_assert_eq(d.limits[1].remaining, 20);
  cr_assert_eq(d.limits[1].cost, 10);
  cr_assert_eq(d.limits[0].flags, SLUICE_LIMIT_GROUPED);
  cr_assert_eq(d.limits[0].remaining, -1);
  cr_assert_eq(d.limits[0].quota, 100);
  cr_assert_eq(d.limits[0].cost, 10);
  fx_close(&f);
}

/*
** sluice_policy_settle() (lib/policy/settle.c): a request's real cost
** reported after the response.  Through the shipped LLM gateway file: the
** token limits of the organization, project and model move, the request
** counts do not; a charge leaves at most one burst of debt; a refund never
** exceeds the charge nor fills a bucket past full.  Through a small file of
** windows: a refund goes back to the window its charge was counted in, and
** leases and count caps are never settled.  A decision that charged nothing
** settles nothing, and bad reports change nothing, with no store call.
** (The store-side step is the conformance suite's, on every store; the
** trace of tests/policy/test_published.c settles on every store too.)
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

static sluice_request llm_rq(const char *org, const char *project,
                             const char *model, const char *tokens,
                             sluice_attr a[4]) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  a[0] = (sluice_attr){"org", org};
  a[1] = (sluice_attr){"project", project};
  a[2] = (sluice_attr){"model", model};
  a[3] = (sluice_attr){"tokens", tokens};
  r.method = "POST";
  r.route = "/v1/chat/completions";
  r.attrs = a;
  r.nattrs = 4;
  return r;
}

static void open_llm(fixture *f) {
  cr_assert_eq(fx_open_file(f, SLUICE_ETC "/llm-gateway.conf", NULL, 0),
               SLUICE_OK);
}

static int settle(fixture *f, const sluice_request *r, sluice_decision *d,
                  const char *tokens) {
  sluice_attr a = {"tokens", tokens};
  return sluice_policy_settle(f->pol, r, d, &a, 1);
}

/* 200 requests of 100000 tokens each, each settled to 0: the tokens come
** back every time (without the refund the project's 100000 would refuse
** the second), the requests never do, so the 201st meets the model's 200
** requests a minute. */
Test(policy_settle, llm_tokens_move_requests_do_not) {
  fixture f;
  sluice_attr a[4];
  sluice_request r = llm_rq("acme", "p1", "large", "100000", a);
  sluice_decision d;
  int i;
  open_llm(&f);
  for (i = 0; i < 200; i++) {
    d = decide(&f, &r);
    cr_assert_eq(d.allowed, 1, "request %d: %s", i, d.limit_name);
    cr_assert_eq(settle(&f, &r, &d, "0"), SLUICE_OK);
    cr_assert(d.flags & SLUICE_DECISION_SETTLED);
  }
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "model_requests");
  /* Another model of the same project: its tokens were refunded too. */
  a[2].value = "small";
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1);
  cr_assert_str_eq(d.limit_name, "project_tokens");
  cr_assert_eq(d.remaining, 0, "the project's 100000 were all there");
  fx_close(&f);
}

/* Three requests take the project's 100000 tokens (40000, 40000, 20000)
** and each used 100000: +60000, +60000, +80000.  The project may owe one
** burst, no more: -100000, not -200000.  The organization's 200000 owe
** 100000 (300000 used), the model's 150000 exactly its burst. */
Test(policy_settle, debt_is_at_most_one_burst) {
  fixture f;
  sluice_attr a[4], b[4], c[4];
  sluice_request ra = llm_rq("acme", "p1", "large", "40000", a);
  sluice_request rb = llm_rq("acme", "p1", "large", "40000", b);
  sluice_request rc = llm_rq("acme", "p1", "large", "20000", c);
  sluice_decision da, db, dc, d;
  sluice_attr one[4];
  sluice_request r1 = llm_rq("acme", "p1", "large", "1", one);
  open_llm(&f);
  da = decide(&f, &ra);
  db = decide(&f, &rb);
  dc = decide(&f, &rc);
  cr_assert(da.allowed && db.allowed && dc.allowed);
  cr_assert_eq(settle(&f, &ra, &da, "100000"), SLUICE_OK);
  cr_assert_eq(settle(&f, &rb, &db, "100000"), SLUICE_OK);
  cr_assert_eq(settle(&f, &rc, &dc, "100000"), SLUICE_OK);
  /* The organization owes 100000 tokens: 1 more fits after
  ** (100000 + 1) / (10000 per 3 s) = 30.0003 s. */
  d = decide(&f, &r1);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "org_tokens");
  cr_assert_eq(d.retry_after_ns, INT64_C(30000300000));
  sluice_clock_advance(f.clock, INT64_C(30000300000));
  /* Then the project: capped at one burst of debt, 100000 + 1 tokens at
  ** 5000 per 3 s is 60.0006 s from the settle, 30.0003 s from now (with
  ** 200000 owed it would be 78.0003 s). */
  d = decide(&f, &r1);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "project_tokens");
  cr_assert_eq(d.retry_after_ns, INT64_C(30000300000));
  fx_close(&f);
}

Test(policy_settle, refund_bounded_by_charge_and_full) {
  fixture f;
  sluice_attr a[4], b[4], x[4], one[4];
  sluice_request ra = llm_rq("acme", "p1", "large", "30000", a);
  sluice_request rb = llm_rq("acme", "p1", "large", "100000", b);
  sluice_request r1 = llm_rq("acme", "p1", "large", "1", one);
  sluice_decision da, db, d, copy;
  open_llm(&f);
  da = decide(&f, &ra);
  cr_assert_eq(settle(&f, &ra, &da, "0"), SLUICE_OK);
  /* The 30000 are back: 100000 fit. */
  db = decide(&f, &rb);
  cr_assert_eq(db.allowed, 1);
  cr_assert_str_eq(db.limit_name, "project_tokens");
  cr_assert_eq(db.remaining, 0);
  /* Settled once: a second settle is refused and gives nothing back. */
  cr_assert_eq(settle(&f, &ra, &da, "0"), SLUICE_EEXIST);
  cr_assert_eq(decide(&f, &r1).allowed, 0);
  /* A request that is not the decided one (more tokens charged than were)
  ** is refused: its refund would exceed the charge. */
  copy = da;
  copy.flags &= ~SLUICE_DECISION_SETTLED;
  {
    sluice_request forged = llm_rq("acme", "p1", "large", "100000", x);
    cr_assert_eq(settle(&f, &forged, &copy, "0"), SLUICE_EINVAL);
    cr_assert_str_eq(copy.invalid_field, "request");
    x[1].value = "p2"; /* another scope: not this decision's either */
    x[3].value = "30000";
    cr_assert_eq(settle(&f, &forged, &copy, "0"), SLUICE_EINVAL);
    copy.now_ns += 1; /* nor another time (a window's refund reads it) */
    cr_assert_eq(settle(&f, &ra, &copy, "0"), SLUICE_EINVAL);
  }
  cr_assert_eq(decide(&f, &r1).allowed, 0, "nothing came back");
  /* A minute later the buckets are full again: settling b to 0 then gives
  ** nothing past full, 100000 fit and not one more. */
  sluice_clock_advance(f.clock, 60 * SEC);
  cr_assert_eq(settle(&f, &rb, &db, "0"), SLUICE_OK);
  d = decide(&f, &rb);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(decide(&f, &r1).allowed, 0);
  fx_close(&f);
}

Test(policy_settle, a_decision_that_charged_nothing_settles_nothing) {
  fixture f;
  sluice_attr a[4], b[4];
  sluice_request big = llm_rq("acme", "p1", "large", "100000", a);
  sluice_request more = llm_rq("acme", "p1", "large", "5", b);
  sluice_request ledger;
  sluice_decision d, full;
  int64_t calls;
  open_llm(&f);
  full = decide(&f, &big);
  d = decide(&f, &more);
  cr_assert_eq(d.allowed, 0);
  calls = fx_calls(&f);
  cr_assert_eq(settle(&f, &more, &d, "0"), SLUICE_ENOTFOUND);
  cr_assert_eq(fx_calls(&f), calls, "no store call");
  cr_assert_eq(decide(&f, &more).allowed, 0, "still nothing left");
  /* Failed closed (the store down): nothing was charged either. */
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  sluice_clock_advance(f.clock, 60 * SEC);
  d = decide(&f, &more);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_UNAVAILABLE);
  fx_fail(&f, 0, 0);
  cr_assert_eq(settle(&f, &more, &d, "0"), SLUICE_ENOTFOUND);
  /* A decision of no declared route: not one to settle. */
  memset(&d, 0, sizeof d);
  ledger = rq_std("t1", "k1", "growth");
  cr_assert_eq(settle(&f, &ledger, &d, "0"), SLUICE_ENOTFOUND);
  (void)full;
  fx_close(&f);
}

Test(policy_settle, bad_reports_change_nothing) {
  fixture f;
  sluice_attr a[4], one[4];
  sluice_request r = llm_rq("acme", "p1", "large", "100000", a);
  sluice_request r1 = llm_rq("acme", "p1", "large", "1", one);
  sluice_attr unknown = {"bogus", "1"}, scope = {"model", "small"};
  sluice_attr twice[2] = {{"tokens", "1"}, {"tokens", "2"}};
  static const struct {
    const char *value;
    int rc;
  } bad[] = {{"-5", SLUICE_ERANGE},
             {"100001", SLUICE_ERANGE},
             {"99999999999999999999", SLUICE_ERANGE},
             {"12x", SLUICE_EINVAL},
             {"", SLUICE_EINVAL},
             {NULL, SLUICE_EINVAL}};
  sluice_decision d;
  int64_t calls;
  size_t i;
  open_llm(&f);
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1);
  calls = fx_calls(&f);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(settle(&f, &r, &d, bad[i].value), bad[i].rc, "%s",
                 bad[i].value ? bad[i].value : "NULL");
    cr_assert_str_eq(d.invalid_field, "tokens");
  }
  cr_assert_eq(sluice_policy_settle(f.pol, &r, &d, &unknown, 1), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "attrs");
  cr_assert_eq(sluice_policy_settle(f.pol, &r, &d, &scope, 1), SLUICE_EINVAL,
               "a scope attribute: a settle moves no scope");
  cr_assert_eq(sluice_policy_settle(f.pol, &r, &d, twice, 2), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_settle(f.pol, &r, &d, NULL, 1), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_settle(f.pol, &r, NULL, &scope, 1),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_settle(NULL, &r, &d, &scope, 1), SLUICE_EINVAL);
  cr_assert_eq(fx_calls(&f), calls, "no store call");
  cr_assert_eq(d.flags & SLUICE_DECISION_SETTLED, 0);
  cr_assert_eq(decide(&f, &r1).allowed, 0, "nothing was given back");
  /* The decision is still there to settle. */
  cr_assert_eq(settle(&f, &r, &d, "7"), SLUICE_OK);
  cr_assert_eq(fx_calls(&f), calls + 2, "one store call (and the decide)");
  cr_assert_eq(decide(&f, &r1).allowed, 1);
  fx_close(&f);
}

/* Windows, leases and a count cap on one route; the same bucket from a
** route whose cost comes from ranges of an attribute. */
static const char *rows =
    "attributes = [ \"org\", \"rows\", \"days\" ];\n"
    "limits = {\n"
    "  hourly = { algorithm = \"fixed_window\"; scope = [ \"org\" ];\n"
    "             limit = 1000; window_ms = 3600000; unit = \"rows\"; };\n"
    "  minute = { algorithm = \"sliding_window\"; scope = [ \"org\" ];\n"
    "             limit = 1000; window_ms = 60000; unit = \"rows\"; };\n"
    "  jobs = { algorithm = \"concurrency\"; scope = [ \"org\" ]; max = 2;\n"
    "           ttl_ms = 600000; };\n"
    "  exports = { algorithm = \"cap\"; scope = [ \"org\" ]; limit = 3;\n"
    "              window_ms = 3600000; };\n"
    "  points = { algorithm = \"gcra\"; scope = [ \"org\" ]; rate = 1;\n"
    "             period_ms = 1000; burst = 100; };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"POST\"; route = \"/hourly\";\n"
    "    limits = ( \"jobs\", \"exports\",\n"
    "      { limit = \"hourly\"; cost = { attr = \"rows\"; max = 1000; }; } "
    "); },\n"
    "  { method = \"POST\"; route = \"/minute\";\n"
    "    limits = ( { limit = \"minute\"; cost = { attr = \"rows\"; max = "
    "1000; }; } ); },\n"
    "  { method = \"GET\"; route = \"/report\";\n"
    "    limits = ( { limit = \"points\"; cost = { by = \"days\";\n"
    "      ranges = ( { upto = 90; cost = 25; }, { cost = 50; } ); }; } ); }\n"
    ");\n";

static void open_rows(fixture *f) {
  fx_open_text(f, rows);
}

static sluice_request rows_rq(const char *route, const char *name,
                              const char *v, sluice_attr a[2]) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  a[0] = (sluice_attr){"org", "acme"};
  a[1] = (sluice_attr){name, v};
  r.method = !strcmp(route, "/report") ? "GET" : "POST";
  r.route = route;
  r.attrs = a;
  r.nattrs = 2;
  return r;
}

static int settle_rows(fixture *f, const sluice_request *r, sluice_decision *d,
                       const char *v) {
  sluice_attr a = {r->attrs[1].name, v};
  return sluice_policy_settle(f->pol, r, d, &a, 1);
}

Test(policy_settle, fixed_window_leases_and_caps) {
  fixture f;
  sluice_attr a[2], b[2], c[2];
  sluice_request r800, r700, r1;
  sluice_decision d1, d2, d;
  open_rows(&f);
  /* Window [T0, T0 + 1 h): 800 rows charged, 300 written. */
  r800 = rows_rq("/hourly", "rows", "800", a);
  r700 = rows_rq("/hourly", "rows", "700", b);
  r1 = rows_rq("/hourly", "rows", "1", c);
  d1 = decide(&f, &r800);
  cr_assert_eq(d1.allowed, 1);
  cr_assert_eq(settle_rows(&f, &r800, &d1, "300"), SLUICE_OK);
  d2 = decide(&f, &r700);
  cr_assert_eq(d2.allowed, 1, "300 + 700 rows: the 500 came back");
  /* The two jobs still hold their leases, and the cap still counts two
  ** requests: settle touches neither. */
  d = decide(&f, &r1);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "jobs");
  cr_assert_eq(sluice_policy_release(f.pol, &r800,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d1.lease_id}),
               SLUICE_OK);
  d = decide(&f, &r1);
  cr_assert_eq(d.allowed, 0, "1000 rows this hour");
  cr_assert_str_eq(d.limit_name, "hourly");
  /* Into the next hour: 500 rows there, then the last hour's 700 settled
  ** to 0.  That charge's window is gone, so nothing comes back (it must
  ** not free room in the new window). */
  cr_assert_eq(sluice_policy_release(f.pol, &r700,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d2.lease_id}),
               SLUICE_OK);
  sluice_clock_advance(f.clock, 3600 * SEC);
  b[1].value = "600";
  d = decide(&f, &r700);
  cr_assert_eq(d.allowed, 1);
  cr_assert_str_eq(d.limit_name, "hourly");
  cr_assert_eq(d.remaining, 400);
  b[1].value = "700";
  cr_assert_eq(settle_rows(&f, &r700, &d2, "0"), SLUICE_OK);
  b[1].value = "401";
  d = decide(&f, &r700);
  cr_assert_eq(d.allowed, 0, "the new window kept its 600");
  cr_assert_str_eq(d.limit_name, "hourly");
  fx_close(&f);
}

Test(policy_settle, sliding_window_and_ranges) {
  fixture f;
  sluice_attr a[2], b[2], c[2];
  sluice_request r900, rmore, rep;
  sluice_decision d1, d;
  open_rows(&f);
  /* A 60 s window: 900 rows charged 30 s in, settled 40 s later (10 s into
  ** the next window) to 300: the 600 come out of the previous window's
  ** count, which weighs 50/60 of itself there. */
  sluice_clock_advance(f.clock, 30 * SEC);
  r900 = rows_rq("/minute", "rows", "900", a);
  d1 = decide(&f, &r900);
  cr_assert_eq(d1.allowed, 1);
  sluice_clock_advance(f.clock, 40 * SEC);
  cr_assert_eq(settle_rows(&f, &r900, &d1, "300"), SLUICE_OK);
  rmore = rows_rq("/minute", "rows", "750", b);
  d = decide(&f, &rmore);
  cr_assert_eq(d.allowed, 1, "300 * 50/60 + 750 = 1000");
  cr_assert_eq(d.remaining, 0);
  /* A cost chosen by ranges: 25 points up to 90 days, 50 beyond; the
  ** report covered 120 days, not 30: 25 more points. */
  rep = rows_rq("/report", "days", "30", c);
  d1 = decide(&f, &rep);
  cr_assert_eq(d1.remaining, 75);
  cr_assert_eq(settle_rows(&f, &rep, &d1, "120"), SLUICE_OK);
  d = decide(&f, &rep);
  cr_assert_eq(d.remaining, 25, "100 - 50 - 25");
  fx_close(&f);
}

/* On a Redis Cluster with Redis's own clock (the harness of
** tests/redis/harness.py names one; the fixture's manual clock is then not
** the store's): a window refund finds the window the charge went into by
** the decision's time, which is Redis's TIME, not the caller's clock. */
Test(policy_settle, redis_server_time_windows) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *extra = getenv("SLUICE_REDIS_STORE_EXTRA");
  char spec[512], org[32];
  const char *path;
  sluice_attr a[2], b[2];
  sluice_request r800, r700;
  sluice_decision d1, d;
  fixture f;
  if (!nodes || !nodes[0])
    cr_skip_test("SLUICE_REDIS_NODES unset");
  snprintf(spec, sizeof spec, "redis:nodes=%s;timeout_ms=2000%s%s", nodes,
           extra && extra[0] ? ";" : "", extra ? extra : "");
  path = fx_write_conf(rows);
  cr_assert_eq(fx_open_file(&f, path, spec, 0), SLUICE_OK);
  unlink(path);
  snprintf(org, sizeof org, "org-%d", (int)getpid());
  r800 = rows_rq("/hourly", "rows", "800", a);
  r700 = rows_rq("/hourly", "rows", "700", b);
  a[0].value = b[0].value = org;
  d1 = decide(&f, &r800);
  cr_assert_eq(d1.allowed, 1);
  cr_assert(d1.now_ns > T0 + 300 * 86400 * SEC, "Redis's time, not the fixture's");
  cr_assert_eq(settle_rows(&f, &r800, &d1, "300"), SLUICE_OK);
  d = decide(&f, &r700);
  cr_assert_eq(d.allowed, 1, "the 500 came back to Redis's current hour");
  fx_close(&f);
}

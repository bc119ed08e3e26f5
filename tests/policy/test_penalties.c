/*
** Declared penalties and failure modes (docs/policy.md "Declared
** penalties"): a policy file's `penalties` and a route's `penalty` and
** `failure`, decided on a manual clock.  Every number below is derived
** from the file written in the test.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

/* A bucket of 8 points refilling 4 a second per tenant and key, a lock,
** and a key's box: 3 strikes in a minute trip it; level 2 is an edge deny
** with an alert, level 3 a suspension.  The plan "big" takes 5 strikes and
** pages at level 3 instead (a two-hour box). */
static const char *conf =
    "attributes = [ \"plan\", \"job\" ];\n"
    "limits = {\n"
    "  bucket = { algorithm = \"gcra\"; scope = [ \"tenant\", \"key\" ];\n"
    "             rate = 4; period_ms = 1000; burst = 8; };\n"
    "  lock = { algorithm = \"lock\"; scope = [ \"tenant\", \"job\" ];\n"
    "           ttl_ms = 60000; };\n"
    "};\n"
    "penalties = {\n"
    "  keys = { scope = [ \"tenant\", \"key\" ]; strikes = 3;\n"
    "    strike_window_ms = 60000; offense_ttl_s = 86400;\n"
    "    levels = ( { box_s = 300; },\n"
    "               { box_s = 3600; actions = [ \"edge_deny\", \"alert\" ]; },\n"
    "               { actions = [ \"edge_deny\", \"suspend\" ]; } );\n"
    "    by = \"plan\";\n"
    "    params = { big = { strikes = 5;\n"
    "      levels = ( { box_s = 300; }, { box_s = 3600; },\n"
    "                 { box_s = 7200; actions = [ \"page\" ]; } ); }; };\n"
    "  };\n"
    "  every = { scope = [ \"tenant\", \"key\" ]; strike = \"every\";\n"
    "    strikes = 2; strike_window_ms = 60000; offense_ttl_s = 86400;\n"
    "    levels = ( { box_s = 60; }, { box_s = 120; }, { box_s = 180; } ); };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"GET\"; route = \"/a\"; limits = ( \"bucket\" );\n"
    "    penalty = \"keys\"; failure = \"degraded\"; },\n"
    "  { method = \"GET\"; route = \"/e\"; limits = ( \"bucket\" );\n"
    "    penalty = \"every\"; },\n"
    "  { method = \"POST\"; route = \"/job\"; limits = ( \"bucket\", \"lock\" "
    ");\n"
    "    penalty = \"keys\"; }\n"
    ");\n";

static sluice_request rq(const char *method, const char *route,
                         const char *key, const sluice_attr *a, size_t n) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.method = method;
  r.route = route;
  r.tenant_id = "acme";
  r.api_key_id = key;
  r.attrs = a;
  r.nattrs = n;
  return r;
}

/* Empty the bucket (8 points) and take the first denial: a Warning and
** the notice, no strike.  Returns that denial. */
static sluice_decision drain(fixture *f, const sluice_request *r) {
  sluice_decision d;
  int i;
  for (i = 0; i < 8; i++)
    cr_assert_eq(decide(f, r).allowed, 1, "request %d", i);
  d = decide(f, r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(d.penalty_status, SLUICE_PENALTY_WARNING);
  return d;
}

/* Come back early until the box trips; returns the tripping decision. */
static sluice_decision strike_out(fixture *f, const sluice_request *r,
                                  int strikes) {
  sluice_decision d;
  int i;
  for (i = 1; i < strikes; i++) {
    d = decide(f, r);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED, "strike %d", i);
    cr_assert(d.flags & SLUICE_DECISION_STRIKE, "strike %d", i);
    cr_assert_eq(d.strikes_remaining, strikes - i);
  }
  d = decide(f, r);
  cr_assert(d.flags & SLUICE_DECISION_TRIPPED);
  return d;
}

Test(policy_penalties, early_strikes_climb_the_ladder) {
  fixture f;
  sluice_request r = rq("GET", "/a", "k1", NULL, 0);
  sluice_request other = rq("GET", "/a", "k2", NULL, 0);
  sluice_decision d;
  fx_open_text(&f, conf);
  d = drain(&f, &r);
  cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0, "the first is no strike");
  cr_assert_eq(d.strikes_remaining, 3);
  cr_assert_eq(d.retry_after_ns, SEC / 4);
  /* A client that waits the Retry-After out is never struck. */
  sluice_clock_advance(f.clock, d.retry_after_ns);
  cr_assert_eq(decide(&f, &r).allowed, 1);
  d = decide(&f, &r);
  cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0);
  /* One that comes back early is: the third strike trips level 1. */
  d = strike_out(&f, &r, 3);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.status, 429);
  cr_assert_eq(d.penalty_level, 1);
  cr_assert_eq(d.penalty_status, SLUICE_PENALTY_ACTIVE_LOCKOUT);
  cr_assert_eq(d.retry_after_ns, 300 * SEC);
  cr_assert_eq(d.flags & SLUICE_DECISION_EDGE_DENY, 0);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_ALERT), 0);
  /* Boxed: refused before the limits, the lock route too; another key of
  ** the tenant is not boxed. */
  sluice_clock_advance(f.clock, 10 * SEC);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, 290 * SEC);
  {
    sluice_attr j = {"job", "J"};
    sluice_request post = rq("POST", "/job", "k1", &j, 1);
    cr_assert_eq(decide(&f, &post).outcome, SLUICE_OUTCOME_BOXED);
    post.api_key_id = "k2";
    cr_assert_eq(decide(&f, &post).allowed, 1, "the lock was not taken");
  }
  cr_assert_eq(decide(&f, &other).allowed, 1);
  /* Level 2: an hour, the edge deny and the alert. */
  sluice_clock_advance(f.clock, 291 * SEC);
  drain(&f, &r);
  d = strike_out(&f, &r, 3);
  cr_assert_eq(d.penalty_level, 2);
  cr_assert_eq(d.retry_after_ns, 3600 * SEC);
  cr_assert(d.flags & SLUICE_DECISION_EDGE_DENY);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_ALERT), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_EDGE_DENY), 1);
  /* Level 3: suspended until lifted by hand (403, no Retry-After). */
  sluice_clock_advance(f.clock, 3601 * SEC);
  drain(&f, &r);
  d = strike_out(&f, &r, 3);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_SUSPENDED);
  cr_assert_eq(d.status, 403);
  cr_assert_eq(d.penalty_level, 3);
  cr_assert_eq(d.lockout_end_ns, SLUICE_FOREVER);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_SUSPEND), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_PAGE), 0);
  sluice_clock_advance(f.clock, 7 * 86400 * SEC);
  cr_assert_eq(decide(&f, &r).outcome, SLUICE_OUTCOME_SUSPENDED);
  fx_close(&f);
}

Test(policy_penalties, parameter_sets_by_attribute) {
  fixture f;
  sluice_attr big = {"plan", "big"};
  sluice_request r = rq("GET", "/a", "k1", &big, 1);
  sluice_decision d;
  int lvl;
  fx_open_text(&f, conf);
  for (lvl = 1; lvl <= 3; lvl++) {
    d = drain(&f, &r);
    cr_assert_eq(d.strikes_remaining, 5);
    d = strike_out(&f, &r, 5);
    cr_assert_eq(d.penalty_level, lvl);
    cr_assert_eq(d.flags & SLUICE_DECISION_EDGE_DENY, 0, "no edge deny");
    sluice_clock_advance(f.clock, d.retry_after_ns + SEC);
  }
  /* Level 3 on this plan pages and boxes for two hours. */
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, 7200 * SEC);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_PAGE), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_SUSPEND), 0);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_ALERT), 0);
  fx_close(&f);
}

Test(policy_penalties, every_denial_is_a_strike) {
  fixture f;
  sluice_request r = rq("GET", "/e", "k1", NULL, 0);
  sluice_decision d;
  int i;
  fx_open_text(&f, conf);
  for (i = 0; i < 8; i++)
    cr_assert_eq(decide(&f, &r).allowed, 1);
  d = decide(&f, &r);
  cr_assert(d.flags & SLUICE_DECISION_STRIKE, "the first denial counts");
  cr_assert_eq(d.strikes_remaining, 1);
  /* Even after its Retry-After has run out (the bucket full again). */
  sluice_clock_advance(f.clock, 2 * SEC);
  for (i = 0; i < 8; i++)
    cr_assert_eq(decide(&f, &r).allowed, 1);
  d = decide(&f, &r);
  cr_assert(d.flags & SLUICE_DECISION_TRIPPED);
  cr_assert_eq(d.retry_after_ns, 60 * SEC);
  fx_close(&f);
}

Test(policy_penalties, lock_denials_take_no_strikes) {
  fixture f;
  sluice_attr j = {"job", "J"};
  sluice_request r = rq("POST", "/job", "k1", &j, 1);
  sluice_decision d;
  int i;
  fx_open_text(&f, conf);
  cr_assert_eq(decide(&f, &r).allowed, 1);
  for (i = 0; i < 5; i++) {
    d = decide(&f, &r);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONFLICT);
    cr_assert_eq(d.penalty_status, SLUICE_PENALTY_NONE);
    cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0);
  }
  fx_close(&f);
}

Test(policy_penalties, failure_modes_per_route) {
  fixture f;
  sluice_attr j = {"job", "J"};
  sluice_request r = rq("GET", "/a", "k1", NULL, 0);
  sluice_request boxed = rq("GET", "/a", "k9", NULL, 0);
  sluice_request post = rq("POST", "/job", "k1", &j, 1);
  sluice_decision d;
  fx_open_text(&f, conf);
  drain(&f, &boxed);
  cr_assert_eq(strike_out(&f, &boxed, 3).outcome, SLUICE_OUTCOME_BOXED);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  /* "degraded": the local limiter at 25%: 1 a second, a burst of 2. */
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1);
  cr_assert(d.flags & SLUICE_DECISION_DEGRADED);
  cr_assert_eq(d.limit, 2);
  cr_assert_eq(d.remaining, 1);
  cr_assert_eq(decide(&f, &r).allowed, 1);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert(d.flags & SLUICE_DECISION_DEGRADED);
  cr_assert_eq(d.retry_after_ns, SEC);
  /* A boxed key stays out through the outage (the deny cache). */
  d = decide(&f, &boxed);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert(d.flags & SLUICE_DECISION_DENY_CACHED);
  /* The route that says nothing fails closed. */
  d = decide(&f, &post);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_UNAVAILABLE);
  cr_assert_eq(d.status, 503);
  cr_assert_eq(d.retry_after_ns, 15 * SEC);
  fx_close(&f);
}

/* A box belongs to its whole scope: the deny cache holds it under the
** scope's id, made of every attribute of the penalty's scope, so during an
** outage the key k1 of another tenant, and another key of acme, are not
** refused by acme's k1's box. */
Test(policy_penalties, a_box_is_its_whole_scopes) {
  fixture f;
  sluice_request boxed = rq("GET", "/a", "k1", NULL, 0);
  sluice_request other_tenant = rq("GET", "/a", "k1", NULL, 0);
  sluice_request other_key = rq("GET", "/a", "k2", NULL, 0);
  sluice_decision d;
  other_tenant.tenant_id = "globex";
  fx_open_text(&f, conf);
  drain(&f, &boxed);
  cr_assert_eq(strike_out(&f, &boxed, 3).outcome, SLUICE_OUTCOME_BOXED);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  d = decide(&f, &boxed);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert(d.flags & SLUICE_DECISION_DENY_CACHED);
  d = decide(&f, &other_tenant);
  cr_assert_eq(d.allowed, 1, "outcome %d", d.outcome);
  cr_assert(d.flags & SLUICE_DECISION_DEGRADED);
  d = decide(&f, &other_key);
  cr_assert_eq(d.allowed, 1, "outcome %d", d.outcome);
  fx_close(&f);
}

/* Staged rollout: the penalty in shadow records the box and its trip but
** serves the key while its limits have room. */
Test(policy_penalties, a_box_in_shadow_serves) {
  fixture f;
  sluice_request r = rq("GET", "/a", "k1", NULL, 0);
  sluice_decision d;
  char *text = malloc(strlen(conf) + 64);
  cr_assert_not_null(text);
  sprintf(text, "shadow_features = [ \"penalty\" ];\n%s", conf);
  fx_open_text(&f, text);
  free(text);
  drain(&f, &r);
  d = strike_out(&f, &r, 3);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED, "the throttle stands");
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 1);
  sluice_clock_advance(f.clock, SEC);
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1, "served: the box is in shadow");
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert(d.flags & SLUICE_DECISION_SHADOW);
  cr_assert_eq(d.penalty_level, 1);
  fx_close(&f);
}

/* Strikes the service reports back (a failed sign-in, a 401): a request
** whose `result` says so is a report: a strike on the address's box, no
** limit work.  Stuffing: 6 reports across 4 or more subjects in ten
** minutes trip level 3 (an IP ban) at once. */
static const char *reported =
    "attributes = [ \"result\", \"subject\" ];\n"
    "limits = { attempts = { algorithm = \"sliding_window\"; scope = [ "
    "\"ip\" ];\n"
    "  limit = 1000; window_ms = 60000; }; };\n"
    "penalties = {\n"
    "  lockout = { scope = [ \"ip\" ]; strike = \"reported\";\n"
    "    reported = { by = \"result\"; values = [ \"401\", \"403\" ]; };\n"
    "    strikes = 3; strike_window_ms = 900000; offense_ttl_s = 86400;\n"
    "    levels = ( { box_s = 300; }, { box_s = 3600; },\n"
    "               { box_s = 86400; actions = [ \"edge_deny\", \"ban\" ]; } "
    "); };\n"
    "  spray = { scope = [ \"ip\" ]; strike = \"reported\";\n"
    "    reported = { by = \"result\"; values = [ \"401\" ]; };\n"
    "    strikes = 100; strike_window_ms = 900000; offense_ttl_s = 86400;\n"
    "    levels = ( { box_s = 300; }, { box_s = 3600; },\n"
    "               { box_s = 86400; actions = [ \"edge_deny\", \"ban\" ]; } "
    ");\n"
    "    stuffing = { of = \"subject\"; reports = 6; distinct = 4;\n"
    "                 window_ms = 600000; }; };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"POST\"; route = \"/login\"; limits = ( \"attempts\" );\n"
    "    penalty = \"lockout\"; },\n"
    "  { method = \"POST\"; route = \"/sso\"; limits = ( \"attempts\" );\n"
    "    penalty = \"spray\"; }\n"
    ");\n";

/* On store (NULL: the failing mem store); the addresses are the run's
** (a Redis Cluster keeps what earlier runs wrote). */
static void reported_on(const char *store, unsigned flags) {
  fixture f;
  sluice_attr bad[] = {{"result", "401"}, {"subject", "s0"}};
  sluice_request login, report;
  sluice_decision d;
  char subj[8], ip1[48], ip2[48], ip3[48];
  const char *path;
  int i, pid = (int)getpid() & 0xffff;
  snprintf(ip1, sizeof ip1, "2001:db8:%x:1::7", pid);
  snprintf(ip2, sizeof ip2, "2001:db8:%x:2::9", pid);
  snprintf(ip3, sizeof ip3, "2001:db8:%x:3::a", pid);
  memset(&login, 0, sizeof login);
  login.method = "POST";
  login.route = "/login";
  login.client_ip = ip1;
  report = login;
  report.attrs = bad;
  report.nattrs = 2;
  path = fx_write_conf(reported);
  cr_assert_eq(fx_open_file(&f, path, store, flags), SLUICE_OK);
  unlink(path);
  d = decide(&f, &login);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.remaining, 999);
  d = decide(&f, &report);
  cr_assert_eq(d.allowed, 1, "a report is no refusal");
  cr_assert(d.flags & SLUICE_DECISION_STRIKE);
  cr_assert_eq(d.strikes_remaining, 2);
  cr_assert_eq(decide(&f, &report).strikes_remaining, 1);
  /* Reports take nothing from the limits. */
  cr_assert_eq(decide(&f, &login).remaining, 998);
  d = decide(&f, &report);
  cr_assert(d.flags & SLUICE_DECISION_TRIPPED);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, 300 * SEC);
  d = decide(&f, &login);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED, "the address is locked out");
  /* Another address sprays over subjects: the sixth report, past four
  ** distinct subjects, bans it (level 3) at once. */
  report.route = login.route = "/sso";
  report.client_ip = login.client_ip = ip2;
  for (i = 0; i < 5; i++) {
    snprintf(subj, sizeof subj, "u%d", i);
    bad[1].value = subj;
    d = decide(&f, &report);
    cr_assert_eq(d.allowed, 1, "report %d", i);
    cr_assert_eq(d.flags & SLUICE_DECISION_STUFFING, 0);
  }
  bad[1].value = "u5";
  d = decide(&f, &report);
  cr_assert(d.flags & SLUICE_DECISION_STUFFING);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.penalty_level, 3);
  cr_assert_eq(d.retry_after_ns, 86400 * SEC);
  cr_assert(d.flags & SLUICE_DECISION_EDGE_DENY);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_STUFFING), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_IP_BAN), 1);
  cr_assert_eq(decide(&f, &login).outcome, SLUICE_OUTCOME_BOXED);
  /* A report of a subject it cannot read is refused, naming it. */
  report.client_ip = ip3;
  report.nattrs = 1;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &report, &d, NULL),
               SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "subject");
  fx_close(&f);
}

Test(policy_penalties, reported_statuses_strike_and_stuffing_bans) {
  reported_on(NULL, 0);
}

Test(policy_penalties, reported_shm) {
  char spec[96];
  snprintf(spec, sizeof spec, "shm:name=/sluice-penalties-%d;create=1",
           (int)getpid());
  reported_on(spec, SLUICE_OPEN_CREATE);
  snprintf(spec, sizeof spec, "/dev/shm/sluice-penalties-%d", (int)getpid());
  unlink(spec);
}

/* A Redis Cluster when the harness names one (tests/redis/harness.py). */
Test(policy_penalties, reported_redis) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *extra = getenv("SLUICE_REDIS_STORE_EXTRA");
  char spec[512];
  if (!nodes || !nodes[0])
    cr_skip_test("SLUICE_REDIS_NODES unset");
  snprintf(spec, sizeof spec, "redis:nodes=%s;timeout_ms=2000%s%s", nodes,
           extra && extra[0] ? ";" : "", extra ? extra : "");
  reported_on(spec, SLUICE_OPEN_TESTCLOCK);
}

/* Several penalties on one route, each box in its own hash-tag group (the
** subject's and the address's, as a login's lockouts are): a report
** strikes both; either box refuses the route with no limit work; the
** longer box is reported; a boxed subject's report strikes nothing
** (the address's box is only looked at). */
static const char *two_boxes =
    "attributes = [ \"result\", \"subject\" ];\n"
    "limits = { attempts = { algorithm = \"gcra\"; scope = [ \"ip\" ];\n"
    "  rate = 1; period_ms = 3600000; burst = 100; }; };\n"
    "penalties = {\n"
    "  subject = { scope = [ \"subject\" ]; strike = \"reported\";\n"
    "    reported = { by = \"result\"; values = [ \"401\" ]; };\n"
    "    strikes = 3; strike_window_ms = 900000; offense_ttl_s = 86400;\n"
    "    levels = ( { box_s = 60; }, { box_s = 120; }, { box_s = 180; } ); };\n"
    "  address = { scope = [ \"ip\" ]; strike = \"reported\";\n"
    "    reported = { by = \"result\"; values = [ \"401\" ]; };\n"
    "    strikes = 5; strike_window_ms = 900000; offense_ttl_s = 86400;\n"
    "    levels = ( { box_s = 600; }, { box_s = 1200; }, { box_s = 1800; } ); "
    "};\n"
    "};\n"
    "routes = (\n"
    "  { method = \"POST\"; route = \"/login\"; limits = ( \"attempts\" );\n"
    "    penalty = [ \"subject\", \"address\" ]; }\n"
    ");\n";

static void two_boxes_on(const char *store, unsigned flags) {
  fixture f;
  sluice_attr bad[] = {{"subject", "alice"}, {"result", "401"}};
  sluice_request login, report;
  sluice_decision d;
  sluice_limit_state ls;
  char ip1[48], ip2[48];
  const char *path;
  int pid = (int)getpid() & 0xffff;
  snprintf(ip1, sizeof ip1, "2001:db8:%x:11::1", pid);
  snprintf(ip2, sizeof ip2, "2001:db8:%x:12::1", pid);
  memset(&login, 0, sizeof login);
  login.method = "POST";
  login.route = "/login";
  login.client_ip = ip1;
  login.attrs = bad;
  login.nattrs = 1; /* the subject, no result: a sign-in attempt */
  report = login;
  report.nattrs = 2;
  path = fx_write_conf(two_boxes);
  cr_assert_eq(fx_open_file(&f, path, store, flags), SLUICE_OK);
  unlink(path);
  /* A report strikes both boxes: the fewer strikes left is reported. */
  d = decide(&f, &report);
  cr_assert_eq(d.allowed, 1);
  cr_assert(d.flags & SLUICE_DECISION_STRIKE);
  cr_assert_eq(d.strikes_remaining, 2, "subject 2 left, address 4");
  decide(&f, &report);
  d = decide(&f, &report); /* alice's third: her box, 60 s */
  cr_assert(d.flags & SLUICE_DECISION_TRIPPED);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, 60 * SEC);
  /* Boxed: refused with no limit work (the bucket keeps its 100), and
  ** her reports strike nothing more anywhere. */
  d = decide(&f, &login);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, 60 * SEC);
  cr_assert_eq(inspect_limit(f.pol, "attempts", &login, &ls, NULL), SLUICE_OK);
  cr_assert_eq(ls.remaining, 100);
  d = decide(&f, &report);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0);
  /* bob from the same address: the address has 3 strikes, two more trip
  ** it (600 s); alice is then boxed twice, and the longer box is hers to
  ** wait out. */
  bad[0].value = "bob";
  d = decide(&f, &report);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.strikes_remaining, 1, "the address's: 1 left");
  d = decide(&f, &report);
  cr_assert(d.flags & SLUICE_DECISION_TRIPPED);
  cr_assert_eq(d.retry_after_ns, 600 * SEC);
  bad[0].value = "alice";
  d = decide(&f, &login);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, 600 * SEC, "the longer box");
  /* From another address alice is still boxed (her own box); carol is
  ** not, and her attempt takes from that address's bucket. */
  login.client_ip = ip2;
  d = decide(&f, &login);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, 60 * SEC);
  bad[0].value = "carol";
  d = decide(&f, &login);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.remaining, 99);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 2);
  fx_close(&f);
}

Test(policy_penalties, two_boxes_on_one_route) { two_boxes_on(NULL, 0); }

Test(policy_penalties, two_boxes_on_one_route_redis) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *extra = getenv("SLUICE_REDIS_STORE_EXTRA");
  char spec[512];
  if (!nodes || !nodes[0])
    cr_skip_test("SLUICE_REDIS_NODES unset");
  /* The subjects are the run's own: a cluster keeps earlier runs' boxes. */
  snprintf(spec, sizeof spec,
           "redis:nodes=%s;timeout_ms=2000;prefix=tb%d-%ld:%s%s", nodes,
           (int)getpid(), (long)time(NULL), extra && extra[0] ? ";" : "",
           extra ? extra : "");
  two_boxes_on(spec, SLUICE_OPEN_TESTCLOCK);
}

/* A subject failing from many addresses (spread): at its third distinct
** address in the window, the address it fails from is banned (level 3) at
** once, in the address's own program; the subject's box is not. */
static const char *spread_conf =
    "attributes = [ \"result\", \"subject\" ];\n"
    "penalties = {\n"
    "  subject = { scope = [ \"subject\" ]; strike = \"reported\";\n"
    "    reported = { by = \"result\"; values = [ \"401\" ];\n"
    "                 window = \"sliding\"; };\n"
    "    spread = { of = \"ip\"; distinct = 3; window_ms = 600000;\n"
    "               trips = \"address\"; };\n"
    "    strikes = 50; strike_window_ms = 900000; offense_ttl_s = 86400;\n"
    "    levels = ( { box_s = 60; }, { box_s = 120; }, { box_s = 180; } ); };\n"
    "  address = { scope = [ \"ip\" ]; strike = \"reported\";\n"
    "    reported = { by = \"result\"; values = [ \"401\" ];\n"
    "                 window = \"sliding\"; };\n"
    "    strikes = 50; strike_window_ms = 900000; offense_ttl_s = 86400;\n"
    "    levels = ( { box_s = 600; }, { box_s = 1200; },\n"
    "               { box_s = 86400; actions = [ \"edge_deny\", \"ban\" ]; } "
    "); };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"POST\"; route = \"/login\"; limits = ( );\n"
    "    penalty = [ \"subject\", \"address\" ]; }\n"
    ");\n";

Test(policy_penalties, a_subject_spread_over_addresses_bans_the_address) {
  fixture f;
  sluice_attr bad[] = {{"subject", "alice"}, {"result", "401"}};
  sluice_request r;
  sluice_decision d;
  const char *path = fx_write_conf(spread_conf);
  static const char *const ip[] = {"192.0.2.1", "192.0.2.2", "192.0.2.3"};
  int i;
  cr_assert_eq(fx_open_file(&f, path, NULL, 0), SLUICE_OK);
  unlink(path);
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = "/login";
  r.attrs = bad;
  r.nattrs = 2;
  for (i = 0; i < 2; i++) { /* two addresses, twice each: no spread yet */
    r.client_ip = ip[i];
    d = decide(&f, &r);
    cr_assert_eq(d.allowed, 1);
    cr_assert_eq(d.flags & SLUICE_DECISION_STUFFING, 0);
    cr_assert_eq(decide(&f, &r).allowed, 1);
  }
  cr_assert_eq(d.cost, 0, "a route of boxes alone charges nothing");
  cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0, "failures, not strikes");
  cr_assert_eq(d.strikes_remaining, 47, "alice's third failure of 50");
  r.client_ip = ip[2];
  d = decide(&f, &r);
  cr_assert(d.flags & SLUICE_DECISION_STUFFING);
  cr_assert(d.flags & SLUICE_DECISION_TRIPPED);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.penalty_level, 3);
  cr_assert_eq(d.retry_after_ns, 86400 * SEC);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_IP_BAN), 1);
  /* The third address is banned; the subject and the first address are
  ** not. */
  bad[0].value = "bob";
  r.nattrs = 1;
  cr_assert_eq(decide(&f, &r).outcome, SLUICE_OUTCOME_BOXED);
  r.client_ip = ip[0];
  cr_assert_eq(decide(&f, &r).allowed, 1);
  bad[0].value = "alice";
  cr_assert_eq(decide(&f, &r).allowed, 1);
  fx_close(&f);
}

/* A group of buckets: one GCRA step, both charged or neither; allowed,
** the bucket with the fewest points left binds (not the least fraction:
** the built-in tenant + key pair's rule); refused, the longest wait. */
static const char *groups =
    "limits = {\n"
    "  t = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 1;\n"
    "        period_ms = 1000; burst = 100; };\n"
    "  k = { algorithm = \"gcra\"; scope = [ \"tenant\", \"key\" ]; rate = 10;\n"
    "        period_ms = 1000; burst = 10; };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"GET\"; route = \"/g\";\n"
    "    limits = ( { group = [ \"t\", \"k\" ]; cost = 2; } ); },\n"
    "  { method = \"GET\"; route = \"/s\"; limits = ( { limit = \"t\"; cost "
    "= 2; },\n"
    "    { limit = \"k\"; cost = 2; } ); }\n"
    ");\n";

Test(policy_penalties, groups_bind_the_stricter_bucket) {
  fixture f;
  sluice_request g = rq("GET", "/g", "k1", NULL, 0);
  sluice_request sep = rq("GET", "/s", "k1", NULL, 0);
  sluice_decision d;
  int i;
  fx_open_text(&f, groups);
  /* Other keys take the tenant down to 12 points (8 keys x 2 x 5... ). */
  for (i = 0; i < 44; i++) {
    char key[8];
    snprintf(key, sizeof key, "o%d", i / 5);
    g.api_key_id = key;
    cr_assert_eq(decide(&f, &g).allowed, 1, "%d", i);
  }
  g.api_key_id = "k1";
  /* Tenant 12 - 2 = 10 of 100 left, key 8 of 10: the key has fewer
  ** points, the tenant the least fraction. */
  d = decide(&f, &g);
  cr_assert_eq(d.allowed, 1);
  cr_assert_str_eq(d.limit_name, "k");
  cr_assert_eq(d.remaining, 8);
  d = decide(&f, &sep);
  cr_assert_eq(d.allowed, 1);
  cr_assert_str_eq(d.limit_name, "t", "ungrouped: the least fraction");
  cr_assert_eq(d.remaining, 8);
  /* Tenant 8, key 6: three more leave tenant 2, key 0. */
  for (i = 0; i < 3; i++)
    cr_assert_eq(decide(&f, &g).allowed, 1);
  /* The key alone refuses: it binds, its wait (200 ms at 10 a second). */
  d = decide(&f, &g);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_str_eq(d.limit_name, "k");
  cr_assert_eq(d.retry_after_ns, 200 * MS);
  /* Neither was charged: 200 ms later both have room (tenant 2.2). */
  sluice_clock_advance(f.clock, 200 * MS);
  d = decide(&f, &g);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.remaining, 0);
  /* Both refuse now: the tenant (1 a second) waits longest and binds. */
  d = decide(&f, &g);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_str_eq(d.limit_name, "t");
  cr_assert_eq(d.retry_after_ns, 1800 * MS);
  fx_close(&f);
}

/* The loader's errors: FILE:LINE: SETTING: problem. */
static void refused(const char *text, const char *want_line, const char *want) {
  sluice_policy_config *c;
  char err[512];
  const char *path = fx_write_conf(text);
  int rc = cfg_load(&c, path, err, sizeof err);
  unlink(path);
  cr_assert_eq(rc, SLUICE_ECONFIG, "%s", text);
  cr_assert(strstr(err, want_line) != NULL, "line %s in: %s", want_line, err);
  cr_assert(strstr(err, want) != NULL, "%s in: %s", want, err);
}

#define LIMS                                                                   \
  "limits = { b = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 1; "  \
  "period_ms = 1000; burst = 10; };\n"                                         \
  "  l = { algorithm = \"lock\"; scope = [ \"tenant\" ]; ttl_ms = 1000; }; "   \
  "};\n"
#define PEN(scope, levels)                                                     \
  "penalties = { p = { scope = [ " scope " ]; strikes = 2;\n"                  \
  "  strike_window_ms = 1000; offense_ttl_s = 60;\n"                           \
  "  levels = " levels "; }; };\n"
#define LADDER "( { box_s = 1; }, { box_s = 2; }, { box_s = 3; } )"

Test(policy_penalties, bad_files_name_the_line_and_setting) {
  refused(LIMS PEN("\"tenant\"", LADDER)
          "routes = ( { method = \"GET\"; route = \"/\"; limits = ( \"b\" );\n"
          "  penalty = \"q\"; } );\n",
          ":7:", "routes.[0].penalty: no penalty of that name");
  refused(LIMS PEN("\"key\"", LADDER)
          "routes = ( { method = \"GET\"; route = \"/\"; limits = ( \"b\" );\n"
          "  penalty = \"p\"; } );\n",
          ":7:", "would take no strikes");
  /* A spread trips a box listed after its own. */
  refused("attributes = [ \"result\" ];\n"
          "penalties = { p = { scope = [ \"ip\" ]; strike = \"reported\";\n"
          "  reported = { by = \"result\"; values = [ \"401\" ]; };\n"
          "  spread = { of = \"tenant\"; distinct = 2; window_ms = 1000;\n"
          "             trips = \"q\"; };\n"
          "  strikes = 2; strike_window_ms = 1000; offense_ttl_s = 60;\n"
          "  levels = " LADDER "; };\n"
          "  q = { scope = [ \"tenant\" ]; strike = \"reported\";\n"
          "  reported = { by = \"result\"; values = [ \"401\" ]; };\n"
          "  strikes = 2; strike_window_ms = 1000; offense_ttl_s = 60;\n"
          "  levels = " LADDER "; }; };\n"
          "routes = ( { method = \"GET\"; route = \"/\"; limits = ( );\n"
          "  penalty = [ \"q\", \"p\" ]; } );\n",
          ":13:", "spread trips \"q\": list that penalty after it");
  /* (A route of no limits and no penalty is exempt: test_routes.c.) */
  refused("attributes = [ \"result\" ];\n"
          "penalties = { p = { scope = [ \"ip\" ]; strike = \"reported\";\n"
          "  reported = { by = \"result\"; values = [ \"401\" ];\n"
          "               window = \"rolling\"; };\n"
          "  strikes = 2; strike_window_ms = 1000; offense_ttl_s = 60;\n"
          "  levels = " LADDER "; }; };\n",
          ":4:", "penalties.p.reported: window: \"fixed\"");
  /* A list of penalties: each box in a group of its own, named. */
  refused(LIMS PEN("\"tenant\"", LADDER)
          "routes = ( { method = \"GET\"; route = \"/\"; limits = ( \"b\" );\n"
          "  penalty = [ \"p\",\n \"p\" ]; } );\n",
          ":8:", "routes.[0].penalty.[1]: penalties \"p\" and \"p\" both "
                 "start their scopes with \"tenant\"");
  refused(LIMS PEN("\"tenant\"", LADDER)
          "routes = ( { method = \"GET\"; route = \"/\"; limits = ( \"b\" );\n"
          "  penalty = [ ]; } );\n",
          ":7:", "routes.[0].penalty: must be a penalty's name or a list");
  refused(LIMS PEN("\"tenant\"", "( { box_s = 1; }, { box_s = 2; } )"), ":5:",
          "penalties.p.levels: must be a list of the ladder's 3 levels");
  refused(LIMS PEN("\"tenant\"", "( { box_s = 1; }, { box_s = 2; },\n"
                                 "  { box_s = 3; actions = [ \"suspend\" ]; } )"),
          ":6:", "penalties.p.levels.[2]: a suspension lasts until lifted");
  refused(LIMS PEN("\"tenant\"", "( { box_s = 1; }, { box_s = 2; },\n"
                                 "  { box_s = 3; actions = [ \"nap\" ]; } )"),
          ":6:", "penalties.p.levels.[2].actions: an action is one of");
  refused(LIMS PEN("\"tenant\", \"nope\"", LADDER), ":3:",
          "penalties.p.scope: unknown attribute \"nope\"");
  refused(LIMS PEN("\"tenant\"", LADDER)
          "routes = ( { method = \"GET\"; route = \"/\"; limits = ( \"l\" );\n"
          "  failure = \"degraded\"; } );\n",
          ":7:", "routes.[0].failure: a route without a rate limit");
  refused(LIMS PEN("\"tenant\"", LADDER)
          "routes = ( { method = \"GET\"; route = \"/\"; limits = ( \"b\" );\n"
          "  failure = \"open\"; } );\n",
          ":7:", "routes.[0].failure: must be \"closed\"");
  refused(LIMS "penalties = { p = { scope = [ \"tenant\" ]; strikes = 2;\n"
               "  levels = " LADDER "; }; };\n",
          ":3:", "penalties.p: strike_window_ms is missing");
  refused(LIMS "routes = ( { method = \"GET\"; route = \"/\";\n"
               "  limits = ( { group = [ \"b\", \"l\" ]; } ); } );\n",
          ":4:", "limit \"l\" is not a gcra bucket");
  refused(LIMS "routes = ( { method = \"GET\"; route = \"/\";\n"
               "  limits = ( { group = [ \"b\" ]; } ); } );\n",
          ":4:", "group must list 2 or more gcra limits");
  refused(LIMS "penalties = { p = { scope = [ \"tenant\" ]; strikes = 2;\n"
               "  strike_window_ms = 1000; offense_ttl_s = 60; levels = " LADDER
               ";\n  strike = \"reported\"; }; };\n",
          ":3:", "penalties.p.reported: `reported` (what a report says)");
  refused(LIMS "penalties = { p = { scope = [ \"tenant\" ]; strikes = 2;\n"
               "  strike_window_ms = 1000; offense_ttl_s = 60; levels = " LADDER
               ";\n  stuffing = { of = \"key\"; reports = 5; distinct = 2; "
               "window_ms = 9; }; }; };\n",
          ":5:", "stuffing counts reports");
  /* Four rate limits with strikes are 1 + 4 + 12 steps, one too many. */
  refused("limits = {\n"
          "  a = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 1; "
          "period_ms = 1000; burst = 10; };\n"
          "  b = { algorithm = \"fixed_window\"; scope = [ \"tenant\" ]; "
          "limit = 1; window_ms = 1000; };\n"
          "  c = { algorithm = \"fixed_window\"; scope = [ \"tenant\", \"key\" "
          "]; limit = 1; window_ms = 1000; };\n"
          "  d = { algorithm = \"sliding_window\"; scope = [ \"tenant\" ]; "
          "limit = 1; window_ms = 1000; }; };\n" PEN("\"tenant\"", LADDER)
          "routes = ( { method = \"GET\"; route = \"/\";\n"
          "  limits = ( \"a\", \"b\", \"c\", \"d\" ); penalty = \"p\"; } );\n",
          ":10:", "17 steps in its hash-tag group, more than one store call runs (16)");
}

/*
** Route patterns of a policy file (docs/policy.md "Routes and path
** parameters"): a trailing `*` matches the rest of the path, a `*` or
** `{NAME}` segment any one non-empty segment, and `{NAME}` gives the
** attribute NAME the segment's value when the caller does not.  Decided
** on the mem store; every count is derived from the file below.  Then
** what a route entry may say beyond its path (issue 37 point 2): `when`
** (attribute matches), `limits = ( )` (exempt), `params` as a list of
** sets chosen by several attributes, a caller cost's `max`.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include <sluice/halves.h>
#include <sluice/sluice_mem.h>

/* What open would say of text: its rc, the message in err. */
static int check(const char *text, char *err, size_t len) {
  sluice_policy_options o;
  const char *path = fx_write_conf(text);
  int rc;
  memset(&o, 0, sizeof o);
  memset(o.secret, 7, sizeof o.secret);
  o.config_path = path;
  o.errbuf = err;
  o.errlen = len;
  err[0] = '\0';
  rc = sluice_policy_check(&o);
  unlink(path);
  return rc;
}

static sluice_decision post(fixture *f, const char *route, const char *bot,
                            const char *channel) {
  sluice_attr a[2] = {{"bot", bot}, {"channel", channel}};
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = route;
  r.attrs = a;
  r.nattrs = channel ? 2 : 1;
  return decide(f, &r);
}

/* Discord-like: a bot's global budget, and a budget per bot and channel
** on the messages route, the channel taken from the path; a middle `*`
** for reactions (per bot and matched pattern); everything else global. */
#define LIMIT_MESSAGES 3
#define LIMIT_REACTIONS 2
static const char *discord =
    "attributes = [ \"bot\", \"channel\" ];\n"
    "limits = {\n"
    "  global = { algorithm = \"gcra\"; scope = [ \"bot\" ]; rate = 1000;\n"
    "             period_ms = 3600000; burst = 1000; unit = \"requests\"; };\n"
    "  messages = { algorithm = \"fixed_window\"; scope = [ \"bot\", "
    "\"channel\" ];\n"
    "               limit = 3; window_ms = 60000; };\n"
    "  reactions = { algorithm = \"fixed_window\"; scope = [ \"bot\", "
    "\"pattern\" ];\n"
    "                limit = 2; window_ms = 60000; };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"POST\"; route = \"/channels/{channel}/messages\";\n"
    "    limits = ( \"global\", \"messages\" ); },\n"
    "  { method = \"POST\"; route = \"/channels/*/reactions/*\";\n"
    "    limits = ( \"global\", \"reactions\" ); },\n"
    "  { method = \"*\"; route = \"/*\"; limits = ( \"global\" ); }\n"
    ");\n";

static int admitted(fixture *f, const char *route, const char *bot,
                    const char *channel, int n, const char *limit) {
  int i, ok = 0;
  for (i = 0; i < n; i++) {
    sluice_decision d = post(f, route, bot, channel);
    if (d.allowed)
      ok++;
    else
      cr_assert_str_eq(d.limit_name, limit, "%s refused by %s", route,
                       d.limit_name);
  }
  return ok;
}

Test(policy_routes, a_path_parameter_scopes_its_limit) {
  fixture f;
  fx_open_text(&f, discord);
  /* channel 1 from the path: its own window; 2 is another */
  cr_assert_eq(admitted(&f, "/channels/1/messages", "b", NULL, 5, "messages"),
               LIMIT_MESSAGES);
  cr_assert_eq(admitted(&f, "/channels/2/messages?x=1", "b", NULL, 5,
                        "messages"),
               LIMIT_MESSAGES);
  /* another bot has its own */
  cr_assert_eq(admitted(&f, "/channels/1/messages", "c", NULL, 1, "messages"),
               1);
  /* the caller's attribute wins over the path's: channel 9 is fresh */
  cr_assert_eq(admitted(&f, "/channels/1/messages", "b", "9", 5, "messages"),
               LIMIT_MESSAGES);
  fx_close(&f);
}

Test(policy_routes, segments_match_whole_and_never_empty) {
  fixture f;
  sluice_decision d;
  fx_open_text(&f, discord);
  /* an empty segment or one more segment: not the messages route, so
  ** the global limit alone binds, however many */
  d = post(&f, "/channels//messages", "b", NULL);
  cr_assert(d.allowed);
  cr_assert_str_eq(d.limit_name, "global");
  d = post(&f, "/channels/1/messages/x", "b", NULL);
  cr_assert_str_eq(d.limit_name, "global");
  d = post(&f, "/channels/1/messagesx", "b", NULL);
  cr_assert_str_eq(d.limit_name, "global");
  /* a middle `*`: one pattern, so one budget for every channel */
  cr_assert_eq(admitted(&f, "/channels/1/reactions/x", "b", NULL, 2,
                        "reactions"),
               LIMIT_REACTIONS);
  cr_assert_eq(admitted(&f, "/channels/2/reactions/y/z", "b", NULL, 2,
                        "reactions"),
               0);
  d = post(&f, "/channels/2/reactions", "b", NULL);
  cr_assert(d.allowed);
  cr_assert_str_eq(d.limit_name, "global");
  fx_close(&f);
}

Test(policy_routes, a_parameter_too_long_is_refused_with_its_name) {
  fixture f;
  sluice_decision d;
  sluice_attr a[1] = {{"bot", "b"}};
  sluice_request r;
  char route[SLUICE_POLICY_ID_MAX + 64];
  fx_open_text(&f, discord);
  snprintf(route, sizeof route, "/channels/%0*d/messages",
           SLUICE_POLICY_ID_MAX + 1, 7);
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = route;
  r.attrs = a;
  r.nattrs = 1;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EKEY);
  cr_assert_str_eq(d.invalid_field, "channel");
  fx_close(&f);
}

static void refused(const char *route, const char *said) {
  char text[1024], err[256];
  snprintf(text, sizeof text,
           "attributes = [ \"bot\", \"channel\" ];\n"
           "limits = { g = { algorithm = \"gcra\"; scope = [ \"bot\" ];\n"
           "  rate = 1; period_ms = 1000; burst = 1; }; };\n"
           "routes = ( { method = \"*\"; route = \"%s\"; limits = ( \"g\" ); "
           "} );\n",
           route);
  cr_assert_eq(check(text, err, sizeof err), SLUICE_ECONFIG, "%s", route);
  cr_assert(strstr(err, ":4: routes.[0].route: ") != NULL, "%s", err);
  cr_assert(strstr(err, said) != NULL, "%s: %s", route, err);
}

Test(policy_routes, bad_parameters_are_refused_at_load) {
  char text[512], err[256];
  refused("/channels/{nope}/messages", "{nope} must be an attribute");
  refused("/channels/{tenant}/messages", "{tenant} must be an attribute");
  refused("/channels/x{channel}/messages", "whole segment");
  refused("/channels/{channel}x/messages", "whole segment");
  refused("/channels/{channel", "whole segment");
  refused("/c/{channel}/m/{channel}", "{channel} named twice");
  snprintf(text, sizeof text,
           "attributes = [ \"bot\", \"channel\" ];\n"
           "limits = { g = { algorithm = \"gcra\"; scope = [ \"bot\" ];\n"
           "  rate = 1; period_ms = 1000; burst = 1; }; };\n"
           "routes = ( { method = \"*\"; route = \"/c/{channel}/m/{bot}\"; "
           "limits = ( \"g\" ); } );\n");
  cr_assert_eq(check(text, err, sizeof err), SLUICE_OK, "%s", err);
}

/* The policy text on a mem store of 1024 records, 256 of them strangers'. */
static void open_small(fixture *f, const char *text) {
  const char *path = fx_write_conf(text);
  cr_assert_eq(fx_open_file(f, path, "mem:max_keys=1024;untrusted=256", 0),
               SLUICE_OK);
  unlink(path);
}

/* 600 requests of r, buffer a (and b, when not NULL) formatted with the
** request's number before each: a flood of strangers' records (their
** bound is reached, and the store holds no more than it) or, admit, the
** service's own (every one admitted). */
static void run600(fixture *f, const sluice_request *r, char *a, size_t an,
                   const char *afmt, char *b, size_t bn, const char *bfmt,
                   int admit) {
  sluice_decision d;
  int64_t held = 0;
  int i, full = 0;
  for (i = 0; i < 600; i++) {
    snprintf(a, an, afmt, i);
    if (b)
      snprintf(b, bn, bfmt, i);
    d = decide(f, r);
    full += (d.flags & SLUICE_DECISION_STORE_FULL) != 0;
    if (admit)
      cr_assert(d.allowed, "%s: outcome %d", a, d.outcome);
  }
  if (admit)
    return;
  cr_assert_gt(full, 0, "the strangers' bound was reached");
  cr_assert_eq(sluice_limiter_control(f->lim, SLUICE_CTL_MEM_COUNT, &held),
               SLUICE_OK);
  cr_assert_leq(held, 256);
}

/* A scope that starts with a path parameter keys its records by whatever
** path a stranger sends: they are strangers' records, within their own
** bound on a store of finite room, so a flood of made-up invite codes
** never takes the room the bots' own budgets need.  A code the caller
** gives (it looked the invite up) is the service's own again. */
Test(policy_routes, path_keyed_records_are_strangers) {
  static const char *invites =
      "attributes = [ \"bot\", \"code\" ];\n"
      "limits = {\n"
      "  global = { algorithm = \"gcra\"; scope = [ \"bot\" ]; rate = 1000;\n"
      "             period_ms = 3600000; burst = 1000; };\n"
      "  lookups = { algorithm = \"fixed_window\"; scope = [ \"code\" ];\n"
      "              limit = 10; window_ms = 60000; };\n"
      "};\n"
      "routes = (\n"
      "  { method = \"GET\"; route = \"/invites/{code}\"; limits = ( "
      "\"lookups\" ); },\n"
      "  { method = \"*\"; route = \"/*\"; limits = ( \"global\" ); }\n"
      ");\n";
  fixture f;
  sluice_decision d;
  sluice_request r;
  sluice_attr a[1];
  char route[64], id[32];
  open_small(&f, invites);
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.route = route;
  run600(&f, &r, route, sizeof route, "/invites/made-up-%d", NULL, 0, NULL,
         0);
  /* the bots are served, and so is a code the service vouches for */
  r.method = "POST";
  r.attrs = a;
  r.nattrs = 1;
  a[0].name = "bot";
  a[0].value = id;
  run600(&f, &r, id, sizeof id, "bot-%d", route, sizeof route, "/bots/%d", 1);
  r.method = "GET";
  a[0].name = "code";
  a[0].value = "known";
  snprintf(route, sizeof route, "/invites/known");
  d = decide(&f, &r);
  cr_assert(d.allowed, "outcome %d", d.outcome);
  fx_close(&f);
}

/* `untrusted` names caller attributes that are unauthenticated input: a
** sign-in form's login.  Made-up logins then fill the strangers' bound,
** not the room the users' own budgets need; a login not listed there
** would be the service's own record.  Anything else in `untrusted` is
** refused at load. */
Test(policy_routes, untrusted_attributes_key_strangers_records) {
  static const char *signin =
      "attributes = [ \"user\", \"login\" ];\n"
      "untrusted = [ \"login\" ];\n"
      "limits = {\n"
      "  tries = { algorithm = \"sliding_window\"; scope = [ \"login\" ];\n"
      "            limit = 5; window_ms = 900000; };\n"
      "  calls = { algorithm = \"gcra\"; scope = [ \"user\" ]; rate = 100;\n"
      "            period_ms = 1000; burst = 100; };\n"
      "};\n"
      "routes = (\n"
      "  { method = \"POST\"; route = \"/login\"; limits = ( \"tries\" ); },\n"
      "  { method = \"*\"; route = \"/*\"; limits = ( \"calls\" ); }\n"
      ");\n";
  fixture f;
  sluice_request r;
  sluice_attr a[1];
  char id[32], err[256];
  open_small(&f, signin);
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = "/login";
  r.attrs = a;
  r.nattrs = 1;
  a[0].name = "login";
  a[0].value = id;
  run600(&f, &r, id, sizeof id, "made-up-%d", NULL, 0, NULL, 0);
  r.method = "GET";
  r.route = "/things";
  a[0].name = "user";
  run600(&f, &r, id, sizeof id, "user-%d", NULL, 0, NULL, 1);
  fx_close(&f);
  cr_assert_eq(check("attributes = [ \"login\" ];\nuntrusted = [ \"ip\" ];\n",
                     err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":2: untrusted: \"ip\" is not an attribute") != NULL,
            "%s", err);
  cr_assert_eq(check("attributes = [ \"login\" ];\nuntrusted = \"login\";\n",
                     err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":2: untrusted: must be an array") != NULL, "%s",
            err);
}

/* Requests with attributes, for the tests below. */
static sluice_decision ask(fixture *f, const char *method, const char *route,
                           const sluice_attr *a, size_t na, int *rc) {
  sluice_request r;
  sluice_decision d;
  memset(&r, 0, sizeof r);
  r.method = method;
  r.route = route;
  r.client_ip = "192.0.2.9";
  r.attrs = a;
  r.nattrs = na;
  *rc = sluice_policy_decide(f->pol, 1, &r, &d, NULL);
  return d;
}

/* Reddit-like: OAuth requests, free-plan OAuth requests and anonymous
** ones on the same paths get different limits; a route's `when` is all
** of its matches, first match in file order wins, "*" asks only that the
** attribute is given, and a path parameter can be matched. */
static const char *reddit =
    "attributes = [ \"user\", \"auth\", \"plan\", \"sub\" ];\n"
    "limits = {\n"
    "  free = { algorithm = \"fixed_window\"; scope = [ \"user\" ];\n"
    "           limit = 2; window_ms = 60000; };\n"
    "  oauth = { algorithm = \"fixed_window\"; scope = [ \"user\" ];\n"
    "            limit = 4; window_ms = 60000; };\n"
    "  anon = { algorithm = \"fixed_window\"; scope = [ \"ip\" ];\n"
    "           limit = 1; window_ms = 60000; };\n"
    "  mod = { algorithm = \"fixed_window\"; scope = [ \"user\" ];\n"
    "          limit = 3; window_ms = 60000; };\n"
    "};\n"
    "routes = (\n"
    "  { method = \"GET\"; route = \"/r/{sub}/about\";\n"
    "    when = { sub = \"mods\"; user = \"*\"; }; limits = ( \"mod\" ); },\n"
    "  { method = \"GET\"; route = \"/r/*\";\n"
    "    when = { auth = \"oauth\"; plan = \"free\"; };\n"
    "    limits = ( \"free\" ); },\n"
    "  { method = \"GET\"; route = \"/r/*\"; when = { auth = \"oauth\"; };\n"
    "    limits = ( \"oauth\" ); },\n"
    "  { method = \"GET\"; route = \"/r/*\"; limits = ( \"anon\" ); }\n"
    ");\n";

Test(policy_routes, when_picks_the_route_by_attributes) {
  fixture f;
  sluice_decision d;
  sluice_attr free[3] = {{"user", "u1"}, {"auth", "oauth"}, {"plan", "free"}};
  sluice_attr paid[3] = {{"user", "u2"}, {"auth", "oauth"}, {"plan", "gold"}};
  sluice_attr anon[1] = {{"auth", "none"}};
  sluice_attr some[1] = {{"user", "u3"}};
  int rc, i, ok;
  fx_open_text(&f, reddit);
  /* both matches hold: the free limit, 2 a window */
  for (ok = i = 0; i < 4; i++) {
    d = ask(&f, "GET", "/r/pics", free, 3, &rc);
    cr_assert_eq(rc, SLUICE_OK);
    cr_assert_str_eq(d.limit_name, "free");
    ok += d.allowed;
  }
  cr_assert_eq(ok, 2);
  /* one of two holds: not that route, the next one (oauth, 4) */
  for (ok = i = 0; i < 6; i++) {
    d = ask(&f, "GET", "/r/pics", paid, 3, &rc);
    cr_assert_str_eq(d.limit_name, "oauth");
    ok += d.allowed;
  }
  cr_assert_eq(ok, 4);
  /* another value, or the attribute not given: the route without `when` */
  d = ask(&f, "GET", "/r/pics", anon, 1, &rc);
  cr_assert_str_eq(d.limit_name, "anon");
  d = ask(&f, "GET", "/r/pics", NULL, 0, &rc);
  cr_assert_str_eq(d.limit_name, "anon");
  /* a path parameter matched, and "*": any user given */
  d = ask(&f, "GET", "/r/mods/about", some, 1, &rc);
  cr_assert_str_eq(d.limit_name, "mod");
  d = ask(&f, "GET", "/r/pics/about", paid, 3, &rc);
  cr_assert_str_eq(d.limit_name, "oauth");
  /* "*" wants the attribute given: no user, not the mods' route */
  d = ask(&f, "GET", "/r/mods/about", anon, 1, &rc);
  cr_assert_str_eq(d.limit_name, "anon");
  fx_close(&f);
}

/* Every caller of route matching sees the route a decision saw: the
** limit is scoped by the matched pattern, so a caller that matched
** another route would read or settle other records.  Inspect reads the
** app's records, and a settle finds the decision's route again. */
Test(policy_routes, inspect_and_settle_see_the_same_route) {
  static const char *llm =
      "attributes = [ \"org\", \"auth\", \"tokens\" ];\n"
      "limits = {\n"
      "  tok = { algorithm = \"gcra\"; scope = [ \"org\", \"pattern\" ];\n"
      "          rate = 1; period_ms = 3600000; burst = 100; };\n"
      "};\n"
      "routes = (\n"
      "  { method = \"POST\"; route = \"/v1/chat\"; when = { auth = "
      "\"user\"; };\n"
      "    limits = ( { limit = \"tok\"; cost = { attr = \"tokens\"; max = "
      "100; }; } ); },\n"
      "  { method = \"POST\"; route = \"/v1/*\";\n"
      "    limits = ( { limit = \"tok\"; cost = { attr = \"tokens\"; max = "
      "100; }; } ); }\n"
      ");\n";
  fixture f;
  sluice_decision d;
  sluice_request r;
  sluice_limit_state st;
  sluice_attr a[3] = {{"org", "o"}, {"auth", "app"}, {"tokens", "60"}};
  sluice_attr back[1] = {{"tokens", "10"}};
  const char *field;
  int rc;
  fx_open_text(&f, llm);
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = "/v1/chat";
  r.attrs = a;
  r.nattrs = 3;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_OK);
  cr_assert(d.allowed);
  cr_assert_eq(d.limits[0].remaining, 40);
  cr_assert_eq(inspect_limit(f.pol, "tok", &r, &st, &field), SLUICE_OK);
  cr_assert_eq(st.present, 1);
  cr_assert_eq(st.remaining, 40, "inspect: %lld", (long long)st.remaining);
  /* the report says 10 tokens: 50 back to the records the decision
  ** charged (a settle re-matching another route is refused: its check) */
  rc = sluice_policy_settle(f.pol, &r, &d, back, 1);
  cr_assert_eq(rc, SLUICE_OK, "%s", sluice_strerror(rc));
  cr_assert_eq(inspect_limit(f.pol, "tok", &r, &st, &field), SLUICE_OK);
  cr_assert_eq(st.remaining, 90, "after settle: %lld",
               (long long)st.remaining);
  /* the user's route, its own records: never touched */
  a[1].value = "user";
  cr_assert_eq(inspect_limit(f.pol, "tok", &r, &st, &field), SLUICE_OK);
  cr_assert_eq(st.present, 0, "the user's records were never touched");
  fx_close(&f);
}

/* `limits = ( )` with no penalty: an exempt route, admitted with no store
** call at all and no limit reported, however often. */
Test(policy_routes, an_exempt_route_admits_without_the_store) {
  static const char *text =
      "breaker = { consecutive_failures = 3; };\n"
      "ip_backstop = { limit = 1000; };\n"
      "limits = { g = { algorithm = \"fixed_window\"; scope = [ \"ip\" ];\n"
      "  limit = 1; window_ms = 60000; }; };\n"
      "routes = (\n"
      "  { method = \"GET\"; route = \"/health\"; limits = ( ); },\n"
      "  { method = \"*\"; route = \"/*\"; limits = ( \"g\" ); }\n"
      ");\n";
  fixture f;
  sluice_decision d;
  sluice_request r;
  int64_t calls;
  int i;
  fx_open_text(&f, text);
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.route = "/health";
  calls = fx_calls(&f);
  for (i = 0; i < 5; i++) {
    d = decide(&f, &r);
    cr_assert(d.allowed, "outcome %d", d.outcome);
    cr_assert_eq(d.nlimits, 0);
    r.client_ip = "192.0.2.1";
  }
  cr_assert_eq(fx_calls(&f), calls, "no store call");
  /* without the ip its neighbour needs: the exempt route asks for none */
  r.route = "/other";
  r.client_ip = "192.0.2.1";
  d = decide(&f, &r);
  cr_assert(d.allowed);
  cr_assert_eq(d.nlimits, 1);
  d = decide(&f, &r);
  cr_assert(!d.allowed);
  cr_assert_gt(fx_calls(&f), calls);
  /* a failing store (the breaker opens): the exempt route is still
  ** admitted, not degraded, and its requests never count as the store's
  ** recovery */
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  for (i = 0; i < 20; i++)
    decide(&f, &r);
  calls = fx_attempts(&f);
  r.route = "/health"; /* with an address: no backstop call either */
  for (i = 0; i < 5; i++) {
    d = decide(&f, &r);
    cr_assert(d.allowed, "outcome %d", d.outcome);
    cr_assert_eq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  }
  cr_assert_eq(fx_attempts(&f), calls, "no store call tried");
  r.route = "/other";
  r.client_ip = "192.0.2.1";
  d = decide(&f, &r);
  cr_assert(!d.allowed, "the store is still failed: outcome %d", d.outcome);
  fx_close(&f);
}

/* Anthropic-like: parameter sets chosen by tier AND model, values no
** libconfig name could spell ("2", "claude-3.5-haiku"), first match wins,
** the limit's own numbers otherwise. */
static const char *anthropic =
    "attributes = [ \"org\", \"model\", \"tokens\", \"usage_tier\" ];\n"
    "limits = {\n"
    "  itpm = { algorithm = \"gcra\"; scope = [ \"org\", \"model\" ];\n"
    "    rate = 1; period_ms = 60000; burst = 10000; unit = \"tokens\";\n"
    "    params = (\n"
    "      { when = { usage_tier = \"2\"; model = \"claude-3.5-haiku\"; };\n"
    "        burst = 50000; },\n"
    "      { when = { usage_tier = 2; }; burst = 30000; },\n"
    "      { when = { model = \"claude-3.5-haiku\"; usage_tier = \"*\"; };\n"
    "        burst = 20000; }\n"
    "    ); };\n"
    "};\n"
    "routes = ( { method = \"POST\"; route = \"/v1/messages\";\n"
    "  limits = ( { limit = \"itpm\"; cost = { attr = \"tokens\"; max = "
    "%d; }; } ); } );\n";

static sluice_decision tokens(fixture *f, const char *tier, const char *model,
                              const char *n, int *rc) {
  sluice_attr a[4] = {{"org", "o"}, {"model", model}, {"tokens", n},
                      {"usage_tier", tier}};
  sluice_request r;
  sluice_decision d;
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = "/v1/messages";
  r.attrs = a;
  r.nattrs = tier ? 4 : 3;
  *rc = sluice_policy_decide(f->pol, 1, &r, &d, NULL);
  return d;
}

Test(policy_routes, params_by_several_attributes_and_any_value) {
  char text[2048];
  fixture f;
  sluice_decision d;
  int rc;
  snprintf(text, sizeof text, anthropic, 40000);
  fx_open_text(&f, text);
  d = tokens(&f, "2", "claude-3.5-haiku", "1", &rc);
  cr_assert_eq(rc, SLUICE_OK, "%s %s", sluice_strerror(rc),
               d.invalid_field ? d.invalid_field : "-");
  cr_assert_eq(d.limits[0].quota, 50000);
  d = tokens(&f, "2", "claude-opus-4", "1", &rc);
  cr_assert_eq(d.limits[0].quota, 30000);
  d = tokens(&f, "3", "claude-3.5-haiku", "1", &rc);
  cr_assert_eq(d.limits[0].quota, 20000);
  d = tokens(&f, NULL, "claude-3.5-haiku", "1", &rc); /* "*": not given */
  cr_assert_eq(d.limits[0].quota, 10000);
  d = tokens(&f, "3", "claude-opus-4", "1", &rc);
  cr_assert_eq(d.limits[0].quota, 10000);
  fx_close(&f);
}

/* A caller cost's `max` is checked at load against the largest burst of
** the limit's sets, and each request against its own set's. */
Test(policy_routes, a_caller_costs_max_fits_the_largest_burst) {
  char text[2048], err[256];
  fixture f;
  sluice_decision d;
  int rc;
  snprintf(text, sizeof text, anthropic, 40000);
  cr_assert_eq(check(text, err, sizeof err), SLUICE_OK, "%s", err);
  fx_open_text(&f, text);
  d = tokens(&f, "2", "claude-3.5-haiku", "40000", &rc);
  cr_assert_eq(rc, SLUICE_OK);
  cr_assert(d.allowed, "outcome %d", d.outcome);
  d = tokens(&f, "2", "claude-opus-4", "40000", &rc);
  cr_assert_eq(rc, SLUICE_ERANGE, "above its own set's burst: %d", rc);
  cr_assert_str_eq(d.invalid_field, "tokens");
  d = tokens(&f, "2", "claude-opus-4", "30000", &rc);
  cr_assert_eq(rc, SLUICE_OK);
  cr_assert(d.allowed);
  fx_close(&f);
  snprintf(text, sizeof text, anthropic, 50001);
  cr_assert_eq(check(text, err, sizeof err), SLUICE_ECONFIG);
  cr_assert(strstr(err, ":14: routes.[0].limits.[0].cost: must be "
                        "1..50000, the largest burst of limit \"itpm\"") !=
                NULL,
            "%s", err);
}

/* What the new forms refuse, with the file's line and the setting. */
static void load_refused(const char *text, const char *said) {
  char err[512];
  cr_assert_eq(check(text, err, sizeof err), SLUICE_ECONFIG, "%s", text);
  cr_assert(strstr(err, said) != NULL, "wanted \"%s\", got %s", said, err);
}

#define ONE_LIMIT                                                             \
  "attributes = [ \"plan\" ];\n"                                              \
  "limits = { g = { algorithm = \"gcra\"; scope = [ \"ip\" ];\n"             \
  "  rate = 1; period_ms = 1000; burst = 5; }; };\n"

Test(policy_routes, when_and_params_lists_are_checked_at_load) {
  load_refused(ONE_LIMIT "routes = ( { method = \"*\"; route = \"/\";\n"
                         "  when = { nope = \"x\"; }; limits = ( \"g\" ); } );\n",
               ":5: routes.[0].when.nope: is not an attribute");
  load_refused(ONE_LIMIT "routes = ( { method = \"*\"; route = \"/\";\n"
                         "  when = { pattern = \"/\"; }; limits = ( ); } );\n",
               ":5: routes.[0].when.pattern: is not an attribute");
  load_refused(ONE_LIMIT "routes = ( { method = \"*\"; route = \"/\";\n"
                         "  when = { plan = \"\"; }; limits = ( ); } );\n",
               ":5: routes.[0].when.plan: the value is a string of 1..47");
  load_refused(ONE_LIMIT "routes = ( { method = \"*\"; route = \"/\";\n"
                         "  when = ( \"plan\" ); limits = ( ); } );\n",
               ":5: routes.[0].when: must be a group of 1..4 matches");
  load_refused("attributes = [ \"plan\" ];\n"
               "limits = { g = { algorithm = \"gcra\"; scope = [ \"ip\" ];\n"
               "  rate = 1; period_ms = 1000; burst = 5;\n"
               "  params = ( { when = { plan = \"a\"; }; burst = 0; } ); }; };\n",
               ":4: limits.g.params.[0].burst: must be 1..");
  load_refused("attributes = [ \"plan\" ];\n"
               "limits = { g = { algorithm = \"gcra\"; scope = [ \"ip\" ];\n"
               "  rate = 1; period_ms = 1000; burst = 5;\n"
               "  params = ( { burst = 2; } ); }; };\n",
               ":4: limits.g.params.[0]: must be { when = ");
  load_refused("attributes = [ \"plan\" ];\n"
               "limits = { g = { algorithm = \"gcra\"; scope = [ \"ip\" ];\n"
               "  rate = 1; period_ms = 1000; burst = 5;\n"
               "  params = ( { when = { plan = \"a\"; }; brust = 2; } ); }; "
               "};\n",
               ":4: limits.g.params.[0].brust: unknown setting");
  load_refused("attributes = [ \"plan\" ];\n"
               "limits = { g = { algorithm = \"gcra\"; scope = [ \"ip\" ];\n"
               "  rate = 1; period_ms = 1000; burst = 5; by = \"plan\";\n"
               "  params = ( { when = { plan = \"a\"; }; burst = 2; } ); }; "
               "};\n",
               ":3: limits.g.by: the list form of `params`");
}

/* A penalty's parameter sets in the list form: chosen by two attributes
** at once, first match wins, the penalty's own numbers otherwise. */
Test(policy_routes, penalty_params_by_several_attributes) {
  static const char *text =
      "attributes = [ \"plan\", \"region\" ];\n"
      "limits = { b = { algorithm = \"gcra\"; scope = [ \"tenant\" ];\n"
      "  rate = 1; period_ms = 3600000; burst = 1; }; };\n"
      "penalties = { p = { scope = [ \"tenant\" ]; strike = \"every\";\n"
      "  strikes = 2; strike_window_ms = 60000; offense_ttl_s = 60;\n"
      "  levels = ( { box_s = 1; }, { box_s = 2; }, { box_s = 3; } );\n"
      "  params = ( { when = { plan = \"big\"; region = \"eu-1.a\"; };\n"
      "               strikes = 5; },\n"
      "             { when = { plan = \"big\"; }; strikes = 4; } ); }; };\n"
      "routes = ( { method = \"GET\"; route = \"/\"; limits = ( \"b\" );\n"
      "  penalty = \"p\"; } );\n";
  static const struct {
    const char *tenant, *plan, *region;
    int left;
  } cases[] = {{"t1", "big", "eu-1.a", 4},
               {"t2", "big", "us", 3},
               {"t3", "small", "eu-1.a", 1}};
  fixture f;
  sluice_decision d;
  sluice_request r;
  size_t i;
  fx_open_text(&f, text);
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sluice_attr a[2] = {{"plan", cases[i].plan}, {"region", cases[i].region}};
    memset(&r, 0, sizeof r);
    r.method = "GET";
    r.route = "/";
    r.tenant_id = cases[i].tenant;
    r.attrs = a;
    r.nattrs = 2;
    cr_assert(decide(&f, &r).allowed);
    d = decide(&f, &r);
    cr_assert(!d.allowed);
    cr_assert(d.flags & SLUICE_DECISION_STRIKE, "%s", cases[i].tenant);
    cr_assert_eq(d.strikes_remaining, cases[i].left, "%s: %lld left",
                 cases[i].tenant, (long long)d.strikes_remaining);
  }
  fx_close(&f);
}

/* The halves (sluice_policy_begin) run the same flow: the same route for
** the same request (a mem store decides in begin's first pass). */
Test(policy_routes, the_halves_match_the_same_route) {
  fixture f;
  sluice_call *call;
  sluice_decision d;
  sluice_request r;
  sluice_attr paid[3] = {{"user", "u2"}, {"auth", "oauth"}, {"plan", "gold"}};
  sluice_attr anon[1] = {{"auth", "none"}};
  fx_open_text(&f, reddit);
  cr_assert_eq(sluice_call_open(f.pol, &call), SLUICE_OK);
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.route = "/r/pics";
  r.client_ip = "192.0.2.9";
  r.attrs = paid;
  r.nattrs = 3;
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &r, &d, NULL, 0),
               SLUICE_CALL_DONE);
  cr_assert_str_eq(d.limit_name, "oauth");
  r.attrs = anon;
  r.nattrs = 1;
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &r, &d, NULL, 0),
               SLUICE_CALL_DONE);
  cr_assert_str_eq(d.limit_name, "anon");
  sluice_call_close(call);
  fx_close(&f);
}

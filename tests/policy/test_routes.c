/*
** Route patterns of a policy file (docs/policy.md "Routes and path
** parameters"): a trailing `*` matches the rest of the path, a `*` or
** `{NAME}` segment any one non-empty segment, and `{NAME}` gives the
** attribute NAME the segment's value when the caller does not.  Decided
** on the mem store; every count is derived from the file below.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
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
  cr_assert_eq(sluice_policy_decide(f.pol, &r, &d), SLUICE_EKEY);
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
  int i, full = 0;
  int64_t held = 0;
  const char *path = fx_write_conf(invites);
  cr_assert_eq(fx_open_file(&f, path, "mem:max_keys=1024;untrusted=256", 0),
               SLUICE_OK);
  unlink(path);
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.route = route;
  for (i = 0; i < 600; i++) {
    snprintf(route, sizeof route, "/invites/made-up-%d", i);
    d = decide(&f, &r);
    if (d.flags & SLUICE_DECISION_STORE_FULL)
      full++;
  }
  cr_assert_gt(full, 0, "the strangers' bound was reached");
  cr_assert_eq(sluice_limiter_control(f.lim, SLUICE_CTL_MEM_COUNT, &held),
               SLUICE_OK);
  cr_assert_leq(held, 256);
  /* the bots are served, and so is a code the service vouches for */
  r.method = "POST";
  r.attrs = a;
  r.nattrs = 1;
  a[0].name = "bot";
  a[0].value = id;
  for (i = 0; i < 600; i++) {
    snprintf(id, sizeof id, "bot-%d", i);
    snprintf(route, sizeof route, "/bots/%d", i);
    d = decide(&f, &r);
    cr_assert(d.allowed, "bot %d: outcome %d", i, d.outcome);
  }
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
  sluice_decision d;
  sluice_request r;
  sluice_attr a[1];
  char id[32], err[256];
  int i, full = 0;
  int64_t held = 0;
  const char *path = fx_write_conf(signin);
  cr_assert_eq(fx_open_file(&f, path, "mem:max_keys=1024;untrusted=256", 0),
               SLUICE_OK);
  unlink(path);
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = "/login";
  r.attrs = a;
  r.nattrs = 1;
  a[0].name = "login";
  a[0].value = id;
  for (i = 0; i < 600; i++) {
    snprintf(id, sizeof id, "made-up-%d", i);
    d = decide(&f, &r);
    if (d.flags & SLUICE_DECISION_STORE_FULL)
      full++;
  }
  cr_assert_gt(full, 0, "the strangers' bound was reached");
  cr_assert_eq(sluice_limiter_control(f.lim, SLUICE_CTL_MEM_COUNT, &held),
               SLUICE_OK);
  cr_assert_leq(held, 256);
  r.method = "GET";
  r.route = "/things";
  a[0].name = "user";
  for (i = 0; i < 600; i++) {
    snprintf(id, sizeof id, "user-%d", i);
    d = decide(&f, &r);
    cr_assert(d.allowed, "user %d: outcome %d", i, d.outcome);
  }
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

/*
** The configuration: the default policy file (etc/ledger.conf) holds the
** spec's tables; bad files are refused with the file, the line and the
** setting at fault; a configuration set in code gets the same validation.
** The settings are the declared ones (limits, routes, penalties) and the
** general groups of the settings table (failure, breaker, ip_backstop,
** client_ip), with tiers, shadow and host.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

static int load(const char *text, sluice_policy_config **c, char *err,
                size_t n) {
  const char *path = fx_write_conf(text);
  int rc = cfg_load(c, path, err, n);
  unlink(path);
  return rc;
}

/* A declared limit on lines 1-4 and a route applying it on line 5: the
** smallest policy file, for a test to add its setting to. */
#define API_LIMIT                                                              \
  "limits = {\n"                                                               \
  "  api = { algorithm = \"gcra\"; scope = [ \"key\" ];\n"                      \
  "    rate = 5; period_ms = 1000; burst = 10; };\n"                           \
  "};\n"
#define API_ROUTE                                                              \
  "routes = ( { method = \"*\"; route = \"/*\"; limits = ( \"api\" ); } );\n"

/* Every value in force, one "path=value" a line: two configurations are
** the same when their dumps are. */
static void dump(const sluice_policy_config *c, char *out, size_t n) {
  static const char *const other[] = {
      "shadow", "shadow_features", "host.counters", "host.degraded_store",
      "host.deny_cache", "tiers"};
  const sluice_policy_setting *st;
  char p[128], v[256];
  size_t used = 0;
  int i, j, nroutes;
  char name[64];
#define LINE(path)                                                             \
  do {                                                                         \
    cr_assert_eq(sluice_policy_config_get(c, path, v, sizeof v), SLUICE_OK,   \
                 "%s", path);                                                  \
    used += (size_t)snprintf(out + used, n - used, "%s=%s\n", path, v);        \
    cr_assert_lt(used, n);                                                     \
  } while (0)
  out[0] = '\0';
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++) {
    snprintf(p, sizeof p, "%s.%s", st->group, st->name);
    LINE(p);
  }
  for (i = 0; i < (int)(sizeof other / sizeof other[0]); i++)
    LINE(other[i]);
  for (i = 0;; i++) {
    snprintf(p, sizeof p, "tiers.[%d]", i);
    if (sluice_policy_config_get(c, p, name, sizeof name) != SLUICE_OK)
      break;
    LINE(p);
  }
  /* A file's routes (a file without any is refused at open only). */
  nroutes = 0;
  if (sluice_policy_config_get(c, "routes", v, sizeof v) == SLUICE_OK) {
    LINE("routes");
    nroutes = atoi(v);
  }
  for (i = 0; i < nroutes; i++) {
    /* Method and route (a declared route entry has no class). */
    static const char *const rf[] = {"method", "route"};
    for (j = 0; j < 2; j++) {
      snprintf(p, sizeof p, "routes.[%d].%s", i, rf[j]);
      LINE(p);
    }
  }
#undef LINE
}

/* The installed default (/etc/sluice/sluice.conf is etc/ledger.conf under
** that name, meson.build) is the library's embedded default. */
Test(policy_config, shipped_config_equals_the_defaults) {
  sluice_policy_config *a, *b;
  static char da[16384], db[16384];
  char err[256];
  cr_assert_eq(cfg_load(&a, NULL, err, sizeof err), SLUICE_OK, "%s", err);
  cr_assert_eq(cfg_load(&b, SLUICE_ETC "/ledger.conf", err, sizeof err),
               SLUICE_OK, "%s", err);
  dump(a, da, sizeof da);
  dump(b, db, sizeof db);
  cr_assert_str_eq(da, db);
  cr_assert(strstr(da, "tiers=sandbox,growth,enterprise\n"), "%s", da);
  cr_assert(strstr(da, "tiers.[2]=enterprise\n"), "%s", da);
  cr_assert(strstr(da, "routes.[1].route=/v1/ledgers/reconcile\n"), "%s", da);
}

Test(policy_config, a_limit_is_found_by_its_name_only) {
  sluice_policy_config *c = cfg_new();
  char v[64];
  cr_assert_str_eq(cfg_str(c, "limits.key.by"), "tier");
  cr_assert_str_eq(cfg_str(c, "limits.key.params"), "growth,enterprise");
  cr_assert_str_eq(cfg_str(c, "routes.[4].route"), "/v1/*");
  cr_assert_eq(sluice_policy_config_get(c, "limits.ke", v, sizeof v),
               SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_policy_config_get(c, "limits.keyx", v, sizeof v),
               SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_policy_config_get(c, "routes.[5]", v, sizeof v),
               SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_policy_config_get(c, NULL, v, sizeof v),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_config_get(NULL, "limits", v, sizeof v),
               SLUICE_EINVAL);
  /* Only the parameter sets in use. */
  cfg_sets(c, "limits.key.params", "{ growth = { rate = 25; burst = 1500; }; }");
  cr_assert_eq(sluice_policy_config_get(c, "limits.key.params.enterprise", v,
                                        sizeof v),
               SLUICE_ENOTFOUND);
  cr_assert_str_eq(cfg_str(c, "limits.key.params"), "growth");
}

/* etc/ledger.conf holds the spec's tables (docs/policy.md, "Worked
** example"). */
Test(policy_config, the_ledger_file_holds_the_design_tables) {
  sluice_policy_config *c = cfg_new();
  cr_assert_str_eq(cfg_str(c, "limits.key.params"), "growth,enterprise");
  cr_assert_eq(cfg_int(c, "limits.key.params.growth.burst"), 1500);
  cr_assert_eq(cfg_int(c, "limits.tenant.params.enterprise.rate"), 500);
  cr_assert_str_eq(cfg_str(c, "penalties.keys.levels.[2].actions.[1]"),
                   "suspend");
  cr_assert_str_eq(
      cfg_str(c, "penalties.keys.params.enterprise.levels.[2].actions.[1]"),
      "page");
  cr_assert_eq(cfg_int(c, "routes.[1].limits.[0].cost"), 10);
  cr_assert_eq(cfg_int(c, "routes.[2].limits.[0].cost.ranges.[1].cost"), 50);
}

Test(policy_config, a_bad_value_names_file_line_and_setting) {
  sluice_policy_config *c;
  char err[256];
  int rc = load("# comment\n"
                "limits = {\n"
                "  api = { algorithm = \"gcra\"; scope = [ \"key\" ];\n"
                "    rate = 5; period_ms = 1000; burst = 0; };\n"
                "};\n" API_ROUTE,
                &c, err, sizeof err);
  cr_assert_eq(rc, SLUICE_ECONFIG);
  cr_assert(strstr(err, "/tmp/sluice-policy-") == err, "%s", err);
  cr_assert(strstr(err, ":4: limits.api.burst: must be 1..") != NULL, "%s",
            err);
}

Test(policy_config, an_unknown_setting_is_an_error) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(load(API_LIMIT "routes = ( { method = \"*\"; route = \"/*\";\n"
                    "  limits = ( \"api\" ); lmits = 1; } );\n",
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":6: routes.[0].lmits: unknown setting"), "%s", err);
  cr_assert_eq(load("\n\nshadows = true;\n", &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":3: shadows: unknown setting"), "%s", err);
}

Test(policy_config, syntax_errors_and_missing_files) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(load(API_LIMIT "routes = ( { method = \"*\"; route = \"/*\"; "
                    "limits = ( { limit = \"api\"; cost = ; } ); } );\n",
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":5: syntax"), "%s", err);
  cr_assert_eq(sluice_policy_config_new(&c, "/nonexistent/sluice.conf", err,
                                        sizeof err),
               SLUICE_EIO);
  cr_assert_null(c);
  cr_assert(strstr(err, "/nonexistent/sluice.conf"), "%s", err);
  cr_assert_eq(sluice_policy_config_new(NULL, NULL, err, sizeof err),
               SLUICE_EINVAL);
}

Test(policy_config, wrong_types_are_named) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(load("shadow = 1;\n", &c, err, sizeof err), SLUICE_ECONFIG);
  cr_assert(strstr(err, ":1: shadow: must be true or false"), "%s", err);
  cr_assert_eq(load("limits = {\n  api = { algorithm = \"gcra\"; scope = [ "
                    "\"key\" ];\n    rate = \"5/s\"; period_ms = 1000; "
                    "burst = 10; };\n};\n" API_ROUTE,
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":3: limits.api.rate: must be an integer"), "%s", err);
  cr_assert_eq(load("limits = {\n  api = { algorithm = \"gcrb\"; scope = [ "
                    "\"key\" ];\n    rate = 5; period_ms = 1000; burst = 10; "
                    "};\n};\n" API_ROUTE,
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":2: limits.api.algorithm: must be one of"), "%s",
            err);
}

Test(policy_config, cross_checks_point_at_the_cost) {
  sluice_policy_config *c;
  char err[256];
  /* A request that costs more than its bucket holds could never be
  ** admitted. */
  cr_assert_eq(load(API_LIMIT "routes = ( { method = \"*\"; route = \"/*\";\n"
                    "  limits = ( { limit = \"api\"; cost = 11; } ); } );\n",
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":6: routes.[0].limits.[0].cost: must be 1..10, the "
                        "smallest burst of limit \"api\" (got 11)"),
            "%s", err);
}

Test(policy_config, a_new_limit_must_be_complete) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(load("limits = {\n  api = { algorithm = \"gcra\"; scope = [ "
                    "\"key\" ];\n    rate = 5; burst = 10; };\n};\n" API_ROUTE,
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":2: limits.api: period_ms is missing"), "%s", err);
}

Test(policy_config, routes_replace_the_default_policy) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(load(API_LIMIT "routes = (\n"
                    "  { method = \"*\"; route = \"/a\"; limits = ( \"api\" ); "
                    "},\n"
                    "  { method = \"*\"; route = \"/*\"; limits = ( \"apj\" ); "
                    "} );\n",
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":7: routes.[1].limits.[0]: no limit \"apj\""), "%s",
            err);
  cr_assert_eq(load(API_LIMIT "routes = ( { method = \"GET\"; route = "
                    "\"/v2/*\"; limits = ( \"api\" ); } );\n",
                    &c, err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(cfg_int(c, "routes"), 1);
  cr_assert_str_eq(cfg_str(c, "routes.[0].route"), "/v2/*");
  cr_assert_str_eq(cfg_str(c, "limits"), "api");
  {
    fixture f;
    sluice_request r = rq_std("acme", "k", "growth");
    sluice_decision d;
    fx_open(&f, c, 0);
    cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_ENOTFOUND,
                 "/v1 is no longer routed");
    r.route = "/v2/things";
    d = decide(&f, &r);
    assert_binding(d, "api");
    cr_assert_eq(d.limit, 10);
    fx_close(&f);
  }
}

Test(policy_config, a_set_is_validated_and_names_the_setting) {
  sluice_policy_config *c = cfg_new();
  char err[256];
  cr_assert_eq(sluice_policy_config_set(c, "failure.degraded_percent", "0",
                                        err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: failure.degraded_percent: must be 1..100 (got "
                        "0)");
  cr_assert_eq(sluice_policy_config_set(
                   c, "limits.reconciles.params.growth.max", "0", err,
                   sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "set: limits.reconciles.params.growth.max"), "%s",
            err);
  cr_assert_eq(sluice_policy_config_set(c, "limits.key.params.Growth-2",
                                        "{ rate = 1; burst = 60; }", err,
                                        sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(sluice_policy_config_set(c, "limits.key.params.2x", "{}", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "set: limits.key.params.2x: not a valid setting "
                        "name"),
            "%s", err);
  cr_assert_eq(sluice_policy_config_set(c, "failure", "5", err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "set: failure: must be a group"), "%s", err);
  cr_assert_eq(sluice_policy_config_set(c, NULL, "5", err, sizeof err),
               SLUICE_EINVAL);
}

Test(policy_config, open_with_a_bad_file_reports_it) {
  sluice_policy_options o;
  sluice_policy *p;
  char err[256];
  const char *file = fx_write_conf(
      "limits = {\n  api = { algorithm = \"gcra\"; scope = [ \"key\" ];\n"
      "    rate = 5; period_ms = 0; burst = 10; };\n};\n" API_ROUTE);
  memset(&o, 0, sizeof o);
  o.secret[3] = 7;
  o.config_path = file;
  o.errbuf = err;
  o.errlen = sizeof err;
  cr_assert_eq(sluice_policy_open(&o, &p), SLUICE_ECONFIG);
  unlink(file);
  cr_assert_null(p);
  cr_assert(strstr(err, ":3: limits.api.period_ms: must be"), "%s", err);
  o.config_path = fx_default_conf;
  cr_assert_eq(sluice_policy_open(&o, &p), SLUICE_OK, "%s", err);
  sluice_policy_close(p);
}

/* libconfig 1.5 reads an integer without an L suffix as a C int: these
** would load as 10 and as a negative number, silently or with a wrong
** reason.  They load at full width; what cannot fit in 64 bits is refused
** with its line. */
Test(policy_config, integers_are_read_at_full_width) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(load("limits = {\n  api = { algorithm = \"gcra\"; scope = [ "
                    "\"key\" ];\n    rate = 500000; period_ms = 1000; "
                    "burst = 4294967306; };\n"
                    "  two = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; "
                    "rate = 100000; period_ms = 1000; burst = 3000000000; };\n"
                    "};\nroutes = ( { method = \"*\"; route = \"/*\"; "
                    "limits = ( \"api\", \"two\" ); } );\n",
                    &c, err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(cfg_int(c, "limits.api.burst"), INT64_C(4294967306));
  cr_assert_eq(cfg_int(c, "limits.two.burst"), INT64_C(3000000000));
  /* With the suffix, in hex, and inside names and floats nothing changes. */
  cr_assert_eq(load("limits = {\n  api = { algorithm = \"gcra\"; scope = [ "
                    "\"key\" ];\n    rate = 500000; period_ms = 1000; "
                    "burst = 0x100000000L; };\n};\n" API_ROUTE
                    "failure = { retry_after_s = 0x12c; }; # 4294967306\n",
                    &c, err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(cfg_int(c, "limits.api.burst"), INT64_C(4294967296));
  cr_assert_eq(cfg_ns(c, "failure.retry_after_s"), INT64_C(300) * 1000000000);
  /* Past what the setting allows: the real number is in the message. */
  cr_assert_eq(load("limits = {\n  api = { algorithm = \"gcra\"; scope = [ "
                    "\"key\" ];\n    rate = 5; period_ms = 1000; "
                    "burst = 4294967306000; };\n};\n" API_ROUTE,
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":3: limits.api.burst: must be 1..") &&
                strstr(err, "(got 4294967306000)"),
            "%s", err);
}

Test(policy_config, integers_past_64_bits_are_refused) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(load("limits = {\n  api = { algorithm = \"gcra\"; scope = [ "
                    "\"key\" ];\n    rate = 5; period_ms = 1000; "
                    "burst = 99999999999999999999; };\n};\n" API_ROUTE,
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":3: 99999999999999999999 does not fit in a 64-bit "
                        "integer"),
            "%s", err);
  cr_assert_eq(load("failure = { retry_after_s = 9223372036854775808L; };\n",
                    &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":1: 9223372036854775808L does not fit"), "%s", err);
  cr_assert_eq(load("@include \"other.conf\"\n", &c, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, ":1: @include is not supported"), "%s", err);
}

/* The file `text` is refused with `want` in the message (and not `not`). */
static void refused(const char *text, const char *want, const char *not) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(load(text, &c, err, sizeof err), SLUICE_ECONFIG, "%s", text);
  cr_assert_not_null(strstr(err, want), "%s", err);
  if (not)
    cr_assert_null(strstr(err, not), "%s", err);
}

/* Only the @include directive is refused as one: another stray '@' is
** libconfig's syntax error, on its line. */
Test(policy_config, a_stray_at_sign_is_a_syntax_error) {
  refused("shadow = false;\n@x = 1;\n", ":2: syntax", "@include");
  refused("failure = {\n  retry_after_s = @1;\n};\n", ":2: syntax",
          "@include");
  refused("shadow = false;\n  @include \"x.conf\"\n",
          ":2: @include is not supported", NULL);
}

/* An empty route table classes no request: refused, in a file (on its
** line) and in a set alike. */
Test(policy_config, an_empty_route_list_is_refused) {
  sluice_policy_config *c;
  char err[256];
  refused(API_LIMIT "routes = ( );\n",
          ":5: routes: must list at least one route", NULL);
  c = cfg_new();
  cr_assert_eq(sluice_policy_config_set(c, "routes", "()", err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: routes: must list at least one route (got 0)");
  cr_assert_eq(cfg_int(c, "routes"), 5);
}

/* `tiers` names the values a request's tier may take (the counters' rows):
** a file's own replace the default three; a tier is a name and nothing
** else (what it changes is its limits' parameter sets). */
Test(policy_config, tiers_are_names_a_request_may_take) {
  sluice_policy_config *c;
  char err[256];
  fixture f;
  sluice_request r;
  sluice_decision d;
  refused("tiers = { growth = { key = { burst = 20; }; }; };\n",
          ":1: tiers: must be an array of names", NULL);
  refused("tiers = [ ];\n", ":1: tiers: must name 1..8 tiers", NULL);
  refused("tiers = [ \"a\", \"b\", \"c\", \"d\", \"e\", \"f\", "
          "\"g\", \"h\", \"i\" ];\n",
          ":1: tiers: must name 1..8 tiers", NULL);
  refused("tiers = [ \"gold\", \"9lives\" ];\n", ":1: tiers.[1]: tier 1: a "
          "name is 1..31 of [A-Za-z0-9_-], starting with a letter", NULL);
  refused("tiers = [ \"gold\", \"gold\" ];\n",
          ":1: tiers.[1]: tier named twice", NULL);
  cr_assert_eq(load(API_LIMIT API_ROUTE "tiers = [ \"free\", \"pro\" ];\n",
                    &c, err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(cfg_str(c, "tiers"), "free,pro");
  cr_assert_str_eq(cfg_str(c, "tiers.[1]"), "pro");
  fx_open(&f, c, 0);
  r = rq_std("acme", "k", "pro");
  r.route = "/x";
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_OK);
  cr_assert_str_eq(d.tier, "pro");
  cr_assert_eq(sluice_policy_count(f.pol, "pro", SLUICE_OUTCOME_ALLOW), 1);
  r.tier = "growth"; /* a default tier the file replaced */
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_ENOTFOUND);
  cr_assert_str_eq(d.invalid_field, "tier");
  fx_close(&f);
}

/* A value below a bound reads as one above it: "must be LO..HI (got X)",
** negative values and durations past 64-bit ns too. */
Test(policy_config, every_bound_is_said_alike) {
  static const char *const cases[][2] = {
      {"limits = {\n  api = { algorithm = \"gcra\"; scope = [ \"key\" ];\n"
       "    rate = -5; period_ms = 1000; burst = 10; };\n};\n" API_ROUTE,
       ":3: limits.api.rate: must be 1..4294967296 (got -5)"},
      {"limits = {\n  api = { algorithm = \"gcra\"; scope = [ \"key\" ];\n"
       "    rate = 0; period_ms = 1000; burst = 10; };\n};\n" API_ROUTE,
       "limits.api.rate: must be 1..4294967296 (got 0)"},
      {"limits = {\n  api = { algorithm = \"gcra\"; scope = [ \"key\" ];\n"
       "    rate = 5; period_ms = -1; burst = 10; };\n};\n" API_ROUTE,
       "limits.api.period_ms: must be 1..2592000000 (got -1)"},
      {"limits = {\n  api = { algorithm = \"gcra\"; scope = [ \"key\" ];\n"
       "    rate = 5; period_ms = 99999999999999; burst = 10; };\n};\n"
       API_ROUTE,
       "limits.api.period_ms: must be 1..2592000000 (got 99999999999999)"},
      {API_LIMIT API_ROUTE "penalties = { p = { scope = [ \"key\" ]; "
       "strikes = 3;\n  strike_window_ms = 1000; offense_ttl_s = 10;\n"
       "  levels = ( { box_s = 99999999999999999; }, { box_s = 5; }, "
       "{ box_s = 5; } ); }; };\n",
       ":8: penalties.p.levels.[0].box_s: must be 1..31622400 "
       "(got 99999999999999999)"},
      {"ip_backstop = { limit = -1; };\n",
       "ip_backstop.limit: must be 0..1099511627776 (got -1)"},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
    refused(cases[i][0], cases[i][1], "out of range");
}

Test(policy_config, a_file_over_one_mib_is_not_a_policy) {
  sluice_policy_config *c;
  char err[256];
  size_t n = (1 << 20) + 16;
  char *text = malloc(n + 1);
  cr_assert_not_null(text);
  memset(text, '#', n);
  text[n - 1] = '\n';
  text[n] = '\0';
  cr_assert_eq(load(text, &c, err, sizeof err), SLUICE_EIO);
  cr_assert(strstr(err, "larger than 1 MiB"), "%s", err);
  /* Just under: comments, then a policy. */
  memcpy(text + n - 20 - strlen(API_LIMIT API_ROUTE), API_LIMIT API_ROUTE,
         strlen(API_LIMIT API_ROUTE));
  text[n - 21 - strlen(API_LIMIT API_ROUTE)] = '\n';
  text[n - 20] = '\0';
  text[n - 21] = '\n';
  cr_assert_eq(load(text, &c, err, sizeof err), SLUICE_OK, "%s", err);
  cr_assert_eq(cfg_int(c, "limits.api.burst"), 10);
  free(text);
}

/* The settings table (sluice_policy_setting_at) is what the loader and the
** validator go by: every row's bounds hold in a file, one past them is
** refused naming the row, its default is what the defaults hold, and the
** rows of a group are together (the loader reads a group at a time). */
Test(policy_config, every_setting_of_the_table_is_loaded_and_bounded) {
  const sluice_policy_setting *st;
  sluice_policy_config *c;
  char text[256], err[256], want[96];
  int i, j, n = 0;
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++, n++) {
    int64_t hi = st->max;
    snprintf(want, sizeof want, "%s.%s", st->group, st->name);
    cr_assert(st->dflt >= st->min && st->dflt <= hi, "%s: default", want);
    for (j = 0; j < i; j++)
      if (strcmp(sluice_policy_setting_at(j)->group, st->group) == 0)
        cr_assert_str_eq(sluice_policy_setting_at(i - 1)->group, st->group,
                         "%s: rows of a group are together", want);
    snprintf(text, sizeof text, "%s = { %s = %lld; };\n", st->group, st->name,
             (long long)hi);
    cr_assert_eq(load(text, &c, err, sizeof err), SLUICE_OK, "%s: %s", want,
                 err);
    snprintf(text, sizeof text, "%s = { %s = %lld; };\n", st->group, st->name,
             (long long)hi + 1);
    cr_assert_eq(load(text, &c, err, sizeof err), SLUICE_ECONFIG, "%s", want);
    cr_assert_not_null(strstr(err, want), "%s: %s", want, err);
    if (st->min > 0) {
      snprintf(text, sizeof text, "%s = { %s = %lld; };\n", st->group,
               st->name, (long long)st->min - 1);
      cr_assert_eq(load(text, &c, err, sizeof err), SLUICE_ECONFIG, "%s",
                   want);
      cr_assert_not_null(strstr(err, want), "%s: %s", want, err);
    }
  }
  cr_assert_eq(n, 11, "failure 3, breaker 5, ip_backstop 2, client_ip 1");
  cr_assert_null(sluice_policy_setting_at(-1));
}

/* The table's defaults are the defaults: each row's field, set to its
** default in a zeroed config, gives the same word as the defaults. */
Test(policy_config, the_table_defaults_are_the_config_defaults) {
  const sluice_policy_setting *st;
  sluice_policy_config *c;
  static char dflt[16384], got[16384];
  char text[256], err[256];
  int i;
  /* An empty file: every setting at the table's default (the library's
  ** default policy is the ledger file, which sets some). */
  cr_assert_eq(load("", &c, err, sizeof err), SLUICE_OK, "%s", err);
  dump(c, dflt, sizeof dflt);
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++) {
    /* Loading the default value changes nothing. */
    snprintf(text, sizeof text, "%s = { %s = %lld; };\n", st->group, st->name,
             (long long)st->dflt);
    cr_assert_eq(load(text, &c, err, sizeof err), SLUICE_OK, "%s", err);
    dump(c, got, sizeof got);
    cr_assert_str_eq(got, dflt, "%s.%s", st->group, st->name);
    /* Loading another value changes the config. */
    snprintf(text, sizeof text, "%s = { %s = %lld; };\n", st->group, st->name,
             (long long)(st->dflt == st->min ? st->dflt + 1 : st->dflt - 1));
    cr_assert_eq(load(text, &c, err, sizeof err), SLUICE_OK, "%s", err);
    dump(c, got, sizeof got);
    cr_assert_str_neq(got, dflt, "%s.%s", st->group, st->name);
  }
}

/*
** The configuration handle: built from the defaults or a file, changed a
** setting at a time by its path, read back by path.  A set goes through
** the file's loader: the same bounds, errors naming the setting ("set:"
** for a setting a call made, FILE:LINE for one of the file), a refused
** value changing nothing, and declared limits in code as in a file.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

static const char *get(const sluice_policy_config *c, const char *p) {
  static char v[256];
  int rc = sluice_policy_config_get(c, p, v, sizeof v);
  cr_assert_eq(rc, SLUICE_OK, "get %s: %d", p, rc);
  return v;
}

/* The line of path holding needle first (the file is corelib's: its
** layout may move). */
static int line_of(const char *path, const char *needle) {
  char line[512];
  FILE *f = fopen(path, "r");
  int n = 0;
  cr_assert_not_null(f, "%s", path);
  while (fgets(line, sizeof line, f)) {
    n++;
    if (strstr(line, needle)) {
      fclose(f);
      return n;
    }
  }
  fclose(f);
  cr_assert_fail("%s: no \"%s\"", path, needle);
  return 0;
}

/* The default policy file's configuration, freed by the caller. */
static sluice_policy_config *ledger(void) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(sluice_policy_config_new(&c, fx_default_conf, err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(err, "");
  return c;
}

Test(policy_config_set, a_set_is_read_back_and_a_refusal_changes_nothing) {
  sluice_policy_config *c = ledger();
  char err[512], want[512];
  cr_assert_str_eq(get(c, "limits"),
                   "tenant,key,ledger_lock,reconciles,exports_per_hour,exports");
  cr_assert_str_eq(get(c, "limits.key.params.growth.burst"), "1500");
  cr_assert_str_eq(get(c, "penalties.keys.strike_window_ms"), "60000");
  cr_assert_eq(sluice_policy_config_set(c, "limits.key.params.growth.burst",
                                        "100", err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "limits.key.params.growth.burst"), "100");
  /* Naming one parameter keeps the other sets and the rest of growth's. */
  cr_assert_str_eq(get(c, "limits.key.params"), "growth,enterprise");
  cr_assert_str_eq(get(c, "limits.key.params.growth.rate"), "25");
  cr_assert_str_eq(get(c, "limits.key.params.enterprise.burst"), "15000");
  /* Out of bounds: named, refused, nothing changed. */
  cr_assert_eq(sluice_policy_config_set(c, "limits.key.params.growth.burst",
                                        "0", err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: limits.key.params.growth.burst: must be "
                        "1..1099511627776 (got 0)");
  cr_assert_str_eq(get(c, "limits.key.params.growth.burst"), "100");
  /* A set that makes another setting wrong names that one, at its line
  ** of the file. */
  cr_assert_eq(sluice_policy_config_set(c, "limits.key.params.growth.burst",
                                        "5", err, sizeof err),
               SLUICE_ECONFIG);
  snprintf(want, sizeof want, "%s:%d: routes.[1].limits.[0].cost: must be "
                              "1..5, the smallest burst of limit \"key\" "
                              "(got 10)", fx_default_conf,
           line_of(fx_default_conf, "cost = 10;"));
  cr_assert_str_eq(err, want);
  cr_assert_str_eq(get(c, "limits.key.params.growth.burst"), "100");
  /* Strings, booleans, lists; a bare word is a string. */
  cr_assert_eq(sluice_policy_config_set(c, "penalties.keys.strike", "every",
                                        err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "penalties.keys.strike"), "every");
  cr_assert_eq(sluice_policy_config_set(c, "penalties.keys.strike", "often",
                                        err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "set: penalties.keys.strike: must be \"early\""),
            "%s", err);
  cr_assert_str_eq(get(c, "penalties.keys.strike"), "every");
  cr_assert_eq(sluice_policy_config_set(c, "shadow_features",
                                        "[ \"penalty\", \"leases\" ]", err,
                                        sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "shadow_features"), "penalty,leases");
  cr_assert_eq(sluice_policy_config_set(c, "shadow", "maybe", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: shadow: must be true or false");
  cr_assert_str_eq(get(c, "shadow"), "false");
  sluice_policy_config_free(c);
}

Test(policy_config_set, bad_paths_and_values_are_named) {
  sluice_policy_config *c = ledger();
  char err[256], v[8];
  cr_assert_eq(sluice_policy_config_set(c, "penalties.keys.strikes_window_ms",
                                        "5", err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: penalties.keys.strikes_window_ms: unknown "
                        "setting");
  cr_assert_eq(sluice_policy_config_set(c, "penalties..x", "5", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "set: penalties..x: a path is"), "%s", err);
  cr_assert_eq(sluice_policy_config_set(c, "limits.key.rate", "{ 5", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: limits.key.rate: the value is not libconfig "
                        "syntax");
  cr_assert_eq(sluice_policy_config_set(c, "limits.key.rate", "5x", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: limits.key.rate: must be an integer");
  cr_assert_eq(sluice_policy_config_set(c, "routes.[9].method", "GET", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: routes.[9].method: no such element");
  cr_assert_eq(sluice_policy_config_set(NULL, "a", "1", err, sizeof err),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_config_get(c, "penalties.nope", v, sizeof v),
               SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_policy_config_get(c, "limits.gold", v, sizeof v),
               SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_policy_config_get(c, "limits", v, sizeof v),
               SLUICE_ERANGE);
  cr_assert_str_eq(v, "tenant,");
  sluice_policy_config_free(c);
}

Test(policy_config_set, a_file_setting_keeps_its_line) {
  sluice_policy_config *c;
  char err[256];
  const char *p = fx_write_conf(
      "limits = { api = { algorithm = \"gcra\"; scope = [ \"key\" ];\n"
      "  rate = 1; period_ms = 1000; burst = 60; }; };\n"
      "routes = ( { method = \"*\"; route = \"/*\";\n"
      "  limits = ( { limit = \"api\"; cost = 10; } ); } );\n");
  cr_assert_eq(sluice_policy_config_new(&c, p, err, sizeof err), SLUICE_OK,
               "%s", err);
  cr_assert_str_eq(get(c, "limits"), "api");
  cr_assert_str_eq(get(c, "limits.api.burst"), "60");
  cr_assert_eq(sluice_policy_config_set(c, "limits.api.burst", "5", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  {
    char want[256];
    snprintf(want, sizeof want, "%s:4: routes.[0].limits.[0].cost: must be "
                                "1..5, the smallest burst of limit \"api\" "
                                "(got 10)", p);
    cr_assert_str_eq(err, want);
  }
  cr_assert_eq(sluice_policy_config_set(c, "routes.[0].limits.[0].cost", "2",
                                        err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(sluice_policy_config_set(c, "limits.api.burst", "50", err,
                                        sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "routes.[0].limits.[0].cost"), "2");
  unlink(p);
  /* The handle holds the text: the file is not read again. */
  cr_assert_str_eq(get(c, "limits.api.burst"), "50");
  sluice_policy_config_free(c);
}

static sluice_policy *open_with(const sluice_policy_config *c) {
  sluice_policy_options po;
  sluice_policy *p;
  char err[256];
  memset(&po, 0, sizeof po);
  memset(po.secret, 7, sizeof po.secret);
  po.config = c;
  po.errbuf = err;
  po.errlen = sizeof err;
  cr_assert_eq(sluice_policy_open(&po, &p), SLUICE_OK, "%s", err);
  return p;
}

Test(policy_config_set, declared_limits_in_code) {
  sluice_policy_config *c;
  sluice_policy *p;
  sluice_request r;
  sluice_decision d;
  char err[256], v[64];
  int i;
  c = ledger();
  cr_assert_eq(sluice_policy_config_set(c, "limits.per_ip",
                                        "{ algorithm = \"gcra\"; scope = [ "
                                        "\"ip\" ]; rate = 1; period_ms = "
                                        "3600000; burst = 3; }",
                                        err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(sluice_policy_config_set(c, "limits.per_ip.burst", "0", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "set: limits.per_ip.burst: must be 1.."), "%s", err);
  cr_assert_str_eq(get(c, "limits"), "tenant,key,ledger_lock,reconciles,"
                                     "exports_per_hour,exports,per_ip");
  /* A route in front of the file's: "[n]" past the last adds one, and the
  ** first match wins. */
  cr_assert_eq(sluice_policy_config_set(
                   c, "routes",
                   "( { method = \"GET\"; route = \"/x\"; limits = ( "
                   "\"per_ip\" ); } )",
                   err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "limits.per_ip.burst"), "3");
  p = open_with(c);
  sluice_policy_config_free(c); /* the policy keeps its own copy */
  cr_assert_eq(sluice_policy_config_get(sluice_policy_config_of(p),
                                        "limits.per_ip.rate", v, sizeof v),
               SLUICE_OK);
  cr_assert_str_eq(v, "1");
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.route = "/x";
  r.client_ip = "192.0.2.1";
  for (i = 0; i < 3; i++) {
    cr_assert_eq(sluice_policy_decide(p, 1, &r, &d, NULL), SLUICE_OK);
    cr_assert_eq(d.allowed, 1, "request %d", i);
  }
  cr_assert_eq(sluice_policy_decide(p, 1, &r, &d, NULL), SLUICE_OK);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "per_ip");
  sluice_policy_close(p);
}

Test(policy_config_set, a_parameter_set_replaced_keeps_its_place) {
  sluice_policy_config *c = ledger();
  char err[512];
  /* A new plan's numbers must still fit the routes' costs. */
  cr_assert_eq(sluice_policy_config_set(c, "limits.key.params.gold.burst",
                                        "10", err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "routes.[2].limits.[0].cost: must be 1..10"), "%s",
            err);
  cr_assert_str_eq(get(c, "limits.key.params"), "growth,enterprise");
  cr_assert_eq(sluice_policy_config_set(c, "limits.tenant.params.growth",
                                        "{ rate = 7; burst = 70; }", err,
                                        sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "limits.tenant.params"), "growth,enterprise");
  cr_assert_str_eq(get(c, "limits.tenant.params.growth.rate"), "7");
  cr_assert_str_eq(get(c, "limits.tenant.params.growth.burst"), "70");
  cr_assert_str_eq(get(c, "limits.tenant.params.enterprise.rate"), "500");
  sluice_policy_config_free(c);
}

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

static char path[64];

static const char *write_conf(const char *text) {
  int fd;
  FILE *f;
  snprintf(path, sizeof path, "/tmp/sluice-policy-XXXXXX");
  fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  f = fdopen(fd, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static const char *get(const sluice_policy_config *c, const char *p) {
  static char v[256];
  int rc = sluice_policy_config_get(c, p, v, sizeof v);
  cr_assert_eq(rc, SLUICE_OK, "get %s: %d", p, rc);
  return v;
}

Test(policy_config_set, a_set_is_read_back_and_a_refusal_changes_nothing) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(sluice_policy_config_new(&c, NULL, err, sizeof err),
               SLUICE_OK);
  cr_assert_str_eq(err, "");
  cr_assert_str_eq(get(c, "tiers"), "sandbox,growth,enterprise");
  cr_assert_str_eq(get(c, "tiers.growth.key.burst"), "1500");
  cr_assert_str_eq(get(c, "penalty.strike_window_ms"), "60000");
  cr_assert_eq(sluice_policy_config_set(c, "tiers.growth.key.burst", "100",
                                        err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "tiers.growth.key.burst"), "100");
  /* Naming one tier keeps the others and the rest of growth. */
  cr_assert_str_eq(get(c, "tiers"), "sandbox,growth,enterprise");
  cr_assert_str_eq(get(c, "tiers.growth.key.rate"), "25");
  cr_assert_str_eq(get(c, "tiers.enterprise.key.burst"), "15000");
  /* Out of bounds: named, refused, nothing changed. */
  cr_assert_eq(sluice_policy_config_set(c, "tiers.growth.key.burst", "0",
                                        err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: tiers.growth.key.burst: must be "
                        "1..1099511627776 (got 0)");
  cr_assert_str_eq(get(c, "tiers.growth.key.burst"), "100");
  /* A set that makes another setting wrong names that one. */
  cr_assert_eq(sluice_policy_config_set(c, "tiers.growth.key.burst", "5",
                                        err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "costs.reconcile (a default): must be 1..5"), "%s",
            err);
  cr_assert_str_eq(get(c, "tiers.growth.key.burst"), "100");
  /* Strings, booleans, lists; a bare word is a string. */
  cr_assert_eq(sluice_policy_config_set(c, "tiers.growth.level3", "page", err,
                                        sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "tiers.growth.level3"), "page");
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
  sluice_policy_config *c;
  char err[256], v[8];
  cr_assert_eq(sluice_policy_config_new(&c, NULL, NULL, 0), SLUICE_OK);
  cr_assert_eq(sluice_policy_config_set(c, "penalty.strikes_window_ms", "5",
                                        err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: penalty.strikes_window_ms: unknown setting");
  cr_assert_eq(sluice_policy_config_set(c, "penalty..x", "5", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "set: penalty..x: a path is"), "%s", err);
  cr_assert_eq(sluice_policy_config_set(c, "costs.standard", "{ 5", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: costs.standard: the value is not libconfig "
                        "syntax");
  cr_assert_eq(sluice_policy_config_set(c, "costs.standard", "5x", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: costs.standard: must be an integer");
  cr_assert_eq(sluice_policy_config_set(c, "routes.[9].method", "GET", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert_str_eq(err, "set: routes.[9].method: no such element");
  cr_assert_eq(sluice_policy_config_set(NULL, "a", "1", err, sizeof err),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_config_get(c, "penalty.nope", v, sizeof v),
               SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_policy_config_get(c, "tiers.gold", v, sizeof v),
               SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_policy_config_get(c, "tiers", v, sizeof v),
               SLUICE_ERANGE);
  cr_assert_str_eq(v, "sandbox");
  sluice_policy_config_free(c);
}

Test(policy_config_set, a_file_setting_keeps_its_line) {
  sluice_policy_config *c;
  char err[256];
  const char *p = write_conf("costs = { reconcile = 10; };\n"
                             "tiers = { growth = { key = { burst = 60; }; };"
                             " };\n");
  cr_assert_eq(sluice_policy_config_new(&c, p, err, sizeof err), SLUICE_OK,
               "%s", err);
  cr_assert_str_eq(get(c, "tiers"), "growth");
  cr_assert_str_eq(get(c, "tiers.growth.key.burst"), "60");
  cr_assert_eq(sluice_policy_config_set(c, "tiers.growth.key.burst", "5",
                                        err, sizeof err),
               SLUICE_ECONFIG);
  {
    char want[128];
    snprintf(want, sizeof want, "%s:1: costs.reconcile: must be 1..5 (got "
                                "10)", p);
    cr_assert_str_eq(err, want);
  }
  cr_assert_eq(sluice_policy_config_set(c, "costs.reconcile", "2", err,
                                        sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(sluice_policy_config_set(c, "tiers.growth.key.burst", "50",
                                        err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "costs.reconcile"), "2");
  unlink(p);
  /* The handle holds the text: the file is not read again. */
  cr_assert_str_eq(get(c, "tiers.growth.key.burst"), "50");
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
  cr_assert_eq(sluice_policy_config_new(&c, NULL, NULL, 0), SLUICE_OK);
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
    cr_assert_eq(sluice_policy_decide(p, &r, &d), SLUICE_OK);
    cr_assert_eq(d.allowed, 1, "request %d", i);
  }
  cr_assert_eq(sluice_policy_decide(p, &r, &d), SLUICE_OK);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "per_ip");
  sluice_policy_close(p);
}

Test(policy_config_set, a_new_tier_starts_empty_and_tiers_keep_their_order) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(sluice_policy_config_new(&c, NULL, NULL, 0), SLUICE_OK);
  cr_assert_eq(sluice_policy_config_set(c, "tiers.gold.key.burst", "10", err,
                                        sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "tiers.gold.tenant.rate (a default): must be"), "%s",
            err);
  cr_assert_eq(sluice_policy_config_set(
                   c, "tiers.sandbox",
                   "{ tenant = { rate = 7; burst = 70; }; }", err,
                   sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(get(c, "tiers"), "sandbox,growth,enterprise");
  cr_assert_str_eq(get(c, "tiers.[0]"), "sandbox");
  cr_assert_str_eq(get(c, "tiers.sandbox.tenant.rate"), "7");
  cr_assert_str_eq(get(c, "tiers.sandbox.key.rate"), "5");
  sluice_policy_config_free(c);
}

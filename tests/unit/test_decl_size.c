/*
** The compiled declared limits take what the file declares
** (lib/policy/declared.h): the loader's maxima (32 limits, 32 parameter
** sets a limit, 64 routes, 8 penalties...) are room while loading, not in
** the compiled policy.  Sizes are sluice__decl_bytes(): the struct and the
** one block its arrays are packed into.
*/
#include <criterion/criterion.h>
#include <libconfig.h>
#include <stdio.h>
#include <string.h>

#include "declared.h"

/* The compiled size of a policy text, and its first route's cost table. */
static size_t bytes_of(const char *text, sluice__decl **keep) {
  config_t doc;
  sluice__decl *dl = calloc(1, sizeof *dl);
  char err[512] = "";
  size_t n;
  int rc;
  cr_assert_not_null(dl);
  config_init(&doc);
  cr_assert(config_read_string(&doc, text) == CONFIG_TRUE, "%s",
            config_error_text(&doc));
  rc = sluice__decl_load(config_root_setting(&doc), "t.conf", dl, err,
                         sizeof err, NULL, 0);
  config_destroy(&doc); /* nothing compiled points into the document */
  cr_assert_eq(rc, SLUICE_OK, "%s", err);
  n = sluice__decl_bytes(dl);
  if (keep)
    *keep = dl;
  else
    sluice__decl_free(dl);
  return n;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  static char buf[1 << 20];
  size_t n;
  cr_assert_not_null(f, "%s", path);
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

#define SMALL                                                                \
  "limits = {\n"                                                             \
  "  per_key = { algorithm = \"gcra\"; scope = [ \"tenant\", \"key\" ];\n"   \
  "              rate = 10; period_ms = 1000; burst = 100;\n"                \
  "              by = \"tier\"; params = { free = { rate = 1; }; }; };\n"    \
  "  hourly = { algorithm = \"fixed_window\"; scope = [ \"tenant\" ];\n"     \
  "             limit = 5000; window_ms = 3600000; };\n"                     \
  "};\n"                                                                     \
  "routes = ( { method = \"*\"; route = \"/v1/*\";\n"                        \
  "  limits = ( \"hourly\", { limit = \"per_key\"; cost = { GET = 1; "       \
  "other = 5; }; } ); } );\n"

Test(decl_size, a_small_policy_takes_a_few_kb) {
  sluice__decl *dl = NULL;
  size_t n = bytes_of(SMALL, &dl);
  cr_log_info("two limits, one route: %zu bytes\n", n);
  cr_assert_lt(n, 2048, "a policy of two limits compiles to %zu bytes", n);
  /* What was declared is all there, in the packed copy. */
  cr_assert_eq(dl->nlimits, 2);
  cr_assert_eq(dl->nroutes, 1);
  cr_assert_str_eq(dl->routes[0].route, "/v1/*");
  cr_assert_null(dl->routes[0].when);
  cr_assert_eq(dl->routes[0].cost[1].n, 1);
  cr_assert_str_eq(dl->routes[0].cost[1].e[0].method, "GET");
  cr_assert_eq(dl->routes[0].cost[1].value, 5);
  cr_assert_eq(dl->limits[0].npsets, 1);
  cr_assert_str_eq(dl->limits[0].psval[0], "free");
  cr_assert_eq(dl->limits[0].ps[0].g.rate, 1);
  cr_assert_eq(dl->limits[0].ps[0].g.burst, 100);
  sluice__decl_free(dl);
}

Test(decl_size, size_follows_what_is_declared) {
  /* One more limit with 8 parameter sets costs about a limit and eight
  ** sets, not the loader's room for 32 of them. */
  static const char small_text[] = SMALL;
  const char *cut = strstr(small_text, "};\nroutes");
  size_t small = bytes_of(small_text, NULL), big, set;
  char text[4096];
  cr_assert_not_null(cut);
  snprintf(text, sizeof text,
           "%.*s  extra = { algorithm = \"gcra\"; scope = [ \"tenant\" ];\n"
           "    rate = 1; period_ms = 1000; burst = 1; by = \"tier\";\n"
           "    params = { a = {}; b = {}; c = {}; d = {}; e = {}; f = {};\n"
           "               g = {}; h = {}; }; };\n%s",
           (int)(cut - small_text), small_text, cut);
  big = bytes_of(text, NULL);
  set = sizeof(sluice__amatch) + sizeof(sluice__lparams) + SLUICE__DNAME;
  cr_log_info("one limit of 8 sets more: %zu -> %zu bytes\n", small, big);
  cr_assert_geq(big, small + sizeof(sluice__limit) + 8 * set);
  cr_assert_leq(big, small + sizeof(sluice__limit) + 8 * set +
                         4 * 16 /* each array aligned */);
}

Test(decl_size, shipped_policies_stay_small) {
  static const char *const files[] = {"ledger.conf", "github.conf",
                                      "llm-gateway.conf", "shopify.conf"};
  size_t i;
  for (i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[512];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", SLUICE_ETC, files[i]);
    n = bytes_of(slurp(path), NULL);
    cr_log_info("etc/%s: %zu bytes\n", files[i], n);
    cr_assert_lt(n, 32768, "etc/%s compiles to %zu bytes", files[i], n);
  }
}

/* A file of penalties alone (a sign-in's lockouts) declares no limits:
** nothing is packed for them, and its route decides and reports. */
Test(decl_size, a_file_of_boxes_alone) {
  static const char text[] =
      "attributes = [ \"result\" ];\n"
      "penalties = { address = { scope = [ \"ip\" ]; strike = \"reported\";\n"
      "  reported = { by = \"result\"; values = [ \"bad\" ]; };\n"
      "  strikes = 2; strike_window_ms = 60000; offense_ttl_s = 600;\n"
      "  levels = ( { box_s = 60; }, { box_s = 120; }, { box_s = 300; } ); "
      "}; };\n"
      "routes = ( { method = \"POST\"; route = \"/login\"; limits = ( );\n"
      "             penalty = \"address\"; } );\n";
  sluice__decl *dl = NULL;
  size_t n = bytes_of(text, &dl);
  cr_assert_eq(dl->nlimits, 0);
  cr_assert_eq(dl->nroutes, 1);
  cr_assert_eq(dl->npenalties, 1);
  cr_assert_eq(dl->routes[0].n, 0);
  cr_assert_str_eq(dl->routes[0].route, "/login");
  cr_assert_lt(n, sizeof(sluice__penalty) + 1024, "%zu bytes", n);
  sluice__decl_free(dl);
}


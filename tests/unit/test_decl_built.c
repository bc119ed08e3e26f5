/*
** Checked at open (lib/policy/declared.c): each route's decision programs
** are put through the store's validator once, when the policy opens, for
** every parameter set of its limits and penalties, and its decisions then
** run unvalidated.  Every route of etc/ledger.conf passes.  A parameter
** set the validator refuses (broken here in the compiled policy: no file
** can spell one, the loader refuses it) leaves every route that uses it
** validated at each decision, and only those: the set must be found
** whichever of its limit's or penalty's sets it is.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"

static sluice_policy *open_ledger(void) {
  sluice_policy_options po;
  sluice_policy *p = NULL;
  char err[512] = "";
  int i;
  memset(&po, 0, sizeof po);
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 1);
  po.config_path = SLUICE_ETC "/ledger.conf";
  po.errbuf = err;
  po.errlen = sizeof err;
  cr_assert_eq(sluice_policy_open(&po, &p), SLUICE_OK, "%s", err);
  return p;
}

static int route_of(const sluice_policy *p, const char *route) {
  int r;
  for (r = 0; r < p->decl->nroutes; r++)
    if (!strcmp(p->decl->routes[r].route, route))
      return r;
  cr_assert_fail("no route %s", route);
  return -1;
}

static sluice__limit *limit_of(const sluice_policy *p, const char *name) {
  int i;
  for (i = 0; i < p->decl->nlimits; i++)
    if (!strcmp(p->decl->limits[i].name, name))
      return &p->decl->limits[i];
  cr_assert_fail("no limit %s", name);
  return NULL;
}

/* Which of the ledger's routes run checked at open, in the file's order
** (auth, reconcile, export, jobs, standard). */
static void expect(const sluice_policy *p, const int built[5]) {
  static const char *const routes[5] = {
      "/v1/auth/token", "/v1/ledgers/reconcile", "/v1/reports/audit-export",
      "/v1/jobs/*", "/v1/*"};
  int i;
  for (i = 0; i < 5; i++)
    cr_expect_eq(p->decl->routes[route_of(p, routes[i])].built, built[i],
                 "%s", routes[i]);
}

/* After a set is broken: checked again, as at open, then closed. */
static void recheck(sluice_policy *p, const int built[5]) {
  sluice__decl_check_built(p);
  expect(p, built);
  sluice_policy_close(p);
}

Test(decl_built, every_route_of_the_ledger_file_is_checked_at_open) {
  sluice_policy *p = open_ledger();
  static const int all[5] = {1, 1, 1, 1, 1};
  expect(p, all);
  sluice_policy_close(p);
}

/* reconciles: max 1, growth 2, enterprise 8; its last set broken. */
Test(decl_built, a_limits_last_set_refused_leaves_its_route_validated) {
  sluice_policy *p = open_ledger();
  sluice__limit *lm = limit_of(p, "reconciles");
  static const int want[5] = {1, 0, 1, 1, 1};
  cr_assert_eq(lm->npsets, 2);
  cr_assert_str_eq(lm->psval[1], "enterprise");
  lm->ps[1].l.max = 0;
  recheck(p, want);
}

/* The tenant bucket is in every route but auth's, in a group step. */
Test(decl_built, a_shared_limits_set_refused_leaves_each_of_its_routes) {
  sluice_policy *p = open_ledger();
  sluice__limit *lm = limit_of(p, "tenant");
  static const int want[5] = {1, 0, 0, 0, 0};
  lm->ps[0].g.burst = 0;
  recheck(p, want);
}

/* The key penalty's enterprise set: picked by the tier, which the
** stand-in request does not name. */
Test(decl_built, a_penalty_set_refused_leaves_its_routes_validated) {
  sluice_policy *p = open_ledger();
  static const int want[5] = {1, 0, 0, 0, 0};
  int i;
  for (i = 0; i < p->decl->npenalties; i++)
    if (!strcmp(p->decl->penalties[i].name, "keys"))
      break;
  cr_assert_lt(i, p->decl->npenalties);
  cr_assert_eq(p->decl->penalties[i].npsets, 1);
  p->decl->penalties[i].ps[0].pp.strike_threshold = 0;
  recheck(p, want);
}

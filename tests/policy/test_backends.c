/*
** The policy on every backend, through the vtable: the same scenario
** (stricter bucket, strikes to a box, ledger conflict and release, export
** cap, auth lockout) against mem, shm, lmdb and, when SLUICE_REDIS_NODES
** names a cluster, redis.  A backend compiled out is skipped.  Each runs
** twice, strikes counted both ways (penalty.strike_every_denial 0 and 1),
** on two tenants so that the second run meets none of the first's state.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "../common/rmtree.h"

static void scenario1(const char *store, unsigned flags, int every) {
  const char *T = every ? "acme-every" : "acme";
  sluice_policy_config *cfg;
  fixture f;
  sluice_request a = rq_std(T, "key-a", "growth");
  sluice_request b = rq_std(T, "key-b", "growth");
  sluice_request rec = rq_reconcile(T, "key-b", "growth", "L");
  sluice_request exp = rq_export(T, "key-b", "growth", 0);
  sluice_request auth = rq_signin(every ? "10.9.9.10" : "10.9.9.9",
                                every ? "mallory" : "eve", "bad_secret");
  sluice_decision d, held;
  int i, rc;

  cfg = cfg_new();
  cfg_set(cfg, "routes.[2].limits.[0].cost", 25); /* an export: 25 */
  cfg_set(cfg, "limits.tenant.params.growth.burst", 55);
  cfg_set(cfg, "limits.key.params.growth.burst", 30);
  cfg_set(cfg, "penalties.keys.params.growth.strikes", 3);
  cfg_set(cfg, "limits.exports_per_hour.params.growth.limit", 1);
  cfg_sets(cfg, "penalties.keys.strike", every ? "every" : "early");
  rc = fx_open_store(&f, cfg, store, flags);
  if (rc == SLUICE_ENOTSUP)
    cr_skip_test("%s: compiled out", store);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s", store, sluice_strerror(rc));

  for (i = 0; i < 30; i++)
    cr_assert_eq(decide(&f, &a).allowed, 1);
  d = decide(&f, &a);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  assert_binding(d, "key");
  cr_assert_eq(d.strikes_remaining, every ? 2 : 3, "the first 429");
  for (i = every ? 1 : 0; i < 3; i++) {
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED, "%s: 429 %d", store, i);
    d = decide(&f, &a);
  }
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED, "3 strikes trip the box");
  cr_assert_eq(d.penalty_level, 1);
  cr_assert_eq(decide(&f, &a).outcome, SLUICE_OUTCOME_BOXED);
  /* Key A's denials took nothing from the tenant. */
  held = decide(&f, &rec);
  cr_assert_eq(held.allowed, 1, "%s: %s (store error %s)", store,
               sluice_name(SLUICE_NAME_OUTCOME, held.outcome),
               sluice_err_name(held.store_error));
  cr_assert_eq(decide(&f, &rec).outcome, SLUICE_OUTCOME_CONFLICT);
  cr_assert_eq(sluice_policy_release(f.pol, &rec,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = held.lease_id}),
               SLUICE_OK);
  d = decide(&f, &b);
  cr_assert_eq(d.allowed, 1);
  assert_binding(d, "tenant");
  cr_assert_eq(d.remaining, 55 - 30 - 10 - 1);

  sluice_clock_advance(f.clock, 10 * MIN);
  d = decide(&f, &exp);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(sluice_policy_release(f.pol, &exp,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  sluice_clock_advance(f.clock, 2 * SEC); /* the bucket refills */
  d = decide(&f, &exp);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  assert_binding(d, "exports_per_hour");

  for (i = 0; i < 5; i++)
    d = decide(&f, &auth);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                    .scope = SLUICE_SCOPE_KEY,
                                                    .who = "ops",
                                                    .why = "test"}),
               SLUICE_ENOTFOUND, "key A's 5 min box is over");
  fx_close(&f);
}

static void scenario(const char *store, unsigned flags) {
  scenario1(store, flags, 0);
  scenario1(store, flags, 1);
}

Test(policy_backends, mem) { scenario("mem", 0); }

Test(policy_backends, shm) {
  char spec[96];
  snprintf(spec, sizeof spec, "shm:name=/sluice-policy-%d;create=1",
           (int)getpid());
  scenario(spec, SLUICE_OPEN_CREATE);
  snprintf(spec, sizeof spec, "/dev/shm/sluice-policy-%d", (int)getpid());
  unlink(spec);
}

Test(policy_backends, lmdb) {
  char dir[] = "/tmp/sluice-policy-lmdb-XXXXXX", spec[96];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(spec, sizeof spec, "lmdb:path=%s;sync=nosync", dir);
  scenario(spec, SLUICE_OPEN_CREATE);
  cr_expect_eq(rmtree(dir), 0, "%s left behind", dir);
}

/* A tier the store cannot decide exactly is refused at open, naming the
** setting (redis: burst * period_ns up to 2^52: 100,000 points at one a
** minute is beyond it); mem takes it. */
static int open_wide_tier(const char *store, unsigned flags, char *err,
                          size_t errlen) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_policy_config *cfg;
  sluice_policy *p = NULL;
  int rc;
  cfg = cfg_new();
  cfg_set(cfg, "limits.tenant.params.growth.rate", 1);
  cfg_set_ns(cfg, "limits.tenant.params.growth.period_ms", 60 * SEC);
  cfg_set(cfg, "limits.tenant.params.growth.burst", 100000);
  memset(&lo, 0, sizeof lo);
  lo.store = store;
  lo.flags = flags;
  memset(&po, 0, sizeof po);
  po.limiter_options = &lo;
  po.config = cfg;
  po.errbuf = err;
  po.errlen = errlen;
  memset(po.secret, 3, sizeof po.secret);
  rc = sluice_policy_open(&po, &p);
  sluice_policy_close(p);
  return rc;
}

Test(policy_backends, a_tier_beyond_the_stores_range_on_mem_is_taken) {
  char err[256];
  cr_assert_eq(open_wide_tier("mem", 0, err, sizeof err), SLUICE_OK, "%s",
               err);
}

Test(policy_backends, redis) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  char spec[256], err[512];
  int rc;
  if (!nodes || !nodes[0])
    cr_skip_test("SLUICE_REDIS_NODES unset");
  /* A generous timeout: sanitizer builds are slow, and a timeout here
  ** would be a (correct) fail-closed answer, not the scenario. */
  snprintf(spec, sizeof spec, "redis:nodes=%s;timeout_ms=2000", nodes);
  rc = open_wide_tier(spec, SLUICE_OPEN_TESTCLOCK, err, sizeof err);
  cr_assert_eq(rc, SLUICE_ERANGE, "%s: %s", sluice_strerror(rc), err);
  cr_assert_not_null(strstr(err, "limits.tenant"), "%s", err);
  cr_assert_not_null(strstr(err, "2^52"), "%s", err);
  scenario(spec, SLUICE_OPEN_TESTCLOCK);
}

/*
** Heavy endpoints on a manual clock: per-ledger mutual exclusion for
** reconcile (a second reconcile on one ledger is a 409 with Retry-After),
** per-tenant concurrency leases per tier, the hourly export cap, lease
** release and renewal, and a dead worker's lease reclaimed by its TTL.  A
** denial consumes nothing: no tokens, no lease, no export slot.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

static sluice_request reconcile(const char *tenant, const char *tier,
                                const char *ledger) {
  return rq_reconcile(tenant, "key-1", tier, ledger);
}

static sluice_request export_(const char *tenant, const char *tier) {
  return rq_export(tenant, "key-1", tier, 0);
}

Test(policy_heavy, two_reconciles_on_one_ledger_give_one_conflict) {
  fixture f;
  sluice_request a = reconcile("acme", "growth", "ledger-A");
  sluice_request b = reconcile("acme", "growth", "ledger-B");
  sluice_request c = reconcile("acme", "growth", "ledger-C");
  sluice_decision d1, d2, d3, d4;
  fx_open(&f, NULL, 0);
  d1 = decide(&f, &a);
  cr_assert_eq(d1.allowed, 1);
  cr_assert_neq(d1.lease_id, 0);
  cr_assert_eq(d1.lease_ttl_ns, 15 * MIN);
  cr_assert_eq(d1.remaining, 1490);
  d2 = decide(&f, &a);
  cr_assert_eq(d2.outcome, SLUICE_OUTCOME_CONFLICT);
  cr_assert_eq(d2.status, 409);
  cr_assert_eq(d2.lease_id, 0);
  cr_assert_gt(d2.retry_after_ns, 0);
  cr_assert_leq(d2.retry_after_ns, 30 * SEC);
  cr_assert_not_null(fx_last(&f, SLUICE_EVENT_LEASE_DENIED));
  cr_assert_eq(fx_last(&f, SLUICE_EVENT_LEASE_DENIED)->outcome,
               SLUICE_OUTCOME_CONFLICT);
  {
    /* The event names its tenant as `sluice release`'s audit record does
    ** (a webhook groups by it): the policy's keyed id, not the name. */
    uint8_t secret[16];
    char want[SLUICE_SCOPE_ID_LEN + 1];
    for (int i = 0; i < 16; i++)
      secret[i] = (uint8_t)(i + 1);
    cr_assert_eq(sluice_scope_id(secret, "acme", 4, want), SLUICE_OK);
    cr_assert_str_eq(fx_last(&f, SLUICE_EVENT_LEASE_DENIED)->tenant_scope_id,
                     want);
  }
  /* The conflict took no tokens and no tenant slot. */
  d3 = decide(&f, &b);
  cr_assert_eq(d3.allowed, 1);
  cr_assert_eq(d3.remaining, 1480);
  cr_assert_neq(d3.lease_id, d1.lease_id);
  /* Growth runs 2 reconciles per tenant: the third is a concurrency 429. */
  d4 = decide(&f, &c);
  cr_assert_eq(d4.outcome, SLUICE_OUTCOME_CONCURRENCY);
  cr_assert_eq(d4.status, 429);
  /* Released in the handler's finally path: the ledger is free again. */
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d1.lease_id}),
               SLUICE_OK);
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d1.lease_id}),
               SLUICE_ENOTFOUND);
  cr_assert_eq(
      sluice_policy_release(
          f.pol, &a, &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = 0}),
      SLUICE_EINVAL);
  cr_assert_eq(decide(&f, &a).allowed, 1);
  /* Another tenant's ledgers are its own. */
  {
    sluice_request o = rq_reconcile("other", "k", "growth", "ledger-A");
    cr_assert_eq(decide(&f, &o).allowed, 1);
  }
  fx_close(&f);
}

Test(policy_heavy, concurrency_limits_follow_the_tier) {
  fixture f;
  char ledger[16];
  int i, ok;
  static const struct {
    const char *tier;
    int n;
  } want[] = {{"sandbox", 1}, {"growth", 2}, {"enterprise", 8}};
  fx_open(&f, NULL, 0);
  for (i = 0; i < 3; i++) {
    ok = 0;
    for (;;) {
      sluice_request r;
      sluice_decision d;
      snprintf(ledger, sizeof ledger, "l%d", ok);
      r = reconcile(want[i].tier, want[i].tier, ledger);
      d = decide(&f, &r);
      if (!d.allowed) {
        cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONCURRENCY);
        break;
      }
      ok++;
    }
    cr_assert_eq(ok, want[i].n, "%s", want[i].tier);
  }
  fx_close(&f);
}

Test(policy_heavy, dead_workers_lease_is_reclaimed_after_its_ttl) {
  fixture f;
  sluice_request a = reconcile("acme", "sandbox", "ledger-A");
  sluice_request b = reconcile("acme", "sandbox", "ledger-B");
  sluice_decision d, dead;
  fx_open(&f, NULL, 0);
  dead = decide(&f, &a); /* this worker dies and never releases */
  cr_assert_eq(dead.allowed, 1);
  d = decide(&f, &b);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONCURRENCY);
  sluice_clock_advance(f.clock, 15 * MIN - SEC);
  d = decide(&f, &b);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONCURRENCY);
  cr_assert_eq(d.retry_after_ns, SEC, "the slot frees in 1 s");
  sluice_clock_advance(f.clock, SEC);
  d = decide(&f, &b);
  cr_assert_eq(d.allowed, 1, "reclaimed at the TTL");
  cr_assert_eq(decide(&f, &a).allowed, 0, "b holds the one sandbox slot");
  /* The dead worker's late release learns its lease was reclaimed. */
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = dead.lease_id}),
               SLUICE_ENOTFOUND);
  fx_close(&f);
}

Test(policy_heavy, renew_keeps_a_long_job_leased) {
  fixture f;
  sluice_request a = reconcile("acme", "sandbox", "ledger-A");
  sluice_request b = reconcile("acme", "sandbox", "ledger-B");
  sluice_decision d;
  fx_open(&f, NULL, 0);
  d = decide(&f, &a);
  sluice_clock_advance(f.clock, 14 * MIN);
  cr_assert_eq(sluice_policy_renew(f.pol, &a,
                                   &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                  .lease_id = d.lease_id}),
               SLUICE_OK);
  sluice_clock_advance(f.clock, 2 * MIN);
  cr_assert_eq(decide(&f, &b).outcome, SLUICE_OUTCOME_CONCURRENCY);
  cr_assert_eq(decide(&f, &a).outcome, SLUICE_OUTCOME_CONFLICT,
               "the renewed lease still holds ledger A");
  fx_close(&f);
}

Test(policy_heavy, hourly_export_cap_per_tenant) {
  fixture f;
  sluice_request e = export_("acme", "sandbox");
  sluice_request std = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  fx_open(&f, NULL, 0);
  d = decide(&f, &e);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.cost, 25);
  cr_assert_eq(sluice_policy_release(f.pol, &e,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  d = decide(&f, &e);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(sluice_policy_release(f.pol, &e,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  sluice_clock_advance(f.clock, 10 * MIN);
  d = decide(&f, &e);
  /* A declared cap's refusal is THROTTLED, naming the cap. */
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED, "sandbox: 2 per hour");
  assert_binding(d, "exports_per_hour");
  cr_assert_eq(d.status, 429);
  cr_assert_eq(d.retry_after_ns, 50 * MIN);
  cr_assert_eq(d.lease_id, 0);
  /* The denied export took no tokens: the bucket refilled in those 10
  ** min, and only this request's point is gone. */
  cr_assert_eq(decide(&f, &std).remaining, 299);
  /* ... and no lease: the next hour's export gets the sandbox's slot. */
  sluice_clock_advance(f.clock, 50 * MIN);
  d = decide(&f, &e);
  cr_assert_eq(d.allowed, 1);
  fx_close(&f);
}

Test(policy_heavy, concurrent_exports_per_tier) {
  fixture f;
  sluice_request e = export_("acme", "sandbox");
  sluice_request g = export_("bigco", "enterprise");
  sluice_decision d;
  int i;
  fx_open(&f, NULL, 0);
  d = decide(&f, &e);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(decide(&f, &e).outcome, SLUICE_OUTCOME_CONCURRENCY);
  for (i = 0; i < 3; i++)
    cr_assert_eq(decide(&f, &g).allowed, 1);
  cr_assert_eq(decide(&f, &g).outcome, SLUICE_OUTCOME_CONCURRENCY);
  cr_assert_geq(fx_count(&f, SLUICE_EVENT_LEASE_DENIED), 2);
  fx_close(&f);
}

Test(policy_heavy, a_throttled_heavy_request_takes_no_lease) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request a = reconcile("acme", "sandbox", "ledger-A");
  sluice_decision d;
  cfg = cfg_new();
  cfg_set(cfg, "routes.[2].limits.[0].cost", 15); /* export */
  cfg_set(cfg, "limits.key.burst", 15); /* one reconcile (10), not two */
  fx_open(&f, cfg, 0);
  d = decide(&f, &a);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  d = decide(&f, &a);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(d.lease_id, 0);
  /* Neither the ledger nor the sandbox's single slot is held. */
  sluice_clock_advance(f.clock, 2 * SEC);
  d = decide(&f, &a);
  cr_assert_eq(d.allowed, 1);
  fx_close(&f);
}

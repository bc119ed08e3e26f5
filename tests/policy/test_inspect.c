/*
** sluice_policy_inspect() reports the state decisions left: decide some
** requests on a manual clock (allowed, throttled, struck, boxed, a
** reconcile holding its lease and ledger lock, an export, auth failures up
** to a box), then check the report figure by figure against the decisions'
** own answers.  A report read under another key or computed with other
** parameters than the decisions' disagrees (a fresh record, another burst).
*/
#include <criterion/criterion.h>
#include <string.h>

#include "helpers.h"

static sluice_inspect_report inspect(fixture *f, const sluice_inspect_query *q) {
  sluice_inspect_report r;
  cr_assert_eq(sluice_policy_inspect(f->pol, q, &r), SLUICE_OK);
  cr_assert_eq(r.now_ns, sluice_limiter_now(f->lim));
  cr_assert_eq(r.unfit, 0u);
  return r;
}

static sluice_inspect_query key_q(const char *tenant, const char *key,
                                  const char *tier, const char *ledger) {
  sluice_inspect_query q;
  memset(&q, 0, sizeof q);
  q.scope = SLUICE_SCOPE_KEY;
  q.tenant_id = tenant;
  q.api_key_id = key;
  q.tier = tier;
  q.ledger_id = ledger;
  return q;
}

Test(policy_inspect, buckets_strikes_and_box_are_the_decisions) {
  sluice_policy_config *cfg;
  sluice_inspect_query q = key_q("acme", "key-1", "growth", NULL);
  sluice_request rq = rq_std("acme", "key-1", "growth");
  sluice_inspect_report r;
  sluice_decision d;
  fixture f;
  int i;
  cfg = cfg_new();
  cfg_set(cfg, "costs.reconcile", 5);
  cfg_set(cfg, "costs.export", 5);
  cfg_set(cfg, "costs.export_long", 5);
  cfg_set(cfg, "tiers.growth.tenant.rate", 1);
  cfg_set(cfg, "tiers.growth.tenant.burst", 10);
  cfg_set(cfg, "tiers.growth.key.rate", 1);
  cfg_set(cfg, "tiers.growth.key.burst", 6);
  cfg_set(cfg, "tiers.growth.strikes", 3);
  fx_open(&f, cfg, 0);

  /* Nothing stored yet: full buckets, nothing found. */
  r = inspect(&f, &q);
  cr_assert_eq(r.present, 0u);
  cr_assert_eq(r.key_bucket.remaining, 6);
  cr_assert_eq(r.tenant_bucket.remaining, 10);
  cr_assert_eq(r.key_bucket.burst, 6);
  cr_assert_eq(r.tenant_bucket.burst, 10);
  cr_assert_eq(r.strike_threshold, 3);

  for (i = 0; i < 4; i++)
    d = decide(&f, &rq);
  cr_assert_eq(d.allowed, 1);
  r = inspect(&f, &q);
  cr_assert(r.present & SLUICE_INSPECT_KEY_BUCKET);
  cr_assert(r.present & SLUICE_INSPECT_TENANT_BUCKET);
  cr_assert_eq(r.key_bucket.remaining, d.remaining);
  cr_assert_eq(r.key_bucket.reset_ns, d.reset_ns);
  cr_assert_eq(r.tenant_bucket.remaining, 10 - 4);
  cr_assert_eq(r.level, 0);
  cr_assert_eq(r.strikes, 0);
  cr_assert_eq(r.notice_until_ns, 0);

  /* Throttled: the bucket is empty and the Retry-After notice is live. */
  while ((d = decide(&f, &rq)).allowed)
    ;
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  r = inspect(&f, &q);
  cr_assert_eq(r.key_bucket.remaining, 0);
  cr_assert(r.present & SLUICE_INSPECT_NOTICE);
  cr_assert_eq(r.notice_until_ns, r.now_ns + d.retry_after_ns);

  /* A retry before the Retry-After is a strike. */
  d = decide(&f, &rq);
  cr_assert(d.flags & SLUICE_DECISION_STRIKE);
  r = inspect(&f, &q);
  cr_assert_eq(r.strikes, 3 - d.strikes_remaining);
  cr_assert_eq(r.strikes, 1);

  /* Strikes up to the threshold: boxed at level 1. */
  while ((d = decide(&f, &rq)).outcome != SLUICE_OUTCOME_BOXED)
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  r = inspect(&f, &q);
  cr_assert(r.present & SLUICE_INSPECT_BOX);
  cr_assert_eq(r.level, d.penalty_level);
  cr_assert_eq(r.level, 1);
  cr_assert_eq(r.suspended, 0);
  cr_assert_eq(r.box_end_ns, d.lockout_end_ns);
  cr_assert_eq(r.offenses, 1);
  cr_assert_eq(r.strikes, 0);

  /* Inspecting changed nothing: the same report twice. */
  {
    sluice_inspect_report r2 = inspect(&f, &q);
    cr_assert_eq(memcmp(&r, &r2, sizeof r), 0);
  }
  fx_close(&f);
}

Test(policy_inspect, leases_ledger_lock_and_export_cap) {
  sluice_inspect_query q = key_q("acme", "key-1", "growth", "ledger-A");
  sluice_request rc = rq_class("acme", "key-1", "growth", SLUICE_EP_RECONCILE);
  sluice_request ex = rq_class("acme", "key-1", "growth", SLUICE_EP_EXPORT);
  sluice_inspect_report r;
  sluice_decision d, dx;
  fixture f;
  int i, found = 0;
  rc.ledger_id = "ledger-A";
  fx_open(&f, NULL, 0);
  d = decide(&f, &rc);
  cr_assert_neq(d.lease_id, 0);
  dx = decide(&f, &ex);
  cr_assert_neq(dx.lease_id, 0);
  r = inspect(&f, &q);
  cr_assert_eq(r.ledger_lease, d.lease_id);
  cr_assert_eq(r.ledger_until_ns, r.now_ns + d.lease_ttl_ns);
  cr_assert_eq(r.reconcile.slots, 2); /* growth's reconcile concurrency */
  cr_assert_eq(r.reconcile.held, 1);
  for (i = 0; i < r.reconcile.slots; i++)
    found += r.reconcile.id[i] == d.lease_id;
  cr_assert_eq(found, 1);
  cr_assert_eq(r.export_.slots, 1);
  cr_assert_eq(r.export_.held, 1);
  cr_assert_eq(r.export_.id[0], dx.lease_id);
  cr_assert_eq(r.export_.until_ns[0], r.now_ns + dx.lease_ttl_ns);
  cr_assert_eq(r.exports_used, 1);
  cr_assert_eq(r.exports_limit, 10);
  cr_assert(r.present & SLUICE_INSPECT_EXPORT_CAP);
  /* The tenant bucket paid both requests' costs. */
  cr_assert_eq(r.tenant_bucket.remaining,
               3000 - cfg_int(sluice_policy_config_of(f.pol), "costs.reconcile") -
                   cfg_int(sluice_policy_config_of(f.pol), "costs.export"));

  cr_assert_eq(sluice_policy_release_lease(f.pol, &rc, d.lease_id), SLUICE_OK);
  r = inspect(&f, &q);
  cr_assert_eq(r.ledger_lease, 0);
  cr_assert_eq(r.reconcile.held, 0);
  cr_assert_eq(r.export_.held, 1);
  fx_close(&f);
}

Test(policy_inspect, auth_failures_and_box) {
  sluice_request a = rq_auth("10.0.0.9", "alice", SLUICE_AUTH_BAD_SECRET);
  sluice_inspect_query qi, qs;
  sluice_inspect_report ri, rs;
  const sluice_policy_config *c;
  sluice_decision d;
  fixture f;
  int n = 0;
  fx_open(&f, NULL, 0);
  c = sluice_policy_config_of(f.pol);
  memset(&qi, 0, sizeof qi);
  qi.scope = SLUICE_SCOPE_IP;
  qi.client_ip = "10.0.0.9";
  memset(&qs, 0, sizeof qs);
  qs.scope = SLUICE_SCOPE_SUBJECT;
  qs.auth_subject = "alice";
  d = decide(&f, &a);
  n++;
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_ALLOW);
  d = decide(&f, &a);
  n++;
  ri = inspect(&f, &qi);
  rs = inspect(&f, &qs);
  cr_assert_eq(ri.failures, n);
  cr_assert_eq(ri.failures_limit, cfg_int(c, "auth.ip_failures"));
  cr_assert_eq(ri.stuffing_failures, n);
  cr_assert_eq(rs.failures, n);
  cr_assert_eq(rs.failures_limit, cfg_int(c, "auth.subject_failures"));
  cr_assert_eq(d.strikes_remaining,
               rs.failures_limit - rs.failures < ri.failures_limit - ri.failures
                   ? rs.failures_limit - rs.failures
                   : ri.failures_limit - ri.failures);
  cr_assert_eq(ri.level, 0);
  cr_assert_eq(rs.level, 0);
  while ((d = decide(&f, &a)).outcome == SLUICE_OUTCOME_ALLOW)
    ;
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  ri = inspect(&f, &qi);
  rs = inspect(&f, &qs);
  cr_assert(rs.present & SLUICE_INSPECT_BOX);
  cr_assert_eq(d.lockout_end_ns,
               ri.box_end_ns > rs.box_end_ns ? ri.box_end_ns : rs.box_end_ns);
  cr_assert_eq(d.penalty_level,
               ri.box_end_ns > rs.box_end_ns ? ri.level : rs.level);
  cr_assert_eq(rs.offenses, 1);
  fx_close(&f);
}

Test(policy_inspect, bad_queries) {
  sluice_inspect_query q = key_q("acme", "key-1", "nope", NULL);
  sluice_inspect_report r;
  fixture f;
  fx_open(&f, NULL, 0);
  cr_assert_eq(sluice_policy_inspect(f.pol, &q, &r), SLUICE_ENOTFOUND);
  q.tier = NULL;
  cr_assert_eq(sluice_policy_inspect(f.pol, &q, &r), SLUICE_EINVAL);
  q.tier = "growth";
  q.api_key_id = "";
  cr_assert_eq(sluice_policy_inspect(f.pol, &q, &r), SLUICE_EKEY);
  q.api_key_id = "k";
  q.reserved[0] = &r;
  cr_assert_eq(sluice_policy_inspect(f.pol, &q, &r), SLUICE_EINVAL);
  q.reserved[0] = NULL;
  q.scope = 0;
  cr_assert_eq(sluice_policy_inspect(f.pol, &q, &r), SLUICE_EINVAL);
  q.scope = SLUICE_SCOPE_IP;
  cr_assert_eq(sluice_policy_inspect(f.pol, &q, &r), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_inspect(NULL, &q, &r), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_inspect(f.pol, NULL, &r), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_inspect(f.pol, &q, NULL), SLUICE_EINVAL);
  fx_close(&f);
}

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
                                  const char *tier) {
  sluice_inspect_query q;
  memset(&q, 0, sizeof q);
  q.scope = SLUICE_SCOPE_KEY;
  q.tenant_id = tenant;
  q.api_key_id = key;
  q.tier = tier;
  return q;
}

/* A declared limit's state for the scope of request r. */
static sluice_limit_state limit_of(fixture *f, const char *limit,
                                   const sluice_request *r) {
  sluice_limit_state st;
  const char *field = NULL;
  int rc = inspect_limit(f->pol, limit, r, &st, &field);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s (%s)", limit, sluice_strerror(rc),
               field ? field : "-");
  cr_assert_eq(st.unfit, 0);
  return st;
}

/* The ledger file with growth's buckets small (tenant 10, key 6, each a
** point a second) and heavy requests costing 5: a few requests reach them. */
static sluice_policy_config *small_growth(void) {
  sluice_policy_config *cfg = cfg_new();
  cfg_set(cfg, "routes.[1].limits.[0].cost", 5);
  cfg_set(cfg, "routes.[2].limits.[0].cost", 5);
  cfg_set(cfg, "limits.tenant.params.growth.rate", 1);
  cfg_set(cfg, "limits.tenant.params.growth.burst", 10);
  cfg_set(cfg, "limits.key.params.growth.rate", 1);
  cfg_set(cfg, "limits.key.params.growth.burst", 6);
  return cfg;
}

/* The buckets as the decisions left them, read by the declared limits'
** inspection. */
Test(policy_inspect, buckets_are_the_decisions) {
  sluice_policy_config *cfg;
  sluice_request rq = rq_std("acme", "key-1", "growth");
  sluice_limit_state k, t;
  sluice_decision d;
  fixture f;
  int i;
  cfg = small_growth();
  fx_open(&f, cfg, 0);
  k = limit_of(&f, "key", &rq);
  t = limit_of(&f, "tenant", &rq);
  cr_assert_eq(k.present, 0);
  cr_assert_eq(t.present, 0);
  cr_assert_eq(k.remaining, 6);
  cr_assert_eq(t.remaining, 10);
  cr_assert_eq(k.quota, 6);
  cr_assert_eq(t.quota, 10);
  for (i = 0; i < 4; i++)
    d = decide(&f, &rq);
  cr_assert_eq(d.allowed, 1);
  k = limit_of(&f, "key", &rq);
  t = limit_of(&f, "tenant", &rq);
  cr_assert_eq(k.present, 1);
  cr_assert_eq(t.present, 1);
  cr_assert_eq(k.remaining, d.remaining);
  cr_assert_eq(k.reset_ns, d.reset_ns);
  cr_assert_eq(t.remaining, 10 - 4);
  while ((d = decide(&f, &rq)).allowed)
    ;
  k = limit_of(&f, "key", &rq);
  cr_assert_eq(k.remaining, 0);
  /* Inspecting changed nothing: the same state twice. */
  {
    sluice_limit_state k2 = limit_of(&f, "key", &rq);
    cr_assert_eq(memcmp(&k, &k2, sizeof k), 0);
  }
  fx_close(&f);
}

Test(policy_inspect, strikes_and_box_are_the_decisions) {
  sluice_policy_config *cfg;
  sluice_inspect_query q = key_q("acme", "key-1", "growth");
  sluice_request rq = rq_std("acme", "key-1", "growth");
  sluice_inspect_report r;
  sluice_decision d;
  fixture f;
  int i;
  cfg = small_growth();
  cfg_set(cfg, "penalties.keys.params.growth.strikes", 3);
  fx_open(&f, cfg, 0);

  /* Nothing stored yet: nothing found. */
  r = inspect(&f, &q);
  cr_assert_eq(r.strike_threshold, 3);

  for (i = 0; i < 4; i++)
    d = decide(&f, &rq);
  cr_assert_eq(d.allowed, 1);
  r = inspect(&f, &q);
  cr_assert_eq(r.level, 0);
  cr_assert_eq(r.strikes, 0);
  cr_assert_eq(r.notice_until_ns, 0);

  /* Throttled: the bucket is empty and the Retry-After notice is live. */
  while ((d = decide(&f, &rq)).allowed)
    ;
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  r = inspect(&f, &q);
  cr_assert_eq(limit_of(&f, "key", &rq).remaining, 0);
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
  sluice_request rc = rq_reconcile("acme", "key-1", "growth", "ledger-A");
  sluice_request ex = rq_export("acme", "key-1", "growth", 0);
  sluice_limit_state lock, rec, exp, cap, ten;
  sluice_decision d, dx;
  fixture f;
  fx_open(&f, NULL, 0);
  d = decide(&f, &rc);
  cr_assert_neq(d.lease_id, 0);
  dx = decide(&f, &ex);
  cr_assert_neq(dx.lease_id, 0);
  lock = limit_of(&f, "ledger_lock", &rc);
  cr_assert_eq(lock.held, 1);
  cr_assert_eq(lock.reset_ns, d.lease_ttl_ns);
  rec = limit_of(&f, "reconciles", &rc);
  cr_assert_eq(rec.quota, 2); /* growth's reconcile concurrency */
  cr_assert_eq(rec.held, 1);
  cr_assert_eq(rec.remaining, 1);
  exp = limit_of(&f, "exports", &ex);
  cr_assert_eq(exp.quota, 1);
  cr_assert_eq(exp.held, 1);
  cr_assert_eq(exp.reset_ns, dx.lease_ttl_ns);
  cap = limit_of(&f, "exports_per_hour", &ex);
  cr_assert_eq(cap.quota, 10);
  cr_assert_eq(cap.remaining, 9);
  cr_assert_eq(cap.present, 1);
  /* The tenant bucket paid both requests' costs. */
  ten = limit_of(&f, "tenant", &rc);
  cr_assert_eq(ten.remaining, 3000 - 10 - 25);

  cr_assert_eq(sluice_policy_release(f.pol, &rc,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  cr_assert_eq(limit_of(&f, "ledger_lock", &rc).held, 0);
  cr_assert_eq(limit_of(&f, "reconciles", &rc).held, 0);
  cr_assert_eq(limit_of(&f, "exports", &ex).held, 1);
  fx_close(&f);
}

/* A sign-in's two boxes, the address's (penalties.address) and the
** subject's (penalties.subject): their failures and their box. */
Test(policy_inspect, auth_failures_and_box) {
  sluice_request a = rq_signin("10.0.0.9", "alice", "bad_secret");
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
  cr_assert_eq(ri.failures, n);
  cr_assert_eq(ri.failures_limit, cfg_int(c, "penalties.address.strikes"));
  cr_assert_eq(ri.stuffing_failures, n);
  cr_assert_eq(d.strikes_remaining,
               cfg_int(c, "penalties.subject.strikes") - n);
  cr_assert_eq(ri.level, 0);
  rs = inspect(&f, &qs);
  cr_assert_eq(rs.failures, n);
  cr_assert_eq(rs.failures_limit, cfg_int(c, "penalties.subject.strikes"));
  cr_assert_eq(rs.level, 0);
  cr_assert_eq(rs.present & SLUICE_INSPECT_STUFFING, 0, "no stuffing window");
  cr_assert_str_neq(rs.scope_id, ri.scope_id);
  while ((d = decide(&f, &a)).outcome == SLUICE_OUTCOME_ALLOW)
    ;
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  ri = inspect(&f, &qi);
  cr_assert_eq(ri.failures, n + 3, "the subject's 5th failure boxes it");
  cr_assert_eq(ri.level, 0, "the address is not boxed");
  rs = inspect(&f, &qs);
  cr_assert_eq(rs.level, 1, "the subject is");
  cr_assert(rs.present & SLUICE_INSPECT_BOX);
  cr_assert_eq(rs.box_end_ns, d.lockout_end_ns);
  fx_close(&f);
}

Test(policy_inspect, bad_queries) {
  sluice_request q = rq_std("acme", "key-1", "growth");
  sluice_limit_state st;
  const char *field = NULL;
  fixture f;
  fx_open(&f, NULL, 0);
  cr_assert_eq(inspect_limit(f.pol, "nope", &q, &st, &field), SLUICE_ENOTFOUND);
  q.api_key_id = "";
  cr_assert_eq(inspect_limit(f.pol, "key", &q, &st, &field), SLUICE_EKEY);
  cr_assert_str_eq(field, "key");
  q.api_key_id = NULL;
  cr_assert_eq(inspect_limit(f.pol, "key", &q, &st, &field), SLUICE_EINVAL);
  cr_assert_str_eq(field, "key");
  q.api_key_id = "k";
  cr_assert_eq(inspect_limit(f.pol, "ledger_lock", &q, &st, &field),
               SLUICE_EINVAL, "no ledger");
  cr_assert_str_eq(field, "ledger");
  cr_assert_eq(inspect_limit(NULL, "key", &q, &st, NULL), SLUICE_EINVAL);
  cr_assert_eq(inspect_limit(f.pol, "key", NULL, &st, NULL), SLUICE_EINVAL);
  {
    /* One of limit, penalty or scope, and somewhere to put it. */
    sluice_inspect_query iq = {0};
    sluice_inspect_report r;
    iq.limit = "key";
    iq.req = &q;
    cr_assert_eq(sluice_policy_inspect(f.pol, &iq, NULL), SLUICE_EINVAL);
    iq.scope = SLUICE_SCOPE_KEY;
    cr_assert_eq(sluice_policy_inspect(f.pol, &iq, &r), SLUICE_EINVAL);
    iq.scope = 0;
    iq.penalty = "abuse";
    cr_assert_eq(sluice_policy_inspect(f.pol, &iq, &r), SLUICE_EINVAL);
    iq.limit = iq.penalty = NULL;
    cr_assert_eq(sluice_policy_inspect(f.pol, &iq, &r), SLUICE_EINVAL);
    iq.limit = "key";
    cr_assert_eq(sluice_policy_inspect(f.pol, &iq, &r), SLUICE_OK);
    cr_assert_null(r.invalid_field);
    cr_assert_eq(r.now_ns, r.limit.now_ns);
  }
  fx_close(&f);
}

/* An unknown tier is refused by inspection as sluice_policy_decide()
** refuses it (SLUICE_ENOTFOUND "tier"). */
Test(policy_inspect, an_unknown_tier_is_not_found) {
  sluice_request q = rq_std("acme", "key-1", "nope");
  sluice_limit_state st;
  sluice_decision d;
  fixture f;
  fx_open(&f, NULL, 0);
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &q, &d, NULL), SLUICE_ENOTFOUND);
  cr_assert_eq(inspect_limit(f.pol, "key", &q, &st, NULL), SLUICE_ENOTFOUND);
  fx_close(&f);
}

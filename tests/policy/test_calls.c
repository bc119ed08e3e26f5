/*
** Store calls per decision, counted by the fixture's wrapping store (every
** xRun is one call): a tenant request of any class and any
** outcome is exactly one call, a lease release or renewal one, an auth
** request one per scope it touches (subject, IP).  A decision that took
** more calls could half-happen: these counts are what makes it atomic.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "helpers.h"

/* The calls one decision made, with its outcome checked. */
static int64_t calls_of(fixture *f, const sluice_request *r, int outcome,
                        sluice_decision *out) {
  int64_t before = fx_calls(f);
  sluice_decision d = decide(f, r);
  cr_assert_eq(d.outcome, outcome, "outcome %s, expected %s",
               sluice_name(SLUICE_NAME_OUTCOME, d.outcome),
               sluice_name(SLUICE_NAME_OUTCOME, outcome));
  if (out)
    *out = d;
  return fx_calls(f) - before;
}

static sluice_request reconcile(const char *ledger) {
  return rq_reconcile("acme", "key-1", "sandbox", ledger);
}

Test(policy_calls, standard_allowed_throttled_struck_boxed) {
  fixture f;
  sluice_policy_config *cfg;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  int i;
  cfg = cfg_new();
  cfg_set(cfg, "penalties.keys.strikes", 2);
  fx_open(&f, cfg, 0);
  for (i = 0; i < cfg_int(cfg, "limits.key.burst"); i++)
    cr_assert_eq(calls_of(&f, &r, SLUICE_OUTCOME_ALLOW, NULL), 1);
  /* Throttled: the notice is left in the same call. */
  cr_assert_eq(calls_of(&f, &r, SLUICE_OUTCOME_THROTTLED, &d), 1);
  cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0);
  /* Back too early: a strike, in the same call. */
  cr_assert_eq(calls_of(&f, &r, SLUICE_OUTCOME_THROTTLED, &d), 1);
  cr_assert_neq(d.flags & SLUICE_DECISION_STRIKE, 0);
  /* The second strike trips the box: still one call. */
  cr_assert_eq(calls_of(&f, &r, SLUICE_OUTCOME_BOXED, &d), 1);
  cr_assert_neq(d.flags & SLUICE_DECISION_TRIPPED, 0);
  /* Boxed. */
  cr_assert_eq(calls_of(&f, &r, SLUICE_OUTCOME_BOXED, NULL), 1);
  fx_close(&f);
}

Test(policy_calls, reconcile_allowed_conflict_concurrency) {
  fixture f;
  sluice_request a = reconcile("A");
  sluice_request b = reconcile("B");
  sluice_decision d, d2;
  int64_t before;
  fx_open(&f, NULL, 0);
  cr_assert_eq(calls_of(&f, &a, SLUICE_OUTCOME_ALLOW, &d), 1);
  cr_assert_neq(d.lease_id, 0);
  cr_assert_eq(calls_of(&f, &a, SLUICE_OUTCOME_CONFLICT, &d2), 1);
  /* Sandbox runs one reconcile at a time. */
  cr_assert_eq(calls_of(&f, &b, SLUICE_OUTCOME_CONCURRENCY, &d2), 1);
  assert_binding(d2, "reconciles");
  {
    sluice_limit_state st; /* the key's bucket, read without a call count */
    cr_assert_eq(inspect_limit(f.pol, "key", &b, &st, NULL), SLUICE_OK);
    cr_assert_eq(st.remaining, d.remaining, "the denials charged nothing");
  }
  before = fx_calls(&f);
  cr_assert_eq(sluice_policy_renew(f.pol, &a,
                                   &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                  .lease_id = d.lease_id}),
               SLUICE_OK);
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  cr_assert_eq(fx_calls(&f) - before, 2, "slots + ledger lock: one call each");
  cr_assert_eq(calls_of(&f, &b, SLUICE_OUTCOME_ALLOW, NULL), 1);
  fx_close(&f);
}

Test(policy_calls, export_allowed_cap_concurrency) {
  fixture f;
  sluice_request e = rq_export("acme", "key-1", "sandbox", 0);
  sluice_decision d;
  fx_open(&f, NULL, 0);
  cr_assert_eq(calls_of(&f, &e, SLUICE_OUTCOME_ALLOW, &d), 1);
  cr_assert_eq(calls_of(&f, &e, SLUICE_OUTCOME_CONCURRENCY, NULL), 1);
  cr_assert_eq(sluice_policy_release(f.pol, &e,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  cr_assert_eq(calls_of(&f, &e, SLUICE_OUTCOME_ALLOW, &d), 1);
  cr_assert_eq(sluice_policy_release(f.pol, &e,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  /* Sandbox: 2 exports an hour. */
  cr_assert_eq(calls_of(&f, &e, SLUICE_OUTCOME_THROTTLED, &d), 1);
  assert_binding(d, "exports_per_hour");
  fx_close(&f);
}

Test(policy_calls, heavy_throttled) {
  fixture f;
  sluice_policy_config *cfg;
  sluice_request a = reconcile("A");
  sluice_decision d;
  cfg = cfg_new();
  cfg_set(cfg, "routes.[2].limits.[0].cost", 15);
  cfg_set(cfg, "limits.key.burst", 15); /* one reconcile (10), not two */
  fx_open(&f, cfg, 0);
  cr_assert_eq(calls_of(&f, &a, SLUICE_OUTCOME_ALLOW, &d), 1);
  cr_assert_eq(sluice_policy_release(f.pol, &a,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  cr_assert_eq(calls_of(&f, &a, SLUICE_OUTCOME_THROTTLED, NULL), 1);
  fx_close(&f);
}

Test(policy_calls, auth_one_call_per_scope) {
  fixture f;
  sluice_request ok = rq_signin("10.0.0.1", "alice", "ok");
  sluice_request bad = rq_signin("10.0.0.1", "alice", "bad_secret");
  sluice_request anon = rq_signin("10.0.0.1", NULL, NULL);
  sluice_decision d;
  int i, tripped = 0;
  fx_open(&f, NULL, 0);
  cr_assert_eq(calls_of(&f, &ok, SLUICE_OUTCOME_ALLOW, NULL), 2);
  /* Failures until a box trips: every one two calls, the trip included. */
  for (i = 0; i < 50 && !tripped; i++) {
    int64_t before = fx_calls(&f);
    d = decide(&f, &bad);
    cr_assert_eq(fx_calls(&f) - before, 2, "failure %d", i);
    tripped = (d.flags & SLUICE_DECISION_TRIPPED) != 0;
  }
  cr_assert(tripped, "the failures tripped a box");
  cr_assert_eq(calls_of(&f, &bad, SLUICE_OUTCOME_BOXED, NULL), 2);
  anon.client_ip = "10.0.0.2";
  cr_assert_eq(calls_of(&f, &anon, SLUICE_OUTCOME_ALLOW, NULL), 1, "IP only");
  fx_close(&f);
}

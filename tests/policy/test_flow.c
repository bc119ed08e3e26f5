/*
** Scenario tests of the tenant request flow on a manual clock: tiers and
** costs, tenant + key buckets (the stricter wins, a denial consumes from
** neither), strikes only for clients that ignore Retry-After, the penalty
** ladder L1 -> L2 -> L3 and its 24 h offense memory, enterprise paging,
** manual release and lift, shadow mode, input errors and metrics.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

/* Hammer one key at one instant until a request trips its box. */
static sluice_decision trip_once(fixture *f, const sluice_request *r) {
  int i;
  for (i = 0; i < 40000; i++) {
    sluice_decision d = decide(f, r);
    if (d.flags & SLUICE_DECISION_TRIPPED)
      return d;
    cr_assert(d.outcome == SLUICE_OUTCOME_ALLOW ||
                  d.outcome == SLUICE_OUTCOME_THROTTLED,
              "unexpected outcome %s before the trip",
              sluice_name(SLUICE_NAME_OUTCOME, d.outcome));
  }
  cr_assert_fail("no trip after 40000 requests");
  return decide(f, r);
}

Test(policy_flow, growth_standard_request_is_bound_by_the_key_bucket) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_decision d;
  fx_open(&f, NULL, 0);
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.status, 200);
  cr_assert_eq(d.cost, 1);
  cr_assert_str_eq(d.tier, "growth");
  /* Key bucket 25/s, 1500 is stricter than the tenant's 50/s, 3000. */
  assert_binding(d, "key");
  cr_assert_eq(d.limit, 1500);
  cr_assert_eq(d.remaining, 1499);
  cr_assert_eq(d.policy_window_ns, 60 * SEC);
  cr_assert_eq(d.refill_rate, 25);
  cr_assert_eq(d.refill_period_ns, SEC);
  cr_assert_eq(d.reset_ns, SEC / 25);
  cr_assert_eq(d.penalty_status, SLUICE_PENALTY_NONE);
  cr_assert_eq(d.strikes_remaining, 20);
  cr_assert_eq(d.now_ns, T0);
  fx_close(&f);
}

Test(policy_flow, endpoint_costs_follow_the_route_table) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "enterprise");
  sluice_decision d;
  fx_open(&f, NULL, 0);
  r = rq_reconcile("acme", "key-1", "enterprise", "ledger-9");
  d = decide(&f, &r);
  cr_assert_eq(d.cost, 10);
  cr_assert_neq(d.lease_id, 0);
  /* exactly 90 days: not beyond */
  r = rq_export("acme", "key-1", "enterprise", 90 * 86400);
  r.route = "/v1/reports/audit-export?from=2026-01-01";
  d = decide(&f, &r);
  cr_assert_eq(d.cost, 25);
  cr_assert_neq(d.lease_id, 0);
  r = rq_export("acme", "key-1", "enterprise", 90 * 86400 + 1);
  d = decide(&f, &r);
  cr_assert_eq(d.cost, 50);
  r = rq_std("acme", "key-1", "enterprise");
  r.route = "/v1/jobs/42";
  d = decide(&f, &r);
  cr_assert_eq(d.cost, 1);
  cr_assert_eq(d.lease_id, 0);
  r.method = "POST";
  r.route = "/v1/ledgers/l1/entries";
  d = decide(&f, &r);
  cr_assert_eq(d.cost, 1);
  cr_assert_eq(d.lease_id, 0);
  fx_close(&f);
}

Test(policy_flow, an_export_without_a_range_costs_25) {
  fixture f;
  sluice_request r = rq_export("acme", "key-1", "growth", 0);
  sluice_decision d;
  fx_open(&f, NULL, 0);
  r.attrs = NULL; /* no export_range_s */
  r.nattrs = 0;
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.cost, 25);
  cr_assert_neq(d.lease_id, 0);
  fx_close(&f);
}

Test(policy_flow, stricter_bucket_wins_and_a_denial_consumes_from_neither) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request a = rq_std("acme", "key-a", "growth");
  sluice_request b = rq_std("acme", "key-b", "growth");
  sluice_request c = rq_std("acme", "key-c", "growth");
  sluice_decision d;
  int i;
  cfg = cfg_new();
  /* Heavy costs must fit the smallest bucket: set before the buckets. */
  cfg_set(cfg, "routes.[1].limits.[0].cost", 5); /* reconcile */
  cfg_set(cfg, "routes.[2].limits.[0].cost", 5); /* export */
  cfg_set(cfg, "limits.tenant.params.growth.rate", 1);
  cfg_set(cfg, "limits.tenant.params.growth.burst", 10);
  cfg_set(cfg, "limits.key.params.growth.rate", 1);
  cfg_set(cfg, "limits.key.params.growth.burst", 6);
  fx_open(&f, cfg, 0);
  for (i = 0; i < 6; i++) {
    d = decide(&f, &a);
    cr_assert_eq(d.allowed, 1);
    assert_binding(d, "key");
  }
  for (i = 0; i < 5; i++) {
    d = decide(&f, &a);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
    assert_binding(d, "key");
    cr_assert_eq(d.status, 429);
  }
  /* Key A's denials took nothing from the tenant: 4 points are left. */
  for (i = 0; i < 4; i++) {
    d = decide(&f, &b);
    cr_assert_eq(d.allowed, 1, "request %d of key B", i);
  }
  assert_binding(d, "tenant");
  cr_assert_eq(d.remaining, 0);
  d = decide(&f, &b);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  assert_binding(d, "tenant");
  cr_assert_eq(d.retry_after_ns, SEC);
  /* A fresh key is bound by the empty tenant; its denial takes nothing
  ** from its own bucket either: after 6 s it can spend its full 6. */
  d = decide(&f, &c);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  assert_binding(d, "tenant");
  sluice_clock_advance(f.clock, 6 * SEC);
  for (i = 0; i < 6; i++)
    cr_assert_eq(decide(&f, &c).allowed, 1, "request %d of key C", i);
  cr_assert_eq(decide(&f, &c).outcome, SLUICE_OUTCOME_THROTTLED);
  fx_close(&f);
}

Test(policy_flow, honest_client_that_waits_out_retry_after_never_strikes) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  int i, denials = 0;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 300; i++)
    cr_assert_eq(decide(&f, &r).allowed, 1);
  for (i = 0; i < 2000; i++) {
    d = decide(&f, &r);
    cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0, "strike at %d", i);
    cr_assert_eq(d.strikes_remaining, 20);
    cr_assert(d.outcome == SLUICE_OUTCOME_ALLOW ||
              d.outcome == SLUICE_OUTCOME_THROTTLED);
    if (!d.allowed) {
      denials++;
      cr_assert_gt(d.retry_after_ns, 0);
      sluice_clock_advance(f.clock, d.retry_after_ns);
    }
  }
  cr_assert_geq(denials, 900, "the client must really have been throttled");
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 0);
  fx_close(&f);
}

Test(policy_flow, a_retry_before_retry_after_is_a_strike) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  int i;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 300; i++)
    decide(&f, &r);
  d = decide(&f, &r); /* the first 429: it carries the first Retry-After */
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(d.penalty_status, SLUICE_PENALTY_WARNING);
  cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0);
  cr_assert_eq(d.strikes_remaining, 20);
  sluice_clock_advance(f.clock, d.retry_after_ns / 2);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_neq(d.flags & SLUICE_DECISION_STRIKE, 0);
  cr_assert_eq(d.strikes_remaining, 19);
  fx_close(&f);
}

Test(policy_flow, abusive_client_climbs_l1_l2_l3_and_other_keys_are_unaffected) {
  fixture f;
  sluice_request bad = rq_std("acme", "key-bad", "sandbox");
  sluice_request good = rq_std("acme", "key-good", "sandbox");
  sluice_decision d;
  int64_t trip1;
  fx_open(&f, NULL, 0);

  d = trip_once(&f, &bad);
  trip1 = d.now_ns;
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.status, 429);
  cr_assert_eq(d.penalty_status, SLUICE_PENALTY_ACTIVE_LOCKOUT);
  cr_assert_eq(d.penalty_level, 1);
  cr_assert_eq(d.retry_after_ns, 5 * MIN);
  cr_assert_eq(d.lockout_end_ns, trip1 + 5 * MIN);
  cr_assert_eq(d.flags & SLUICE_DECISION_EDGE_DENY, 0);
  cr_assert_eq(fx_last(&f, SLUICE_EVENT_BOX_TRIP)->level, 1);
  cr_assert_eq(fx_last(&f, SLUICE_EVENT_BOX_TRIP)->scope, SLUICE_SCOPE_KEY);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_ALERT), 0);
  /* Level 1 is the key's scope only. */
  cr_assert_eq(decide(&f, &good).allowed, 1);
  /* Boxed: rejected without bucket work and without strikes. */
  sluice_clock_advance(f.clock, 4 * MIN);
  d = decide(&f, &bad);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, MIN);
  cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0);
  sluice_clock_advance(f.clock, MIN);
  d = decide(&f, &bad);
  cr_assert_eq(d.allowed, 1, "the box ends after 5 min");

  d = trip_once(&f, &bad);
  cr_assert_eq(d.penalty_level, 2);
  cr_assert_eq(d.retry_after_ns, 60 * MIN);
  cr_assert_neq(d.flags & SLUICE_DECISION_EDGE_DENY, 0);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_ALERT), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_EDGE_DENY), 1);
  cr_assert_eq(fx_last(&f, SLUICE_EVENT_EDGE_DENY)->until_ns,
               d.now_ns + 60 * MIN);
  cr_assert_eq(decide(&f, &good).allowed, 1);
  sluice_clock_advance(f.clock, 60 * MIN);

  d = trip_once(&f, &bad);
  cr_assert_eq(d.penalty_level, 3);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_SUSPENDED);
  cr_assert_eq(d.status, 403);
  cr_assert_eq(d.lockout_end_ns, SLUICE_FOREVER);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_SUSPEND), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_PAGE), 0);
  cr_assert_lt(d.now_ns - trip1, 24 * HOUR);
  sluice_clock_advance(f.clock, 72 * HOUR);
  d = decide(&f, &bad);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_SUSPENDED, "manual recovery only");
  cr_assert_eq(decide(&f, &good).allowed, 1);
  fx_close(&f);
}

Test(policy_flow, offense_counter_expires_24h_after_the_last_trip) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_request r2 = rq_std("acme", "key-2", "sandbox");
  sluice_decision d;
  fx_open(&f, NULL, 0);
  d = trip_once(&f, &r);
  cr_assert_eq(d.penalty_level, 1);
  sluice_clock_advance(f.clock, 24 * HOUR - MIN);
  d = trip_once(&f, &r);
  cr_assert_eq(d.penalty_level, 2, "still within 24 h of the last trip");
  /* The counter now runs from this second trip. */
  sluice_clock_advance(f.clock, 24 * HOUR - MIN);
  d = trip_once(&f, &r);
  cr_assert_eq(d.penalty_level, 3);

  d = trip_once(&f, &r2);
  cr_assert_eq(d.penalty_level, 1);
  sluice_clock_advance(f.clock, 24 * HOUR + SEC);
  d = trip_once(&f, &r2);
  cr_assert_eq(d.penalty_level, 1, "forgotten 24 h after the last trip");
  fx_close(&f);
}

Test(policy_flow, enterprise_level3_pages_and_never_suspends) {
  fixture f;
  sluice_request r = rq_std("bigbank", "key-1", "enterprise");
  sluice_decision d;
  fx_open(&f, NULL, 0);
  d = trip_once(&f, &r);
  cr_assert_eq(d.penalty_level, 1);
  sluice_clock_advance(f.clock, 5 * MIN);
  d = trip_once(&f, &r);
  cr_assert_eq(d.penalty_level, 2);
  sluice_clock_advance(f.clock, 60 * MIN);
  d = trip_once(&f, &r);
  cr_assert_eq(d.penalty_level, 3);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.status, 429);
  cr_assert_eq(d.retry_after_ns, 60 * MIN);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_PAGE), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_SUSPEND), 0);
  sluice_clock_advance(f.clock, 60 * MIN);
  cr_assert_eq(decide(&f, &r).allowed, 1, "the L3 box ends by itself");
  fx_close(&f);
}

Test(policy_flow, manual_release_and_lift_are_audited) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  const logged_event *e;
  fx_open(&f, NULL, 0);
  cr_assert_eq(sluice_policy_release(f.pol, &r,
                                     &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                    .scope = SLUICE_SCOPE_KEY,
                                                    .who = "amy",
                                                    .why = "ticket 7"}),
               SLUICE_ENOTFOUND);
  trip_once(&f, &r);
  /* No hold, a kind of none, and a suspension to renew are refused. */
  cr_assert_eq(sluice_policy_release(f.pol, &r, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_renew(f.pol, &r, NULL), SLUICE_EINVAL);
  cr_assert_eq(
      sluice_policy_release(
          f.pol, &r,
          &(sluice_hold){.scope = SLUICE_SCOPE_KEY, .who = "amy", .why = "x"}),
      SLUICE_EINVAL);
  cr_assert_eq(
      sluice_policy_renew(f.pol, &r,
                          &(sluice_hold){.kind = SLUICE_HOLD_SUSPENSION,
                                         .scope = SLUICE_SCOPE_KEY,
                                         .who = "amy",
                                         .why = "x"}),
      SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_release(f.pol, &r,
                                     &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                    .scope = SLUICE_SCOPE_KEY,
                                                    .who = "",
                                                    .why = "x"}),
               SLUICE_EINVAL);
  cr_assert_eq(
      sluice_policy_release(f.pol, &r,
                            &(sluice_hold){.kind = SLUICE_HOLD_SUSPENSION,
                                           .scope = SLUICE_SCOPE_KEY,
                                           .who = "amy",
                                           .why = "x"}),
      SLUICE_ENOTFOUND, "a level 1 box is not a suspension");
  cr_assert_eq(
      sluice_policy_release(f.pol, &r,
                            &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                           .scope = SLUICE_SCOPE_KEY,
                                           .who = "amy",
                                           .why = "fixed their retry loop"}),
      SLUICE_OK);
  e = fx_last(&f, SLUICE_EVENT_RELEASE);
  cr_assert_not_null(e);
  cr_assert_str_eq(e->who, "amy");
  cr_assert_str_eq(e->why, "fixed their retry loop");
  cr_assert_eq(e->level, 1);
  d = decide(&f, &r);
  cr_assert_neq(d.outcome, SLUICE_OUTCOME_BOXED);
  /* The offense count is kept: the next trips escalate. */
  sluice_clock_advance(f.clock, MIN);
  cr_assert_eq(trip_once(&f, &r).penalty_level, 2);
  sluice_clock_advance(f.clock, 60 * MIN);
  cr_assert_eq(trip_once(&f, &r).outcome, SLUICE_OUTCOME_SUSPENDED);
  cr_assert_eq(sluice_policy_release(f.pol, &r,
                                     &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                    .scope = SLUICE_SCOPE_KEY,
                                                    .who = "amy",
                                                    .why = "x"}),
               SLUICE_EPERM);
  cr_assert_eq(
      sluice_policy_release(f.pol, &r,
                            &(sluice_hold){.kind = SLUICE_HOLD_SUSPENSION,
                                           .scope = SLUICE_SCOPE_KEY,
                                           .who = "sec-team",
                                           .why = "reviewed: bug"}),
      SLUICE_OK);
  e = fx_last(&f, SLUICE_EVENT_LIFT);
  cr_assert_not_null(e);
  cr_assert_str_eq(e->who, "sec-team");
  cr_assert_str_eq(e->why, "reviewed: bug");
  cr_assert_eq(e->level, 3);
  cr_assert_neq(decide(&f, &r).outcome, SLUICE_OUTCOME_SUSPENDED);
  fx_close(&f);
}

/* sluice_policy_renew() of a box: a level 3 box starts over from now; a lower
** level, an unboxed scope and a suspension have nothing to renew. */
Test(policy_flow, renew_restarts_a_level3_box) {
  fixture f;
  sluice_request r = rq_std("bigbank", "key-1", "enterprise");
  sluice_request s = rq_std("acme", "key-2", "sandbox");
  const logged_event *e;
  sluice_decision d;
  int64_t now;
  fx_open(&f, NULL, 0);
  cr_assert_eq(sluice_policy_renew(f.pol, &r,
                                   &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                  .scope = SLUICE_SCOPE_KEY,
                                                  .who = "sec",
                                                  .why = "x"}),
               SLUICE_ENOTFOUND, "not boxed");
  cr_assert_eq(trip_once(&f, &r).penalty_level, 1);
  cr_assert_eq(sluice_policy_renew(f.pol, &r,
                                   &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                  .scope = SLUICE_SCOPE_KEY,
                                                  .who = "sec",
                                                  .why = "x"}),
               SLUICE_ENOTFOUND, "level 1 is not renewable");
  sluice_clock_advance(f.clock, 5 * MIN);
  trip_once(&f, &r);
  sluice_clock_advance(f.clock, 60 * MIN);
  cr_assert_eq(trip_once(&f, &r).penalty_level, 3);
  sluice_clock_advance(f.clock, 50 * MIN);
  cr_assert_eq(sluice_policy_renew(f.pol, &r,
                                   &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                  .scope = SLUICE_SCOPE_KEY,
                                                  .who = "",
                                                  .why = "x"}),
               SLUICE_EINVAL);
  cr_assert_eq(
      sluice_policy_renew(f.pol, &r,
                          &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                         .scope = SLUICE_SCOPE_KEY,
                                         .who = "sec",
                                         .why = "ticket 9: still abusive"}),
      SLUICE_OK);
  now = sluice_clock_now(f.clock);
  e = fx_last(&f, SLUICE_EVENT_EDGE_DENY);
  cr_assert_not_null(e);
  cr_assert_eq(e->level, 3);
  cr_assert_eq(e->until_ns, now + 60 * MIN, "a whole box from now");
  cr_assert_str_eq(e->who, "sec");
  cr_assert_str_eq(e->why, "ticket 9: still abusive");
  sluice_clock_advance(f.clock, 30 * MIN); /* past the first box's end */
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.penalty_level, 3);
  cr_assert_eq(d.lockout_end_ns, now + 60 * MIN);
  sluice_clock_advance(f.clock, 30 * MIN);
  cr_assert_eq(decide(&f, &r).allowed, 1, "the renewed box ends");
  /* A suspension has no end to renew. */
  trip_once(&f, &s);
  sluice_clock_advance(f.clock, 5 * MIN);
  trip_once(&f, &s);
  sluice_clock_advance(f.clock, 60 * MIN);
  cr_assert_eq(trip_once(&f, &s).outcome, SLUICE_OUTCOME_SUSPENDED);
  cr_assert_eq(sluice_policy_renew(f.pol, &s,
                                   &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                  .scope = SLUICE_SCOPE_KEY,
                                                  .who = "sec",
                                                  .why = "x"}),
               SLUICE_EPERM);
  fx_close(&f);
}

Test(policy_flow, shadow_mode_never_rejects_but_records_everything) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  int i, throttled = 0, boxed = 0;
  fx_open(&f, NULL, SLUICE_POLICY_SHADOW);
  for (i = 0; i < 400; i++) {
    d = decide(&f, &r);
    cr_assert_eq(d.allowed, 1);
    cr_assert_eq(d.status, 200);
    cr_assert_neq(d.flags & SLUICE_DECISION_SHADOW, 0);
    if (d.outcome == SLUICE_OUTCOME_THROTTLED) {
      throttled++;
      cr_assert_eq(d.verdict_status, 429);
      cr_assert_gt(d.retry_after_ns, 0);
    }
    if (d.outcome == SLUICE_OUTCOME_BOXED)
      boxed++;
  }
  /* 1 warning and 19 strikes; the 20th strike trips the box. */
  cr_assert_eq(throttled, 20);
  cr_assert_eq(boxed, 400 - 300 - 20);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 1);
  cr_assert_eq(sluice_policy_count(f.pol, "sandbox", SLUICE_OUTCOME_ALLOW),
               300);
  cr_assert_eq(sluice_policy_count(f.pol, "sandbox", SLUICE_OUTCOME_BOXED),
               80);
  fx_close(&f);
}

Test(policy_flow, shadow_mode_from_the_config) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  int i;
  cfg = cfg_new();
  cfg_sets(cfg, "shadow", "true");
  fx_open(&f, cfg, 0);
  for (i = 0; i < 310; i++)
    cr_assert_eq(decide(&f, &r).allowed, 1);
  cr_assert_gt(sluice_policy_count(f.pol, "sandbox", SLUICE_OUTCOME_THROTTLED),
               0);
  fx_close(&f);
}

/* An unknown tier is refused and records nothing (a file's tiers are the
** values its `by = "tier"` sets name); a request without a tier is decided
** with the limits' own numbers (the built-in refused it). */
Test(policy_flow, bad_input_is_refused_and_records_nothing) {
  fixture f;
  sluice_request r;
  sluice_decision d;
  char longid[400];
  int64_t before;
  int rc;
  fx_open(&f, NULL, 0);
  memset(longid, 'x', sizeof longid - 1);
  longid[sizeof longid - 1] = '\0';
  before = fx_applies(&f);

  r = rq_std("acme", "key-1", "platinum");
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_ENOTFOUND);
  cr_assert_str_eq(d.invalid_field, "tier");
  r = rq_std("beta", "key-2", NULL); /* not acme's key-1, checked below */
  rc = sluice_policy_decide(f.pol, 1, &r, &d, NULL);
  /* No tier is no bad input on the file (its limits take their own
  ** numbers then, `by` matching nothing): that request was decided. */
  cr_assert_eq(rc, SLUICE_OK);
  cr_assert_eq(d.allowed, 1);
  before = fx_applies(&f);
  r = rq_std("acme", "key-1", "growth");
  r.route = "/healthz";
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_ENOTFOUND);
  cr_assert_str_eq(d.invalid_field, "route");
  r = rq_std("", "key-1", "growth");
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EKEY);
  cr_assert_str_eq(d.invalid_field, "tenant");
  r = rq_std("acme", longid, "growth");
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EKEY);
  cr_assert_str_eq(d.invalid_field, "key");
  r = rq_std(NULL, "key-1", "growth");
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EINVAL);
  /* A caller's cost: the file's routes take theirs from the file (the
  ** built-in took 1..the smaller burst; etc/ledger.conf has no caller
  ** cost), so any is refused, naming it. */
  r = rq_std("acme", "key-1", "growth");
  r.cost = -1;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "cost");
  r.cost = 1501;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EINVAL);
  r.cost = INT64_MAX;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EINVAL);
  r = rq_reconcile("acme", "key-1", "growth", NULL);
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "ledger");
  r = rq_export("acme", "key-1", "growth", -1); /* to before from */
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, &d, NULL), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "export_range_s");
  cr_assert_eq(sluice_policy_decide(f.pol, 1, NULL, &d, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_decide(NULL, 1, &r, &d, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &r, NULL, NULL), SLUICE_EINVAL);
  cr_assert_eq(fx_applies(&f), before, "no store work for bad input");

  /* And the key's bucket is untouched: the first real request sees it
  ** full. */
  r = rq_std("acme", "key-1", "growth");
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1);
  assert_binding(d, "key");
  cr_assert_eq(d.remaining, 1499);
  fx_close(&f);
}

Test(policy_flow, open_refuses_bad_options) {
  sluice_policy_options o;
  sluice_policy *p = (sluice_policy *)&o;
  sluice_policy_config *cfg;
  char err[200];
  memset(&o, 0, sizeof o);
  cr_assert_eq(sluice_policy_open(&o, &p), SLUICE_EINVAL, "zero secret");
  cr_assert_null(p);
  o.secret[0] = 1;
  o.flags = 0x80;
  cr_assert_eq(sluice_policy_open(&o, &p), SLUICE_EINVAL, "unknown flag");
  o.flags = 0;
  cfg = cfg_new();
  /* A bad value never gets into a configuration: the set refuses it. */
  cr_assert_eq(sluice_policy_config_set(cfg, "limits.key.params.enterprise.burst",
                                        "0", err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "limits.key.params.enterprise.burst") != NULL, "%s",
            err);
  o.config_path = "/nonexistent/sluice.conf";
  o.errbuf = err;
  o.errlen = sizeof err;
  cr_assert_eq(sluice_policy_open(&o, &p), SLUICE_EIO);
  cr_assert_null(p);
  cr_assert(strstr(err, "/nonexistent/sluice.conf") != NULL, "%s", err);
  o.config_path = fx_default_conf;
  cr_assert_eq(sluice_policy_open(&o, &p), SLUICE_OK, "own limiter");
  cr_assert_str_eq(cfg_str(sluice_policy_config_of(p),
                           "limits.key.params.growth.burst"),
                   "1500");
  sluice_policy_close(p);
  sluice_policy_close(NULL);
}

Test(policy_flow, metrics_count_per_tier_and_outcome) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request g = rq_std("acme", "key-1", "growth");
  sluice_request s = rq_std("tiny", "key-1", "sandbox");
  char buf[16384], small[64];
  size_t need = 0, need2 = 0;
  int i;
  cfg = cfg_new();
  cfg_set(cfg, "routes.[1].limits.[0].cost", 2); /* reconcile */
  cfg_set(cfg, "routes.[2].limits.[0].cost", 2); /* export */
  cfg_set(cfg, "limits.key.burst", 2);           /* sandbox's */
  fx_open(&f, cfg, 0);
  for (i = 0; i < 3; i++)
    decide(&f, &g);
  for (i = 0; i < 5; i++)
    decide(&f, &s);
  cr_assert_eq(sluice_policy_count(f.pol, "growth", SLUICE_OUTCOME_ALLOW), 3);
  cr_assert_eq(sluice_policy_count(f.pol, "sandbox", SLUICE_OUTCOME_ALLOW), 2);
  cr_assert_eq(
      sluice_policy_count(f.pol, "sandbox", SLUICE_OUTCOME_THROTTLED), 3);
  cr_assert_eq(sluice_policy_count(f.pol, "nope", SLUICE_OUTCOME_ALLOW), 0);
  cr_assert_eq(sluice_policy_metrics(f.pol, buf, sizeof buf, &need),
               SLUICE_OK);
  cr_assert_eq(need, strlen(buf));
  cr_assert(strstr(buf, "# TYPE sluice_policy_decisions_total counter\n"));
  cr_assert(strstr(buf, "sluice_policy_decisions_total{tier=\"growth\","
                        "outcome=\"allow\"} 3\n"));
  cr_assert(strstr(buf, "sluice_policy_decisions_total{tier=\"sandbox\","
                        "outcome=\"throttled\"} 3\n"));
  cr_assert(strstr(buf, "sluice_policy_degraded 0\n"));
  cr_assert_eq(buf[need - 1], '\n');
  cr_assert_eq(sluice_policy_metrics(f.pol, NULL, 0, &need2), SLUICE_OK);
  cr_assert_eq(need2, need);
  cr_assert_eq(sluice_policy_metrics(f.pol, small, sizeof small, &need2),
               SLUICE_ERANGE);
  cr_assert_eq(need2, need);
  cr_assert_eq(strlen(small), sizeof small - 1);
  fx_close(&f);
}

/* penalties.keys.strike = "every" counts strikes as the spec's section-6
** script does: every 429 for lack of tokens is one, the first included,
** and the threshold-th trips the box in the same call (the script's
** INCR, then `strikes >= threshold`). */
Test(policy_flow, strike_every_denial_counts_the_first_429_as_the_script) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  int i, n;
  cfg = cfg_new();
  cfg_sets(cfg, "penalties.keys.strike", "every");
  fx_open(&f, cfg, 0);
  for (i = 0; i < 300; i++)
    cr_assert_eq(decide(&f, &r).allowed, 1);
  for (n = 1; n < 20; n++) {
    d = decide(&f, &r);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED, "denial %d", n);
    cr_assert_neq(d.flags & SLUICE_DECISION_STRIKE, 0, "denial %d", n);
    cr_assert_eq(d.strikes_remaining, 20 - n, "denial %d", n);
  }
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED, "the 20th 429 trips");
  cr_assert_neq(d.flags & SLUICE_DECISION_TRIPPED, 0);
  cr_assert_eq(d.penalty_level, 1);
  cr_assert_eq(d.retry_after_ns, 5 * MIN);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 1);
  fx_close(&f);
}

/* The price of the script's count, and why it is not the default: a
** client that waits out every Retry-After still collects one strike per
** 429, and a tight enough rate boxes it. */
Test(policy_flow, strike_every_denial_strikes_a_client_that_waits) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  sluice_decision d;
  int i, strikes = 0;
  cfg = cfg_new();
  cfg_sets(cfg, "penalties.keys.strike", "every");
  fx_open(&f, cfg, 0);
  for (i = 0; i < 300; i++)
    decide(&f, &r);
  for (i = 0; i < 10; i++) {
    d = decide(&f, &r);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
    strikes += (d.flags & SLUICE_DECISION_STRIKE) != 0;
    sluice_clock_advance(f.clock, d.retry_after_ns);
    cr_assert_eq(decide(&f, &r).allowed, 1, "it waited, so it is served");
  }
  cr_assert_eq(strikes, 10);
  cr_assert_eq(d.strikes_remaining, 10);
  fx_close(&f);
}

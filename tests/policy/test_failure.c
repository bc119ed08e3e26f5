/*
** Failure modes, with a store forced to fail through the vtable:
** reconcile, export and auth fail closed (503, Retry-After 15 s);
** everything else is decided by the local degraded limiter at 25% of the
** tier rate, flagged; degraded on/off events; every request gets its own
** attempt until failures are sustained, when the circuit breaker leaves the
** store alone for the probe interval and then probes it; with the breaker
** open a box in the deny cache still holds, and the per-IP backstop makes
** no store call either.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "helpers.h"

static const int errors[] = {SLUICE_ETIMEDOUT, SLUICE_EUNAVAIL,
                             SLUICE_EBACKEND};

Test(policy_failure, heavy_and_auth_fail_closed) {
  size_t e;
  for (e = 0; e < sizeof errors / sizeof errors[0]; e++) {
    fixture f;
    sluice_request rec = rq_reconcile("acme", "key-1", "growth", "L");
    sluice_request exp = rq_export("acme", "key-1", "growth", 0);
    sluice_request auth = rq_signin("10.0.0.1", "alice", NULL);
    sluice_request fail = rq_signin("10.0.0.1", "alice", "bad_secret");
    const sluice_request *all[] = {&rec, &exp, &auth, &fail};
    size_t i;
    fx_open(&f, NULL, 0);
    fx_fail(&f, errors[e], 0);
    for (i = 0; i < 4; i++) {
      sluice_decision d = decide(&f, all[i]);
      cr_assert_eq(d.allowed, 0);
      cr_assert_eq(d.outcome, SLUICE_OUTCOME_UNAVAILABLE);
      cr_assert_eq(d.status, 503);
      cr_assert_eq(d.retry_after_ns, 15 * SEC);
      cr_assert_neq(d.flags & SLUICE_DECISION_FAIL_CLOSED, 0);
      cr_assert_eq(d.flags & SLUICE_DECISION_DEGRADED, 0);
      cr_assert_eq(d.store_error, errors[e]);
      cr_assert_eq(d.lease_id, 0);
    }
    cr_assert_eq(fx_count(&f, SLUICE_EVENT_DEGRADED_ON), 1);
    cr_assert_eq(fx_last(&f, SLUICE_EVENT_DEGRADED_ON)->store_error,
                 errors[e]);
    fx_close(&f);
  }
}

Test(policy_failure, standard_requests_run_degraded_at_25_percent) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_decision d;
  int i;
  fx_open(&f, NULL, 0);
  fx_fail(&f, SLUICE_ETIMEDOUT, 0);
  for (i = 0; i < 375; i++) {
    d = decide(&f, &r);
    cr_assert_eq(d.allowed, 1, "request %d", i);
    cr_assert_neq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  }
  /* 25% of the growth key bucket: 375 of 1500, refilling at 6.25/s. */
  cr_assert_eq(d.limit, 375);
  assert_binding(d, "key");
  cr_assert_eq(d.remaining, 0);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(d.status, 429);
  cr_assert_neq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  cr_assert_eq(d.retry_after_ns, 160 * 1000000, "1 point at 6.25/s");
  cr_assert_eq(d.store_error, SLUICE_ETIMEDOUT);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_DEGRADED_ON), 1, "once, not per "
                                                          "request");
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 0);
  {
    char buf[16384];
    cr_assert_eq(sluice_policy_metrics(f.pol, buf, sizeof buf, NULL),
                 SLUICE_OK);
    cr_assert(strstr(buf, "sluice_policy_degraded 1\n"));
    cr_assert(strstr(buf, "sluice_policy_degraded_decisions_total{tier=\""
                          "growth\"} 376\n"));
  }
  fx_close(&f);
}

Test(policy_failure, decisions_go_back_to_the_store_when_it_returns) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_decision d;
  int64_t attempts;
  fx_open(&f, NULL, 0);
  d = decide(&f, &r);
  cr_assert_eq(d.remaining, 1499);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  d = decide(&f, &r);
  cr_assert_neq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  fx_fail(&f, 0, 0);
  /* One failure opens no breaker: the very next request asks the store
  ** again (its own attempt), and gets the store's answer. */
  attempts = fx_attempts(&f);
  sluice_clock_advance(f.clock, 1000000);
  d = decide(&f, &r);
  cr_assert_eq(fx_attempts(&f), attempts + 1);
  cr_assert_eq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  cr_assert_eq(d.store_error, 0);
  cr_assert_eq(d.limit, 1500);
  cr_assert_eq(d.remaining, 1498, "the store's bucket");
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_DEGRADED_OFF), 1);
  fx_close(&f);
}

static int breaker_state(fixture *f) {
  char buf[16384];
  const char *g;
  cr_assert_eq(sluice_policy_metrics(f->pol, buf, sizeof buf, NULL),
               SLUICE_OK);
  g = strstr(buf, "\nsluice_policy_breaker_state ");
  cr_assert(g, "the breaker gauge is in the metrics");
  return atoi(g + strlen("\nsluice_policy_breaker_state "));
}

/* Isolated failures (a store that stalls now and then) never open the
** breaker: every request keeps its own attempt. */
Test(policy_failure, isolated_failures_keep_every_attempt) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_decision d;
  int i, failed = 0;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 400; i++) {
    /* One call in three fails: 33%, under the 50% that opens it. */
    fx_fail(&f, i % 3 == 0 ? SLUICE_ETIMEDOUT : 0, 0);
    d = decide(&f, &r);
    failed += (d.flags & SLUICE_DECISION_DEGRADED) != 0;
    sluice_clock_advance(f.clock, 5 * 1000000);
  }
  cr_assert_eq(fx_attempts(&f), 400, "every request called the store");
  cr_assert_eq(failed, 134, "only the failed calls were degraded");
  cr_assert_eq(breaker_state(&f), 0);
  fx_close(&f);
}

/* A sustained outage opens the breaker: the store is left alone (no call
** at all, counted by the wrapper) for probe_interval_ms, then trial
** requests probe it; a failed trial opens it again, a good one closes it. */
Test(policy_failure, a_sustained_outage_opens_the_breaker) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_request rec = rq_reconcile("acme", "key-1", "growth", "L");
  sluice_decision d;
  int64_t attempts;
  int i;
  fx_open(&f, NULL, 0);
  fx_fail(&f, SLUICE_ETIMEDOUT, 0);
  /* 20 calls in the window (over 100 ms), all failed: the 20th opens it. */
  for (i = 0; i < 20; i++) {
    cr_assert_eq(breaker_state(&f), 0, "closed before call %d", i);
    d = decide(&f, i % 2 ? &r : &rec);
    cr_assert_eq(d.store_error, SLUICE_ETIMEDOUT);
    sluice_clock_advance(f.clock, 20 * 1000000);
  }
  cr_assert_eq(fx_attempts(&f), 20);
  cr_assert_eq(breaker_state(&f), 1);
  /* Open: decided without the store, for the whole probe interval. */
  attempts = fx_attempts(&f);
  for (i = 0; i < 97; i++) {
    d = decide(&f, i % 2 ? &r : &rec);
    cr_assert_eq(d.store_error, SLUICE_ETIMEDOUT, "the last error");
    cr_assert_eq(d.status, i % 2 ? 200 : 503);
    sluice_clock_advance(f.clock, 10 * 1000000);
  }
  cr_assert_eq(fx_attempts(&f), attempts, "no store call while open");
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_DEGRADED_ON), 1);
  /* 1 s after it opened: half-open, one trial, which fails: open again. */
  sluice_clock_advance(f.clock, 10 * 1000000);
  d = decide(&f, &r);
  cr_assert_eq(fx_attempts(&f), attempts + 1, "a trial");
  cr_assert_neq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  cr_assert_eq(breaker_state(&f), 1);
  for (i = 0; i < 50; i++)
    (void)decide(&f, &r);
  cr_assert_eq(fx_attempts(&f), attempts + 1, "open again: no calls");
  /* The store heals; the next trial, a probe interval later, closes it. */
  fx_fail(&f, 0, 0);
  sluice_clock_advance(f.clock, 999 * 1000000);
  (void)decide(&f, &r);
  cr_assert_eq(fx_attempts(&f), attempts + 1, "still open");
  sluice_clock_advance(f.clock, 1000000);
  d = decide(&f, &r);
  cr_assert_eq(fx_attempts(&f), attempts + 2);
  cr_assert_eq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  cr_assert_eq(d.store_error, 0);
  cr_assert_eq(breaker_state(&f), 0);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_DEGRADED_OFF), 1);
  d = decide(&f, &rec);
  cr_assert_eq(d.status, 200, "reconcile is served again");
  cr_assert_eq(fx_attempts(&f), attempts + 3, "every request calls again");
  fx_close(&f);
}

/* The run criterion, when configured, opens it after that many failures
** in a row whatever the window holds. */
Test(policy_failure, a_run_of_failures_opens_the_breaker_when_configured) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  int i;
  cfg = cfg_new();
  cfg_set(cfg, "breaker.consecutive_failures", 5);
  cfg_set(cfg, "breaker.min_calls", 1000);
  fx_open(&f, cfg, 0);
  for (i = 0; i < 100; i++)
    (void)decide(&f, &r);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  for (i = 0; i < 4; i++)
    (void)decide(&f, &r);
  cr_assert_eq(breaker_state(&f), 0);
  (void)decide(&f, &r);
  cr_assert_eq(breaker_state(&f), 1);
  cr_assert_eq(fx_attempts(&f), 105);
  (void)decide(&f, &r);
  cr_assert_eq(fx_attempts(&f), 105);
  fx_close(&f);
}

Test(policy_failure, a_store_failing_mid_flow_still_gives_an_answer) {
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_request rec = rq_reconcile("acme", "key-1", "growth", "L");
  sluice_decision d;
  fx_open(&f, NULL, 0);
  /* A decision is one store call: the store failing anywhere in it fails
  ** all of it (nothing of the box check's answer is kept). */
  fx_fail(&f, SLUICE_EBACKEND, 0);
  d = decide(&f, &r);
  cr_assert_eq(d.allowed, 1);
  cr_assert_neq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  cr_assert_eq(d.strikes_remaining, 0, "nothing of the store's answer kept");
  fx_close(&f);

  fx_open(&f, NULL, 0);
  fx_fail(&f, SLUICE_EBACKEND, 0); /* box, buckets, ledger, leases: one call */
  d = decide(&f, &rec);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_UNAVAILABLE);
  cr_assert_eq(d.lease_id, 0);
  fx_close(&f);
}

Test(policy_failure, shadow_mode_does_not_fail_closed_either) {
  fixture f;
  sluice_request rec = rq_reconcile("acme", "key-1", "growth", "L");
  sluice_decision d;
  fx_open(&f, NULL, SLUICE_POLICY_SHADOW);
  fx_fail(&f, SLUICE_ETIMEDOUT, 0);
  d = decide(&f, &rec);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.status, 200);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_UNAVAILABLE);
  cr_assert_eq(d.verdict_status, 503);
  cr_assert_neq(d.flags & SLUICE_DECISION_SHADOW, 0);
  fx_close(&f);
}

Test(policy_failure, fail_closed_classes_are_configurable) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request r = rq_std("acme", "key-1", "growth");
  sluice_request a = rq_signin("10.0.0.1", "alice", NULL);
  sluice_request at = rq_signin("10.0.0.1", "alice", NULL);
  cfg = cfg_new();
  at.tier = "growth"; /* an auth request may name a tier for the metrics */
  cfg_sets(cfg, "routes.[4].failure", "closed"); /* the standard route */
  fx_open(&f, cfg, 0);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  cr_assert_eq(decide(&f, &r).outcome, SLUICE_OUTCOME_UNAVAILABLE);
  /* Auth has no tier rate to degrade to: it always fails closed. */
  cr_assert_eq(decide(&f, &a).outcome, SLUICE_OUTCOME_UNAVAILABLE);
  cr_assert_eq(decide(&f, &at).outcome, SLUICE_OUTCOME_UNAVAILABLE);
  cr_assert_eq(sluice_policy_count(f.pol, "growth",
                                   SLUICE_OUTCOME_UNAVAILABLE),
               2, "the standard request and the tiered auth request");
  fx_close(&f);
}

/* ------------------------- breaker, deny cache and backstop together --- */

/* Sandbox trips after 2 strikes; the backstop on (high enough never to
** refuse); the breaker opens on 3 failures in a row. */
static sluice_policy_config *guarded_config(void) {
  sluice_policy_config *cfg = cfg_new();
  cfg_set(cfg, "penalties.keys.strikes", 2); /* sandbox */
  cfg_set(cfg, "ip_backstop.limit", 1000000);
  cfg_set(cfg, "breaker.consecutive_failures", 3);
  return cfg;
}

/* Requests on r until one trips the key's box (the store answering). */
static void trip(fixture *f, const sluice_request *r) {
  int i;
  for (i = 0; i < 2000; i++)
    if (decide(f, r).flags & SLUICE_DECISION_TRIPPED)
      return;
  cr_assert_fail("the key never tripped");
}

/* While the breaker is open nothing calls the store, the backstop's window
** included, yet a key the deny cache holds as boxed stays refused: the
** breaker's path decides through failure_mode(), which reads the cache as
** for a failed call.  The cache here is in-process, read in degraded mode
** only, so that path is its only reader. */
Test(policy_failure, a_boxed_key_stays_out_while_the_breaker_is_open) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request boxed = rq_std("acme", "key-1", "sandbox");
  sluice_request other = rq_std("acme", "key-2", "sandbox");
  sluice_decision d;
  int64_t attempts;
  int i;
  cfg = guarded_config();
  fx_open(&f, cfg, 0);
  boxed.client_ip = other.client_ip = "203.0.113.9";
  trip(&f, &boxed);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  for (i = 0; i < 3; i++)
    (void)decide(&f, &other);
  cr_assert_eq(breaker_state(&f), 1, "3 failures in a row opened it");
  attempts = fx_attempts(&f);
  for (i = 0; i < 5; i++) {
    d = decide(&f, &boxed);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED, "try %d", i);
    cr_assert_eq(d.status, 429);
    cr_assert_neq(d.flags & SLUICE_DECISION_DENY_CACHED, 0);
    cr_assert_eq(d.store_error, SLUICE_EUNAVAIL);
    d = decide(&f, &other);
    cr_assert_eq(d.allowed, 1, "try %d", i);
    cr_assert_neq(d.flags & SLUICE_DECISION_DEGRADED, 0);
    cr_assert_neq(d.binding, SLUICE_BINDING_IP);
  }
  cr_assert_eq(fx_attempts(&f), attempts,
               "no store call while open, the backstop's neither");
  cr_assert_eq(breaker_state(&f), 1);
  fx_close(&f);
}

/* A shared deny cache answers before the breaker is asked: a cached box
** takes no trial from a half-open breaker, and does not close it. */
Test(policy_failure, a_cached_box_takes_no_trial_from_the_breaker) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request boxed = rq_std("acme", "key-1", "sandbox");
  sluice_request other = rq_std("acme", "key-2", "sandbox");
  sluice_decision d;
  char name[64];
  int64_t attempts;
  int i;
  cfg = guarded_config();
  cfg_set(cfg, "breaker.probes", 1);
  snprintf(name, sizeof name, "/sluice-tf-deny-%d", (int)getpid());
  {
    char v[128];
    snprintf(v, sizeof v, "\"shm:name=%s\"", name);
    cfg_sets(cfg, "host.deny_cache", v);
  }
  shm_unlink(name);
  fx_open(&f, cfg, 0);
  boxed.client_ip = other.client_ip = "203.0.113.9";
  trip(&f, &boxed);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  for (i = 0; i < 3; i++)
    (void)decide(&f, &other);
  cr_assert_eq(breaker_state(&f), 1);
  sluice_clock_advance(f.clock, cfg_ns(cfg, "failure.probe_interval_ms")); /* trials due */
  attempts = fx_attempts(&f);
  d = decide(&f, &boxed);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_neq(d.flags & SLUICE_DECISION_DENY_CACHED, 0);
  cr_assert_eq(fx_attempts(&f), attempts, "the cache answered");
  cr_assert_neq(breaker_state(&f), 0, "a cached box closes nothing");
  d = decide(&f, &other);
  cr_assert_eq(fx_attempts(&f), attempts + 1, "the trial is still there");
  cr_assert_eq(breaker_state(&f), 1, "the trial failed: open again");
  fx_close(&f);
  shm_unlink(name);
}

/*
** The per-IP backstop (the spec's WAF rate rule): off by default; when
** configured, a fixed window per client address checked before anything
** else, for unauthenticated (auth) and tenant requests alike, answered as
** a 429 (its headers and problem+json: test_http.c); its own store call,
** left alone like the others while the breaker is open.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

static sluice_policy_config *ip_config(int64_t limit) {
  sluice_policy_config *cfg = cfg_new();
  cfg_set(cfg, "ip_backstop.limit", limit);
  cfg_set_ns(cfg, "ip_backstop.window_s", 60 * SEC);
  return cfg;
}

Test(policy_backstop, off_by_default) {
  fixture f;
  sluice_request a = rq_signin("203.0.113.9", "alice", NULL);
  sluice_policy_config *cfg;
  int i;
  cfg = cfg_new();
  cr_assert_eq(cfg_int(cfg, "ip_backstop.limit"), 0);
  cr_assert_eq(cfg_ns(cfg, "ip_backstop.window_s"), 60 * SEC);
  fx_open(&f, NULL, 0);
  for (i = 0; i < 2000; i++)
    cr_assert_eq(decide(&f, &a).allowed, 1, "request %d", i);
  cr_assert_eq(fx_calls(&f), 2000 * 2, "the auth programs only");
  fx_close(&f);
}

Test(policy_backstop, refuses_an_address_over_its_window) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request a = rq_signin("203.0.113.9", "alice", NULL);
  sluice_request bad = rq_signin("203.0.113.9", "bob", "bad_secret");
  sluice_request t = rq_std("acme", "key-1", "growth");
  sluice_request other = rq_signin("203.0.113.10", "alice", NULL);
  sluice_decision d;
  int64_t calls;
  int i;
  cfg = ip_config(10);
  fx_open(&f, cfg, 0);
  t.client_ip = "203.0.113.9";
  sluice_clock_advance(f.clock, 15 * SEC);
  /* Unauthenticated, failed and tenant requests: one window. */
  for (i = 0; i < 10; i++) {
    d = decide(&f, i % 3 == 0 ? &a : i % 3 == 1 ? &bad : &t);
    cr_assert_neq(d.binding, SLUICE_BINDING_IP, "request %d", i);
  }
  calls = fx_calls(&f);
  d = decide(&f, &a);
  cr_assert_eq(d.allowed, 0);
  cr_assert_eq(d.status, 429);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(d.binding, SLUICE_BINDING_IP);
  cr_assert_eq(d.limit, 10);
  cr_assert_eq(d.remaining, 0);
  cr_assert_eq(d.policy_window_ns, 60 * SEC);
  cr_assert_eq(d.retry_after_ns, 45 * SEC, "until the window ends");
  cr_assert_eq(d.penalty_status, SLUICE_PENALTY_NONE, "no strike");
  cr_assert_eq(fx_calls(&f), calls + 1, "checked first, nothing else ran");
  d = decide(&f, &t);
  cr_assert_eq(d.binding, SLUICE_BINDING_IP, "a tenant request too");
  cr_assert_eq(decide(&f, &other).allowed, 1, "another address");
  /* A request without an address is not the backstop's. */
  t.client_ip = NULL;
  cr_assert_eq(decide(&f, &t).allowed, 1);
  /* The next window. */
  sluice_clock_advance(f.clock, 45 * SEC);
  cr_assert_eq(decide(&f, &a).allowed, 1);
  fx_close(&f);
}

Test(policy_backstop, no_store_call_while_the_breaker_is_open) {
  sluice_policy_config *cfg;
  fixture f;
  sluice_request a = rq_signin("203.0.113.9", "alice", NULL);
  sluice_decision d;
  int64_t attempts;
  int i;
  cfg = ip_config(1000);
  fx_open(&f, cfg, 0);
  fx_fail(&f, SLUICE_ETIMEDOUT, 0);
  for (i = 0; i < 20; i++) {
    d = decide(&f, &a);
    cr_assert_eq(d.status, 503, "auth fails closed");
    sluice_clock_advance(f.clock, 20 * MS);
  }
  attempts = fx_attempts(&f);
  cr_assert_eq(attempts, 20, "the backstop's call failed: one per request");
  for (i = 0; i < 50; i++)
    cr_assert_eq(decide(&f, &a).status, 503);
  cr_assert_eq(fx_attempts(&f), attempts, "open: the backstop waits too");
  fx_close(&f);
}

Test(policy_backstop, config_file_and_bounds) {
  sluice_policy_config *cfg;
  char err[256];
  const char *path = fx_write_ledger(
      "ip_backstop = { limit = 300; window_s = 300; };\n"
      "breaker = { window_ms = 2000; min_calls = 50; failure_percent = 80;\n"
      "            consecutive_failures = 7; probes = 2; };\n");
  cr_assert_eq(cfg_load(&cfg, path, err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(cfg_int(cfg, "ip_backstop.limit"), 300);
  cr_assert_eq(cfg_ns(cfg, "ip_backstop.window_s"), 300 * SEC);
  cr_assert_eq(cfg_ns(cfg, "breaker.window_ms"), 2 * SEC);
  cr_assert_eq(cfg_int(cfg, "breaker.min_calls"), 50);
  cr_assert_eq(cfg_int(cfg, "breaker.failure_percent"), 80);
  cr_assert_eq(cfg_int(cfg, "breaker.consecutive_failures"), 7);
  cr_assert_eq(cfg_int(cfg, "breaker.probes"), 2);
  unlink(path);
  path = fx_write_conf("breaker = { failure_percent = 101; };\n");
  cr_assert_eq(cfg_load(&cfg, path, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "breaker.failure_percent: must be 1..100"), "%s",
            err);
  cr_assert(strstr(err, ":1:"), "the line: %s", err);
  unlink(path);
  path = fx_write_conf("ip_backstop = { limit = 10; window_s = 0; };\n");
  cr_assert_eq(cfg_load(&cfg, path, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "ip_backstop.window_s"), "%s", err);
  unlink(path);
  path = fx_write_conf("breaker = { probes = 0; };\n");
  cr_assert_eq(cfg_load(&cfg, path, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "breaker.probes"), "%s", err);
  unlink(path);
  path = fx_write_conf("breaker = { probs = 2; };\n");
  cr_assert_eq(cfg_load(&cfg, path, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert(strstr(err, "breaker.probs: unknown setting"), "%s", err);
  /* probe_interval_ms still works: how long the breaker stays open. */
  unlink(path);
  path = fx_write_conf("failure = { probe_interval_ms = 250; };\n");
  cr_assert_eq(cfg_load(&cfg, path, err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_eq(cfg_ns(cfg, "failure.probe_interval_ms"), 250 * MS);
  unlink(path);
}

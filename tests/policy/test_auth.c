/*
** The auth endpoint on a manual clock: only failures count; 5 per subject
** and 20 per IP in 15 min box that subject or IP; credential stuffing (500
** failures across 50 distinct subjects from one IP in 10 min, or one
** subject from many IPs) sends the IP straight to level 3; "unknown
** client" and "bad secret" give indistinguishable decisions.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

Test(policy_auth, five_failures_box_the_subject) {
  fixture f;
  sluice_request r = rq_auth("10.0.0.1", "alice", SLUICE_AUTH_BAD_SECRET);
  sluice_request other_ip = rq_auth("10.0.0.2", "alice", SLUICE_AUTH_PENDING);
  sluice_request bob = rq_auth("10.0.0.1", "bob", SLUICE_AUTH_PENDING);
  sluice_decision d;
  int i;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 4; i++) {
    d = decide(&f, &r);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_ALLOW, "failure %d", i + 1);
    cr_assert_eq(d.endpoint_class, SLUICE_EP_AUTH);
    cr_assert_eq(d.strikes_remaining, 4 - i);
    cr_assert_str_eq(d.tier, "");
  }
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_neq(d.flags & SLUICE_DECISION_TRIPPED, 0);
  cr_assert_eq(d.penalty_level, 1);
  cr_assert_eq(d.retry_after_ns, 5 * MIN);
  cr_assert_eq(fx_last(&f, SLUICE_EVENT_BOX_TRIP)->scope,
               SLUICE_SCOPE_SUBJECT);
  /* The subject is boxed from any IP; the IP is not boxed for others. */
  cr_assert_eq(decide(&f, &other_ip).outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(decide(&f, &bob).outcome, SLUICE_OUTCOME_ALLOW);
  /* Even the right secret waits out the box. */
  other_ip.auth_result = SLUICE_AUTH_OK;
  cr_assert_eq(decide(&f, &other_ip).outcome, SLUICE_OUTCOME_BOXED);
  sluice_clock_advance(f.clock, 5 * MIN);
  cr_assert_eq(decide(&f, &other_ip).outcome, SLUICE_OUTCOME_ALLOW);
  fx_close(&f);
}

Test(policy_auth, only_failures_count) {
  fixture f;
  sluice_request ok = rq_auth("10.0.0.1", "alice", SLUICE_AUTH_OK);
  sluice_request bad = rq_auth("10.0.0.1", "alice", SLUICE_AUTH_BAD_SECRET);
  int i;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 200; i++)
    cr_assert_eq(decide(&f, &ok).outcome, SLUICE_OUTCOME_ALLOW);
  for (i = 0; i < 4; i++)
    cr_assert_eq(decide(&f, &bad).outcome, SLUICE_OUTCOME_ALLOW);
  cr_assert_eq(decide(&f, &bad).outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(sluice_policy_count(f.pol, NULL, SLUICE_OUTCOME_ALLOW), 204);
  fx_close(&f);
}

Test(policy_auth, twenty_failures_box_the_ip) {
  fixture f;
  char subj[32];
  sluice_request r;
  sluice_decision d;
  int i;
  fx_open(&f, NULL, 0);
  for (i = 0; i < 20; i++) {
    snprintf(subj, sizeof subj, "user-%d", i);
    r = rq_auth("192.0.2.7", subj, SLUICE_AUTH_UNKNOWN_CLIENT);
    d = decide(&f, &r);
    if (i < 19)
      cr_assert_eq(d.outcome, SLUICE_OUTCOME_ALLOW, "failure %d", i + 1);
  }
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(fx_last(&f, SLUICE_EVENT_BOX_TRIP)->scope, SLUICE_SCOPE_IP);
  r = rq_auth("192.0.2.7", "fresh-user", SLUICE_AUTH_PENDING);
  cr_assert_eq(decide(&f, &r).outcome, SLUICE_OUTCOME_BOXED);
  r = rq_auth("192.0.2.8", "fresh-user", SLUICE_AUTH_PENDING);
  cr_assert_eq(decide(&f, &r).outcome, SLUICE_OUTCOME_ALLOW);
  /* Support can release an IP too. */
  r = rq_auth("192.0.2.7", NULL, SLUICE_AUTH_PENDING);
  cr_assert_eq(sluice_policy_release_box(f.pol, SLUICE_SCOPE_IP, &r, "sre",
                                         "office NAT"),
               SLUICE_OK);
  cr_assert_eq(decide(&f, &r).outcome, SLUICE_OUTCOME_ALLOW);
  fx_close(&f);
}

Test(policy_auth, unknown_client_and_bad_secret_are_indistinguishable) {
  fixture a, b;
  int i;
  fx_open(&a, NULL, 0);
  fx_open(&b, NULL, 0);
  for (i = 0; i < 12; i++) {
    sluice_request ra = rq_auth("10.1.1.1", "carol", SLUICE_AUTH_UNKNOWN_CLIENT);
    sluice_request rb = rq_auth("10.1.1.1", "carol", SLUICE_AUTH_BAD_SECRET);
    sluice_decision da = decide(&a, &ra), db = decide(&b, &rb);
    cr_assert_eq(memcmp(&da, &db, sizeof da), 0, "decision %d differs", i);
    if (i == 6) {
      sluice_clock_advance(a.clock, 5 * MIN);
      sluice_clock_advance(b.clock, 5 * MIN);
    }
  }
  cr_assert_eq(a.nev, b.nev);
  for (i = 0; i < a.nev; i++) {
    cr_assert_eq(a.ev[i].type, b.ev[i].type);
    cr_assert_eq(a.ev[i].level, b.ev[i].level);
    cr_assert_str_eq(a.ev[i].scope_id, b.ev[i].scope_id);
  }
  cr_assert_gt(a.nev, 0, "the sequence must have tripped something");
  fx_close(&a);
  fx_close(&b);
}

Test(policy_auth, stuffing_from_one_ip_goes_straight_to_level3) {
  sluice_policy_config cfg;
  fixture f;
  char subj[32];
  sluice_decision d;
  int i, round, n = 0, first_stuffing = -1;
  sluice_policy_config_defaults(&cfg);
  /* A NAT'd office: the plain per-IP limit is raised so that the stuffing
  ** signature is what fires. */
  cfg.auth_ip_failures = 100000;
  fx_open(&f, &cfg, 0);
  for (round = 0; round < 5 && first_stuffing < 0; round++)
    for (i = 0; i < 120; i++) {
      sluice_request r;
      snprintf(subj, sizeof subj, "victim-%d", i);
      r = rq_auth("198.51.100.9", subj, SLUICE_AUTH_BAD_SECRET);
      d = decide(&f, &r);
      n++;
      if (d.flags & SLUICE_DECISION_STUFFING) {
        first_stuffing = n;
        break;
      }
      cr_assert_neq(d.penalty_level, 3, "level 3 before the signature");
    }
  cr_assert_eq(first_stuffing, 500, "the 500th failure is the signature");
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.penalty_level, 3);
  cr_assert_eq(d.retry_after_ns, 24 * HOUR);
  cr_assert_neq(d.flags & SLUICE_DECISION_EDGE_DENY, 0);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_STUFFING), 1);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_IP_BAN), 1);
  cr_assert_eq(fx_last(&f, SLUICE_EVENT_IP_BAN)->until_ns,
               d.now_ns + 24 * HOUR);
  fx_close(&f);
}

Test(policy_auth, one_subject_from_many_ips_bans_the_ips) {
  sluice_policy_config cfg;
  fixture f;
  char ip[32];
  sluice_decision d;
  int i, banned = 0, first = -1;
  sluice_policy_config_defaults(&cfg);
  cfg.auth_subject_failures = 100000; /* look past the per-subject box */
  fx_open(&f, &cfg, 0);
  for (i = 0; i < 40; i++) {
    sluice_request r;
    snprintf(ip, sizeof ip, "203.0.113.%d", i);
    r = rq_auth(ip, "ceo@example.com", SLUICE_AUTH_BAD_SECRET);
    d = decide(&f, &r);
    if (d.penalty_level == 3) {
      banned++;
      if (first < 0)
        first = i;
      cr_assert_neq(d.flags & SLUICE_DECISION_STUFFING, 0);
    }
  }
  cr_assert_geq(first, 15, "not before ~20 distinct IPs (got %d)", first);
  cr_assert_leq(first, 25, "by ~20 distinct IPs (got %d)", first);
  cr_assert_eq(banned, 40 - first);
  fx_close(&f);
}

Test(policy_auth, auth_requests_need_an_ip_and_failures_a_subject) {
  fixture f;
  sluice_request r = rq_auth(NULL, "alice", SLUICE_AUTH_BAD_SECRET);
  sluice_decision d;
  fx_open(&f, NULL, 0);
  cr_assert_eq(sluice_policy_decide(f.pol, &r, &d), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "client_ip");
  r = rq_auth("10.0.0.1", NULL, SLUICE_AUTH_BAD_SECRET);
  cr_assert_eq(sluice_policy_decide(f.pol, &r, &d), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "auth_subject");
  r.auth_result = 17;
  cr_assert_eq(sluice_policy_decide(f.pol, &r, &d), SLUICE_EINVAL);
  cr_assert_str_eq(d.invalid_field, "auth_result");
  r = rq_auth("10.0.0.1", NULL, SLUICE_AUTH_PENDING);
  cr_assert_eq(sluice_policy_decide(f.pol, &r, &d), SLUICE_OK);
  fx_close(&f);
}

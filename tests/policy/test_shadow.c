/*
** Staged rollout: shadow mode per feature, for every request or for those
** the file's shadow_when picks (one tier).  Enforce the buckets while the
** penalty box only records; shadow one tier's buckets; leases; auth
** lockouts; the configuration file's spelling and its errors.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "policy/policy_int.h"

/* Drain a key at one instant until a request trips its box. */
static sluice_decision hammer_to_trip(fixture *f, const sluice_request *r) {
  int i;
  for (i = 0; i < 40000; i++) {
    sluice_decision d = decide(f, r);
    if (d.flags & SLUICE_DECISION_TRIPPED)
      return d;
  }
  cr_assert_fail("no trip after 40000 requests");
  return decide(f, r);
}

Test(policy_shadow, penalty_in_shadow_records_the_box_while_buckets_enforce) {
  fixture f;
  sluice_policy_config *cfg;
  sluice_request r = rq_std("acme", "k1", "sandbox");
  sluice_decision d;
  int served = 0, i;
  cfg = cfg_new();
  cfg_sets(cfg, "shadow_features", "[ \"penalty\" ]");
  fx_open(&f, cfg, 0);
  d = hammer_to_trip(&f, &r);
  /* The request that tripped was throttled: the bucket is enforced. */
  cr_assert_eq(d.allowed, 0);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 1, "the trip is recorded");
  /* Boxed in the store, but the box is not enforced: once the bucket has
  ** points again the key is served, the decision saying it would have been
  ** boxed. */
  sluice_clock_advance(f.clock, SEC);
  for (i = 0; i < 100; i++) {
    d = decide(&f, &r);
    if (!d.allowed)
      break;
    served++;
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
    cr_assert_eq(d.verdict_status, 429);
    cr_assert_eq(d.status, 200);
    cr_assert_eq(d.penalty_level, 1);
    cr_assert_neq(d.flags & SLUICE_DECISION_SHADOW, 0);
  }
  cr_assert_eq(served, 5, "one second refills 5 points of the sandbox key");
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED, "then the bucket refuses");
  cr_assert_eq(sluice_policy_count(f.pol, "sandbox", SLUICE_OUTCOME_BOXED),
               5);
  /* Asking again before that Retry-After ends would be a strike, but a
  ** boxed key takes none, box in shadow or not. */
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(d.flags & SLUICE_DECISION_STRIKE, 0, "no strike while boxed");
  fx_close(&f);
}

Test(policy_shadow, whole_shadow_mode_still_reports_the_box_without_buckets) {
  fixture f;
  sluice_request r = rq_std("acme", "k1", "sandbox");
  sluice_decision d;
  fx_open(&f, NULL, SLUICE_POLICY_SHADOW);
  d = hammer_to_trip(&f, &r);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.allowed, 1);
  fx_close(&f);
}

/* One tier's buckets in shadow (the file's shadow_when picks it by the
** request's tier), its penalty box and the other tiers enforced. */
Test(policy_shadow, one_tier_in_shadow_the_others_enforced) {
  fixture f;
  sluice_policy_config *cfg;
  sluice_request g = rq_std("acme", "kg", "growth");
  sluice_request s = rq_std("beta", "ks", "sandbox");
  sluice_decision d;
  int i;
  cfg = cfg_new();
  cfg_sets(cfg, "shadow_when",
           "( { when = { tier = \"growth\"; }; features = [ \"buckets\" ]; } )");
  fx_open(&f, cfg, 0);
  cr_assert_eq(sluice_policy_shadow_features(f.pol, "growth"),
               SLUICE_SHADOW_BUCKETS);
  cr_assert_eq(sluice_policy_shadow_features(f.pol, "sandbox"), 0);
  for (i = 0; i < 1501; i++)
    d = decide(&f, &g);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED, "the 1501st of 1500");
  cr_assert_eq(d.allowed, 1, "growth's buckets are in shadow");
  cr_assert_neq(d.flags & SLUICE_DECISION_SHADOW, 0);
  /* Its penalty box is not: strikes for the ignored Retry-After trip it. */
  for (i = 0; i < 100 && d.outcome != SLUICE_OUTCOME_BOXED; i++)
    d = decide(&f, &g);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.allowed, 0, "growth's penalty box is enforced");
  for (i = 0; i < 301; i++)
    d = decide(&f, &s);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_eq(d.allowed, 0, "sandbox's buckets are enforced");
  cr_assert_eq(d.flags & SLUICE_DECISION_SHADOW, 0);
  fx_close(&f);
}

Test(policy_shadow, leases_in_shadow_serve_a_conflict) {
  fixture f;
  sluice_policy_config *cfg;
  sluice_request r = rq_reconcile("acme", "k1", "growth", "L");
  sluice_decision d;
  cfg = cfg_new();
  cfg_sets(cfg, "shadow_features", "[ \"leases\" ]");
  fx_open(&f, cfg, 0);
  r = rq_with(r, "ledger", "L1");
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_ALLOW);
  cr_assert_neq(d.lease_id, 0);
  d = decide(&f, &r);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONFLICT);
  cr_assert_eq(d.verdict_status, 409);
  cr_assert_eq(d.allowed, 1);
  fx_close(&f);
}

Test(policy_shadow, auth_lockout_in_shadow_is_served) {
  fixture f;
  sluice_policy_config *cfg;
  sluice_request bad = rq_signin("10.0.0.1", "alice", "bad_secret");
  sluice_request try = rq_signin("10.0.0.1", "alice", NULL);
  sluice_decision d;
  int i;
  cfg = cfg_new();
  cfg_sets(cfg, "shadow_features", "[ \"penalty\" ]");
  fx_open(&f, cfg, 0);
  for (i = 0; i < 5; i++)
    decide(&f, &bad);
  d = decide(&f, &try);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.allowed, 1);
  fx_close(&f);
  /* Enforced (the control): the same sequence is refused. */
  fx_open(&f, NULL, 0);
  for (i = 0; i < 5; i++)
    decide(&f, &bad);
  cr_assert_eq(decide(&f, &try).allowed, 0);
  fx_close(&f);
}

/* shadow_features for every request, shadow_when for some: their
** spelling in a file and in a set call, and their errors. */
Test(policy_shadow, config_file_spells_features_globally_and_per_tier) {
  sluice_policy_config *c;
  const char *path;
  char err[256];
  fixture f;
  path = fx_write_conf(
             "shadow_features = [ \"penalty\", \"fail_closed\" ];\n"
             "shadow_when = (\n"
             "  { when = { tier = \"growth\"; };\n"
             "    features = [ \"buckets\" ]; },\n"
             "  { when = { tier = \"sandbox\"; }; features = [ \"all\" ]; } );\n");
  cr_assert_eq(cfg_load(&c, path, err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_str_eq(cfg_str(c, "shadow_features"), "penalty,fail_closed");
  cr_assert_str_eq(cfg_str(c, "shadow_when.[0].features.[0]"), "buckets");
  unlink(path);
  /* The same on the ledger file (its routes): the file-wide ones and the
  ** tier's. */
  c = cfg_new();
  cfg_sets(c, "shadow_features", "[ \"penalty\", \"fail_closed\" ]");
  cfg_sets(c, "shadow_when",
           "( { when = { tier = \"growth\"; }; features = [ \"buckets\" ]; },"
           "  { when = { tier = \"sandbox\"; }; features = [ \"all\" ]; } )");
  fx_open(&f, c, 0);
  cr_assert_eq(sluice_policy_shadow_features(f.pol, NULL),
               SLUICE_SHADOW_PENALTY | SLUICE_SHADOW_FAIL_CLOSED);
  cr_assert_eq(sluice_policy_shadow_features(f.pol, "growth"),
               SLUICE_SHADOW_PENALTY | SLUICE_SHADOW_FAIL_CLOSED |
                   SLUICE_SHADOW_BUCKETS);
  cr_assert_eq(sluice_policy_shadow_features(f.pol, "sandbox"),
               SLUICE_SHADOW_ALL);
  cr_assert_eq(sluice_policy_shadow_features(f.pol, "enterprise"),
               SLUICE_SHADOW_PENALTY | SLUICE_SHADOW_FAIL_CLOSED);
  fx_close(&f);
  /* A tier's own shadow_features (the former built-in form) is not a
  ** setting: a tier is a name. */
  path = fx_write_conf("tiers = { growth = { shadow_features = [ \"box\" ]; }; };\n");
  cr_assert_eq(cfg_load(&c, path, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_not_null(strstr(err, ":1: tiers: must be an array of names"),
                     "%s", err);
  unlink(path);
  path = fx_write_conf("shadow_features = \"penalty\";\n");
  cr_assert_eq(cfg_load(&c, path, err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_not_null(strstr(err, "shadow_features"), "%s", err);
  unlink(path);
  c = cfg_new();
  cr_assert_eq(sluice_policy_config_set(c, "shadow_features",
                                        "[ \"box\" ]", err, sizeof err),
               SLUICE_ECONFIG);
  cr_assert_not_null(strstr(err, "set: shadow_features"), "%s", err);
  cr_assert_str_eq(sluice_name(SLUICE_NAME_SHADOW, SLUICE_SHADOW_LEASES),
                   "leases");
  cr_assert_eq(sluice__shadow_feature_of(SLUICE_OUTCOME_CONFLICT),
               SLUICE_SHADOW_LEASES);
  cr_assert_eq(sluice__shadow_feature_of(SLUICE_OUTCOME_ALLOW), 0);
}

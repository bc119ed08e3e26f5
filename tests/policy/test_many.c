/*
** sluice_policy_decide() of n requests against one request at a time:
** two policies over two mem stores on two manual clocks get the same
** randomized trace -- tenant GETs on a few small buckets (throttles,
** strikes, boxes tripping), reconciles and exports (conflicts,
** concurrency, the export cap), auth failures (the requests a batch
** cannot hold), malformed requests -- one policy a request at a time,
** the other in batches of 1 to 40 at the same times.  Every decision
** (every field but the random lease id, which must be there in both or
** neither), every event and the metrics text must be equal.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../common/splitmix.h"
#include "helpers.h"

#define NREQ 3000
#define MAXB 40

static const char *const tenants[] = {"acme", "globex", "initech"};
static const char *const keys[] = {"key-1", "key-2"};
static const char *const ledgers[] = {"ledger-A", "ledger-B"};
static const char *const ips[] = {"192.0.2.1", "192.0.2.2", "198.51.100.7"};
static const char *const subjects[] = {"alice", "bob", "carol", "dave"};

/* Small buckets and a low strike threshold, so that a few thousand
** requests throttle, strike and trip boxes to level 3. */
static sluice_policy_config *small_config(void) {
  static const char *const tiers[] = {"growth", "enterprise"};
  sluice_policy_config *c = cfg_new();
  char p[64];
  int i;
  /* The long export's 50 points fit the key bucket.  Sandbox's are the
  ** limits' own numbers, the other tiers' their params. */
  cfg_sets(c, "limits.tenant.rate", "20");
  cfg_sets(c, "limits.tenant.period_ms", "60000");
  cfg_sets(c, "limits.key.rate", "10");
  cfg_sets(c, "limits.key.period_ms", "60000");
  cfg_sets(c, "limits.key.burst", "60");
  cfg_sets(c, "limits.tenant.burst", "100");
  cfg_sets(c, "limits.exports_per_hour.limit", "1");
  cfg_sets(c, "penalties.keys.strikes", "3");
  for (i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "limits.tenant.params.%s", tiers[i]);
    cfg_sets(c, p, "{ rate = 20; period_ms = 60000; burst = 100; }");
    snprintf(p, sizeof p, "limits.key.params.%s", tiers[i]);
    cfg_sets(c, p, "{ rate = 10; period_ms = 60000; burst = 60; }");
    snprintf(p, sizeof p, "limits.exports_per_hour.params.%s.limit", tiers[i]);
    cfg_sets(c, p, "1");
  }
  cfg_sets(c, "penalties.keys.params.enterprise.strikes", "3");
  cfg_set_ns(c, "penalties.keys.levels.[0].box_s", 20 * SEC);
  cfg_set_ns(c, "penalties.keys.levels.[1].box_s", 60 * SEC);
  cfg_set_ns(c, "penalties.keys.params.enterprise.levels.[0].box_s", 20 * SEC);
  cfg_set_ns(c, "penalties.keys.params.enterprise.levels.[1].box_s", 60 * SEC);
  cfg_set_ns(c, "penalties.keys.params.enterprise.levels.[2].box_s", 120 * SEC);
  return c;
}

static sluice_request random_request(uint64_t *rng) {
  sluice_request r;
  uint64_t x = splitmix64(rng);
  int kind = (int)(x % 100);
  memset(&r, 0, sizeof r);
  r.tenant_id = tenants[(x >> 8) % 3];
  r.api_key_id = keys[(x >> 12) % 2];
  r.tier = (x >> 16) % 4 ? "enterprise" : "sandbox";
  r.method = "GET";
  r.route = "/v1/ledgers/main/entries";
  r.client_ip = ips[(x >> 20) % 3];
  if (kind < 8) {
    r.method = "POST";
    r.route = "/v1/ledgers/reconcile";
    r = rq_with(r, "ledger", ledgers[(x >> 24) % 2]);
  } else if (kind < 14) {
    r = rq_export(r.tenant_id, r.api_key_id, r.tier, 0);
    r.client_ip = ips[(x >> 20) % 3];
  } else if (kind < 30) {
    r = rq_signin(r.client_ip, subjects[(x >> 28) % 4],
                  (x >> 32) % 5 ? "bad_secret" : "ok");
  } else if (kind < 31) {
    r.tenant_id = NULL; /* malformed: the call returns SLUICE_EINVAL */
  } else if (kind < 32) {
    r.tier = "platinum"; /* malformed: SLUICE_ENOTFOUND */
  }
  return r;
}

static void same_decision(const sluice_decision *a, const sluice_decision *b,
                          int i) {
  sluice_decision x = *a, y = *b;
  int k;
  cr_assert_eq(a->outcome, b->outcome, "request %d: outcome %s vs %s", i,
               sluice_name(SLUICE_NAME_OUTCOME, a->outcome),
               sluice_name(SLUICE_NAME_OUTCOME, b->outcome));
  cr_assert_eq(a->remaining, b->remaining, "request %d: remaining", i);
  cr_assert_eq(a->retry_after_ns, b->retry_after_ns, "request %d", i);
  cr_assert_eq(a->flags, b->flags, "request %d: flags", i);
  cr_assert_eq(a->penalty_level, b->penalty_level, "request %d", i);
  cr_assert_eq(a->lease_id != 0, b->lease_id != 0, "request %d: lease", i);
  /* The names are each policy's own strings: equal as strings. */
  cr_assert_str_eq(a->limit_name ? a->limit_name : "-",
                   b->limit_name ? b->limit_name : "-", "request %d", i);
  cr_assert_str_eq(a->limit_unit ? a->limit_unit : "-",
                   b->limit_unit ? b->limit_unit : "-", "request %d", i);
  cr_assert_str_eq(a->invalid_field ? a->invalid_field : "-",
                   b->invalid_field ? b->invalid_field : "-", "request %d", i);
  cr_assert_str_eq(a->box_detail ? a->box_detail : "-",
                   b->box_detail ? b->box_detail : "-", "request %d", i);
  x.limit_name = y.limit_name = x.limit_unit = y.limit_unit = NULL;
  x.box_detail = y.box_detail = NULL;
  x.invalid_field = y.invalid_field = NULL;
  for (k = 0; k < a->nlimits && k < SLUICE_DECISION_LIMITS_MAX; k++) {
    cr_assert_str_eq(a->limits[k].name, b->limits[k].name,
                     "request %d", i);
    cr_assert_str_eq(a->limits[k].unit, b->limits[k].unit, "request %d", i);
    x.limits[k].name = y.limits[k].name = NULL;
    x.limits[k].unit = y.limits[k].unit = NULL;
  }
  /* Both came from memset decisions: padding included, every byte but
  ** the random lease id must match. */
  x.lease_id = y.lease_id = 0;
  {
    size_t o;
    for (o = 0; o < sizeof x; o++)
      if (((unsigned char *)&x)[o] != ((unsigned char *)&y)[o])
        break;
    cr_assert(o == sizeof x, "request %d: decisions differ at byte %zu", i, o);
  }
}

static void same_events(const fixture *a, const fixture *b) {
  int i;
  cr_assert_eq(a->nev, b->nev, "events: %d vs %d", a->nev, b->nev);
  for (i = 0; i < a->nev; i++) {
    const logged_event *x = &a->ev[i], *y = &b->ev[i];
    cr_assert(x->type == y->type && x->scope == y->scope &&
                  x->level == y->level && x->outcome == y->outcome &&
                  x->until_ns == y->until_ns &&
                  !strcmp(x->scope_id, y->scope_id),
              "event %d: %s vs %s", i, sluice_name(SLUICE_NAME_EVENT, x->type),
              sluice_name(SLUICE_NAME_EVENT, y->type));
  }
}

static void same_metrics(const fixture *a, const fixture *b) {
  static char ma[1 << 16], mb[1 << 16];
  cr_assert_eq(sluice_policy_metrics(a->pol, ma, sizeof ma, NULL), SLUICE_OK);
  cr_assert_eq(sluice_policy_metrics(b->pol, mb, sizeof mb, NULL), SLUICE_OK);
  cr_assert_str_eq(ma, mb);
}

/* Refusals by the hourly export cap in the last trace. */
static uint64_t export_caps;

/* The trace through both; returns how many decisions had each outcome. */
static void run_trace(const sluice_policy_config *cfg, uint64_t seed,
                      uint64_t seen[SLUICE_OUTCOME__COUNT]) {
  static sluice_request q[MAXB];
  static sluice_decision one[MAXB], many[MAXB];
  fixture fa, fb;
  uint64_t rng = seed;
  int64_t t = T0;
  int done = 0, errs = 0;
  cr_assert_eq(fx_open_store(&fa, cfg, "mem", 0), SLUICE_OK);
  cr_assert_eq(fx_open_store(&fb, cfg, "mem", 0), SLUICE_OK);
  memset(seen, 0, SLUICE_OUTCOME__COUNT * sizeof seen[0]);
  export_caps = 0;
  while (done < NREQ) {
    int n = 1 + (int)(splitmix64(&rng) % MAXB), rcs[MAXB], i;
    for (i = 0; i < n; i++)
      q[i] = random_request(&rng);
    sluice_clock_set(fa.clock, t);
    sluice_clock_set(fb.clock, t);
    for (i = 0; i < n; i++) {
      int rc = sluice_policy_decide(fa.pol, 1, &q[i], &one[i], NULL);
      cr_assert(rc == SLUICE_OK || rc == SLUICE_EINVAL ||
                    rc == SLUICE_ENOTFOUND,
                "request %d: %s", done + i, sluice_strerror(rc));
      rcs[i] = rc;
    }
    {
      int rcm[MAXB];
      cr_assert_eq(sluice_policy_decide(fb.pol, n, q, many, rcm), SLUICE_OK);
      for (i = 0; i < n; i++) {
        cr_assert_eq(rcs[i], rcm[i], "request %d: rc %s vs %s", done + i,
                     sluice_err_name(rcs[i]), sluice_err_name(rcm[i]));
        same_decision(&one[i], &many[i], done + i);
        if (rcs[i] == SLUICE_OK)
          seen[one[i].outcome]++;
        if (rcs[i] == SLUICE_OK && one[i].limit_name &&
            !strcmp(one[i].limit_name, "exports_per_hour") && !one[i].allowed)
          export_caps++;
        else
          errs++;
      }
    }
    /* Half the leases end with the batch, the rest by their TTL. */
    for (i = 0; i < n; i++)
      if (one[i].lease_id && (splitmix64(&rng) & 1)) {
        cr_assert_eq(
            sluice_policy_release(fa.pol, &q[i],
                                  &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                 .lease_id = one[i].lease_id}),
            SLUICE_OK);
        cr_assert_eq(
            sluice_policy_release(fb.pol, &q[i],
                                  &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                 .lease_id = many[i].lease_id}),
            SLUICE_OK);
      }
    done += n;
    t += (int64_t)(splitmix64(&rng) % 20000) * MS;
  }
  same_events(&fa, &fb);
  same_metrics(&fa, &fb);
  cr_assert_gt(errs, 0);
  fx_close(&fa);
  fx_close(&fb);
}

Test(policy_many, same_decisions_as_one_by_one) {
  sluice_policy_config *cfg;
  uint64_t seen[SLUICE_OUTCOME__COUNT];
  cfg = small_config();
  run_trace(cfg, 23, seen);
  /* The trace reaches what it is meant to compare. */
  cr_assert_gt(seen[SLUICE_OUTCOME_ALLOW], 0);
  cr_assert_gt(seen[SLUICE_OUTCOME_THROTTLED], 0);
  cr_assert_gt(seen[SLUICE_OUTCOME_BOXED], 0);
  cr_assert_gt(seen[SLUICE_OUTCOME_SUSPENDED], 0);
  cr_assert_gt(seen[SLUICE_OUTCOME_CONCURRENCY] + seen[SLUICE_OUTCOME_CONFLICT],
               0);
  cr_assert_gt(export_caps, 0);
}

/* The per-IP backstop puts every tenant request with an IP outside the
** batch: the one-by-one path inside a decide of n.  Five requests per IP in
** 10 s: the backstop refuses often, so a batch that skipped it fails. */
Test(policy_many, same_decisions_with_the_ip_backstop) {
  sluice_policy_config *cfg;
  uint64_t seen[SLUICE_OUTCOME__COUNT];
  cfg = small_config();
  cfg_set(cfg, "ip_backstop.limit", 5);
  cfg_set_ns(cfg, "ip_backstop.window_s", 10 * SEC);
  run_trace(cfg, 21, seen);
  cr_assert_gt(seen[SLUICE_OUTCOME_THROTTLED], 0);
}

Test(policy_many, bad_arguments_and_bad_requests) {
  fixture f;
  sluice_request q[3];
  sluice_decision d[3];
  int rcs[3];
  fx_open_store(&f, NULL, "mem", 0);
  cr_assert_eq(sluice_policy_decide(NULL, 1, q, d, rcs), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_decide(f.pol, -1, q, d, rcs), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_decide(f.pol, 1, NULL, d, rcs), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_decide(f.pol, 0, NULL, NULL, NULL), SLUICE_OK);
  q[0] = rq_std("acme", "key-1", "growth");
  q[1] = rq_std("acme", NULL, "growth");
  q[2] = rq_std("acme", "key-1", "growth");
  cr_assert_eq(sluice_policy_decide(f.pol, 3, q, d, rcs), SLUICE_OK);
  cr_assert_eq(rcs[0], SLUICE_OK);
  cr_assert_eq(rcs[1], SLUICE_EINVAL);
  cr_assert_str_eq(d[1].invalid_field, "key");
  cr_assert_eq(rcs[2], SLUICE_OK);
  /* Both charged the key, in order. */
  cr_assert_eq(d[0].remaining, 1499);
  cr_assert_eq(d[2].remaining, 1498);
  /* Without rcs the call says the first request error; the others are
  ** decided all the same. */
  cr_assert_eq(sluice_policy_decide(f.pol, 3, q, d, NULL), SLUICE_EINVAL);
  cr_assert_str_eq(d[1].invalid_field, "key");
  cr_assert_eq(d[2].remaining, 1496);
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &q[0], d, NULL), SLUICE_OK);
  fx_close(&f);
}

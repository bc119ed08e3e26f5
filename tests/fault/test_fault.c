/*
** Fault injection and clock jumps (issue 9).  Plain C; prints its figures.
**
**  nth     A store that fails the Nth call (tools/common/fail_store.h) for every
**          failure code the core and the policy know, against a reference
**          mem store running the same operations minus the failed ones:
**          the error comes back exactly (a positive backend code as
**          SLUICE_EBACKEND), with the store's detail, and leaves no trace:
**          every later verdict and every record equals the reference's.
**          Batches (apply_many) fail or succeed as a whole.
**  outage  The policy on a store that fails every call for 20 s: standard
**          requests are served by the degraded limiter (flagged, within its
**          25% bucket), reconcile and auth fail closed (503, Retry-After
**          15 s); once the store answers again and the probe interval has
**          passed, decisions come from the store, unflagged.
**  clock   Clock jumps forward and backward on every available backend: a
**          backward jump never refunds or re-opens anything (bucket,
**          window, box, lease), nor double-charges (a retry-after given
**          before the jump is still exact after it); a forward jump refills
**          a bucket to its burst and no further, ends a box and reclaims a
**          lease exactly on time; and a long random walk of jumps never
**          admits more than burst + rate * (highest time - first time).
*/
#include "fail_store.h"
#include "../common/one_step.h"
#include "harness.h"
#include "../common/units.h"

__extension__ typedef __int128 i128;


static long decisions, faults, jumps;

/* ------------------------------------------------------------- nth --- */

typedef struct world {
  char names[6][32];
  sluice_key keys[6];
  sluice_gcra_params gp[2];
  sluice_penalty_params pp;
  sluice_lease_params lp;
  sluice_window_params wp;
} world;

static void world_init(world *w) {
  static const char *const n[6] = {"{t}:tb", "{t}:kb", "{t}:pb",
                                   "{t}:l0", "{t}:l1", "{t}:win"};
  memset(w, 0, sizeof *w);
  for (int i = 0; i < 6; i++) {
    snprintf(w->names[i], sizeof w->names[i], "%s", n[i]);
    w->keys[i].data = w->names[i];
    w->keys[i].len = strlen(w->names[i]);
  }
  w->gp[0] = (sluice_gcra_params){20, SEC, 40};
  w->gp[1] = (sluice_gcra_params){5, SEC, 10};
  w->pp = (sluice_penalty_params){3, 10 * SEC, {2 * SEC, 20 * SEC, 200 * SEC},
                                  3600 * SEC};
  w->lp = (sluice_lease_params){2, 3 * SEC};
  w->wp = (sluice_window_params){7, 2 * SEC};
}

static void random_op(world *w, uint64_t *rng, sluice_op *op) {
  memset(op, 0, sizeof *op);
  switch (h_rnd(rng) % 5) {
  case 0:
  case 1:
    *op = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, &w->keys[0],
                      w->gp, 1 + (int64_t)(h_rnd(rng) % 3), 0};
    break;
  case 2:
    *op = (sluice_op){SLUICE_ALGO_PENALTY,
                      h_rnd(rng) % 3 ? SLUICE_OP_STRIKE : SLUICE_OP_CHECK, 1,
                      &w->keys[2], &w->pp, 0, 0};
    break;
  case 3:
    *op = (sluice_op){SLUICE_ALGO_LEASE,
                      h_rnd(rng) % 2 ? SLUICE_OP_ACQUIRE
                                     : SLUICE_OP_LEASE_RELEASE,
                      2, &w->keys[3], &w->lp, 0, 1 + h_rnd(rng) % 3};
    break;
  default:
    *op = (sluice_op){SLUICE_ALGO_SWINDOW, SLUICE_OP_CONSUME, 1, &w->keys[5],
                      &w->wp, 1, 0};
    break;
  }
}

static int same_verdict(const sluice_verdict *a, const sluice_verdict *b) {
  return a->allowed == b->allowed && a->remaining == b->remaining &&
         a->limit == b->limit && a->retry_after_ns == b->retry_after_ns &&
         a->reset_ns == b->reset_ns && a->level == b->level &&
         a->strikes_remaining == b->strikes_remaining &&
         a->offenses == b->offenses && a->flags == b->flags &&
         a->binding == b->binding && a->lease_id == b->lease_id &&
         a->now_ns == b->now_ns;
}

static void t_nth(void) {
  static const int codes[] = {SLUICE_EBACKEND, SLUICE_ETIMEDOUT,
                              SLUICE_EUNAVAIL, SLUICE_EIO,
                              SLUICE_EFULL,    SLUICE_ENOMEM,
                              7 /* a positive code: must read as EBACKEND */};
  uint64_t rng = 42;
  long local_faults = 0;
  for (size_t ci = 0; ci < sizeof codes / sizeof codes[0]; ci++) {
    for (int round = 0; round < 4; round++) {
      sluice_clock *c1, *c2;
      sluice_limiter *lf, *lr;
      sluice_limiter_options o = {0};
      fail_plan plan;
      fail_stats st;
      world w;
      int64_t t = 1000 * SEC;
      long seen = 0;
      int want = codes[ci] > 0 ? SLUICE_EBACKEND : codes[ci];

      world_init(&w);
      REQUIRE(sluice_clock_manual(t, &c1) == 0 &&
                  sluice_clock_manual(t, &c2) == 0,
              "clocks");
      o.store = "fail:";
      o.backend = &fail_store_backend;
      o.clock = c1;
      REQUIRE(sluice_limiter_open(&o, &lf, NULL, 0) == SLUICE_OK, "open fault");
      REQUIRE(h_open("mem", c2, &lr) == SLUICE_OK, "open mem");
      plan.nth = 1 + (long)(h_rnd(&rng) % 60);
      plan.count = round == 3 ? 0 : 1 + (long)(h_rnd(&rng) % 5);
      plan.code = codes[ci];
      REQUIRE(sluice_limiter_control(lf, FAIL_STORE_CTL_PLAN, &plan) == SLUICE_OK,
              "plan");
      for (int i = 0; i < 300; i++) {
        sluice_op op;
        sluice_verdict vf, vr;
        int rf, rr;
        t += (int64_t)(h_rnd(&rng) % (300 * MS));
        sluice_clock_set(c1, t);
        sluice_clock_set(c2, t);
        if (i % 50 == 49) { /* a batch of independent ops */
          sluice_op ops[3];
          sluice_verdict vfs[3], vrs[3];
          int rfs[3], rrs[3];
          /* different groups: bucket, box, window */
          ops[0] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2,
                               &w.keys[0], w.gp, 1, 0};
          ops[1] = (sluice_op){SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 1,
                               &w.keys[2], &w.pp, 0, 0};
          ops[2] = (sluice_op){SLUICE_ALGO_SWINDOW, SLUICE_OP_CONSUME, 1,
                               &w.keys[5], &w.wp, 1, 0};
          rf = ops_decide(lf, 3, ops, SLUICE_NOW, vfs, rfs);
          if (rf != SLUICE_OK) {
            VIOLATION_IF(rf != want, "batch: %d, expected %d", rf, want);
            seen++;
            continue;
          }
          rr = ops_decide(lr, 3, ops, SLUICE_NOW, vrs, rrs);
          REQUIRE(rr == SLUICE_OK, "reference batch");
          for (int j = 0; j < 3; j++) {
            VIOLATION_IF(rfs[j] != rrs[j] ||
                             (rfs[j] == 0 && !same_verdict(&vfs[j], &vrs[j])),
                         "batch op %d differs from the reference", j);
            decisions++;
          }
          continue;
        }
        random_op(&w, &rng, &op);
        rf = op_decide(lf, &op, SLUICE_NOW, &vf);
        if (rf != SLUICE_OK) {
          VIOLATION_IF(rf != want, "code %d: got %d (%s)", codes[ci], rf,
                       sluice_err_name(rf));
          VIOLATION_IF(strstr(sluice_limiter_errmsg(lf), "injected") == NULL,
                       "no store detail: '%s'", sluice_limiter_errmsg(lf));
          seen++;
          continue;
        }
        rr = op_decide(lr, &op, SLUICE_NOW, &vr);
        REQUIRE(rr == SLUICE_OK, "reference apply: %s", sluice_strerror(rr));
        VIOLATION_IF(!same_verdict(&vf, &vr),
                     "code %d round %d op %d: verdict differs after a fault "
                     "(allowed %d/%d remaining %lld/%lld)",
                     codes[ci], round, i, vf.allowed, vr.allowed,
                     (long long)vf.remaining, (long long)vr.remaining);
        decisions++;
      }
      /* Every record equals the reference's. */
      for (int k = 0; k < 6; k++) {
        sluice_state a, b;
        int64_t ea, eb;
        int ra = sluice_limiter_get(lf, w.keys[k].data, w.keys[k].len, &a, &ea);
        int rb = sluice_limiter_get(lr, w.keys[k].data, w.keys[k].len, &b, &eb);
        VIOLATION_IF(ra != rb || (ra == 0 && (memcmp(&a, &b, sizeof a) != 0 ||
                                              ea != eb)),
                     "record %s differs from the reference", w.names[k]);
      }
      REQUIRE(sluice_limiter_control(lf, FAIL_STORE_CTL_STATS, &st) == 0, "stats");
      VIOLATION_IF(st.injected != seen, "injected %ld, seen %ld", st.injected,
                   seen);
      VIOLATION_IF(seen == 0, "plan nth=%ld never fired", plan.nth);
      local_faults += seen;
      sluice_limiter_close(lf);
      sluice_limiter_close(lr);
      sluice_clock_free(c1);
      sluice_clock_free(c2);
    }
  }
  faults += local_faults;
  printf("nth: %ld faults injected over 7 codes x 4 plans\n", local_faults);
}

/* ---------------------------------------------------------- outage --- */

/* A setting of the configuration in force, as an integer. */
static int64_t conf_int(const sluice_policy_config *c, const char *path) {
  char v[32];
  REQUIRE(sluice_policy_config_get(c, path, v, sizeof v) == SLUICE_OK, "%s",
          path);
  return strtoll(v, NULL, 10);
}

static void t_outage(void) {
  sluice_clock *clk;
  sluice_limiter *lim;
  sluice_limiter_options o = {0};
  sluice_policy_options po = {0};
  sluice_policy_config *cfg;
  sluice_policy *p;
  sluice_request std = {0}, rec = {0}, auth = {0};
  sluice_attr rec_ledger = {"ledger", "ledger-9"};
  sluice_attr auth_attrs[2] = {{"subject", "client-7"},
                               {"result", "bad_secret"}};
  sluice_decision d;
  fail_plan plan = {0, 0, SLUICE_ETIMEDOUT};
  fail_stats st;
  int64_t t = 5000 * SEC, t_out;
  long admitted = 0, n_out = 0;
  struct {
    int64_t key_burst, key_rate, key_period_ns;
  } tv, *tier = &tv;
  int64_t pct, bound;

  REQUIRE(sluice_clock_manual(t, &clk) == 0, "clock");
  o.store = "fail:";
  o.backend = &fail_store_backend;
  o.clock = clk;
  REQUIRE(sluice_limiter_open(&o, &lim, NULL, 0) == SLUICE_OK, "open");
  REQUIRE(sluice_policy_config_new(&cfg, SLUICE_LEDGER_CONF, NULL, 0) ==
              SLUICE_OK,
          "the ledger policy");
  po.limiter = lim;
  po.config = cfg;
  memset(po.secret, 0x5a, sizeof po.secret);
  REQUIRE(sluice_policy_open(&po, &p) == SLUICE_OK, "policy open");
  std.tenant_id = "tenant-1";
  std.api_key_id = "key-1";
  std.tier = "sandbox";
  std.method = "GET";
  std.route = "/v1/ledgers/main/entries";
  rec = std;
  rec.method = "POST";
  rec.route = "/v1/ledgers/reconcile";
  rec.attrs = &rec_ledger;
  rec.nattrs = 1;
  auth.method = "POST";
  auth.route = "/v1/auth/token";
  auth.attrs = auth_attrs;
  auth.nattrs = 2;
  auth.client_ip = "192.0.2.7";
  /* sandbox takes the key limit's own numbers (etc/ledger.conf) */
  tv.key_burst = conf_int(cfg, "limits.key.burst");
  tv.key_rate = conf_int(cfg, "limits.key.rate");
  tv.key_period_ns = conf_int(cfg, "limits.key.period_ms") * MS;

  /* A: healthy. */
  for (int i = 0; i < 10; i++, t += 100 * MS) {
    sluice_clock_set(clk, t);
    REQUIRE(sluice_policy_decide(p, 1, &std, &d, NULL) == SLUICE_OK, "decide");
    VIOLATION_IF(!d.allowed || (d.flags & SLUICE_DECISION_DEGRADED),
                 "healthy store: allowed %d flags %#x", d.allowed, d.flags);
    decisions++;
  }
  /* B: every call fails for 20 s. */
  plan.nth = 1;
  REQUIRE(sluice_limiter_control(lim, FAIL_STORE_CTL_PLAN, &plan) == 0, "plan");
  t_out = t;
  for (int i = 0; i < 2000; i++, t += 10 * MS) {
    sluice_clock_set(clk, t);
    REQUIRE(sluice_policy_decide(p, 1, &std, &d, NULL) == SLUICE_OK, "decide");
    decisions++;
    n_out++;
    VIOLATION_IF(!(d.flags & SLUICE_DECISION_DEGRADED),
                 "outage: standard request not flagged degraded (flags %#x)",
                 d.flags);
    admitted += d.allowed;
    if (i % 100 == 0) {
      REQUIRE(sluice_policy_decide(p, 1, &rec, &d, NULL) == SLUICE_OK,
              "reconcile");
      VIOLATION_IF(d.allowed || d.status != 503 ||
                       !(d.flags & SLUICE_DECISION_FAIL_CLOSED) ||
                       d.retry_after_ns !=
                           conf_int(cfg, "failure.retry_after_s") * SEC,
                   "outage: reconcile allowed %d status %d flags %#x retry "
                   "%lld",
                   d.allowed, d.status, d.flags, (long long)d.retry_after_ns);
      REQUIRE(sluice_policy_decide(p, 1, &auth, &d, NULL) == SLUICE_OK, "auth");
      VIOLATION_IF(d.allowed || d.status != 503 ||
                       !(d.flags & SLUICE_DECISION_FAIL_CLOSED),
                   "outage: auth allowed %d status %d flags %#x", d.allowed,
                   d.status, d.flags);
      decisions += 2;
    }
  }
  /* The degraded key bucket: pct% of burst, pct% of rate. */
  pct = conf_int(cfg, "failure.degraded_percent");
  bound = tier->key_burst * pct / 100 +
          (int64_t)(((i128)(t - t_out) * tier->key_rate * pct) /
                    ((i128)tier->key_period_ns * 100)) +
          1;
  VIOLATION_IF(admitted > bound,
               "degraded limiter admitted %ld in %lld ms, bound %lld",
               admitted, (long long)((t - t_out) / MS), (long long)bound);
  VIOLATION_IF(admitted < tier->key_burst * pct / 100,
               "degraded limiter admitted only %ld (burst %lld)", admitted,
               (long long)(tier->key_burst * pct / 100));
  /* C: the store answers again. */
  plan.nth = 0;
  REQUIRE(sluice_limiter_control(lim, FAIL_STORE_CTL_PLAN, &plan) == 0, "plan");
  t += conf_int(cfg, "failure.probe_interval_ms") * MS + 1;
  sluice_clock_set(clk, t);
  REQUIRE(sluice_policy_decide(p, 1, &std, &d, NULL) == SLUICE_OK, "decide");
  VIOLATION_IF(!d.allowed || (d.flags & SLUICE_DECISION_DEGRADED),
               "after recovery: allowed %d flags %#x", d.allowed, d.flags);
  REQUIRE(sluice_policy_decide(p, 1, &rec, &d, NULL) == SLUICE_OK, "reconcile");
  VIOLATION_IF(!d.allowed || d.lease_id == 0,
               "after recovery: reconcile allowed %d status %d", d.allowed,
               d.status);
  decisions += 2;
  REQUIRE(sluice_limiter_control(lim, FAIL_STORE_CTL_STATS, &st) == 0, "stats");
  faults += st.injected;
  printf("outage: %ld decisions in 20 s of store failure (%ld store calls "
         "failed), %ld admitted by the degraded limiter (bound %lld)\n",
         n_out, st.injected, admitted, (long long)bound);
  sluice_policy_close(p);
  sluice_policy_config_free(cfg);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

/* ----------------------------------------------------------- clock --- */

static void jump(sluice_clock *c, int64_t t) {
  sluice_clock_set(c, t);
  jumps++;
}

static int take(sluice_limiter *l, const sluice_key *k,
                const sluice_gcra_params *g, sluice_verdict *v) {
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, k, g, 1, 0};
  int rc = op_decide(l, &op, SLUICE_NOW, v);
  REQUIRE(rc == SLUICE_OK, "take: %s", sluice_strerror(rc));
  decisions++;
  return v->allowed;
}

static void t_clock_on(const char *backend) {
  char uri[256], dir[256];
  sluice_clock *clk;
  sluice_limiter *lim;
  sluice_verdict v;
  const int64_t T0 = 1000000 * SEC; /* about 11.6 days */
  sluice_gcra_params g = {10, SEC, 20};
  sluice_key kb = {"{c}:bucket", 10}, kp = {"{c}:box", 7},
             kw = {"{c}:win", 7}, kr = {"{c}:walk", 8};
  sluice_key kl[1] = {{"{c}:lease0", 10}};
  int64_t retry, t, end;
  int rc, i;

  h_store_uri(backend, "fault-clock", uri, sizeof uri, dir, sizeof dir);
  REQUIRE(sluice_clock_manual(T0, &clk) == 0, "clock");
  rc = h_open(uri, clk, &lim);
  if (rc == SLUICE_ENOTSUP) {
    printf("clock on %s: skipped (compiled out)\n", backend);
    sluice_clock_free(clk);
    return;
  }
  REQUIRE(rc == SLUICE_OK, "open %s", uri);

  /* 1. Drain, jump back an hour: no refund, no double charge. */
  for (i = 0; i < 20; i++)
    VIOLATION_IF(!take(lim, &kb, &g, &v), "%s: burst take %d denied",
                 backend, i);
  VIOLATION_IF(take(lim, &kb, &g, &v), "%s: 21st take admitted", backend);
  retry = v.retry_after_ns;
  VIOLATION_IF(retry != 100 * MS, "%s: retry %lld, expected 100 ms", backend,
               (long long)retry);
  jump(clk, T0 - 3600 * SEC);
  VIOLATION_IF(take(lim, &kb, &g, &v), "%s: backward jump refunded", backend);
  VIOLATION_IF(sluice_limiter_now(lim) < T0, "%s: limiter time went back",
               backend);
  jump(clk, T0 + retry - 1);
  VIOLATION_IF(take(lim, &kb, &g, &v), "%s: admitted before retry-after",
               backend);
  jump(clk, T0 + retry);
  VIOLATION_IF(!take(lim, &kb, &g, &v),
               "%s: denied at the retry-after given before the jump "
               "(double charge)",
               backend);

  /* 2. Ten days forward: exactly a full bucket. */
  t = T0 + 10 * 86400 * SEC;
  jump(clk, t);
  for (i = 0; i < 20; i++)
    VIOLATION_IF(!take(lim, &kb, &g, &v), "%s: refilled take %d denied",
                 backend, i);
  VIOLATION_IF(take(lim, &kb, &g, &v), "%s: forward jump over-filled",
               backend);

  /* 3. A box survives a backward jump and ends exactly on time. */
  {
    sluice_penalty_params pp = {3, 60 * SEC, {60 * SEC, 600 * SEC, SLUICE_FOREVER},
                                86400 * SEC};
    sluice_op op = {SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 1, &kp, &pp, 1, 0};
    t += SEC;
    jump(clk, t);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "trip");
    end = t + v.retry_after_ns;
    VIOLATION_IF(v.allowed || v.retry_after_ns != 60 * SEC,
                 "%s: trip allowed %d retry %lld", backend, v.allowed,
                 (long long)v.retry_after_ns);
    op.kind = SLUICE_OP_CHECK;
    jump(clk, t - 7200 * SEC);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "check");
    VIOLATION_IF(v.allowed, "%s: backward jump lifted the box", backend);
    jump(clk, end - 1);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "check");
    VIOLATION_IF(v.allowed, "%s: box ended early", backend);
    jump(clk, end);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "check");
    VIOLATION_IF(!v.allowed, "%s: box outlived its end", backend);
    decisions += 4;
    t = end;
  }

  /* 4. A full fixed window does not reopen on a backward jump. */
  {
    sluice_window_params wp = {5, 10 * SEC};
    sluice_op op = {SLUICE_ALGO_FWINDOW, SLUICE_OP_CONSUME, 1, &kw, &wp, 1, 0};
    t = (t / (10 * SEC) + 1) * 10 * SEC + SEC; /* 1 s into a window */
    jump(clk, t);
    for (i = 0; i < 5; i++) {
      REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "window");
      VIOLATION_IF(!v.allowed, "%s: window take %d denied", backend, i);
    }
    jump(clk, t - 3600 * SEC);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "window");
    VIOLATION_IF(v.allowed, "%s: backward jump reopened the window", backend);
    jump(clk, t - SEC + 10 * SEC);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "window");
    VIOLATION_IF(!v.allowed, "%s: next window still closed", backend);
    decisions += 7;
    t += 9 * SEC;
  }

  /* 5. A lease: held across a backward jump, reclaimed after its TTL. */
  {
    sluice_lease_params lp = {1, 5 * SEC};
    sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 1, kl, &lp, 0, 1};
    t += SEC;
    jump(clk, t);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK && v.allowed,
            "acquire 1");
    op.id = 2;
    jump(clk, t - 600 * SEC);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "acquire 2");
    VIOLATION_IF(v.allowed, "%s: backward jump freed a held lease", backend);
    jump(clk, t + 5 * SEC - 1);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "acquire 2");
    VIOLATION_IF(v.allowed, "%s: lease reclaimed before its TTL", backend);
    jump(clk, t + 5 * SEC);
    REQUIRE(op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK, "acquire 2");
    VIOLATION_IF(!v.allowed, "%s: lease not reclaimed after its TTL",
                 backend);
    decisions += 4;
    t += 5 * SEC;
  }

  /* 6. A random walk of jumps: the bound over the limiter's own time. */
  {
    uint64_t rng = 7;
    int64_t first = -1, hw = t, admitted = 0;
    for (i = 0; i < 4000; i++) {
      uint64_t r = h_rnd(&rng) % 100;
      int64_t now_set;
      if (r < 70)
        t += (int64_t)(h_rnd(&rng) % (50 * MS));
      else if (r < 90)
        t -= (int64_t)(h_rnd(&rng) % (3600 * SEC));
      else if (r < 98)
        t += (int64_t)(h_rnd(&rng) % (10 * SEC));
      else
        t += (int64_t)(h_rnd(&rng) % (86400 * SEC));
      if (t < 0)
        t = 0;
      now_set = t;
      jump(clk, now_set);
      if (now_set > hw)
        hw = now_set;
      if (take(lim, &kr, &g, &v)) {
        if (first < 0)
          first = v.now_ns;
        admitted++;
      }
    }
    VIOLATION_IF((i128)admitted * g.period_ns >
                     (i128)g.burst * g.period_ns + (i128)(hw - first) * g.rate,
                 "%s: random walk admitted %lld over %lld ns", backend,
                 (long long)admitted, (long long)(hw - first));
    printf("clock on %s: %lld admitted in a 4000-step walk of jumps\n",
           backend, (long long)admitted);
  }
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
  h_store_cleanup(backend, "fault-clock", dir);
}

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL;
  if (!only || strcmp(only, "nth") == 0)
    t_nth();
  if (!only || strcmp(only, "outage") == 0)
    t_outage();
  if (!only || strcmp(only, "clock") == 0)
    for (size_t i = 0; i < sizeof h_backends / sizeof h_backends[0]; i++)
      t_clock_on(h_backends[i].name);
  printf("figures: decisions=%ld faults_injected=%ld clock_jumps=%ld "
         "violations=%ld\n",
         decisions, faults, jumps, h_violations);
  return h_violations ? 1 : 0;
}

/*
** Soak test (issue 9): the policy layer (sluice_policy_decide) on each
** available backend under sustained load for a bounded time, from several
** processes (shm, lmdb: fork()ed workers, each with its own policy on the
** shared store) or several threads (mem: one policy).  Then, with a policy
** of its own whose clock runs past the lease TTL, it checks:
**
**  - over-admission: for every key bucket and every tenant bucket, the
**    points admitted are at most burst + rate * elapsed (workers add each
**    allowed decision's cost to shared counters);
**  - lease concurrency never exceeded the tier's reconcile concurrency,
**    and no lease leaked past its TTL: every tenant can take all of its
**    reconcile slots again (workers abandon 10% of their leases, as a
**    crashed handler would);
**  - no box was lost: every key that tripped a box is still boxed, with
**    the same lockout end;
**  - no decision needed the failure mode (degraded or fail-closed).
**
** Figures per backend: decisions, outcomes, leases, boxes, violations.
** SLUICE_SOAK_SECONDS (default 4) is the load time per backend;
** SLUICE_SOAK_THREADS=1 runs every backend on threads of this process
** (one shared policy), which is how the TSan build runs it;
** SLUICE_SOAK_STORES adds store strings (e.g. a Redis cluster:
** "redis:nodes=127.0.0.1:7000"), separated by spaces.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "../fault/harness.h"

#define WORKERS 3
#define NTEN 3  /* tenants 0, 1: tier "soak"; tenant 2: tier "boxy" */
#define NKEY 4  /* keys per tenant */
#define NLEDGER 6
#define LEASE_TTL (60LL * 1000000000)

typedef struct shared {
  _Atomic long decisions, outcome[SLUICE_OUTCOME__COUNT], failure_mode;
  _Atomic long key_points[NTEN][NKEY], tenant_points[NTEN];
  _Atomic long held[NTEN], max_held[NTEN], granted, abandoned, released;
  _Atomic int64_t box_end[NTEN][NKEY]; /* lockout end of a trip, 0: none */
  _Atomic long trips, errors, boxy_decisions;
  _Atomic int first_error; /* the first failed call's SLUICE_E* */
} shared;

static shared *sh;
static sluice_policy_config *cfg;
static const uint8_t secret[16] = "soak-secret-key";
static int seconds = 4;
static int64_t t_end;
static char tenant_name[NTEN][16], key_name[NTEN][NKEY][16];

/* Tier names the default policy knows too ("soak" takes the limits' own
** numbers, "boxy" its params: make_config). */
static const char *tier_of(int t) { return t < 2 ? "sandbox" : "growth"; }

/* The two tiers, as configured (make_config writes them in) and as the
** bounds below check them. */
typedef struct soak_tier {
  const char *name;
  int64_t tenant_rate, tenant_period_ns, tenant_burst;
  int64_t key_rate, key_period_ns, key_burst;
  int64_t strike_threshold, reconcile_concurrency;
} soak_tier;
static const soak_tier soak_tiers[2] = {
    /* never boxed */
    {"soak", 3000, 1000000000, 600, 400, 1000000000, 100, (1 << 20) - 1, 2},
    /* every cost must fit the key bucket (export_long 50) */
    {"boxy", 10, 1000000000, 600, 20, 1000000000, 60, 5, 1}};

/* The policy: etc/ledger.conf's shape (tenant and key buckets as one
** group, the reconcile's ledger lock and concurrency, the key's box) with
** the two tiers' numbers, written to a file and loaded. */
static void make_config(void) {
  const soak_tier *s = &soak_tiers[0], *b = &soak_tiers[1];
  char err[256], path[] = "/tmp/soak-policy-XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  REQUIRE(f != NULL, "soak config: cannot write %s", path);
  fprintf(f,
          "attributes = [ \"ledger\" ];\n"
          "limits = {\n"
          "  tenant = { algorithm = \"gcra\"; scope = [ \"tenant\" ];"
          " rate = %lld; period_ms = %lld; burst = %lld; by = \"tier\";"
          " params = { growth = { rate = %lld; period_ms = %lld;"
          " burst = %lld; }; }; };\n"
          "  key = { algorithm = \"gcra\"; scope = [ \"tenant\", \"key\" ];"
          " rate = %lld; period_ms = %lld; burst = %lld; by = \"tier\";"
          " params = { growth = { rate = %lld; period_ms = %lld;"
          " burst = %lld; }; }; };\n"
          "  ledger_lock = { algorithm = \"lock\";"
          " scope = [ \"tenant\", \"ledger\" ]; ttl_ms = %lld; };\n"
          "  reconciles = { algorithm = \"concurrency\";"
          " scope = [ \"tenant\" ]; max = %lld; ttl_ms = %lld;"
          " by = \"tier\"; params = { growth = { max = %lld; }; }; };\n"
          "};\n"
          "penalties = { keys = { scope = [ \"tenant\", \"key\" ];"
          " strike = \"early\"; strikes = %lld; strike_window_ms = 60000;"
          " offense_ttl_s = 86400;"
          " levels = ( { box_s = 300; }, { box_s = 3600; },"
          " { actions = [ \"suspend\" ]; } );"
          " by = \"tier\"; params = { growth = { strikes = %lld; }; }; }; };\n"
          "routes = (\n"
          "  { method = \"POST\"; route = \"/v1/ledgers/reconcile\";"
          " limits = ( { group = [ \"tenant\", \"key\" ]; cost = 10; },"
          " \"ledger_lock\", \"reconciles\" ); penalty = \"keys\"; },\n"
          "  { method = \"*\"; route = \"/v1/*\";"
          " limits = ( { group = [ \"tenant\", \"key\" ]; } );"
          " penalty = \"keys\"; } );\n",
          (long long)s->tenant_rate, (long long)(s->tenant_period_ns / 1000000),
          (long long)s->tenant_burst, (long long)b->tenant_rate,
          (long long)(b->tenant_period_ns / 1000000),
          (long long)b->tenant_burst, (long long)s->key_rate,
          (long long)(s->key_period_ns / 1000000), (long long)s->key_burst,
          (long long)b->key_rate, (long long)(b->key_period_ns / 1000000),
          (long long)b->key_burst, (long long)(LEASE_TTL / 1000000),
          (long long)s->reconcile_concurrency, (long long)(LEASE_TTL / 1000000),
          (long long)b->reconcile_concurrency,
          (long long)s->strike_threshold, (long long)b->strike_threshold);
  REQUIRE(fclose(f) == 0, "soak config: cannot write %s", path);
  {
    int rc = sluice_policy_config_new(&cfg, path, err, sizeof err);
    unlink(path);
    REQUIRE(rc == SLUICE_OK, "soak config: %s", err);
  }
  for (int t = 0; t < NTEN; t++) {
    snprintf(tenant_name[t], sizeof tenant_name[t], "tenant-%d", t);
    for (int k = 0; k < NKEY; k++)
      snprintf(key_name[t][k], sizeof key_name[t][k], "key-%d-%d", t, k);
  }
}

static const soak_tier *tier_cfg(int t) { return &soak_tiers[t < 2 ? 0 : 1]; }

/* A policy on store `uri` (its own limiter), or on the borrowed `lim`. */
static int open_policy_on(const char *uri, sluice_clock *clk,
                          sluice_limiter *lim, sluice_policy **p) {
  sluice_limiter_options lo = {0};
  sluice_policy_options po = {0};
  char err[256];
  int rc;
  po.limiter = lim;
  lo.store = uri;
  lo.clock = clk;
  lo.flags = SLUICE_OPEN_CREATE;
  po.limiter_options = &lo;
  po.config = cfg;
  memcpy(po.secret, secret, sizeof po.secret);
  po.errbuf = err;
  po.errlen = sizeof err;
  rc = sluice_policy_open(&po, p);
  if (rc != SLUICE_OK && rc != SLUICE_ENOTSUP)
    fprintf(stderr, "policy open %s: %s (%s)\n", uri, sluice_strerror(rc), err);
  return rc;
}

static int open_policy(const char *uri, sluice_clock *clk, sluice_policy **p) {
  return open_policy_on(uri, clk, NULL, p);
}

static void record(const sluice_decision *d, int t, int k) {
  atomic_fetch_add(&sh->decisions, 1);
  if (d->outcome >= 0 && d->outcome < SLUICE_OUTCOME__COUNT)
    atomic_fetch_add(&sh->outcome[d->outcome], 1);
  if (d->flags & (SLUICE_DECISION_DEGRADED | SLUICE_DECISION_FAIL_CLOSED))
    atomic_fetch_add(&sh->failure_mode, 1);
  if (d->allowed) {
    atomic_fetch_add(&sh->key_points[t][k], (long)d->cost);
    atomic_fetch_add(&sh->tenant_points[t], (long)d->cost);
  }
  if (d->flags & SLUICE_DECISION_TRIPPED) {
    int64_t e = d->lockout_end_ns, old = atomic_load(&sh->box_end[t][k]);
    atomic_fetch_add(&sh->trips, 1);
    while (e > old && !atomic_compare_exchange_weak(&sh->box_end[t][k], &old, e))
      ;
  }
}

/* A failed call: counted, and the first one's code kept for the report. */
static void note_error(int rc) {
  int none = 0;
  atomic_fetch_add(&sh->errors, 1);
  atomic_compare_exchange_strong(&sh->first_error, &none, rc);
}

static void load(sluice_policy *p, uint64_t seed) {
  uint64_t rng = seed;
  while (h_real_ns() < t_end) {
    for (int burst = 0; burst < 64; burst++) {
      uint64_t r = h_rnd(&rng) % 100;
      int t = r < 5 ? 2 : (int)(h_rnd(&rng) % 2);
      int k = t == 2 ? 0 : (int)(h_rnd(&rng) % NKEY); /* boxy: one key */
      sluice_request q = {0};
      sluice_decision d;
      int rc;
      q.tenant_id = tenant_name[t];
      q.api_key_id = key_name[t][k];
      q.tier = tier_of(t);
      q.method = "GET";
      q.route = "/v1/ledgers/main/entries";
      if (r >= 90) { /* a reconcile on one of the tenant's ledgers */
        char ledger[16];
        sluice_attr a = {"ledger", ledger};
        snprintf(ledger, sizeof ledger, "ledger-%d",
                 (int)(h_rnd(&rng) % NLEDGER));
        q.method = "POST";
        q.route = "/v1/ledgers/reconcile";
        q.attrs = &a;
        q.nattrs = 1;
        rc = sluice_policy_decide(p, 1, &q, &d, NULL);
        if (rc != SLUICE_OK) {
          note_error(rc);
          continue;
        }
        record(&d, t, k);
        if (d.allowed && d.lease_id) {
          long h = atomic_fetch_add(&sh->held[t], 1) + 1,
               m = atomic_load(&sh->max_held[t]);
          atomic_fetch_add(&sh->granted, 1);
          while (h > m && !atomic_compare_exchange_weak(&sh->max_held[t], &m, h))
            ;
          atomic_fetch_sub(&sh->held[t], 1); /* before the release: see top */
          if (h_rnd(&rng) % 10 == 0) {
            atomic_fetch_add(&sh->abandoned, 1); /* a crashed handler */
          } else {
            rc = sluice_policy_release(p, &q,
                                       &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                      .lease_id = d.lease_id});
            if (rc == SLUICE_OK)
              atomic_fetch_add(&sh->released, 1);
            else
              note_error(rc);
          }
        }
        continue;
      }
      rc = sluice_policy_decide(p, 1, &q, &d, NULL);
      if (rc != SLUICE_OK) {
        note_error(rc);
        continue;
      }
      if (t == 2)
        atomic_fetch_add(&sh->boxy_decisions, 1);
      record(&d, t, k);
    }
  }
}

typedef struct targ {
  sluice_policy *p;
  uint64_t seed;
} targ;

static void *thread_main(void *a) {
  targ *ta = a;
  load(ta->p, ta->seed);
  return NULL;
}

static _Atomic int64_t skew_ns;
static int64_t skewed_now(void *ud) {
  (void)ud;
  return h_real_ns() + atomic_load(&skew_ns);
}

/* lim: the in-process limiter (mem), whose clock is skewed_now; NULL: open
** the store `uri` again. */
static void verify(const char *name, const char *uri, sluice_limiter *lim,
                   int64_t t0, int64_t t1) {
  sluice_clock *clk = NULL;
  sluice_policy *p;
  long before = h_violations;
  int boxes = 0;

  if (atomic_load(&sh->failure_mode) > 0)
    VIOLATION_IF(1, "%s: %ld decisions in the failure mode", name,
                 atomic_load(&sh->failure_mode));
  VIOLATION_IF(atomic_load(&sh->errors) > 0,
               "%s: %ld calls failed, the first with %s", name,
               atomic_load(&sh->errors),
               sluice_strerror(atomic_load(&sh->first_error)));
  /* Over-admission, per key and per tenant. */
  for (int t = 0; t < NTEN; t++) {
    const soak_tier *tc = tier_cfg(t);
    __extension__ __int128 el = t1 - t0;
    long tp = atomic_load(&sh->tenant_points[t]);
    VIOLATION_IF((__int128)tp * tc->tenant_period_ns >
                     (__int128)tc->tenant_burst * tc->tenant_period_ns +
                         el * tc->tenant_rate,
                 "%s: tenant %d admitted %ld points in %lld ms", name, t, tp,
                 (long long)((t1 - t0) / 1000000));
    for (int k = 0; k < NKEY; k++) {
      long kp = atomic_load(&sh->key_points[t][k]);
      VIOLATION_IF((__int128)kp * tc->key_period_ns >
                       (__int128)tc->key_burst * tc->key_period_ns +
                           el * tc->key_rate,
                   "%s: key %d/%d admitted %ld points in %lld ms", name, t, k,
                   kp, (long long)((t1 - t0) / 1000000));
    }
    VIOLATION_IF(atomic_load(&sh->max_held[t]) > tc->reconcile_concurrency,
                 "%s: tenant %d held %ld reconcile leases at once (max %lld)",
                 name, t, atomic_load(&sh->max_held[t]),
                 (long long)tc->reconcile_concurrency);
  }
  /* A policy whose clock is past every lease TTL (boxes last 5 min). */
  atomic_store(&skew_ns, LEASE_TTL + 1000000000);
  if (!lim)
    REQUIRE(sluice_clock_custom(skewed_now, NULL, &clk) == 0, "clock");
  REQUIRE(open_policy_on(uri, clk, lim, &p) == SLUICE_OK, "verifier open");
  for (int t = 0; t < NTEN; t++) {
    for (int i = 0; i < tier_cfg(t)->reconcile_concurrency; i++) {
      sluice_request q = {0};
      sluice_decision d;
      char ledger[24];
      sluice_attr a = {"ledger", ledger};
      snprintf(ledger, sizeof ledger, "verify-%d", i);
      q.tenant_id = tenant_name[t];
      q.api_key_id = key_name[t][0];
      q.tier = tier_of(t);
      q.method = "POST";
      q.route = "/v1/ledgers/reconcile";
      q.attrs = &a;
      q.nattrs = 1;
      REQUIRE(sluice_policy_decide(p, 1, &q, &d, NULL) == SLUICE_OK,
              "verify decide");
      /* key 0 of the boxy tenant may be boxed: that is a box, not a leak */
      if (d.outcome == SLUICE_OUTCOME_BOXED)
        continue;
      VIOLATION_IF(!d.allowed,
                   "%s: tenant %d reconcile slot %d still held "
                   "past the lease TTL (outcome %s)",
                   name, t, i, sluice_name(SLUICE_NAME_OUTCOME, d.outcome));
    }
    for (int k = 0; k < NKEY; k++) {
      int64_t e = atomic_load(&sh->box_end[t][k]);
      sluice_request q = {0};
      sluice_decision d;
      if (!e)
        continue;
      boxes++;
      q.tenant_id = tenant_name[t];
      q.api_key_id = key_name[t][k];
      q.tier = tier_of(t);
      q.method = "GET";
      q.route = "/v1/ledgers/main/entries";
      REQUIRE(sluice_policy_decide(p, 1, &q, &d, NULL) == SLUICE_OK,
              "verify decide");
      if (d.now_ns < e)
        VIOLATION_IF(d.outcome != SLUICE_OUTCOME_BOXED &&
                         d.outcome != SLUICE_OUTCOME_SUSPENDED,
                     "%s: key %d/%d lost its box (ends %lld, now %lld, "
                     "outcome %s)",
                     name, t, k, (long long)e, (long long)d.now_ns,
                     sluice_name(SLUICE_NAME_OUTCOME, d.outcome));
    }
  }
  /* Liveness: a key sent three times what its bucket can pass in the run
  ** must have been throttled, struck and boxed (a slow sanitizer build may
  ** not get there: then there is nothing to check). */
  {
    const soak_tier *bt = tier_cfg(2);
    double can = (double)bt->key_burst +
                 (double)(t1 - t0) * (double)bt->key_rate /
                     (double)bt->key_period_ns;
    VIOLATION_IF(boxes == 0 && atomic_load(&sh->boxy_decisions) > 3 * can,
                 "%s: %ld requests on one boxy key (%.0f can pass) and no "
                 "box", name, atomic_load(&sh->boxy_decisions), can);
  }
  sluice_policy_close(p);
  sluice_clock_free(clk);
  {
    long kmax = 0;
    double el = (double)(t1 - t0) / 1e9;
    for (int k = 0; k < NKEY; k++)
      kmax += atomic_load(&sh->key_points[0][k]);
    printf("soak on %s: %.1f s, decisions=%ld allow=%ld throttled=%ld "
           "boxed=%ld concurrency=%ld conflict=%ld leases=%ld "
           "(abandoned %ld) trips=%ld boxes_checked=%d "
           "tenant0_key_points=%ld (bound %.0f) violations=%ld\n",
           name, el, atomic_load(&sh->decisions),
           atomic_load(&sh->outcome[SLUICE_OUTCOME_ALLOW]),
           atomic_load(&sh->outcome[SLUICE_OUTCOME_THROTTLED]),
           atomic_load(&sh->outcome[SLUICE_OUTCOME_BOXED]),
           atomic_load(&sh->outcome[SLUICE_OUTCOME_CONCURRENCY]),
           atomic_load(&sh->outcome[SLUICE_OUTCOME_CONFLICT]),
           atomic_load(&sh->granted), atomic_load(&sh->abandoned),
           atomic_load(&sh->trips), boxes, kmax,
           NKEY * ((double)tier_cfg(0)->key_burst +
                   el * (double)tier_cfg(0)->key_rate),
           h_violations - before);
  }
}

static int run(const char *name, const char *uri, int processes) {
  sluice_policy *p = NULL;
  sluice_limiter *lim = NULL;
  sluice_clock *clk = NULL;
  int64_t t0, t1;
  int rc;

  memset(sh, 0, sizeof *sh);
  atomic_store(&skew_ns, 0);
  if (!processes) { /* threads: one limiter, kept for the verifier */
    REQUIRE(sluice_clock_custom(skewed_now, NULL, &clk) == 0, "clock");
    rc = h_open(uri, clk, &lim);
    REQUIRE(rc == SLUICE_OK, "open %s", uri);
  }
  rc = open_policy_on(uri, NULL, lim, &p); /* creates the store */
  if (rc == SLUICE_ENOTSUP) {
    printf("soak on %s: skipped (compiled out)\n", name);
    return 0;
  }
  REQUIRE(rc == SLUICE_OK, "open %s", uri);
  t0 = h_real_ns();
  t_end = t0 + (int64_t)seconds * 1000000000;
  if (!processes) {
    pthread_t th[WORKERS];
    targ ta[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
      ta[i].p = p;
      ta[i].seed = 1000 + (uint64_t)i;
      REQUIRE(pthread_create(&th[i], NULL, thread_main, &ta[i]) == 0,
              "thread");
    }
    for (int i = 0; i < WORKERS; i++)
      pthread_join(th[i], NULL);
    t1 = h_real_ns();
  } else {
    pid_t pid[WORKERS];
    sluice_policy_close(p); /* lmdb must not cross fork() */
    p = NULL;
    for (int i = 0; i < WORKERS; i++) {
      pid[i] = fork();
      REQUIRE(pid[i] >= 0, "fork");
      if (pid[i] == 0) {
        sluice_policy *cp;
        if (open_policy(uri, NULL, &cp) != SLUICE_OK)
          _exit(3);
        load(cp, 2000 + (uint64_t)i);
        sluice_policy_close(cp);
        _exit(0);
      }
    }
    for (int i = 0; i < WORKERS; i++) {
      int st;
      waitpid(pid[i], &st, 0);
      VIOLATION_IF(!WIFEXITED(st) || WEXITSTATUS(st) != 0,
                   "%s: worker %d ended with status %d", name, i, st);
    }
    t1 = h_real_ns();
  }
  sluice_policy_close(p);
  verify(name, uri, lim, t0, t1);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
  return 1;
}

int main(void) {
  char uri[256], dir[256];
  const char *extra = getenv("SLUICE_SOAK_STORES");
  const char *th = getenv("SLUICE_SOAK_THREADS");
  int threads_only = th && *th == '1';
  if (getenv("SLUICE_SOAK_SECONDS"))
    seconds = atoi(getenv("SLUICE_SOAK_SECONDS"));
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(sh != MAP_FAILED, "mmap");
  make_config();
  for (size_t i = 0; i < sizeof h_backends / sizeof h_backends[0]; i++) {
    const char *b = h_backends[i].name;
    h_store_uri(b, "soak", uri, sizeof uri, dir, sizeof dir);
    run(b, uri, h_backends[i].cross_process && !threads_only);
    h_store_cleanup(b, "soak", dir);
  }
  if (extra && *extra) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", extra);
    for (char *s = strtok(buf, " "); s; s = strtok(NULL, " "))
      run(s, s, !threads_only);
  }
  printf("figures: violations=%ld\n", h_violations);
  sluice_policy_config_free(cfg);
  return h_violations ? 1 : 0;
}

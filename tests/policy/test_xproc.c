/*
** Decisions of several processes on one shared store (shm, lmdb, and a real
** Redis when SLUICE_REDIS_NODES names one), each process with its own
** limiter and policy, as workers of one service run:
**
**  - a box holds for everyone: processes hammer one key until a strike
**    trips its box; any decision that began after a process saw the trip
**    must be refused (the box lasts 5 min, far longer than the test);
**  - heavy requests under contention leave nothing behind: reconciles on
**    a few ledgers and exports race for the tenant's lease slots, ledger
**    locks, export cap and buckets on a frozen clock; at the end, with
**    every admitted lease released, every slot and lock is free, and the
**    buckets and the export cap hold exactly the charges of the admitted
**    requests;
**  - the per-IP backstop is one window: processes sending requests from
**    one address admit exactly its limit between them.
**
** Children report through a shared anonymous mapping and their exit code
** (no Criterion asserts outside the test's own process).
*/
#include <criterion/criterion.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "../common/rmtree.h"

#define NPROC 4
#define NKEYS 6
#define HAMMER 400
#define HEAVY 250

typedef struct shared {
  _Atomic uint64_t seq;             /* a global order of events */
  _Atomic uint64_t trip_at[NKEYS];  /* seq when a trip was seen, or max */
  _Atomic long admitted_after_trip; /* must stay 0 */
  _Atomic long trips, boxed, allowed, errors;
  _Atomic int64_t cost_admitted, exports_admitted;
  _Atomic long outcomes[SLUICE_OUTCOME__COUNT];
  _Atomic int ready; /* heavy children at the start line */
  _Atomic int first_what, first_rc; /* the first error, for the report */
} shared;

/* What went wrong first, so that a failure seen once in CI says why. */
enum { E_DECIDE = 1, E_DEGRADED, E_LEASE_ON_DENIAL, E_RELEASE };
static const char *const error_name[] = {
    "", "decide failed", "degraded (store error)", "a lease with a denial",
    "release failed"};

static void failed(shared *sh, int what, int rc) {
  int none = 0;
  atomic_fetch_add(&sh->errors, 1);
  if (atomic_compare_exchange_strong(&sh->first_what, &none, what))
    atomic_store(&sh->first_rc, rc);
}

/* A decision that failed or went degraded counts as an error. */
static int decide_ok(shared *sh, sluice_policy *p, const sluice_request *r,
                     sluice_decision *d) {
  int rc = sluice_policy_decide(p, 1, r, d, NULL);
  if (rc != SLUICE_OK) {
    failed(sh, E_DECIDE, rc);
    return 0;
  }
  if ((d->flags & SLUICE_DECISION_DEGRADED) || d->store_error) {
    failed(sh, E_DEGRADED, d->store_error);
    return 0;
  }
  return 1;
}

#define ERRORS_NONE(sh, store, what)                                          \
  cr_assert_eq(atomic_load(&(sh)->errors), 0, "%s: %s (first: %s, %s)",     \
               store, what, error_name[atomic_load(&(sh)->first_what)],     \
               sluice_strerror(atomic_load(&(sh)->first_rc)))

static const uint8_t secret[16] = {1, 2,  3,  4,  5,  6,  7,  8,
                                   9, 10, 11, 12, 13, 14, 15, 16};

static shared *shared_map(void) {
  shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int i;
  cr_assert_neq(s, MAP_FAILED);
  memset(s, 0, sizeof *s);
  for (i = 0; i < NKEYS; i++)
    atomic_store(&s->trip_at[i], UINT64_MAX);
  return s;
}

/* A policy on its own limiter over `store`; frozen: a manual clock. */
static int open_policy(const char *store, const sluice_policy_config *cfg,
                       sluice_clock *clk, unsigned flags, sluice_limiter **l,
                       sluice_policy **p) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  int rc;
  memset(&lo, 0, sizeof lo);
  lo.store = store;
  lo.clock = clk;
  lo.flags = flags;
  if ((rc = sluice_limiter_open(&lo, l, NULL, 0)) != SLUICE_OK)
    return rc;
  memset(&po, 0, sizeof po);
  po.limiter = *l;
  po.config = cfg;
  memcpy(po.secret, secret, 16);
  if ((rc = sluice_policy_open(&po, p)) != SLUICE_OK)
    sluice_limiter_close(*l);
  return rc;
}

typedef int (*child_fn)(const char *store, unsigned flags, shared *sh,
                        int who);

/* Fork NPROC workers running fn, and wait for all of them to succeed. */
static void run_children(child_fn fn, const char *store, unsigned flags,
                         shared *sh) {
  pid_t pids[NPROC];
  int i;
  for (i = 0; i < NPROC; i++) {
    pids[i] = fork();
    cr_assert_geq(pids[i], 0);
    if (pids[i] == 0)
      _exit(fn(store, flags, sh, i));
  }
  fx_wait_children(pids, NPROC);
}

/* ------------------------------------------------------------- box --- */

static sluice_policy_config *box_config(void) {
  sluice_policy_config *cfg = cfg_new();
  /* Every cost must fit the smallest burst. */
  cfg_set(cfg, "routes.[1].limits.[0].cost", 5);
  cfg_set(cfg, "routes.[2].limits.[0].cost", 5);
  cfg_set(cfg, "limits.key.burst", 5);
  cfg_set(cfg, "penalties.keys.strikes", 3);
  return cfg;
}

static int box_child(const char *store, unsigned flags, shared *sh,
                     int who) {
  sluice_policy_config *cfg;
  sluice_limiter *l;
  sluice_policy *p;
  int k, i;
  (void)who;
  cfg = box_config();
  if (open_policy(store, cfg, NULL, flags, &l, &p) != SLUICE_OK)
    return 2;
  for (k = 0; k < NKEYS; k++) {
    char key[16];
    sluice_request r = rq_std("boxco", key, "sandbox");
    snprintf(key, sizeof key, "key-%d", k);
    for (i = 0; i < HAMMER; i++) {
      sluice_decision d;
      uint64_t began = atomic_fetch_add(&sh->seq, 1);
      if (!decide_ok(sh, p, &r, &d))
        continue;
      if (d.flags & SLUICE_DECISION_TRIPPED) {
        uint64_t now = atomic_fetch_add(&sh->seq, 1), cur = UINT64_MAX;
        atomic_fetch_add(&sh->trips, 1);
        atomic_compare_exchange_strong(&sh->trip_at[k], &cur, now);
      }
      if (d.outcome == SLUICE_OUTCOME_BOXED)
        atomic_fetch_add(&sh->boxed, 1);
      if (d.allowed) {
        atomic_fetch_add(&sh->allowed, 1);
        if (began > atomic_load(&sh->trip_at[k]))
          atomic_fetch_add(&sh->admitted_after_trip, 1);
      }
    }
  }
  sluice_policy_close(p);
  sluice_limiter_close(l);
  return 0;
}

static void box_holds(const char *store, unsigned flags) {
  shared *sh = shared_map();
  run_children(box_child, store, flags, sh);
  ERRORS_NONE(sh, store, "store errors");
  cr_assert_geq(atomic_load(&sh->trips), NKEYS, "%s: every key tripped",
                store);
  cr_assert_geq(atomic_load(&sh->allowed), NKEYS * 5, "%s: bursts admitted",
               store);
  cr_assert_gt(atomic_load(&sh->boxed), NKEYS * 100, "%s: boxed after",
               store);
  cr_assert_eq(atomic_load(&sh->admitted_after_trip), 0,
               "%s: %ld admissions began after another process saw the trip",
               store, atomic_load(&sh->admitted_after_trip));
  munmap(sh, sizeof *sh);
}

/* ----------------------------------------------------------- heavy --- */

static sluice_policy_config *heavy_config(void) {
  sluice_policy_config *cfg = cfg_new();
  /* Growth: 2 reconciles, 1 export at a time; the buckets and the cap run
  ** out during the run, so every kind of denial races with admissions. */
  cfg_set(cfg, "limits.tenant.params.growth.burst", 3000);
  cfg_set(cfg, "limits.key.params.growth.burst", 3000);
  cfg_set(cfg, "limits.exports_per_hour.params.growth.limit", 25);
  cfg_set(cfg, "penalties.keys.params.growth.strikes", 1000000);
  return cfg;
}

static long contended(shared *sh) {
  return atomic_load(&sh->outcomes[SLUICE_OUTCOME_CONCURRENCY]) +
         atomic_load(&sh->outcomes[SLUICE_OUTCOME_CONFLICT]);
}

/* The cap's refusals are THROTTLED too (a declared cap names itself). */
static int ran_out(shared *sh) {
  return atomic_load(&sh->outcomes[SLUICE_OUTCOME_THROTTLED]) > 0;
}

/* What a decision charged the limit named (0: not listed). */
static int64_t cost_to(const sluice_decision *d, const char *limit) {
  int k;
  for (k = 0; k < d->nlimits && k < SLUICE_DECISION_LIMITS_MAX; k++)
    if (!strcmp(d->limits[k].name, limit))
      return d->limits[k].cost;
  return 0;
}

static int heavy_child(const char *store, unsigned flags, shared *sh,
                       int who) {
  sluice_policy_config *cfg;
  sluice_clock *clk;
  sluice_limiter *l;
  sluice_policy *p;
  int i;
  /* Start together: forked one after another, an early child could finish
  ** its run before the last one exists, and the leases would never be
  ** contended (a loaded CI machine did that). */
  atomic_fetch_add(&sh->ready, 1);
  while (atomic_load(&sh->ready) < NPROC)
    sched_yield();
  cfg = heavy_config();
  if (sluice_clock_manual(T0, &clk) != SLUICE_OK)
    return 2;
  if (open_policy(store, cfg, clk, flags, &l, &p) != SLUICE_OK)
    return 3;
  /* Past HEAVY, go on until the cap or the buckets ran out (the frozen
  ** clock refills nothing, so admissions exhaust them): when the leases
  ** were contended hard, HEAVY requests may admit too few to get there. */
  for (i = 0; i < HEAVY || (i < 40 * HEAVY && !ran_out(sh)); i++) {
    static const char *const ledgers[3] = {"L0", "L1", "L2"};
    int exp = (i + who) % 3 == 0;
    sluice_request r =
        exp ? rq_export("heavyco", "key-1", "growth", 0)
            : rq_reconcile("heavyco", "key-1", "growth",
                           ledgers[(i * 7 + who) % 3]);
    sluice_decision d;
    if (!decide_ok(sh, p, &r, &d))
      continue;
    atomic_fetch_add(&sh->outcomes[d.outcome], 1);
    if (!d.allowed) {
      if (d.lease_id != 0)
        failed(sh, E_LEASE_ON_DENIAL, SLUICE_OK);
      continue;
    }
    atomic_fetch_add(&sh->cost_admitted, cost_to(&d, "key"));
    atomic_fetch_add(&sh->exports_admitted, exp);
    /* Hold it until another process was refused a lease (or a while):
    ** on a loaded machine a bare yield often came back before anyone
    ** else asked, and the leases were hardly contended. */
    {
      long seen = contended(sh);
      int y;
      for (y = 0; y < 200 && contended(sh) == seen; y++)
        sched_yield();
    }
    {
      int rc = sluice_policy_release(
          p, &r,
          &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = d.lease_id});
      if (rc != SLUICE_OK)
        failed(sh, E_RELEASE, rc);
    }
  }
  sluice_policy_close(p);
  sluice_limiter_close(l);
  sluice_clock_free(clk);
  return 0;
}

/* A declared limit's state for the heavy requests' scope, by a policy
** over the store the children used. */
static sluice_limit_state state_of(sluice_policy *p, const char *limit,
                                   const sluice_request *r) {
  sluice_limit_state st;
  int rc = inspect_limit(p, limit, r, &st, NULL);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s", limit, sluice_strerror(rc));
  cr_assert_eq(st.unfit, 0, "%s", limit);
  return st;
}

static void heavy_clean(const char *store, unsigned flags) {
  shared *sh = shared_map();
  sluice_policy_config *cfg;
  sluice_clock *clk;
  sluice_limiter *l;
  sluice_policy *p;
  sluice_request rec, exp;
  sluice_limit_state st;
  int64_t spent;
  int i;
  run_children(heavy_child, store, flags, sh);
  ERRORS_NONE(sh, store, "errors or stray leases");
  cr_assert_gt(atomic_load(&sh->outcomes[SLUICE_OUTCOME_ALLOW]), 10);
  cr_assert_gt(atomic_load(&sh->outcomes[SLUICE_OUTCOME_CONCURRENCY]) +
                   atomic_load(&sh->outcomes[SLUICE_OUTCOME_CONFLICT]),
               10, "%s: leases were contended", store);
  cr_assert_gt(atomic_load(&sh->outcomes[SLUICE_OUTCOME_THROTTLED]), 0,
               "%s: the cap or the buckets ran out", store);

  /* What the store holds, read through the declared limits (the clock
  ** frozen at T0: the buckets refilled nothing). */
  cfg = heavy_config();
  cr_assert_eq(sluice_clock_manual(T0, &clk), SLUICE_OK);
  cr_assert_eq(open_policy(store, cfg, clk, flags, &l, &p), SLUICE_OK);
  exp = rq_export("heavyco", "key-1", "growth", 0);
  spent = atomic_load(&sh->cost_admitted);
  st = state_of(p, "tenant", &exp);
  cr_assert_eq(st.quota - st.remaining, spent,
               "%s: tenant bucket charged %lld for %lld admitted", store,
               (long long)(st.quota - st.remaining), (long long)spent);
  st = state_of(p, "key", &exp);
  cr_assert_eq(st.quota - st.remaining, spent, "%s: key bucket", store);
  st = state_of(p, "exports_per_hour", &exp);
  cr_assert_eq(st.quota - st.remaining, atomic_load(&sh->exports_admitted),
               "%s: export cap counted %lld for %ld admitted", store,
               (long long)(st.quota - st.remaining),
               (long)atomic_load(&sh->exports_admitted));
  cr_assert_eq(state_of(p, "exports", &exp).held, 0, "%s: exports", store);
  for (i = 0; i < 3; i++) {
    char lid[4];
    snprintf(lid, sizeof lid, "L%d", i);
    rec = rq_reconcile("heavyco", "key-1", "growth", lid);
    cr_assert_eq(state_of(p, "ledger_lock", &rec).held, 0, "%s: %s", store,
                 lid);
    cr_assert_eq(state_of(p, "reconciles", &rec).held, 0, "%s", store);
  }
  sluice_policy_close(p);
  sluice_limiter_close(l);
  sluice_clock_free(clk);
  munmap(sh, sizeof *sh);
}

/* ---------------------------------------------------- per-IP window --- */

#define IP_LIMIT 500
#define IP_TRIES 300 /* per process: NPROC * IP_TRIES > IP_LIMIT */

static int ip_child(const char *store, unsigned flags, shared *sh, int who) {
  sluice_policy_config *cfg;
  sluice_clock *clk;
  sluice_limiter *l;
  sluice_policy *p;
  int i;
  cfg = cfg_new();
  cfg_set(cfg, "ip_backstop.limit", IP_LIMIT);
  cfg_set_ns(cfg, "ip_backstop.window_s", 3600 * SEC);
  if (sluice_clock_manual(T0, &clk) != SLUICE_OK)
    return 2;
  if (open_policy(store, cfg, clk, flags, &l, &p) != SLUICE_OK)
    return 3;
  for (i = 0; i < IP_TRIES; i++) {
    /* Unauthenticated (auth, not verified yet) and tenant requests from
    ** one address: one window. */
    sluice_request a = rq_signin("198.51.100.7", "alice", NULL);
    sluice_request r = rq_std("ipco", "key-1", "growth");
    sluice_decision d;
    r.client_ip = "198.51.100.7";
    if (!decide_ok(sh, p, (i + who) % 2 ? &a : &r, &d))
      continue;
    if (d.binding == SLUICE_BINDING_IP)
      atomic_fetch_add(&sh->boxed, 1); /* refused by the backstop */
    else if (d.allowed)
      atomic_fetch_add(&sh->allowed, 1);
    else
      atomic_fetch_add(&sh->trips, 1); /* refused by anything else */
  }
  sluice_policy_close(p);
  sluice_limiter_close(l);
  sluice_clock_free(clk);
  return 0;
}

/* The per-IP backstop is one window for every process of the host. */
static void ip_window_holds(const char *store, unsigned flags) {
  shared *sh = shared_map();
  run_children(ip_child, store, flags, sh);
  ERRORS_NONE(sh, store, "store errors");
  cr_assert_eq(atomic_load(&sh->trips), 0, "%s: nothing else refused", store);
  cr_assert_eq(atomic_load(&sh->allowed), IP_LIMIT,
               "%s: admissions across %d processes", store, NPROC);
  cr_assert_eq(atomic_load(&sh->boxed), NPROC * IP_TRIES - IP_LIMIT,
               "%s: refused by the window", store);
  munmap(sh, sizeof *sh);
}

/* ---------------------------------------------------------- stores --- */

typedef struct store_spec {
  char spec[256], path[128];
  unsigned flags;
  int kind; /* 0 shm, 1 lmdb, 2 redis */
} store_spec;

static void spec_shm(store_spec *s, const char *what) {
  memset(s, 0, sizeof *s);
  snprintf(s->path, sizeof s->path, "/sluice-xproc-%s-%d", what, (int)getpid());
  snprintf(s->spec, sizeof s->spec, "shm:name=%s;create=1", s->path);
  s->flags = SLUICE_OPEN_CREATE;
}

static void spec_lmdb(store_spec *s) {
  char dir[] = "/tmp/sluice-xproc-lmdb-XXXXXX";
  memset(s, 0, sizeof *s);
  s->kind = 1;
  cr_assert_not_null(mkdtemp(dir));
  snprintf(s->path, sizeof s->path, "%s", dir);
  snprintf(s->spec, sizeof s->spec, "lmdb:path=%s;sync=nosync", dir);
  s->flags = SLUICE_OPEN_CREATE;
}

static int spec_redis(store_spec *s, unsigned flags) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  memset(s, 0, sizeof *s);
  s->kind = 2;
  if (!nodes || !nodes[0])
    return 0;
  snprintf(s->spec, sizeof s->spec, "redis:nodes=%s;timeout_ms=2000", nodes);
  s->flags = flags;
  return 1;
}

static void spec_drop(store_spec *s) {
  char f[192];
  if (s->kind == 0) {
    snprintf(f, sizeof f, "/dev/shm%s", s->path);
    unlink(f);
  } else if (s->kind == 1) {
    cr_expect_eq(rmtree(s->path), 0, "%s left behind", s->path);
  }
}

Test(policy_xproc, shm_box_holds, .timeout = 120) {
  store_spec s;
  spec_shm(&s, "box");
  box_holds(s.spec, s.flags);
  spec_drop(&s);
}

Test(policy_xproc, shm_heavy_leaves_nothing, .timeout = 120) {
  store_spec s;
  spec_shm(&s, "heavy");
  heavy_clean(s.spec, s.flags);
  spec_drop(&s);
}

Test(policy_xproc, shm_ip_window_holds, .timeout = 120) {
  store_spec s;
  spec_shm(&s, "ip");
  ip_window_holds(s.spec, s.flags);
  spec_drop(&s);
}

Test(policy_xproc, lmdb_ip_window_holds, .timeout = 120) {
  store_spec s;
  spec_lmdb(&s);
  ip_window_holds(s.spec, s.flags);
  spec_drop(&s);
}

Test(policy_xproc, lmdb_box_holds, .timeout = 120) {
  store_spec s;
  spec_lmdb(&s);
  box_holds(s.spec, s.flags);
  spec_drop(&s);
}

Test(policy_xproc, lmdb_heavy_leaves_nothing, .timeout = 120) {
  store_spec s;
  spec_lmdb(&s);
  heavy_clean(s.spec, s.flags);
  spec_drop(&s);
}

/* Redis: its own clock for the box (the server's TIME), the test clock for
** the frozen heavy run.  The server is the harness's own and starts empty;
** the two runs use different tenants. */
Test(policy_xproc, redis_box_holds, .timeout = 180) {
  store_spec s;
  if (!spec_redis(&s, 0))
    cr_skip_test("SLUICE_REDIS_NODES unset");
  box_holds(s.spec, s.flags);
}

Test(policy_xproc, redis_heavy_leaves_nothing, .timeout = 180) {
  store_spec s;
  if (!spec_redis(&s, SLUICE_OPEN_TESTCLOCK))
    cr_skip_test("SLUICE_REDIS_NODES unset");
  heavy_clean(s.spec, s.flags);
}

Test(policy_xproc, redis_ip_window_holds, .timeout = 180) {
  store_spec s;
  if (!spec_redis(&s, SLUICE_OPEN_TESTCLOCK))
    cr_skip_test("SLUICE_REDIS_NODES unset");
  ip_window_holds(s.spec, s.flags);
}

/*
** Multi-process stress and crash tests for the shm backend.
**
** Time comes from a counter in shared memory that the workers themselves
** advance, so every decision's `now` lies in [t_start, t_end] of the run
** and the never-over-admit bound can be checked exactly, in integers:
**
**     admitted * period <= burst * period + rate * (t_end - t_start)
**
** Admissions are counted in shared memory as they happen, so the counts of
** a worker killed mid-run survive it (minus, at most, the one decision it
** had in flight when the signal landed).
**
** Every run is a fixed amount of work (no wall-clock budgets), seeded, and
** small enough for a 2-core CI machine under ASan.
*/
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "shm_test_util.h"
#include "../common/one_step.h"
#include "../common/splitmix.h"
#include "../common/units.h"

#define NPROC 2
#define NTHR 3
#define NWIDE 3000
#define NGKEY (NPROC * NTHR)

typedef struct shared {
  _Atomic int64_t now;
  _Atomic int stop;
  _Atomic int64_t hot;
  _Atomic int64_t wide[NWIDE];
  _Atomic int64_t tenant;
  _Atomic int64_t gkey[NGKEY];
  _Atomic int held;
  _Atomic int violations;
  _Atomic int64_t grants;
  _Atomic int64_t errors;
  _Atomic int64_t ops;
} shared;

static char name[128], store[200];
static shared *sh;

static void fini(void) {
  if (name[0])
    shm_unlink(name);
  name[0] = '\0';
}

TestSuite(stress, .fini = fini, .timeout = 120);

static uint64_t rnd(uint64_t *s) {
  return splitmix64(s);
}

static void setup_store(const char *what, int64_t capacity, int64_t t0) {
  sh = shm_test_shared(sizeof *sh);
  atomic_store(&sh->now, t0);
  shm_test_name(name, sizeof name, what);
  snprintf(store, sizeof store, "shm:name=%s;capacity=%lld", name,
           (long long)capacity);
}

/* Open from a child: a failure is reported through the exit status. */
static sluice_limiter *child_open(sluice_clock **clk) {
  sluice_limiter_options o = {0};
  sluice_limiter *lim = NULL;
  if (sluice_clock_custom(shm_test_clock_read, (void *)&sh->now, clk) !=
      SLUICE_OK)
    _exit(20);
  o.store = store;
  o.clock = *clk;
  o.flags = SLUICE_OPEN_CREATE;
  if (sluice_limiter_open(&o, &lim, NULL, 0) != SLUICE_OK)
    _exit(21);
  return lim;
}

static void wide_key(char *buf, size_t n, int i) {
  snprintf(buf, n, "w:%d", i);
}

/* Key i of the wide set: bursts 1..7, so a leak between keys shows. */
static sluice_gcra_params wide_params(int i, int64_t period) {
  sluice_gcra_params p = {1, period, 1 + i % 7};
  return p;
}

static void apply_or_count(sluice_limiter *lim, const sluice_op *op,
                           sluice_verdict *v) {
  int rc = op_decide(lim, op, SLUICE_NOW, v);
  if (rc != SLUICE_OK) {
    atomic_fetch_add(&sh->errors, 1);
    v->allowed = 0;
  }
}

/* One point from wide key w, counted in sh->wide[w] when admitted. */
static void take_wide(sluice_limiter *lim, int w, int64_t period) {
  char key[32];
  sluice_gcra_params p = wide_params(w, period);
  sluice_key k;
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &p, 1, 0};
  sluice_verdict v;
  wide_key(key, sizeof key, w);
  k.data = key;
  k.len = strlen(key);
  apply_or_count(lim, &op, &v);
  if (v.allowed)
    atomic_fetch_add(&sh->wide[w], 1);
}

static int run_children(void (*body)(int), int nproc) {
  pid_t pids[16];
  int i, bad = 0;
  for (i = 0; i < nproc; i++) {
    pids[i] = fork();
    cr_assert(pids[i] >= 0);
    if (pids[i] == 0) {
      body(i);
      _exit(0);
    }
  }
  for (i = 0; i < nproc; i++) {
    int st;
    waitpid(pids[i], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      bad++;
  }
  return bad;
}

typedef struct targ {
  sluice_limiter *lim;
  int proc, thr;
  void (*fn)(struct targ *);
} targ;

static void *thread_main(void *p) {
  targ *a = p;
  a->fn(a);
  return NULL;
}

static void run_threads(int proc, void (*fn)(targ *), int nthr) {
  pthread_t th[8];
  targ a[8];
  sluice_clock *clk;
  sluice_limiter *lim = child_open(&clk);
  int i;
  for (i = 0; i < nthr; i++) {
    a[i] = (targ){lim, proc, i, fn};
    if (pthread_create(&th[i], NULL, thread_main, &a[i]) != 0)
      _exit(22);
  }
  for (i = 0; i < nthr; i++)
    pthread_join(th[i], NULL);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

/* ------------------------------------------- frozen time: exact counts --- */

static const sluice_gcra_params hot_frozen = {1, SEC, 1000};

static void frozen_thread(targ *a) {
  uint64_t seed = (uint64_t)(a->proc * 16 + a->thr + 1);
  sluice_key k;
  sluice_verdict v;
  int i, r;
  k.data = "hot";
  k.len = 3;
  for (i = 0; i < 600; i++) {
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &hot_frozen,
                    1, 0};
    apply_or_count(a->lim, &op, &v);
    if (v.allowed)
      atomic_fetch_add(&sh->hot, 1);
  }
  /* every thread asks each wide key for more than its burst, in its own
  ** order, so that threads of both processes collide on them */
  for (r = 0; r < 3; r++) {
    int start = (int)(rnd(&seed) % NWIDE);
    for (i = 0; i < NWIDE; i++) {
      int w = (start + i * 7) % NWIDE;
      take_wide(a->lim, w, 3600 * SEC);
      take_wide(a->lim, w, 3600 * SEC);
    }
  }
}

static void frozen_proc(int proc) { run_threads(proc, frozen_thread, NTHR); }

/* With the clock stopped, wide keys 0..n-1 each admitted exactly their
** burst (take_wide counts them). */
static void assert_each_burst(int n) {
  for (int i = 0; i < n; i++)
    cr_assert_eq(atomic_load(&sh->wide[i]), wide_params(i, SEC).burst,
                 "key %d (burst %lld) admitted %lld", i,
                 (long long)wide_params(i, SEC).burst,
                 (long long)atomic_load(&sh->wide[i]));
}

/* The workers of `proc` with the clock stopped: the hot key (asked more
** than 3000 times) admitted exactly its burst of 1000, each wide key its
** own. */
static void frozen_run(const char *what, void (*proc)(int)) {
  setup_store(what, 8192, 100 * SEC);
  cr_assert_eq(run_children(proc, NPROC), 0, "a worker failed");
  cr_assert_eq(atomic_load(&sh->errors), 0);
  cr_assert_eq(atomic_load(&sh->hot), 1000, "hot key admitted %lld",
               (long long)atomic_load(&sh->hot));
  assert_each_burst(NWIDE);
}

Test(stress, frozen_time_every_key_admits_exactly_its_burst) {
  frozen_run("frozen", frozen_proc);
}

/* The same with every decision made in batches (apply_many: the pipeline
** that hashes and prefetches ahead of the op it decides): 48 ops a batch,
** the hot key every third op and each wide key twice in a row, so a key
** comes back inside the prefetch distance of its own earlier op. */
#define FB_BATCH 48

static void frozen_batch_thread(targ *a) {
  uint64_t seed = (uint64_t)(a->proc * 16 + a->thr + 51);
  char names[FB_BATCH][32];
  sluice_key k[FB_BATCH];
  sluice_gcra_params p[FB_BATCH];
  sluice_op ops[FB_BATCH];
  sluice_verdict v[FB_BATCH];
  int rcs[FB_BATCH], w[FB_BATCH];
  int start = (int)(rnd(&seed) % NWIDE), at = 0;
  for (int round = 0; round < 3 * NWIDE * 3 / FB_BATCH; round++) {
    for (int b = 0; b < FB_BATCH; b++) {
      if (b % 3 == 2) {
        w[b] = -1;
        k[b] = (sluice_key){"hot", 3};
        p[b] = hot_frozen;
      } else {
        w[b] = (start + (at / 2) * 7) % NWIDE;
        at++;
        wide_key(names[b], sizeof names[b], w[b]);
        k[b] = (sluice_key){names[b], strlen(names[b])};
        p[b] = wide_params(w[b], 3600 * SEC);
      }
      ops[b] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[b],
                           &p[b], 1, 0};
    }
    if (ops_decide(a->lim, FB_BATCH, ops, SLUICE_NOW, v, rcs) != SLUICE_OK) {
      atomic_fetch_add(&sh->errors, 1);
      continue;
    }
    for (int b = 0; b < FB_BATCH; b++) {
      if (rcs[b] != SLUICE_OK)
        atomic_fetch_add(&sh->errors, 1);
      else if (v[b].allowed)
        atomic_fetch_add(w[b] < 0 ? &sh->hot : &sh->wide[w[b]], 1);
    }
  }
}

static void frozen_batch_proc(int proc) {
  run_threads(proc, frozen_batch_thread, NTHR);
}

Test(stress, frozen_time_batches_admit_exactly_each_burst) {
  frozen_run("frozen-batch", frozen_batch_proc);
}

/* ----------------------------- a tight table with deletes: the reach --- */

/* Sentinel keys, asked for more than their bursts with the clock stopped,
** share a table filled to about 80% with churn keys that every thread keeps
** claiming and deleting.  Deleted slots lie in front of sentinels in their
** clusters; a lookup that stopped short of a sentinel would claim such a
** slot and give the sentinel a second, fresh bucket: an over-admission.
** (Each slot's reach is what lets a lookup walk past them.) */
#define TIGHT_SENTINELS 1500
#define TIGHT_CHURN 150 /* per thread, live at once */

static void tight_thread(targ *a) {
  static const sluice_gcra_params churn_p = {1, 3600 * SEC, 1};
  uint64_t seed = (uint64_t)(a->proc * 16 + a->thr + 301);
  sluice_verdict v;
  int i, r;
  for (r = 0; r < 4; r++) {
    int start = (int)(rnd(&seed) % TIGHT_SENTINELS);
    for (i = 0; i < TIGHT_SENTINELS; i++) {
      char key[32];
      sluice_key k = {key, 0};
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &churn_p,
                      1, 0};
      int rc;
      take_wide(a->lim, (start + i * 7) % TIGHT_SENTINELS, 3600 * SEC);
      /* churn: delete one of this thread's keys, claim it again */
      snprintf(key, sizeof key, "c:%d:%d:%d", a->proc, a->thr,
               (int)(rnd(&seed) % TIGHT_CHURN));
      k.len = strlen(key);
      rc = sluice_limiter_delete(a->lim, key, k.len);
      if (rc != SLUICE_OK && rc != SLUICE_ENOTFOUND)
        atomic_fetch_add(&sh->errors, 1);
      apply_or_count(a->lim, &op, &v);
    }
  }
}

static void tight_proc(int proc) { run_threads(proc, tight_thread, NTHR); }

Test(stress, deletes_in_a_tight_table_never_rebind_a_key) {
  /* 1500 + 900 keys in 3000 slots */
  setup_store("tight", 2250, 100 * SEC);
  cr_assert_eq(run_children(tight_proc, NPROC), 0, "a worker failed");
  cr_assert_eq(atomic_load(&sh->errors), 0);
  assert_each_burst(TIGHT_SENTINELS);
}

/* ------------------------------------ moving time: the bound, and groups --- */

static const sluice_gcra_params hot_moving = {3, SEC, 50}; /* 3/s, burst 50 */
static const sluice_gcra_params tenant_p = {5, SEC, 40};
static const sluice_gcra_params gkey_p = {2, SEC, 10};

#define MOVE_OPS 4000
#define MOVE_WIDE 500

static void moving_thread(targ *a) {
  uint64_t seed = (uint64_t)(a->proc * 16 + a->thr + 101);
  int me = a->proc * NTHR + a->thr, i;
  char gname[32];
  snprintf(gname, sizeof gname, "{t1}:key%d", me);
  for (i = 0; i < MOVE_OPS; i++) {
    uint64_t r = rnd(&seed);
    sluice_verdict v;
    /* time moves by 0..20 ms per operation */
    atomic_fetch_add(&sh->now, (int64_t)(r % 20000000));
    switch ((r >> 32) % 3) {
    case 0: {
      sluice_key k = {"hot", 3};
      int64_t cost = 1 + (int64_t)((r >> 40) % 4);
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &hot_moving,
                      cost, 0};
      apply_or_count(a->lim, &op, &v);
      if (v.allowed)
        atomic_fetch_add(&sh->hot, cost);
      break;
    }
    case 1:
      take_wide(a->lim, (int)((r >> 40) % MOVE_WIDE), SEC);
      break;
    default: {
      /* tenant bucket + this thread's key bucket, charged together */
      sluice_key ks[2] = {{"{t1}:tenant", 11}, {gname, strlen(gname)}};
      sluice_gcra_params ps[2] = {tenant_p, gkey_p};
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, ks, ps, 1, 0};
      apply_or_count(a->lim, &op, &v);
      if (v.allowed) {
        atomic_fetch_add(&sh->tenant, 1);
        atomic_fetch_add(&sh->gkey[me], 1);
      }
      break;
    }
    }
  }
}

static void moving_proc(int proc) { run_threads(proc, moving_thread, NTHR); }

/* admitted <= burst + rate * elapsed / period, exactly */
static void assert_bound(const char *what, int64_t admitted,
                         const sluice_gcra_params *p, int64_t elapsed) {
  __int128 lhs = (__int128)admitted * p->period_ns;
  __int128 rhs = (__int128)p->burst * p->period_ns + (__int128)p->rate * elapsed;
  cr_assert(lhs <= rhs, "%s admitted %lld > burst %lld + %lld/%lld ns * %lld ns",
            what, (long long)admitted, (long long)p->burst, (long long)p->rate,
            (long long)p->period_ns, (long long)elapsed);
}

Test(stress, moving_time_never_over_admits) {
  int64_t t0 = 200 * SEC, elapsed;
  int i;
  setup_store("moving", 4096, t0);
  cr_assert_eq(run_children(moving_proc, NPROC), 0, "a worker failed");
  cr_assert_eq(atomic_load(&sh->errors), 0);
  elapsed = atomic_load(&sh->now) - t0;
  assert_bound("hot", atomic_load(&sh->hot), &hot_moving, elapsed);
  /* and it was really contended and really admitting */
  cr_assert_geq(atomic_load(&sh->hot), hot_moving.burst);
  for (i = 0; i < MOVE_WIDE; i++) {
    sluice_gcra_params p = wide_params(i, SEC);
    char what[32];
    snprintf(what, sizeof what, "wide %d", i);
    assert_bound(what, atomic_load(&sh->wide[i]), &p, elapsed);
  }
  assert_bound("tenant", atomic_load(&sh->tenant), &tenant_p, elapsed);
  cr_assert_geq(atomic_load(&sh->tenant), tenant_p.burst);
  for (i = 0; i < NGKEY; i++)
    assert_bound("group key", atomic_load(&sh->gkey[i]), &gkey_p, elapsed);
}

/* ------------------------------------------------ leases: exclusion --- */

static const sluice_lease_params lease_p = {3, 3600 * SEC};

static void lease_thread(targ *a) {
  char names[3][16];
  sluice_key ks[3];
  int i, j;
  for (j = 0; j < 3; j++) {
    snprintf(names[j], sizeof names[j], "{L}:slot%d", j);
    ks[j].data = names[j];
    ks[j].len = strlen(names[j]);
  }
  for (i = 0; i < 1500; i++) {
    uint64_t id = ((uint64_t)(a->proc + 1) << 40) |
                  ((uint64_t)(a->thr + 1) << 32) | (uint64_t)(i + 1);
    sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 3, ks, &lease_p,
                    0, id};
    sluice_verdict v;
    apply_or_count(a->lim, &op, &v);
    if (!v.allowed)
      continue;
    if (atomic_fetch_add(&sh->held, 1) + 1 > 3)
      atomic_fetch_add(&sh->violations, 1);
    atomic_fetch_add(&sh->grants, 1);
    for (volatile int spin = 0; spin < 200; spin = spin + 1)
      ;
    atomic_fetch_sub(&sh->held, 1);
    op.kind = SLUICE_OP_LEASE_RELEASE;
    apply_or_count(a->lim, &op, &v);
    if (!v.allowed)
      atomic_fetch_add(&sh->violations, 1000); /* our lease vanished */
  }
}

static void lease_proc(int proc) { run_threads(proc, lease_thread, NTHR); }

Test(stress, lease_set_never_grants_more_than_max) {
  setup_store("lease", 1024, 300 * SEC);
  cr_assert_eq(run_children(lease_proc, NPROC), 0, "a worker failed");
  cr_assert_eq(atomic_load(&sh->errors), 0);
  cr_assert_eq(atomic_load(&sh->violations), 0, "violations %d",
               atomic_load(&sh->violations));
  cr_assert_gt(atomic_load(&sh->grants), 100);
  /* every slot came back: three new holders fit, a fourth does not */
  {
    sluice_clock *clk;
    sluice_limiter *lim = shm_test_open(store, &sh->now, &clk);
    char names[3][16];
    sluice_key ks[3];
    sluice_verdict v;
    for (int j = 0; j < 3; j++) {
      snprintf(names[j], sizeof names[j], "{L}:slot%d", j);
      ks[j].data = names[j];
      ks[j].len = strlen(names[j]);
    }
    for (uint64_t id = 1; id <= 4; id++) {
      sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 3, ks, &lease_p,
                      0, id};
      cr_assert_eq(op_decide(lim, &op, SLUICE_NOW, &v), SLUICE_OK);
      cr_assert_eq(v.allowed, id <= 3, "holder %d", (int)id);
    }
    sluice_limiter_close(lim);
    sluice_clock_free(clk);
  }
}

/* --------------------------------------------------------------- crash --- */

#define CRASH_PROCS 3
#define CRASH_THR 2
#define CRASH_WIDE 200
#define KILLS 12

static const sluice_gcra_params hot_crash = {4, SEC, 30};
static const sluice_penalty_params pen_crash = {
    5, 60 * SEC, {300 * SEC, 3600 * SEC, SLUICE_FOREVER}, 86400 * SEC};

static void crash_thread(targ *a) {
  uint64_t seed = (uint64_t)getpid() * 1000 + (uint64_t)a->thr;
  while (!atomic_load(&sh->stop)) {
    uint64_t r = rnd(&seed);
    sluice_verdict v;
    atomic_fetch_add(&sh->now, (int64_t)(r % 5000000));
    atomic_fetch_add(&sh->ops, 1);
    if (r % 3 == 0) {
      sluice_key k = {"hot", 3};
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &hot_crash,
                      1, 0};
      apply_or_count(a->lim, &op, &v);
      if (v.allowed)
        atomic_fetch_add(&sh->hot, 1);
    } else if (r % 3 == 1) {
      int w = (int)((r >> 32) % CRASH_WIDE);
      char key[32];
      sluice_gcra_params p = wide_params(w, SEC);
      sluice_key k;
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &p, 1, 0};
      /* a new key now and then, so claims are in flight when we die */
      if ((r >> 48) % 8 == 0)
        snprintf(key, sizeof key, "fresh:%llu", (unsigned long long)(r >> 20));
      else
        wide_key(key, sizeof key, w);
      k.data = key;
      k.len = strlen(key);
      apply_or_count(a->lim, &op, &v);
      if (v.allowed && key[0] == 'w')
        atomic_fetch_add(&sh->wide[w], 1);
    } else {
      sluice_key k = {"striker", 7};
      sluice_op op = {SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 1, &k, &pen_crash,
                      0, 0};
      apply_or_count(a->lim, &op, &v);
    }
  }
}

static pid_t spawn_crash_worker(int i) {
  pid_t p = fork();
  cr_assert(p >= 0);
  if (p == 0) {
    run_threads(i, crash_thread, CRASH_THR);
    _exit(0);
  }
  return p;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

Test(stress, sigkilled_workers_leave_a_usable_table) {
  pid_t w[CRASH_PROCS];
  uint64_t seed = 42;
  int64_t t0 = 400 * SEC, elapsed, before;
  int i, k, st;
  setup_store("crash", 2048, t0);
  for (i = 0; i < CRASH_PROCS; i++)
    w[i] = spawn_crash_worker(i);
  for (k = 0; k < KILLS; k++) {
    /* let some work happen, then kill one worker wherever it is */
    before = atomic_load(&sh->ops);
    while (atomic_load(&sh->ops) < before + 200 + (int64_t)(rnd(&seed) % 800))
      sleep_us(200);
    i = (int)(rnd(&seed) % CRASH_PROCS);
    kill(w[i], SIGKILL);
    cr_assert_eq(waitpid(w[i], &st, 0), w[i]);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    w[i] = spawn_crash_worker(i);
  }
  /* the survivors and the replacements kept deciding */
  before = atomic_load(&sh->ops);
  while (atomic_load(&sh->ops) < before + 2000)
    sleep_us(200);
  atomic_store(&sh->stop, 1);
  for (i = 0; i < CRASH_PROCS; i++) {
    cr_assert_eq(waitpid(w[i], &st, 0), w[i]);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d status %d", i,
              st);
  }
  cr_assert_eq(atomic_load(&sh->errors), 0);
  elapsed = atomic_load(&sh->now) - t0;
  assert_bound("hot", atomic_load(&sh->hot), &hot_crash, elapsed);
  cr_assert_geq(atomic_load(&sh->hot), hot_crash.burst);
  for (i = 0; i < CRASH_WIDE; i++) {
    sluice_gcra_params p = wide_params(i, SEC);
    assert_bound("wide", atomic_load(&sh->wide[i]), &p, elapsed);
  }

  /* A newly started process, after every bucket has refilled and with the
  ** clock stopped, gets exactly each burst: nothing was lost or leaked
  ** beyond the decisions in flight, and no slot is stuck. */
  atomic_fetch_add(&sh->now, 3600 * SEC);
  {
    sluice_clock *clk;
    sluice_limiter *lim = shm_test_open(store, &sh->now, &clk);
    sluice_shm_stats stats = {0};
    sluice_verdict v;
    int64_t got = 0;
    for (i = 0; i < 100; i++) {
      cr_assert_eq(sluice_limiter_take(lim, "hot", 3, &hot_crash, 1, &v),
                   SLUICE_OK);
      got += v.allowed;
    }
    cr_assert_eq(got, hot_crash.burst);
    for (i = 0; i < CRASH_WIDE; i++) {
      char key[32];
      sluice_gcra_params p = wide_params(i, SEC);
      wide_key(key, sizeof key, i);
      got = 0;
      for (k = 0; k < 10; k++) {
        cr_assert_eq(sluice_limiter_take(lim, key, strlen(key), &p, 1, &v),
                     SLUICE_OK);
        got += v.allowed;
      }
      cr_assert_eq(got, p.burst, "wide %d", i);
    }
    stats.now_ns = atomic_load(&sh->now);
    cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &stats),
                 SLUICE_OK);
    /* claims abandoned by the kills, at most one per killed thread */
    cr_assert_leq(stats.pending, KILLS * CRASH_THR);
    sluice_limiter_close(lim);
    sluice_clock_free(clk);
  }
}

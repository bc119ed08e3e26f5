/*
** shm benchmark: ns per decision and throughput ratios, all measured in one
** run so that the ratios compare like with like on whatever machine (and
** whatever load) it runs on.
**
**   mem      the mem backend, one thread (the single-process reference)
**   shm      the lock-free table, 1 and 2 processes
**   mutex    the baseline: the same open-addressing table of 48-byte slots
**            in a shared mapping, guarded by one process-shared pthread
**            mutex (the classic nginx shared-zone design), 1 and 2 processes
**
** Workloads: one hot key (every decision admits and writes: the worst case
** for contention), 1,000,000 keys picked at random (the table is filled
** first, so this measures steady-state hits), and new keys on a churned
** table: a 65,536-key table through which CHURN_GENS generations of keys
** that expire at once have passed (so no slot is unused any more, as in a
** long-running per-IP limiter), then one more generation timed: each
** decision is a miss and a claim.  Time is passed explicitly
** (sluice_limiter_decide at a given time) so no clock read is timed.  Before a timed run
** on the 1M keys each process faults in its mapping of the table
** (warm_mapping()), as a worker that has run a while has.
**
** Usage: bench_shm [decisions-per-process]   (default 500000)
** The hot-key workload runs HOT_MULT times as many decisions as the 1M-key
** one, so that both last about a quarter of a second: a run of 25 ms (the
** old hot-key length) fits inside a few scheduler and hypervisor slices, and
** whether the VM happened to run both vCPUs during it decided the mutex
** baseline's figure (it moved severalfold between rounds of one run).
** Every scenario runs ROUNDS times, interleaved; the table gives each one's
** median round, and a ratio with a target is also given per round (the two
** scenarios of one round ran back to back) as a median and a range.
** This is a benchmark, not a test: it prints, and fails only on errors.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dram_floor.h"
#include "sluice.h"
#include "../../tests/common/one_step.h"
#include "siphash.h"
#include "random.h"
#include <sluice/sluice_mem.h>
#include <sluice/sluice_shm.h>

#define NKEYS 1000000
#define KEYLEN 16
#define ROUNDS 5
#define HOT_MULT 8
#define CHURN_KEYS 65536
#define CHURN_GENS 8

static char (*keys)[KEYLEN];
static uint32_t *order; /* random key order, per run */
/* keys[order[i]] at keyseq[i]: a timed loop reads its keys sequentially
** instead of missing in this 16 MB array on every decision. */
static char (*keyseq)[KEYLEN];
static long nops = 500000;

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static int64_t mono(void) { return clock_ns(CLOCK_MONOTONIC); }
static int64_t cputime(void) { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_shm: %s: %s\n", what, sluice_strerror(rc));
  exit(1);
}

/* Every decision on the hot key admits and writes.  Each process moves its
** own explicit time 100 ns per decision, so with two processes one clock
** runs ahead of the other by however much faster it decides (milliseconds
** over a run); the bucket refills 1 point per ns with a burst of 1 s worth,
** so the lagging process is never denied for it.  (With a small burst it
** was: it then measured cheap read-only denials, not contended writes.) */
static const sluice_gcra_params hot_p = {1, 1, 1000000000};
/* The wide set: a point an hour, burst 1000, so that every record lives an
** hour of the run's clock past its last charge and the 1M keys stay live
** for the whole benchmark (checked at the end; with 10/s buckets most had
** expired before their key came back, and a "hit" was an insert). */
static const sluice_gcra_params wide_p = {1, INT64_C(3600000000000), 1000};
/* Churn: a record that lives 1 ms; generations are 10 s apart, past the
** shm table's reclaim grace. */
static const sluice_gcra_params churn_p = {1, 1000000, 1};

enum { WL_HOT, WL_WIDE, WL_CHURN, WL_BATCH };

/* ------------------------------------------------- the mutex baseline --- */

typedef struct mx_slot {
  uint64_t fp[2]; /* 0,0 = empty */
  sluice_state st;
  int64_t exp;
  uint64_t spare;
} mx_slot;

typedef struct mx_table {
  pthread_mutex_t mu;
  uint64_t nslots;
  uint8_t hkey[16];
  mx_slot slots[];
} mx_table;

static mx_table *mx_create(uint64_t capacity) {
  uint64_t nslots = capacity * 4 / 3;
  size_t bytes = sizeof(mx_table) + nslots * sizeof(mx_slot);
  pthread_mutexattr_t a;
  mx_table *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED)
    die("mmap", SLUICE_ENOMEM);
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutex_init(&t->mu, &a);
  t->nslots = nslots;
  sluice__random_bytes(t->hkey, sizeof t->hkey);
  return t;
}

static int mx_run(mx_table *t, const sluice_program *p, int64_t now,
                  sluice_program_result *r) {
  uint8_t h[16];
  uint64_t fp[2], i;
  mx_slot *s = NULL;
  sluice_state in, out;
  int rc;
  sluice__siphash13_128(t->hkey, p->keys[0].data, p->keys[0].len, h);
  memcpy(fp, h, 16);
  fp[0] |= 1;
  i = (uint64_t)(((unsigned __int128)fp[1] * t->nslots) >> 64);
  pthread_mutex_lock(&t->mu);
  for (uint64_t d = 0; d < t->nslots; d++, i = i + 1 == t->nslots ? 0 : i + 1) {
    mx_slot *c = &t->slots[i];
    if ((c->fp[0] == fp[0] && c->fp[1] == fp[1]) || c->fp[0] == 0) {
      s = c;
      break;
    }
  }
  if (!s) {
    pthread_mutex_unlock(&t->mu);
    return SLUICE_EFULL;
  }
  in = s->fp[0] && s->exp > now ? s->st : (sluice_state){{0, 0}};
  rc = sluice_program_run(p, &in, &out, now, r);
  if (rc == SLUICE_OK) {
    s->fp[0] = fp[0];
    s->fp[1] = fp[1];
    s->st = out;
    s->exp = sluice_program_expiry(p, 0, &out);
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

/* The baseline as a backend, so that it runs under the same limiter and
** validation as shm and mem: only the concurrency control differs. */
static mx_table *mx;

static int mxb_close(sluice_store *s) {
  (void)s;
  return SLUICE_OK;
}
static int mxb_run(sluice_store *s, int n, const sluice_program *ps,
                   int64_t now, sluice_program_result *res, int *rcs) {
  (void)s;
  for (int i = 0; i < n; i++)
    rcs[i] = ps[i].nkeys == 1 ? mx_run(mx, &ps[i], now, &res[i])
                              : SLUICE_ENOTSUP;
  return SLUICE_OK;
}
static const sluice_store_methods mxb_methods = {
    SLUICE_BACKEND_VERSION, mxb_close, mxb_run, NULL, NULL, NULL, NULL};
static int mxb_open(const sluice_backend *b, const char *uri,
                    const sluice_store_config *cfg, sluice_store *s) {
  (void)b;
  (void)uri;
  (void)cfg;
  s->pMethods = &mxb_methods;
  return SLUICE_OK;
}
static const sluice_backend mxb = {SLUICE_BACKEND_VERSION,
                                   (int)sizeof(sluice_store), "mutex",
                                   NULL, mxb_open};

/* ----------------------------------------------------------- drivers --- */

typedef struct shared {
  _Atomic int ready;
  _Atomic int go;
  int64_t start[2], end[2], cpu[2];
  int64_t admitted[2];
  double round_ns[ROUNDS], round_cpu[ROUNDS]; /* mem_wide()'s child */
  int64_t live; /* mem_wide()'s live records at its end */
  int64_t churn_gen; /* the next generation of churn keys */
} shared;

static shared *sh;
static int failed; /* a 1M-key table lost records: the figures are void */
static double last_cpu; /* CPU ns per decision of the last run() */

enum { IMPL_SHM, IMPL_MUTEX };

/* clock: NULL for the real one (every workload but the batches passes its
** times explicitly). */
static sluice_limiter *open_store_at(const char *spec, sluice_clock *clock) {
  sluice_limiter_options o = {0};
  sluice_limiter *lim;
  char err[256];
  int rc;
  o.store = spec;
  o.clock = clock;
  o.flags = SLUICE_OPEN_CREATE;
  if (!spec) {
    o.store = "mutex";
    o.backend = &mxb;
  }
  rc = sluice_limiter_open(&o, &lim, err, sizeof err);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "bench_shm: open %s: %s (%s)\n", spec, sluice_strerror(rc),
            err);
    exit(1);
  }
  return lim;
}

static sluice_limiter *open_store(const char *spec) {
  return open_store_at(spec, NULL);
}

static long ops_of(int wl) {
  return wl == WL_WIDE || wl == WL_BATCH ? nops
         : wl == WL_HOT                  ? nops * HOT_MULT
                                         : CHURN_KEYS;
}

#define BATCH 16

/* The 1M-key workload in batches of BATCH through apply_many, which
** decides at the limiter's clock: a manual one, set to the time the
** single-op loop would give the batch's first op. */
static int64_t batch_loop(sluice_limiter *lim, sluice_clock *clock, long n,
                          uint32_t off) {
  sluice_key k[BATCH];
  sluice_op ops[BATCH];
  sluice_verdict v[BATCH];
  int rcs[BATCH];
  int64_t now = 1000000000, admitted = 0;
  for (long i = 0; i + BATCH <= n; i += BATCH) {
    for (int b = 0; b < BATCH; b++) {
      k[b].data = keyseq[((uint32_t)(i + b) + off) % NKEYS];
      k[b].len = KEYLEN - 1;
      ops[b] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[b],
                           &wide_p, 1, 0};
    }
    sluice_clock_set(clock, now + 1000);
    now += 1000 * BATCH;
    if (ops_decide(lim, BATCH, ops, SLUICE_NOW, v, rcs) != SLUICE_OK)
      die("apply_many", SLUICE_EBACKEND);
    for (int b = 0; b < BATCH; b++) {
      if (rcs[b] != SLUICE_OK)
        die("apply_many op", rcs[b]);
      admitted += v[b].allowed;
    }
  }
  return admitted;
}

/* One generation of churn keys (8 bytes: generation, index), all new. */
static void churn_gen(sluice_limiter *lim, int64_t gen) {
  sluice_key k;
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &churn_p, 1, 0};
  sluice_verdict v;
  uint32_t kb[2] = {(uint32_t)gen, 0};
  int64_t now = (gen + 1) * 10000000000;
  k.data = (const char *)kb;
  k.len = sizeof kb;
  for (kb[1] = 0; kb[1] < CHURN_KEYS; kb[1]++) {
    int rc = op_decide(lim, &op, now, &v);
    if (rc != SLUICE_OK)
      die("churn", rc);
  }
}

/* Before a timed run over the 1M keys: fault in this process's page table
** entries for the whole table (each process maps it itself, and a fresh
** mapping faults on the first touch of each 4 KiB page: 16k faults spread
** over the first 500k decisions, a visible share of each, paid in series
** by batches too).  A worker that has run for a while has them all; this
** measures that steady state.  shm: the stats scan reads every slot; the
** mutex table: a read per page. */
static void warm_mapping(sluice_limiter *lim, int mutex) {
  if (mutex) {
    size_t bytes = mx->nslots * sizeof(mx_slot);
    volatile const char *b = (volatile const char *)mx->slots;
    for (size_t at = 0; at < bytes; at += 4096)
      (void)b[at];
  } else {
    sluice_shm_stats st;
    memset(&st, 0, sizeof st);
    (void)sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st);
  }
}

/* One process's share of a run. */
/* clock: the limiter's manual clock (WL_BATCH), else NULL. */
static void worker(sluice_limiter *lim, sluice_clock *clock, int wl, int who,
                   int nproc) {
  sluice_key k;
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k,
                  wl == WL_WIDE ? &wide_p : &hot_p, 1, 0};
  sluice_verdict v;
  int64_t now = 1000000000, admitted = 0;
  long i, n = ops_of(wl);
  uint32_t off = (uint32_t)who * 7919u;
  int wide = wl == WL_WIDE;
  k.data = "hot";
  k.len = 3;
  if (wl == WL_BATCH) {
    atomic_fetch_add(&sh->ready, 1);
    while (atomic_load(&sh->ready) < nproc)
      ;
    sh->start[who] = mono();
    sh->cpu[who] = cputime();
    sh->admitted[who] = batch_loop(lim, clock, n, off);
    sh->end[who] = mono();
    sh->cpu[who] = cputime() - sh->cpu[who];
    return;
  }
  if (wl == WL_CHURN) {
    /* untimed: churn the table, then time one more generation */
    int64_t g = sh->churn_gen;
    for (int j = 0; j < CHURN_GENS; j++)
      churn_gen(lim, g + j);
    sh->start[who] = mono();
    sh->cpu[who] = cputime();
    churn_gen(lim, g + CHURN_GENS);
    sh->end[who] = mono();
    sh->cpu[who] = cputime() - sh->cpu[who];
    return;
  }
  atomic_fetch_add(&sh->ready, 1);
  while (atomic_load(&sh->ready) < nproc)
    ;
  sh->start[who] = mono();
  sh->cpu[who] = cputime();
  for (i = 0; i < n; i++) {
    int rc;
    if (wide) {
      k.data = keyseq[((uint32_t)i + off) % NKEYS];
      k.len = KEYLEN - 1;
      now += 1000;
    } else {
      now += 100;
    }
    rc = op_decide(lim, &op, now, &v);
    if (rc != SLUICE_OK)
      die("apply", rc);
    admitted += v.allowed;
  }
  sh->end[who] = mono();
  sh->cpu[who] = cputime() - sh->cpu[who];
  sh->admitted[who] = admitted;
}

/* ns per decision over all processes: wall time / total decisions. */
static double run(const char *spec, int wl, int nproc) {
  pid_t pids[2];
  int64_t s, e, gen = sh->churn_gen;
  long n = ops_of(wl);
  int i;
  memset(sh, 0, sizeof *sh);
  sh->churn_gen = gen;
  for (i = 0; i < nproc; i++) {
    pids[i] = fork();
    if (pids[i] < 0)
      die("fork", SLUICE_EIO);
    if (pids[i] == 0) {
      sluice_clock *clock = NULL;
      sluice_limiter *lim;
      if (wl == WL_BATCH && sluice_clock_manual(1000000000, &clock) != SLUICE_OK)
        die("clock", SLUICE_ENOMEM);
      lim = open_store_at(spec, clock);
      if ((wl == WL_WIDE || wl == WL_BATCH) && (!spec || !strncmp(spec, "shm", 3)))
        warm_mapping(lim, !spec);
      worker(lim, clock, wl, i, nproc);
      sluice_limiter_close(lim);
      sluice_clock_free(clock);
      _exit(0);
    }
  }
  for (i = 0; i < nproc; i++) {
    int st;
    waitpid(pids[i], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      die("worker failed", SLUICE_EBACKEND);
  }
  s = sh->start[0];
  e = sh->end[0];
  for (i = 1; i < nproc; i++) {
    if (sh->start[i] < s)
      s = sh->start[i];
    if (sh->end[i] > e)
      e = sh->end[i];
  }
  last_cpu = 0;
  for (i = 0; i < nproc; i++) {
    last_cpu += (double)sh->cpu[i];
    if (wl == WL_HOT && sh->admitted[i] != n)
      die("hot key: a decision was denied, the run did not measure writes",
          SLUICE_EBACKEND);
  }
  if (wl == WL_CHURN)
    sh->churn_gen = gen + CHURN_GENS + 1;
  last_cpu /= (double)n * nproc;
  return (double)(e - s) / ((double)n * nproc);
}

/* Fill a table with every wide key, so the timed runs are all hits. */
static void prefill(int impl, const char *spec) {
  sluice_limiter *lim = open_store(spec);
  sluice_key k;
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &wide_p, 1, 0};
  sluice_verdict v;
  for (uint32_t i = 0; i < NKEYS; i++) {
    int rc;
    k.data = keys[i];
    k.len = KEYLEN - 1;
    rc = op_decide(lim, &op, 1000000000, &v);
    if (rc != SLUICE_OK)
      die("prefill", rc);
  }
  if (impl == IMPL_SHM) {
    sluice_shm_stats st = {.now_ns = 1000000000};
    if (sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st) == SLUICE_OK)
      printf("shm table: capacity %lld, %lld slots of %lld B, %lld B/key "
             "(+4 KiB header), %lld live after prefill, longest reach "
             "%lld of %lld\n",
             (long long)st.capacity, (long long)st.slots,
             (long long)st.slot_bytes, (long long)st.bytes_per_key,
             (long long)st.live, (long long)st.longest_reach,
             (long long)st.probe_window);
  }
  sluice_limiter_close(lim);
}

/* The scenarios, in the order they run in each round and are printed. */
enum {
  MEM_H1, SHM_H1, SHM_H2, MX_H1, MX_H2,
  MEM_W1, SHM_W1, SHM_W2, MX_W1, MX_W2,
  MEM_C1, SHM_C1, SHM_B1,
  NSC
};
static const char *const label[NSC] = {
    "mem, hot key, 1 thread",    "shm, hot key, 1 process",
    "shm, hot key, 2 processes", "mutex, hot key, 1 process",
    "mutex, hot key, 2 processes", "mem, 1M keys, 1 thread",
    "shm, 1M keys, 1 process",   "shm, 1M keys, 2 processes",
    "mutex, 1M keys, 1 process", "mutex, 1M keys, 2 processes",
    "mem, new keys, churned, 1 thread", "shm, new keys, churned, 1 process",
    "shm, 1M keys, batches of 16, 1 proc",
};
static double ns_r[NSC][ROUNDS], cpu_r[NSC][ROUNDS];

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(const double *v) {
  double t[ROUNDS];
  memcpy(t, v, sizeof t);
  qsort(t, ROUNDS, sizeof t[0], cmp_double);
  return t[ROUNDS / 2];
}

/* slow's time over fast's (the throughput ratio fast/slow), per round and
** as the median of the rounds. */
static void ratio(const char *what, int slow, int fast, const char *target) {
  double r[ROUNDS], lo = 1e300, hi = 0;
  for (int i = 0; i < ROUNDS; i++) {
    r[i] = ns_r[slow][i] / ns_r[fast][i];
    lo = r[i] < lo ? r[i] : lo;
    hi = r[i] > hi ? r[i] : hi;
  }
  printf("  %-36s %5.2fx", what, median(r));
  if (target)
    printf("  [%s]  rounds %.2f-%.2f", target, lo, hi);
  printf("\n");
}

/* mem, 1M keys, one thread: filled and timed in one child (the parent's
** address space stays small for the forks of the other scenarios). */
static void mem_wide(void) {
  pid_t p = fork();
  if (p == 0) {
    sluice_limiter *lim = open_store("mem");
    sluice_key k;
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &wide_p, 1, 0};
    sluice_verdict v;
    int64_t now = 1000000000;
    for (uint32_t i = 0; i < NKEYS; i++) {
      k.data = keys[i];
      k.len = KEYLEN - 1;
      op_decide(lim, &op, now, &v);
    }
    for (int r = 0; r < ROUNDS; r++) {
      int64_t s = mono(), c = cputime();
      for (long i = 0; i < nops; i++) {
        k.data = keyseq[(uint32_t)i % NKEYS];
        k.len = KEYLEN - 1;
        now += 1000;
        if (op_decide(lim, &op, now, &v) != SLUICE_OK)
          _exit(1);
      }
      sh->round_ns[r] = (double)(mono() - s) / (double)nops;
      sh->round_cpu[r] = (double)(cputime() - c) / (double)nops;
    }
    {
      int64_t at = now, count = -1;
      sluice_limiter_control(lim, SLUICE_CTL_MEM_SWEEP, &at);
      sluice_limiter_control(lim, SLUICE_CTL_MEM_COUNT, &count);
      sh->live = count;
    }
    _exit(0);
  }
  waitpid(p, NULL, 0);
  if (sh->live != NKEYS) {
    fprintf(stderr, "bench_shm: mem, 1M keys: %lld live records at the end, "
            "not %d\n", (long long)sh->live, NKEYS);
    failed = 1;
  }
  memcpy(ns_r[MEM_W1], sh->round_ns, sizeof ns_r[MEM_W1]);
  memcpy(cpu_r[MEM_W1], sh->round_cpu, sizeof cpu_r[MEM_W1]);
}

int main(int argc, char **argv) {
  char hot_spec[64], wide_spec[64], churn_spec[64];
  double floor_ns;
  int fd_hot, fd_wide, fd_churn;
  uint64_t seed = 12345;
  double load[3] = {0, 0, 0};
  mx_table *mx_hot, *mx_wide;
  struct {
    const char *spec; /* NULL: the mutex table */
    mx_table **mx;
    int wl, nproc;
  } sc[NSC] = {
      [MEM_H1] = {"mem", NULL, WL_HOT, 1},
      [SHM_H1] = {hot_spec, NULL, WL_HOT, 1},
      [SHM_H2] = {hot_spec, NULL, WL_HOT, 2},
      [MX_H1] = {NULL, &mx_hot, WL_HOT, 1},
      [MX_H2] = {NULL, &mx_hot, WL_HOT, 2},
      [MEM_W1] = {NULL, NULL, WL_WIDE, 1}, /* mem_wide() */
      [SHM_W1] = {wide_spec, NULL, WL_WIDE, 1},
      [SHM_W2] = {wide_spec, NULL, WL_WIDE, 2},
      [MX_W1] = {NULL, &mx_wide, WL_WIDE, 1},
      [MX_W2] = {NULL, &mx_wide, WL_WIDE, 2},
      [MEM_C1] = {"mem", NULL, WL_CHURN, 1},
      [SHM_C1] = {churn_spec, NULL, WL_CHURN, 1},
      [SHM_B1] = {wide_spec, NULL, WL_BATCH, 1},
  };

  if (argc > 1)
    nops = atol(argv[1]);
  if (nops < 1000)
    nops = 1000;
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  keys = malloc((size_t)NKEYS * KEYLEN);
  keyseq = malloc((size_t)NKEYS * KEYLEN);
  order = malloc((size_t)NKEYS * sizeof *order);
  if (sh == MAP_FAILED || !keys || !keyseq || !order)
    die("alloc", SLUICE_ENOMEM);
  for (uint32_t i = 0; i < NKEYS; i++) {
    snprintf(keys[i], KEYLEN, "key:%011u", i);
    order[i] = i;
  }
  for (uint32_t i = NKEYS - 1; i > 0; i--) { /* Fisher-Yates, fixed seed */
    uint32_t j, t;
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    j = (uint32_t)((seed >> 33) % (i + 1));
    t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (uint32_t i = 0; i < NKEYS; i++)
    memcpy(keyseq[i], keys[order[i]], KEYLEN);
  fd_hot = memfd_create("bench-hot", 0);
  fd_wide = memfd_create("bench-wide", 0);
  fd_churn = memfd_create("bench-churn", 0);
  snprintf(churn_spec, sizeof churn_spec, "shm:fd=%d;capacity=%d", fd_churn,
           CHURN_KEYS);
  snprintf(hot_spec, sizeof hot_spec, "shm:fd=%d;capacity=1024", fd_hot);
  snprintf(wide_spec, sizeof wide_spec, "shm:fd=%d;capacity=%d", fd_wide,
           NKEYS);
  getloadavg(load, 3);
  printf("bench_shm: %ld decisions per process on 1M keys, %ld on the hot "
         "key, %d rounds (median shown), %ld online CPUs, load average %.1f "
         "(wall-clock ratios need idle CPUs)\n",
         nops, ops_of(WL_HOT), ROUNDS, sysconf(_SC_NPROCESSORS_ONLN), load[0]);

  mx_hot = mx_create(1024);
  mx_wide = mx_create(NKEYS);
  prefill(IMPL_SHM, wide_spec);
  mx = mx_wide;
  prefill(IMPL_MUTEX, NULL);
  /* Interleaved rounds: other load on the machine hits every scenario. */
  for (int r = 0; r < ROUNDS; r++)
    for (int k = 0; k < NSC; k++) {
      if (k == MEM_W1)
        continue;
      mx = sc[k].mx ? *sc[k].mx : NULL;
      ns_r[k][r] = run(sc[k].spec, sc[k].wl, sc[k].nproc);
      cpu_r[k][r] = last_cpu;
    }
  mem_wide();
  {
    /* Every run's clock ends at 1 s + its decisions: all 1M keys must
    ** still be live there. */
    sluice_limiter *lim = open_store(wide_spec);
    sluice_shm_stats st = {.now_ns = 1000000000 + nops * 1000};
    if (sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st) != SLUICE_OK ||
        st.live != NKEYS) {
      fprintf(stderr, "bench_shm: shm, 1M keys: %lld live records at the "
              "end, not %d\n", (long long)st.live, NKEYS);
      failed = 1;
    }
    sluice_limiter_close(lim);
  }
  floor_ns = dram_floor_ns((size_t)NKEYS * 64, 4 * nops);

  printf("\n%-34s %12s %14s %14s\n", "workload", "ns/decision",
         "Mdecisions/s", "CPU ns/dec.");
  for (int k = 0; k < NSC; k++) {
    double ns = median(ns_r[k]);
    printf("%-34s %12.1f %14.2f %14.1f\n", label[k], ns, 1e3 / ns,
           median(cpu_r[k]));
  }
  printf("\nfloor: one DRAM dependent miss over 64 MB (a pointer chase, "
         "in this run) = %.1f ns; 1M-key figures as multiples of it:\n",
         floor_ns);
  for (int k = MEM_W1; k <= MX_W2; k++)
    printf("floor: %s = %.2fx\n", label[k], median(ns_r[k]) / floor_ns);
  printf("floor: %s = %.2fx\n", label[SHM_B1],
         median(ns_r[SHM_B1]) / floor_ns);
  printf("live records: all 1M keys live to the end (mem, shm): %s\n",
         failed ? "NO" : "yes");
  printf("\nratios (throughput, median of the %d rounds; target in "
         "brackets):\n", ROUNDS);
  ratio("shm / mutex, hot key, 2 processes", MX_H2, SHM_H2, ">= 2.0");
  ratio("shm / mutex, 1M keys, 2 processes", MX_W2, SHM_W2, NULL);
  ratio("shm 2 processes / 1, 1M keys", SHM_W1, SHM_W2, ">= 1.6");
  ratio("shm 2 processes / 1, hot key", SHM_H1, SHM_H2, NULL);
  ratio("shm batches of 16 / one by one, 1M keys", SHM_W1, SHM_B1, ">= 3.0");
  printf("ratios of time per decision (shm slower by):\n");
  ratio("shm / mem, hot key, 1 process", SHM_H1, MEM_H1, "<= 1.5");
  ratio("shm / mem, 1M keys, 1 process", SHM_W1, MEM_W1, NULL);
  ratio("shm / mem, new keys, churned table", SHM_C1, MEM_C1, NULL);
  close(fd_churn);
  close(fd_hot);
  close(fd_wide);
  return failed;
}

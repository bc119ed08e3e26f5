/*
** Batch benchmark: decisions one by one (sluice_limiter_apply_at) against
** the same decisions in batches of BATCH (sluice_limiter_apply_many) on one
** big table, per store (mem and shm, each also with huge_pages=1), at 1M
** and 10M live keys.  shm gets huge pages only where the system allows
** them for its name= table (/dev/shm mounted with huge=advise or always);
** elsewhere its huge-page row says "fell back" and measures 4 KiB pages
** again.  The two modes alternate round by round on the same store, so
** each round's ratio compares decisions made back to back; the table shows the
** median round of each mode and the ratio's median and range.  Figures are
** CPU time per decision (on a shared machine wall time also counts the
** time other processes held the CPU).
**
** "N keys" means N live records for the whole measurement: every record
** refills one point an hour and the run's clock moves 1 us a decision, so
** none can expire before the end, and after the last round the benchmark
** counts the live records (mem: a sweep at the run's last instant, then
** the count; shm: SLUICE_CTL_SHM_STATS) and fails unless all N are there.
** Keys are formatted before timing, in the order the run visits them (a
** shuffled pass over all N), so the timed loops read them sequentially.
** The yardstick is a DRAM dependent miss, a pointer chase over a table of
** the store's size, timed in the same run.
**
** Usage: bench-batch [decisions-per-round [rounds [max-keys]]]
**        (defaults 1000000, 5, 10000000; max-keys 1000000 skips 10M)
** Prints a table; fails only on errors and on records lost.
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shuffle.h"
#include "dram_floor.h"
#include "sluice.h"
#include "sluice/sluice_mem.h"
#include "sluice/sluice_shm.h"

#define HOUR_NS INT64_C(3600000000000)
#define T0 INT64_C(1764800000000000000)
#define STEP_NS 1000
#define BATCH 16
#define KEYLEN 16
#define MAX_ROUNDS 15

static const sluice_gcra_params P = {1, HOUR_NS, 1000};

static char (*keyseq)[KEYLEN];
static int nkeys;
static int failed;

static double cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench-batch: %s: %s\n", what, sluice_strerror(rc));
  exit(1);
}

/* keyseq[i]: the i-th key of a shuffled pass over keys 0..n-1. */
static void make_keys(int n) {
  int *perm = malloc(sizeof *perm * (size_t)n);
  free(keyseq);
  keyseq = malloc(sizeof *keyseq * (size_t)n);
  if (!perm || !keyseq)
    die("keys", SLUICE_ENOMEM);
  shuffled_indices(perm, n, 7);
  for (int i = 0; i < n; i++)
    snprintf(keyseq[i], KEYLEN, "k:%012d", perm[i]);
  free(perm);
  nkeys = n;
}

typedef struct run {
  sluice_limiter *lim;
  sluice_clock *clock; /* the limiter's: a batch runs at its time */
  int64_t now;         /* the run's clock, 1 us a decision */
  int at;              /* next key in keyseq */
  long allowed, asked;
} run;

static sluice_key key_at(run *r) {
  sluice_key k = {keyseq[r->at], KEYLEN - 1};
  if (++r->at == nkeys)
    r->at = 0;
  return k;
}

static void singles(run *r, long n) {
  for (long i = 0; i < n; i++) {
    sluice_key k = key_at(r);
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &P, 1, 0};
    sluice_verdict v;
    r->now += STEP_NS;
    if (sluice_limiter_apply_at(r->lim, &op, r->now, &v) != SLUICE_OK)
      die("apply", SLUICE_EBACKEND);
    r->allowed += v.allowed;
    r->asked++;
  }
}

static void batches(run *r, long n) {
  sluice_key k[BATCH];
  sluice_op ops[BATCH];
  sluice_verdict v[BATCH];
  int rcs[BATCH];
  for (long i = 0; i + BATCH <= n; i += BATCH) {
    for (int b = 0; b < BATCH; b++) {
      k[b] = key_at(r);
      ops[b] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[b], &P,
                           1, 0};
    }
    r->now += STEP_NS * BATCH;
    sluice_clock_set(r->clock, r->now);
    if (sluice_limiter_apply_many(r->lim, BATCH, ops, v, rcs) != SLUICE_OK)
      die("apply_many", SLUICE_EBACKEND);
    for (int b = 0; b < BATCH; b++) {
      if (rcs[b] != SLUICE_OK)
        die("apply_many op", rcs[b]);
      r->allowed += v[b].allowed;
      r->asked++;
    }
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double t[MAX_ROUNDS];
  memcpy(t, v, sizeof t[0] * (size_t)n);
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return t[n / 2];
}

/* Live records at the run's last instant. */
static int64_t live_records(sluice_limiter *lim, int shm, int64_t now) {
  if (shm) {
    sluice_shm_stats st;
    memset(&st, 0, sizeof st);
    st.now_ns = now;
    if (sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st) != SLUICE_OK)
      return -1;
    return st.live;
  } else {
    int64_t arg = now, count = -1;
    if (sluice_limiter_control(lim, SLUICE_CTL_MEM_SWEEP, &arg) != SLUICE_OK ||
        sluice_limiter_control(lim, SLUICE_CTL_MEM_COUNT, &count) != SLUICE_OK)
      return -1;
    return count;
  }
}

typedef struct result {
  double single, batch, ratio, lo, hi;
} result;

/* One store, N keys: fill, then `rounds` rounds of n singles and n batched
** decisions.  shm: 0 mem, 1 shm, 2 shm asked for huge pages. */
static result measure(const char *name, const char *spec, int shm, int n_keys,
                      long n, int rounds) {
  sluice_limiter_options o;
  run r;
  double s[MAX_ROUNDS], b[MAX_ROUNDS], q[MAX_ROUNDS], c0;
  result res;
  int64_t live, huge = -1;
  int rc;
  memset(&o, 0, sizeof o);
  memset(&r, 0, sizeof r);
  if (nkeys != n_keys)
    make_keys(n_keys);
  r.now = T0;
  if (sluice_clock_manual(T0, &r.clock) != SLUICE_OK)
    die("clock", SLUICE_ENOMEM);
  o.clock = r.clock;
  o.store = spec;
  rc = sluice_limiter_open(&o, &r.lim);
  if (rc == SLUICE_ENOTSUP && shm) { /* built without shm: the stub */
    sluice_clock_free(r.clock);
    memset(&res, 0, sizeof res);
    return res;
  }
  if (rc != SLUICE_OK)
    die(spec, rc);
  if (shm == 2 &&
      (sluice_limiter_control(r.lim, SLUICE_CTL_SHM_HUGE, &huge) !=
           SLUICE_OK ||
       huge != 1))
    printf("%-28s (fell back to 4 KiB pages: the system gives shared "
           "memory no huge pages)\n", name);
  singles(&r, n_keys); /* every key exists before timing */
  for (int i = 0; i < rounds; i++) {
    c0 = cpu();
    singles(&r, n);
    s[i] = (cpu() - c0) * 1e9 / (double)n;
    c0 = cpu();
    batches(&r, n);
    b[i] = (cpu() - c0) * 1e9 / (double)(n / BATCH * BATCH);
    q[i] = s[i] / b[i];
  }
  live = live_records(r.lim, shm, r.now);
  if (live != n_keys) {
    fprintf(stderr, "bench-batch: %s: %" PRId64 " live records at the end, "
            "not %d\n", name, live, n_keys);
    failed = 1;
  }
  if (r.allowed != r.asked) {
    fprintf(stderr, "bench-batch: %s: %ld of %ld decisions denied\n", name,
            r.asked - r.allowed, r.asked);
    failed = 1;
  }
  sluice_limiter_close(r.lim);
  sluice_clock_free(r.clock);
  res.single = median(s, rounds);
  res.batch = median(b, rounds);
  res.ratio = median(q, rounds);
  res.lo = res.hi = q[0];
  for (int i = 1; i < rounds; i++) {
    res.lo = q[i] < res.lo ? q[i] : res.lo;
    res.hi = q[i] > res.hi ? q[i] : res.hi;
  }
  return res;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  long maxk = argc > 3 ? atol(argv[3]) : 10000000;
  char shm_name[64], shm_spec[160];
  /* shm: 1 shm, 2 shm on huge pages */
  struct {
    const char *name, *spec;
    int shm, keys;
  } cases[] = {
      {"mem, 1M keys", "mem", 0, 1000000},
      {"mem, 1M keys, huge pages", "mem:huge_pages=1", 0, 1000000},
      {"shm, 1M keys", shm_spec, 1, 1000000},
      {"shm, 1M keys, huge pages", shm_spec, 2, 1000000},
      {"mem, 10M keys", "mem", 0, 10000000},
      {"mem, 10M keys, huge pages", "mem:huge_pages=1", 0, 10000000},
      {"shm, 10M keys", shm_spec, 1, 10000000},
      {"shm, 10M keys, huge pages", shm_spec, 2, 10000000}};
  result res[8];
  double floor1m, floor10m = 0;
  int ncases = maxk >= 10000000 ? 8 : 4;
  if (n < BATCH || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: bench-batch [decisions-per-round >= %d [rounds "
            "1..%d [max-keys]]]\n", BATCH, MAX_ROUNDS);
    return 2;
  }
  snprintf(shm_name, sizeof shm_name, "/sluice-bench-batch-%d", (int)getpid());
  printf("bench-batch: %ld decisions a round per mode, %d rounds, batches of "
         "%d; CPU ns per decision, median round\n\n", n, rounds, BATCH);
  printf("%-28s %10s %10s %8s %14s\n", "case", "one by one", "batched",
         "ratio", "ratio rounds");
  for (int c = 0; c < ncases; c++) {
    if (cases[c].shm) {
      shm_unlink(shm_name);
      snprintf(shm_spec, sizeof shm_spec,
               "shm:name=%s;create=1;capacity=%d%s", shm_name, cases[c].keys,
               cases[c].shm == 2 ? ";huge_pages=1" : "");
    }
    res[c] = measure(cases[c].name, cases[c].spec, cases[c].shm,
                     cases[c].keys, n, rounds);
    if (cases[c].shm)
      shm_unlink(shm_name);
    printf("%-28s %10.1f %10.1f %7.2fx %7.2f-%.2fx\n", cases[c].name,
           res[c].single, res[c].batch, res[c].ratio, res[c].lo, res[c].hi);
    fflush(stdout);
  }
  floor1m = dram_floor_ns((size_t)1000000 * 64, n);
  printf("\n%-28s %10.1f ns (64 MB chase)\n", "DRAM dependent miss", floor1m);
  if (ncases == 8) {
    floor10m = dram_floor_ns((size_t)10000000 * 64, n);
    printf("%-28s %10.1f ns (640 MB chase)\n", "DRAM dependent miss", floor10m);
  }
  printf("\nratio: batched / one by one, throughput, 1M keys: mem %.2fx, mem "
         "huge pages %.2fx, shm %.2fx, shm huge pages %.2fx [target >= 3]\n",
         res[0].ratio, res[1].ratio, res[2].ratio, res[3].ratio);
  if (ncases == 8)
    printf("ratio: 10M / 1M keys, time per batched decision: mem %.2fx, mem "
           "huge pages %.2fx, shm %.2fx, shm huge pages %.2fx [target <= "
           "3]\n",
           res[4].batch / res[0].batch, res[5].batch / res[1].batch,
           res[6].batch / res[2].batch, res[7].batch / res[3].batch);
  printf("live records: every case held all its keys to the end: %s\n",
         failed ? "NO" : "yes");
  free(keyseq);
  return failed;
}

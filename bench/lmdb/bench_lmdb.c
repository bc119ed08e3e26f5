/*
** Decisions per second on the LMDB store: one write transaction per
** decision, and batches of 100 and 1000 decisions per transaction
** (sluice_limiter_decide of n programs), for each durability mode, all in one run,
** with the mem store measured in the same run as the baseline.
**
** A decision is one GCRA take of 1 point from one of 10000 keys whose bucket
** never runs dry, so every decision writes (a denial would abort its
** transaction and cost no commit, which flatters the numbers).  Each
** configuration runs until it has made at least MIN_DECISIONS decisions and
** spent at least MIN_SECONDS, so fsync-bound modes still give a stable
** figure without making the run long.  Times are wall-clock ns per
** decision; this is a benchmark, never a pass/fail test.
**
** Usage: bench_lmdb [DIR]   (the environment goes in a fresh DIR/bench-XXXXXX,
** removed afterwards; put DIR on the disk you care about: fsync on tmpfs is
** free).
*/
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "../../tests/common/one_step.h"

#define NKEYS 10000
#define MIN_DECISIONS 200
#define MAX_DECISIONS 2000000
#define MIN_SECONDS 0.5

static char keys[NKEYS][24];
static sluice_key skeys[NKEYS];
static const sluice_gcra_params forever = {1000000000, 1000000000,
                                           1000000000};

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ns per decision for one configuration, or a negative error. */
static double run(sluice_limiter *l, sluice_clock *c, int batch) {
  static sluice_op ops[1000];
  static sluice_verdict vs[1000];
  static int rcs[1000];
  double t0 = mono(), el = 0;
  long n = 0;
  unsigned k = 1;
  int i;
  while (n < MAX_DECISIONS && (n < MIN_DECISIONS || el < MIN_SECONDS)) {
    sluice_clock_advance(c, 1000);
    if (batch == 1) {
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1,
                      &skeys[k % NKEYS], &forever, 1, 0};
      if (op_decide(l, &op, SLUICE_NOW, &vs[0]) != SLUICE_OK || !vs[0].allowed)
        return -1;
      k = k * 1103515245u + 12345u;
    } else {
      for (i = 0; i < batch; i++) {
        ops[i] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1,
                             &skeys[k % NKEYS], &forever, 1, 0};
        k = k * 1103515245u + 12345u;
      }
      if (ops_decide(l, batch, ops, SLUICE_NOW, vs, rcs) != SLUICE_OK)
        return -1;
      for (i = 0; i < batch; i++)
        if (rcs[i] != SLUICE_OK || !vs[i].allowed)
          return -1;
    }
    n += batch;
    el = mono() - t0;
  }
  return el * 1e9 / (double)n;
}

static int rm_one(const char *p, const struct stat *sb, int f,
                  struct FTW *w) {
  (void)sb;
  (void)f;
  (void)w;
  return remove(p);
}

int main(int argc, char **argv) {
  static const char *const modes[] = {"full", "nometasync", "nosync"};
  static const int batches[] = {1, 100, 1000};
  char dir[4096], uri[4200], err[256];
  double base[3];
  sluice_clock *c;
  sluice_limiter *l;
  sluice_limiter_options o = {0};
  int m, b, i, rc;

  snprintf(dir, sizeof dir, "%s/bench-XXXXXX", argc > 1 ? argv[1] : ".");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  for (i = 0; i < NKEYS; i++) {
    snprintf(keys[i], sizeof keys[i], "{t:%d}:key:%d", i % 100, i);
    skeys[i].data = keys[i];
    skeys[i].len = strlen(keys[i]);
  }
  sluice_clock_manual(INT64_C(1700000000000000000), &c);
  o.clock = c;
  o.store = "mem";
  if (sluice_limiter_open(&o, &l, NULL, 0) != SLUICE_OK)
    return 1;
  for (b = 0; b < 3; b++)
    base[b] = run(l, c, batches[b]);
  sluice_limiter_close(l);

  printf("sluice lmdb benchmark: GCRA take, %d keys, env in %s\n", NKEYS, dir);
  printf("%-22s %7s %12s %14s %10s\n", "store", "batch", "ns/decision",
         "decisions/s", "vs mem");
  for (b = 0; b < 3; b++)
    printf("%-22s %7d %12.0f %14.0f %9.2fx\n", "mem (baseline)", batches[b],
           base[b], 1e9 / base[b], base[b] / base[0]);
  for (m = 0; m < 3; m++) {
    snprintf(uri, sizeof uri, "lmdb:path=%s/%s;mapsize=256m;sync=%s", dir,
             modes[m], modes[m]);
    o.store = uri;
    o.flags = SLUICE_OPEN_CREATE;
    rc = sluice_limiter_open(&o, &l, err, sizeof err);
    if (rc != SLUICE_OK) {
      fprintf(stderr, "open %s: %s: %s\n", uri, sluice_strerror(rc), err);
      return 1;
    }
    for (b = 0; b < 3; b++) {
      char name[32];
      double ns = run(l, c, batches[b]);
      if (ns < 0) {
        fprintf(stderr, "%s: %s\n", uri, sluice_limiter_errmsg(l));
        return 1;
      }
      snprintf(name, sizeof name, "lmdb sync=%s", modes[m]);
      printf("%-22s %7d %12.0f %14.0f %9.2fx\n", name, batches[b], ns,
             1e9 / ns, ns / base[0]);
    }
    sluice_limiter_close(l);
  }
  printf("(vs mem: ns/decision relative to mem with one decision per call, "
         "same run)\n");
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  sluice_clock_free(c);
  return 0;
}

/*
** Core benchmark: ns per decision for the pure GCRA step (the baseline) and
** for the mem store on a hot key, on 10 000 and 1 000 000 keys, with a
** tenant+key group, and from 2 threads; each as a ratio to the baseline
** measured in the same run.  Prints a table; no pass/fail on timing.
*/
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice.h"

static double mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const sluice_gcra_params P[2] = {{100, 1000000000, 200},
                                        {50, 1000000000, 100}};

typedef struct job {
  sluice_limiter *lim;
  int nkeys, group, n;
  uint64_t seed;
  long allowed;
} job;

/* Keys are made before timing: formatting them would cost as much as the
** decision being measured. */
#define KEYLEN 24
static char (*keytab)[2][KEYLEN];

static void make_keys(int n) {
  keytab = malloc(sizeof *keytab * (size_t)n);
  for (int i = 0; i < n; i++) {
    snprintf(keytab[i][0], KEYLEN, "rl:{t:%07d}:kb", i);
    snprintf(keytab[i][1], KEYLEN, "rl:{t:%07d}:tb", i);
  }
}

static void *run(void *arg) {
  job *j = arg;
  sluice_key k[2];
  sluice_verdict v;
  uint64_t x = j->seed;
  for (int i = 0; i < j->n; i++) {
    unsigned key;
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    key = (unsigned)((x >> 33) % (uint64_t)j->nkeys);
    k[0].data = keytab[key][0];
    k[0].len = 19;
    k[1].data = keytab[key][1];
    k[1].len = 19;
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, j->group ? 2 : 1,
                    k, P, 1, 0};
    sluice_limiter_apply_at(j->lim, &op, 1000000000000 + (int64_t)i * 1000, &v);
    j->allowed += v.allowed;
  }
  return NULL;
}

static double store_case(int nkeys, int group, int threads, int n) {
  sluice_limiter *lim;
  pthread_t th[2];
  job jobs[2];
  double t0, t1;
  if (sluice_limiter_open(NULL, &lim) != SLUICE_OK)
    return -1;
  /* Warm the table so that every key exists before timing. */
  {
    job w = {lim, nkeys, group, nkeys < 200000 ? nkeys * 2 : nkeys, 7, 0};
    run(&w);
  }
  t0 = mono();
  for (int i = 0; i < threads; i++) {
    jobs[i] = (job){lim, nkeys, group, n, 11 + (uint64_t)i, 0};
    pthread_create(&th[i], NULL, run, &jobs[i]);
  }
  for (int i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  t1 = mono();
  sluice_limiter_close(lim);
  return (t1 - t0) * 1e9 / ((double)n * threads);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000000;
  sluice_state s = {{0, 0}};
  sluice_verdict v;
  double t0, base, ns;
  long acc = 0;
  struct {
    const char *name;
    int nkeys, group, threads;
  } cases[] = {{"mem, hot key, 1 thread", 1, 0, 1},
               {"mem, 10k keys, 1 thread", 10000, 0, 1},
               {"mem, 1M keys, 1 thread", 1000000, 0, 1},
               {"mem, tenant+key group, 10k", 10000, 1, 1},
               {"mem, hot key, 2 threads", 1, 0, 2},
               {"mem, 10k keys, 2 threads", 10000, 0, 2}};

  make_keys(1000000);
  t0 = mono();
  for (int i = 0; i < n; i++) {
    sluice_gcra_step(&P[0], &s, 1000000000000 + (int64_t)i * 1000,
                     SLUICE_OP_CONSUME, 1, &s, &v);
    acc += v.allowed;
  }
  base = (mono() - t0) * 1e9 / n;
  printf("%-34s %10s %14s %8s\n", "case", "ns/dec", "decisions/s", "ratio");
  printf("%-34s %10.1f %14.0f %8.2f   (baseline, %ld)\n",
         "pure GCRA step (no store)", base, 1e9 / base, 1.0, acc);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ns = store_case(cases[c].nkeys, cases[c].group, cases[c].threads, n);
    printf("%-34s %10.1f %14.0f %8.2f\n", cases[c].name, ns, 1e9 / ns,
           ns / base);
  }
  free(keytab);
  return 0;
}

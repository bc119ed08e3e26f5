/*
** How the policy benchmarks time a case: n calls in a row, ROUNDS times,
** the median round's CPU ns per call (the thread's CPU time: a round
** another process took the core from is not charged the wait).  The
** median, not the mean, because the machines are shared: a round another
** process slowed (its caches, the core's other thread) is an outlier, not
** a figure.
*/
#ifndef SLUICE_BENCH_ROUNDS_H
#define SLUICE_BENCH_ROUNDS_H

#include <time.h>

#define ROUNDS 5

typedef void (*one_fn)(long i);

static inline double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline double median(double *v, int n) {
  int i, j;
  for (i = 1; i < n; i++)
    for (j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v[n / 2];
}

/* The calling thread's CPU time, in ns. */
static inline double cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* f is called with a distinct i across every round, so a case can vary
** its key by i without meeting a record of an earlier round. */
static inline double measure(one_fn f, long n) {
  double r[ROUNDS];
  int k;
  long i;
  for (k = 0; k < ROUNDS; k++) {
    double t0 = cpu();
    for (i = 0; i < n; i++)
      f(k * n + i);
    r[k] = (cpu() - t0) / (double)n;
  }
  return median(r, ROUNDS);
}

#endif

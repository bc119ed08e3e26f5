/*
** How the policy benchmarks time a case: n calls in a row, ROUNDS times,
** the median round's ns per call.  The median, not the mean, because the
** machines are shared: a round another process interrupted is an outlier,
** not a figure.
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

/* f is called with a distinct i across every round, so a case can vary
** its key by i without meeting a record of an earlier round. */
static inline double measure(one_fn f, long n) {
  double r[ROUNDS];
  int k;
  long i;
  for (k = 0; k < ROUNDS; k++) {
    double t0 = mono();
    for (i = 0; i < n; i++)
      f(k * n + i);
    r[k] = (mono() - t0) / (double)n;
  }
  return median(r, ROUNDS);
}

#endif

/*
** A reproducible permutation of 0..n-1 (Fisher-Yates over SplitMix64), for
** the benchmarks that visit a big table's keys in an order the hardware
** prefetcher cannot follow.  Seeded, so two runs time the same walk.
*/
#ifndef SLUICE_TEST_SHUFFLE_H
#define SLUICE_TEST_SHUFFLE_H

#include "splitmix.h"

static inline void shuffled_indices(int *perm, int n, uint64_t seed) {
  for (int i = 0; i < n; i++)
    perm[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(splitmix64(&seed) % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

#endif

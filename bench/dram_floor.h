/*
** The yardstick of the big-table benchmarks: ns per DRAM dependent miss,
** measured by a pointer chase over a table of a given size, one load per
** cache line, the lines linked in one random cycle (Sattolo's shuffle) so
** that every load misses and the next address is not known before the load
** returns.  A decision on a table that size cannot cost less than one such
** miss, so figures are also printed as multiples of it.  Timed in the
** thread's CPU time: on a shared machine the wall time of the chase also
** counts the time other processes held the CPU, which is no floor.
*/
#ifndef SLUICE_BENCH_DRAM_FLOOR_H
#define SLUICE_BENCH_DRAM_FLOOR_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double dram_floor_ns(size_t bytes, long hops) {
  size_t lines = bytes / 64, i, at = 0;
  size_t *t = aligned_alloc(64, lines * 64);
  uint64_t x = 3;
  struct timespec a, b;
  if (!t || lines < 2)
    return -1;
  for (i = 0; i < lines; i++)
    t[i * 8] = i;
  for (i = lines - 1; i > 0; i--) {
    size_t j, tmp;
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    j = (size_t)((x >> 33) % i);
    tmp = t[i * 8];
    t[i * 8] = t[j * 8];
    t[j * 8] = tmp;
  }
  for (i = 0; i < lines; i++) /* fault the pages in, warm the TLB */
    at = t[at * 8];
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  for (long h = 0; h < hops; h++)
    at = t[at * 8];
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  if (at == (size_t)-1) /* never: keeps the chase from being optimised out */
    puts("");
  free(t);
  return ((double)(b.tv_sec - a.tv_sec) * 1e9 +
          (double)(b.tv_nsec - a.tv_nsec)) /
         (double)hops;
}

#endif

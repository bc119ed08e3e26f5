/*
** window_sim: how often would a table at its capacity find a key's whole
** probe window full?  A model of the shm table's fill: capacity keys go
** into capacity * 4/3 slots, each at the first free slot at or after a
** uniformly random home (linear probing, as in shm_store.c; in a fresh
** table the first reclaimable slot is the first free one).  Each fill's
** longest displacement is recorded; a fill whose longest displacement is
** at least the window would have refused a key below capacity.
**
** Usage: window_sim [capacity] [fills] [seed]   (default 1000000 200 1)
** Prints, per displacement threshold, the share of fills that reached it;
** docs/shm.md extrapolates the tail of that curve to the real window.
** A tool for the documentation's figures, not a test: it asserts nothing.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../common/splitmix.h"

static uint64_t state;

static uint64_t next(void) { /* splitmix64 */
  return splitmix64(&state);
}

int main(int argc, char **argv) {
  uint64_t cap = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
  long fills = argc > 2 ? atol(argv[2]) : 200;
  uint64_t nslots, *longest_of;
  uint8_t *used;
  long f;
  state = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
  nslots = cap * 4 / 3;
  if (cap < 1 || fills < 1 || nslots < cap) {
    fprintf(stderr, "usage: window_sim [capacity] [fills] [seed]\n");
    return 2;
  }
  used = malloc(nslots);
  longest_of = malloc((size_t)fills * sizeof *longest_of);
  if (!used || !longest_of) {
    fprintf(stderr, "window_sim: out of memory\n");
    return 1;
  }
  for (f = 0; f < fills; f++) {
    uint64_t longest = 0;
    memset(used, 0, nslots);
    for (uint64_t i = 0; i < cap; i++) {
      uint64_t h = (uint64_t)(((unsigned __int128)next() * nslots) >> 64);
      uint64_t d = 0, j = h;
      while (used[j]) {
        d++;
        j = j + 1 == nslots ? 0 : j + 1;
      }
      used[j] = 1;
      if (d > longest)
        longest = d;
    }
    longest_of[f] = longest;
  }
  printf("capacity %llu, %llu slots, %ld fills\n", (unsigned long long)cap,
         (unsigned long long)nslots, fills);
  printf("%10s %8s %12s\n", "displaced", "fills", "share");
  for (uint64_t t = 128; t <= 1024; t += 16) {
    long n = 0;
    for (f = 0; f < fills; f++)
      n += longest_of[f] >= t;
    printf("%10llu %8ld %12.6f\n", (unsigned long long)t, n,
           (double)n / (double)fills);
    if (n == 0)
      break;
  }
  free(used);
  free(longest_of);
  return 0;
}

/*
** SplitMix64 (Steele, Lea, Flood 2014): the tests' one reproducible
** generator.  Suites seed it with a fixed value so a failing trace replays
** exactly; each suite wraps it in whatever shape its callers want (a state
** struct, a void* callback for the HTTP layer's jitter source).
*/
#ifndef SLUICE_TEST_SPLITMIX_H
#define SLUICE_TEST_SPLITMIX_H

#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

#endif

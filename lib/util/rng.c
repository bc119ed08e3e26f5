/*
** The jitter source (see rng.h for why SplitMix64 and why atomic).
**
** SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
** generators", OOPSLA 2014) advances a 64-bit counter by the golden-ratio
** gamma and mixes it.  It is not cryptographic, and need not be: jitter
** only has to spread clients, not to be unpredictable to them.
*/
#include "rng.h"
#include "random.h"

#define GAMMA UINT64_C(0x9e3779b97f4a7c15)

int sluice__rng_init(sluice__rng *r, uint64_t (*fn)(void *ud), void *ud) {
  uint64_t seed = 0;
  int rc;
  r->fn = fn;
  r->ud = ud;
  if (!fn) {
    rc = sluice__random_bytes(&seed, sizeof seed);
    if (rc != SLUICE_OK)
      return rc;
  }
  atomic_init(&r->ctr, seed);
  return SLUICE_OK;
}

uint64_t sluice__rng_next(sluice__rng *r) {
  uint64_t z;
  if (r->fn)
    return r->fn(r->ud);
  z = atomic_fetch_add_explicit(&r->ctr, GAMMA, memory_order_relaxed) + GAMMA;
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

uint64_t sluice__rng_upto(sluice__rng *r, uint64_t n) {
  uint64_t span, limit, x;
  int tries = 0;
  if (n == 0)
    return 0;
  if (n == UINT64_MAX)
    return sluice__rng_next(r);
  span = n + 1;
  /* Largest multiple of span that fits: draws at or above it would make
  ** the low residues likelier, so they are thrown away. */
  limit = UINT64_MAX - (UINT64_MAX % span);
  /* An injected source stuck at the top of its range must not hang the
  ** caller: after 64 rejections the slight bias is accepted instead. */
  do {
    x = sluice__rng_next(r);
  } while (x >= limit && ++tries < 64);
  return x % span;
}

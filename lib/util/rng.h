/*
** The jitter source, shared by the HTTP surface (Retry-After jitter), the
** client planner (backoff jitter) and the webhook sink (retry jitter).  It
** lives below all three so that none of them reaches into another's
** internals for it.
**
** A caller can inject a source (tests do, to make every draw
** reproducible); otherwise each handle owns a SplitMix64 generator seeded
** from the OS.  SplitMix64 is a counter passed through a mixing function,
** so advancing it is one atomic fetch-add: a handle shared by threads needs
** no lock and has no global state.  Draws in a range use rejection, so no
** value is favoured.
*/
#ifndef SLUICE_UTIL_RNG_H
#define SLUICE_UTIL_RNG_H

#include <stdatomic.h>
#include <stdint.h>

#include "sluice.h"

typedef struct sluice__rng {
  uint64_t (*fn)(void *ud); /* injected source, or NULL */
  void *ud;
  _Atomic uint64_t ctr;     /* SplitMix64 state when fn is NULL */
} sluice__rng;

/* Seed from the OS unless a source is injected. */
int sluice__rng_init(sluice__rng *r, uint64_t (*fn)(void *ud), void *ud);
uint64_t sluice__rng_next(sluice__rng *r);
/* Uniform in [0, n] (inclusive), n >= 0. */
uint64_t sluice__rng_upto(sluice__rng *r, uint64_t n);

#endif

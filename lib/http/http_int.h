/*
** Internals shared by the HTTP surface and the client planner: the random
** source and small integer helpers.
**
** Jitter is the only randomness in either layer.  A caller can inject a
** source (tests do, to make every draw reproducible); otherwise each handle
** owns a SplitMix64 generator seeded from the OS.  SplitMix64 is a counter
** passed through a mixing function, so advancing it is one atomic
** fetch-add: a handle shared by threads needs no lock and has no global
** state.  Draws in a range use rejection, so no value is favoured.
*/
#ifndef SLUICE_HTTP_INT_H
#define SLUICE_HTTP_INT_H

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

/* ceil(a / b) for a >= 0, b > 0, without overflow. */
static inline int64_t sluice__ceil_div64(int64_t a, int64_t b) {
  return a / b + (a % b != 0);
}

/* The last second an IMF-fixdate can carry: 9999-12-31T23:59:59Z. */
#define SLUICE__MAX_EPOCH_S INT64_C(253402300799)

/* The renderer handle (sluice/http.h). */
struct sluice_http {
  int form;             /* enum sluice_http_form */
  unsigned flags;       /* SLUICE_HTTP_* */
  int64_t date_after_s; /* lockouts this long or longer get a date */
  char *base;           /* problem type base URI ending in '/', or NULL */
  sluice__rng rng;
};

#define SLUICE__NS_PER_S INT64_C(1000000000)
#define SLUICE__NS_PER_MS INT64_C(1000000)

/* Days since 1970-01-01 of a proleptic Gregorian civil date, and back. */
int64_t sluice__days_from_civil(int64_t y, int m, int d);
void sluice__civil_from_days(int64_t z, int64_t *y, int *m, int *d);

#endif

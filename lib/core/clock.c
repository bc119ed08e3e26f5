/*
** Clocks.  The real clock reads CLOCK_REALTIME (so that times line up with
** HTTP-dates and across hosts) and the manual clock is an atomic integer.
** Neither promises monotonicity by itself: a limiter clamps what it reads
** to the highest time it has seen (limiter.c), which is where "never goes
** backwards as seen by the limiter" is kept.
*/
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "sluice.h"

enum { CLOCK_KIND_REAL, CLOCK_KIND_MANUAL, CLOCK_KIND_CUSTOM };

struct sluice_clock {
  int kind;
  _Atomic int64_t t;
  int64_t (*now)(void *);
  void *ud;
};

static int clock_new(int kind, sluice_clock **out) {
  sluice_clock *c;
  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  c = calloc(1, sizeof *c);
  if (!c)
    return SLUICE_ENOMEM;
  c->kind = kind;
  *out = c;
  return SLUICE_OK;
}

int sluice_clock_real(sluice_clock **out) {
  return clock_new(CLOCK_KIND_REAL, out);
}

int sluice_clock_manual(int64_t start_ns, sluice_clock **out) {
  int rc;
  if (start_ns < 0) {
    if (out)
      *out = NULL;
    return SLUICE_EINVAL;
  }
  rc = clock_new(CLOCK_KIND_MANUAL, out);
  if (rc == SLUICE_OK)
    atomic_store(&(*out)->t, start_ns);
  return rc;
}

int sluice_clock_custom(int64_t (*now)(void *ud), void *ud,
                        sluice_clock **out) {
  int rc;
  if (!now) {
    if (out)
      *out = NULL;
    return SLUICE_EINVAL;
  }
  rc = clock_new(CLOCK_KIND_CUSTOM, out);
  if (rc == SLUICE_OK) {
    (*out)->now = now;
    (*out)->ud = ud;
  }
  return rc;
}

int64_t sluice_clock_now(sluice_clock *c) {
  struct timespec ts;
  int64_t t;
  if (!c)
    return 0;
  switch (c->kind) {
  case CLOCK_KIND_MANUAL:
    return atomic_load(&c->t);
  case CLOCK_KIND_CUSTOM:
    t = c->now(c->ud);
    return t < 0 ? 0 : t;
  default:
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
      return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  }
}

int sluice_clock_set(sluice_clock *c, int64_t t_ns) {
  if (!c || c->kind != CLOCK_KIND_MANUAL || t_ns < 0)
    return SLUICE_EINVAL;
  atomic_store(&c->t, t_ns);
  return SLUICE_OK;
}

int sluice_clock_advance(sluice_clock *c, int64_t delta_ns) {
  int64_t cur, next;
  if (!c || c->kind != CLOCK_KIND_MANUAL)
    return SLUICE_EINVAL;
  cur = atomic_load(&c->t);
  do {
    if ((delta_ns > 0 && cur > INT64_MAX - delta_ns) || cur + delta_ns < 0)
      return SLUICE_ERANGE;
    next = cur + delta_ns;
  } while (!atomic_compare_exchange_weak(&c->t, &cur, next));
  return SLUICE_OK;
}

void sluice_clock_free(sluice_clock *c) { free(c); }

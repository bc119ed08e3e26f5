/*
** Shared helpers of the algorithm layer: exact wide arithmetic and the
** verdict reset.  Intermediate products (a time span times a rate) can pass
** 2^63, so they are computed in 128 bits; every result that leaves a step
** is clamped back into int64 range.
*/
#ifndef SLUICE_ALGO_INT_H
#define SLUICE_ALGO_INT_H

#include <string.h>

#include "op.h"
#include "sluice/algo.h"
#include "wide.h"

/* Division rounding toward negative / positive infinity (d > 0). */
/* 128-bit division is a library call costing tens of ns; the operands of a
** decision almost always fit 64 bits, so divide there when they do. */
static inline int sluice__fits64(sluice__i128 x) {
  return x >= (sluice__i128)INT64_MIN && x <= (sluice__i128)INT64_MAX;
}
static inline void sluice__divmod(sluice__i128 n, sluice__i128 d,
                                  sluice__i128 *q, sluice__i128 *r) {
  if (sluice__fits64(n) && sluice__fits64(d) && n != (sluice__i128)INT64_MIN) {
    int64_t a = (int64_t)n, b = (int64_t)d;
    *q = a / b;
    *r = a % b;
  } else {
    *q = n / d;
    *r = n % d;
  }
}
static inline sluice__i128 sluice__floordiv(sluice__i128 n, sluice__i128 d) {
  sluice__i128 q, r;
  sluice__divmod(n, d, &q, &r);
  return (r != 0 && n < 0) ? q - 1 : q;
}
static inline sluice__i128 sluice__ceildiv(sluice__i128 n, sluice__i128 d) {
  sluice__i128 q, r;
  sluice__divmod(n, d, &q, &r);
  return (r != 0 && n > 0) ? q + 1 : q;
}

/* Saturating a + b for non-negative b. */
static inline int64_t sluice__sat_add(int64_t a, int64_t b) {
  return (a > INT64_MAX - b) ? INT64_MAX : a + b;
}

/* Start of the aligned window that holds `now` (now >= 0). */
static inline int64_t sluice__window_start(int64_t now, int64_t w) {
  return now - now % w;
}

/* Zero a verdict.  In two parts: gcc (-O2, -O3) may turn one memset of a
** struct this size into `rep stos`, a microcoded loop with a start-up
** cost on every hot-key decision; 64 + the rest become a few vector
** stores. */
static inline void sluice__verdict_reset(sluice_verdict *v, int64_t now) {
  _Static_assert(sizeof(sluice_verdict) > 64, "two parts");
  memset(v, 0, 64);
  memset((char *)v + 64, 0, sizeof *v - 64);
  v->now_ns = now;
}

/* The single-key entry points (sluice__gcra_step() and friends): one op on
** one anonymous key, through the full validation of sluice__op_step(). */
int sluice__step1(int algo, int kind, const void *params, int64_t arg,
                  uint64_t id, const sluice_state *in, int64_t now,
                  sluice_state *out, sluice_verdict *v);

/* Per-algorithm steps over a validated op (internal entry points). */
int sluice__gcra_group(const sluice_op *op, const sluice_state *in,
                       sluice_state *out, int64_t now, sluice_verdict *v);
#define SLUICE__RUN_DECL(name)                                                 \
  int sluice__##name##_run(const sluice_op *op, const sluice_state *in,        \
                           sluice_state *out, int64_t now, sluice_verdict *v)
SLUICE__RUN_DECL(swindow);
SLUICE__RUN_DECL(fwindow);
SLUICE__RUN_DECL(penalty);
SLUICE__RUN_DECL(lease);
SLUICE__RUN_DECL(distinct);
/* The single-bucket GCRA step has an int64 path and the exact 128-bit one.
** sluice__gcra_single_path() runs one of them alone, for the tests that
** prove they agree: SLUICE__GCRA_PATH_64 returns 0 (and writes nothing
** useful) when the values do not fit 64 bits, 1 when it decided.  A
** non-zero sluice__gcra_force_wide sends every step down the 128-bit path,
** so that a benchmark can time both in one run; nothing else sets it. */
enum { SLUICE__GCRA_PATH_64 = 1, SLUICE__GCRA_PATH_128 = 2 };
int sluice__gcra_single_path(int path, const sluice_gcra_params *p, int kind,
                             int64_t cost, const sluice_state *in,
                             sluice_state *out, int64_t now,
                             sluice_verdict *v);
extern int sluice__gcra_force_wide;
int64_t sluice__gcra_expiry(const sluice_gcra_params *p, const sluice_state *s);
int64_t sluice__swindow_expiry(const sluice_window_params *p,
                               const sluice_state *s);
int64_t sluice__fwindow_expiry(const sluice_window_params *p,
                               const sluice_state *s);
int64_t sluice__penalty_expiry(const sluice_penalty_params *p,
                               const sluice_state *s);
/* Undo of one record's write for a lock-free store whose rollback lost its
** CAS race: `post` is what the step wrote over `pre` at `now`, `cur` what
** the record holds now (others wrote after it).  Writes to *out the record
** with this write's contribution taken out and returns 1; returns 0 when
** there is nothing it can take out without handing back more than the
** write took (then the charge stays: that only under-admits). */
#define SLUICE__UNDO_DECL(name, ptype)                                         \
  int sluice__##name##_undo(const ptype *p, const sluice_state *pre,           \
                            const sluice_state *post, const sluice_state *cur, \
                            int64_t now, sluice_state *out)
SLUICE__UNDO_DECL(gcra, sluice_gcra_params);
SLUICE__UNDO_DECL(swindow, sluice_window_params);
SLUICE__UNDO_DECL(fwindow, sluice_window_params);
SLUICE__UNDO_DECL(lease, sluice_lease_params);
/* The counted lease set (lease_count.c): max > SLUICE_GROUP_MAX leases in
** one record; lease.c hands it its ops. */
SLUICE__RUN_DECL(lease_count);
SLUICE__UNDO_DECL(lease_count, sluice_lease_params);
int64_t sluice__lease_count_expiry(const sluice_lease_params *p,
                                   const sluice_state *s);
/* The records a lease set's group has: one per slot, or the one record of
** a counted set. */
static inline int sluice__lease_nkeys(const sluice_lease_params *p) {
  return p->max > SLUICE_GROUP_MAX ? 1 : (int)p->max;
}
int64_t sluice__distinct_expiry(const sluice_distinct_params *p,
                                const sluice_state *s);

/* A sliding window record rolled to `now` (window.c): the current aligned
** window's start and both counts; *now is held at the start when the clock
** went back.  The ADJUST step (adjust.c) rolls as the counting step does. */
typedef struct sluice__swin {
  int64_t start;
  uint64_t cur, prev;
} sluice__swin;
void sluice__swin_roll(const sluice_window_params *p, const sluice_state *s,
                       int64_t *now, sluice__swin *w);
/* A fixed window record rolled to `now`: the current window's start and
** count (0 when it moved on); *now held at the start when the clock went
** back, so that a window never reopens early. */
static inline void sluice__fwin_roll(const sluice_window_params *p,
                                     const sluice_state *s, int64_t *now,
                                     int64_t *start, uint64_t *count) {
  int64_t ws = sluice__window_start(*now, p->window_ns);
  *start = (int64_t)s->w[0];
  *count = s->w[1];
  if (*count == 0) {
    *start = ws;
  } else if (ws < *start) {
    *now = *start;
  } else if (ws > *start) {
    *start = ws;
    *count = 0;
  }
}
/* A fixed window's verdict fields for its count after a step. */
static inline void sluice__fwin_verdict(const sluice_window_params *p,
                                        int64_t start, uint64_t count,
                                        int64_t now, sluice_verdict *v) {
  v->limit = p->limit;
  v->remaining = count >= (uint64_t)p->limit ? 0 : p->limit - (int64_t)count;
  if (count > 0)
    v->reset_ns = sluice__clamp64((sluice__i128)start + p->window_ns - now);
}
/* The ADJUST kind of GCRA and the windows over a validated op (adjust.c). */
SLUICE__RUN_DECL(adjust);

#endif

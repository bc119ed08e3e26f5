/*
** GCRA, cost-weighted: the generic cell rate algorithm of ATM traffic
** shaping (ITU-T I.371), used here as an exact token bucket.
**
** A bucket of `burst` points refills at `rate` points per `period_ns`.  GCRA
** keeps one number instead of (tokens, last refill): the theoretical arrival
** time TAT, the instant at which the bucket would be full again.  With the
** emission interval T = period/rate and tolerance tau = burst * T:
**
**     tokens(now) = burst - max(0, TAT - now) / T
**     admit cost c  <=>  max(TAT, now) + c*T - now <= tau
**     on admit      TAT := max(TAT, now) + c*T
**
** which is the spec's token bucket (section 6) step for step: a fresh key has
** TAT <= now, so it starts full; refill is continuous; a denial changes
** nothing.  T is rarely a whole number of ns (7 points/s), so every quantity
** is scaled by `rate`: TAT*rate = tat_ns*rate + frac is exact, one point is
** exactly `period_ns` scaled units and tau is burst*period_ns.  Products go
** through 128-bit arithmetic, so nothing overflows for any valid parameters
** and any int64 `now`.
**
** Deviations from the spec's Lua:
**  a) Retry-After and reset are exact ns (the HTTP layer rounds up to
**     seconds), not ceil'd seconds computed in floating point.
**  b) A denial does not rewrite the record; the spec persists the refill,
**     which is the same bucket, written.
**  c) If the clock goes backwards, max(TAT, now) keeps the charge already
**     made: the bucket looks emptier, never fuller, so nothing is refunded.
**  d) Group form: n buckets (tenant + key) are charged together or not at
**     all; the one with the fewest points left is "binding" for headers.
*/
#include "algo_int.h"
#include "job.h"

int sluice__gcra_params_check(const sluice_gcra_params *p) {
  return p && sluice__gcra_params_ok(p) ? SLUICE_OK : SLUICE_EINVAL;
}

/* The TAT is unsigned: a charge made near now = INT64_MAX puts it past
** INT64_MAX (by at most tau + one cost), and clamping it there would hand
** the points back. */
static sluice__i128 tat_scaled(const sluice_gcra_params *p,
                               const sluice_state *s) {
  return (sluice__i128)s->w[0] * p->rate + (sluice__i128)s->w[1];
}

/* Inline in a one-step program's frame; sluice__gcra_expiry() for the rest. */
static inline int64_t gcra_expiry(const sluice_gcra_params *p,
                                  const sluice_state *s) {
  sluice__i128 t;
  /* A canonical record (fraction below the rate) needs no division: the
  ** ceiling of (w0 * rate + w1) / rate is w0, plus one for a fraction. */
  if (s->w[1] < (uint64_t)p->rate) {
    if (s->w[0] >= (uint64_t)INT64_MAX)
      return INT64_MAX;
    return (int64_t)s->w[0] + (s->w[1] != 0);
  }
  t = tat_scaled(p, s);
  if (t <= 0)
    return 0;
  return sluice__clamp64(sluice__ceildiv(t, p->rate));
}

int64_t sluice__gcra_expiry(const sluice_gcra_params *p, const sluice_state *s) {
  return gcra_expiry(p, s);
}

/* The write took post - max(pre, now) (the charge; the idle credit it used
** is not ours to give back).  Others' admissions since added to it; taking
** the charge back out gives the TAT they would have left without it as
** long as each of them saw a bucket in debt (TAT >= its now), which a
** contended bucket is.  A later admission that found the bucket idle would
** make the exact refund smaller by the time between our `now` and its own:
** the clock reads of decisions racing within one rollback, microseconds. */
SLUICE__UNDO_DECL(gcra, sluice_gcra_params) {
  sluice__i128 a = tat_scaled(p, pre), b = tat_scaled(p, post);
  sluice__i128 c = tat_scaled(p, cur), n = (sluice__i128)now * p->rate, q;
  sluice__i128 charge = b - (a > n ? a : n);
  if (b < a) {
    /* A refund (ADJUST): put it back, unless the record went below what
    ** the refund left (reset, or refunded again since). */
    if (c < b)
      return 0;
    charge = b - a;
  } else if (charge <= 0 || c < b) {
    return 0; /* nothing charged, or the record was reset since */
  }
  c -= charge;
  q = sluice__floordiv(c, p->rate);
  out->w[0] = (uint64_t)q;
  out->w[1] = (uint64_t)(c - q * p->rate);
  return 1;
}

/* One bucket's view at `now` for a charge of `cost`.  Only what decides
** the verdict is computed up front; the counts and times for the headers
** cost a division each and are worked out for the binding bucket alone. */
typedef struct gcra_eval {
  sluice__i128 now_s; /* now, scaled */
  sluice__i128 tau;   /* burst, scaled */
  sluice__i128 base;  /* max(TAT, now), scaled */
  sluice__i128 next;  /* base + cost, scaled */
  int fits;
  int64_t retry_ns;
} gcra_eval;

static void gcra_eval_one(const sluice_gcra_params *p, const sluice_state *s,
                          int64_t now, int64_t cost, gcra_eval *e) {
  sluice__i128 tat = tat_scaled(p, s);
  e->now_s = (sluice__i128)now * p->rate;
  e->tau = (sluice__i128)p->burst * p->period_ns;
  e->base = tat > e->now_s ? tat : e->now_s;
  e->next = e->base + (sluice__i128)cost * p->period_ns;
  e->fits = (e->next - e->now_s) <= e->tau;
  e->retry_ns = e->fits ? 0
                        : sluice__clamp64(sluice__ceildiv(
                              e->next - e->now_s - e->tau, p->rate));
}

/* Whole points left once the bucket's TAT is `tat` (scaled). */
static int64_t gcra_points(const sluice_gcra_params *p, const gcra_eval *e,
                           sluice__i128 tat) {
  sluice__i128 rem = sluice__floordiv(e->tau - (tat - e->now_s), p->period_ns);
  return rem < 0 ? 0 : sluice__clamp64(rem);
}

/* ns until the bucket is full again once its TAT is `tat` (scaled). */
static int64_t gcra_full_in(const sluice_gcra_params *p, const gcra_eval *e,
                            sluice__i128 tat) {
  return sluice__clamp64(sluice__ceildiv(tat - e->now_s, p->rate));
}

/* The group step below for one bucket, with the loops and the choice of
** the binding bucket taken out: most decisions are single-bucket, and the
** group form's arrays and loops are a visible share of a single bucket's
** decision (bench/shm's hot key).  tests/unit/test_gcra.c checks that both
** give the same verdicts. */
#if defined(__GNUC__)
__attribute__((noinline)) /* rare: kept out of the int64 path's frame */
#endif
static int gcra_single128(const sluice_gcra_params *p, int kind, int64_t cost,
                          const sluice_state *in, sluice_state *out,
                          int64_t now, sluice_verdict *v) {
  gcra_eval e;
  sluice__i128 tat;
  int consumed;
  gcra_eval_one(p, in, now, cost, &e);
  consumed = e.fits && kind == SLUICE_OP_CONSUME;
  if (consumed && cost > 0) {
    sluice__i128 q = sluice__floordiv(e.next, p->rate);
    out->w[0] = (uint64_t)q;
    out->w[1] = (uint64_t)(e.next - q * p->rate);
  } else {
    *out = *in;
  }
  tat = consumed ? e.next : e.base;
  v->allowed = e.fits;
  v->binding = 0;
  v->limit = p->burst;
  v->remaining = gcra_points(p, &e, tat);
  v->reset_ns = gcra_full_in(p, &e, tat);
  v->retry_after_ns = e.retry_ns;
  return SLUICE_OK;
}

static inline int64_t floordiv64(int64_t n, int64_t d) {
  int64_t q = n / d;
  return (n % d != 0 && n < 0) ? q - 1 : q;
}
static inline int64_t ceildiv64(int64_t n, int64_t d) {
  int64_t q = n / d;
  return (n % d != 0 && n > 0) ? q + 1 : q;
}

/* gcra_single128() in int64, for when every intermediate fits: the usual
** case, where the 128-bit multiplies, compares and clamps are overhead.
** Absolute scaled times do not fit (a wall-clock now of 1.7e18 ns times a
** rate of 100 is past 2^63), so everything is taken relative to now: with
** d = TAT - now (scaled) = (w0 - now) * rate + w1, the step needs only
** max(d, 0), the charge and tau, and the new record is now + the whole
** intervals of the new d, plus its remainder.  Each product and sum is
** checked; the first that would overflow hands the whole step back (returns
** 0) to the 128-bit path.  The results equal the 128-bit path's by the
** identities above; tests/unit/test_gcra_fast.c and fuzz/fuzz_algo.c (g)
** compare the two.  Every result is in int64 range: nothing to clamp. */
#if defined(__GNUC__)
__attribute__((always_inline)) /* into the dispatch: no call, no spills */
#endif
static inline int gcra_single64(const sluice_gcra_params *p, int kind,
                                int64_t cost, const sluice_state *in,
                                sluice_state *out, int64_t now,
                                sluice_verdict *v) {
  int64_t d, charge, ahead, span, tau, tat_v, rem;
  int fits, consumed;
  if (in->w[0] > (uint64_t)INT64_MAX || in->w[1] > (uint64_t)INT64_MAX)
    return 0;
  if (__builtin_sub_overflow((int64_t)in->w[0], now, &d) ||
      __builtin_mul_overflow(cost, p->period_ns, &charge))
    return 0;
  if (__builtin_mul_overflow(d, p->rate, &d)) {
    /* A TAT far behind now (a zeroed record is 1970): d * rate < -2^63
    ** and w1 < 2^63, so TAT < now, which is all the step needs of d. */
    if ((int64_t)in->w[0] > now)
      return 0;
    ahead = 0;
  } else {
    if (__builtin_add_overflow(d, (int64_t)in->w[1], &d))
      return 0;
    ahead = d > 0 ? d : 0; /* max(TAT, now) - now, scaled */
  }
  if (__builtin_add_overflow(ahead, charge, &span))
    return 0;
  tau = p->burst * p->period_ns; /* <= 2^62: sluice__gcra_params_check */
  fits = span <= tau;
  consumed = fits && kind == SLUICE_OP_CONSUME;
  tat_v = consumed ? span : ahead; /* the TAT after the step - now, >= 0 */
  /* One division by the rate serves the new record and the reset time:
  ** tat_v >= 0, so its floor is q and its ceiling q plus one for a
  ** remainder (an idiv is most of this step's time). */
  {
    int64_t q = tat_v / p->rate, r = tat_v - q * p->rate;
    if (consumed && cost > 0) {
      /* The 128-bit path stores floor((now*rate + span) / rate) cast to
      ** uint64, which is now + q modulo 2^64. */
      out->w[0] = (uint64_t)now + (uint64_t)q;
      out->w[1] = (uint64_t)r;
    } else {
      *out = *in;
    }
    v->reset_ns = q + (r != 0);
  }
  rem = floordiv64(tau - tat_v, p->period_ns);
  v->allowed = fits;
  v->binding = 0;
  v->limit = p->burst;
  v->remaining = rem < 0 ? 0 : rem;
  v->retry_after_ns = fits ? 0 : ceildiv64(span - tau, p->rate);
  return 1;
}

int sluice__gcra_force_wide;

int sluice__gcra_single_path(int path, const sluice_gcra_params *p, int kind,
                             int64_t cost, const sluice_state *in,
                             sluice_state *out, int64_t now,
                             sluice_verdict *v) {
  if (path == SLUICE__GCRA_PATH_64)
    return gcra_single64(p, kind, cost, in, out, now, v) ? 1 : 0;
  gcra_single128(p, kind, cost, in, out, now, v);
  return 1;
}

#if defined(__GNUC__)
__attribute__((always_inline)) /* into a one-step program's frame too */
#endif
static inline int gcra_single(const sluice_gcra_params *p, int kind,
                              int64_t cost, const sluice_state *in,
                              sluice_state *out, int64_t now,
                              sluice_verdict *v) {
  if (!sluice__gcra_force_wide && gcra_single64(p, kind, cost, in, out, now, v))
    return SLUICE_OK;
  return gcra_single128(p, kind, cost, in, out, now, v);
}

/* Out of line: its frame (an eval per bucket of the largest group) would
** otherwise be set up for every single-bucket step too. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int gcra_group_n(const sluice_op *op, const sluice_state *in,
                        sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_gcra_params *ps = (const sluice_gcra_params *)op->params;
  gcra_eval e[SLUICE_GROUP_MAX];
  int i, all = 1, b = 0;
  int64_t retry = 0, best = 0;

  if (op->nkeys < 1) /* validated ops never are; this tells the compiler */
    return SLUICE_EINVAL;
  for (i = 0; i < op->nkeys; i++) {
    gcra_eval_one(&ps[i], &in[i], now, op->arg, &e[i]);
    all &= e[i].fits;
    if (e[i].retry_ns > retry)
      retry = e[i].retry_ns;
  }
  /* The binding bucket: when admitted, the one left with the fewest points;
  ** when denied, the one that must wait longest. */
  if (op->nkeys > 1) {
    if (all)
      best = gcra_points(&ps[0], &e[0], e[0].next);
    for (i = 1; i < op->nkeys; i++) {
      if (all) {
        int64_t left = gcra_points(&ps[i], &e[i], e[i].next);
        if (left < best) {
          best = left;
          b = i;
        }
      } else if (e[i].retry_ns > e[b].retry_ns) {
        b = i;
      }
    }
  }
  for (i = 0; i < op->nkeys; i++) {
    if (all && op->kind == SLUICE_OP_CONSUME && op->arg > 0) {
      sluice__i128 q = sluice__floordiv(e[i].next, ps[i].rate);
      out[i].w[0] = (uint64_t)q; /* < INT64_MAX + 2^62: see tat_scaled */
      out[i].w[1] = (uint64_t)(e[i].next - q * ps[i].rate);
    } else {
      out[i] = in[i];
    }
  }
  v->allowed = all;
  v->binding = b;
  v->limit = ps[b].burst;
  if (all && op->kind == SLUICE_OP_CONSUME) {
    v->remaining = gcra_points(&ps[b], &e[b], e[b].next);
    v->reset_ns = gcra_full_in(&ps[b], &e[b], e[b].next);
  } else {
    v->remaining = gcra_points(&ps[b], &e[b], e[b].base);
    v->reset_ns = gcra_full_in(&ps[b], &e[b], e[b].base);
  }
  v->retry_after_ns = retry;
  return SLUICE_OK;
}

/* A single bucket may be stepped in place (in == out): both single paths
** read the record whole before they write it (sluice__op_step_validated()
** relies on this). */
int sluice__gcra_group(const sluice_op *op, const sluice_state *in,
                       sluice_state *out, int64_t now, sluice_verdict *v) {
  if (op->nkeys == 1)
    return gcra_single((const sluice_gcra_params *)op->params, op->kind,
                       op->arg, in, out, now, v);
  return gcra_group_n(op, in, out, now, v);
}

int sluice__gcra_one(const sluice_step *s, const sluice_state *in,
                     sluice_state *out, int64_t now, sluice_program_result *r,
                     int64_t *expiry) {
  const sluice_gcra_params *p = (const sluice_gcra_params *)s->params;
  sluice_verdict *v = &r->v[0];
  int passed;
  /* The fields a bucket's step leaves alone (it writes all the others). */
  v->flags = 0;
  v->level = 0;
  v->strikes_remaining = 0;
  v->offenses = 0;
  v->lease_id = 0;
  v->now_ns = now;
  gcra_single(p, s->kind, s->arg, in, out, now, v);
  /* The program's fold: a gate's denial denies it, and undoes nothing (a
  ** denied bucket was not written). */
  passed = v->allowed || s->fold != SLUICE_FOLD_GATE;
  r->allowed = passed;
  r->denied_by = -passed;
  r->ran = 1;
  r->now_ns = now;
  *expiry = gcra_expiry(p, out);
  return SLUICE_OK;
}

int sluice__gcra_step(const sluice_gcra_params *p, const sluice_state *in,
                     int64_t now_ns, int kind, int64_t cost, sluice_state *out,
                     sluice_verdict *v) {
  return sluice__step1(SLUICE_ALGO_GCRA, kind, p, cost, 0, in, now_ns, out, v);
}

/*
** Penalty ladder: strikes, offenses and the box (spec section 4).
**
** A strike is a request rejected for lack of tokens.  The first strike opens
** a strike window (the spec's INCR + EXPIRE-on-first); `strike_threshold`
** strikes inside it trip the box.  A trip counts an offense (offenses are
** forgotten offense_ttl after the last trip, the spec's 24 h counter), sets
** level = min(offenses, 3) and boxes the scope for box_ns[level-1].  While
** boxed, requests are turned away without counting anything, so a boxed
** client cannot climb further by hammering; it climbs on its next trip.
**
** The three of the spec's keys (box, strikes, offenses) live in one 16-byte
** record so that one compare-and-swap updates them together.  That forces
** millisecond times (44 bits each, good until the year 2527); the box end is
** derived as trip time + box_ns[level - 1] rather than stored.
**
** Deviations and choices:
**  a) TRIP with a minimum level escalates directly (credential stuffing goes
**     straight to level 3): offenses := max(offenses + 1, level).  A TRIP on
**     a scope already boxed at that level or higher changes nothing.
**  b) box_ns[i] = SLUICE_FOREVER is a suspension: only RELEASE ends it.
**  c) RELEASE (support's early release, or lifting a suspension) ends the
**     box but keeps the offense count, so the next trip still escalates.
**  d) A clock that steps back never shortens a box: box time left is
**     measured from max(now, trip time).
*/
#include "algo_int.h"

#define MS 1000000
#define M44 ((UINT64_C(1) << 44) - 1)
#define OFF_MAX 4095u
#define STRIKES_MAX ((1u << 20) - 1)

int sluice__penalty_params_check(const sluice_penalty_params *p) {
  int i;
  if (!p || p->strike_threshold < 1 || p->strike_threshold > STRIKES_MAX ||
      p->strike_window_ns < MS || p->strike_window_ns > SLUICE_DURATION_MAX ||
      p->offense_ttl_ns < MS || p->offense_ttl_ns > SLUICE_DURATION_MAX)
    return SLUICE_EINVAL;
  for (i = 0; i < 3; i++)
    if (p->box_ns[i] != SLUICE_FOREVER &&
        (p->box_ns[i] < MS || p->box_ns[i] > SLUICE_DURATION_MAX))
      return SLUICE_EINVAL;
  return SLUICE_OK;
}

typedef struct pen {
  int64_t trip_ms;   /* -1: never */
  unsigned off;      /* offenses as recorded at the last trip */
  int boxflag;
  int64_t ss_ms;     /* strike window start, -1: none */
  unsigned strikes;
} pen;

static void pen_decode(const sluice_state *s, pen *p) {
  p->trip_ms = (int64_t)(s->w[0] & M44) - 1;
  p->off = (unsigned)((s->w[0] >> 44) & 0xfff);
  p->boxflag = (int)((s->w[0] >> 56) & 1);
  p->ss_ms = (int64_t)(s->w[1] & M44) - 1;
  p->strikes = (unsigned)(s->w[1] >> 44);
}

static void pen_encode(const pen *p, sluice_state *s) {
  s->w[0] = ((uint64_t)(p->trip_ms + 1) & M44) | ((uint64_t)p->off << 44) |
            ((uint64_t)(p->boxflag & 1) << 56);
  s->w[1] = ((uint64_t)(p->ss_ms + 1) & M44) | ((uint64_t)p->strikes << 44);
}

/* ms (>= 0, up to 2^44) to ns, saturating: a record's 44-bit times reach
** past INT64_MAX ns (corrupt bytes, or a trip near the end of time). */
static int64_t ms_ns(int64_t ms) {
  return ms > INT64_MAX / MS ? INT64_MAX : ms * MS;
}

static int level_of(unsigned off) { return off >= 3 ? 3 : (int)off; }

/* End of the box in ns (SLUICE_FOREVER for a suspension), or -1 if none. */
static int64_t box_end(const sluice_penalty_params *pp, const pen *p) {
  int64_t d;
  if (!p->boxflag || p->trip_ms < 0 || p->off == 0)
    return -1;
  d = pp->box_ns[level_of(p->off) - 1];
  if (d == SLUICE_FOREVER)
    return SLUICE_FOREVER;
  return sluice__sat_add(ms_ns(p->trip_ms), d);
}

static int is_boxed(const sluice_penalty_params *pp, const pen *p,
                    int64_t now) {
  int64_t e = box_end(pp, p);
  return e == SLUICE_FOREVER || (e >= 0 && now < e);
}

static unsigned live_offenses(const sluice_penalty_params *pp, const pen *p,
                              int64_t now) {
  if (p->off == 0 || p->trip_ms < 0)
    return 0;
  return now < sluice__sat_add(ms_ns(p->trip_ms), pp->offense_ttl_ns) ? p->off
                                                                     : 0;
}

static unsigned live_strikes(const sluice_penalty_params *pp, const pen *p,
                             int64_t now) {
  if (p->strikes == 0 || p->ss_ms < 0)
    return 0;
  return now < sluice__sat_add(ms_ns(p->ss_ms), pp->strike_window_ns)
             ? p->strikes
             : 0;
}

int64_t sluice__penalty_expiry(const sluice_penalty_params *pp,
                               const sluice_state *s) {
  pen p;
  int64_t e = 0, t;
  pen_decode(s, &p);
  t = box_end(pp, &p);
  if (t > e)
    e = t;
  if (p.off > 0 && p.trip_ms >= 0) {
    t = sluice__sat_add(ms_ns(p.trip_ms), pp->offense_ttl_ns);
    if (t > e)
      e = t;
  }
  if (p.strikes > 0 && p.ss_ms >= 0) {
    t = sluice__sat_add(ms_ns(p.ss_ms), pp->strike_window_ns);
    if (t > e)
      e = t;
  }
  return e;
}

static void trip(pen *p, int64_t now_ms, unsigned live_off, int min_level) {
  unsigned off = live_off + 1;
  if (off < (unsigned)min_level)
    off = (unsigned)min_level;
  p->off = off > OFF_MAX ? OFF_MAX : off;
  p->trip_ms = now_ms;
  p->boxflag = 1;
  p->strikes = 0;
  p->ss_ms = -1;
}

int sluice__penalty_run(const sluice_op *op, const sluice_state *in,
                        sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_penalty_params *pp = (const sluice_penalty_params *)op->params;
  int64_t now_ms = now / MS;
  pen p;
  int boxed, changed = 0;
  unsigned strikes;

  pen_decode(in, &p);
  boxed = is_boxed(pp, &p, now);
  /* Canonical form: forget the parts that no longer count (an ended box, a
  ** forgotten offense, a lapsed strike window), so that whatever this step
  ** writes is the same as if the record had been reclaimed when it last
  ** expired.  Verdicts do not change: they only read the live parts. */
  if (!boxed) {
    p.boxflag = 0;
    if (live_offenses(pp, &p, now) == 0) {
      p.off = 0;
      p.trip_ms = -1;
    }
  }
  if (live_strikes(pp, &p, now) == 0) {
    p.strikes = 0;
    p.ss_ms = -1;
  }
  /* Clock went backwards: never act before the trip.  Only a trip that
  ** still counts holds the clock: a dead one was just forgotten above, as
  ** it would have been had the record been reclaimed. */
  if (p.trip_ms >= 0 && now_ms < p.trip_ms)
    now_ms = p.trip_ms;

  switch (op->kind) {
  case SLUICE_OP_STRIKE:
    if (boxed)
      break;
    strikes = live_strikes(pp, &p, now);
    if (strikes == 0)
      p.ss_ms = now_ms;
    strikes++;
    if (strikes >= (unsigned)pp->strike_threshold) {
      trip(&p, now_ms, live_offenses(pp, &p, now), 1);
      v->flags |= SLUICE_V_TRIPPED;
    } else {
      p.strikes = strikes;
    }
    changed = 1;
    break;
  case SLUICE_OP_TRIP:
    if (boxed && level_of(p.off) >= op->arg)
      break;
    trip(&p, now_ms, live_offenses(pp, &p, now), (int)op->arg);
    v->flags |= SLUICE_V_TRIPPED;
    changed = 1;
    break;
  case SLUICE_OP_RELEASE:
    if (boxed) {
      p.boxflag = 0;
      changed = 1;
    }
    break;
  default: /* SLUICE_OP_CHECK */
    break;
  }
  if (changed)
    pen_encode(&p, out);
  else
    *out = *in;

  boxed = is_boxed(pp, &p, now);
  v->allowed = !boxed;
  v->limit = pp->strike_threshold;
  v->offenses = live_offenses(pp, &p, now);
  if (boxed) {
    int64_t end = box_end(pp, &p);
    int64_t from = now > ms_ns(p.trip_ms) ? now : ms_ns(p.trip_ms);
    v->level = level_of(p.off);
    if (end == SLUICE_FOREVER) {
      v->flags |= SLUICE_V_SUSPENDED;
      v->retry_after_ns = SLUICE_FOREVER;
    } else {
      v->retry_after_ns = end - from;
    }
    v->reset_ns = v->retry_after_ns;
    v->strikes_remaining = 0;
  } else {
    strikes = live_strikes(pp, &p, now);
    /* A record can hold more strikes than the threshold when the threshold
    ** was lowered since it was written (or the bytes are corrupt). */
    v->strikes_remaining = (int64_t)strikes >= pp->strike_threshold
                               ? 0
                               : pp->strike_threshold - (int64_t)strikes;
    if (strikes > 0)
      v->reset_ns = sluice__sat_add(ms_ns(p.ss_ms), pp->strike_window_ns) - now;
  }
  v->remaining = v->strikes_remaining;
  return SLUICE_OK;
}

int sluice__penalty_step(const sluice_penalty_params *p, const sluice_state *in,
                        int64_t now_ns, int kind, int64_t min_level,
                        sluice_state *out, sluice_verdict *v) {
  return sluice__step1(SLUICE_ALGO_PENALTY, kind, p, min_level, 0, in, now_ns,
                       out, v);
}

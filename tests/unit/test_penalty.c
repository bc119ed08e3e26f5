/*
** Penalty ladder (spec section 4 and the Lua of section 6): strikes in a
** strike window opened by the first strike, the threshold trip, the offense
** counter kept offense_ttl from the last trip, level = min(offenses, 3), box
** durations per level, no strikes while boxed, TRIP with a minimum level,
** RELEASE keeping offenses, SLUICE_FOREVER suspension, verdict fields.
*/
#include "unit.h"
#include "op.h"

/* The growth tier: 20 strikes in 60 s; L1 5 min, L2 60 min, L3 suspension;
** offenses kept 24 h. */
static const sluice_penalty_params growth = {
    20, 60 * SEC, {5 * MIN, 60 * MIN, SLUICE_FOREVER}, 24 * HOUR};
/* IP bans: L3 is 24 h instead of a suspension. */
static const sluice_penalty_params ipban = {
    3, 60 * SEC, {5 * MIN, 60 * MIN, 24 * HOUR}, 24 * HOUR};

static int pen(const sluice_penalty_params *p, sluice_state *s, int64_t now,
               int kind, int64_t arg, sluice_verdict *v) {
  sluice_state out;
  int rc = sluice__penalty_step(p, s, now, kind, arg, &out, v);
  cr_assert_eq(rc, SLUICE_OK, "penalty step: %s", sluice_err_name(rc));
  *s = out;
  return v->allowed;
}

static int64_t expiry(const sluice_penalty_params *p, const sluice_state *s) {
  sluice_op op = {SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 1, &KEY("k"), p, 0, 0};
  return sluice__op_expiry(&op, 0, s);
}

/* Strike until the box trips; returns the time of the tripping strike. */
static int64_t trip_by_strikes(const sluice_penalty_params *p, sluice_state *s,
                               int64_t t, sluice_verdict *v) {
  int64_t i;
  for (i = 1; i < p->strike_threshold; i++)
    cr_assert(pen(p, s, t, SLUICE_OP_STRIKE, 0, v), "strike %lld", (long long)i);
  pen(p, s, t, SLUICE_OP_STRIKE, 0, v);
  cr_assert(v->flags & SLUICE_V_TRIPPED);
  return t;
}

Test(penalty, fresh_scope_is_clear) {
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert(pen(&growth, &s, 1000 * SEC, SLUICE_OP_CHECK, 0, &v));
  cr_assert_eq(v.level, 0);
  cr_assert_eq(v.strikes_remaining, 20);
  cr_assert_eq(v.remaining, 20);
  cr_assert_eq(v.limit, 20);
  cr_assert_eq(v.offenses, 0);
  cr_assert_eq(v.retry_after_ns, 0);
  cr_assert_eq(v.reset_ns, 0);
  cr_assert_eq(v.flags, 0);
  cr_assert(st_eq(&s, &(sluice_state){{0, 0}}), "CHECK wrote to a fresh record");
  cr_assert_eq(expiry(&growth, &s), 0);
}

Test(penalty, strikes_count_down_then_trip_level_1) {
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t0 = 3600 * SEC;
  int i;
  for (i = 1; i <= 19; i++) {
    int64_t t = t0 + i * SEC;
    cr_assert(pen(&growth, &s, t, SLUICE_OP_STRIKE, 0, &v));
    cr_assert_eq(v.strikes_remaining, 20 - i);
    cr_assert_eq(v.remaining, 20 - i);
    cr_assert_eq(v.level, 0);
    cr_assert_eq(v.flags, 0);
    /* The window opened at the first strike (t0 + 1 s). */
    cr_assert_eq(v.reset_ns, t0 + SEC + 60 * SEC - t);
  }
  pen(&growth, &s, t0 + 20 * SEC, SLUICE_OP_STRIKE, 0, &v);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.flags, SLUICE_V_TRIPPED);
  cr_assert_eq(v.level, 1);
  cr_assert_eq(v.offenses, 1);
  cr_assert_eq(v.retry_after_ns, 5 * MIN);
  cr_assert_eq(v.reset_ns, 5 * MIN);
  cr_assert_eq(v.strikes_remaining, 0);
  cr_assert_eq(v.remaining, 0);
  /* The record lives as long as the offense counter. */
  cr_assert_eq(expiry(&growth, &s), t0 + 20 * SEC + 24 * HOUR);
}

Test(penalty, strike_window_is_counted_from_the_first_strike) {
  sluice_state s = zst(), s2;
  sluice_verdict v;
  int64_t t0 = 10 * SEC;
  int i;
  for (i = 0; i < 19; i++)
    cr_assert(pen(&growth, &s, t0 + i * SEC, SLUICE_OP_STRIKE, 0, &v));
  /* 1 ns before the window closes the 20th strike trips ... */
  s2 = s;
  pen(&growth, &s2, t0 + 60 * SEC - 1, SLUICE_OP_STRIKE, 0, &v);
  cr_assert(v.flags & SLUICE_V_TRIPPED);
  /* ... at the close it opens a new window instead, though 18 of the 19
  ** were recent (the spec's INCR + EXPIRE on the first strike). */
  pen(&growth, &s, t0 + 60 * SEC, SLUICE_OP_STRIKE, 0, &v);
  cr_assert(v.allowed);
  cr_assert_eq(v.flags, 0);
  cr_assert_eq(v.strikes_remaining, 19);
  cr_assert_eq(v.reset_ns, 60 * SEC);
  cr_assert(pen(&growth, &s, t0 + 60 * SEC, SLUICE_OP_CHECK, 0, &v));
  cr_assert_eq(v.strikes_remaining, 19);
}

Test(penalty, boxed_scope_counts_no_strikes) {
  sluice_state s = zst(), boxed;
  sluice_verdict v;
  int64_t t = trip_by_strikes(&growth, &s, 100 * SEC, &v);
  int i;
  boxed = s;
  for (i = 0; i < 100; i++) {
    pen(&growth, &s, t + i * SEC, SLUICE_OP_STRIKE, 0, &v);
    cr_assert_eq(v.allowed, 0);
    cr_assert_eq(v.flags, 0, "no new trip while boxed");
    cr_assert_eq(v.level, 1);
    cr_assert_eq(v.retry_after_ns, 5 * MIN - i * SEC, "time left in box");
    cr_assert_eq(v.strikes_remaining, 0);
    cr_assert(st_eq(&s, &boxed), "a boxed STRIKE changed the record");
  }
  /* The box ends exactly 5 min after the trip; the strike count restarted. */
  pen(&growth, &s, t + 5 * MIN - 1, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.retry_after_ns, 1);
  pen(&growth, &s, t + 5 * MIN, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.allowed, 1);
  cr_assert_eq(v.level, 0);
  cr_assert_eq(v.offenses, 1);
  cr_assert_eq(v.strikes_remaining, 20);
}

Test(penalty, ladder_levels_and_durations) {
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = trip_by_strikes(&growth, &s, 1000 * SEC, &v);
  cr_assert_eq(v.level, 1);
  cr_assert_eq(v.retry_after_ns, 5 * MIN);
  t = trip_by_strikes(&growth, &s, t + 5 * MIN, &v);
  cr_assert_eq(v.level, 2);
  cr_assert_eq(v.offenses, 2);
  cr_assert_eq(v.retry_after_ns, 60 * MIN);
  cr_assert_eq(v.flags, SLUICE_V_TRIPPED);
  pen(&growth, &s, t + 60 * MIN - MS, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.retry_after_ns, MS);
  t = trip_by_strikes(&growth, &s, t + 60 * MIN, &v);
  cr_assert_eq(v.level, 3);
  cr_assert_eq(v.offenses, 3);
  cr_assert_eq(v.retry_after_ns, SLUICE_FOREVER);
  cr_assert_eq(v.reset_ns, SLUICE_FOREVER);
  cr_assert_eq(v.flags, SLUICE_V_TRIPPED | SLUICE_V_SUSPENDED);
  cr_assert_eq(expiry(&growth, &s), SLUICE_FOREVER);
  /* A suspension outlives the offense counter and any amount of time. */
  pen(&growth, &s, t + 100 * 365 * 24 * HOUR, SLUICE_OP_STRIKE, 0, &v);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.level, 3);
  cr_assert_eq(v.flags, SLUICE_V_SUSPENDED);
  cr_assert_eq(v.retry_after_ns, SLUICE_FOREVER);
}

Test(penalty, level_is_min_offenses_3) {
  /* With a finite L3 box, further trips stay at level 3 with the L3 box
  ** (offenses kept 48 h here so that the 24 h L3 box does not outlast them). */
  sluice_penalty_params p = ipban;
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = 5 * SEC;
  int k;
  p.offense_ttl_ns = 48 * HOUR;
  for (k = 1; k <= 6; k++) {
    t = trip_by_strikes(&p, &s, t, &v);
    cr_assert_eq(v.offenses, k);
    cr_assert_eq(v.level, k < 3 ? k : 3);
    cr_assert_eq(v.retry_after_ns, p.box_ns[(k < 3 ? k : 3) - 1]);
    t += v.retry_after_ns;
  }
}

Test(penalty, offenses_kept_24h_from_last_trip) {
  sluice_state s = zst(), a, b;
  sluice_verdict v;
  int64_t t1 = 1000 * SEC, t2;
  trip_by_strikes(&growth, &s, t1, &v);
  t2 = t1 + 23 * HOUR;
  trip_by_strikes(&growth, &s, t2, &v);
  cr_assert_eq(v.level, 2, "second trip within 24 h of the first");
  cr_assert_eq(expiry(&growth, &s), t2 + 24 * HOUR);
  /* Counted from the last trip (t2), not the first. */
  a = s;
  pen(&growth, &a, t2 + 24 * HOUR - 1, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.offenses, 2);
  pen(&growth, &a, t2 + 24 * HOUR - 1, SLUICE_OP_TRIP, 1, &v);
  cr_assert_eq(v.level, 3);
  b = s;
  pen(&growth, &b, t2 + 24 * HOUR, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.offenses, 0);
  cr_assert(v.allowed);
  pen(&growth, &b, t2 + 24 * HOUR, SLUICE_OP_TRIP, 1, &v);
  cr_assert_eq(v.level, 1, "offenses forgotten 24 h after the last trip");
  cr_assert_eq(v.offenses, 1);
  cr_assert_eq(v.retry_after_ns, 5 * MIN);
}

Test(penalty, trip_with_minimum_level) {
  sluice_state s = zst(), before;
  sluice_verdict v;
  int64_t t = 50 * SEC;
  /* Credential stuffing: straight to level 3. */
  pen(&growth, &s, t, SLUICE_OP_TRIP, 3, &v);
  cr_assert_eq(v.level, 3);
  cr_assert_eq(v.offenses, 3);
  cr_assert_eq(v.flags, SLUICE_V_TRIPPED | SLUICE_V_SUSPENDED);
  /* Level 2 minimum on a fresh scope. */
  s = zst();
  pen(&growth, &s, t, SLUICE_OP_TRIP, 2, &v);
  cr_assert_eq(v.level, 2);
  cr_assert_eq(v.retry_after_ns, 60 * MIN);
  /* A TRIP at or below the current level changes nothing. */
  before = s;
  pen(&growth, &s, t + SEC, SLUICE_OP_TRIP, 1, &v);
  cr_assert(st_eq(&s, &before));
  cr_assert_eq(v.flags, 0);
  cr_assert_eq(v.level, 2);
  cr_assert_eq(v.retry_after_ns, 60 * MIN - SEC);
  pen(&growth, &s, t + SEC, SLUICE_OP_TRIP, 2, &v);
  cr_assert(st_eq(&s, &before));
  /* Above it escalates at once. */
  pen(&growth, &s, t + 2 * SEC, SLUICE_OP_TRIP, 3, &v);
  cr_assert_eq(v.level, 3);
  cr_assert_eq(v.flags, SLUICE_V_TRIPPED | SLUICE_V_SUSPENDED);
  /* TRIP(1) on a level-1 box is a no-op, on an expired box a new trip. */
  s = zst();
  pen(&growth, &s, t, SLUICE_OP_TRIP, 1, &v);
  cr_assert_eq(v.level, 1);
  before = s;
  pen(&growth, &s, t + MIN, SLUICE_OP_TRIP, 1, &v);
  cr_assert(st_eq(&s, &before));
  pen(&growth, &s, t + 5 * MIN, SLUICE_OP_TRIP, 1, &v);
  cr_assert_eq(v.level, 2);
  cr_assert_eq(v.flags, SLUICE_V_TRIPPED);
}

Test(penalty, release_keeps_offenses) {
  sluice_state s = zst(), before;
  sluice_verdict v;
  int64_t t = trip_by_strikes(&growth, &s, 77 * SEC, &v);
  pen(&growth, &s, t + MIN, SLUICE_OP_RELEASE, 0, &v);
  cr_assert_eq(v.allowed, 1);
  cr_assert_eq(v.level, 0);
  cr_assert_eq(v.offenses, 1);
  cr_assert_eq(v.retry_after_ns, 0);
  cr_assert_eq(v.strikes_remaining, 20);
  /* RELEASE on a clear scope changes nothing. */
  before = s;
  pen(&growth, &s, t + MIN, SLUICE_OP_RELEASE, 0, &v);
  cr_assert(st_eq(&s, &before));
  /* Strikes count again; the next trip escalates to level 2. */
  trip_by_strikes(&growth, &s, t + 2 * MIN, &v);
  cr_assert_eq(v.level, 2);
}

Test(penalty, release_lifts_a_suspension) {
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = 9 * SEC;
  pen(&growth, &s, t, SLUICE_OP_TRIP, 3, &v);
  cr_assert_eq(expiry(&growth, &s), SLUICE_FOREVER);
  pen(&growth, &s, t + 48 * HOUR, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.allowed, 0);
  pen(&growth, &s, t + 48 * HOUR, SLUICE_OP_RELEASE, 0, &v);
  cr_assert_eq(v.allowed, 1);
  cr_assert_eq(v.flags, 0);
  cr_assert_lt(expiry(&growth, &s), SLUICE_FOREVER);
  /* Released within 24 h of the trip: offenses kept, the next is L3 again. */
  s = zst();
  pen(&growth, &s, t, SLUICE_OP_TRIP, 3, &v);
  pen(&growth, &s, t + HOUR, SLUICE_OP_RELEASE, 0, &v);
  cr_assert_eq(v.offenses, 3);
  cr_assert_eq(expiry(&growth, &s), t + 24 * HOUR);
  trip_by_strikes(&growth, &s, t + 2 * HOUR, &v);
  cr_assert_eq(v.level, 3);
  cr_assert(v.flags & SLUICE_V_SUSPENDED);
}

Test(penalty, check_changes_nothing) {
  sluice_state s = zst(), before;
  sluice_verdict v;
  int i;
  for (i = 0; i < 5; i++)
    pen(&growth, &s, SEC, SLUICE_OP_STRIKE, 0, &v);
  before = s;
  pen(&growth, &s, 2 * SEC, SLUICE_OP_CHECK, 0, &v);
  cr_assert(st_eq(&s, &before));
  cr_assert_eq(v.strikes_remaining, 15);
  cr_assert_eq(v.reset_ns, 59 * SEC);
}

Test(penalty, threshold_one_trips_on_first_strike) {
  const sluice_penalty_params p = {1, SEC, {MS, MS, MS}, MS};
  sluice_state s = zst();
  sluice_verdict v;
  pen(&p, &s, 10 * MS, SLUICE_OP_STRIKE, 0, &v);
  cr_assert_eq(v.flags, SLUICE_V_TRIPPED);
  cr_assert_eq(v.retry_after_ns, MS);
  cr_assert(pen(&p, &s, 11 * MS, SLUICE_OP_CHECK, 0, &v));
  cr_assert_eq(v.offenses, 0, "offense ttl of 1 ms has passed");
}

Test(penalty, clock_backwards_never_shortens_the_box) {
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = trip_by_strikes(&growth, &s, HOUR, &v);
  pen(&growth, &s, t - 10 * MIN, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.retry_after_ns, 5 * MIN);
  pen(&growth, &s, t - 10 * MIN, SLUICE_OP_STRIKE, 0, &v);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.flags, 0);
  pen(&growth, &s, 0, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.offenses, 1);
}

Test(penalty, times_are_whole_milliseconds) {
  /* A trip at 1.5 ms is recorded at 1 ms: the box ends 1 ms + 5 min. */
  sluice_state s = zst();
  sluice_verdict v;
  pen(&growth, &s, 1500000, SLUICE_OP_TRIP, 1, &v);
  cr_assert_eq(v.retry_after_ns, MS + 5 * MIN - 1500000);
  pen(&growth, &s, MS + 5 * MIN - 1, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.allowed, 0);
  pen(&growth, &s, MS + 5 * MIN, SLUICE_OP_CHECK, 0, &v);
  cr_assert_eq(v.allowed, 1);
}

Test(penalty, offense_counter_saturates) {
  const sluice_penalty_params p = {1, SEC, {MS, MS, MS}, 365 * 24 * HOUR};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = SEC;
  int i;
  for (i = 0; i < 5000; i++) {
    pen(&p, &s, t, SLUICE_OP_TRIP, 1, &v);
    cr_assert_eq(v.level, 3 < i + 1 ? 3 : i + 1);
    t += MS;
  }
  cr_assert_eq(v.offenses, 4095, "offenses must saturate, not wrap");
  cr_assert_eq(v.level, 3);
}

Test(penalty, near_int64_max) {
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t = INT64_MAX - MIN;
  int64_t e;
  t = trip_by_strikes(&growth, &s, t, &v);
  cr_assert_eq(v.level, 1);
  cr_assert_eq(v.allowed, 0);
  cr_assert_geq(v.retry_after_ns, INT64_MAX - t, "box cut short");
  pen(&growth, &s, INT64_MAX, SLUICE_OP_STRIKE, 0, &v);
  cr_assert_eq(v.allowed, 0);
  e = expiry(&growth, &s);
  cr_assert_eq(e, INT64_MAX);
}

Test(penalty, validation) {
  static const sluice_penalty_params bad[] = {
      {0, SEC, {MS, MS, MS}, MS},
      {-1, SEC, {MS, MS, MS}, MS},
      {1 << 20, SEC, {MS, MS, MS}, MS},
      {1, MS - 1, {MS, MS, MS}, MS},
      {1, SLUICE_DURATION_MAX + 1, {MS, MS, MS}, MS},
      {1, SEC, {MS - 1, MS, MS}, MS},
      {1, SEC, {MS, 0, MS}, MS},
      {1, SEC, {MS, MS, -SEC}, MS},
      {1, SEC, {MS, MS, SLUICE_DURATION_MAX + 1}, MS},
      {1, SEC, {MS, MS, MS}, MS - 1},
      {1, SEC, {MS, MS, MS}, SLUICE_DURATION_MAX + 1},
  };
  static const sluice_penalty_params good[] = {
      {1, MS, {MS, MS, MS}, MS},
      {(1 << 20) - 1, SLUICE_DURATION_MAX,
       {SLUICE_FOREVER, SLUICE_FOREVER, SLUICE_FOREVER}, SLUICE_DURATION_MAX},
      {1, SEC, {SLUICE_DURATION_MAX, MS, MS}, MS},
  };
  sluice_state o;
  sluice_verdict v;
  size_t i;
  cr_assert_eq(sluice__penalty_params_check(NULL), SLUICE_EINVAL);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(sluice__penalty_params_check(&bad[i]), SLUICE_EINVAL, "bad %zu", i);
    cr_assert_eq(sluice__penalty_step(&bad[i], NULL, SEC, SLUICE_OP_CHECK, 0, &o,
                                     &v),
                 SLUICE_EINVAL);
  }
  for (i = 0; i < sizeof good / sizeof good[0]; i++)
    cr_assert_eq(sluice__penalty_params_check(&good[i]), SLUICE_OK, "good %zu", i);
#define RC(kind, arg) sluice__penalty_step(&growth, NULL, SEC, (kind), (arg), &o, &v)
  cr_assert_eq(RC(SLUICE_OP_TRIP, 0), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_TRIP, 4), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_TRIP, -1), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_TRIP, 3), SLUICE_OK);
  cr_assert_eq(RC(SLUICE_OP_CONSUME, 1), SLUICE_EINVAL);
  cr_assert_eq(RC(SLUICE_OP_ACQUIRE, 1), SLUICE_EINVAL);
  cr_assert_eq(RC(SLUICE_OP_RELEASE + 1, 1), SLUICE_EINVAL);
  cr_assert_eq(RC(SLUICE_OP_CHECK, 0), SLUICE_OK);
  cr_assert_eq(RC(SLUICE_OP_STRIKE, 0), SLUICE_OK);
#undef RC
  {
    const sluice_key ks[2] = {{"{a}1", 4}, {"{a}2", 4}};
    sluice_op op = {SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 2, ks, &growth, 0, 0};
    sluice_state in[2] = {{{0, 0}}, {{0, 0}}}, out[2];
    cr_assert_eq(sluice__op_step(&op, in, out, 0, &v), SLUICE_EINVAL);
  }
}

/* ---------------------------------------------------- reference model --- */

/* The spec's three keys (section 6 Lua), in ns, with the record's whole-ms
** times: box (value = level, TTL), strikes (INCR, EXPIRE on the first),
** offenses (INCR, EXPIRE offense_ttl on every trip). */
typedef struct pmodel {
  int boxed_flag;
  int64_t box_until; /* SLUICE_FOREVER for a suspension */
  int box_level;
  int64_t strikes, strikes_exp;
  int64_t offenses, off_exp;
} pmodel;

static int64_t floor_ms(int64_t t) { return t - t % MS; }

static int pm_boxed(const pmodel *m, int64_t now) {
  return m->boxed_flag && (m->box_until == SLUICE_FOREVER || now < m->box_until);
}

static int64_t pm_live_off(const pmodel *m, int64_t now) {
  return now < m->off_exp ? m->offenses : 0;
}

static void pm_trip(const sluice_penalty_params *p, pmodel *m, int64_t now,
                    int64_t min_level) {
  int64_t off = pm_live_off(m, now) + 1, d;
  if (off < min_level)
    off = min_level;
  if (off > 4095)
    off = 4095;
  m->offenses = off;
  m->off_exp = floor_ms(now) + p->offense_ttl_ns;
  m->box_level = off < 3 ? (int)off : 3;
  d = p->box_ns[m->box_level - 1];
  m->box_until = d == SLUICE_FOREVER ? SLUICE_FOREVER : floor_ms(now) + d;
  m->boxed_flag = 1;
  m->strikes = 0;
}

static void pm_step(const sluice_penalty_params *p, pmodel *m, int64_t now,
                    int kind, int64_t arg, sluice_verdict *ev) {
  int boxed = pm_boxed(m, now);
  memset(ev, 0, sizeof *ev);
  ev->now_ns = now;
  if (now >= m->strikes_exp)
    m->strikes = 0;
  switch (kind) {
  case SLUICE_OP_STRIKE:
    if (boxed)
      break;
    if (m->strikes == 0)
      m->strikes_exp = floor_ms(now) + p->strike_window_ns;
    if (++m->strikes >= p->strike_threshold) {
      pm_trip(p, m, now, 1);
      ev->flags |= SLUICE_V_TRIPPED;
    }
    break;
  case SLUICE_OP_TRIP:
    if (boxed && m->box_level >= arg)
      break;
    pm_trip(p, m, now, arg);
    ev->flags |= SLUICE_V_TRIPPED;
    break;
  case SLUICE_OP_RELEASE:
    m->boxed_flag = 0;
    break;
  default:
    break;
  }
  boxed = pm_boxed(m, now);
  ev->allowed = !boxed;
  ev->limit = p->strike_threshold;
  ev->offenses = pm_live_off(m, now);
  if (boxed) {
    ev->level = m->box_level;
    if (m->box_until == SLUICE_FOREVER) {
      ev->flags |= SLUICE_V_SUSPENDED;
      ev->retry_after_ns = SLUICE_FOREVER;
    } else {
      ev->retry_after_ns = m->box_until - now;
    }
    ev->reset_ns = ev->retry_after_ns;
  } else {
    int64_t live = now < m->strikes_exp ? m->strikes : 0;
    ev->strikes_remaining = p->strike_threshold - live;
    if (live > 0)
      ev->reset_ns = m->strikes_exp - now;
  }
  ev->remaining = ev->strikes_remaining;
}

Test(penalty, matches_spec_reference_model) {
  rng r = {0x9e11};
  int trial, steps = 0;
  for (trial = 0; trial < 200; trial++) {
    sluice_penalty_params p;
    pmodel m;
    sluice_state s = zst();
    int64_t t = rng_range(&r, 0, INT64_C(1) << 45);
    int i;
    p.strike_threshold = rng_range(&r, 1, 6);
    p.strike_window_ns = rng_range(&r, 1, 40) * MS + rng_range(&r, 0, MS - 1);
    for (i = 0; i < 3; i++)
      p.box_ns[i] = rng_range(&r, 0, 7) == 0
                        ? SLUICE_FOREVER
                        : rng_range(&r, 1, 60) * MS + rng_range(&r, 0, 999);
    p.offense_ttl_ns = rng_range(&r, 1, 300) * MS + rng_range(&r, 0, 999);
    memset(&m, 0, sizeof m);
    for (i = 0; i < 400; i++) {
      sluice_verdict v, ev;
      int64_t roll = rng_range(&r, 0, 39), arg = 0;
      int kind = roll < 30   ? SLUICE_OP_STRIKE
                 : roll < 34 ? SLUICE_OP_CHECK
                 : roll < 38 ? SLUICE_OP_TRIP
                             : SLUICE_OP_RELEASE;
      if (kind == SLUICE_OP_TRIP)
        arg = rng_range(&r, 1, 3);
      t += rng_range(&r, 0, 3) == 0 ? rng_range(&r, 0, 100 * MS)
                                    : rng_range(&r, 0, 2 * MS);
      pm_step(&p, &m, t, kind, arg, &ev);
      pen(&p, &s, t, kind, arg, &v);
      steps++;
      cr_assert(verdict_eq(&v, &ev),
                "trial %d step %d kind %d: allowed %d/%d level %d/%d off "
                "%lld/%lld strikes_rem %lld/%lld retry %lld/%lld reset "
                "%lld/%lld flags %u/%u",
                trial, i, kind, v.allowed, ev.allowed, v.level, ev.level,
                (long long)v.offenses, (long long)ev.offenses,
                (long long)v.strikes_remaining, (long long)ev.strikes_remaining,
                (long long)v.retry_after_ns, (long long)ev.retry_after_ns,
                (long long)v.reset_ns, (long long)ev.reset_ns, v.flags,
                ev.flags);
    }
  }
  cr_assert_eq(steps, 200 * 400);
}

/*
** The Lua port against the C steps: seeded random traces over every
** algorithm and op kind run on a "mem" store and on the Redis store in test
** clock mode, and every verdict, every record and every expiry must match
** field for field.  Times include today's (2^60 ns and more, where doubles
** are no longer exact), zero-based ones, steps backwards (which the limiter
** would clamp; the store must still agree with C), parameter changes on a
** live key, and values near the edges of the supported range.
*/
#include "redis_test.h"
#include "../common/one_step.h"
#include "../common/splitmix.h"
#include "../common/units.h"


typedef struct rng {
  uint64_t s;
} rng;

static uint64_t rnext(rng *r) {
  return splitmix64(&r->s);
}
static int64_t rrange(rng *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1;
  return lo + (int64_t)(rnext(r) % span);
}
/* Fixed seeds keep CI deterministic; SLUICE_PORT_SEED explores others. */
static rng seeded(uint64_t base) {
  const char *e = getenv("SLUICE_PORT_SEED");
  rng r = {base ^ (e ? strtoull(e, NULL, 10) : 0)};
  return r;
}

static int64_t pick(rng *r, const int64_t *a, int n) {
  return a[rnext(r) % (uint64_t)n];
}

/* SLUICE_PORT_ENGINES="lua,module": one Redis store per engine, taking
** turns call by call on the same keys (the script and the module must be
** interchangeable record for record); unset: one store. */
#define DUO_ENGINES 2
typedef struct duo {
  sluice_store *mem, *red;
  sluice_store *eng[DUO_ENGINES];
  int neng;
  long turn;
  long ops, allowed;
} duo;

static void duo_open(duo *d) {
  char err[128], extra[128];
  const char *e = getenv("SLUICE_PORT_ENGINES");
  memset(d, 0, sizeof *d);
  while (e && *e && d->neng < DUO_ENGINES) {
    size_t n = strcspn(e, ",");
    snprintf(extra, sizeof extra,
             "timeout_ms=2000;connect_timeout_ms=2000;engine=%.*s", (int)n, e);
    d->eng[d->neng++] =
        rt_store(extra, SLUICE_OPEN_CREATE | SLUICE_OPEN_TESTCLOCK);
    e += n + (e[n] == ',');
  }
  if (d->neng == 0)
    d->eng[d->neng++] = rt_store("timeout_ms=2000;connect_timeout_ms=2000",
                                 SLUICE_OPEN_CREATE | SLUICE_OPEN_TESTCLOCK);
  d->red = d->eng[0];
  cr_assert_eq(sluice_store_open(sluice_backend_find("mem"), "", NULL, 0,
                                  &d->mem, err, sizeof err),
               SLUICE_OK);
}

/* The Redis store of the next call. */
static void duo_turn(duo *d) {
  d->red = d->eng[d->turn++ % d->neng];
}
/* The records are read back through the other engine. */
static sluice_store *duo_reader(const duo *d) {
  return d->eng[d->turn % d->neng];
}

static void duo_close(duo *d) {
  int i;
  sluice_store_close(d->mem);
  for (i = 0; i < d->neng; i++)
    sluice_store_close(d->eng[i]);
}

#define VF(f, fmt)                                                             \
  cr_assert_eq(vr.f, vm.f,                                                     \
               "%s step %ld (kind %d arg %ld nkeys %d now %ld): " #f            \
               " redis " fmt " != C " fmt,                                      \
               what, step, op->kind, op->arg, op->nkeys, now, vr.f, vm.f)

/* The C store's verdict of the last duo_step() (a counted set's ids). */
static sluice_verdict duo_last;

/* One op on both stores; everything observable must agree. */
static void duo_step(duo *d, const sluice_op *op, int64_t now,
                     const char *what, long step) {
  sluice_verdict vm, vr;
  int rm, rr, i;
  memset(&vm, 0, sizeof vm);
  memset(&vr, 0, sizeof vr);
  rm = store_op(d->mem, op, now, &vm);
  duo_turn(d);
  rr = store_op(d->red, op, now, &vr);
  cr_assert_eq(rr, rm, "%s step %ld: rc redis %s != C %s (%s)", what, step,
               sluice_err_name(rr), sluice_err_name(rm), sluice_store_errmsg(d->red));
  d->ops++;
  if (rm != SLUICE_OK)
    return;
  d->allowed += vm.allowed;
  duo_last = vm;
  VF(allowed, "%d");
  VF(flags, "%u");
  VF(binding, "%d");
  VF(level, "%d");
  VF(limit, "%ld");
  VF(remaining, "%ld");
  VF(retry_after_ns, "%ld");
  VF(reset_ns, "%ld");
  VF(strikes_remaining, "%ld");
  VF(offenses, "%ld");
  VF(lease_id, "%lu");
  VF(now_ns, "%ld");
  for (i = 0; i < op->nkeys; i++) {
    sluice_state sm, sr;
    int64_t em = 0, er = 0;
    int gm = sluice_store_get(d->mem, &op->keys[i], now, &sm, &em);
    int gr = sluice_store_get(duo_reader(d), &op->keys[i], now, &sr, &er);
    cr_assert_eq(gr, gm, "%s step %ld key %d: get redis %s != C %s", what,
                 step, i, sluice_err_name(gr), sluice_err_name(gm));
    if (gm == SLUICE_OK) {
      cr_assert(sr.w[0] == sm.w[0] && sr.w[1] == sm.w[1],
                "%s step %ld key %d: record redis %016lx:%016lx != C "
                "%016lx:%016lx",
                what, step, i, sr.w[1], sr.w[0], sm.w[1], sm.w[0]);
      cr_assert_eq(er, em, "%s step %ld key %d: expiry %ld != %ld", what, step,
                   i, er, em);
    }
  }
}

/* Time walks mostly forward in steps from nothing to days, sometimes back. */
static int64_t next_time(rng *r, int64_t t, int64_t scale) {
  int64_t steps[] = {0, 1, 999, MS, scale / 7 + 1, scale, 3 * scale, HOUR,
                     25 * HOUR};
  int64_t dt = pick(r, steps, 9);
  if (dt > 1)
    dt = rrange(r, dt / 2, dt);
  if (rnext(r) % 23 == 0)
    dt = -rrange(r, 0, scale);
  t += dt;
  return t < 0 ? 0 : t;
}

static int64_t start_time(rng *r) {
  int64_t starts[] = {0, 1, SEC, INT64_C(1764633600) * SEC,
                      INT64_C(1764633600) * SEC + 999999999,
                      (INT64_C(1) << 62) + 12345};
  return pick(r, starts, 6);
}

static void mk_keys(sluice_key *k, char (*names)[128], int n, const char *tag,
                    int scen) {
  int i;
  for (i = 0; i < n; i++) {
    snprintf(names[i], 128, "p:%s:%d:%d", tag, scen, i);
    k[i].data = names[i];
    k[i].len = strlen(names[i]);
  }
}

Test(port, gcra_groups, .timeout = 240) {
  duo d;
  rng r = seeded(42);
  char tag[64], names[4][128];
  sluice_key k[4];
  int scen;
  long step = 0;
  rt_tag(tag, sizeof tag, "gcra");
  duo_open(&d);
  for (scen = 0; scen < 60; scen++) {
    sluice_gcra_params p[3];
    int64_t rates[] = {1, 3, 7, 10, 50, 1000, 1000000, INT64_C(1) << 32};
    int64_t periods[] = {1, 3, MS, SEC, 60 * SEC, HOUR, 86400 * SEC};
    int n = (int)rrange(&r, 1, 3), i, s;
    int64_t t = start_time(&r), cap = INT64_MAX;
    mk_keys(k, names, n, tag, scen);
    for (i = 0; i < n; i++) {
      do {
        p[i].rate = pick(&r, rates, 8);
        p[i].period_ns = pick(&r, periods, 7);
        p[i].burst = rrange(&r, 1, rnext(&r) % 4 ? 20 : 100000);
      } while ((__int128)p[i].burst * p[i].period_ns > ((__int128)1 << 52));
      if (p[i].burst < cap)
        cap = p[i].burst;
    }
    for (s = 0; s < 40; s++, step++) {
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, n, k, p, 1, 0};
      if (rnext(&r) % 5 == 0) {
        op.kind = SLUICE_OP_PEEK;
        op.arg = rrange(&r, 0, cap);
      } else {
        op.arg = rrange(&r, 1, rnext(&r) % 3 ? 1 : cap);
      }
      /* A tier change on a live key: the fraction was scaled by the old
      ** rate and may now exceed the new one. */
      if (rnext(&r) % 37 == 0)
        p[0].rate = rrange(&r, 1, 1000);
      if ((__int128)p[0].burst * p[0].period_ns > ((__int128)1 << 52))
        p[0].burst = 1;
      if (p[0].burst < op.arg)
        op.arg = p[0].burst;
      t = next_time(&r, t, p[0].period_ns / p[0].rate + 1);
      duo_step(&d, &op, t, "gcra", step);
    }
  }
  cr_assert_gt(d.allowed, 200, "the trace must exercise admissions");
  cr_assert_lt(d.allowed, d.ops - 200, "and denials");
  duo_close(&d);
}

Test(port, windows, .timeout = 240) {
  duo d;
  rng r = seeded(7);
  char tag[64], names[1][128];
  sluice_key k[1];
  int scen;
  long step = 0;
  rt_tag(tag, sizeof tag, "win");
  duo_open(&d);
  for (scen = 0; scen < 90; scen++) {
    sluice_window_params p;
    int64_t wins[] = {1, 7, MS, SEC, 60 * SEC, 15 * 60 * SEC, HOUR};
    int algo = scen % 2 ? SLUICE_ALGO_SWINDOW : SLUICE_ALGO_FWINDOW, s;
    int64_t t = start_time(&r);
    mk_keys(k, names, 1, tag, scen);
    do {
      p.window_ns = pick(&r, wins, 7);
      p.limit = rrange(&r, 1, rnext(&r) % 4 ? 12 : 5000);
    } while ((__int128)p.limit * p.window_ns > ((__int128)1 << 52));
    for (s = 0; s < 40; s++, step++) {
      int kinds[] = {SLUICE_OP_CONSUME, SLUICE_OP_COUNT, SLUICE_OP_PEEK,
                     SLUICE_OP_CONSUME};
      sluice_op op = {algo, kinds[rnext(&r) % 4], 1, k, &p, 1, 0};
      if (op.kind == SLUICE_OP_COUNT)
        op.arg = rrange(&r, 1, 2 * p.limit);
      else if (op.kind == SLUICE_OP_PEEK)
        op.arg = rrange(&r, 0, p.limit);
      else
        op.arg = rrange(&r, 1, rnext(&r) % 3 ? 1 : p.limit);
      t = next_time(&r, t, p.window_ns);
      duo_step(&d, &op, t, algo == SLUICE_ALGO_SWINDOW ? "swindow" : "fwindow",
               step);
    }
  }
  cr_assert_gt(d.allowed, 200);
  cr_assert_lt(d.allowed, d.ops - 200);
  duo_close(&d);
}

Test(port, penalty, .timeout = 240) {
  duo d;
  rng r = seeded(99);
  char tag[64], names[1][128];
  sluice_key k[1];
  int scen, trips = 0;
  long step = 0;
  rt_tag(tag, sizeof tag, "pen");
  duo_open(&d);
  for (scen = 0; scen < 60; scen++) {
    sluice_penalty_params p;
    int64_t boxes[] = {MS, SEC, 5 * 60 * SEC, HOUR, 24 * HOUR, SLUICE_FOREVER};
    int s;
    int64_t t = start_time(&r);
    mk_keys(k, names, 1, tag, scen);
    p.strike_threshold = rrange(&r, 1, 6);
    p.strike_window_ns = rrange(&r, MS, 60 * SEC);
    p.box_ns[0] = pick(&r, boxes, 4);
    p.box_ns[1] = pick(&r, boxes, 5);
    p.box_ns[2] = pick(&r, boxes, 6);
    p.offense_ttl_ns = rrange(&r, MS, 24 * HOUR);
    for (s = 0; s < 50; s++, step++) {
      int kinds[] = {SLUICE_OP_STRIKE, SLUICE_OP_STRIKE, SLUICE_OP_STRIKE,
                     SLUICE_OP_CHECK,  SLUICE_OP_TRIP,   SLUICE_OP_RELEASE};
      sluice_op op = {SLUICE_ALGO_PENALTY, kinds[rnext(&r) % 6], 1, k, &p, 0,
                      0};
      sluice_verdict v;
      if (op.kind == SLUICE_OP_TRIP)
        op.arg = rrange(&r, 1, 3);
      t = next_time(&r, t, p.strike_window_ns);
      duo_step(&d, &op, t, "penalty", step);
      if (store_op(d.mem, &(sluice_op){SLUICE_ALGO_PENALTY,
                                                  SLUICE_OP_CHECK, 1, k, &p, 0,
                                                  0},
                              t, &v) == SLUICE_OK)
        trips += v.level == 3;
    }
  }
  cr_assert_gt(trips, 10, "the trace must reach level 3");
  duo_close(&d);
}

Test(port, lease, .timeout = 240) {
  duo d;
  rng r = seeded(5);
  char tag[64], names[8][128];
  sluice_key k[8];
  int scen;
  long step = 0;
  rt_tag(tag, sizeof tag, "lease");
  duo_open(&d);
  for (scen = 0; scen < 60; scen++) {
    sluice_lease_params p;
    uint64_t ids[] = {1, 2, 3, 0xffffffffu, UINT64_C(0x100000000),
                      UINT64_C(0xfedcba9876543210), UINT64_MAX};
    int s;
    int64_t t = start_time(&r);
    p.max = rrange(&r, 1, 5);
    p.ttl_ns = rrange(&r, 1, rnext(&r) % 2 ? SEC : HOUR);
    mk_keys(k, names, (int)p.max, tag, scen);
    for (s = 0; s < 40; s++, step++) {
      int kinds[] = {SLUICE_OP_ACQUIRE, SLUICE_OP_ACQUIRE, SLUICE_OP_RENEW,
                     SLUICE_OP_LEASE_RELEASE};
      sluice_op op = {SLUICE_ALGO_LEASE, kinds[rnext(&r) % 4], (int)p.max, k,
                      &p, 0, ids[rnext(&r) % 7]};
      t = next_time(&r, t, p.ttl_ns);
      duo_step(&d, &op, t, "lease", step);
    }
  }
  cr_assert_gt(d.allowed, 200);
  duo_close(&d);
}

static void duo_run(duo *d, const sluice_program *p, int64_t now, long step,
                    sluice_program_result *out);

/* A counted lease set (lib/algo/lease_count.c): one record, ids that the
** grants make (released once, twice, after their bucket ended, renewed)
** and made-up ones, over every start time, TTLs from 1 ns to days, sizes
** from 33 to the largest; then as a program's step before a bucket whose
** refusal must undo the grant. */
Test(port, lease_count, .timeout = 240) {
  static const sluice_gcra_params gp = {1, SEC, 2};
  duo d;
  rng r = seeded(25);
  char tag[64], names[2][128];
  sluice_key k[2];
  int scen, undone = 0;
  long step = 0;
  rt_tag(tag, sizeof tag, "leasec");
  duo_open(&d);
  for (scen = 0; scen < 60; scen++) {
    sluice_lease_params p;
    uint64_t ids[8] = {1, 2, UINT64_MAX, UINT64_C(0x100000),
                       UINT64_C(0xfedcba9876543210), 7, 8, 9};
    int64_t maxes[] = {33, 34, 40, 1000, SLUICE_LEASE_COUNT_MAX};
    int64_t ttls[] = {1, 999, MS, SEC, HOUR, 25 * HOUR};
    int s;
    int64_t t = start_time(&r);
    p.max = pick(&r, maxes, 5);
    p.ttl_ns = rrange(&r, 1, pick(&r, ttls, 6));
    mk_keys(k, names, 2, tag, scen);
    for (s = 0; s < 60; s++, step++) {
      int kinds[] = {SLUICE_OP_ACQUIRE, SLUICE_OP_ACQUIRE, SLUICE_OP_ACQUIRE,
                     SLUICE_OP_RENEW, SLUICE_OP_LEASE_RELEASE};
      uint64_t *id = &ids[rnext(&r) % 8];
      sluice_op op = {SLUICE_ALGO_LEASE, kinds[rnext(&r) % 5], 1, k, &p, 0,
                      *id};
      sluice_verdict vm;
      t = next_time(&r, t, p.ttl_ns);
      if (s % 3 == 2) { /* the set, then a bucket that may refuse */
        sluice_step st[2] = {
            {SLUICE_ALGO_LEASE, op.kind, 0, 1, &p, 0, *id},
            {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, 1, &gp, 1}};
        sluice_program pg = {2, k, 2, st};
        sluice_program_result res;
        duo_run(&d, &pg, t, step, &res);
        undone += res.denied_by == 1 && res.v[0].allowed &&
                  op.kind == SLUICE_OP_ACQUIRE;
        vm = res.v[0];
      } else {
        memset(&duo_last, 0, sizeof duo_last);
        duo_step(&d, &op, t, "lease-count", step);
        vm = duo_last;
      }
      if (vm.allowed && op.kind != SLUICE_OP_LEASE_RELEASE)
        *id = vm.lease_id;
    }
  }
  cr_assert_gt(d.allowed, 500);
  cr_assert_gt(undone, 5);
  duo_close(&d);
}

Test(port, distinct, .timeout = 240) {
  duo d;
  rng r = seeded(11);
  char tag[64], names[1][128];
  sluice_key k[1];
  int scen;
  long step = 0;
  rt_tag(tag, sizeof tag, "dist");
  duo_open(&d);
  for (scen = 0; scen < 30; scen++) {
    sluice_distinct_params p;
    int s;
    int64_t t = start_time(&r);
    mk_keys(k, names, 1, tag, scen);
    p.threshold = rrange(&r, 1, 12);
    p.window_ns = rrange(&r, 1, 10 * 60 * SEC);
    for (s = 0; s < 60; s++, step++) {
      sluice_op op = {SLUICE_ALGO_DISTINCT,
                      rnext(&r) % 5 ? SLUICE_OP_ADD : SLUICE_OP_PEEK,
                      1,
                      k,
                      &p,
                      0,
                      rnext(&r)};
      t = next_time(&r, t, p.window_ns / 20 + 1);
      duo_step(&d, &op, t, "distinct", step);
    }
  }
  cr_assert_gt(d.allowed, 100);
  cr_assert_lt(d.allowed, d.ops - 100);
  duo_close(&d);
}

/* The edges of the supported range run exactly; one past them is refused
** with SLUICE_ERANGE and writes nothing. */
Test(port, range_edges) {
  duo d;
  char tag[64], name[96];
  sluice_key k;
  sluice_verdict v;
  sluice_state st;
  int64_t exp, t = INT64_C(1764633600) * SEC;
  sluice_gcra_params edge = {INT64_C(1) << 32, INT64_C(1) << 26,
                             INT64_C(1) << 26};
  sluice_gcra_params over = {1, (INT64_C(1) << 26) + 1, INT64_C(1) << 26};
  sluice_window_params swin = {1 << 20, (INT64_C(1) << 32) + 1};
  sluice_lease_params lease = {1, (INT64_C(1) << 52) + 1};
  int i;
  rt_tag(tag, sizeof tag, "edge");
  snprintf(name, sizeof name, "e:%s", tag);
  k.data = name;
  k.len = strlen(name);
  duo_open(&d);
  for (i = 0; i < 20; i++) {
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &edge,
                    (INT64_C(1) << 26) / 3, 0};
    duo_step(&d, &op, t + i * (INT64_C(1) << 40), "edge", i);
  }
  {
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &over, 1, 0};
    cr_assert_eq(store_op(d.red, &op, t, &v), SLUICE_ERANGE);
  }
  {
    sluice_op op = {SLUICE_ALGO_SWINDOW, SLUICE_OP_CONSUME, 1, &k, &swin, 1, 0};
    cr_assert_eq(store_op(d.red, &op, t, &v), SLUICE_ERANGE);
  }
  {
    char n2[100];
    sluice_key k2;
    snprintf(n2, sizeof n2, "l:%s", tag);
    k2.data = n2;
    k2.len = strlen(n2);
    sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 1, &k2, &lease, 0, 9};
    cr_assert_eq(store_op(d.red, &op, t, &v), SLUICE_ERANGE);
    cr_assert_eq(sluice_store_get(d.red, &k2, t, &st, &exp), SLUICE_ENOTFOUND,
                 "a refused op writes nothing");
  }
  cr_assert_str_not_empty(sluice_store_errmsg(d.red));
  duo_close(&d);
}

/* One hot bucket hovering around empty: the script's straight-line fast
** path (one GCRA key, consume or peek) against the C step, including the
** cases it must hand to the general path (a TAT beyond one tolerance after
** a clock step back, a tier change). */
Test(port, gcra_hot_bucket, .timeout = 240) {
  duo d;
  rng r = seeded(2024);
  char tag[64], names[1][128];
  sluice_key k[1];
  int scen;
  long step = 0;
  rt_tag(tag, sizeof tag, "hot");
  duo_open(&d);
  for (scen = 0; scen < 8; scen++) {
    int64_t rates[] = {1, 7, 10, 250, 1000000};
    sluice_gcra_params p = {pick(&r, rates, 5), SEC, rrange(&r, 1, 600)};
    int64_t t = start_time(&r), T;
    int s;
    mk_keys(k, names, 1, tag, scen);
    T = p.period_ns / p.rate + 1;
    for (s = 0; s < 120; s++, step++) {
      sluice_op op = {SLUICE_ALGO_GCRA,
                      rnext(&r) % 6 ? SLUICE_OP_CONSUME : SLUICE_OP_PEEK,
                      1,
                      k,
                      &p,
                      rrange(&r, 1, p.burst < 3 ? p.burst : 3),
                      0};
      int64_t dt = rrange(&r, 0, 2 * T);
      if (rnext(&r) % 40 == 0)
        dt = -rrange(&r, 0, p.burst * T);
      if (rnext(&r) % 50 == 0)
        p.rate = pick(&r, rates, 5);
      t = t + dt < 0 ? 0 : t + dt;
      duo_step(&d, &op, t, "gcra-hot", step);
    }
  }
  cr_assert_gt(d.allowed, 100);
  cr_assert_lt(d.allowed, d.ops - 100);
  duo_close(&d);
}

/* ---------------------------------------------------------- programs --- */

/* One program on both stores: the result, every step's verdict, every
** record and expiry must agree. */
static void duo_run(duo *d, const sluice_program *p, int64_t now, long step,
                    sluice_program_result *out) {
  sluice_program_result rm, rr;
  int cm, cr, i;
  memset(&rm, 0, sizeof rm);
  memset(&rr, 0, sizeof rr);
  cm = store_prog(d->mem, p, now, &rm);
  duo_turn(d);
  cr = store_prog(d->red, p, now, &rr);
  cr_assert_eq(cr, cm, "program %ld: rc redis %s != C %s (%s)", step,
               sluice_err_name(cr), sluice_err_name(cm), sluice_store_errmsg(d->red));
  d->ops++;
  *out = rm;
  if (cm != SLUICE_OK) {
    out->denied_by = -1;
    return;
  }
  d->allowed += rm.allowed;
  cr_assert_eq(rr.allowed, rm.allowed, "program %ld: allowed", step);
  cr_assert_eq(rr.denied_by, rm.denied_by, "program %ld: denied_by", step);
  cr_assert_eq(rr.ran, rm.ran, "program %ld: ran %x != %x", step, rr.ran,
               rm.ran);
  cr_assert_eq(rr.now_ns, rm.now_ns);
  for (i = 0; i < p->nsteps; i++)
    cr_assert(memcmp(&rr.v[i], &rm.v[i], sizeof rm.v[i]) == 0,
              "program %ld step %d: verdicts differ (allowed %d/%d remaining "
              "%ld/%ld retry %ld/%ld)",
              step, i, rr.v[i].allowed, rm.v[i].allowed, rr.v[i].remaining,
              rm.v[i].remaining, rr.v[i].retry_after_ns,
              rm.v[i].retry_after_ns);
  for (i = 0; i < p->nkeys; i++) {
    sluice_state sm, sr;
    int64_t em = 0, er = 0;
    int gm = sluice_store_get(d->mem, &p->keys[i], now, &sm, &em);
    int gr = sluice_store_get(duo_reader(d), &p->keys[i], now, &sr, &er);
    cr_assert_eq(gr, gm, "program %ld record %d: get %s != %s", step, i,
                 sluice_err_name(gr), sluice_err_name(gm));
    if (gm == SLUICE_OK) {
      cr_assert(sr.w[0] == sm.w[0] && sr.w[1] == sm.w[1],
                "program %ld record %d: records differ", step, i);
      cr_assert_eq(er, em, "program %ld record %d: expiry %ld != %ld", step,
                   i, er, em);
    }
  }
}

/* Random programs over one table of records: a box, a bucket pair, a
** notice, a window, a distinct set and a 3-slot lease set, each step with
** a random guard (on a random earlier step) and fold, so gates that deny
** after writes (the undo), notes after denials and TTLs taken from a
** denial all occur. */
Test(port, programs, .timeout = 240) {
  static const sluice_penalty_params pen = {
      2, 10 * SEC, {SEC, 60 * SEC, SLUICE_FOREVER}, HOUR};
  static const sluice_gcra_params gp[2] = {{5, SEC, 5}, {2, SEC, 3}};
  static const sluice_lease_params notice = {1, SEC}, slots = {3, 5 * SEC};
  static const sluice_window_params win = {4, 2 * SEC};
  static const sluice_distinct_params dist = {3, 10 * SEC};
  duo d;
  rng r = seeded(15);
  char tag[64], names[9][128];
  sluice_key k[9];
  int scen, undone = 0, notes_after_denial = 0;
  long step = 0;
  rt_tag(tag, sizeof tag, "prog");
  duo_open(&d);
  for (scen = 0; scen < 40; scen++) {
    int64_t t = start_time(&r);
    int s;
    mk_keys(k, names, 9, tag, scen);
    for (s = 0; s < 40; s++, step++) {
      /* Records: 0 box, 1-2 buckets, 3 notice, 4 window, 5 distinct,
      ** 6-8 lease slots.  Every record gets a step (validation). */
      sluice_step st[9];
      sluice_program p = {9, k, 0, st};
      int i, n = 0, order[6] = {0, 1, 2, 3, 4, 5};
      memset(st, 0, sizeof st);
      for (i = 5; i > 0; i--) { /* shuffle which record comes first */
        int j = (int)(rnext(&r) % (uint64_t)(i + 1)), x = order[i];
        order[i] = order[j];
        order[j] = x;
      }
      for (i = 0; i < 6; i++) {
        sluice_step *q = &st[n];
        switch (order[i]) {
        case 0:
          *q = (sluice_step){SLUICE_ALGO_PENALTY,
                             rnext(&r) % 2 ? SLUICE_OP_CHECK
                                           : SLUICE_OP_STRIKE,
                             0, 1, &pen};
          break;
        case 1:
          *q = (sluice_step){SLUICE_ALGO_GCRA,
                             rnext(&r) % 4 ? SLUICE_OP_CONSUME : SLUICE_OP_PEEK,
                             1, 2, gp, rrange(&r, 1, 3)};
          break;
        case 2:
          *q = (sluice_step){SLUICE_ALGO_LEASE,
                             rnext(&r) % 2 ? SLUICE_OP_ACQUIRE
                                           : SLUICE_OP_RENEW,
                             3, 1, &notice, 0, 1};
          break;
        case 3:
          *q = (sluice_step){SLUICE_ALGO_SWINDOW,
                             rnext(&r) % 2 ? SLUICE_OP_CONSUME
                                           : SLUICE_OP_COUNT,
                             4, 1, &win, 1};
          break;
        case 4:
          *q = (sluice_step){SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 5, 1, &dist,
                             0, rnext(&r)};
          break;
        default:
          *q = (sluice_step){SLUICE_ALGO_LEASE,
                             rnext(&r) % 3 ? SLUICE_OP_ACQUIRE
                                           : SLUICE_OP_LEASE_RELEASE,
                             6, 3, &slots, 0, (uint64_t)rrange(&r, 1, 4)};
          break;
        }
        q->fold = rnext(&r) % 3 ? SLUICE_FOLD_GATE : SLUICE_FOLD_NOTE;
        if (n > 0) {
          q->when = (int)(rnext(&r) % 6);
          q->ref = (int)(rnext(&r) % (uint64_t)n);
          if (rnext(&r) % 4 == 0) {
            q->when2 = (int)(rnext(&r) % 6);
            q->ref2 = (int)(rnext(&r) % (uint64_t)n);
          }
          if (q->algo == SLUICE_ALGO_LEASE && rnext(&r) % 2)
            q->ttl_from = SLUICE_TTL_OF((int)(rnext(&r) % (uint64_t)n));
        }
        n++;
      }
      p.nsteps = n;
      t = next_time(&r, t, SEC);
      {
        sluice_program_result res;
        duo_run(&d, &p, t, step, &res);
        /* What the trace covered (the two runs agreed on it). */
        undone += res.denied_by > 0;
        for (i = res.denied_by + 1; res.denied_by >= 0 && i < n; i++)
          notes_after_denial += (res.ran >> i) & 1u;
      }
    }
  }
  cr_assert_gt(d.allowed, 100, "programs admitted");
  cr_assert_gt(d.ops - d.allowed, 100, "programs denied");
  cr_assert_gt(undone, 50, "gates denied after earlier steps");
  cr_assert_gt(notes_after_denial, 50, "steps ran after a denial");
  duo_close(&d);
}

/* The policy's request (sluice/program.h's example): box check, two
** buckets, the Retry-After notice renewed or taken on a denial, a strike
** on a repeated one.  The Lua runs the common case (no box record, every
** bucket admits) in straight-line code of its own (pstd in
** lua/program.lua) and anything else through the sequencer, having read
** the records once: here both meet buckets that admit and refuse, a box
** tripped in between, tiers changing on live buckets, records expired, clocks stepping back and times
** from 0 to past 2^62 and around 2^53, so that every exit of the straight
** line is taken and must agree with C, as must its writes; in the built-in
** flow's record order and in a declared route's. */
Test(port, standard_programs, .timeout = 240) {
  static const int64_t E = INT64_C(1) << 52, T53 = INT64_C(1) << 53;
  static const sluice_penalty_params pen = {
      3, 10 * SEC, {SEC, 60 * SEC, SLUICE_FOREVER}, HOUR};
  /* Tiers keep each bucket's rate: a record left as it was (a refusal, a
  ** peek) keeps the expiry it was written with on Redis, where the C
  ** stores write it again under the program's parameters, and the expiry
  ** of a TAT with a fraction depends on the rate. */
  static const sluice_gcra_params tiers[4][2] = {
      {{5, SEC, 6}, {2, SEC, 3}},
      {{5, 2 * SEC, 4}, {2, SEC, 5}},
      {{5, INT64_C(1) << 26, INT64_C(1) << 26}, {2, SEC, 4}}, /* 2^52 */
      {{5, INT64_C(1) << 26, 7}, {2, HOUR, 2}}};
  static const sluice_lease_params notice = {1, SEC};
  duo d;
  rng r = seeded(34);
  char tag[64], names[4][128];
  sluice_key k[4];
  int scen, boxed = 0, refused = 0, admitted = 0;
  long step = 0;
  rt_tag(tag, sizeof tag, "std");
  duo_open(&d);
  for (scen = 0; scen < 30; scen++) {
    int64_t t = scen % 5 == 4 ? T53 - rrange(&r, 0, 3 * SEC) : start_time(&r);
    int tier = (int)(rnext(&r) % 4), s;
    /* The built-in flow's records (box, buckets, notice) and a declared
    ** route's (box, notice, buckets: the straight line reads the box and
    ** the buckets only, in one MGET of records that are not the first). */
    int kg = scen % 2 ? 2 : 1, kn = scen % 2 ? 1 : 3;
    mk_keys(k, names, 4, tag, scen);
    for (s = 0; s < 40; s++, step++) {
      sluice_step st[5] = {
          {SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &pen},
          {SLUICE_ALGO_GCRA,
           rnext(&r) % 8 ? SLUICE_OP_CONSUME : SLUICE_OP_PEEK, kg, 2,
           tiers[tier], rrange(&r, 1, 2), 0, SLUICE_WHEN_PASSED, 0},
          {SLUICE_ALGO_LEASE, SLUICE_OP_RENEW, kn, 1, &notice, 0, 1,
           SLUICE_WHEN_DENIED, 1},
          {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, kn, 1, &notice, 0, 1,
           SLUICE_WHEN_DENIED, 2},
          {SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 0, 1, &pen, 0, 0,
           SLUICE_WHEN_ALLOWED, 2, SLUICE_WHEN_ALLOWED, 0}};
      sluice_program p = {4, k, 5, st};
      sluice_program_result res;
      int i;
      for (i = 1; i < 5; i++)
        st[i].fold = i == 1 ? SLUICE_FOLD_GATE : SLUICE_FOLD_NOTE;
      st[2].ttl_from = st[3].ttl_from = SLUICE_TTL_OF(1);
      if (rnext(&r) % 10 == 0) /* a tier change on the live buckets */
        tier = (int)(rnext(&r) % 4);
      if (rnext(&r) % 25 == 0) { /* a box tripped from elsewhere */
        sluice_op op = {SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 1, &k[0], &pen,
                        1, 0};
        duo_step(&d, &op, t, "std-trip", step);
      }
      t = scen % 5 == 4 ? t + rrange(&r, -SEC, E / 4) : next_time(&r, t, SEC);
      if (t < 0)
        t = 0;
      duo_run(&d, &p, t, step, &res);
      boxed += res.ran & 1u && !res.v[0].allowed;
      refused += res.denied_by == 1;
      admitted += res.allowed;
    }
  }
  cr_assert_gt(admitted, 200, "admitted (%d)", admitted);
  cr_assert_gt(refused, 100, "refused by the buckets (%d)", refused);
  cr_assert_gt(boxed, 20, "refused by the box (%d)", boxed);
  duo_close(&d);
}

/* Around 2^53, where a double stops being exact: the test clock walks
** from below 2^53 ns to above it (absolute times on both sides), with
** parameters at the top of the exact range (burst * period_ns, limit *
** window_ns and durations of 2^52, differences of up to 2^52 between a TAT
** and now) and small ones, so that every quantity the Lua turns into a
** plain number lies just below or just above 2^53 in some step: the script
** (its plain-number path for small values, its (hi, lo) pairs beyond) and
** the C step give the same verdicts, records and expiries. */
Test(port, exact_boundary_2_53, .timeout = 240) {
  static const int64_t E = INT64_C(1) << 52, T53 = INT64_C(1) << 53;
  static const sluice_gcra_params g[3] = {
      {1, INT64_C(1) << 26, INT64_C(1) << 26}, /* burst * period = 2^52 */
      {INT64_C(1) << 32, INT64_C(1) << 26, INT64_C(1) << 26},
      {3, SEC, 5}};
  static const sluice_window_params w[2] = {{1 << 20, INT64_C(1) << 32},
                                            {1, E}};
  static const sluice_penalty_params pen = {2, E, {E, E / 3, SLUICE_FOREVER},
                                            E};
  static const sluice_lease_params lease = {2, E}, notice = {1, E};
  static const int64_t at[] = {-E,     -(E / 2) - 1, -3 * SEC, -SEC - 1,
                               -MS,    -999,         -2,       -1,
                               0,      1,            2,        999,
                               MS + 1, SEC,          3 * SEC,  E / 2 + 1,
                               E,      E + 7,        -5,       2 * E};
  static const sluice_step st[2] = {
      {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 2, g, 1, 0, SLUICE_WHEN_ALWAYS,
       0, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_GATE, 0},
      {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 2, 1, &notice, 0, 77,
       SLUICE_WHEN_DENIED, 0, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE,
       SLUICE_TTL_OF(0)}};
  duo d;
  char tag[64], names[12][128];
  sluice_key k[12];
  long step = 0;
  int i, j;
  rt_tag(tag, sizeof tag, "b53");
  mk_keys(k, names, 12, tag, 0);
  duo_open(&d);
  for (i = 0; i < (int)(sizeof at / sizeof at[0]); i++) {
    int64_t t = T53 + at[i];
    for (j = 0; j < 3; j++) {
      int64_t cost[3] = {(INT64_C(1) << 26) / 5, (INT64_C(1) << 26) / 3, 2};
      sluice_op op = {SLUICE_ALGO_GCRA,
                      i % 4 == 3 ? SLUICE_OP_PEEK : SLUICE_OP_CONSUME,
                      1, &k[j], &g[j], cost[j], 0};
      duo_step(&d, &op, t, "b53-gcra", step++);
    }
    {
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, &k[3], g, 1, 0};
      duo_step(&d, &op, t, "b53-group", step++);
    }
    for (j = 0; j < 2; j++) {
      sluice_op sw = {SLUICE_ALGO_SWINDOW, SLUICE_OP_CONSUME, 1, &k[5 + j],
                      &w[j], 1 + i % 3, 0};
      sluice_op fw = {SLUICE_ALGO_FWINDOW, SLUICE_OP_CONSUME, 1, &k[7 + j],
                      &w[j], 1 + i % 2, 0};
      duo_step(&d, &sw, t, "b53-swindow", step++);
      duo_step(&d, &fw, t, "b53-fwindow", step++);
    }
    {
      sluice_op op = {SLUICE_ALGO_PENALTY,
                      i % 3 == 2 ? SLUICE_OP_CHECK : SLUICE_OP_STRIKE, 1,
                      &k[9], &pen, 1, 0};
      duo_step(&d, &op, t, "b53-penalty", step++);
    }
    {
      sluice_op op = {SLUICE_ALGO_LEASE,
                      i % 5 == 4 ? SLUICE_OP_RELEASE : SLUICE_OP_ACQUIRE, 2,
                      &k[10], &lease, 0, (uint64_t)(i % 3) + 1};
      duo_step(&d, &op, t, "b53-lease", step++);
    }
    {
      sluice_key pk[3] = {k[3], k[4], k[11]};
      sluice_program p = {3, pk, 2, st};
      sluice_program_result res;
      duo_run(&d, &p, t, step++, &res);
      cr_assert(res.ran & 1u, "the program ran (%s)",
                sluice_store_errmsg(d.mem));
    }
  }
  cr_assert_gt(d.allowed, 20, "the trace admits (%ld of %ld)", d.allowed,
               d.ops);
  cr_assert_lt(d.allowed, d.ops - 20, "and refuses (%ld of %ld)", d.allowed,
               d.ops);
  duo_close(&d);
}

/* ADJUST (settle) against the C step: GCRA groups and both windows, mixed
** with the consumes it settles, at every time scale, with clocks that step
** back, charges into debt and refunds past full, and the settled charge's
** time now, in the previous window or long ago. */
Test(port, adjust, .timeout = 240) {
  duo d;
  rng r = seeded(2026);
  char tag[64], names[3][128];
  sluice_key k[3];
  int scen;
  long step = 0, adjusts = 0;
  rt_tag(tag, sizeof tag, "adj");
  duo_open(&d);
  for (scen = 0; scen < 90; scen++) {
    int algo = scen % 3 == 0   ? SLUICE_ALGO_GCRA
               : scen % 3 == 1 ? SLUICE_ALGO_SWINDOW
                               : SLUICE_ALGO_FWINDOW;
    int64_t rates[] = {1, 3, 7, 1000, INT64_C(1) << 32};
    int64_t periods[] = {1, 3, MS, SEC, 60 * SEC, HOUR};
    sluice_gcra_params gp[3];
    sluice_window_params wp;
    int64_t t = start_time(&r), cap = INT64_MAX, scale;
    int n = algo == SLUICE_ALGO_GCRA ? (int)rrange(&r, 1, 3) : 1, i, s;
    mk_keys(k, names, n, tag, scen);
    for (i = 0; i < n; i++) {
      do {
        gp[i].rate = pick(&r, rates, 5);
        gp[i].period_ns = pick(&r, periods, 6);
        gp[i].burst = rrange(&r, 1, rnext(&r) % 4 ? 20 : 100000);
      } while ((__int128)gp[i].burst * gp[i].period_ns > ((__int128)1 << 52));
      if (gp[i].burst < cap)
        cap = gp[i].burst;
    }
    do {
      wp.window_ns = pick(&r, periods, 6);
      wp.limit = rrange(&r, 1, rnext(&r) % 4 ? 12 : 5000);
    } while ((__int128)wp.limit * wp.window_ns > ((__int128)1 << 52));
    if (algo != SLUICE_ALGO_GCRA)
      cap = wp.limit;
    scale = algo == SLUICE_ALGO_GCRA ? gp[0].period_ns / gp[0].rate + 1
                                     : wp.window_ns;
    for (s = 0; s < 40; s++, step++) {
      sluice_op op = {algo, SLUICE_OP_CONSUME, n, k, NULL, 1, 0};
      int64_t back[] = {0, 1, scale / 2, scale, 2 * scale, 30 * scale};
      op.params = algo == SLUICE_ALGO_GCRA ? (const void *)gp : &wp;
      op.arg = rrange(&r, 1, rnext(&r) % 3 ? 1 : cap);
      t = next_time(&r, t, scale);
      if (rnext(&r) % 2) {
        op.kind = SLUICE_OP_ADJUST;
        op.arg = rrange(&r, 1, rnext(&r) % 3 ? cap : 3);
        if (rnext(&r) % 2)
          op.arg = -op.arg;
        op.id = (uint64_t)(t - pick(&r, back, 6));
        if ((int64_t)op.id < 0)
          op.id = 0;
        adjusts++;
      }
      duo_step(&d, &op, t, "adjust", step);
    }
  }
  cr_assert_gt(adjusts, 1000);
  cr_assert_gt(d.allowed, 200);
  cr_assert_lt(d.allowed, d.ops - 200, "consumes were refused too");
  duo_close(&d);
}

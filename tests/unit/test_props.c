/*
** Property tests over random traces (splitmix64 with fixed seeds, bounded
** sizes):
**  - never over-admit: admitted cost in any [t0, t1] <= burst +
**    rate * (t1 - t0) / period, checked exactly over every pair of admissions
**    in 128-bit integers, with the clock going backwards at the algorithm
**    layer and through a limiter;
**  - a denial (and PEEK / CHECK) consumes nothing;
**  - a clock going backwards never refunds or double-charges;
**  - a record at or past sluice__op_expiry() behaves exactly like a zeroed
**    record (what backends rely on to reclaim), and 1 ns before it does not;
**  - cost additivity at one instant.
*/
#include "unit.h"
#include "../common/one_step.h"
#include "op.h"

/* ------------------------------------------------ random op generators --- */

typedef struct pcase {
  int algo;
  int nkeys;
  union {
    sluice_gcra_params g;
    sluice_window_params w;
    sluice_penalty_params p;
    sluice_lease_params l;
    sluice_distinct_params d;
  } u;
  int64_t tick; /* typical time step */
} pcase;

static sluice_key pkeys[SLUICE_GROUP_MAX];
static char pnames[SLUICE_GROUP_MAX][8];

static void init_keys(void) {
  int i;
  for (i = 0; i < SLUICE_GROUP_MAX; i++) {
    snprintf(pnames[i], sizeof pnames[i], "{p}%d", i);
    pkeys[i].data = pnames[i];
    pkeys[i].len = strlen(pnames[i]);
  }
}

static void random_case(rng *r, int algo, pcase *c) {
  memset(c, 0, sizeof *c);
  c->algo = algo;
  c->nkeys = 1;
  switch (algo) {
  case SLUICE_ALGO_GCRA:
    c->u.g.rate = rng_range(r, 1, 10);
    c->u.g.period_ns = rng_range(r, 1, 1000) * (rng_range(r, 0, 1) ? 1 : 997);
    c->u.g.burst = rng_range(r, 1, 20);
    c->tick = c->u.g.period_ns / c->u.g.rate + 1;
    break;
  case SLUICE_ALGO_SWINDOW:
  case SLUICE_ALGO_FWINDOW:
    c->u.w.limit = rng_range(r, 1, 20);
    c->u.w.window_ns = rng_range(r, 1, 1000);
    c->tick = c->u.w.window_ns / 4 + 1;
    break;
  case SLUICE_ALGO_PENALTY: {
    int i;
    c->u.p.strike_threshold = rng_range(r, 1, 5);
    c->u.p.strike_window_ns = rng_range(r, 1, 50) * MS + rng_range(r, 0, 1);
    for (i = 0; i < 3; i++)
      c->u.p.box_ns[i] = rng_range(r, 0, 9) == 0
                             ? SLUICE_FOREVER
                             : rng_range(r, 1, 80) * MS + rng_range(r, 0, 3);
    c->u.p.offense_ttl_ns = rng_range(r, 1, 200) * MS + rng_range(r, 0, 3);
    c->tick = 3 * MS;
    break;
  }
  case SLUICE_ALGO_LEASE:
    c->u.l.max = rng_range(r, 1, 4);
    c->u.l.ttl_ns = rng_range(r, 1, 1000);
    c->nkeys = (int)c->u.l.max;
    c->tick = c->u.l.ttl_ns / 3 + 1;
    break;
  default:
    c->u.d.threshold = rng_range(r, 1, 20);
    c->u.d.window_ns = rng_range(r, 1, 1000);
    c->tick = c->u.d.window_ns / 4 + 1;
    break;
  }
}

static sluice_op random_op(rng *r, const pcase *c) {
  sluice_op op;
  memset(&op, 0, sizeof op);
  op.algo = c->algo;
  op.nkeys = c->nkeys;
  op.keys = pkeys;
  op.params = &c->u;
  switch (c->algo) {
  case SLUICE_ALGO_GCRA: {
    int64_t mx = c->u.g.burst < 5 ? c->u.g.burst : 5;
    op.kind = rng_range(r, 0, 5) == 0 ? SLUICE_OP_PEEK : SLUICE_OP_CONSUME;
    op.arg = rng_range(r, op.kind == SLUICE_OP_PEEK ? 0 : 1, mx);
    if (rng_range(r, 0, 15) == 0)
      op.arg = c->u.g.burst;
    break;
  }
  case SLUICE_ALGO_SWINDOW:
  case SLUICE_ALGO_FWINDOW: {
    int64_t k = rng_range(r, 0, 9), mx = c->u.w.limit < 4 ? c->u.w.limit : 4;
    op.kind = k == 0 ? SLUICE_OP_PEEK : k == 1 ? SLUICE_OP_COUNT
                                               : SLUICE_OP_CONSUME;
    op.arg = rng_range(r, op.kind == SLUICE_OP_PEEK ? 0 : 1, mx);
    break;
  }
  case SLUICE_ALGO_PENALTY: {
    int64_t k = rng_range(r, 0, 19);
    op.kind = k < 14   ? SLUICE_OP_STRIKE
              : k < 17 ? SLUICE_OP_CHECK
              : k < 19 ? SLUICE_OP_TRIP
                       : SLUICE_OP_RELEASE;
    op.arg = op.kind == SLUICE_OP_TRIP ? rng_range(r, 1, 3) : 0;
    break;
  }
  case SLUICE_ALGO_LEASE: {
    int64_t k = rng_range(r, 0, 9);
    op.kind = k < 6 ? SLUICE_OP_ACQUIRE
              : k < 8 ? SLUICE_OP_LEASE_RELEASE
                      : SLUICE_OP_RENEW;
    op.id = (uint64_t)rng_range(r, 1, 6);
    break;
  }
  default:
    op.kind = rng_range(r, 0, 4) == 0 ? SLUICE_OP_PEEK : SLUICE_OP_ADD;
    op.id = rng_next(r);
    break;
  }
  return op;
}

/* The read-only probe of each algorithm. */
static sluice_op probe_op(const pcase *c) {
  sluice_op op;
  memset(&op, 0, sizeof op);
  op.algo = c->algo;
  op.nkeys = c->nkeys;
  op.keys = pkeys;
  op.params = &c->u;
  switch (c->algo) {
  case SLUICE_ALGO_PENALTY:
    op.kind = SLUICE_OP_CHECK;
    break;
  case SLUICE_ALGO_LEASE:
    op.kind = SLUICE_OP_ACQUIRE; /* a stranger's acquire: sees held slots */
    op.id = UINT64_C(0xfeedface);
    break;
  default:
    op.kind = SLUICE_OP_PEEK;
    break;
  }
  return op;
}

static int64_t next_time(rng *r, const pcase *c, int64_t t) {
  switch (rng_range(r, 0, 5)) {
  case 0:
    return t;
  case 1:
    return t + 1;
  case 2:
    return t + rng_range(r, 0, 10 * c->tick);
  default:
    return t + rng_range(r, 0, c->tick);
  }
}

/* Step and insist on success. */
static void run(const sluice_op *op, const sluice_state *in, sluice_state *out,
                int64_t t, sluice_verdict *v) {
  int rc = sluice__op_step(op, in, out, t, v);
  cr_assert_eq(rc, SLUICE_OK, "algo %d kind %d: %s", op->algo, op->kind,
               sluice_err_name(rc));
}

/* Do two group states behave identically from time t on?  Runs the same
** random trace from both and compares every verdict. */
static int same_behaviour(rng *r, const pcase *c, const sluice_state *a,
                          const sluice_state *b, int64_t t, int steps) {
  sluice_state x[SLUICE_GROUP_MAX], y[SLUICE_GROUP_MAX];
  int i;
  memcpy(x, a, sizeof(sluice_state) * (size_t)c->nkeys);
  memcpy(y, b, sizeof(sluice_state) * (size_t)c->nkeys);
  for (i = 0; i < steps; i++) {
    sluice_op op = i == 0 ? probe_op(c) : random_op(r, c);
    sluice_verdict vx, vy;
    if (i > 0)
      t = next_time(r, c, t);
    run(&op, x, x, t, &vx);
    run(&op, y, y, t, &vy);
    if (!verdict_eq(&vx, &vy))
      return 0;
  }
  return 1;
}

static const int all_algos[] = {SLUICE_ALGO_GCRA,    SLUICE_ALGO_SWINDOW,
                                SLUICE_ALGO_FWINDOW, SLUICE_ALGO_PENALTY,
                                SLUICE_ALGO_LEASE,   SLUICE_ALGO_DISTINCT};

/* ------------------------------------------------------ over-admission --- */

typedef struct adm {
  int64_t t; /* effective time */
  int64_t cost;
} adm;

/* Every pair i <= j of admissions (sorted by effective time):
** (sum of costs in [t_i, t_j] - burst) * period <= rate * (t_j - t_i). */
static void check_bound(const sluice_gcra_params *p, const adm *a, int n,
                        const char *what) {
  int i, j;
  for (i = 0; i < n; i++) {
    i128 sum = 0;
    for (j = i; j < n; j++) {
      sum += a[j].cost;
      if ((sum - p->burst) * p->period_ns <= (i128)p->rate * (a[j].t - a[i].t))
        continue;
      cr_assert((sum - p->burst) * p->period_ns <=
                    (i128)p->rate * (a[j].t - a[i].t),
                "%s: over-admitted %lld points in [%lld, %lld] (rate %lld / "
                "%lld ns, burst %lld)",
                what, (long long)sum, (long long)a[i].t, (long long)a[j].t,
                (long long)p->rate, (long long)p->period_ns,
                (long long)p->burst);
    }
  }
}

Test(props, gcra_never_over_admits_clock_backwards) {
  static adm a[1000];
  rng r = {1};
  int trial;
  init_keys();
  for (trial = 0; trial < 40; trial++) {
    pcase c;
    sluice_state s = zst();
    int64_t t = rng_range(&r, 0, INT64_C(1) << 40), eff = 0;
    int n = 0, i;
    random_case(&r, SLUICE_ALGO_GCRA, &c);
    for (i = 0; i < 1000; i++) {
      sluice_op op = random_op(&r, &c);
      sluice_verdict v;
      int64_t now = t;
      t = next_time(&r, &c, t);
      /* One step in six goes back by up to 20 ticks. */
      if (rng_range(&r, 0, 5) == 0)
        now = t - rng_range(&r, 0, 20 * c.tick);
      else
        now = t;
      if (now < 0)
        now = 0;
      run(&op, &s, &s, now, &v);
      if (v.allowed && op.kind == SLUICE_OP_CONSUME) {
        /* Admitted at a time before an earlier admission: it counts at
        ** that earlier admission's time (the running maximum). */
        if (now > eff)
          eff = now;
        a[n].t = eff;
        a[n].cost = op.arg;
        n++;
      }
    }
    check_bound(&c.u.g, a, n, "gcra trace");
  }
}

Test(props, gcra_group_never_over_admits_either_bucket) {
  static adm a[3][800];
  rng r = {2};
  int trial;
  init_keys();
  for (trial = 0; trial < 15; trial++) {
    sluice_gcra_params ps[3];
    sluice_state st[3];
    int64_t t = rng_range(&r, 0, SEC), n = 0;
    int i, k;
    for (k = 0; k < 3; k++) {
      ps[k].rate = rng_range(&r, 1, 9);
      ps[k].period_ns = rng_range(&r, 10, 2000);
      ps[k].burst = rng_range(&r, 3, 30);
      st[k] = zst();
    }
    for (i = 0; i < 800; i++) {
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 3, pkeys, ps,
                      rng_range(&r, 1, 3), 0};
      sluice_verdict v;
      t += rng_range(&r, 0, 300);
      run(&op, st, st, t, &v);
      if (v.allowed) {
        for (k = 0; k < 3; k++) {
          a[k][n].t = t;
          a[k][n].cost = op.arg;
        }
        n++;
      }
    }
    for (k = 0; k < 3; k++)
      check_bound(&ps[k], a[k], (int)n, "group bucket");
  }
}

/* Through a limiter: a manual clock jumping back and forth; the times the
** limiter decides at (v.now_ns) go backwards by at most
** SLUICE_CLOCK_SLACK_NS, and the bound holds on them. */
Test(props, limiter_clock_back_and_forth_never_over_admits) {
  static adm a[3000];
  const sluice_gcra_params p = {7, SEC, 20};
  const sluice_window_params wp = {5, SEC};
  sluice_clock *clk;
  sluice_limiter *lim;
  sluice_limiter_options o;
  rng r = {3};
  int64_t t = 1000 * SEC, last = 0, fw_idx = -1, fw_cnt = 0;
  int n = 0, i;
  memset(&o, 0, sizeof o);
  cr_assert_eq(sluice_clock_manual(t, &clk), SLUICE_OK);
  o.clock = clk;
  cr_assert_eq(sluice_limiter_open(&o, &lim, NULL, 0), SLUICE_OK);
  for (i = 0; i < 3000; i++) {
    sluice_verdict v;
    sluice_key fk = KEY("fw");
    sluice_op fop = {SLUICE_ALGO_FWINDOW, SLUICE_OP_CONSUME, 1, &fk, &wp, 1, 0};
    int64_t cost = rng_range(&r, 1, 4);
    if (rng_range(&r, 0, 3) == 0) {
      int64_t back = t - rng_range(&r, 0, 30 * SEC);
      cr_assert_eq(sluice_clock_set(clk, back < 0 ? 0 : back), SLUICE_OK);
    } else {
      t += rng_range(&r, 0, 300 * MS);
      cr_assert_eq(sluice_clock_set(clk, t), SLUICE_OK);
    }
    cr_assert_eq(sluice_limiter_take(lim, "k", 1, &p, cost, &v), SLUICE_OK);
    cr_assert_geq(v.now_ns, last - SLUICE_CLOCK_SLACK_NS,
                  "limiter time went backwards past the slack");
    last = v.now_ns > last ? v.now_ns : last;
    if (v.allowed) {
      a[n].t = v.now_ns;
      a[n].cost = cost;
      n++;
    }
    cr_assert_eq(op_decide(lim, &fop, SLUICE_NOW, &v), SLUICE_OK);
    cr_assert_geq(v.now_ns, last - SLUICE_CLOCK_SLACK_NS);
    last = v.now_ns > last ? v.now_ns : last;
    /* A step back within the slack holds the window it left (window.c):
    ** admissions count against the latest window reached. */
    if (last / SEC != fw_idx) {
      fw_idx = last / SEC;
      fw_cnt = 0;
    }
    fw_cnt += v.allowed;
    cr_assert_leq(fw_cnt, 5, "fixed window over-admitted");
  }
  check_bound(&p, a, n, "limiter");
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

/* ------------------------------------------- denial consumes nothing --- */

Test(props, denial_and_reads_consume_nothing) {
  rng r = {4};
  size_t ai;
  int denials = 0;
  init_keys();
  for (ai = 0; ai < sizeof all_algos / sizeof all_algos[0]; ai++) {
    int trial;
    for (trial = 0; trial < 40; trial++) {
      pcase c;
      sluice_state s[SLUICE_GROUP_MAX], out[SLUICE_GROUP_MAX];
      int64_t t = rng_range(&r, 0, INT64_C(1) << 40);
      int i;
      random_case(&r, all_algos[ai], &c);
      memset(s, 0, sizeof s);
      for (i = 0; i < 300; i++) {
        sluice_op op = random_op(&r, &c);
        sluice_verdict v;
        int readonly = op.kind == SLUICE_OP_PEEK || op.kind == SLUICE_OP_CHECK;
        int denied_take = !readonly && (op.kind == SLUICE_OP_CONSUME ||
                                        op.kind == SLUICE_OP_ACQUIRE);
        t = next_time(&r, &c, t);
        run(&op, s, out, t, &v);
        if (readonly)
          cr_assert(memcmp(s, out, sizeof(sluice_state) * (size_t)c.nkeys) == 0,
                    "algo %d: a read changed the record", c.algo);
        if (denied_take && !v.allowed) {
          denials++;
          if (c.algo == SLUICE_ALGO_SWINDOW) {
            /* May store the rolled windows: must be the same counter. */
            cr_assert(same_behaviour(&r, &c, s, out, t, 12),
                      "swindow: a denial changed behaviour");
          } else {
            cr_assert(
                memcmp(s, out, sizeof(sluice_state) * (size_t)c.nkeys) == 0,
                "algo %d: a denial changed the record", c.algo);
          }
        }
        memcpy(s, out, sizeof(sluice_state) * (size_t)c.nkeys);
      }
    }
  }
  cr_assert_gt(denials, 1000);
}

/* ---------------------------------------- clock going backwards --- */

/* After a write at time w, a step at t' < w: if it admits, the step at w
** admits too and leaves the very same record (nothing refunded, nothing
** charged twice); a read at t' never shows more room than at w. */
Test(props, clock_backwards_no_refund_no_double_charge) {
  static const int algos[] = {SLUICE_ALGO_GCRA, SLUICE_ALGO_SWINDOW,
                              SLUICE_ALGO_FWINDOW};
  rng r = {5};
  size_t ai;
  int checked = 0;
  init_keys();
  for (ai = 0; ai < 3; ai++) {
    int trial;
    for (trial = 0; trial < 60; trial++) {
      pcase c;
      sluice_state s = zst();
      int64_t t = rng_range(&r, 0, INT64_C(1) << 40), w = -1;
      int i;
      random_case(&r, algos[ai], &c);
      for (i = 0; i < 300; i++) {
        sluice_op op = random_op(&r, &c);
        sluice_state o1, o2;
        sluice_verdict v1, v2, p1, p2;
        sluice_op pk = probe_op(&c);
        t = next_time(&r, &c, t);
        if (w >= 0 && op.kind == SLUICE_OP_CONSUME) {
          int64_t back = w - rng_range(&r, 1, 5 * c.tick);
          if (back < 0)
            back = 0;
          run(&op, &s, &o1, back, &v1);
          run(&op, &s, &o2, w, &v2);
          if (v1.allowed) {
            checked++;
            cr_assert(v2.allowed, "algo %d: admitted in the past only", c.algo);
            cr_assert(st_eq(&o1, &o2), "algo %d: charged differently in the past",
                      c.algo);
          }
          run(&pk, &s, &o1, back, &p1);
          run(&pk, &s, &o2, w, &p2);
          cr_assert_leq(p1.remaining, p2.remaining,
                        "algo %d: more room in the past", c.algo);
        }
        run(&op, &s, &o1, t, &v1);
        if (!st_eq(&o1, &s))
          w = t;
        s = o1;
      }
    }
  }
  cr_assert_gt(checked, 100);
}

/* -------------------------------------------- expiry == zeroed record --- */

Test(props, past_expiry_is_a_fresh_record) {
  rng r = {6};
  size_t ai;
  int live = 0, forever = 0;
  init_keys();
  for (ai = 0; ai < sizeof all_algos / sizeof all_algos[0]; ai++) {
    int trial;
    for (trial = 0; trial < 150; trial++) {
      pcase c;
      sluice_state s[SLUICE_GROUP_MAX];
      int64_t t = rng_range(&r, 0, INT64_C(1) << 40);
      int i, len = (int)rng_range(&r, 1, 40), k;
      random_case(&r, all_algos[ai], &c);
      memset(s, 0, sizeof s);
      for (i = 0; i < len; i++) {
        sluice_op op = random_op(&r, &c);
        sluice_verdict v;
        t = next_time(&r, &c, t);
        run(&op, s, s, t, &v);
      }
      for (k = 0; k < c.nkeys; k++) {
        sluice_op op = probe_op(&c);
        sluice_state z[SLUICE_GROUP_MAX];
        int64_t e = sluice__op_expiry(&op, k, &s[k]), at;
        memcpy(z, s, sizeof z);
        memset(&z[k], 0, sizeof z[k]);
        if (e == SLUICE_FOREVER) {
          forever++;
          continue;
        }
        cr_assert_geq(e, 0);
        /* At the expiry and any time after it: indistinguishable. */
        at = e > t ? e : t;
        cr_assert(same_behaviour(&r, &c, s, z, at, 25),
                  "algo %d key %d: record at its expiry %lld differs from a "
                  "fresh one",
                  c.algo, k, (long long)e);
        cr_assert(same_behaviour(&r, &c, s, z, at + rng_range(&r, 0, 5 * c.tick),
                                 25),
                  "algo %d: record past its expiry differs from a fresh one",
                  c.algo);
        /* 1 ns before it the record still matters (else a backend could
        ** have dropped it earlier: harmless, but the expiry would be late;
        ** and a record that differs must never be dropped). */
        if (e > t && e > 0) {
          sluice_verdict vs, vz;
          sluice_state o[SLUICE_GROUP_MAX];
          live++;
          run(&op, s, o, e - 1, &vs);
          run(&op, z, o, e - 1, &vz);
          cr_assert(!verdict_eq(&vs, &vz),
                    "algo %d: expiry %lld is later than needed", c.algo,
                    (long long)e);
        }
      }
    }
  }
  cr_assert_gt(live, 300);
  cr_assert_gt(forever, 0);
}

/* ------------------------------------------------------ additivity --- */

Test(props, cost_additivity_at_one_instant) {
  static const int algos[] = {SLUICE_ALGO_GCRA, SLUICE_ALGO_SWINDOW,
                              SLUICE_ALGO_FWINDOW};
  rng r = {7};
  size_t ai;
  int both = 0;
  init_keys();
  for (ai = 0; ai < 3; ai++) {
    int trial;
    for (trial = 0; trial < 400; trial++) {
      pcase c;
      sluice_state s = zst(), sa, sab, s2;
      sluice_verdict v, va, vb, vab;
      int64_t t = rng_range(&r, 0, INT64_C(1) << 40), cap, a, b;
      int i, len = (int)rng_range(&r, 0, 30);
      int kind;
      random_case(&r, algos[ai], &c);
      cap = c.algo == SLUICE_ALGO_GCRA ? c.u.g.burst : c.u.w.limit;
      for (i = 0; i < len; i++) {
        sluice_op op = random_op(&r, &c);
        t = next_time(&r, &c, t);
        run(&op, &s, &s, t, &v);
      }
      if (cap < 2)
        continue;
      t = next_time(&r, &c, t);
      kind = c.algo != SLUICE_ALGO_GCRA && rng_range(&r, 0, 2) == 0
                 ? SLUICE_OP_COUNT
                 : SLUICE_OP_CONSUME;
      a = rng_range(&r, 1, cap - 1);
      b = rng_range(&r, 1, cap - a);
      {
        sluice_op op = {c.algo, kind, 1, pkeys, &c.u, a, 0};
        run(&op, &s, &sa, t, &va);
        op.arg = b;
        run(&op, &sa, &s2, t, &vb);
        op.arg = a + b;
        run(&op, &s, &sab, t, &vab);
      }
      if (kind == SLUICE_OP_COUNT) {
        cr_assert(st_eq(&s2, &sab), "algo %d: COUNT a; COUNT b != COUNT a+b",
                  c.algo);
        cr_assert_eq(vb.allowed, vab.allowed);
        cr_assert_eq(vb.remaining, vab.remaining);
        continue;
      }
      cr_assert_eq(vab.allowed, va.allowed && vb.allowed,
                   "algo %d: a+b admitted %d, a %d then b %d", c.algo,
                   vab.allowed, va.allowed, vb.allowed);
      if (vab.allowed) {
        both++;
        cr_assert(st_eq(&s2, &sab), "algo %d: charging a then b != a+b", c.algo);
        cr_assert_eq(vb.remaining, vab.remaining);
        cr_assert_eq(vb.reset_ns, vab.reset_ns);
      }
    }
  }
  cr_assert_gt(both, 200);
}

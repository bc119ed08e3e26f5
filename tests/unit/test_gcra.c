/*
** GCRA (cost-weighted token bucket): spec section 6 examples worked by hand,
** exact equivalence with an exact-rational token bucket (tb_model.h), rates
** whose emission interval is not a whole ns, tenant + key groups, parameter
** validation and the int64 boundaries.
*/
#include "tb_model.h"
#include "op.h"

static int step(const sluice_gcra_params *p, sluice_state *s, int64_t now,
                int kind, int64_t cost, sluice_verdict *v) {
  sluice_state out;
  int rc = sluice__gcra_step(p, s, now, kind, cost, &out, v);
  if (rc == SLUICE_OK)
    *s = out;
  return rc;
}

/* Consume and insist on the call succeeding; returns v.allowed. */
static int take(const sluice_gcra_params *p, sluice_state *s, int64_t now,
                int64_t cost, sluice_verdict *v) {
  cr_assert_eq(step(p, s, now, SLUICE_OP_CONSUME, cost, v), SLUICE_OK);
  return v->allowed;
}

/* -------------------------------------------------------- spec examples --- */

/* Growth tier of the spec: 3000 points/min, burst 3000. */
static const sluice_gcra_params growth = {3000, 60 * SEC, 3000};

Test(gcra, bucket_starts_full) {
  static const int64_t nows[] = {0, 1, 999, 1000 * SEC, INT64_C(1) << 60};
  size_t i;
  for (i = 0; i < sizeof nows / sizeof nows[0]; i++) {
    sluice_state s = zst();
    sluice_verdict v;
    cr_assert_eq(step(&growth, &s, nows[i], SLUICE_OP_PEEK, 0, &v), SLUICE_OK);
    cr_assert_eq(v.allowed, 1);
    cr_assert_eq(v.remaining, 3000);
    cr_assert_eq(v.reset_ns, 0);
    cr_assert_eq(v.limit, 3000);
    cr_assert(take(&growth, &s, nows[i], 3000, &v));
    cr_assert_eq(v.remaining, 0);
    cr_assert_eq(v.reset_ns, 60 * SEC);
    cr_assert(!take(&growth, &s, nows[i], 1, &v));
  }
}

Test(gcra, refills_50_points_per_second) {
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t0 = 5000 * SEC;
  cr_assert(take(&growth, &s, t0, 3000, &v));
  /* 50 points/s: one point every 20 ms exactly. */
  cr_assert_eq(step(&growth, &s, t0 + 20 * MS - 1, SLUICE_OP_PEEK, 0, &v), 0);
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(step(&growth, &s, t0 + 20 * MS, SLUICE_OP_PEEK, 0, &v), 0);
  cr_assert_eq(v.remaining, 1);
  cr_assert_eq(step(&growth, &s, t0 + SEC, SLUICE_OP_PEEK, 0, &v), 0);
  cr_assert_eq(v.remaining, 50);
  cr_assert_eq(v.reset_ns, 59 * SEC);
  cr_assert_eq(step(&growth, &s, t0 + 12 * SEC, SLUICE_OP_PEEK, 0, &v), 0);
  cr_assert_eq(v.remaining, 600);
  cr_assert_eq(step(&growth, &s, t0 + 60 * SEC, SLUICE_OP_PEEK, 0, &v), 0);
  cr_assert_eq(v.remaining, 3000);
  cr_assert_eq(v.reset_ns, 0);
  /* Capped at capacity: waiting longer gives no more. */
  cr_assert_eq(step(&growth, &s, t0 + 3600 * SEC, SLUICE_OP_PEEK, 0, &v), 0);
  cr_assert_eq(v.remaining, 3000);
}

Test(gcra, reconcile_with_zero_left_retries_after_exactly_200ms) {
  sluice_state s = zst(), before;
  sluice_verdict v;
  int64_t t0 = 777 * SEC + 123;
  int i;
  /* 300 reconciles of 10 points empty the bucket. */
  for (i = 1; i <= 300; i++) {
    cr_assert(take(&growth, &s, t0, 10, &v), "reconcile %d", i);
    cr_assert_eq(v.remaining, 3000 - 10 * i);
  }
  before = s;
  cr_assert(!take(&growth, &s, t0, 10, &v));
  cr_assert(st_eq(&s, &before), "a denial must not change the record");
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.retry_after_ns, 200 * MS);
  cr_assert_eq(v.reset_ns, 60 * SEC);
  cr_assert_eq(v.limit, 3000);
  /* 1 ns early: still denied, 1 ns to go. */
  cr_assert(!take(&growth, &s, t0 + 200 * MS - 1, 10, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  cr_assert_eq(v.remaining, 9);
  /* Exactly on time: admitted, empty again. */
  cr_assert(take(&growth, &s, t0 + 200 * MS, 10, &v));
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.retry_after_ns, 0);
  cr_assert_eq(v.reset_ns, 60 * SEC);
}

Test(gcra, fractional_tokens_fields) {
  /* 3 points / 10 s, burst 5: a point every 3.333... s. */
  const sluice_gcra_params p = {3, 10 * SEC, 5};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert(take(&p, &s, 0, 5, &v));
  cr_assert_eq(v.reset_ns, 50 * SEC / 3 + 1); /* ceil(16.666..s) */
  /* At 4 s: 1.2 points.  Remaining floors, retry for 2 is ceil(0.8 / 0.3 s). */
  cr_assert(!take(&p, &s, 4 * SEC, 2, &v));
  cr_assert_eq(v.remaining, 1);
  cr_assert_eq(v.retry_after_ns, INT64_C(2666666667));
  cr_assert_eq(v.reset_ns, 50 * SEC / 3 + 1 - 4 * SEC);
  cr_assert(!take(&p, &s, 4 * SEC + INT64_C(2666666666), 2, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  cr_assert(take(&p, &s, 4 * SEC + INT64_C(2666666667), 2, &v));
  cr_assert_eq(v.remaining, 0);
}

/* ------------------------------------------------------------ exactness --- */

Test(gcra, seven_per_second_exact_over_long_run) {
  /* T = 1e9/7 ns is not a whole number: a truncated interval drifts by
  ** about 1 point every 7 s.  Admission j after draining at t0 must happen
  ** exactly at t0 + ceil(j * 1e9 / 7). */
  const sluice_gcra_params p = {7, SEC, 7};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t0 = 1000 * SEC, now = t0, j;
  cr_assert(take(&p, &s, t0, 7, &v));
  for (j = 1; j <= 200000; j++) {
    int64_t due = t0 + (int64_t)q_ceil((i128)j * SEC, 7);
    cr_assert(!take(&p, &s, now, 1, &v));
    cr_assert_eq(now + v.retry_after_ns, due, "admission %lld", (long long)j);
    if (v.retry_after_ns > 1)
      cr_assert(!take(&p, &s, due - 1, 1, &v));
    now = due;
    cr_assert(take(&p, &s, now, 1, &v), "admission %lld", (long long)j);
  }
  /* One idle second after the last admission the bucket is full again and
  ** holds exactly 7. */
  cr_assert_eq(step(&p, &s, now + SEC, SLUICE_OP_PEEK, 0, &v), SLUICE_OK);
  cr_assert_eq(v.remaining, 7);
}

Test(gcra, seven_per_second_whole_seconds) {
  /* Drain, then at every whole second exactly 7 points are back. */
  const sluice_gcra_params p = {7, SEC, 7};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t k;
  cr_assert(take(&p, &s, 0, 7, &v));
  for (k = 1; k <= 50000; k++) {
    cr_assert(take(&p, &s, k * SEC, 7, &v), "second %lld", (long long)k);
    cr_assert_eq(v.remaining, 0);
    cr_assert_eq(v.reset_ns, SEC);
    cr_assert(!take(&p, &s, k * SEC, 1, &v));
    cr_assert_eq(v.retry_after_ns, 142857143); /* ceil(1e9 / 7) */
  }
}

Test(gcra, matches_exact_token_bucket_model) {
  static const sluice_gcra_params ps[] = {
      {7, SEC, 7},          {3000, 60 * SEC, 3000}, {1, SEC, 1},
      {3, SEC + 1, 11},     {1000, 1, 5},           {INT64_C(1) << 32, 1, 3},
      {13, 17 * MS, 1000}, {1, INT64_C(1) << 40, 4096}};
  size_t k;
  for (k = 0; k < sizeof ps / sizeof ps[0]; k++) {
    const sluice_gcra_params *p = &ps[k];
    rng r = {0x5eed0000 + k};
    sluice_state s = zst();
    tb_model m = {0, 0, 0};
    int64_t now = (int64_t)(rng_next(&r) % (1000 * SEC));
    int64_t maxgap = (int64_t)q_ceil((i128)p->period_ns * 3, p->rate) + 2;
    int i;
    for (i = 0; i < 4000; i++) {
      sluice_verdict v, ev;
      int kind = rng_range(&r, 0, 5) == 0 ? SLUICE_OP_PEEK : SLUICE_OP_CONSUME;
      int64_t cost = rng_range(&r, kind == SLUICE_OP_PEEK ? 0 : 1,
                               p->burst < 8 ? p->burst : 8);
      if (rng_range(&r, 0, 9) == 0)
        cost = p->burst;
      switch (rng_range(&r, 0, 3)) {
      case 0:
        break; /* same instant */
      case 1:
        now += rng_range(&r, 1, 3);
        break;
      default:
        now += rng_range(&r, 0, maxgap);
        break;
      }
      tb_group(p, &m, 1, now, kind, cost, &ev);
      cr_assert_eq(step(p, &s, now, kind, cost, &v), SLUICE_OK);
      cr_assert(verdict_eq(&v, &ev),
                "params %zu op %d: allowed %d/%d rem %lld/%lld retry %lld/%lld "
                "reset %lld/%lld",
                k, i, v.allowed, ev.allowed, (long long)v.remaining,
                (long long)ev.remaining, (long long)v.retry_after_ns,
                (long long)ev.retry_after_ns, (long long)v.reset_ns,
                (long long)ev.reset_ns);
    }
  }
}

Test(gcra, extreme_rate_and_period) {
  /* rate 2^32 per ns (interval 2^-32 ns) and burst * period = 2^62. */
  const sluice_gcra_params fast = {INT64_C(1) << 32, 1, INT64_C(1) << 40};
  const sluice_gcra_params slow = {1, INT64_C(1) << 62, 1};
  sluice_state s = zst();
  sluice_verdict v;
  cr_assert_eq(sluice__gcra_params_check(&fast), SLUICE_OK);
  cr_assert_eq(sluice__gcra_params_check(&slow), SLUICE_OK);
  cr_assert(take(&fast, &s, 10, INT64_C(1) << 40, &v));
  cr_assert_eq(v.reset_ns, 256); /* 2^40 points at 2^32 per ns */
  cr_assert(!take(&fast, &s, 10, 1, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  cr_assert(take(&fast, &s, 11, INT64_C(1) << 32, &v));
  cr_assert(!take(&fast, &s, 11, 1, &v));
  s = zst();
  cr_assert(take(&slow, &s, 0, 1, &v));
  cr_assert_eq(v.reset_ns, INT64_C(1) << 62);
  cr_assert(!take(&slow, &s, (INT64_C(1) << 62) - 1, 1, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  cr_assert(take(&slow, &s, INT64_C(1) << 62, 1, &v));
}

/* ---------------------------------------------------------------- groups --- */

static const sluice_key gkeys[2] = {{"{t:acme}tenant", 14},
                                    {"{t:acme}key:k1", 14}};

static int gstep(const sluice_gcra_params *ps, sluice_state *st, int64_t now,
                 int kind, int64_t cost, sluice_verdict *v) {
  sluice_op op = {SLUICE_ALGO_GCRA, kind, 2, gkeys, ps, cost, 0};
  sluice_state out[2];
  int rc = sluice__op_step(&op, st, out, now, v);
  if (rc == SLUICE_OK)
    memcpy(st, out, sizeof out);
  return rc;
}

Test(gcra_group, both_charged_or_neither) {
  /* Tenant 10 points, key 3 points, both 1 point/s. */
  const sluice_gcra_params ps[2] = {{1, SEC, 10}, {1, SEC, 3}};
  sluice_state st[2] = {{{0, 0}}, {{0, 0}}}, before[2];
  sluice_verdict v, pv;
  int i;
  for (i = 0; i < 3; i++) {
    cr_assert_eq(gstep(ps, st, 100 * SEC, SLUICE_OP_CONSUME, 1, &v), 0);
    cr_assert(v.allowed);
    cr_assert_eq(v.binding, 1, "the key bucket has fewer points left");
    cr_assert_eq(v.remaining, 2 - i);
    cr_assert_eq(v.limit, 3);
  }
  memcpy(before, st, sizeof st);
  cr_assert_eq(gstep(ps, st, 100 * SEC, SLUICE_OP_CONSUME, 1, &v), 0);
  cr_assert(!v.allowed);
  cr_assert_eq(v.binding, 1);
  cr_assert_eq(v.retry_after_ns, SEC);
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.limit, 3);
  cr_assert(st_eq(&st[0], &before[0]) && st_eq(&st[1], &before[1]),
            "a denied group consumes from neither bucket");
  /* The tenant was charged 3, not 4. */
  cr_assert_eq(sluice__gcra_step(&ps[0], &st[0], 100 * SEC, SLUICE_OP_PEEK, 0,
                                &before[0], &pv),
               0);
  cr_assert_eq(pv.remaining, 7);
}

Test(gcra_group, tenant_binding_when_stricter) {
  /* Tenant nearly empty, key full: the tenant denies and is reported. */
  const sluice_gcra_params ps[2] = {{1, SEC, 4}, {5, SEC, 100}};
  sluice_state st[2] = {{{0, 0}}, {{0, 0}}};
  sluice_verdict v;
  cr_assert_eq(gstep(ps, st, 0, SLUICE_OP_CONSUME, 3, &v), 0);
  cr_assert(v.allowed);
  cr_assert_eq(v.binding, 0);
  cr_assert_eq(v.remaining, 1);
  cr_assert_eq(v.limit, 4);
  cr_assert_eq(v.reset_ns, 3 * SEC);
  cr_assert_eq(gstep(ps, st, 0, SLUICE_OP_CONSUME, 3, &v), 0);
  cr_assert(!v.allowed);
  cr_assert_eq(v.binding, 0);
  cr_assert_eq(v.retry_after_ns, 2 * SEC);
  cr_assert_eq(v.remaining, 1);
  cr_assert_eq(v.limit, 4);
  /* The key bucket was not charged by the denial: 97 left. */
  {
    sluice_state o;
    sluice_verdict k;
    cr_assert_eq(sluice__gcra_step(&ps[1], &st[1], 0, SLUICE_OP_PEEK, 0, &o, &k),
                 0);
    cr_assert_eq(k.remaining, 97);
  }
}

Test(gcra_group, retry_is_the_longest_wait) {
  /* Both empty; tenant refills 1/s, key 1 per 4 s. */
  const sluice_gcra_params ps[2] = {{1, SEC, 2}, {1, 4 * SEC, 2}};
  sluice_state st[2] = {{{0, 0}}, {{0, 0}}};
  sluice_verdict v;
  cr_assert_eq(gstep(ps, st, 0, SLUICE_OP_CONSUME, 2, &v), 0);
  cr_assert(v.allowed);
  cr_assert_eq(v.binding, 0, "tie on points left: lowest index");
  cr_assert_eq(gstep(ps, st, 0, SLUICE_OP_CONSUME, 1, &v), 0);
  cr_assert(!v.allowed);
  cr_assert_eq(v.binding, 1);
  cr_assert_eq(v.retry_after_ns, 4 * SEC);
  cr_assert_eq(v.reset_ns, 8 * SEC);
  /* At 1 s the tenant would admit but the key still says no. */
  cr_assert_eq(gstep(ps, st, SEC, SLUICE_OP_CONSUME, 1, &v), 0);
  cr_assert(!v.allowed);
  cr_assert_eq(v.retry_after_ns, 3 * SEC);
  cr_assert_eq(gstep(ps, st, 4 * SEC, SLUICE_OP_CONSUME, 1, &v), 0);
  cr_assert(v.allowed);
}

Test(gcra_group, matches_model_for_random_groups) {
  rng r = {42};
  int g;
  for (g = 0; g < 40; g++) {
    int n = (int)rng_range(&r, 2, 5), i, k;
    sluice_gcra_params ps[5];
    sluice_key ks[5];
    char names[5][8];
    tb_model ms[5];
    sluice_state st[5];
    int64_t now = rng_range(&r, 0, 1000 * SEC);
    for (i = 0; i < n; i++) {
      ps[i].rate = rng_range(&r, 1, 20);
      ps[i].period_ns = rng_range(&r, 1, 3) * SEC + rng_range(&r, 0, 1);
      ps[i].burst = rng_range(&r, 5, 40);
      snprintf(names[i], sizeof names[i], "{t}k%d", i);
      ks[i].data = names[i];
      ks[i].len = strlen(names[i]);
      memset(&ms[i], 0, sizeof ms[i]);
      st[i] = zst();
    }
    for (k = 0; k < 400; k++) {
      sluice_verdict v, ev;
      sluice_state out[5];
      int kind = rng_range(&r, 0, 6) == 0 ? SLUICE_OP_PEEK : SLUICE_OP_CONSUME;
      int64_t cost = rng_range(&r, 1, 5);
      sluice_op op = {SLUICE_ALGO_GCRA, kind, n, ks, ps, cost, 0};
      now += rng_range(&r, 0, SEC / 2);
      tb_group(ps, ms, n, now, kind, cost, &ev);
      cr_assert_eq(sluice__op_step(&op, st, out, now, &v), SLUICE_OK);
      cr_assert(verdict_eq(&v, &ev), "group %d op %d binding %d/%d", g, k,
                v.binding, ev.binding);
      if (!v.allowed)
        for (i = 0; i < n; i++)
          cr_assert(st_eq(&out[i], &st[i]));
      memcpy(st, out, sizeof(sluice_state) * (size_t)n);
    }
  }
}

/* A single bucket has its own code path (no group loops); it must decide
** exactly as the group step does.  In a group whose second bucket is so
** large that it never binds (always fits, always has more points left),
** the first bucket's verdict and record are the single bucket's. */
Test(gcra_group, single_bucket_path_equals_group_step) {
  rng r = {7};
  int k;
  for (k = 0; k < 20000; k++) {
    sluice_gcra_params ps[2];
    sluice_key ks[2] = {{"{t}a", 4}, {"{t}b", 4}};
    sluice_state in[2], out1, out2[2];
    sluice_verdict v1, v2;
    int64_t now, cost;
    int kind = rng_range(&r, 0, 3) == 0 ? SLUICE_OP_PEEK : SLUICE_OP_CONSUME;
    ps[0].rate = rng_range(&r, 1, 1000);
    ps[0].period_ns = rng_range(&r, 1, 100) * (rng_range(&r, 0, 1) ? SEC : 1);
    ps[0].burst = rng_range(&r, 1, 100);
    ps[1].rate = (int64_t)1 << 32;
    ps[1].period_ns = 1;
    ps[1].burst = (int64_t)1 << 40;
    cost = rng_range(&r, 1, ps[0].burst);
    now = rng_range(&r, 0, 3) == 0 ? INT64_MAX - rng_range(&r, 0, 1000 * SEC)
                                   : rng_range(&r, 0, 1000 * SEC);
    /* Any record: fresh, near now, in the future, or a raw fraction. */
    in[0].w[0] = (uint64_t)now + (uint64_t)rng_range(&r, -100 * SEC, 100 * SEC);
    in[0].w[1] = (uint64_t)rng_range(&r, 0, ps[0].rate - 1);
    if (rng_range(&r, 0, 4) == 0)
      in[0] = zst();
    in[1] = zst();
    {
      sluice_op one = {SLUICE_ALGO_GCRA, kind, 1, ks, ps, cost, 0};
      sluice_op two = {SLUICE_ALGO_GCRA, kind, 2, ks, ps, cost, 0};
      cr_assert_eq(sluice__op_step(&one, in, &out1, now, &v1), SLUICE_OK);
      cr_assert_eq(sluice__op_step(&two, in, out2, now, &v2), SLUICE_OK);
    }
    cr_assert_eq(v2.binding, 0, "case %d: the large bucket bound", k);
    cr_assert(verdict_eq(&v1, &v2), "case %d: verdicts differ", k);
    cr_assert(st_eq(&out1, &out2[0]), "case %d: records differ", k);
  }
}

/* ------------------------------------------------------------ peek, time --- */

Test(gcra, peek_changes_nothing) {
  const sluice_gcra_params p = {1, SEC, 5};
  sluice_state s = zst(), o;
  sluice_verdict v;
  cr_assert(take(&p, &s, 10 * SEC, 4, &v));
  cr_assert_eq(sluice__gcra_step(&p, &s, 10 * SEC, SLUICE_OP_PEEK, 1, &o, &v), 0);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 1);
  cr_assert(st_eq(&o, &s));
  cr_assert_eq(sluice__gcra_step(&p, &s, 10 * SEC, SLUICE_OP_PEEK, 2, &o, &v), 0);
  cr_assert(!v.allowed);
  cr_assert_eq(v.retry_after_ns, SEC);
  cr_assert(st_eq(&o, &s));
}

Test(gcra, null_in_is_a_fresh_record) {
  const sluice_gcra_params p = {1, SEC, 5};
  sluice_state o;
  sluice_verdict v;
  cr_assert_eq(sluice__gcra_step(&p, NULL, 3 * SEC, SLUICE_OP_CONSUME, 5, &o, &v),
               SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.now_ns, 3 * SEC);
  cr_assert_eq(sluice__op_expiry(
                   &(sluice_op){SLUICE_ALGO_GCRA, 0, 1, &KEY("k"), &p, 1, 0}, 0,
                   &o),
               8 * SEC);
}

Test(gcra, clock_backwards_never_refunds) {
  const sluice_gcra_params p = {1, SEC, 5};
  sluice_state s = zst(), o;
  sluice_verdict v, w;
  cr_assert(take(&p, &s, 100 * SEC, 5, &v));
  /* Earlier times see the bucket emptier, never fuller. */
  cr_assert_eq(sluice__gcra_step(&p, &s, 90 * SEC, SLUICE_OP_PEEK, 0, &o, &w), 0);
  cr_assert_eq(w.remaining, 0);
  cr_assert(!take(&p, &s, 99 * SEC, 1, &v));
  cr_assert_eq(v.retry_after_ns, 2 * SEC);
  cr_assert(take(&p, &s, 101 * SEC, 1, &v));
  /* Charging in the past charges exactly once: 1 point back at 102 s. */
  cr_assert(!take(&p, &s, 50 * SEC, 1, &v));
  cr_assert(take(&p, &s, 102 * SEC, 1, &v));
  cr_assert(!take(&p, &s, 102 * SEC, 1, &v));
}

Test(gcra, expiry_is_when_full_again) {
  const sluice_gcra_params p = {7, SEC, 7};
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &KEY("k"), &p, 0, 0};
  sluice_state s = zst(), o;
  sluice_verdict v;
  int64_t e;
  cr_assert_eq(sluice__op_expiry(&op, 0, &s), 0);
  cr_assert(take(&p, &s, 10 * SEC, 3, &v)); /* TAT = 10 s + 3/7 s */
  e = sluice__op_expiry(&op, 0, &s);
  cr_assert_eq(e, 10 * SEC + 428571429); /* ceil(3e9 / 7) */
  cr_assert_eq(sluice__op_step(&op, &s, &o, e - 1, &v), 0);
  cr_assert_eq(v.remaining, 6);
  cr_assert_neq(v.reset_ns, 0);
  cr_assert_eq(sluice__op_step(&op, &s, &o, e, &v), 0);
  cr_assert_eq(v.remaining, 7);
  cr_assert_eq(v.reset_ns, 0);
}

/* ----------------------------------------------------------- validation --- */

Test(gcra, params_validation) {
  static const struct {
    sluice_gcra_params p;
    int rc;
  } cases[] = {
      {{1, 1, 1}, SLUICE_OK},
      {{0, SEC, 1}, SLUICE_EINVAL},
      {{-1, SEC, 1}, SLUICE_EINVAL},
      {{INT64_MIN, SEC, 1}, SLUICE_EINVAL},
      {{INT64_C(1) << 32, SEC, 1}, SLUICE_OK},
      {{(INT64_C(1) << 32) + 1, SEC, 1}, SLUICE_EINVAL},
      {{1, 0, 1}, SLUICE_EINVAL},
      {{1, -SEC, 1}, SLUICE_EINVAL},
      {{1, SLUICE_DURATION_MAX, 1}, SLUICE_OK},
      {{1, SLUICE_DURATION_MAX + 1, 1}, SLUICE_EINVAL},
      {{1, INT64_MAX, 1}, SLUICE_EINVAL},
      {{1, SEC, 0}, SLUICE_EINVAL},
      {{1, SEC, -5}, SLUICE_EINVAL},
      {{1, 1, SLUICE_COUNT_MAX}, SLUICE_OK},
      {{1, 1, SLUICE_COUNT_MAX + 1}, SLUICE_EINVAL},
      {{1, INT64_C(1) << 22, SLUICE_COUNT_MAX}, SLUICE_OK}, /* = 2^62 */
      {{1, (INT64_C(1) << 22) + 1, SLUICE_COUNT_MAX}, SLUICE_EINVAL},
      {{1, INT64_C(1) << 61, 2}, SLUICE_OK},
      {{1, INT64_C(1) << 61, 3}, SLUICE_EINVAL},
  };
  size_t i;
  cr_assert_eq(sluice__gcra_params_check(NULL), SLUICE_EINVAL);
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sluice_state o;
    sluice_verdict v;
    cr_assert_eq(sluice__gcra_params_check(&cases[i].p), cases[i].rc, "case %zu",
                 i);
    cr_assert_eq(sluice__gcra_step(&cases[i].p, NULL, 0, SLUICE_OP_CONSUME, 1,
                                  &o, &v),
                 cases[i].rc, "step case %zu", i);
  }
}

Test(gcra, cost_validation) {
  const sluice_gcra_params p = {1, SEC, 10};
  sluice_state o;
  sluice_verdict v;
#define RC(kind, cost) sluice__gcra_step(&p, NULL, SEC, (kind), (cost), &o, &v)
  cr_assert_eq(RC(SLUICE_OP_CONSUME, 0), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_CONSUME, -1), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_CONSUME, INT64_MIN), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_CONSUME, 11), SLUICE_ERANGE, "can never fit");
  cr_assert_eq(RC(SLUICE_OP_CONSUME, INT64_MAX), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_CONSUME, SLUICE_COUNT_MAX + 1), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_CONSUME, 10), SLUICE_OK);
  cr_assert_eq(RC(SLUICE_OP_PEEK, 0), SLUICE_OK);
  cr_assert_eq(RC(SLUICE_OP_PEEK, -1), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_PEEK, 11), SLUICE_ERANGE);
  cr_assert_eq(RC(SLUICE_OP_COUNT, 1), SLUICE_EINVAL, "COUNT is not a GCRA op");
  cr_assert_eq(RC(SLUICE_OP_STRIKE, 1), SLUICE_EINVAL);
  cr_assert_eq(RC(99, 1), SLUICE_EINVAL);
#undef RC
  cr_assert_eq(sluice__gcra_step(&p, NULL, -1, SLUICE_OP_CONSUME, 1, &o, &v),
               SLUICE_EINVAL, "negative now");
  cr_assert_eq(sluice__gcra_step(&p, NULL, 0, SLUICE_OP_CONSUME, 1, NULL, &v),
               SLUICE_EINVAL);
  cr_assert_eq(sluice__gcra_step(&p, NULL, 0, SLUICE_OP_CONSUME, 1, &o, NULL),
               SLUICE_EINVAL);
  cr_assert_eq(sluice__gcra_step(NULL, NULL, 0, SLUICE_OP_CONSUME, 1, &o, &v),
               SLUICE_EINVAL);
}

Test(gcra_group, cost_checked_against_smallest_burst) {
  const sluice_gcra_params ps[2] = {{1, SEC, 100}, {1, SEC, 3}};
  sluice_state st[2] = {{{0, 0}}, {{0, 0}}};
  sluice_verdict v;
  cr_assert_eq(gstep(ps, st, 0, SLUICE_OP_CONSUME, 4, &v), SLUICE_ERANGE);
  cr_assert_eq(gstep(ps, st, 0, SLUICE_OP_CONSUME, 3, &v), SLUICE_OK);
  /* One bad params entry fails the whole group. */
  {
    const sluice_gcra_params bad[2] = {{1, SEC, 100}, {0, SEC, 3}};
    cr_assert_eq(gstep(bad, st, 0, SLUICE_OP_CONSUME, 1, &v), SLUICE_EINVAL);
  }
}

/* -------------------------------------------------------- int64 limits --- */

Test(gcra, no_over_admission_near_int64_max) {
  /* The TAT of a charge made near INT64_MAX lies past INT64_MAX.  Whatever
  ** the record can hold, the bucket must not find the points back: over
  ** [now0, INT64_MAX] exactly burst + floor((INT64_MAX - now0) / 1 s) points
  ** can be admitted. */
  const sluice_gcra_params p = {1, SEC, 10};
  static const int64_t nows[] = {INT64_MAX - 5 * SEC, INT64_MAX - 1,
                                 INT64_MAX};
  size_t i;
  for (i = 0; i < sizeof nows / sizeof nows[0]; i++) {
    sluice_state s = zst();
    sluice_verdict v;
    int64_t admitted = 0, want = 10 + (INT64_MAX - nows[i]) / SEC;
    int k;
    cr_assert(take(&p, &s, nows[i], 10, &v), "fresh bucket at %zu", i);
    admitted += 10;
    for (k = 0; k < 20; k++)
      admitted += take(&p, &s, nows[i], 1, &v);
    cr_assert_eq(admitted, 10, "now0 = INT64_MAX - %lld: %lld admitted at once",
                 (long long)(INT64_MAX - nows[i]), (long long)admitted);
    for (k = 0; k < 20; k++)
      admitted += take(&p, &s, INT64_MAX, 1, &v);
    cr_assert_eq(admitted, want,
                 "now0 = INT64_MAX - %lld: admitted %lld, bound %lld",
                 (long long)(INT64_MAX - nows[i]), (long long)admitted,
                 (long long)want);
  }
}

Test(gcra, far_future_times_are_exact) {
  /* Well inside int64 but far from 0: times near 2^62 with a rate whose
  ** interval is fractional. */
  const sluice_gcra_params p = {7, SEC, 7};
  sluice_state s = zst();
  sluice_verdict v;
  int64_t t0 = (INT64_C(1) << 62) + 12345;
  cr_assert(take(&p, &s, t0, 7, &v));
  cr_assert(!take(&p, &s, t0 + 142857142, 1, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  cr_assert(take(&p, &s, t0 + 142857143, 1, &v));
  cr_assert_eq(step(&p, &s, t0 + 8 * SEC, SLUICE_OP_PEEK, 0, &v), 0);
  cr_assert_eq(v.remaining, 7);
}

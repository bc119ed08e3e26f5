/*
** Other limiters' published semantics, and the sluice GCRA parameters that
** reproduce them exactly (docs/policy.md "Writing other limiters' settings
** in sluice"): random request traces go through a model of each limiter,
** written from its documentation and its published algorithm, and through
** sluice__gcra_step() on the same times; every admission must agree.
**
** - nginx's limit_req with `rate=R r/s burst=B nodelay`, and
**   lua-resty-limit-traffic's resty.limit.req (rate R, burst B), which
**   computes the same thing: a per-key "excess" in thousandths of a
**   request, decayed by R per second since the key's last admitted
**   request, plus one request; refused when it would exceed B (and then
**   nothing is recorded).  A key first seen is admitted with excess 0.
**   So B + 1 requests fit at once: sluice burst = B + 1.
** - redis-cell's `CL.THROTTLE key MAX_BURST COUNT PERIOD` (GCRA after
**   Brandur Leach's throttled): emission interval T = PERIOD / COUNT,
**   tolerance (MAX_BURST + 1) * T; a request is refused when its
**   theoretical arrival time, less the tolerance, is still ahead.  Its
**   README: "max_burst of 15 ... 16 requests".  sluice burst = MAX_BURST +
**   1, rate COUNT per PERIOD.
*/
#include "unit.h"
#include "op.h"

/* nginx limit_req (ngx_http_limit_req_lookup, nodelay): milli-requests,
** millisecond clock. */
typedef struct ngx_model {
  int seen;
  int64_t excess, last_ms;
} ngx_model;

static int ngx_allow(ngx_model *m, int64_t rate_rps, int64_t burst,
                     int64_t now_ms) {
  int64_t ms, excess;
  if (!m->seen) { /* a new node: excess 0, admitted */
    m->seen = 1;
    m->excess = 0;
    m->last_ms = now_ms;
    return 1;
  }
  ms = now_ms - m->last_ms;
  excess = m->excess - rate_rps * 1000 * ms / 1000 + 1000;
  if (excess < 0)
    excess = 0;
  if (excess > burst * 1000)
    return 0; /* NGX_BUSY: nothing recorded */
  m->excess = excess;
  if (ms)
    m->last_ms = now_ms;
  return 1;
}

/* redis-cell (throttled's GCRA), quantity 1, nanoseconds. */
typedef struct cell_model {
  int seen;
  int64_t tat;
} cell_model;

static int cell_allow(cell_model *m, int64_t max_burst, int64_t count,
                      int64_t period_ns, int64_t now) {
  int64_t t = period_ns / count, dvt = t * (max_burst + 1);
  int64_t tat = m->seen && m->tat > now ? m->tat : now;
  int64_t new_tat = tat + t;
  if (now < new_tat - dvt)
    return 0;
  m->seen = 1;
  m->tat = new_tat;
  return 1;
}

static int sluice_allow(const sluice_gcra_params *p, sluice_state *s,
                        int64_t now) {
  sluice_state out;
  sluice_verdict v;
  cr_assert_eq(sluice__gcra_step(p, s, now, SLUICE_OP_CONSUME, 1, &out, &v),
               SLUICE_OK);
  if (v.allowed)
    *s = out;
  return v.allowed;
}

/* Gaps: bursts at one instant, gaps around the emission interval, long
** idles. */
static int64_t gap_ms(rng *r, int64_t interval_ms) {
  switch (rng_range(r, 0, 5)) {
  case 0:
  case 1:
    return 0;
  case 2:
    return rng_range(r, 1, interval_ms > 1 ? interval_ms - 1 : 1);
  case 3:
    return interval_ms + rng_range(r, -1, 1) > 0
               ? interval_ms + rng_range(r, -1, 1)
               : 1;
  case 4:
    return rng_range(r, 0, 4 * interval_ms);
  default:
    return rng_range(r, 0, 100 * interval_ms);
  }
}

Test(equivalence, nginx_limit_req_and_resty_limit_req) {
  static const int64_t rates[] = {1, 2, 5, 10, 50, 100, 1000};
  static const int64_t bursts[] = {0, 1, 5, 20, 100};
  rng r = {0x6e67696e78ULL};
  size_t i, j;
  int denied = 0, admitted = 0;
  for (i = 0; i < sizeof rates / sizeof rates[0]; i++)
    for (j = 0; j < sizeof bursts / sizeof bursts[0]; j++) {
      int64_t R = rates[i], B = bursts[j], now = 1700000000000, k;
      /* rate R per second with B + 1 at once */
      sluice_gcra_params p = {R, SEC, B + 1};
      ngx_model m = {0, 0, 0};
      sluice_state s = zst();
      for (k = 0; k < 4000; k++) {
        int a, b;
        now += gap_ms(&r, 1000 / R > 0 ? 1000 / R : 1);
        a = ngx_allow(&m, R, B, now);
        b = sluice_allow(&p, &s, now * MS);
        cr_assert_eq(a, b, "rate %lld r/s burst %lld, request %lld: nginx %d "
                     "sluice %d", (long long)R, (long long)B, (long long)k, a,
                     b);
        admitted += a;
        denied += !a;
      }
    }
  /* the traces exercised both answers */
  cr_assert_gt(admitted, 10000);
  cr_assert_gt(denied, 10000);
}

Test(equivalence, redis_cell_throttle) {
  static const struct {
    int64_t max_burst, count, period_s;
  } cases[] = {{15, 30, 60}, {0, 1, 1}, {4, 10, 1}, {99, 100, 3600},
               {9, 3, 7}};
  rng r = {0x63656c6cULL};
  size_t i;
  int denied = 0, admitted = 0;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t mb = cases[i].max_burst, c = cases[i].count;
    int64_t period = cases[i].period_s * SEC, now = 1700000000 * SEC, k;
    sluice_gcra_params p = {c, period, mb + 1};
    cell_model m = {0, 0};
    sluice_state s = zst();
    for (k = 0; k < 4000; k++) {
      int a, b;
      now += gap_ms(&r, period / c / MS) * MS + rng_range(&r, 0, 1) * 7;
      a = cell_allow(&m, mb, c, period, now);
      b = sluice_allow(&p, &s, now);
      cr_assert_eq(a, b, "max_burst %lld, %lld per %lld s, request %lld: "
                   "redis-cell %d sluice %d", (long long)mb, (long long)c,
                   (long long)cases[i].period_s, (long long)k, a, b);
      admitted += a;
      denied += !a;
    }
  }
  cr_assert_gt(admitted, 2000);
  cr_assert_gt(denied, 2000);
}

/* The documented figures, by hand: limit_req rate=10r/s burst=20 nodelay
** admits 21 at once, then one every 100 ms; CL.THROTTLE k 15 30 60 admits
** 16 at once, then one every 2 s. */
Test(equivalence, the_published_examples) {
  sluice_gcra_params ngx = {10, SEC, 21}, cell = {30, 60 * SEC, 16};
  sluice_state s = zst();
  int64_t t = 1000 * SEC;
  int i;
  for (i = 0; i < 21; i++)
    cr_assert(sluice_allow(&ngx, &s, t));
  cr_assert(!sluice_allow(&ngx, &s, t));
  cr_assert(!sluice_allow(&ngx, &s, t + 100 * MS - 1));
  cr_assert(sluice_allow(&ngx, &s, t + 100 * MS));
  s = zst();
  for (i = 0; i < 16; i++)
    cr_assert(sluice_allow(&cell, &s, t));
  cr_assert(!sluice_allow(&cell, &s, t + 2 * SEC - 1));
  cr_assert(sluice_allow(&cell, &s, t + 2 * SEC));
}

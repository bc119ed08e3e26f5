/*
** An independent reference model of the spec's token bucket (section 6),
** in exact arithmetic: tokens are kept multiplied by period_ns, so a refill
** of `elapsed * rate / period` tokens is the integer `elapsed * rate`.  It is
** the Lua script's bucket, step for step, with continuous (ns) time and no
** rounding: fresh = full, refill capped at capacity, admit iff tokens >= cost,
** a denial leaves the tokens as refilled.  Valid for non-decreasing times
** (the spec's script sets ts = now on every call).
*/
#ifndef SLUICE_TEST_TB_MODEL_H
#define SLUICE_TEST_TB_MODEL_H

#include "unit.h"

typedef struct tb_model {
  i128 tok; /* tokens * period_ns */
  int64_t ts;
  int init;
} tb_model;

static inline i128 q_floor(i128 n, i128 d) {
  i128 q = n / d;
  return (n % d != 0 && n < 0) ? q - 1 : q;
}
static inline i128 q_ceil(i128 n, i128 d) {
  i128 q = n / d;
  return (n % d != 0 && n > 0) ? q + 1 : q;
}
static inline int64_t q_clamp(i128 x) {
  return x > INT64_MAX ? INT64_MAX : x < INT64_MIN ? INT64_MIN : (int64_t)x;
}

static inline void tb_refill(const sluice_gcra_params *p, tb_model *b,
                             int64_t now) {
  i128 cap = (i128)p->burst * p->period_ns;
  if (!b->init) {
    b->tok = cap;
    b->ts = now;
    b->init = 1;
  }
  if (now > b->ts) {
    b->tok += (i128)(now - b->ts) * p->rate;
    if (b->tok > cap)
      b->tok = cap;
  }
  b->ts = now;
}

/* What one bucket says about `cost` at `now` (after refill), without
** charging. */
typedef struct tb_view {
  int fits;
  int64_t rem_before, rem_after, retry, reset_before, reset_after;
} tb_view;

static inline void tb_look(const sluice_gcra_params *p, const tb_model *b,
                           int64_t cost, tb_view *o) {
  i128 P = p->period_ns, cap = (i128)p->burst * P;
  i128 after = b->tok - (i128)cost * P;
  o->fits = after >= 0;
  o->rem_before = q_clamp(q_floor(b->tok, P));
  o->rem_after = o->fits ? q_clamp(q_floor(after, P)) : 0;
  o->retry = o->fits ? 0 : q_clamp(q_ceil(-after, p->rate));
  o->reset_before = q_clamp(q_ceil(cap - b->tok, p->rate));
  o->reset_after = q_clamp(q_ceil(cap - after, p->rate));
}

/* The expected verdict of a GCRA group op (CONSUME or PEEK) over n model
** buckets, charging them when admitted and kind is CONSUME.  Binding rule
** (algo.h / gcra.c): admitted -> fewest points left (lowest index on ties);
** denied -> longest wait (lowest index on ties). */
static inline void tb_group(const sluice_gcra_params *ps, tb_model *bs, int n,
                            int64_t now, int kind, int64_t cost,
                            sluice_verdict *ev) {
  tb_view vw[SLUICE_GROUP_MAX];
  int i, all = 1, b = 0;
  int64_t retry = 0;
  for (i = 0; i < n; i++) {
    tb_refill(&ps[i], &bs[i], now);
    tb_look(&ps[i], &bs[i], cost, &vw[i]);
    all &= vw[i].fits;
    if (vw[i].retry > retry)
      retry = vw[i].retry;
  }
  for (i = 1; i < n; i++)
    if (all ? vw[i].rem_after < vw[b].rem_after : vw[i].retry > vw[b].retry)
      b = i;
  memset(ev, 0, sizeof *ev);
  ev->allowed = all;
  ev->binding = b;
  ev->limit = ps[b].burst;
  ev->now_ns = now;
  ev->retry_after_ns = retry;
  if (all && kind == SLUICE_OP_CONSUME) {
    ev->remaining = vw[b].rem_after;
    ev->reset_ns = vw[b].reset_after;
    for (i = 0; i < n; i++)
      bs[i].tok -= (i128)cost * ps[i].period_ns;
  } else {
    ev->remaining = vw[b].rem_before;
    ev->reset_ns = vw[b].reset_before;
  }
}

#endif

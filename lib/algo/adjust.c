/*
** ADJUST: settling an earlier charge once its real size is known (the
** tokens an LLM request really used, the rows an export really wrote;
** sluice_policy_settle()).  One step for the three counting algorithms, in
** exact integers like theirs; the Redis script has the same step in
** lua/adjust.lua.
**
** A positive `arg` charges that much more, a negative one refunds.  The
** step never denies: the request it settles was admitted already, and a
** charge made after the fact must not turn that decision around.  What
** bounds it instead:
**
**   GCRA     charge  TAT := max(TAT, min(max(TAT, now) + c*T, now + 2*tau))
**                    a bucket may fall to -burst points (the next requests
**                    wait until it is back above their cost), never below;
**            refund  TAT := max(now, TAT - c*T) when TAT > now, else as is
**                    (a full bucket stays full: nothing to give back).
**   windows  charge  the current window's count grows, up to where the
**                    window holds twice its limit (sliding: the weighted
**                    estimate, as the counting step sees it);
**            refund  taken out of the window the settled charge was
**                    counted in (`id`: the time it was made), the current
**                    one or a sliding window's previous one, never below
**                    zero; a charge whose window has rolled away is
**                    refunded by nothing (it no longer weighs, and taking
**                    it out of a later window would free room that charge
**                    never took).
**
** Debt is one burst at most so that no settle, however large, can lock a
** scope out for longer than one refill of its limit.  A record already
** deeper in debt (a clock that went back) is left as it is by a charge.
**
** Deviations: a) the verdict is allowed = 1 always, with remaining and
** reset as after the adjustment (remaining 0 while in debt), retry 0;
** b) GCRA groups adjust every bucket by the same amount, the binding one
** being the one left with the fewest points.
*/
#include "algo_int.h"

#define SW_COUNT_MAX 0xffffffffu

/* One bucket: the new record and how far its TAT now lies ahead of now
** (scaled; 0 when full). */
static sluice__i128 gcra_adjust1(const sluice_gcra_params *p, int64_t arg,
                                 const sluice_state *in, sluice_state *out,
                                 int64_t now) {
  sluice__i128 tat = (sluice__i128)in->w[0] * p->rate + (sluice__i128)in->w[1];
  sluice__i128 n = (sluice__i128)now * p->rate;
  sluice__i128 tau = (sluice__i128)p->burst * p->period_ns;
  sluice__i128 c = (sluice__i128)(arg < 0 ? -arg : arg) * p->period_ns;
  sluice__i128 next;
  if (arg > 0) {
    sluice__i128 base = tat > n ? tat : n, cap = n + 2 * tau;
    next = base + c < cap ? base + c : cap;
    if (next < tat)
      next = tat; /* deeper in debt already: a charge never refunds */
  } else {
    next = tat <= n ? tat : tat - c > n ? tat - c : n;
  }
  if (next == tat) {
    *out = *in;
  } else {
    sluice__i128 q = sluice__floordiv(next, p->rate);
    out->w[0] = (uint64_t)q;
    out->w[1] = (uint64_t)(next - q * p->rate);
  }
  return next > n ? next - n : 0;
}

static int gcra_adjust(const sluice_op *op, const sluice_state *in,
                       sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_gcra_params *ps = (const sluice_gcra_params *)op->params;
  int i;
  for (i = 0; i < op->nkeys; i++) {
    const sluice_gcra_params *p = &ps[i];
    sluice__i128 ahead = gcra_adjust1(p, op->arg, &in[i], &out[i], now);
    sluice__i128 rem = sluice__floordiv(
        (sluice__i128)p->burst * p->period_ns - ahead, p->period_ns);
    int64_t left = rem < 0 ? 0 : sluice__clamp64(rem);
    if (i == 0 || left < v->remaining) {
      v->binding = i;
      v->limit = p->burst;
      v->remaining = left;
      v->reset_ns = sluice__clamp64(sluice__ceildiv(ahead, p->rate));
    }
  }
  return SLUICE_OK;
}

/* Start of the aligned window that holds time t (t >= 0). */
static sluice__i128 window_of(uint64_t t, int64_t w) {
  return (sluice__i128)sluice__window_start((int64_t)t, w);
}

static int swindow_adjust(const sluice_op *op, const sluice_state *in,
                          sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_window_params *p = (const sluice_window_params *)op->params;
  sluice__i128 W = p->window_ns, lim = (sluice__i128)p->limit * W, est, rem;
  sluice__swin w;
  int64_t el;
  sluice__swin_roll(p, in, &now, &w);
  el = now - w.start;
  if (op->arg > 0) {
    /* The most the current window may count: estimate <= 2 * limit. */
    sluice__i128 room = 2 * lim - (sluice__i128)w.prev * (W - el);
    sluice__i128 most = room < 0 ? 0 : room / W;
    sluice__i128 c = (sluice__i128)w.cur + op->arg;
    if (c > most)
      c = most;
    if (c > (sluice__i128)w.cur)
      w.cur = c > SW_COUNT_MAX ? SW_COUNT_MAX : (uint64_t)c;
  } else {
    uint64_t r = (uint64_t)-op->arg;
    sluice__i128 at = window_of(op->id, p->window_ns);
    if (at == w.start)
      w.cur -= r < w.cur ? r : w.cur;
    else if (at == (sluice__i128)w.start - W)
      w.prev -= r < w.prev ? r : w.prev;
  }
  out->w[0] = (uint64_t)w.start;
  out->w[1] = w.cur | (w.prev << 32);
  est = (sluice__i128)w.prev * (W - el) + (sluice__i128)w.cur * W;
  rem = (lim - est) / W;
  v->limit = p->limit;
  v->remaining = rem < 0 ? 0 : sluice__clamp64(rem);
  if (w.cur > 0)
    v->reset_ns = sluice__clamp64(2 * W - el);
  else if (w.prev > 0)
    v->reset_ns = sluice__clamp64(W - el);
  return SLUICE_OK;
}

static int fwindow_adjust(const sluice_op *op, const sluice_state *in,
                          sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_window_params *p = (const sluice_window_params *)op->params;
  int64_t start;
  uint64_t count;
  sluice__fwin_roll(p, in, &now, &start, &count);
  if (op->arg > 0) {
    uint64_t most = 2 * (uint64_t)p->limit, c = count + (uint64_t)op->arg;
    if (c > most)
      c = most;
    if (c > count)
      count = c;
  } else if (window_of(op->id, p->window_ns) == start) {
    uint64_t r = (uint64_t)-op->arg;
    count -= r < count ? r : count;
  }
  out->w[0] = (uint64_t)start;
  out->w[1] = count;
  sluice__fwin_verdict(p, start, count, now, v);
  return SLUICE_OK;
}

int sluice__adjust_run(const sluice_op *op, const sluice_state *in,
                       sluice_state *out, int64_t now, sluice_verdict *v) {
  v->allowed = 1;
  switch (op->algo) {
  case SLUICE_ALGO_GCRA:
    return gcra_adjust(op, in, out, now, v);
  case SLUICE_ALGO_SWINDOW:
    return swindow_adjust(op, in, out, now, v);
  case SLUICE_ALGO_FWINDOW:
    return fwindow_adjust(op, in, out, now, v);
  default:
    return SLUICE_EINVAL;
  }
}

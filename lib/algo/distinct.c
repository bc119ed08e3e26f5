/*
** Distinct-item estimate in an aligned fixed window: linear counting
** (Whang, Vander-Zanden & Taylor, "A linear-time probabilistic counting
** algorithm for database applications", TODS 1990) over a 64-bit bitmap.
**
** Used for credential-stuffing signatures: how many distinct subjects one IP
** has failed against, or how many distinct IPs have failed against one
** subject, in the last window.  With m = 64 bits and b bits set, the
** estimate is round(-m ln(1 - b/m)); distinct_estimate.h holds it for every b so
** that no decision uses floating point.  Accurate to within a few items up
** to ~100 distinct, saturating at 266 (all bits set).  Thresholds above 200
** are refused.  The item is a 64-bit hash the caller computes with a keyed
** hash (sluice__siphash64), so an attacker cannot aim at one bit.
*/
#include "algo_int.h"

#include "distinct_estimate.h"

int sluice__distinct_params_check(const sluice_distinct_params *p) {
  if (!p || p->threshold < 1 || p->threshold > 200 || p->window_ns < 1 ||
      p->window_ns > SLUICE_DURATION_MAX)
    return SLUICE_EINVAL;
  return SLUICE_OK;
}

int64_t sluice__distinct_expiry(const sluice_distinct_params *p,
                                const sluice_state *s) {
  if (s->w[1] == 0)
    return 0;
  return sluice__sat_add((int64_t)s->w[0], p->window_ns);
}

int sluice__distinct_run(const sluice_op *op, const sluice_state *in,
                         sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_distinct_params *p = (const sluice_distinct_params *)op->params;
  int64_t ws = sluice__window_start(now, p->window_ns);
  int64_t start = (int64_t)in->w[0];
  uint64_t bits = in->w[1];
  int64_t est;

  if (bits == 0) {
    start = ws;
  } else if (ws < start) {
    now = start; /* clock went backwards: hold the window */
  } else if (ws > start) {
    start = ws;
    bits = 0;
  }
  if (op->kind == SLUICE_OP_ADD) {
    bits |= UINT64_C(1) << (op->id >> 58);
    out->w[0] = (uint64_t)start;
    out->w[1] = bits;
  } else {
    *out = *in;
  }
  est = sluice__lc_estimate[__builtin_popcountll(bits)];
  v->allowed = est < p->threshold;
  v->limit = p->threshold;
  v->remaining = est >= p->threshold ? 0 : p->threshold - est;
  if (bits)
    v->reset_ns = sluice__clamp64((sluice__i128)start + p->window_ns - now);
  if (!v->allowed)
    v->retry_after_ns = v->reset_ns;
  return SLUICE_OK;
}

int sluice__distinct_step(const sluice_distinct_params *p,
                         const sluice_state *in, int64_t now_ns,
                         uint64_t item_hash, sluice_state *out,
                         sluice_verdict *v) {
  return sluice__step1(SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, p, 0, item_hash, in,
                       now_ns, out, v);
}

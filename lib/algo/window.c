/*
** Window counters: the sliding window counter (the two-window weighted
** estimate popularised by Cloudflare and by Kong's rate-limiting-advanced)
** and the plain fixed window (AWS WAF's coarse per-IP backstop).
**
** Windows are aligned: window k covers [k*W, (k+1)*W).  The sliding estimate
** at time now, el = now - start of the current window, is
**
**     estimate = prev * (W - el) / W + cur
**
** i.e. the previous window's count weighted by how much of it still overlaps
** the last W ns.  To stay exact, comparisons are made on estimate * W in 128
** bits; "remaining" is floored and "retry after" ceil'd so neither ever
** promises more than the counter will grant.
**
** Modes: CONSUME adds n only if it fits (a limit), COUNT always adds n and
** reports whether the count is still within the limit (failure counting for
** lockouts), PEEK reports.
**
** Clock going backwards: a `now` before the record's current window is
** treated as the window's first instant.  A window never reopens early, so
** a step backwards cannot buy fresh allowance.
*/
#include "algo_int.h"

#define SW_COUNT_MAX 0xffffffffu

int sluice__window_params_check(const sluice_window_params *p) {
  if (!p || p->limit < 1 || p->limit > SLUICE_COUNT_MAX || p->window_ns < 1 ||
      p->window_ns > SLUICE_DURATION_MAX)
    return SLUICE_EINVAL;
  return SLUICE_OK;
}

/* ---------------------------------------------------------- sliding --- */

typedef sluice__swin swin;

void sluice__swin_roll(const sluice_window_params *p, const sluice_state *s,
                       int64_t *now, sluice__swin *w) {
  int64_t ws = sluice__window_start(*now, p->window_ns);
  w->start = (int64_t)s->w[0];
  w->cur = s->w[1] & SW_COUNT_MAX;
  w->prev = s->w[1] >> 32;
  if (w->cur == 0 && w->prev == 0) {
    w->start = ws;
  } else if (ws < w->start) {
    *now = w->start; /* clock went backwards: hold the window */
  } else if (ws > w->start) {
    /* 128 bits: a damaged record's start can be far below zero. */
    w->prev = ((sluice__i128)ws - w->start == p->window_ns) ? w->cur : 0;
    w->cur = 0;
    w->start = ws;
  }
}

static sluice__i128 swin_est_scaled(const sluice_window_params *p,
                                    const swin *w, int64_t now) {
  int64_t el = now - w->start;
  return (sluice__i128)w->prev * (p->window_ns - el) +
         (sluice__i128)w->cur * p->window_ns;
}

/* ns from now until n more would fit (the estimate + n <= limit). */
static int64_t swin_retry(const sluice_window_params *p, const swin *w,
                          int64_t now, int64_t n) {
  sluice__i128 W = p->window_ns, el = now - w->start;
  if ((sluice__i128)w->cur + n <= p->limit && w->prev > 0) {
    sluice__i128 d = ((sluice__i128)p->limit - w->cur - n) * W;
    sluice__i128 need = W - d / w->prev; /* el' >= W - floor(d/prev) */
    if (need < W)
      return sluice__clamp64(need > el ? need - el : 0);
  }
  /* Not before the next window, where prev' = cur and cur' = 0. */
  {
    sluice__i128 to_next = W - el, el2 = 0;
    if (w->cur > 0) {
      el2 = W - (((sluice__i128)p->limit - n) * W) / w->cur;
      if (el2 < 0)
        el2 = 0;
    }
    return sluice__clamp64(to_next + el2);
  }
}

int64_t sluice__swindow_expiry(const sluice_window_params *p,
                               const sluice_state *s) {
  uint64_t cur = s->w[1] & SW_COUNT_MAX, prev = s->w[1] >> 32;
  int64_t start = (int64_t)s->w[0];
  if (cur > 0)
    return sluice__sat_add(start, sluice__clamp64((sluice__i128)2 * p->window_ns));
  if (prev > 0)
    return sluice__sat_add(start, p->window_ns);
  return 0;
}

int sluice__swindow_step(const sluice_window_params *p, const sluice_state *in,
                        int64_t now, int kind, int64_t n, sluice_state *out,
                        sluice_verdict *v) {
  return sluice__step1(SLUICE_ALGO_SWINDOW, kind, p, n, 0, in, now, out, v);
}

int sluice__swindow_run(const sluice_op *op, const sluice_state *in,
                        sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_window_params *p = (const sluice_window_params *)op->params;
  sluice__i128 W = p->window_ns, lim = (sluice__i128)p->limit * W;
  int64_t n = op->arg;
  swin w;
  sluice__i128 est, rem;

  sluice__swin_roll(p, in, &now, &w);
  est = swin_est_scaled(p, &w, now);
  v->allowed = est + (sluice__i128)n * W <= lim;
  if (op->kind == SLUICE_OP_COUNT ||
      (op->kind == SLUICE_OP_CONSUME && v->allowed)) {
    w.cur = (w.cur + (uint64_t)n > SW_COUNT_MAX) ? SW_COUNT_MAX
                                                 : w.cur + (uint64_t)n;
    est = swin_est_scaled(p, &w, now);
    if (op->kind == SLUICE_OP_COUNT)
      v->allowed = est <= lim;
  }
  if (op->kind == SLUICE_OP_PEEK) {
    *out = *in;
  } else {
    out->w[0] = (uint64_t)w.start;
    out->w[1] = w.cur | (w.prev << 32);
  }
  rem = (lim - est) / W;
  v->limit = p->limit;
  v->remaining = rem < 0 ? 0 : sluice__clamp64(rem);
  if (!v->allowed)
    v->retry_after_ns = swin_retry(p, &w, now, n > p->limit ? p->limit : n);
  if (w.cur > 0)
    v->reset_ns = sluice__clamp64(2 * W - (now - w.start));
  else if (w.prev > 0)
    v->reset_ns = sluice__clamp64(W - (now - w.start));
  return SLUICE_OK;
}

/* ------------------------------------------------------------ fixed --- */

int64_t sluice__fwindow_expiry(const sluice_window_params *p,
                               const sluice_state *s) {
  if (s->w[1] == 0)
    return 0;
  return sluice__sat_add((int64_t)s->w[0], p->window_ns);
}

/* The count the write added to post's window; 0 if none. */
static uint64_t swin_added(const sluice_state *pre, const sluice_state *post) {
  uint64_t before = pre->w[0] == post->w[0] ? pre->w[1] & SW_COUNT_MAX : 0;
  uint64_t after = post->w[1] & SW_COUNT_MAX;
  return after > before ? after - before : 0;
}

/* Taken out of the window it was counted in: the current one, or the
** previous one once the record has rolled over once since. */
SLUICE__UNDO_DECL(swindow, sluice_window_params) {
  uint64_t d = swin_added(pre, post), c = cur->w[1] & SW_COUNT_MAX;
  uint64_t pv = cur->w[1] >> 32;
  (void)now;
  if (d == 0 && pre->w[0] == post->w[0] && cur->w[0] == post->w[0] &&
      pre->w[1] != post->w[1]) {
    /* A refund (ADJUST) in a window still the record's: put both counts
    ** back as far as it took them (each only went down). */
    uint64_t dc = (pre->w[1] & SW_COUNT_MAX) - (post->w[1] & SW_COUNT_MAX);
    uint64_t dp = (pre->w[1] >> 32) - (post->w[1] >> 32);
    c = c + dc > SW_COUNT_MAX ? SW_COUNT_MAX : c + dc;
    pv = pv + dp > SW_COUNT_MAX ? SW_COUNT_MAX : pv + dp;
    out->w[0] = cur->w[0];
    out->w[1] = c | (pv << 32);
    return 1;
  }
  if (d == 0)
    return 0;
  if (cur->w[0] == post->w[0] && c >= d) {
    c -= d;
  } else if ((sluice__i128)(int64_t)cur->w[0] - (int64_t)post->w[0] ==
                 p->window_ns &&
             pv >= d) {
    pv -= d;
  } else {
    return 0; /* rolled past it: that count no longer weighs */
  }
  out->w[0] = cur->w[0];
  out->w[1] = c | (pv << 32);
  return 1;
}

int sluice__fwindow_step(const sluice_window_params *p, const sluice_state *in,
                        int64_t now, int kind, int64_t n, sluice_state *out,
                        sluice_verdict *v) {
  return sluice__step1(SLUICE_ALGO_FWINDOW, kind, p, n, 0, in, now, out, v);
}

int sluice__fwindow_run(const sluice_op *op, const sluice_state *in,
                        sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_window_params *p = (const sluice_window_params *)op->params;
  int64_t start;
  uint64_t count;
  int64_t n = op->arg;

  sluice__fwin_roll(p, in, &now, &start, &count);
  v->allowed = (sluice__i128)count + n <= p->limit;
  if (op->kind == SLUICE_OP_COUNT ||
      (op->kind == SLUICE_OP_CONSUME && v->allowed)) {
    count = (count > (uint64_t)INT64_MAX - (uint64_t)n) ? (uint64_t)INT64_MAX
                                                         : count + (uint64_t)n;
    if (op->kind == SLUICE_OP_COUNT)
      v->allowed = count <= (uint64_t)p->limit;
  }
  if (op->kind == SLUICE_OP_PEEK) {
    *out = *in;
  } else {
    out->w[0] = (uint64_t)start;
    out->w[1] = count;
  }
  sluice__fwin_verdict(p, start, count, now, v);
  if (!v->allowed)
    v->retry_after_ns = v->reset_ns;
  return SLUICE_OK;
}

/* Taken out of its window while that window is still the record's. */
SLUICE__UNDO_DECL(fwindow, sluice_window_params) {
  uint64_t before = (pre->w[1] != 0 && pre->w[0] == post->w[0]) ? pre->w[1] : 0;
  uint64_t d = post->w[1] > before ? post->w[1] - before : 0;
  (void)p;
  (void)now;
  if (d == 0 && before > post->w[1] && cur->w[0] == post->w[0]) {
    /* A refund (ADJUST) in a window still the record's: put it back. */
    out->w[0] = cur->w[0];
    out->w[1] = cur->w[1] + (before - post->w[1]);
    return 1;
  }
  if (d == 0 || cur->w[0] != post->w[0] || cur->w[1] < d)
    return 0;
  out->w[0] = cur->w[0];
  out->w[1] = cur->w[1] - d;
  return 1;
}

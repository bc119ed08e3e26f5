/*
** sluice_policy_inspect(): a declared limit's records (declared_info.c), a
** declared penalty's box, or one scope's box (the policy file's first
** penalty of that scope: declared_penalty_info.c) read back for support
** tools (`sluice inspect`), changing nothing, with the helpers below.  Each
** record is fetched with sluice_limiter_get() and its algorithm's PEEK /
** CHECK step runs on a copy, with the keys and parameters a decision uses.
**
** A record these parameters could not have written (more strikes than the
** threshold, a box longer than its level's, more failures than the limit)
** is flagged in `unfit`: the configuration is not the service's and the
** figures mean nothing.
*/
#include <string.h>

#include "declared.h"
#include "policy_int.h"
#include "op.h"

_Static_assert(SLUICE_INSPECT_ID_SIZE == SLUICE_SCOPE_ID_LEN + 1, "scope id");

int sluice__inspect_get(sluice_policy *p, sluice_key k, sluice_state *s,
                        int *err) {
  int64_t exp;
  int rc = sluice_limiter_get(p->lim, k.data, k.len, s, &exp);
  if (rc == SLUICE_ENOTFOUND) {
    memset(s, 0, sizeof *s);
    return 0;
  }
  if (rc != SLUICE_OK) {
    *err = rc;
    return -1;
  }
  return 1;
}

/* -1 on a store error, 0 when absent (fresh state), 1 when found. */
static int get(sluice_policy *p, sluice_key k, unsigned bit,
               sluice_inspect_report *r, sluice_state *s, int *err) {
  int g = sluice__inspect_get(p, k, s, err);
  if (g > 0)
    r->present |= bit;
  return g;
}

int sluice__inspect_box(sluice_policy *p, sluice_key k,
                        const sluice_penalty_params *pp,
                        sluice_inspect_report *r) {
  sluice_state s, o;
  sluice_verdict v;
  int err = 0, g = get(p, k, SLUICE_INSPECT_BOX, r, &s, &err);
  if (g < 0)
    return err;
  r->strike_threshold = pp->strike_threshold;
  r->strike_window_ns = pp->strike_window_ns;
  r->offense_ttl_ns = pp->offense_ttl_ns;
  if (sluice__penalty_step(pp, &s, r->now_ns, SLUICE_OP_CHECK, 0, &o, &v) !=
      SLUICE_OK) {
    r->unfit |= SLUICE_INSPECT_BOX;
    return SLUICE_OK;
  }
  if (g && (s.w[1] >> 44) > (uint64_t)pp->strike_threshold)
    r->unfit |= SLUICE_INSPECT_BOX;
  r->offenses = v.offenses;
  if (v.allowed) {
    r->strikes = pp->strike_threshold - v.strikes_remaining;
    return SLUICE_OK;
  }
  r->level = v.level;
  r->suspended = (v.flags & SLUICE_V_SUSPENDED) != 0;
  r->box_end_ns = v.retry_after_ns == SLUICE_FOREVER
                      ? SLUICE_FOREVER
                      : r->now_ns + v.retry_after_ns;
  if (v.level >= 1 && v.level <= 3 && v.retry_after_ns != SLUICE_FOREVER &&
      v.retry_after_ns > pp->box_ns[v.level - 1])
    r->unfit |= SLUICE_INSPECT_BOX;
  return SLUICE_OK;
}

/* A window's count: used of limit, flagged when over the limit. */
int sluice__inspect_window(sluice_policy *p, sluice_key k, unsigned bit,
                           int sliding, const sluice_window_params *w,
                           sluice_inspect_report *r, int64_t *used,
                           int64_t *limit, int64_t *window_ns) {
  sluice_state s, o;
  sluice_verdict v;
  int err = 0, g = get(p, k, bit, r, &s, &err), rc;
  if (g < 0)
    return err;
  *limit = w->limit;
  *window_ns = w->window_ns;
  rc = sliding
           ? sluice__swindow_step(w, &s, r->now_ns, SLUICE_OP_PEEK, 1, &o, &v)
           : sluice__fwindow_step(w, &s, r->now_ns, SLUICE_OP_PEEK, 1, &o, &v);
  if (rc != SLUICE_OK || (g && (sliding ? (s.w[1] & 0xffffffffu) : s.w[1]) >
                                   (uint64_t)w->limit)) {
    r->unfit |= bit;
    return SLUICE_OK;
  }
  *used = w->limit - v.remaining;
  return SLUICE_OK;
}

int sluice_policy_inspect(sluice_policy *p, const sluice_inspect_query *q,
                          sluice_inspect_report *out) {
  int rc;
  if (!out)
    return SLUICE_EINVAL;
  memset(out, 0, sizeof *out);
  if (!p || !q)
    return SLUICE_EINVAL;
  if (!!q->limit + !!q->penalty + !!q->scope != 1)
    return SLUICE_EINVAL; /* one thing to read */
  if (q->limit || q->penalty) {
    const char *field = NULL;
    rc = q->limit
             ? sluice__inspect_limit(p, q->limit, q->req, &out->limit, &field)
             : sluice__inspect_penalty(p, q->penalty, q->req, out, &field);
    if (q->limit && rc == SLUICE_OK)
      out->now_ns = out->limit.now_ns;
    out->invalid_field = field;
    return rc;
  }
  out->scope = q->scope;
  out->now_ns = sluice_limiter_now(p->lim);
  /* The policy file's boxes: the first declared penalty of that kind
  ** whose scope the query fills (declared_penalty_info.c). */
  if (q->scope != SLUICE_SCOPE_KEY && q->scope != SLUICE_SCOPE_IP &&
      q->scope != SLUICE_SCOPE_SUBJECT)
    rc = SLUICE_EINVAL;
  else
    rc = p->decl ? sluice__inspect_declared(p, q, out) : SLUICE_ENOTFOUND;
  if (rc != SLUICE_OK) {
    memset(out, 0, sizeof *out);
    out->scope = q->scope;
  }
  return rc;
}

/*
** sluice_policy_inspect(): one scope's records read back for support tools
** (`sluice inspect`), changing nothing.  Each record is fetched with
** sluice_limiter_get() and its algorithm's PEEK / CHECK step runs on a
** copy; the keys are keys.c's and the parameters the ones derived at open
** (policy.c), i.e. exactly what a decision (tenant.c, auth.c) reads and
** writes.
**
** A record these parameters could not have written (a bucket fuller than
** its burst allows, more strikes than the threshold, a box longer than its
** level's, more exports or failures than the limit) is flagged in `unfit`:
** the configuration is not the service's and the figures mean nothing.
*/
#include <string.h>

#include "declared.h"
#include "keys.h"
#include "policy_int.h"
#include "wide.h"

_Static_assert(SLUICE_INSPECT_SLOTS == SLUICE_GROUP_MAX, "lease slots");
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

static int bucket(sluice_policy *p, sluice_key k, unsigned bit,
                  const sluice_gcra_params *g, sluice_inspect_report *r,
                  sluice_inspect_bucket *b) {
  sluice_state s, o;
  sluice_verdict v;
  int err = 0;
  if (get(p, k, bit, r, &s, &err) < 0)
    return err;
  b->rate = g->rate;
  b->period_ns = g->period_ns;
  b->burst = g->burst;
  if (sluice_gcra_step(g, &s, r->now_ns, SLUICE_OP_PEEK, 0, &o, &v) !=
      SLUICE_OK) {
    r->unfit |= bit;
    return SLUICE_OK;
  }
  b->remaining = v.remaining;
  b->limit = v.limit;
  b->reset_ns = v.reset_ns;
  /* Full in longer than an empty bucket takes to fill: another burst or
  ** rate wrote it. */
  if (v.reset_ns > (int64_t)(((sluice__i128)g->burst * g->period_ns +
                              g->rate - 1) / g->rate))
    r->unfit |= bit;
  return SLUICE_OK;
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
  if (sluice_penalty_step(pp, &s, r->now_ns, SLUICE_OP_CHECK, 0, &o, &v) !=
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

/* A one-slot lease record (notice, ledger lock): its holder and end. */
static int lease1(sluice_policy *p, sluice_key k, unsigned bit,
                  sluice_inspect_report *r, uint64_t *id, int64_t *until) {
  sluice_state s;
  int err = 0;
  if (get(p, k, bit, r, &s, &err) < 0)
    return err;
  if (s.w[0] != 0 && (int64_t)s.w[1] > r->now_ns) {
    *id = s.w[0];
    *until = (int64_t)s.w[1];
  }
  return SLUICE_OK;
}

static int leases(sluice_policy *p, const char *T, int cls, int n,
                  unsigned bit, sluice_inspect_report *r,
                  sluice_inspect_leases *l) {
  char buf[SLUICE__KEYLEN];
  int i, rc;
  l->slots = n;
  for (i = 0; i < n; i++)
    if ((rc = lease1(p, sluice__key_slot(buf, T, cls, i), bit, r, &l->id[i],
                     &l->until_ns[i])))
      return rc;
    else if (l->id[i])
      l->held++;
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
           ? sluice_swindow_step(w, &s, r->now_ns, SLUICE_OP_PEEK, 1, &o, &v)
           : sluice_fwindow_step(w, &s, r->now_ns, SLUICE_OP_PEEK, 1, &o, &v);
  if (rc != SLUICE_OK || (g && (sliding ? (s.w[1] & 0xffffffffu) : s.w[1]) >
                                   (uint64_t)w->limit)) {
    r->unfit |= bit;
    return SLUICE_OK;
  }
  *used = w->limit - v.remaining;
  return SLUICE_OK;
}

static int id_bad(const char *s) {
  size_t n;
  if (!s)
    return SLUICE_EINVAL;
  n = strnlen(s, SLUICE_POLICY_ID_MAX + 1);
  return n == 0 || n > SLUICE_POLICY_ID_MAX ? SLUICE_EKEY : SLUICE_OK;
}

static void sid(const sluice_policy *p, const char *raw, char *out) {
  sluice_scope_id(p->secret, raw, strlen(raw), out);
}

static int key_scope(sluice_policy *p, const sluice_inspect_query *q,
                     sluice_inspect_report *r) {
  char buf[SLUICE__KEYLEN], L[SLUICE_SCOPE_ID_LEN + 1];
  const char *T = r->tenant_scope_id, *K = r->scope_id;
  const sluice__tier_rt *rt;
  int tier, rc;
  uint64_t id = 0;
  if ((rc = id_bad(q->tenant_id)) || (rc = id_bad(q->api_key_id)) ||
      (q->ledger_id && (rc = id_bad(q->ledger_id))))
    return rc;
  if (!q->tier)
    return SLUICE_EINVAL;
  if ((tier = sluice__policy_tier(p, q->tier)) < 0)
    return SLUICE_ENOTFOUND;
  rt = &p->rt[tier];
  sid(p, q->tenant_id, r->tenant_scope_id);
  sid(p, q->api_key_id, r->scope_id);
  if ((rc = bucket(p, sluice__key_tenant_bucket(buf, T),
                   SLUICE_INSPECT_TENANT_BUCKET, &rt->bucket[0], r,
                   &r->tenant_bucket)) ||
      (rc = bucket(p, sluice__key_key_bucket(buf, T, K),
                   SLUICE_INSPECT_KEY_BUCKET, &rt->bucket[1], r,
                   &r->key_bucket)) ||
      (rc = sluice__inspect_box(p, sluice__key_key_box(buf, T, K), &rt->penalty, r)) ||
      (rc = lease1(p, sluice__key_notice(buf, T, K), SLUICE_INSPECT_NOTICE,
                   r, &id, &r->notice_until_ns)) ||
      (rc = leases(p, T, SLUICE_EP_RECONCILE, (int)rt->reconcile.max,
                   SLUICE_INSPECT_RECONCILE, r, &r->reconcile)) ||
      (rc = leases(p, T, SLUICE_EP_EXPORT, (int)rt->export_.max,
                   SLUICE_INSPECT_EXPORT, r, &r->export_)) ||
      (rc = sluice__inspect_window(p, sluice__key_export_cap(buf, T),
                   SLUICE_INSPECT_EXPORT_CAP, 0, &rt->export_cap, r,
                   &r->exports_used, &r->exports_limit,
                   &r->exports_window_ns)))
    return rc;
  if (!q->ledger_id)
    return SLUICE_OK;
  sid(p, q->ledger_id, L);
  return lease1(p, sluice__key_ledger(buf, T, L), SLUICE_INSPECT_LEDGER, r,
                &r->ledger_lease, &r->ledger_until_ns);
}

static int auth_scope(sluice_policy *p, const sluice_inspect_query *q,
                      sluice_inspect_report *r) {
  char buf[SLUICE__KEYLEN];
  int ip = q->scope == SLUICE_SCOPE_IP, rc;
  const char *raw = ip ? q->client_ip : q->auth_subject;
  if ((rc = id_bad(raw)))
    return rc;
  if (ip)
    sluice__ip_scope(p, raw, r->scope_id);
  else
    sid(p, raw, r->scope_id);
  if ((rc = sluice__inspect_box(p, sluice__key_auth(buf, q->scope, SLUICE__AK_BOX,
                                    r->scope_id),
                &p->auth_penalty, r)) ||
      (rc = sluice__inspect_window(p, sluice__key_auth(buf, q->scope, SLUICE__AK_FAILS,
                                       r->scope_id),
                   SLUICE_INSPECT_FAILURES, 1,
                   ip ? &p->auth_ip : &p->auth_subject, r, &r->failures,
                   &r->failures_limit, &r->failures_window_ns)))
    return rc;
  if (!ip)
    return SLUICE_OK;
  return sluice__inspect_window(p, sluice__key_auth(buf, q->scope, SLUICE__AK_STUFFING,
                                    r->scope_id),
                SLUICE_INSPECT_STUFFING, 0, &p->stuffing, r,
                &r->stuffing_failures, &r->stuffing_limit,
                &r->stuffing_window_ns);
}

int sluice_policy_inspect(sluice_policy *p, const sluice_inspect_query *q,
                          sluice_inspect_report *out) {
  size_t i;
  int rc;
  if (!p || !q || !out)
    return SLUICE_EINVAL;
  memset(out, 0, sizeof *out);
  for (i = 0; i < sizeof q->reserved / sizeof q->reserved[0]; i++)
    if (q->reserved[i])
      return SLUICE_EINVAL;
  out->scope = q->scope;
  out->now_ns = sluice_limiter_now(p->lim);
  if (p->decl && p->decl->npenalties > 0 && q->scope != SLUICE_SCOPE_TENANT)
    /* A policy file's boxes: the first declared penalty of that kind
    ** whose scope the query fills (declared_penalty_info.c). */
    rc = sluice__inspect_declared(p, q, out);
  else
  switch (q->scope) {
  case SLUICE_SCOPE_KEY:
    rc = key_scope(p, q, out);
    break;
  case SLUICE_SCOPE_IP:
  case SLUICE_SCOPE_SUBJECT:
    rc = auth_scope(p, q, out);
    break;
  default:
    rc = SLUICE_EINVAL;
  }
  if (rc != SLUICE_OK) {
    memset(out, 0, sizeof *out);
    out->scope = q->scope;
  }
  return rc;
}

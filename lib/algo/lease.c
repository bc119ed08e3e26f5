/*
** Lease set: the spec's concurrency semaphore (a ZSET of lease ids scored by
** expiry) as `max` slot records, key i of the group being slot i.
**
** A slot is held while its id is nonzero and now < its expiry.  ACQUIRE
** takes the lowest free slot (expired leases count as free: the spec's
** ZREMRANGEBYSCORE), so a worker that dies holding a lease gives it back
** when the TTL runs out.  When every slot is held, the denial's retry-after
** is the earliest expiry: the soonest a slot can free up by itself.
** Mutual exclusion (one reconcile per ledger) is a set with max = 1.
**
** Choices:
**  a) ACQUIRE of an id that already holds a live slot renews it instead of
**     taking a second slot, so a retried acquire cannot double-count.
**  b) RELEASE or RENEW of an id that holds no live slot is not an error:
**     the verdict says allowed = 0 with SLUICE_V_EXPIRED, which tells a
**     worker its lease was reclaimed and its work is no longer protected.
**  c) Slots as separate records let a lock-free store claim one with a
**     single compare-and-swap; the step itself still sees the whole set.
*/
#include <string.h>

#include "algo_int.h"

int sluice__lease_params_check(const sluice_lease_params *p) {
  if (!p || p->max < 1 || p->max > SLUICE_LEASE_COUNT_MAX || p->ttl_ns < 1 ||
      p->ttl_ns > SLUICE_DURATION_MAX)
    return SLUICE_EINVAL;
  return SLUICE_OK;
}

/* An expiry that saturated at INT64_MAX means "held until the end of
** time": comparing now < INT64_MAX would free it at now = INT64_MAX. */
static int held(const sluice_state *s, int64_t now) {
  return s->w[0] != 0 &&
         (now < (int64_t)s->w[1] || (int64_t)s->w[1] == INT64_MAX);
}

int sluice__lease_run(const sluice_op *op, const sluice_state *in,
                      sluice_state *out, int64_t now, sluice_verdict *v) {
  const sluice_lease_params *p = (const sluice_lease_params *)op->params;
  int n = (int)p->max, i, mine = -1, freeslot = -1, nheld = 0;
  int64_t exp = sluice__sat_add(now, p->ttl_ns);
  int64_t earliest = INT64_MAX, latest = now;

  if (p->max > SLUICE_GROUP_MAX)
    return sluice__lease_count_run(op, in, out, now, v);
  for (i = 0; i < n; i++) {
    out[i] = in[i];
    if (held(&in[i], now)) {
      if (in[i].w[0] == op->id)
        mine = i;
    } else if (freeslot < 0) {
      freeslot = i;
    }
  }
  v->lease_id = op->id;
  switch (op->kind) {
  case SLUICE_OP_ACQUIRE:
    if (mine >= 0) {
      out[mine].w[1] = (uint64_t)exp;
      v->allowed = 1;
    } else if (freeslot >= 0) {
      out[freeslot].w[0] = op->id;
      out[freeslot].w[1] = (uint64_t)exp;
      v->allowed = 1;
      mine = freeslot;
    }
    break;
  case SLUICE_OP_RENEW:
    if (mine >= 0) {
      out[mine].w[1] = (uint64_t)exp;
      v->allowed = 1;
    } else {
      v->flags |= SLUICE_V_EXPIRED;
    }
    break;
  default: /* SLUICE_OP_LEASE_RELEASE: also clears an expired slot of id */
    for (i = 0; i < n; i++)
      if (in[i].w[0] == op->id) {
        out[i].w[0] = out[i].w[1] = 0;
        break;
      }
    if (mine >= 0)
      v->allowed = 1;
    else
      v->flags |= SLUICE_V_EXPIRED;
    break;
  }
  for (i = 0; i < n; i++) {
    if (!held(&out[i], now))
      continue;
    nheld++;
    if ((int64_t)out[i].w[1] < earliest)
      earliest = (int64_t)out[i].w[1];
    if ((int64_t)out[i].w[1] > latest)
      latest = (int64_t)out[i].w[1];
  }
  v->binding = mine >= 0 ? mine : 0;
  v->limit = p->max;
  v->remaining = p->max - nheld;
  v->reset_ns = latest - now;
  if (op->kind == SLUICE_OP_ACQUIRE && !v->allowed)
    v->retry_after_ns = earliest - now;
  return SLUICE_OK;
}

int sluice__lease_step(const sluice_lease_params *p, const sluice_state *in,
                      int64_t now_ns, int kind, uint64_t lease_id,
                      sluice_state *out, sluice_verdict *v) {
  /* Slot keys only need to be distinct and share a hash tag, as the group
  ** check requires: "{s}0", "{s}1", ... */
  static const char digits[SLUICE_GROUP_MAX + 1] =
      "0123456789abcdefghijklmnopqrstuv";
  char names[SLUICE_GROUP_MAX][4];
  sluice_key k[SLUICE_GROUP_MAX];
  sluice_op op = {SLUICE_ALGO_LEASE, kind, 0, k, p, 0, lease_id};
  int i;
  if (sluice__lease_params_check(p) != SLUICE_OK)
    return SLUICE_EINVAL;
  op.nkeys = sluice__lease_nkeys(p);
  for (i = 0; i < op.nkeys; i++) {
    memcpy(names[i], "{s}", 3);
    names[i][3] = digits[i];
    k[i].data = names[i];
    k[i].len = 4;
  }
  return sluice__op_step(&op, in, out, now_ns, v);
}

/* A slot this write took (its id is unique to the holder) is freed while
** it is still ours; a renewal keeps the slot, which a retry re-grants. */
SLUICE__UNDO_DECL(lease, sluice_lease_params) {
  if (p->max > SLUICE_GROUP_MAX)
    return sluice__lease_count_undo(p, pre, post, cur, now, out);
  (void)now;
  if (post->w[0] == 0 || pre->w[0] == post->w[0] || cur->w[0] != post->w[0])
    return 0;
  out->w[0] = out->w[1] = 0;
  return 1;
}

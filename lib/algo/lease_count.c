/*
** Counted lease set: a concurrency limit of SLUICE_GROUP_MAX < max <=
** SLUICE_LEASE_COUNT_MAX leases in ONE record, for limits a lease set of
** slot records (lease.c) cannot hold (a store call holds at most 48
** records).  It keeps no lease ids, only how many live leases end in each
** of a ring of four expiry buckets; a lease's id says which bucket it was
** counted in.  Exact semantics (docs/policy.md, "concurrency"):
**
**  Time is counted in ticks of U = 2^20 ns (about 1.05 ms).  With
**  tu = ceil(ttl / U), a bucket is wu = ceil((tu + 1) / 3) ticks wide, and
**  bucket k ends at k * wu * U ns.  A lease granted or renewed at tick
**  c = floor(now / U) is counted in bucket k(c) = ceil((c + 1 + tu) / wu),
**  the first to end at or after now + ttl: a lease never ends early, and
**  a lease its holder never releases (a crashed worker) ends less than
**  U + wu * U <= ttl/3 + 4 ms after its TTL.  Bucket k is live while
**  k * wu * U > now; from any now, the buckets a grant can reach span at
**  most four (3 * wu >= tu + 1), so four are kept and none is lost when the
**  ring moves on.
**
**  ACQUIRE grants when fewer than max leases are live and returns the
**  lease id  c << 21 | 1 << 20 | (id & 0xfffff)  (nonzero; the caller's
**  id is not remembered, so a retried acquire takes a second lease).  A
**  denial changes nothing; its retry-after is the end of the oldest live
**  bucket that holds a lease (the soonest one can end by itself).
**  RELEASE of an id takes one lease off the bucket the id names, if that
**  bucket is still live and holds one; otherwise (expired, or an id from
**  an old bucket generation) it does nothing and says SLUICE_V_EXPIRED.
**  Counts cannot tell ids apart: releasing one live lease twice takes off
**  a second lease of the same bucket (another holder's), which then is
**  no longer counted: callers release once, as the policy layer does.
**  RENEW moves the lease from its bucket to k(now) and returns the new
**  id; the old id then names the old bucket, as a released one does.
**  A clock that steps back counts a grant in the ring's oldest bucket when
**  its own is older still (later than needed, never earlier).
**
** Record (four 32-bit words, the Lua port's halves): word j (w[0] low,
** w[0] high, w[1] low, w[1] high) = count of ring slot j (21 bits) | 11
** bits of K << 21, K (44 bits, word 0 holding its low 11) being the
** newest bucket of the ring; bucket k sits in slot k mod 4.
*/
#include "algo_int.h"

#define U_SHIFT 20
#define ID_SHIFT 21
#define CBITS 21
#define CMASK ((1u << CBITS) - 1)

typedef struct ring {
  uint64_t K;   /* newest bucket; 0: empty record */
  uint32_t c[4];
} ring;

static void unpack(const sluice_state *s, ring *r) {
  uint32_t wd[4] = {(uint32_t)s->w[0], (uint32_t)(s->w[0] >> 32),
                    (uint32_t)s->w[1], (uint32_t)(s->w[1] >> 32)};
  int j;
  r->K = 0;
  for (j = 0; j < 4; j++) {
    r->c[j] = wd[j] & CMASK;
    r->K |= (uint64_t)(wd[j] >> CBITS) << (11 * j);
  }
}

static void pack(const ring *r, sluice_state *s) {
  uint32_t wd[4];
  int j;
  for (j = 0; j < 4; j++)
    wd[j] = r->c[j] | (uint32_t)((r->K >> (11 * j)) & 0x7ff) << CBITS;
  s->w[0] = (uint64_t)wd[1] << 32 | wd[0];
  s->w[1] = (uint64_t)wd[3] << 32 | wd[2];
}

static int64_t width(const sluice_lease_params *p) {
  int64_t tu = (p->ttl_ns >> U_SHIFT) + ((p->ttl_ns & ((1 << U_SHIFT) - 1)) != 0);
  return (tu + 1 + 2) / 3;
}

static uint64_t bucket_of(const sluice_lease_params *p, int64_t c) {
  int64_t wu = width(p);
  int64_t tu = (p->ttl_ns >> U_SHIFT) + ((p->ttl_ns & ((1 << U_SHIFT) - 1)) != 0);
  return (uint64_t)((c + 1 + tu + wu - 1) / wu);
}

/* Bucket k's end in ns, saturated. */
static int64_t bucket_end(const sluice_lease_params *p, uint64_t k) {
  sluice__i128 e = (sluice__i128)k * width(p) << U_SHIFT;
  return e > INT64_MAX ? INT64_MAX : (int64_t)e;
}

/* The oldest live bucket at tick c. */
static uint64_t live_from(const sluice_lease_params *p, int64_t c) {
  return (uint64_t)(c / width(p)) + 1;
}

/* Keep the live buckets only (a slot no bucket of the ring names, as in
** an empty record's, counts nothing); returns the live total. */
static int64_t roll(const sluice_lease_params *p, int64_t c, ring *r) {
  uint64_t lo = live_from(p, c), k;
  uint32_t keep[4] = {0, 0, 0, 0};
  int64_t n = 0;
  for (k = r->K >= 3 ? r->K - 3 : 0; r->K && k <= r->K; k++)
    if (k >= lo) {
      keep[k & 3] = r->c[k & 3];
      n += keep[k & 3];
    }
  memcpy(r->c, keep, sizeof keep);
  if (n == 0)
    r->K = 0;
  return n;
}

/* Count one lease in bucket kn (moving the ring on to it if newer). */
static void count_in(ring *r, uint64_t kn) {
  uint64_t k;
  if (r->K == 0) {
    r->K = kn;
  } else if (kn > r->K) {
    for (k = r->K + 1; k <= kn && k <= r->K + 4; k++)
      r->c[k & 3] = 0;
    r->K = kn;
  } else if (kn + 3 < r->K) {
    kn = r->K - 3; /* the clock stepped back */
  }
  if (r->c[kn & 3] < CMASK) /* full only in a record not ours (a renewal) */
    r->c[kn & 3]++;
}

/* Take one lease off bucket k if it is live and holds one. */
static int take(ring *r, uint64_t lo, uint64_t k) {
  if (r->K == 0 || k < lo || k > r->K || k + 3 < r->K || r->c[k & 3] == 0)
    return 0;
  r->c[k & 3]--;
  if (!(r->c[0] | r->c[1] | r->c[2] | r->c[3]))
    r->K = 0;
  return 1;
}

static uint64_t make_id(int64_t c, uint64_t id) {
  return (uint64_t)c << ID_SHIFT | (uint64_t)1 << U_SHIFT |
         (id & (((uint64_t)1 << U_SHIFT) - 1));
}

int sluice__lease_count_run(const sluice_op *op, const sluice_state *in,
                            sluice_state *out, int64_t now,
                            sluice_verdict *v) {
  const sluice_lease_params *p = (const sluice_lease_params *)op->params;
  int64_t c = now >> U_SHIFT, live;
  uint64_t lo = live_from(p, c), mine = bucket_of(p, (int64_t)(op->id >> ID_SHIFT));
  uint64_t k;
  ring r;
  unpack(in, &r);
  live = roll(p, c, &r);
  out[0] = in[0];
  v->lease_id = op->id;
  switch (op->kind) {
  case SLUICE_OP_ACQUIRE:
    if (live < p->max) {
      count_in(&r, bucket_of(p, c));
      live++;
      v->allowed = 1;
      v->lease_id = make_id(c, op->id);
    }
    break;
  case SLUICE_OP_RENEW:
    if (take(&r, lo, mine)) {
      count_in(&r, bucket_of(p, c));
      v->allowed = 1;
      v->lease_id = make_id(c, op->id);
    } else {
      v->flags |= SLUICE_V_EXPIRED;
    }
    break;
  default: /* SLUICE_OP_LEASE_RELEASE */
    if (take(&r, lo, mine)) {
      live--;
      v->allowed = 1;
    } else {
      v->flags |= SLUICE_V_EXPIRED;
    }
    break;
  }
  if (v->allowed)
    pack(&r, out);
  v->limit = p->max;
  /* More than max: a record another max wrote (a plan's numbers changed). */
  v->remaining = live > p->max ? 0 : p->max - live;
  for (k = r.K >= 3 ? r.K - 3 : 0; r.K && k <= r.K; k++)
    if (r.c[k & 3]) {
      if (op->kind == SLUICE_OP_ACQUIRE && !v->allowed &&
          v->retry_after_ns == 0)
        v->retry_after_ns = bucket_end(p, k) - now;
      v->reset_ns = bucket_end(p, k) - now;
    }
  return SLUICE_OK;
}

int64_t sluice__lease_count_expiry(const sluice_lease_params *p,
                                   const sluice_state *s) {
  ring r;
  int j;
  unpack(s, &r);
  for (j = 0; r.K && j < 4 && r.K >= (uint64_t)j; j++)
    if (r.c[(r.K - (uint64_t)j) & 3])
      return bucket_end(p, r.K - (uint64_t)j);
  return 0;
}

/* An ACQUIRE's lease (the live total grew by one) comes off the bucket it
** went into, the newest of `post`, while `cur` still counts one there. */
int sluice__lease_count_undo(const sluice_lease_params *p,
                             const sluice_state *pre,
                             const sluice_state *post,
                             const sluice_state *cur, int64_t now,
                             sluice_state *out) {
  ring a, b, x;
  int64_t c = now >> U_SHIFT;
  unpack(pre, &a);
  unpack(post, &b);
  unpack(cur, &x);
  if (roll(p, c, &b) != roll(p, c, &a) + 1)
    return 0;
  (void)roll(p, c, &x);
  if (!take(&x, live_from(p, c), b.K))
    return 0;
  pack(&x, out);
  return 1;
}

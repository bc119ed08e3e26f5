/*
** Counted lease set (lib/algo/lease_count.c): a concurrency limit above
** SLUICE_GROUP_MAX leases in one record.  Its documented bounds: at most
** max live leases; a lease never ends before its TTL and a leaked one ends
** less than ttl/3 + 4 ms after it; release and renew by the id the grant
** returned; an id whose bucket ended does nothing; a refused acquire
** changes nothing; the lock-free stores' undo takes back a grant.
*/
#include "unit.h"
#include "algo/algo_int.h"
#include "op.h"

#define LATE(ttl) ((ttl) / 3 + 4 * MS)

static const sluice_key one_key = {"{C}n", 4};

static int crc(const sluice_lease_params *p, sluice_state *st, int64_t now,
               int kind, uint64_t id, sluice_verdict *v) {
  sluice_op op = {SLUICE_ALGO_LEASE, kind, 1, &one_key, p, 0, id};
  sluice_state out;
  int rc = sluice__op_step(&op, st, &out, now, v);
  if (rc == SLUICE_OK)
    *st = out;
  return rc;
}

static sluice_verdict step(const sluice_lease_params *p, sluice_state *st,
                           int64_t now, int kind, uint64_t id) {
  sluice_verdict v;
  int rc = crc(p, st, now, kind, id, &v);
  cr_assert_eq(rc, SLUICE_OK, "%s", sluice_err_name(rc));
  return v;
}

static int64_t expiry(const sluice_lease_params *p, const sluice_state *st) {
  sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 1, &one_key, p, 0, 1};
  return sluice__op_expiry(&op, 0, st);
}

/* GitHub's 100 concurrent requests: the 101st refused until one ends or is
** released, a release lets exactly one more in. */
Test(lease_count, hundred_then_refuse_then_release) {
  const sluice_lease_params p = {100, 60 * SEC};
  sluice_state st = {{0, 0}};
  uint64_t ids[100];
  int64_t t0 = 1764633600 * SEC, now = t0;
  sluice_verdict v;
  int i;
  for (i = 0; i < 100; i++, now += 10 * MS) {
    v = step(&p, &st, now, SLUICE_OP_ACQUIRE, (uint64_t)i + 1);
    cr_assert(v.allowed, "lease %d", i);
    cr_assert_eq(v.remaining, 99 - i);
    cr_assert_eq(v.limit, 100);
    cr_assert_neq(v.lease_id, 0);
    ids[i] = v.lease_id;
  }
  sluice_state before = st;
  v = step(&p, &st, now, SLUICE_OP_ACQUIRE, 999);
  cr_assert_not(v.allowed, "the 101st");
  cr_assert(memcmp(&st, &before, sizeof st) == 0, "a refusal writes nothing");
  /* Retry-After: when the oldest lease ends (never before its TTL). */
  cr_assert_geq(now + v.retry_after_ns, t0 + p.ttl_ns);
  cr_assert_lt(now + v.retry_after_ns, t0 + p.ttl_ns + LATE(p.ttl_ns));
  v = step(&p, &st, now, SLUICE_OP_LEASE_RELEASE, ids[42]);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 1);
  cr_assert(step(&p, &st, now, SLUICE_OP_ACQUIRE, 1000).allowed);
  cr_assert_not(step(&p, &st, now, SLUICE_OP_ACQUIRE, 1001).allowed);
}

/* A leaked lease: still counted just before its TTL, gone less than
** ttl/3 + 4 ms after it, over TTLs from 1 ns to a week and any start. */
Test(lease_count, leaked_lease_ends_within_bound) {
  rng r = {77};
  int n;
  for (n = 0; n < 20000; n++) {
    sluice_lease_params p = {SLUICE_GROUP_MAX + 1 + rng_range(&r, 0, 5000), 0};
    sluice_state st = {{0, 0}};
    int64_t t = rng_range(&r, 0, INT64_C(1) << (rng_range(&r, 1, 61)));
    int64_t e, end;
    sluice_verdict v;
    p.ttl_ns = rng_range(&r, 1, INT64_C(1) << rng_range(&r, 0, 49));
    v = step(&p, &st, t, SLUICE_OP_ACQUIRE, rng_next(&r) | 1);
    cr_assert(v.allowed);
    e = expiry(&p, &st);
    cr_assert_geq(e, t + p.ttl_ns, "ends early: ttl %ld at %ld", p.ttl_ns, t);
    cr_assert_lt(e, t + p.ttl_ns + LATE(p.ttl_ns), "ends late: ttl %ld",
                 p.ttl_ns);
    cr_assert_eq(v.reset_ns, e - t);
    end = t + p.ttl_ns - 1;
    if (end >= t) {
      sluice_state s2 = st;
      cr_assert_eq(step(&p, &s2, end, SLUICE_OP_ACQUIRE, 5).remaining,
                   p.max - 2, "counted until its TTL");
    }
    v = step(&p, &st, e, SLUICE_OP_LEASE_RELEASE, v.lease_id);
    cr_assert_not(v.allowed, "gone when its bucket ends");
    cr_assert_eq(v.flags, SLUICE_V_EXPIRED);
    cr_assert_eq(v.remaining, p.max);
  }
}

/* An id names its bucket: a release takes one lease off it; counts cannot
** tell ids apart, so a second release of one id takes another lease of the
** same bucket, and one more finds it empty. */
Test(lease_count, double_release_takes_a_bucket_mate) {
  const sluice_lease_params p = {40, 30 * SEC};
  sluice_state st = {{0, 0}};
  int64_t now = 1000 * SEC;
  uint64_t a = step(&p, &st, now, SLUICE_OP_ACQUIRE, 1).lease_id;
  uint64_t c = step(&p, &st, now, SLUICE_OP_ACQUIRE, 3).lease_id;
  sluice_verdict v;
  /* b: 15 s later, a bucket (ttl/3 wide, about 10 s) of its own. */
  cr_assert(step(&p, &st, now + 15 * SEC, SLUICE_OP_ACQUIRE, 2).allowed);
  now += 16 * SEC;
  v = step(&p, &st, now, SLUICE_OP_LEASE_RELEASE, a);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 38);
  v = step(&p, &st, now, SLUICE_OP_LEASE_RELEASE, a);
  cr_assert(v.allowed, "takes c, a's bucket mate");
  cr_assert_eq(v.remaining, 39);
  v = step(&p, &st, now, SLUICE_OP_LEASE_RELEASE, a);
  cr_assert_not(v.allowed, "the bucket is empty; b's is not touched");
  cr_assert_eq(v.flags, SLUICE_V_EXPIRED);
  cr_assert_eq(v.remaining, 39);
  cr_assert_eq(step(&p, &st, now, SLUICE_OP_LEASE_RELEASE, c).flags,
               SLUICE_V_EXPIRED);
}

/* Renewal moves the lease to the bucket of now + ttl and names it anew;
** the old id then names a bucket that ends, and does nothing after. */
Test(lease_count, renew_moves_and_renames) {
  const sluice_lease_params p = {50, 30 * SEC};
  sluice_state st = {{0, 0}};
  int64_t now = 5000 * SEC;
  uint64_t a = step(&p, &st, now, SLUICE_OP_ACQUIRE, 9).lease_id, a2;
  sluice_verdict v = step(&p, &st, now + 20 * SEC, SLUICE_OP_RENEW, a);
  cr_assert(v.allowed);
  a2 = v.lease_id;
  cr_assert_neq(a2, a);
  cr_assert_geq(expiry(&p, &st), now + 50 * SEC);
  v = step(&p, &st, now + 45 * SEC, SLUICE_OP_LEASE_RELEASE, a);
  cr_assert_eq(v.flags, SLUICE_V_EXPIRED, "the old id's bucket ended");
  cr_assert_eq(v.remaining, 49, "the renewed lease lives on");
  v = step(&p, &st, now + 45 * SEC, SLUICE_OP_LEASE_RELEASE, a2);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 50);
  cr_assert_eq(expiry(&p, &st), 0, "an empty record is deleted");
  v = step(&p, &st, now + 45 * SEC, SLUICE_OP_RENEW, a2);
  cr_assert_eq(v.flags, SLUICE_V_EXPIRED);
}

/* The largest set fills exactly. */
Test(lease_count, largest) {
  const sluice_lease_params p = {SLUICE_LEASE_COUNT_MAX, 10 * SEC};
  sluice_state st = {{0, 0}};
  int64_t now = 77 * SEC, i;
  for (i = 0; i < SLUICE_LEASE_COUNT_MAX; i++)
    cr_assert(step(&p, &st, now + i, SLUICE_OP_ACQUIRE, 1).allowed);
  cr_assert_not(step(&p, &st, now + i, SLUICE_OP_ACQUIRE, 1).allowed);
}

/* A lock-free store's rollback: a grant comes off again, a release is
** not put back (that only under-admits until the TTL). */
Test(lease_count, undo) {
  const sluice_lease_params p = {64, 10 * SEC};
  sluice_state pre = {{0, 0}}, post, cur, got;
  int64_t now = 3 * SEC;
  sluice_verdict v;
  v = step(&p, &pre, now, SLUICE_OP_ACQUIRE, 1);
  post = pre;
  step(&p, &post, now, SLUICE_OP_ACQUIRE, 2);
  cur = post;
  step(&p, &cur, now + SEC, SLUICE_OP_ACQUIRE, 3);
  cr_assert(sluice__lease_undo(&p, &pre, &post, &cur, now + SEC, &got));
  cr_assert_eq(step(&p, &got, now + SEC, SLUICE_OP_ACQUIRE, 4).remaining, 61);
  step(&p, &cur, now + SEC, SLUICE_OP_LEASE_RELEASE, v.lease_id);
  post = cur;
  step(&p, &post, now + SEC, SLUICE_OP_LEASE_RELEASE, v.lease_id);
  cr_assert_not(sluice__lease_undo(&p, &cur, &post, &post, now + SEC, &got));
}

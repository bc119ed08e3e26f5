/*
** Lease set (spec section 6, "Concurrency lease"): acquire up to max, deny
** with retry-after = earliest expiry - now, release by id, renew, expired
** leases reclaimed, idempotent re-acquire, mutual exclusion with max = 1,
** validation, and the single-call sluice__lease_step() entry point.
*/
#include "unit.h"
#include "../common/one_step.h"
#include "op.h"

static sluice_key slot_keys[SLUICE_GROUP_MAX];
static char slot_names[SLUICE_GROUP_MAX][8];

static const sluice_key *slots(void) {
  int i;
  for (i = 0; i < SLUICE_GROUP_MAX; i++) {
    snprintf(slot_names[i], sizeof slot_names[i], "{L}s%d", i);
    slot_keys[i].data = slot_names[i];
    slot_keys[i].len = strlen(slot_names[i]);
  }
  return slot_keys;
}

/* One lease op over the group; writes back on success. */
static int lrc(const sluice_lease_params *p, sluice_state *st, int64_t now,
               int kind, uint64_t id, sluice_verdict *v) {
  sluice_op op = {SLUICE_ALGO_LEASE, kind, (int)p->max, slots(), p, 0, id};
  sluice_state out[SLUICE_GROUP_MAX];
  int rc = sluice__op_step(&op, st, out, now, v);
  if (rc == SLUICE_OK)
    memcpy(st, out, sizeof(sluice_state) * (size_t)p->max);
  return rc;
}

static int lease(const sluice_lease_params *p, sluice_state *st, int64_t now,
                 int kind, uint64_t id, sluice_verdict *v) {
  int rc = lrc(p, st, now, kind, id, v);
  cr_assert_eq(rc, SLUICE_OK, "lease op: %s", sluice_err_name(rc));
  return v->allowed;
}

static int64_t slot_expiry(const sluice_lease_params *p, const sluice_state *st,
                           int i) {
  sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, (int)p->max, slots(), p,
                  0, 1};
  return sluice__op_expiry(&op, i, &st[i]);
}

Test(lease, acquire_up_to_max_then_deny) {
  const sluice_lease_params p = {3, 10 * SEC};
  sluice_state st[3], before[3];
  sluice_verdict v;
  int64_t t = 100 * SEC;
  uint64_t id;
  memset(st, 0, sizeof st);
  for (id = 1; id <= 3; id++) {
    cr_assert(lease(&p, st, t + (int64_t)(id - 1) * SEC, SLUICE_OP_ACQUIRE, id, &v));
    cr_assert_eq(v.lease_id, id);
    cr_assert_eq(v.binding, (int)id - 1, "lowest free slot");
    cr_assert_eq(v.remaining, 3 - (int64_t)id);
    cr_assert_eq(v.limit, 3);
    cr_assert_eq(v.reset_ns, 10 * SEC, "until the newest lease ends");
    cr_assert_eq(v.retry_after_ns, 0);
  }
  cr_assert_eq(slot_expiry(&p, st, 0), t + 10 * SEC);
  cr_assert_eq(slot_expiry(&p, st, 2), t + 12 * SEC);
  /* Full: retry when the earliest lease (id 1, t + 10 s) runs out. */
  memcpy(before, st, sizeof st);
  cr_assert(!lease(&p, st, t + 3 * SEC, SLUICE_OP_ACQUIRE, 4, &v));
  cr_assert_eq(v.retry_after_ns, 7 * SEC);
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(v.reset_ns, 9 * SEC);
  cr_assert_eq(v.flags, 0);
  cr_assert(memcmp(st, before, sizeof st) == 0, "a denial took nothing");
  cr_assert(!lease(&p, st, t + 10 * SEC - 1, SLUICE_OP_ACQUIRE, 4, &v));
  cr_assert_eq(v.retry_after_ns, 1);
  /* Exactly at expiry the crashed worker's slot is reclaimed. */
  cr_assert(lease(&p, st, t + 10 * SEC, SLUICE_OP_ACQUIRE, 4, &v));
  cr_assert_eq(v.binding, 0);
  cr_assert_eq(st[0].w[0], 4);
  cr_assert_eq(v.remaining, 0);
}

Test(lease, release_by_id) {
  const sluice_lease_params p = {2, 10 * SEC};
  sluice_state st[2];
  sluice_verdict v;
  memset(st, 0, sizeof st);
  cr_assert(lease(&p, st, 0, SLUICE_OP_ACQUIRE, 11, &v));
  cr_assert(lease(&p, st, 0, SLUICE_OP_ACQUIRE, 22, &v));
  cr_assert(!lease(&p, st, SEC, SLUICE_OP_ACQUIRE, 33, &v));
  cr_assert(lease(&p, st, SEC, SLUICE_OP_LEASE_RELEASE, 11, &v));
  cr_assert_eq(v.lease_id, 11);
  cr_assert_eq(v.flags, 0);
  cr_assert_eq(v.remaining, 1);
  cr_assert_eq(st[0].w[0], 0, "released slot is free");
  cr_assert_eq(slot_expiry(&p, st, 0), 0);
  cr_assert(lease(&p, st, SEC, SLUICE_OP_ACQUIRE, 33, &v));
  cr_assert_eq(v.binding, 0);
  /* Releasing twice, or an id never seen: allowed = 0 and EXPIRED. */
  cr_assert(!lease(&p, st, SEC, SLUICE_OP_LEASE_RELEASE, 11, &v));
  cr_assert_eq(v.flags, SLUICE_V_EXPIRED);
  cr_assert(!lease(&p, st, SEC, SLUICE_OP_LEASE_RELEASE, 999, &v));
  cr_assert_eq(v.flags, SLUICE_V_EXPIRED);
  cr_assert_eq(v.remaining, 0, "a stray release freed someone else's slot");
}

Test(lease, release_of_expired_lease_reports_expired) {
  const sluice_lease_params p = {2, 10 * SEC};
  sluice_state st[2];
  sluice_verdict v;
  memset(st, 0, sizeof st);
  cr_assert(lease(&p, st, 0, SLUICE_OP_ACQUIRE, 5, &v));
  cr_assert(!lease(&p, st, 10 * SEC, SLUICE_OP_LEASE_RELEASE, 5, &v));
  cr_assert_eq(v.flags, SLUICE_V_EXPIRED);
  cr_assert_eq(v.remaining, 2);
  cr_assert_eq(st[0].w[0], 0, "the expired slot is cleared");
}

Test(lease, renew) {
  const sluice_lease_params p = {2, 10 * SEC};
  sluice_state st[2], before[2];
  sluice_verdict v;
  memset(st, 0, sizeof st);
  cr_assert(lease(&p, st, 0, SLUICE_OP_ACQUIRE, 7, &v));
  cr_assert(lease(&p, st, 6 * SEC, SLUICE_OP_RENEW, 7, &v));
  cr_assert_eq(v.lease_id, 7);
  cr_assert_eq(slot_expiry(&p, st, 0), 16 * SEC);
  cr_assert_eq(v.reset_ns, 10 * SEC);
  /* Still held after the original expiry. */
  cr_assert(lease(&p, st, 12 * SEC, SLUICE_OP_ACQUIRE, 8, &v));
  cr_assert_eq(v.binding, 1);
  /* Renewing a lease that ran out fails and changes nothing. */
  memcpy(before, st, sizeof st);
  cr_assert(!lease(&p, st, 16 * SEC, SLUICE_OP_RENEW, 7, &v));
  cr_assert_eq(v.flags, SLUICE_V_EXPIRED);
  cr_assert(memcmp(st, before, sizeof st) == 0);
  cr_assert(!lease(&p, st, 16 * SEC, SLUICE_OP_RENEW, 12345, &v));
  cr_assert_eq(v.flags, SLUICE_V_EXPIRED);
}

Test(lease, reacquire_is_idempotent) {
  const sluice_lease_params p = {2, 10 * SEC};
  sluice_state st[2];
  sluice_verdict v;
  memset(st, 0, sizeof st);
  cr_assert(lease(&p, st, 0, SLUICE_OP_ACQUIRE, 42, &v));
  cr_assert_eq(v.remaining, 1);
  cr_assert(lease(&p, st, 3 * SEC, SLUICE_OP_ACQUIRE, 42, &v));
  cr_assert_eq(v.binding, 0);
  cr_assert_eq(v.remaining, 1, "a retried acquire must not take a 2nd slot");
  cr_assert_eq(slot_expiry(&p, st, 0), 13 * SEC, "and it renews");
  cr_assert_eq(st[1].w[0], 0);
  /* Even with a full set, the holder's re-acquire succeeds. */
  cr_assert(lease(&p, st, 3 * SEC, SLUICE_OP_ACQUIRE, 43, &v));
  cr_assert(lease(&p, st, 4 * SEC, SLUICE_OP_ACQUIRE, 42, &v));
  cr_assert_eq(v.remaining, 0);
}

Test(lease, mutual_exclusion_max_1) {
  const sluice_lease_params p = {1, 30 * SEC};
  sluice_state st[1] = {{{0, 0}}};
  sluice_verdict v;
  int64_t t;
  cr_assert(lease(&p, st, SEC, SLUICE_OP_ACQUIRE, 1, &v));
  for (t = SEC; t < 31 * SEC; t += SEC) {
    cr_assert(!lease(&p, st, t, SLUICE_OP_ACQUIRE, 2, &v));
    cr_assert_eq(v.retry_after_ns, 31 * SEC - t);
  }
  cr_assert(lease(&p, st, 20 * SEC, SLUICE_OP_LEASE_RELEASE, 1, &v));
  cr_assert(lease(&p, st, 20 * SEC, SLUICE_OP_ACQUIRE, 2, &v));
  cr_assert(!lease(&p, st, 20 * SEC, SLUICE_OP_ACQUIRE, 1, &v));
}

Test(lease, expired_leases_reclaimed_lowest_first) {
  const sluice_lease_params p = {4, 5 * SEC};
  sluice_state st[4];
  sluice_verdict v;
  uint64_t id;
  memset(st, 0, sizeof st);
  for (id = 1; id <= 4; id++)
    cr_assert(lease(&p, st, (int64_t)id * SEC, SLUICE_OP_ACQUIRE, id, &v));
  /* At 7 s the leases of ids 1 and 2 (ending 6 s and 7 s) are gone. */
  cr_assert(lease(&p, st, 7 * SEC, SLUICE_OP_ACQUIRE, 10, &v));
  cr_assert_eq(v.binding, 0);
  cr_assert_eq(v.remaining, 1);
  cr_assert(lease(&p, st, 7 * SEC, SLUICE_OP_ACQUIRE, 11, &v));
  cr_assert_eq(v.binding, 1);
  cr_assert(!lease(&p, st, 7 * SEC, SLUICE_OP_ACQUIRE, 12, &v));
  cr_assert_eq(v.retry_after_ns, SEC); /* id 3 ends at 8 s */
  /* Once everything ran out, every slot is free again. */
  cr_assert(lease(&p, st, 100 * SEC, SLUICE_OP_ACQUIRE, 13, &v));
  cr_assert_eq(v.remaining, 3);
  cr_assert_eq(v.binding, 0);
}

Test(lease, group_of_32) {
  const sluice_lease_params p = {SLUICE_GROUP_MAX, SEC};
  sluice_state st[SLUICE_GROUP_MAX];
  sluice_verdict v;
  uint64_t id;
  memset(st, 0, sizeof st);
  for (id = 1; id <= SLUICE_GROUP_MAX; id++)
    cr_assert(lease(&p, st, 0, SLUICE_OP_ACQUIRE, id, &v));
  cr_assert(!lease(&p, st, 0, SLUICE_OP_ACQUIRE, 100, &v));
  cr_assert_eq(v.retry_after_ns, SEC);
}

Test(lease, single_call_entry_point) {
  /* sluice__lease_step() builds its own group of p->max slot keys. */
  static const sluice_lease_params ps[] = {{1, SEC}, {2, SEC}, {3, SEC},
                                           {SLUICE_GROUP_MAX, SEC}};
  size_t k;
  for (k = 0; k < sizeof ps / sizeof ps[0]; k++) {
    sluice_state st[SLUICE_GROUP_MAX], out[SLUICE_GROUP_MAX];
    sluice_verdict v;
    int rc;
    memset(st, 0, sizeof st);
    rc = sluice__lease_step(&ps[k], st, 5, SLUICE_OP_ACQUIRE, 9, out, &v);
    cr_assert_eq(rc, SLUICE_OK, "max %lld: %s", (long long)ps[k].max,
                 sluice_err_name(rc));
    cr_assert(v.allowed);
    cr_assert_eq(out[0].w[0], 9);
    cr_assert_eq(out[0].w[1], 5 + SEC);
  }
}

Test(lease, validation) {
  const sluice_lease_params ok = {2, SEC};
  static const sluice_lease_params bad[] = {
      {0, SEC}, {-1, SEC}, {SLUICE_LEASE_COUNT_MAX + 1, SEC}, {1, 0}, {1, -1},
      {1, SLUICE_DURATION_MAX + 1}};
  sluice_state st[2];
  sluice_verdict v;
  size_t i;
  memset(st, 0, sizeof st);
  cr_assert_eq(sluice__lease_params_check(NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice__lease_params_check(&ok), SLUICE_OK);
  cr_assert_eq(sluice__lease_params_check(&(sluice_lease_params){1,
                                              SLUICE_DURATION_MAX}),
               SLUICE_OK);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_assert_eq(sluice__lease_params_check(&bad[i]), SLUICE_EINVAL);
  cr_assert_eq(lrc(&ok, st, 0, SLUICE_OP_ACQUIRE, 0, &v), SLUICE_EINVAL,
               "lease id 0");
  cr_assert_eq(lrc(&ok, st, 0, SLUICE_OP_CONSUME, 1, &v), SLUICE_EINVAL);
  cr_assert_eq(lrc(&ok, st, 0, SLUICE_OP_ADD, 1, &v), SLUICE_EINVAL);
  cr_assert_eq(lrc(&ok, st, -1, SLUICE_OP_ACQUIRE, 1, &v), SLUICE_EINVAL);
  {
    /* The group must have exactly max keys. */
    sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 1, slots(), &ok, 0, 1};
    sluice_state out[2];
    cr_assert_eq(sluice__op_step(&op, st, out, 0, &v), SLUICE_EINVAL);
    op.nkeys = 3;
    cr_assert_eq(sluice__op_step(&op, st, out, 0, &v), SLUICE_EINVAL);
  }
  {
    /* A counted set (max > SLUICE_GROUP_MAX) is one record, no more. */
    const sluice_lease_params big = {SLUICE_GROUP_MAX + 1, SEC};
    sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 2, slots(), &big, 0,
                    1};
    sluice_state out[2];
    cr_assert_eq(sluice__op_step(&op, st, out, 0, &v), SLUICE_EINVAL);
    op.nkeys = 1;
    cr_assert_eq(sluice__op_step(&op, st, out, 0, &v), SLUICE_OK);
  }
  {
    /* Slot keys are distinct keys of one tag. */
    const sluice_key dup[2] = {{"{L}a", 4}, {"{L}a", 4}};
    const sluice_key mixed[2] = {{"{L}a", 4}, {"{M}b", 4}};
    sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 2, dup, &ok, 0, 1};
    sluice_state out[2];
    cr_assert_eq(sluice__op_step(&op, st, out, 0, &v), SLUICE_EKEY);
    op.keys = mixed;
    cr_assert_eq(sluice__op_step(&op, st, out, 0, &v), SLUICE_EKEY);
  }
}

Test(lease, mutual_exclusion_at_int64_max) {
  /* A lease taken at the last representable instant still excludes. */
  const sluice_lease_params p = {1, HOUR};
  static const int64_t nows[] = {INT64_MAX - HOUR, INT64_MAX - 1, INT64_MAX};
  size_t i;
  for (i = 0; i < sizeof nows / sizeof nows[0]; i++) {
    sluice_state st[1] = {{{0, 0}}};
    sluice_verdict v;
    cr_assert(lease(&p, st, nows[i], SLUICE_OP_ACQUIRE, 1, &v));
    cr_assert(!lease(&p, st, nows[i], SLUICE_OP_ACQUIRE, 2, &v),
              "now = INT64_MAX - %lld: two holders with max = 1",
              (long long)(INT64_MAX - nows[i]));
    /* The first one legitimately ends at INT64_MAX; the others later. */
    if (nows[i] > INT64_MAX - HOUR)
      cr_assert(!lease(&p, st, INT64_MAX, SLUICE_OP_ACQUIRE, 2, &v));
  }
}

/* ---------------------------------------------------- reference model --- */

/* The spec's ZSET (member = lease id, score = expiry), with slot positions
** tracked as documented: ACQUIRE takes the lowest free slot; a live holder's
** re-acquire renews in place. */
typedef struct lmodel {
  uint64_t id[SLUICE_GROUP_MAX];
  int64_t exp[SLUICE_GROUP_MAX];
} lmodel;

static void lm_step(const sluice_lease_params *p, lmodel *m, int64_t now,
                    int kind, uint64_t id, sluice_verdict *ev) {
  int n = (int)p->max, i, mine = -1, nheld = 0;
  int64_t earliest = INT64_MAX, latest = now;
  memset(ev, 0, sizeof *ev);
  ev->now_ns = now;
  ev->lease_id = id;
  /* ZREMRANGEBYSCORE -inf now */
  for (i = 0; i < n; i++)
    if (m->id[i] && m->exp[i] <= now)
      m->id[i] = 0;
  for (i = 0; i < n; i++)
    if (m->id[i] == id)
      mine = i;
  switch (kind) {
  case SLUICE_OP_ACQUIRE:
    if (mine < 0)
      for (i = 0; i < n; i++)
        if (!m->id[i]) {
          mine = i;
          break;
        }
    if (mine >= 0) {
      m->id[mine] = id;
      m->exp[mine] = now + p->ttl_ns;
      ev->allowed = 1;
    }
    break;
  case SLUICE_OP_RENEW:
    if (mine >= 0) {
      m->exp[mine] = now + p->ttl_ns;
      ev->allowed = 1;
    } else {
      ev->flags = SLUICE_V_EXPIRED;
    }
    break;
  default:
    if (mine >= 0) {
      m->id[mine] = 0;
      ev->allowed = 1;
    } else {
      ev->flags = SLUICE_V_EXPIRED;
    }
    break;
  }
  for (i = 0; i < n; i++) {
    if (!m->id[i])
      continue;
    nheld++;
    if (m->exp[i] < earliest)
      earliest = m->exp[i];
    if (m->exp[i] > latest)
      latest = m->exp[i];
  }
  ev->binding = ev->allowed ? mine : 0;
  ev->limit = p->max;
  ev->remaining = p->max - nheld;
  ev->reset_ns = latest - now;
  if (kind == SLUICE_OP_ACQUIRE && !ev->allowed)
    ev->retry_after_ns = earliest - now;
}

Test(lease, matches_zset_reference_model) {
  rng r = {0x1ea5e};
  int trial, grants = 0, denials = 0;
  for (trial = 0; trial < 150; trial++) {
    sluice_lease_params p = {rng_range(&r, 1, 6), rng_range(&r, 1, 5000)};
    sluice_state st[SLUICE_GROUP_MAX];
    lmodel m;
    int64_t t = rng_range(&r, 0, INT64_C(1) << 50);
    int i;
    memset(st, 0, sizeof st);
    memset(&m, 0, sizeof m);
    for (i = 0; i < 400; i++) {
      sluice_verdict v, ev;
      int64_t roll = rng_range(&r, 0, 9);
      int kind = roll < 6   ? SLUICE_OP_ACQUIRE
                 : roll < 8 ? SLUICE_OP_LEASE_RELEASE
                            : SLUICE_OP_RENEW;
      uint64_t id = (uint64_t)rng_range(&r, 1, 8);
      t += rng_range(&r, 0, p.ttl_ns / 3 + 1);
      lm_step(&p, &m, t, kind, id, &ev);
      lease(&p, st, t, kind, id, &v);
      if (kind == SLUICE_OP_ACQUIRE)
        v.allowed ? grants++ : denials++;
      cr_assert(verdict_eq(&v, &ev),
                "trial %d step %d kind %d id %llu: allowed %d/%d binding %d/%d "
                "rem %lld/%lld retry %lld/%lld reset %lld/%lld flags %u/%u",
                trial, i, kind, (unsigned long long)id, v.allowed, ev.allowed,
                v.binding, ev.binding, (long long)v.remaining,
                (long long)ev.remaining, (long long)v.retry_after_ns,
                (long long)ev.retry_after_ns, (long long)v.reset_ns,
                (long long)ev.reset_ns, v.flags, ev.flags);
    }
  }
  cr_assert_gt(grants, 1000);
  cr_assert_gt(denials, 1000);
}

/* The same model through a mem store: slot records are created, rewritten
** and dropped (a released or expired slot is a fresh record) while other
** keys come and go in the same table. */
Test(lease, mem_store_matches_model) {
  const sluice_gcra_params fill = {1, 100, 1};
  sluice_lease_params p = {4, 700};
  sluice_limiter *l = NULL;
  sluice_clock *c;
  sluice_limiter_options o;
  lmodel m;
  rng r = {0x3e3};
  int64_t t = 1000;
  int i;
  memset(&m, 0, sizeof m);
  memset(&o, 0, sizeof o);
  cr_assert_eq(sluice_clock_manual(t, &c), SLUICE_OK);
  o.clock = c;
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_OK);
  for (i = 0; i < 6000; i++) {
    sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 4, slots(), &p, 0, 0};
    sluice_verdict v, ev;
    int64_t roll = rng_range(&r, 0, 9);
    char fk[16];
    op.kind = roll < 6   ? SLUICE_OP_ACQUIRE
              : roll < 8 ? SLUICE_OP_LEASE_RELEASE
                         : SLUICE_OP_RENEW;
    op.id = (uint64_t)rng_range(&r, 1, 7);
    t += rng_range(&r, 0, 250);
    lm_step(&p, &m, t, op.kind, op.id, &ev);
    cr_assert_eq(op_decide(l, &op, t, &v), SLUICE_OK);
    cr_assert(verdict_eq(&v, &ev), "step %d: allowed %d/%d rem %lld/%lld", i,
              v.allowed, ev.allowed, (long long)v.remaining,
              (long long)ev.remaining);
    snprintf(fk, sizeof fk, "f%d", i % 500);
    cr_assert_eq(sluice_limiter_take(l, fk, strlen(fk), &fill, 1, &v),
                 SLUICE_OK);
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

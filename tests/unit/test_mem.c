/*
** The mem backend: max_keys -> SLUICE_EFULL without evicting live records
** (a boxed key stays boxed under a flood of new keys), reclamation of expired
** records (SLUICE_CTL_MEM_COUNT / SLUICE_CTL_MEM_SWEEP), records left fresh
** are not kept, and thread safety: threads hammering one hot key, a tenant +
** key group and a lease set never over-admit (manual clock, bounded).
*/
#include <pthread.h>
#include <stdatomic.h>

#include <sluice/sluice_mem.h>
#include "unit.h"
#include "../common/one_step.h"
#include "op.h"

static sluice_limiter *open_mem(sluice_clock *c, const char *store) {
  sluice_limiter_options o;
  sluice_limiter *l = NULL;
  memset(&o, 0, sizeof o);
  o.clock = c;
  o.store = store;
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_OK);
  return l;
}

static int64_t count(sluice_limiter *l) {
  int64_t n = -1;
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_MEM_COUNT, &n), SLUICE_OK);
  return n;
}

static int64_t sweep(sluice_limiter *l, int64_t now) {
  int64_t n = now;
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_MEM_SWEEP, &n), SLUICE_OK);
  return n;
}

static const sluice_penalty_params pen = {
    20, 60 * SEC, {5 * MIN, 60 * MIN, SLUICE_FOREVER}, 24 * HOUR};

static int penalty(sluice_limiter *l, const char *key, int kind, int64_t arg,
                   sluice_verdict *v) {
  sluice_key k = {key, strlen(key)};
  sluice_op op = {SLUICE_ALGO_PENALTY, kind, 1, &k, &pen, arg, 0};
  return op_decide(l, &op, SLUICE_NOW, v);
}

Test(mem, max_keys_refuses_new_keys_only) {
  const sluice_gcra_params p = {1, HOUR, 5};
  sluice_clock *c;
  sluice_limiter *l;
  sluice_verdict v;
  sluice_state st;
  int64_t e;
  int i;
  cr_assert_eq(sluice_clock_manual(SEC, &c), SLUICE_OK);
  l = open_mem(c, "mem:max_keys=10");
  for (i = 0; i < 10; i++) {
    char k[8];
    snprintf(k, sizeof k, "k%d", i);
    cr_assert_eq(sluice_limiter_take(l, k, strlen(k), &p, 1, &v), SLUICE_OK);
  }
  cr_assert_eq(count(l), 10);
  cr_assert_eq(sluice_limiter_take(l, "new", 3, &p, 1, &v), SLUICE_EFULL);
  cr_assert_not_null(strstr(sluice_limiter_errmsg(l), "max_keys"));
  cr_assert_eq(sluice_limiter_get(l, "new", 3, &st, &e), SLUICE_ENOTFOUND);
  cr_assert_eq(count(l), 10);
  /* Existing keys keep working, with their state. */
  cr_assert_eq(sluice_limiter_take(l, "k3", 2, &p, 4, &v), SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 0);
  cr_assert_eq(sluice_limiter_take(l, "k3", 2, &p, 1, &v), SLUICE_OK);
  cr_assert(!v.allowed);
  /* A read of an absent key needs no room. */
  {
    sluice_key k = KEY("absent");
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &p, 0, 0};
    cr_assert_eq(op_decide(l, &op, SLUICE_NOW, &v), SLUICE_OK);
    cr_assert_eq(v.remaining, 5);
  }
  /* A group with one new key at the limit: refused whole. */
  {
    const sluice_gcra_params ps[2] = {{1, HOUR, 5}, {1, HOUR, 5}};
    sluice_key ks[2] = {KEY("{t}a"), KEY("{t}b")};
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, ks, ps, 1, 0};
    cr_assert_eq(op_decide(l, &op, SLUICE_NOW, &v), SLUICE_EFULL);
    cr_assert_eq(sluice_limiter_get(l, "{t}a", 4, &st, &e), SLUICE_ENOTFOUND);
  }
  /* Deleting one makes room. */
  cr_assert_eq(sluice_limiter_delete(l, "k0", 2), SLUICE_OK);
  cr_assert_eq(count(l), 9);
  cr_assert_eq(sluice_limiter_take(l, "new", 3, &p, 1, &v), SLUICE_OK);
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(mem, boxed_key_survives_key_flood) {
  const sluice_gcra_params p = {1, HOUR, 5};
  sluice_clock *c;
  sluice_limiter *l;
  sluice_verdict v;
  int i, full = 0;
  cr_assert_eq(sluice_clock_manual(HOUR, &c), SLUICE_OK);
  l = open_mem(c, "mem:max_keys=100");
  cr_assert_eq(penalty(l, "{t:x}pb:key1", SLUICE_OP_TRIP, 1, &v), SLUICE_OK);
  cr_assert_eq(v.level, 1);
  /* An offense counter with no box (released) must survive too. */
  cr_assert_eq(penalty(l, "{t:x}pb:key2", SLUICE_OP_TRIP, 2, &v), SLUICE_OK);
  cr_assert_eq(penalty(l, "{t:x}pb:key2", SLUICE_OP_RELEASE, 0, &v), SLUICE_OK);
  /* (Each refused new key costs a sweep of the whole table, so the flood
  ** is kept modest.) */
  for (i = 0; i < 1500; i++) {
    char k[24];
    int rc;
    snprintf(k, sizeof k, "flood%d", i);
    rc = sluice_limiter_take(l, k, strlen(k), &p, 1, &v);
    cr_assert(rc == SLUICE_OK || rc == SLUICE_EFULL);
    full += rc == SLUICE_EFULL;
    if (i % 150 == 0)
      cr_assert_eq(sluice_clock_advance(c, SEC), SLUICE_OK);
  }
  cr_assert_eq(full, 1500 - 98);
  cr_assert_leq(count(l), 100);
  cr_assert_eq(penalty(l, "{t:x}pb:key1", SLUICE_OP_CHECK, 0, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 0, "the flood bought a release");
  cr_assert_eq(v.level, 1);
  cr_assert_eq(penalty(l, "{t:x}pb:key2", SLUICE_OP_CHECK, 0, &v), SLUICE_OK);
  cr_assert_eq(v.offenses, 2, "the flood erased an offense counter");
  /* Once the box and the flood buckets are over, room comes back. */
  cr_assert_eq(sluice_clock_advance(c, 2 * HOUR), SLUICE_OK);
  cr_assert_eq(sluice_limiter_take(l, "late", 4, &p, 1, &v), SLUICE_OK);
  cr_assert_eq(penalty(l, "{t:x}pb:key2", SLUICE_OP_CHECK, 0, &v), SLUICE_OK);
  cr_assert_eq(v.offenses, 2, "offenses last 24 h");
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(mem, expired_records_are_reclaimed) {
  const sluice_gcra_params p = {1, SEC, 1};
  sluice_clock *c;
  sluice_limiter *l;
  sluice_verdict v;
  sluice_state st;
  int64_t e;
  int i;
  cr_assert_eq(sluice_clock_manual(10 * SEC, &c), SLUICE_OK);
  l = open_mem(c, "mem:max_keys=50");
  for (i = 0; i < 50; i++) {
    char k[8];
    snprintf(k, sizeof k, "k%d", i);
    cr_assert_eq(sluice_limiter_take(l, k, strlen(k), &p, 1, &v), SLUICE_OK);
  }
  cr_assert_eq(count(l), 50);
  cr_assert_eq(sluice_limiter_get(l, "k7", 2, &st, &e), SLUICE_OK);
  cr_assert_eq(e, 11 * SEC, "the record's TTL is sluice__op_expiry()");
  /* Not yet expired: a sweep at 11 s - 1 removes nothing. */
  cr_assert_eq(sweep(l, 11 * SEC - 1), 0);
  cr_assert_eq(count(l), 50);
  cr_assert_eq(sluice_limiter_take(l, "x", 1, &p, 1, &v), SLUICE_EFULL);
  /* At 11 s all of them are fresh again: new keys get in (the store
  ** reclaims before refusing), and a sweep takes the rest. */
  cr_assert_eq(sluice_clock_set(c, 11 * SEC), SLUICE_OK);
  cr_assert_eq(sluice_limiter_take(l, "x", 1, &p, 1, &v), SLUICE_OK);
  cr_assert_leq(count(l), 50);
  cr_assert_eq(sluice_limiter_get(l, "k7", 2, &st, &e), SLUICE_ENOTFOUND);
  sweep(l, 11 * SEC);
  cr_assert_eq(count(l), 1, "only 'x' is live");
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(mem, sweep_counts_and_lookups_drop) {
  const sluice_gcra_params p = {1, SEC, 1};
  sluice_clock *c;
  sluice_limiter *l;
  sluice_verdict v;
  sluice_state st;
  int64_t e;
  int i;
  cr_assert_eq(sluice_clock_manual(SEC, &c), SLUICE_OK);
  l = open_mem(c, NULL);
  for (i = 0; i < 300; i++) {
    char k[8];
    snprintf(k, sizeof k, "k%d", i);
    cr_assert_eq(sluice_limiter_take(l, k, strlen(k), &p, 1, &v), SLUICE_OK);
  }
  cr_assert_eq(count(l), 300);
  cr_assert_eq(sluice_clock_set(c, 5 * SEC), SLUICE_OK);
  /* A lookup of an expired record drops it. */
  cr_assert_eq(sluice_limiter_get(l, "k1", 2, &st, &e), SLUICE_ENOTFOUND);
  cr_assert_leq(count(l), 299);
  e = count(l);
  cr_assert_eq(sweep(l, 5 * SEC), e);
  cr_assert_eq(count(l), 0);
  cr_assert_eq(sweep(l, 5 * SEC), 0);
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_MEM_SWEEP, NULL),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_MEM_COUNT, NULL),
               SLUICE_EINVAL);
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(mem, fresh_results_are_not_stored) {
  const sluice_lease_params lp = {1, HOUR};
  const sluice_window_params wp = {3, SEC};
  sluice_clock *c;
  sluice_limiter *l;
  sluice_verdict v;
  sluice_key k = KEY("{t}lease0");
  sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 1, &k, &lp, 0, 77};
  cr_assert_eq(sluice_clock_manual(SEC, &c), SLUICE_OK);
  l = open_mem(c, NULL);
  cr_assert_eq(op_decide(l, &op, SLUICE_NOW, &v), SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(count(l), 1);
  op.kind = SLUICE_OP_LEASE_RELEASE;
  cr_assert_eq(op_decide(l, &op, SLUICE_NOW, &v), SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(count(l), 0, "a released slot is a fresh record");
  {
    sluice_key wk = KEY("win");
    sluice_op w = {SLUICE_ALGO_SWINDOW, SLUICE_OP_PEEK, 1, &wk, &wp, 0, 0};
    cr_assert_eq(op_decide(l, &w, SLUICE_NOW, &v), SLUICE_OK);
    cr_assert_eq(count(l), 0, "a PEEK stores nothing");
    w.kind = SLUICE_OP_CHECK; /* wrong kind: refused, nothing stored */
    cr_assert_eq(op_decide(l, &w, SLUICE_NOW, &v), SLUICE_EINVAL);
    cr_assert_eq(count(l), 0);
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

/* ------------------------------------------------------------ threads --- */

#define NTHREADS 4
#define OPS_PER_THREAD 50000

typedef struct hammer {
  sluice_limiter *l;
  sluice_clock *c;
  int id;
  int advance; /* advance the clock as we go */
  _Atomic int64_t *admitted;
  _Atomic int64_t *holders;
  _Atomic int64_t *max_holders;
  int64_t mine;
  int errors;
} hammer;

static const sluice_gcra_params hot = {50, SEC, 1000};

static void *hot_key(void *arg) {
  hammer *h = arg;
  int i;
  for (i = 0; i < OPS_PER_THREAD; i++) {
    sluice_verdict v;
    if (sluice_limiter_take(h->l, "{t:hot}bucket", 13, &hot, 1 + (i & 1), &v) !=
        SLUICE_OK)
      h->errors++;
    else if (v.allowed)
      atomic_fetch_add(h->admitted, 1 + (i & 1));
    if (h->advance && i % 16 == 0)
      sluice_clock_advance(h->c, MS);
  }
  return NULL;
}

static int64_t run_threads(void *(*fn)(void *), sluice_limiter *l,
                           sluice_clock *c, int advance, hammer *hs) {
  pthread_t th[NTHREADS];
  static _Atomic int64_t admitted, holders, max_holders;
  int i;
  atomic_store(&admitted, 0);
  atomic_store(&holders, 0);
  atomic_store(&max_holders, 0);
  for (i = 0; i < NTHREADS; i++) {
    memset(&hs[i], 0, sizeof hs[i]);
    hs[i].l = l;
    hs[i].c = c;
    hs[i].id = i;
    hs[i].advance = advance;
    hs[i].admitted = &admitted;
    hs[i].holders = &holders;
    hs[i].max_holders = &max_holders;
    cr_assert_eq(pthread_create(&th[i], NULL, fn, &hs[i]), 0);
  }
  for (i = 0; i < NTHREADS; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(hs[i].errors, 0);
  }
  return atomic_load(&admitted);
}

Test(mem_threads, hot_key_fixed_clock_admits_exactly_burst) {
  sluice_clock *c;
  sluice_limiter *l;
  hammer hs[NTHREADS];
  int64_t got;
  cr_assert_eq(sluice_clock_manual(100 * SEC, &c), SLUICE_OK);
  l = open_mem(c, NULL);
  got = run_threads(hot_key, l, c, 0, hs);
  /* Costs of 1 and 2 alternate; the burst is gone within the first few
  ** hundred ops and every later cost-1 attempt would take a point left. */
  cr_assert_eq(got, 1000, "admitted %lld of a 1000 burst", (long long)got);
  {
    sluice_verdict v;
    sluice_key k = KEY("{t:hot}bucket");
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &hot, 0, 0};
    cr_assert_eq(op_decide(l, &op, SLUICE_NOW, &v), SLUICE_OK);
    cr_assert_eq(v.remaining, 1000 - got, "no lost update");
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(mem_threads, hot_key_moving_clock_within_bound) {
  sluice_clock *c;
  sluice_limiter *l;
  hammer hs[NTHREADS];
  int64_t got, t0 = 100 * SEC, t1, bound;
  cr_assert_eq(sluice_clock_manual(t0, &c), SLUICE_OK);
  l = open_mem(c, NULL);
  got = run_threads(hot_key, l, c, 1, hs);
  t1 = sluice_clock_now(c);
  bound = 1000 + (int64_t)(((i128)50 * (t1 - t0)) / SEC);
  cr_assert_leq(got, bound, "admitted %lld, bound %lld over %lld ns",
                (long long)got, (long long)bound, (long long)(t1 - t0));
  /* And the bucket was really drained: at most a few points short. */
  cr_assert_geq(got, bound - 2 * NTHREADS - 2, "admitted %lld of %lld",
                (long long)got, (long long)bound);
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

/* Tenant bucket of 1000 shared by 4 keys of 400 each. */
static const sluice_gcra_params grp[2] = {{1, HOUR, 1000}, {1, HOUR, 400}};

static void *group_take(void *arg) {
  hammer *h = arg;
  char kname[24];
  sluice_key ks[2];
  sluice_op op;
  int i;
  snprintf(kname, sizeof kname, "{t:acme}key%d", h->id);
  ks[0] = (sluice_key)KEY("{t:acme}tenant");
  ks[1] = (sluice_key){kname, strlen(kname)};
  op = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, ks, grp, 1, 0};
  for (i = 0; i < OPS_PER_THREAD; i++) {
    sluice_verdict v;
    if (op_decide(h->l, &op, SLUICE_NOW, &v) != SLUICE_OK)
      h->errors++;
    else if (v.allowed) {
      h->mine++;
      atomic_fetch_add(h->admitted, 1);
    }
  }
  return NULL;
}

Test(mem_threads, group_both_or_neither_under_contention) {
  sluice_clock *c;
  sluice_limiter *l;
  hammer hs[NTHREADS];
  int64_t got, sum = 0;
  int i;
  cr_assert_eq(sluice_clock_manual(HOUR, &c), SLUICE_OK);
  l = open_mem(c, NULL);
  got = run_threads(group_take, l, c, 0, hs);
  cr_assert_eq(got, 1000, "tenant burst is 1000, admitted %lld", (long long)got);
  for (i = 0; i < NTHREADS; i++) {
    cr_assert_leq(hs[i].mine, 400, "key %d over its burst", i);
    sum += hs[i].mine;
  }
  cr_assert_eq(sum, 1000);
  /* Each key bucket was charged exactly what its thread was admitted. */
  for (i = 0; i < NTHREADS; i++) {
    char kname[24];
    sluice_key k;
    sluice_verdict v;
    sluice_op op;
    snprintf(kname, sizeof kname, "{t:acme}key%d", i);
    k = (sluice_key){kname, strlen(kname)};
    op = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &grp[1], 0, 0};
    cr_assert_eq(op_decide(l, &op, SLUICE_NOW, &v), SLUICE_OK);
    cr_assert_eq(v.remaining, 400 - hs[i].mine);
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

/* Lease set of 2 under contention: never more than 2 holders at a time. */
static const sluice_lease_params lease2 = {2, HOUR};

static void *lease_worker(void *arg) {
  hammer *h = arg;
  sluice_key ks[2] = {KEY("{t:acme}cc:0"), KEY("{t:acme}cc:1")};
  sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 2, ks, &lease2, 0, 0};
  int i;
  for (i = 0; i < OPS_PER_THREAD / 5; i++) {
    sluice_verdict v;
    op.kind = SLUICE_OP_ACQUIRE;
    op.id = (uint64_t)h->id + 1;
    if (op_decide(h->l, &op, SLUICE_NOW, &v) != SLUICE_OK) {
      h->errors++;
      continue;
    }
    if (!v.allowed)
      continue;
    {
      int64_t now = atomic_fetch_add(h->holders, 1) + 1, m;
      m = atomic_load(h->max_holders);
      while (now > m && !atomic_compare_exchange_weak(h->max_holders, &m, now))
        ;
    }
    h->mine++;
    atomic_fetch_sub(h->holders, 1);
    op.kind = SLUICE_OP_LEASE_RELEASE;
    if (op_decide(h->l, &op, SLUICE_NOW, &v) != SLUICE_OK || !v.allowed)
      h->errors++;
  }
  return NULL;
}

Test(mem_threads, lease_set_never_over_grants) {
  sluice_clock *c;
  sluice_limiter *l;
  hammer hs[NTHREADS];
  int64_t total = 0, maxh;
  int i;
  cr_assert_eq(sluice_clock_manual(HOUR, &c), SLUICE_OK);
  l = open_mem(c, NULL);
  run_threads(lease_worker, l, c, 0, hs);
  maxh = atomic_load(hs[0].max_holders);
  cr_assert_leq(maxh, 2, "%lld concurrent holders of a 2-slot set",
                (long long)maxh);
  for (i = 0; i < NTHREADS; i++)
    total += hs[i].mine;
  cr_assert_gt(total, 0);
  cr_assert_eq(count(l), 0, "every lease released");
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

/* Many threads inserting distinct keys at once: hash-table growth under
** contention must lose nothing. */
static void *inserter(void *arg) {
  hammer *h = arg;
  const sluice_gcra_params p = {1, HOUR, 10};
  int i;
  for (i = 0; i < 10000; i++) {
    char k[32];
    sluice_verdict v;
    snprintf(k, sizeof k, "t%d-k%d", h->id, i);
    if (sluice_limiter_take(h->l, k, strlen(k), &p, 3, &v) != SLUICE_OK ||
        !v.allowed)
      h->errors++;
  }
  return NULL;
}

Test(mem_threads, concurrent_inserts_lose_nothing) {
  const sluice_gcra_params p = {1, HOUR, 10};
  sluice_clock *c;
  sluice_limiter *l;
  hammer hs[NTHREADS];
  int t, i;
  cr_assert_eq(sluice_clock_manual(SEC, &c), SLUICE_OK);
  l = open_mem(c, NULL);
  run_threads(inserter, l, c, 0, hs);
  cr_assert_eq(count(l), NTHREADS * 10000);
  for (t = 0; t < NTHREADS; t++)
    for (i = 0; i < 10000; i += 7) {
      char k[32];
      sluice_verdict v;
      snprintf(k, sizeof k, "t%d-k%d", t, i);
      cr_assert_eq(sluice_limiter_take(l, k, strlen(k), &p, 8, &v), SLUICE_OK);
      cr_assert(!v.allowed, "%s lost its charge", k);
      cr_assert_eq(v.remaining, 7);
    }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

/* Groups whose keys share shards and chains, written back while the table
** grows and chains are swept under them: every key must get exactly its own
** charge (the 0.15 s the clock moves refills nothing at 1 point/h). */
Test(mem, group_write_back_while_table_grows) {
  const sluice_gcra_params one = {1, HOUR, 1000};
  sluice_gcra_params ps[SLUICE_GROUP_MAX];
  static int64_t charged[400];
  sluice_clock *c;
  sluice_limiter *l;
  rng r = {0x6e0};
  int round, i, filler = 0;
  for (i = 0; i < SLUICE_GROUP_MAX; i++)
    ps[i] = one;
  memset(charged, 0, sizeof charged);
  cr_assert_eq(sluice_clock_manual(HOUR, &c), SLUICE_OK);
  l = open_mem(c, NULL);
  for (round = 0; round < 300; round++) {
    char names[SLUICE_GROUP_MAX][16];
    sluice_key ks[SLUICE_GROUP_MAX];
    int idx[SLUICE_GROUP_MAX], n = (int)rng_range(&r, 2, SLUICE_GROUP_MAX);
    sluice_verdict v;
    sluice_op op;
    /* n distinct key indices out of 400 (some seen before, some new). */
    for (i = 0; i < n; i++) {
      int j, dup;
      do {
        idx[i] = (int)rng_range(&r, 0, 399);
        for (dup = 0, j = 0; j < i; j++)
          dup |= idx[j] == idx[i];
      } while (dup);
      snprintf(names[i], sizeof names[i], "{g}k%d", idx[i]);
      ks[i] = (sluice_key){names[i], strlen(names[i])};
    }
    op = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, n, ks, ps, 1, 0};
    cr_assert_eq(op_decide(l, &op, SLUICE_NOW, &v), SLUICE_OK);
    cr_assert(v.allowed);
    for (i = 0; i < n; i++)
      charged[idx[i]]++;
    /* Filler keys between groups make shards grow mid-test; they expire
    ** after 1 ms, so later inserts sweep them out of shared chains. */
    for (i = 0; i < 40; i++) {
      const sluice_gcra_params brief = {1, MS, 1};
      char k[16];
      snprintf(k, sizeof k, "fill%d", filler++);
      cr_assert_eq(sluice_limiter_take(l, k, strlen(k), &brief, 1, &v),
                   SLUICE_OK);
    }
    if (round % 2)
      cr_assert_eq(sluice_clock_advance(c, MS), SLUICE_OK);
  }
  for (i = 0; i < 400; i++) {
    char k[16];
    sluice_key key;
    sluice_verdict v;
    sluice_op op;
    snprintf(k, sizeof k, "{g}k%d", i);
    key = (sluice_key){k, strlen(k)};
    op = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &key, &one, 0, 0};
    cr_assert_eq(op_decide(l, &op, SLUICE_NOW, &v), SLUICE_OK);
    cr_assert_eq(v.remaining, 1000 - charged[i], "key %d: charged %lld, store "
                 "says %lld", i, (long long)charged[i],
                 (long long)(1000 - v.remaining));
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(mem, readonly_open_never_writes) {
  /* SLUICE_OPEN_READONLY means "inspection only: decisions refused".  A heap
  ** store has nothing to inspect, so refusing the open is as good as
  ** refusing every write; writing is not. */
  const sluice_gcra_params p = {1, SEC, 5};
  sluice_limiter_options o;
  sluice_limiter *l = (sluice_limiter *)1;
  sluice_verdict v;
  int rc;
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_OPEN_READONLY;
  rc = sluice_limiter_open(&o, &l, NULL, 0);
  if (rc != SLUICE_OK) {
    cr_assert_lt(rc, 0);
    cr_assert_null(l);
    return;
  }
  rc = sluice_limiter_take(l, "k", 1, &p, 1, &v);
  cr_assert_lt(rc, 0, "a read-only store accepted a write");
  cr_assert_eq(count(l), 0);
  sluice_limiter_close(l);
}

/* max_keys under concurrent inserts into different shards. */
static void *flood_inserter(void *arg) {
  hammer *h = arg;
  const sluice_gcra_params p = {1, HOUR, 10};
  int i;
  for (i = 0; i < 500; i++) {
    char k[32];
    sluice_verdict v;
    int rc;
    snprintf(k, sizeof k, "t%d-k%d", h->id, i);
    rc = sluice_limiter_take(h->l, k, strlen(k), &p, 1, &v);
    if (rc == SLUICE_OK)
      h->mine++;
    else if (rc != SLUICE_EFULL)
      h->errors++;
  }
  return NULL;
}

Test(mem_threads, max_keys_holds_under_concurrent_inserts) {
  sluice_clock *c;
  sluice_limiter *l;
  hammer hs[NTHREADS];
  int64_t total = 0;
  int i, round;
  cr_assert_eq(sluice_clock_manual(SEC, &c), SLUICE_OK);
  for (round = 0; round < 4; round++) {
    l = open_mem(c, "mem:max_keys=1500");
    run_threads(flood_inserter, l, c, 0, hs);
    for (i = 0, total = 0; i < NTHREADS; i++)
      total += hs[i].mine;
    cr_assert_leq(count(l), 1500, "round %d: %lld live records, max_keys 1500",
                  round, (long long)count(l));
    cr_assert_eq(total, count(l));
    sluice_limiter_close(l);
  }
  sluice_clock_free(c);
}

/* Differential: the mem store against a shadow array run through the pure
** steps, with a record dropped exactly when its expiry passes.  Thousands
** of keys churn through insert / rewrite / expire / delete / sweep, so the
** table's probing, deletion and rebuilds are all exercised. */
#define SHADOW_N 3000

static sluice_gcra_params sh_g, sh_g2[2];
static sluice_window_params sh_w;
static sluice_penalty_params sh_p;

/* scale 1: records live ~100 ms (heavy churn, sparse table); scale 36000:
** ~1 h (dense table, so deletions shift long probe runs). */
static void shadow_params(int64_t scale) {
  sh_g = (sluice_gcra_params){1, 50 * MS * scale, 3};
  sh_g2[0] = sh_g2[1] = sh_g;
  sh_w = (sluice_window_params){3, 100 * MS * scale};
  sh_p = (sluice_penalty_params){
      3, 50 * MS * scale, {40 * MS * scale, 80 * MS * scale, 120 * MS * scale},
      200 * MS * scale};
}

static int shadow_long; /* keys of 10 to 110 bytes, not 6 to 9 */

/* Long keys end in the same filler, so that keys of one length share their
** last word and differ only inside: the hot-key memo (8 to 104 bytes) must
** tell them apart by their whole bytes. */
static void shadow_key(int idx, char *buf, size_t n, sluice_key *k) {
  size_t len;
  snprintf(buf, n, "{t%d}k%d", idx % 8, idx);
  len = strlen(buf);
  if (shadow_long) {
    /* the hot keys (below 48) in three lengths, the rest in 101 */
    size_t want = idx < 48 ? 16 + (size_t)(idx % 3) * 44
                           : 10 + (size_t)(idx * 37 % 101);
    while (len < want && len + 1 < n)
      buf[len++] = '.';
    buf[len] = '\0';
  }
  k->data = buf;
  k->len = len;
}

static sluice_op shadow_op(rng *r, int idx, const sluice_key *ks, int nkeys) {
  sluice_op op;
  memset(&op, 0, sizeof op);
  op.keys = ks;
  op.nkeys = nkeys;
  switch (idx % 3) {
  case 0:
    op.algo = SLUICE_ALGO_GCRA;
    op.params = nkeys == 2 ? (const void *)sh_g2 : (const void *)&sh_g;
    op.kind = rng_range(r, 0, 4) ? SLUICE_OP_CONSUME : SLUICE_OP_PEEK;
    op.arg = rng_range(r, op.kind == SLUICE_OP_PEEK ? 0 : 1, 2);
    break;
  case 1:
    op.algo = SLUICE_ALGO_FWINDOW;
    op.params = &sh_w;
    op.kind = rng_range(r, 0, 3) ? SLUICE_OP_CONSUME : SLUICE_OP_COUNT;
    op.arg = rng_range(r, 1, 2);
    break;
  default:
    op.algo = SLUICE_ALGO_PENALTY;
    op.params = &sh_p;
    op.kind = rng_range(r, 0, 9) ? SLUICE_OP_STRIKE : SLUICE_OP_RELEASE;
    break;
  }
  return op;
}

/* uri: the store; skewed: half the keys from 48 of them, as skewed traffic
** is (the memo holds keys decided again and again). */
static void differential(int64_t scale, int del_every, uint64_t seed,
                         const char *uri, int skewed) {
  static sluice_state sst[SHADOW_N];
  static int64_t sexp[SHADOW_N];
  sluice_clock *c;
  sluice_limiter *l;
  rng r = {seed};
  int64_t t = 10 * SEC;
  int step;
  shadow_params(scale);
  memset(sst, 0, sizeof sst);
  memset(sexp, 0, sizeof sexp);
  cr_assert_eq(sluice_clock_manual(t, &c), SLUICE_OK);
  l = open_mem(c, uri);
  for (step = 0; step < 30000; step++) {
    int idx[2], n = 1, i;
    char names[2][128];
    sluice_key ks[2];
    sluice_state in[2], out[2];
    sluice_verdict v, ev;
    sluice_op op;
    t += rng_range(&r, 0, 5 * MS);
    cr_assert_eq(sluice_clock_set(c, t), SLUICE_OK);
    idx[0] = (int)rng_range(&r, 0, skewed && rng_next(&r) % 2 ? 47 : SHADOW_N - 1);
    if (idx[0] % 3 == 0 && rng_range(&r, 0, 3) == 0 &&
        idx[0] + 24 < SHADOW_N) {
      idx[1] = idx[0] + 24; /* same tag (idx % 8), also a GCRA key */
      n = 2;
    }
    for (i = 0; i < n; i++) {
      shadow_key(idx[i], names[i], sizeof names[i], &ks[i]);
      in[i] = sexp[idx[i]] > t ? sst[idx[i]] : zst();
    }
    if (rng_range(&r, 0, del_every - 1) == 0) {
      /* delete */
      int rc = sluice_limiter_delete(l, ks[0].data, ks[0].len);
      if (sexp[idx[0]] > t)
        cr_assert_eq(rc, SLUICE_OK, "step %d: live record not found", step);
      else
        cr_assert(rc == SLUICE_OK || rc == SLUICE_ENOTFOUND);
      sexp[idx[0]] = 0;
      continue;
    }
    op = shadow_op(&r, idx[0], ks, n);
    cr_assert_eq(sluice__op_step(&op, in, out, t, &ev), SLUICE_OK);
    cr_assert_eq(op_decide(l, &op, t, &v), SLUICE_OK);
    cr_assert(verdict_eq(&v, &ev), "step %d key %d algo %d: allowed %d/%d "
              "rem %lld/%lld", step, idx[0], op.algo, v.allowed, ev.allowed,
              (long long)v.remaining, (long long)ev.remaining);
    for (i = 0; i < n; i++) {
      sst[idx[i]] = out[i];
      sexp[idx[i]] = sluice__op_expiry(&op, i, &out[i]);
    }
    if (step % 997 == 0) {
      int64_t live = 0, k;
      sweep(l, t);
      for (k = 0; k < SHADOW_N; k++)
        live += sexp[k] > t;
      cr_assert_eq(count(l), live, "step %d: store holds %lld, shadow %lld",
                   step, (long long)count(l), (long long)live);
      for (k = 0; k < SHADOW_N; k += 13) {
        char nb[128];
        sluice_key kk;
        sluice_state got;
        int64_t e;
        int rc;
        shadow_key((int)k, nb, sizeof nb, &kk);
        rc = sluice_limiter_get(l, kk.data, kk.len, &got, &e);
        if (sexp[k] > t) {
          cr_assert_eq(rc, SLUICE_OK, "key %lld lost", (long long)k);
          cr_assert(st_eq(&got, &sst[k]));
          cr_assert_eq(e, sexp[k]);
        } else {
          cr_assert_eq(rc, SLUICE_ENOTFOUND, "key %lld should be gone",
                       (long long)k);
        }
      }
    }
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(mem, differential_churn) { differential(1, 50, 0xd1ff, NULL, 0); }
Test(mem, differential_dense_with_deletes) {
  differential(36000, 4, 0xd2ff, NULL, 0);
}
Test(mem, differential_long_hot_keys) {
  shadow_long = 1;
  differential(1, 50, 0xd3ff, "mem", 1);
  differential(36000, 4, 0xd4ff, "mem", 1);
}
Test(mem, differential_long_hot_keys_without_memo) {
  shadow_long = 1;
  differential(1, 50, 0xd3ff, "mem:memo=0", 1);
}

/* Programs that delete some records and write others in one job, on a
** table with long probe runs: a deletion shifts the records after it, so
** a slot found before the step may hold another key when the job writes
** back.  Every record is checked against the pure program run. */
#define PJ_KEYS 3000
#define PJ_STEPS SLUICE_PROGRAM_STEPS
Test(mem, programs_that_delete_and_write_in_one_job) {
  static sluice_state sst[PJ_KEYS];
  static int64_t sexp[PJ_KEYS];
  static const sluice_lease_params lp = {1, 3600 * SEC};
  sluice_clock *c;
  sluice_limiter *l;
  rng r = {0x5e1f};
  int64_t t = 10 * SEC;
  int it, i, k;
  memset(sst, 0, sizeof sst);
  memset(sexp, 0, sizeof sexp);
  cr_assert_eq(sluice_clock_manual(t, &c), SLUICE_OK);
  l = open_mem(c, "mem:memo=0");
  for (it = 0; it < 4000; it++) {
    char names[PJ_STEPS][32];
    sluice_key ks[PJ_STEPS];
    sluice_step st[PJ_STEPS];
    sluice_state in[PJ_STEPS], out[PJ_STEPS];
    sluice_program p;
    sluice_program_result got, want;
    int idx[PJ_STEPS];
    t += MS;
    memset(&p, 0, sizeof p);
    memset(st, 0, sizeof st);
    for (i = 0; i < PJ_STEPS; i++) {
      int dup;
      do { /* distinct keys, one tag */
        idx[i] = (int)rng_range(&r, 0, PJ_KEYS - 1);
        for (dup = 0, k = 0; k < i; k++)
          dup |= idx[k] == idx[i];
      } while (dup);
      snprintf(names[i], sizeof names[i], "{pj}k%d", idx[i]);
      ks[i].data = names[i];
      ks[i].len = strlen(names[i]);
      in[i] = sexp[idx[i]] > t ? sst[idx[i]] : zst();
      st[i].algo = SLUICE_ALGO_LEASE;
      st[i].key = i;
      st[i].nkeys = 1;
      st[i].params = &lp;
      st[i].fold = SLUICE_FOLD_NOTE;
      /* a held record is released (and deleted), a free one taken */
      st[i].id = (uint64_t)idx[i] + 1;
      st[i].kind =
          sexp[idx[i]] > t ? SLUICE_OP_LEASE_RELEASE : SLUICE_OP_ACQUIRE;
    }
    p.nkeys = p.nsteps = PJ_STEPS;
    p.keys = ks;
    p.steps = st;
    cr_assert_eq(sluice_program_run(&p, in, out, t, &want), SLUICE_OK);
    cr_assert_eq(sluice_limiter_decide(l, 1, &p, t, &got, NULL), SLUICE_OK, "it %d", it);
    cr_assert_eq(got.ran, want.ran);
    for (i = 0; i < PJ_STEPS; i++) {
      cr_assert_eq(got.v[i].allowed, want.v[i].allowed, "it %d step %d", it, i);
      sst[idx[i]] = out[i];
      sexp[idx[i]] = sluice_program_expiry(&p, i, &out[i]);
    }
    if (it % 50 == 49)
      for (k = 0; k < PJ_KEYS; k++) {
        char nb[32];
        sluice_state s;
        int64_t e;
        int rc;
        snprintf(nb, sizeof nb, "{pj}k%d", k);
        rc = sluice_limiter_get(l, nb, strlen(nb), &s, &e);
        if (sexp[k] > t) {
          cr_assert_eq(rc, SLUICE_OK, "it %d: key %d lost", it, k);
          cr_assert(st_eq(&s, &sst[k]), "it %d: key %d holds another's state",
                    it, k);
        } else {
          cr_assert_eq(rc, SLUICE_ENOTFOUND, "it %d: key %d should be gone",
                       it, k);
        }
      }
  }
  cr_assert_gt(count(l), PJ_KEYS / 4, "the table must be well filled");
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

/* SLUICE_CTL_MEM_MEMO: the keys the hot-key memo holds; none at first, a
** key decided again and again within tens of microseconds of its time,
** and -1 with memo=0.  Verdicts are the same either way (the differential
** tests above). */
static int take(sluice_limiter *l, const char *key, int64_t cost,
                sluice_verdict *v) {
  static const sluice_gcra_params g = {100, SEC, 50};
  return sluice_limiter_take(l, key, strlen(key), &g, cost, v);
}

Test(mem, memo_holds_a_hot_key_and_can_be_turned_off) {
  sluice_clock *c;
  sluice_limiter *on, *off;
  int64_t held = -2, t = 1000 * SEC;
  int i;
  cr_assert_eq(sluice_clock_manual(t, &c), SLUICE_OK);
  on = open_mem(c, "mem");
  off = open_mem(c, "mem:memo=0");
  cr_assert_eq(sluice_limiter_control(on, SLUICE_CTL_MEM_MEMO, &held),
               SLUICE_OK);
  cr_assert_eq(held, 0);
  for (i = 0; i < 200; i++, t += 1024) {
    sluice_verdict v, w;
    cr_assert_eq(sluice_clock_set(c, t), SLUICE_OK);
    cr_assert_eq(take(on, "rl:{t:hot-tenant}:tb", 1, &v), SLUICE_OK);
    cr_assert_eq(take(off, "rl:{t:hot-tenant}:tb", 1, &w), SLUICE_OK);
    assert_verdict_eq(v, w, "decision %d", i);
    cr_assert_eq(take(on, "short", 1, &v), SLUICE_OK); /* under 8 bytes */
  }
  cr_assert_eq(sluice_limiter_control(on, SLUICE_CTL_MEM_MEMO, &held),
               SLUICE_OK);
  cr_assert_eq(held, 1, "the memo holds %lld keys, not the hot one alone",
               (long long)held);
  cr_assert_eq(sluice_limiter_control(off, SLUICE_CTL_MEM_MEMO, &held),
               SLUICE_OK);
  cr_assert_eq(held, -1);
  sluice_limiter_close(on);
  sluice_limiter_close(off);
  sluice_clock_free(c);
}

/* huge_pages=1: once shard tables reach 1 MiB (about 800 000 keys), each is
** a mapping on huge pages where the system backs madvise regions with them,
** else counted as a fallback; never neither.  Decisions are unchanged. */
#include "huge.h"

static sluice_mem_huge huge_of(sluice_limiter *l) {
  sluice_mem_huge h;
  memset(&h, 0xff, sizeof h);
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_MEM_HUGE, &h), SLUICE_OK);
  return h;
}

Test(mem, huge_pages_tables_or_counted_fallbacks, .timeout = 60) {
  enum { N = 819200, B = 64 }; /* N a multiple of B */
  static const sluice_gcra_params p = {1, HOUR, 10};
  sluice_clock *c;
  sluice_limiter *l, *plain;
  sluice_mem_huge h;
  sluice_verdict v[B];
  int rcs[B];
  char (*names)[16] = malloc((size_t)B * 16);
  cr_assert_not_null(names);
  cr_assert_eq(sluice_clock_manual(1000 * SEC, &c), SLUICE_OK);
  l = open_mem(c, "mem:huge_pages=1");
  plain = open_mem(c, "mem");
  h = huge_of(l);
  cr_assert_eq(h.asked, 1);
  cr_assert_eq(h.tables + h.fallbacks, 0, "no table is big enough yet");
  for (int i = 0; i < N; i += B) {
    sluice_key k[B];
    sluice_op ops[B];
    for (int j = 0; j < B; j++) {
      snprintf(names[j], 16, "hp-%d", i + j);
      k[j] = (sluice_key){names[j], strlen(names[j])};
      ops[j] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[j], &p,
                           1, 0};
    }
    cr_assert_eq(ops_decide(l, B, ops, SLUICE_NOW, v, rcs), SLUICE_OK);
    for (int j = 0; j < B; j++)
      cr_assert(rcs[j] == SLUICE_OK && v[j].allowed && v[j].remaining == 9);
  }
  cr_assert_eq(count(l), N);
  h = huge_of(l);
  cr_assert_gt(h.tables + h.fallbacks, 0, "no table of 1 MiB was made");
  if (sluice__huge_thp(0)) {
    cr_assert_gt(h.tables, 0, "THP is on, yet no table got huge pages");
    cr_assert_geq(h.bytes, h.tables * (int64_t)SLUICE__HUGE_PAGE);
  } else {
    cr_assert_eq(h.tables, 0);
    cr_assert_eq(h.bytes, 0);
  }
  /* The records are all there: a second charge of a key sees the first. */
  {
    sluice_verdict one;
    cr_assert_eq(sluice_limiter_take(l, "hp-12345", 8, &p, 1, &one),
                 SLUICE_OK);
    cr_assert(one.allowed && one.remaining == 8);
  }
  h = huge_of(plain);
  cr_assert(h.asked == 0 && h.tables == 0 && h.fallbacks == 0);
  sluice_limiter_close(l);
  sluice_limiter_close(plain);
  sluice_clock_free(c);
  free(names);
}

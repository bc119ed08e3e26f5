/*
** The mem store's batch path (xRun of n programs: a pipeline that hashes and
** prefetches ops ahead of the one it decides, deciding in order) against
** the same ops applied one at a time on a second store: the same results
** and verdicts, op by op, in the same order.  Built a second time with
** -DBATCH_SHM (tests/shm/meson.build) for the shm store's batch path, on
** two fresh named mappings.  Batches repeat keys (an op must see the ops
** before it in its own batch, also within the prefetch distance), mix
** single keys and tenant + key groups, consumes and peeks, invalid ops
** (the core batches the valid rest; it checks a run of ops of one shape
** once, and every op's keys) and, with max_keys, ops refused with
** SLUICE_EFULL; they are up to 25 times longer than the prefetch distance.
** Threads deciding in batches: mem_batch_threads.c (a plain program, so
** that it runs under TSan); processes: the shm stress suite.
*/
#include "unit.h"
#include "../common/one_step.h"

#define NKEYS 40
#define BATCH_MAX 70

static sluice_limiter *open_at(sluice_clock *c, const char *store) {
  sluice_limiter_options o;
  sluice_limiter *l = NULL;
  memset(&o, 0, sizeof o);
  o.clock = c;
  o.store = store;
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_OK);
  return l;
}

static const sluice_gcra_params params[3][2] = {
    {{5, SEC, 3}, {20, SEC, 6}},
    {{1, SEC, 1}, {1, MIN, 100}},
    {{100, MS, 50}, {3, SEC, 2}}};

static void batches2(const char *store_a, const char *store_b,
                     uint64_t seed) {
  sluice_clock *c;
  sluice_limiter *a, *b;
  rng r = {seed};
  char names[NKEYS][16];
  long allowed = 0, denied = 0, errs = 0;
  cr_assert_eq(sluice_clock_manual(1000 * SEC, &c), SLUICE_OK);
  a = open_at(c, store_a);
  b = open_at(c, store_b);
  for (int i = 0; i < NKEYS; i++)
    snprintf(names[i], sizeof names[i], "batch-key-%d", i);
  for (int round = 0; round < 300; round++) {
    sluice_op ops[BATCH_MAX];
    sluice_key keys[BATCH_MAX][2];
    sluice_verdict va[BATCH_MAX], vb;
    int rcs[BATCH_MAX], n = (int)rng_range(&r, 1, BATCH_MAX);
    for (int j = 0; j < n; j++) {
      int group = rng_next(&r) % 3 == 0;
      for (int i = 0; i < 2; i++) {
        int k = (int)rng_range(&r, 0, NKEYS - 1);
        keys[j][i].data = names[k];
        keys[j][i].len = strlen(names[k]);
      }
      if (group && keys[j][0].data == keys[j][1].data)
        group = 0;
      ops[j] = (sluice_op){SLUICE_ALGO_GCRA,
                           rng_next(&r) % 4 ? SLUICE_OP_CONSUME
                                            : SLUICE_OP_PEEK,
                           group ? 2 : 1, keys[j],
                           params[rng_next(&r) % 3], rng_range(&r, 1, 3), 0};
      if (rng_next(&r) % 25 == 0)
        ops[j].arg = 1000; /* more than any burst: ERANGE, batch goes on */
    }
    memset(va, 0, sizeof va);
    cr_assert_eq(ops_decide(a, n, ops, SLUICE_NOW, va, rcs), SLUICE_OK);
    for (int j = 0; j < n; j++) {
      int rc = op_decide(b, &ops[j], SLUICE_NOW, &vb);
      cr_assert_eq(rcs[j], rc, "round %d op %d: batch rc %d, alone %d", round,
                   j, rcs[j], rc);
      if (rc != SLUICE_OK) {
        errs++;
        continue;
      }
      allowed += vb.allowed;
      denied += !vb.allowed;
      assert_verdict_eq(va[j], vb, "round %d op %d", round, j);
    }
    sluice_clock_advance(c, rng_range(&r, 0, 400 * MS));
  }
  /* Both verdicts and failures happened, or the comparison proves little. */
  cr_assert_gt(allowed, 100);
  cr_assert_gt(denied, 100);
  cr_assert_gt(errs, 20);
  sluice_limiter_close(a);
  sluice_limiter_close(b);
  sluice_clock_free(c);
}

/* Long batches on few keys: a key comes back within the pipeline's
** prefetch distance of its own earlier op (runs of one key, keys
** alternating), and batches far longer than that distance, so every ring
** entry is reused many times over. */
static void long_batches2(const char *store_a, const char *store_b,
                          uint64_t seed) {
  enum { LB_MAX = 400, LB_KEYS = 5 };
  static const sluice_gcra_params lp = {10, SEC, 7};
  sluice_clock *c;
  sluice_limiter *a, *b;
  rng r = {seed};
  static sluice_op ops[LB_MAX];
  static sluice_key keys[LB_MAX];
  static sluice_verdict va[LB_MAX];
  static int rcs[LB_MAX];
  const char *names[LB_KEYS] = {"lb-a", "lb-b", "lb-c", "lb-d", "lb-e"};
  long allowed = 0, denied = 0;
  cr_assert_eq(sluice_clock_manual(1000 * SEC, &c), SLUICE_OK);
  a = open_at(c, store_a);
  b = open_at(c, store_b);
  for (int round = 0; round < 40; round++) {
    int n = (int)rng_range(&r, 17, LB_MAX), k = 0;
    for (int j = 0; j < n; j++) {
      /* runs of one key of random length, or two keys alternating */
      if (rng_next(&r) % 4 == 0)
        k = (int)rng_range(&r, 0, LB_KEYS - 1);
      keys[j] = (sluice_key){names[k], 4};
      ops[j] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &keys[j],
                           &lp, 1, 0};
      if (round % 2)
        k = (k + 1) % 2;
    }
    cr_assert_eq(ops_decide(a, n, ops, SLUICE_NOW, va, rcs), SLUICE_OK);
    for (int j = 0; j < n; j++) {
      sluice_verdict vb;
      cr_assert_eq(rcs[j], SLUICE_OK);
      cr_assert_eq(op_decide(b, &ops[j], SLUICE_NOW, &vb), SLUICE_OK);
      assert_verdict_eq(va[j], vb, "round %d op %d", round, j);
      allowed += vb.allowed;
      denied += !vb.allowed;
    }
    sluice_clock_advance(c, rng_range(&r, 0, 2 * SEC));
  }
  cr_assert_gt(allowed, 200);
  cr_assert_gt(denied, 200);
  sluice_limiter_close(a);
  sluice_limiter_close(b);
  sluice_clock_free(c);
}

/* The core checks an op's shape once for a run of ops that share it
** (algorithm, kind, parameters, amount, id): an op that differs in any of
** them is checked on its own, and every op's keys are checked. */
static void shape_runs(const char *store) {
  sluice_clock *c;
  sluice_limiter *l;
  static const sluice_gcra_params sp = {1, SEC, 5};
  static const sluice_gcra_params bad = {0, SEC, 5}; /* rate 0: EINVAL */
  sluice_key k[8] = {KEY("s-a"), KEY("s-b"), {"s-c", 0}, KEY("s-d"),
                     KEY("s-e"), KEY("s-f"), KEY("s-g"), KEY("s-h")};
  sluice_op ops[8];
  sluice_verdict v[8];
  int rcs[8];
  const int want[8] = {SLUICE_OK,     SLUICE_OK,    SLUICE_EKEY,
                       SLUICE_ERANGE, SLUICE_OK,    SLUICE_EINVAL,
                       SLUICE_EINVAL, SLUICE_OK};
  for (int j = 0; j < 8; j++)
    ops[j] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[j], &sp,
                         1, 0};
  ops[3].arg = 6;                  /* more than the burst */
  ops[5].kind = SLUICE_OP_COUNT;   /* not a GCRA kind */
  ops[6].params = &bad;
  cr_assert_eq(sluice_clock_manual(1000 * SEC, &c), SLUICE_OK);
  l = open_at(c, store);
  cr_assert_eq(ops_decide(l, 8, ops, SLUICE_NOW, v, rcs), SLUICE_OK);
  for (int j = 0; j < 8; j++) {
    cr_assert_eq(rcs[j], want[j], "op %d: %d, not %d", j, rcs[j], want[j]);
    if (want[j] == SLUICE_OK)
      cr_assert(v[j].allowed, "op %d", j);
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

#ifndef BATCH_SHM
static void batches(const char *store, uint64_t seed) {
  batches2(store, store, seed);
}

Test(mem_batch, same_verdicts_in_the_same_order_as_one_by_one) {
  batches("mem", 0xba7c4);
}

/* 24 records for 40 keys: new keys are refused (EFULL) or admitted as
** records expire, at the same ops in both stores. */
Test(mem_batch, same_full_refusals_as_one_by_one) {
  batches("mem:max_keys=24", 0xf011);
}

Test(mem_batch, long_batches_with_repeated_keys_as_one_by_one) {
  long_batches2("mem", "mem", 0x10b);
}

Test(mem_batch, shape_checked_per_op) { shape_runs("mem"); }

#else
#include <sys/mman.h>
#include <unistd.h>

/* Two fresh mappings of `capacity` keys, unlinked once the test is done. */
static void shm_batches(const char *capacity, uint64_t seed) {
  char na[64], nb[64], ua[128], ub[128];
  snprintf(na, sizeof na, "/sluice-batch-a-%d", (int)getpid());
  snprintf(nb, sizeof nb, "/sluice-batch-b-%d", (int)getpid());
  shm_unlink(na);
  shm_unlink(nb);
  snprintf(ua, sizeof ua, "shm:name=%s;create=1;capacity=%s", na, capacity);
  snprintf(ub, sizeof ub, "shm:name=%s;create=1;capacity=%s", nb, capacity);
  batches2(ua, ub, seed);
  shm_unlink(na);
  shm_unlink(nb);
}

Test(shm_batch, same_verdicts_in_the_same_order_as_one_by_one) {
  shm_batches("4096", 0xba7c4);
}

/* A table of 24 keys for 40: claims fail (EFULL) or succeed as records
** expire, at the same ops in both stores. */
Test(shm_batch, same_full_refusals_as_one_by_one) {
  shm_batches("24", 0xf011);
}

Test(shm_batch, long_batches_with_repeated_keys_as_one_by_one) {
  char na[64], nb[64], ua[128], ub[128];
  snprintf(na, sizeof na, "/sluice-lbatch-a-%d", (int)getpid());
  snprintf(nb, sizeof nb, "/sluice-lbatch-b-%d", (int)getpid());
  shm_unlink(na);
  shm_unlink(nb);
  snprintf(ua, sizeof ua, "shm:name=%s;create=1;capacity=64", na);
  snprintf(ub, sizeof ub, "shm:name=%s;create=1;capacity=64", nb);
  long_batches2(ua, ub, 0x10b);
  shm_unlink(na);
  shm_unlink(nb);
}

Test(shm_batch, shape_checked_per_op) {
  char n[64], u[128];
  snprintf(n, sizeof n, "/sluice-shape-%d", (int)getpid());
  shm_unlink(n);
  snprintf(u, sizeof u, "shm:name=%s;create=1;capacity=64", n);
  shape_runs(u);
  shm_unlink(n);
}
#endif

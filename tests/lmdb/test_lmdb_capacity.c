/*
** Space and time: a full map is a clear error that loses nothing and is
** cured by growing the map (and stays cured across a restart); expired
** records are swept lazily and in bounded slices, while live boxes and
** offense counters are never swept early; a batch decides exactly as the
** same ops one by one; threads of one process (one of them resizing the map
** under the others) never over-admit.
*/
#include <lmdb.h>
#include <pthread.h>

#include "lmdb_test.h"
#include "../common/one_step.h"
#include "op.h"

static sluice_clock *clk;

static void setup(void) {
  tdir_make();
  cr_assert_eq(sluice_clock_manual(T0, &clk), SLUICE_OK);
}

static void teardown(void) {
  sluice_clock_free(clk);
  tdir_remove();
}

TestSuite(lmdb_capacity, .init = setup, .fini = teardown, .timeout = 90);

/* Slow refill, so one take leaves a record that stays live for an hour. */
static const sluice_gcra_params slow = {1, 3600 * SEC, 10};

static void key_name(char *buf, size_t n, int i) {
  snprintf(buf, n, "fill:%07d", i);
}

static sluice_state one_take_state(void) {
  sluice_state zero = {{0, 0}}, out;
  sluice_verdict v;
  cr_assert_eq(sluice__gcra_step(&slow, &zero, T0, SLUICE_OP_CONSUME, 1, &out,
                                &v),
               SLUICE_OK);
  return out;
}

/* Fill with distinct keys until the map is full; returns how many fit. */
static int fill_until_full(sluice_limiter *l) {
  enum { B = 256 };
  char names[B][32];
  sluice_key keys[B];
  sluice_op ops[B];
  sluice_verdict vs[B];
  int rcs[B], n = 0, i, rc;
  for (;;) {
    for (i = 0; i < B; i++) {
      key_name(names[i], sizeof names[i], n + i);
      keys[i].data = names[i];
      keys[i].len = strlen(names[i]);
      ops[i] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &keys[i],
                           &slow, 1, 0};
    }
    rc = ops_decide(l, B, ops, SLUICE_NOW, vs, rcs);
    if (rc != SLUICE_OK)
      break;
    for (i = 0; i < B; i++)
      cr_assert_eq(rcs[i], SLUICE_OK);
    n += B;
    cr_assert_lt(n, 1 << 20, "the map never filled");
  }
  cr_assert_eq(rc, SLUICE_EFULL, "batch: %s", sluice_err_name(rc));
  for (i = 0; i < B; i++)
    cr_assert_eq(rcs[i], SLUICE_EFULL, "every op of the failed batch");
  /* Then one at a time up to the last one that fits. */
  for (;;) {
    sluice_verdict v;
    char name[32];
    key_name(name, sizeof name, n);
    rc = take_at(l, name, &slow, 1, T0, &v);
    if (rc != SLUICE_OK)
      break;
    n++;
  }
  return n;
}

/* Keys [from, n) each hold exactly one take. */
static void check_all_intact(sluice_limiter *l, int from, int n) {
  sluice_state want = one_take_state(), got;
  int64_t exp;
  char name[32];
  int i;
  for (i = from; i < n; i++) {
    key_name(name, sizeof name, i);
    cr_assert_eq(sluice_limiter_get(l, name, strlen(name), &got, &exp),
                 SLUICE_OK, "key %d lost", i);
    cr_assert_eq(memcmp(&got, &want, sizeof got), 0, "key %d changed", i);
  }
}

Test(lmdb_capacity, map_full_is_clear_loses_nothing_and_growing_recovers) {
  sluice_limiter *l;
  sluice_verdict v;
  sluice_state st;
  int64_t exp, size;
  char name[32];
  int n, rc;
  l = lmdb_must_open("mapsize=256k;sync=nosync", SLUICE_OPEN_CREATE, clk);
  n = fill_until_full(l);
  cr_assert_gt(n, 100, "some records fit in 256k (%d)", n);
  key_name(name, sizeof name, n);
  rc = take_at(l, name, &slow, 1, T0, &v);
  cr_assert_eq(rc, SLUICE_EFULL);
  cr_assert_neq(strstr(sluice_limiter_errmsg(l), "map full"), NULL, "%s",
                sluice_limiter_errmsg(l));
  /* Nothing of the failed decisions was written; everything before is. */
  cr_assert_eq(sluice_limiter_get(l, name, strlen(name), &st, &exp),
               SLUICE_ENOTFOUND);
  cr_assert_eq(stats_of(l).records, n);
  check_all_intact(l, 0, n);
  /* A key that is already there may still be decided (an update in place
  ** may or may not find a free page), and either way its record is whole:
  ** two takes if it went through, one if it was refused. */
  key_name(name, sizeof name, 0);
  rc = take_at(l, name, &slow, 1, T0, &v);
  cr_assert(rc == SLUICE_OK || rc == SLUICE_EFULL, "%s", sluice_err_name(rc));
  cr_assert_eq(sluice_limiter_get(l, name, strlen(name), &st, &exp),
               SLUICE_OK);
  cr_assert_eq(st.w[0], (uint64_t)(T0 + (rc == SLUICE_OK ? 2 : 1) * 3600 * SEC),
               "key 0 holds %s", rc == SLUICE_OK ? "two takes" : "one take");

  size = 1 << 20;
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_MAPSIZE, &size),
               SLUICE_OK, "%s", sluice_limiter_errmsg(l));
  cr_assert_geq(size, 1 << 20);
  cr_assert_eq(stats_of(l).mapsize, size);
  {
    /* Asking for less never shrinks the map. */
    int64_t smaller = 512 << 10;
    cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_MAPSIZE, &smaller),
                 SLUICE_OK);
    cr_assert_eq(smaller, size);
    cr_assert_eq(stats_of(l).mapsize, size);
  }
  key_name(name, sizeof name, n);
  cr_assert_eq(take_at(l, name, &slow, 1, T0, &v), SLUICE_OK, "%s",
               sluice_limiter_errmsg(l));
  cr_assert_eq(v.allowed, 1);
  cr_assert_eq(v.remaining, 9);
  sluice_limiter_close(l);

  /* A restart with the old, smaller mapsize keeps the grown map. */
  l = lmdb_must_open("mapsize=256k;sync=nosync", 0, clk);
  cr_assert_geq(stats_of(l).mapsize, 1 << 20);
  key_name(name, sizeof name, n + 1);
  cr_assert_eq(take_at(l, name, &slow, 1, T0, &v), SLUICE_OK, "%s",
               sluice_limiter_errmsg(l));
  check_all_intact(l, 1, n);
  sluice_limiter_close(l);
}

Test(lmdb_capacity, another_process_growing_the_map_is_adopted) {
  sluice_limiter *l;
  sluice_verdict v;
  char name[32];
  pid_t pid;
  int n, i;
  l = lmdb_must_open("mapsize=256k;sync=nosync", SLUICE_OPEN_CREATE, clk);
  n = fill_until_full(l);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    child_dies_with_parent();
    sluice_limiter *c = NULL;
    char err[256];
    int64_t size = 2 << 20;
    if (lmdb_open_at(envdir, "mapsize=256k;sync=nosync", 0, clk, &c, err,
                     sizeof err) !=
            SLUICE_OK ||
        sluice_limiter_control(c, SLUICE_CTL_LMDB_MAPSIZE, &size) != SLUICE_OK)
      _exit(1);
    sluice_limiter_close(c);
    _exit(0);
  }
  cr_assert_eq(child_status(pid), 0);
  /* This process still maps 256k; when it runs out of room it adopts the
  ** size the other process recorded, so as many keys again fit. */
  for (i = n; i < 2 * n; i++) {
    key_name(name, sizeof name, i);
    cr_assert_eq(take_at(l, name, &slow, 1, T0, &v), SLUICE_OK, "key %d: %s",
                 i, sluice_limiter_errmsg(l));
  }
  cr_assert_geq(stats_of(l).mapsize, 2 << 20);
  check_all_intact(l, 0, 2 * n);
  sluice_limiter_close(l);
}

Test(lmdb_capacity, a_larger_mapsize_at_open_is_adopted_by_others) {
  sluice_limiter *l, *big;
  sluice_verdict v;
  char name[32];
  pid_t pid;
  int n, i;
  l = lmdb_must_open("mapsize=256k;sync=nosync", SLUICE_OPEN_CREATE, clk);
  n = fill_until_full(l);
  /* Another process restarts with a bigger mapsize= in its config. */
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    char err[256];
    child_dies_with_parent();
    if (lmdb_open_at(envdir, "mapsize=4m;sync=nosync", 0, clk, &big, err,
                     sizeof err) != SLUICE_OK)
      _exit(1);
    sluice_limiter_close(big);
    _exit(0);
  }
  cr_assert_eq(child_status(pid), 0);
  for (i = n; i < 2 * n; i++) {
    key_name(name, sizeof name, i);
    cr_assert_eq(take_at(l, name, &slow, 1, T0, &v), SLUICE_OK, "key %d: %s",
                 i, sluice_limiter_errmsg(l));
  }
  cr_assert_geq(stats_of(l).mapsize, 4 << 20);
  check_all_intact(l, 0, 2 * n);
  sluice_limiter_close(l);
}

Test(lmdb_capacity, sweep_is_bounded_and_never_early) {
  sluice_limiter *l = lmdb_must_open("sync=nosync", SLUICE_OPEN_CREATE, clk);
  sluice_gcra_params quick = {1, SEC, 1}; /* live for one second */
  sluice_verdict v;
  sluice_lmdb_sweep sw;
  char name[32];
  int i, calls = 0;
  int64_t removed = 0, tsweep = T0 + 2 * 60 * MIN;
  for (i = 0; i < 40; i++) {
    snprintf(name, sizeof name, "quick:%02d", i);
    cr_assert_eq(take_at(l, name, &quick, 1, T0, &v), SLUICE_OK);
  }
  for (i = 0; i < 5; i++) {
    snprintf(name, sizeof name, "hour:%02d", i);
    cr_assert_eq(take_at(l, name, &slow, 1, T0 + 90 * MIN, &v), SLUICE_OK);
  }
  /* Boxed at level 2 (60 min box from T0 + 90 min): live at the sweep. */
  cr_assert_eq(pen(l, "boxed", SLUICE_OP_TRIP, 2, T0 + 90 * MIN, &v),
               SLUICE_OK);
  /* Box over at the sweep, offense counter (24 h) still live. */
  cr_assert_eq(trip_by_strikes(l, "offender", T0), 1);
  /* Only strikes, whose 60 s window is long gone at the sweep. */
  cr_assert_eq(pen(l, "striker", SLUICE_OP_STRIKE, 0, T0, &v), SLUICE_OK);
  cr_assert_eq(stats_of(l).records, 48);

  /* At T0 nothing has expired yet. */
  sw = (sluice_lmdb_sweep){T0, 1000, 0, 0, 0};
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_SWEEP, &sw),
               SLUICE_OK);
  cr_assert_eq(sw.removed, 0);
  cr_assert_eq(sw.examined, 48);
  cr_assert_eq(sw.wrapped, 1);

  do {
    sw = (sluice_lmdb_sweep){tsweep, 7, 0, 0, 0};
    cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_SWEEP, &sw),
                 SLUICE_OK);
    cr_assert_leq(sw.examined, 7, "bounded work per call");
    removed += sw.removed;
    cr_assert_lt(++calls, 100);
  } while (!sw.wrapped);
  cr_assert_eq(calls, 7, "48 records in slices of 7");
  cr_assert_eq(removed, 41, "40 quick buckets and the striker");
  cr_assert_eq(stats_of(l).records, 7);

  cr_assert_eq(pen(l, "boxed", SLUICE_OP_CHECK, 0, tsweep, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.level, 2);
  cr_assert_eq(v.retry_after_ns, 30 * MIN);
  cr_assert_eq(trip_by_strikes(l, "offender", tsweep), 2,
               "the offense counter survived the sweep");
  for (i = 0; i < 5; i++) {
    sluice_state st;
    int64_t exp;
    snprintf(name, sizeof name, "hour:%02d", i);
    cr_assert_eq(sluice_limiter_get(l, name, strlen(name), &st, &exp),
                 SLUICE_OK);
  }
  sw = (sluice_lmdb_sweep){tsweep, 0, 0, 0, 0};
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_SWEEP, &sw),
               SLUICE_EINVAL);
  sluice_limiter_close(l);
}

Test(lmdb_capacity, expired_record_is_dropped_when_met) {
  sluice_limiter *l = lmdb_must_open("sync=nosync", SLUICE_OPEN_CREATE, clk);
  sluice_gcra_params quick = {1, SEC, 5};
  sluice_verdict v;
  sluice_state st;
  int64_t exp;
  sluice_key k = {"lazy", 4};
  sluice_op peek = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &quick, 0, 0};
  cr_assert_eq(take_at(l, "lazy", &quick, 3, T0, &v), SLUICE_OK);
  cr_assert_eq(take_at(l, "other", &quick, 3, T0, &v), SLUICE_OK);
  cr_assert_eq(stats_of(l).records, 2);
  cr_assert_eq(sluice_limiter_get(l, "lazy", 4, &st, &exp), SLUICE_OK);
  cr_assert_eq(exp, T0 + 3 * SEC);
  /* Still live one ns before its expiry: a peek keeps it. */
  cr_assert_eq(op_decide(l, &peek, T0 + 3 * SEC - 1, &v),
               SLUICE_OK);
  cr_assert_eq(v.remaining, 4);
  cr_assert_eq(stats_of(l).records, 2);
  /* At its expiry it reads as fresh and is deleted by the step. */
  cr_assert_eq(op_decide(l, &peek, T0 + 3 * SEC, &v),
               SLUICE_OK);
  cr_assert_eq(v.remaining, 5);
  cr_assert_eq(stats_of(l).records, 1);
  cr_assert_eq(sluice_limiter_get(l, "lazy", 4, &st, &exp), SLUICE_ENOTFOUND);
  sluice_limiter_close(l);
}

/* A batch gives exactly the verdicts of the same ops applied one by one on
** the mem store, including several ops on one key within the batch. */
Test(lmdb_capacity, batch_matches_one_by_one_on_mem) {
  enum { N = 1000 };
  static char names[N][32];
  static sluice_key keys[N][2];
  static sluice_op ops[N];
  static sluice_verdict vb[N], vm;
  static int rcs[N];
  static sluice_gcra_params g2[2] = {{50, SEC, 100}, {5, SEC, 10}};
  sluice_limiter *l = lmdb_must_open("sync=full", SLUICE_OPEN_CREATE, clk);
  sluice_limiter *mem;
  sluice_limiter_options mo = {0};
  uint64_t seed = 12345;
  int i;
  mo.store = "mem";
  mo.clock = clk;
  cr_assert_eq(sluice_limiter_open(&mo, &mem, NULL, 0), SLUICE_OK);
  for (i = 0; i < N; i++) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    snprintf(names[i], sizeof names[i], "{t:b}:key:%d", (int)(seed >> 59));
    keys[i][0] = (sluice_key){"{t:b}:tenant", 12};
    keys[i][1] = (sluice_key){names[i], strlen(names[i])};
    ops[i] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, keys[i], g2,
                         (int64_t)(seed >> 62) + 1, 0};
  }
  cr_assert_eq(ops_decide(l, N, ops, SLUICE_NOW, vb, rcs), SLUICE_OK);
  for (i = 0; i < N; i++) {
    int64_t now = sluice_limiter_now(l);
    cr_assert_eq(rcs[i], SLUICE_OK);
    cr_assert_eq(op_decide(mem, &ops[i], now, &vm), SLUICE_OK);
    cr_assert_eq(vb[i].allowed, vm.allowed, "op %d", i);
    cr_assert_eq(vb[i].remaining, vm.remaining, "op %d", i);
    cr_assert_eq(vb[i].binding, vm.binding, "op %d", i);
    cr_assert_eq(vb[i].retry_after_ns, vm.retry_after_ns, "op %d", i);
  }
  sluice_limiter_close(l);
  /* And it is on disk. */
  l = lmdb_must_open("sync=full", 0, clk);
  {
    sluice_key k = {"{t:b}:tenant", 12};
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &g2[0], 0, 0};
    sluice_verdict a, b;
    cr_assert_eq(op_decide(l, &op, T0, &a), SLUICE_OK);
    cr_assert_eq(op_decide(mem, &op, T0, &b), SLUICE_OK);
    cr_assert_eq(a.remaining, b.remaining);
    cr_assert_lt(a.remaining, 100, "the batch charged the tenant");
  }
  sluice_limiter_close(l);
  sluice_limiter_close(mem);
}

#define NTHREAD 4
#define PER_THREAD 600

typedef struct thr {
  sluice_limiter *l;
  int admitted;
  int errors;
} thr;

static void *take_loop(void *arg) {
  thr *t = arg;
  sluice_verdict v;
  int i;
  for (i = 0; i < PER_THREAD; i++) {
    if (take_at(t->l, "threads", &(sluice_gcra_params){1, 3600 * SEC, 1000},
                1, T0, &v) != SLUICE_OK)
      t->errors++;
    else
      t->admitted += v.allowed;
  }
  return NULL;
}

static void *grow_loop(void *arg) {
  thr *t = arg;
  int i;
  for (i = 0; i < 20; i++) {
    int64_t size = (int64_t)(64 + i) << 20;
    if (sluice_limiter_control(t->l, SLUICE_CTL_LMDB_MAPSIZE, &size) !=
        SLUICE_OK)
      t->errors++;
  }
  return NULL;
}

Test(lmdb_capacity, threads_with_a_resizer_never_over_admit) {
  sluice_limiter *l = lmdb_must_open("sync=nosync", SLUICE_OPEN_CREATE, clk);
  pthread_t th[NTHREAD + 1];
  thr t[NTHREAD + 1];
  int i, total = 0;
  for (i = 0; i <= NTHREAD; i++) {
    t[i] = (thr){l, 0, 0};
    cr_assert_eq(pthread_create(&th[i], NULL,
                                i < NTHREAD ? take_loop : grow_loop, &t[i]),
                 0);
  }
  for (i = 0; i <= NTHREAD; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(t[i].errors, 0, "thread %d", i);
    total += t[i].admitted;
  }
  cr_assert_eq(total, 1000, "4 x 600 asks of a 1000 burst at one instant");
  cr_assert_geq(stats_of(l).mapsize, (int64_t)83 << 20);
  sluice_limiter_close(l);
}

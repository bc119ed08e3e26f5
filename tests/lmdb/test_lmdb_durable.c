/*
** What the LMDB store is for: state that outlives the process.  A box, its
** level, its time left and the offense counter must come back unchanged
** after a clean close and after SIGKILL in the middle of a run; two
** processes deciding on the same keys at once must never admit more than
** the bucket holds; a stale reader slot from a dead process is cleared.
** Every check runs at fixed manual times, so the expected numbers follow
** from the penalty essay (lib/algo/penalty.c), not from timing.
*/
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <sys/mman.h>

#include "lmdb_gate.h"
#include "../common/one_step.h"
#include "lmdb_test.h"

static sluice_clock *clk;

static void setup(void) {
  tdir_make();
  cr_assert_eq(sluice_clock_manual(T0, &clk), SLUICE_OK);
}

static void teardown(void) {
  sluice_clock_free(clk);
  tdir_remove();
}

TestSuite(lmdb_durable, .init = setup, .fini = teardown, .timeout = 90);

static void expect_boxed(sluice_limiter *l, const char *key, int64_t now,
                         int level, int64_t left, int64_t offenses) {
  sluice_verdict v;
  cr_assert_eq(pen(l, key, SLUICE_OP_CHECK, 0, now, &v), SLUICE_OK, "%s",
               sluice_limiter_errmsg(l));
  cr_assert_eq(v.allowed, 0, "%s is boxed", key);
  cr_assert_eq(v.level, level, "%s level", key);
  cr_assert_eq(v.retry_after_ns, left, "%s time left", key);
  cr_assert_eq(v.offenses, offenses, "%s offenses", key);
}

Test(lmdb_durable, box_survives_close_and_next_trip_escalates) {
  static const char *const modes[] = {"sync=full", "sync=nometasync",
                                      "sync=nosync"};
  size_t m;
  for (m = 0; m < 3; m++) {
    sluice_limiter *l;
    sluice_state st, st2;
    int64_t exp, exp2;
    sluice_verdict v;
    char key[32];
    snprintf(key, sizeof key, "abuser-%zu", m);
    l = lmdb_must_open(modes[m], SLUICE_OPEN_CREATE, clk);
    cr_assert_eq(trip_by_strikes(l, key, T0), 1);
    cr_assert_eq(sluice_limiter_get(l, key, strlen(key), &st, &exp),
                 SLUICE_OK);
    sluice_limiter_close(l);

    /* Restart one minute later: same record, same box, 4 min left. */
    l = lmdb_must_open(modes[m], 0, clk);
    cr_assert_eq(sluice_limiter_get(l, key, strlen(key), &st2, &exp2),
                 SLUICE_OK);
    cr_assert_eq(memcmp(&st, &st2, sizeof st), 0, "%s: record", modes[m]);
    cr_assert_eq(exp, exp2, "%s: expiry", modes[m]);
    expect_boxed(l, key, T0 + MIN, 1, 4 * MIN, 1);
    /* Strikes while boxed count nothing... */
    cr_assert_eq(pen(l, key, SLUICE_OP_STRIKE, 0, T0 + MIN, &v), SLUICE_OK);
    cr_assert_eq(v.allowed, 0);
    sluice_limiter_close(l);

    /* ...and after the box the offense counter is still there: the next
    ** trip, after another restart, is level 2 (60 min). */
    l = lmdb_must_open(modes[m], 0, clk);
    cr_assert_eq(pen(l, key, SLUICE_OP_CHECK, 0, T0 + 6 * MIN, &v),
                 SLUICE_OK);
    cr_assert_eq(v.allowed, 1, "box over after 5 min");
    cr_assert_eq(v.offenses, 1, "offense remembered across the restart");
    cr_assert_eq(trip_by_strikes(l, key, T0 + 6 * MIN), 2);
    sluice_limiter_close(l);
    l = lmdb_must_open(modes[m], 0, clk);
    expect_boxed(l, key, T0 + 16 * MIN, 2, 50 * MIN, 2);
    sluice_limiter_close(l);
  }
}

Test(lmdb_durable, suspension_survives_and_only_release_ends_it) {
  sluice_limiter *l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  sluice_verdict v;
  cr_assert_eq(pen(l, "stuffer", SLUICE_OP_TRIP, 3, T0, &v), SLUICE_OK);
  cr_assert_eq(v.level, 3);
  sluice_limiter_close(l);
  l = lmdb_must_open(NULL, 0, clk);
  /* A year later it is still suspended: nothing may sweep it. */
  {
    sluice_lmdb_sweep sw = {T0 + 365 * 24 * 60 * MIN, 1000, 0, 0, 0};
    cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_SWEEP, &sw),
                 SLUICE_OK);
    cr_assert_eq(sw.removed, 0);
  }
  cr_assert_eq(pen(l, "stuffer", SLUICE_OP_CHECK, 0,
                   T0 + 365 * 24 * 60 * MIN, &v),
               SLUICE_OK);
  cr_assert_eq(v.allowed, 0);
  cr_assert(v.flags & SLUICE_V_SUSPENDED);
  cr_assert_eq(v.retry_after_ns, SLUICE_FOREVER);
  sluice_limiter_close(l);
}

/* The child of the SIGKILL test: box a key, fill a bucket, tell the parent,
** then keep writing until killed, so that the kill lands among (or inside)
** write transactions. */
static void sigkill_child(int wfd, const char *params) {
  sluice_limiter *l;
  sluice_verdict v;
  sluice_gcra_params g = {1, 60 * SEC, 50};
  char key[32], err[256];
  sluice_clock *c;
  int i;
  if (sluice_clock_manual(T0, &c) != SLUICE_OK ||
      lmdb_open_at(envdir, params, SLUICE_OPEN_CREATE, c, &l, err,
                   sizeof err) != SLUICE_OK)
    _exit(1);
  for (i = 0; i < 3; i++)
    if (pen(l, "killed-abuser", SLUICE_OP_STRIKE, 0, T0, &v) != SLUICE_OK)
      _exit(2);
  if (v.level != 1)
    _exit(3);
  for (i = 0; i < 50; i++)
    if (take_at(l, "drained", &g, 1, T0, &v) != SLUICE_OK || !v.allowed)
      _exit(4);
  if (write(wfd, "x", 1) != 1)
    _exit(5);
  for (i = 0;; i++) {
    snprintf(key, sizeof key, "noise-%d", i % 5000);
    (void)take_at(l, key, &g, 1, T0 + i, &v);
    (void)pen(l, "killed-abuser", SLUICE_OP_STRIKE, 0, T0 + i, &v);
  }
}

Test(lmdb_durable, box_survives_sigkill_mid_run) {
  static const char *const modes[] = {"sync=full", "sync=nosync"};
  size_t m;
  for (m = 0; m < 2; m++) {
    sluice_limiter *l;
    sluice_verdict v;
    sluice_gcra_params g = {1, 60 * SEC, 50};
    int fds[2];
    char c;
    pid_t pid;
    tdir_remove();
    tdir_make();
    cr_assert_eq(pipe(fds), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
    child_dies_with_parent();
      close(fds[0]);
      sigkill_child(fds[1], modes[m]);
    }
    close(fds[1]);
    cr_assert_eq(read(fds[0], &c, 1), 1, "child boxed the key");
    close(fds[0]);
    /* Let it get well into its write loop; how far does not matter. */
    usleep(100 * 1000);
    kill(pid, SIGKILL);
    cr_assert_eq(child_status(pid), -SIGKILL);

    l = lmdb_must_open(modes[m], 0, clk);
    expect_boxed(l, "killed-abuser", T0 + SEC, 1, 5 * MIN - SEC, 1);
    {
      sluice_key k = {"drained", 7};
      sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &g, 0, 0};
      cr_assert_eq(op_decide(l, &op, T0, &v), SLUICE_OK);
      cr_assert_eq(v.remaining, 0, "the drained bucket stayed drained");
    }
    /* The writer lock the child may have died holding is usable. */
    cr_assert_eq(trip_by_strikes(l, "after-kill", T0), 1);
    sluice_limiter_close(l);
  }
}

/* Each child takes from one shared tenant bucket plus its own key bucket,
** all at the same instant, as fast as it can. */
#define NPROC 3
#define PER_CHILD 1200
#define TENANT_BURST 1000

static void contend_child(int rfd, int wfd, int who) {
  sluice_limiter *l;
  sluice_verdict v;
  sluice_gcra_params g[2] = {{1, 3600 * SEC, TENANT_BURST},
                             {1, 3600 * SEC, 800}};
  char kname[32], err[256];
  sluice_key keys[2];
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, keys, g, 1, 0};
  sluice_clock *c;
  int i, admitted = 0;
  char go;
  snprintf(kname, sizeof kname, "{t:acme}:key:%d", who);
  keys[0].data = "{t:acme}:tenant";
  keys[0].len = strlen(keys[0].data);
  keys[1].data = kname;
  keys[1].len = strlen(kname);
  if (sluice_clock_manual(T0, &c) != SLUICE_OK ||
      lmdb_open_at(envdir, "sync=nometasync", 0, c, &l, err, sizeof err) !=
          SLUICE_OK)
    _exit(1);
  if (read(rfd, &go, 1) != 1)
    _exit(2);
  for (i = 0; i < PER_CHILD; i++) {
    /* Alternate single decisions and small batches: both paths. */
    if (i % 2 == 0) {
      if (op_decide(l, &op, T0, &v) != SLUICE_OK)
        _exit(3);
      admitted += v.allowed;
    } else {
      sluice_op ops[1] = {op};
      int rc;
      if (ops_decide(l, 1, ops, SLUICE_NOW, &v, &rc) != SLUICE_OK ||
          rc != SLUICE_OK)
        _exit(4);
      admitted += v.allowed;
    }
  }
  sluice_limiter_close(l);
  if (write(wfd, &admitted, sizeof admitted) != (ssize_t)sizeof admitted)
    _exit(5);
  _exit(0);
}

Test(lmdb_durable, processes_contending_never_over_admit) {
  sluice_limiter *l;
  sluice_verdict v;
  int go[2], res[2], i, total = 0;
  pid_t pids[NPROC];
  sluice_gcra_params g = {1, 3600 * SEC, TENANT_BURST};
  l = lmdb_must_open("sync=nometasync", SLUICE_OPEN_CREATE, clk);
  cr_assert_eq(pipe(go), 0);
  cr_assert_eq(pipe(res), 0);
  for (i = 0; i < NPROC; i++) {
    pids[i] = fork();
    cr_assert_geq(pids[i], 0);
    if (pids[i] == 0) {
      child_dies_with_parent();
      close(go[1]);
      close(res[0]);
      contend_child(go[0], res[1], i);
    }
  }
  close(go[0]);
  close(res[1]);
  for (i = 0; i < NPROC; i++)
    cr_assert_eq(write(go[1], "g", 1), 1);
  close(go[1]);
  for (i = 0; i < NPROC; i++) {
    int n;
    cr_assert_eq(read(res[0], &n, sizeof n), (ssize_t)sizeof n);
    total += n;
  }
  close(res[0]);
  for (i = 0; i < NPROC; i++)
    cr_assert_eq(child_status(pids[i]), 0, "child %d", i);
  /* Demand (3 x 1200) is far above the tenant's 1000 and each key bucket
  ** (800) alone cannot drain it, so exactly the tenant burst is admitted:
  ** more would be over-admission, less a lost update. */
  cr_assert_eq(total, TENANT_BURST, "admitted %d of a %d burst", total,
               TENANT_BURST);
  {
    sluice_key k = {"{t:acme}:tenant", 15};
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &g, 0, 0};
    cr_assert_eq(op_decide(l, &op, T0, &v), SLUICE_OK);
    cr_assert_eq(v.remaining, 0);
  }
  sluice_limiter_close(l);
}

Test(lmdb_durable, stale_reader_of_a_dead_process_is_cleared) {
  sluice_limiter *l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  int fds[2], dead = -1;
  char c;
  pid_t pid;
  cr_assert_eq(stats_of(l).readers, 0);
  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    child_dies_with_parent();
    /* Another program on the same environment, holding a snapshot. */
    MDB_env *env;
    MDB_txn *txn;
    close(fds[0]);
    if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 4) ||
        mdb_env_open(env, envdir, MDB_NOTLS, 0600) ||
        mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))
      _exit(1);
    (void)!write(fds[1], "r", 1);
    pause();
    _exit(0);
  }
  close(fds[1]);
  cr_assert_eq(read(fds[0], &c, 1), 1);
  close(fds[0]);
  cr_assert_eq(stats_of(l).readers, 1, "the child holds a reader slot");
  kill(pid, SIGKILL);
  cr_assert_eq(child_status(pid), -SIGKILL);
  cr_assert_eq(stats_of(l).readers, 1, "a dead reader's slot stays taken");
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_READER_CHECK, &dead),
               SLUICE_OK);
  cr_assert_eq(dead, 1);
  cr_assert_eq(stats_of(l).readers, 0);
  sluice_limiter_close(l);
}

/* A writer that stops while holding the writer gate (here: a child that
** takes the gate and sleeps, as a SIGSTOPped or hung sluice writer would)
** makes decisions fail with SLUICE_ETIMEDOUT after busy_timeout_ms instead
** of hanging; when that holder dies, the gate is recovered and nothing of
** the state was lost. */
Test(lmdb_durable, hung_writer_times_out_and_dead_writer_is_recovered) {
  sluice_limiter *l =
      lmdb_must_open("busy_timeout_ms=200", SLUICE_OPEN_CREATE, clk);
  sluice_verdict v;
  char gp[400], c;
  int fds[2];
  pid_t pid;
  cr_assert_eq(trip_by_strikes(l, "hung", T0), 1);
  snprintf(gp, sizeof gp, "%s/" SLUICE_LMDB_GATE_FILE, envdir);
  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    child_dies_with_parent();
    int fd = open(gp, O_RDWR);
    sluice_lmdb_gate *g;
    if (fd < 0)
      _exit(1);
    g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (g == MAP_FAILED || pthread_mutex_lock(&g->mu) != 0)
      _exit(2);
    (void)!write(fds[1], "h", 1);
    pause();
    _exit(0);
  }
  close(fds[1]);
  cr_assert_eq(read(fds[0], &c, 1), 1);
  close(fds[0]);
  cr_assert_eq(pen(l, "hung", SLUICE_OP_RELEASE, 0, T0, &v), SLUICE_ETIMEDOUT,
               "%s", sluice_limiter_errmsg(l));
  cr_assert_neq(strstr(sluice_limiter_errmsg(l), "200 ms"), NULL, "%s",
                sluice_limiter_errmsg(l));
  /* Reads do not need the writer. */
  expect_boxed(l, "hung", T0, 1, 5 * MIN, 1);
  kill(pid, SIGKILL);
  cr_assert_eq(child_status(pid), -SIGKILL);
  /* The holder died with the gate locked: the next writer recovers it. */
  cr_assert_eq(pen(l, "hung", SLUICE_OP_RELEASE, 0, T0, &v), SLUICE_OK, "%s",
               sluice_limiter_errmsg(l));
  cr_assert_eq(pen(l, "hung", SLUICE_OP_CHECK, 0, T0, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 1);
  cr_assert_eq(v.offenses, 1, "the release kept the offense");
  sluice_limiter_close(l);
}

/* SIGKILL lands among batches of 50 counter bumps (one per key) and group
** decisions (tenant + key bucket charged together).  Whatever moment it
** hits, a batch is all there or not at all, and a group never has one
** bucket charged without the other. */
#define TEAR_KEYS 50

static void tear_child(int wfd) {
  sluice_limiter *l;
  sluice_window_params w = {SLUICE_COUNT_MAX, 3600 * SEC};
  sluice_gcra_params g[2] = {{1, 3600 * SEC, 1 << 20}, {1, 3600 * SEC, 1 << 20}};
  sluice_key gk[2] = {{"{t:tear}:tenant", 15}, {"{t:tear}:key", 12}};
  sluice_op group = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, gk, g, 1, 0};
  char names[TEAR_KEYS][16], err[256];
  sluice_key keys[TEAR_KEYS];
  sluice_op ops[TEAR_KEYS];
  sluice_verdict vs[TEAR_KEYS];
  int rcs[TEAR_KEYS], i, round;
  sluice_clock *c;
  if (sluice_clock_manual(T0, &c) != SLUICE_OK ||
      lmdb_open_at(envdir, "sync=nometasync", SLUICE_OPEN_CREATE, c, &l, err,
                   sizeof err) != SLUICE_OK)
    _exit(1);
  for (i = 0; i < TEAR_KEYS; i++) {
    snprintf(names[i], sizeof names[i], "tear:%02d", i);
    keys[i] = (sluice_key){names[i], strlen(names[i])};
    ops[i] = (sluice_op){SLUICE_ALGO_FWINDOW, SLUICE_OP_COUNT, 1, &keys[i],
                         &w, 1, 0};
  }
  for (round = 0;; round++) {
    if (ops_decide(l, TEAR_KEYS, ops, SLUICE_NOW, vs, rcs) != SLUICE_OK)
      _exit(2);
    if (op_decide(l, &group, T0, &vs[0]) != SLUICE_OK)
      _exit(3);
    if (round == 20 && write(wfd, "x", 1) != 1)
      _exit(4);
  }
}

Test(lmdb_durable, sigkill_never_tears_a_group_or_a_batch) {
  sluice_window_params w = {SLUICE_COUNT_MAX, 3600 * SEC};
  sluice_gcra_params g = {1, 3600 * SEC, 1 << 20};
  sluice_limiter *l;
  sluice_verdict v;
  int64_t first = -1, tenant, key;
  int fds[2], i;
  char c;
  pid_t pid;
  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    child_dies_with_parent();
    close(fds[0]);
    tear_child(fds[1]);
  }
  close(fds[1]);
  cr_assert_eq(read(fds[0], &c, 1), 1, "child ran 20 rounds");
  close(fds[0]);
  usleep(50 * 1000);
  kill(pid, SIGKILL);
  cr_assert_eq(child_status(pid), -SIGKILL);

  l = lmdb_must_open("sync=nometasync", 0, clk);
  for (i = 0; i < TEAR_KEYS; i++) {
    char name[16];
    sluice_key k;
    sluice_op op = {SLUICE_ALGO_FWINDOW, SLUICE_OP_PEEK, 1, &k, &w, 0, 0};
    snprintf(name, sizeof name, "tear:%02d", i);
    k = (sluice_key){name, strlen(name)};
    cr_assert_eq(op_decide(l, &op, T0, &v), SLUICE_OK);
    if (first < 0)
      first = v.remaining;
    cr_assert_eq(v.remaining, first, "key %d: a torn batch", i);
  }
  cr_assert_leq(SLUICE_COUNT_MAX - first, INT64_C(1) << 20);
  cr_assert_geq(SLUICE_COUNT_MAX - first, 21, "at least 21 whole batches");
  {
    sluice_key k1 = {"{t:tear}:tenant", 15}, k2 = {"{t:tear}:key", 12};
    sluice_op p1 = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k1, &g, 0, 0};
    sluice_op p2 = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k2, &g, 0, 0};
    cr_assert_eq(op_decide(l, &p1, T0, &v), SLUICE_OK);
    tenant = v.remaining;
    cr_assert_eq(op_decide(l, &p2, T0, &v), SLUICE_OK);
    key = v.remaining;
    cr_assert_eq(tenant, key, "a torn group: tenant %lld, key %lld",
                 (long long)tenant, (long long)key);
    cr_assert_lt(tenant, 1 << 20, "the group was charged");
  }
  sluice_limiter_close(l);
}

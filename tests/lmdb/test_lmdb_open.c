/*
** Opening an LMDB store and every way it can refuse: bad parameters, a
** missing or read-only directory, a corrupt, foreign or other-layout
** environment, a locked lock file, a read-only store, a store used after
** fork.  Each refusal must name the problem and leave the files as they
** were.
*/
#include <fcntl.h>
#include <lmdb.h>
#include <pwd.h>

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

TestSuite(lmdb_open, .init = setup, .fini = teardown, .timeout = 60);

static int exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

Test(lmdb_open, bad_params_are_refused_and_create_nothing) {
  static const char *const bad[] = {
      "sync=sometimes", "mapsize=12x", "mapsize=0",      "maxreaders=0",
      "mode=999",       "mode=rw",     "synk=nosync",    "mapsize",
      "maxreaders=70000"};
  sluice_limiter *l;
  char err[256];
  size_t i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = lmdb_open_at(envdir, bad[i], SLUICE_OPEN_CREATE, clk, &l, err,
                          sizeof err);
    cr_assert_eq(rc, SLUICE_EINVAL, "'%s' gave %s", bad[i],
                 sluice_err_name(rc));
    cr_assert_null(l);
    cr_assert_neq(strstr(err, "lmdb:"), NULL, "'%s': detail '%s'", bad[i],
                  err);
    cr_assert(!exists(envdir), "'%s' created the directory", bad[i]);
  }
  {
    sluice_limiter_options o = {0};
    o.store = "lmdb:mapsize=1m";
    o.flags = SLUICE_OPEN_CREATE;
    cr_assert_eq(sluice_limiter_open2(&o, &l, err, sizeof err), SLUICE_EINVAL);
    cr_assert_neq(strstr(err, "path"), NULL, "detail names path: %s", err);
  }
}

Test(lmdb_open, missing_dir_needs_create) {
  sluice_limiter *l;
  char err[256];
  int rc = lmdb_open_at(envdir, NULL, 0, clk, &l, err, sizeof err);
  cr_assert_eq(rc, SLUICE_ENOTFOUND, "got %s", sluice_err_name(rc));
  cr_assert_neq(strstr(err, "SLUICE_OPEN_CREATE"), NULL, "%s", err);
  cr_assert(!exists(envdir));
  rc = lmdb_open_at(envdir, NULL, SLUICE_OPEN_READONLY | SLUICE_OPEN_CREATE,
                    clk, &l, err, sizeof err);
  cr_assert_eq(rc, SLUICE_ENOTFOUND, "read-only never creates: %s",
               sluice_err_name(rc));
  cr_assert(!exists(envdir));
  /* An existing but empty directory is not an environment either. */
  cr_assert_eq(mkdir(envdir, 0700), 0);
  rc = lmdb_open_at(envdir, NULL, 0, clk, &l, err, sizeof err);
  cr_assert_eq(rc, SLUICE_ENOTFOUND, "got %s", sluice_err_name(rc));
  {
    char dp[400];
    snprintf(dp, sizeof dp, "%s/data.mdb", envdir);
    cr_assert(!exists(dp), "a refused open created data.mdb");
  }
  l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  cr_assert_eq(sluice_limiter_capabilities(l),
               SLUICE_CAP_THREADSAFE | SLUICE_CAP_CROSS_PROCESS |
                   SLUICE_CAP_DURABLE);
  cr_assert_str_eq(sluice_limiter_backend(l), "lmdb");
  sluice_limiter_close(l);
  /* Now it exists: no CREATE needed. */
  l = lmdb_must_open(NULL, 0, clk);
  sluice_limiter_close(l);
}

/* Processes of one service start together and all open the same new
** directory with SLUICE_OPEN_CREATE: each must get the store (one of them
** creates the directory, the others find it made between their look and
** their mkdir), and each one's decision must count.  Several rounds, each
** in a new directory, since the race is narrow. */
#define RACERS 8
#define RACE_ROUNDS 12

/* Each racer takes one point; the bucket refills one an hour. */
static const sluice_gcra_params race_bucket = {1, 3600 * SEC, 1000};

static int racer(const char *dir, int go_fd) {
  sluice_limiter *l;
  sluice_verdict v;
  char err[256], c;
  int rc;
  if (read(go_fd, &c, 1) != 0) /* EOF: every racer is forked */
    return 2;
  rc = lmdb_open_at(dir, "sync=nosync", SLUICE_OPEN_CREATE, clk, &l, err,
                    sizeof err);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "racer %d: %s: %s\n", (int)getpid(), sluice_err_name(rc),
            err);
    return 1;
  }
  rc = sluice_limiter_take(l, "k", 1, &race_bucket, 1, &v);
  sluice_limiter_close(l);
  return rc == SLUICE_OK && v.allowed ? 0 : 1;
}

Test(lmdb_open, processes_creating_one_directory_at_once_all_open_it) {
  sluice_key k = {"k", 1};
  sluice_op peek = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &race_bucket, 0,
                    0};
  for (int r = 0; r < RACE_ROUNDS; r++) {
    char dir[400];
    int go[2], failed = 0;
    pid_t pid[RACERS];
    sluice_limiter *l;
    sluice_verdict v;
    snprintf(dir, sizeof dir, "%s/race%d", tdir, r);
    cr_assert_eq(pipe(go), 0);
    for (int i = 0; i < RACERS; i++) {
      pid[i] = fork();
      cr_assert_geq(pid[i], 0);
      if (pid[i] == 0) {
        close(go[1]);
        _exit(racer(dir, go[0]));
      }
    }
    close(go[0]);
    close(go[1]); /* all start now */
    for (int i = 0; i < RACERS; i++) {
      int st;
      cr_assert_eq(waitpid(pid[i], &st, 0), pid[i]);
      failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    cr_assert_eq(failed, 0, "round %d: %d of %d processes failed", r, failed,
                 RACERS);
    cr_assert_eq(lmdb_open_at(dir, NULL, 0, clk, &l, NULL, 0), SLUICE_OK);
    cr_assert_eq(sluice_limiter_apply(l, &peek, &v), SLUICE_OK);
    cr_assert_eq(v.remaining, race_bucket.burst - RACERS,
                 "round %d: %lld left", r, (long long)v.remaining);
    sluice_limiter_close(l);
  }
}

Test(lmdb_open, path_that_is_a_file) {
  sluice_limiter *l;
  char err[256];
  int fd = open(envdir, O_CREAT | O_WRONLY, 0600);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(lmdb_open_at(envdir, NULL, SLUICE_OPEN_CREATE, clk, &l, err,
                            sizeof err),
               SLUICE_EINVAL);
  cr_assert_neq(strstr(err, "not a directory"), NULL, "%s", err);
}

Test(lmdb_open, readonly_store_inspects_but_never_writes) {
  sluice_limiter *l, *ro;
  sluice_verdict v;
  sluice_state st, st2;
  int64_t exp, exp2;
  sluice_lmdb_sweep sw = {T0 + 365 * 24 * 60 * MIN, 100, 0, 0, 0};
  int64_t sz = 0;
  l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  cr_assert_eq(trip_by_strikes(l, "ro-key", T0), 1);
  cr_assert_eq(sluice_limiter_get(l, "ro-key", 6, &st, &exp), SLUICE_OK);
  sluice_limiter_close(l);

  ro = lmdb_must_open(NULL, SLUICE_OPEN_READONLY, clk);
  cr_assert_eq(sluice_limiter_get(ro, "ro-key", 6, &st2, &exp2), SLUICE_OK);
  cr_assert_eq(memcmp(&st, &st2, sizeof st), 0);
  cr_assert_eq(exp, exp2);
  cr_assert_eq(pen(ro, "ro-key", SLUICE_OP_RELEASE, 0, T0, &v), SLUICE_EPERM);
  cr_assert_neq(strstr(sluice_limiter_errmsg(ro), "read-only"), NULL);
  cr_assert_eq(sluice_limiter_delete(ro, "ro-key", 6), SLUICE_EPERM);
  cr_assert_eq(sluice_limiter_control(ro, SLUICE_CTL_LMDB_SWEEP, &sw),
               SLUICE_EPERM);
  sz = 1 << 30;
  cr_assert_eq(sluice_limiter_control(ro, SLUICE_CTL_LMDB_MAPSIZE, &sz),
               SLUICE_EPERM);
  sluice_limiter_close(ro);

  l = lmdb_must_open(NULL, 0, clk);
  cr_assert_eq(pen(l, "ro-key", SLUICE_OP_CHECK, 0, T0, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 0, "still boxed: the read-only release was refused");
  cr_assert_eq(v.level, 1);
  sluice_limiter_close(l);
}

/* Run fn as an unprivileged user when we are root (root ignores directory
** permissions), or as ourselves otherwise; returns the child's status. */
static int as_unprivileged(int (*fn)(void)) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    child_dies_with_parent();
    if (geteuid() == 0) {
      struct passwd *pw = getpwnam("nobody");
      uid_t uid = pw ? pw->pw_uid : 65534;
      gid_t gid = pw ? pw->pw_gid : 65534;
      if (setgid(gid) != 0 || setuid(uid) != 0)
        _exit(100);
    }
    _exit(fn());
  }
  return child_status(pid);
}

static int open_expect_eperm(void) {
  sluice_limiter *l;
  char err[256];
  sluice_clock *c;
  int rc;
  if (sluice_clock_manual(T0, &c) != SLUICE_OK)
    return 101;
  rc = lmdb_open_at(envdir, NULL, SLUICE_OPEN_CREATE, c, &l, err, sizeof err);
  sluice_clock_free(c);
  if (rc == SLUICE_OK) {
    sluice_limiter_close(l);
    return 102;
  }
  if (rc != SLUICE_EPERM)
    return 103;
  if (!strstr(err, envdir))
    return 104;
  return 0;
}

Test(lmdb_open, readonly_directory) {
  sluice_limiter *l;
  sluice_verdict v;
  /* 1: the parent is read-only, so the environment cannot be created. */
  cr_assert_eq(chmod(tdir, 0555), 0);
  cr_assert_eq(as_unprivileged(open_expect_eperm), 0);
  cr_assert(!exists(envdir));
  /* 2: an existing environment whose files the user may read, not write. */
  cr_assert_eq(chmod(tdir, 0755), 0);
  l = lmdb_must_open("mode=0644", SLUICE_OPEN_CREATE, clk);
  cr_assert_eq(trip_by_strikes(l, "perm", T0), 1);
  sluice_limiter_close(l);
  if (geteuid() != 0) {
    char p[400];
    snprintf(p, sizeof p, "%s/data.mdb", envdir);
    chmod(p, 0444);
    snprintf(p, sizeof p, "%s/lock.mdb", envdir);
    chmod(p, 0444);
    chmod(envdir, 0555);
  }
  cr_assert_eq(as_unprivileged(open_expect_eperm), 0);
  chmod(envdir, 0700);
  /* Nothing was lost. */
  l = lmdb_must_open(NULL, 0, clk);
  cr_assert_eq(pen(l, "perm", SLUICE_OP_CHECK, 0, T0, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.level, 1);
  sluice_limiter_close(l);
}

static void read_file(const char *p, char *buf, size_t n) {
  FILE *f = fopen(p, "rb");
  cr_assert_not_null(f);
  cr_assert_eq(fread(buf, 1, n, f), n);
  fclose(f);
}

Test(lmdb_open, corrupt_data_file_is_refused_and_left_alone) {
  char p[400], junk[8192], after[8192];
  sluice_limiter *l;
  char err[256];
  FILE *f;
  int rc;
  size_t i;
  cr_assert_eq(mkdir(envdir, 0700), 0);
  for (i = 0; i < sizeof junk; i++)
    junk[i] = (char)(i * 131 + 7);
  snprintf(p, sizeof p, "%s/data.mdb", envdir);
  f = fopen(p, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(junk, 1, sizeof junk, f), sizeof junk);
  fclose(f);
  rc = lmdb_open_at(envdir, NULL, SLUICE_OPEN_CREATE, clk, &l, err,
                    sizeof err);
  cr_assert_eq(rc, SLUICE_ECORRUPT, "got %s (%s)", sluice_err_name(rc), err);
  cr_assert_neq(strstr(err, "not an LMDB file"), NULL, "%s", err);
  read_file(p, after, sizeof after);
  cr_assert_eq(memcmp(junk, after, sizeof junk), 0, "data.mdb was changed");
}

/* A data file cut short (a copy that stopped, a restore onto a full disk):
** LMDB opens it and trusts its meta page, and the first read past the end
** of the file was a SIGBUS in the caller.  Refused at open, read-only too,
** and the file is left as it is. */
Test(lmdb_open, truncated_data_file_is_refused_and_left_alone) {
  char p[400], err[256];
  sluice_limiter *l;
  sluice_gcra_params g = {1, MIN, 10};
  sluice_verdict v;
  struct stat sb;
  off_t half;
  int rc, i;
  l = lmdb_must_open("sync=nosync", SLUICE_OPEN_CREATE, clk);
  for (i = 0; i < 5000; i++) { /* some hundreds of pages */
    char k[24];
    snprintf(k, sizeof k, "key-%d", i);
    cr_assert_eq(take_at(l, k, &g, 1, T0, &v), SLUICE_OK);
  }
  sluice_limiter_close(l);
  snprintf(p, sizeof p, "%s/data.mdb", envdir);
  cr_assert_eq(stat(p, &sb), 0);
  cr_assert_gt(sb.st_size, 64 * 1024);
  half = sb.st_size / 2;
  cr_assert_eq(truncate(p, half), 0);
  for (i = 0; i < 2; i++) {
    l = NULL;
    rc = lmdb_open_at(envdir, NULL, i ? SLUICE_OPEN_READONLY : 0, clk, &l,
                      err, sizeof err);
    cr_assert_eq(rc, SLUICE_ECORRUPT, "got %s (%s)", sluice_err_name(rc), err);
    cr_assert_null(l);
    cr_assert_neq(strstr(err, "truncated"), NULL, "%s", err);
  }
  cr_assert_eq(stat(p, &sb), 0);
  cr_assert_eq(sb.st_size, half, "data.mdb was changed");
}

/* Edit the meta record with raw LMDB, as another library version would. */
static void raw_edit_meta(size_t off, uint32_t value) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_val k = {6, (void *)"format"}, v;
  char buf[64];
  cr_assert_eq(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 4);
  cr_assert_eq(mdb_env_open(env, envdir, 0, 0600), 0);
  cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
  cr_assert_eq(mdb_dbi_open(txn, "sluice.meta", 0, &dbi), 0);
  cr_assert_eq(mdb_get(txn, dbi, &k, &v), 0);
  cr_assert_leq(v.mv_size, sizeof buf);
  memcpy(buf, v.mv_data, v.mv_size);
  memcpy(buf + off, &value, sizeof value);
  v.mv_data = buf;
  cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
  cr_assert_eq(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

Test(lmdb_open, other_layout_is_refused) {
  sluice_limiter *l;
  sluice_verdict v;
  char err[256];
  int rc;
  l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  cr_assert_eq(trip_by_strikes(l, "layout", T0), 1);
  sluice_limiter_close(l);
  raw_edit_meta(12, SLUICE_STATE_LAYOUT + 1); /* meta: magic, format, layout */
  rc = lmdb_open_at(envdir, NULL, SLUICE_OPEN_CREATE, clk, &l, err,
                    sizeof err);
  cr_assert_eq(rc, SLUICE_EVERSION, "got %s", sluice_err_name(rc));
  cr_assert_neq(strstr(err, "layout"), NULL, "%s", err);
  /* Put it back: the refused open must not have touched the state. */
  raw_edit_meta(12, SLUICE_STATE_LAYOUT);
  l = lmdb_must_open(NULL, 0, clk);
  cr_assert_eq(pen(l, "layout", SLUICE_OP_CHECK, 0, T0, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.level, 1);
  sluice_limiter_close(l);
}

Test(lmdb_open, foreign_lmdb_environment_is_refused) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_val k = {5, (void *)"hello"}, v = {5, (void *)"world"};
  sluice_limiter *l;
  char err[256];
  int rc;
  cr_assert_eq(mkdir(envdir, 0700), 0);
  cr_assert_eq(mdb_env_create(&env), 0);
  cr_assert_eq(mdb_env_open(env, envdir, 0, 0600), 0);
  cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
  cr_assert_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
  cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
  k.mv_data = (void *)"hullo";
  cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
  cr_assert_eq(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  rc = lmdb_open_at(envdir, NULL, SLUICE_OPEN_CREATE, clk, &l, err,
                    sizeof err);
  cr_assert_eq(rc, SLUICE_EVERSION, "got %s (%s)", sluice_err_name(rc), err);
  cr_assert_neq(strstr(err, "not a sluice store"), NULL, "%s", err);
}

Test(lmdb_open, locked_lock_file_is_busy_not_a_hang) {
  sluice_limiter *l;
  char err[256], lp[400];
  int fds[2], rc;
  char c;
  pid_t pid;
  l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  sluice_limiter_close(l);
  snprintf(lp, sizeof lp, "%s/lock.mdb", envdir);
  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    child_dies_with_parent();
    struct flock fl = {0};
    int fd = open(lp, O_RDWR);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_len = 1;
    if (fd < 0 || fcntl(fd, F_SETLK, &fl) != 0)
      _exit(1);
    (void)!write(fds[1], "x", 1);
    pause();
    _exit(0);
  }
  close(fds[1]);
  cr_assert_eq(read(fds[0], &c, 1), 1, "child took the lock");
  rc = lmdb_open_at(envdir, NULL, 0, clk, &l, err, sizeof err);
  kill(pid, SIGKILL);
  child_status(pid);
  close(fds[0]);
  cr_assert_eq(rc, SLUICE_EBUSY, "got %s (%s)", sluice_err_name(rc), err);
  cr_assert_neq(strstr(err, "locked"), NULL, "%s", err);
  /* The holder is gone: the environment opens again. */
  l = lmdb_must_open(NULL, 0, clk);
  sluice_limiter_close(l);
}

Test(lmdb_open, malformed_record_is_corrupt_and_kept) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_val k = {3, (void *)"bad"}, v = {7, (void *)"garbage"};
  sluice_limiter *l;
  sluice_verdict vd;
  sluice_state st;
  int64_t exp;
  sluice_gcra_params g = {10, SEC, 10};
  l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  sluice_limiter_close(l);
  cr_assert_eq(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 4);
  cr_assert_eq(mdb_env_open(env, envdir, 0, 0600), 0);
  cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
  cr_assert_eq(mdb_dbi_open(txn, "sluice.state", 0, &dbi), 0);
  cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
  cr_assert_eq(mdb_txn_commit(txn), 0);
  mdb_env_close(env);

  l = lmdb_must_open(NULL, 0, clk);
  cr_assert_eq(take_at(l, "bad", &g, 1, T0, &vd), SLUICE_ECORRUPT);
  cr_assert_eq(sluice_limiter_get(l, "bad", 3, &st, &exp), SLUICE_ECORRUPT);
  {
    /* A sweep leaves what it cannot read alone. */
    sluice_lmdb_sweep sw = {INT64_MAX / 2, 100, 0, 0, 0};
    cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_SWEEP, &sw),
                 SLUICE_OK);
    cr_assert_eq(sw.removed, 0);
    cr_assert_eq(sw.examined, 1);
  }
  sluice_limiter_close(l);
  /* The bytes are still there for an operator to look at. */
  cr_assert_eq(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 4);
  cr_assert_eq(mdb_env_open(env, envdir, MDB_RDONLY, 0600), 0);
  cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
  cr_assert_eq(mdb_dbi_open(txn, "sluice.state", 0, &dbi), 0);
  cr_assert_eq(mdb_get(txn, dbi, &k, &v), 0);
  cr_assert_eq(v.mv_size, 7);
  cr_assert_eq(memcmp(v.mv_data, "garbage", 7), 0);
  mdb_txn_abort(txn);
  mdb_env_close(env);
}

Test(lmdb_open, same_directory_twice_in_one_process_shares_the_env) {
  sluice_limiter *a, *b, *c;
  sluice_verdict v;
  char err[256], alias[400];
  int rc;
  a = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  /* A different spelling of the same directory is the same environment. */
  snprintf(alias, sizeof alias, "%s/../env/.", envdir);
  rc = lmdb_open_at(alias, NULL, 0, clk, &b, err, sizeof err);
  cr_assert_eq(rc, SLUICE_OK, "%s", err);
  cr_assert_eq(trip_by_strikes(a, "shared", T0), 1);
  cr_assert_eq(pen(b, "shared", SLUICE_OP_CHECK, 0, T0, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 0);
  rc = lmdb_open_at(envdir, "sync=nosync", 0, clk, &c, err, sizeof err);
  cr_assert_eq(rc, SLUICE_EBUSY, "other sync mode: %s", sluice_err_name(rc));
  cr_assert_neq(strstr(err, "sync=full"), NULL, "%s", err);
  /* Closing one must not break the other (LMDB's fcntl-lock hazard). */
  sluice_limiter_close(a);
  cr_assert_eq(pen(b, "shared", SLUICE_OP_RELEASE, 0, T0 + SEC, &v),
               SLUICE_OK);
  cr_assert_eq(pen(b, "shared", SLUICE_OP_CHECK, 0, T0 + SEC, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 1);
  cr_assert_eq(v.offenses, 1);
  sluice_limiter_close(b);
}

Test(lmdb_open, store_refuses_to_run_in_a_forked_child) {
  sluice_limiter *l;
  sluice_verdict v;
  pid_t pid;
  l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    child_dies_with_parent();
    sluice_limiter *mine = NULL;
    char err[256];
    int rc = pen(l, "fork", SLUICE_OP_STRIKE, 0, T0, &v);
    if (rc != SLUICE_EINVAL || !strstr(sluice_limiter_errmsg(l), "fork"))
      _exit(1);
    /* A store opened in the child is its own and works. */
    if (lmdb_open_at(envdir, NULL, 0, clk, &mine, err, sizeof err) !=
        SLUICE_OK)
      _exit(2);
    if (trip_by_strikes(mine, "fork", T0) != 1)
      _exit(3);
    sluice_limiter_close(mine);
    _exit(0);
  }
  cr_assert_eq(child_status(pid), 0);
  cr_assert_eq(pen(l, "fork", SLUICE_OP_CHECK, 0, T0, &v), SLUICE_OK);
  cr_assert_eq(v.allowed, 0, "the child's trip is visible in the parent");
  cr_assert_eq(v.offenses, 1, "and the refused strike counted nothing");
  sluice_limiter_close(l);
}

Test(lmdb_open, long_keys_are_distinct_and_survive_reopen) {
  static const size_t lens[] = {1, 495, 496, 497, 511, 512};
  char keys[6][SLUICE_KEY_MAX];
  sluice_gcra_params g = {1, 60 * SEC, 100};
  sluice_limiter *l;
  sluice_verdict v;
  size_t i;
  l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  for (i = 0; i < 6; i++) {
    sluice_key k;
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &g, 0, 0};
    memset(keys[i], 'k', sizeof keys[i]); /* shared prefixes on purpose */
    k.data = keys[i];
    k.len = lens[i];
    op.arg = (int64_t)i + 1;
    cr_assert_eq(sluice_limiter_apply_at(l, &op, T0, &v), SLUICE_OK,
                 "len %zu: %s", lens[i], sluice_limiter_errmsg(l));
    cr_assert_eq(v.remaining, 100 - (int64_t)i - 1, "len %zu fresh",
                 lens[i]);
  }
  cr_assert_eq(stats_of(l).records, 6);
  sluice_limiter_close(l);
  l = lmdb_must_open(NULL, 0, clk);
  for (i = 0; i < 6; i++) {
    sluice_key k = {keys[i], lens[i]};
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &g, 0, 0};
    cr_assert_eq(sluice_limiter_apply_at(l, &op, T0, &v), SLUICE_OK);
    cr_assert_eq(v.remaining, 100 - (int64_t)i - 1, "len %zu after reopen",
                 lens[i]);
  }
  sluice_limiter_close(l);
}

Test(lmdb_open, unknown_control_op) {
  sluice_limiter *l = lmdb_must_open(NULL, SLUICE_OPEN_CREATE, clk);
  int64_t x = 0;
  cr_assert_eq(sluice_limiter_control(l, 399, &x), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_limiter_control(l, 200, &x), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_STATS, NULL),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_SYNC, NULL),
               SLUICE_OK);
  sluice_limiter_close(l);
}

/*
** Helpers shared by the LMDB suites: a private temporary directory per test
** (removed at the end), limiter open helpers on a manual clock, and the
** penalty ladder used throughout (3 strikes in 60 s; boxes of 5 min, 60 min,
** suspension; offenses remembered 24 h).  Everything runs on a manual clock,
** so every expected number below follows from the algorithm essays, not
** from timing.
*/
#ifndef SLUICE_TEST_LMDB_H
#define SLUICE_TEST_LMDB_H

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "../common/one_step.h"
#include <sluice/sluice_lmdb.h>
#include "../common/units.h"

#define UNUSED __attribute__((unused))
#define T0 (INT64_C(1700000000) * SEC) /* a plausible wall-clock time */

static UNUSED char tdir[256];  /* the test's private directory */
static UNUSED char envdir[300]; /* tdir/env: the environment */

static inline int rm_one(const char *p, const struct stat *sb, int flag,
                  struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  chmod(p, 0700);
  return remove(p);
}

static inline void tdir_make(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tdir, sizeof tdir, "%s/sluice-lmdb-XXXXXX",
           base && *base ? base : "/tmp");
  cr_assert_not_null(mkdtemp(tdir), "mkdtemp: %s", strerror(errno));
  snprintf(envdir, sizeof envdir, "%s/env", tdir);
}

static inline void tdir_remove(void) {
  if (tdir[0]) {
    chmod(tdir, 0700);
    nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  }
}

/* Open a limiter on envdir with extra URI params; returns the rc and fills
** err.  The clock is borrowed. */
static inline int lmdb_open_at(const char *dir, const char *params, unsigned flags,
                        sluice_clock *clk, sluice_limiter **out, char *err,
                        size_t errlen) {
  char uri[1024];
  sluice_limiter_options o = {0};
  snprintf(uri, sizeof uri, "lmdb:path=%s%s%s", dir,
           params && *params ? ";" : "", params ? params : "");
  o.store = uri;
  o.clock = clk;
  o.flags = flags;
  return sluice_limiter_open(&o, out, err, errlen);
}

static inline sluice_limiter *lmdb_must_open(const char *params, unsigned flags,
                                      sluice_clock *clk) {
  sluice_limiter *l = NULL;
  char err[256];
  int rc = lmdb_open_at(envdir, params, flags, clk, &l, err, sizeof err);
  cr_assert_eq(rc, SLUICE_OK, "open %s (%s): %s: %s", envdir,
               params ? params : "", sluice_strerror(rc), err);
  return l;
}

static UNUSED const sluice_penalty_params ladder = {
    3, 60 * SEC, {5 * MIN, 60 * MIN, SLUICE_FOREVER}, 24 * 60 * MIN};

static inline int pen(sluice_limiter *l, const char *key, int kind, int64_t arg,
               int64_t now, sluice_verdict *v) {
  sluice_key k = {key, strlen(key)};
  sluice_op op = {SLUICE_ALGO_PENALTY, kind, 1, &k, &ladder, arg, 0};
  return op_decide(l, &op, now, v);
}

/* Strike until the box trips; returns the tripping verdict's level. */
static inline int trip_by_strikes(sluice_limiter *l, const char *key, int64_t now) {
  sluice_verdict v;
  int i;
  for (i = 0; i < 3; i++) {
    cr_assert_eq(pen(l, key, SLUICE_OP_STRIKE, 0, now, &v), SLUICE_OK);
  }
  cr_assert(v.flags & SLUICE_V_TRIPPED, "third strike trips the box");
  return v.level;
}

static inline int take_at(sluice_limiter *l, const char *key,
                   const sluice_gcra_params *p, int64_t cost, int64_t now,
                   sluice_verdict *v) {
  sluice_key k = {key, strlen(key)};
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, p, cost, 0};
  return op_decide(l, &op, now, v);
}

static inline sluice_lmdb_stats stats_of(sluice_limiter *l) {
  sluice_lmdb_stats st;
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_LMDB_STATS, &st),
               SLUICE_OK, "stats: %s", sluice_limiter_errmsg(l));
  return st;
}

/* First call of every forked child that may block or loop: if the test
** fails and its process goes away, the child goes too, instead of keeping
** Criterion's pipes open forever. */
static inline void child_dies_with_parent(void) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Wait for a child and return its exit status (-signal if killed). */
static inline int child_status(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return -1000;
  if (WIFEXITED(st))
    return WEXITSTATUS(st);
  return -WTERMSIG(st);
}

#endif

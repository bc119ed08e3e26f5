/*
** Remove a test's scratch directory with whatever a store left in it (an
** LMDB environment has data.mdb, lock.mdb and sluice.lock today; a list of
** names goes stale, and rmdir() then fails silently and leaves the
** directory in /tmp).
*/
#ifndef SLUICE_TEST_RMTREE_H
#define SLUICE_TEST_RMTREE_H

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static inline int rmtree_one(const char *p, const struct stat *st, int type,
                             struct FTW *ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(p);
}

/* 0 when the directory is gone. */
static inline int rmtree(const char *dir) {
  return nftw(dir, rmtree_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif

/*
** Shared helpers of the fault and soak tests (plain C programs, no
** Criterion: they fork, kill and wait on their own processes).  A check
** that fails counts a violation and describes the first few; a program
** prints its figures and exits 1 when any violation was found, 77 (meson's
** "skipped") when nothing could run.
*/
#ifndef SLUICE_TEST_HARNESS_H
#define SLUICE_TEST_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "../common/rmtree.h"
#include "../common/splitmix.h"

static long h_violations, h_reported;

#define VIOLATION_IF(cond, ...)                                                \
  do {                                                                         \
    if (cond) {                                                                \
      h_violations++;                                                          \
      if (h_reported++ < 20) {                                                 \
        fprintf(stderr, "VIOLATION %s:%d: ", __FILE__, __LINE__);              \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
      }                                                                        \
    }                                                                          \
  } while (0)

/* A check the test cannot go on without (setup): message and exit 1. */
#define REQUIRE(cond, ...)                                                     \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "FATAL %s:%d: ", __FILE__, __LINE__);                    \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static inline int64_t h_real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t h_rnd(uint64_t *s) { /* splitmix64 */
  return splitmix64(s);
}

/* Backends a test runs on.  store strings are filled by h_store_uri(). */
typedef struct h_backend {
  const char *name;
  int cross_process; /* state shared by fork()ed processes */
} h_backend;

static const h_backend h_backends[] = {
    {"mem", 0}, {"shm", 1}, {"lmdb", 1}};

/* A store string for backend b, unique to this process and `tag`; dir is
** scratch space for lmdb (created, removed by h_store_cleanup). */
static inline void h_store_uri(const char *b, const char *tag, char *out,
                               size_t len, char *dir, size_t dlen) {
  dir[0] = '\0';
  if (strcmp(b, "shm") == 0) {
    snprintf(out, len, "shm:name=/sluice-%s-%ld;capacity=65536;create=1", tag,
             (long)getpid());
  } else if (strcmp(b, "lmdb") == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dlen, "%s/sluice-%s-%ld", tmp && *tmp ? tmp : "/tmp", tag,
             (long)getpid());
    snprintf(out, len, "lmdb:path=%s;sync=nosync;mapsize=256m", dir);
  } else {
    snprintf(out, len, "%s", b);
  }
}

static inline void h_store_cleanup(const char *b, const char *tag,
                                   const char *dir) {
  char p[512];
  if (strcmp(b, "shm") == 0) {
    snprintf(p, sizeof p, "/dev/shm/sluice-%s-%ld", tag, (long)getpid());
    unlink(p);
  } else if (dir && *dir) {
    rmtree(dir); /* whatever the environment holds (sluice.lock too) */
  }
}

/* Open a limiter on store `uri` with `clk` (NULL: real).  Returns the rc;
** SLUICE_ENOTSUP means "compiled out". */
static inline int h_open(const char *uri, sluice_clock *clk,
                         sluice_limiter **lim) {
  sluice_limiter_options o = {0};
  char err[256];
  int rc;
  o.store = uri;
  o.clock = clk;
  o.flags = SLUICE_OPEN_CREATE;
  rc = sluice_limiter_open(&o, lim, err, sizeof err);
  if (rc != SLUICE_OK && rc != SLUICE_ENOTSUP)
    fprintf(stderr, "open %s: %s (%s)\n", uri, sluice_strerror(rc), err);
  return rc;
}

#endif

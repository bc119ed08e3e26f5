/* Helpers shared by the shm suites: unique object names, a clock that
** lives in shared memory (so forked workers agree on time exactly and the
** never-over-admit bound can be checked in integers), and small wrappers. */
#ifndef SHM_TEST_UTIL_H
#define SHM_TEST_UTIL_H

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice.h"
#include "random.h"
#include <sluice/sluice_shm.h>

/* A unique shm_open name for this process and a counter. */
static inline void shm_test_name(char *buf, size_t n, const char *what) {
  static int seq;
  uint32_t r = 0;
  sluice__random_bytes(&r, sizeof r);
  snprintf(buf, n, "/sluice-t-%s-%ld-%d-%08" PRIx32, what, (long)getpid(),
           seq++, r);
}

/* Anonymous shared memory visible to every child forked after it. */
static inline void *shm_test_shared(size_t n) {
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  cr_assert(p != MAP_FAILED, "mmap shared");
  memset(p, 0, n);
  return p;
}

static inline int64_t shm_test_clock_read(void *ud) {
  return atomic_load_explicit((_Atomic int64_t *)ud, memory_order_acquire);
}

/* Open a limiter on `store` with a clock reading *shared_now. */
static inline sluice_limiter *shm_test_open(const char *store,
                                            _Atomic int64_t *shared_now,
                                            sluice_clock **clk_out) {
  sluice_limiter_options o = {0};
  sluice_limiter *lim = NULL;
  char err[256];
  int rc;
  cr_assert_eq(sluice_clock_custom(shm_test_clock_read, (void *)shared_now,
                                   clk_out),
               SLUICE_OK);
  o.store = store;
  o.clock = *clk_out;
  o.flags = SLUICE_OPEN_CREATE;
  rc = sluice_limiter_open(&o, &lim, err, sizeof err);
  cr_assert_eq(rc, SLUICE_OK, "open %s: %s (%s)", store, sluice_strerror(rc),
               err);
  return lim;
}

#endif

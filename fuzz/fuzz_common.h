/*
** Shared helpers of the fuzz targets: a byte reader over the fuzzer's input
** (an exhausted input reads as zeros, so every input is a valid program),
** and CHECK(), which reports a broken invariant and aborts so that
** libFuzzer records the input as a crash.  Aborting is the harness's job;
** the library under test never does it.
*/
#ifndef SLUICE_FUZZ_COMMON_H
#define SLUICE_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

typedef struct fz {
  const uint8_t *p;
  size_t n;
} fz;

static inline uint64_t fz_u64(fz *f, int nbytes) {
  uint64_t v = 0;
  for (int i = 0; i < nbytes; i++) {
    v <<= 8;
    if (f->n) {
      v |= *f->p++;
      f->n--;
    }
  }
  return v;
}
static inline unsigned fz_u8(fz *f) { return (unsigned)fz_u64(f, 1); }
static inline int fz_bool(fz *f) { return (int)(fz_u8(f) & 1); }
/* A value in [lo, hi] (hi >= lo). */
static inline int64_t fz_range(fz *f, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)hi - (uint64_t)lo;
  uint64_t r = fz_u64(f, span < 256 ? 1 : span < 65536 ? 2 : 8);
  if (span == UINT64_MAX)
    return (int64_t)r;
  return (int64_t)((uint64_t)lo + r % (span + 1));
}
/* An int64 biased towards the interesting places: small numbers, powers
** of two and their neighbours, the type's limits, raw bytes. */
static inline int64_t fz_i64_edge(fz *f) {
  unsigned sel = fz_u8(f) % 8;
  switch (sel) {
  case 0:
    return (int64_t)fz_u64(f, 1);
  case 1:
    return (int64_t)fz_u64(f, 2);
  case 2: {
    unsigned b = fz_u8(f) % 63;
    int d = (int)(fz_u8(f) % 3) - 1;
    return ((int64_t)1 << b) + d;
  }
  case 3:
    return INT64_MAX - (int64_t)fz_u64(f, 1);
  case 4:
    return -(int64_t)fz_u64(f, 1);
  case 5:
    return (int64_t)fz_u64(f, 4);
  default:
    return (int64_t)fz_u64(f, 8);
  }
}

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__,     \
              #cond);                                                          \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#endif

/*
** 128-bit intermediates and the clamp back to int64.  A time span times a
** rate can pass 2^63, so such products are computed in 128 bits and every
** result that leaves is clamped.  The algorithm layer's arithmetic
** (algo_int.h) builds on this, and the policy layer uses it for the
** windows it derives from bucket parameters, without seeing algo_int.h.
*/
#ifndef SLUICE_UTIL_WIDE_H
#define SLUICE_UTIL_WIDE_H

#include <stdint.h>

#if !defined(__SIZEOF_INT128__)
#error "sluice needs a compiler with 128-bit integers (gcc or clang, 64-bit)"
#endif
__extension__ typedef __int128 sluice__i128;

static inline int64_t sluice__clamp64(sluice__i128 x) {
  if (x > (sluice__i128)INT64_MAX)
    return INT64_MAX;
  if (x < (sluice__i128)INT64_MIN)
    return INT64_MIN;
  return (int64_t)x;
}

#endif

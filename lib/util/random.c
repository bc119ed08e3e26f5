/*
** sluice__random_bytes(): the OS's random source, for seeds and keys.  It
** sits with the jitter source rather than in the store core so that the
** client planner can seed its jitter without linking the core.
*/
#include <errno.h>
#include <sys/random.h>

#include "random.h"
#include "sluice.h"

int sluice__random_bytes(void *buf, size_t n) {
  uint8_t *p = (uint8_t *)buf;
  if (!buf && n)
    return SLUICE_EINVAL;
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return SLUICE_EIO;
    }
    p += r;
    n -= (size_t)r;
  }
  return SLUICE_OK;
}

/*
** The OS random source (getrandom), for seeds and keys: the stores' hash
** keys, the jitter generators, the halves' secrets.  Private to the
** library; an outside caller calls getrandom(2) itself.
*/
#ifndef SLUICE_UTIL_RANDOM_H
#define SLUICE_UTIL_RANDOM_H

#include <stddef.h>

/* Fill buf with n bytes.  SLUICE_OK, SLUICE_EINVAL (NULL buf), SLUICE_EIO. */
int sluice__random_bytes(void *buf, size_t n);

#endif

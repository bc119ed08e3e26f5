/* The built-in backends, looked up by name.  The table is constant: sluice
** keeps no mutable global state, so a custom backend is passed by pointer
** (sluice_limiter_options.backend) instead of being registered. */
#include <string.h>

#include "backends.h"

static const sluice_backend *const builtin[] = {
    &sluice__backend_mem, &sluice__backend_shm, &sluice__backend_lmdb,
    &sluice__backend_redis, &sluice__backend_rediss};

const sluice_backend *sluice_backend_find(const char *name) {
  size_t i;
  if (!name || !*name)
    return &sluice__backend_mem;
  for (i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
    if (strcmp(builtin[i]->zName, name) == 0)
      return builtin[i];
  return NULL;
}

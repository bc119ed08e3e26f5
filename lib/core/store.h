/*
** The core's side of the backend vtable.  The public wrappers
** (sluice_store_open / apply / ... / close, backend.h) do the version and
** NULL checks, validate operations before a backend sees them, and keep the
** invariant that a store whose open failed has pMethods == NULL or a table
** whose xClose is safe to call.
**
** What the core keeps about an open store lives here, not in the public
** base: one block holds this header, then the backend's subclass (szStore
** bytes, what the store pointer points at), then a copy of the store
** string.  The base reaches it through pCore, so a backend never sees (or
** embeds) the allocator, the error detail or its lock.
*/
#ifndef SLUICE_LIB_STORE_H
#define SLUICE_LIB_STORE_H

#include "sluice/backend.h"

extern const sluice_allocator sluice__libc_allocator;

struct sluice_store_core {
  const sluice_allocator *alloc; /* never NULL */
  size_t size;                   /* bytes of the whole block */
  /* Guards backend_err and errstr, which threads deciding on one store
  ** may set at once (a spin lock: held for one short formatting call). */
  int errlock;
  int backend_err;
  char errstr[SLUICE_STORE_ERRLEN];
};

#endif

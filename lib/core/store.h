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

#include "op.h"
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
  /* A built-in backend's single program (set by its xOpen, else NULL):
  ** xRun of one validated program, its code returned (never positive).
  ** The limiter's common call, without xRun's count and code array. */
  int (*run1)(sluice_store *s, const sluice_program *p, int64_t now,
              sluice_program_result *res);
};

/* One program sent straight to the backend, `valid` when the caller found
** it so (sluice__program_plain()), else validated here: the common call of
** sluice_store_run() and of the limiter (inline in both, so that a
** decision crosses no wrapper on its way).  *rc1 gets the program's own
** code; the return is the call's, as sluice_store_run() gives them. */
static inline int sluice__store_run1(sluice_store *s, const sluice_program *p,
                                     int valid, int64_t now,
                                     sluice_program_result *res, int *rc1) {
  int rc;
  *rc1 = valid ? SLUICE_OK : sluice__program_validate_full(p);
  if (*rc1 != SLUICE_OK)
    return SLUICE_OK;
  rc = s->pMethods->xRun(s, 1, p, now, res, rc1);
  /* A backend must not hand out positive codes: they would read as OK to
  ** a caller testing rc < 0. */
  if (*rc1 > 0)
    *rc1 = SLUICE_EBACKEND;
  return rc > 0 ? SLUICE_EBACKEND : rc;
}

/* Allocation through a store's allocator (NULL-safe free). */
void *sluice__store_malloc(sluice_store *s, size_t n);
void sluice__store_free(sluice_store *s, void *p, size_t n);

/* The core's check of a store string against a list of parameter names
** (what it applies with azParams before xOpen): each non-empty segment is
** NAME=VALUE with a listed NAME, given once.  For a backend that rewrites
** another form (a redis:// URL) into parameters and checks the result
** itself.  `backend` is the name messages start with (NULL: "store");
** `names` a NULL-terminated list; a refusal is described in err (may be
** NULL/0), naming the known ones.  SLUICE_OK, or SLUICE_EINVAL (also for a
** NULL uri or names). */
int sluice__uri_check(const char *backend, const char *uri,
                      const char *const *names, char *err, size_t errlen);
/* A URI parameter as a non-negative integer with an optional unit suffix
** k/m/g (x1024...); *out keeps `dflt` when absent.  SLUICE_OK, or
** SLUICE_EINVAL when present but malformed. */
int sluice__uri_int(const char *uri, const char *name, int64_t dflt,
                    int64_t *out);

#endif

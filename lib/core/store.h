/*
** The core's side of the backend vtable: thin wrappers that do the version
** and NULL checks, validate operations before a backend sees them, and keep
** the invariant that a store whose open failed has pMethods == NULL or a
** table whose xClose is safe to call.
*/
#ifndef SLUICE_LIB_STORE_H
#define SLUICE_LIB_STORE_H

#include "sluice/backend.h"

extern const sluice_allocator sluice__libc_allocator;

int sluice__store_open(const sluice_backend *b, const char *uri,
                       const sluice_allocator *a, unsigned flags,
                       sluice_store **out, char *errbuf, size_t errlen);
void sluice__store_close(sluice_store *s);
/* The core's check of a store string against a backend's declared
** parameters (uri.c); SLUICE_EINVAL with a message naming the known ones. */
int sluice__uri_check(const char *backend, const char *uri,
                      const char *const *names, char *err, size_t errlen);
int sluice__store_apply(sluice_store *s, const sluice_op *op, int64_t now,
                        sluice_verdict *v);
int sluice__store_apply_many(sluice_store *s, int n, const sluice_op *ops,
                             int64_t now, sluice_verdict *vs, int *rcs);
int sluice__store_run(sluice_store *s, const sluice_program *p, int64_t now,
                      sluice_program_result *res);
int sluice__store_run_many(sluice_store *s, int n, const sluice_program *ps,
                           int64_t now, sluice_program_result *res, int *rcs);
int sluice__store_get(sluice_store *s, const sluice_key *k, int64_t now,
                      sluice_state *out, int64_t *exp);
int sluice__store_delete(sluice_store *s, const sluice_key *k);
int sluice__store_control(sluice_store *s, int op, void *arg);
unsigned sluice__store_caps(sluice_store *s);
/* Take (lock = 1) or drop the lock guarding a store's error detail. */
void sluice__store_errlock(sluice_store *s, int lock);

#endif

/*
** lazy_store: a store backend that opens the real store on first use
** and, after a failed open, again no sooner than an exponential backoff
** allows (100 ms doubling to 30 s).  Until the real store is open every
** operation fails with SLUICE_EUNAVAIL, which the policy layer turns into
** its degraded answers (local limiter, fail-closed heavy endpoints) and
** leaves behind by itself once an operation succeeds.  So a worker whose
** store is down (Redis restarting) starts serving degraded instead of
** exiting.
*/
#ifndef LEDGER_LAZY_STORE_H
#define LEDGER_LAZY_STORE_H
#include "sluice.h"

/* The backend for sluice_limiter_options.backend; `real_uri` ("redis:...",
** "lmdb:...") is borrowed and must outlive every limiter opened with it. */
void lazy_store_backend(sluice_backend *out, const char *real_uri);

#endif

/*
** sluice.h -- rate limits, quotas, concurrency leases and abuse penalties,
** embedded in a C service.  This is the one header a user includes.
**
**   sluice_clock    where time comes from: real (CLOCK_REALTIME, never
**                   backwards as seen by a limiter) or manual (tests).
**   sluice_limiter  an open state store plus a clock: runs algorithm
**                   operations (sluice/algo.h) atomically on a backend.
**   sluice_policy   the spec's whole request flow in one call
**                   (sluice/policy.h), on top of a limiter.
**   sluice/http.h   what to answer: headers, Retry-After, problem+json.
**   sluice/client.h the backoff planner for C clients.
**
** Conventions: functions return 0 (SLUICE_OK) or a negative SLUICE_E* code
** (sluice_strerror()).  Handles are opaque.  Destructors accept NULL.  If an
** open function fails, *out is NULL and there is nothing to free.  The
** library never prints, exits or aborts on its caller's behalf.
*/
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/version.h"
#include "sluice/errno.h"
#include "sluice/algo.h"
#include "sluice/program.h"
#include "sluice/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------------------------------------------- clock --- */

typedef struct sluice_clock sluice_clock;

/** @brief A clock reading CLOCK_REALTIME in int64 ns.  Thread-safe. */
SLUICE_EXPORT int sluice_clock_real(sluice_clock **out);
/** @brief A manual clock starting at start_ns (>= 0).  Thread-safe: set and
 *  advance may race with readers. */
SLUICE_EXPORT int sluice_clock_manual(int64_t start_ns, sluice_clock **out);
/** @brief A clock that calls now(ud); now must be thread-safe if the
 *  limiter is used from several threads. */
SLUICE_EXPORT int sluice_clock_custom(int64_t (*now)(void *ud), void *ud,
                                      sluice_clock **out);
/** How far back a limiter's time can go: a decision that starts after
 *  another has returned is never decided more than this before it, however
 *  the clock steps (limiter.c says why not zero). */
#define SLUICE_CLOCK_SLACK_NS INT64_C(1000000)
/** @brief Current time in ns (raw: a limiter adds its own monotonic clamp). */
SLUICE_EXPORT int64_t sluice_clock_now(sluice_clock *c);
/** @brief Manual clocks only: set the time (it may go backwards: limiters
 *  see at most SLUICE_CLOCK_SLACK_NS of it).  SLUICE_EINVAL for other
 *  clocks or negative t. */
SLUICE_EXPORT int sluice_clock_set(sluice_clock *c, int64_t t_ns);
/** @brief Manual clocks only: move time by delta_ns (may be negative). */
SLUICE_EXPORT int sluice_clock_advance(sluice_clock *c, int64_t delta_ns);
/** @brief Free a clock.  NULL is a no-op.  A limiter borrowing it must be
 *  closed first. */
SLUICE_EXPORT void sluice_clock_free(sluice_clock *c);

/* -------------------------------------------------------- scope ids --- */

/** Hex characters in a scope id (128-bit keyed hash). */
#define SLUICE_SCOPE_ID_LEN 32

/** @brief Turn a secret or raw identifier (an API key, an IP, a subject)
 *  into an opaque scope id: the keyed hash SipHash-2-4-128 under `secret`,
 *  as 32 lowercase hex digits and a NUL.  Without the secret the id reveals
 *  nothing of the input and cannot be forged.
 *  @return SLUICE_OK, or SLUICE_EINVAL for NULL pointers. */
SLUICE_EXPORT int sluice_scope_id(const uint8_t secret[16], const void *data,
                                  size_t len,
                                  char out[SLUICE_SCOPE_ID_LEN + 1]);

/* ------------------------------------------------------------- limiter --- */

typedef struct sluice_limiter sluice_limiter;

/** Options for sluice_limiter_open().  Zero-initialize, then set fields
 *  (designated initializers).  Strings are copied at open. */
typedef struct sluice_limiter_options {
  /** "NAME" or "NAME:params", e.g. "mem", "mem:max_keys=100000",
   *  "shm:name=/ledger;capacity=1000000", "lmdb:path=/var/lib/sluice",
   *  "redis:nodes=127.0.0.1:7000".  NULL means "mem". */
  const char *store;
  /** A backend not built in (takes precedence over the name in `store`,
   *  whose params part is still passed). */
  const sluice_backend *backend;
  /** Borrowed; must outlive the limiter.  NULL: a real clock owned by the
   *  limiter. */
  sluice_clock *clock;
  /** Borrowed; NULL: malloc/realloc/free. */
  const sluice_allocator *alloc;
  unsigned flags; /**< SLUICE_OPEN_* */
} sluice_limiter_options;

/** @brief Open a limiter on a store.
 *  @param[in] opts  NULL for all defaults (a "mem" store, real clock).
 *  @param[out] out  the limiter, or NULL on failure.
 *  @return SLUICE_OK or: SLUICE_EINVAL (bad options, unknown backend),
 *  SLUICE_ENOTSUP (backend compiled out), SLUICE_ENOMEM, or the backend's
 *  open error.  On failure the store's detail, if any, is lost; use
 *  sluice_limiter_open2() to keep it. */
SLUICE_EXPORT int sluice_limiter_open(const sluice_limiter_options *opts,
                                      sluice_limiter **out);
/** @brief As sluice_limiter_open(), also copying the failure detail into
 *  errbuf (NUL-terminated, truncated to errlen). */
SLUICE_EXPORT int sluice_limiter_open2(const sluice_limiter_options *opts,
                                       sluice_limiter **out, char *errbuf,
                                       size_t errlen);
/** @brief Check a store string as sluice_limiter_open() would read it,
 *  without opening anything: the backend is known, and its parameters are
 *  ones it takes, each given once (no file, segment or connection is
 *  touched, so a configuration check can call it).  Values (a capacity,
 *  a path that exists) are the backend's to judge when it opens.
 *  @param store  as sluice_limiter_options.store (NULL: "mem").
 *  @return SLUICE_OK, or SLUICE_EINVAL with the reason in errbuf. */
SLUICE_EXPORT int sluice_store_check(const char *store, char *errbuf,
                                     size_t errlen);
/** @brief Close and free.  NULL is a no-op.  The handle must not be used
 *  again after this call. */
SLUICE_EXPORT void sluice_limiter_close(sluice_limiter *lim);

/** @brief Run one operation now (the limiter's clock, clamped so that it
 *  goes backwards by at most SLUICE_CLOCK_SLACK_NS).  Thread-safe when the
 *  store is (SLUICE_CAP_THREADSAFE: every built-in store).
 *  @return SLUICE_OK (see v->allowed for the decision) or an error from
 *  sluice_op_validate() or the store (SLUICE_EFULL, SLUICE_ETIMEDOUT,
 *  SLUICE_EUNAVAIL, SLUICE_EBACKEND ...).  On error nothing changed. */
SLUICE_EXPORT int sluice_limiter_apply(sluice_limiter *lim,
                                       const sluice_op *op, sluice_verdict *v);
/** @brief As sluice_limiter_apply() at an explicit time (simulations,
 *  replays).  The monotonic clamp still applies. */
SLUICE_EXPORT int sluice_limiter_apply_at(sluice_limiter *lim,
                                          const sluice_op *op, int64_t now_ns,
                                          sluice_verdict *v);
/** @brief Run n independent operations, batched by the store when it can.
 *  rcs[i] gets each op's own result. */
SLUICE_EXPORT int sluice_limiter_apply_many(sluice_limiter *lim, int n,
                                            const sluice_op *ops,
                                            sluice_verdict *vs, int *rcs);
/** @brief Run one program (sluice/program.h) now, as one atomic store call
 *  on every built-in store (one EVALSHA on Redis).  On a store without the
 *  version-3 method the steps run one xApply at a time: see backend.h.
 *  @return SLUICE_OK (see res->allowed) or an error from
 *  sluice_program_validate() or the store; on error nothing changed
 *  (except on such an older store, where earlier steps may have). */
SLUICE_EXPORT int sluice_limiter_run(sluice_limiter *lim,
                                     const sluice_program *p,
                                     sluice_program_result *res);
/** @brief As sluice_limiter_run() at an explicit time. */
SLUICE_EXPORT int sluice_limiter_run_at(sluice_limiter *lim,
                                        const sluice_program *p,
                                        int64_t now_ns,
                                        sluice_program_result *res);
/** @brief Run n independent programs (replays, batch callers) in as few
 *  round trips or transactions as the store can; each is atomic on its
 *  own and rcs[i] is its result. */
SLUICE_EXPORT int sluice_limiter_run_many(sluice_limiter *lim, int n,
                                          const sluice_program *ps,
                                          sluice_program_result *res,
                                          int *rcs);
/** @brief As sluice_limiter_run_many() at an explicit time (the policy's
 *  batched decisions, which decide a batch at one time). */
SLUICE_EXPORT int sluice_limiter_run_many_at(sluice_limiter *lim, int n,
                                             const sluice_program *ps,
                                             int64_t now_ns,
                                             sluice_program_result *res,
                                             int *rcs);
/** @brief The common case: take `cost` points from one GCRA bucket. */
SLUICE_EXPORT int sluice_limiter_take(sluice_limiter *lim, const void *key,
                                      size_t keylen,
                                      const sluice_gcra_params *p,
                                      int64_t cost, sluice_verdict *v);
/** @brief Read a record without changing it (inspection tools). */
SLUICE_EXPORT int sluice_limiter_get(sluice_limiter *lim, const void *key,
                                     size_t keylen, sluice_state *out,
                                     int64_t *expires_ns);
/** @brief Delete a record (inspection tools). */
SLUICE_EXPORT int sluice_limiter_delete(sluice_limiter *lim, const void *key,
                                        size_t keylen);
/** Control op any store may answer (sluice_limiter_control): `arg` is a
 *  `const sluice_op *` that sluice_op_validate_params() accepts.
 *  SLUICE_OK: the store decides ops with these parameters exactly;
 *  SLUICE_ERANGE: they lie beyond its range, and every such op would be
 *  refused (the redis store: GCRA burst * period_ns, windows, boxes and
 *  TTLs up to 2^52 ns, docs/redis.md); SLUICE_ENOTFOUND: the store has no
 *  range narrower than the algorithms' own.  The policy asks at open. */
#define SLUICE_CTL_PARAMS_IN_RANGE 100
/** @brief Pass a backend-specific control op through (see the backend's
 *  header for its ops).  SLUICE_ENOTFOUND for unknown ops. */
SLUICE_EXPORT int sluice_limiter_control(sluice_limiter *lim, int op,
                                         void *arg);
/** @brief The store's SLUICE_CAP_* bits. */
SLUICE_EXPORT unsigned sluice_limiter_capabilities(sluice_limiter *lim);
/** @brief The limiter's current time (monotonic clamp applied). */
SLUICE_EXPORT int64_t sluice_limiter_now(sluice_limiter *lim);
/** @brief Detail of the last store error on this limiter ("" if none).
 *  The string is a copy owned by the calling thread, valid until that
 *  thread's next call of this function.  The detail is kept per limiter,
 *  not per thread: with several threads failing on one limiter it may
 *  describe another thread's error (the returned code is always exact). */
SLUICE_EXPORT const char *sluice_limiter_errmsg(sluice_limiter *lim);
/** @brief Backend-specific code of the last store error (errno, LMDB or
 *  hiredis code), 0 if none. */
SLUICE_EXPORT int sluice_limiter_errcode(sluice_limiter *lim);
/** @brief The backend's name ("mem", ...). */
SLUICE_EXPORT const char *sluice_limiter_backend(sluice_limiter *lim);

#ifdef __cplusplus
}
#endif

#include "sluice/policy.h"
#include "sluice/halves.h"
#include "sluice/http.h"
#include "sluice/client.h"
#include "sluice/webhook.h"
#include "sluice/nft.h"

#endif

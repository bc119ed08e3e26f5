/*
** sluice/backend.h -- the interface for backend authors.
**
** Shaped like SQLite's VFS: a backend *class* (sluice_backend) opens store
** *instances* (sluice_store subclasses, allocated by the core with szStore
** bytes, zeroed), each carrying a method table.  The core hands a backend
** programs as data (sluice/program.h); a backend never decides anything: it
** loads a program's records, runs sluice_program_run() under its own
** atomicity, and writes back the records with sluice_program_expiry() as
** their TTL.  A backend that cannot run C where its state lives (Redis)
** runs a port of the same sequencer over the same record encoding.
**
** Versioning: both structs start with iVersion, which is
** SLUICE_BACKEND_VERSION; the ABI is unstable until 1.0, so a change bumps
** it and the core refuses a backend built for another.
**
** Everything not declared here or in sluice.h is private.  docs/backends.md
** is the map: versions, the store's memory, the fast path, decorators.
*/
#ifndef SLUICE_BACKEND_H
#define SLUICE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The one version of this interface: a backend class and its method table
** both declare it (iVersion), and the core refuses any other.  Version 5:
** one decision method, xRun of n programs (was: xApply, xApplyMany, xRun,
** xRunMany); the class and the table share this number. */
#define SLUICE_BACKEND_VERSION 5

typedef struct sluice_backend sluice_backend;
typedef struct sluice_store sluice_store;
typedef struct sluice_store_methods sluice_store_methods;

/** Injected allocator.  free and realloc are given the size that was
 *  allocated, so arena or shared-memory allocators can work. */
typedef struct sluice_allocator {
  void *(*xMalloc)(void *ud, size_t n);
  void *(*xRealloc)(void *ud, void *p, size_t old_n, size_t new_n);
  void (*xFree)(void *ud, void *p, size_t n);
  void *ud;
} sluice_allocator;

/** Store capabilities (xCapabilities). */
#define SLUICE_CAP_THREADSAFE 0x01u    /**< one store usable from threads */
#define SLUICE_CAP_CROSS_PROCESS 0x02u /**< state shared between processes */
#define SLUICE_CAP_DURABLE 0x04u       /**< state survives a restart */
#define SLUICE_CAP_DISTRIBUTED 0x08u   /**< state shared between hosts */
#define SLUICE_CAP_NATIVE_ALGO 0x10u   /**< steps run in the server (Redis) */
#define SLUICE_CAP_OWN_CLOCK 0x20u     /**< decisions use the store's time */

/** The core's record of an open store (allocator, error detail and its
 *  lock, the store string).  Private: backends never see inside it. */
typedef struct sluice_store_core sluice_store_core;

/** Bytes of a store's error detail, the terminating NUL included: longer
 *  messages are truncated. */
#define SLUICE_STORE_ERRLEN 128

/** Base class of an open store: only what a backend needs.  Backends
 *  subclass it by embedding it as their first member.  The core allocates
 *  the subclass (szStore bytes, zeroed) with its own record in front of it,
 *  sets pBackend and pCore, and calls xOpen.
 *
 *  The allocator, the error detail and its lock are the core's.  A
 *  backend reads its allocator as cfg->alloc in xOpen, writes error detail
 *  with
 *  sluice_store_seterr() and reads it with sluice_store_errmsg(). */
struct sluice_store {
  const sluice_store_methods *pMethods; /**< the backend sets it in xOpen;
                                             NULL or valid, even on failure;
                                             NULL again once closed */
  const sluice_backend *pBackend;       /**< its class (read-only) */
  sluice_store_core *pCore;             /**< the core's: do not touch */
};

/** Store methods.  Every method returns SLUICE_OK or a negative code, and on
 *  failure may describe it with sluice_store_seterr(). */
struct sluice_store_methods {
  int iVersion; /**< SLUICE_BACKEND_VERSION */
  /** Release everything.  Called exactly once, even when xOpen failed
   *  after setting pMethods. */
  int (*xClose)(sluice_store *);
  /** Decide: run n independent programs (sluice/program.h; an operation is
   *  a one-step program), each as one atomic unit: read all of its records
   *  (absent or expired = zeroed), run sluice_program_run(), write back the
   *  records that changed with sluice_program_expiry(), fill res[i].
   *  Linearizable per group; on any error of program i nothing of it was
   *  written and rcs[i] says why.  In as few round trips or transactions
   *  as the backend can.  Returns SLUICE_OK when every program was
   *  attempted (look at rcs), or an error that applies to all.  A store
   *  with SLUICE_CAP_OWN_CLOCK ignores now_ns (unless in a test mode) and
   *  reports its own time in res[i].now_ns.  The core validated every
   *  program and hands over n >= 1. */
  int (*xRun)(sluice_store *, int n, const sluice_program *ps, int64_t now_ns,
              sluice_program_result *res, int *rcs);
  /** Read one record and its expiry without changing it; SLUICE_ENOTFOUND
   *  when absent or expired at now_ns. */
  int (*xGet)(sluice_store *, const sluice_key *key, int64_t now_ns,
              sluice_state *out, int64_t *expires_ns);
  /** Remove one record (admin tools); SLUICE_ENOTFOUND if absent. */
  int (*xDelete)(sluice_store *, const sluice_key *key);
  /** Backend-specific knobs.  op < 100 is reserved for the core; unknown
   *  ops return SLUICE_ENOTFOUND. */
  int (*xControl)(sluice_store *, int op, void *arg);
  /** SLUICE_CAP_* bits. */
  unsigned (*xCapabilities)(sluice_store *);
};

/** Options the core passes to xOpen. */
typedef struct sluice_store_config {
  const sluice_allocator *alloc; /**< never NULL */
  unsigned flags;                /**< SLUICE_OPEN_* */
  void *reserved[4];
} sluice_store_config;

#define SLUICE_OPEN_CREATE 0x1u   /**< create the store if missing */
#define SLUICE_OPEN_READONLY 0x2u /**< inspection only: xRun refused */
#define SLUICE_OPEN_TESTCLOCK 0x4u /**< own-clock stores use now_ns instead
                                        (conformance suites, and `sluice
                                        replay`, which decides at the
                                        log's time) */

/** A backend class.  The core refuses a class whose iVersion is not
 *  SLUICE_BACKEND_VERSION (SLUICE_EVERSION): rebuild it against this
 *  header. */
struct sluice_backend {
  int iVersion;      /**< SLUICE_BACKEND_VERSION */
  int szStore;       /**< sizeof the backend's sluice_store subclass */
  const char *zName; /**< "mem", "shm", "lmdb", "redis" */
  void *pAppData;    /**< backend-private, never touched by the core */
  /** Open a store.  `uri` is the part after "NAME:" (possibly ""), valid
   *  until xClose; parse it with sluice_uri_param().  *pStore is zeroed and
   *  its base fields set; set pStore->pMethods as soon as xClose may be
   *  called.  On failure return a negative code (and describe it with
   *  sluice_store_seterr()). */
  int (*xOpen)(const sluice_backend *, const char *uri,
               const sluice_store_config *cfg, sluice_store *pStore);
  /** The store-string parameters the backend reads: a NULL-terminated
   *  list of names ("max_keys", NULL).  Before xOpen, the core refuses a
   *  string that names a parameter not listed, names one twice, or has a
   *  segment without '=' (SLUICE_EINVAL, the message naming the known
   *  ones), so every backend follows the same rule and xOpen only reads
   *  values.  A backend that grows a parameter adds its name here.  NULL:
   *  the backend checks its own string. */
  const char *const *azParams;
};


/** @brief Find a built-in backend by name ("mem", "shm", "lmdb", "redis"),
 *  or NULL.  NULL or "" gives "mem".  A backend compiled out is still found;
 *  its xOpen returns SLUICE_ENOTSUP. */
SLUICE_EXPORT const sluice_backend *sluice_backend_find(const char *name);

/** @brief Record error detail on a store (printf-style, truncated to
 *  SLUICE_STORE_ERRLEN - 1 bytes; fmt NULL clears it).  Thread-safe.
 *  Returns `err` so that backends can write
 *  `return sluice_store_seterr(s, SLUICE_EIO, errno, "open %s", path);`.
 *  A store the core did not open (pCore NULL) records nothing. */
SLUICE_EXPORT int sluice_store_seterr(sluice_store *s, int err,
                                      int backend_err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/** @brief The detail of a store's last error ("" when none, or s is not an
 *  open store).  A snapshot for the calling thread, valid until its next
 *  call. */
SLUICE_EXPORT const char *sluice_store_errmsg(sluice_store *s);
/** @brief The backend-specific code of a store's last error, or 0. */
SLUICE_EXPORT int sluice_store_errcode(sluice_store *s);

/* ------------------------------------------------------ store wrappers ---
** The core's side of the vtable, public so that a decorator (a backend that
** wraps another store: fault injection, tracing, caching) opens and calls
** its inner store exactly as the limiter does, with the same checks.  A
** store is not a limiter: no clock (each call takes its
** now_ns) and no monotonic clamp.
**
** Every wrapper validates its input as the limiter's calls do: a NULL
** store, one not opened by sluice_store_open() or already closed gives
** SLUICE_EINVAL; a program goes through sluice_program_validate() before
** the backend sees it; a positive code a backend returns becomes
** SLUICE_EBACKEND.  Methods a backend lacks (NULL) answer: xGet, xDelete
** SLUICE_ENOTSUP; xControl SLUICE_ENOTFOUND; xCapabilities 0.
*/

/** @brief Open a store of backend `b`.
 *  @param uri    the part after "NAME:" ("" or NULL: none); copied.
 *  @param alloc  NULL: the C library's.  Must outlive the store.
 *  @param flags  SLUICE_OPEN_*; other bits are refused.
 *  @param[out] out  the store, or NULL on failure (nothing to close).
 *  @param errbuf,errlen  NULL/0, or where a failure is described.
 *  @return SLUICE_OK; SLUICE_EINVAL (NULL out or b, unknown flag, a store
 *  string the backend's azParams refuse); SLUICE_EVERSION (a class or a
 *  method table of another SLUICE_BACKEND_VERSION, or without xRun or
 *  xClose);
 *  SLUICE_ENOMEM; or the backend's error. */
SLUICE_EXPORT int sluice_store_open(const sluice_backend *b, const char *uri,
                                    const sluice_allocator *alloc,
                                    unsigned flags, sluice_store **out,
                                    char *errbuf, size_t errlen);
/** @brief Close a store: xClose, then its memory goes back to the
 *  allocator.  NULL-safe.  The store must not be used again. */
SLUICE_EXPORT void sluice_store_close(sluice_store *s);
/** @brief xRun after validation (as sluice_limiter_decide() at now_ns):
 *  an invalid program gets its own code in rcs[i] and is not sent; a
 *  backend's positive code becomes SLUICE_EBACKEND. */
SLUICE_EXPORT int sluice_store_run(sluice_store *s, int n,
                                   const sluice_program *ps, int64_t now_ns,
                                   sluice_program_result *res, int *rcs);
/** @brief xGet (SLUICE_EKEY for a bad key, SLUICE_ENOTSUP without it). */
SLUICE_EXPORT int sluice_store_get(sluice_store *s, const sluice_key *key,
                                   int64_t now_ns, sluice_state *out,
                                   int64_t *expires_ns);
/** @brief xDelete (SLUICE_EKEY for a bad key, SLUICE_ENOTSUP without it). */
SLUICE_EXPORT int sluice_store_delete(sluice_store *s, const sluice_key *key);
/** @brief xControl (SLUICE_ENOTFOUND without it). */
SLUICE_EXPORT int sluice_store_control(sluice_store *s, int op, void *arg);
/** @brief xCapabilities: SLUICE_CAP_* bits; 0 without it or for a store
 *  that is not open. */
SLUICE_EXPORT unsigned sluice_store_capabilities(sluice_store *s);

/** @brief Find `name` in a "k=v;k=v" URI parameter string.
 *  @return SLUICE_OK with *val and *len set (not NUL-terminated),
 *  SLUICE_ENOTFOUND when absent. */
SLUICE_EXPORT int sluice_uri_param(const char *uri, const char *name,
                                   const char **val, size_t *len);

#ifdef __cplusplus
}
#endif
#endif

/*
** sluice/backend.h -- the interface for backend authors.
**
** Shaped like SQLite's VFS: a backend *class* (sluice_backend) opens store
** *instances* (sluice_store subclasses, allocated by the core with szStore
** bytes, zeroed), each carrying a method table.  The core hands a backend
** operations as data (sluice_op); a backend never decides anything: it loads
** the group's records, runs sluice_op_step() under its own atomicity, and
** writes back the records with sluice_op_expiry() as their TTL.  A backend
** that cannot run C where its state lives (Redis) dispatches on op->algo to
** a port of the same step over the same record encoding.
**
** Versioning: both structs start with iVersion and only grow at the end.
** The core calls a method added in version N only when iVersion >= N and the
** pointer is non-NULL.  A changed method gets a new name (xApply2), never a
** changed signature.
**
** Everything not declared here or in sluice.h is private.
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

#define SLUICE_BACKEND_VERSION 3

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

/** Base class of an open store.  Backends subclass it by embedding it as
 *  their first member.  The core owns every field here. */
struct sluice_store {
  const sluice_store_methods *pMethods; /**< NULL or valid, even on failure */
  const sluice_backend *pBackend;
  const sluice_allocator *pAlloc; /**< never NULL while open */
  int backend_err;                /**< backend-specific code of last error */
  char errstr[128];               /**< detail of the last error, or "" */
  /** Core-private: guards backend_err and errstr, which threads deciding on
   *  one store may set at once.  Write them only with
   *  sluice_store_seterr() once the store is open. */
  int errlock;
};

/** Store methods.  Every method returns SLUICE_OK or a negative code, and on
 *  failure may describe it with sluice_store_seterr(). */
struct sluice_store_methods {
  int iVersion; /**< 1, 2 or 3 */
  /** Release everything.  Called exactly once, even when xOpen failed
   *  after setting pMethods. */
  int (*xClose)(sluice_store *);
  /** Atomically: read the op's records (absent or expired = zeroed), run
   *  sluice_op_step(), write back the records that changed with their
   *  expiry, fill *v.  Linearizable per group.  On any error nothing was
   *  written.  A store with SLUICE_CAP_OWN_CLOCK ignores now_ns (unless in
   *  a test mode) and reports its own time in v->now_ns. */
  int (*xApply)(sluice_store *, const sluice_op *op, int64_t now_ns,
                sluice_verdict *v);
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
  /* Methods above are version 1. */
  /** Apply n independent operations (different groups) in as few round
   *  trips or transactions as the backend can.  Each op is atomic on its
   *  own; rcs[i] and vs[i] are its result.  Returns SLUICE_OK when every op
   *  was attempted (look at rcs), or an error that applies to all. */
  int (*xApplyMany)(sluice_store *, int n, const sluice_op *ops,
                    int64_t now_ns, sluice_verdict *vs, int *rcs);
  /* Methods above are version 2. */
  /** Run a program (sluice/program.h) as one atomic unit: read all of its
   *  records (absent or expired = zeroed), run sluice_program_run(), write
   *  back the records that changed with sluice_program_expiry(), fill
   *  *res.  Linearizable per group, like xApply; on any error nothing was
   *  written.
   *
   *  A backend without it (iVersion < 3 or NULL) still runs programs: the
   *  core evaluates each step's guard itself and hands the step to xApply,
   *  one call per step.  That fallback is NOT atomic: other callers'
   *  operations may land between two steps (a box tripped by another
   *  process after the check still lets the buckets be charged), a gate's
   *  denial cannot undo what earlier steps wrote (a charge or a lease taken
   *  before it stays), and a failure midway keeps the steps before it. */
  int (*xRun)(sluice_store *, const sluice_program *p, int64_t now_ns,
              sluice_program_result *res);
  /** n independent programs in as few round trips or transactions as the
   *  backend can; each atomic on its own, rcs[i] and res[i] its result.
   *  Returns as xApplyMany.  Without it the core calls xRun (or the
   *  fallback) once per program. */
  int (*xRunMany)(sluice_store *, int n, const sluice_program *ps,
                  int64_t now_ns, sluice_program_result *res, int *rcs);
  /* Methods above are version 3. */
};

/** Options the core passes to xOpen. */
typedef struct sluice_store_config {
  const sluice_allocator *alloc; /**< never NULL */
  unsigned flags;                /**< SLUICE_OPEN_* */
  void *reserved[4];
} sluice_store_config;

#define SLUICE_OPEN_CREATE 0x1u   /**< create the store if missing */
#define SLUICE_OPEN_READONLY 0x2u /**< inspection only: xApply refused */
#define SLUICE_OPEN_TESTCLOCK 0x4u /**< own-clock stores use now_ns instead
                                        (conformance suites, and `sluice
                                        replay`, which decides at the
                                        log's time) */

/** A backend class. */
struct sluice_backend {
  int iVersion;      /**< 1 or 2 */
  int szStore;       /**< sizeof the backend's sluice_store subclass */
  const char *zName; /**< "mem", "shm", "lmdb", "redis" */
  void *pAppData;    /**< backend-private, never touched by the core */
  /** Open a store.  `uri` is the part after "NAME:" (possibly ""), valid
   *  until xClose; parse it with sluice_uri_param().  *pStore is zeroed and
   *  its base fields set; set pStore->pMethods as soon as xClose may be
   *  called.  On failure return a negative code (and set errstr). */
  int (*xOpen)(const sluice_backend *, const char *uri,
               const sluice_store_config *cfg, sluice_store *pStore);
  /* Methods above are version 1. */
  /** The store-string parameters the backend reads: a NULL-terminated
   *  list of names ("max_keys", NULL).  Before xOpen, the core refuses a
   *  string that names a parameter not listed, names one twice, or has a
   *  segment without '=' (SLUICE_EINVAL, the message naming the known
   *  ones), so every backend follows the same rule and xOpen only reads
   *  values.  A backend that grows a parameter adds its name here.  NULL
   *  (or iVersion 1): the backend checks its own string. */
  const char *const *azParams;
  /* Fields above are version 2. */
};

/** @brief Find a built-in backend by name ("mem", "shm", "lmdb", "redis"),
 *  or NULL.  NULL or "" gives "mem".  A backend compiled out is still found;
 *  its xOpen returns SLUICE_ENOTSUP. */
SLUICE_EXPORT const sluice_backend *sluice_backend_find(const char *name);

/** @brief Record error detail on a store (printf-style, truncated to the
 *  errstr buffer).  Returns `err` so that backends can write
 *  `return sluice_store_seterr(s, SLUICE_EIO, errno, "open %s", path);`. */
SLUICE_EXPORT int sluice_store_seterr(sluice_store *s, int err,
                                      int backend_err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/** @brief Find `name` in a "k=v;k=v" URI parameter string.
 *  @return SLUICE_OK with *val and *len set (not NUL-terminated),
 *  SLUICE_ENOTFOUND when absent. */
SLUICE_EXPORT int sluice_uri_param(const char *uri, const char *name,
                                   const char **val, size_t *len);
/** @brief Parse a URI parameter as a non-negative integer with an optional
 *  unit suffix k/m/g (x1024...).  *out keeps `dflt` when absent.
 *  @return SLUICE_OK, or SLUICE_EINVAL when present but malformed. */
SLUICE_EXPORT int sluice_uri_int(const char *uri, const char *name,
                                 int64_t dflt, int64_t *out);

/** @brief Allocation through a store's allocator (NULL-safe free). */
SLUICE_EXPORT void *sluice_store_malloc(sluice_store *s, size_t n);
SLUICE_EXPORT void sluice_store_free(sluice_store *s, void *p, size_t n);

/** @brief SipHash-2-4 helpers for backends that fingerprint keys. */
SLUICE_EXPORT uint64_t sluice_siphash64(const uint8_t key[16],
                                        const void *data, size_t len);
SLUICE_EXPORT void sluice_siphash128(const uint8_t key[16], const void *data,
                                     size_t len, uint8_t out[16]);
/** @brief SipHash-1-3 with a 128-bit output: the cheaper variant, for a
** fingerprint computed on every decision (the shm table's).  Still keyed
** against flooding, as CPython's and Rust's hash tables use it. */
SLUICE_EXPORT void sluice_siphash13_128(const uint8_t key[16],
                                        const void *data, size_t len,
                                        uint8_t out[16]);
/** @brief Fill buf with n bytes from the OS random source (getrandom). */
SLUICE_EXPORT int sluice_random_bytes(void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif

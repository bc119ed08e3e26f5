/*
** The algorithm layer's side for a store that runs C where its state lives
** (mem, shm, lmdb, the Redis module): private to the library, seen by the
** built-in backends (lib/core/meson.build's private dependency) and the
** tests.  An outside backend runs programs through the public
** sluice_program_run() / sluice_program_expiry() of sluice/program.h.
*/
#ifndef SLUICE_ALGO_JOB_H
#define SLUICE_ALGO_JOB_H

#include "op.h"
#include "sluice/backend.h"

/* ------------------------------------------------ deciding in place ---
** The fast path of a backend that runs C where its state lives (mem, shm,
** lmdb, the Redis module; an outside backend alike): load the records of
** one program, run it over them in place, write back the records with
** their expiry.  A "job" is that one atomic unit, one program of an xRun.
**
** Trust: the core validates every program (sluice_program_validate())
** before it calls xRun, so these functions do not check them again: that
** second check would cost every decision its key scan.  Hand them only what a method
** received (or what you validated yourself); anything else is undefined.
** They do check their own pointers and time (SLUICE_EINVAL).
*/

/** One atomic unit a backend runs.  Fill it with sluice__job_program();
 *  read nkeys and keys, leave the rest alone.  Caller-allocated (on the
 *  stack); it borrows everything it points to. */
typedef struct sluice__job {
  const sluice_program *prog;
  int nkeys;                  /**< records the job reads and writes */
  const sluice_key *keys;     /**< their keys, nkeys of them */
  sluice_verdict *v;          /**< unused (NULL): the lmdb store's dry run
                                   still sets it */
  sluice_program_result *res; /**< its result */
} sluice__job;

/** @brief A job of one validated program, answering into *res.
 *  @return SLUICE_OK, or SLUICE_EINVAL when a pointer is NULL. */
int sluice__job_program(sluice__job *j, const sluice_program *p,
                        sluice_program_result *res);
/** @brief Run the job over its records (pure: no I/O, clock or allocation).
 *  @param in   j->nkeys records as read: zeroed when absent or expired
 *              (sluice__job_expiry() <= now_ns).
 *  @param out  j->nkeys records to write back (may alias in).
 *  @return SLUICE_OK with the verdict or result filled; SLUICE_EINVAL
 *  (NULL pointer, now_ns < 0).  On an error nothing must be written. */
int sluice__job_run(const sluice__job *j, const sluice_state *in,
                    sluice_state *out, int64_t now_ns);
/** @brief Expiry of record i as the job leaves it (`s`, after a run) or
 *  finds it (`s` as stored: a record whose expiry is <= now is absent).
 *  0 means "gone now": delete it rather than write it.  0 for a NULL
 *  pointer or i out of range. */
int64_t sluice__job_expiry(const sluice__job *j, int i, const sluice_state *s);
/** @brief 1 when the job only reads (every step a PEEK or CHECK), so a
 *  store may run it in a read-only transaction; 0 otherwise or NULL. */
int sluice__job_read_only(const sluice__job *j);
/** @brief After a run: 1 when record i was only looked at (every step over
 *  it that ran was a CHECK or PEEK, at least one).  Such a record decided
 *  the outcome without being written, so a lock-free store must see it
 *  unchanged at commit. */
int sluice__job_watched(const sluice__job *j, int i);
/** @brief The job's enum sluice_record_class (SLUICE_CLASS_SERVICE for
 *  NULL).  A store whose room is finite keeps SLUICE_CLASS_UNTRUSTED
 *  records within their own bound (docs/backends.md, "Record classes"). */
int sluice__job_record_class(const sluice__job *j);
/** @brief 1 when record i may be evicted to make room for another record
 *  of its class: an UNTRUSTED job's counter (a window or a distinct
 *  estimate).  Never a penalty record (a box, offenses), a bucket or a
 *  lease: evicting those would release a limit. */
int sluice__job_evictable(const sluice__job *j, int i);
/** @brief A lock-free store's rollback after its exact compare-and-swap
 *  lost: record i as `cur` (what it holds now) with this job's write (`pre`
 *  -> `post` at now_ns) taken out.  1: *out holds it; 0: leave the record
 *  as it is (nothing can be taken out without handing back more than the
 *  write took; keeping it only under-admits).  docs/shm.md says where the
 *  undo is exact. */
int sluice__job_undo(const sluice__job *j, int i, const sluice_state *pre,
                     const sluice_state *post, const sluice_state *cur,
                     int64_t now_ns, sluice_state *out);

/* A store's hot path: a validated program of one step over one record
** (nkeys 1), run, folded and its record's expiry found in one call; a
** single GCRA bucket goes straight to its int64 step.  `in` and `out` must
** not alias.  The same result, record and expiry as sluice_program_run()
** and sluice_program_expiry(); only res->v[0] of the verdicts is written. */
int sluice__gcra_one(const sluice_step *s, const sluice_state *in,
                     sluice_state *out, int64_t now_ns,
                     sluice_program_result *res, int64_t *expiry_ns);
int sluice__program_single_op(const sluice_program *p, const sluice_state *in,
                              sluice_state *out, int64_t now_ns,
                              sluice_program_result *res, int64_t *expiry_ns);
static inline int sluice__program_single(const sluice_program *p,
                                         const sluice_state *in,
                                         sluice_state *out, int64_t now_ns,
                                         sluice_program_result *res,
                                         int64_t *expiry_ns) {
  const sluice_step *s = p->steps;
  if (s->algo == SLUICE_ALGO_GCRA && s->kind != SLUICE_OP_ADJUST)
    return sluice__gcra_one(s, in, out, now_ns, res, expiry_ns);
  return sluice__program_single_op(p, in, out, now_ns, res, expiry_ns);
}

#endif

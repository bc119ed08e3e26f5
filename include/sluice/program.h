/*
** sluice/program.h -- a compound operation ("program") over one group.
**
** A program is an ordered list of algorithm steps over the records of one
** hash-tag group, each step an ordinary operation (sluice_op) over a
** contiguous range of the program's records, with
**
**   a guard  when the step runs: always; only if every earlier gate step
**            that ran allowed; only if a given earlier step ran and denied
**            (allowed, reached its limit, did not run); two conditions are
**            both required;
**   a fold   how its verdict counts: a GATE's denial denies the program
**            and undoes every record change made before it (the program
**            then charges nothing); a NOTE is reported only and its writes
**            stay.
**
** The sequencer (sluice_program_run) is pure like the steps: no I/O, no
** clock, no allocation.  A backend loads the program's records, runs it and
** writes back the records that changed, all as one atomic unit, so a whole
** request (box check, buckets, the Retry-After notice and the strike on a
** denial, leases) is one store call.
**
** A program is plain data: numbers, keys and parameter structs, with step
** references by index.  The Redis backend serialises it to the arguments
** of one EVALSHA and runs the same sequencer in Lua; anything else that
** runs it (a server-side module) needs only this encoding.
**
** Example, a standard request (records 0 = box, 1-2 = tenant and key
** buckets, 3 = Retry-After notice):
**
**   0 PENALTY CHECK  rec 0          always        gate
**   1 GCRA CONSUME   rec 1..2       passed        gate
**   2 LEASE RENEW    rec 3          denied(1)     note  ttl of step 1
**   3 LEASE ACQUIRE  rec 3          denied(2)     note  ttl of step 1
**   4 PENALTY STRIKE rec 0          allowed(2)    note
*/
#ifndef SLUICE_PROGRAM_H
#define SLUICE_PROGRAM_H

#include "algo.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most steps and records in one program.  Records: a lease set of
 *  SLUICE_GROUP_MAX slots plus the handful of records around it. */
#define SLUICE_PROGRAM_STEPS 16
#define SLUICE_PROGRAM_KEYS 48

/** Guards.  The numbers are part of the wire format (Redis scripts). */
enum sluice_when {
  SLUICE_WHEN_ALWAYS = 0,  /**< runs (as a second condition: no condition) */
  SLUICE_WHEN_PASSED = 1,  /**< every earlier GATE step that ran allowed */
  SLUICE_WHEN_DENIED = 2,  /**< step `ref` ran and denied */
  SLUICE_WHEN_ALLOWED = 3, /**< step `ref` ran and allowed */
  SLUICE_WHEN_REACHED = 4, /**< step `ref` ran and denied or left
                                remaining == 0 (a counter at its limit) */
  SLUICE_WHEN_SKIPPED = 5  /**< step `ref` did not run */
};

/** Folds (wire format too). */
enum sluice_fold {
  SLUICE_FOLD_GATE = 0, /**< denial denies the program, undoes earlier writes */
  SLUICE_FOLD_NOTE = 1  /**< reported only; its writes stay */
};

/** `ttl_from` value: the lease TTL is step k's retry_after_ns (at least 1
 *  ns): a Retry-After notice that lives exactly as long as the wait given. */
#define SLUICE_TTL_OF(k) ((k) + 1)

/** One step.  Zero-initialised fields mean: always, gate, params' TTL. */
typedef struct sluice_step {
  int algo;           /**< enum sluice_algo */
  int kind;           /**< enum sluice_op_kind */
  int key;            /**< index of the step's first record */
  int nkeys;          /**< records key .. key + nkeys - 1 */
  const void *params; /**< as sluice_op.params; borrowed */
  int64_t arg;        /**< as sluice_op.arg */
  uint64_t id;        /**< as sluice_op.id */
  int when, ref;      /**< guard: enum sluice_when and the step it looks at */
  int when2, ref2;    /**< second condition, ANDed (ALWAYS: none) */
  int fold;           /**< enum sluice_fold */
  int ttl_from;       /**< LEASE only: 0, or SLUICE_TTL_OF(k) for k < this
                           step */
} sluice_step;

/** A program: its records (keys, all with one hash tag, no key twice) and
 *  its steps.  A record's algorithm, and so its layout and expiry, is that
 *  of the first step over it; every step over it must use that algorithm
 *  with equal parameters (a lease TTL taken by ttl_from aside), and every
 *  record must be used by some step. */
typedef struct sluice_program {
  int nkeys;
  const sluice_key *keys;
  int nsteps;
  const sluice_step *steps;
  int64_t record_class; /**< enum sluice_record_class of its records */
} sluice_program;

/** What a program decided. */
typedef struct sluice_program_result {
  int allowed;      /**< 1: every GATE step that ran allowed */
  int denied_by;    /**< the GATE step that denied, or -1 */
  uint32_t ran;     /**< bit i: step i ran */
  int64_t now_ns;   /**< the time it ran at (a Redis store's TIME) */
  /** Step i's verdict; zeroed (now_ns set) when it did not run.  The
   *  header is 24 bytes, so a one-step program's header and verdict share
   *  two cache lines (of a 64-byte-aligned result). */
  sluice_verdict v[SLUICE_PROGRAM_STEPS];
} sluice_program_result;

/** @brief Check a program's shape, steps and keys without running it.
 *  @return SLUICE_OK, SLUICE_EINVAL (a malformed step, guard, range or
 *  fold, a bad algorithm, kind or parameters; a record unused or used by
 *  two algorithms),
 *  SLUICE_ERANGE (a cost 0, negative, larger than can ever fit, or above
 *  SLUICE_COUNT_MAX), SLUICE_EKEY (an empty or oversized key, mixed hash
 *  tags, a key twice). */
SLUICE_EXPORT int sluice_program_validate(const sluice_program *p);

/** @brief Run a program over its records (pure).
 *  @param in   p->nkeys records as read (zeroed when absent or expired).
 *  @param out  p->nkeys records to write back (may alias in).
 *  @return SLUICE_OK, or an error as sluice_program_validate() (then
 *  nothing must be written back). */
SLUICE_EXPORT int sluice_program_run(const sluice_program *p,
                                     const sluice_state *in,
                                     sluice_state *out, int64_t now_ns,
                                     sluice_program_result *res);

/** @brief When record i (as `s`, after a run) stops mattering: from this
 *  time on it behaves exactly like a zeroed (fresh) record, so a backend
 *  may drop it (its TTL).  Before it, the record is live and must never be
 *  evicted: this is what keeps bans and buckets from being bought back by
 *  a key flood.  Found by the first step over the record.
 *  @return the expiry in ns; 0 for a record that is already fresh;
 *  SLUICE_FOREVER for a suspension. */
SLUICE_EXPORT int64_t sluice_program_expiry(const sluice_program *p, int i,
                                            const sluice_state *s);

#ifdef __cplusplus
}
#endif
#endif

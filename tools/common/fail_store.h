/*
** A failing store: a decorator that opens another store ("mem") through
** the public store wrappers (sluice/backend.h) and makes chosen calls fail,
** before the inner store runs them, as a timed-out or unreachable backend
** would ("on any error nothing was written").  `sluice simulate`'s outage,
** the policy suites and the fault suite all run on it.  Pass
** &fail_store_backend as sluice_limiter_options.backend; the store string's
** params part configures it:
**
**   "fail:nth=N;count=C;code=NAME;max_keys=K;many=0|1;run=0|1"
**
**   nth=N      the Nth failable call (1-based) fails; 0 (default): none
**   count=C    ... and the C - 1 calls after it (0: every call from N on)
**   code=NAME  the SLUICE_E* name it fails with (default EBACKEND)
**   max_keys=K passed to the inner mem store
**   many=1     the table has xApplyMany (one failable call per batch)
**   run=1      the table has xRun (a program is one failable call)
**
** Without many / run the core's fallbacks call xApply once per op / per
** program step, each a failable call: the store then behaves as a backend
** of method version 1.  The failable calls are the decision methods the
** table has: xApply, xApplyMany, xRun.  xGet, xDelete, xCapabilities and
** other xControl ops go to the inner store untouched.
**
** At run time, sluice_limiter_control() with FAIL_STORE_CTL_PLAN replaces
** the plan (and restarts the call count); FAIL_STORE_CTL_STATS reads the
** figures.  Thread-safe (atomic counters).
*/
#ifndef SLUICE_EXAMPLE_FAIL_STORE_H
#define SLUICE_EXAMPLE_FAIL_STORE_H

#include "sluice.h"

#define FAIL_STORE_CTL_PLAN 900  /**< arg: const fail_plan * */
#define FAIL_STORE_CTL_STATS 901 /**< arg: fail_stats * */

typedef struct fail_plan {
  long nth;   /**< failable call (from now, 1-based) to start failing at,
                   0: never */
  long count; /**< calls that fail from nth on, 0: all */
  int code;   /**< the code returned (any int: positive ones test the
                   core's mapping to SLUICE_EBACKEND) */
} fail_plan;

typedef struct fail_stats {
  long calls;    /**< failable calls since the plan was set */
  long injected; /**< failed on purpose, since open */
  long attempts; /**< failable calls since open */
  long passed;   /**< ... of which reached the inner store */
} fail_stats;

extern const sluice_backend fail_store_backend;

/** SLUICE_E* code by name ("EBACKEND"), or 0. */
int fail_code_by_name(const char *name, size_t len);

/** A plan: fail every failable call with `code` from the (after + 1)th
 *  on; code 0: heal. */
static inline fail_plan fail_plan_from(int code, long after) {
  fail_plan p = {code ? after + 1 : 0, 0, code};
  return p;
}

#endif

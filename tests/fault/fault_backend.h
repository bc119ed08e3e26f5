/*
** A fault-injecting test backend: a "mem" store wrapped so that chosen
** calls fail.  Pass &fault_backend as sluice_limiter_options.backend (the
** store string's params part is handed to it):
**
**   "fault:nth=N;count=C;code=NAME;max_keys=K"
**
**   nth=N     the Nth xApply / xApplyMany call (1-based) fails; 0: none
**   count=C   ... and the C - 1 calls after it (0: every call from N on)
**   code=NAME the SLUICE_E* name it fails with (default EBACKEND)
**   max_keys  passed to the inner mem store
**
** A failing call fails *before* the inner store runs, as the backend
** contract requires ("on any error nothing was written").  The plan can be
** changed at run time with sluice_limiter_control(FAULT_CTL_PLAN), and the
** figures read with FAULT_CTL_STATS.  Thread-safe (atomic counters).
*/
#ifndef SLUICE_TEST_FAULT_BACKEND_H
#define SLUICE_TEST_FAULT_BACKEND_H

#include "sluice.h"

#define FAULT_CTL_PLAN 900  /**< arg: const fault_plan * */
#define FAULT_CTL_STATS 901 /**< arg: fault_stats * */

typedef struct fault_plan {
  long nth;   /**< call number to start failing at, 0: never */
  long count; /**< calls that fail from nth on, 0: all */
  int code;   /**< the code returned (any int: positive ones test the
                   core's mapping to SLUICE_EBACKEND) */
} fault_plan;

typedef struct fault_stats {
  long calls;    /**< xApply + xApplyMany calls seen */
  long injected; /**< of which failed on purpose */
} fault_stats;

extern const sluice_backend fault_backend;

/** SLUICE_E* code by name ("EBACKEND"), or 0. */
int fault_code_by_name(const char *name, size_t len);

#endif

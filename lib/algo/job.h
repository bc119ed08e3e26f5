/*
** The algorithm layer's side for a store that runs C where its state lives
** (mem, shm, lmdb, the Redis module): private to the library, seen by the
** built-in backends (lib/core/meson.build's private dependency) and the
** tests.  An outside backend runs programs through the public
** sluice_program_run() / sluice_program_expiry() of sluice/program.h.
*/
#ifndef SLUICE_ALGO_JOB_H
#define SLUICE_ALGO_JOB_H

#include "sluice/backend.h"

/* A store's hot path: a validated program of one step over one record
** (nkeys 1), run, folded and its record's expiry found in one call; a
** single GCRA bucket goes straight to its int64 step.  `in` and `out` must
** not alias.  The same result, record and expiry as sluice_program_run()
** and sluice_program_expiry(); only res->v[0] of the verdicts is written. */
int sluice__program_single(const sluice_program *p, const sluice_state *in,
                           sluice_state *out, int64_t now_ns,
                           sluice_program_result *res, int64_t *expiry_ns);

#endif

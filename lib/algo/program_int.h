/*
** Internals of the program sequencer, private to the algorithm layer: the
** guard and fold of one step.  What backends use of it is in job.h.
*/
#ifndef SLUICE_PROGRAM_INT_H
#define SLUICE_PROGRAM_INT_H

#include "op.h"
#include "sluice/program.h"

/* The keys alone of an op (its shape and parameters alone:
** sluice__op_validate_params(), op.h). */
int sluice__keys_check(const sluice_op *op);
/* sluice_program_run() for a validated program. */
int sluice__program_run_valid(const sluice_program *p, const sluice_state *in,
                              sluice_state *out, int64_t now,
                              sluice_program_result *r);
/* A result before the first step. */
void sluice__program_start(sluice_program_result *r, int64_t now);
/* Does step i run, given the results so far? */
int sluice__program_guard(const sluice_program *p, int i,
                          const sluice_program_result *r);
/* Step i as the op to run (lp holds a TTL taken from an earlier step). */
void sluice__program_op(const sluice_program *p, int i,
                        const sluice_program_result *r, sluice_op *op,
                        sluice_lease_params *lp);
/* Fold step i's verdict (r->v[i]) in; 1 when it is the gate that denied. */
int sluice__program_fold(const sluice_program *p, int i,
                         sluice_program_result *r);

#endif

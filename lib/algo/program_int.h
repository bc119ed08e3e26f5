/*
** Internals of the program sequencer shared with the store layer and the
** backends: the guard and fold of one step (the step-by-step fallback runs
** a program through these), and a "job": one atomic unit a backend runs,
** either a plain operation or a program, so that a backend's load / step /
** write-back code serves both.
*/
#ifndef SLUICE_PROGRAM_INT_H
#define SLUICE_PROGRAM_INT_H

#include "sluice/program.h"

/* Shape and parameters of an op without its keys; the keys alone. */
int sluice__op_validate_shape(const sluice_op *op);
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

typedef struct sluice__job {
  const sluice_op *op; /* exactly one of op and prog */
  const sluice_program *prog;
  int nkeys;
  const sluice_key *keys;
  sluice_verdict *v;          /* op's verdict */
  sluice_program_result *res; /* program's result */
} sluice__job;

void sluice__job_op(sluice__job *j, const sluice_op *op, sluice_verdict *v);
void sluice__job_prog(sluice__job *j, const sluice_program *p,
                      sluice_program_result *r);
/* The pure run (validated input), writing j's verdict or result. */
int sluice__job_run(const sluice__job *j, const sluice_state *in,
                    sluice_state *out, int64_t now);
int64_t sluice__job_expiry(const sluice__job *j, int i, const sluice_state *s);
/* Only kinds documented to change nothing (PEEK, CHECK). */
int sluice__job_read_only(const sluice__job *j);
/* After a run: was record i only looked at (every step over it that ran a
** CHECK or PEEK, at least one)?  Such a record decided the outcome without
** being written, so a lock-free store must see it unchanged at commit.
** Always 0 for a plain op. */
int sluice__job_watched(const sluice__job *j, int i);

/* A lock-free store's rollback after its exact CAS lost: record i as `cur`
** with this job's write (pre -> post at now) taken out (see the per-
** algorithm undo in algo_int.h).  1: *out holds it; 0: leave the record. */
int sluice__job_undo(const sluice__job *j, int i, const sluice_state *pre,
                     const sluice_state *post, const sluice_state *cur,
                     int64_t now, sluice_state *out);

#endif

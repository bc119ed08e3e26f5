/*
** The operation layer, private to the library: one op (sluice_op, a
** one-step program's step) validated, stepped and its records' expiry
** found, and the per-algorithm steps and parameter checks under it.  The
** public pure-function API is the program (sluice/program.h: validate,
** run, expiry); these are what the program sequencer, the built-in
** backends, the policy and the tests build on.
*/
#ifndef SLUICE_ALGO_OP_H
#define SLUICE_ALGO_OP_H

#include "sluice/program.h"

/** @brief Check an operation's shape and parameters without running it.
 *  @return SLUICE_OK, SLUICE_EINVAL (bad algo/kind/params/nkeys or
 *  record class), SLUICE_ERANGE (cost 0, negative, larger than can
 * ever fit, or above SLUICE_COUNT_MAX), SLUICE_EKEY (empty/oversized key, mixed
 * hash tags). */
int sluice__op_validate(const sluice_op *op);

/** @brief Run an operation's pure step over its group.
 *  @param[in] op     the operation (validated first: same errors as
 *                    sluice__op_validate()).
 *  @param[in] in     op->nkeys records as read (zeroed for absent keys).
 *  @param[out] out   op->nkeys records to write back (may alias `in`).
 *  @param[in] now_ns current time, >= 0.
 *  @param[out] v     the verdict.
 *  @return SLUICE_OK or an error, in which case out and v are unspecified
 *  and nothing must be written back. */
int sluice__op_step(const sluice_op *op, const sluice_state *in,
                    sluice_state *out, int64_t now_ns, sluice_verdict *v);

/** @brief When record `i` of `op`'s group stops mattering: from this time on
 *  it behaves exactly like a zeroed (fresh) record, so a backend may drop it
 *  (its TTL).  Before it, the record is live and must never be evicted: this
 *  is what keeps bans and buckets from being bought back by a key flood.
 *  @return the expiry in ns; 0 for a record that is already fresh;
 *  SLUICE_FOREVER for a suspension. */
int64_t sluice__op_expiry(const sluice_op *op, int i, const sluice_state *s);

/* Single-key steps, for callers who manage their own state.  Same contract
** as sluice__op_step() with nkeys = 1. */
int sluice__gcra_step(const sluice_gcra_params *p, const sluice_state *in,
                      int64_t now_ns, int kind, int64_t cost, sluice_state *out,
                      sluice_verdict *v);
int sluice__swindow_step(const sluice_window_params *p, const sluice_state *in,
                         int64_t now_ns, int kind, int64_t n, sluice_state *out,
                         sluice_verdict *v);
int sluice__fwindow_step(const sluice_window_params *p, const sluice_state *in,
                         int64_t now_ns, int kind, int64_t n, sluice_state *out,
                         sluice_verdict *v);
int sluice__penalty_step(const sluice_penalty_params *p, const sluice_state *in,
                         int64_t now_ns, int kind, int64_t min_level,
                         sluice_state *out, sluice_verdict *v);
int sluice__distinct_step(const sluice_distinct_params *p,
                          const sluice_state *in, int64_t now_ns,
                          uint64_t item_hash, sluice_state *out,
                          sluice_verdict *v);
/** Lease set over `p->max` slot records (in/out arrays of p->max). */
int sluice__lease_step(const sluice_lease_params *p, const sluice_state *in,
                       int64_t now_ns, int kind, uint64_t lease_id,
                       sluice_state *out, sluice_verdict *v);

/** @brief Parameter validation per algorithm (SLUICE_OK or SLUICE_EINVAL). */
int sluice__gcra_params_check(const sluice_gcra_params *p);
int sluice__window_params_check(const sluice_window_params *p);
int sluice__penalty_params_check(const sluice_penalty_params *p);
int sluice__lease_params_check(const sluice_lease_params *p);
int sluice__distinct_params_check(const sluice_distinct_params *p);

/** @brief Byte range of a key's hash tag (Redis Cluster rules): sets
 *  *off and *len to the tag, or to the whole key when it has none. */
void sluice__key_hashtag(const sluice_key *k, size_t *off, size_t *len);

/** @brief Step i of a program as a plain operation over its records
 *  (`ttl_from` not applied). */
void sluice__program_step_op(const sluice_program *p, int i, sluice_op *op);

/** @brief sluice__op_step() without the validation (see "Trust" above): the
 *  cheapest way to decide one op a method received.  Same results. */
int sluice__op_step_validated(const sluice_op *op, const sluice_state *in,
                              sluice_state *out, int64_t now_ns,
                              sluice_verdict *v);
/** @brief sluice__op_validate() without the key checks: the algorithm, kind,
 *  amount and parameters.  For a store whose keys are not sluice keys (the
 *  Redis module gets the server's key names and checks those itself).
 *  @return as sluice__op_validate(), never SLUICE_EKEY. */
int sluice__op_validate_params(const sluice_op *op);
/** @brief The other half of sluice__op_validate(): the keys alone (present,
 *  1..SLUICE_KEY_MAX bytes, one hash tag across a group, no key twice), for
 *  an op whose parameters were already checked (a batch repeats one shape
 *  over many keys).  @return SLUICE_OK or SLUICE_EKEY. */
int sluice__op_validate_keys(const sluice_op *op);

/* sluice__gcra_params_check() inline, for validation on the hot path. */
static inline int sluice__gcra_params_ok(const sluice_gcra_params *p) {
  int64_t tau;
  if (p->rate < 1 || p->rate > ((int64_t)1 << 32) || p->period_ns < 1 ||
      p->period_ns > SLUICE_DURATION_MAX || p->burst < 1 ||
      p->burst > SLUICE_COUNT_MAX)
    return 0;
  /* Both are positive here: an int64 overflow means past 2^62 as well. */
  return !__builtin_mul_overflow(p->burst, p->period_ns, &tau) &&
         tau <= ((int64_t)1 << 62);
}

/** @brief One GCRA bucket taken from or looked at (CONSUME, PEEK), all of
 *  it valid: 1, the hot path's whole check; 0 when it is another kind or
 *  something is wrong, which the full check then names. */
static inline int sluice__gcra1_ok(const sluice_gcra_params *g, int kind,
                                   int64_t arg, const sluice_key *k) {
  /* A key of 0 bytes wraps to SIZE_MAX here. */
  return g && sluice__gcra_params_ok(g) &&
         (kind == SLUICE_OP_CONSUME ? arg >= 1
                                    : kind == SLUICE_OP_PEEK && arg >= 0) &&
         arg <= g->burst && k && k->data && k->len - 1 < SLUICE_KEY_MAX;
}

/** @brief sluice_program_validate()'s answer for the commonest program,
 *  inline, for the hot path's callers: one step taking from one GCRA
 *  bucket, a gate or a note, its guard and TTL source zero.  1: it is such a
 *  program and valid; 0: it is not, or is invalid, and
 *  sluice_program_validate() says which (its first check is this one;
 *  sluice__program_validate_full() is the rest, all its checks). */
static inline int sluice__program_plain(const sluice_program *p) {
  const sluice_step *s = p->steps;
  const sluice_key *k = p->keys;
  const sluice_gcra_params *g;
  if (p->nsteps != 1 || p->nkeys != 1 || !s || !k ||
      (uint64_t)p->record_class > SLUICE_CLASS_UNTRUSTED_KEPT ||
      s->algo != SLUICE_ALGO_GCRA || s->kind != SLUICE_OP_CONSUME ||
      s->key != 0 || s->nkeys != 1 ||
      /* No guard, no TTL source, a gate (0) or a note (1). */
      (s->when | s->ref | s->when2 | s->ref2 | s->ttl_from |
       (s->fold & ~SLUICE_FOLD_NOTE)) != 0)
    return 0;
  g = (const sluice_gcra_params *)s->params;
  /* sluice__gcra1_ok() of a CONSUME, its kind known. */
  return g && sluice__gcra_params_ok(g) && s->arg >= 1 && s->arg <= g->burst &&
         k->data && k->len - 1 < SLUICE_KEY_MAX;
}

int sluice__program_validate_full(const sluice_program *p);

/** @brief The keys alone of a program (present, 1..SLUICE_KEY_MAX bytes,
 *  one hash tag, no key twice): what sluice_program_validate() checks of a
 *  program that repeats the shape (steps, counts, class) of one it passed,
 *  as a batch does.  @return SLUICE_OK or SLUICE_EKEY. */
int sluice__program_keys_check(const sluice_program *p);

/* The expiry of record i of a step of `algo` over `params` (params of
** its first record), as sluice__op_expiry() gives it; no checks: a store's
** hot path asks it of a one-step program's record (its step's algo and
** params, i = 0) without sluice_program_expiry()'s search. */
int64_t sluice__rec_expiry(int algo, const void *params, int i,
                           const sluice_state *s);

#endif

/*
** Shared helpers of the unit suites: a seeded PRNG (splitmix64, so traces are
** reproducible), shorthands that build single-key ops, and field-by-field
** verdict comparison.
*/
#ifndef SLUICE_TEST_UNIT_H
#define SLUICE_TEST_UNIT_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sluice.h"
#include "../common/splitmix.h"
#include "../common/units.h"

__extension__ typedef __int128 i128;


typedef struct rng {
  uint64_t s;
} rng;

static inline uint64_t rng_next(rng *r) {
  return splitmix64(&r->s);
}

/* Uniform in [lo, hi] (hi - lo < 2^63). */
static inline int64_t rng_range(rng *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1;
  return lo + (int64_t)(span ? rng_next(r) % span : rng_next(r));
}

static inline sluice_state zst(void) {
  sluice_state s;
  memset(&s, 0, sizeof s);
  return s;
}

static inline int st_eq(const sluice_state *a, const sluice_state *b) {
  return a->w[0] == b->w[0] && a->w[1] == b->w[1];
}

static inline int verdict_eq(const sluice_verdict *a, const sluice_verdict *b) {
  return a->allowed == b->allowed && a->flags == b->flags &&
         a->binding == b->binding && a->level == b->level &&
         a->limit == b->limit && a->remaining == b->remaining &&
         a->retry_after_ns == b->retry_after_ns && a->reset_ns == b->reset_ns &&
         a->strikes_remaining == b->strikes_remaining &&
         a->offenses == b->offenses && a->lease_id == b->lease_id &&
         a->now_ns == b->now_ns;
}

#define assert_verdict_eq(a, b, ...)                                           \
  cr_assert(verdict_eq(&(a), &(b)), __VA_ARGS__)

/* A key for a literal string. */
#define KEY(s) ((sluice_key){(s), sizeof(s) - 1})

/* One GCRA CONSUME of `cost` over one key. */
static inline sluice_op op_take(const sluice_key *k,
                                const sluice_gcra_params *p, int64_t cost) {
  sluice_op op;
  memset(&op, 0, sizeof op);
  op.algo = SLUICE_ALGO_GCRA;
  op.kind = SLUICE_OP_CONSUME;
  op.nkeys = 1;
  op.keys = k;
  op.params = p;
  op.arg = cost;
  return op;
}

/* A penalty ladder for program tests: box after 3 strikes in a minute. */
static const sluice_penalty_params UNIT_LADDER = {
    .strike_threshold = 3,
    .strike_window_ns = 60 * SEC,
    .box_ns = {60 * SEC, 600 * SEC, 3600 * SEC},
    .offense_ttl_ns = 3600 * SEC};

#endif

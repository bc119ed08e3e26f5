/*
** The wire contract of the redis backend: what one call carries to Redis
** and what comes back, whichever engine runs it there (the script in
** lua/, or the sluice Redis module).  This header is its one definition.
** The backend builds and decodes calls with it; the Lua takes its numbers
** from wire_lua.c, which prints them at build time for the script's
** assembly (embed_lua.py), so a layout changed here changes both sides or
** fails the build.
**
** A call carries n programs (one decision unit each): KEYS are their
** records, one program's after another's (every record of a program
** under one hash tag, and in a cluster every program of a call in one
** slot); ARGV[k] is program k's numbers as little-endian int64s (one
** binary argument: Redis makes each argument a Lua string, and a dozen of
** them cost more than a GCRA step).  One program is answered by its
** answer, n > 1 by an array of n answers in order.
**
** Times are int64 ns.  Lua 5.1 numbers are doubles, so times and ids
** travel as (hi, lo) = hi * 2^32 + lo pairs with 0 <= lo < 2^32.
*/
#ifndef SLUICE_REDIS_WIRE_H
#define SLUICE_REDIS_WIRE_H

#include <sluice/algo.h>
#include <sluice/program.h>

/* The header of a program's numbers, in int64s from 0.  Its steps follow
** it. */
enum {
  SLUICE_WIRE_NKEYS,      /* its records (KEYS), 1..SLUICE_PROGRAM_KEYS */
  SLUICE_WIRE_NSTEPS,     /* its steps; 0: read its one record (xGet):
                             {value|nil, now hi, lo} */
  SLUICE_WIRE_NOW_HI,     /* < 0: use the server's TIME */
  SLUICE_WIRE_NOW_LO,     /* */
  SLUICE_WIRE_ID,         /* its id: three words, see below */
  SLUICE_WIRE_MIN_TTL_MS = SLUICE_WIRE_ID + 3, /* least Redis TTL of a
                                                  write (test clocks) */
  SLUICE_WIRE_HEADER
};

/* A program's id (FCALL only; redis_codec.c): SLUICE_WIRE_PROG_ID_BYTES of
** the SHA-256 of its steps' bytes, in the header's ID words (zeros: none).
** A program sent as its header alone, or (a call of one program at
** server time) as the SLUICE_WIRE_PROG_ID_BYTES of its id alone, names its
** program by id; the library answers SLUICE_WIRE_NOPROGRAM when it does
** not know it. */
#define SLUICE_WIRE_PROG_ID_AT (8 * SLUICE_WIRE_ID)
#define SLUICE_WIRE_PROG_ID_BYTES 24
#define SLUICE_WIRE_NOPROGRAM "SLUICE NOPROGRAM"

/* One program step, after the header: these numbers, then its
** SLUICE_WIRE_STEP_NPARAMS parameters. */
enum {
  SLUICE_WIRE_STEP_ALGO,
  SLUICE_WIRE_STEP_KIND,
  SLUICE_WIRE_STEP_KEY, /* first record, from 0 */
  SLUICE_WIRE_STEP_NKEYS,
  SLUICE_WIRE_STEP_ARG,
  SLUICE_WIRE_STEP_ID_HI,
  SLUICE_WIRE_STEP_ID_LO,
  SLUICE_WIRE_STEP_WHEN, /* SLUICE_WHEN_* */
  SLUICE_WIRE_STEP_REF,
  SLUICE_WIRE_STEP_WHEN2,
  SLUICE_WIRE_STEP_REF2,
  SLUICE_WIRE_STEP_FOLD,     /* SLUICE_FOLD_* */
  SLUICE_WIRE_STEP_TTL_FROM, /* SLUICE_TTL_OF(k) or 0 */
  SLUICE_WIRE_STEP_NPARAMS,
  SLUICE_WIRE_STEP
};

/* Parameters per algorithm, in this order (GCRA: per key):
**   GCRA     rate period_ns burst
**   SWINDOW  FWINDOW  limit window_ns;   DISTINCT threshold window_ns
**   PENALTY  strike_threshold strike_window_ns box_ns[3] offense_ttl_ns
**   LEASE    max ttl_ns */
#define SLUICE_WIRE_GCRA_PARAMS 3
#define SLUICE_WIRE_PENALTY_PARAMS 6

/* A verdict as answered: sluice_verdict's fields in order, little-endian,
** 32-bit fields (I32 signed, U32 unsigned) as 4 bytes, I64 as 8. */
#define SLUICE_WIRE_VERDICT_FIELDS(I32, U32, I64)                              \
  I32(allowed) U32(flags) I32(binding) I32(level) I64(limit)                   \
  I64(remaining) I64(retry_after_ns) I64(reset_ns) I64(strikes_remaining)      \
  I64(offenses) I64(lease_id) I64(now_ns)
#define SLUICE_WIRE_VERDICT_N32 4 /* how many 32-bit fields */
#define SLUICE_WIRE_VERDICT_N64 8 /* how many 64-bit fields */
#define SLUICE_WIRE_VERDICT                                                    \
  (4 * SLUICE_WIRE_VERDICT_N32 + 8 * SLUICE_WIRE_VERDICT_N64)

/* A program's answer: this header, then the verdict of every step that
** ran and is not in the FRESH mask, in order (the RAN mask says which; a
** step that did not run has zeros and now, which the caller fills in).
** FRESH (a subset of RAN): box checks (PENALTY CHECK of one record) that
** ran over a fresh (absent or zero) record; the caller fills in their
** verdicts by running the step's op over a fresh record at now
** (sluice__op_step_validated(), the algorithm's own answer), so the check
** of a key never struck costs the answer no bytes.  An engine may always
** send 0. */
enum {
  SLUICE_WIRE_PROG_ALLOWED = 0,   /* int32 */
  SLUICE_WIRE_PROG_DENIED_BY = 4, /* int32, -1: none */
  SLUICE_WIRE_PROG_RAN = 8,       /* uint32 mask of the steps that ran */
  SLUICE_WIRE_PROG_FRESH = 12,    /* uint32 mask, see above */
  SLUICE_WIRE_PROG_NOW = 16,      /* int64 */
  SLUICE_WIRE_PROG_HEADER = 24
};

/* The short answer of a standard request (the Lua's straight line,
** lua/program.lua's pstd): step 0 a box check that met its record fresh,
** step 1 a GCRA group that admitted and consumed, every later step
** skipped.  It carries only what varies in step 1's verdict; the caller
** fills in the rest (allowed, no flags, level 0, no wait, the penalty
** and lease fields zero), step 0's as for FRESH, and the skipped steps'.
** No program answer has its length (they are SLUICE_WIRE_PROG_HEADER and
** whole verdicts), so its length says which it is; an engine may always
** send the program answer instead. */
enum {
  SLUICE_WIRE_STD_NOW = 0,        /* int64 */
  SLUICE_WIRE_STD_LIMIT = 8,      /* int64: the binding bucket's burst */
  SLUICE_WIRE_STD_REMAINING = 16, /* int64 */
  SLUICE_WIRE_STD_RESET = 24,     /* int64, ns */
  SLUICE_WIRE_STD_BINDING = 32,   /* int32: the binding bucket, from 0 */
  SLUICE_WIRE_STD = 36
};

/* A step whose verdict may go in FRESH: a box check of one record. */
static inline int sluice_wire_fresh_step(const sluice_step *s) {
  return s->algo == SLUICE_ALGO_PENALTY && s->kind == SLUICE_OP_CHECK &&
         s->nkeys == 1 && s->ttl_from == 0 && s->params;
}

/* A record's value: the sluice_state words, the expiry and the layout.
** Keeping the expiry in the value (not only as the Redis TTL) makes
** freshness exact whoever's clock set the TTL. */
enum {
  SLUICE_WIRE_REC_W0 = 0,      /* int64 */
  SLUICE_WIRE_REC_W1 = 8,      /* int64 */
  SLUICE_WIRE_REC_EXPIRY = 16, /* int64 ns; from then on the record is fresh */
  SLUICE_WIRE_REC_LAYOUT = 24, /* uint8 SLUICE_STATE_LAYOUT */
  SLUICE_WIRE_RECORD = 25
};

/* The Redis TTL of a write at a test clock (now in the header):
** floor((expiry - now) / 1 ms) + 1, at least the call's minimum, capped
** here (expiry - now >= 2^52 ns); SLUICE_FOREVER: no TTL. */
#define SLUICE_WIRE_TTL_CAP_MS ((int64_t)1 << 46)

/* At server time a record's Redis deadline is the end of the grid step
** of 2^32 ns (about 4.3 s) its expiry falls in, in ms rounded up, and
** absolute (PXAT): a function of the stored expiry alone, whoever wrote it
** and whenever.  Every writer (the Lua, the module) keeps that rule, so a
** key's deadline is always sluice_wire_deadline_ms() of the expiry its
** value carries, and a write whose new expiry has the stored one's high
** 32 bits keeps the key's TTL (KEEPTTL) instead of setting one: most
** writes of a busy bucket, whose expiry moves by less than the step
** between requests.  The step is the high word of the (hi, lo) pairs the
** Lua carries times in, so its test is one comparison there.  A record is
** never collected before its expiry; it may stay up to a step after it
** (freshness is the stored expiry's, so that changes no decision).  The
** call's least TTL applies at test clocks only. */
static inline int64_t sluice_wire_deadline_ms(int64_t expiry_ns) {
  int64_t h = (expiry_ns >> 32) + 1; /* 2^32 ns = 4294 ms + 967296 ns */
  return h * 4294 + (h * 967296 + 999999) / 1000000;
}

/* The exact range of the Lua port: durations, burst * period and
** limit * window at most this (docs/redis.md). */
#define SLUICE_WIRE_EXACT_MAX ((int64_t)1 << 52)

#endif

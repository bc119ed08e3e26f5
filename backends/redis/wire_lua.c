/*
** Prints the wire contract (wire.h) and the algorithm layer's numbers
** (sluice/algo.h, sluice/program.h, distinct.c's estimate table) as
** `local NAME = VALUE` lines, whose values embed_lua.py puts in place of
** the names in the script the redis backend loads.  Run at build time, so
** the Lua never spells a number the C defines.  The packing
** formats are derived from the same definitions; the asserts below pin
** what the derivation assumes.
*/
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "distinct_estimate.h"
#include "wire.h"

#define COUNT1(f) +1
#define NONE(f)
_Static_assert(0 SLUICE_WIRE_VERDICT_FIELDS(COUNT1, COUNT1, NONE) ==
                   SLUICE_WIRE_VERDICT_N32,
               "the verdict has SLUICE_WIRE_VERDICT_N32 32-bit fields");
_Static_assert(0 SLUICE_WIRE_VERDICT_FIELDS(NONE, NONE, COUNT1) ==
                   SLUICE_WIRE_VERDICT_N64,
               "the verdict has SLUICE_WIRE_VERDICT_N64 64-bit fields");
_Static_assert(SLUICE_WIRE_REC_W1 == SLUICE_WIRE_REC_W0 + 8 &&
                   SLUICE_WIRE_REC_EXPIRY == SLUICE_WIRE_REC_W1 + 8 &&
                   SLUICE_WIRE_REC_LAYOUT == SLUICE_WIRE_REC_EXPIRY + 8 &&
                   SLUICE_WIRE_RECORD == SLUICE_WIRE_REC_LAYOUT + 1,
               "a record is three int64s and the layout byte");
_Static_assert(SLUICE_WIRE_PROG_FRESH == 12 && SLUICE_WIRE_PROG_NOW == 16 &&
                   SLUICE_WIRE_PROG_HEADER == 24,
               "a program's answer header: four int32s, now");
_Static_assert(SLUICE_WIRE_STD_NOW == 0 && SLUICE_WIRE_STD_LIMIT == 8 &&
                   SLUICE_WIRE_STD_REMAINING == 16 &&
                   SLUICE_WIRE_STD_RESET == 24 &&
                   SLUICE_WIRE_STD_BINDING == 32 && SLUICE_WIRE_STD == 36,
               "the short answer: now, limit, remaining, reset, binding");
_Static_assert((int)SLUICE_WIRE_STD > (int)SLUICE_WIRE_PROG_HEADER &&
                   ((int)SLUICE_WIRE_STD - (int)SLUICE_WIRE_PROG_HEADER) %
                           SLUICE_WIRE_VERDICT !=
                       0,
               "no program answer is as long as the short one");
_Static_assert(SLUICE_WIRE_STEP_WHEN + 1 == SLUICE_WIRE_STEP_REF &&
                   SLUICE_WIRE_STEP_REF + 1 == SLUICE_WIRE_STEP_WHEN2 &&
                   SLUICE_WIRE_STEP_WHEN2 + 1 == SLUICE_WIRE_STEP_REF2 &&
                   SLUICE_WIRE_STEP_REF2 + 1 == SLUICE_WIRE_STEP_FOLD &&
                   SLUICE_WIRE_STEP_FOLD + 1 == SLUICE_WIRE_STEP_TTL_FROM &&
                   SLUICE_WIRE_STEP_TTL_FROM + 1 ==
                       SLUICE_WIRE_STEP_NPARAMS &&
                   SLUICE_WIRE_STEP_NPARAMS + 1 == SLUICE_WIRE_STEP,
               "a step's guard fields follow its head and end with nparams");
_Static_assert(SLUICE_STATE_LAYOUT < 256, "the layout is one byte");
_Static_assert(SLUICE_WIRE_NKEYS == 0,
               "a program's record count is its first number (dispatch.lua)");

static void num(const char *name, long long v) {
  printf("local %s = %lld\n", name, v);
}

/* A struct.pack format of n int64s. */
static void fmt_i8(const char *name, int n) {
  int i;
  printf("local %s = '<", name);
  for (i = 0; i < n; i++)
    fputs("i8", stdout);
  puts("'");
}

/* The verdict's formats: its 32-bit fields, then the int64s as
** (lo, hi) pairs, or as plain numbers (values known below 2^53) without
** now, the last. */
#define FMT_I32(f) fputs("i4", stdout);
#define FMT_U32(f) fputs("I4", stdout);
#define FMT_PAIR(f) fputs("I4I4", stdout);
#define FMT_NONOW(f)                                                           \
  if (strcmp(#f, "now_ns"))                                                    \
    fputs("i8", stdout);
/* The name of the verdict's last field. */
#define LAST_NAME(f) last = #f;
/* Byte offsets of the verdict's fields, by name: at[] the field's. */
#define OFF32(f) names[nf] = #f, at[nf++] = off, off += 4;
#define OFF64(f) names[nf] = #f, at[nf++] = off, off += 8;

/* The verdict's formats up to the field `remaining` (stop set there). */
#define PRE(f, fmt)                                                            \
  if (!strcmp(#f, "remaining"))                                                \
    stop = 1;                                                                  \
  if (!stop)                                                                   \
    fputs(fmt, stdout);
#define PRE_I32(f) PRE(f, "i4")
#define PRE_U32(f) PRE(f, "I4")
#define PRE_I64(f) PRE(f, "i8")

/* The offset of the verdict's field `name`, or -1. */
static int field_at(const char *name) {
  const char *names[32];
  int at[32], nf = 0, off = 0, i;
  SLUICE_WIRE_VERDICT_FIELDS(OFF32, OFF32, OFF64)
  for (i = 0; i < nf; i++)
    if (strcmp(names[i], name) == 0)
      return at[i];
  return -1;
}

int main(void) {
  const char *last = "";
  SLUICE_WIRE_VERDICT_FIELDS(LAST_NAME, LAST_NAME, LAST_NAME)
  if (strcmp(last, "now_ns")) {
    fprintf(stderr, "wire_lua: the verdict's last field is not now_ns\n");
    return 1;
  }
  puts("-- Generated by wire_lua.c from backends/redis/wire.h, sluice/algo.h");
  puts("-- and sluice/program.h: do not edit.");
  num("LAYOUT", SLUICE_STATE_LAYOUT);
  num("PROGRAM_STEPS", SLUICE_PROGRAM_STEPS);
  num("ALGO_GCRA", SLUICE_ALGO_GCRA);
  num("ALGO_SWINDOW", SLUICE_ALGO_SWINDOW);
  num("ALGO_FWINDOW", SLUICE_ALGO_FWINDOW);
  num("ALGO_PENALTY", SLUICE_ALGO_PENALTY);
  num("ALGO_LEASE", SLUICE_ALGO_LEASE);
  num("ALGO_DISTINCT", SLUICE_ALGO_DISTINCT);
  num("LEASE_SLOTS_MAX", SLUICE_GROUP_MAX);
  num("LEASE_COUNT_MAX", SLUICE_LEASE_COUNT_MAX);
  num("OP_CONSUME", SLUICE_OP_CONSUME);
  num("OP_PEEK", SLUICE_OP_PEEK);
  num("OP_COUNT", SLUICE_OP_COUNT);
  num("OP_ADJUST", SLUICE_OP_ADJUST);
  num("OP_CHECK", SLUICE_OP_CHECK);
  num("OP_STRIKE", SLUICE_OP_STRIKE);
  num("OP_TRIP", SLUICE_OP_TRIP);
  num("OP_RELEASE", SLUICE_OP_RELEASE);
  num("OP_ACQUIRE", SLUICE_OP_ACQUIRE);
  num("OP_RENEW", SLUICE_OP_RENEW);
  num("OP_ADD", SLUICE_OP_ADD);
  num("V_TRIPPED", SLUICE_V_TRIPPED);
  num("V_SUSPENDED", SLUICE_V_SUSPENDED);
  num("V_EXPIRED", SLUICE_V_EXPIRED);
  num("WHEN_ALWAYS", SLUICE_WHEN_ALWAYS);
  num("WHEN_PASSED", SLUICE_WHEN_PASSED);
  num("WHEN_DENIED", SLUICE_WHEN_DENIED);
  num("WHEN_ALLOWED", SLUICE_WHEN_ALLOWED);
  num("WHEN_REACHED", SLUICE_WHEN_REACHED);
  num("WHEN_SKIPPED", SLUICE_WHEN_SKIPPED);
  num("FOLD_GATE", SLUICE_FOLD_GATE);
  /* A[] is a step's parameters unpacked (1-based): the first's index. */
  num("A_PARAMS", 1);
  num("HDR_BYTES", 8 * SLUICE_WIRE_HEADER);
  /* A program's id: string.sub(ARGV[1], PID_FROM, PID_TO); NOID: none. */
  num("PID_FROM", SLUICE_WIRE_PROG_ID_AT + 1);
  num("PID_TO", SLUICE_WIRE_PROG_ID_AT + SLUICE_WIRE_PROG_ID_BYTES);
  num("PID_BYTES", SLUICE_WIRE_PROG_ID_BYTES);
  {
    int k;
    fputs("local NOID = '", stdout);
    for (k = 0; k < SLUICE_WIRE_PROG_ID_BYTES; k++)
      fputs("\\0", stdout);
    puts("'");
  }
  printf("local NOPROGRAM = '%s'\n", SLUICE_WIRE_NOPROGRAM);
  fmt_i8("HDR_FMT", SLUICE_WIRE_HEADER);
  num("STEP_BYTES", 8 * SLUICE_WIRE_STEP);
  fmt_i8("STEP_FMT", SLUICE_WIRE_STEP);
  num("GCRA_PARAMS", SLUICE_WIRE_GCRA_PARAMS);
  num("GCRA_BYTES", 8 * SLUICE_WIRE_GCRA_PARAMS);
  fmt_i8("GCRA_FMT", SLUICE_WIRE_GCRA_PARAMS);
  num("REC_BYTES", SLUICE_WIRE_RECORD);
  /* w0, w1, expiry as (lo, hi) halves, the expiry's hi signed; layout. */
  puts("local REC_FMT = '<I4I4I4I4I4i4B'");
  /* The same with w1 whole (unsigned; exact below 2^53): a GCRA record's
  ** fraction, where the straight line takes only one below 2^32. */
  puts("local REC_W1_FMT = '<I4I4I8I4i4B'");
  fputs("local VERDICT_PAIRS = '<", stdout);
  SLUICE_WIRE_VERDICT_FIELDS(FMT_I32, FMT_U32, FMT_PAIR)
  puts("'");
  /* A program's verdicts are packed without now (the last field) and
  ** joined to now packed once per call (NOW_FMT, a (lo, hi) pair). */
  fputs("local VERDICT_NONOW = '<", stdout);
  SLUICE_WIRE_VERDICT_FIELDS(FMT_I32, FMT_U32, FMT_NONOW)
  puts("'");
  puts("local NOW_FMT = '<I4i4'");
  /* remaining, retry_after_ns and reset_ns, the fields of an admitting
  ** GCRA verdict that change from call to call (VERDICT_MID_FMT), between
  ** the fields before them (VERDICT_PRE_FMT) and zeros. */
  if (field_at("retry_after_ns") != field_at("remaining") + 8 ||
      field_at("reset_ns") != field_at("remaining") + 16) {
    fprintf(stderr, "wire_lua: remaining, retry, reset are not in a row\n");
    return 1;
  }
  {
    int stop = 0, i;
    fputs("local VERDICT_PRE_FMT = '<", stdout);
    SLUICE_WIRE_VERDICT_FIELDS(PRE_I32, PRE_U32, PRE_I64)
    puts("'");
    puts("local VERDICT_MID_FMT = '<i8i8i8'");
    /* From reset_ns to now (strikes_remaining, offenses, lease_id): zero
    ** in an admitting GCRA verdict. */
    fputs("local VERDICT_POST = '", stdout);
    for (i = field_at("reset_ns") + 8; i < field_at("now_ns"); i++)
      fputs("\\0", stdout);
    puts("'");
  }
  /* allowed, denied_by, ran, fresh; now (NOW_FMT) follows. */
  puts("local PROG_HEAD_FMT = '<i4i4I4I4'");
  /* The short answer of a standard request (wire.h's SLUICE_WIRE_STD_*):
  ** now as a (lo, hi) pair, limit, remaining, reset, binding. */
  puts("local STD_FMT = '<I4i4i8i8i8i4'");
  /* The whole answer of a program of one step that ran: the header, now,
  ** the verdict (its int64s numbers below 2^53) and now. */
  fputs("local PONE_FMT = '<i4i4I4I4I4i4", stdout);
  SLUICE_WIRE_VERDICT_FIELDS(FMT_I32, FMT_U32, FMT_NONOW)
  puts("I4i4'");
  /* distinct.c's table, as little-endian uint16s in a string: a string
  ** constant costs the script nothing per call, a table would. */
  {
    size_t i;
    printf("local LC_ESTIMATE = '");
    for (i = 0; i < sizeof sluice__lc_estimate / sizeof *sluice__lc_estimate;
         i++)
      printf("\\%u\\%u", sluice__lc_estimate[i] & 0xffu,
             (unsigned)sluice__lc_estimate[i] >> 8);
    puts("'");
  }
  num("TTL_CAP_MS", SLUICE_WIRE_TTL_CAP_MS);
  num("T52", SLUICE_WIRE_EXACT_MAX);
  return ferror(stdout) ? 1 : 0;
}

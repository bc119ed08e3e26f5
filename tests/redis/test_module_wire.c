/*
** The Redis module's wire decoding (backends/redis/module/rm_wire.c)
** without Redis: what the store sends decodes to the program it came
** from, the verdict bytes sit where redis_codec.c reads them, and
** arguments cut short or mutated at random never decode to something the
** algorithm layer cannot run (the module runs inside redis-server: a crash
** there takes the server down).
*/
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "../common/splitmix.h"
#include "rm_wire.h"

typedef struct enc {
  unsigned char b[8 * 512];
  size_t n; /* numbers */
} enc;

static void put(enc *e, int64_t x) {
  smod_put64(e->b + 8 * e->n++, x);
}
/* A program's header: its record and step counts, the server's clock. */
static void header(enc *e, int64_t nkeys, int64_t nsteps) {
  put(e, nkeys);
  put(e, nsteps);
  put(e, -1); /* the server's clock */
  put(e, 0);
  put(e, 0); /* the id's words */
  put(e, 0);
  put(e, 0);
  put(e, 0);
}

/* A step's numbers up to its parameter count (guards and fold zero). */
static void step(enc *e, int64_t algo, int64_t kind, int64_t key, int64_t nk,
                 int64_t arg, int64_t id_lo, int64_t nparams) {
  int i;
  put(e, algo);
  put(e, kind);
  put(e, key);
  put(e, nk);
  put(e, arg);
  put(e, 0);
  put(e, id_lo);
  for (i = 0; i < 6; i++)
    put(e, 0); /* guards, fold, ttl_from */
  put(e, nparams);
}

static void penalty_params(enc *e) {
  put(e, 3);
  put(e, 60000000000);
  put(e, 1000000000);
  put(e, 2000000000);
  put(e, -1); /* SLUICE_FOREVER */
  put(e, 3600000000000);
}

/* The samples: one of each shape the store sends, with its key count. */
enum { S_GCRA, S_GROUP, S_PENALTY, S_PROGRAM, S_GET, S_N };
static int sample(int which, enc *e) {
  int i;
  e->n = 0;
  switch (which) {
  case S_GCRA:
    header(e, 1, 1);
    step(e, SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, 1, 7, 3);
    put(e, 10);
    put(e, 1000000000);
    put(e, 20);
    return 1;
  case S_GROUP:
    header(e, 2, 1);
    step(e, SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 0, 2, 0, 0, 6);
    for (i = 0; i < 2; i++) {
      put(e, 5 + i);
      put(e, 1000000000);
      put(e, 10);
    }
    return 2;
  case S_PENALTY:
    header(e, 1, 1);
    step(e, SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 0, 1, 1, 0, 6);
    penalty_params(e);
    return 1;
  case S_PROGRAM:
    header(e, 2, 2);
    /* a box check of record 1, then a bucket on record 0 */
    step(e, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 1, 1, 0, 0, 6);
    penalty_params(e);
    step(e, SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, 1, 0, 3);
    put(e, 10);
    put(e, 1000000000);
    put(e, 20);
    return 2;
  default:
    header(e, 1, 0); /* a read */
    return 1;
  }
}

Test(module_wire, samples_decode) {
  smod_call c;
  enc e;
  const char *why = NULL;
  int nk;
  nk = sample(S_GCRA, &e);
  cr_assert_eq(smod_decode(&c, e.b, e.n, nk, &why), SLUICE_OK, "%s", why);
  cr_assert_eq(c.nsteps, 1);
  cr_assert_eq(c.prog.steps[0].algo, SLUICE_ALGO_GCRA);
  cr_assert(c.server_time);
  cr_assert_eq(c.prog.steps[0].arg, 1);
  cr_assert_eq(c.prog.steps[0].id, 7);
  cr_assert_eq(((const sluice_gcra_params *)c.prog.steps[0].params)->rate, 10);
  nk = sample(S_PENALTY, &e);
  cr_assert_eq(smod_decode(&c, e.b, e.n, nk, &why), SLUICE_OK, "%s", why);
  cr_assert_eq(
      ((const sluice_penalty_params *)c.prog.steps[0].params)->box_ns[2],
      SLUICE_FOREVER, "-1 on the wire is SLUICE_FOREVER");
  nk = sample(S_PROGRAM, &e);
  cr_assert_eq(smod_decode(&c, e.b, e.n, nk, &why), SLUICE_OK, "%s", why);
  cr_assert_eq(c.prog.nsteps, 2);
  cr_assert_eq(c.prog.steps[1].algo, SLUICE_ALGO_GCRA);
  cr_assert_eq(c.prog.steps[0].key, 1);
  nk = sample(S_GET, &e);
  cr_assert_eq(smod_decode(&c, e.b, e.n, nk, &why), SLUICE_OK);
  cr_assert_eq(c.nsteps, 0);
  /* A header whose record count is not the call's: refused. */
  cr_assert_neq(smod_decode(&c, e.b, e.n, 2, &why), SLUICE_OK);
  /* The test clock: now = hi << 32 | lo. */
  sample(S_GCRA, &e);
  smod_put64(e.b + 8 * SLUICE_WIRE_NOW_HI, 5);
  smod_put64(e.b + 8 * SLUICE_WIRE_NOW_LO, 9);
  cr_assert_eq(smod_decode(&c, e.b, e.n, 1, &why), SLUICE_OK);
  cr_assert(!c.server_time);
  cr_assert_eq(c.now, ((int64_t)5 << 32) | 9);
}

Test(module_wire, cut_short_or_padded_is_refused) {
  smod_call c;
  enc e;
  const char *why;
  int s, nk;
  size_t n;
  for (s = 0; s < S_N; s++) {
    size_t full;
    nk = sample(s, &e);
    full = e.n;
    for (n = 0; n < full; n++) {
      why = NULL;
      cr_assert_neq(smod_decode(&c, e.b, n, nk, &why), SLUICE_OK,
                    "sample %d cut to %zu numbers", s, n);
      cr_assert(why && strncmp(why, "E", 1) == 0, "a reason: %s", why);
    }
    put(&e, 0);
    cr_assert_neq(smod_decode(&c, e.b, e.n, nk, &why), SLUICE_OK,
                  "sample %d with a number too many", s);
  }
}

/* Mutated samples: whatever decodes runs through the algorithm layer on
** fresh and on random records, and its reply encodes. */
Test(module_wire, mutations_decode_to_runnable_calls) {
  static const int64_t odd[] = {0,  1,  -1, 2,  3,  7,  20, 32, 47, 48,
                                49, 100, INT64_MAX, INT64_MIN, 1000000000,
                                (int64_t)1 << 52, -2};
  uint64_t seed = 0x5eed;
  long ok = 0, i;
  for (i = 0; i < 200000; i++) {
    smod_call c;
    enc e;
    const char *why = NULL;
    sluice_state in[SLUICE_PROGRAM_KEYS], out[SLUICE_PROGRAM_KEYS];
    sluice_program_result res;
    sluice_job job;
    unsigned char buf[SLUICE_WIRE_PROG_HEADER +
                      SLUICE_WIRE_VERDICT * SLUICE_PROGRAM_STEPS];
    int nk = sample((int)(splitmix64(&seed) % S_N), &e), m, k, rc;
    for (m = (int)(splitmix64(&seed) % 4); m >= 0; m--) {
      size_t at = splitmix64(&seed) % e.n;
      uint64_t r = splitmix64(&seed);
      smod_put64(e.b + 8 * at,
                 r % 3 ? odd[r % (sizeof odd / sizeof odd[0])]
                       : (int64_t)splitmix64(&seed));
    }
    if (splitmix64(&seed) % 8 == 0)
      nk = 1 + (int)(splitmix64(&seed) % SLUICE_PROGRAM_KEYS);
    if (smod_decode(&c, e.b, e.n, nk, &why) != SLUICE_OK) {
      cr_assert(why, "a refusal says why");
      continue;
    }
    if (c.nsteps == 0)
      continue;
    ok++;
    for (k = 0; k < nk; k++) {
      in[k].w[0] = splitmix64(&seed) % 3 ? 0 : splitmix64(&seed);
      in[k].w[1] = splitmix64(&seed) % 3 ? 0 : splitmix64(&seed);
    }
    sluice_job_program(&job, &c.prog, &res);
    rc = sluice_job_run(&job, in, out, 1764633600000000000);
    cr_assert(rc == SLUICE_OK || rc < 0);
    if (rc != SLUICE_OK)
      continue;
    for (k = 0; k < nk; k++)
      (void)sluice_job_expiry(&job, k, &out[k]);
    smod_put_program(buf, &c.prog, in, &res);
  }
  cr_assert_gt(ok, 10000, "enough mutations decoded to exercise the steps "
               "(%ld)", ok);
}

/* The verdict's bytes where redis_codec.c's verdict_at() reads them. */
Test(module_wire, verdict_layout) {
  sluice_verdict v;
  unsigned char b[SLUICE_WIRE_VERDICT];
  memset(&v, 0, sizeof v);
  v.allowed = 1;
  v.flags = 4;
  v.binding = 3;
  v.level = 2;
  v.limit = 10;
  v.remaining = -5;
  v.retry_after_ns = 11;
  v.reset_ns = 12;
  v.strikes_remaining = 13;
  v.offenses = 14;
  v.lease_id = UINT64_MAX;
  v.now_ns = (int64_t)1 << 61;
  smod_put_verdict(b, &v);
  cr_assert_eq(b[0], 1);
  cr_assert_eq(b[4], 4);
  cr_assert_eq(b[8], 3);
  cr_assert_eq(b[12], 2);
  cr_assert_eq(smod_le64(b + 16), 10);
  cr_assert_eq(smod_le64(b + 24), -5);
  cr_assert_eq(smod_le64(b + 32), 11);
  cr_assert_eq(smod_le64(b + 40), 12);
  cr_assert_eq(smod_le64(b + 48), 13);
  cr_assert_eq(smod_le64(b + 56), 14);
  cr_assert_eq((uint64_t)smod_le64(b + 64), UINT64_MAX);
  cr_assert_eq(smod_le64(b + 72), (int64_t)1 << 61);
}

Test(module_wire, duplicate_keys_found) {
  const char *a[3] = {"{t}a", "{t}b", "{t}a"};
  size_t l[3] = {4, 4, 4};
  cr_assert(smod_keys_distinct(2, a, l));
  cr_assert(!smod_keys_distinct(3, a, l));
}

/* Numbers outside the ranges wire.h gives are refused, never cut down to
** something that runs: an int field beyond 32 bits (algorithm 2^32 + 1 is
** not GCRA, a step at record 2^32 is not at record 0), a (hi, lo) half
** out of [0, 2^32), and a least TTL so large that now + TTL overflows the
** PXAT the module writes and replicates (a record without TTL on the
** master, none at all on its replicas and in its AOF). */
Test(module_wire, out_of_range_numbers_refused) {
  static const struct {
    int sample;
    size_t at; /* the number changed */
    int64_t x;
  } bad[] = {
      {S_GCRA, SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_ALGO,
       ((int64_t)1 << 32) + SLUICE_ALGO_GCRA},
      {S_GET, SLUICE_WIRE_NKEYS, ((int64_t)1 << 32) + 1},
      {S_GCRA, SLUICE_WIRE_NSTEPS, ((int64_t)1 << 32) + 1},
      {S_GCRA, SLUICE_WIRE_MIN_TTL_MS, INT64_MAX},
      {S_GCRA, SLUICE_WIRE_MIN_TTL_MS, SLUICE_WIRE_TTL_CAP_MS + 1},
      {S_GCRA, SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_ID_LO, (int64_t)1 << 32},
      {S_PROGRAM, SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_KEY,
       ((int64_t)1 << 32) + 1},
      {S_PROGRAM, SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_ALGO,
       ((int64_t)1 << 32) + SLUICE_ALGO_PENALTY},
      {S_PROGRAM, SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_ID_LO, -1},
  };
  smod_call c;
  enc e;
  const char *why;
  size_t i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int nk = sample(bad[i].sample, &e);
    smod_put64(e.b + 8 * bad[i].at, bad[i].x);
    why = NULL;
    cr_assert_neq(smod_decode(&c, e.b, e.n, nk, &why), SLUICE_OK,
                  "case %zu: number %zu = %lld decodes", i, bad[i].at,
                  (long long)bad[i].x);
    cr_assert(why, "case %zu says why", i);
  }
  /* The test clock's halves: lo 2^32 - 1 is in range, 2^32 and -1 not. */
  sample(S_GCRA, &e);
  smod_put64(e.b + 8 * SLUICE_WIRE_NOW_HI, 1);
  smod_put64(e.b + 8 * SLUICE_WIRE_NOW_LO, (int64_t)UINT32_MAX);
  cr_assert_eq(smod_decode(&c, e.b, e.n, 1, &why), SLUICE_OK, "%s", why);
  smod_put64(e.b + 8 * SLUICE_WIRE_NOW_LO, (int64_t)1 << 32);
  cr_assert_neq(smod_decode(&c, e.b, e.n, 1, &why), SLUICE_OK);
  smod_put64(e.b + 8 * SLUICE_WIRE_NOW_LO, -1);
  cr_assert_neq(smod_decode(&c, e.b, e.n, 1, &why), SLUICE_OK);
  /* The store's own least TTL (a day) and a negative one (none) pass. */
  sample(S_GCRA, &e);
  smod_put64(e.b + 8 * SLUICE_WIRE_MIN_TTL_MS, 86400000);
  cr_assert_eq(smod_decode(&c, e.b, e.n, 1, &why), SLUICE_OK, "%s", why);
  smod_put64(e.b + 8 * SLUICE_WIRE_MIN_TTL_MS, -5);
  cr_assert_eq(smod_decode(&c, e.b, e.n, 1, &why), SLUICE_OK, "%s", why);
}

/* wire.h's FRESH: the module leaves out the verdict of a box check that
** met its record fresh, and only that: not a check after a step over the
** same record (a strike), not a check of a record as read with strikes.
** The store then fills it in from the step (redis_codec.c). */
Test(module_wire, fresh_box_checks_only) {
  static const sluice_penalty_params pen = {
      2, 10000000000, {1000000000, 60000000000, 600000000000},
      3600000000000};
  static const char *names[2] = {"{t}box", "{t}other"};
  sluice_key k[2];
  sluice_step st[3] = {
      {SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &pen},
      {SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 1, 1, &pen},
      {SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 1, 1, &pen}};
  sluice_program p = {2, k, 3, st};
  sluice_state in[2], out[2];
  sluice_program_result res;
  sluice_job job;
  unsigned char buf[SLUICE_WIRE_PROG_HEADER +
                    SLUICE_WIRE_VERDICT * SLUICE_PROGRAM_STEPS];
  size_t n;
  int i;
  for (i = 0; i < 2; i++) {
    k[i].data = names[i];
    k[i].len = strlen(names[i]);
  }
  memset(in, 0, sizeof in);
  sluice_job_program(&job, &p, &res);
  cr_assert_eq(sluice_job_run(&job, in, out, 1764633600000000000), SLUICE_OK);
  cr_assert_eq(res.ran, 7u);
  n = smod_put_program(buf, &p, in, &res);
  /* Step 0 fresh; step 2 checks the record step 1 struck. */
  cr_assert_eq(buf[SLUICE_WIRE_PROG_FRESH], 1);
  cr_assert_eq(n, SLUICE_WIRE_PROG_HEADER + 2 * SLUICE_WIRE_VERDICT);
  /* The box struck once as read: no step's verdict is left out. */
  in[0] = out[1];
  sluice_job_program(&job, &p, &res);
  cr_assert_eq(sluice_job_run(&job, in, out, 1764633600000000000), SLUICE_OK);
  n = smod_put_program(buf, &p, in, &res);
  cr_assert_eq(buf[SLUICE_WIRE_PROG_FRESH], 0);
  cr_assert_eq(n, SLUICE_WIRE_PROG_HEADER + 3 * SLUICE_WIRE_VERDICT);
}

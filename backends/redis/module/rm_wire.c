/*
** The script's argument and reply encoding, for the module (rm_wire.h).
*/
#include <limits.h>
#include <string.h>

#include "rm_wire.h"
#include "op.h"

#define K(n) {"{s}" #n, sizeof("{s}" #n) - 1}
#define K10(d) K(d##0), K(d##1), K(d##2), K(d##3), K(d##4), K(d##5), K(d##6), \
    K(d##7), K(d##8), K(d##9)
const sluice_key smod_anon_keys[SLUICE_PROGRAM_KEYS] = {
    K(0), K(1), K(2), K(3), K(4), K(5), K(6), K(7), K(8), K(9),
    K10(1), K10(2), K10(3), K(40), K(41), K(42), K(43), K(44), K(45), K(46),
    K(47)};
#undef K10
#undef K

/* A penalty box of -1 on the wire is SLUICE_FOREVER (redis_codec.c's
** dur_arg). */
static int64_t dur(int64_t x) { return x == -1 ? SLUICE_FOREVER : x; }

/* The parameters of one op of `algo` over nk keys from np numbers at a;
** 0, or -1 when the count is not the algorithm's. */
static int get_params(smod_params *p, int algo, int nk, const unsigned char *a,
                      int64_t np) {
  int i;
#define A(i) smod_le64(a + 8 * (i))
  switch (algo) {
  case SLUICE_ALGO_GCRA:
    if (nk < 1 || nk > SLUICE_GROUP_MAX || np != SLUICE_WIRE_GCRA_PARAMS * (int64_t)nk)
      return -1;
    for (i = 0; i < nk; i++) {
      p->g[i].rate = A(3 * i);
      p->g[i].period_ns = A(3 * i + 1);
      p->g[i].burst = A(3 * i + 2);
    }
    return 0;
  case SLUICE_ALGO_SWINDOW:
  case SLUICE_ALGO_FWINDOW:
    if (np != 2)
      return -1;
    p->w.limit = A(0);
    p->w.window_ns = A(1);
    return 0;
  case SLUICE_ALGO_DISTINCT:
    if (np != 2)
      return -1;
    p->d.threshold = A(0);
    p->d.window_ns = A(1);
    return 0;
  case SLUICE_ALGO_PENALTY:
    if (np != SLUICE_WIRE_PENALTY_PARAMS)
      return -1;
    p->p.strike_threshold = A(0);
    p->p.strike_window_ns = A(1);
    for (i = 0; i < 3; i++)
      p->p.box_ns[i] = dur(A(2 + i));
    p->p.offense_ttl_ns = A(5);
    return 0;
  case SLUICE_ALGO_LEASE:
    if (np != 2)
      return -1;
    p->l.max = A(0);
    p->l.ttl_ns = A(1);
    return 0;
  default:
    return -1;
  }
#undef A
}

static uint64_t id_of(int64_t hi, int64_t lo) {
  return (uint64_t)hi << 32 | ((uint64_t)lo & 0xffffffffu);
}

/* A number the script compares whole (an algorithm, a kind, a record
** index, a guard): one beyond an int is refused, not cut to its low 32
** bits, which would run another call than the one the script refuses. */
static int fits_int(int64_t x) { return x >= INT_MIN && x <= INT_MAX; }

/* A (hi, lo) pair of wire.h: 0 <= hi, lo < 2^32 (a time's hi < 2^31). */
static int pair_ok(int64_t hi, int64_t lo, int64_t hi_max) {
  return hi >= 0 && hi <= hi_max && lo >= 0 && lo <= (int64_t)UINT32_MAX;
}

/* The header's numbers; -1 when one is outside its range (the id words
** are opaque: a program's id is for the Lua library).  The least TTL is
** bounded so that now + TTL cannot overflow: a write's PXAT is then a
** valid time for the key, a replica and an AOF replay alike. */
static int get_header(smod_call *c, const unsigned char *a) {
#define H(f) smod_le64(a + 8 * SLUICE_WIRE_##f)
  int64_t nh = H(NOW_HI), nl = H(NOW_LO);
  if (!fits_int(H(NKEYS)) || !fits_int(H(NSTEPS)) ||
      (nh >= 0 && !pair_ok(nh, nl, INT32_MAX)) ||
      H(MIN_TTL_MS) > SLUICE_WIRE_TTL_CAP_MS)
    return -1;
  c->nsteps = (int)H(NSTEPS);
  c->server_time = nh < 0;
  c->now = c->server_time ? 0 : (int64_t)id_of(nh, nl);
  c->min_ttl_ms = H(MIN_TTL_MS);
#undef H
  return 0;
}

/* A step's int fields in range and its id a pair. */
static int step_ok(const unsigned char *s) {
  static const unsigned char f[] = {
      SLUICE_WIRE_STEP_ALGO,  SLUICE_WIRE_STEP_KIND,  SLUICE_WIRE_STEP_KEY,
      SLUICE_WIRE_STEP_NKEYS, SLUICE_WIRE_STEP_WHEN,  SLUICE_WIRE_STEP_REF,
      SLUICE_WIRE_STEP_WHEN2, SLUICE_WIRE_STEP_REF2,  SLUICE_WIRE_STEP_FOLD,
      SLUICE_WIRE_STEP_TTL_FROM};
  size_t i;
  for (i = 0; i < sizeof f; i++)
    if (!fits_int(smod_le64(s + 8 * f[i])))
      return 0;
  return pair_ok(smod_le64(s + 8 * SLUICE_WIRE_STEP_ID_HI),
                 smod_le64(s + 8 * SLUICE_WIRE_STEP_ID_LO), UINT32_MAX);
}

static int bad(const char **why, const char *msg) {
  *why = msg;
  return SLUICE_EINVAL;
}

static int decode_program(smod_call *c, const unsigned char *a, size_t n,
                          int nkeys, const char **why) {
  int64_t nsteps = c->nsteps;
  size_t at = SLUICE_WIRE_HEADER;
  int i, rc;
  if (nsteps < 1 || nsteps > SLUICE_PROGRAM_STEPS ||
      nkeys > SLUICE_PROGRAM_KEYS)
    return bad(why, "EINVAL malformed program");
  for (i = 0; i < nsteps; i++) {
    const unsigned char *s = a + 8 * at;
    sluice_step *st = &c->steps[i];
    int64_t np;
    if (at + SLUICE_WIRE_STEP > n)
      return bad(why, "EINVAL malformed program");
    memset(st, 0, sizeof *st); /* the fields the wire does not carry */
#define S(f) smod_le64(s + 8 * SLUICE_WIRE_STEP_##f)
    np = S(NPARAMS);
    if (np < 0 || (size_t)np > n - at - SLUICE_WIRE_STEP)
      return bad(why, "EINVAL malformed program");
    if (!step_ok(s))
      return bad(why, "EINVAL malformed program step");
    st->algo = (int)S(ALGO);
    st->kind = (int)S(KIND);
    st->key = (int)S(KEY);
    st->nkeys = (int)S(NKEYS);
    st->arg = S(ARG);
    st->id = id_of(S(ID_HI), S(ID_LO));
    st->when = (int)S(WHEN);
    st->ref = (int)S(REF);
    st->when2 = (int)S(WHEN2);
    st->ref2 = (int)S(REF2);
    st->fold = (int)S(FOLD);
    st->ttl_from = (int)S(TTL_FROM);
#undef S
    st->params = &c->par[i];
    if (get_params(&c->par[i], st->algo, st->nkeys,
                   s + 8 * SLUICE_WIRE_STEP, np) != 0)
      return bad(why, "EINVAL malformed program step");
    at += SLUICE_WIRE_STEP + (size_t)np;
  }
  if (at != n)
    return bad(why, "EINVAL malformed program");
  memset(&c->prog, 0, sizeof c->prog);
  c->prog.nkeys = nkeys;
  c->prog.keys = smod_anon_keys;
  c->prog.nsteps = (int)nsteps;
  c->prog.steps = c->steps;
  rc = sluice_program_validate(&c->prog);
  if (rc != SLUICE_OK)
    *why = "EINVAL invalid program";
  return rc;
}

int smod_decode(smod_call *c, const unsigned char *a, size_t n, int nkeys,
                const char **why) {
  if (nkeys < 1 || n < SLUICE_WIRE_HEADER || get_header(c, a) != 0 ||
      smod_le64(a + 8 * SLUICE_WIRE_NKEYS) != nkeys)
    return bad(why, "EINVAL malformed arguments");
  if (c->nsteps == 0)
    return nkeys == 1 && n == SLUICE_WIRE_HEADER
               ? SLUICE_OK
               : bad(why, "EINVAL malformed arguments");
  return decode_program(c, a, n, nkeys, why);
}

int smod_keys_distinct(int n, const char *const *name, const size_t *len) {
  int i, j;
  for (i = 1; i < n; i++)
    for (j = 0; j < i; j++)
      if (len[i] == len[j] && memcmp(name[i], name[j], len[i]) == 0)
        return 0;
  return 1;
}

/* A little-endian 32-bit field. */
static void put32(unsigned char *o, uint32_t x) {
  o[0] = (unsigned char)x;
  o[1] = (unsigned char)(x >> 8);
  o[2] = (unsigned char)(x >> 16);
  o[3] = (unsigned char)(x >> 24);
}

/* sluice_verdict's fields in wire.h's order and widths. */
void smod_put_verdict(unsigned char *o, const sluice_verdict *v) {
  size_t at = 0;
#define I32(f)                                                                 \
  put32(o + at, (uint32_t)v->f);                                               \
  at += 4;
#define I64(f)                                                                 \
  smod_put64(o + at, (int64_t)v->f);                                           \
  at += 8;
  SLUICE_WIRE_VERDICT_FIELDS(I32, I32, I64)
#undef I32
#undef I64
}

/* 1 when step i is a box check that met its record fresh: fresh as read
** (in) and no step before it over that record. */
static int met_fresh(const sluice_program *p, const sluice_state *in, int i) {
  const sluice_step *s = &p->steps[i];
  int j;
  if (!sluice_wire_fresh_step(s) || in[s->key].w[0] != 0 ||
      in[s->key].w[1] != 0)
    return 0;
  for (j = 0; j < i; j++)
    if (p->steps[j].key <= s->key &&
        s->key < p->steps[j].key + p->steps[j].nkeys)
      return 0;
  return 1;
}

size_t smod_put_program(unsigned char *o, const sluice_program *p,
                        const sluice_state *in,
                        const sluice_program_result *r) {
  size_t at = SLUICE_WIRE_PROG_HEADER;
  uint32_t fresh = 0;
  int i;
  for (i = 0; i < p->nsteps; i++)
    if ((r->ran >> i) & 1u) {
      if (met_fresh(p, in, i)) {
        fresh |= 1u << i;
        continue;
      }
      smod_put_verdict(o + at, &r->v[i]);
      at += SLUICE_WIRE_VERDICT;
    }
  put32(o + SLUICE_WIRE_PROG_ALLOWED, (uint32_t)r->allowed);
  put32(o + SLUICE_WIRE_PROG_DENIED_BY, (uint32_t)r->denied_by);
  put32(o + SLUICE_WIRE_PROG_RAN, r->ran);
  put32(o + SLUICE_WIRE_PROG_FRESH, fresh);
  smod_put64(o + SLUICE_WIRE_PROG_NOW, r->now_ns);
  return at;
}

const char *smod_err_name(int rc) {
  switch (rc) {
  case SLUICE_ERANGE:
    return "SLUICE ERANGE";
  case SLUICE_ECORRUPT:
    return "SLUICE ECORRUPT";
  default:
    return "SLUICE EINVAL";
  }
}

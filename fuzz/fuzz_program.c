/*
** fuzz_program: the program sequencer (sluice_program_run) over arbitrary
** programs -- steps of every algorithm over arbitrary ranges of a record
** table, arbitrary guards, folds, TTL sources, costs and ids, some of them
** invalid -- against a model written here from program.h's contract alone:
**
**  a) sluice_program_run() fails exactly when sluice_program_validate()
**     does, and then writes nothing;
**  b) a valid program gives what the model gives: each step's guard
**     evaluated on the verdicts so far, the step run with sluice__op_step()
**     (a lease TTL from an earlier step's retry-after, at least 1), a
**     gate's first denial restoring every record to its input; the same
**     ran mask, denied_by, allowed, verdicts and output records;
**  c) it runs in place (in == out) with the same result, and twice over
**     the same input identically.
*/
#include "fuzz_common.h"
#include "sluice.h"
#include "op.h"

/* The record table: 0 a box, 1-2 a tenant and a key bucket, 3 a window,
** 4 a distinct set, 5-7 a lease set of 3.  Steps pick one of these targets
** (or a bucket alone), so most programs are valid and the invalid ones are
** invalid one way at a time. */
#define NREC 8

static const sluice_gcra_params gcra[4][2] = {
    {{1, 1000000000, 1}, {3, 1000000000, 5}},
    {{7, 60000000000, 13}, {2, 1, 2}},
    {{100, 1000000000, 100}, {5, 999999999, 4}},
    {{3, 1000000000, 5}, {3, 1000000000, 5}}};
static const sluice_window_params win[2] = {{3, 1000000000}, {1, 60000000000}};
static const sluice_penalty_params pen = {
    2, 1000000000, {1000000000, 60000000000, SLUICE_FOREVER}, 3600000000000};
static const sluice_lease_params lease[2] = {{3, 5000000000}, {3, 1}};
static const sluice_distinct_params dist = {3, 10000000000};
static const sluice_key keys[NREC] = {{"{g}:0", 5}, {"{g}:1", 5}, {"{g}:2", 5},
                                      {"{g}:3", 5}, {"{g}:4", 5}, {"{g}:5", 5},
                                      {"{g}:6", 5}, {"{g}:7", 5}};

enum { T_BOX, T_PAIR, T_WINDOW, T_DISTINCT, T_LEASE, T_BUCKET1, T_BUCKET2 };

static void target(sluice_step *s, int t, unsigned sel, int gi, int wi,
                   int li) {
  static const int pk[4] = {SLUICE_OP_CHECK, SLUICE_OP_STRIKE, SLUICE_OP_TRIP,
                            SLUICE_OP_RELEASE};
  static const int lk[3] = {SLUICE_OP_ACQUIRE, SLUICE_OP_LEASE_RELEASE,
                            SLUICE_OP_RENEW};
  static const int wk[3] = {SLUICE_OP_CONSUME, SLUICE_OP_PEEK, SLUICE_OP_COUNT};
  switch (t) {
  case T_BOX:
    *s = (sluice_step){SLUICE_ALGO_PENALTY, pk[sel % 4], 0, 1, &pen};
    break;
  case T_PAIR:
  case T_BUCKET1:
  case T_BUCKET2:
    *s = (sluice_step){SLUICE_ALGO_GCRA,
                       sel % 3 ? SLUICE_OP_CONSUME : SLUICE_OP_PEEK,
                       t == T_BUCKET2 ? 2 : 1, t == T_PAIR ? 2 : 1,
                       t == T_BUCKET2 ? &gcra[gi][1] : gcra[gi]};
    break;
  case T_WINDOW:
    *s = (sluice_step){(sel & 4) ? SLUICE_ALGO_SWINDOW : SLUICE_ALGO_FWINDOW,
                       wk[sel % 3], 3, 1, &win[wi]};
    break;
  case T_DISTINCT:
    *s = (sluice_step){SLUICE_ALGO_DISTINCT,
                       sel % 4 ? SLUICE_OP_ADD : SLUICE_OP_PEEK, 4, 1, &dist};
    break;
  default:
    *s = (sluice_step){SLUICE_ALGO_LEASE, lk[sel % 3], 5, 3, &lease[li]};
    break;
  }
}

static int model_cond(int w, int ref, int passed, const int *ran,
                      const sluice_verdict *v) {
  switch (w) {
  case SLUICE_WHEN_ALWAYS:
    return 1;
  case SLUICE_WHEN_PASSED:
    return passed;
  case SLUICE_WHEN_DENIED:
    return ran[ref] && !v[ref].allowed;
  case SLUICE_WHEN_ALLOWED:
    return ran[ref] && v[ref].allowed;
  case SLUICE_WHEN_REACHED:
    return ran[ref] && (!v[ref].allowed || v[ref].remaining == 0);
  default:
    return !ran[ref];
  }
}

/* The contract of program.h, step by step with sluice__op_step(). */
static int model(const sluice_program *p, const sluice_state *in,
                 sluice_state *out, int64_t now, sluice_program_result *r) {
  sluice_state cur[NREC];
  int ran[SLUICE_PROGRAM_STEPS] = {0}, i, rc;
  memcpy(cur, in, sizeof cur);
  memset(r, 0, sizeof *r);
  r->allowed = 1;
  r->denied_by = -1;
  r->now_ns = now;
  for (i = 0; i < p->nsteps; i++) {
    const sluice_step *s = &p->steps[i];
    sluice_lease_params lp;
    sluice_op op;
    int passed = r->denied_by < 0;
    r->v[i].now_ns = now;
    if (!model_cond(s->when, s->ref, passed, ran, r->v) ||
        !model_cond(s->when2, s->ref2, passed, ran, r->v))
      continue;
    sluice__program_step_op(p, i, &op);
    if (s->ttl_from) {
      int64_t t = r->v[s->ttl_from - 1].retry_after_ns;
      lp = *(const sluice_lease_params *)s->params;
      lp.ttl_ns = t < 1 ? 1 : t > SLUICE_DURATION_MAX ? SLUICE_DURATION_MAX : t;
      op.params = &lp;
    }
    rc = sluice__op_step(&op, cur + s->key, cur + s->key, now, &r->v[i]);
    if (rc != SLUICE_OK)
      return rc;
    ran[i] = 1;
    r->ran |= 1u << i;
    if (s->fold == SLUICE_FOLD_GATE && !r->v[i].allowed && r->denied_by < 0) {
      r->denied_by = i;
      r->allowed = 0;
      memcpy(cur, in, sizeof cur);
    }
  }
  memcpy(out, cur, sizeof cur);
  return SLUICE_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f = {data, size};
  sluice_step st[SLUICE_PROGRAM_STEPS];
  sluice_program p;
  sluice_state in[NREC], out[NREC], mout[NREC], again[NREC];
  sluice_program_result r, mr, r2;
  int64_t now;
  int i, rc, vrc, mrc;

  memset(st, 0, sizeof st);
  memset(&p, 0, sizeof p);
  p.keys = keys;
  p.nkeys = NREC;
  p.nsteps = (int)fz_range(&f, 5, SLUICE_PROGRAM_STEPS);
  p.steps = st;
  {
    /* The window's algorithm is the first step's over it for the rest. */
    int gi = (int)fz_range(&f, 0, 3), wi = fz_bool(&f), li = fz_bool(&f);
    int order[5] = {T_BOX, T_PAIR, T_WINDOW, T_DISTINCT, T_LEASE};
    unsigned wsel = fz_u8(&f);
    for (i = 4; i > 0; i--) { /* every record used: the five in some order */
      int j = (int)fz_range(&f, 0, i), x = order[i];
      order[i] = order[j];
      order[j] = x;
    }
    for (i = 0; i < p.nsteps; i++) {
      sluice_step *s = &st[i];
      unsigned sel = fz_u8(&f);
      int t = i < 5 ? order[i] : (int)fz_range(&f, 0, 6);
      target(s, t, t == T_WINDOW ? (wsel & ~3u) | (sel & 3u) : sel, gi, wi,
             li);
      if (fz_u8(&f) == 255) /* now and then, parameters of another record */
        s->params = &gcra[(gi + 1) % 4][0];
      switch (s->kind) {
      case SLUICE_OP_TRIP:
        s->arg = fz_u8(&f) != 255 ? fz_range(&f, 1, 3) : 4; /* 4: invalid */
        break;
      case SLUICE_OP_CONSUME:
      case SLUICE_OP_COUNT:
      case SLUICE_OP_PEEK:
        s->arg = fz_u8(&f) != 255
                     ? fz_range(&f, s->kind == SLUICE_OP_PEEK ? 0 : 1, 5)
                     : fz_i64_edge(&f);
        break;
      default:
        break;
      }
      s->id = s->algo == SLUICE_ALGO_DISTINCT ? fz_u64(&f, 8)
                                              : (uint64_t)fz_range(&f, 0, 4);
      s->fold = fz_range(&f, 0, 2) == 0 ? SLUICE_FOLD_NOTE : SLUICE_FOLD_GATE;
      if (fz_u8(&f) == 255)
        s->fold = 2; /* invalid */
      if (i > 0) {
        s->when = (int)fz_range(&f, 0, 5);
        s->ref = (int)fz_range(&f, 0, i - 1);
        if (fz_bool(&f)) {
          s->when2 = (int)fz_range(&f, 0, 5);
          s->ref2 = (int)fz_range(&f, 0, i - 1);
        }
        if (s->algo == SLUICE_ALGO_LEASE && fz_bool(&f))
          s->ttl_from = SLUICE_TTL_OF((int)fz_range(&f, 0, i - 1));
      }
      if (fz_u8(&f) == 255) { /* now and then a guard out of range */
        s->when = (int)fz_range(&f, 0, 7);
        s->ref = (int)fz_range(&f, -1, i + 1);
      }
    }
  }
  for (i = 0; i < NREC; i++) {
    in[i].w[0] = fz_bool(&f) ? fz_u64(&f, 8) : 0;
    in[i].w[1] = fz_bool(&f) ? fz_u64(&f, 8) : 0;
  }
  now = fz_range(&f, 0, (int64_t)1 << 62);

  vrc = sluice_program_validate(&p);
  memcpy(out, in, sizeof out);
  rc = sluice_program_run(&p, in, out, now, &r);
  if (vrc != SLUICE_OK) {
    CHECK(rc == vrc, "run %d, validate %d", rc, vrc);
    CHECK(memcmp(out, in, sizeof out) == 0, "a refused program wrote");
    return 0;
  }
  mrc = model(&p, in, mout, now, &mr);
  CHECK(rc == mrc, "run %d, model %d", rc, mrc);
  if (rc != SLUICE_OK)
    return 0;
  CHECK(r.ran == mr.ran, "ran %x, model %x", r.ran, mr.ran);
  CHECK(r.denied_by == mr.denied_by && r.allowed == mr.allowed,
        "denied_by %d/%d", r.denied_by, mr.denied_by);
  CHECK(r.allowed == (r.denied_by < 0), "allowed %d", r.allowed);
  for (i = 0; i < p.nsteps; i++)
    CHECK(memcmp(&r.v[i], &mr.v[i], sizeof r.v[i]) == 0, "step %d verdict", i);
  CHECK(memcmp(out, mout, sizeof(sluice_state) * (size_t)p.nkeys) == 0,
        "records differ from the model");
  memcpy(again, in, sizeof again);
  CHECK(sluice_program_run(&p, again, again, now, &r2) == SLUICE_OK,
        "in place");
  CHECK(memcmp(again, out, sizeof(sluice_state) * (size_t)p.nkeys) == 0 &&
            r2.ran == r.ran && r2.denied_by == r.denied_by,
        "in place gives another result");
  return 0;
}

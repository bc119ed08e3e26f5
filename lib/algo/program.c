/*
** The program sequencer: guards, folds and the record table of a compound
** operation (sluice/program.h).  Pure, like the steps it runs; every
** backend runs a program through here (Redis through its Lua port), so a
** program means one thing everywhere.
*/
#include <string.h>

#include "algo_int.h"
#include "job.h"
#include "program_int.h"
#include "sluice/backend.h"

void sluice__program_step_op(const sluice_program *p, int i, sluice_op *op) {
  const sluice_step *s = &p->steps[i];
  op->algo = s->algo;
  op->kind = s->kind;
  op->nkeys = s->nkeys;
  op->keys = p->keys + s->key;
  op->params = s->params;
  op->arg = s->arg;
  op->id = s->id;
  op->record_class = p->record_class;
}

static int when_ok(int when, int ref, int i) {
  if (when < SLUICE_WHEN_ALWAYS || when > SLUICE_WHEN_SKIPPED)
    return 0;
  return when <= SLUICE_WHEN_PASSED || (ref >= 0 && ref < i);
}

/* The parameters step s applies to its record r (bytes, for comparing). */
static const void *rec_params(const sluice_step *s, int r, size_t *len) {
  switch (s->algo) {
  case SLUICE_ALGO_GCRA:
    *len = sizeof(sluice_gcra_params);
    return (const sluice_gcra_params *)s->params + (r - s->key);
  case SLUICE_ALGO_SWINDOW:
  case SLUICE_ALGO_FWINDOW:
    *len = sizeof(sluice_window_params);
    break;
  case SLUICE_ALGO_PENALTY:
    *len = sizeof(sluice_penalty_params);
    break;
  case SLUICE_ALGO_LEASE:
    *len = sizeof(sluice_lease_params);
    break;
  default:
    *len = sizeof(sluice_distinct_params);
    break;
  }
  return s->params;
}

/* Which record uses which algorithm and parameters: the first step over a
** record fixes them and the others must agree (a record's expiry is then
** the same whichever step is asked: the Lua port asks the last), and no
** record may be left unused (its expiry would be unknown). */
static int records_check(const sluice_program *p) {
  int first[SLUICE_PROGRAM_KEYS];
  int i, j;
  for (j = 0; j < p->nkeys; j++)
    first[j] = -1;
  for (i = 0; i < p->nsteps; i++) {
    const sluice_step *s = &p->steps[i];
    for (j = s->key; j < s->key + s->nkeys; j++) {
      const sluice_step *f;
      const void *a, *b;
      size_t la, lb;
      if (first[j] < 0) {
        first[j] = i;
        continue;
      }
      f = &p->steps[first[j]];
      if (f->algo != s->algo)
        return SLUICE_EINVAL;
      a = rec_params(f, j, &la);
      b = rec_params(s, j, &lb);
      if (a != b && memcmp(a, b, la) != 0)
        return SLUICE_EINVAL;
    }
  }
  for (j = 0; j < p->nkeys; j++)
    if (first[j] < 0)
      return SLUICE_EINVAL;
  return SLUICE_OK;
}

/* The parameter bytes step s reads: one set per record for GCRA (the
** step's records are a group), one set otherwise. */
static size_t step_params_len(const sluice_step *s) {
  size_t len;
  (void)rec_params(s, s->key, &len);
  return s->algo == SLUICE_ALGO_GCRA ? len * (size_t)s->nkeys : len;
}

/* The shape of the last program this thread found valid: its counts, its
** steps and their parameters, byte for byte.  Validity depends on those
** and on the keys alone, so a program of the same bytes is valid but for
** its keys, which are checked every time.  A caller sends the same few
** shapes again and again with other keys (the policy: one per request
** class), and the steps' checks are most of a validation.  Equal bytes
** mean equal fields (padding may differ, and then it is a miss). */
#define SHAPE_PARAMS_MAX 768
static _Thread_local struct {
  int nkeys, nsteps; /* nsteps 0: nothing kept */
  sluice_step steps[SLUICE_PROGRAM_STEPS];
  unsigned char params[SHAPE_PARAMS_MAX];
} shape;

/* p's header was checked: steps non-NULL, counts in range. */
static int shape_same(const sluice_program *p) {
  size_t at = 0, n;
  int i;
  if (shape.nsteps != p->nsteps || shape.nkeys != p->nkeys ||
      memcmp(shape.steps, p->steps, sizeof(sluice_step) * (size_t)p->nsteps))
    return 0;
  /* The steps are the kept ones, so their lengths are the kept ones. */
  for (i = 0; i < p->nsteps; i++, at += n) {
    n = step_params_len(&p->steps[i]);
    if (memcmp(shape.params + at, p->steps[i].params, n) != 0)
      return 0;
  }
  return 1;
}

/* p is valid: keep its shape, if its parameters fit. */
static void shape_keep(const sluice_program *p) {
  size_t at = 0, n;
  int i;
  shape.nsteps = 0;
  for (i = 0; i < p->nsteps; i++, at += n) {
    n = step_params_len(&p->steps[i]);
    if (n > SHAPE_PARAMS_MAX - at)
      return;
    memcpy(shape.params + at, p->steps[i].params, n);
  }
  memcpy(shape.steps, p->steps, sizeof(sluice_step) * (size_t)p->nsteps);
  shape.nkeys = p->nkeys;
  shape.nsteps = p->nsteps;
}

/* Everything but the keys. */
static int shape_check(const sluice_program *p) {
  int i, rc;
  for (i = 0; i < p->nsteps; i++) {
    const sluice_step *s = &p->steps[i];
    sluice_op op;
    if (s->key < 0 || s->nkeys < 1 || s->key > p->nkeys - s->nkeys ||
        !when_ok(s->when, s->ref, i) || !when_ok(s->when2, s->ref2, i) ||
        (s->fold != SLUICE_FOLD_GATE && s->fold != SLUICE_FOLD_NOTE) ||
        s->ttl_from < 0 || s->ttl_from > i ||
        (s->ttl_from && s->algo != SLUICE_ALGO_LEASE))
      return SLUICE_EINVAL;
    sluice__program_step_op(p, i, &op);
    rc = sluice__op_validate_params(&op);
    if (rc != SLUICE_OK)
      return rc;
  }
  return records_check(p);
}

/* A program of one step (an operation): its step must cover every record,
** and its checks are the op's, cheaper than keeping its shape: all of
** them, since the plain one (sluice__program_plain()) was answered before
** by the op's shortcut (and so this is what tests that shortcut). */
static int single_check(const sluice_program *p) {
  const sluice_step *s = p->steps;
  sluice_op op;
  int rc;
  if (s->key != 0 ||
      s->nkeys != p->nkeys || !when_ok(s->when, s->ref, 0) ||
      !when_ok(s->when2, s->ref2, 0) ||
      (s->fold != SLUICE_FOLD_GATE && s->fold != SLUICE_FOLD_NOTE) ||
      s->ttl_from != 0)
    return SLUICE_EINVAL;
  sluice__program_step_op(p, 0, &op);
  rc = sluice__op_validate_params(&op);
  return rc != SLUICE_OK ? rc : sluice__keys_check(&op);
}

/* Two steps or more: the shape (unless it is the last one checked), then
** the keys across the whole record table.  Out of line, so that a one-step
** program's check does not pay for this frame. */
__attribute__((noinline)) static int multi_check(const sluice_program *p) {
  sluice_op all;
  int rc;
  if (!shape_same(p)) {
    rc = shape_check(p);
    if (rc != SLUICE_OK)
      return rc;
    shape_keep(p);
  }
  /* One hash tag, no key twice, across the whole record table. */
  memset(&all, 0, sizeof all);
  all.nkeys = p->nkeys;
  all.keys = p->keys;
  return sluice__keys_check(&all);
}

int sluice__program_keys_check(const sluice_program *p) {
  sluice_op all = {.nkeys = p->nkeys, .keys = p->keys};
  return sluice__keys_check(&all);
}

int sluice__program_validate_full(const sluice_program *p) {
  if (!p || !p->keys || !p->steps || p->nkeys < 1 ||
      p->nkeys > SLUICE_PROGRAM_KEYS || p->nsteps < 1 ||
      p->nsteps > SLUICE_PROGRAM_STEPS ||
      (uint64_t)p->record_class > SLUICE_CLASS_UNTRUSTED_KEPT)
    return SLUICE_EINVAL;
  return p->nsteps == 1 ? single_check(p) : multi_check(p);
}

int sluice_program_validate(const sluice_program *p) {
  return p && sluice__program_plain(p) ? SLUICE_OK
                                        : sluice__program_validate_full(p);
}

static int cond(const sluice_program_result *r, int when, int ref,
                int passed) {
  const sluice_verdict *v;
  int ran;
  if (when == SLUICE_WHEN_ALWAYS)
    return 1;
  if (when == SLUICE_WHEN_PASSED)
    return passed;
  ran = (int)((r->ran >> ref) & 1u);
  v = &r->v[ref];
  switch (when) {
  case SLUICE_WHEN_DENIED:
    return ran && !v->allowed;
  case SLUICE_WHEN_ALLOWED:
    return ran && v->allowed;
  case SLUICE_WHEN_REACHED:
    return ran && (!v->allowed || v->remaining == 0);
  default: /* SKIPPED */
    return !ran;
  }
}

int sluice__program_guard(const sluice_program *p, int i,
                          const sluice_program_result *r) {
  const sluice_step *s = &p->steps[i];
  int passed = r->denied_by < 0;
  /* Nearly every step of a decision is guarded by ALWAYS or PASSED alone:
  ** answered here, without the calls. */
  if (s->when2 == SLUICE_WHEN_ALWAYS && s->when <= SLUICE_WHEN_PASSED)
    return s->when == SLUICE_WHEN_ALWAYS || passed;
  return cond(r, s->when, s->ref, passed) && cond(r, s->when2, s->ref2, passed);
}

void sluice__program_op(const sluice_program *p, int i,
                        const sluice_program_result *r, sluice_op *op,
                        sluice_lease_params *lp) {
  const sluice_step *s = &p->steps[i];
  sluice__program_step_op(p, i, op);
  if (s->ttl_from) {
    int64_t t = r->v[s->ttl_from - 1].retry_after_ns;
    *lp = *(const sluice_lease_params *)s->params;
    lp->ttl_ns = t < 1 ? 1 : t > SLUICE_DURATION_MAX ? SLUICE_DURATION_MAX : t;
    op->params = lp;
  }
}

void sluice__program_start(sluice_program_result *r, int64_t now) {
  r->allowed = 1;
  r->denied_by = -1;
  r->ran = 0;
  r->now_ns = now;
}

int sluice__program_fold(const sluice_program *p, int i,
                         sluice_program_result *r) {
  r->ran |= 1u << i;
  if (p->steps[i].fold == SLUICE_FOLD_GATE && !r->v[i].allowed &&
      r->denied_by < 0) {
    r->allowed = 0;
    r->denied_by = i;
    return 1;
  }
  return 0;
}

int sluice__program_run_valid(const sluice_program *p, const sluice_state *in,
                              sluice_state *out, int64_t now,
                              sluice_program_result *r) {
  sluice_state cur[SLUICE_PROGRAM_KEYS];
  int i, rc;
  if (!in || !out || !r || now < 0)
    return SLUICE_EINVAL;
  memcpy(cur, in, sizeof(sluice_state) * (size_t)p->nkeys);
  sluice__program_start(r, now);
  for (i = 0; i < p->nsteps; i++) {
    const sluice_step *s = &p->steps[i];
    sluice_lease_params lp;
    sluice_op op;
    if (!sluice__program_guard(p, i, r)) {
      sluice__verdict_reset(&r->v[i], now);
      continue;
    }
    sluice__program_op(p, i, r, &op, &lp);
    rc = sluice__op_step_validated(&op, cur + s->key, cur + s->key, now, &r->v[i]);
    if (rc != SLUICE_OK)
      return rc;
    /* A gate's denial: the program charges nothing, so the records go back
    ** to what was read; the steps after it (notes of the denial) run on
    ** those. */
    if (sluice__program_fold(p, i, r))
      memcpy(cur, in, sizeof(sluice_state) * (size_t)p->nkeys);
  }
  memcpy(out, cur, sizeof(sluice_state) * (size_t)p->nkeys);
  return SLUICE_OK;
}

int sluice_program_run(const sluice_program *p, const sluice_state *in,
                       sluice_state *out, int64_t now_ns,
                       sluice_program_result *res) {
  int rc = sluice_program_validate(p);
  if (rc != SLUICE_OK)
    return rc;
  return sluice__program_run_valid(p, in, out, now_ns, res);
}

/* The first step over record i (which fixes its algorithm and
** parameters: records_check()), or NULL. */
static const sluice_step *step_over(const sluice_program *p, int i) {
  int k;
  for (k = 0; k < p->nsteps; k++)
    if (i >= p->steps[k].key && i < p->steps[k].key + p->steps[k].nkeys)
      return &p->steps[k];
  return NULL;
}

int64_t sluice_program_expiry(const sluice_program *p, int i,
                              const sluice_state *s) {
  const sluice_step *st;
  if (!p || !s || i < 0 || i >= p->nkeys || !(st = step_over(p, i)))
    return 0;
  /* What sluice__op_expiry() of the step's op returns, without making
  ** the op: a store asks this of every record of every program. */
  return st->params ? sluice__rec_expiry(st->algo, st->params, i - st->key, s)
                    : 0;
}

/* Any other step (sluice__program_single(), job.h). */
int sluice__program_single_op(const sluice_program *p, const sluice_state *in,
                              sluice_state *out, int64_t now,
                              sluice_program_result *r, int64_t *expiry) {
  const sluice_step *s = p->steps;
  sluice_op op;
  int rc;
  /* Step 0 always runs: a guard can only look at an earlier step. */
  sluice__program_start(r, now);
  sluice__program_step_op(p, 0, &op);
  rc = sluice__op_step_validated(&op, in, out, now, &r->v[0]);
  if (rc != SLUICE_OK)
    return rc;
  /* A gate that denied writes nothing. */
  if (sluice__program_fold(p, 0, r))
    *out = *in;
  *expiry = sluice__rec_expiry(s->algo, s->params, 0, out);
  return SLUICE_OK;
}

/* ------------------------------------------------------------- jobs --- */

int sluice__job_program(sluice__job *j, const sluice_program *p,
                       sluice_program_result *r) {
  if (!j || !p || !r)
    return SLUICE_EINVAL;
  j->prog = p;
  j->nkeys = p->nkeys;
  j->keys = p->keys;
  j->v = NULL;
  j->res = r;
  return SLUICE_OK;
}

int sluice__job_run(const sluice__job *j, const sluice_state *in,
                   sluice_state *out, int64_t now) {
  if (!j || !j->prog)
    return SLUICE_EINVAL;
  return sluice__program_run_valid(j->prog, in, out, now, j->res);
}

int64_t sluice__job_expiry(const sluice__job *j, int i, const sluice_state *s) {
  return j ? sluice_program_expiry(j->prog, i, s) : 0;
}

int sluice__job_undo(const sluice__job *j, int i, const sluice_state *pre,
                    const sluice_state *post, const sluice_state *cur,
                    int64_t now, sluice_state *out) {
  const sluice_step *st;
  if (!j || !j->prog || !pre || !post || !cur || !out || i < 0 ||
      i >= j->nkeys || !(st = step_over(j->prog, i)))
    return 0;
  switch (st->algo) {
  case SLUICE_ALGO_GCRA:
    return sluice__gcra_undo((const sluice_gcra_params *)st->params +
                                 (i - st->key),
                             pre, post, cur, now, out);
  case SLUICE_ALGO_SWINDOW:
    return sluice__swindow_undo(st->params, pre, post, cur, now, out);
  case SLUICE_ALGO_FWINDOW:
    return sluice__fwindow_undo(st->params, pre, post, cur, now, out);
  case SLUICE_ALGO_LEASE:
    return sluice__lease_undo(st->params, pre, post, cur, now, out);
  default:
    return 0; /* a strike or a distinct estimate stays: it only punishes */
  }
}

int sluice__job_read_only(const sluice__job *j) {
  int i;
  if (!j || !j->prog)
    return 0;
  for (i = 0; i < j->prog->nsteps; i++)
    if (j->prog->steps[i].kind != SLUICE_OP_PEEK &&
        j->prog->steps[i].kind != SLUICE_OP_CHECK)
      return 0;
  return 1;
}

int sluice__job_watched(const sluice__job *j, int i) {
  const sluice_program *p = j ? j->prog : NULL;
  int k, seen = 0;
  if (!p || !j->res)
    return 0;
  for (k = 0; k < p->nsteps; k++) {
    const sluice_step *s = &p->steps[k];
    if (!((j->res->ran >> k) & 1u) || i < s->key || i >= s->key + s->nkeys)
      continue;
    if (s->kind != SLUICE_OP_CHECK && s->kind != SLUICE_OP_PEEK)
      return 0;
    seen = 1;
  }
  return seen;
}

int sluice__job_record_class(const sluice__job *j) {
  return j ? (int)j->prog->record_class : SLUICE_CLASS_SERVICE;
}

int sluice__job_evictable(const sluice__job *j, int i) {
  const sluice_step *st;
  if (sluice__job_record_class(j) != SLUICE_CLASS_UNTRUSTED || i < 0 ||
      i >= j->nkeys || !(st = step_over(j->prog, i)))
    return 0;
  /* Counters only: a box, an offense count, a bucket or a lease is what
  ** keeps a limit, and losing one would release it. */
  return st->algo == SLUICE_ALGO_SWINDOW || st->algo == SLUICE_ALGO_FWINDOW ||
         st->algo == SLUICE_ALGO_DISTINCT;
}

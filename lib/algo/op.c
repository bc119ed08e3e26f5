/*
** Operation dispatch: validation of an operation's shape, the step over a
** group, and record expiry.  This is the single entry point backends call
** (sluice__op_step) so that every backend runs exactly the same code.
*/
#include <string.h>

#include "algo_int.h"
#include "program_int.h"
#include "sluice/backend.h"

void sluice__key_hashtag(const sluice_key *k, size_t *off, size_t *len) {
  const char *d = (const char *)k->data;
  const char *open = k->len ? memchr(d, '{', k->len) : NULL;
  const char *close = NULL;
  if (open)
    close = memchr(open + 1, '}', k->len - (size_t)(open + 1 - d));
  if (open && close && close > open + 1) {
    *off = (size_t)(open + 1 - d);
    *len = (size_t)(close - open - 1);
  } else {
    *off = 0;
    *len = k->len;
  }
}

/* Whether k's hash tag is the tag `tag` (len0 bytes) found at off0 > 0 of
** another key, without searching k: when k has a '{' at off0 - 1 with none
** before it and a '}' at off0 + len0 (keys made from one family of
** templates, "rl:{t:T}:tb" and "pb:{t:T}:K"), 1 for the same bytes there,
** else 0: k's tag is then other bytes, or shorter (a '}' among them), or
** the whole key (an empty "{}"), none of which is `tag`, which holds no
** '}' and is not a key holding a '{'.  -1 when k is not of that form: it
** must be searched as usual. */
static int tag_at(const sluice_key *k, const char *tag, size_t off0,
                  size_t len0) {
  const char *d = (const char *)k->data;
  size_t i;
  if (k->len < off0 + len0 + 1 || d[off0 - 1] != '{' || d[off0 + len0] != '}')
    return -1;
  for (i = 0; i + 1 < off0; i++)
    if (d[i] == '{')
      return -1;
  return memcmp(d + off0, tag, len0) == 0;
}

int sluice__keys_check(const sluice_op *op) {
  size_t off0 = 0, len0 = 0, off, len;
  int i, same;
  if (!op->keys)
    return SLUICE_EKEY;
  if (op->nkeys == 1) { /* the hot path: no tags to compare */
    const sluice_key *k = &op->keys[0];
    return (!k->data || k->len == 0 || k->len > SLUICE_KEY_MAX) ? SLUICE_EKEY
                                                                : SLUICE_OK;
  }
  for (i = 0; i < op->nkeys; i++) {
    const sluice_key *k = &op->keys[i];
    if (!k->data || k->len == 0 || k->len > SLUICE_KEY_MAX)
      return SLUICE_EKEY;
    /* The bytes of the first key up to its tag's '}' (keys of one
    ** template, "dl:{T}:a" and "dl:{T}:b"), else its tag where it is. */
    if (i > 0 && off0 > 0 && k->len > off0 + len0 &&
        *(const char *)k->data == *(const char *)op->keys[0].data &&
        memcmp(k->data, op->keys[0].data, off0 + len0 + 1) == 0)
      continue;
    if (i > 0 && off0 > 0 &&
        (same = tag_at(k, (const char *)op->keys[0].data + off0, off0,
                       len0)) >= 0) {
      if (!same)
        return SLUICE_EKEY;
      continue;
    }
    sluice__key_hashtag(k, &off, &len);
    if (i == 0) {
      off0 = off;
      len0 = len;
    } else if (op->nkeys > 1 &&
               (len != len0 ||
                memcmp((const char *)k->data + off,
                       (const char *)op->keys[0].data + off0, len) != 0)) {
      return SLUICE_EKEY;
    }
  }
  /* The same key twice in one group would be read twice and written twice,
  ** the second write silently undoing the first. */
  for (i = 1; i < op->nkeys; i++) {
    int j;
    for (j = 0; j < i; j++)
      if (op->keys[i].len == op->keys[j].len &&
          memcmp(op->keys[i].data, op->keys[j].data, op->keys[i].len) == 0)
        return SLUICE_EKEY;
  }
  return SLUICE_OK;
}

/* A settle: a signed amount, neither 0 nor beyond the burst or limit
** either way, and the settled charge's time a valid time. */
static int adjust_check(const sluice_op *op, int64_t cap) {
  if (op->arg == 0 || op->arg < -cap || op->arg > cap ||
      op->id > (uint64_t)INT64_MAX)
    return SLUICE_ERANGE;
  return SLUICE_OK;
}

/* Amount checks shared by the bucket and window algorithms. */
static int amount_check(const sluice_op *op, int64_t cap) {
  if (op->kind == SLUICE_OP_ADJUST)
    return adjust_check(op, cap);
  if (op->kind == SLUICE_OP_PEEK)
    return (op->arg < 0 || op->arg > cap) ? SLUICE_ERANGE : SLUICE_OK;
  if (op->kind != SLUICE_OP_CONSUME && op->kind != SLUICE_OP_COUNT)
    return SLUICE_EINVAL;
  if (op->arg < 1 || op->arg > SLUICE_COUNT_MAX)
    return SLUICE_ERANGE;
  /* A cost that can never fit is refused rather than denied forever. */
  if (op->kind == SLUICE_OP_CONSUME && op->arg > cap)
    return SLUICE_ERANGE;
  return SLUICE_OK;
}

static int shape_fields(const sluice_op *op);

/* Everything but the pointer to params and the record class. */
static int validate_fields(const sluice_op *op) {
  int rc;
  /* One bucket, the shape of nearly every op: answered without the
  ** dispatch and the loops when it is valid. */
  if (op->nkeys == 1 && op->algo == SLUICE_ALGO_GCRA &&
      sluice__gcra1_ok((const sluice_gcra_params *)op->params, op->kind,
                       op->arg, op->keys))
    return SLUICE_OK;
  rc = shape_fields(op);
  return rc != SLUICE_OK ? rc : sluice__keys_check(op);
}

/* What every op must have before its fields are read: an op, params, and
** a record class. */
static int head_ok(const sluice_op *op) {
  return op && op->params &&
         (uint64_t)op->record_class <= SLUICE_CLASS_UNTRUSTED_KEPT;
}

int sluice__op_validate(const sluice_op *op) {
  return head_ok(op) ? validate_fields(op) : SLUICE_EINVAL;
}

int sluice__op_validate_keys(const sluice_op *op) {
  return op ? sluice__keys_check(op) : SLUICE_EKEY;
}

int sluice__op_validate_params(const sluice_op *op) {
  return head_ok(op) ? shape_fields(op) : SLUICE_EINVAL;
}

static int shape_fields(const sluice_op *op) {
  int i, rc;
  if (op->nkeys < 1 || op->nkeys > SLUICE_GROUP_MAX)
    return SLUICE_EINVAL;
  switch (op->algo) {
  case SLUICE_ALGO_GCRA: {
    const sluice_gcra_params *p = (const sluice_gcra_params *)op->params;
    int64_t cap = INT64_MAX;
    for (i = 0; i < op->nkeys; i++) {
      if (sluice__gcra_params_check(&p[i]) != SLUICE_OK)
        return SLUICE_EINVAL;
      if (p[i].burst < cap)
        cap = p[i].burst;
    }
    if (op->kind == SLUICE_OP_COUNT)
      return SLUICE_EINVAL;
    rc = amount_check(op, cap);
    break;
  }
  case SLUICE_ALGO_SWINDOW:
  case SLUICE_ALGO_FWINDOW: {
    const sluice_window_params *p = (const sluice_window_params *)op->params;
    if (op->nkeys != 1 || sluice__window_params_check(p) != SLUICE_OK)
      return SLUICE_EINVAL;
    /* The sliding counters are 32-bit; a limit below 2^31 keeps a consumed
    ** count from ever reaching the saturation point. */
    if (op->algo == SLUICE_ALGO_SWINDOW && p->limit > ((int64_t)1 << 31))
      return SLUICE_EINVAL;
    rc = amount_check(op, p->limit);
    break;
  }
  case SLUICE_ALGO_PENALTY:
    if (op->nkeys != 1 ||
        sluice__penalty_params_check(
            (const sluice_penalty_params *)op->params) != SLUICE_OK)
      return SLUICE_EINVAL;
    if (op->kind < SLUICE_OP_CHECK || op->kind > SLUICE_OP_RELEASE)
      return SLUICE_EINVAL;
    rc = (op->kind == SLUICE_OP_TRIP && (op->arg < 1 || op->arg > 3))
             ? SLUICE_ERANGE
             : SLUICE_OK;
    break;
  case SLUICE_ALGO_LEASE: {
    const sluice_lease_params *p = (const sluice_lease_params *)op->params;
    if (sluice__lease_params_check(p) != SLUICE_OK ||
        op->nkeys != sluice__lease_nkeys(p))
      return SLUICE_EINVAL;
    if (op->kind < SLUICE_OP_ACQUIRE || op->kind > SLUICE_OP_RENEW)
      return SLUICE_EINVAL;
    rc = op->id == 0 ? SLUICE_EINVAL : SLUICE_OK;
    break;
  }
  case SLUICE_ALGO_DISTINCT:
    if (op->nkeys != 1 ||
        sluice__distinct_params_check(
            (const sluice_distinct_params *)op->params) != SLUICE_OK)
      return SLUICE_EINVAL;
    rc = (op->kind == SLUICE_OP_ADD || op->kind == SLUICE_OP_PEEK)
             ? SLUICE_OK
             : SLUICE_EINVAL;
    break;
  default:
    return SLUICE_EINVAL;
  }
  return rc;
}

int sluice__op_step(const sluice_op *op, const sluice_state *in,
                   sluice_state *out, int64_t now_ns, sluice_verdict *v) {
  int rc = sluice__op_validate(op);
  if (rc != SLUICE_OK)
    return rc;
  return sluice__op_step_validated(op, in, out, now_ns, v);
}

int sluice__op_step_validated(const sluice_op *op, const sluice_state *in,
                          sluice_state *out, int64_t now_ns,
                          sluice_verdict *v) {
  sluice_state fresh[SLUICE_GROUP_MAX], tmp[SLUICE_GROUP_MAX];
  int rc;
  if (!out || !v || now_ns < 0)
    return SLUICE_EINVAL;
  /* The most common op: one GCRA bucket, whose step reads its record
  ** whole before it writes one (gcra.c), so it runs in place. */
  if (op->algo == SLUICE_ALGO_GCRA && op->nkeys == 1 && in &&
      op->kind != SLUICE_OP_ADJUST) {
    sluice__verdict_reset(v, now_ns);
    return sluice__gcra_group(op, in, out, now_ns, v);
  }
  if (!in) {
    memset(fresh, 0, sizeof fresh);
    in = fresh;
  }
  sluice__verdict_reset(v, now_ns);
  /* Steps may read in[] after writing out[]; run them on a copy so that
  ** callers can pass in == out. */
  if (op->kind == SLUICE_OP_ADJUST)
    rc = sluice__adjust_run(op, in, tmp, now_ns, v);
  else switch (op->algo) {
  case SLUICE_ALGO_GCRA:
    rc = sluice__gcra_group(op, in, tmp, now_ns, v);
    break;
  case SLUICE_ALGO_SWINDOW:
    rc = sluice__swindow_run(op, in, tmp, now_ns, v);
    break;
  case SLUICE_ALGO_FWINDOW:
    rc = sluice__fwindow_run(op, in, tmp, now_ns, v);
    break;
  case SLUICE_ALGO_PENALTY:
    rc = sluice__penalty_run(op, in, tmp, now_ns, v);
    break;
  case SLUICE_ALGO_LEASE:
    rc = sluice__lease_run(op, in, tmp, now_ns, v);
    break;
  default:
    rc = sluice__distinct_run(op, in, tmp, now_ns, v);
    break;
  }
  if (rc == SLUICE_OK && op->nkeys == 1)
    out[0] = tmp[0]; /* most ops: no call for a 16-byte copy */
  else if (rc == SLUICE_OK)
    memcpy(out, tmp, sizeof(sluice_state) * (size_t)op->nkeys);
  return rc;
}

int64_t sluice__rec_expiry(int algo, const void *params, int i,
                           const sluice_state *s) {
  switch (algo) {
  case SLUICE_ALGO_GCRA:
    return sluice__gcra_expiry(&((const sluice_gcra_params *)params)[i], s);
  case SLUICE_ALGO_SWINDOW:
    return sluice__swindow_expiry(params, s);
  case SLUICE_ALGO_FWINDOW:
    return sluice__fwindow_expiry(params, s);
  case SLUICE_ALGO_PENALTY:
    return sluice__penalty_expiry(params, s);
  case SLUICE_ALGO_LEASE:
    if (((const sluice_lease_params *)params)->max > SLUICE_GROUP_MAX)
      return sluice__lease_count_expiry(params, s);
    return s->w[0] ? (int64_t)s->w[1] : 0;
  case SLUICE_ALGO_DISTINCT:
    return sluice__distinct_expiry(params, s);
  default:
    return 0;
  }
}

int64_t sluice__op_expiry(const sluice_op *op, int i, const sluice_state *s) {
  if (!op || !s || !op->params || i < 0 || i >= op->nkeys)
    return 0;
  return sluice__rec_expiry(op->algo, op->params, i, s);
}

int sluice__step1(int algo, int kind, const void *params, int64_t arg,
                  uint64_t id, const sluice_state *in, int64_t now,
                  sluice_state *out, sluice_verdict *v) {
  static const char key = 'k';
  sluice_key k = {&key, 1};
  sluice_op op = {algo, kind, 1, &k, params, arg, id};
  int rc;
  /* The op is built here, its record class zero: of head_ok() only the
  ** params need checking. */
  if (!params)
    return SLUICE_EINVAL;
  rc = validate_fields(&op);
  return rc != SLUICE_OK ? rc : sluice__op_step_validated(&op, in, out, now, v);
}

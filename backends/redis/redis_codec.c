/*
** Redis store: the wire codec.  Each call's arguments in wire.h's
** order (the numbers as one binary argument), and each reply decoded back:
** verdicts, records, program results, and the errors that ask for a retry
** (MOVED, ASK, TRYAGAIN, NOSCRIPT).  The design is in redis_store.c.
*/
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "redis_int.h"
#include "sluice_rcl_script.h"
#include "op.h"

/* -------------------------------------------------- command building --- */

static void arg_raw(rcl_cmd *c, const char *p, size_t n) {
  c->argv[c->argc] = p;
  c->lens[c->argc] = n;
  c->argc++;
}
/* The numbers of a script call go as one binary argument of int64s,
** little-endian (the script unpacks them with struct): Redis interns every
** argument as a Lua string before the script runs, and a dozen decimal
** arguments cost the server more than the GCRA step itself. */
static void arg_int(rcl_cmd *c, long long x) {
  unsigned char *b = c->nums + 8 * c->nnum++;
  uint64_t u = (uint64_t)x;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(b, &u, 8); /* one store where the loop below makes eight */
#else
  int i;
  for (i = 0; i < 8; i++)
    b[i] = (unsigned char)(u >> (8 * i));
#endif
}
/* The numbers from base on, as one argument. */
static void arg_nums(rcl_cmd *c, int base) {
  arg_raw(c, (const char *)c->nums + 8 * (size_t)base,
          8 * (size_t)(c->nnum - base));
}
/* numkeys, the one decimal argument: 1..SLUICE_GROUP_MAX */
static void arg_numkeys(rcl_cmd *c, int nk) {
  c->numkeys[0] = (char)('0' + nk / 10);
  c->numkeys[1] = (char)('0' + nk % 10);
  if (nk < 10)
    arg_raw(c, c->numkeys + 1, 1);
  else
    arg_raw(c, c->numkeys, 2);
}
static void arg_key(rcl_cmd *c, const rcl_store *r, int i,
                    const sluice_key *k) {
  char *b = c->keys[i];
  memcpy(b, r->prefix, r->prefix_len);
  memcpy(b + r->prefix_len, k->data, k->len);
  arg_raw(c, b, r->prefix_len + k->len);
}

/* The command that runs programs on node ni: the module's, or the Lua's
** (the same arguments follow, and the same reply comes back). */
void sluice__rcl_arg_engine(rcl_cmd *c, const rcl_store *r, int ni) {
  if (r->nodes[ni].module) {
    arg_raw(c, "SLUICE.RUN", 10);
    return;
  }
  if (r->nodes[ni].fn) {
    arg_raw(c, "FCALL", 5);
    arg_raw(c, sluice_rcl_script_function,
            sizeof sluice_rcl_script_function - 1);
    return;
  }
  arg_raw(c, "EVALSHA", 7);
  arg_raw(c, sluice_rcl_script_sha, 40);
}

static long long dur_arg(int64_t d) {
  return d == SLUICE_FOREVER ? -1 : (long long)d;
}

/* The parameters the Lua port reproduces exactly (lua/entry.lua). */
int sluice__rcl_range_check(const sluice_op *op) {
  const int64_t M = SLUICE_WIRE_EXACT_MAX;
  int i;
  switch (op->algo) {
  case SLUICE_ALGO_GCRA: {
    const sluice_gcra_params *p = op->params;
    for (i = 0; i < op->nkeys; i++)
      if (p[i].period_ns > M || p[i].burst > M / p[i].period_ns)
        return SLUICE_ERANGE;
    return SLUICE_OK;
  }
  case SLUICE_ALGO_SWINDOW: {
    const sluice_window_params *p = op->params;
    return (p->window_ns > M || p->limit > M / p->window_ns) ? SLUICE_ERANGE
                                                             : SLUICE_OK;
  }
  case SLUICE_ALGO_FWINDOW:
    return ((const sluice_window_params *)op->params)->window_ns > M
               ? SLUICE_ERANGE
               : SLUICE_OK;
  case SLUICE_ALGO_DISTINCT:
    return ((const sluice_distinct_params *)op->params)->window_ns > M
               ? SLUICE_ERANGE
               : SLUICE_OK;
  case SLUICE_ALGO_PENALTY: {
    const sluice_penalty_params *p = op->params;
    if (p->strike_window_ns > M || p->offense_ttl_ns > M)
      return SLUICE_ERANGE;
    for (i = 0; i < 3; i++)
      if (p->box_ns[i] != SLUICE_FOREVER && p->box_ns[i] > M)
        return SLUICE_ERANGE;
    return SLUICE_OK;
  }
  case SLUICE_ALGO_LEASE:
    return ((const sluice_lease_params *)op->params)->ttl_ns > M
               ? SLUICE_ERANGE
               : SLUICE_OK;
  default:
    return SLUICE_EINVAL;
  }
}

/* A program's header, in wire.h's SLUICE_WIRE_* order (the id's words
** zero: program_id fills them in). */
static void build_header(rcl_cmd *c, const rcl_store *r, int nkeys,
                         int nsteps, int64_t now) {
  arg_int(c, nkeys);
  arg_int(c, nsteps);
  if (r->testclock) {
    arg_int(c, (long long)((uint64_t)now >> 32));
    arg_int(c, (long long)((uint64_t)now & 0xffffffffu));
  } else {
    arg_int(c, -1);
    arg_int(c, 0);
  }
  arg_int(c, 0);
  arg_int(c, 0);
  arg_int(c, 0);
  arg_int(c, r->testclock ? RCL_TEST_MIN_TTL_MS : 0);
}

static void arg_gcra(rcl_cmd *c, const sluice_gcra_params *p) {
  arg_int(c, (long long)p->rate);
  arg_int(c, (long long)p->period_ns);
  arg_int(c, (long long)p->burst);
}

/* A step's parameters, in the order the script reads them; returns how
** many numbers that was. */
static int arg_params(rcl_cmd *c, int algo, int nk, const void *params) {
  int i, n0 = c->nnum;
  switch (algo) {
  case SLUICE_ALGO_GCRA:
    for (i = 0; i < nk; i++)
      arg_gcra(c, (const sluice_gcra_params *)params + i);
    break;
  case SLUICE_ALGO_SWINDOW:
  case SLUICE_ALGO_FWINDOW: {
    const sluice_window_params *p = params;
    arg_int(c, (long long)p->limit);
    arg_int(c, (long long)p->window_ns);
    break;
  }
  case SLUICE_ALGO_DISTINCT: {
    const sluice_distinct_params *p = params;
    arg_int(c, (long long)p->threshold);
    arg_int(c, (long long)p->window_ns);
    break;
  }
  case SLUICE_ALGO_PENALTY: {
    const sluice_penalty_params *p = params;
    arg_int(c, (long long)p->strike_threshold);
    arg_int(c, (long long)p->strike_window_ns);
    for (i = 0; i < 3; i++)
      arg_int(c, dur_arg(p->box_ns[i]));
    arg_int(c, (long long)p->offense_ttl_ns);
    break;
  }
  default: { /* SLUICE_ALGO_LEASE */
    const sluice_lease_params *p = params;
    arg_int(c, (long long)p->max);
    arg_int(c, (long long)p->ttl_ns);
    break;
  }
  }
  return c->nnum - n0;
}

/* A program's id on FCALL node ni (wire.h): the SHA-256 of its steps'
** bytes, computed once per program this lane sends (found again by the
** bytes themselves, compared whole), put in the header.  1: the lane sent
** this program to ni before, so the id alone may go (the library answers
** SLUICE_WIRE_NOPROGRAM if it does not know it, and the call goes again
** whole: handle_reply).  A collision would be two programs with one
** SHA-256: none is known, and the library checks the step and key counts
** besides. */
static int program_id(rcl_cmd *c, int ni, unsigned char *id,
                      const unsigned char *b, size_t len) {
  const uint64_t node = (uint64_t)1 << ni;
  /* FNV-1a over 8-byte words (the numbers are int64s), a shift folding
  ** the high bits down: a slot, not a proof (the bytes are compared). */
  uint64_t fp = 14695981039346656037ull, w;
  unsigned char md[SHA256_DIGEST_LENGTH];
  rcl_pid *e;
  size_t i;
  for (i = 0; i + 8 <= len; i += 8) {
    memcpy(&w, b + i, 8);
    fp = (fp ^ w) * 1099511628211ull;
    fp ^= fp >> 29;
  }
  for (; i < len; i++)
    fp = (fp ^ b[i]) * 1099511628211ull;
  e = &c->pids[fp % RCL_PIDS];
  if (e->len == len && e->fp == fp && memcmp(e->bytes, b, len) == 0) {
    memcpy(id, e->id, sizeof e->id);
    if (e->nodes & node)
      return 1;
    e->nodes |= node;
    return 0;
  }
  SHA256(b, len, md);
  memcpy(id, md, SLUICE_WIRE_PROG_ID_BYTES);
  if (len <= RCL_PID_BYTES) {
    e->len = len;
    e->fp = fp;
    e->nodes = node;
    memcpy(e->id, md, sizeof e->id);
    memcpy(e->bytes, b, len);
  }
  return 0;
}

/* Job j's program as one argument: its header, then each step's numbers
** and its parameters (wire.h; the script's lua/program.lua).  On an FCALL
** node the header carries the program's id, and a program this lane sent
** before goes as its id alone (idonly: a call of one program, at server
** time) or the header alone. */
static void build_program(rcl_cmd *c, const rcl_store *r, const rcl_job *j,
                          int idonly) {
  const sluice_program *p = j->prog;
  int i, base = c->nnum;
  build_header(c, r, p->nkeys, p->nsteps, j->now);
  for (i = 0; i < p->nsteps; i++) {
    const sluice_step *s = &p->steps[i];
    int at, np, end;
    /* In wire.h's SLUICE_WIRE_STEP_* order. */
    arg_int(c, s->algo);
    arg_int(c, s->kind);
    arg_int(c, s->key);
    arg_int(c, s->nkeys);
    arg_int(c, (long long)s->arg);
    arg_int(c, (long long)(s->id >> 32));
    arg_int(c, (long long)(s->id & 0xffffffffu));
    arg_int(c, s->when);
    arg_int(c, s->ref);
    arg_int(c, s->when2);
    arg_int(c, s->ref2);
    arg_int(c, s->fold);
    arg_int(c, s->ttl_from);
    at = c->nnum; /* the parameter count, known once they are in */
    arg_int(c, 0);
    np = arg_params(c, s->algo, s->nkeys, s->params);
    end = c->nnum;
    c->nnum = at;
    arg_int(c, np);
    c->nnum = end;
  }
  if (r->nodes[j->node].fn && !r->nodes[j->node].module) {
    unsigned char *h = c->nums + 8 * (size_t)base;
    const size_t hl = 8 * SLUICE_WIRE_HEADER;
    if (program_id(c, j->node, h + SLUICE_WIRE_PROG_ID_AT, h + hl,
                   8 * (size_t)(c->nnum - base) - hl) &&
        !j->whole) {
      c->nwhole = c->nnum - base;
      c->nnum = base + SLUICE_WIRE_HEADER;
      c->byid = 1;
      if (idonly && !r->testclock) { /* (wire.h: the id alone) */
        arg_raw(c, (const char *)h + SLUICE_WIRE_PROG_ID_AT,
                SLUICE_WIRE_PROG_ID_BYTES);
        return;
      }
    }
  }
  arg_nums(c, base);
}

static void arg_prog_keys(rcl_cmd *c, const rcl_store *r, const rcl_job *j,
                          int *k) {
  int i;
  for (i = 0; i < j->prog->nkeys; i++, (*k)++)
    arg_key(c, r, *k, &j->prog->keys[i]);
}

/* The numbers program p takes on the wire (build_program's). */
int sluice__rcl_prog_nums(const sluice_program *p) {
  int i, n = SLUICE_WIRE_HEADER;
  for (i = 0; i < p->nsteps; i++) {
    const sluice_step *s = &p->steps[i];
    n += SLUICE_WIRE_STEP +
         (s->algo == SLUICE_ALGO_GCRA      ? SLUICE_WIRE_GCRA_PARAMS * s->nkeys
          : s->algo == SLUICE_ALGO_PENALTY ? SLUICE_WIRE_PENALTY_PARAMS
                                           : 2);
  }
  return n;
}

/* The call of several programs led by jobs[head] (run_round's batch): the
** records of each in turn, then each program's numbers as its argument. */
void sluice__rcl_build_batch(rcl_cmd *c, const rcl_store *r,
                             const rcl_job *jobs, int head) {
  int i, k = 0, nk = 0;
  c->argc = 0;
  c->nnum = 0;
  c->byid = 0;
  sluice__rcl_arg_engine(c, r, jobs[head].node);
  c->head = c->argc;
  for (i = head; i >= 0; i = jobs[i].bnext)
    nk += jobs[i].prog->nkeys;
  arg_numkeys(c, nk);
  for (i = head; i >= 0; i = jobs[i].bnext)
    arg_prog_keys(c, r, &jobs[i], &k);
  for (i = head; i >= 0; i = jobs[i].bnext)
    build_program(c, r, &jobs[i], jobs[head].bnext < 0);
}

void sluice__rcl_build_job(rcl_cmd *c, const rcl_store *r, const rcl_job *j) {
  int k = 0;
  c->argc = 0;
  c->nnum = 0;
  c->byid = 0;
  if (j->type == JOB_DEL) {
    arg_raw(c, "DEL", 3);
    arg_key(c, r, 0, j->key);
    return;
  }
  sluice__rcl_arg_engine(c, r, j->node);
  c->head = c->argc;
  if (j->type == JOB_RUN) {
    arg_numkeys(c, j->prog->nkeys);
    arg_prog_keys(c, r, j, &k);
    build_program(c, r, j, 1);
    return;
  }
  /* JOB_GET: a program of no steps over the record */
  arg_numkeys(c, 1);
  arg_key(c, r, 0, j->key);
  build_header(c, r, 1, 0, j->now);
  arg_nums(c, 0);
}

/* ---------------------------------------------------- reply decoding --- */

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static int64_t le64(const unsigned char *p) {
  return (int64_t)((uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32);
}

/* A verdict, field by field as wire.h lists them. */
#define RD_I32(f)                                                              \
  v->f = (int)le32(p + at);                                                    \
  at += 4;
#define RD_U32(f)                                                              \
  v->f = le32(p + at);                                                         \
  at += 4;
#define RD_I64(f)                                                              \
  v->f = le64(p + at);                                                         \
  at += 8;
static void verdict_at(const unsigned char *p, sluice_verdict *v) {
  size_t at = 0;
  memset(v, 0, sizeof *v);
  SLUICE_WIRE_VERDICT_FIELDS(RD_I32, RD_U32, RD_I64)
}

/* Step i's verdict over a fresh record at now: what the sequencer answers
** for a box check whose record is absent (wire.h's FRESH mask), from the
** algorithm itself, so the engines send no verdict of their own for it.
** The step's parameters: j->box[i] (a split call's copy) or the step's. */
static int fresh_verdict(const rcl_job *j, int i, int64_t now,
                         sluice_verdict *v) {
  static const sluice_key nokey;
  sluice_state out[1];
  sluice_op op;
  memset(&op, 0, sizeof op);
  if (j->box) {
    if (!((j->boxes >> i) & 1u))
      return SLUICE_EBACKEND;
    op.params = &j->box[i];
  } else {
    if (!sluice_wire_fresh_step(&j->prog->steps[i]))
      return SLUICE_EBACKEND;
    op.params = j->prog->steps[i].params;
  }
  /* (the check's record and class change no verdict) */
  op.algo = SLUICE_ALGO_PENALTY;
  op.kind = SLUICE_OP_CHECK;
  op.nkeys = 1;
  op.keys = &nokey;
  return now >= 0 && sluice__op_step_validated(&op, NULL, out, now, v) ==
                         SLUICE_OK
             ? SLUICE_OK
             : SLUICE_EBACKEND;
}

/* Step i did not run: zeros and now, as lib/algo/program.c leaves it. */
static void skipped(sluice_program_result *res, int i) {
  memset(&res->v[i], 0, sizeof res->v[i]);
  res->v[i].now_ns = res->now_ns;
}

/* The short answer of a standard request (wire.h's SLUICE_WIRE_STD): step
** 0 a fresh box check, step 1 a GCRA group's admitting verdict, the
** rest skipped. */
static int decode_std(const unsigned char *b, const rcl_job *j,
                      sluice_program_result *res) {
  sluice_verdict *v = &res->v[1];
  int binding = (int)le32(b + SLUICE_WIRE_STD_BINDING), i;
  /* (a call in two halves has the step count alone, and the box's) */
  const sluice_step *g = j->box ? NULL : &j->prog->steps[1];
  if (j->prog->nsteps < 2 || binding < 0 || binding >= SLUICE_GROUP_MAX ||
      (g && (g->algo != SLUICE_ALGO_GCRA || binding >= g->nkeys)))
    return SLUICE_EBACKEND;
  res->allowed = 1;
  res->denied_by = -1;
  res->ran = 3;
  res->now_ns = le64(b + SLUICE_WIRE_STD_NOW);
  if (fresh_verdict(j, 0, res->now_ns, &res->v[0]) != SLUICE_OK)
    return SLUICE_EBACKEND;
  memset(v, 0, sizeof *v);
  v->allowed = 1;
  v->binding = binding;
  v->limit = le64(b + SLUICE_WIRE_STD_LIMIT);
  v->remaining = le64(b + SLUICE_WIRE_STD_REMAINING);
  v->reset_ns = le64(b + SLUICE_WIRE_STD_RESET);
  v->now_ns = res->now_ns;
  for (i = 2; i < j->prog->nsteps; i++)
    skipped(res, i);
  return SLUICE_OK;
}

/* A program's answer: its header, then the verdict of each step that ran
** but a fresh one; or the short answer of a standard request. */
static int decode_program(const redisReply *rep, const rcl_job *j,
                          sluice_program_result *res) {
  const sluice_program *p = j->prog;
  const unsigned char *b = (const unsigned char *)rep->str;
  size_t at = SLUICE_WIRE_PROG_HEADER;
  uint32_t fresh;
  int i;
  if (rep->type == REDIS_REPLY_STRING && rep->len == SLUICE_WIRE_STD)
    return decode_std(b, j, res);
  if (rep->type != REDIS_REPLY_STRING || rep->len < SLUICE_WIRE_PROG_HEADER)
    return SLUICE_EBACKEND;
  res->allowed = (int)le32(b + SLUICE_WIRE_PROG_ALLOWED);
  res->denied_by = (int)le32(b + SLUICE_WIRE_PROG_DENIED_BY);
  res->ran = le32(b + SLUICE_WIRE_PROG_RAN);
  fresh = le32(b + SLUICE_WIRE_PROG_FRESH);
  res->now_ns = le64(b + SLUICE_WIRE_PROG_NOW);
  if (res->denied_by < -1 || res->denied_by >= p->nsteps ||
      (p->nsteps < 32 && (res->ran >> p->nsteps) != 0) ||
      (fresh & ~res->ran) != 0)
    return SLUICE_EBACKEND;
  for (i = 0; i < p->nsteps; i++) {
    if (!((res->ran >> i) & 1u)) {
      skipped(res, i);
      continue;
    }
    if ((fresh >> i) & 1u) {
      if (fresh_verdict(j, i, res->now_ns, &res->v[i]) != SLUICE_OK)
        return SLUICE_EBACKEND;
      continue;
    }
    if (rep->len < at + SLUICE_WIRE_VERDICT)
      return SLUICE_EBACKEND;
    verdict_at(b + at, &res->v[i]);
    at += SLUICE_WIRE_VERDICT;
  }
  return rep->len == at ? SLUICE_OK : SLUICE_EBACKEND;
}

static int decode_get(const redisReply *rep, rcl_job *j) {
  const redisReply *val, *h, *l;
  const unsigned char *p;
  int64_t now, exp;
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3)
    return SLUICE_EBACKEND;
  val = rep->element[0];
  h = rep->element[1];
  l = rep->element[2];
  if (h->type != REDIS_REPLY_INTEGER || l->type != REDIS_REPLY_INTEGER)
    return SLUICE_EBACKEND;
  now = (int64_t)(((uint64_t)h->integer << 32) | (uint64_t)l->integer);
  if (val->type == REDIS_REPLY_NIL)
    return SLUICE_ENOTFOUND;
  if (val->type != REDIS_REPLY_STRING || val->len != SLUICE_WIRE_RECORD ||
      (unsigned char)val->str[SLUICE_WIRE_REC_LAYOUT] != SLUICE_STATE_LAYOUT)
    return SLUICE_ECORRUPT;
  p = (const unsigned char *)val->str;
  exp = le64(p + SLUICE_WIRE_REC_EXPIRY);
  if (exp <= now)
    return SLUICE_ENOTFOUND;
  j->st_out->w[0] = (uint64_t)le64(p + SLUICE_WIRE_REC_W0);
  j->st_out->w[1] = (uint64_t)le64(p + SLUICE_WIRE_REC_W1);
  *j->exp_out = exp;
  return SLUICE_OK;
}


static int parse_redirect(rcl_store *r, const char *s, int *slot) {
  /* "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" */
  const char *sp = strchr(s, ' '), *sp2, *colon;
  if (!sp)
    return -1;
  *slot = atoi(sp + 1);
  sp2 = strchr(sp + 1, ' ');
  if (!sp2)
    return -1;
  colon = strrchr(sp2 + 1, ':');
  if (!colon)
    return -1;
  return sluice__rcl_find_node(r, sp2 + 1, (size_t)(colon - sp2 - 1),
                               atoi(colon + 1), 1);
}

int sluice__rcl_handle_reply(rcl_store *r, rcl_job *j, int ni,
                             const redisReply *rep) {
  rcl_node *n = &r->nodes[ni];
  if (rep->type == REDIS_REPLY_ERROR) {
    const char *s = rep->str;
    int slot, t;
    /* The script or the library is gone (a restart without persistence,
    ** a failover to a node that never had it, SCRIPT / FUNCTION FLUSH):
    ** load it on that node and run the call again. */
    if (strncmp(s, "NOSCRIPT", 8) == 0 ||
        (n->fn && strncmp(s, "ERR Function not found", 22) == 0)) {
      r->st.noscript++;
      j->whole = 1; /* a library loaded now knows no program */
      return R_NOSCRIPT;
    }
    /* The library does not know the program's id (it never had it, or
    ** lost it as above, or emptied its cache): nothing ran; the program
    ** goes again whole. */
    if (j->type == JOB_RUN && !j->whole &&
        strncmp(s, SLUICE_WIRE_NOPROGRAM " ",
                sizeof SLUICE_WIRE_NOPROGRAM) == 0) {
      r->st.noscript++;
      j->whole = 1;
      return R_RETRY;
    }
    /* The module went away (MODULE UNLOAD) under engine=auto: the
    ** script from now on, on this connection. */
    if (n->module && r->engine == RCL_ENGINE_AUTO &&
        strncmp(s, "ERR unknown command", 19) == 0) {
      n->module = 0;
      return R_RETRY;
    }
    if (strncmp(s, "MOVED ", 6) == 0) {
      r->st.moved++;
      t = parse_redirect(r, s, &slot);
      if (t >= 0 && slot >= 0 && slot < RCL_SLOTS) {
        r->slot_node[slot] = (uint8_t)t;
        r->cluster = 1;
      }
      r->map_stale = 1;
      return R_RETRY;
    }
    if (strncmp(s, "ASK ", 4) == 0) {
      r->st.ask++;
      j->ask_node = parse_redirect(r, s, &slot);
      return R_RETRY;
    }
    if (strncmp(s, "TRYAGAIN", 8) == 0) {
      r->st.tryagain++;
      return R_RETRY;
    }
    if (strncmp(s, "CLUSTERDOWN", 11) == 0 || strncmp(s, "LOADING", 7) == 0 ||
        strncmp(s, "MASTERDOWN", 10) == 0 || strncmp(s, "READONLY", 8) == 0 ||
        strncmp(s, "BUSY", 4) == 0) {
      r->map_stale = 1;
      j->rc = SLUICE_EUNAVAIL;
    } else if (strncmp(s, "SLUICE ERANGE", 13) == 0) {
      j->rc = SLUICE_ERANGE;
    } else if (strncmp(s, "SLUICE ECORRUPT", 15) == 0) {
      j->rc = SLUICE_ECORRUPT;
    } else if (strncmp(s, "SLUICE EINVAL", 13) == 0) {
      j->rc = SLUICE_EINVAL;
    } else {
      j->rc = SLUICE_EBACKEND;
    }
    sluice_store_seterr(&r->base, j->rc, 0, "redis %s:%d: %.90s", n->host,
                        n->port, s);
    return R_DONE;
  }
  switch (j->type) {
  case JOB_GET:
    j->rc = decode_get(rep, j);
    break;
  case JOB_RUN:
    if (j->res) {
      j->rc = decode_program(rep, j, j->res);
    } else {
      sluice_program_result one;
      j->rc = decode_program(rep, j, &one);
      if (j->rc == SLUICE_OK)
        *j->v = one.v[0];
    }
    break;
  default:
    j->rc = rep->type != REDIS_REPLY_INTEGER ? SLUICE_EBACKEND
            : rep->integer > 0               ? SLUICE_OK
                                             : SLUICE_ENOTFOUND;
    break;
  }
  if (j->rc == SLUICE_EBACKEND || j->rc == SLUICE_ECORRUPT)
    sluice_store_seterr(&r->base, j->rc, 0, "redis %s:%d: unexpected reply",
                        n->host, n->port);
  return R_DONE;
}

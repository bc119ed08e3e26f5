/*
** A decision in two halves (include/sluice/halves.h): the flow of
** decide.c run so that every store call it makes can leave the process as
** bytes the host carries, and the flow picks up where it left when the
** reply is back.
**
** How the flow resumes: by running it again.  The flow is deterministic
** given its context (the time, the request, the breaker's ticket, all
** fixed at begin), the answers of its store calls and its random lease
** ids.  The tape keeps those answers and ids; each pass of the flow
** replays the tape and stops at the first store call not on it, which
** goes to the host (SLUICE__PENDING unwinds the flow: every caller
** returns any rc other than SLUICE_OK at once).  A request makes at most
** eight store calls (the per-IP backstop; a declared route's program per
** hash-tag group, at most four, and the give-backs of all but the last
** after a refusal), so a pass costs a few key builds, never a store call
** twice.
** Nothing the flow records (counters, events, the deny cache, the
** breaker) happens before the last store call is answered, so a pass
** that stops records nothing.
**
** sluice_policy_decide() on a store that splits its calls (Redis) is
** these halves with the store carrying the bytes on its own connections
** (SLUICE__CTL_SPLIT_CARRY): the same flow, the same reply path.  On any
** other store no call goes out: begin decides in its first pass, and
** sluice_policy_decide() keeps its direct path.
*/
#include <stdlib.h>
#include <string.h>

#include "declared.h"
#include "flow.h"
#include "split.h"
#include "sluice/halves.h"
#include "random.h"

#define TAPE_CALLS 8 /* store calls of one request, at most */
#define TAPE_IDS 2

typedef struct sluice__tape {
  int n;       /* store calls answered */
  int pos;     /* replayed in this pass */
  int nid, idpos;
  uint64_t ids[TAPE_IDS];
  struct {
    int rc;
    sluice_verdict v;
    sluice_program_result res;
  } call[TAPE_CALLS];
  sluice__split *sp;
} sluice__tape;

enum { C_IDLE, C_OUT };

struct sluice_call {
  sluice_policy *p;
  int state;
  int split; /* the store splits its calls */
  int store_err;
  int kind;       /* SLUICE_CALL_*: what the flow is */
  uint64_t lease; /* SLUICE_CALL_RELEASE: the lease */
  int result;     /* SLUICE_CALL_RELEASE, SLUICE_CALL_SETTLE: its result */
  /* SETTLE: the decision settled (flagged once done), its differences
  ** and the time of its charge. */
  sluice_decision *settled;
  int64_t delta[SLUICE__RLIMITS_MAX];
  uint64_t at;
  sluice__ctx c;
  sluice_decision d;
  sluice__tape tape;
  sluice__split sp;
};

/* ---------------------------------------------------- the flow's hooks --- */

int sluice__store_call(sluice__ctx *c, const sluice_op *op,
                       const sluice_program *pr, sluice_verdict *v,
                       sluice_program_result *res) {
  sluice__tape *t = c->tape;
  sluice__split *sp = t->sp;
  int rc, k;
  if (t->pos == t->n) {
    if (t->n == TAPE_CALLS)
      return SLUICE_EINVAL; /* a flow with more calls than the tape holds */
    k = t->n;
    sp->op = op;
    sp->prog = pr;
    sp->now = c->now;
    sp->v = &t->call[k].v;
    sp->res = &t->call[k].res;
    rc = sluice__limiter_split(c->p->lim, SLUICE__CTL_SPLIT_BEGIN, sp);
    if (rc == SLUICE__SPLIT_SEND)
      return SLUICE__PENDING;
    /* Done at once (parameters the store refuses), or refused here. */
    t->call[k].rc = rc == SLUICE__SPLIT_DONE ? sp->rc : rc;
    t->n++;
  }
  k = t->pos++;
  if (v)
    *v = t->call[k].v;
  if (res)
    *res = t->call[k].res;
  return t->call[k].rc;
}

int sluice__random_id(sluice__ctx *c, uint64_t *id) {
  sluice__tape *t = c->tape;
  int rc;
  if (t && t->idpos < t->nid) {
    *id = t->ids[t->idpos++];
    return SLUICE_OK;
  }
  *id = 0;
  while (*id == 0)
    if ((rc = sluice__random_bytes(id, sizeof *id)) != SLUICE_OK) {
      c->store_err = rc;
      return rc;
    }
  if (t && t->nid < TAPE_IDS) {
    t->ids[t->nid++] = *id;
    t->idpos = t->nid;
  }
  return SLUICE_OK;
}

/* ------------------------------------------------------------ passes --- */

/* 1 when the policy's store splits its calls (asked once). */
static int store_splits(sluice_policy *p) {
  int s = atomic_load_explicit(&p->split, memory_order_relaxed);
  if (s == 0) {
    sluice__split *sp = malloc(sizeof *sp);
    s = 2;
    if (sp && sluice__limiter_split(p->lim, SLUICE__CTL_SPLIT_OPEN, sp) ==
                  SLUICE_OK) {
      s = 1;
      (void)sluice__limiter_split(p->lim, SLUICE__CTL_SPLIT_CLOSE, sp);
    }
    free(sp);
    if (!sp)
      return 0; /* ask again next time */
    atomic_store_explicit(&p->split, s, memory_order_relaxed);
  }
  return s == 1;
}

static void call_init(sluice_call *call, sluice_policy *p) {
  call->p = p;
  call->state = C_IDLE;
  call->split = store_splits(p);
  call->tape.sp = &call->sp;
  call->sp.status = SLUICE__SPLIT_DONE;
}

/* A decision in flight given up: the breaker's ticket back. */
static void abandon(sluice_call *call) {
  if (call->state == C_OUT && call->kind == SLUICE_CALL_DECIDE)
    sluice__breaker_abandon(&call->p->brk, call->c.ticket);
  call->state = C_IDLE;
  call->sp.status = SLUICE__SPLIT_DONE;
}

/* Run the flow over the tape: to its end (the decision), or to the first
** store call not on it. */
static int pass(sluice_call *call, sluice_decision *d) {
  sluice__ctx *c = &call->c;
  int rc;
  call->tape.pos = 0;
  call->tape.idpos = 0;
  if (call->kind == SLUICE_CALL_RELEASE)
    rc = sluice__lease_store(c, call->lease, SLUICE_OP_LEASE_RELEASE);
  else if (call->kind == SLUICE_CALL_SETTLE)
    rc = sluice__decl_adjust(c, call->delta, call->at);
  else
    rc = sluice__decide_store(c, &call->d);
  if (rc == SLUICE__PENDING) {
    call->state = C_OUT;
    return SLUICE_CALL_SEND;
  }
  call->state = C_IDLE;
  call->sp.status = SLUICE__SPLIT_DONE;
  if (call->kind != SLUICE_CALL_DECIDE) {
    call->result = rc;
    if (call->kind == SLUICE_CALL_SETTLE && rc == SLUICE_OK)
      call->settled->flags |= SLUICE_DECISION_SETTLED;
    return SLUICE_CALL_DONE;
  }
  rc = sluice__decide_end(c, rc, &call->d);
  *d = call->d;
  return rc == SLUICE_OK ? SLUICE_CALL_DONE : rc;
}

static int begin_at(sluice_call *call, const sluice_request *q, int64_t now,
                    sluice_decision *d) {
  sluice__ctx *c = &call->c;
  int rc;
  abandon(call);
  call->store_err = 0;
  call->kind = SLUICE_CALL_DECIDE;
  rc = sluice__decide_begin(call->p, q, now, c, &call->d);
  if (rc != SLUICE_OK) {
    *d = call->d;
    return rc;
  }
  call->tape.n = call->tape.nid = 0;
  c->tape = call->split ? &call->tape : NULL;
  sluice__decide_admit(c, &call->d);
  return pass(call, d);
}

/* The store's half said it is done: its answer on the tape, the flow on. */
static int answered(sluice_call *call, int st, sluice_decision *d) {
  sluice__tape *t = &call->tape;
  if (st == SLUICE__SPLIT_SEND)
    return SLUICE_CALL_SEND;
  if (st == SLUICE__SPLIT_MORE)
    return SLUICE_CALL_MORE;
  if (st != SLUICE__SPLIT_DONE)
    return st; /* misuse: nothing changed */
  t->call[t->n].rc = call->sp.rc;
  t->n++;
  if (call->sp.rc != SLUICE_OK && sluice__store_failure(call->sp.rc))
    call->store_err = call->sp.rc;
  return pass(call, d);
}

/* ------------------------------------------------------------ the API --- */

int sluice_call_open(sluice_policy *p, sluice_call **out) {
  sluice_call *call;
  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  if (!p)
    return SLUICE_EINVAL;
  call = calloc(1, sizeof *call);
  if (!call)
    return SLUICE_ENOMEM;
  call_init(call, p);
  if (call->split &&
      sluice__limiter_split(p->lim, SLUICE__CTL_SPLIT_OPEN, &call->sp) !=
          SLUICE_OK) {
    free(call);
    return SLUICE_ENOMEM;
  }
  *out = call;
  return SLUICE_OK;
}

void sluice_call_close(sluice_call *call) {
  if (!call)
    return;
  abandon(call);
  if (call->split)
    (void)sluice__limiter_split(call->p->lim, SLUICE__CTL_SPLIT_CLOSE,
                                &call->sp);
  free(call);
}

/* A release or a settle starting on the handle (its result EINVAL until
** the flow gives one), and its first pass once its context is ready. */
static void start(sluice_call *call, int kind) {
  abandon(call);
  call->store_err = 0;
  call->kind = kind;
  call->result = SLUICE_EINVAL;
}

static int first_pass(sluice_call *call) {
  call->tape.n = call->tape.nid = 0;
  call->c.tape = call->split ? &call->tape : NULL;
  return pass(call, &call->d);
}

static int begin_release(sluice_call *call, const sluice_request *q,
                         uint64_t lease_id) {
  int rc;
  start(call, SLUICE_CALL_RELEASE);
  call->lease = lease_id;
  rc = sluice__lease_ctx(call->p, q, lease_id, &call->c);
  if (rc != SLUICE_OK)
    return call->result = rc;
  return first_pass(call);
}

static int begin_settle(sluice_call *call, const sluice_request *q,
                        sluice_decision *d, const sluice_attr *actual,
                        size_t nactual) {
  int rc, any;
  start(call, SLUICE_CALL_SETTLE);
  rc = sluice__settle_ctx(call->p, q, d, actual, nactual, &call->c,
                          call->delta, &any);
  if (rc != SLUICE_OK)
    return call->result = rc;
  call->settled = d;
  call->at = (uint64_t)d->now_ns;
  if (!any) { /* nothing changes: no store call */
    d->flags |= SLUICE_DECISION_SETTLED;
    call->result = SLUICE_OK;
    return SLUICE_CALL_DONE;
  }
  return first_pass(call);
}

int sluice_policy_begin(sluice_call *call, int kind, const sluice_request *q,
                        sluice_decision *d, const sluice_attr *actual,
                        size_t nactual) {
  if (!call || !d)
    return SLUICE_EINVAL;
  switch (kind) {
  case SLUICE_CALL_DECIDE:
    return begin_at(call, q, -1, d);
  case SLUICE_CALL_RELEASE:
    return begin_release(call, q, d->lease_id);
  case SLUICE_CALL_SETTLE:
    return begin_settle(call, q, d, actual, nactual);
  default:
    return SLUICE_EINVAL;
  }
}

int sluice_policy_finish(sluice_call *call, int err, const void *reply,
                         size_t len, sluice_decision *d) {
  int ctl = err ? SLUICE__CTL_SPLIT_FAIL : SLUICE__CTL_SPLIT_REPLY;
  if (call && !d && call->kind != SLUICE_CALL_DECIDE)
    d = &call->d;
  if (!call || !d || call->state != C_OUT || (!err && !reply && len))
    return SLUICE_EINVAL;
  if (err) {
    call->sp.err = err;
  } else {
    call->sp.reply = reply;
    call->sp.reply_len = len;
  }
  return answered(call, sluice__limiter_split(call->p->lim, ctl, &call->sp), d);
}

int sluice_call_get(const sluice_call *call, sluice_call_info *out) {
  int out_now, send;
  if (!call || !out)
    return SLUICE_EINVAL;
  out_now = call->state == C_OUT;
  send = out_now && call->sp.status == SLUICE__SPLIT_SEND;
  out->bytes = send ? call->sp.bytes : NULL;
  out->len = send ? call->sp.len : 0;
  out->host = out_now ? call->sp.host : "";
  out->port = out_now ? call->sp.port : 0;
  out->slot = out_now ? call->sp.slot : -1;
  out->replies = out_now ? call->sp.replies : 0;
  out->result = call->result;
  out->store_error = call->store_err;
  return SLUICE_OK;
}

/* ------------------------------------------- the blocking path on them --- */

/* sluice_policy_decide() on a store that splits its calls: the halves,
** the store carrying the bytes.  The handle lives on this stack. */
static int decide_carried(sluice_policy *p, const sluice_request *q,
                          int64_t now, sluice_decision *d) {
  sluice_call call;
  int rc;
  call_init(&call, p);
  if (sluice__limiter_split(p->lim, SLUICE__CTL_SPLIT_OPEN, &call.sp) !=
      SLUICE_OK)
    return SLUICE_ENOMEM;
  rc = begin_at(&call, q, now, d);
  while (rc == SLUICE_CALL_SEND)
    rc = answered(&call,
                  sluice__limiter_split(p->lim, SLUICE__CTL_SPLIT_CARRY,
                                        &call.sp),
                  d);
  abandon(&call); /* nothing in flight by now; an error said so */
  (void)sluice__limiter_split(p->lim, SLUICE__CTL_SPLIT_CLOSE, &call.sp);
  return rc == SLUICE_CALL_DONE ? SLUICE_OK : rc;
}

int sluice__decide_at(sluice_policy *p, const sluice_request *q, int64_t now,
                      sluice_decision *d) {
  sluice__ctx c;
  int rc;
  if (p && store_splits(p))
    return decide_carried(p, q, now, d);
  rc = sluice__decide_begin(p, q, now, &c, d);
  if (rc != SLUICE_OK)
    return rc;
  sluice__decide_admit(&c, d);
  return sluice__decide_end(&c, sluice__decide_store(&c, d), d);
}

/*
** The request flow's private side: what the files of one decision share.
** decide.c opens with the flow and its named choices; a decision builds a
** context (request.c), runs a program per hash-tag group (programs.c) for
** the route's declared limits (declared.c), turns what the
** store said into the decision (verdict.c), or, when the store fails,
** decides without it (failure.c).
*/
#ifndef SLUICE_LIB_POLICY_FLOW_H
#define SLUICE_LIB_POLICY_FLOW_H

#include "keys.h"
#include "policy_int.h"

struct sluice__tape;

/* Attributes a request may have: the built-in ones and the file's own
** (declared.h: SLUICE__A__BUILTIN + SLUICE__ATTRS_MAX, checked there). */
#define SLUICE__AID_MAX 24

/* Everything one decision needs, built before any store work. */
typedef struct sluice__ctx {
  sluice_policy *p;
  const sluice_request *req;
  int tier; /* index, or -1: the request names no tier */
  int64_t cost;
  int64_t now;
  char T[SLUICE_SCOPE_ID_LEN + 1]; /* the events' tenant scope id, or "" */
  char I[SLUICE_SCOPE_ID_LEN + 1]; /* the client address's (backstop) */
  int store_err; /* first store failure, 0 if none */
  int full;      /* the store had no room for a record (SLUICE_EFULL) */
  int tripped;   /* a box trip emitted events already */
  unsigned shadow;       /* SLUICE_SHADOW_* not enforced (staged rollout) */
  int box_shadowed;      /* boxed, but the box is not enforced: */
  sluice_verdict box;    /* its verdict, reported if nothing else refuses */
  int cached;  /* a shared deny cache's box decided it: no store call */
  int ticket;  /* the breaker's (sluice__breaker_admit) */
  int skipped; /* the breaker is open: decided as failed */
  int droute;  /* a route of declared limits (declared.c), or -1 */
  /* The parameter set of each of the route's limits, picked once when the
  ** context is set up (sluice__decl_pick(); a settle, whose report is read
  ** first, picks again). */
  const union sluice__lparams *ps[SLUICE_DECISION_LIMITS_MAX];
  /* A settle (settle.c): the attributes the caller reports back, read
  ** before the request's own; costs may then be 0. */
  const sluice_attr *settle;
  size_t nsettle;
  uint64_t scope_mix; /* the route's scopes, for the settle check */
  const char *who, *why; /* an operator's release, lift or renewal */
  /* A decision in two halves (halves.c): the store calls answered so far,
  ** replayed; NULL: every store call is made at once. */
  struct sluice__tape *tape;
  /* declared.c attr_id(): the keyed hash of each attribute a scope of this
  ** request names (bit a of aid_have: aid[a] is made), hashed at its first
  ** use however many scopes name it.  Last, so that setting a context up
  ** clears only the bits. */
  uint32_t aid_have;
  uint64_t aid[SLUICE__AID_MAX][2];
} sluice__ctx;

/* A program under construction: its records (keys built in place) and its
** steps.  Every decision is one of these per hash-tag group, run as one
** atomic store call. */
typedef struct sluice__prog {
  char kbuf[SLUICE_PROGRAM_KEYS][SLUICE__KEYLEN];
  sluice_key keys[SLUICE_PROGRAM_KEYS];
  sluice_step st[SLUICE_PROGRAM_STEPS];
  int nk, ns;
  int rclass; /* enum sluice_record_class; 0 unless set after the reset */
} sluice__prog;

/* Add a record built by one of keys.c's builders (the call's first
** argument is the buffer); returns its index. */
#define SLUICE__REC(g, fn, ...)                                                \
  ((g)->keys[(g)->nk] = fn((g)->kbuf[(g)->nk], __VA_ARGS__), (g)->nk++)

/* request.c: SLUICE_OK when id is set (or optional and absent) and fits
** SLUICE_POLICY_ID_MAX; else the error, with d->invalid_field = field
** when d is not NULL. */
int sluice__id_ok(const char *s, int required, const char *field,
                  sluice_decision *d);
/* The keyed scope id of raw into out. */
void sluice__scope(const sluice_policy *p, const char *raw,
                   char out[SLUICE_SCOPE_ID_LEN + 1]);
/* 1 when a route entry (method pattern pm, "*" any; route pattern pr, a
** trailing '*' a prefix, a `*` or `{NAME}` segment any one segment)
** matches method and route (its query cut). */
int sluice__route_match(const char *pm, const char *pr, const char *method,
                        const char *route);
/* The path segment a route pattern's `{name}` matched in route (its
** length in *n), or NULL: no such parameter, or no match. */
const char *sluice__route_param(const char *pattern, const char *route,
                                const char *name, size_t *n);
/* Check q and fill *c (now and shadow are the caller's); on error d says
** which field. */
int sluice__resolve(sluice_policy *p, const sluice_request *q, sluice__ctx *c,
                    sluice_decision *d);

/* programs.c: the errors that switch to the failure mode (decide.c,
** "Store failure"). */
int sluice__store_failure(int rc);
int sluice__step(sluice__prog *g, int algo, int kind, int key, int nkeys,
                 const void *params, int64_t arg, uint64_t id);
void sluice__when(sluice__prog *g, int i, int w, int ref, int fold);
int sluice__run(sluice__ctx *c, sluice__prog *g, sluice_program_result *r);
/* The same, `built` 1 for a program of a shape checked when the policy
** opened (declared.c, "Checked at open"): the store runs it without
** validating it again (split.h's sluice__limiter_run_built(), which
** outside callers cannot reach). */
int sluice__run_as(sluice__ctx *c, sluice__prog *g, sluice_program_result *r,
                   int built);
/* The program g holds, for a store call. */
void sluice__prog_program(const sluice__prog *g, sluice_program *pr);
/* 1 when step i ran. */
int sluice__ran(const sluice_program_result *r, int i);
/* The Retry-After notice and the strike after step `denier` (decide.c,
** "A strike needs a notice"): notice RENEW (TTL: denier's Retry-After) if
** it denied, ACQUIRE if no notice was live, STRIKE if one was (`every`: if
** denier denied) and box step box_step allowed; records box and ra.
** Returns the STRIKE step, the RENEW step in *renew. */
int sluice__strike_steps(sluice__ctx *c, sluice__prog *g, int box, int ra,
                         int denier, int box_step,
                         const sluice_penalty_params *pp, int every,
                         int *renew);

/* verdict.c */
void sluice__emit(sluice__ctx *c, int type, int scope_kind, int level,
                  const char *scope_id, int64_t until, int outcome);
void sluice__box_seen(sluice__ctx *c, int kind, const char *id,
                      const sluice_verdict *v);
void sluice__fill_box(sluice__ctx *c, const sluice_verdict *v,
                      sluice_decision *d);

/* declared.c: the route of declared limits whose method, route and
** `when` match the request (the first in the file), or -1; the store's part of a request on one; release or renew (kind) its
** leases. */
int sluice__decl_match(const sluice_policy *p, const sluice_request *q);
/* Each of c's route's limits' parameter set for the request into c->ps. */
void sluice__decl_pick(sluice__ctx *c);
/* 1 when c's route is exempt: declared with no limits and no penalty. */
int sluice__decl_exempt(const sluice__ctx *c);
int sluice__decide_declared(sluice__ctx *c, sluice_decision *d);
int sluice__declared_lease_op(sluice__ctx *c, uint64_t id, int kind);
/* The cost of each of the route's limits at this request, 0 for a limit
** that cannot be settled (leases, a count cap); adjust each limit by
** delta[i] (0: not at all), the settled charge made at `at`, in one
** program (settle.c). */
int sluice__decl_costs(sluice__ctx *c, int64_t costs[], sluice_decision *d);
int sluice__decl_adjust(sluice__ctx *c, int64_t delta[], uint64_t at);
/* What an admitted decision records of its charges (never 0): a keyed
** hash of the route, its scopes (c->scope_mix, left by the program's build
** or by sluice__decl_costs()), costs[] and the time. */
uint64_t sluice__settle_check(const sluice__ctx *c, const int64_t costs[],
                              int64_t at);
/* declared.c, for declared_info.c: a limit's record keys for the request
** in c (*nrec of them, in g->keys) and the parameter set it would use. */
union sluice__lparams;
int sluice__decl_keys(sluice__ctx *c, int limit, sluice__prog *g, int *nrec,
                      const union sluice__lparams **ps, sluice_decision *d);
/* settle.c: a settle checked and worked out, up to its store call (the
** blocking settle and its halves share it). */
int sluice__settle_ctx(sluice_policy *p, const sluice_request *req,
                       sluice_decision *d, const sluice_attr *actual,
                       size_t nactual, sluice__ctx *c, int64_t delta[],
                       int *any);

/* failure.c: 1 when a cached box decides the request (degraded: the
** store failed or the breaker is open). */
int sluice__cached_box(sluice__ctx *c, int degraded, sluice_decision *d);
void sluice__failure_mode(sluice__ctx *c, int err, sluice_decision *d);

/* halves.c: a store call of the flow (op or program, with v or res):
** made at once, replayed from the tape, or SLUICE__PENDING when it is now
** out with the host (every caller returns any rc != SLUICE_OK at once). */
#define SLUICE__PENDING (-30999)
int sluice__store_call(sluice__ctx *c, const sluice_op *op,
                       const sluice_program *pr, sluice_verdict *v,
                       sluice_program_result *res);
/* A random lease id (never 0), the same one on every pass of the flow. */
int sluice__random_id(sluice__ctx *c, uint64_t *id);

/* leases.c: a lease op's context (resolved, at the limiter's now), and
** its store part on it (release or renew, kind). */
int sluice__lease_ctx(sluice_policy *p, const sluice_request *q, uint64_t id,
                      sluice__ctx *c);
int sluice__lease_store(sluice__ctx *c, uint64_t id, int kind);
/* release.c's SLUICE_HOLD_LEASE: the context, then the store part. */
int sluice__lease_op(sluice_policy *p, const sluice_request *q, uint64_t id,
                     int kind);

/* The per-IP backstop (backstop.c): a fixed window per client address
** (c->I).  SLUICE_OK with *refused set when the address is over its
** limit (d filled as a 429), or the store's error. */
int sluice__backstop(sluice__ctx *c, sluice_decision *d, int *refused);

/* decide.c: one decision in its phases, for sluice_policy_decide() and
** the halves.  begin checks the request and fills c and the decision's
** facts (now < 0: the clock's time); admit asks the deny cache and the
** breaker; store is the store's part; end turns its rc into the decision
** (or returns a request error). */
int sluice__decide_begin(sluice_policy *p, const sluice_request *q,
                         int64_t now, sluice__ctx *c, sluice_decision *d);
void sluice__decide_admit(sluice__ctx *c, sluice_decision *d);
int sluice__decide_store(sluice__ctx *c, sluice_decision *d);
int sluice__decide_end(sluice__ctx *c, int rc, sluice_decision *d);
/* All four in a row: sluice_policy_decide() at now. */
int sluice__decide_at(sluice_policy *p, const sluice_request *q, int64_t now,
                      sluice_decision *d);

#endif

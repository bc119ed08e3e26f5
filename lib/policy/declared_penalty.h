/*
** Penalties and failure modes declared for routes of declared limits
** (docs/policy.md "Declared penalties"): the file's `penalties` (a box
** scope, what a strike is, the ladder's levels with their durations and
** actions, per parameter set) and a route's `penalty` and `failure`,
** parsed by declared_penalty_conf.c and run by declared_penalty.c inside
** the route's one program, with the machinery the built-in policy uses:
** the penalty step, the Retry-After notice, the deny cache and the
** degraded limiter.  Included by declared.h (its types need the limits').
*/
#ifndef SLUICE_LIB_POLICY_DECLARED_PENALTY_H
#define SLUICE_LIB_POLICY_DECLARED_PENALTY_H

#define SLUICE__PENALTIES_MAX 8
#define SLUICE__DETAIL_MAX 96 /* a penalty's `detail`, bytes */

/* What counts as a strike. */
enum {
  SLUICE__STRIKE_EARLY,   /* a denial while an earlier one's Retry-After runs */
  SLUICE__STRIKE_EVERY,   /* every denial (the spec's section-6 script) */
  SLUICE__STRIKE_REPORTED /* a request reporting a status (a 401, a failed
                             sign-in): no limit work, a strike */
};

/* What a level does besides the box (bits). */
enum {
  SLUICE__ACT_EDGE_DENY = 1, /* decision flag EDGE_DENY + EDGE_DENY event */
  SLUICE__ACT_ALERT = 2,     /* ALERT event */
  SLUICE__ACT_SUSPEND = 4,   /* boxed until lifted by hand: 403, SUSPEND */
  SLUICE__ACT_PAGE = 8,      /* PAGE event */
  SLUICE__ACT_BAN = 16       /* IP_BAN event */
};

/* One parameter set of a penalty: the ladder's numbers and each level's
** actions. */
typedef struct sluice__pset {
  sluice_penalty_params pp;
  unsigned actions[3];
} sluice__pset;

typedef struct sluice__penalty {
  char name[32];
  int scope[4], nscope; /* attribute indices, like a limit's scope */
  int strike;           /* SLUICE__STRIKE_* */
  int select;           /* attribute choosing the set, or -1 */
  sluice__pset base;
  int npsets;
  char psval[8][32]; /* a set's name: its value of `by`, or [i] */
  sluice__amatch psw[8]; /* the request a set is for (declared_when.c) */
  sluice__pset ps[8];
  /* strike = "reported": attribute `report` with one of these values makes
  ** the request a report (a strike, no limits). */
  int report;
  int nvalues;
  char values[8][32];
  /* reported.window = "sliding": reports are failures counted in a
  ** sliding window of strike_window_ns (a login's failure window), the
  ** box tripping at `strikes` of them; "fixed": the penalty step's
  ** strikes. */
  int sliding;
  /* reported.kept: values of `report` that say a known client failed (a
  ** wrong secret): in an untrusted group, its records are then never
  ** evicted (SLUICE_CLASS_UNTRUSTED_KEPT), so a flood of made-up names
  ** cannot reset them. */
  int nkept;
  char kept[8][32];
  /* spread = { of = ATTR; distinct = D; window_ms = W; trips = "NAME"; }:
  ** a report also counts the distinct values of `of` in this scope (a
  ** subject failing from many addresses); at D of them in W, penalty
  ** `trips` (listed after this one on the route, its box in another
  ** group) trips to level 3 at once, in its own program. */
  int spread_of; /* -1: none */
  int spread_trips; /* the penalty's index, resolved after loading */
  char spread_name[32];
  sluice_distinct_params spread;
  /* Credential stuffing, on reports: `stuffing` reports in a fixed window
  ** across `distinct` values of attribute `of` trip level 3 at once. */
  int of; /* -1: no stuffing detection */
  sluice_window_params stuffing;
  sluice_distinct_params distinct;
  /* `detail`: who is locked out and why, the problem detail's first words
  ** ("" : the generic wording). */
  char detail[SLUICE__DETAIL_MAX + 1];
  int line;
  uint64_t nid[2]; /* the keyed hash of its name, as a limit's */
} sluice__penalty;

/* A decision's penalty: where its steps are in the route's program. */
typedef struct sluice__pen_run {
  const sluice__penalty *pn;
  const sluice__pset *ps; /* the set the request's attribute picks */
  int box;                /* the box CHECK step */
  int renew[8], strike[8]; /* per limit of the route: its notice RENEW and
                              STRIKE steps, -1 when it takes no strikes */
  int kind; /* SLUICE_SCOPE_IP for a scope that starts with the address,
               else SLUICE_SCOPE_KEY */
  int report;        /* this request is a report (strike = "reported") */
  int rstrike, rtrip3; /* a report's STRIKE (sliding: level-1 TRIP) and
                          stuffing TRIP steps, or -1 */
  int rfail;           /* sliding: the failures window's COUNT step, or -1 */
  int rspread;         /* the spread's distinct ADD step, or -1 */
  int force3; /* set by the caller before the build: an earlier box's
                 spread trips this one to level 3 */
  sluice_window_params fails; /* sliding: its numbers (the set's) */
  /* The box's scope id (its key's body, declared.c), spelled in hex for
  ** events and the deny cache only when one is said (pen_id()). */
  uint64_t idh[2];
} sluice__pen_run;

struct sluice__ctx;
struct sluice__decl;
struct sluice__prog;
struct sluice__keyparts; /* declared.c: a decision's key parts */
struct sluice_program_result;
struct sluice_decision;

/* declared.c: the box's scope id into id (when not NULL) and, when g is
** not NULL, its records into g (the box, and the notice when `notice`);
** kp, when not NULL, is the route's key parts (its hash tag computed
** once), and holds the id after (sluice__decl_kp_id()). */
int sluice__decl_pen_recs(struct sluice__ctx *c,
                          const sluice__penalty *pn, struct sluice__prog *g,
                          int notice, char id[33], struct sluice__keyparts *kp,
                          struct sluice_decision *d);
void sluice__decl_kp_id(const struct sluice__keyparts *kp, uint64_t id[2]);
/* declared.c: one record of penalty pn's scope, key suffix sfx, into g. */
int sluice__decl_pen_rec(struct sluice__ctx *c, const sluice__penalty *pn,
                         struct sluice__prog *g, char sfx,
                         struct sluice_decision *d);
/* declared.c: a report's stuffing records (its fixed window and distinct
** values) into g. */
int sluice__decl_pen_stuffing_recs(struct sluice__ctx *c,
                                   const sluice__penalty *pn,
                                   struct sluice__prog *g,
                                   struct sluice_decision *d);

/* The parameter set of penalty pn the request picks, and the kind of its
** box's scope (SLUICE_SCOPE_IP, _SUBJECT or _KEY: events, counters, the
** deny cache, inspect). */
const sluice__pset *sluice__pen_pick(const struct sluice__ctx *c,
                                     const sluice__penalty *pn);
int sluice__pen_scope_kind(const sluice__penalty *pn);

/* declared_penalty_info.c: sluice_policy_inspect() of a policy file's
** box: the first declared penalty of the query's scope kind whose scope
** the query fills (SUBJECT: auth_subject as its first attribute). */
int sluice__inspect_declared(sluice_policy *p,
                             const sluice_inspect_query *q,
                             sluice_inspect_report *out);
/* declared_penalty_info.c, declared_info.c: sluice_policy_inspect() of a
** declared penalty's box or a declared limit's records by name, for the
** scope req names; *field: the attribute at fault on EINVAL or EKEY. */
int sluice__inspect_penalty(sluice_policy *p, const char *penalty,
                            const sluice_request *req,
                            sluice_inspect_report *out, const char **field);
int sluice__inspect_limit(sluice_policy *p, const char *limit,
                          const sluice_request *req, sluice_limit_state *out,
                          const char **field);
/* declared_info.c: the context of a request whose records are read (as a
** decision's); SLUICE_ENOTFOUND (*field "tier") for a tier not known. */
int sluice__inspect_ctx(sluice_policy *p, const sluice_request *req,
                        struct sluice__ctx *c, struct sluice_decision *d,
                        const char **field);

/* declared_penalty_conf.c: 1 when attribute a is listed in `optional`. */
int sluice__decl_optional(const struct sluice__decl *dl, int a);
/* 1 when penalty pn is skipped by this request: its scope starts with an
** optional attribute the request does not give. */
int sluice__pen_skipped(const struct sluice__ctx *c, const sluice__penalty *pn);

/* declared.c: attribute a's value for the request (NULL: not given), its
** length in *n. */
/* The events' tenant scope id (declared.c). */
const char *sluice__decl_tenant_hex(struct sluice__ctx *c);
const char *sluice__decl_attr_value(const struct sluice__ctx *c, int a,
                                    size_t *n);

/* declared.c: the request's cost for the route's first limit (what a
** decision reports when no limit binds: a box, a store failure). */
int sluice__decl_cost(const struct sluice__ctx *c, int64_t *cost,
                      struct sluice_decision *d);

/* declared_penalty.c, for declared.c's program: the box records of
** penalty pr->pn (set by the caller) and its CHECK (the program's first
** step); a limit's notice and strike steps
** after its own step s; reading the box (1: it decided the request); a
** rate limit's denial (Warning, the strike, a trip). */
int sluice__pen_head(struct sluice__ctx *c, struct sluice__prog *g,
                     sluice__pen_run *pr, struct sluice__keyparts *kp,
                     struct sluice_decision *d);
void sluice__pen_after(struct sluice__ctx *c, struct sluice__prog *g,
                       sluice__pen_run *pr, int i, int s);
/* declared.c: the record class of hash-tag group tg's programs for this
** request: untrusted when its first attribute is (declared.c untrusted()),
** kept when its penalty's `kept` names the report. */
int sluice__decl_group_class(const struct sluice__ctx *c, int tg);
/* 1 when the request is a report (strike = "reported") to any of the
** route's penalties. */
int sluice__pen_is_report(const struct sluice__ctx *c);
/* A report's steps after the box CHECK of pr->pn (set by the caller, as
** for sluice__pen_head()): 1 (no limits run), 2 when the request is a
** report to another of the route's penalties (this box is only checked),
** 0 when it is no report, or a negative error. */
int sluice__pen_report(struct sluice__ctx *c, struct sluice__prog *g,
                       sluice__pen_run *pr, struct sluice_decision *d);
void sluice__pen_report_read(struct sluice__ctx *c, const sluice__pen_run *pr,
                             const struct sluice_program_result *r,
                             struct sluice_decision *d);
/* A box only looked at (another box of the route refused the request):
** reported in d when it ends later than d's. */
void sluice__pen_look_read(struct sluice__ctx *c, const sluice__pen_run *pr,
                           const struct sluice_program_result *r,
                           struct sluice_decision *d);
int sluice__pen_boxed(struct sluice__ctx *c, const sluice__pen_run *pr,
                      const struct sluice_program_result *r,
                      struct sluice_decision *d);
void sluice__pen_denied(struct sluice__ctx *c, const sluice__pen_run *pr,
                        const struct sluice_program_result *r, int i,
                        struct sluice_decision *d);
/* failure.c: a declared route's box in the deny cache (1: it decides). */
int sluice__pen_cached(struct sluice__ctx *c, int degraded,
                       struct sluice_decision *d);
/* failure.c: a declared route when the store fails: 1 when the route
** runs on the degraded limiter (d then decided), 0 to fail it closed. */
int sluice__decl_degraded(struct sluice__ctx *c, struct sluice_decision *d);

#endif

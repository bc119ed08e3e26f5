/*
** Declared limits (docs/policy.md "Declared limits"): the policy file's
** `attributes`, `limits` and the routes that list limits, parsed and
** checked by declared_conf.c and run by declared.c.  A route of declared
** limits compiles, at open, into the steps of one program per hash-tag
** group (the first attribute of its limits' scopes); a decision only picks
** each limit's parameter set, builds its keys from the request's
** attributes and runs the programs.
**
** Memory: the SLUICE__*_MAX below are limits of the loader, not of the
** compiled policy.  The loader works in scratch arrays of those sizes,
** then packs what the file declared (its limits, their parameter sets,
** its routes, their costs and penalties) into one block the sluice__decl
** points into (sluice__decl_load(), sluice__decl_free()): a policy of a
** few limits costs a few KB, whatever the loader could hold.
*/
#ifndef SLUICE_LIB_POLICY_DECLARED_H
#define SLUICE_LIB_POLICY_DECLARED_H

#include <libconfig.h>
#include <string.h>

#include "sluice.h"

#define SLUICE__LIMITS_MAX 32  /* limits a file may declare */
#define SLUICE__ATTRS_MAX 16   /* caller attributes a file may declare */
#define SLUICE__SCOPE_MAX 4    /* attributes in one scope */
#define SLUICE__PSETS_MAX 32   /* parameter sets of one limit */
#define SLUICE__WHEN_MAX 4     /* attribute matches of a route or a set */
#define SLUICE__WVAL 48        /* a matched value and its NUL */
#define SLUICE__DROUTES_MAX 64 /* routes of declared limits */
#define SLUICE__RLIMITS_MAX SLUICE_DECISION_LIMITS_MAX /* limits one route applies */
#define SLUICE__COSTS_MAX 8    /* entries of a cost table */
#define SLUICE__DNAME 32       /* a name and its NUL */
#define SLUICE__TG_MAX 4       /* hash-tag groups one route spans */

/* Algorithms a limit may have; the file spells them as sluice__limit_algos
** (declared_conf.c). */
enum {
  SLUICE__L_GCRA,        /* token bucket: rate, period_ms, burst */
  SLUICE__L_SLIDING,     /* sliding window: limit, window_ms */
  SLUICE__L_FIXED,       /* fixed window: limit, window_ms */
  SLUICE__L_CONCURRENCY, /* lease set: max (1..32), ttl_ms */
  SLUICE__L_LOCK,        /* one lease: ttl_ms (409 by default) */
  SLUICE__L_CAP,         /* requests (not cost) per fixed window */
  SLUICE__L__COUNT
};

/* Built-in attributes, before the file's own (attribute index = these,
** then SLUICE__A__BUILTIN + i for the file's i-th). */
enum {
  SLUICE__A_TENANT,  /* sluice_request.tenant_id */
  SLUICE__A_KEY,     /* api_key_id */
  SLUICE__A_IP,      /* client_ip */
  SLUICE__A_METHOD,  /* method */
  SLUICE__A_ROUTE,   /* route, the query string cut */
  SLUICE__A_PATTERN, /* the matched route's pattern */
  SLUICE__A_TIER,    /* tier */
  SLUICE__A__BUILTIN
};

/* Attribute matches, all of which must hold (declared_when.c): attr[i]
** has value val[i], or any non-empty value for "*". */
typedef struct sluice__amatch {
  int n;
  int attr[SLUICE__WHEN_MAX];
  char val[SLUICE__WHEN_MAX][SLUICE__WVAL];
} sluice__amatch;

/* 1 when a match's value want holds for an attribute's value v of n bytes
** (given, n > 0, no NUL in them): "*", or want is those n bytes.  want's
** length is n exactly when want[n] ends it and its first n bytes are v's,
** so no strlen on a match made several times a decision. */
static inline int sluice__match_value(const char *want, const char *v,
                                      size_t n) {
  if (want[0] == '*' && want[1] == '\0')
    return 1;
  return n < SLUICE__WVAL && want[n] == '\0' && memcmp(v, want, n) == 0;
}

/* One parameter set: what a step's params point at. */
typedef union sluice__lparams {
  sluice_gcra_params g;
  sluice_window_params w;
  sluice_lease_params l;
} sluice__lparams;

typedef struct sluice__limit {
  char name[SLUICE__DNAME];
  char unit[SLUICE__DNAME]; /* "requests", "points", "tokens"... */
  int algo;                             /* SLUICE__L_* */
  int status;                           /* the denial's status: 429, 409 */
  int scope[SLUICE__SCOPE_MAX], nscope; /* attribute indices */
  int select; /* `by`: the attribute choosing the set, or -1 */
  sluice__lparams base; /* for a request no set matches */
  int npsets; /* sets in each of the three arrays below */
  char (*psval)[SLUICE__DNAME]; /* a set's name: its value of `by`, or [i] */
  sluice__amatch *psw;          /* the request a set is for */
  sluice__lparams *ps;
  /* Sets chosen by the tier alone: tierset[t] is tier t's set, -1 the
  ** base (worked out at open, sluice__decl_check_built()). */
  int bytier;
  signed char tierset[SLUICE_POLICY_TIERS_MAX];
  int64_t retry_max_ns; /* a denial's Retry-After at most this, 0: any */
  int line; /* in the file, for messages */
  /* The keyed hash of its name, made at open (sluice__decl_keyed()): a
  ** scope of several attributes folds their ids into it (declared.c). */
  uint64_t nid[2];
} sluice__limit;

enum { SLUICE__C_CONST, SLUICE__C_METHOD, SLUICE__C_RANGE, SLUICE__C_ATTR };

/* An entry of a cost table: a method's cost, or a range's. */
typedef struct sluice__centry {
  int64_t upto; /* RANGE: attribute value <= upto ... */
  int64_t cost; /* ... costs this (METHOD: the method does) */
  char method[8];
} sluice__centry;

/* A route's cost for one limit. */
typedef struct sluice__cost {
  int kind;         /* SLUICE__C_* */
  int attr;         /* RANGE, ATTR: the attribute read (a decimal integer) */
  int64_t value;    /* CONST; METHOD and RANGE: the value for anything else */
  int64_t max;      /* ATTR: the largest value accepted */
  int n;            /* METHOD, RANGE: entries (at most SLUICE__COSTS_MAX) */
  sluice__centry *e;
} sluice__cost;

#include "declared_penalty.h"

typedef struct sluice__droute {
  char method[8];
  char *route;          /* the pattern, at most SLUICE_POLICY_ROUTE_MAX */
  size_t lit; /* its bytes before the first '*' or '{': a request's path
                 must start with them (a cheap first test) */
  sluice__amatch *when; /* attributes the request must have too, or NULL */
  int n;     /* limits applied, in order */
  int limit[SLUICE__RLIMITS_MAX];
  sluice__cost *cost; /* n of them */
  /* 0: the limit runs alone; n >= 2: the first of n buckets decided as
  ** one GCRA group step (both charged or neither, the stricter binding);
  ** -1: a later member of the group before it. */
  int group[SLUICE__RLIMITS_MAX];
  int nrecs; /* records of its programs, all groups */
  /* Hash-tag groups: limit i's records live in group tg[i], the value of
  ** its scope's first attribute tgattr[tg[i]].  The route runs one
  ** program per group, in the order run[0..ntg) (declared_conf.c,
  ** "Hash-tag groups"); grecs[g] and the steps of group g fit one store
  ** call each. */
  int tg[SLUICE__RLIMITS_MAX];
  int ntg;
  int tgattr[SLUICE__TG_MAX];
  int run[SLUICE__TG_MAX];
  int grecs[SLUICE__TG_MAX];
  int gpen[SLUICE__TG_MAX]; /* group g's penalty: 1 + its index, 0: none */
  int npen, pord[SLUICE__TG_MAX]; /* the penalties' groups, listed order */
  int pen;      /* 1 + its first penalty's index (declared_penalty.h), 0:
                   none */
  int degraded; /* failure = "degraded": the degraded limiter, not a 503 */
  int leases;   /* a concurrency or lock limit is among its limits */
  int built;    /* its decisions' programs were checked at open (declared.c,
                   "Checked at open"): the store need not validate them */
} sluice__droute;

#define SLUICE__SHADOW_WHEN_MAX 8
typedef struct sluice__shadow_entry {
  sluice__amatch when;
  unsigned features;
} sluice__shadow_entry;

/* A compiled policy's declared limits: each array holds what the file
** declares (nattrs, nlimits, ...), in the one block `mem` (packed at the
** end of sluice__decl_load()); while loading they point into the loader's
** scratch arrays of the SLUICE__*_MAX sizes. */
typedef struct sluice__decl {
  int nattrs; /* the file's own attributes */
  char (*attr)[SLUICE__DNAME];
  unsigned untrusted; /* bit i: attr[i] is listed in `untrusted` */
  unsigned optional;  /* bit i: attr[i] is listed in `optional`
                         (declared_penalty_conf.c) */
  int nlimits;
  sluice__limit *limits;
  int nroutes;
  sluice__droute *routes;
  int npenalties;
  sluice__penalty *penalties;
  void *mem;        /* the packed arrays, one allocation */
  size_t mem_bytes; /* its size */
  /* shadow_when (shadow_when.c): features in shadow for the requests a
  ** `when` matches (packed with the other arrays). */
  int nshadow_when;
  sluice__shadow_entry *shadow_when;
} sluice__decl;

/* Free dl's packed arrays and dl itself (a heap allocation).  NULL is a
** no-op. */
void sluice__decl_free(sluice__decl *dl);
/* The bytes a compiled policy's declared limits take: the struct and its
** packed arrays. */
size_t sluice__decl_bytes(const sluice__decl *dl);

/* shadow_when.c: the file's `shadow_when` into dl; the features a request
** has in shadow by it, and those of an entry naming only `tier` = tier;
** a feature list ([ "penalty" ]) into bits (-1 with *bad at fault). */
unsigned sluice__shadow_when(const struct sluice__ctx *c);
unsigned sluice__shadow_when_tier(const sluice__decl *dl, const char *tier);
int sluice__shadow_names(const config_setting_t *s, int64_t *out,
                         const config_setting_t **bad);

/* At open: each limit's sets by tier, and which routes' decision programs
** need no validation (declared.c, "Checked at open"). */
void sluice__decl_check_built(sluice_policy *p);
/* Each limit's and penalty's nid under the policy's secret (at open). */
void sluice__decl_keyed(sluice__decl *dl, const uint8_t secret[16]);

/* The algorithm layer's SLUICE_ALGO_* a limit's SLUICE__L_* runs as. */
int sluice__decl_step_algo(int algo);

/* The numbers of a limit, rows of declared_settings.c's table (their
** bounds and unit are the table's). */
enum {
  SLUICE__LS_RATE,
  SLUICE__LS_PERIOD,
  SLUICE__LS_BURST,
  SLUICE__LS_SLIMIT, /* a sliding window's limit */
  SLUICE__LS_LIMIT,  /* a fixed window's or a cap's */
  SLUICE__LS_WINDOW,
  SLUICE__LS_MAX,
  SLUICE__LS_TTL,
  SLUICE__LS_RETRY_MAX /* retry_after_max_ms, any algorithm */
};

/* The file's spelling of algorithm SLUICE__L_* algo. */
const char *sluice__limit_algo_name(int algo);

/* The index of the attribute called n (built-in or declared), or -1. */
int sluice__decl_attr(const sluice__decl *dl, const char *n);
/* The name of attribute a (built-in or declared). */
const char *sluice__attr_name(const sluice__decl *dl, int a);
/* A built-in attribute's name and its length, zero-padded to 8 bytes so
** that a scope's key part copies it in one fixed move (every built-in
** name is at most 7 characters). */
typedef struct sluice__attr_spelling {
  char name[8];
  size_t len;
} sluice__attr_spelling;
extern const sluice__attr_spelling sluice__builtin_attrs[SLUICE__A__BUILTIN];

/* Parse the file's `attributes`, `limits` and the routes of `routes` that
** list limits into *dl (zeroed first), checking everything the validator
** of the plain configuration cannot see.  On error, err gets
** "FILE:LINE: SETTING: problem" and *dl holds nothing to free.  `warn`,
** when not NULL, gets a warning (a limit no route uses) as "FILE:LINE:
** SETTING: problem", or "".  On success dl->mem holds the arrays:
** sluice__decl_free() frees them. */
int sluice__decl_load(const config_setting_t *root, const char *file,
                      sluice__decl *dl, char *err, size_t errlen, char *warn,
                      size_t warnlen);
/* The steps of route dr's program for hash-tag group tg (at most
** SLUICE_PROGRAM_STEPS). */
int sluice__decl_route_steps(const sluice__decl *dl, const sluice__droute *dr,
                             int tg);
/* The hash-tag group of route dr whose scopes start with attribute a,
** added when `add` and there is room; -1 when none. */
int sluice__decl_tag_group(sluice__droute *dr, int a, int add);
/* Route dr's run order of its groups, once its limits and penalty are
** known (declared_conf.c, "Hash-tag groups"). */
void sluice__decl_run_order(const sluice__decl *dl, sluice__droute *dr);
/* 1 when a limit's denial may be a strike (a rate: gcra, the windows). */
int sluice__decl_strikes(int algo);

/* declared_when.c: `when = { ATTR = "VALUE"; ... }` at path (w may be
** NULL: no match asked) into *out, "FILE:LINE: PATH.ATTR: problem" into
** err; and whether the request of c has every attribute it asks for. */
struct sluice__ctx;
int sluice__match_load(const config_setting_t *w, const char *path,
                      const char *file, const sluice__decl *dl,
                      sluice__amatch *out, char *err, size_t errlen);
int sluice__match_ok(const struct sluice__ctx *c, const sluice__amatch *w);

#endif

/*
** The policy file's declared limits: `attributes`, `limits` and the route
** entries that list limits (docs/policy.md "Declared limits"), into a
** sluice__decl.  Everything is checked here, with the file's line:
** an unknown attribute in a scope, a route naming an undefined limit, a
** cost above a limit's burst (in any of its parameter sets), a route whose
** limits would span more than SLUICE__TG_MAX hash-tag groups, a group's
** program too large for one store call; a limit no route uses is a
** warning.
**
** Choices:
**  Hash-tag groups.  A scope's first attribute is its hash tag: every
**     record of the limit lives in the group of that attribute's value.
**     A route whose limits start with different attributes runs one
**     program per group
**     (declared.c says how a refusal by a later group gives back what the
**     earlier ones took).  The groups run in this order: the penalty's
**     box first (a boxed scope is refused before anything is charged
**     anywhere); then groups whose limits give back exactly (windows,
**     caps, leases, locks: a count taken out of the window it went into,
**     a lease released); then groups holding a gcra bucket, whose give-back
**     is a refund that time may have overtaken (declared.c); ties in the
**     route's order (the boxes in the order `penalty` lists them).  So a route with one group of buckets never gives a
**     bucket back, and a refusal by its buckets is the last call.  The
**     buckets of one `group = [...]` entry are one GCRA step: they must
**     share their first attribute.
**  Parameter sets.  The limit's own numbers are the base; `by` names an
**     attribute and `params` overrides the base for some of its values.
**     A value no set names gets the base.
*/
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"
#include "op.h"

static const char *const algos[SLUICE__L__COUNT] = {
    "gcra", "sliding_window", "fixed_window", "concurrency", "lock", "cap"};
/* A name longer than 7 characters does not compile (its array size goes
** negative). */
#define BUILTIN(s) {s, sizeof s - 1 + 0 * sizeof(char[sizeof s <= 8 ? 1 : -1])}
const sluice__attr_spelling sluice__builtin_attrs[SLUICE__A__BUILTIN] = {
    BUILTIN("tenant"), BUILTIN("key"),     BUILTIN("ip"),  BUILTIN("method"),
    BUILTIN("route"),  BUILTIN("pattern"), BUILTIN("tier")};
#undef BUILTIN

const char *sluice__limit_algo_name(int algo) { return algos[algo]; }

const char *sluice__attr_name(const sluice__decl *dl, int a) {
  if (a >= 0 && a < SLUICE__A__BUILTIN)
    return sluice__builtin_attrs[a].name;
  a -= SLUICE__A__BUILTIN;
  return a >= 0 && a < dl->nattrs ? dl->attr[a] : "?";
}

/* The loader's room: the most a file may declare.  The compiled policy
** gets what the file declared, packed (pack()). */
typedef struct sluice__scratch {
  char attr[SLUICE__ATTRS_MAX][SLUICE__DNAME];
  sluice__limit limits[SLUICE__LIMITS_MAX];
  char psval[SLUICE__LIMITS_MAX][SLUICE__PSETS_MAX][SLUICE__DNAME];
  sluice__amatch psw[SLUICE__LIMITS_MAX][SLUICE__PSETS_MAX];
  sluice__lparams ps[SLUICE__LIMITS_MAX][SLUICE__PSETS_MAX];
  sluice__droute routes[SLUICE__DROUTES_MAX];
  char route[SLUICE__DROUTES_MAX][SLUICE_POLICY_ROUTE_MAX + 1];
  sluice__amatch when[SLUICE__DROUTES_MAX];
  sluice__cost cost[SLUICE__DROUTES_MAX][SLUICE__RLIMITS_MAX];
  sluice__centry centry[SLUICE__DROUTES_MAX][SLUICE__RLIMITS_MAX]
                       [SLUICE__COSTS_MAX];
  sluice__penalty penalties[SLUICE__PENALTIES_MAX];
  sluice__shadow_entry shadow_when[SLUICE__SHADOW_WHEN_MAX];
} scratch;

static int attr_index(const sluice__decl *dl, const char *n) {
  int i;
  for (i = 0; n && i < SLUICE__A__BUILTIN; i++)
    if (!strcmp(n, sluice__builtin_attrs[i].name))
      return i;
  for (i = 0; n && i < dl->nattrs; i++)
    if (!strcmp(n, dl->attr[i]))
      return SLUICE__A__BUILTIN + i;
  return -1;
}

int sluice__decl_attr(const sluice__decl *dl, const char *n) {
  return attr_index(dl, n);
}

static int limit_index(const sluice__decl *dl, const char *n) {
  int i;
  for (i = 0; i < dl->nlimits; i++)
    if (!strcmp(n, dl->limits[i].name))
      return i;
  return -1;
}

/* `attributes = [ NAME, ... ]`, the caller's own, and `untrusted = [ ATTR,
** ... ]`: those whose values are unauthenticated input (a login name from
** a form), so that a scope starting with one keys strangers' records
** (declared.c). */
static int load_attrs(sluice__rd *x, const config_setting_t *root) {
  const config_setting_t *a = config_setting_get_member(root, "attributes");
  const config_setting_t *u = config_setting_get_member(root, "untrusted");
  int i, ai;
  if (!a)
    return SLUICE_OK; /* nothing to be untrusted */
  if (!sluice__rd_list(a))
    return sluice__rd_err(x, a, "attributes",
                          "must be an array of names [ \"model\" ]");
  if (config_setting_length(a) > SLUICE__ATTRS_MAX)
    return sluice__rd_err(x, a, "attributes", "at most %d attributes",
                          SLUICE__ATTRS_MAX);
  for (i = 0; i < config_setting_length(a); i++) {
    const config_setting_t *e = config_setting_get_elem(a, (unsigned)i);
    const char *v = config_setting_get_string(e);
    if (!sluice__rd_name_ok(v))
      return sluice__rd_err(x, e, "attributes",
                            "a name is 1..31 of [A-Za-z0-9_-], starting with "
                            "a letter");
    if (attr_index(x->dl, v) >= 0)
      return sluice__rd_err(x, e, "attributes",
                            "\"%s\" is named twice (or built in)", v);
    snprintf(x->dl->attr[x->dl->nattrs++], SLUICE__DNAME, "%s", v);
  }
  if (u && !sluice__rd_list(u))
    return sluice__rd_err(x, u, "untrusted",
                          "must be an array of attributes [ \"login\" ]");
  for (i = 0; u && i < config_setting_length(u); i++) {
    const config_setting_t *e = config_setting_get_elem(u, (unsigned)i);
    const char *v = config_setting_get_string(e);
    if ((ai = attr_index(x->dl, v)) < SLUICE__A__BUILTIN)
      return sluice__rd_err(x, e, "untrusted",
                            "\"%s\" is not an attribute of `attributes` (ip "
                            "and path parameters are untrusted already)",
                            v ? v : "?");
    x->dl->untrusted |= 1u << (ai - SLUICE__A__BUILTIN);
  }
  return SLUICE_OK;
}

/* A scope = [ ATTR, ... ] of 1..4 attributes, each once; an optional one
** (`optional`, read after the limits) only first.  form: the message for
** a scope of another form; twice: for an attribute named twice. */
int sluice__rd_scope(sluice__rd *x, const config_setting_t *g, const char *path,
                     const char *form, const char *twice, int *scope,
                     int *nscope) {
  const config_setting_t *sc = config_setting_get_member(g, "scope");
  char p[160];
  int i, j, n;
  snprintf(p, sizeof p, "%s.scope", path);
  if (!sluice__rd_list(sc) || (n = config_setting_length(sc)) < 1 ||
      n > SLUICE__SCOPE_MAX)
    return sluice__rd_err(x, sc ? sc : g, p, "%s", form);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(sc, (unsigned)i);
    const char *a = config_setting_get_string(e);
    int ai = attr_index(x->dl, a);
    if (ai < 0)
      return sluice__rd_err(x, e, p,
                            "unknown attribute \"%s\" (built in: tenant, key, "
                            "ip, method, route, pattern, tier; others go in "
                            "`attributes`)",
                            a ? a : "?");
    for (j = 0; j < i; j++)
      if (scope[j] == ai)
        return sluice__rd_err(x, e, p, twice, a);
    if (i > 0 && sluice__decl_optional(x->dl, ai))
      return sluice__rd_err(x, e, p,
                            "an optional attribute may only start a scope "
                            "(the box is skipped without it)");
    scope[(*nscope)++] = ai;
  }
  return SLUICE_OK;
}

/* A limit's numbers: the rows of the settings table (declared_settings.c:
** name, unit, bounds) each algorithm (bit SLUICE__L_*) reads, and where. */
#define L(a) (1u << SLUICE__L_##a)
static const struct {
  unsigned algos;
  int row;
  size_t off;
} nums[] = {
    {L(GCRA), SLUICE__LS_RATE, offsetof(sluice__lparams, g.rate)},
    {L(GCRA), SLUICE__LS_PERIOD, offsetof(sluice__lparams, g.period_ns)},
    {L(GCRA), SLUICE__LS_BURST, offsetof(sluice__lparams, g.burst)},
    {L(SLIDING), SLUICE__LS_SLIMIT, offsetof(sluice__lparams, w.limit)},
    {L(FIXED) | L(CAP), SLUICE__LS_LIMIT, offsetof(sluice__lparams, w.limit)},
    {L(SLIDING) | L(FIXED) | L(CAP), SLUICE__LS_WINDOW,
     offsetof(sluice__lparams, w.window_ns)},
    {L(CONCURRENCY), SLUICE__LS_MAX, offsetof(sluice__lparams, l.max)},
    {L(CONCURRENCY) | L(LOCK), SLUICE__LS_TTL,
     offsetof(sluice__lparams, l.ttl_ns)},
};
#undef L
#define NUM(ps, i) ((int64_t *)(void *)((char *)(ps) + nums[i].off))

/* A limit's number, row `row` of the settings table. */
static int get_n(sluice__rd *x, const config_setting_t *g, const char *gpath,
                 int row, int64_t *out) {
  const sluice_limit_setting *st = sluice_policy_limit_setting_at(row);
  return sluice__rd_int(x, g, gpath, st->name, st->unit_ns, st->min, st->max,
                        out);
}

/* The algorithm's numbers of group g over *ps (which holds the values
** inherited, the base's for a set). */
static int load_params(sluice__rd *x, const config_setting_t *g,
                       const char *path, void *ps, const void *owner) {
  int algo = ((const sluice__limit *)owner)->algo, rc;
  size_t i;
  for (i = 0; i < sizeof nums / sizeof nums[0]; i++)
    if ((nums[i].algos >> algo & 1) &&
        (rc = get_n(x, g, path, nums[i].row, NUM(ps, i))))
      return rc;
  if (algo == SLUICE__L_LOCK)
    ((sluice__lparams *)ps)->l.max = 1;
  return SLUICE_OK;
}

/* Every number the algorithm needs is set and the set is one the steps
** accept. */
static int params_whole(sluice__rd *x, const config_setting_t *s,
                        const char *path, const void *ps, const void *owner) {
  int algo = ((const sluice__limit *)owner)->algo;
  size_t i;
  for (i = 0; i < sizeof nums / sizeof nums[0]; i++)
    if ((nums[i].algos >> algo & 1) && !*NUM(ps, i))
      return sluice__rd_err(x, s, path, "%s is missing",
                            sluice_policy_limit_setting_at(nums[i].row)->name);
  if (algo == SLUICE__L_GCRA &&
      sluice__gcra_params_check(&((const sluice__lparams *)ps)->g) != SLUICE_OK)
    return sluice__rd_err(x, s, path,
                          "burst times period_ms is too long a bucket");
  return SLUICE_OK;
}

static const char *str_member(const config_setting_t *g, const char *n,
                              const config_setting_t **s) {
  *s = config_setting_get_member(g, n);
  return *s ? config_setting_get_string(*s) : NULL;
}

/* One parameter set of the list form into set i. */
static int pset_when(sluice__rd *x, const config_setting_t *e, const char *ep,
                     const sluice__psets *k, int i) {
  const config_setting_t *w = config_setting_get_member(e, "when");
  char wp[560];
  int rc;
  if (!config_setting_is_group(e) || !w)
    return sluice__rd_err(x, e, ep,
                          "must be { when = { ATTR = \"VALUE\"; ... }; "
                          "numbers }");
  if ((rc = sluice__rd_known(x, e, ep, k->names)))
    return rc;
  snprintf(wp, sizeof wp, "%s.when", ep);
  if ((rc = sluice__match_load(w, wp, x->file, x->dl, &k->psw[i], x->err,
                               x->errlen)))
    return rc;
  snprintf(k->psval[i], SLUICE__DNAME, "[%d]", i);
  return SLUICE_OK;
}

/* One parameter set of the group form (`by`'s value NAME) into set i. */
static int pset_value(sluice__rd *x, const config_setting_t *e, const char *ep,
                      const sluice__psets *k, int i) {
  int rc;
  if (!config_setting_is_group(e))
    return sluice__rd_err(x, e, ep, "must be a group of numbers");
  if (k->gnames && (rc = sluice__rd_known(x, e, ep, k->gnames)))
    return rc;
  snprintf(k->psval[i], SLUICE__DNAME, "%s", config_setting_name(e));
  k->psw[i].n = 1;
  k->psw[i].attr[0] = *k->select;
  snprintf(k->psw[i].val[0], SLUICE__WVAL, "%s", k->psval[i]);
  return SLUICE_OK;
}

int sluice__rd_psets(sluice__rd *x, const config_setting_t *g, const char *path,
                     const sluice__psets *k) {
  const config_setting_t *pg = config_setting_get_member(g, "params"), *s;
  const char *v = str_member(g, "by", &s);
  char p[200], ep[520];
  int i, n, rc, list = pg && config_setting_is_list(pg);
  snprintf(p, sizeof p, "%s.by", path);
  if (s && (*k->select = attr_index(x->dl, v)) < 0)
    return sluice__rd_err(x, s, p, k->unknown_by, v ? v : "?");
  if (list && s)
    return sluice__rd_err(x, s, p,
                          "the list form of `params` matches in each set's "
                          "`when`, not by one attribute");
  if (!list && !!s != !!pg)
    return sluice__rd_err(x, s ? s : pg, path,
                          "`by` (the attribute) and `params` (its values' "
                          "numbers) go together");
  snprintf(p, sizeof p, "%s.params", path);
  n = pg ? config_setting_length(pg) : 0;
  if (list && (n < 1 || n > k->max))
    return sluice__rd_err(x, pg, p, "must list 1..%d sets", k->max);
  if (pg && !list && (!config_setting_is_group(pg) || n > k->max))
    return sluice__rd_err(x, pg, p, k->group_form, k->max);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(pg, (unsigned)i);
    void *ps = (char *)k->ps + (size_t)i * k->size;
    if (list)
      snprintf(ep, sizeof ep, "%s.[%d]", p, i);
    else
      snprintf(ep, sizeof ep, "%s.%s", p, config_setting_name(e));
    if ((rc = list ? pset_when(x, e, ep, k, i) : pset_value(x, e, ep, k, i)))
      return rc;
    memcpy(ps, k->base, k->size);
    if ((rc = k->load(x, e, ep, ps, k->owner)) ||
        (rc = k->whole(x, e, ep, ps, k->owner)))
      return rc;
    (*k->npsets)++;
  }
  return k->whole(x, g, path, k->base, k->owner);
}

static int load_limit(sluice__rd *x, const config_setting_t *g,
                      sluice__limit *lm) {
  static const char *const names[] = {
      "algorithm", "scope", "status", "unit",      "by",  "params", "rate",
      "period_ms", "burst", "limit",  "window_ms", "max", "ttl_ms",
      "retry_after_max_ms", NULL};
  static const char *const en[] = {"when",  "rate",   "period_ms",
                                   "burst", "limit",  "window_ms",
                                   "max",   "ttl_ms", NULL};
  sluice__psets k = {en,
                     NULL,
                     SLUICE__PSETS_MAX,
                     "unknown attribute \"%s\"",
                     "must be a group of at most %d values, or a list ( { "
                     "when = { ... }; numbers }, ... )",
                     sizeof(sluice__lparams),
                     load_params,
                     params_whole,
                     lm,
                     &lm->select,
                     &lm->base,
                     NULL,
                     NULL,
                     NULL,
                     &lm->npsets};
  const config_setting_t *s;
  const char *v, *nm = config_setting_name(g);
  char path[96], p[160];
  int rc;
  int64_t st = 0;
  snprintf(path, sizeof path, "limits.%s", nm);
  memset(lm, 0, sizeof *lm);
  k.psval = lm->psval = x->S->psval[lm - x->dl->limits];
  k.psw = lm->psw = x->S->psw[lm - x->dl->limits];
  k.ps = lm->ps = x->S->ps[lm - x->dl->limits];
  lm->line = (int)config_setting_source_line(g);
  lm->select = -1;
  if (!config_setting_is_group(g))
    return sluice__rd_err(x, g, path, "must be a group { algorithm = ...; }");
  if (!sluice__rd_name_ok(nm))
    return sluice__rd_err(x, g, path,
                          "a limit's name is 1..31 of [A-Za-z0-9_-], "
                          "starting with a letter");
  snprintf(lm->name, sizeof lm->name, "%s", nm);
  if ((rc = sluice__rd_known(x, g, path, names)))
    return rc;
  v = str_member(g, "algorithm", &s);
  snprintf(p, sizeof p, "%s.algorithm", path);
  for (lm->algo = 0; v && lm->algo < SLUICE__L__COUNT; lm->algo++)
    if (!strcmp(v, algos[lm->algo]))
      break;
  if (!v || lm->algo == SLUICE__L__COUNT)
    return sluice__rd_err(x, s ? s : g, p,
                          "must be one of \"gcra\", \"sliding_window\", "
                          "\"fixed_window\", \"concurrency\", \"lock\", "
                          "\"cap\"");
  lm->status = lm->algo == SLUICE__L_LOCK ? 409 : 429;
  if ((rc = sluice__rd_int(x, g, path, "status", 1, 409, 429, &st)))
    return rc;
  if (st && st != 429 && st != 409)
    return sluice__rd_err(x, config_setting_get_member(g, "status"), path,
                          "status must be 429 or 409 (got %lld)",
                          (long long)st);
  if (st)
    lm->status = (int)st;
  /* A lease's holder may keep it for its whole TTL: its refusals may say
  ** "poll the job meanwhile" with a shorter Retry-After. */
  if ((rc = get_n(x, g, path, SLUICE__LS_RETRY_MAX, &lm->retry_max_ns)))
    return rc;
  v = str_member(g, "unit", &s);
  snprintf(lm->unit, sizeof lm->unit, "%s",
           v ? v
           : lm->algo == SLUICE__L_GCRA || lm->algo == SLUICE__L_SLIDING ||
                   lm->algo == SLUICE__L_FIXED
               ? "points"
           : lm->algo == SLUICE__L_CAP ? "requests"
                                       : "concurrent");
  if (s && !sluice__rd_name_ok(v))
    return sluice__rd_err(x, s, path, "unit must be a name like \"tokens\"");
  if ((rc = sluice__rd_scope(x, g, path,
                             "must be an array of 1..4 attributes [ "
                             "\"tenant\", ... ]",
                             "attribute \"%s\" named twice", lm->scope,
                             &lm->nscope)) ||
      (rc = load_params(x, g, path, &lm->base, lm)))
    return rc;
  return sluice__rd_psets(x, g, path, &k);
}

static int load_limits(sluice__rd *x, const config_setting_t *root) {
  const config_setting_t *ls = config_setting_get_member(root, "limits");
  int i, n, rc;
  if (!ls)
    return SLUICE_OK;
  if (!config_setting_is_group(ls))
    return sluice__rd_err(x, ls, "limits",
                          "must be a group { NAME = { ... }; }");
  n = config_setting_length(ls);
  if (n > SLUICE__LIMITS_MAX)
    return sluice__rd_err(x, ls, "limits", "at most %d limits",
                          SLUICE__LIMITS_MAX);
  for (i = 0; i < n; i++)
    if ((rc = load_limit(x, config_setting_get_elem(ls, (unsigned)i),
                         &x->dl->limits[x->dl->nlimits++])))
      return rc;
  return SLUICE_OK;
}

/* The largest burst, window limit or lease count a cost may reach: the
** smallest over the limit's sets (a constant cost must fit every set), or,
** for `any` (a caller's cost, bounded by `max`), the largest: a request
** whose cost is above its own set's burst is refused then (declared.c). */
static int64_t limit_cap(const sluice__limit *lm, int any) {
  int64_t cap;
  int i;
  if (lm->algo == SLUICE__L_CONCURRENCY || lm->algo == SLUICE__L_LOCK ||
      lm->algo == SLUICE__L_CAP)
    return 1; /* one lease, one request: no cost */
  cap = lm->algo == SLUICE__L_GCRA ? lm->base.g.burst : lm->base.w.limit;
  for (i = 0; i < lm->npsets; i++) {
    int64_t b =
        lm->algo == SLUICE__L_GCRA ? lm->ps[i].g.burst : lm->ps[i].w.limit;
    if (any ? b > cap : b < cap)
      cap = b;
  }
  return cap;
}

static int cost_fits(sluice__rd *x, const config_setting_t *s, const char *path,
                     const sluice__limit *lm, int64_t v, int any) {
  int64_t cap = limit_cap(lm, any);
  if (v >= 1 && v <= cap)
    return SLUICE_OK;
  if (cap == 1)
    return sluice__rd_err(x, s, path,
                          "limit \"%s\" (%s) counts one per request: its "
                          "cost must be 1 (got %lld)",
                          lm->name, algos[lm->algo], (long long)v);
  return sluice__rd_err(
      x, s, path, "must be 1..%lld, the %s burst of limit \"%s\" (got %lld)",
      (long long)cap, any ? "largest" : "smallest", lm->name, (long long)v);
}

static int int_of(const config_setting_t *s, int64_t *out) {
  if (!s || (config_setting_type(s) != CONFIG_TYPE_INT &&
             config_setting_type(s) != CONFIG_TYPE_INT64))
    return 0;
  *out = config_setting_get_int64(s);
  return 1;
}

/* A route's cost for limit lm: an integer, a method table { GET = 1;
** other = 5; }, ranges of an attribute { by = "days"; ranges = ( { upto =
** 90; cost = 25; }, { cost = 50; } ); }, or a caller attribute { attr =
** "tokens"; max = 100000; }. */
static int load_cost(sluice__rd *x, const config_setting_t *s, const char *path,
                     const sluice__limit *lm, sluice__cost *c,
                     sluice__centry *room) {
  const config_setting_t *m;
  const char *v;
  int i, n, rc;
  memset(c, 0, sizeof *c);
  c->e = room;
  c->kind = SLUICE__C_CONST;
  c->value = 1;
  if (!s)
    return cost_fits(x, NULL, path, lm, 1, 0);
  if (int_of(s, &c->value))
    return cost_fits(x, s, path, lm, c->value, 0);
  if (!config_setting_is_group(s))
    return sluice__rd_err(
        x, s, path,
        "must be an integer, a method table { GET = 1; other = 5; }, { by = "
        "ATTR; ranges = (...); } or { attr = ATTR; max = N; }");
  if ((v = str_member(s, "attr", &m)) != NULL || m ||
      (v = str_member(s, "by", &m)) != NULL || m) {
    static const char *const names[2][3] = {{"attr", "max", NULL},
                                            {"by", "ranges", NULL}};
    const config_setting_t *rs = config_setting_get_member(s, "ranges");
    int by = !strcmp(config_setting_name(m), "by");
    if ((rc = sluice__rd_known(x, s, path, names[by])))
      return rc;
    c->kind = by ? SLUICE__C_RANGE : SLUICE__C_ATTR;
    if (!v || (c->attr = attr_index(x->dl, v)) < 0)
      return sluice__rd_err(x, m, path, "unknown attribute \"%s\"",
                            v ? v : "?");
    if (!by && !int_of(m = config_setting_get_member(s, "max"), &c->max))
      return sluice__rd_err(
          x, m ? m : s, path,
          "max (the largest cost the caller may give) is missing");
    if (!by)
      return cost_fits(x, m, path, lm, c->max, 1);
    if (!rs || !config_setting_is_list(rs) ||
        (n = config_setting_length(rs)) < 1 || n > SLUICE__COSTS_MAX)
      return sluice__rd_err(x, rs ? rs : s, path,
                            "ranges must be a list of 1..8 { upto = N; cost = "
                            "C; }, the last without upto");
    for (i = 0; i < n; i++) {
      const config_setting_t *e = config_setting_get_elem(rs, (unsigned)i);
      int64_t up = 0, co = 0;
      int has_up = int_of(config_setting_get_member(e, "upto"), &up);
      if (!int_of(config_setting_get_member(e, "cost"), &co) ||
          has_up != (i < n - 1) ||
          (i > 0 && has_up && up <= c->e[i - 1].upto))
        return sluice__rd_err(x, e, path,
                              "a range is { upto = N; cost = C; } with upto "
                              "rising, the last without upto");
      if ((rc = cost_fits(x, e, path, lm, co, 0)))
        return rc;
      if (has_up) {
        c->e[c->n].upto = up;
        c->e[c->n++].cost = co;
      } else {
        c->value = co;
      }
    }
    return SLUICE_OK;
  }
  c->kind = SLUICE__C_METHOD;
  n = config_setting_length(s);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
    const char *nm = config_setting_name(e);
    int64_t co;
    if (!int_of(e, &co))
      return sluice__rd_err(x, e, path, "method %s: cost must be an integer",
                            nm);
    if ((rc = cost_fits(x, e, path, lm, co, 0)))
      return rc;
    if (!strcmp(nm, "other")) {
      c->value = co;
      continue;
    }
    if (strlen(nm) >= sizeof c->e[0].method || c->n == SLUICE__COSTS_MAX)
      return sluice__rd_err(
          x, e, path,
          "a method table has at most 8 methods of 1..7 characters (%s)", nm);
    snprintf(c->e[c->n].method, sizeof c->e[0].method, "%s", nm);
    c->e[c->n++].cost = co;
  }
  return SLUICE_OK;
}

int sluice__decl_tag_group(sluice__droute *dr, int a, int add) {
  int i;
  for (i = 0; i < dr->ntg; i++)
    if (dr->tgattr[i] == a)
      return i;
  if (!add || dr->ntg == SLUICE__TG_MAX)
    return -1;
  dr->tgattr[dr->ntg] = a;
  dr->run[dr->ntg] = dr->ntg;
  return dr->ntg++;
}

/* How a group ranks in the run order ("Hash-tag groups"): lower runs
** first. */
static int run_rank(const sluice__decl *dl, const sluice__droute *dr, int tg) {
  int i;
  if (dr->gpen[tg])
    return 0;
  for (i = 0; i < dr->n; i++)
    if (dr->tg[i] == tg && dl->limits[dr->limit[i]].algo == SLUICE__L_GCRA)
      return 2;
  return 1;
}

void sluice__decl_run_order(const sluice__decl *dl, sluice__droute *dr) {
  int i, j, k = 0;
  for (i = 0; i < dr->npen; i++) /* the boxes in the route's order */
    dr->run[k++] = dr->pord[i];
  for (j = 1; j < 3; j++)
    for (i = 0; i < dr->ntg; i++)
      if (run_rank(dl, dr, i) == j)
        dr->run[k++] = i;
}

/* Records of limit lm in a program. */
static int recs_of(const sluice__limit *lm) {
  int64_t m = lm->base.l.max;
  int i;
  if (lm->algo != SLUICE__L_CONCURRENCY)
    return 1;
  for (i = 0; i < lm->npsets; i++)
    if (lm->ps[i].l.max > m && lm->ps[i].l.max <= SLUICE_GROUP_MAX)
      m = lm->ps[i].l.max;
  return m > SLUICE_GROUP_MAX ? 1 : (int)m; /* a counted set: one record */
}

/* A lease limit that may hold more than SLUICE_GROUP_MAX leases (in some
** parameter set): a counted set, whose grant returns the lease's id. */
static int may_count(const sluice__limit *lm) {
  int i;
  if (lm->algo != SLUICE__L_CONCURRENCY)
    return 0;
  for (i = 0; i < lm->npsets; i++)
    if (lm->ps[i].l.max > SLUICE_GROUP_MAX)
      return 1;
  return lm->base.l.max > SLUICE_GROUP_MAX;
}

/* One id names a request's leases on every lease limit of its route: a
** counted set's (which it makes) then cannot be shared. */
static int leases_clash(const sluice__decl *dl, const sluice__droute *dr,
                        const sluice__limit *lm) {
  int i, lease = lm->algo == SLUICE__L_CONCURRENCY ||
                 lm->algo == SLUICE__L_LOCK;
  for (i = 0; lease && i < dr->n; i++) {
    const sluice__limit *o = &dl->limits[dr->limit[i]];
    if ((o->algo == SLUICE__L_CONCURRENCY || o->algo == SLUICE__L_LOCK) &&
        (may_count(o) || may_count(lm)))
      return 1;
  }
  return 0;
}

/* Limit v as the route's next one, with cost setting cs (NULL: 1); group:
** 0 alone, n >= 2 the first of a group of n (one GCRA group step), -1 a
** later member of the group. */
static int add_limit(sluice__rd *x, sluice__droute *dr,
                     const config_setting_t *e, const char *ep, const char *v,
                     const config_setting_t *cs, char *used, int group) {
  const sluice__limit *lm, *first;
  char cp[240];
  int li, j, rc, tg;
  if (!v)
    return sluice__rd_err(x, e, ep, "a limit's name is missing");
  if ((li = limit_index(x->dl, v)) < 0)
    return sluice__rd_err(x, e, ep, "no limit \"%s\" is declared in `limits`",
                          v);
  if (dr->n == SLUICE__RLIMITS_MAX)
    return sluice__rd_err(x, e, ep, "a route applies at most %d limits",
                          SLUICE__RLIMITS_MAX);
  for (j = 0; j < dr->n; j++)
    if (dr->limit[j] == li)
      return sluice__rd_err(x, e, ep, "limit \"%s\" listed twice", v);
  lm = &x->dl->limits[li];
  if (group && lm->algo != SLUICE__L_GCRA)
    return sluice__rd_err(
        x, e, ep,
        "limit \"%s\" is not a gcra bucket: only buckets go in a group", v);
  first = &x->dl->limits[group < 0 ? dr->limit[dr->n - 1] : li];
  if (group < 0 && lm->scope[0] != first->scope[0])
    return sluice__rd_err(
        x, e, ep,
        "limit \"%s\" is scoped by \"%s\" first and limit \"%s\" by "
        "\"%s\": the buckets of a group are one step in one hash-tag "
        "group (start both scopes with the same attribute)",
        lm->name, sluice__attr_name(x->dl, lm->scope[0]), first->name,
        sluice__attr_name(x->dl, first->scope[0]));
  if (leases_clash(x->dl, dr, lm))
    return sluice__rd_err(
        x, e, ep,
        "\"%s\": a concurrency limit of more than 32 leases must be the "
        "route's only concurrency or lock limit (its grant names the lease id)",
        lm->name);
  if ((tg = sluice__decl_tag_group(dr, lm->scope[0], 1)) < 0)
    return sluice__rd_err(x, e, ep,
                          "a route's limits span at most %d hash-tag groups "
                          "(the first attributes of their scopes)",
                          SLUICE__TG_MAX);
  snprintf(cp, sizeof cp, "%.200s.cost", ep);
  if ((rc = load_cost(x, cs, cp, lm, &dr->cost[dr->n],
                      x->S->centry[dr - x->dl->routes][dr->n])))
    return rc;
  dr->limit[dr->n] = li;
  dr->group[dr->n] = group;
  dr->tg[dr->n] = tg;
  dr->nrecs += recs_of(lm);
  dr->grecs[tg] += recs_of(lm);
  dr->leases |= lm->algo == SLUICE__L_CONCURRENCY || lm->algo == SLUICE__L_LOCK;
  dr->n++;
  used[li] = 1;
  return SLUICE_OK;
}

/* Every `{NAME}` of a route pattern is a whole segment naming an
** attribute of `attributes` (the caller's own: a built-in one has its own
** field), at most once: its value is the segment a request's path has
** there (declared.c). */
static int route_params_ok(sluice__rd *x, const config_setting_t *m,
                           const char *path, const char *route) {
  const char *o = route, *c;
  char name[SLUICE__DNAME], again[SLUICE__DNAME + 2];
  while ((o = strchr(o, '{')) != NULL) {
    c = strchr(o, '}');
    if (o[-1] != '/' || !c || (c[1] != '/' && c[1] != '\0') ||
        (size_t)(c - o - 1) >= sizeof name)
      return sluice__rd_err(
          x, m, path, "a parameter is a whole segment /{NAME}/ (got \"%s\")",
          route);
    memcpy(name, o + 1, (size_t)(c - o - 1));
    name[c - o - 1] = '\0';
    if (attr_index(x->dl, name) < SLUICE__A__BUILTIN)
      return sluice__rd_err(
          x, m, path, "parameter {%s} must be an attribute of `attributes`",
          name);
    snprintf(again, sizeof again, "{%s}", name);
    if (strstr(c + 1, again))
      return sluice__rd_err(x, m, path, "parameter {%s} named twice", name);
    o = c + 1;
  }
  return SLUICE_OK;
}

static int load_droute(sluice__rd *x, const config_setting_t *r, int idx,
                       sluice__droute *dr, char *used) {
  static const char *const names[] = {"method",  "route",   "limits",
                                      "penalty", "failure", "when", NULL};
  const config_setting_t *m, *ls;
  const char *v;
  char path[64], p[160];
  int i, n, rc;
  snprintf(path, sizeof path, "routes.[%d]", idx);
  memset(dr, 0, sizeof *dr);
  dr->route = x->S->route[dr - x->dl->routes];
  dr->when = &x->S->when[dr - x->dl->routes];
  dr->cost = x->S->cost[dr - x->dl->routes];
  if ((rc = sluice__rd_known(x, r, path, names)))
    return rc;
  v = str_member(r, "method", &m);
  snprintf(p, sizeof p, "%s.method", path);
  if (!v || !v[0] || strlen(v) >= sizeof dr->method)
    return sluice__rd_err(x, m ? m : r, p,
                          "must be a string of 1..7 characters");
  snprintf(dr->method, sizeof dr->method, "%s", v);
  v = str_member(r, "route", &m);
  snprintf(p, sizeof p, "%s.route", path);
  if (!v || v[0] != '/' || strlen(v) > SLUICE_POLICY_ROUTE_MAX)
    return sluice__rd_err(
        x, m ? m : r, p,
        "must be a string starting with '/', at most 127 bytes");
  snprintf(dr->route, SLUICE_POLICY_ROUTE_MAX + 1, "%s", v);
  dr->lit = strcspn(dr->route, "*{");
  if ((rc = route_params_ok(x, m, p, dr->route)))
    return rc;
  snprintf(p, sizeof p, "%s.when", path);
  if ((rc = sluice__match_load(config_setting_get_member(r, "when"), p,
                              x->file, x->dl, dr->when, x->err, x->errlen)))
    return rc;
  ls = config_setting_get_member(r, "limits");
  snprintf(p, sizeof p, "%s.limits", path);
  if (!sluice__rd_list(ls))
    return sluice__rd_err(
        x, ls ? ls : r, p,
        "must be a list ( \"NAME\", { limit = \"NAME\"; cost = ...; } )");
  n = config_setting_length(ls);
  /* No limits: a route of boxes alone (a sign-in's lockouts), or, with
  ** no penalty either, an exempt route admitted without a store call
  ** (health checks, webhooks the service must always take). */
  if (n > SLUICE__RLIMITS_MAX)
    return sluice__rd_err(x, ls, p, "must list 0..8 limits");
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(ls, (unsigned)i);
    const config_setting_t *cs = NULL, *ns, *gs;
    char ep[200];
    snprintf(ep, sizeof ep, "%s.[%d]", p, i);
    v = config_setting_get_string(e);
    if (!v && config_setting_is_group(e)) {
      static const char *const en[2][3] = {{"limit", "cost", NULL},
                                           {"group", "cost", NULL}};
      int k, gm;
      gs = config_setting_get_member(e, "group");
      if ((rc = sluice__rd_known(x, e, ep, en[gs != NULL])))
        return rc;
      cs = config_setting_get_member(e, "cost");
      v = str_member(e, "limit", &ns);
      if (gs) {
        if (!sluice__rd_list(gs) || (gm = config_setting_length(gs)) < 2 ||
            gm > SLUICE_GROUP_MAX)
          return sluice__rd_err(
              x, gs, ep,
              "group must list 2 or more gcra limits [ \"tenant\", \"key\" ]");
        for (k = 0; k < gm; k++) {
          const char *gv = config_setting_get_string(
              config_setting_get_elem(gs, (unsigned)k));
          if ((rc = add_limit(x, dr, e, ep, gv, cs, used, k ? -1 : gm)))
            return rc;
        }
        continue;
      }
    }
    if (!v)
      return sluice__rd_err(
          x, e, ep,
          "must be a limit's name, { limit = \"NAME\"; cost = ...; } or { "
          "group = [ \"NAME\", ... ]; cost = ...; }");
    if ((rc = add_limit(x, dr, e, ep, v, cs, used, 0)))
      return rc;
  }
  for (i = 0; i < dr->ntg; i++)
    if (dr->grecs[i] > SLUICE_PROGRAM_KEYS)
      return sluice__rd_err(x, ls, p,
                            "its limits need %lld records in one hash-tag "
                            "group, more than one store call holds (48)",
                            (long long)dr->grecs[i]);
  if ((rc = sluice__decl_route_penalty(x, r, path, dr)))
    return rc;
  sluice__decl_run_order(x->dl, dr);
  return SLUICE_OK;
}

/* What the file declared, from the scratch arrays dl points into, into
** one block at base (NULL: only counted), the pointers moved there; the
** block's size.  Each array starts aligned for any type. */
static size_t pack(sluice__decl *dl, char *base) {
  size_t off = 0;
  int i, j;
#define TAKE(ptr, count)                                                     \
  do {                                                                       \
    size_t sz_ = sizeof *(ptr) * (size_t)(count);                            \
    if (base && sz_) {                                                       \
      memcpy(base + off, (ptr), sz_);                                        \
      (ptr) = (void *)(base + off);                                          \
    } else if (base) {                                                       \
      (ptr) = NULL;                                                          \
    }                                                                        \
    off += (sz_ + _Alignof(max_align_t) - 1) &                               \
           ~(size_t)(_Alignof(max_align_t) - 1);                             \
  } while (0)
  TAKE(dl->attr, dl->nattrs);
  TAKE(dl->limits, dl->nlimits);
  TAKE(dl->penalties, dl->npenalties);
  TAKE(dl->routes, dl->nroutes);
  TAKE(dl->shadow_when, dl->nshadow_when);
  for (i = 0; i < dl->nlimits; i++) {
    sluice__limit *lm = &dl->limits[i];
    TAKE(lm->ps, lm->npsets);
    TAKE(lm->psw, lm->npsets);
    TAKE(lm->psval, lm->npsets);
  }
  for (i = 0; i < dl->nroutes; i++) {
    sluice__droute *dr = &dl->routes[i];
    char *route = dr->route;
    TAKE(dr->cost, dr->n);
    for (j = 0; j < dr->n; j++)
      TAKE(dr->cost[j].e, dr->cost[j].n);
    TAKE(dr->when, dr->when->n > 0);
    TAKE(route, strlen(route) + 1);
    if (base)
      dr->route = route;
  }
#undef TAKE
  return off;
}

void sluice__decl_free(sluice__decl *dl) {
  if (!dl)
    return;
  free(dl->mem);
  free(dl);
}

size_t sluice__decl_bytes(const sluice__decl *dl) {
  return dl ? sizeof *dl + dl->mem_bytes : 0;
}

static int load(sluice__rd *x, const config_setting_t *root, char *warn,
                size_t warnlen);

int sluice__decl_load(const config_setting_t *root, const char *file,
                      sluice__decl *dl, char *err, size_t errlen, char *warn,
                      size_t warnlen) {
  sluice__rd x = {file, err, errlen, dl, NULL};
  size_t n;
  int rc;
  memset(dl, 0, sizeof *dl);
  if (warn && warnlen)
    warn[0] = '\0';
  if (!(x.S = malloc(sizeof *x.S)))
    return SLUICE_ENOMEM;
  dl->attr = x.S->attr;
  dl->limits = x.S->limits;
  dl->routes = x.S->routes;
  dl->penalties = x.S->penalties;
  dl->shadow_when = x.S->shadow_when;
  rc = load(&x, root, warn, warnlen);
  if (rc == SLUICE_OK && (n = pack(dl, NULL)) > 0) {
    if ((dl->mem = malloc(n)) == NULL)
      rc = SLUICE_ENOMEM;
    else
      pack(dl, dl->mem);
    dl->mem_bytes = n;
  }
  free(x.S);
  if (rc != SLUICE_OK || !dl->mem) { /* nothing points into the scratch */
    int nroutes = dl->nroutes;
    memset(dl, 0, sizeof *dl);
    if (rc == SLUICE_OK)
      dl->nroutes = nroutes; /* 0: nothing was declared */
  }
  return rc;
}

static int load(sluice__rd *x, const config_setting_t *root, char *warn,
                size_t warnlen) {
  sluice__decl *dl = x->dl;
  const char *file = x->file;
  const config_setting_t *rs;
  char used[SLUICE__LIMITS_MAX] = {0};
  int i, n, rc;
  if ((rc = load_attrs(x, root)) || (rc = load_limits(x, root)) ||
      (rc = sluice__decl_penalties_load(x, root)) ||
      (rc = sluice__shadow_when_load(x, root)))
    return rc;
  rs = config_setting_get_member(root, "routes");
  n = rs && config_setting_is_list(rs) ? config_setting_length(rs) : 0;
  for (i = 0; i < n; i++) {
    const config_setting_t *r = config_setting_get_elem(rs, (unsigned)i);
    if (dl->nroutes == SLUICE__DROUTES_MAX)
      return sluice__rd_err(x, r, "routes", "at most %d routes of limits",
                            SLUICE__DROUTES_MAX);
    if ((rc = load_droute(x, r, i, &dl->routes[dl->nroutes], used)))
      return rc;
    dl->nroutes++;
  }
  for (i = 0; i < dl->nlimits; i++)
    if (!used[i] && warn && warnlen) {
      snprintf(warn, warnlen, "%s:%d: limits.%s: no route applies it", file,
               dl->limits[i].line, dl->limits[i].name);
      break;
    }
  return SLUICE_OK;
}

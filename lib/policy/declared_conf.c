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
typedef struct scratch {
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

typedef struct dctx {
  const char *file;
  char *err;
  size_t errlen;
  sluice__decl *dl;
  scratch *S;
} dctx;

static int derr(dctx *x, const config_setting_t *s, const char *path,
                const char *fmt, const char *a1, long long v) {
  char what[320];
  snprintf(what, sizeof what, fmt, a1 ? a1 : "", v);
  if (x->err && x->errlen)
    snprintf(x->err, x->errlen, "%s:%d: %s: %s", x->file,
             s ? (int)config_setting_source_line(s) : 0, path, what);
  return SLUICE_ECONFIG;
}

static int ident_ok(const char *n) {
  size_t i, len = n ? strlen(n) : 0;
  if (len == 0 || len >= SLUICE__DNAME)
    return 0;
  for (i = 0; i < len; i++)
    if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
          (n[i] >= '0' && n[i] <= '9' && i > 0) || n[i] == '_' ||
          (n[i] == '-' && i > 0)))
      return 0;
  return 1;
}

static int attr_index(const sluice__decl *dl, const char *n) {
  int i;
  for (i = 0; i < SLUICE__A__BUILTIN; i++)
    if (!strcmp(n, sluice__builtin_attrs[i].name))
      return i;
  for (i = 0; i < dl->nattrs; i++)
    if (!strcmp(n, dl->attr[i]))
      return SLUICE__A__BUILTIN + i;
  return -1;
}

int sluice__decl_attr(const sluice__decl *dl, const char *n) {
  return n ? attr_index(dl, n) : -1;
}

static int limit_index(const sluice__decl *dl, const char *n) {
  int i;
  for (i = 0; i < dl->nlimits; i++)
    if (!strcmp(n, dl->limits[i].name))
      return i;
  return -1;
}

/* `untrusted = [ ATTR, ... ]`: caller attributes whose values are
** unauthenticated input (a login name from a form), so that a scope
** starting with one keys strangers' records (declared.c). */
static int load_untrusted(dctx *x, const config_setting_t *root) {
  const config_setting_t *u = config_setting_get_member(root, "untrusted");
  int i, n, ai;
  if (!u)
    return SLUICE_OK;
  if (!config_setting_is_array(u) && !config_setting_is_list(u))
    return derr(x, u, "untrusted",
                "must be an array of attributes [ \"login\" ]%s", NULL, 0);
  n = config_setting_length(u);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(u, (unsigned)i);
    const char *v = config_setting_get_string(e);
    if (!v || (ai = attr_index(x->dl, v)) < SLUICE__A__BUILTIN)
      return derr(x, e, "untrusted",
                  "\"%s\" is not an attribute of `attributes` (ip and "
                  "path parameters are untrusted already)",
                  v ? v : "?", 0);
    x->dl->untrusted |= 1u << (ai - SLUICE__A__BUILTIN);
  }
  return SLUICE_OK;
}

static int load_attrs(dctx *x, const config_setting_t *root) {
  const config_setting_t *a = config_setting_get_member(root, "attributes");
  int i, n;
  if (!a)
    return SLUICE_OK;
  if (!config_setting_is_array(a) && !config_setting_is_list(a))
    return derr(x, a, "attributes", "must be an array of names [ \"model\" ]",
                NULL, 0);
  n = config_setting_length(a);
  if (n > SLUICE__ATTRS_MAX)
    return derr(x, a, "attributes", "at most %s%lld attributes", NULL,
                SLUICE__ATTRS_MAX);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(a, (unsigned)i);
    const char *v = config_setting_get_string(e);
    if (!ident_ok(v))
      return derr(x, e, "attributes",
                  "a name is 1..31 of [A-Za-z0-9_-], starting with a letter",
                  NULL, 0);
    if (attr_index(x->dl, v) >= 0)
      return derr(x, e, "attributes", "\"%s\" is named twice (or built in)", v,
                  0);
    snprintf(x->dl->attr[x->dl->nattrs++], SLUICE__DNAME, "%s", v);
  }
  return load_untrusted(x, root);
}

/* An integer member into *out (scaled), if present. */
static int get_i(dctx *x, const config_setting_t *g, const char *gpath,
                 const char *name, int64_t unit, int64_t lo, int64_t hi,
                 int64_t *out) {
  const config_setting_t *s = config_setting_get_member(g, name);
  char p[160];
  long long v;
  if (!s)
    return SLUICE_OK;
  snprintf(p, sizeof p, "%s.%s", gpath, name);
  if (config_setting_type(s) != CONFIG_TYPE_INT &&
      config_setting_type(s) != CONFIG_TYPE_INT64)
    return derr(x, s, p, "must be an integer%s", NULL, 0);
  v = config_setting_get_int64(s);
  if (v < lo || v > hi) {
    char what[120];
    snprintf(what, sizeof what, "must be %lld..%lld (got %%s%lld)",
             (long long)lo, (long long)hi, v);
    return derr(x, s, p, what, NULL, 0);
  }
  *out = (int64_t)v * unit;
  return SLUICE_OK;
}


/* A limit's number, row `row` of the settings table (its name, unit and
** bounds: declared_settings.c). */
static int get_n(dctx *x, const config_setting_t *g, const char *gpath,
                 int row, int64_t *out) {
  const sluice_limit_setting *st = sluice_policy_limit_setting_at(row);
  return get_i(x, g, gpath, st->name, st->unit_ns, st->min, st->max, out);
}

/* The algorithm's numbers of group g over *ps (which holds the values
** inherited, the base's for a set). */
static int load_params(dctx *x, const config_setting_t *g, const char *path,
                       int algo, sluice__lparams *ps) {
  int rc;
  switch (algo) {
  case SLUICE__L_GCRA:
    if ((rc = get_n(x, g, path, SLUICE__LS_RATE, &ps->g.rate)) ||
        (rc = get_n(x, g, path, SLUICE__LS_PERIOD, &ps->g.period_ns)) ||
        (rc = get_n(x, g, path, SLUICE__LS_BURST, &ps->g.burst)))
      return rc;
    return SLUICE_OK;
  case SLUICE__L_SLIDING:
  case SLUICE__L_FIXED:
  case SLUICE__L_CAP:
    if ((rc = get_n(x, g, path,
                    algo == SLUICE__L_SLIDING ? SLUICE__LS_SLIMIT
                                              : SLUICE__LS_LIMIT,
                    &ps->w.limit)) ||
        (rc = get_n(x, g, path, SLUICE__LS_WINDOW, &ps->w.window_ns)))
      return rc;
    return SLUICE_OK;
  default:
    if (algo == SLUICE__L_CONCURRENCY &&
        (rc = get_n(x, g, path, SLUICE__LS_MAX, &ps->l.max)))
      return rc;
    if (algo == SLUICE__L_LOCK)
      ps->l.max = 1;
    return get_n(x, g, path, SLUICE__LS_TTL, &ps->l.ttl_ns);
  }
}

/* Every number the algorithm needs is set and the set is one the steps
** accept. */
static int params_whole(dctx *x, const config_setting_t *s, const char *path,
                        int algo, const sluice__lparams *ps) {
  const char *miss = NULL;
  switch (algo) {
  case SLUICE__L_GCRA:
    miss = !ps->g.rate        ? "rate"
           : !ps->g.period_ns ? "period_ms"
           : !ps->g.burst     ? "burst"
                              : NULL;
    if (!miss && sluice_gcra_params_check(&ps->g) != SLUICE_OK)
      return derr(x, s, path, "burst times period_ms is too long a bucket%s",
                  NULL, 0);
    break;
  case SLUICE__L_SLIDING:
  case SLUICE__L_FIXED:
  case SLUICE__L_CAP:
    miss = !ps->w.limit ? "limit" : !ps->w.window_ns ? "window_ms" : NULL;
    break;
  default:
    miss = !ps->l.max ? "max" : !ps->l.ttl_ns ? "ttl_ms" : NULL;
  }
  return miss ? derr(x, s, path, "%s is missing", miss, 0) : SLUICE_OK;
}

static int member_ok(dctx *x, const config_setting_t *g, const char *path,
                     const char *const *names) {
  int i, j, n = config_setting_length(g);
  for (i = 0; i < n; i++) {
    const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
    const char *nm = config_setting_name(m);
    char p[160];
    for (j = 0; names[j]; j++)
      if (nm && !strcmp(nm, names[j]))
        break;
    if (!names[j]) {
      snprintf(p, sizeof p, "%s.%s", path, nm ? nm : "?");
      return derr(x, m, p, "unknown setting%s", NULL, 0);
    }
  }
  return SLUICE_OK;
}

static const char *str_member(const config_setting_t *g, const char *n,
                              const config_setting_t **s) {
  *s = config_setting_get_member(g, n);
  return *s ? config_setting_get_string(*s) : NULL;
}

/* `params = ( { when = { ATTR = "VALUE"; ... }; numbers }, ... )`: the
** first set whose `when` the request matches, over the base; a value may
** be anything a request carries ("2024", "claude-3.5"), and a set may ask
** for several attributes at once (a tier and a model). */
static int load_pset_list(dctx *x, const config_setting_t *pg,
                          const char *path, sluice__limit *lm) {
  static const char *const en[] = {"when",      "rate", "period_ms",
                                   "burst",     "limit", "window_ms",
                                   "max",       "ttl_ms", NULL};
  char p[160], ep[200], wp[220];
  int i, rc, n = config_setting_length(pg);
  snprintf(p, sizeof p, "%s.params", path);
  if (n < 1 || n > SLUICE__PSETS_MAX)
    return derr(x, pg, p, "must list 1..%s%lld sets", NULL, SLUICE__PSETS_MAX);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(pg, (unsigned)i);
    const config_setting_t *w = config_setting_get_member(e, "when");
    snprintf(ep, sizeof ep, "%s.[%d]", p, i);
    if (!config_setting_is_group(e) || !w)
      return derr(x, e, ep,
                  "must be { when = { ATTR = \"VALUE\"; ... }; numbers }%s",
                  NULL, 0);
    if ((rc = member_ok(x, e, ep, en)))
      return rc;
    snprintf(wp, sizeof wp, "%s.when", ep);
    if ((rc = sluice__match_load(w, wp, x->file, x->dl, &lm->psw[i], x->err,
                                x->errlen)))
      return rc;
    lm->ps[i] = lm->base;
    snprintf(lm->psval[i], SLUICE__DNAME, "[%d]", i);
    if ((rc = load_params(x, e, ep, lm->algo, &lm->ps[i])) ||
        (rc = params_whole(x, e, ep, lm->algo, &lm->ps[i])))
      return rc;
    lm->npsets++;
  }
  return SLUICE_OK;
}

static int load_limit(dctx *x, const config_setting_t *g, sluice__limit *lm) {
  static const char *const names[] = {
      "algorithm", "scope", "status", "unit",      "by",  "params", "rate",
      "period_ms", "burst", "limit",  "window_ms", "max", "ttl_ms",
      "retry_after_max_ms", NULL};
  const config_setting_t *s, *sc, *pg;
  const char *v, *nm = config_setting_name(g);
  char path[96], p[160];
  int i, rc, n;
  int64_t st = 0;
  snprintf(path, sizeof path, "limits.%s", nm);
  memset(lm, 0, sizeof *lm);
  lm->psval = x->S->psval[lm - x->dl->limits];
  lm->psw = x->S->psw[lm - x->dl->limits];
  lm->ps = x->S->ps[lm - x->dl->limits];
  lm->line = (int)config_setting_source_line(g);
  lm->select = -1;
  if (!config_setting_is_group(g))
    return derr(x, g, path, "must be a group { algorithm = ...; }%s", NULL, 0);
  if (!ident_ok(nm))
    return derr(x, g, path,
                "a limit's name is 1..31 of [A-Za-z0-9_-], starting with a "
                "letter%s",
                NULL, 0);
  snprintf(lm->name, sizeof lm->name, "%s", nm);
  if ((rc = member_ok(x, g, path, names)))
    return rc;
  v = str_member(g, "algorithm", &s);
  snprintf(p, sizeof p, "%s.algorithm", path);
  for (lm->algo = 0; v && lm->algo < SLUICE__L__COUNT; lm->algo++)
    if (!strcmp(v, algos[lm->algo]))
      break;
  if (!v || lm->algo == SLUICE__L__COUNT)
    return derr(x, s ? s : g, p,
                "must be one of \"gcra\", \"sliding_window\", "
                "\"fixed_window\", \"concurrency\", \"lock\", \"cap\"%s",
                NULL, 0);
  lm->status = lm->algo == SLUICE__L_LOCK ? 409 : 429;
  if ((rc = get_i(x, g, path, "status", 1, 409, 429, &st)))
    return rc;
  if (st && st != 429 && st != 409)
    return derr(x, config_setting_get_member(g, "status"), path,
                "status must be 429 or 409 (got %s%lld)", NULL, st);
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
  if (s && !ident_ok(v))
    return derr(x, s, path, "unit must be a name like \"tokens\"%s", NULL, 0);
  sc = config_setting_get_member(g, "scope");
  snprintf(p, sizeof p, "%s.scope", path);
  if (!sc || (!config_setting_is_array(sc) && !config_setting_is_list(sc)) ||
      (n = config_setting_length(sc)) < 1 || n > SLUICE__SCOPE_MAX)
    return derr(x, sc ? sc : g, p,
                "must be an array of 1..4 attributes [ \"tenant\", ... ]%s",
                NULL, 0);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(sc, (unsigned)i);
    const char *a = config_setting_get_string(e);
    int ai = a ? attr_index(x->dl, a) : -1, j;
    if (ai < 0)
      return derr(x, e, p,
                  "unknown attribute \"%s\" (built in: tenant, key, ip, "
                  "method, route, pattern, tier; others go in `attributes`)",
                  a ? a : "?", 0);
    for (j = 0; j < i; j++)
      if (lm->scope[j] == ai)
        return derr(x, e, p, "attribute \"%s\" named twice", a, 0);
    lm->scope[lm->nscope++] = ai;
  }
  if ((rc = load_params(x, g, path, lm->algo, &lm->base)))
    return rc;
  v = str_member(g, "by", &s);
  pg = config_setting_get_member(g, "params");
  snprintf(p, sizeof p, "%s.by", path);
  if (s && (!v || (lm->select = attr_index(x->dl, v)) < 0))
    return derr(x, s, p, "unknown attribute \"%s\"", v ? v : "?", 0);
  if (pg && config_setting_is_list(pg)) {
    if (s)
      return derr(x, s, p,
                  "the list form of `params` matches in each set's `when`, "
                  "not by one attribute%s",
                  NULL, 0);
    if ((rc = load_pset_list(x, pg, path, lm)))
      return rc;
    return params_whole(x, g, path, lm->algo, &lm->base);
  }
  if (!!s != !!pg)
    return derr(x, s ? s : pg, path,
                "`by` (the attribute) and `params` (its values' numbers) go "
                "together%s",
                NULL, 0);
  if (pg) {
    snprintf(p, sizeof p, "%s.params", path);
    if (!config_setting_is_group(pg) ||
        (n = config_setting_length(pg)) > SLUICE__PSETS_MAX)
      return derr(x, pg, p,
                  "must be a group of at most %s%lld values, or a list ( { "
                  "when = { ... }; numbers }, ... )",
                  NULL, SLUICE__PSETS_MAX);
    for (i = 0; i < n; i++) {
      const config_setting_t *e = config_setting_get_elem(pg, (unsigned)i);
      char ep[200];
      snprintf(ep, sizeof ep, "%s.%s", p, config_setting_name(e));
      if (!config_setting_is_group(e))
        return derr(x, e, ep, "must be a group of numbers%s", NULL, 0);
      lm->ps[i] = lm->base;
      snprintf(lm->psval[i], SLUICE__DNAME, "%s", config_setting_name(e));
      lm->psw[i].n = 1;
      lm->psw[i].attr[0] = lm->select;
      snprintf(lm->psw[i].val[0], SLUICE__WVAL, "%s", lm->psval[i]);
      if ((rc = load_params(x, e, ep, lm->algo, &lm->ps[i])) ||
          (rc = params_whole(x, e, ep, lm->algo, &lm->ps[i])))
        return rc;
      lm->npsets++;
    }
  }
  return params_whole(x, g, path, lm->algo, &lm->base);
}

static int load_limits(dctx *x, const config_setting_t *root) {
  const config_setting_t *ls = config_setting_get_member(root, "limits");
  int i, n, rc;
  if (!ls)
    return SLUICE_OK;
  if (!config_setting_is_group(ls))
    return derr(x, ls, "limits", "must be a group { NAME = { ... }; }%s", NULL,
                0);
  n = config_setting_length(ls);
  if (n > SLUICE__LIMITS_MAX)
    return derr(x, ls, "limits", "at most %s%lld limits", NULL,
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

static int cost_fits(dctx *x, const config_setting_t *s, const char *path,
                     const sluice__limit *lm, int64_t v, int any) {
  int64_t cap = limit_cap(lm, any);
  char what[200];
  if (v >= 1 && v <= cap)
    return SLUICE_OK;
  if (cap == 1)
    snprintf(what, sizeof what,
             "limit \"%s\" (%s) counts one per request: its cost must be 1 "
             "(got %lld)",
             lm->name, algos[lm->algo], (long long)v);
  else
    snprintf(what, sizeof what,
             "must be 1..%lld, the %s burst of limit \"%s\" (got %lld)",
             (long long)cap, any ? "largest" : "smallest", lm->name,
             (long long)v);
  return derr(x, s, path, "%s", what, 0);
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
static int load_cost(dctx *x, const config_setting_t *s, const char *path,
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
    return derr(x, s, path,
                "must be an integer, a method table { GET = 1; other = 5; }, "
                "{ by = ATTR; ranges = (...); } or { attr = ATTR; max = N; }%s",
                NULL, 0);
  if ((v = str_member(s, "attr", &m)) != NULL || m) {
    static const char *const names[] = {"attr", "max", NULL};
    if ((rc = member_ok(x, s, path, names)))
      return rc;
    c->kind = SLUICE__C_ATTR;
    if (!v || (c->attr = attr_index(x->dl, v)) < 0)
      return derr(x, m, path, "unknown attribute \"%s\"", v ? v : "?", 0);
    if (!int_of(m = config_setting_get_member(s, "max"), &c->max))
      return derr(x, m ? m : s, path,
                  "max (the largest cost the caller may give) is missing%s",
                  NULL, 0);
    return cost_fits(x, m, path, lm, c->max, 1);
  }
  if ((v = str_member(s, "by", &m)) != NULL || m) {
    static const char *const names[] = {"by", "ranges", NULL};
    const config_setting_t *rs = config_setting_get_member(s, "ranges");
    if ((rc = member_ok(x, s, path, names)))
      return rc;
    c->kind = SLUICE__C_RANGE;
    if (!v || (c->attr = attr_index(x->dl, v)) < 0)
      return derr(x, m, path, "unknown attribute \"%s\"", v ? v : "?", 0);
    if (!rs || !config_setting_is_list(rs) ||
        (n = config_setting_length(rs)) < 1 || n > SLUICE__COSTS_MAX)
      return derr(x, rs ? rs : s, path,
                  "ranges must be a list of 1..8 { upto = N; cost = C; }, the "
                  "last without upto%s",
                  NULL, 0);
    for (i = 0; i < n; i++) {
      const config_setting_t *e = config_setting_get_elem(rs, (unsigned)i);
      int64_t up = 0, co = 0;
      int has_up = int_of(config_setting_get_member(e, "upto"), &up);
      if (!int_of(config_setting_get_member(e, "cost"), &co) ||
          has_up != (i < n - 1) ||
          (i > 0 && has_up && up <= c->e[i - 1].upto))
        return derr(x, e, path,
                    "a range is { upto = N; cost = C; } with upto rising, "
                    "the last without upto%s",
                    NULL, 0);
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
      return derr(x, e, path, "method %s: cost must be an integer", nm, 0);
    if ((rc = cost_fits(x, e, path, lm, co, 0)))
      return rc;
    if (!strcmp(nm, "other")) {
      c->value = co;
      continue;
    }
    if (strlen(nm) >= sizeof c->e[0].method || c->n == SLUICE__COSTS_MAX)
      return derr(x, e, path,
                  "a method table has at most 8 methods of 1..7 characters "
                  "(%s)",
                  nm, 0);
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
static int add_limit(dctx *x, sluice__droute *dr, const config_setting_t *e,
                     const char *ep, const char *v, const config_setting_t *cs,
                     char *used, int group) {
  const sluice__limit *lm, *first;
  char cp[240];
  int li, j, rc, tg;
  if (!v)
    return derr(x, e, ep, "a limit's name is missing%s", NULL, 0);
  if ((li = limit_index(x->dl, v)) < 0)
    return derr(x, e, ep, "no limit \"%s\" is declared in `limits`", v, 0);
  if (dr->n == SLUICE__RLIMITS_MAX)
    return derr(x, e, ep, "a route applies at most %s%lld limits", NULL,
                SLUICE__RLIMITS_MAX);
  for (j = 0; j < dr->n; j++)
    if (dr->limit[j] == li)
      return derr(x, e, ep, "limit \"%s\" listed twice", v, 0);
  lm = &x->dl->limits[li];
  if (group && lm->algo != SLUICE__L_GCRA)
    return derr(x, e, ep,
                "limit \"%s\" is not a gcra bucket: only buckets go in a "
                "group",
                v, 0);
  first = &x->dl->limits[group < 0 ? dr->limit[dr->n - 1] : li];
  if (group < 0 && lm->scope[0] != first->scope[0]) {
    char what[320];
    snprintf(what, sizeof what,
             "limit \"%s\" is scoped by \"%s\" first and limit \"%s\" by "
             "\"%s\": the buckets of a group are one step in one hash-tag "
             "group (start both scopes with the same attribute)",
             lm->name, sluice__attr_name(x->dl, lm->scope[0]), first->name,
             sluice__attr_name(x->dl, first->scope[0]));
    return derr(x, e, ep, "%s", what, 0);
  }
  if (leases_clash(x->dl, dr, lm))
    return derr(x, e, ep,
                "\"%s\": a concurrency limit of more than 32 leases must be "
                "the route's only concurrency or lock limit (its grant "
                "names the lease id)",
                lm->name, 0);
  if ((tg = sluice__decl_tag_group(dr, lm->scope[0], 1)) < 0)
    return derr(x, e, ep,
                "a route's limits span at most %s%lld hash-tag groups (the "
                "first attributes of their scopes)",
                NULL, SLUICE__TG_MAX);
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
static int route_params_ok(dctx *x, const config_setting_t *m,
                           const char *path, const char *route) {
  const char *o = route, *c;
  char name[SLUICE__DNAME], again[SLUICE__DNAME + 2];
  while ((o = strchr(o, '{')) != NULL) {
    c = strchr(o, '}');
    if (o[-1] != '/' || !c || (c[1] != '/' && c[1] != '\0') ||
        (size_t)(c - o - 1) >= sizeof name)
      return derr(x, m, path,
                  "a parameter is a whole segment /{NAME}/ (got \"%s\")",
                  route, 0);
    memcpy(name, o + 1, (size_t)(c - o - 1));
    name[c - o - 1] = '\0';
    if (attr_index(x->dl, name) < SLUICE__A__BUILTIN)
      return derr(x, m, path,
                  "parameter {%s} must be an attribute of `attributes`",
                  name, 0);
    snprintf(again, sizeof again, "{%s}", name);
    if (strstr(c + 1, again))
      return derr(x, m, path, "parameter {%s} named twice", name, 0);
    o = c + 1;
  }
  return SLUICE_OK;
}

static int load_droute(dctx *x, const config_setting_t *r, int idx,
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
  if ((rc = member_ok(x, r, path, names)))
    return rc;
  v = str_member(r, "method", &m);
  snprintf(p, sizeof p, "%s.method", path);
  if (!v || !v[0] || strlen(v) >= sizeof dr->method)
    return derr(x, m ? m : r, p, "must be a string of 1..7 characters%s", NULL,
                0);
  snprintf(dr->method, sizeof dr->method, "%s", v);
  v = str_member(r, "route", &m);
  snprintf(p, sizeof p, "%s.route", path);
  if (!v || v[0] != '/' || strlen(v) > SLUICE_POLICY_ROUTE_MAX)
    return derr(x, m ? m : r, p,
                "must be a string starting with '/', at most 127 bytes%s", NULL,
                0);
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
  if (!ls || (!config_setting_is_list(ls) && !config_setting_is_array(ls)))
    return derr(x, ls ? ls : r, p,
                "must be a list ( \"NAME\", { limit = \"NAME\"; cost = ...; "
                "} )%s",
                NULL, 0);
  n = config_setting_length(ls);
  /* No limits: a route of boxes alone (a sign-in's lockouts), or, with
  ** no penalty either, an exempt route admitted without a store call
  ** (health checks, webhooks the service must always take). */
  if (n > SLUICE__RLIMITS_MAX)
    return derr(x, ls, p, "must list 0..%s8 limits", NULL, 0);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(ls, (unsigned)i);
    const config_setting_t *cs = NULL, *ns, *gs;
    char ep[200];
    snprintf(ep, sizeof ep, "%s.[%d]", p, i);
    v = config_setting_get_string(e);
    if (!v && config_setting_is_group(e) &&
        (gs = config_setting_get_member(e, "group")) != NULL) {
      static const char *const en[] = {"group", "cost", NULL};
      int k, gm = config_setting_length(gs);
      if ((rc = member_ok(x, e, ep, en)))
        return rc;
      if ((!config_setting_is_array(gs) && !config_setting_is_list(gs)) ||
          gm < 2 || gm > SLUICE_GROUP_MAX)
        return derr(x, gs, ep,
                    "group must list 2 or more gcra limits [ \"tenant\", "
                    "\"key\" ]%s",
                    NULL, 0);
      cs = config_setting_get_member(e, "cost");
      for (k = 0; k < gm; k++) {
        const char *gv =
            config_setting_get_string(config_setting_get_elem(gs, (unsigned)k));
        if ((rc = add_limit(x, dr, e, ep, gv, cs, used, k ? -1 : gm)))
          return rc;
      }
      continue;
    }
    if (!v && config_setting_is_group(e)) {
      static const char *const en[] = {"limit", "cost", NULL};
      if ((rc = member_ok(x, e, ep, en)))
        return rc;
      v = str_member(e, "limit", &ns);
      cs = config_setting_get_member(e, "cost");
    }
    if (!v)
      return derr(x, e, ep,
                  "must be a limit's name, { limit = \"NAME\"; cost = ...; "
                  "} or { group = [ \"NAME\", ... ]; cost = ...; }%s",
                  NULL, 0);
    if ((rc = add_limit(x, dr, e, ep, v, cs, used, 0)))
      return rc;
  }
  for (i = 0; i < dr->ntg; i++)
    if (dr->grecs[i] > SLUICE_PROGRAM_KEYS)
      return derr(x, ls, p,
                  "its limits need %s%lld records in one hash-tag group, more "
                  "than one store call holds (48)",
                  NULL, dr->grecs[i]);
  if ((rc = sluice__decl_route_penalty(r, path, x->file, x->dl, dr, x->err,
                                       x->errlen)))
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

static int load(dctx *x, const config_setting_t *root, char *warn,
                size_t warnlen);

int sluice__decl_load(const config_setting_t *root, const char *file,
                      sluice__decl *dl, char *err, size_t errlen, char *warn,
                      size_t warnlen) {
  dctx x = {file, err, errlen, dl, NULL};
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

static int load(dctx *x, const config_setting_t *root, char *warn,
                size_t warnlen) {
  sluice__decl *dl = x->dl;
  const char *file = x->file;
  const config_setting_t *rs;
  char used[SLUICE__LIMITS_MAX] = {0};
  int i, n, rc;
  if ((rc = load_attrs(x, root)) || (rc = load_limits(x, root)) ||
      (rc = sluice__decl_penalties_load(root, file, dl, x->err, x->errlen)) ||
      (rc = sluice__shadow_when_load(root, file, dl, x->err, x->errlen)))
    return rc;
  rs = config_setting_get_member(root, "routes");
  n = rs && config_setting_is_list(rs) ? config_setting_length(rs) : 0;
  for (i = 0; i < n; i++) {
    const config_setting_t *r = config_setting_get_elem(rs, (unsigned)i);
    if (dl->nroutes == SLUICE__DROUTES_MAX)
      return derr(x, r, "routes", "at most %s%lld routes of limits", NULL,
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

/*
** The policy file's `penalties` and a route's `penalty` and `failure`
** (declared_penalty.h; docs/policy.md "Declared penalties"), checked with
** the file's line like the limits (declared_conf.c):
**
**   penalties = {
**     keys = {
**       scope = [ "tenant", "key" ];   # the box's scope (a limit's terms)
**       strike = "early";              # or "every"
**       strikes = 20; strike_window_ms = 60000; offense_ttl_s = 86400;
**       levels = ( { box_s = 300; },
**                  { box_s = 3600; actions = [ "edge_deny", "alert" ]; },
**                  { actions = [ "edge_deny", "suspend" ]; } );
**       by = "tier"; params = { enterprise = { strikes = 100; levels = ...; }; };
**     };
**   };
**   routes = ( { ...; limits = (...); penalty = "keys"; failure = "degraded"; } );
**
** Choices:
**  a) The ladder has three levels, as the penalty step does; a level is
**     a box of box_s or, with the "suspend" action, a box until lifted by
**     hand (no box_s then).
**  b) The box lives in the hash-tag group of its scope's first attribute,
**     which must be one of the route's groups: the box check, that
**     group's limits and their strikes are one program, which runs first
**     (declared_conf.c, "Hash-tag groups").  Only that group's rate
**     limits strike: a route whose rate limits are all in other groups is
**     refused (its box would take no strikes) unless its strikes are
**     reported ones.
*/
#include <stdio.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"

static const char *const actions[] = {"edge_deny", "alert", "suspend", "page",
                                      "ban", NULL};

typedef struct pctx {
  const char *file;
  char *err;
  size_t errlen;
} pctx;

static int perr(pctx *x, const config_setting_t *s, const char *path,
                const char *what) {
  if (x->err && x->errlen)
    snprintf(x->err, x->errlen, "%s:%d: %s: %s", x->file,
             s ? (int)config_setting_source_line(s) : 0, path, what);
  return SLUICE_ECONFIG;
}

static int known(pctx *x, const config_setting_t *g, const char *path,
                 const char *const *names) {
  int i, j, n = config_setting_length(g);
  for (i = 0; i < n; i++) {
    const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
    const char *nm = config_setting_name(m);
    char p[512];
    for (j = 0; names[j]; j++)
      if (nm && !strcmp(nm, names[j]))
        break;
    if (!names[j]) {
      snprintf(p, sizeof p, "%s.%s", path, nm ? nm : "?");
      return perr(x, m, p, "unknown setting");
    }
  }
  return SLUICE_OK;
}

/* An integer member scaled by unit, lo..hi in the file's unit. */
static int pint(pctx *x, const config_setting_t *g, const char *path,
                const char *name, int64_t unit, int64_t lo, int64_t hi,
                int64_t *out) {
  const config_setting_t *s = config_setting_get_member(g, name);
  char p[512], what[120];
  long long v;
  if (!s)
    return SLUICE_OK;
  snprintf(p, sizeof p, "%s.%s", path, name);
  if (config_setting_type(s) != CONFIG_TYPE_INT &&
      config_setting_type(s) != CONFIG_TYPE_INT64)
    return perr(x, s, p, "must be an integer");
  v = config_setting_get_int64(s);
  if (v < lo || v > hi) {
    snprintf(what, sizeof what, "must be %lld..%lld (got %lld)",
             (long long)lo, (long long)hi, v);
    return perr(x, s, p, what);
  }
  *out = (int64_t)v * unit;
  return SLUICE_OK;
}

#define MS SLUICE__NS_PER_MS
#define S SLUICE__NS_PER_S
#define YEAR_S (INT64_C(366) * 86400)

static int load_levels(pctx *x, const config_setting_t *ls, const char *path,
                       sluice__pset *ps) {
  static const char *const names[] = {"box_s", "actions", NULL};
  char p[512];
  int i, j, rc;
  if (!config_setting_is_list(ls) || config_setting_length(ls) != 3)
    return perr(x, ls, path,
                "must be a list of the ladder's 3 levels ( { box_s = 300; }, "
                "{ box_s = 3600; actions = [ \"edge_deny\", \"alert\" ]; }, "
                "{ actions = [ \"edge_deny\", \"suspend\" ]; } )");
  for (i = 0; i < 3; i++) {
    const config_setting_t *l = config_setting_get_elem(ls, (unsigned)i);
    const config_setting_t *a;
    int64_t box = 0;
    unsigned act = 0;
    snprintf(p, sizeof p, "%.400s.[%d]", path, i);
    if (!config_setting_is_group(l))
      return perr(x, l, p, "must be a group { box_s = N; actions = [...]; }");
    if ((rc = known(x, l, p, names)) ||
        (rc = pint(x, l, p, "box_s", S, 1, YEAR_S, &box)))
      return rc;
    if ((a = config_setting_get_member(l, "actions")) != NULL) {
      snprintf(p, sizeof p, "%.400s.[%d].actions", path, i);
      if (!config_setting_is_array(a) && !config_setting_is_list(a))
        return perr(x, a, p, "must be an array of actions [ \"alert\" ]");
      for (j = 0; j < config_setting_length(a); j++) {
        const config_setting_t *e = config_setting_get_elem(a, (unsigned)j);
        const char *v = config_setting_get_string(e);
        int k;
        for (k = 0; v && actions[k]; k++)
          if (!strcmp(v, actions[k]))
            break;
        if (!v || !actions[k])
          return perr(x, e, p,
                      "an action is one of \"edge_deny\", \"alert\", "
                      "\"suspend\", \"page\", \"ban\"");
        act |= 1u << k;
      }
    }
    snprintf(p, sizeof p, "%.400s.[%d]", path, i);
    if ((act & SLUICE__ACT_SUSPEND) && box)
      return perr(x, l, p,
                  "a suspension lasts until lifted by hand: no box_s with "
                  "\"suspend\"");
    if (!(act & SLUICE__ACT_SUSPEND) && !box)
      return perr(x, l, p, "box_s is missing (or the \"suspend\" action)");
    ps->pp.box_ns[i] = box ? box : SLUICE_FOREVER;
    ps->actions[i] = act;
  }
  return SLUICE_OK;
}

/* Numbers of group g over *ps (the base's, for a set). */
static int load_pset(pctx *x, const config_setting_t *g, const char *path,
                     sluice__pset *ps) {
  const config_setting_t *ls;
  char p[512];
  int rc;
  if ((rc = pint(x, g, path, "strikes", 1, 1, (1 << 20) - 1,
                 &ps->pp.strike_threshold)) ||
      (rc = pint(x, g, path, "strike_window_ms", MS, 1, YEAR_S * 1000,
                 &ps->pp.strike_window_ns)) ||
      (rc = pint(x, g, path, "offense_ttl_s", S, 1, YEAR_S,
                 &ps->pp.offense_ttl_ns)))
    return rc;
  if ((ls = config_setting_get_member(g, "levels")) != NULL) {
    snprintf(p, sizeof p, "%s.levels", path);
    return load_levels(x, ls, p, ps);
  }
  return SLUICE_OK;
}

static int pset_whole(pctx *x, const config_setting_t *g, const char *path,
                      const sluice__pset *ps) {
  char what[80];
  const char *miss = !ps->pp.strike_threshold   ? "strikes"
                     : !ps->pp.strike_window_ns ? "strike_window_ms"
                     : !ps->pp.offense_ttl_ns   ? "offense_ttl_s"
                     : !ps->pp.box_ns[0]        ? "levels"
                                                : NULL;
  if (!miss)
    return SLUICE_OK;
  snprintf(what, sizeof what, "%s is missing", miss);
  return perr(x, g, path, what);
}

/* spread = { of = ATTR; distinct = D; window_ms = W; trips = "NAME"; },
** on a reported penalty. */
static int load_spread(pctx *x, const sluice__decl *dl,
                       const config_setting_t *g, const char *path,
                       sluice__penalty *pn) {
  static const char *const sn[] = {"of", "distinct", "window_ms", "trips",
                                   NULL};
  const config_setting_t *sp = config_setting_get_member(g, "spread"), *m;
  const char *v;
  char p[512];
  int64_t win = 0;
  int rc;
  if (!sp)
    return SLUICE_OK;
  snprintf(p, sizeof p, "%s.spread", path);
  if (!config_setting_is_group(sp))
    return perr(x, sp, p, "must be { of = ATTR; distinct = D; window_ms = W; "
                          "trips = \"PENALTY\"; }");
  if ((rc = known(x, sp, p, sn)) ||
      (rc = pint(x, sp, p, "distinct", 1, 1, 200, &pn->spread.threshold)) ||
      (rc = pint(x, sp, p, "window_ms", MS, 1, YEAR_S * 1000, &win)))
    return rc;
  m = config_setting_get_member(sp, "of");
  if ((pn->spread_of =
           sluice__decl_attr(dl, m ? config_setting_get_string(m) : NULL)) < 0)
    return perr(x, m ? m : sp, p, "of: an attribute is missing or unknown");
  m = config_setting_get_member(sp, "trips");
  v = m ? config_setting_get_string(m) : NULL;
  if (!v || !v[0] || strlen(v) >= sizeof pn->spread_name)
    return perr(x, m ? m : sp, p, "trips: the name of the penalty to trip");
  if (!pn->spread.threshold || !win)
    return perr(x, sp, p, "distinct and window_ms are both needed");
  snprintf(pn->spread_name, sizeof pn->spread_name, "%s", v);
  pn->spread.window_ns = win;
  return SLUICE_OK;
}

/* strike = "reported": reported = { by = ATTR; values = [ ... ];
** window = "fixed" | "sliding"; } and,
** optionally, stuffing = { of = ATTR; reports = N; distinct = D;
** window_ms = W; }. */
static int load_reported(pctx *x, const sluice__decl *dl,
                         const config_setting_t *g, const char *path,
                         sluice__penalty *pn) {
  static const char *const rn[] = {"by", "values", "window", "kept", NULL};
  static const char *const sn[] = {"of", "reports", "distinct", "window_ms",
                                   NULL};
  const config_setting_t *r = config_setting_get_member(g, "reported");
  const config_setting_t *st = config_setting_get_member(g, "stuffing");
  const config_setting_t *vs, *by;
  char p[512];
  int i, rc;
  int64_t win = 0;
  snprintf(p, sizeof p, "%s.reported", path);
  if ((pn->strike == SLUICE__STRIKE_REPORTED) != (r != NULL))
    return perr(x, r ? r : g, p,
                "`reported` (what a report says) goes with strike = "
                "\"reported\", and only with it");
  if (!r)
    return st ? perr(x, st, path, "stuffing counts reports: it needs "
                                  "strike = \"reported\"")
              : SLUICE_OK;
  if (!config_setting_is_group(r))
    return perr(x, r, p, "must be { by = \"status\"; values = "
                         "[ \"401\", \"403\" ]; }");
  if ((rc = known(x, r, p, rn)))
    return rc;
  by = config_setting_get_member(r, "by");
  if ((pn->report = sluice__decl_attr(
           dl, by ? config_setting_get_string(by) : NULL)) < 0)
    return perr(x, by ? by : r, p, "by: an attribute is missing or unknown");
  vs = config_setting_get_member(r, "values");
  if (!vs || (!config_setting_is_array(vs) && !config_setting_is_list(vs)) ||
      config_setting_length(vs) < 1 || config_setting_length(vs) > 8)
    return perr(x, vs ? vs : r, p, "values: 1..8 strings [ \"401\" ]");
  for (i = 0; i < config_setting_length(vs); i++) {
    const char *v =
        config_setting_get_string(config_setting_get_elem(vs, (unsigned)i));
    if (!v || !v[0] || strlen(v) >= sizeof pn->values[0])
      return perr(x, vs, p, "values: 1..8 strings of 1..31 bytes");
    snprintf(pn->values[pn->nvalues++], sizeof pn->values[0], "%s", v);
  }
  if ((vs = config_setting_get_member(r, "kept")) != NULL) {
    if ((!config_setting_is_array(vs) && !config_setting_is_list(vs)) ||
        config_setting_length(vs) > 8)
      return perr(x, vs, p, "kept: 0..8 strings [ \"bad_secret\" ]");
    for (i = 0; i < config_setting_length(vs); i++) {
      const char *v =
          config_setting_get_string(config_setting_get_elem(vs, (unsigned)i));
      if (!v || !v[0] || strlen(v) >= sizeof pn->kept[0])
        return perr(x, vs, p, "kept: 0..8 strings of 1..31 bytes");
      snprintf(pn->kept[pn->nkept++], sizeof pn->kept[0], "%s", v);
    }
  }
  if ((by = config_setting_get_member(r, "window")) != NULL) {
    const char *w = config_setting_get_string(by);
    if (!w || (strcmp(w, "fixed") && strcmp(w, "sliding")))
      return perr(x, by, p,
                  "window: \"fixed\" (the strike window opened by the first "
                  "report) or \"sliding\" (the reports of the last "
                  "strike_window_ms)");
    pn->sliding = !strcmp(w, "sliding");
  }
  if ((rc = load_spread(x, dl, g, path, pn)))
    return rc;
  if (!st)
    return SLUICE_OK;
  snprintf(p, sizeof p, "%s.stuffing", path);
  if (!config_setting_is_group(st))
    return perr(x, st, p, "must be { of = ATTR; reports = N; distinct = D; "
                          "window_ms = W; }");
  if ((rc = known(x, st, p, sn)) ||
      (rc = pint(x, st, p, "reports", 1, 1, INT64_C(1) << 31,
                 &pn->stuffing.limit)) ||
      (rc = pint(x, st, p, "distinct", 1, 1, 200, &pn->distinct.threshold)) ||
      (rc = pint(x, st, p, "window_ms", MS, 1, YEAR_S * 1000, &win)))
    return rc;
  by = config_setting_get_member(st, "of");
  if ((pn->of = sluice__decl_attr(dl, by ? config_setting_get_string(by)
                                         : NULL)) < 0)
    return perr(x, by ? by : st, p, "of: an attribute is missing or unknown");
  if (!pn->stuffing.limit || !pn->distinct.threshold || !win)
    return perr(x, st, p, "reports, distinct and window_ms are all needed");
  pn->stuffing.window_ns = pn->distinct.window_ns = win;
  return SLUICE_OK;
}

/* `params = ( { when = { ATTR = "VALUE"; ... }; numbers }, ... )`, as a
** limit's (declared_conf.c): the first set the request matches. */
static int load_pset_list(pctx *x, const sluice__decl *dl,
                          const config_setting_t *pg, const char *path,
                          sluice__penalty *pn) {
  static const char *const en[] = {"when", "strikes", "strike_window_ms",
                                   "levels", "offense_ttl_s", NULL};
  char p[200], ep[240], wp[260];
  int i, rc, n = config_setting_length(pg);
  snprintf(p, sizeof p, "%s.params", path);
  if (n < 1 || n > (int)(sizeof pn->ps / sizeof pn->ps[0]))
    return perr(x, pg, p, "must list 1..8 sets");
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(pg, (unsigned)i);
    const config_setting_t *w = config_setting_get_member(e, "when");
    snprintf(ep, sizeof ep, "%s.[%d]", p, i);
    if (!config_setting_is_group(e) || !w)
      return perr(x, e, ep,
                  "must be { when = { ATTR = \"VALUE\"; ... }; numbers }");
    if ((rc = known(x, e, ep, en)))
      return rc;
    snprintf(wp, sizeof wp, "%s.when", ep);
    if ((rc = sluice__match_load(w, wp, x->file, dl, &pn->psw[i], x->err,
                                x->errlen)))
      return rc;
    pn->ps[i] = pn->base;
    snprintf(pn->psval[i], sizeof pn->psval[i], "[%d]", i);
    if ((rc = load_pset(x, e, ep, &pn->ps[i])) ||
        (rc = pset_whole(x, e, ep, &pn->ps[i])))
      return rc;
    pn->npsets++;
  }
  return SLUICE_OK;
}

/* `detail = "..."`: who is locked out and why, the words a box's problem
** detail starts with (" is locked out (penalty level N) until T." follows):
** printable ASCII, no quote or backslash (it goes into JSON as it is). */
static int load_detail(pctx *x, const config_setting_t *g, const char *path,
                       sluice__penalty *pn) {
  const config_setting_t *s = config_setting_get_member(g, "detail");
  const char *v = s ? config_setting_get_string(s) : NULL;
  char p[128];
  size_t i, n;
  if (!s)
    return SLUICE_OK;
  snprintf(p, sizeof p, "%s.detail", path);
  n = v ? strlen(v) : 0;
  for (i = 0; i < n; i++)
    if (v[i] < 0x20 || v[i] > 0x7e || v[i] == '"' || v[i] == '\\')
      break;
  if (!v || n == 0 || n > SLUICE__DETAIL_MAX || i < n)
    return perr(x, s, p,
                "must be 1..96 characters of printable ASCII without \" or "
                "\\ (the words before \"is locked out\")");
  memcpy(pn->detail, v, n + 1);
  return SLUICE_OK;
}

static int load_penalty(pctx *x, const sluice__decl *dl,
                        const config_setting_t *g, sluice__penalty *pn) {
  static const char *const names[] = {
      "scope",  "strike",        "strikes", "strike_window_ms",
      "levels", "offense_ttl_s", "by",      "params",
      "reported", "stuffing",    "spread", "detail", NULL};
  const config_setting_t *s, *pg;
  const char *nm = config_setting_name(g), *v;
  char path[96], p[200];
  int i, n, rc;
  memset(pn, 0, sizeof *pn);
  pn->select = -1;
  pn->of = -1;
  pn->spread_of = -1;
  pn->line = (int)config_setting_source_line(g);
  snprintf(path, sizeof path, "penalties.%s", nm ? nm : "?");
  if (!config_setting_is_group(g))
    return perr(x, g, path, "must be a group { scope = [...]; ... }");
  if (!nm || strlen(nm) >= sizeof pn->name)
    return perr(x, g, path, "a penalty's name is 1..31 characters");
  snprintf(pn->name, sizeof pn->name, "%s", nm);
  if ((rc = known(x, g, path, names)))
    return rc;
  s = config_setting_get_member(g, "scope");
  snprintf(p, sizeof p, "%s.scope", path);
  if (!s || (!config_setting_is_array(s) && !config_setting_is_list(s)) ||
      (n = config_setting_length(s)) < 1 || n > 4)
    return perr(x, s ? s : g, p,
                "must be an array of 1..4 attributes [ \"tenant\", \"key\" ]");
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
    int a = sluice__decl_attr(dl, config_setting_get_string(e)), j;
    char what[160];
    if (a < 0) {
      snprintf(what, sizeof what,
               "unknown attribute \"%s\" (built in: tenant, key, ip, method, "
               "route, pattern, tier; others go in `attributes`)",
               config_setting_get_string(e) ? config_setting_get_string(e)
                                            : "?");
      return perr(x, e, p, what);
    }
    for (j = 0; j < i; j++)
      if (pn->scope[j] == a)
        return perr(x, e, p, "an attribute named twice");
    if (i > 0 && sluice__decl_optional(dl, a))
      return perr(x, e, p,
                  "an optional attribute may only start a scope (the box "
                  "is skipped without it)");
    pn->scope[pn->nscope++] = a;
  }
  s = config_setting_get_member(g, "strike");
  v = s ? config_setting_get_string(s) : "early";
  snprintf(p, sizeof p, "%s.strike", path);
  if (v && !strcmp(v, "early"))
    pn->strike = SLUICE__STRIKE_EARLY;
  else if (v && !strcmp(v, "every"))
    pn->strike = SLUICE__STRIKE_EVERY;
  else if (v && !strcmp(v, "reported"))
    pn->strike = SLUICE__STRIKE_REPORTED;
  else
    return perr(x, s, p,
                "must be \"early\" (a denial while an earlier Retry-After "
                "runs), \"every\" (every denial) or \"reported\" (a "
                "request that reports a status)");
  if ((rc = load_reported(x, dl, g, path, pn)) ||
      (rc = load_detail(x, g, path, pn)))
    return rc;
  if ((rc = load_pset(x, g, path, &pn->base)))
    return rc;
  s = config_setting_get_member(g, "by");
  pg = config_setting_get_member(g, "params");
  snprintf(p, sizeof p, "%s.by", path);
  if (s && (pn->select = sluice__decl_attr(dl, config_setting_get_string(s))) <
               0)
    return perr(x, s, p, "unknown attribute");
  if (pg && config_setting_is_list(pg)) {
    if (s)
      return perr(x, s, p,
                  "the list form of `params` matches in each set's `when`, "
                  "not by one attribute");
    if ((rc = load_pset_list(x, dl, pg, path, pn)))
      return rc;
    return pset_whole(x, g, path, &pn->base);
  }
  if (!!s != !!pg)
    return perr(x, s ? s : pg, path,
                "`by` (the attribute) and `params` (its values' numbers) go "
                "together");
  if (pg) {
    snprintf(p, sizeof p, "%s.params", path);
    if (!config_setting_is_group(pg) || (n = config_setting_length(pg)) > 8)
      return perr(x, pg, p, "must be a group of at most 8 values");
    for (i = 0; i < n; i++) {
      const config_setting_t *e = config_setting_get_elem(pg, (unsigned)i);
      static const char *const pnames[] = {"strikes", "strike_window_ms",
                                           "levels", "offense_ttl_s", NULL};
      char ep[512];
      snprintf(ep, sizeof ep, "%s.%s", p, config_setting_name(e));
      if (!config_setting_is_group(e))
        return perr(x, e, ep, "must be a group of numbers");
      if ((rc = known(x, e, ep, pnames)))
        return rc;
      pn->ps[i] = pn->base;
      snprintf(pn->psval[i], sizeof pn->psval[i], "%s",
               config_setting_name(e));
      pn->psw[i].n = 1;
      pn->psw[i].attr[0] = pn->select;
      snprintf(pn->psw[i].val[0], SLUICE__WVAL, "%s", pn->psval[i]);
      if ((rc = load_pset(x, e, ep, &pn->ps[i])) ||
          (rc = pset_whole(x, e, ep, &pn->ps[i])))
        return rc;
      pn->npsets++;
    }
  }
  return pset_whole(x, g, path, &pn->base);
}

/* `optional = [ ATTR, ... ]`: caller attributes a request may leave out
** (a sign-in failure that names no subject, an export with no range).  A
** penalty whose scope starts with one is skipped by a request without it
** (its box neither checked nor counted), a stuffing `of` without it
** counts as the value "" (one more distinct value), and a cost by its
** ranges reads it as 0 (declared.c).  A limit applies to every request of its
** routes: no limit's scope may name one, and a penalty's only first (its
** hash-tag group is then the box's alone). */
static int load_optional(pctx *x, const config_setting_t *root,
                         sluice__decl *dl) {
  const config_setting_t *o = config_setting_get_member(root, "optional");
  int i, j, k, n, a;
  if (!o)
    return SLUICE_OK;
  if (!config_setting_is_array(o) && !config_setting_is_list(o))
    return perr(x, o, "optional", "must be an array of attributes [ \"login\" ]");
  n = config_setting_length(o);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(o, (unsigned)i);
    const char *v = config_setting_get_string(e);
    char what[160];
    a = v ? sluice__decl_attr(dl, v) : -1;
    if (a < SLUICE__A__BUILTIN)
      return perr(x, e, "optional",
                  "not an attribute of `attributes` (the built-in ones are "
                  "required where a scope names them)");
    for (j = 0; j < dl->nlimits; j++)
      for (k = 0; k < dl->limits[j].nscope; k++)
        if (dl->limits[j].scope[k] == a) {
          snprintf(what, sizeof what,
                   "\"%s\" scopes limit \"%s\": a limit applies to every "
                   "request of its routes (only penalties may be optional)",
                   v, dl->limits[j].name);
          return perr(x, e, "optional", what);
        }
    dl->optional |= 1u << (a - SLUICE__A__BUILTIN);
  }
  return SLUICE_OK;
}

int sluice__decl_optional(const sluice__decl *dl, int a) {
  return a >= SLUICE__A__BUILTIN &&
         (dl->optional >> (a - SLUICE__A__BUILTIN) & 1u);
}

int sluice__decl_penalties_load(const config_setting_t *root, const char *file,
                                sluice__decl *dl, char *err, size_t errlen) {
  const config_setting_t *ps = config_setting_get_member(root, "penalties");
  pctx x = {file, err, errlen};
  int i, n, rc;
  if ((rc = load_optional(&x, root, dl)))
    return rc;
  if (!ps)
    return SLUICE_OK;
  if (!config_setting_is_group(ps))
    return perr(&x, ps, "penalties", "must be a group { NAME = { ... }; }");
  n = config_setting_length(ps);
  if (n > SLUICE__PENALTIES_MAX)
    return perr(&x, ps, "penalties", "at most 8 penalties");
  for (i = 0; i < n; i++) {
    if ((rc = load_penalty(&x, dl, config_setting_get_elem(ps, (unsigned)i),
                           &dl->penalties[i])))
      return rc;
    dl->npenalties++;
  }
  for (i = 0; i < n; i++) { /* each spread's penalty to trip, by name */
    sluice__penalty *pn = &dl->penalties[i];
    int j;
    if (pn->spread_of < 0)
      continue;
    for (j = 0; j < n; j++)
      if (j != i && !strcmp(dl->penalties[j].name, pn->spread_name))
        break;
    if (j == n) {
      char p[96];
      snprintf(p, sizeof p, "penalties.%s.spread.trips", pn->name);
      return perr(&x, config_setting_get_elem(ps, (unsigned)i), p,
                  "no other penalty of that name in `penalties`");
    }
    pn->spread_trips = j;
  }
  return SLUICE_OK;
}

int sluice__decl_strikes(int algo) {
  return algo == SLUICE__L_GCRA || algo == SLUICE__L_SLIDING ||
         algo == SLUICE__L_FIXED;
}


int sluice__decl_route_steps(const sluice__decl *dl, const sluice__droute *dr,
                             int tg) {
  int i, n = 0;
  for (i = 0; i < dr->n; i++)
    if (dr->tg[i] == tg && dr->group[i] >= 0)
      n++; /* a group of buckets is one step */
  if (dr->gpen[tg] &&
      dl->penalties[dr->gpen[tg] - 1].strike == SLUICE__STRIKE_REPORTED)
    return n + 1 > 8 ? n + 1 : 8; /* a report: the box, the failures,
                                     stuffing's 3, the spread, a strike */
  if (dr->gpen[tg])
    for (n++, i = 0; i < dr->n; i++)
      if (dr->tg[i] == tg && dr->group[i] >= 0 &&
          sluice__decl_strikes(dl->limits[dr->limit[i]].algo))
        n += 3; /* notice RENEW, notice ACQUIRE, STRIKE */
  return n;
}

/* Penalty v (setting s, at path p) as one of route dr's: its box in the
** hash-tag group of its scope's first attribute (added when no limit is
** there), one penalty a group. */
static int add_penalty(pctx *x, const config_setting_t *s, const char *p,
                       const char *v, const sluice__decl *dl,
                       sluice__droute *dr) {
  char what[240];
  int i, tg;
  for (i = 0; v && i < dl->npenalties; i++)
    if (!strcmp(v, dl->penalties[i].name))
      break;
  if (!v || i == dl->npenalties)
    return perr(x, s, p, "no penalty of that name in `penalties`");
  if ((tg = sluice__decl_tag_group(dr, dl->penalties[i].scope[0], 1)) < 0)
    return perr(x, s, p,
                "the route's limits and penalties span more than 4 hash-tag "
                "groups (the first attributes of their scopes)");
  if (dr->gpen[tg]) {
    snprintf(what, sizeof what,
             "penalties \"%s\" and \"%s\" both start their scopes with "
             "\"%s\": one box a hash-tag group",
             dl->penalties[dr->gpen[tg] - 1].name, v,
             sluice__attr_name(dl, dl->penalties[i].scope[0]));
    return perr(x, s, p, what);
  }
  if (!dr->pen)
    dr->pen = i + 1;
  dr->gpen[tg] = i + 1;
  dr->pord[dr->npen++] = tg;

  if (dl->penalties[i].strike != SLUICE__STRIKE_REPORTED) {
    int k, in = 0, out = 0;
    for (k = 0; k < dr->n; k++)
      if (sluice__decl_strikes(dl->limits[dr->limit[k]].algo))
        *(dr->tg[k] == tg ? &in : &out) = 1;
    if (out && !in) {
      snprintf(what, sizeof what,
               "penalty \"%s\" would take no strikes: no rate limit (gcra, "
               "a window) of the route starts its scope with \"%s\", the "
               "box's hash-tag group",
               v, sluice__attr_name(dl, dl->penalties[i].scope[0]));
      return perr(x, s, p, what);
    }
  }
  if (dr->grecs[tg] + 2 > SLUICE_PROGRAM_KEYS ||
      sluice__decl_route_steps(dl, dr, tg) > SLUICE_PROGRAM_STEPS) {
    snprintf(what, sizeof what,
             "the box, its notice and a strike step per rate limit make %d "
             "steps in its hash-tag group, more than one store call runs "
             "(%d)",
             sluice__decl_route_steps(dl, dr, tg), SLUICE_PROGRAM_STEPS);
    return perr(x, s, p, what);
  }
  /* The box and the notice, or the stuffing records, the failures and the
  ** spread. */
  dr->nrecs += 5;
  dr->grecs[tg] += 5;
  return SLUICE_OK;
}

int sluice__decl_route_penalty(const config_setting_t *r, const char *path,
                               const char *file, const sluice__decl *dl,
                               sluice__droute *dr, char *err, size_t errlen) {
  const config_setting_t *s;
  pctx x = {file, err, errlen};
  char p[512];
  const char *v;
  int i, n, rc;
  if ((s = config_setting_get_member(r, "failure")) != NULL) {
    v = config_setting_get_string(s);
    snprintf(p, sizeof p, "%s.failure", path);
    if (v && !strcmp(v, "degraded")) {
      for (i = 0; i < dr->n; i++)
        if (sluice__decl_strikes(dl->limits[dr->limit[i]].algo))
          break;
      if (i == dr->n)
        return perr(&x, s, p,
                    "a route without a rate limit (gcra, a window) has "
                    "nothing to degrade to: it fails \"closed\"");
      dr->degraded = 1;
    } else if (!v || strcmp(v, "closed"))
      return perr(&x, s, p,
                  "must be \"closed\" (503 when the store fails) or "
                  "\"degraded\" (the local degraded limiter)");
  }
  if ((s = config_setting_get_member(r, "penalty")) == NULL)
    return SLUICE_OK;
  snprintf(p, sizeof p, "%s.penalty", path);
  if (config_setting_get_string(s)) {
    if ((rc = add_penalty(&x, s, p, config_setting_get_string(s), dl, dr)))
      return rc;
  } else {
    n = config_setting_is_array(s) || config_setting_is_list(s)
            ? config_setting_length(s)
            : 0;
    if (n < 1 || n > SLUICE__TG_MAX)
      return perr(&x, s, p,
                  "must be a penalty's name or a list of 1..4 [ \"NAME\", "
                  "... ]");
    for (i = 0; i < n; i++) {
      const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
      char ep[540];
      snprintf(ep, sizeof ep, "%s.[%d]", p, i);
      if ((rc = add_penalty(&x, e, ep, config_setting_get_string(e), dl, dr)))
        return rc;
    }
  }
  /* A spread trips a box listed after its own (its program runs later),
  ** one that counts reports. */
  for (i = 0; i < dr->npen; i++) {
    const sluice__penalty *pn = &dl->penalties[dr->gpen[dr->pord[i]] - 1];
    int k;
    if (pn->spread_of < 0)
      continue;
    for (k = i + 1; k < dr->npen; k++)
      if (dr->gpen[dr->pord[k]] - 1 == pn->spread_trips)
        break;
    if (k == dr->npen ||
        dl->penalties[pn->spread_trips].strike != SLUICE__STRIKE_REPORTED) {
      char what[240];
      snprintf(what, sizeof what,
               "penalty \"%s\"'s spread trips \"%s\": list that penalty "
               "after it, and make it count reports (strike = \"reported\")",
               pn->name, pn->spread_name);
      return perr(&x, s, p, what);
    }
  }
  return SLUICE_OK;
}

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

#define MS SLUICE__NS_PER_MS
#define S SLUICE__NS_PER_S
#define YEAR_S (INT64_C(366) * 86400)

static int load_levels(sluice__rd *x, const config_setting_t *ls,
                       const char *path, sluice__pset *ps) {
  static const char *const names[] = {"box_s", "actions", NULL};
  char p[512];
  int i, j, rc;
  if (!config_setting_is_list(ls) || config_setting_length(ls) != 3)
    return sluice__rd_err(x, ls, path,
                          "must be a list of the ladder's 3 levels ( { box_s "
                          "= 300; }, { box_s = 3600; actions = [ "
                          "\"edge_deny\", \"alert\" ]; }, { actions = [ "
                          "\"edge_deny\", \"suspend\" ]; } )");
  for (i = 0; i < 3; i++) {
    const config_setting_t *l = config_setting_get_elem(ls, (unsigned)i);
    const config_setting_t *a;
    int64_t box = 0;
    unsigned act = 0;
    snprintf(p, sizeof p, "%.400s.[%d]", path, i);
    if (!config_setting_is_group(l))
      return sluice__rd_err(x, l, p,
                            "must be a group { box_s = N; actions = [...]; }");
    if ((rc = sluice__rd_known(x, l, p, names)) ||
        (rc = sluice__rd_int(x, l, p, "box_s", S, 1, YEAR_S, &box)))
      return rc;
    if ((a = config_setting_get_member(l, "actions")) != NULL) {
      snprintf(p, sizeof p, "%.400s.[%d].actions", path, i);
      if (!sluice__rd_list(a))
        return sluice__rd_err(x, a, p,
                              "must be an array of actions [ \"alert\" ]");
      for (j = 0; j < config_setting_length(a); j++) {
        const config_setting_t *e = config_setting_get_elem(a, (unsigned)j);
        const char *v = config_setting_get_string(e);
        int k;
        for (k = 0; v && actions[k]; k++)
          if (!strcmp(v, actions[k]))
            break;
        if (!v || !actions[k])
          return sluice__rd_err(x, e, p,
                                "an action is one of \"edge_deny\", "
                                "\"alert\", \"suspend\", \"page\", \"ban\"");
        act |= 1u << k;
      }
    }
    snprintf(p, sizeof p, "%.400s.[%d]", path, i);
    if ((act & SLUICE__ACT_SUSPEND) && box)
      return sluice__rd_err(x, l, p,
                            "a suspension lasts until lifted by hand: no "
                            "box_s with \"suspend\"");
    if (!(act & SLUICE__ACT_SUSPEND) && !box)
      return sluice__rd_err(x, l, p,
                            "box_s is missing (or the \"suspend\" action)");
    ps->pp.box_ns[i] = box ? box : SLUICE_FOREVER;
    ps->actions[i] = act;
  }
  return SLUICE_OK;
}

/* Numbers of group g over *ps (the base's, for a set). */
static int load_pset(sluice__rd *x, const config_setting_t *g, const char *path,
                     void *set, const void *owner) {
  sluice__pset *ps = set;
  const config_setting_t *ls;
  char p[512];
  int rc;
  (void)owner;
  if ((rc = sluice__rd_int(x, g, path, "strikes", 1, 1, (1 << 20) - 1,
                           &ps->pp.strike_threshold)) ||
      (rc = sluice__rd_int(x, g, path, "strike_window_ms", MS, 1, YEAR_S * 1000,
                           &ps->pp.strike_window_ns)) ||
      (rc = sluice__rd_int(x, g, path, "offense_ttl_s", S, 1, YEAR_S,
                           &ps->pp.offense_ttl_ns)))
    return rc;
  if ((ls = config_setting_get_member(g, "levels")) != NULL) {
    snprintf(p, sizeof p, "%s.levels", path);
    return load_levels(x, ls, p, ps);
  }
  return SLUICE_OK;
}

static int pset_whole(sluice__rd *x, const config_setting_t *g,
                      const char *path, const void *set, const void *owner) {
  const sluice__pset *ps = set;
  const char *miss = !ps->pp.strike_threshold   ? "strikes"
                     : !ps->pp.strike_window_ns ? "strike_window_ms"
                     : !ps->pp.offense_ttl_ns   ? "offense_ttl_s"
                     : !ps->pp.box_ns[0]        ? "levels"
                                                : NULL;
  (void)owner;
  return miss ? sluice__rd_err(x, g, path, "%s is missing", miss) : SLUICE_OK;
}

/* Attribute member `name` of g (at path) into *out: "NAME: an attribute is
** missing or unknown" when it is not one. */
static int attr_of(sluice__rd *x, const config_setting_t *g, const char *path,
                   const char *name, int *out) {
  const config_setting_t *m = config_setting_get_member(g, name);
  if ((*out = sluice__decl_attr(x->dl,
                                m ? config_setting_get_string(m) : NULL)) < 0)
    return sluice__rd_err(x, m ? m : g, path,
                          "%s: an attribute is missing or unknown", name);
  return SLUICE_OK;
}

/* spread = { of = ATTR; distinct = D; window_ms = W; trips = "NAME"; },
** on a reported penalty. */
static int load_spread(sluice__rd *x, const config_setting_t *g,
                       const char *path, sluice__penalty *pn) {
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
    return sluice__rd_err(x, sp, p,
                          "must be { of = ATTR; distinct = D; window_ms = W; "
                          "trips = \"PENALTY\"; }");
  if ((rc = sluice__rd_known(x, sp, p, sn)) ||
      (rc = sluice__rd_int(x, sp, p, "distinct", 1, 1, 200,
                           &pn->spread.threshold)) ||
      (rc =
           sluice__rd_int(x, sp, p, "window_ms", MS, 1, YEAR_S * 1000, &win)) ||
      (rc = attr_of(x, sp, p, "of", &pn->spread_of)))
    return rc;
  m = config_setting_get_member(sp, "trips");
  v = m ? config_setting_get_string(m) : NULL;
  if (!v || !v[0] || strlen(v) >= sizeof pn->spread_name)
    return sluice__rd_err(x, m ? m : sp, p,
                          "trips: the name of the penalty to trip");
  if (!pn->spread.threshold || !win)
    return sluice__rd_err(x, sp, p, "distinct and window_ms are both needed");
  snprintf(pn->spread_name, sizeof pn->spread_name, "%s", v);
  pn->spread.window_ns = win;
  return SLUICE_OK;
}

/* reported.values and .kept: min..8 strings of 1..31 bytes into out[*n];
** eg: an example of one in the message. */
static int strings(sluice__rd *x, const config_setting_t *r, const char *p,
                   const char *name, int min, const char *eg, char (*out)[32],
                   int *n) {
  const config_setting_t *vs = config_setting_get_member(r, name);
  int i;
  if (!vs && !min)
    return SLUICE_OK;
  if (!sluice__rd_list(vs) || config_setting_length(vs) < min ||
      config_setting_length(vs) > 8)
    return sluice__rd_err(x, vs ? vs : r, p, "%s: %d..8 strings [ \"%s\" ]",
                          name, min, eg);
  for (i = 0; i < config_setting_length(vs); i++) {
    const char *v =
        config_setting_get_string(config_setting_get_elem(vs, (unsigned)i));
    if (!v || !v[0] || strlen(v) >= sizeof out[0])
      return sluice__rd_err(x, vs, p, "%s: %d..8 strings of 1..31 bytes", name,
                            min);
    snprintf(out[(*n)++], sizeof out[0], "%s", v);
  }
  return SLUICE_OK;
}

/* strike = "reported": reported = { by = ATTR; values = [ ... ];
** window = "fixed" | "sliding"; } and,
** optionally, stuffing = { of = ATTR; reports = N; distinct = D;
** window_ms = W; }. */
static int load_reported(sluice__rd *x, const config_setting_t *g,
                         const char *path, sluice__penalty *pn) {
  static const char *const rn[] = {"by", "values", "window", "kept", NULL};
  static const char *const sn[] = {"of", "reports", "distinct", "window_ms",
                                   NULL};
  const config_setting_t *r = config_setting_get_member(g, "reported");
  const config_setting_t *st = config_setting_get_member(g, "stuffing");
  const config_setting_t *by;
  char p[512];
  int rc;
  int64_t win = 0;
  snprintf(p, sizeof p, "%s.reported", path);
  if ((pn->strike == SLUICE__STRIKE_REPORTED) != (r != NULL))
    return sluice__rd_err(x, r ? r : g, p,
                          "`reported` (what a report says) goes with strike "
                          "= \"reported\", and only with it");
  if (!r)
    return st ? sluice__rd_err(x, st, path,
                               "stuffing counts reports: it needs strike = "
                               "\"reported\"")
              : SLUICE_OK;
  if (!config_setting_is_group(r))
    return sluice__rd_err(x, r, p,
                          "must be { by = \"status\"; values = [ \"401\", "
                          "\"403\" ]; }");
  if ((rc = sluice__rd_known(x, r, p, rn)) ||
      (rc = attr_of(x, r, p, "by", &pn->report)) ||
      (rc = strings(x, r, p, "values", 1, "401", pn->values, &pn->nvalues)) ||
      (rc = strings(x, r, p, "kept", 0, "bad_secret", pn->kept, &pn->nkept)))
    return rc;
  if ((by = config_setting_get_member(r, "window")) != NULL) {
    const char *w = config_setting_get_string(by);
    if (!w || (strcmp(w, "fixed") && strcmp(w, "sliding")))
      return sluice__rd_err(x, by, p,
                            "window: \"fixed\" (the strike window opened by "
                            "the first report) or \"sliding\" (the reports of "
                            "the last strike_window_ms)");
    pn->sliding = !strcmp(w, "sliding");
  }
  if ((rc = load_spread(x, g, path, pn)) || !st)
    return rc;
  snprintf(p, sizeof p, "%s.stuffing", path);
  if (!config_setting_is_group(st))
    return sluice__rd_err(x, st, p,
                          "must be { of = ATTR; reports = N; distinct = D; "
                          "window_ms = W; }");
  if ((rc = sluice__rd_known(x, st, p, sn)) ||
      (rc = sluice__rd_int(x, st, p, "reports", 1, 1, INT64_C(1) << 31,
                           &pn->stuffing.limit)) ||
      (rc = sluice__rd_int(x, st, p, "distinct", 1, 1, 200,
                           &pn->distinct.threshold)) ||
      (rc =
           sluice__rd_int(x, st, p, "window_ms", MS, 1, YEAR_S * 1000, &win)) ||
      (rc = attr_of(x, st, p, "of", &pn->of)))
    return rc;
  if (!pn->stuffing.limit || !pn->distinct.threshold || !win)
    return sluice__rd_err(x, st, p,
                          "reports, distinct and window_ms are all needed");
  pn->stuffing.window_ns = pn->distinct.window_ns = win;
  return SLUICE_OK;
}

/* `detail = "..."`: who is locked out and why, the words a box's problem
** detail starts with (" is locked out (penalty level N) until T." follows):
** printable ASCII, no quote or backslash (it goes into JSON as it is). */
static int load_detail(sluice__rd *x, const config_setting_t *g,
                       const char *path, sluice__penalty *pn) {
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
    return sluice__rd_err(x, s, p,
                          "must be 1..96 characters of printable ASCII "
                          "without \" or \\ (the words before \"is locked "
                          "out\")");
  memcpy(pn->detail, v, n + 1);
  return SLUICE_OK;
}

static int load_penalty(sluice__rd *x, const config_setting_t *g,
                        sluice__penalty *pn) {
  static const char *const names[] = {
      "scope",  "strike",        "strikes", "strike_window_ms",
      "levels", "offense_ttl_s", "by",      "params",
      "reported", "stuffing",    "spread", "detail", NULL};
  static const char *const en[] = {
      "when", "strikes", "strike_window_ms", "levels", "offense_ttl_s", NULL};
  sluice__psets k = {en,
                     en + 1,
                     8,
                     "unknown attribute",
                     "must be a group of at most %d values",
                     sizeof(sluice__pset),
                     load_pset,
                     pset_whole,
                     pn,
                     &pn->select,
                     &pn->base,
                     pn->ps,
                     pn->psval,
                     pn->psw,
                     &pn->npsets};
  const config_setting_t *s;
  const char *nm = config_setting_name(g), *v;
  char path[96], p[200];
  int rc;
  memset(pn, 0, sizeof *pn);
  pn->select = -1;
  pn->of = -1;
  pn->spread_of = -1;
  pn->line = (int)config_setting_source_line(g);
  snprintf(path, sizeof path, "penalties.%s", nm ? nm : "?");
  if (!config_setting_is_group(g))
    return sluice__rd_err(x, g, path, "must be a group { scope = [...]; ... }");
  if (!nm || strlen(nm) >= sizeof pn->name)
    return sluice__rd_err(x, g, path, "a penalty's name is 1..31 characters");
  snprintf(pn->name, sizeof pn->name, "%s", nm);
  if ((rc = sluice__rd_known(x, g, path, names)) ||
      (rc = sluice__rd_scope(x, g, path,
                             "must be an array of 1..4 attributes [ "
                             "\"tenant\", \"key\" ]",
                             "an attribute named twice", pn->scope,
                             &pn->nscope)))
    return rc;
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
    return sluice__rd_err(x, s, p,
                          "must be \"early\" (a denial while an earlier "
                          "Retry-After runs), \"every\" (every denial) or "
                          "\"reported\" (a request that reports a status)");
  if ((rc = load_reported(x, g, path, pn)) ||
      (rc = load_detail(x, g, path, pn)) ||
      (rc = load_pset(x, g, path, &pn->base, pn)))
    return rc;
  return sluice__rd_psets(x, g, path, &k);
}

/* `optional = [ ATTR, ... ]`: caller attributes a request may leave out
** (a sign-in failure that names no subject, an export with no range).  A
** penalty whose scope starts with one is skipped by a request without it
** (its box neither checked nor counted), a stuffing `of` without it
** counts as the value "" (one more distinct value), and a cost by its
** ranges reads it as 0 (declared.c).  A limit applies to every request of its
** routes: no limit's scope may name one, and a penalty's only first (its
** hash-tag group is then the box's alone). */
static int load_optional(sluice__rd *x, const config_setting_t *root) {
  sluice__decl *dl = x->dl;
  const config_setting_t *o = config_setting_get_member(root, "optional");
  int i, j, k, n, a;
  if (!o)
    return SLUICE_OK;
  if (!sluice__rd_list(o))
    return sluice__rd_err(x, o, "optional",
                          "must be an array of attributes [ \"login\" ]");
  n = config_setting_length(o);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(o, (unsigned)i);
    const char *v = config_setting_get_string(e);
    a = sluice__decl_attr(dl, v);
    if (a < SLUICE__A__BUILTIN)
      return sluice__rd_err(x, e, "optional",
                            "not an attribute of `attributes` (the built-in "
                            "ones are required where a scope names them)");
    for (j = 0; j < dl->nlimits; j++)
      for (k = 0; k < dl->limits[j].nscope; k++)
        if (dl->limits[j].scope[k] == a)
          return sluice__rd_err(x, e, "optional",
                                "\"%s\" scopes limit \"%s\": a limit "
                                "applies to every request of its routes (only "
                                "penalties may be optional)",
                                v, dl->limits[j].name);
    dl->optional |= 1u << (a - SLUICE__A__BUILTIN);
  }
  return SLUICE_OK;
}

int sluice__decl_optional(const sluice__decl *dl, int a) {
  return a >= SLUICE__A__BUILTIN &&
         (dl->optional >> (a - SLUICE__A__BUILTIN) & 1u);
}

int sluice__decl_penalties_load(sluice__rd *x, const config_setting_t *root) {
  const config_setting_t *ps = config_setting_get_member(root, "penalties");
  sluice__decl *dl = x->dl;
  int i, n, rc;
  if ((rc = load_optional(x, root)) || !ps)
    return rc;
  if (!config_setting_is_group(ps))
    return sluice__rd_err(x, ps, "penalties",
                          "must be a group { NAME = { ... }; }");
  n = config_setting_length(ps);
  if (n > SLUICE__PENALTIES_MAX)
    return sluice__rd_err(x, ps, "penalties", "at most 8 penalties");
  for (i = 0; i < n; i++) {
    if ((rc = load_penalty(x, config_setting_get_elem(ps, (unsigned)i),
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
      return sluice__rd_err(x, config_setting_get_elem(ps, (unsigned)i), p,
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
static int add_penalty(sluice__rd *x, const config_setting_t *s, const char *p,
                       const char *v, sluice__droute *dr) {
  const sluice__decl *dl = x->dl;
  int i, tg;
  for (i = 0; v && i < dl->npenalties; i++)
    if (!strcmp(v, dl->penalties[i].name))
      break;
  if (!v || i == dl->npenalties)
    return sluice__rd_err(x, s, p, "no penalty of that name in `penalties`");
  if ((tg = sluice__decl_tag_group(dr, dl->penalties[i].scope[0], 1)) < 0)
    return sluice__rd_err(x, s, p,
                          "the route's limits and penalties span more than 4 "
                          "hash-tag groups (the first attributes of their "
                          "scopes)");
  if (dr->gpen[tg])
    return sluice__rd_err(x, s, p,
                          "penalties \"%s\" and \"%s\" both start their "
                          "scopes with \"%s\": one box a hash-tag group",
                          dl->penalties[dr->gpen[tg] - 1].name, v,
                          sluice__attr_name(dl, dl->penalties[i].scope[0]));
  if (!dr->pen)
    dr->pen = i + 1;
  dr->gpen[tg] = i + 1;
  dr->pord[dr->npen++] = tg;

  if (dl->penalties[i].strike != SLUICE__STRIKE_REPORTED) {
    int k, in = 0, out = 0;
    for (k = 0; k < dr->n; k++)
      if (sluice__decl_strikes(dl->limits[dr->limit[k]].algo))
        *(dr->tg[k] == tg ? &in : &out) = 1;
    if (out && !in)
      return sluice__rd_err(x, s, p,
                            "penalty \"%s\" would take no strikes: no rate "
                            "limit (gcra, a window) of the route starts its "
                            "scope with \"%s\", the box's hash-tag group",
                            v,
                            sluice__attr_name(dl, dl->penalties[i].scope[0]));
  }
  if (dr->grecs[tg] + 2 > SLUICE_PROGRAM_KEYS ||
      sluice__decl_route_steps(dl, dr, tg) > SLUICE_PROGRAM_STEPS)
    return sluice__rd_err(x, s, p,
                          "the box, its notice and a strike step per rate "
                          "limit make %d steps in its hash-tag group, more "
                          "than one store call runs (%d)",
                          sluice__decl_route_steps(dl, dr, tg),
                          SLUICE_PROGRAM_STEPS);
  /* The box and the notice, or the stuffing records, the failures and the
  ** spread. */
  dr->nrecs += 5;
  dr->grecs[tg] += 5;
  return SLUICE_OK;
}

int sluice__decl_route_penalty(sluice__rd *x, const config_setting_t *r,
                               const char *path, sluice__droute *dr) {
  const sluice__decl *dl = x->dl;
  const config_setting_t *s;
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
        return sluice__rd_err(x, s, p,
                              "a route without a rate limit (gcra, a window) "
                              "has nothing to degrade to: it fails "
                              "\"closed\"");
      dr->degraded = 1;
    } else if (!v || strcmp(v, "closed"))
      return sluice__rd_err(x, s, p,
                            "must be \"closed\" (503 when the store fails) "
                            "or \"degraded\" (the local degraded limiter)");
  }
  if ((s = config_setting_get_member(r, "penalty")) == NULL)
    return SLUICE_OK;
  snprintf(p, sizeof p, "%s.penalty", path);
  if (config_setting_get_string(s)) {
    if ((rc = add_penalty(x, s, p, config_setting_get_string(s), dr)))
      return rc;
  } else {
    n = sluice__rd_list(s) ? config_setting_length(s) : 0;
    if (n < 1 || n > SLUICE__TG_MAX)
      return sluice__rd_err(x, s, p,
                            "must be a penalty's name or a list of 1..4 [ "
                            "\"NAME\", ... ]");
    for (i = 0; i < n; i++) {
      const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
      char ep[540];
      snprintf(ep, sizeof ep, "%s.[%d]", p, i);
      if ((rc = add_penalty(x, e, ep, config_setting_get_string(e), dr)))
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
        dl->penalties[pn->spread_trips].strike != SLUICE__STRIKE_REPORTED)
      return sluice__rd_err(x, s, p,
                            "penalty \"%s\"'s spread trips \"%s\": list "
                            "that penalty after it, and make it count reports "
                            "(strike = \"reported\")",
                            pn->name, pn->spread_name);
  }
  return SLUICE_OK;
}

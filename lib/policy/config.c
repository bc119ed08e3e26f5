/*
** Policy configuration: the built-in defaults, validation, and the file
** loader.
**
** A configuration is a document (libconfig's tree: a file's, changed by
** set calls, config_doc.c) that this loader reads into the internal
** resolved struct.  Validation is one function that names every setting by
** its path in the configuration file ("tiers.growth.key.burst"), which is
** also the libconfig path of that setting: the loader reads the document
** into the struct, runs the validation, and looks the failing path up in
** the document to report the file and line (or "set:" for a setting a call
** made).  So a file and a configuration built in code get exactly the same
** rules, and an error in a file points at the line to fix.
**
** Choices:
**  a) Settings left out of a file keep their defaults; an unknown setting
**     is an error, so a typo ("strkes") never silently keeps a default.
**  b) Listing `tiers` replaces the whole tier set (a tier with a built-in
**     name starts from its built-in values, a new one from zero, so a
**     missing number is reported as invalid).  Listing `routes` replaces
**     the route table.
**  c) Durations carry their unit in the setting name (_s, _ms); the struct
**     holds ns.  Integers only: the decision path has no floating point,
**     and neither does its configuration.
**  d) Parsing uses libconfig (Debian's libconfig-dev) rather than a parser
**     of our own.
*/
#include <errno.h>
#include <libconfig.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"

#define S SLUICE__NS_PER_S
#define MS SLUICE__NS_PER_MS
/* A tier bucket's period: at most a day. */
#define PERIOD_MS_MAX (86400 * 1000)

static void tier_set(sluice__tier *t, const char *name, int64_t tr,
                     int64_t tb, int64_t kr, int64_t kb, int64_t strikes,
                     int64_t rec, int64_t exp, int64_t xcap, int l3) {
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->tenant_rate = tr;
  t->tenant_period_ns = S;
  t->tenant_burst = tb;
  t->key_rate = kr;
  t->key_period_ns = S;
  t->key_burst = kb;
  t->strike_threshold = strikes;
  t->reconcile_concurrency = rec;
  t->export_concurrency = exp;
  t->exports_per_window = xcap;
  t->level3 = l3;
}

static void route_set(sluice__route *r, const char *method,
                      const char *route, int cls) {
  memset(r, 0, sizeof *r);
  snprintf(r->method, sizeof r->method, "%s", method);
  snprintf(r->route, sizeof r->route, "%s", route);
  r->endpoint_class = cls;
}

int sluice__conf_defaults(sluice__conf *c) {
  const sluice_policy_setting *st;
  int i;
  if (!c)
    return SLUICE_EINVAL;
  memset(c, 0, sizeof *c);
  c->ntiers = 3;
  tier_set(&c->tiers[0], "sandbox", 10, 600, 5, 300, 20, 1, 1, 2,
           SLUICE_L3_SUSPEND);
  tier_set(&c->tiers[1], "growth", 50, 3000, 25, 1500, 20, 2, 1, 10,
           SLUICE_L3_SUSPEND);
  tier_set(&c->tiers[2], "enterprise", 500, 30000, 250, 15000, 100, 8, 3, 60,
           SLUICE_L3_PAGE);
  c->nroutes = 5;
  route_set(&c->routes[0], "POST", "/v1/auth/token", SLUICE_EP_AUTH);
  route_set(&c->routes[1], "POST", "/v1/ledgers/reconcile",
            SLUICE_EP_RECONCILE);
  route_set(&c->routes[2], "GET", "/v1/reports/audit-export",
            SLUICE_EP_EXPORT);
  route_set(&c->routes[3], "GET", "/v1/jobs/*", SLUICE_EP_JOB_POLL);
  route_set(&c->routes[4], "*", "/v1/*", SLUICE_EP_STANDARD);
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++)
    *sluice__setting_field(c, i) = st->dflt * st->unit_ns;
  c->fail_closed_mask = (1u << SLUICE_EP_RECONCILE) |
                        (1u << SLUICE_EP_EXPORT) | (1u << SLUICE_EP_AUTH);
  c->shadow = 0;
  return SLUICE_OK;
}

const char *sluice__level3_name(int a) {
  return a == SLUICE_L3_PAGE ? "page" : "suspend";
}

/* ------------------------------------------------------------ checking --- */

typedef struct ck {
  char *path;
  size_t pathlen;
  char *msg;
  size_t msglen;
} ck;

static int fail(ck *k, const char *path, const char *fmt, long long v,
                long long lo, long long hi) {
  snprintf(k->path, k->pathlen, "%s", path);
  snprintf(k->msg, k->msglen, fmt, v, lo, hi);
  return SLUICE_ECONFIG;
}

static int range(ck *k, const char *path, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi)
    return SLUICE_OK;
  snprintf(k->path, k->pathlen, "%s", path);
  snprintf(k->msg, k->msglen, "must be %lld..%lld (got %lld)", (long long)lo,
           (long long)hi, (long long)v);
  return SLUICE_ECONFIG;
}

static int name_ok(const char *n) {
  size_t i, len = strnlen(n, SLUICE_POLICY_NAME_MAX + 1);
  if (len == 0 || len > SLUICE_POLICY_NAME_MAX)
    return 0;
  if (!((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= 'A' && n[0] <= 'Z')))
    return 0;
  for (i = 0; i < len; i++) {
    char ch = n[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
      return 0;
  }
  return 1;
}

static int check_bucket(ck *k, const char *tier, const char *which,
                        int64_t rate, int64_t period, int64_t burst,
                        int64_t pct) {
  char p[96];
  sluice_gcra_params g = {rate, period, burst};
  int rc;
  snprintf(p, sizeof p, "tiers.%s.%s.rate", tier, which);
  /* The degraded limiter runs rate * pct per period * 100: keep it valid. */
  if ((rc = range(k, p, rate, 1, ((int64_t)1 << 32) / 100)) != SLUICE_OK)
    return rc;
  snprintf(p, sizeof p, "tiers.%s.%s.period_ms", tier, which);
  if ((rc = range(k, p, period / MS, 1, PERIOD_MS_MAX)) != SLUICE_OK ||
      period % MS != 0)
    return rc != SLUICE_OK ? rc
                           : fail(k, p, "must be whole ms (got %lld ns)",
                                  (long long)period, 0, 0);
  snprintf(p, sizeof p, "tiers.%s.%s.burst", tier, which);
  if ((rc = range(k, p, burst, 1, SLUICE_COUNT_MAX)) != SLUICE_OK)
    return rc;
  if (sluice_gcra_params_check(&g) != SLUICE_OK)
    return fail(k, p, "burst %lld times the period is too long a bucket", burst,
                0, 0);
  (void)pct;
  return SLUICE_OK;
}

/* The table's settings (settings.c) in its order: those with a fixed
** maximum when burst is 0, else the costs, whose maximum is `burst`. */
static int check_settings(ck *k, const sluice__conf *c,
                          int64_t burst) {
  const sluice_policy_setting *st;
  char p[96];
  int i, rc;
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++) {
    if ((st->max == 0) != (burst != 0))
      continue;
    snprintf(p, sizeof p, "%s.%s", st->group, st->name);
    if ((rc = range(k, p, *sluice__setting_cfield(c, i) / st->unit_ns,
                    st->min, st->max ? st->max : burst)))
      return rc;
  }
  return SLUICE_OK;
}

int sluice__policy_config_check2(const sluice__conf *c, char *path,
                                 size_t pathlen, char *msg, size_t msglen) {
  char pbuf[160], mbuf[160];
  ck k = {path ? path : pbuf, path ? pathlen : sizeof pbuf,
          msg ? msg : mbuf, msg ? msglen : sizeof mbuf};
  char p[128];
  int i, j, rc;
  int64_t min_burst = SLUICE_COUNT_MAX;

  if (k.pathlen)
    k.path[0] = '\0';
  if (k.msglen)
    k.msg[0] = '\0';
  if ((rc = range(&k, "tiers", c->ntiers, 1, SLUICE_POLICY_TIERS_MAX)))
    return rc;
  /* The table's settings with fixed bounds first: a tier's buckets are
  ** checked against degraded_percent. */
  if ((rc = check_settings(&k, c, 0)))
    return rc;
  for (i = 0; i < c->ntiers; i++) {
    const sluice__tier *t = &c->tiers[i];
    if (!name_ok(t->name))
      return fail(&k, "tiers",
                  "tier %lld: a name is 1..31 of [A-Za-z0-9_-], starting "
                  "with a letter",
                  i, 0, 0);
    for (j = 0; j < i; j++)
      if (strcmp(c->tiers[j].name, t->name) == 0) {
        snprintf(p, sizeof p, "tiers.%s", t->name);
        return fail(&k, p, "tier defined twice", 0, 0, 0);
      }
    if ((rc = check_bucket(&k, t->name, "tenant", t->tenant_rate,
                           t->tenant_period_ns, t->tenant_burst,
                           c->degraded_percent)))
      return rc;
    if ((rc = check_bucket(&k, t->name, "key", t->key_rate, t->key_period_ns,
                           t->key_burst, c->degraded_percent)))
      return rc;
    snprintf(p, sizeof p, "tiers.%s.strikes", t->name);
    if ((rc = range(&k, p, t->strike_threshold, 1, (1 << 20) - 1)))
      return rc;
    snprintf(p, sizeof p, "tiers.%s.reconcile_concurrency", t->name);
    if ((rc = range(&k, p, t->reconcile_concurrency, 1, SLUICE_GROUP_MAX)))
      return rc;
    snprintf(p, sizeof p, "tiers.%s.export_concurrency", t->name);
    if ((rc = range(&k, p, t->export_concurrency, 1, SLUICE_GROUP_MAX)))
      return rc;
    snprintf(p, sizeof p, "tiers.%s.exports_per_window", t->name);
    if ((rc = range(&k, p, t->exports_per_window, 1, SLUICE_COUNT_MAX)))
      return rc;
    snprintf(p, sizeof p, "tiers.%s.level3", t->name);
    if (t->level3 != SLUICE_L3_SUSPEND && t->level3 != SLUICE_L3_PAGE)
      return fail(&k, p, "must be \"suspend\" or \"page\" (got %lld)",
                  t->level3, 0, 0);
    if (t->tenant_burst < min_burst)
      min_burst = t->tenant_burst;
    if (t->key_burst < min_burst)
      min_burst = t->key_burst;
  }
  /* Costs: a request must fit the smallest bucket. */
  if ((rc = check_settings(&k, c, min_burst)))
    return rc;
  /* The long range is the heavier export: cheaper would reward asking for
  ** more. */
  if (c->export_long_cost < c->cost[SLUICE_EP_EXPORT])
    return fail(&k, "costs.export_long",
                "must be at least costs.export (got %lld, costs.export is "
                "%lld)",
                c->export_long_cost, c->cost[SLUICE_EP_EXPORT], 0);
  /* No route at all would class no request by its method and route: a
  ** table emptied by mistake, not a policy. */
  if (c->nroutes < 1 && c->declared_routes < 1)
    return fail(&k, "routes", "must list at least one route (got %lld)",
                c->nroutes, 0, 0);
  if ((rc = range(&k, "routes", c->nroutes, 0, SLUICE_POLICY_ROUTES_MAX)))
    return rc;
  for (i = 0; i < c->nroutes; i++) {
    const sluice__route *r = &c->routes[i];
    size_t ml = strnlen(r->method, sizeof r->method);
    size_t rl = strnlen(r->route, sizeof r->route);
    snprintf(p, sizeof p, "routes.[%d].method", i);
    if (ml == 0 || ml >= sizeof r->method)
      return fail(&k, p, "must be 1..7 characters (\"*\": any)", 0, 0, 0);
    snprintf(p, sizeof p, "routes.[%d].route", i);
    if (rl == 0 || rl >= sizeof r->route || r->route[0] != '/')
      return fail(&k, p, "must start with '/' and be at most %lld bytes",
                  SLUICE_POLICY_ROUTE_MAX, 0, 0);
    snprintf(p, sizeof p, "routes.[%d].class", i);
    if ((rc = range(&k, p, r->endpoint_class, 1, SLUICE_EP__COUNT - 1)))
      return rc;
  }
  if (c->fail_closed_mask &
      ~((1u << SLUICE_EP__COUNT) - 1u - 1u)) /* bit 0 is AUTO */
    return fail(&k, "failure.fail_closed", "unknown endpoint class bits %llx",
                c->fail_closed_mask, 0, 0);
  if (c->shadow != 0 && c->shadow != 1)
    return fail(&k, "shadow", "must be true or false (got %lld)", c->shadow,
                0, 0);
  if (c->shadow_features & ~(int64_t)SLUICE_SHADOW_ALL)
    return fail(&k, "shadow_features", "unknown feature bits %llx",
                c->shadow_features, 0, 0);
  for (i = 0; i < c->ntiers; i++)
    if (c->tiers[i].shadow_features & ~(int64_t)SLUICE_SHADOW_ALL) {
      snprintf(p, sizeof p, "tiers.%s.shadow_features", c->tiers[i].name);
      return fail(&k, p, "unknown feature bits %llx",
                  c->tiers[i].shadow_features, 0, 0);
    }
  if (!memchr(c->host_counters, 0, sizeof c->host_counters) ||
      !memchr(c->host_degraded_store, 0, sizeof c->host_degraded_store) ||
      !memchr(c->host_deny_cache, 0, sizeof c->host_deny_cache))
    return fail(&k, "host", "a segment URI is not NUL-terminated", 0, 0, 0);
  return SLUICE_OK;
}

/* ------------------------------------------------------------- loading --- */

typedef struct ld {
  const char *file;
  char *err;
  size_t errlen;
} ld;

static int lerr(ld *l, const config_setting_t *s, const char *path,
                const char *what) {
  /* Line 0 (a setting a set call made): config_doc.c says "set:". */
  if (l->err && l->errlen)
    snprintf(l->err, l->errlen, "%s:%d: %s: %s", l->file,
             s ? (int)config_setting_source_line(s) : 0, path, what);
  return SLUICE_ECONFIG;
}

/* A setting's path.  Paths are short (names of at most 31 bytes, three
** levels); one cut to fit is still NUL-terminated.  The result is looked
** at so that -O3's truncation warning knows it is handled. */
static void join(char *out, size_t n, const char *parent, const char *name) {
  int w = parent && parent[0] ? snprintf(out, n, "%s.%s", parent, name)
                              : snprintf(out, n, "%s", name);
  if (w < 0)
    out[0] = '\0';
}

/* Every member of group `g` must be one of `names` (NULL-terminated). */
static int only(ld *l, const config_setting_t *g, const char *gpath,
                const char *const *names) {
  int i, j, n = config_setting_length(g);
  char p[160];
  for (i = 0; i < n; i++) {
    config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
    const char *nm = config_setting_name(m);
    for (j = 0; names[j]; j++)
      if (nm && strcmp(nm, names[j]) == 0)
        break;
    if (!names[j]) {
      join(p, sizeof p, gpath, nm ? nm : "?");
      return lerr(l, m, p, "unknown setting");
    }
  }
  return SLUICE_OK;
}

static const config_setting_t *group_of(ld *l, const config_setting_t *parent,
                                        const char *name, const char *path,
                                        int *rc) {
  config_setting_t *g = config_setting_get_member(parent, name);
  *rc = SLUICE_OK;
  if (g && !config_setting_is_group(g)) {
    *rc = lerr(l, g, path, "must be a group { ... }");
    return NULL;
  }
  return g;
}

/* An integer setting times `unit`, if present.  Every value that fits is
** stored, negative ones too, and judged by the validator, so that all
** bounds are reported alike ("must be LO..HI (got X)"); [lo, hi] is for
** the one value it cannot see: a duration whose ns do not fit in 64 bits. */
static int get_scaled(ld *l, const config_setting_t *g, const char *gpath,
                      const char *name, int64_t unit, int64_t lo, int64_t hi,
                      int64_t *out) {
  config_setting_t *s = config_setting_get_member(g, name);
  char p[160], what[96];
  long long v;
  if (!s)
    return SLUICE_OK;
  join(p, sizeof p, gpath, name);
  if (config_setting_type(s) != CONFIG_TYPE_INT &&
      config_setting_type(s) != CONFIG_TYPE_INT64)
    return lerr(l, s, p, "must be an integer");
  v = config_setting_get_int64(s);
  if (v > INT64_MAX / unit || v < INT64_MIN / unit) {
    snprintf(what, sizeof what, "must be %lld..%lld (got %lld)",
             (long long)lo, (long long)hi, v);
    return lerr(l, s, p, what);
  }
  *out = (int64_t)v * unit;
  return SLUICE_OK;
}

/* A setting without a unit: every int64 fits, the validator judges it. */
static int get_int(ld *l, const config_setting_t *g, const char *gpath,
                   const char *name, int64_t *out) {
  return get_scaled(l, g, gpath, name, 1, 0, 0, out);
}

static int get_bool(ld *l, const config_setting_t *g, const char *gpath,
                    const char *name, int *out) {
  config_setting_t *s = config_setting_get_member(g, name);
  char p[160];
  if (!s)
    return SLUICE_OK;
  join(p, sizeof p, gpath, name);
  if (config_setting_type(s) != CONFIG_TYPE_BOOL)
    return lerr(l, s, p, "must be true or false");
  *out = config_setting_get_bool(s);
  return SLUICE_OK;
}

/* Staged rollout: [ "penalty", "leases" ] (or [ "all" ]) into bits. */
static int get_features(ld *l, const config_setting_t *g, const char *gpath,
                        int64_t *out) {
  config_setting_t *s = config_setting_get_member(g, "shadow_features");
  const config_setting_t *bad;
  char p[160];
  if (!s)
    return SLUICE_OK;
  join(p, sizeof p, gpath, "shadow_features");
  if (sluice__shadow_names(s, out, &bad) == 0)
    return SLUICE_OK;
  return bad == s ? lerr(l, s, p, "must be an array of feature names [ "
                                  "\"penalty\", ... ]: buckets, penalty, "
                                  "leases, fail_closed, all")
                  : lerr(l, bad, p, "unknown feature (buckets, penalty, "
                                    "leases, fail_closed, all)");
}

static int class_of(const char *s) {
  int i;
  for (i = 1; i < SLUICE_EP__COUNT; i++)
    if (strcmp(s, sluice__class_name(i)) == 0)
      return i;
  return 0;
}

static int load_bucket(ld *l, const config_setting_t *t, const char *tpath,
                       const char *which, int64_t *rate, int64_t *period,
                       int64_t *burst) {
  static const char *const names[] = {"rate", "period_ms", "burst", NULL};
  char p[160];
  int rc;
  const config_setting_t *g;
  join(p, sizeof p, tpath, which);
  g = group_of(l, t, which, p, &rc);
  if (rc || !g)
    return rc;
  if ((rc = only(l, g, p, names)) || (rc = get_int(l, g, p, "rate", rate)) ||
      (rc = get_scaled(l, g, p, "period_ms", MS, 1, PERIOD_MS_MAX, period)) ||
      (rc = get_int(l, g, p, "burst", burst)))
    return rc;
  return SLUICE_OK;
}

static int load_tiers(ld *l, const config_setting_t *root,
                      sluice__conf *c) {
  static const char *const names[] = {
      "tenant", "key", "strikes", "reconcile_concurrency",
      "export_concurrency", "exports_per_window", "level3",
      "shadow_features", NULL};
  sluice__conf dflt;
  const config_setting_t *tiers;
  int i, j, n, rc;
  char p[160];

  tiers = group_of(l, root, "tiers", "tiers", &rc);
  if (rc || !tiers)
    return rc;
  n = config_setting_length(tiers);
  if (n < 1 || n > SLUICE_POLICY_TIERS_MAX)
    return lerr(l, tiers, "tiers", "must define 1..8 tiers");
  sluice__conf_defaults(&dflt);
  c->ntiers = n;
  for (i = 0; i < n; i++) {
    config_setting_t *t = config_setting_get_elem(tiers, (unsigned)i);
    const char *nm = config_setting_name(t);
    sluice__tier *tt = &c->tiers[i];
    const config_setting_t *l3;
    join(p, sizeof p, "tiers", nm);
    if (!config_setting_is_group(t))
      return lerr(l, t, p, "must be a group { ... }");
    if (strlen(nm) > SLUICE_POLICY_NAME_MAX)
      return lerr(l, t, p, "tier name longer than 31 bytes");
    memset(tt, 0, sizeof *tt);
    tt->tenant_period_ns = tt->key_period_ns = S;
    for (j = 0; j < dflt.ntiers; j++)
      if (strcmp(dflt.tiers[j].name, nm) == 0)
        *tt = dflt.tiers[j];
    snprintf(tt->name, sizeof tt->name, "%s", nm);
    if ((rc = only(l, t, p, names)) ||
        (rc = load_bucket(l, t, p, "tenant", &tt->tenant_rate,
                          &tt->tenant_period_ns, &tt->tenant_burst)) ||
        (rc = load_bucket(l, t, p, "key", &tt->key_rate, &tt->key_period_ns,
                          &tt->key_burst)) ||
        (rc = get_int(l, t, p, "strikes", &tt->strike_threshold)) ||
        (rc = get_int(l, t, p, "reconcile_concurrency",
                      &tt->reconcile_concurrency)) ||
        (rc = get_int(l, t, p, "export_concurrency",
                      &tt->export_concurrency)) ||
        (rc = get_int(l, t, p, "exports_per_window",
                      &tt->exports_per_window)) ||
        (rc = get_features(l, t, p, &tt->shadow_features)))
      return rc;
    l3 = config_setting_get_member(t, "level3");
    if (l3) {
      const char *v = config_setting_get_string(l3);
      char lp[200];
      snprintf(lp, sizeof lp, "%.100s.level3", p);
      if (v && strcmp(v, "suspend") == 0)
        tt->level3 = SLUICE_L3_SUSPEND;
      else if (v && strcmp(v, "page") == 0)
        tt->level3 = SLUICE_L3_PAGE;
      else
        return lerr(l, l3, lp, "must be \"suspend\" or \"page\"");
    }
  }
  return SLUICE_OK;
}

static int load_routes(ld *l, const config_setting_t *root,
                       sluice__conf *c) {
  static const char *const names[] = {"method", "route", "class", NULL};
  const config_setting_t *rs = config_setting_get_member(root, "routes");
  int i, k, n, rc;
  char p[160];
  if (!rs)
    return SLUICE_OK;
  if (!config_setting_is_list(rs))
    return lerr(l, rs, "routes", "must be a list ( {...}, ... )");
  n = config_setting_length(rs);
  c->nroutes = 0;
  c->declared_routes = 0;
  for (k = 0; k < n; k++) {
    config_setting_t *r = config_setting_get_elem(rs, (unsigned)k);
    config_setting_t *m, *ro, *cl;
    const char *v;
    /* A route of declared limits: declared_conf.c reads it. */
    if (sluice__decl_route_is(r)) {
      c->declared_routes++;
      continue;
    }
    if (c->nroutes == SLUICE_POLICY_ROUTES_MAX)
      return lerr(l, rs, "routes", "at most 32 routes");
    i = c->nroutes++;
    snprintf(p, sizeof p, "routes.[%d]", k);
    if (!config_setting_is_group(r))
      return lerr(l, r, p, "must be a group { method; route; class; }");
    if ((rc = only(l, r, p, names)))
      return rc;
    m = config_setting_get_member(r, "method");
    ro = config_setting_get_member(r, "route");
    cl = config_setting_get_member(r, "class");
    memset(&c->routes[i], 0, sizeof c->routes[i]);
    snprintf(p, sizeof p, "routes.[%d].method", k);
    if (!m || !(v = config_setting_get_string(m)) ||
        strlen(v) >= sizeof c->routes[i].method || !v[0])
      return lerr(l, m ? m : r, p, "must be a string of 1..7 characters");
    snprintf(c->routes[i].method, sizeof c->routes[i].method, "%s", v);
    snprintf(p, sizeof p, "routes.[%d].route", k);
    if (!ro || !(v = config_setting_get_string(ro)) || v[0] != '/' ||
        strlen(v) > SLUICE_POLICY_ROUTE_MAX)
      return lerr(l, ro ? ro : r, p,
                  "must be a string starting with '/', at most 127 bytes");
    snprintf(c->routes[i].route, sizeof c->routes[i].route, "%s", v);
    snprintf(p, sizeof p, "routes.[%d].class", k);
    if (!cl || !(v = config_setting_get_string(cl)) || !class_of(v))
      return lerr(l, cl ? cl : r, p,
                  "must be one of \"standard\", \"reconcile\", \"export\", "
                  "\"job_poll\", \"auth\"");
    c->routes[i].endpoint_class = class_of(v);
  }
  return SLUICE_OK;
}

/* failure.fail_closed: [ "reconcile", ... ] into class bits (the group's
** numbers are the table's). */
static int load_fail_closed(ld *l, const config_setting_t *root,
                            sluice__conf *c) {
  const config_setting_t *g, *fc;
  int rc, i, n;
  g = group_of(l, root, "failure", "failure", &rc);
  if (rc || !g || !(fc = config_setting_get_member(g, "fail_closed")))
    return rc;
  if (!config_setting_is_array(fc) && !config_setting_is_list(fc))
    return lerr(l, fc, "failure.fail_closed",
                "must be an array of class names [ \"auth\", ... ]");
  c->fail_closed_mask = 0;
  n = config_setting_length(fc);
  for (i = 0; i < n; i++) {
    config_setting_t *e = config_setting_get_elem(fc, (unsigned)i);
    const char *v = config_setting_get_string(e);
    int cls = v ? class_of(v) : 0;
    if (!cls)
      return lerr(l, e, "failure.fail_closed", "unknown endpoint class");
    c->fail_closed_mask |= 1u << cls;
  }
  return SLUICE_OK;
}

/* The table's settings (settings.c), a group at a time: its rows are
** consecutive.  failure.fail_closed is read by load_fail_closed. */
static int load_settings(ld *l, const config_setting_t *root,
                         sluice__conf *c) {
  const sluice_policy_setting *first, *st;
  const char *names[32];
  int i, j, n, rc;
  for (i = 0; (first = sluice_policy_setting_at(i)) != NULL; i = j) {
    const config_setting_t *g;
    n = 0;
    for (j = i; (st = sluice_policy_setting_at(j)) != NULL &&
                strcmp(st->group, first->group) == 0 && n < 30;
         j++)
      names[n++] = st->name;
    if (strcmp(first->group, "failure") == 0)
      names[n++] = "fail_closed";
    names[n] = NULL;
    g = group_of(l, root, first->group, first->group, &rc);
    if (rc)
      return rc;
    if (!g)
      continue;
    if ((rc = only(l, g, first->group, names)))
      return rc;
    for (n = i; n < j; n++) {
      st = sluice_policy_setting_at(n);
      if ((rc = get_scaled(l, g, st->group, st->name, st->unit_ns, st->min,
                           st->max, sluice__setting_field(c, n))))
        return rc;
    }
  }
  return SLUICE_OK;
}

/* The host-wide segments: host = { counters = "shm:name=/..."; ... }.
** Their form is checked when the policy opens them. */
static int load_host(ld *l, const config_setting_t *root,
                     sluice__conf *c) {
  static const char *const names[] = {"counters", "degraded_store",
                                      "deny_cache", NULL};
  char *dst[] = {c->host_counters, c->host_degraded_store,
                 c->host_deny_cache};
  const config_setting_t *g;
  int rc, i;
  g = group_of(l, root, "host", "host", &rc);
  if (rc || !g)
    return rc;
  if ((rc = only(l, g, "host", names)))
    return rc;
  for (i = 0; names[i]; i++) {
    config_setting_t *s = config_setting_get_member(g, names[i]);
    const char *v = s ? config_setting_get_string(s) : NULL;
    char p[64];
    if (!s)
      continue;
    join(p, sizeof p, "host", names[i]);
    if (!v || strlen(v) > SLUICE_POLICY_URI_MAX)
      return lerr(l, s, p, "must be a string of at most 127 characters");
    snprintf(dst[i], SLUICE_POLICY_URI_MAX + 1, "%s", v);
  }
  return SLUICE_OK;
}

/* The setting at a path as the validator names it ("routes.[2].class").
** When the file does not set it (a default is at fault: a default cost
** larger than a bucket the file made smaller, a setting a new tier left
** out), *exact is 0 and the nearest ancestor in the file is returned. */
static const config_setting_t *lookup_path(const config_t *cf,
                                           const char *path, int *exact) {
  const config_setting_t *cur = config_root_setting(cf), *next;
  char part[128];
  const char *p = path;
  *exact = 1;
  while (*p) {
    size_t n = strcspn(p, ".");
    if (n >= sizeof part)
      break;
    memcpy(part, p, n);
    part[n] = '\0';
    if (part[0] == '[')
      next = config_setting_get_elem(cur, (unsigned)strtoul(part + 1, NULL,
                                                            10));
    else
      next = config_setting_get_member(cur, part);
    if (!next) {
      *exact = 0;
      return cur;
    }
    cur = next;
    p += n;
    if (*p == '.')
      p++;
  }
  return cur;
}

/* The whole file, NUL-terminated, for the integer check of conf_ints.c.
** A policy is a few kB; more than 1 MiB is not one. */
static int read_all(FILE *f, char **out, size_t *len) {
  enum { MAX = 1 << 20 };
  size_t cap = 1 << 14, n = 0;
  char *p = malloc(cap + 1), *q;
  if (!p)
    return SLUICE_ENOMEM;
  for (;;) {
    n += fread(p + n, 1, cap - n, f);
    if (ferror(f)) {
      free(p);
      return SLUICE_EIO;
    }
    if (n < cap || cap > MAX)
      break;
    q = realloc(p, cap * 2 + 1);
    if (!q) {
      free(p);
      return SLUICE_ENOMEM;
    }
    p = q;
    cap *= 2;
  }
  if (n > MAX) {
    free(p);
    return SLUICE_ERANGE;
  }
  p[n] = '\0';
  *out = p;
  *len = n;
  return SLUICE_OK;
}

/* A policy's text (a file's, or a set call's value) into *cf: every
** integer widened (conf_ints.c), then libconfig's parser.  `file` names
** the text in messages. */
int sluice__conf_parse(const char *file, const char *text, config_t *cf,
                       char *err, size_t errlen) {
  int rc, wline;
  char *wide, what[96];
  rc = sluice__conf_widen(text, strlen(text), &wide, &wline, what,
                          sizeof what);
  if (rc != SLUICE_OK) {
    if (err && errlen && rc == SLUICE_ECONFIG)
      snprintf(err, errlen, "%s:%d: %s", file, wline, what);
    return rc;
  }
  if (config_read_string(cf, wide) != CONFIG_TRUE) {
    if (err && errlen)
      snprintf(err, errlen, "%s:%d: syntax: %s", file, config_error_line(cf),
               config_error_text(cf) ? config_error_text(cf) : "error");
    free(wide);
    return SLUICE_ECONFIG;
  }
  free(wide);
  return SLUICE_OK;
}

/* A file's text, NUL-terminated and malloc'ed, into *text. */
int sluice__conf_read_file(const char *path, char **text, char *err,
                           size_t errlen) {
  size_t len;
  int rc;
  FILE *f = fopen(path, "r");
  if (!f) {
    if (err && errlen)
      snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return SLUICE_EIO;
  }
  rc = read_all(f, text, &len);
  fclose(f);
  if (rc != SLUICE_OK) {
    if (err && errlen)
      snprintf(err, errlen, "%s: %s", path,
               rc == SLUICE_ERANGE ? "larger than 1 MiB" : "cannot read");
    return rc == SLUICE_ENOMEM ? rc : SLUICE_EIO;
  }
  return SLUICE_OK;
}

/* The document into *out and *dl: every setting read, then the validator;
** a setting with no line (one a set call made) is reported as "set". */
int sluice__conf_resolve(const config_t *cf, const char *path,
                         sluice__conf *out, sluice__decl *dl, char *err,
                         size_t errlen, char *warn, size_t warnlen) {
  static const char *const top[] = {"shadow", "shadow_features", "tiers",
                                    "costs",  "routes",  "penalty", "auth",
                                    "heavy",  "failure", "host",
                                    "breaker", "ip_backstop", "client_ip",
                                    "shadow_when", "attributes",
                                    "untrusted", "optional",
                                    "limits", "penalties", NULL};
  sluice__conf c;
  const config_setting_t *root;
  ld l = {path, err, errlen};
  int rc;

  if (err && errlen)
    err[0] = '\0';
  sluice__conf_defaults(&c);
  root = config_root_setting(cf);
  if ((rc = only(&l, root, "", top)) ||
      (rc = get_bool(&l, root, "", "shadow", &c.shadow)) ||
      (rc = get_features(&l, root, "", &c.shadow_features)) ||
      (rc = load_tiers(&l, root, &c)) || (rc = load_routes(&l, root, &c)) ||
      (rc = load_settings(&l, root, &c)) ||
      (rc = load_fail_closed(&l, root, &c)) || (rc = load_host(&l, root, &c)) ||
      (rc = sluice__decl_load(root, path, dl, err, errlen, warn, warnlen)))
    return rc;
  {
    char vpath[128], vmsg[160];
    rc = sluice__policy_config_check2(&c, vpath, sizeof vpath, vmsg,
                                      sizeof vmsg);
    if (rc != SLUICE_OK) {
      int exact;
      const config_setting_t *s = lookup_path(cf, vpath, &exact);
      int line = s ? (int)config_setting_source_line(s) : 0;
      char at[24] = "";
      if (line > 0)
        snprintf(at, sizeof at, ":%d", line);
      if (err && errlen && exact && line == 0)
        snprintf(err, errlen, "set: %s: %s", vpath, vmsg);
      else if (err && errlen && !exact && strcmp(path, "set") == 0)
        snprintf(err, errlen, "set: %s (a default): %s", vpath, vmsg);
      else if (err && errlen)
        snprintf(err, errlen, "%s%s: %s%s: %s", path, at, vpath,
                 exact ? "" : " (not set in the file)", vmsg);
      return rc;
    }
  }
  *out = c;
  return SLUICE_OK;
}

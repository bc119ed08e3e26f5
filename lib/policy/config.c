/*
** Policy configuration: the general settings' defaults and the file
** loader (declared_conf.c reads the limits, routes and
** penalties).
**
** A configuration is a document (libconfig's tree: a file's, changed by
** set calls, config_doc.c) that this loader reads into the internal
** resolved struct.  Each setting is checked where it is read, named by
** its path in the configuration file ("breaker.window_ms") with the line
** of the file it is on (or "set:" for a setting a call made).  So a file
** and a configuration built in code get exactly the same rules, and an
** error in a file points at the line to fix.  The helpers the readers of
** the declared limits and penalties share (sluice__rd_*) are here too.
**
** Choices:
**  a) Settings left out of a file keep their defaults; an unknown setting
**     is an error, so a typo ("strkes") never silently keeps a default.
**  b) `tiers` names the values a request's tier may take (the counters'
**     rows); listing it replaces the default three.  What a tier changes
**     is the file's: its limits' and penalties' parameter sets.
**  c) Durations carry their unit in the setting name (_s, _ms); the struct
**     holds ns.  Integers only: the decision path has no floating point,
**     and neither does its configuration.
**  d) Parsing uses libconfig (Debian's libconfig-dev) rather than a parser
**     of our own.
*/
#include <errno.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"

#define S SLUICE__NS_PER_S
#define MS SLUICE__NS_PER_MS

static void conf_defaults(sluice__conf *c) {
  /* A request's tier, when it names one, is one of these unless the file
  ** lists its own. */
  static const char *const tiers[] = {"sandbox", "growth", "enterprise"};
  const sluice_policy_setting *st;
  int i;
  memset(c, 0, sizeof *c);
  c->ntiers = 3;
  for (i = 0; i < c->ntiers; i++)
    snprintf(c->tiers[i].name, sizeof c->tiers[i].name, "%s", tiers[i]);
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++)
    *sluice__setting_field(c, i) = st->dflt * st->unit_ns;
}

/* ------------------------------------------------------------- reading --- */

int sluice__rd_err(const sluice__rd *x, const config_setting_t *s,
                   const char *path, const char *fmt, ...) {
  char what[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  /* Line 0 (a setting a set call made): config_doc.c says "set:". */
  if (x->err && x->errlen)
    snprintf(x->err, x->errlen, "%s:%d: %s: %s", x->file,
             s ? (int)config_setting_source_line(s) : 0, path, what);
  return SLUICE_ECONFIG;
}

/* A setting's path.  Paths are short (names of at most 31 bytes, a few
** levels); one cut to fit is still NUL-terminated.  The result is looked
** at so that -O3's truncation warning knows it is handled. */
static void join(char *out, size_t n, const char *parent, const char *name) {
  int w = parent && parent[0] ? snprintf(out, n, "%s.%s", parent, name)
                              : snprintf(out, n, "%s", name);
  if (w < 0)
    out[0] = '\0';
}

int sluice__rd_known(const sluice__rd *x, const config_setting_t *g,
                     const char *path, const char *const *names) {
  int i, j, n = config_setting_length(g);
  char p[512];
  for (i = 0; i < n; i++) {
    const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
    const char *nm = config_setting_name(m);
    for (j = 0; names[j]; j++)
      if (nm && strcmp(nm, names[j]) == 0)
        break;
    if (!names[j]) {
      join(p, sizeof p, path, nm ? nm : "?");
      return sluice__rd_err(x, m, p, "unknown setting");
    }
  }
  return SLUICE_OK;
}

int sluice__rd_int(const sluice__rd *x, const config_setting_t *g,
                   const char *gpath, const char *name, int64_t unit,
                   int64_t lo, int64_t hi, int64_t *out) {
  const config_setting_t *s = config_setting_get_member(g, name);
  char p[512];
  long long v;
  if (!s)
    return SLUICE_OK;
  join(p, sizeof p, gpath, name);
  if (config_setting_type(s) != CONFIG_TYPE_INT &&
      config_setting_type(s) != CONFIG_TYPE_INT64)
    return sluice__rd_err(x, s, p, "must be an integer");
  v = config_setting_get_int64(s);
  if (v < lo || v > hi)
    return sluice__rd_err(x, s, p, "must be %lld..%lld (got %lld)",
                          (long long)lo, (long long)hi, v);
  *out = (int64_t)v * unit;
  return SLUICE_OK;
}

int sluice__rd_list(const config_setting_t *s) {
  return s && (config_setting_is_array(s) || config_setting_is_list(s));
}

int sluice__rd_name_ok(const char *n) {
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

static const config_setting_t *group_of(const sluice__rd *x,
                                        const config_setting_t *parent,
                                        const char *name, int *rc) {
  config_setting_t *g = config_setting_get_member(parent, name);
  *rc = SLUICE_OK;
  if (g && !config_setting_is_group(g)) {
    *rc = sluice__rd_err(x, g, name, "must be a group { ... }");
    return NULL;
  }
  return g;
}

static int get_bool(const sluice__rd *x, const config_setting_t *g,
                    const char *name, int *out) {
  config_setting_t *s = config_setting_get_member(g, name);
  if (!s)
    return SLUICE_OK;
  if (config_setting_type(s) != CONFIG_TYPE_BOOL)
    return sluice__rd_err(x, s, name, "must be true or false");
  *out = config_setting_get_bool(s);
  return SLUICE_OK;
}

/* Staged rollout: [ "penalty", "leases" ] (or [ "all" ]) into bits. */
static int get_features(const sluice__rd *x, const config_setting_t *g,
                        int64_t *out) {
  config_setting_t *s = config_setting_get_member(g, "shadow_features");
  const config_setting_t *bad;
  if (!s || sluice__shadow_names(s, out, &bad) == 0)
    return SLUICE_OK;
  return bad == s ? sluice__rd_err(x, s, "shadow_features",
                                   "must be an array of feature names [ "
                                   "\"penalty\", ... ]: buckets, penalty, "
                                   "leases, fail_closed, all")
                  : sluice__rd_err(x, bad, "shadow_features",
                                   "unknown feature (buckets, penalty, "
                                   "leases, fail_closed, all)");
}

/* tiers = [ "sandbox", "growth", ... ]: the names, in order (the
** counters' rows), each a name of its own. */
static int load_tiers(const sluice__rd *x, const config_setting_t *root,
                      sluice__conf *c) {
  const config_setting_t *tiers = config_setting_get_member(root, "tiers");
  char p[32];
  int i, j, n;
  if (!tiers)
    return SLUICE_OK;
  if (!sluice__rd_list(tiers))
    return sluice__rd_err(x, tiers, "tiers",
                          "must be an array of names [ \"sandbox\", ... ]");
  n = config_setting_length(tiers);
  if (n < 1 || n > SLUICE_POLICY_TIERS_MAX)
    return sluice__rd_err(x, tiers, "tiers", "must name 1..8 tiers");
  c->ntiers = n;
  for (i = 0; i < n; i++) {
    config_setting_t *t = config_setting_get_elem(tiers, (unsigned)i);
    const char *nm = config_setting_get_string(t);
    snprintf(p, sizeof p, "tiers.[%d]", i);
    if (!nm || strlen(nm) > SLUICE_POLICY_NAME_MAX)
      return sluice__rd_err(x, t, p, "must be a name of 1..31 bytes");
    snprintf(c->tiers[i].name, sizeof c->tiers[i].name, "%s", nm);
  }
  for (i = 0; i < n; i++) {
    const char *t = c->tiers[i].name;
    snprintf(p, sizeof p, "tiers.[%d]", i);
    if (!sluice__rd_name_ok(t) || t[0] == '_')
      return sluice__rd_err(x, config_setting_get_elem(tiers, (unsigned)i), p,
                            "tier %d: a name is 1..31 of [A-Za-z0-9_-], "
                            "starting with a letter",
                            i);
    for (j = 0; j < i; j++)
      if (strcmp(c->tiers[j].name, t) == 0)
        return sluice__rd_err(x, config_setting_get_elem(tiers, (unsigned)i), p,
                              "tier named twice");
  }
  return SLUICE_OK;
}
/* routes: a list, of at least one entry; declared_conf.c reads them. */
static int load_routes(const sluice__rd *x, const config_setting_t *root) {
  const config_setting_t *rs = config_setting_get_member(root, "routes");
  if (!rs)
    return SLUICE_OK;
  if (!config_setting_is_list(rs))
    return sluice__rd_err(x, rs, "routes", "must be a list ( {...}, ... )");
  if (config_setting_length(rs) < 1)
    return sluice__rd_err(x, rs, "routes",
                          "must list at least one route (got 0)");
  return SLUICE_OK;
}

/* The table's settings (settings.c), a group at a time: its rows are
** consecutive. */
static int load_settings(const sluice__rd *x, const config_setting_t *root,
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
    names[n] = NULL;
    g = group_of(x, root, first->group, &rc);
    if (rc || !g) {
      if (rc)
        return rc;
      continue;
    }
    if ((rc = sluice__rd_known(x, g, first->group, names)))
      return rc;
    for (n = i; n < j; n++) {
      st = sluice_policy_setting_at(n);
      if ((rc = sluice__rd_int(x, g, st->group, st->name, st->unit_ns, st->min,
                               st->max, sluice__setting_field(c, n))))
        return rc;
    }
  }
  return SLUICE_OK;
}

/* The host-wide segments: host = { counters = "shm:name=/..."; ... }.
** Their form is checked when the policy opens them. */
static int load_host(const sluice__rd *x, const config_setting_t *root,
                     sluice__conf *c) {
  static const char *const names[] = {"counters", "degraded_store",
                                      "deny_cache", NULL};
  char *dst[] = {c->host_counters, c->host_degraded_store, c->host_deny_cache};
  int rc, i;
  const config_setting_t *g = group_of(x, root, "host", &rc);
  if (rc || !g)
    return rc;
  if ((rc = sluice__rd_known(x, g, "host", names)))
    return rc;
  for (i = 0; names[i]; i++) {
    config_setting_t *s = config_setting_get_member(g, names[i]);
    const char *v = s ? config_setting_get_string(s) : NULL;
    char p[64];
    if (!s)
      continue;
    join(p, sizeof p, "host", names[i]);
    if (!v || strlen(v) > SLUICE_POLICY_URI_MAX)
      return sluice__rd_err(x, s, p,
                            "must be a string of at most 127 characters");
    snprintf(dst[i], SLUICE_POLICY_URI_MAX + 1, "%s", v);
  }
  return SLUICE_OK;
}

/* The whole file, NUL-terminated, for the integer check of conf_ints.c.
** A policy is a few kB; more than 1 MiB is not one (read no further). */
static int read_all(FILE *f, char **out) {
  enum { MAX = 1 << 20 };
  char *p = malloc(MAX + 2), *fit;
  size_t n;
  if (!p)
    return SLUICE_ENOMEM;
  n = fread(p, 1, MAX + 1, f);
  if (ferror(f) || n > MAX) {
    free(p);
    return n > MAX ? SLUICE_ERANGE : SLUICE_EIO;
  }
  p[n] = '\0';
  *out = p;
  if ((fit = realloc(p, n + 1))) /* what it holds, not the most it could */
    *out = fit;
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
  int rc;
  FILE *f = fopen(path, "r");
  if (!f) {
    if (err && errlen)
      snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return SLUICE_EIO;
  }
  rc = read_all(f, text);
  fclose(f);
  if (rc != SLUICE_OK) {
    if (err && errlen)
      snprintf(err, errlen, "%s: %s", path,
               rc == SLUICE_ERANGE ? "larger than 1 MiB" : "cannot read");
    return rc == SLUICE_ENOMEM ? rc : SLUICE_EIO;
  }
  return SLUICE_OK;
}

/* The document into *out and *dl, every setting read and checked where
** it is (a setting with no line, one a set call made, is reported as "set"
** by config_doc.c). */
int sluice__conf_resolve(const config_t *cf, const char *path,
                         sluice__conf *out, sluice__decl *dl, char *err,
                         size_t errlen, char *warn, size_t warnlen) {
  static const char *const top[] = {"shadow", "shadow_features", "tiers",
                                    "routes", "failure", "host",
                                    "breaker", "ip_backstop", "client_ip",
                                    "shadow_when", "attributes",
                                    "untrusted", "optional",
                                    "limits", "penalties", NULL};
  sluice__conf c;
  const config_setting_t *root = config_root_setting(cf);
  sluice__rd x = {path, err, errlen, NULL, NULL};
  int rc;

  if (err && errlen)
    err[0] = '\0';
  conf_defaults(&c);
  if ((rc = sluice__rd_known(&x, root, "", top)) ||
      (rc = get_bool(&x, root, "shadow", &c.shadow)) ||
      (rc = get_features(&x, root, &c.shadow_features)) ||
      (rc = load_tiers(&x, root, &c)) || (rc = load_routes(&x, root)) ||
      (rc = load_settings(&x, root, &c)) || (rc = load_host(&x, root, &c)) ||
      (rc = sluice__decl_load(root, path, dl, err, errlen, warn, warnlen)))
    return rc;
  *out = c;
  return SLUICE_OK;
}

/*
** Policy configuration: the general settings' defaults, validation, and
** the file loader (declared_conf.c reads the limits, routes and
** penalties).
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"

#define S SLUICE__NS_PER_S
#define MS SLUICE__NS_PER_MS

int sluice__conf_defaults(sluice__conf *c) {
  /* A request's tier, when it names one, is one of these unless the file
  ** lists its own. */
  static const char *const tiers[] = {"sandbox", "growth", "enterprise"};
  const sluice_policy_setting *st;
  int i;
  if (!c)
    return SLUICE_EINVAL;
  memset(c, 0, sizeof *c);
  c->ntiers = 3;
  for (i = 0; i < c->ntiers; i++)
    snprintf(c->tiers[i].name, sizeof c->tiers[i].name, "%s", tiers[i]);
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++)
    *sluice__setting_field(c, i) = st->dflt * st->unit_ns;
  return SLUICE_OK;
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

/* The table's settings (settings.c), in its order. */
static int check_settings(ck *k, const sluice__conf *c) {
  const sluice_policy_setting *st;
  char p[96];
  int i, rc;
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++) {
    snprintf(p, sizeof p, "%s.%s", st->group, st->name);
    if ((rc = range(k, p, *sluice__setting_cfield(c, i) / st->unit_ns,
                    st->min, st->max)))
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

  if (k.pathlen)
    k.path[0] = '\0';
  if (k.msglen)
    k.msg[0] = '\0';
  if ((rc = range(&k, "tiers", c->ntiers, 1, SLUICE_POLICY_TIERS_MAX)))
    return rc;
  if ((rc = check_settings(&k, c)))
    return rc;
  for (i = 0; i < c->ntiers; i++) {
    const char *t = c->tiers[i].name;
    snprintf(p, sizeof p, "tiers.[%d]", i);
    if (!name_ok(t))
      return fail(&k, p,
                  "tier %lld: a name is 1..31 of [A-Za-z0-9_-], starting "
                  "with a letter",
                  i, 0, 0);
    for (j = 0; j < i; j++)
      if (strcmp(c->tiers[j].name, t) == 0)
        return fail(&k, p, "tier named twice", 0, 0, 0);
  }
  if (c->shadow != 0 && c->shadow != 1)
    return fail(&k, "shadow", "must be true or false (got %lld)", c->shadow,
                0, 0);
  if (c->shadow_features & ~(int64_t)SLUICE_SHADOW_ALL)
    return fail(&k, "shadow_features", "unknown feature bits %llx",
                c->shadow_features, 0, 0);
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

/* tiers = [ "sandbox", "growth", ... ]: the names, in order (the
** counters' rows).  Their form is the validator's. */
static int load_tiers(ld *l, const config_setting_t *root,
                      sluice__conf *c) {
  const config_setting_t *tiers = config_setting_get_member(root, "tiers");
  int i, n;
  if (!tiers)
    return SLUICE_OK;
  if (!config_setting_is_array(tiers) && !config_setting_is_list(tiers))
    return lerr(l, tiers, "tiers",
                "must be an array of names [ \"sandbox\", ... ]");
  n = config_setting_length(tiers);
  if (n < 1 || n > SLUICE_POLICY_TIERS_MAX)
    return lerr(l, tiers, "tiers", "must name 1..8 tiers");
  c->ntiers = n;
  for (i = 0; i < n; i++) {
    config_setting_t *t = config_setting_get_elem(tiers, (unsigned)i);
    const char *nm = config_setting_get_string(t);
    char p[32];
    snprintf(p, sizeof p, "tiers.[%d]", i);
    if (!nm || strlen(nm) > SLUICE_POLICY_NAME_MAX)
      return lerr(l, t, p, "must be a name of 1..31 bytes");
    snprintf(c->tiers[i].name, sizeof c->tiers[i].name, "%s", nm);
  }
  return SLUICE_OK;
}

/* routes: a list, of at least one entry; declared_conf.c reads them. */
static int load_routes(ld *l, const config_setting_t *root) {
  const config_setting_t *rs = config_setting_get_member(root, "routes");
  if (!rs)
    return SLUICE_OK;
  if (!config_setting_is_list(rs))
    return lerr(l, rs, "routes", "must be a list ( {...}, ... )");
  if (config_setting_length(rs) < 1)
    return lerr(l, rs, "routes", "must list at least one route (got 0)");
  return SLUICE_OK;
}

/* The table's settings (settings.c), a group at a time: its rows are
** consecutive. */
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

/* The setting at a path as the validator names it ("tiers.[2]"), or its
** nearest ancestor in the document.  Every default is valid, so the
** setting at fault is one the file or a set call made. */
static const config_setting_t *lookup_path(const config_t *cf,
                                           const char *path) {
  const config_setting_t *cur = config_root_setting(cf), *next;
  char part[128];
  const char *p = path;
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
    if (!next)
      return cur;
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
                                    "routes", "failure", "host",
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
      (rc = load_tiers(&l, root, &c)) || (rc = load_routes(&l, root)) ||
      (rc = load_settings(&l, root, &c)) || (rc = load_host(&l, root, &c)) ||
      (rc = sluice__decl_load(root, path, dl, err, errlen, warn, warnlen)))
    return rc;
  {
    char vpath[128], vmsg[160];
    rc = sluice__policy_config_check2(&c, vpath, sizeof vpath, vmsg,
                                      sizeof vmsg);
    if (rc != SLUICE_OK) {
      const config_setting_t *s = lookup_path(cf, vpath);
      int line = s ? (int)config_setting_source_line(s) : 0;
      if (err && errlen && line == 0)
        snprintf(err, errlen, "set: %s: %s", vpath, vmsg);
      else if (err && errlen)
        snprintf(err, errlen, "%s:%d: %s: %s", path, line, vpath, vmsg);
      return rc;
    }
  }
  *out = c;
  return SLUICE_OK;
}

/*
** The configuration handle: a policy file's settings as a document.
**
** The handle keeps the file's text and the set calls made since, in order,
** and the document they build (libconfig's tree).  Every change rebuilds
** the document from the text and the calls and reads it through the one
** loader a file goes through (config.c, declared_conf.c), so a setting made
** in code meets exactly the rules of a file's, declared limits included.
** A change the loader refuses is dropped: the handle stays as it was.
** Settings a call made have no line, and their errors say "set:" where a
** file's say FILE:LINE.
*/
#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"

struct sluice_policy_config {
  char *file;   /* the file loaded, or NULL (the defaults) */
  char *text;   /* its text, or NULL */
  char **ops;   /* path, value, path, value, ... */
  int nops;     /* pairs */
  config_t doc; /* text and ops, as loaded */
  sluice__conf res; /* the values in force */
};

static void errf(char *err, size_t errlen, const char *path,
                 const char *what) {
  if (err && errlen)
    snprintf(err, errlen, "set: %s: %s", path, what);
}

/* ------------------------------------------------------- the document --- */

/* A copy of src into d (of src's type), or into a new member `name` of
** parent: libconfig's CONFIG_TRUE, or CONFIG_FALSE when it cannot be. */
static int fill(config_setting_t *d, const config_setting_t *src);

static int copy_into(config_setting_t *parent, const char *name,
                     const config_setting_t *src) {
  config_setting_t *d = config_setting_add(
      parent, config_setting_is_group(parent) ? name : NULL,
      config_setting_type(src));
  return d && fill(d, src);
}

static int fill(config_setting_t *d, const config_setting_t *src) {
  int i, n;
  switch (config_setting_type(src)) {
  case CONFIG_TYPE_INT:
    return config_setting_set_int(d, config_setting_get_int(src));
  case CONFIG_TYPE_INT64:
    return config_setting_set_int64(d, config_setting_get_int64(src));
  case CONFIG_TYPE_FLOAT:
    return config_setting_set_float(d, config_setting_get_float(src));
  case CONFIG_TYPE_BOOL:
    return config_setting_set_bool(d, config_setting_get_bool(src));
  case CONFIG_TYPE_STRING:
    return config_setting_set_string(d, config_setting_get_string(src));
  default:
    n = config_setting_length(src);
    for (i = 0; i < n; i++) {
      const config_setting_t *e = config_setting_get_elem(src, (unsigned)i);
      if (!copy_into(d, config_setting_name(e), e))
        return CONFIG_FALSE;
    }
    return CONFIG_TRUE;
  }
}

/* One path component of `cur`: a member by name or "[i]" an element;
** with `make`, a missing group member is created (a group) and "[n]" of a
** list adds a group.  NULL with *why set when it cannot be. */
static config_setting_t *step(config_setting_t *cur, const char *part,
                              int make, const char **why) {
  config_setting_t *next;
  if (part[0] == '[') {
    char *end;
    unsigned long i = strtoul(part + 1, &end, 10);
    int n = config_setting_length(cur);
    if (end == part + 1 || strcmp(end, "]") != 0) {
      *why = "an index is [N]";
      return NULL;
    }
    if (!config_setting_is_list(cur) && !config_setting_is_array(cur)) {
      *why = "not a list";
      return NULL;
    }
    if (i < (unsigned long)n)
      return config_setting_get_elem(cur, (unsigned)i);
    if (make && i == (unsigned long)n && config_setting_is_list(cur) &&
        (next = config_setting_add(cur, NULL, CONFIG_TYPE_GROUP)))
      return next;
    *why = "no such element";
    return NULL;
  }
  if (!config_setting_is_group(cur)) {
    *why = "not a group";
    return NULL;
  }
  if ((next = config_setting_get_member(cur, part)) || !make)
    return next;
  if ((next = config_setting_add(cur, part, CONFIG_TYPE_GROUP)))
    return next;
  *why = "not a valid setting name";
  return NULL;
}

/* Path components, at most 16 of at most 127 bytes each. */
static int split(const char *path, char parts[][128], int max) {
  int n = 0;
  const char *p = path;
  for (;;) {
    size_t len = strcspn(p, ".");
    if (len == 0 || len >= 128 || n == max)
      return -1;
    memcpy(parts[n], p, len);
    parts[n++][len] = '\0';
    if (!p[len])
      return n;
    p += len + 1;
  }
}

/* `value` (libconfig syntax; a bare word a string) at `path` of *doc. */
static int apply(config_t *doc, const char *path, const char *value,
                 char *err, size_t errlen) {
  char parts[16][128], what[200];
  const char *why = "cannot be set";
  config_t v;
  config_setting_t *cur = config_root_setting(doc), *src, *dst;
  char *text;
  size_t vlen = strlen(value);
  int i, n, ok, rc = SLUICE_ECONFIG;

  if ((n = split(path, parts, 16)) < 0) {
    errf(err, errlen, path, "a path is NAME.NAME or NAME.[i], each part "
                            "1..127 bytes, at most 16 parts");
    return SLUICE_ECONFIG;
  }
  for (i = 0; i < n; i++)
    if (parts[i][0] != '[' && !sluice__conf_name(parts[i])) {
      errf(err, errlen, path, "not a valid setting name");
      return SLUICE_ECONFIG;
    }
  if (!(text = malloc(vlen + 8)))
    return SLUICE_ENOMEM;
  snprintf(text, vlen + 8, "v = %s;", value);
  config_init(&v);
  if (sluice__conf_parse("set", text, &v, what, sizeof what) != SLUICE_OK) {
    config_destroy(&v);
    config_init(&v);
    if (vlen == 0 || strpbrk(value, "\"{}[]();=,:#/\\ \t\n")) {
      errf(err, errlen, path, "the value is not libconfig syntax");
      goto out;
    }
    src = config_setting_add(config_root_setting(&v), "v",
                             CONFIG_TYPE_STRING);
    if (!src || !config_setting_set_string(src, value)) {
      rc = SLUICE_ENOMEM;
      goto out;
    }
  }
  src = config_setting_get_member(config_root_setting(&v), "v");
  for (i = 0; i < n - 1 && cur; i++)
    cur = step(cur, parts[i], 1, &why);
  dst = cur ? step(cur, parts[n - 1], 0, &why) : NULL;
  if (!cur) {
    errf(err, errlen, path, why);
    goto out;
  }
  if (dst && config_setting_type(dst) == config_setting_type(src) &&
      config_setting_is_aggregate(dst)) {
    /* In place: the order of tiers and routes is the configuration's. */
    while (config_setting_length(dst) > 0)
      config_setting_remove_elem(dst, 0);
    ok = fill(dst, src);
    /* The value is the set's now: its errors say "set:", not the line
    ** the file gave the old one. */
    dst->line = 0;
  } else if (dst && config_setting_is_group(cur)) {
    config_setting_remove(cur, parts[n - 1]);
    ok = copy_into(cur, parts[n - 1], src);
  } else if (dst) {
    /* An element: libconfig adds at the end only, so a scalar element is
    ** set in place (the same type: an array holds one). */
    ok = config_setting_type(dst) == config_setting_type(src) && fill(dst, src);
  } else if (parts[n - 1][0] == '[') {
    ok = (dst = step(cur, parts[n - 1], 1, &why)) &&
         config_setting_is_group(src) && fill(dst, src);
  } else {
    ok = copy_into(cur, parts[n - 1], src);
  }
  rc = ok ? SLUICE_OK : SLUICE_ECONFIG;
  if (rc != SLUICE_OK)
    errf(err, errlen, path, "cannot be set to that value here");
out:
  config_destroy(&v);
  free(text);
  return rc;
}

/* The document of the text and its calls, then `path` =
** `value` when path is not NULL, read into *out (and *dl). */
static int build(const sluice_policy_config *h, const char *path,
                 const char *value, config_t *doc, sluice__conf *out,
                 sluice__decl *dl, char *err, size_t errlen, char *warn,
                 size_t warnlen) {
  const char *file = h->file ? h->file : "set";
  int i, rc = SLUICE_OK;
  config_init(doc);
  if (h->text)
    rc = sluice__conf_parse(file, h->text, doc, err, errlen);
  for (i = 0; rc == SLUICE_OK && i < h->nops; i++)
    rc = apply(doc, h->ops[2 * i], h->ops[2 * i + 1], err, errlen);
  if (rc == SLUICE_OK && path)
    rc = apply(doc, path, value, err, errlen);
  if (rc == SLUICE_OK)
    rc = sluice__conf_resolve(doc, file, out, dl, err, errlen, warn, warnlen);
  if (rc != SLUICE_OK) {
    /* The declared limits' loader names a setting without a line
    ** FILE:0: say it was set. */
    size_t fl = strlen(file);
    if (err && errlen && strncmp(err, file, fl) == 0 &&
        strncmp(err + fl, ":0: ", 4) == 0) {
      memmove(err + 5, err + fl + 4, strlen(err + fl + 4) + 1);
      memcpy(err, "set: ", 5);
    }
    config_destroy(doc);
  }
  return rc;
}

/* Rebuilt with one more call (or none): on success the handle takes the
** new document and values, else nothing changes. */
static int rebuild(sluice_policy_config *h, const char *path,
                   const char *value, char *err, size_t errlen, char *warn,
                   size_t warnlen) {
  sluice__decl *dl = calloc(1, sizeof *dl);
  config_t doc;
  sluice__conf res;
  int rc;
  if (!dl)
    return SLUICE_ENOMEM;
  rc = build(h, path, value, &doc, &res, dl, err, errlen, warn, warnlen);
  sluice__decl_free(dl);
  if (rc != SLUICE_OK)
    return rc;
  if (path) {
    char **ops = realloc(h->ops, sizeof *ops * (size_t)(2 * h->nops + 2));
    char *p = strdup(path), *v = strdup(value);
    if (ops)
      h->ops = ops;
    if (!ops || !p || !v) {
      free(p);
      free(v);
      config_destroy(&doc);
      return SLUICE_ENOMEM;
    }
    ops[2 * h->nops] = p;
    ops[2 * h->nops + 1] = v;
    h->nops++;
  }
  config_destroy(&h->doc);
  h->doc = doc;
  h->res = res;
  return SLUICE_OK;
}

/* ----------------------------------------------------------------- API --- */

void sluice_policy_config_free(sluice_policy_config *h) {
  int i;
  if (!h)
    return;
  for (i = 0; i < 2 * h->nops; i++)
    free(h->ops[i]);
  free(h->ops);
  free(h->file);
  free(h->text);
  config_destroy(&h->doc);
  free(h);
}

int sluice_policy_config_new(sluice_policy_config **out, const char *path,
                             char *err, size_t errlen) {
  sluice_policy_config *h;
  char warn[512] = "";
  int rc;
  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  if (!(h = calloc(1, sizeof *h)))
    return SLUICE_ENOMEM;
  config_init(&h->doc);
  /* No path: the ledger file, as embedded. */
  rc = !path ? (!(h->file = strdup(SLUICE__LEDGER_CONF_NAME)) ||
                        !(h->text = strdup(sluice__ledger_conf))
                    ? SLUICE_ENOMEM
                    : SLUICE_OK)
       : !(h->file = strdup(path))
           ? SLUICE_ENOMEM
           : sluice__conf_read_file(path, &h->text, err, errlen);
  if (rc == SLUICE_OK)
    rc = rebuild(h, NULL, NULL, err, errlen, warn, sizeof warn);
  if (rc != SLUICE_OK) {
    sluice_policy_config_free(h);
    return rc;
  }
  if (err && errlen)
    snprintf(err, errlen, "%s", warn);
  *out = h;
  return SLUICE_OK;
}

int sluice_policy_config_set(sluice_policy_config *h, const char *path,
                             const char *value, char *err, size_t errlen) {
  if (err && errlen)
    err[0] = '\0';
  if (!h || !path || !value)
    return SLUICE_EINVAL;
  return rebuild(h, path, value, err, errlen, NULL, 0);
}

sluice_policy_config *sluice__config_clone(const sluice_policy_config *h) {
  sluice_policy_config *c = calloc(1, sizeof *c);
  int i;
  if (!c)
    return NULL;
  config_init(&c->doc);
  if ((h->file && !(c->file = strdup(h->file))) ||
      (h->text && !(c->text = strdup(h->text))) ||
      (h->nops && !(c->ops = calloc((size_t)(2 * h->nops), sizeof *c->ops))))
    goto fail;
  c->nops = h->nops;
  for (i = 0; i < 2 * h->nops; i++)
    if (!(c->ops[i] = strdup(h->ops[i])))
      goto fail;
  if (rebuild(c, NULL, NULL, NULL, 0, NULL, 0) != SLUICE_OK)
    goto fail;
  return c;
fail:
  sluice_policy_config_free(c);
  return NULL;
}

int sluice__config_build(const sluice_policy_config *h, sluice__conf *out,
                         sluice__decl *dl, char *err, size_t errlen) {
  sluice__decl *tmp = dl ? NULL : calloc(1, sizeof *tmp);
  int rc;
  if (!dl && !tmp)
    return SLUICE_ENOMEM;
  /* The handle's document passed the loader when it was made: only its
  ** declared limits are read again, into memory of the policy's own. */
  *out = h->res;
  rc =
      sluice__decl_load(config_root_setting(&h->doc), h->file ? h->file : "set",
                        dl ? dl : tmp, err, errlen, NULL, 0);
  if (rc == SLUICE_OK && (dl ? dl : tmp)->nroutes == 0) {
    /* Nothing a request could be decided on. */
    snprintf(err, errlen,
             "%s: routes: no route (a policy lists its routes and the "
             "limits they apply; etc/ledger.conf is the ledger API's)",
             h->file ? h->file : "(configuration)");
    rc = SLUICE_EINVAL;
  }
  sluice__decl_free(tmp);
  return rc;
}

const sluice__conf *sluice__config_values(const sluice_policy_config *h) {
  return &h->res;
}

const config_t *sluice__config_doc(const sluice_policy_config *h) {
  return &h->doc;
}

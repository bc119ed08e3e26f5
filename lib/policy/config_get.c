/*
** Reading a configuration back by path (sluice_policy_config_get): the
** values in force, defaults included, for tools that show or use them
** (sluice settings, inspect, simulate; nginx).  The built-in settings come
** from the resolved values (the settings table, tiers, routes, host);
** anything else a file or a call set (declared limits, penalties,
** attributes) from the document as written.
*/
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

typedef struct out {
  char *buf;
  size_t len, used;
} out;

static void put(out *o, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(o->buf + (o->used < o->len ? o->used : o->len - 1),
                o->used < o->len ? o->len - o->used : 1, fmt, ap);
  va_end(ap);
  if (n > 0)
    o->used += (size_t)n;
}

static int done(const out *o) {
  return o->used < o->len ? SLUICE_OK : SLUICE_ERANGE;
}

/* Names of the bits set (class or shadow-feature names), comma-separated. */
static void names(out *o, uint64_t bits, int first, int last,
                  const char *(*name)(int)) {
  int i, n = 0;
  for (i = first; i <= last; i++)
    if (bits & ((uint64_t)1 << i))
      put(o, "%s%s", n++ ? "," : "", name(i));
}

static const char *feature(int bit) {
  return sluice_shadow_feature_name(1 << bit);
}

static const char *cls(int c) { return sluice__class_name(c); }

static int tier_get(out *o, const sluice__tier *t, const char *rest) {
  static const char *const fields[] = {
      "strikes", "reconcile_concurrency", "export_concurrency",
      "exports_per_window"};
  const int64_t vals[] = {t->strike_threshold, t->reconcile_concurrency,
                          t->export_concurrency, t->exports_per_window};
  size_t i;
  if (!*rest) {
    put(o, "%s", t->name);
    return done(o);
  }
  for (i = 0; i < 2; i++) {
    const char *b = i ? "key." : "tenant.";
    int64_t r = i ? t->key_rate : t->tenant_rate;
    int64_t p = i ? t->key_period_ns : t->tenant_period_ns;
    int64_t bu = i ? t->key_burst : t->tenant_burst;
    size_t bl = strlen(b);
    if (strncmp(rest, b, bl) != 0)
      continue;
    if (!strcmp(rest + bl, "rate"))
      put(o, "%lld", (long long)r);
    else if (!strcmp(rest + bl, "period_ms"))
      put(o, "%lld", (long long)(p / SLUICE__NS_PER_MS));
    else if (!strcmp(rest + bl, "burst"))
      put(o, "%lld", (long long)bu);
    else
      return SLUICE_ENOTFOUND;
    return done(o);
  }
  for (i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (!strcmp(rest, fields[i])) {
      put(o, "%lld", (long long)vals[i]);
      return done(o);
    }
  if (!strcmp(rest, "level3"))
    put(o, "%s", sluice__level3_name(t->level3));
  else if (!strcmp(rest, "shadow_features"))
    names(o, (uint64_t)t->shadow_features, 0, 3, feature);
  else
    return SLUICE_ENOTFOUND;
  return done(o);
}

static int tiers_get(out *o, const sluice__conf *c, const char *rest) {
  char name[SLUICE_POLICY_NAME_MAX + 8];
  size_t n = strcspn(rest, ".");
  int i;
  if (!*rest) {
    for (i = 0; i < c->ntiers; i++)
      put(o, "%s%s", i ? "," : "", c->tiers[i].name);
    return done(o);
  }
  if (n >= sizeof name)
    return SLUICE_ENOTFOUND;
  memcpy(name, rest, n);
  name[n] = '\0';
  rest += n + (rest[n] == '.');
  for (i = 0; i < c->ntiers; i++)
    if (name[0] == '[' ? atoi(name + 1) == i && !*rest
                       : strcmp(c->tiers[i].name, name) == 0)
      return tier_get(o, &c->tiers[i], rest);
  return SLUICE_ENOTFOUND;
}

/* The built-in table while the document lists no routes of its own. */
static int routes_get(out *o, const sluice__conf *c, const char *rest) {
  const sluice__route *r;
  int i;
  if (!*rest) {
    put(o, "%d", c->nroutes);
    return done(o);
  }
  if (rest[0] != '[' || (i = atoi(rest + 1)) < 0 || i >= c->nroutes ||
      !(rest = strchr(rest, '.')))
    return SLUICE_ENOTFOUND;
  r = &c->routes[i];
  rest++;
  if (!strcmp(rest, "method"))
    put(o, "%s", r->method);
  else if (!strcmp(rest, "route"))
    put(o, "%s", r->route);
  else if (!strcmp(rest, "class"))
    put(o, "%s", cls(r->endpoint_class));
  else
    return SLUICE_ENOTFOUND;
  return done(o);
}

/* A setting of the document: its value, a group's member names, a list's
** length. */
static int doc_get(out *o, const config_t *doc, const char *path) {
  const config_setting_t *s = config_lookup(doc, path);
  int i, n;
  if (!s)
    return SLUICE_ENOTFOUND;
  switch (config_setting_type(s)) {
  case CONFIG_TYPE_INT:
  case CONFIG_TYPE_INT64:
    put(o, "%lld", (long long)config_setting_get_int64(s));
    break;
  case CONFIG_TYPE_FLOAT:
    put(o, "%g", config_setting_get_float(s));
    break;
  case CONFIG_TYPE_BOOL:
    put(o, "%s", config_setting_get_bool(s) ? "true" : "false");
    break;
  case CONFIG_TYPE_STRING:
    put(o, "%s", config_setting_get_string(s));
    break;
  case CONFIG_TYPE_GROUP:
    n = config_setting_length(s);
    for (i = 0; i < n; i++)
      put(o, "%s%s", i ? "," : "",
          config_setting_name(config_setting_get_elem(s, (unsigned)i)));
    break;
  default:
    put(o, "%d", config_setting_length(s));
  }
  return done(o);
}

int sluice_policy_config_get(const sluice_policy_config *h, const char *path,
                             char *buf, size_t len) {
  const sluice__conf *c;
  const sluice_policy_setting *st;
  out o = {buf, len, 0};
  char full[160];
  int i;
  if (!h || !path || !buf || !len)
    return SLUICE_EINVAL;
  buf[0] = '\0';
  c = sluice__config_values(h);
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++) {
    snprintf(full, sizeof full, "%s.%s", st->group, st->name);
    if (strcmp(full, path) == 0) {
      put(&o, "%lld",
          (long long)(*sluice__setting_cfield(c, i) / st->unit_ns));
      return done(&o);
    }
  }
  if (!strcmp(path, "tiers") || !strncmp(path, "tiers.", 6))
    return tiers_get(&o, c, path + 5 + (path[5] == '.'));
  if ((!strcmp(path, "routes") || !strncmp(path, "routes.", 7)) &&
      !config_lookup(sluice__config_doc(h), "routes"))
    return routes_get(&o, c, path + 6 + (path[6] == '.'));
  if (!strcmp(path, "shadow"))
    put(&o, "%s", c->shadow ? "true" : "false");
  else if (!strcmp(path, "shadow_features"))
    names(&o, (uint64_t)c->shadow_features, 0, 3, feature);
  else if (!strcmp(path, "failure.fail_closed"))
    names(&o, c->fail_closed_mask, 1, SLUICE_EP__COUNT - 1, cls);
  else if (!strcmp(path, "host.counters"))
    put(&o, "%s", c->host_counters);
  else if (!strcmp(path, "host.degraded_store"))
    put(&o, "%s", c->host_degraded_store);
  else if (!strcmp(path, "host.deny_cache"))
    put(&o, "%s", c->host_deny_cache);
  else
    return doc_get(&o, sluice__config_doc(h), path);
  return done(&o);
}

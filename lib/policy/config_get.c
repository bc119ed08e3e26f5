/*
** Reading a configuration back by path (sluice_policy_config_get): the
** values in force, defaults included, for tools that show or use them
** (sluice settings, inspect, simulate; nginx).  The general settings come
** from the resolved values (the settings table, tiers, shadow, host), with
** their defaults; anything else a file or a call set (declared limits,
** routes, penalties, attributes) from the document as written.
*/
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

static int done(const sluice__out *o) {
  return o->used < o->len ? SLUICE_OK : SLUICE_ERANGE;
}

/* The shadow features' names of the bits set, comma-separated. */
static void features(sluice__out *o, uint64_t bits) {
  int i, n = 0;
  for (i = 0; i <= 3; i++)
    if (bits & ((uint64_t)1 << i))
      sluice__put(o, "%s%s", n++ ? "," : "",
                  sluice_name(SLUICE_NAME_SHADOW, 1 << i));
}

/* "tiers": the names, comma-separated; "tiers.[i]": tier i's. */
static int tiers_get(sluice__out *o, const sluice__conf *c, const char *rest) {
  char *end;
  long i;
  if (!*rest) {
    for (i = 0; i < c->ntiers; i++)
      sluice__put(o, "%s%s", i ? "," : "", c->tiers[i].name);
    return done(o);
  }
  i = rest[0] == '[' ? strtol(rest + 1, &end, 10) : -1;
  if (i < 0 || i >= c->ntiers || end == rest + 1 || strcmp(end, "]") != 0)
    return SLUICE_ENOTFOUND;
  sluice__put(o, "%s", c->tiers[i].name);
  return done(o);
}

/* A setting of the document: its value, a group's member names, a list's
** length. */
static int doc_get(sluice__out *o, const config_t *doc, const char *path) {
  const config_setting_t *s = config_lookup(doc, path);
  int i, n;
  if (!s)
    return SLUICE_ENOTFOUND;
  switch (config_setting_type(s)) {
  case CONFIG_TYPE_INT:
  case CONFIG_TYPE_INT64:
    sluice__put(o, "%lld", (long long)config_setting_get_int64(s));
    break;
  case CONFIG_TYPE_FLOAT:
    sluice__put(o, "%g", config_setting_get_float(s));
    break;
  case CONFIG_TYPE_BOOL:
    sluice__put(o, "%s", config_setting_get_bool(s) ? "true" : "false");
    break;
  case CONFIG_TYPE_STRING:
    sluice__put(o, "%s", config_setting_get_string(s));
    break;
  case CONFIG_TYPE_GROUP:
    n = config_setting_length(s);
    for (i = 0; i < n; i++)
      sluice__put(o, "%s%s", i ? "," : "",
                  config_setting_name(config_setting_get_elem(s, (unsigned)i)));
    break;
  default:
    sluice__put(o, "%d", config_setting_length(s));
  }
  return done(o);
}

int sluice_policy_config_get(const sluice_policy_config *h, const char *path,
                             char *buf, size_t len) {
  const sluice__conf *c;
  const sluice_policy_setting *st;
  sluice__out o = {buf, len, 0};
  char full[160];
  int i;
  if (!h || !path || !buf || !len)
    return SLUICE_EINVAL;
  buf[0] = '\0';
  c = sluice__config_values(h);
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++) {
    snprintf(full, sizeof full, "%s.%s", st->group, st->name);
    if (strcmp(full, path) == 0) {
      sluice__put(&o, "%lld",
                  (long long)(*sluice__setting_cfield(c, i) / st->unit_ns));
      return done(&o);
    }
  }
  if (!strcmp(path, "tiers") || !strncmp(path, "tiers.", 6))
    return tiers_get(&o, c, path + 5 + (path[5] == '.'));
  if (!strcmp(path, "shadow"))
    sluice__put(&o, "%s", c->shadow ? "true" : "false");
  else if (!strcmp(path, "shadow_features"))
    features(&o, (uint64_t)c->shadow_features);
  else if (!strcmp(path, "host.counters"))
    sluice__put(&o, "%s", c->host_counters);
  else if (!strcmp(path, "host.degraded_store"))
    sluice__put(&o, "%s", c->host_degraded_store);
  else if (!strcmp(path, "host.deny_cache"))
    sluice__put(&o, "%s", c->host_deny_cache);
  else
    return doc_get(&o, sluice__config_doc(h), path);
  return done(&o);
}

/*
** Attribute matches (docs/policy.md "Declared limits"): a route entry's
** `when = { auth = "oauth"; plan = "free"; }` and a parameter set's, in
** the list form of `params`.  Every attribute named must have the value
** given (all of them hold); the value "*" asks only that the attribute is
** given, with any non-empty value.  One parser and one matcher for
** routes, limits and penalties, so that they read the same way.
*/
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "declared.h"
#include "flow.h"

int sluice__match_load(const config_setting_t *w, const char *path,
                      const char *file, const sluice__decl *dl,
                      sluice__amatch *out, char *err, size_t errlen) {
  int i, n, line = w ? (int)config_setting_source_line(w) : 0;
  const char *why = NULL, *an = "";
  memset(out, 0, sizeof *out);
  if (!w)
    return SLUICE_OK;
  n = config_setting_length(w);
  if (!config_setting_is_group(w) || n < 1 || n > SLUICE__WHEN_MAX)
    why = "must be a group of 1..4 matches { ATTR = \"VALUE\"; ... }";
  for (i = 0; !why && i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(w, (unsigned)i);
    const char *v = NULL;
    char num[24];
    an = config_setting_name(e);
    line = (int)config_setting_source_line(e);
    out->attr[i] = sluice__decl_attr(dl, an);
    if (config_setting_type(e) == CONFIG_TYPE_INT ||
        config_setting_type(e) == CONFIG_TYPE_INT64) {
      snprintf(num, sizeof num, "%lld",
               (long long)config_setting_get_int64(e));
      v = num;
    } else {
      v = config_setting_get_string(e);
    }
    if (out->attr[i] < 0 || out->attr[i] == SLUICE__A_PATTERN)
      why = "is not an attribute a request has (built in, but pattern, or "
            "in `attributes`)";
    else if (!v || !v[0] || strlen(v) >= SLUICE__WVAL)
      why = "the value is a string of 1..47 bytes (\"*\": given, any value)";
    else
      snprintf(out->val[i], SLUICE__WVAL, "%s", v);
  }
  if (why) {
    if (err && errlen)
      snprintf(err, errlen, "%s:%d: %s%s%s: %s", file, line, path,
               an[0] ? "." : "", an, why);
    return SLUICE_ECONFIG;
  }
  out->n = n;
  return SLUICE_OK;
}

int sluice__match_ok(const sluice__ctx *c, const sluice__amatch *w) {
  int i;
  for (i = 0; i < w->n; i++) {
    size_t n = 0;
    const char *v = sluice__decl_attr_value(c, w->attr[i], &n);
    if (!v || n == 0)
      return 0;
    if (!sluice__match_value(w->val[i], v, n))
      return 0;
  }
  return 1;
}

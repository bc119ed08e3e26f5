/*
** Staged rollout chosen by the request (docs/policy.md "Shadow mode for
** some requests"): the general form of what a built-in tier's
** shadow_features was.
**
**   shadow_when = (
**     { when = { tier = "enterprise"; }; features = [ "penalty" ]; },
**     { when = { plan = "beta"; }; features = [ "all" ]; }
**   );
**
** A request on a route of the file that every match of an entry's `when`
** holds for (declared_when.c) has that entry's features in shadow, on top
** of the file-wide shadow_features; several entries add up.
*/
#include <libconfig.h>
#include <stdio.h>
#include <string.h>

#include "declared.h"
#include "flow.h"

int sluice__shadow_names(const config_setting_t *s, int64_t *out,
                         const config_setting_t **bad) {
  int i, n, f;
  *out = 0;
  *bad = s;
  if (!config_setting_is_array(s) && !config_setting_is_list(s))
    return -1;
  n = config_setting_length(s);
  for (i = 0; i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
    const char *v = config_setting_get_string(e);
    for (f = 1; f <= SLUICE_SHADOW_ALL; f <<= 1)
      if (v && !strcmp(v, sluice_name(SLUICE_NAME_SHADOW, f)))
        break;
    *bad = e;
    if (v && !strcmp(v, "all"))
      *out |= SLUICE_SHADOW_ALL;
    else if (f <= SLUICE_SHADOW_ALL)
      *out |= f;
    else
      return -1;
  }
  return 0;
}

int sluice__shadow_when_load(sluice__rd *x, const config_setting_t *root) {
  sluice__decl *dl = x->dl;
  const config_setting_t *l = config_setting_get_member(root, "shadow_when");
  const config_setting_t *bad = l;
  const char *why = NULL;
  char path[64];
  int i, n, rc;
  if (!l)
    return SLUICE_OK;
  n = config_setting_length(l);
  if (!config_setting_is_list(l) || n < 1 || n > SLUICE__SHADOW_WHEN_MAX)
    why = "must be a list of 1..8 entries ( { when = { ATTR = VALUE; }; "
          "features = [ ... ]; }, ... )";
  for (i = 0; !why && i < n; i++) {
    const config_setting_t *e = config_setting_get_elem(l, (unsigned)i);
    const config_setting_t *w = config_setting_get_member(e, "when");
    const config_setting_t *f = config_setting_get_member(e, "features");
    int64_t m;
    snprintf(path, sizeof path, "shadow_when.[%d].when", i);
    bad = e;
    if (!config_setting_is_group(e) || !w || !f ||
        config_setting_length(e) != 2)
      why = "an entry is { when = { ATTR = VALUE; ... }; features = [ ... ]; }";
    else if ((rc = sluice__match_load(w, path, x->file, dl,
                                      &dl->shadow_when[i].when, x->err,
                                      x->errlen)))
      return rc;
    else if (sluice__shadow_names(f, &m, &bad) != 0)
      why = "features: buckets, penalty, leases, fail_closed or all";
    else
      dl->shadow_when[i].features = (unsigned)m;
  }
  if (why)
    return sluice__rd_err(x, bad, "shadow_when", "%s", why);
  dl->nshadow_when = n;
  return SLUICE_OK;
}

unsigned sluice__shadow_when(const sluice__ctx *c) {
  const sluice__decl *dl = c->p->decl;
  unsigned m = 0;
  int i;
  for (i = 0; dl && i < dl->nshadow_when; i++)
    if (sluice__match_ok(c, &dl->shadow_when[i].when))
      m |= dl->shadow_when[i].features;
  return m;
}

unsigned sluice__shadow_when_tier(const sluice__decl *dl, const char *tier) {
  unsigned m = 0;
  int i;
  for (i = 0; dl && i < dl->nshadow_when; i++) {
    const sluice__amatch *w = &dl->shadow_when[i].when;
    if (w->n == 1 && w->attr[0] == SLUICE__A_TIER &&
        (!strcmp(w->val[0], "*") || !strcmp(w->val[0], tier)))
      m |= dl->shadow_when[i].features;
  }
  return m;
}

/* Store URI parameters: "k=v;k=v".  Backends read their knobs with these so
** that every backend spells options the same way. */
#include <stdio.h>
#include <string.h>

#include "sluice/backend.h"
#include "store.h"

int sluice_uri_param(const char *uri, const char *name, const char **val,
                     size_t *len) {
  size_t nlen;
  const char *p = uri;
  if (!uri || !name || !val || !len)
    return SLUICE_EINVAL;
  nlen = strlen(name);
  while (*p) {
    const char *end = strchr(p, ';');
    const char *eq;
    size_t seg = end ? (size_t)(end - p) : strlen(p);
    eq = memchr(p, '=', seg);
    if (eq && (size_t)(eq - p) == nlen && memcmp(p, name, nlen) == 0) {
      *val = eq + 1;
      *len = seg - nlen - 1;
      return SLUICE_OK;
    }
    if (!end)
      break;
    p = end + 1;
  }
  return SLUICE_ENOTFOUND;
}

int sluice__uri_int(const char *uri, const char *name, int64_t dflt,
                   int64_t *out) {
  const char *v;
  size_t n, i;
  int64_t x = 0, mul = 1;
  int rc;
  if (!out)
    return SLUICE_EINVAL;
  *out = dflt;
  rc = sluice_uri_param(uri, name, &v, &n);
  if (rc == SLUICE_ENOTFOUND)
    return SLUICE_OK;
  if (rc != SLUICE_OK)
    return rc;
  if (n > 0 && (v[n - 1] == 'k' || v[n - 1] == 'm' || v[n - 1] == 'g')) {
    mul = v[n - 1] == 'k' ? 1024 : v[n - 1] == 'm' ? 1024 * 1024
                                                   : 1024 * 1024 * 1024;
    n--;
  }
  if (n == 0 || n > 18)
    return SLUICE_EINVAL;
  for (i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9')
      return SLUICE_EINVAL;
    x = x * 10 + (v[i] - '0');
  }
  if (x > INT64_MAX / mul)
    return SLUICE_EINVAL;
  *out = x * mul;
  return SLUICE_OK;
}

static int listed(const char *const *names, const char *p, size_t n) {
  size_t i;
  for (i = 0; names[i]; i++)
    if (strlen(names[i]) == n && memcmp(names[i], p, n) == 0)
      return 1;
  return 0;
}

/* One rule for every backend's store string (sluice_backend.azParams):
** each non-empty segment is NAME=VALUE with a declared NAME, given once.
** A misspelt "max_kyes=10" ignored would open an unlimited store. */
int sluice__uri_check(const char *backend, const char *uri,
                     const char *const *names, char *err, size_t errlen) {
  char none[1];
  const char *p = uri;
  char known[256];
  size_t i, kn = 0;
  if (!err || !errlen) {
    err = none;
    errlen = sizeof none;
  }
  err[0] = '\0';
  if (!uri || !names) {
    snprintf(err, errlen, "uri_check: NULL %s", uri ? "names" : "uri");
    return SLUICE_EINVAL;
  }
  if (!backend)
    backend = "store";
  known[0] = '\0';
  for (i = 0; names[i] && kn < sizeof known; i++)
    kn += (size_t)snprintf(known + kn, sizeof known - kn, "%s%s",
                           i ? ", " : "", names[i]);
  while (*p) {
    const char *end = strchr(p, ';'), *eq, *q;
    size_t seg = end ? (size_t)(end - p) : strlen(p), n;
    int shown = (int)(seg > 40 ? 40 : seg);
    if (seg > 0) {
      eq = memchr(p, '=', seg);
      if (!eq) {
        snprintf(err, errlen, "%s: parameter without '=': '%.*s' (known: %s)",
                 backend, shown, p, known);
        return SLUICE_EINVAL;
      }
      n = (size_t)(eq - p);
      if (!listed(names, p, n)) {
        snprintf(err, errlen, "%s: unknown parameter '%.*s' (known: %s)",
                 backend, (int)(n > 40 ? 40 : n), p, known[0] ? known : "none");
        return SLUICE_EINVAL;
      }
      /* Given twice: sluice_uri_param() would read only the first. */
      for (q = uri; q < p;) {
        const char *qe = strchr(q, ';');
        if (strncmp(q, p, n + 1) == 0) {
          snprintf(err, errlen, "%s: parameter '%.*s' given twice", backend,
                   (int)(n > 40 ? 40 : n), p);
          return SLUICE_EINVAL;
        }
        q = qe + 1;
      }
    }
    if (!end)
      break;
    p = end + 1;
  }
  return SLUICE_OK;
}

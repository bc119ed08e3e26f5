/* Store URI parameters: "k=v;k=v".  Backends read their knobs with these so
** that every backend spells options the same way. */
#include <string.h>

#include "sluice/backend.h"

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

int sluice_uri_int(const char *uri, const char *name, int64_t dflt,
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

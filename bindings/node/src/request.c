/*
** A request from JS: lib/sluice.js joins { method, route, tenant, key,
** tier, ip, attrs } into one string, its fields separated by NUL bytes
** (method, route, tenant, key, tier, ip, then name, value pairs; an empty
** field is an absent one), and says how many fields it
** joined.  One string crosses into C, instead of one N-API call per field
** (reading elements of an array costs more than the decision itself).  A
** field that held a NUL of its own shows up as one field too many, and is
** refused rather than read as the next field.  The string is copied into
** the request's own buffer: an async decision reads it on another thread
** after the call has returned.
*/
#include <string.h>

#include "addon.h"

/* A cost is an attribute the route's cost reads (the policy file says
** which): the request carries no cost of its own. */
enum { F_METHOD, F_ROUTE, F_TENANT, F_KEY, F_TIER, F_IP, F_ATTRS };

static const char *field_name(int i) {
  static const char *names[] = {"method", "route", "tenant",
                                "key",    "tier",  "ip"};
  return i < F_ATTRS ? names[i] : "attrs";
}

int sn_request_read(napi_env env, napi_value str, napi_value count,
                    sn_request *out) {
  const char *f[F_ATTRS + 2 * SN_ATTRS_MAX], *s, *end;
  uint32_t n = 0;
  size_t len = 0;
  int i, k;
  memset(&out->rq, 0, sizeof out->rq);
  if (napi_get_value_uint32(env, count, &n) != napi_ok || n < F_ATTRS ||
      (n - F_ATTRS) % 2 != 0)
    return sn_throw(env, SLUICE_EINVAL, "request"), -1;
  if ((n - F_ATTRS) / 2 > SN_ATTRS_MAX)
    return sn_throw(env, SLUICE_ERANGE, "attrs"), -1;
  if (napi_get_value_string_utf8(env, str, out->buf, sizeof out->buf, &len) !=
          napi_ok)
    return sn_throw(env, SLUICE_EINVAL, "request"), -1;
  if (len + 1 >= sizeof out->buf) /* each id is at most 256 bytes anyway */
    return sn_throw(env, SLUICE_EKEY, "request"), -1;
  for (s = out->buf, end = out->buf + len, k = 0;; s += strlen(s) + 1) {
    if (k == (int)n) /* a field with a NUL of its own */
      return sn_throw(env, SLUICE_EINVAL, field_name(k - 1)), -1;
    f[k++] = *s ? s : NULL;
    if (s + strlen(s) >= end)
      break;
  }
  if (k != (int)n)
    return sn_throw(env, SLUICE_EINVAL, "request"), -1;
  out->rq.method = f[F_METHOD];
  out->rq.route = f[F_ROUTE];
  out->rq.tenant_id = f[F_TENANT];
  out->rq.api_key_id = f[F_KEY];
  out->rq.tier = f[F_TIER];
  out->rq.client_ip = f[F_IP];
  for (i = F_ATTRS; i < (int)n; i += 2) {
    sluice_attr *a = &out->attrs[(i - F_ATTRS) / 2];
    if (f[i] == NULL || f[i + 1] == NULL)
      return sn_throw(env, SLUICE_EINVAL, "attrs"), -1;
    a->name = f[i];
    a->value = f[i + 1];
  }
  out->rq.attrs = n > F_ATTRS ? out->attrs : NULL;
  out->rq.nattrs = (n - F_ATTRS) / 2;
  return 0;
}

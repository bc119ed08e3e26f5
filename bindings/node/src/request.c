/*
** A request from JS: lib/sluice.js flattens { method, route, tenant, key,
** tier, ip, cost, attrs } into one array, so that the addon reads indexed
** elements instead of walking an object's keys (the JS side does that
** loop, where it is cheap).  Strings are copied into the request's own
** buffer: an async decision reads them on another thread after the call
** has returned.  null / undefined leave a field unset.
*/
#include <string.h>

#include "addon.h"

enum { F_METHOD, F_ROUTE, F_TENANT, F_KEY, F_TIER, F_IP, F_COST, F_ATTRS };

/* Copy string element i of arr into out->buf; *dst NULL when absent. */
static int read_str(napi_env env, napi_value arr, uint32_t i, sn_request *out,
                    const char **dst, const char *field) {
  napi_value v;
  napi_valuetype t;
  size_t room = sizeof out->buf - out->used, len = 0;
  *dst = NULL;
  if (napi_get_element(env, arr, i, &v) != napi_ok ||
      napi_typeof(env, v, &t) != napi_ok)
    return sn_throw(env, SLUICE_EINVAL, field), -1;
  if (t == napi_undefined || t == napi_null)
    return 0;
  if (t == napi_number) { /* an attribute given as a number: its decimal */
    if (napi_coerce_to_string(env, v, &v) != napi_ok)
      return sn_throw(env, SLUICE_EINVAL, field), -1;
  } else if (t != napi_string) {
    return sn_throw(env, SLUICE_EINVAL, field), -1;
  }
  if (room < 2 || napi_get_value_string_utf8(env, v, out->buf + out->used,
                                             room, &len) != napi_ok ||
      len + 1 >= room)
    return sn_throw(env, SLUICE_EKEY, field), -1; /* too long to be an id */
  *dst = out->buf + out->used;
  out->used += len + 1;
  return 0;
}

int sn_request_read(napi_env env, napi_value arr, sn_request *out) {
  uint32_t n, i;
  bool is_array;
  napi_value v;
  napi_valuetype t;
  double cost = 0;
  memset(&out->rq, 0, sizeof out->rq);
  out->used = 0;
  if (napi_is_array(env, arr, &is_array) != napi_ok || !is_array ||
      napi_get_array_length(env, arr, &n) != napi_ok || n < F_ATTRS ||
      (n - F_ATTRS) % 2 != 0)
    return sn_throw(env, SLUICE_EINVAL, "request"), -1;
  if ((n - F_ATTRS) / 2 > SN_ATTRS_MAX)
    return sn_throw(env, SLUICE_ERANGE, "attrs"), -1;
  if (read_str(env, arr, F_METHOD, out, &out->rq.method, "method") ||
      read_str(env, arr, F_ROUTE, out, &out->rq.route, "route") ||
      read_str(env, arr, F_TENANT, out, &out->rq.tenant_id, "tenant") ||
      read_str(env, arr, F_KEY, out, &out->rq.api_key_id, "key") ||
      read_str(env, arr, F_TIER, out, &out->rq.tier, "tier") ||
      read_str(env, arr, F_IP, out, &out->rq.client_ip, "ip"))
    return -1;
  if (napi_get_element(env, arr, F_COST, &v) != napi_ok ||
      napi_typeof(env, v, &t) != napi_ok)
    return sn_throw(env, SLUICE_EINVAL, "cost"), -1;
  if (t == napi_number) {
    napi_get_value_double(env, v, &cost);
    /* a whole number that an int64 holds; the policy checks its range */
    if (!(cost >= 0 && cost <= 9007199254740991.0) || cost != (int64_t)cost)
      return sn_throw(env, SLUICE_ERANGE, "cost"), -1;
    out->rq.cost = (int64_t)cost;
  } else if (t != napi_undefined && t != napi_null) {
    return sn_throw(env, SLUICE_EINVAL, "cost"), -1;
  }
  for (i = F_ATTRS; i < n; i += 2) {
    sluice_attr *a = &out->attrs[(i - F_ATTRS) / 2];
    if (read_str(env, arr, i, out, &a->name, "attrs") ||
        read_str(env, arr, i + 1, out, &a->value, "attrs"))
      return -1;
    if (a->name == NULL || a->value == NULL)
      return sn_throw(env, SLUICE_EINVAL, "attrs"), -1;
  }
  out->rq.attrs = n > F_ATTRS ? out->attrs : NULL;
  out->rq.nattrs = (n - F_ATTRS) / 2;
  return 0;
}

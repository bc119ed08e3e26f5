/*
** A decision as JS sees it: what was decided (allowed, outcome, the
** binding limit, its remaining, the lease) and the answer sluice's own
** HTTP renderer makes of it (status, headers, problem+json body), so the
** Node service sends exactly what a C service or the nginx module sends.
** An input error (no route matches, an attribute missing) is a result
** too, with `error` and `field` set, not an exception: a service decides
** per route whether an unmatched request passes.
*/
#include <stdlib.h>
#include <string.h>

#include "addon.h"

static int set_str(napi_env env, napi_value o, const char *name,
                   const char *s) {
  napi_value v;
  if (s == NULL)
    napi_get_null(env, &v);
  else if (napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v) != napi_ok)
    return -1;
  return napi_set_named_property(env, o, name, v) == napi_ok ? 0 : -1;
}

static int set_num(napi_env env, napi_value o, const char *name, double x) {
  napi_value v;
  return napi_create_double(env, x, &v) == napi_ok &&
                 napi_set_named_property(env, o, name, v) == napi_ok
             ? 0
             : -1;
}

static int set_bool(napi_env env, napi_value o, const char *name, int b) {
  napi_value v;
  return napi_get_boolean(env, b != 0, &v) == napi_ok &&
                 napi_set_named_property(env, o, name, v) == napi_ok
             ? 0
             : -1;
}

typedef struct { napi_env env; napi_value obj; } header_sink;

static int add_header(const char *name, const char *value, void *ud) {
  header_sink *s = ud;
  napi_value v;
  if (napi_create_string_utf8(s->env, value, NAPI_AUTO_LENGTH, &v) !=
          napi_ok ||
      napi_set_named_property(s->env, s->obj, name, v) != napi_ok)
    return 1;
  return 0;
}

/* Status, headers and body from the renderer into o. */
static int render(napi_env env, sn_policy *p, napi_value o,
                  const sluice_request *rq, const sluice_decision *d) {
  sluice_http_facts f;
  sluice_http_answer a;
  char small[2048], *body = small;
  size_t len = 0;
  header_sink hs = {env, NULL};
  int rc;
  if ((rc = sluice_decision_http_facts(d, rq, NULL, &f)) != SLUICE_OK ||
      (rc = sluice_http_answer_make(p->http, &f, d->now_ns, &a)) != SLUICE_OK)
    return rc;
  if (napi_create_object(env, &hs.obj) != napi_ok)
    return SLUICE_ENOMEM;
  if ((rc = sluice_http_answer_foreach_header(p->http, &a, add_header, &hs)) !=
      SLUICE_OK)
    return rc < 0 ? rc : SLUICE_ENOMEM;
  if (napi_set_named_property(env, o, "headers", hs.obj) != napi_ok ||
      set_num(env, o, "status", a.status))
    return SLUICE_ENOMEM;
  rc = sluice_http_answer_body(p->http, &a, small, sizeof small, &len);
  if (rc == SLUICE_ERANGE) { /* len is the room needed */
    if ((body = malloc(len)) == NULL)
      return SLUICE_ENOMEM;
    rc = sluice_http_answer_body(p->http, &a, body, len, &len);
  }
  if (rc == SLUICE_OK)
    rc = set_str(env, o, "body", len > 0 ? body : NULL) ? SLUICE_ENOMEM : 0;
  if (body != small)
    free(body);
  return rc;
}

napi_value sn_answer_make(napi_env env, sn_policy *p, int rc,
                          const sluice_request *rq, const sluice_decision *d) {
  napi_value o, v;
  int bad = 0, rrc;
  SN_CALL(env, napi_create_object(env, &o));
  if (rc != SLUICE_OK) { /* input error: nothing was recorded */
    bad |= set_bool(env, o, "allowed", 0);
    bad |= set_str(env, o, "error", sluice_err_name(rc));
    bad |= set_str(env, o, "message", sluice_strerror(rc));
    bad |= set_str(env, o, "field", d->invalid_field);
    if (bad)
      napi_throw_error(env, NULL, "out of memory");
    return bad ? NULL : o;
  }
  bad |= set_str(env, o, "error", NULL);
  bad |= set_bool(env, o, "allowed", d->allowed);
  bad |= set_str(env, o, "outcome", sluice_outcome_name(d->outcome));
  bad |= set_str(env, o, "limit", d->binding == SLUICE_BINDING_LIMIT
                                      ? d->limit_name : NULL);
  bad |= set_str(env, o, "unit", d->binding == SLUICE_BINDING_LIMIT
                                     ? d->limit_unit : NULL);
  bad |= set_num(env, o, "remaining", (double)d->remaining);
  bad |= set_num(env, o, "retryAfterMs", (double)(d->retry_after_ns / 1000000));
  bad |= set_num(env, o, "cost", (double)d->cost);
  bad |= set_num(env, o, "flags", d->flags);
  if (napi_create_bigint_uint64(env, d->lease_id, &v) != napi_ok ||
      napi_set_named_property(env, o, "leaseId", v) != napi_ok)
    bad = 1;
  if (bad) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  if ((rrc = render(env, p, o, rq, d)) != SLUICE_OK) {
    sn_throw(env, rrc, "render");
    return NULL;
  }
  return o;
}

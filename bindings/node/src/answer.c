/*
** A decision as JS sees it: what was decided (allowed, outcome, the
** binding limit, its remaining, the lease) and the answer sluice's own
** HTTP renderer makes of it (status, headers, problem+json body), so the
** Node service sends exactly what a C service or the nginx module sends.
**
** It crosses into JS as numbers in a Float64Array (the SN_OUT_* slots,
** which lib/sluice.js reads by the same numbers) and one string: the
** header values, one a line, then the body.  Names that repeat (header
** names, limit names and units, outcome and error names) go as ids into a
** per-policy table of their addresses, which JS turns into strings once
** (str()).  Creating JS objects, properties and strings from C is what a
** decision would otherwise spend most of its time on.  An input error (no
** route matches, an attribute missing) is a result too, with SN_OUT_ERROR
** and SN_OUT_FIELD set: a service decides whether an unmatched request
** passes.
*/
#include <stdlib.h>
#include <string.h>

#include "addon.h"

/* The id of s, a string whose storage outlives the policy's calls (-1 for
** NULL or no memory). */
static double str_id(sn_policy *p, const char *s) {
  int i;
  if (s == NULL)
    return -1;
  for (i = 0; i < p->nstr; i++)
    if (p->str[i] == s)
      return i;
  if (p->nstr == p->capstr) {
    int cap = p->capstr ? 2 * p->capstr : 32;
    const char **n = realloc(p->str, (size_t)cap * sizeof *n);
    if (n == NULL)
      return -1;
    p->str = n, p->capstr = cap;
  }
  p->str[p->nstr] = s;
  return p->nstr++;
}

/* The answer's headers: names as ids into out, values into buf one a
** line (the renderer leaves them one after the other, each with its NUL:
** the NULs become the newlines).  *len: the bytes of buf used. */
static int put_headers(sn_policy *p, const sluice_http_answer *a,
                       double *out, char *buf, size_t cap, size_t *len) {
  sluice_http_header h[SLUICE_HTTP_MAX_HEADERS];
  size_t n = 0, i;
  int rc = sluice_http_answer_headers(p->http, a, h, SLUICE_HTTP_MAX_HEADERS,
                                      &n, buf, cap, len);
  if (rc != SLUICE_OK)
    return rc;
  for (i = 0; i < n; i++)
    out[SN_OUT_HEADERS + i] = str_id(p, h[i].name);
  for (i = 0; i < *len; i++)
    if (buf[i] == '\0')
      buf[i] = '\n';
  out[SN_OUT_NHEADERS] = (double)n;
  return SLUICE_OK;
}

int sn_answer_fill(sn_policy *p, int rc, const sluice_request *rq,
                   const sluice_decision *d, double *out, char *room,
                   size_t room_len, char **text, size_t *text_len) {
  sluice_http_answer a;
  char *buf;
  size_t blen = 0, cap, len = 0;
  int rrc;
  *text = NULL, *text_len = 0;
  memset(out, 0, SN_OUT_LEN * sizeof *out);
  out[SN_OUT_ERROR] = out[SN_OUT_FIELD] = out[SN_OUT_LIMIT] =
      out[SN_OUT_UNIT] = -1;
  if (rc != SLUICE_OK) { /* input error: nothing was recorded */
    out[SN_OUT_ERROR] = str_id(p, sluice_err_name(rc));
    out[SN_OUT_FIELD] = str_id(p, d->invalid_field);
    out[SN_OUT_MESSAGE] = str_id(p, sluice_strerror(rc));
    return SLUICE_OK;
  }
  out[SN_OUT_ALLOWED] = d->allowed;
  out[SN_OUT_OUTCOME] = str_id(p, sluice_name(SLUICE_NAME_OUTCOME, d->outcome));
  if (d->binding == SLUICE_BINDING_LIMIT) {
    out[SN_OUT_LIMIT] = str_id(p, d->limit_name);
    out[SN_OUT_UNIT] = str_id(p, d->limit_unit);
  }
  out[SN_OUT_REMAINING] = (double)d->remaining;
  out[SN_OUT_RETRY_MS] = (double)(d->retry_after_ns / 1000000);
  out[SN_OUT_COST] = (double)d->cost;
  out[SN_OUT_FLAGS] = d->flags;
  out[SN_OUT_LEASE_LO] = (double)(uint32_t)d->lease_id;
  out[SN_OUT_LEASE_HI] = (double)(uint32_t)(d->lease_id >> 32);
  if (d->settle_check != 0) {
    out[SN_OUT_CHECK_LO] = (double)(uint32_t)d->settle_check;
    out[SN_OUT_CHECK_HI] = (double)(uint32_t)(d->settle_check >> 32);
    out[SN_OUT_NOW_LO] = (double)(uint32_t)(uint64_t)d->now_ns;
    out[SN_OUT_NOW_HI] = (double)(uint32_t)((uint64_t)d->now_ns >> 32);
  }
  if ((rrc = sluice_http_answer_make(p->http, d, rq, NULL, d->now_ns, &a)) !=
      SLUICE_OK)
    return rrc;
  out[SN_OUT_STATUS] = a.status;
  /* the body's size first: the header values go before it */
  if (a.has_body &&
      (rrc = sluice_http_answer_body(p->http, &a, NULL, 0, &blen)) !=
          SLUICE_ERANGE)
    return rrc == SLUICE_OK ? SLUICE_EINVAL : rrc;
  cap = SLUICE_HTTP_HEADER_BUF + blen;
  if (cap <= room_len)
    buf = room, cap = room_len;
  else if ((buf = malloc(cap)) == NULL)
    return SLUICE_ENOMEM;
  if ((rrc = put_headers(p, &a, out, buf, cap, &len)) != SLUICE_OK) {
    if (buf != room)
      free(buf);
    return rrc;
  }
  if (blen > 0) {
    if ((rrc = sluice_http_answer_body(p->http, &a, buf + len, cap - len,
                                       &blen)) != SLUICE_OK) {
      if (buf != room)
        free(buf);
      return rrc;
    }
    len += blen;
    out[SN_OUT_HAS_BODY] = 1;
  }
  *text = buf, *text_len = len;
  return SLUICE_OK;
}

napi_value sn_answer_text(napi_env env, char *room, char *text, size_t len,
                          int ascii) {
  napi_value v;
  /* Header values are ASCII (sluice/http.h: numbers, dates, printable
  ** policy names): an answer without a body is made a one-byte string as
  ** it is, with no UTF-8 to decode.  A body may hold UTF-8 (a route). */
  napi_status st =
      ascii ? napi_create_string_latin1(env, text ? text : "", len, &v)
            : napi_create_string_utf8(env, text ? text : "", len, &v);
  if (text != room)
    free(text);
  if (st != napi_ok) {
    napi_throw_error(env, NULL, "sluice: out of memory");
    return NULL;
  }
  return v;
}

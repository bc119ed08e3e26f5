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

typedef struct {
  sn_policy *p;
  double *out;
  char *buf;
  size_t len, cap;
  int n;
} header_sink;

static int add_header(const char *name, const char *value, void *ud) {
  header_sink *s = ud;
  size_t vl = strlen(value);
  if (s->n == SLUICE_HTTP_MAX_HEADERS || s->len + vl + 1 > s->cap)
    return 1;
  s->out[SN_OUT_HEADERS + s->n++] = str_id(s->p, name);
  memcpy(s->buf + s->len, value, vl);
  s->buf[s->len + vl] = '\n';
  s->len += vl + 1;
  return 0;
}

int sn_answer_fill(sn_policy *p, int rc, const sluice_request *rq,
                   const sluice_decision *d, double *out, char *room,
                   size_t room_len, char **text, size_t *text_len) {
  sluice_http_facts f;
  sluice_http_answer a;
  header_sink hs = {p, out, NULL, 0, 0, 0};
  size_t blen = 0;
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
  if ((rrc = sluice_decision_http_facts(d, rq, NULL, &f)) != SLUICE_OK ||
      (rrc = sluice_http_answer_make(p->http, &f, d->now_ns, &a)) !=
          SLUICE_OK)
    return rrc;
  out[SN_OUT_STATUS] = a.status;
  /* the body's size first: the header values go before it */
  if (a.has_body &&
      (rrc = sluice_http_answer_body(p->http, &a, NULL, 0, &blen)) !=
          SLUICE_ERANGE)
    return rrc == SLUICE_OK ? SLUICE_EINVAL : rrc;
  hs.cap = SLUICE_HTTP_HEADER_BUF + SLUICE_HTTP_MAX_HEADERS + blen;
  if (hs.cap <= room_len)
    hs.buf = room, hs.cap = room_len;
  else if ((hs.buf = malloc(hs.cap)) == NULL)
    return SLUICE_ENOMEM;
  if ((rrc = sluice_http_answer_foreach_header(p->http, &a, add_header,
                                               &hs)) != SLUICE_OK) {
    if (hs.buf != room)
      free(hs.buf);
    return rrc < 0 ? rrc : SLUICE_ENOMEM;
  }
  out[SN_OUT_NHEADERS] = hs.n;
  if (blen > 0) {
    if ((rrc = sluice_http_answer_body(p->http, &a, hs.buf + hs.len,
                                       hs.cap - hs.len, &blen)) != SLUICE_OK) {
      if (hs.buf != room)
        free(hs.buf);
      return rrc;
    }
    hs.len += blen;
    out[SN_OUT_HAS_BODY] = 1;
  }
  *text = hs.buf, *text_len = hs.len;
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

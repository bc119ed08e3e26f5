/*
** ledger-api: one request from headers to answer -- authentication, the
** policy decision, the handlers of each endpoint, and the answers they send
** through the library's renderer.
*/
#include "ledger_api.h"

#include <openssl/crypto.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_seq(const unsigned char *s) {
  size_t n, i;
  uint32_t cp;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    n = 2, cp = s[0] & 0x1f;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    n = 3, cp = s[0] & 0x0f;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    n = 4, cp = s[0] & 0x07;
  else
    return 0;
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return n;
}

static int utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n;
  while (*p) {
    if (!(n = utf8_seq(p)))
      return 0;
    p += n;
  }
  return 1;
}

/* s with every byte that is not valid UTF-8 written as %XX, truncated to
** fit: a path that can go into a JSON string whatever the client sent. */
static void utf8_escape(const char *s, char *out, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0, k;
  while (*p) {
    k = utf8_seq(p);
    if (k && o + k < n) {
      memcpy(out + o, p, k);
      o += k;
      p += k;
    } else if (!k && o + 3 < n) {
      snprintf(out + o, 4, "%%%02X", *p++);
      o += 3;
    } else {
      break;
    }
  }
  out[o] = 0;
}

/* ------------------------------------------------------------ answers --- */


static enum MHD_Result send_raw(struct MHD_Connection *c, int status,
                                const char *ctype, const char *body,
                                const sluice_http_header *h, size_t nh,
                                const char *location) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  enum MHD_Result ret;
  size_t i;
  int have_ctype = 0;
  if (!r)
    return MHD_NO;
  for (i = 0; i < nh; i++) {
    if (!strcasecmp(h[i].name, "Content-Type"))
      have_ctype = 1;
    MHD_add_response_header(r, h[i].name, h[i].value);
  }
  if (!have_ctype && ctype)
    MHD_add_response_header(r, "Content-Type", ctype);
  if (location && !MHD_get_response_header(r, "Location"))
    MHD_add_response_header(r, "Location", location);
  ret = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

/* A problem the server decides itself (400, 401, 404, 405, 413, 503),
** with one header the status requires (`hname` NULL: none). */
static enum MHD_Result problem_h(struct MHD_Connection *c, int status,
                                 const char *type, const char *title,
                                 const char *detail, const char *instance,
                                 const char *hname, const char *hvalue) {
  sluice_http_header h = {.name = hname, .value = hvalue};
  char inst[512];
  json_t *o;
  utf8_escape(instance ? instance : "/", inst, sizeof inst);
  o = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", title,
                "status", status, "detail", detail, "instance", inst);
  char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
  enum MHD_Result r;
  json_decref(o);
  if (!txt)
    return MHD_NO;
  r = send_raw(c, status, "application/problem+json", txt, &h, hname ? 1 : 0,
               NULL);
  free(txt);
  return r;
}

enum MHD_Result problem(struct MHD_Connection *c, int status,
                               const char *type, const char *title,
                               const char *detail, const char *instance) {
  return problem_h(c, status, type, title, detail, instance, NULL, NULL);
}

/* 405 names the methods the resource has (RFC 9110 section 15.5.6: the
** Allow header is required). */
static enum MHD_Result not_allowed(struct MHD_Connection *c, const char *allow,
                                   const char *url) {
  char detail[64];
  snprintf(detail, sizeof detail, "allowed: %s", allow);
  return problem_h(c, 405, PROBLEM_BASE "method-not-allowed",
                   "Method Not Allowed", detail, url, "Allow", allow);
}

/* 503 for a table of the service's own that is full: Retry-After as the
** policy's fail-closed 503 has it, so a client waits as it would there. */
static enum MHD_Result unavailable(struct MHD_Connection *c, const char *type,
                                   const char *detail, const char *url) {
  return problem_h(c, 503, type, "Service Unavailable", detail, url,
                   "Retry-After", UNAVAILABLE_RETRY_S);
}

/* A refused heavy request names the job the client should poll instead
** of submitting again (spec section 7, rule 7): `job_id` and `job_url` in
** the problem and a Link header with rel="monitor" (RFC 5989). */
static enum MHD_Result send_refusal_with_job(struct MHD_Connection *c,
                                             int status, const char *body,
                                             sluice_http_header *h, size_t nh,
                                             const char *job_id) {
  char url[64], link[96];
  json_error_t e;
  json_t *o = json_loads(body, 0, &e);
  char *txt;
  enum MHD_Result r;
  snprintf(url, sizeof url, "/v1/jobs/%s", job_id);
  snprintf(link, sizeof link, "<%s>; rel=\"monitor\"", url);
  if (!o || json_object_set_new(o, "job_id", json_string(job_id)) ||
      json_object_set_new(o, "job_url", json_string(url)) ||
      !(txt = json_dumps(o, JSON_COMPACT))) {
    json_decref(o);
    return send_raw(c, status, "application/problem+json", body, h, nh, NULL);
  }
  json_decref(o);
  h[nh].name = "Link";
  h[nh].value = link;
  r = send_raw(c, status, "application/problem+json", txt, h, nh + 1, NULL);
  free(txt);
  return r;
}

/* Answer a policy decision: the library renders headers and, when refused,
** the problem body; an allowed answer gets `json` (status `ok_status`; 202
** with a Location for accepted jobs, which send_raw adds).  `job_id`: see
** above. */
static enum MHD_Result answer_job(struct MHD_Connection *c,
                                  const sluice_request *rq,
                                  const sluice_decision *d, int ok_status,
                                  const char *location, const char *json,
                                  const char *job_id) {
  sluice_decision said = *d; /* the status said: ok_status when allowed */
  sluice_http_answer a;
  sluice_http_header h[SLUICE_HTTP_MAX_HEADERS + 1];
  char hbuf[SLUICE_HTTP_HEADER_BUF], rid[40], body[4096];
  size_t nh = 0, blen = 0;
  snprintf(rid, sizeof rid, "req_%08x%08" PRIx64, (unsigned)getpid(),
           atomic_fetch_add(&S.reqno, 1));
  if (d->allowed)
    said.status = ok_status;
  if (sluice_http_answer_make(S.http, &said, rq, rid, wall_ns(), &a) !=
          SLUICE_OK ||
      sluice_http_answer_headers(S.http, &a, h, SLUICE_HTTP_MAX_HEADERS, &nh,
                                 hbuf, sizeof hbuf, NULL) != SLUICE_OK)
    return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                   "cannot render the answer", rq->route);
  if (d->allowed)
    return send_raw(c, a.status, "application/json", json ? json : "{}", h,
                    nh, location);
  if (a.has_body && sluice_http_answer_body(S.http, &a, body, sizeof body,
                                            &blen) != SLUICE_OK)
    return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                   "cannot render the problem", rq->route);
  if (job_id && a.has_body)
    return send_refusal_with_job(c, a.status, body, h, nh, job_id);
  return send_raw(c, a.status, "application/problem+json",
                  a.has_body ? body : "", h, nh, NULL);
}

enum MHD_Result answer(struct MHD_Connection *c, const sluice_request *rq,
                              const sluice_decision *d, int ok_status,
                              const char *location, const char *json) {
  return answer_job(c, rq, d, ok_status, location, json, NULL);
}

/* ---------------------------------------------------------- handlers --- */


/* An API key, or an access token from /v1/auth/token. */
static const api_key *authenticate(struct MHD_Connection *c) {
  const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                              MHD_HTTP_HEADER_AUTHORIZATION);
  int i;
  if (v && !strncasecmp(v, "Bearer ", 7))
    v += 7;
  else
    v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
  if (!v)
    return NULL;
  if (!strncmp(v, "at_", 3))
    return token_find(v);
  for (i = 0; i < S.nkeys; i++)
    if (!strcmp(S.keys[i].key, v))
      return &S.keys[i];
  return NULL;
}

static void client_ip(struct MHD_Connection *c, char *out, size_t n) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  char peer[INET6_ADDRSTRLEN];
  ip_cap_peer_text(ci ? ci->client_addr : NULL, peer, sizeof peer);
  realip_client(&S.proxies, peer,
                S.trust_forwarded ? MHD_lookup_connection_value(
                                        c, MHD_HEADER_KIND, "X-Forwarded-For")
                                  : NULL,
                out, n);
}

static json_t *parse_body(const reqctx *rc) {
  json_error_t e;
  if (!rc->len)
    return json_object();
  return json_loadb(rc->body, rc->len, 0, &e);
}

static char *dumps(json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return s;
}


/* The answer for a key that is busy, reused or cannot be recorded. */
static enum MHD_Result idem_refusal(struct MHD_Connection *c, int rc,
                                    const char *url) {
  if (rc == IDEM_MISMATCH)
    return problem(c, 422, PROBLEM_BASE "idempotency-key-reused",
                   "Unprocessable Content",
                   "this Idempotency-Key was used with a different request",
                   url);
  if (rc == IDEM_BUSY)
    return problem(c, 409, PROBLEM_BASE "idempotency-key-in-use", "Conflict",
                   "a request with this Idempotency-Key is still being "
                   "processed; retry later", url);
  if (rc == IDEM_SHARE)
    return unavailable(c, PROBLEM_BASE "idempotency-tenant-share-full",
                       "this tenant holds its share of the Idempotency-Key "
                       "records (--idem-tenant-share), so the request was "
                       "not applied; retry when older records expire",
                       url);
  return unavailable(c, PROBLEM_BASE "idempotency-table-full",
                     "the request cannot be recorded for idempotent retries, "
                     "so it was not applied; retry later", url);
}

/* Parse YYYY-MM-DD into ns since the epoch. */
static int parse_day(const char *s, int64_t *out) {
  int y, m, d;
  char tail;
  struct tm tm;
  time_t t;
  if (!s || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3 || y < 1970 ||
      m < 1 || m > 12 || d < 1 || d > 31)
    return -1;
  memset(&tm, 0, sizeof tm);
  tm.tm_year = y - 1900;
  tm.tm_mon = m - 1;
  tm.tm_mday = d;
  t = timegm(&tm);
  /* int64 ns end on 2262-04-11: later days do not fit */
  if (t == (time_t)-1 || t > INT64_MAX / S_NS)
    return -1;
  *out = (int64_t)t * S_NS;
  return 0;
}

static enum MHD_Result decide_error(struct MHD_Connection *c, int rc,
                                    const sluice_decision *d,
                                    const char *url) {
  char detail[200];
  snprintf(detail, sizeof detail, "request field '%s': %s",
           d->invalid_field ? d->invalid_field : "?", sluice_strerror(rc));
  if (rc == SLUICE_ENOTFOUND || rc == SLUICE_EINVAL || rc == SLUICE_EKEY ||
      rc == SLUICE_ERANGE)
    return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request", detail,
                   url);
  return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                 detail, url);
}

/* A byte below 0x20 or DEL: never part of an id or a secret. */
static int has_control(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      return 1;
  return 0;
}

/* The secret matches, in time that does not depend on where the two
** differ (OpenSSL's CRYPTO_memcmp over both, padded to one length): a
** byte-by-byte strcmp lets a client find a secret one byte at a time. */
static int secret_equal(const char *want, const char *got) {
  char a[ID_MAX + 1] = {0}, b[ID_MAX + 1] = {0};
  snprintf(a, sizeof a, "%s", want); /* both at most ID_MAX, no NUL inside */
  snprintf(b, sizeof b, "%s", got);
  return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

/* One field of an application/x-www-form-urlencoded body, decoded; -1
** when absent, too long, or holding a control byte once decoded (a NUL
** would end the C string early: "secret%00anything" compared as
** "secret"). */
static int form_field(const reqctx *rc, const char *name, char *out,
                      size_t n) {
  size_t nl = strlen(name), i = 0;
  const char *b = rc->body;
  if (!b)
    return -1;
  while (i < rc->len) {
    size_t end = i;
    while (end < rc->len && b[end] != '&')
      end++;
    if (end - i > nl && !memcmp(b + i, name, nl) && b[i + nl] == '=') {
      size_t j = i + nl + 1, o = 0;
      while (j < end && o + 1 < n) {
        int h, l;
        unsigned char ch;
        if (b[j] == '+') {
          ch = ' ';
          j++;
        } else if (b[j] == '%' && j + 2 < end + 1 &&
                   (h = ex_hex_digit(b[j + 1])) >= 0 && (l = ex_hex_digit(b[j + 2])) >= 0) {
          ch = (unsigned char)(h * 16 + l);
          j += 3;
        } else {
          ch = (unsigned char)b[j++];
        }
        if (ch < 0x20 || ch == 0x7f)
          return -1;
        out[o++] = (char)ch;
      }
      out[o] = 0;
      return j == end ? 0 : -1;
    }
    i = end + 1;
  }
  return -1;
}

static enum MHD_Result handle_auth(struct MHD_Connection *c, const char *url,
                                   reqctx *rc, const char *ip) {
  sluice_request rq;
  sluice_attr attrs[2];
  sluice_decision d;
  const char *cid = NULL, *csec = NULL;
  char fcid[ID_MAX + 2], fsec[ID_MAX + 2];
  json_t *body = NULL;
  const api_key *k = NULL;
  int i, r, ok;
  enum MHD_Result ret;
  const char *ctype =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
  if (ctype && strstr(ctype, "json")) {
    body = parse_body(rc);
    if (!body || !json_is_object(body)) {
      json_decref(body);
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                     "the body is not a JSON object", url);
    }
    cid = json_string_value(json_object_get(body, "client_id"));
    csec = json_string_value(json_object_get(body, "client_secret"));
  } else {
    if (form_field(rc, "client_id", fcid, sizeof fcid) == 0)
      cid = fcid;
    if (form_field(rc, "client_secret", fsec, sizeof fsec) == 0)
      csec = fsec;
  }
  if (!cid || !cid[0] || !csec || strlen(cid) > ID_MAX ||
      strlen(csec) > ID_MAX || has_control(cid) || has_control(csec)) {
    json_decref(body);
    return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                   "client_id and client_secret are required: at most 64 "
                   "bytes each, no control characters",
                   url);
  }
  memset(&rq, 0, sizeof rq);
  rq.method = "POST";
  rq.route = url;
  rq.client_ip = ip;
  /* etc/ledger.conf's sign-in: its subject, and once the secret is
  ** checked its result.  Box check before verifying (no result yet): a
  ** boxed caller costs no secret check. */
  attrs[0] = (sluice_attr){"subject", cid};
  rq.attrs = attrs;
  rq.nattrs = 1;
  if ((r = sluice_policy_decide(S.pol, 1, &rq, &d, NULL)) != SLUICE_OK) {
    ret = decide_error(c, r, &d, url);
    json_decref(body);
    return ret;
  }
  if (!d.allowed) {
    ret = answer(c, &rq, &d, 200, NULL, NULL);
    json_decref(body);
    return ret;
  }
  for (i = 0; i < S.nkeys; i++)
    if (!strcmp(S.keys[i].client_id, cid))
      k = &S.keys[i];
  /* Both failure kinds are checked the same way and answered alike. */
  ok = secret_equal(k ? k->client_secret : "", csec) && k;
  attrs[1] = (sluice_attr){"result", !k   ? "unknown_client"
                                     : ok ? "ok"
                                          : "bad_secret"};
  rq.nattrs = 2;
  if ((r = sluice_policy_decide(S.pol, 1, &rq, &d, NULL)) != SLUICE_OK) {
    ret = decide_error(c, r, &d, url);
    json_decref(body);
    return ret;
  }
  /* The policy's refusal is the answer to good credentials (no token), and
  ** to a failure the store could not count (auth fails closed: a 401 would
  ** let guesses go on, uncounted, while a full store takes no failures).
  ** A failure that trips a box is still a 401: the next attempt meets it. */
  if (!d.allowed && (ok || d.outcome == SLUICE_OUTCOME_UNAVAILABLE)) {
    ret = answer(c, &rq, &d, 200, NULL, NULL);
  } else if (!ok) {
    ret = problem(c, 401, PROBLEM_BASE "invalid-client", "Unauthorized",
                  "invalid client credentials", url);
  } else {
    char tok[40], *txt;
    if (token_issue(k, tok, sizeof tok) != 0) {
      json_decref(body);
      return unavailable(c, PROBLEM_BASE "service-unavailable",
                         "cannot issue a token now", url);
    }
    txt = dumps(json_pack("{s:s, s:s, s:i}", "access_token", tok,
                          "token_type", "Bearer", "expires_in", TOKEN_TTL_S));
    ret = answer(c, &rq, &d, 200, NULL, txt);
    free(txt);
  }
  json_decref(body);
  return ret;
}

static enum MHD_Result handle_job(struct MHD_Connection *c, const char *url,
                                  const api_key *k, sluice_request *rq) {
  sluice_decision d;
  const char *id = url + strlen("/v1/jobs/");
  char *end;
  uint64_t seq;
  job *j;
  char *txt;
  int r, st;
  enum MHD_Result ret;
  if ((r = sluice_policy_decide(S.pol, 1, rq, &d, NULL)) != SLUICE_OK)
    return decide_error(c, r, &d, url);
  if (!d.allowed)
    return answer(c, rq, &d, 200, NULL, NULL);
  if (strncmp(id, "job_", 4) != 0)
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such job", url);
  errno = 0;
  seq = strtoull(id + 4, &end, 10);
  if (errno || *end || seq == 0)
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such job", url);
  j = &S.sh->jobs[seq % NJOBS];
  if (atomic_load(&j->seq) != seq || strcmp(j->tenant, k->tenant) != 0)
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such job", url);
  st = atomic_load(&j->state);
  if (st == JOB_DONE && j->kind == JOB_EXPORT) {
    char dl[200];
    snprintf(dl, sizeof dl,
             "https://storage.example.com/exports/job_%" PRIu64
             ".csv?expires=600&sig=demo", seq);
    txt = dumps(json_pack("{s:s, s:s, s:s, s:s}", "job_id", id, "kind",
                          "audit-export", "status", "succeeded",
                          "download_url", dl));
  } else {
    txt = dumps(json_pack("{s:s, s:s, s:s, s:s}", "job_id", id, "kind",
                          j->kind == JOB_RECONCILE ? "reconcile"
                                                   : "audit-export",
                          "status", st == JOB_DONE ? "succeeded" : "running",
                          "ledger_id", j->ledger));
  }
  ret = answer(c, rq, &d, 200, NULL, txt);
  free(txt);
  return ret;
}

/* The answer to a reconcile retried with its Idempotency-Key: the job
** the first request started.  Costs what a poll of the job costs. */
static enum MHD_Result reconcile_replay(struct MHD_Connection *c,
                                        const char *url, sluice_request *rq,
                                        const idem_slot *rec,
                                        const char *ledger) {
  sluice_decision d;
  sluice_request poll = *rq;
  char jid[32], loc[64], *txt;
  enum MHD_Result ret;
  int r;
  snprintf(jid, sizeof jid, "job_%" PRId64, rec->value);
  snprintf(loc, sizeof loc, "/v1/jobs/%s", jid);
  /* decided as the job's poll (its route), answered as this request */
  poll.method = "GET";
  poll.route = loc;
  poll.attrs = NULL;
  poll.nattrs = 0;
  if ((r = sluice_policy_decide(S.pol, 1, &poll, &d, NULL)) != SLUICE_OK)
    return decide_error(c, r, &d, url);
  if (!d.allowed)
    return answer(c, rq, &d, 200, NULL, NULL);
  txt = dumps(json_pack("{s:s, s:s, s:s, s:b}", "job_id", jid, "ledger_id",
                        ledger, "job_url", loc, "idempotent_replay", 1));
  ret = answer(c, rq, &d, 202, loc, txt);
  free(txt);
  return ret;
}

static enum MHD_Result handle_heavy(struct MHD_Connection *c, const char *url,
                                    const api_key *k, sluice_request *req,
                                    reqctx *rc, int kind) {
  /* A copy: the attribute it gets lives in this frame, as must every
  ** pointer into the request the caller keeps. */
  sluice_request q = *req, *rq = &q;
  sluice_decision d;
  sluice_attr attr;
  /* an export without dates: range "0" (etc/ledger.conf: not given) */
  char ledger[ID_MAX + 1] = "", loc[64], jid[32], range_s[24] = "0";
  uint64_t seq = 0;
  size_t slot = 0;
  int r, is_rec = kind == JOB_RECONCILE;
  char *txt;
  enum MHD_Result ret;
  if (is_rec) {
    json_t *b = parse_body(rc);
    const char *l, *ik;
    idem_slot rec;
    if (!b || !json_is_object(b)) {
      json_decref(b);
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                     "the body is not a JSON object", url);
    }
    l = json_string_value(json_object_get(b, "ledger_id"));
    if (!valid_id(l)) {
      json_decref(b);
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                     "ledger_id: required, 1-64 of [A-Za-z0-9._-]", url);
    }
    snprintf(ledger, sizeof ledger, "%s", l);
    json_decref(b);
    ik = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
    if (!ik || !ik[0] || strlen(ik) > 200)
      return problem(c, 400, PROBLEM_BASE "idempotency-key-required",
                     "Bad Request",
                     "POST /v1/ledgers/reconcile requires an Idempotency-Key "
                     "header (1-200 bytes)", url);
    attr = (sluice_attr){"ledger", ledger};
    rq->attrs = &attr;
    rq->nattrs = 1;
    r = idem_begin(k, idem_hash(k, 'r', ik), hash2("reconcile", ledger), &rec,
                   &slot);
    if (r == IDEM_REPLAY)
      return reconcile_replay(c, url, rq, &rec, ledger);
    if (r != IDEM_NEW)
      return idem_refusal(c, r, url);
  } else {
    const char *from =
        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from");
    const char *to = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "to");
    if (from || to) {
      int64_t from_ns, to_ns;
      if (parse_day(from, &from_ns) || parse_day(to, &to_ns) ||
          to_ns < from_ns)
        return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                       "from and to: YYYY-MM-DD up to 2262-04-11, from <= to",
                       url);
      /* the range in whole seconds (whole days here): its cost */
      snprintf(range_s, sizeof range_s, "%" PRId64, (to_ns - from_ns) / S_NS);
    }
    attr = (sluice_attr){"export_range_s", range_s};
    rq->attrs = &attr;
    rq->nattrs = 1;
  }
  if ((r = sluice_policy_decide(S.pol, 1, rq, &d, NULL)) != SLUICE_OK) {
    if (is_rec)
      idem_abandon(slot);
    return decide_error(c, r, &d, url);
  }
  if (!d.allowed) {
    char busy[32];
    int hint = (d.outcome == SLUICE_OUTCOME_CONFLICT ||
                d.outcome == SLUICE_OUTCOME_CONCURRENCY) &&
               running_job(k->tenant, kind,
                           d.outcome == SLUICE_OUTCOME_CONFLICT ? ledger : NULL,
                           busy, sizeof busy);
    if (is_rec)
      idem_abandon(slot);
    return answer_job(c, rq, &d, 200, NULL, NULL, hint ? busy : NULL);
  }
  if (!job_create(k, kind, is_rec ? ledger : NULL, range_s, d.lease_id,
                  &seq)) {
    if (d.lease_id)
      sluice_policy_release(
          S.pol, rq,
          &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = d.lease_id});
    if (is_rec)
      idem_abandon(slot);
    return unavailable(c, PROBLEM_BASE "service-unavailable", "job table full",
                       url);
  }
  if (is_rec)
    idem_done(slot, (int64_t)seq, 0);
  snprintf(jid, sizeof jid, "job_%" PRIu64, seq);
  snprintf(loc, sizeof loc, "/v1/jobs/%s", jid);
  if (is_rec)
    txt = dumps(json_pack("{s:s, s:s, s:s, s:s}", "job_id", jid, "status",
                          "running", "ledger_id", ledger, "job_url", loc));
  else
    txt = dumps(json_pack("{s:s, s:s, s:I, s:s}", "job_id", jid, "status",
                          "running", "cost", (json_int_t)d.cost, "job_url",
                          loc));
  ret = answer(c, rq, &d, 202, loc, txt);
  free(txt);
  return ret;
}


/* POST /v1/ledgers/{id}/entries: applied once per Idempotency-Key. */
static enum MHD_Result post_entry(struct MHD_Connection *c, const char *url,
                                  const api_key *k, sluice_request *rq,
                                  reqctx *rc, const char *ledger) {
  json_t *b = parse_body(rc);
  json_t *amt = b ? json_object_get(b, "amount") : NULL;
  const char *ik =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
  json_int_t amount = amt && json_is_integer(amt) ? json_integer_value(amt) : 0;
  sluice_decision d;
  idem_slot rec;
  ledger_slot *l;
  size_t slot;
  int64_t entry;
  char what[ID_MAX + 32], *txt;
  int r, replay = 0;
  enum MHD_Result ret;
  int ok = b && json_is_object(b) && amount >= 1 && amount <= AMOUNT_MAX;
  json_decref(b);
  if (!ok)
    return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                   "body: a JSON object with an integer amount from 1 to "
                   "10^18", url);
  if (!ik || !ik[0] || strlen(ik) > 200)
    return problem(c, 400, PROBLEM_BASE "idempotency-key-required",
                   "Bad Request",
                   "mutating requests require an Idempotency-Key header "
                   "(1-200 bytes)", url);
  snprintf(what, sizeof what, "%s|%" PRId64, ledger, (int64_t)amount);
  r = idem_begin(k, idem_hash(k, 'e', ik), hash2("entry", what), &rec, &slot);
  if (r != IDEM_NEW && r != IDEM_REPLAY)
    return idem_refusal(c, r, url);
  replay = r == IDEM_REPLAY;
  if ((r = sluice_policy_decide(S.pol, 1, rq, &d, NULL)) != SLUICE_OK) {
    if (!replay)
      idem_abandon(slot);
    return decide_error(c, r, &d, url);
  }
  if (!d.allowed) {
    if (!replay)
      idem_abandon(slot);
    return answer(c, rq, &d, 200, NULL, NULL);
  }
  if (replay) {
    entry = rec.value;
  } else {
    if (!(l = ledger_find(k->tenant, ledger, 1))) {
      idem_abandon(slot);
      return unavailable(c, PROBLEM_BASE "service-unavailable",
                         "ledger table full", url);
    }
    if (balance_add(l, (int64_t)amount) != 0) {
      idem_abandon(slot);
      return problem(c, 422, PROBLEM_BASE "balance-overflow",
                     "Unprocessable Content",
                     "the entry would overflow the ledger's balance", url);
    }
    entry = (int64_t)atomic_fetch_add(&S.sh->next_entry, 1) + 1;
    atomic_fetch_add(&l->entries, 1);
    idem_done(slot, entry, (int64_t)amount);
  }
  txt = dumps(json_pack("{s:s, s:I, s:I, s:b}", "ledger_id", ledger,
                        "entry_id", (json_int_t)entry, "amount", amount,
                        "idempotent_replay", replay));
  ret = answer(c, rq, &d, replay ? 200 : 201, NULL, txt);
  free(txt);
  return ret;
}

static enum MHD_Result handle_ledger(struct MHD_Connection *c, const char *url,
                                     const char *method, const api_key *k,
                                     sluice_request *rq, reqctx *rc) {
  /* /v1/ledgers/{id} or /v1/ledgers/{id}/entries */
  char ledger[ID_MAX + 1];
  const char *p = url + strlen("/v1/ledgers/"), *slash = strchr(p, '/');
  size_t n = slash ? (size_t)(slash - p) : strlen(p);
  int entries = slash && !strcmp(slash, "/entries");
  int post = !strcmp(method, "POST");
  sluice_decision d;
  ledger_slot *l;
  char *txt;
  int r;
  enum MHD_Result ret;
  if (n == 0 || n > ID_MAX || (slash && !entries))
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such resource", url);
  memcpy(ledger, p, n);
  ledger[n] = 0;
  if (!valid_id(ledger))
    return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                   "ledger id: 1-64 of [A-Za-z0-9._-]", url);
  if (post && !entries)
    return not_allowed(c, "GET", url);
  if (strcmp(method, "GET") && !post)
    return not_allowed(c, entries ? "GET, POST" : "GET", url);
  if (post)
    return post_entry(c, url, k, rq, rc, ledger);
  if ((r = sluice_policy_decide(S.pol, 1, rq, &d, NULL)) != SLUICE_OK)
    return decide_error(c, r, &d, url);
  if (!d.allowed)
    return answer(c, rq, &d, 200, NULL, NULL);
  l = ledger_find(k->tenant, ledger, 0);
  txt = dumps(json_pack("{s:s, s:I, s:I}", "ledger_id", ledger, "entries",
                        (json_int_t)(l ? atomic_load(&l->entries) : 0),
                        "balance",
                        (json_int_t)(l ? atomic_load(&l->balance) : 0)));
  ret = answer(c, rq, &d, 200, NULL, txt);
  free(txt);
  return ret;
}

/* A request through a trusted proxy counts, until it is answered, for the
** client the proxy names (ip_cap.h): --per-ip in progress per client. */
static enum MHD_Result cap_forwarded(struct MHD_Connection *c, reqctx *rc,
                                     const char *url) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  char peer[INET6_ADDRSTRLEN], ip[64];
  if (!S.cap)
    return MHD_YES;
  ip_cap_peer_text(ci ? ci->client_addr : NULL, peer, sizeof peer);
  if (!realip_trusted(&S.proxies, peer))
    return MHD_YES; /* the connection counts for its peer */
  client_ip(c, ip, sizeof ip);
  if (ip_cap_take(S.cap, ip) != 0)
    return problem_h(c, 429, PROBLEM_BASE "too-many-connections",
                     "Too Many Requests",
                     "this client address has its share of requests in "
                     "progress; retry when one is answered",
                     url, "Retry-After", "1");
  snprintf(rc->capped, sizeof rc->capped, "%s", ip);
  return MHD_YES;
}

void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                   enum MHD_ConnectionNotificationCode toe) {
  (void)cls;
  conn_guard_notify(S.guard, c, socket_context, toe);
  if (S.cap)
    ip_cap_notify(S.cap, c, toe);
}

enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  reqctx *rc = *con_cls;
  const api_key *k;
  sluice_request rq;
  char ip[64];
  (void)cls;
  if (!rc)
    return MHD_NO; /* on_uri made it; NULL: out of memory */
  if (!rc->started) {
    const char *why = http_strict_check(c, &rc->uri, method, version), *cl;
    rc->started = 1;
    conn_guard_head_done(S.guard, c);
    if (why)
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request", why,
                     url);
    if (!utf8_valid(url))
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                     "the path is not valid UTF-8", url);
    /* Refused before a byte of it is read (the connection then closes). */
    cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > MAX_BODY)
      return problem(c, 413, PROBLEM_BASE "too-large", "Content Too Large",
                     "bodies are limited to 16 KiB", url);
    return cap_forwarded(c, rc, url);
  }
  if (*upload_size) {
    char *nb;
    if (rc->len + *upload_size > MAX_BODY)
      return MHD_NO; /* chunked, over the limit: stop reading, close */
    if (!(nb = realloc(rc->body, rc->len + *upload_size + 1)))
      return MHD_NO;
    rc->body = nb;
    memcpy(rc->body + rc->len, upload, *upload_size);
    rc->len += *upload_size;
    rc->body[rc->len] = 0;
    *upload_size = 0;
    return MHD_YES;
  }
  client_ip(c, ip, sizeof ip);
  if (!strcmp(url, "/metrics") && strcmp(method, "GET"))
    return not_allowed(c, "GET", url);
  if (!strcmp(url, "/metrics")) {
    size_t need = 0;
    char *buf;
    enum MHD_Result ret;
    /* Measure, then render (counters may grow in between: retry once). */
    if (sluice_policy_metrics(S.pol, NULL, 0, &need) != SLUICE_OK ||
        !(buf = malloc(need + 4096)))
      return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                     "cannot render metrics", url);
    if (sluice_policy_metrics(S.pol, buf, need + 4096, &need) != SLUICE_OK) {
      free(buf);
      return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                     "cannot render metrics", url);
    }
    /* the sinks' counters fit in what is left (a few hundred bytes each):
    ** the alert sink's first, the nftables sink's in what remains */
    if (S.webhook)
      sluice_webhook_metrics(S.webhook, buf + need, 4096, NULL);
    if (S.nft_sink && strlen(buf) < need + 4096)
      sluice_nft_metrics(S.nft_sink, buf + strlen(buf),
                         need + 4096 - strlen(buf), NULL);
    ret = send_raw(c, 200, "text/plain; version=0.0.4", buf, NULL, 0, NULL);
    free(buf);
    return ret;
  }
  if (!strcmp(url, "/v1/auth/token")) {
    if (strcmp(method, "POST"))
      return not_allowed(c, "POST", url);
    return handle_auth(c, url, rc, ip);
  }
  if (strncmp(url, "/v1/", 4) != 0)
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such resource", url);
  k = authenticate(c);
  if (!k)
    return problem_h(c, 401, PROBLEM_BASE "unauthorized", "Unauthorized",
                     "send an API key: Authorization: Bearer KEY", url,
                     "WWW-Authenticate", "Bearer");
  memset(&rq, 0, sizeof rq);
  rq.tenant_id = k->tenant;
  rq.api_key_id = k->key;
  rq.tier = k->tier;
  rq.method = method;
  rq.route = url;
  rq.client_ip = ip;
  if (!strcmp(url, "/v1/ledgers/reconcile")) {
    if (strcmp(method, "POST"))
      return not_allowed(c, "POST", url);
    return handle_heavy(c, url, k, &rq, rc, JOB_RECONCILE);
  }
  if (!strcmp(url, "/v1/reports/audit-export")) {
    if (strcmp(method, "GET"))
      return not_allowed(c, "GET", url);
    return handle_heavy(c, url, k, &rq, rc, JOB_EXPORT);
  }
  if (!strncmp(url, "/v1/jobs/", 9)) {
    if (strcmp(method, "GET"))
      return not_allowed(c, "GET", url);
    return handle_job(c, url, k, &rq);
  }
  if (!strncmp(url, "/v1/ledgers/", 12)) {
    return handle_ledger(c, url, method, k, &rq, rc);
  }
  return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                 "no such resource", url);
}

/* Every request starts here (URI log callback), with its raw target. */
void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
  reqctx *rc = calloc(1, sizeof *rc);
  (void)cls;
  (void)c;
  if (rc)
    http_strict_uri_seen(&rc->uri, uri);
  return rc;
}

void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  reqctx *rc = *con_cls;
  (void)cls;
  (void)toe;
  conn_guard_request_done(S.guard, c);
  if (rc) {
    if (rc->capped[0])
      ip_cap_give(S.cap, rc->capped);
    free(rc->body);
    free(rc);
    *con_cls = NULL;
  }
}

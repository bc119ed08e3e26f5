/*
** The answer: from a policy's decision to the status and headers the
** service sends (spec section 5).  sluice/http.h lists how each part of
** the decision is said.
**
** sluice_http_answer_make() is the only place that decides anything: the
** status, whether and how Retry-After is sent, and the one random draw of
** its jitter.  Everything after it is rendering, a pure function of the
** answer, so a render can be repeated (a bigger buffer after
** SLUICE_ERANGE) and gives the same bytes, and the header and the body
** never disagree about how long to wait.
**
** Retry-After, exactly:
**   W  the true wait in ns (for a box: the later of retry_after_ns and
**      lockout_ends_ns - now);
**   S  = ceil(W / 1 s), at least 1 for a denial (a 429 that says
**      "retry in 0 s" invites the very retry it refused);
**   X  uniform over the whole seconds 0..floor(S / 10): the server-side
**      0-10% that keeps clients throttled in the same second from coming
**      back in the same second.  It is added, never subtracted, so the
**      value sent is never below W;
**   delta form:  Retry-After: S + X
**   date form (boxes of date_after_s, default one hour, or more):
**      Retry-After: IMF-fixdate of ceil((now + W) / 1 s) + X.  A client
**      subtracts the Date header, floor(now / 1 s), so it too reads at
**      least W.
** Jitter in whole seconds means a wait under 10 s gets none: there is no
** whole second within 10% of it.  Clients add their own jitter on top
** (spec section 7), which is where short waits get spread.
**
** Header forms: see sluice/http.h.  Policy names and the quota unit are
** sf-strings (RFC 9651 3.3.3): printable ASCII with '"' and '\' escaped.
** The structured form follows draft-ietf-httpapi-ratelimit-headers-11
** (the parameters of -10):
**  a) qu is the limit's unit, "points" for a bucket of no name.  Points
**     are not one of the units the draft registers (requests,
**     content-bytes, concurrent-requests), but leaving qu out would tell
**     a client that every request costs one unit, which is false for a
**     reconcile (10) or an export (25 or 50).
**  b) t is the draft's "effective window" (-11 4.1.2: no more than r can
**     be used within it; -10: "until additional quota is made
**     available"): until the next point, not until full (the legacy
**     Reset keeps the spec's "until full"); left out when the bucket is
**     full, since no more is coming; and never later than a Retry-After
**     sent with it (section 6 of both: Retry-After SHOULD NOT point
**     earlier than t).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"

#define DEFAULT_DATE_AFTER_S 3600
#define BASE_MAX 512
#define ALPHA "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define POLICY_NAME_MAX 64
#define QUOTA_UNIT_MAX 32
/* One policy item at its longest: the name and unit escaped throughout,
** q and w of 19 digits, and the ", " before it. */
#define POLICY_ITEM_MAX                                                        \
  (2 + 2 * POLICY_NAME_MAX + 3 + 19 + 4 + 2 + 2 * QUOTA_UNIT_MAX + 3 + 19 + 2)
#define POLICIES_MAX (SLUICE_DECISION_LIMITS_MAX * POLICY_ITEM_MAX)

static int str_ok(const char *s, size_t max, int lo, int hi) {
  size_t i;
  for (i = 0; s[i]; i++)
    if (i >= max || (unsigned char)s[i] < lo || (unsigned char)s[i] > hi)
      return 0;
  return 1;
}

int sluice_http_open(const sluice_http_options *opts, sluice_http **out) {
  static const sluice_http_options dflt; /* all defaults */
  sluice_http *h;
  size_t blen = 0;
  int rc;
  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  if (!opts)
    opts = &dflt;
  if (opts->header_form < SLUICE_HTTP_FORM_LEGACY ||
      opts->header_form > SLUICE_HTTP_FORM_BOTH ||
      (opts->flags & ~(unsigned)(SLUICE_HTTP_NO_JITTER | SLUICE_HTTP_NO_DATES |
                                 SLUICE_HTTP_DATE_HEADER |
                                 SLUICE_HTTP_PRETTY)) ||
      opts->date_after_s < 0)
    return SLUICE_EINVAL;
  /* An absolute URI starts with a scheme: ALPHA *( ALPHA / DIGIT / "+" /
  ** "-" / "." ) ":" (RFC 3986 3.1).  Quotes, spaces and controls would
  ** break the JSON string or the URI, so only visible ASCII is taken. */
  if (opts->problem_base) {
    const char *p = opts->problem_base;
    blen = strlen(p);
    if (blen == 0 || blen > BASE_MAX || !strchr(ALPHA, p[0]) ||
        p[strspn(p, ALPHA "0123456789+-.")] != ':' ||
        !str_ok(p, BASE_MAX, 0x21, 0x7e) || strpbrk(p, "\"\\<>"))
      return SLUICE_EINVAL;
  }
  h = calloc(1, sizeof *h);
  if (!h)
    return SLUICE_ENOMEM;
  h->form = opts->header_form;
  h->flags = opts->flags;
  h->date_after_s =
      opts->date_after_s ? opts->date_after_s : DEFAULT_DATE_AFTER_S;
  if (opts->problem_base &&
      asprintf(&h->base, "%s%s", opts->problem_base,
               opts->problem_base[blen - 1] == '/' ? "" : "/") < 0) {
    free(h);
    return SLUICE_ENOMEM;
  }
  rc = sluice__rng_init(&h->rng, opts->rand, opts->rand_ud);
  if (rc != SLUICE_OK) {
    free(h->base);
    free(h);
    return rc;
  }
  *out = h;
  return SLUICE_OK;
}

void sluice_http_close(sluice_http *h) {
  if (!h)
    return;
  free(h->base);
  free(h);
}

const char *sluice_http_reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 204: return "No Content";
  case 303: return "See Other";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 423: return "Locked";
  case 429: return "Too Many Requests";
  case 500: return "Internal Server Error";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: return "";
  }
}

const sluice__http_kind sluice__http_kinds[SLUICE_OUTCOME__COUNT] = {
    [SLUICE_OUTCOME_ALLOW] = {200, NULL},
    [SLUICE_OUTCOME_THROTTLED] = {429, "rate-limit-exceeded"},
    [SLUICE_OUTCOME_BOXED] = {429, "penalty-box-active"},
    [SLUICE_OUTCOME_SUSPENDED] = {403, "key-suspended"},
    [SLUICE_OUTCOME_CONCURRENCY] = {429, "concurrency-limit-exceeded"},
    [SLUICE_OUTCOME_CONFLICT] = {409, "ledger-conflict"},
    [SLUICE_OUTCOME_UNAVAILABLE] = {503, "service-unavailable"}};

/* A policy name or quota unit: an sf-string of printable ASCII. */
static int sf_text_ok(const char *s, size_t max) {
  return !s || (s[0] && str_ok(s, max, 0x20, 0x7e));
}

/* Saturating a + b, both >= 0. */
static int64_t sat_add(int64_t a, int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int check_decision(const sluice_decision *d) {
  int i, out = d->allowed ? SLUICE_OUTCOME_ALLOW : d->outcome;
  if (d->outcome < 0 || d->outcome >= SLUICE_OUTCOME__COUNT ||
      (d->allowed != 0 && d->allowed != 1) ||
      d->penalty_status < SLUICE_PENALTY_NONE ||
      d->penalty_status > SLUICE_PENALTY_ACTIVE_LOCKOUT ||
      d->penalty_level < 0 || d->penalty_level > 3 ||
      (d->binding != SLUICE_BINDING_NONE && d->binding != SLUICE_BINDING_IP &&
       d->binding != SLUICE_BINDING_LIMIT))
    return SLUICE_EINVAL;
  if (d->status != 0 && (out != SLUICE_OUTCOME_ALLOW
                             ? (d->status < 400 || d->status > 599)
                             : (d->status < 200 || d->status > 399)))
    return SLUICE_EINVAL;
  /* Figures out of range (a limit of 0, remaining -1: not known) are
  ** not sent; what would be said wrong is refused. */
  if (d->cost < 0 || d->cap_limit < 0 ||
      (out == SLUICE_OUTCOME_BOXED && d->penalty_level < 1) ||
      (out != SLUICE_OUTCOME_ALLOW && out != SLUICE_OUTCOME_BOXED &&
       out != SLUICE_OUTCOME_SUSPENDED && d->retry_after_ns == SLUICE_FOREVER))
    return SLUICE_EINVAL; /* only a box lasts forever */
  if (d->binding == SLUICE_BINDING_LIMIT) {
    if (d->nlimits < 0 || d->nlimits > SLUICE_DECISION_LIMITS_MAX ||
        !sf_text_ok(d->limit_name, POLICY_NAME_MAX) ||
        !sf_text_ok(d->limit_unit, QUOTA_UNIT_MAX))
      return SLUICE_EINVAL;
    for (i = 0; i < d->nlimits; i++) {
      const sluice_decision_limit *l = &d->limits[i];
      if (!l->name || !sf_text_ok(l->name, POLICY_NAME_MAX) ||
          !sf_text_ok(l->unit, QUOTA_UNIT_MAX) || l->quota < 0 ||
          l->window_ns < 0)
        return SLUICE_EINVAL;
    }
  }
  return SLUICE_OK;
}

int sluice_http_answer_make(sluice_http *h, const sluice_decision *d,
                            const sluice_request *req, const char *request_id,
                            int64_t now_ns, sluice_http_answer *a) {
  int64_t wait, s, x = 0;
  int rc, boxed;
  if (!h || !d || !a || now_ns < 0)
    return SLUICE_EINVAL;
  rc = check_decision(d);
  if (rc != SLUICE_OK)
    return rc;
  memset(a, 0, sizeof *a);
  a->decision = d;
  if (req) {
    a->method = req->method;
    a->route = req->route;
  }
  a->request_id = request_id;
  a->outcome = d->allowed ? SLUICE_OUTCOME_ALLOW : d->outcome;
  boxed = a->outcome == SLUICE_OUTCOME_BOXED;
  wait = d->retry_after_ns > 0 ? d->retry_after_ns : 0;
  if (boxed && wait == 0 && d->lockout_end_ns <= now_ns)
    return SLUICE_EINVAL; /* a box with no time left is not a box */
  a->status = d->status ? d->status : sluice__http_kinds[a->outcome].status;
  a->penalty = (boxed || a->outcome == SLUICE_OUTCOME_SUSPENDED)
                   ? SLUICE_PENALTY_ACTIVE_LOCKOUT
               : a->outcome == SLUICE_OUTCOME_THROTTLED &&
                       d->penalty_status == SLUICE_PENALTY_WARNING
                   ? SLUICE_PENALTY_WARNING
                   : SLUICE_PENALTY_NONE;
  a->has_body = a->outcome != SLUICE_OUTCOME_ALLOW;
  a->now_s = now_ns / SLUICE__NS_PER_S;
  if (!a->has_body)
    return SLUICE_OK; /* nothing to wait for */

  if (d->retry_after_ns == SLUICE_FOREVER ||
      a->outcome == SLUICE_OUTCOME_SUSPENDED)
    return SLUICE_OK; /* suspended: no time can be promised */
  if (boxed && d->lockout_end_ns > now_ns &&
      d->lockout_end_ns - now_ns > wait)
    wait = d->lockout_end_ns - now_ns;
  s = sluice__ceil_div64(wait, SLUICE__NS_PER_S);
  if (s < 1)
    s = 1;
  if (!(h->flags & SLUICE_HTTP_NO_JITTER))
    x = (int64_t)sluice__rng_upto(&h->rng, (uint64_t)(s / 10));
  if (boxed)
    a->lockout_ends_s = sluice__ceil_div64(sat_add(now_ns, wait),
                                           SLUICE__NS_PER_S);
  if (boxed && !(h->flags & SLUICE_HTTP_NO_DATES) && s >= h->date_after_s) {
    a->retry_is_date = 1;
    a->retry_at_s = sat_add(a->lockout_ends_s, x);
    if (a->retry_at_s > SLUICE__MAX_EPOCH_S)
      return SLUICE_ERANGE;
    a->retry_after_s = a->retry_at_s - a->now_s;
  } else {
    a->retry_after_s = sat_add(s, x);
  }
  return SLUICE_OK;
}

/* The binding limit's RateLimit figures are sent (answer.c's rule, also
** the body's: a refusal names its limit only with them). */
int sluice__http_figures(const sluice_http_answer *a) {
  const sluice_decision *d = a->decision;
  return d->limit > 0 && d->remaining >= 0 && d->remaining <= d->limit &&
         a->outcome != SLUICE_OUTCOME_UNAVAILABLE;
}

/* The binding policy's name and unit, as the fields and the body say them. */
const char *sluice__http_policy_name(const sluice_decision *d) {
  return d->binding == SLUICE_BINDING_LIMIT && d->limit_name ? d->limit_name
         : d->binding == SLUICE_BINDING_IP                   ? "ip"
                                                              : NULL;
}

const char *sluice__http_policy_unit(const sluice_decision *d) {
  return d->binding == SLUICE_BINDING_LIMIT && d->limit_name ? d->limit_unit
         : d->binding == SLUICE_BINDING_IP                   ? "requests"
                                                              : "points";
}

/* Whole seconds, rounded up. */
static int64_t ceil_s(int64_t ns) {
  return sluice__ceil_div64(ns, SLUICE__NS_PER_S);
}

/* Until the bucket's next point comes back: it is reset_ns from full,
** `missing` = ceil(reset * rate / period) points short, and has one point
** more once it is (missing - 1) * period / rate from full.  0: unknown
** (no refill: a window, whose quota comes back at its end; or full). */
static int64_t next_point_ns(const sluice_decision *d) {
  __extension__ typedef __int128 i128;
  i128 missing, after;
  if (d->reset_ns <= 0 || d->refill_rate <= 0 || d->refill_period_ns <= 0)
    return 0;
  missing = ((i128)d->reset_ns * d->refill_rate + d->refill_period_ns - 1) /
            d->refill_period_ns;
  after = (missing - 1) * d->refill_period_ns / d->refill_rate;
  return d->reset_ns - (int64_t)after;
}

/* ------------------------------------------------------------ headers --- */

/* Append an sf-string: DQUOTE, the text with '"' and '\' escaped, DQUOTE. */
static size_t put_sf_string(char *p, const char *s) {
  size_t n = 0;
  p[n++] = '"';
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      p[n++] = '\\';
    p[n++] = *s;
  }
  p[n++] = '"';
  p[n] = '\0';
  return n;
}

/* Write v in decimal at p, NUL-terminated; returns the characters
** written.  Header values are rendered for every admitted request (a
** gateway adds them to each upstream answer): this is several times
** cheaper than snprintf, which dominated the rendering, and two digits a
** division halve what is left. */
static size_t put_i64(char *p, int64_t v) {
  static const char k_pairs[] = "00010203040506070809"
                                "10111213141516171819"
                                "20212223242526272829"
                                "30313233343536373839"
                                "40414243444546474849"
                                "50515253545556575859"
                                "60616263646566676869"
                                "70717273747576777879"
                                "80818283848586878889"
                                "90919293949596979899";
  char tmp[24];
  size_t n = sizeof tmp, len, i = 0;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  if (v < 0)
    p[i++] = '-';
  while (u >= 100) {
    unsigned d = (unsigned)(u % 100) * 2;
    u /= 100;
    tmp[--n] = k_pairs[d + 1];
    tmp[--n] = k_pairs[d];
  }
  if (u >= 10) {
    tmp[--n] = k_pairs[u * 2 + 1];
    tmp[--n] = k_pairs[u * 2];
  } else {
    tmp[--n] = (char)('0' + u);
  }
  len = sizeof tmp - n;
  memcpy(p + i, tmp + n, len);
  p[i + len] = '\0';
  return i + len;
}

/* "<pre><v>", e.g. ";q=3000"; NUL-terminated, returns the length. */
static size_t put_num(char *p, const char *pre, int64_t v) {
  size_t n = strlen(pre);
  memcpy(p, pre, n);
  return n + put_i64(p + n, v);
}

/* "<a><sep><b>", e.g. "3000;w=60" or ";r=12;t=5" after a prefix. */
static size_t put_pair(char *p, const char *pre, int64_t a, const char *sep,
                       int64_t b) {
  size_t n = put_num(p, pre, a);
  return n + put_num(p + n, sep, b);
}

/* One structured RateLimit-Policy item: "name";q=Q[;qu="unit"][;w=W]
** (w 0: a policy without a window, a concurrency limit). */
static size_t put_policy(char *p, const char *name, int64_t q,
                         const char *unit, int64_t w) {
  size_t n = put_sf_string(p, name);
  n += put_num(p + n, ";q=", q);
  if (unit) {
    memcpy(p + n, ";qu=", 4);
    n += 4 + put_sf_string(p + n + 4, unit);
  }
  return w > 0 ? n + put_num(p + n, ";w=", w) : n;
}

/* A route's declared limits, in their order, ", " between items. */
static void put_policies(char *p, const sluice_decision *d) {
  size_t n = 0;
  int i;
  for (i = 0; i < d->nlimits; i++) {
    const sluice_decision_limit *l = &d->limits[i];
    if (i) {
      memcpy(p + n, ", ", 2);
      n += 2;
    }
    n += put_policy(p + n, l->name, l->quota, l->unit, ceil_s(l->window_ns));
  }
}

typedef struct collect {
  sluice_http_header *hdrs;
  size_t cap, n;
  char *buf;
  size_t buflen, used;
} collect;

/* Keeps walking after running out of room, so that the sizes reported
** with SLUICE_ERANGE are the ones that suffice. */
static void collect_one(collect *c, const char *name, const char *value) {
  size_t len = strlen(value) + 1;
  if (c->n < c->cap && c->used + len <= c->buflen) {
    memcpy(c->buf + c->used, value, len);
    c->hdrs[c->n].name = name;
    c->hdrs[c->n].value = c->buf + c->used;
  }
  c->n++;
  c->used += len;
}

/* The answer's headers, in the spec's order, into c. */
static int walk_headers(const sluice_http *h, const sluice_http_answer *a,
                        collect *c) {
  /* Big enough for the longest value: SLUICE_DECISION_LIMITS_MAX policy
  ** items with every character escaped. */
  char v[POLICIES_MAX + 1];
  const sluice_decision *d;
  const char *pname;
  int sf, legacy, figures, listed;
  int64_t reset_s, window_s;
  d = a->decision;
#define EMIT(name) collect_one(c, (name), v)

  if (a->has_body) {
    strcpy(v, "application/problem+json");
    EMIT("Content-Type");
  }
  if (h->flags & SLUICE_HTTP_DATE_HEADER) {
    if (sluice__http_format_date(a->now_s, v) != SLUICE_OK)
      return SLUICE_ERANGE;
    EMIT("Date");
  }
  if (a->retry_after_s > 0) {
    if (a->retry_is_date)
      sluice__http_format_date(a->retry_at_s, v);
    else
      put_i64(v, a->retry_after_s);
    EMIT("Retry-After");
  }
  figures = sluice__http_figures(a);
  listed = d->binding == SLUICE_BINDING_LIMIT && d->nlimits > 0 &&
           a->outcome != SLUICE_OUTCOME_UNAVAILABLE;
  if (figures || listed) {
    sf = h->form != SLUICE_HTTP_FORM_LEGACY;
    legacy = h->form != SLUICE_HTTP_FORM_SF;
    /* RateLimit-Policy's quota is the binding limit's, when it has a w */
    window_s = figures ? ceil_s(d->policy_window_ns) : 0;
    pname = sluice__http_policy_name(d);
    if (!pname)
      pname = "default";
    reset_s = d->reset_ns > 0 ? ceil_s(d->reset_ns) : 0;
    if (sf && listed) {
      put_policies(v, d);
      EMIT("RateLimit-Policy");
    } else if (window_s > 0 && sf) {
      put_policy(v, pname, d->limit, sluice__http_policy_unit(d), window_s);
      EMIT("RateLimit-Policy");
    } else if (window_s > 0) {
      put_pair(v, "", d->limit, ";w=", window_s);
      EMIT("RateLimit-Policy");
    }
    if (legacy && figures) {
      put_i64(v, d->limit);
      EMIT("RateLimit-Limit");
      put_i64(v, d->remaining);
      EMIT("RateLimit-Remaining");
      put_i64(v, reset_s);
      EMIT("RateLimit-Reset");
    }
    if (sf && figures) {
      size_t n = put_sf_string(v, pname);
      /* t: until more quota comes back (the next point), which a full
      ** bucket has nothing of; without a refill, until full.  Never later
      ** than a Retry-After sent with it. */
      int64_t next = next_point_ns(d);
      int64_t t = next > 0 ? ceil_s(next) : reset_s;
      if (a->retry_after_s > 0 && a->retry_after_s < t)
        t = a->retry_after_s;
      if (t > 0)
        put_pair(v + n, ";r=", d->remaining, ";t=", t);
      else
        put_num(v + n, ";r=", d->remaining);
      EMIT("RateLimit");
    }
  }
  if (a->penalty != SLUICE_PENALTY_NONE) {
    strcpy(v, a->penalty == SLUICE_PENALTY_ACTIVE_LOCKOUT ? "Active-Lockout"
                                                          : "Warning");
    EMIT("X-Penalty-Box-Status");
  }
#undef EMIT
  return SLUICE_OK;
}

int sluice_http_answer_headers(const sluice_http *h,
                               const sluice_http_answer *a,
                               sluice_http_header *hdrs, size_t cap, size_t *n,
                               char *buf, size_t buflen, size_t *needed) {
  collect c;
  int rc;
  if (!h || !a || !a->decision || !n || (cap && !hdrs) || (buflen && !buf))
    return SLUICE_EINVAL;
  c.hdrs = hdrs;
  c.cap = cap;
  c.n = 0;
  c.buf = buf;
  c.buflen = buflen;
  c.used = 0;
  rc = walk_headers(h, a, &c);
  if (rc != SLUICE_OK)
    return rc;
  *n = c.n;
  if (needed)
    *needed = c.used;
  return (c.n > cap || c.used > buflen) ? SLUICE_ERANGE : SLUICE_OK;
}

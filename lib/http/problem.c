/*
** application/problem+json bodies (RFC 9457) in the shape of spec
** section 5's example.
**
** The body is built with jansson rather than by hand: every string in it
** but the titles comes from the caller (tier, route, request id...), and
** jansson's encoder does the escaping of quotes, backslashes and control
** characters that a hand-rolled printf gets wrong sooner or later.
** Objects keep their insertion order, so members come out in the order of
** the spec's example.
**
** What goes in is only what the answer reads of the decision (its
** figures, tier, cost, limit names) and the request's method, route and
** id: nothing of a key, a backend or another tenant, so none can leak.  The `detail`
** sentence is composed here from the same figures, in the spec's wording.
**
** Choices where the spec is silent:
**  a) Problem types: rate-limit-exceeded, penalty-box-active and
**     concurrency-limit-exceeded (the spec's), key-suspended (403, level 3 pending
**     review: nothing about it is "too many requests"), ledger-conflict
**     (409) and service-unavailable (503 fail-closed), all under the
**     configured base (answer.c: sluice__http_kinds).
**  b) recommended_backoff ("exponential_with_full_jitter") is sent where
**     backing off and retrying is the right move: throttled, concurrency
**     and fail-closed.  A box says stop until it ends, an export cap until
**     its window frees a slot; a conflict says poll the job.
**  c) lockout_ends_at is RFC 3339 UTC with whole seconds, rounded up.  A
**     suspension (level 3, until lifted by hand) sends neither it nor
**     retry_after_seconds: there is no time to promise.
**  d) A body renders to a NUL-terminated buffer, so that it can be used as
**     a C string; the size needed is asked of jansson before anything is
**     written, so SLUICE_ERANGE leaves the caller's buffer untouched.
*/
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "http_int.h"

#define STR_MAX 1024
#define DETAIL_MAX (6 * STR_MAX)

/* The caller's text: at most STR_MAX bytes of strict UTF-8 (RFC 3629: no
** overlongs, no surrogates, nothing past U+10FFFF), as jansson checks it.
** jansson says no with the NULL of a failed allocation; the unchecked
** copy tells a bad byte (SLUICE_EINVAL) from no memory. */
static int text_ok(const char *s) {
  json_t *v, *raw;
  int rc;
  if (!s)
    return SLUICE_OK;
  if (strlen(s) > STR_MAX)
    return SLUICE_EINVAL;
  v = json_string(s);
  raw = v ? NULL : json_string_nocheck(s);
  rc = v ? SLUICE_OK : raw ? SLUICE_EINVAL : SLUICE_ENOMEM;
  json_decref(v);
  json_decref(raw);
  return rc;
}

/* "3000 points/min"; windows without a name are spelled out. */
static void per_window(char *out, size_t n, const char *what, int64_t quota,
                       int64_t w) {
  const char *unit = w == 1       ? "second"
                     : w == 60    ? "min"
                     : w == 3600  ? "hour"
                     : w == 86400 ? "day"
                                  : NULL;
  const char *s = quota == 1 ? "" : "s";
  if (unit)
    snprintf(out, n, "%" PRId64 " %s%s/%s", quota, what, s, unit);
  else
    snprintf(out, n, "%" PRId64 " %s%s per %" PRId64 " seconds", quota, what,
             s, w);
}

/* Append to a bounded buffer; the buffer is sized so it never truncates. */
static void cat(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cat(char *buf, size_t n, const char *fmt, ...) {
  size_t used = strlen(buf);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, n - used, fmt, ap);
  va_end(ap);
}

/* RFC 3339 UTC: strftime's numeric conversions are the same in every
** locale. */
static void iso8601(char out[32], int64_t epoch_s) {
  time_t t = (time_t)epoch_s;
  struct tm tm;
  if (!gmtime_r(&t, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
    out[0] = '\0';
}

/* The "retry in N seconds." ending, capitalized when it opens a sentence. */
static void retry_clause(char *d, size_t n, const sluice_http_answer *a,
                         int upper) {
  if (a->retry_after_s > 0)
    cat(d, n, "%cetry in %" PRId64 " second%s.", upper ? 'R' : 'r',
        a->retry_after_s, a->retry_after_s == 1 ? "" : "s");
}

/* " POST /route costs 5 points." in the limit's unit, a plural ("tokens",
** "points"): one of them is "token". */
static void route_cost(char *d, size_t n, const sluice_http_answer *a,
                       const char *unit) {
  int64_t cost = a->decision->cost;
  int ul = (int)strlen(unit);
  if (a->route && cost > 0)
    cat(d, n, " %s%s%s costs %" PRId64 " %.*s.", a->method ? a->method : "",
        a->method ? " " : "", a->route, cost,
        cost == 1 && ul > 1 && unit[ul - 1] == 's' ? ul - 1 : ul, unit);
}

/* The figures the detail speaks of: the tier, RateLimit-Policy's quota
** and window (0: none), the refill in points a second (0: none). */
typedef struct said {
  const char *tier;
  int64_t quota, window_s, refill_per_s;
} said;

static said said_of(const sluice_http_answer *a) {
  const sluice_decision *d = a->decision;
  said w = {d->tier[0] ? d->tier : NULL, 0, 0, 0};
  if (sluice__http_figures(a) && d->policy_window_ns > 0) {
    w.quota = d->limit;
    w.window_s = sluice__ceil_div64(d->policy_window_ns, SLUICE__NS_PER_S);
  }
  if (d->refill_rate > 0 && d->refill_period_ns > 0)
    w.refill_per_s = (int64_t)((__extension__(__int128)d->refill_rate *
                                SLUICE__NS_PER_S) /
                               d->refill_period_ns);
  return w;
}

/* "Quota for tier 'growth' exhausted (3000 points/min)": what, the tier
** when known, the verb, and the quota per window when there is one. */
static void lead(char *d, size_t n, const said *f, const char *what,
                 const char *verb, const char *unit) {
  char tmp[96];
  cat(d, n, "%s", what);
  if (f->tier)
    cat(d, n, " for tier '%s'", f->tier);
  cat(d, n, " %s", verb);
  if (unit && f->quota > 0) {
    per_window(tmp, sizeof tmp, unit, f->quota, f->window_s);
    cat(d, n, " (%s)", tmp);
  }
}

/* A named limit in its own words: "Limit 'points' exhausted (900 points
** per minute). POST /gists costs 5 points." */
static void named(char *d, size_t n, const sluice_http_answer *a,
                  const said *f, const char *verb) {
  const sluice_decision *dc = a->decision;
  const char *u = sluice__http_policy_unit(dc);
  const char *w = f->window_s == 1       ? "second"
                  : f->window_s == 60    ? "minute"
                  : f->window_s == 3600  ? "hour"
                  : f->window_s == 86400 ? "day"
                                         : NULL;
  int ul, one;
  if (!u)
    u = "requests";
  ul = (int)strlen(u);
  /* Units are plural ("tokens"): one of them is "token". */
  one = ul > 1 && u[ul - 1] == 's' ? ul - 1 : ul;
  cat(d, n, "Limit '%s' %s", sluice__http_policy_name(dc), verb);
  if (a->outcome != SLUICE_OUTCOME_THROTTLED) {
    /* A lease set or a lock: what is counted is requests at a time, and
    ** a request takes one lease, whatever its cost.  A lock (CONFLICT) is
    ** one at a time by nature: its cap is not quoted. */
    if (a->outcome == SLUICE_OUTCOME_CONCURRENCY && dc->cap_limit > 0)
      cat(d, n, " (%" PRId64 " at a time)", dc->cap_limit);
    cat(d, n, ".");
    return;
  }
  if (f->quota > 0 && w)
    cat(d, n, " (%" PRId64 " %.*s per %s)", f->quota,
        f->quota == 1 ? one : ul, u, w);
  else if (f->quota > 0)
    cat(d, n, " (%" PRId64 " %.*s per %" PRId64 " seconds)", f->quota,
        f->quota == 1 ? one : ul, u, f->window_s);
  cat(d, n, ".");
  route_cost(d, n, a, u);
}

/* A refusal by a declared limit: the detail speaks of it, and the body's
** violated-policies names it. */
static int is_named(const sluice_http_answer *a) {
  const sluice_decision *d = a->decision;
  return a->has_body && d->binding == SLUICE_BINDING_LIMIT && d->limit_name &&
         sluice__http_figures(a);
}

static void detail(char *d, size_t n, const sluice_http_answer *a) {
  const sluice_decision *dc = a->decision;
  said f = said_of(a);
  char when[32];
  d[0] = '\0';
  if (is_named(a) && (a->outcome == SLUICE_OUTCOME_THROTTLED ||
                      a->outcome == SLUICE_OUTCOME_CONCURRENCY ||
                      a->outcome == SLUICE_OUTCOME_CONFLICT)) {
    named(d, n, a, &f,
          a->outcome == SLUICE_OUTCOME_THROTTLED ? "exhausted" : "reached");
    cat(d, n, " ");
    retry_clause(d, n, a, 1);
    return;
  }
  switch (a->outcome) {
  case SLUICE_OUTCOME_THROTTLED:
    lead(d, n, &f, "Quota", "exhausted", "point");
    cat(d, n, ".");
    route_cost(d, n, a, "points");
    if (f.refill_per_s > 0) {
      cat(d, n, " Capacity refills at %" PRId64 " point%s/second; ",
          f.refill_per_s, f.refill_per_s == 1 ? "" : "s");
      retry_clause(d, n, a, 0);
    } else {
      cat(d, n, " ");
      retry_clause(d, n, a, 1);
    }
    break;
  case SLUICE_OUTCOME_BOXED:
    cat(d, n, "%s",
        dc->box_detail ? dc->box_detail
                       : "Requests kept arriving before Retry-After elapsed; "
                         "this client");
    if (a->lockout_ends_s > 0) {
      iso8601(when, a->lockout_ends_s);
      cat(d, n, " is locked out (penalty level %d) until %s. ",
          dc->penalty_level, when);
      retry_clause(d, n, a, 1);
    } else {
      cat(d, n, " is suspended (penalty level %d) pending review.",
          dc->penalty_level);
    }
    break;
  case SLUICE_OUTCOME_SUSPENDED:
    cat(d, n, "This API key is suspended (penalty level 3) pending review "
              "by support; retrying will not lift it.");
    break;
  case SLUICE_OUTCOME_CONCURRENCY:
    lead(d, n, &f, "Concurrency limit", "reached", NULL);
    if (dc->cap_limit > 0)
      cat(d, n, " (%" PRId64 " at a time)", dc->cap_limit);
    cat(d, n, ".");
    route_cost(d, n, a, "points");
    cat(d, n, " ");
    retry_clause(d, n, a, 1);
    break;
  case SLUICE_OUTCOME_CONFLICT:
    cat(d, n, "Another operation on this resource is in progress. Poll the "
              "existing job instead of resubmitting; ");
    retry_clause(d, n, a, 0);
    break;
  default:
    cat(d, n, "Rate limiting is temporarily unavailable and this endpoint "
              "fails closed. ");
    retry_clause(d, n, a, 1);
    break;
  }
}

/* Set a member; a NULL value (failed allocation) is remembered. */
static void set(json_t *o, const char *k, json_t *v, int *rc) {
  if (!v || json_object_set_new(o, k, v) != 0)
    *rc = SLUICE_ENOMEM;
}

int sluice_http_answer_body(const sluice_http *h, const sluice_http_answer *a,
                            char *buf, size_t buflen, size_t *len) {
  const sluice_decision *dc;
  const char *tier;
  char type[600], d[DETAIL_MAX], when[32];
  json_t *o;
  size_t need, flags;
  int rc = SLUICE_OK;
  if (!h || !a || !len || (buflen && !buf) || !a->decision)
    return SLUICE_EINVAL;
  dc = a->decision;
  if (!a->has_body) {
    *len = 0;
    if (buflen)
      buf[0] = '\0';
    return SLUICE_OK;
  }
  tier = dc->tier[0] ? dc->tier : NULL;
  if ((rc = text_ok(tier)) || (rc = text_ok(a->method)) ||
      (rc = text_ok(a->route)) || (rc = text_ok(a->request_id)))
    return rc;
  if (!h->base)
    return SLUICE_ECONFIG;
  snprintf(type, sizeof type, "%s%s", h->base,
           sluice__http_kinds[a->outcome].slug);
  detail(d, sizeof d, a);

  o = json_object();
  if (!o)
    return SLUICE_ENOMEM;
  set(o, "type", json_string(type), &rc);
  /* RFC 9457 3.1.3: the title belongs to the problem type and does not
  ** change from occurrence to occurrence, so a status override (403 for a
  ** suspension) keeps it. */
  set(o, "title",
      json_string(sluice_http_reason(sluice__http_kinds[a->outcome].status)),
      &rc);
  set(o, "status", json_integer(a->status), &rc);
  set(o, "detail", json_string(d), &rc);
  if (a->route)
    set(o, "instance", json_string(a->route), &rc);
  if (a->retry_after_s > 0)
    set(o, "retry_after_seconds", json_integer(a->retry_after_s), &rc);
  if (a->outcome == SLUICE_OUTCOME_THROTTLED ||
      a->outcome == SLUICE_OUTCOME_CONCURRENCY ||
      a->outcome == SLUICE_OUTCOME_UNAVAILABLE)
    set(o, "recommended_backoff", json_string("exponential_with_full_jitter"),
        &rc);
  if (tier)
    set(o, "quota_tier", json_string(tier), &rc);
  if (a->penalty == SLUICE_PENALTY_WARNING)
    set(o, "penalty_strikes_remaining",
        json_integer(dc->strikes_remaining > 0 ? dc->strikes_remaining : 0),
        &rc);
  if (a->outcome == SLUICE_OUTCOME_SUSPENDED) {
    set(o, "penalty_level", json_integer(3), &rc);
  } else if (a->outcome == SLUICE_OUTCOME_BOXED) {
    set(o, "penalty_level", json_integer(dc->penalty_level), &rc);
    if (a->lockout_ends_s > 0) {
      iso8601(when, a->lockout_ends_s);
      set(o, "lockout_ends_at", json_string(when), &rc);
    }
  }
  if (a->request_id)
    set(o, "request_id", json_string(a->request_id), &rc);
  /* The draft's problem types name the policies a request violated. */
  if (is_named(a)) {
    json_t *v = json_array();
    int i;
    /* The limits flagged denied, in their order; or the binding one. */
    for (i = 0; v && i < dc->nlimits; i++)
      if ((dc->limits[i].flags & SLUICE_LIMIT_DENIED) &&
          json_array_append_new(v, json_string(dc->limits[i].name)))
        rc = SLUICE_ENOMEM;
    if (v && !json_array_size(v) &&
        json_array_append_new(v, json_string(dc->limit_name)))
      rc = SLUICE_ENOMEM;
    set(o, "violated-policies", v, &rc);
  }
  /* The size is asked first, so SLUICE_ERANGE leaves buf untouched. */
  flags = (h->flags & SLUICE_HTTP_PRETTY) ? JSON_INDENT(2) : JSON_COMPACT;
  need = rc == SLUICE_OK ? json_dumpb(o, NULL, 0, flags) : 0;
  if (rc == SLUICE_OK && need == 0) {
    rc = SLUICE_ENOMEM;
  } else if (rc == SLUICE_OK && need + 1 > buflen) {
    *len = need + 1;
    rc = SLUICE_ERANGE;
  } else if (rc == SLUICE_OK) {
    json_dumpb(o, buf, need, flags);
    buf[need] = '\0';
    *len = need;
  }
  json_decref(o);
  return rc;
}

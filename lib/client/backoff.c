/*
** The client backoff planner (spec section 7).
**
** A retry loop has two jobs that pull against each other: come back soon
** enough to finish, and never come back so soon that the server counts it
** as a strike.  The planner settles it with one rule: the server's
** Retry-After is a hard floor and the client's own exponential backoff with
** full jitter (Brooker, "Exponential Backoff And Jitter", AWS Architecture
** Blog, 2015) only ever adds to it:
**
**     backoff = uniform(0, min(cap, base * 2^(attempt - 1)))
**     wait    = max(floor, backoff);  wait += uniform(0, wait / 10)
**
** Full jitter spreads a herd across the whole interval (the spec's
** end-of-day Growth batches); the extra 0-10% does the same for clients
** that were all told the same Retry-After.  `attempt` counts requests sent
** so far, so the first retry draws from [0, base].
**
** Everything else is a reason to stop, checked before any time is spent:
** a lockout (the server will refuse everything until it ends, and asking
** again only looks like abuse), a conflict (the job exists: poll it), a
** request that is not safe to repeat, the auth endpoint's lower retry
** budget (never rotate credentials), the attempt budget and the caller's
** deadline.
**
** The planner reads no clock.  The caller's clock enters only as now_ns and
** deadline_ns; the server's clock only as Retry-After against Date, so
** skew between the two never shortens a wait.
**
** A malformed server header is not the caller's error: it is flagged in
** the plan and read the safe way (wait the cap, or as long as asked).
*/
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define NS_PER_MS INT64_C(1000000)

#define ONE_HOUR_MS INT64_C(3600000)
/* A Retry-After this large (seconds) is read as "as long as can be said". */
#define RA_MAX_S (INT64_C(1) << 53)

struct sluice_backoff {
  int64_t base_ms, cap_ms;
  int max_attempts;
  int auth_max_retries;
  sluice__rng rng;
};

int sluice_backoff_open(const sluice_backoff_options *opts,
                        sluice_backoff **out) {
  static const sluice_backoff_options dflt; /* all defaults */
  sluice_backoff *b;
  int rc;
  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  if (!opts)
    opts = &dflt;
  if (opts->base_ms < 0 || opts->cap_ms < 0 || opts->max_attempts < 0 ||
      opts->auth_max_retries < SLUICE_BACKOFF_NONE ||
      opts->base_ms > ONE_HOUR_MS || opts->cap_ms > 24 * ONE_HOUR_MS)
    return SLUICE_EINVAL;
  b = calloc(1, sizeof *b);
  if (!b)
    return SLUICE_ENOMEM;
  b->base_ms = opts->base_ms ? opts->base_ms : SLUICE_BACKOFF_BASE_MS;
  b->cap_ms = opts->cap_ms ? opts->cap_ms : SLUICE_BACKOFF_CAP_MS;
  b->max_attempts =
      opts->max_attempts ? opts->max_attempts : SLUICE_BACKOFF_MAX_ATTEMPTS;
  b->auth_max_retries = opts->auth_max_retries == SLUICE_BACKOFF_NONE ? 0
                        : opts->auth_max_retries
                            ? opts->auth_max_retries
                            : SLUICE_BACKOFF_AUTH_RETRIES;
  if (b->cap_ms < b->base_ms) {
    free(b);
    return SLUICE_EINVAL;
  }
  rc = sluice__rng_init(&b->rng, opts->rand, opts->rand_ud);
  if (rc != SLUICE_OK) {
    free(b);
    return rc;
  }
  *out = b;
  return SLUICE_OK;
}

void sluice_backoff_close(sluice_backoff *b) { free(b); }

static size_t len_of(const char *s, size_t n) { return n ? n : strlen(s); }

int sluice_backoff_parse_retry_after(const char *s, size_t len,
                                     const char *date, size_t date_len,
                                     int64_t *wait_ms) {
  int64_t v, at, ref;
  int rc;
  if (!s || !wait_ms)
    return SLUICE_EINVAL;
  rc = sluice_http_parse_uint(s, len, &v);
  if (rc == SLUICE_OK) {
    *wait_ms = v * 1000; /* v <= 2^53, so this fits */
    return SLUICE_OK;
  }
  if (rc == SLUICE_ERANGE)
    return rc;
  /* Not digits: an HTTP-date, which only means something next to the
  ** server's own Date.  The local clock is never a substitute. */
  if (!date || sluice_http_parse_date(date, date_len, 0, &ref) != SLUICE_OK)
    return SLUICE_EINVAL;
  rc = sluice_http_parse_date(s, len, ref, &at);
  if (rc != SLUICE_OK)
    return rc == SLUICE_ERANGE ? SLUICE_EINVAL : rc;
  *wait_ms = at > ref ? (at - ref) * 1000 : 0;
  return SLUICE_OK;
}

/* Case-insensitive match of an OWS-trimmed field value. */
static int value_is(const char *s, size_t n, const char *want) {
  size_t i, w = strlen(want);
  while (n && (*s == ' ' || *s == '\t'))
    s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  if (n != w)
    return 0;
  for (i = 0; i < n; i++) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a');
    if (c != want[i])
      return 0;
  }
  return 1;
}

static int retryable_status(int status) {
  switch (status) {
  case 0: case 408: case 429: case 500: case 502: case 503: case 504:
    return 1;
  default:
    return 0;
  }
}

static int64_t sat_add(int64_t a, int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static void stop(sluice_backoff_plan *p, int why, int64_t wait_ms) {
  p->action = SLUICE_BACKOFF_STOP;
  p->reason = why;
  p->wait_ms = wait_ms;
}

int sluice_backoff_plan_next(sluice_backoff *b, const sluice_backoff_input *in,
                             sluice_backoff_plan *p) {
  int64_t floor_ms = 0, window, wait;
  int have_floor = 0, k, why = -1;
  if (!b || !in || !p || in->attempt < 1 ||
      (in->status != 0 && (in->status < 100 || in->status > 599)) ||
      (in->flags & ~(unsigned)(SLUICE_REQ_IDEMPOTENT |
                               SLUICE_REQ_IDEMPOTENCY_KEY | SLUICE_REQ_AUTH)) ||
      in->now_ns < 0 || in->deadline_ns < 0)
    return SLUICE_EINVAL;
  memset(p, 0, sizeof *p);
  p->remaining = -1;

  if (in->remaining) {
    int64_t r;
    if (sluice_http_parse_uint(in->remaining,
                               len_of(in->remaining, in->remaining_len),
                               &r) == SLUICE_OK)
      p->remaining = r;
    else
      p->flags |= SLUICE_BACKOFF_F_BAD_REMAINING;
  }
  if (in->retry_after) {
    const char *ra = in->retry_after;
    size_t ralen = len_of(ra, in->retry_after_len);
    int64_t tmp;
    int rc = sluice_backoff_parse_retry_after(
        ra, ralen, in->date, in->date ? len_of(in->date, in->date_len) : 0,
        &floor_ms);
    have_floor = 1;
    if (rc == SLUICE_ERANGE) {
      floor_ms = RA_MAX_S * 1000; /* "longer than anything": wait it */
      p->flags |= SLUICE_BACKOFF_F_BAD_RETRY_AFTER;
    } else if (rc != SLUICE_OK) {
      /* A well-formed date with no Date to read it against is a different
      ** failure from garbage; both fall back to the cap. */
      if (sluice_http_parse_date(ra, ralen, 0, &tmp) == SLUICE_OK)
        p->flags |= SLUICE_BACKOFF_F_NO_DATE;
      else
        p->flags |= SLUICE_BACKOFF_F_BAD_RETRY_AFTER;
      floor_ms = b->cap_ms;
      have_floor = 0; /* a guess, not the server's word */
    }
  }
  p->floor_ms = floor_ms;

  /* The reasons to stop, in the order they are checked. */
  if (in->status >= 100 && in->status <= 399)
    why = SLUICE_BACKOFF_WHY_DONE;
  else if (in->penalty_box &&
           value_is(in->penalty_box,
                    len_of(in->penalty_box, in->penalty_box_len),
                    "active-lockout"))
    why = SLUICE_BACKOFF_WHY_LOCKOUT;
  else if (in->status == 409)
    why = -1; /* poll the job, whatever the budgets say */
  else if (!retryable_status(in->status))
    why = SLUICE_BACKOFF_WHY_NOT_RETRYABLE;
  else if (!(in->flags & (SLUICE_REQ_IDEMPOTENT | SLUICE_REQ_IDEMPOTENCY_KEY)))
    why = SLUICE_BACKOFF_WHY_NOT_IDEMPOTENT;
  else if ((in->flags & SLUICE_REQ_AUTH) && in->attempt > b->auth_max_retries)
    why = SLUICE_BACKOFF_WHY_AUTH_LIMIT;
  else if (in->attempt >= b->max_attempts)
    why = SLUICE_BACKOFF_WHY_MAX_ATTEMPTS;
  if (why >= 0) {
    /* A lockout's wait is the server's floor, when it gave one. */
    stop(p, why,
         why != SLUICE_BACKOFF_WHY_LOCKOUT ? 0 : have_floor ? floor_ms : -1);
    return SLUICE_OK;
  }

  /* Full jitter over the capped exponential window. */
  window = b->base_ms;
  for (k = 1; k < in->attempt && window < b->cap_ms; k++)
    window *= 2; /* base <= 1 h, so this stops long before overflow */
  if (window > b->cap_ms)
    window = b->cap_ms;
  wait = (int64_t)sluice__rng_upto(&b->rng, (uint64_t)window);
  if (wait < floor_ms)
    wait = floor_ms;
  wait = sat_add(wait, (int64_t)sluice__rng_upto(&b->rng, (uint64_t)(wait / 10)));

  if (in->deadline_ns &&
      (in->deadline_ns < in->now_ns ||
       wait > (in->deadline_ns - in->now_ns) / NS_PER_MS)) {
    stop(p, SLUICE_BACKOFF_WHY_DEADLINE, have_floor ? floor_ms : 0);
    return SLUICE_OK;
  }
  p->action = in->status == 409 ? SLUICE_BACKOFF_POLL : SLUICE_BACKOFF_RETRY;
  p->reason = in->status == 409 ? SLUICE_BACKOFF_WHY_CONFLICT
                                : SLUICE_BACKOFF_WHY_RETRYABLE;
  p->wait_ms = wait;
  return SLUICE_OK;
}

/*
** The bridge from a policy decision to the HTTP surface's facts.
**
** The two layers were built apart: the policy knows why a request was
** refused (box, bucket, lease, store), the HTTP layer knows how to say it
** (status, RateLimit and Retry-After headers, problem+json).  This file is
** the one place that maps one vocabulary onto the other, so neither layer
** includes the other's types in its own logic.
**
** Choices:
**  a) The answer follows d->allowed, not d->outcome: in shadow mode the
**     client must see a normal response, not a 429 it was never given.
**  b) A suspension is BOXED at level 3 with status 403 and an infinite
**     wait: the HTTP layer then sends Active-Lockout without Retry-After.
**  c) The hourly export cap is a concurrency-style denial (the spec files
**     it under heavy-endpoint safety rails), not the token bucket's 429,
**     whose RateLimit headers would contradict it.
**  d) Strikes remaining are sent only with Warning, where the spec's
**     example body shows them.
*/
#include <string.h>

#include "policy_int.h"

int sluice_decision_http_facts(const sluice_decision *d,
                               const sluice_request *req,
                               const char *request_id,
                               struct sluice_http_facts *f) {
  if (!d || !f || d->outcome < 0 || d->outcome >= SLUICE_OUTCOME__COUNT)
    return SLUICE_EINVAL;
  memset(f, 0, sizeof *f);
  if (d->limit > 0 && d->remaining >= 0 && d->remaining <= d->limit) {
    f->limit = d->limit;
    f->remaining = d->remaining;
    f->reset_ns = d->reset_ns > 0 ? d->reset_ns : 0;
    if (d->policy_quota > 0 && d->policy_window_ns > 0) {
      f->quota = d->policy_quota;
      f->window_s = (d->policy_window_ns + SLUICE__NS_PER_S - 1) /
                    SLUICE__NS_PER_S;
    }
  }
  if (d->refill_rate > 0 && d->refill_period_ns > 0)
    f->refill_per_s = (int64_t)((__extension__(__int128)d->refill_rate *
                                 SLUICE__NS_PER_S) /
                                d->refill_period_ns);
  f->cost = d->cost;
  f->tier = d->tier[0] ? d->tier : NULL;
  if (req) {
    f->method = req->method;
    f->route = req->route;
    f->instance = req->route;
  }
  f->request_id = request_id;
  if (d->allowed) {
    f->outcome = SLUICE_HTTP_ALLOWED;
    return SLUICE_OK;
  }
  f->retry_after_ns = d->retry_after_ns > 0 ? d->retry_after_ns : 0;
  switch (d->outcome) {
  case SLUICE_OUTCOME_THROTTLED:
    f->outcome = SLUICE_HTTP_THROTTLED;
    f->penalty = d->penalty_status == SLUICE_PENALTY_WARNING
                     ? SLUICE_HTTP_PENALTY_WARNING
                     : SLUICE_HTTP_PENALTY_NONE;
    if (f->penalty == SLUICE_HTTP_PENALTY_WARNING) {
      f->flags |= SLUICE_HTTP_F_STRIKES;
      f->strikes_remaining =
          d->strikes_remaining > 0 ? d->strikes_remaining : 0;
    }
    break;
  case SLUICE_OUTCOME_BOXED:
    f->outcome = SLUICE_HTTP_BOXED;
    f->penalty = SLUICE_HTTP_PENALTY_LOCKOUT;
    f->penalty_level = d->penalty_level;
    f->lockout_ends_ns = d->lockout_end_ns;
    break;
  case SLUICE_OUTCOME_SUSPENDED:
    f->outcome = SLUICE_HTTP_BOXED;
    f->status = 403;
    f->penalty = SLUICE_HTTP_PENALTY_LOCKOUT;
    f->penalty_level = 3;
    f->retry_after_ns = SLUICE_FOREVER;
    f->lockout_ends_ns = 0;
    break;
  case SLUICE_OUTCOME_CONCURRENCY:
  case SLUICE_OUTCOME_EXPORT_CAP:
    f->outcome = SLUICE_HTTP_CONCURRENCY;
    break;
  case SLUICE_OUTCOME_CONFLICT:
    f->outcome = SLUICE_HTTP_CONFLICT;
    break;
  case SLUICE_OUTCOME_UNAVAILABLE:
    f->outcome = SLUICE_HTTP_FAIL_CLOSED;
    /* Bucket headers from a degraded or absent store would mislead. */
    f->limit = f->remaining = f->reset_ns = f->quota = f->window_s = 0;
    break;
  default: /* ALLOW with allowed == 0 cannot happen; refuse to guess */
    return SLUICE_EINVAL;
  }
  return SLUICE_OK;
}

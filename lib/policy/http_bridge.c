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
**  b) A suspension is its own answer, SUSPENDED (403 key-suspended,
**     Active-Lockout, no Retry-After), not a box with a 429's title.
**  d) Strikes remaining are sent only with Warning, where the spec's
**     example body shows them.
**  e) The structured t is until the binding bucket's next point: its tat
**     is reset_ns ahead, and a point comes back each period / rate.
**  f) The per-IP backstop's refusal names its window "ip", counted in
**     "requests"; its t and Reset are the window's end (nothing comes back
**     before it).
**  g) A declared limit (a policy file's `limits`) is named by its own name
**     and counted in its own unit; a refusal by one is SLUICE_HTTP_F_NAMED,
**     so the body lists it in violated-policies and its detail speaks of
**     it.
**  h) A route of declared limits lists every limit it applies in the
**     structured RateLimit-Policy (facts.policies), in the route's order,
**     not binding first: the draft asks the field to stay the same over a
**     sequence of responses, and which limit binds changes from one to the
**     next.  Each is in its own unit; w is a window's length or a bucket's
**     time to refill from empty, left out for leases (no window).
*/
#include <string.h>

#include "policy_int.h"

/* Until the bucket's next point comes back: it is reset_ns from full,
** `missing` = ceil(reset * rate / period) points short, and has one point
** more once it is (missing - 1) * period / rate from full. */
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
    f->next_ns = next_point_ns(d);
    f->quota_unit = "points";
    if (d->binding == SLUICE_BINDING_LIMIT && d->limit_name) { /* g */
      f->policy_name = d->limit_name;
      f->quota_unit = d->limit_unit;
    }
    if (d->binding == SLUICE_BINDING_IP) { /* choice f */
      f->policy_name = "ip";
      f->quota_unit = "requests";
      f->next_ns = f->reset_ns;
    }
    if (d->policy_quota > 0 && d->policy_window_ns > 0) {
      f->quota = d->policy_quota;
      f->window_s = (d->policy_window_ns + SLUICE__NS_PER_S - 1) /
                    SLUICE__NS_PER_S;
    }
  }
  if (d->binding == SLUICE_BINDING_LIMIT) { /* h */
    int i, n = d->nlimits < SLUICE_HTTP_POLICIES_MAX ? d->nlimits
                                                    : SLUICE_HTTP_POLICIES_MAX;
    for (i = 0; i < n; i++) {
      const sluice_decision_limit *l = &d->limits[i];
      sluice_http_policy *pp = &f->policies[i];
      pp->name = l->name;
      pp->unit = l->unit;
      pp->quota = l->quota;
      pp->window_s = (l->window_ns + SLUICE__NS_PER_S - 1) / SLUICE__NS_PER_S;
      if (l->flags & SLUICE_LIMIT_DENIED)
        pp->flags = SLUICE_HTTP_P_VIOLATED;
    }
    f->npolicies = n;
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
  if (f->policy_name && d->binding == SLUICE_BINDING_LIMIT)
    f->flags |= SLUICE_HTTP_F_NAMED;
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
    f->box_reason = SLUICE_HTTP_BOX_STRIKES;
    f->box_detail = d->box_detail; /* a declared penalty's wording */
    break;
  case SLUICE_OUTCOME_SUSPENDED:
    f->outcome = SLUICE_HTTP_SUSPENDED;
    f->penalty = SLUICE_HTTP_PENALTY_LOCKOUT;
    f->penalty_level = 3;
    f->retry_after_ns = 0;
    break;
  case SLUICE_OUTCOME_CONCURRENCY:
    f->outcome = SLUICE_HTTP_CONCURRENCY;
    f->concurrency_limit = d->cap_limit;
    break;
  case SLUICE_OUTCOME_CONFLICT:
    f->outcome = SLUICE_HTTP_CONFLICT;
    break;
  case SLUICE_OUTCOME_UNAVAILABLE:
    f->outcome = SLUICE_HTTP_FAIL_CLOSED;
    /* Bucket headers from a degraded or absent store would mislead. */
    f->limit = f->remaining = f->reset_ns = f->quota = f->window_s = 0;
    f->npolicies = 0;
    break;
  default: /* ALLOW with allowed == 0 cannot happen; refuse to guess */
    return SLUICE_EINVAL;
  }
  return SLUICE_OK;
}

/*
** The per-IP backstop: the spec's first layer ("AWS WAF: per-IP rate rule
** ... a flood backstop, not business logic"), a coarse fixed window per
** client address, checked before anything else a decision does.
**
** It is a record in the store like every other (ipw:{ip:I}, FWINDOW), so
** the workers of a host (shm) or a fleet (Redis) share one count per
** address, and it shares the {ip:I} hash tag with the address's auth
** records.
**
** Choices:
**  a) It counts requests, not points, and every request it admits, even
**     one a later check refuses: a WAF rule counts what reaches the
**     service.  A request it refuses is not counted (CONSUME), so a flood
**     does not push its own window's end.
**  b) It is its own store call, before the request's programs: it is a
**     different hash-tag group from the tenant's, and it must refuse a
**     flood before any of the flood's records are read.
**  c) A refusal is a THROTTLED decision (429) with the window as its
**     RateLimit facts (binding SLUICE_BINDING_IP, "requests"), a
**     Retry-After until the window ends, and no strike: the backstop keeps
**     no penalty state, that is the auth windows' job.
*/
#include <stdio.h>
#include <string.h>

#include "flow.h"

int sluice__backstop(sluice__ctx *c, sluice_decision *d, int *refused) {
  sluice_policy *p = c->p;
  char buf[SLUICE__KEYLEN];
  sluice_key k = sluice__key_ip_window(buf, c->I);
  sluice_op op;
  sluice_verdict v;
  int rc;
  *refused = 0;
  memset(&op, 0, sizeof op);
  op.algo = SLUICE_ALGO_FWINDOW;
  op.kind = SLUICE_OP_CONSUME;
  op.nkeys = 1;
  op.keys = &k;
  op.params = &p->ip_window;
  op.arg = 1;
  op.record_class = SLUICE_CLASS_UNTRUSTED; /* one per address anyone has */
  rc = c->tape ? sluice__store_call(c, &op, NULL, &v, NULL)
               : sluice_limiter_apply_at(p->lim, &op, c->now, &v);
  if (rc != SLUICE_OK || v.allowed)
    return rc;
  *refused = 1;
  d->outcome = SLUICE_OUTCOME_THROTTLED;
  d->binding = SLUICE_BINDING_IP;
  d->limit = v.limit;
  d->remaining = 0;
  d->reset_ns = v.reset_ns;
  d->policy_window_ns = p->ip_window.window_ns;
  d->retry_after_ns = v.retry_after_ns;
  return SLUICE_OK;
}

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
  /* One step, a note: a refusal is the step's verdict, not a gate's. */
  sluice_step st = {.algo = SLUICE_ALGO_FWINDOW, .kind = SLUICE_OP_CONSUME,
                    .nkeys = 1, .params = &p->ip_window, .arg = 1,
                    .fold = SLUICE_FOLD_NOTE};
  sluice_program pr = {.nkeys = 1, .keys = &k, .nsteps = 1, .steps = &st,
                       /* one per address anyone has */
                       .record_class = SLUICE_CLASS_UNTRUSTED};
  sluice_program_result r;
  const sluice_verdict *v = &r.v[0];
  int rc;
  *refused = 0;
  rc = c->tape ? sluice__store_call(c, NULL, &pr, NULL, &r)
               : sluice_limiter_decide(p->lim, 1, &pr, c->now, &r, NULL);
  if (rc != SLUICE_OK || v->allowed)
    return rc;
  *refused = 1;
  d->outcome = SLUICE_OUTCOME_THROTTLED;
  d->binding = SLUICE_BINDING_IP;
  d->limit = v->limit;
  d->remaining = 0;
  d->reset_ns = v->reset_ns;
  d->policy_window_ns = p->ip_window.window_ns;
  d->retry_after_ns = v->retry_after_ns;
  return SLUICE_OK;
}

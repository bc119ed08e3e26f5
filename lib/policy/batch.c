/*
** sluice_policy_decide_many(): n requests decided in order, at one time,
** with the store calls of consecutive tenant requests run as one batch
** (sluice_limiter_run_many_at), so that the store overlaps what one call
** after another leaves in series: memory misses (mem prefetches the next
** programs' records), round trips (Redis pipelines them), transactions
** (lmdb runs the batch in one).
**
** A request joins the batch when its store call needs nothing from the
** decisions before it in the batch:
**  a) a tenant request: an auth request's IP program is built from its
**     subject program's result, so it goes alone, after the batch before
**     it has been decided;
**  b) no per-IP backstop (ip_limit 0, or no client IP): the backstop is a
**     store call of its own, whose answer says whether the program runs;
**  c) a private deny cache: a shared one is read before the store, and
**     one by one a request would see the boxes the requests before it
**     put there;
**  d) a closed breaker: a half-open breaker's trials and an open one's
**     skips depend on how the calls before them ended.
** Everything after the store (the verdicts, events, counters, the deny
** cache, the breaker's window, the degraded flag) is done request by
** request in order, as sluice_policy_decide() does it, so the decisions
** are the same.  One difference remains, with a failing store: the
** requests batched after one whose call failed were already sent, where
** one by one the breaker might have opened between them.
*/
#include <stdlib.h>
#include <string.h>

#include "flow.h"

/* Programs a store call: the mem store's pipeline is four programs deep,
** so sixteen give it room, and a batch's state (about 150 KiB) is one
** allocation per call. */
#define BATCH 16

typedef struct batch {
  sluice__ctx c[BATCH];
  sluice__tenant_call t[BATCH];
  sluice_program pr[BATCH];
  sluice_program_result res[BATCH];
  int rcs[BATCH];
  int idx[BATCH]; /* the request each slot holds */
  int n;
} batch;

static int batchable(const sluice__ctx *c) {
  const sluice_policy *p = c->p;
  return c->cls != SLUICE_EP_AUTH && c->droute < 0 &&
         !(p->cfg.ip_limit > 0 && c->req->client_ip) &&
         !sluice__deny_shared(p) &&
         sluice__breaker_state(&p->brk) == SLUICE__BRK_CLOSED;
}

/* Run the batch's programs in one store call, then end its decisions in
** order. */
static void flush(sluice_policy *p, batch *b, int64_t now,
                  sluice_decision *ds, int *rcs) {
  int k, rc;
  if (b->n == 0)
    return;
  for (k = 0; k < b->n; k++)
    sluice__prog_program(&b->t[k].g, &b->pr[k]);
  rc = sluice_limiter_run_many_at(p->lim, b->n, b->pr, now, b->res, b->rcs);
  for (k = 0; k < b->n; k++) {
    sluice__ctx *c = &b->c[k];
    sluice_decision *d = &ds[b->idx[k]];
    int r = rc != SLUICE_OK ? rc : b->rcs[k];
    if (r != SLUICE_OK && sluice__store_failure(r) && !c->store_err)
      c->store_err = r;
    if (r == SLUICE_OK)
      r = sluice__tenant_read(c, &b->t[k], &b->res[k], d);
    rcs[b->idx[k]] = sluice__decide_end(c, r, d);
  }
  b->n = 0;
}

int sluice_policy_decide_many(sluice_policy *p, int n,
                              const sluice_request *qs, sluice_decision *ds,
                              int *rcs) {
  batch *b;
  int64_t now;
  int i;
  if (!p || n < 0 || (n > 0 && (!qs || !ds || !rcs)))
    return SLUICE_EINVAL;
  if (n == 0)
    return SLUICE_OK;
  now = sluice_limiter_now(p->lim);
  b = n > 1 ? malloc(sizeof *b) : NULL;
  if (!b) { /* one request, or no room for a batch: one by one */
    for (i = 0; i < n; i++)
      rcs[i] = sluice__decide_at(p, &qs[i], now, &ds[i]);
    return SLUICE_OK;
  }
  b->n = 0;
  for (i = 0; i < n; i++) {
    sluice__ctx *c = &b->c[b->n];
    sluice_decision *d = &ds[i];
    int rc = sluice__decide_begin(p, &qs[i], now, c, d);
    if (rc != SLUICE_OK) {
      rcs[i] = rc; /* a request error: nothing recorded, nothing to wait for */
      continue;
    }
    if (batchable(c)) {
      sluice__decide_admit(c, d);
      /* Another thread may have opened the breaker since: alone, then. */
      if (!c->cached && SLUICE__BRK_KIND(c->ticket) == SLUICE__BRK_CALL) {
        rc = sluice__tenant_build(c, &b->t[b->n]);
        if (rc == SLUICE_OK) {
          b->idx[b->n++] = i;
          if (b->n == BATCH)
            flush(p, b, now, ds, rcs);
          continue;
        }
        flush(p, b, now, ds, rcs);
        rcs[i] = sluice__decide_end(c, rc, d);
        continue;
      }
      flush(p, b, now, ds, rcs);
    } else {
      /* What the batch does decides what this request sees. */
      flush(p, b, now, ds, rcs);
      sluice__decide_admit(c, d);
    }
    rcs[i] = sluice__decide_end(c, sluice__decide_store(c, d), d);
  }
  flush(p, b, now, ds, rcs);
  free(b);
  return SLUICE_OK;
}

/*
** The limiter: a store plus a clock.  It owns the one piece of time policy
** in the library: the time it hands to steps does not go backwards.  Each
** read of the clock is raised to the highest time this limiter has
** published (an atomic max), so a wall clock stepped back by NTP looks like
** a clock standing still, and nothing is refunded or charged twice.
**
** A time is published only once it is more than SLUICE_CLOCK_SLACK_NS past
** the last one published.  Publishing every time was a locked
** compare-and-swap on one cache line that every thread of the process
** wrote on every decision: a large share of a hot-key decision, and the
** line bouncing between cores once several threads decide.  Now a time is
** published about once a millisecond, and a decision that starts after
** another returned gets a time at most the slack earlier than that one's.
** Stores tolerated that already: two threads that clamp in one order may
** reach the store in the other.  Real clock steps are far larger (ntpd and
** chrony slew offsets below 128 ms and step only above), and the steps
** themselves never refund or double-charge (README.md's invariants).
*/
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "backends.h"
#include "sluice.h"
#include "split.h"
#include "store.h"
#include "op.h"

struct sluice_limiter {
  sluice_store *store;
  /* The store's single program (store.h), or NULL: xRun. */
  int (*run1)(sluice_store *s, const sluice_program *p, int64_t now,
              sluice_program_result *res);
  sluice_clock *clock;
  int own_clock;
  _Atomic int64_t high_water;
  const sluice_allocator *alloc;
  char uri[]; /* the params part of opts->store, kept until close */
};

static int64_t clamp_time(sluice_limiter *l, int64_t t) {
  int64_t hw = atomic_load_explicit(&l->high_water, memory_order_relaxed);
  if (t > hw && t - hw <= SLUICE_CLOCK_SLACK_NS)
    return t;
  while (t > hw) {
    if (atomic_compare_exchange_weak_explicit(&l->high_water, &hw, t,
                                              memory_order_relaxed,
                                              memory_order_relaxed))
      return t;
  }
  return hw > t ? hw : t;
}

/* A store string's backend (`given`, else found by the name before the
** colon) and its parameters: what open and check both read. */
static const sluice_backend *resolve(const char *spec,
                                     const sluice_backend *given,
                                     const char **params, char *errbuf,
                                     size_t errlen) {
  const char *colon = strchr(spec, ':');
  size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
  const sluice_backend *b;
  char name[32];
  *params = colon ? colon + 1 : "";
  if (given)
    return given;
  if (nlen >= sizeof name) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "backend name too long");
    return NULL;
  }
  memcpy(name, spec, nlen);
  name[nlen] = '\0';
  b = sluice_backend_find(name);
  if (!b && errbuf && errlen)
    snprintf(errbuf, errlen, "unknown backend '%s'", name);
  return b;
}

int sluice_store_check(const char *store, char *errbuf, size_t errlen) {
  const sluice_backend *b;
  const char *params;
  if (errbuf && errlen)
    errbuf[0] = '\0';
  b = resolve(store ? store : "mem", NULL, &params, errbuf, errlen);
  if (!b)
    return SLUICE_EINVAL;
  /* As sluice_store_open(): a "//..." URL is the backend's to rewrite. */
  if (b->azParams && !(params[0] == '/' && params[1] == '/'))
    return sluice__uri_check(b->zName, params, b->azParams, errbuf, errlen);
  return SLUICE_OK;
}

int sluice_limiter_open(const sluice_limiter_options *opts,
                        sluice_limiter **out, char *errbuf, size_t errlen) {
  static const sluice_limiter_options defaults;
  const sluice_allocator *a;
  const sluice_backend *b;
  const char *params;
  size_t plen;
  sluice_limiter *l;
  int rc;

  if (errbuf && errlen)
    errbuf[0] = '\0';
  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  if (!opts)
    opts = &defaults;
  a = opts->alloc ? opts->alloc : &sluice__libc_allocator;
  if (!a->xMalloc || !a->xFree || !a->xRealloc)
    return SLUICE_EINVAL;
  b = resolve(opts->store ? opts->store : "mem", opts->backend, &params,
              errbuf, errlen);
  if (!b)
    return SLUICE_EINVAL;
  plen = strlen(params);
  l = a->xMalloc(a->ud, sizeof *l + plen + 1);
  if (!l)
    return SLUICE_ENOMEM;
  memset(l, 0, sizeof *l);
  memcpy(l->uri, params, plen + 1);
  l->alloc = a;
  if (opts->clock) {
    l->clock = opts->clock;
  } else {
    rc = sluice_clock_real(&l->clock);
    if (rc != SLUICE_OK) {
      a->xFree(a->ud, l, sizeof *l + plen + 1);
      return rc;
    }
    l->own_clock = 1;
  }
  rc = sluice_store_open(b, l->uri, a, opts->flags, &l->store, errbuf,
                          errlen);
  if (rc != SLUICE_OK) {
    if (l->own_clock)
      sluice_clock_free(l->clock);
    a->xFree(a->ud, l, sizeof *l + plen + 1);
    return rc;
  }
  l->run1 = l->store->pCore->run1;
  *out = l;
  return SLUICE_OK;
}

void sluice_limiter_close(sluice_limiter *l) {
  const sluice_allocator *a;
  if (!l)
    return;
  a = l->alloc;
  sluice_store_close(l->store);
  if (l->own_clock)
    sluice_clock_free(l->clock);
  a->xFree(a->ud, l, sizeof *l + strlen(l->uri) + 1);
}

int64_t sluice_limiter_now(sluice_limiter *l) {
  if (!l)
    return 0;
  return clamp_time(l, sluice_clock_now(l->clock));
}

int sluice_limiter_decide(sluice_limiter *l, int n, const sluice_program *ps,
                          int64_t now, sluice_program_result *res, int *rcs) {
  int rc, one, plain;
  if (!l || (now < 0 && now != SLUICE_NOW))
    return SLUICE_EINVAL;
  now = clamp_time(l, now == SLUICE_NOW ? sluice_clock_now(l->clock) : now);
  if (n != 1)
    return rcs ? sluice_store_run(l->store, n, ps, now, res, rcs)
               : SLUICE_EINVAL;
  if (!ps || !res)
    return SLUICE_EINVAL;
  plain = sluice__program_plain(ps);
  /* The common call: a plain program straight to the store's own. */
  if (plain && l->run1 && !rcs)
    return l->run1(l->store, ps, now, res);
  if (plain && l->run1) {
    *rcs = l->run1(l->store, ps, now, res);
    return SLUICE_OK;
  }
  rc = sluice__store_run1(l->store, ps, plain, now, res, rcs ? rcs : &one);
  return rc != SLUICE_OK || rcs ? rc : one;
}

/* A program its caller built valid by construction: the policy's decision
** programs, whose every shape the policy put through
** sluice_program_validate() when it opened (declared.c, "Checked at
** open").  Internal (split.h): no outside caller reaches it, so a program
** from outside is always validated.  The counts are checked all
** the same, as they bound the backend's arrays. */
int sluice__limiter_run_built(sluice_limiter *l, const sluice_program *p,
                              int64_t now, sluice_program_result *res) {
  int rc1, rc;
  if (p->nkeys < 1 || p->nkeys > SLUICE_PROGRAM_KEYS || p->nsteps < 1 ||
      p->nsteps > SLUICE_PROGRAM_STEPS)
    return SLUICE_EINVAL;
  now = clamp_time(l, now == SLUICE_NOW ? sluice_clock_now(l->clock) : now);
  rc = sluice__store_run1(l->store, p, 1, now, res, &rc1);
  return rc != SLUICE_OK ? rc : rc1;
}

/* The store's half of a call in two halves (split.h): BEGIN gets what
** sluice_store_run() checks and the time it gets. */
int sluice__limiter_split(sluice_limiter *l, int op, sluice__split *sp) {
  int rc;
  if (!l || !sp)
    return SLUICE_EINVAL;
  if (op == SLUICE__CTL_SPLIT_BEGIN) {
    if (sp->now < 0 || (!sp->op == !sp->prog) ||
        (sp->op && !sp->v) || (sp->prog && !sp->res))
      return SLUICE_EINVAL;
    rc = sp->op ? sluice__op_validate(sp->op) : sluice_program_validate(sp->prog);
    if (rc != SLUICE_OK)
      return rc;
    sp->now = clamp_time(l, sp->now);
  }
  rc = sluice_store_control(l->store, op, sp);
  /* BEGIN, REPLY, FAIL and CARRY answer SLUICE__SPLIT_* (>= 0). */
  return rc > 0 && (op == SLUICE__CTL_SPLIT_OPEN || op == SLUICE__CTL_SPLIT_CLOSE)
             ? SLUICE_EBACKEND
             : rc;
}

int sluice_limiter_take(sluice_limiter *l, const void *key, size_t keylen,
                        const sluice_gcra_params *p, int64_t cost,
                        sluice_verdict *v) {
  sluice_key k = {key, keylen};
  sluice_step st = {.algo = SLUICE_ALGO_GCRA, .kind = SLUICE_OP_CONSUME,
                    .nkeys = 1, .params = p, .arg = cost};
  sluice_program pr = {.nkeys = 1, .keys = &k, .nsteps = 1, .steps = &st};
  sluice_program_result res;
  int rc;
  if (!v)
    return SLUICE_EINVAL;
  rc = sluice_limiter_decide(l, 1, &pr, SLUICE_NOW, &res, NULL);
  if (rc == SLUICE_OK)
    *v = res.v[0];
  return rc;
}

int sluice_limiter_get(sluice_limiter *l, const void *key, size_t keylen,
                       sluice_state *out, int64_t *expires_ns) {
  sluice_key k = {key, keylen};
  int64_t dummy;
  if (!l)
    return SLUICE_EINVAL;
  return sluice_store_get(l->store, &k, sluice_limiter_now(l), out,
                           expires_ns ? expires_ns : &dummy);
}

int sluice_limiter_delete(sluice_limiter *l, const void *key, size_t keylen) {
  sluice_key k = {key, keylen};
  if (!l)
    return SLUICE_EINVAL;
  return sluice_store_delete(l->store, &k);
}

int sluice_limiter_control(sluice_limiter *l, int op, void *arg) {
  if (!l)
    return SLUICE_EINVAL;
  return sluice_store_control(l->store, op, arg);
}

unsigned sluice_limiter_capabilities(sluice_limiter *l) {
  return l ? sluice_store_capabilities(l->store) : 0;
}

const char *sluice_limiter_errmsg(sluice_limiter *l) {
  return l ? sluice_store_errmsg(l->store) : "";
}

const char *sluice_limiter_backend(sluice_limiter *l) {
  return l ? l->store->pBackend->zName : "";
}

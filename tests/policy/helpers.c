/*
** Fixtures for the policy suites.  The failing store wraps a real "mem"
** store so that the policy sees exactly the records it would see in
** production until the test flips the switch, and then gets the error a
** timed-out or unreachable backend gives, from the same vtable call.
*/
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

typedef struct fail_store {
  sluice_store base;
  sluice_store *inner;
  _Atomic int rc;
  _Atomic int after;
  _Atomic int64_t applies;
  _Atomic int64_t calls; /* store calls of any kind (xApply, xRun) */
  _Atomic int64_t attempts; /* the same, failed or not */
} fail_store;

static int f_close(sluice_store *s) {
  fail_store *f = (fail_store *)s;
  if (f->inner) {
    if (f->inner->pMethods && f->inner->pMethods->xClose)
      f->inner->pMethods->xClose(f->inner);
    sluice_store_free(s, f->inner, (size_t)f->inner->pBackend->szStore);
  }
  return SLUICE_OK;
}

static int f_apply(sluice_store *s, const sluice_op *op, int64_t now,
                   sluice_verdict *v) {
  fail_store *f = (fail_store *)s;
  int rc = atomic_load(&f->rc);
  atomic_fetch_add(&f->attempts, 1);
  if (rc) {
    if (atomic_load(&f->after) > 0)
      atomic_fetch_sub(&f->after, 1);
    else
      return sluice_store_seterr(s, rc, 0, "injected failure");
  }
  atomic_fetch_add(&f->applies, 1);
  atomic_fetch_add(&f->calls, 1);
  return f->inner->pMethods->xApply(f->inner, op, now, v);
}

/* A program is one store call: it fails, or reaches mem, as a whole. */
static int f_run(sluice_store *s, const sluice_program *p, int64_t now,
                 sluice_program_result *res) {
  fail_store *f = (fail_store *)s;
  int rc = atomic_load(&f->rc);
  atomic_fetch_add(&f->attempts, 1);
  if (rc) {
    if (atomic_load(&f->after) > 0)
      atomic_fetch_sub(&f->after, 1);
    else
      return sluice_store_seterr(s, rc, 0, "injected failure");
  }
  atomic_fetch_add(&f->applies, 1);
  atomic_fetch_add(&f->calls, 1);
  return f->inner->pMethods->xRun(f->inner, p, now, res);
}

static int f_get(sluice_store *s, const sluice_key *k, int64_t now,
                 sluice_state *out, int64_t *exp) {
  fail_store *f = (fail_store *)s;
  return f->inner->pMethods->xGet(f->inner, k, now, out, exp);
}

static int f_delete(sluice_store *s, const sluice_key *k) {
  fail_store *f = (fail_store *)s;
  return f->inner->pMethods->xDelete(f->inner, k);
}

static int f_control(sluice_store *s, int op, void *arg) {
  fail_store *f = (fail_store *)s;
  switch (op) {
  case FAIL_CTL_SET:
    atomic_store(&f->rc, *(int *)arg);
    return SLUICE_OK;
  case FAIL_CTL_AFTER:
    atomic_store(&f->after, *(int *)arg);
    return SLUICE_OK;
  case FAIL_CTL_APPLIES:
    *(int64_t *)arg = atomic_load(&f->applies);
    return SLUICE_OK;
  case FAIL_CTL_CALLS:
    *(int64_t *)arg = atomic_load(&f->calls);
    return SLUICE_OK;
  case FAIL_CTL_ATTEMPTS:
    *(int64_t *)arg = atomic_load(&f->attempts);
    return SLUICE_OK;
  default:
    return SLUICE_ENOTFOUND;
  }
}

static unsigned f_caps(sluice_store *s) {
  fail_store *f = (fail_store *)s;
  return f->inner->pMethods->xCapabilities
             ? f->inner->pMethods->xCapabilities(f->inner)
             : 0;
}

static const sluice_store_methods f_methods = {
    3,    f_close, f_apply, f_get, f_delete, f_control, f_caps, NULL,
    f_run, NULL};

static int f_open(const sluice_backend *b, const char *uri,
                  const sluice_store_config *cfg, sluice_store *s) {
  fail_store *f = (fail_store *)s;
  const sluice_backend *mem = sluice_backend_find("mem");
  int rc;
  (void)b;
  s->pMethods = &f_methods;
  f->inner = sluice_store_malloc(s, (size_t)mem->szStore);
  if (!f->inner)
    return SLUICE_ENOMEM;
  memset(f->inner, 0, (size_t)mem->szStore);
  f->inner->pBackend = mem;
  f->inner->pAlloc = s->pAlloc;
  rc = mem->xOpen(mem, uri, cfg, f->inner);
  if (rc != SLUICE_OK) {
    if (f->inner->pMethods && f->inner->pMethods->xClose)
      f->inner->pMethods->xClose(f->inner);
    sluice_store_free(s, f->inner, (size_t)mem->szStore);
    f->inner = NULL;
  }
  return rc;
}

const sluice_backend failing_backend = {1, sizeof(fail_store), "failing",
                                        NULL, f_open};

static void on_event(void *ud, const sluice_event *ev) {
  fixture *f = ud;
  logged_event *l;
  pthread_mutex_lock(&f->mu);
  if (f->nev >= (int)(sizeof f->ev / sizeof f->ev[0])) {
    pthread_mutex_unlock(&f->mu);
    return;
  }
  l = &f->ev[f->nev++];
  memset(l, 0, sizeof *l);
  l->type = ev->type;
  l->scope = ev->scope;
  l->level = ev->level;
  l->outcome = ev->outcome;
  l->store_error = ev->store_error;
  l->until_ns = ev->until_ns;
  if (ev->who)
    snprintf(l->who, sizeof l->who, "%s", ev->who);
  if (ev->why)
    snprintf(l->why, sizeof l->why, "%s", ev->why);
  if (ev->scope_id)
    snprintf(l->scope_id, sizeof l->scope_id, "%s", ev->scope_id);
  pthread_mutex_unlock(&f->mu);
}

static void fx_policy(fixture *f, const sluice_policy_config *cfg,
                      unsigned flags);

void fx_open(fixture *f, const sluice_policy_config *cfg, unsigned flags) {
  sluice_limiter_options lo;
  memset(f, 0, sizeof *f);
  cr_assert_eq(sluice_clock_manual(T0, &f->clock), SLUICE_OK);
  memset(&lo, 0, sizeof lo);
  lo.backend = &failing_backend;
  lo.clock = f->clock;
  cr_assert_eq(sluice_limiter_open(&lo, &f->lim), SLUICE_OK);
  fx_policy(f, cfg, flags);
}

int fx_open_store(fixture *f, const sluice_policy_config *cfg,
                  const char *store, unsigned open_flags) {
  sluice_limiter_options lo;
  int rc;
  memset(f, 0, sizeof *f);
  cr_assert_eq(sluice_clock_manual(T0, &f->clock), SLUICE_OK);
  memset(&lo, 0, sizeof lo);
  lo.store = store;
  lo.clock = f->clock;
  lo.flags = open_flags;
  rc = sluice_limiter_open(&lo, &f->lim);
  if (rc != SLUICE_OK) {
    sluice_clock_free(f->clock);
    return rc;
  }
  fx_policy(f, cfg, 0);
  return SLUICE_OK;
}

static void fx_policy(fixture *f, const sluice_policy_config *cfg,
                      unsigned flags) {
  sluice_policy_options po;
  char err[256];
  int i;
  pthread_mutex_init(&f->mu, NULL);
  memset(&po, 0, sizeof po);
  po.limiter = f->lim;
  po.config = cfg;
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 1);
  po.on_event = on_event;
  po.userdata = f;
  po.flags = flags;
  po.errbuf = err;
  po.errlen = sizeof err;
  cr_assert_eq(sluice_policy_open(&po, &f->pol), SLUICE_OK, "open: %s", err);
}

void fx_close(fixture *f) {
  sluice_policy_close(f->pol);
  sluice_limiter_close(f->lim);
  sluice_clock_free(f->clock);
  pthread_mutex_destroy(&f->mu);
}

void fx_fail(fixture *f, int rc, int after) {
  cr_assert_eq(sluice_limiter_control(f->lim, FAIL_CTL_AFTER, &after),
               SLUICE_OK);
  cr_assert_eq(sluice_limiter_control(f->lim, FAIL_CTL_SET, &rc), SLUICE_OK);
}

int64_t fx_applies(fixture *f) {
  int64_t n = 0;
  cr_assert_eq(sluice_limiter_control(f->lim, FAIL_CTL_APPLIES, &n),
               SLUICE_OK);
  return n;
}

int64_t fx_calls(fixture *f) {
  int64_t n = 0;
  cr_assert_eq(sluice_limiter_control(f->lim, FAIL_CTL_CALLS, &n), SLUICE_OK);
  return n;
}

int64_t fx_attempts(fixture *f) {
  int64_t n = 0;
  cr_assert_eq(sluice_limiter_control(f->lim, FAIL_CTL_ATTEMPTS, &n),
               SLUICE_OK);
  return n;
}

int fx_count(const fixture *f, int type) {
  int i, n = 0;
  for (i = 0; i < f->nev; i++)
    n += f->ev[i].type == type;
  return n;
}

const logged_event *fx_last(const fixture *f, int type) {
  int i;
  for (i = f->nev - 1; i >= 0; i--)
    if (f->ev[i].type == type)
      return &f->ev[i];
  return NULL;
}

sluice_request rq_std(const char *tenant, const char *key, const char *tier) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.tenant_id = tenant;
  r.api_key_id = key;
  r.tier = tier;
  r.method = "GET";
  r.route = "/v1/ledgers/l1/entries";
  return r;
}

sluice_request rq_class(const char *tenant, const char *key, const char *tier,
                        int cls) {
  sluice_request r = rq_std(tenant, key, tier);
  r.endpoint_class = cls;
  return r;
}

sluice_request rq_auth(const char *ip, const char *subject, int result) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = "/v1/auth/token";
  r.client_ip = ip;
  r.auth_subject = subject;
  r.auth_result = result;
  return r;
}

sluice_decision decide(fixture *f, const sluice_request *r) {
  sluice_decision d;
  int rc = sluice_policy_decide(f->pol, r, &d);
  cr_assert_eq(rc, SLUICE_OK, "decide: %s (field %s)", sluice_strerror(rc),
               d.invalid_field ? d.invalid_field : "-");
  return d;
}

void fx_wait_children(const pid_t *pids, int n) {
  int i, st;
  for (i = 0; i < n; i++) {
    cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "child %d failed (status %d)", i, st);
  }
}

/* The failing store (fail_store.h): a decorator on the public wrappers. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "fail_store.h"

typedef struct fail_store {
  sluice_store base;
  sluice_store *inner;
  sluice_store_methods methods; /* the table this store's options chose */
  _Atomic long nth, count, calls, injected, attempts, passed;
  _Atomic int code;
} fail_store;

int fail_code_by_name(const char *name, size_t len) {
  for (int c = -30901; c >= SLUICE_ERRNO_LAST; c--) {
    const char *n = sluice_err_name(c) + 7; /* past "SLUICE_" */
    if (strlen(n) == len && memcmp(n, name, len) == 0)
      return c;
  }
  return 0;
}

/* A failable call: 0 when it goes on to the inner store, else the code it
** fails with (its detail recorded). */
static int gate(fail_store *f) {
  long n = atomic_fetch_add(&f->calls, 1) + 1;
  long nth = atomic_load(&f->nth), count = atomic_load(&f->count);
  int code;
  atomic_fetch_add(&f->attempts, 1);
  if (nth <= 0 || n < nth || (count > 0 && n >= nth + count)) {
    atomic_fetch_add(&f->passed, 1);
    return 0;
  }
  atomic_fetch_add(&f->injected, 1);
  code = atomic_load(&f->code);
  sluice_store_seterr(&f->base, code, 0, "fail: injected %s",
                      sluice_err_name(code));
  return code ? code : SLUICE_EBACKEND;
}

/* The inner store's error detail becomes this store's. */
static int pass(fail_store *f, int rc) {
  if (rc != SLUICE_OK)
    sluice_store_seterr(&f->base, rc, sluice_store_errcode(f->inner), "%s",
                        sluice_store_errmsg(f->inner));
  return rc;
}

static int f_apply(sluice_store *s, const sluice_op *op, int64_t now,
                   sluice_verdict *v) {
  fail_store *f = (fail_store *)s;
  int rc = gate(f);
  return rc ? rc : pass(f, sluice_store_apply(f->inner, op, now, v));
}

static int f_apply_many(sluice_store *s, int n, const sluice_op *ops,
                        int64_t now, sluice_verdict *vs, int *rcs) {
  fail_store *f = (fail_store *)s;
  int rc = gate(f);
  return rc ? rc
            : pass(f, sluice_store_apply_many(f->inner, n, ops, now, vs, rcs));
}

static int f_run(sluice_store *s, const sluice_program *p, int64_t now,
                 sluice_program_result *res) {
  fail_store *f = (fail_store *)s;
  int rc = gate(f);
  return rc ? rc : pass(f, sluice_store_run(f->inner, p, now, res));
}

static int f_get(sluice_store *s, const sluice_key *k, int64_t now,
                 sluice_state *out, int64_t *exp) {
  return sluice_store_get(((fail_store *)s)->inner, k, now, out, exp);
}

static int f_delete(sluice_store *s, const sluice_key *k) {
  return sluice_store_delete(((fail_store *)s)->inner, k);
}

static int f_control(sluice_store *s, int op, void *arg) {
  fail_store *f = (fail_store *)s;
  if (op == FAIL_STORE_CTL_PLAN) {
    const fail_plan *p = arg;
    if (!p)
      return SLUICE_EINVAL;
    atomic_store(&f->nth, 0); /* never half a plan: disarm first */
    atomic_store(&f->code, p->code);
    atomic_store(&f->count, p->count);
    atomic_store(&f->calls, 0);
    atomic_store(&f->nth, p->nth);
    return SLUICE_OK;
  }
  if (op == FAIL_STORE_CTL_STATS) {
    fail_stats *st = arg;
    if (!st)
      return SLUICE_EINVAL;
    st->calls = atomic_load(&f->calls);
    st->injected = atomic_load(&f->injected);
    st->attempts = atomic_load(&f->attempts);
    st->passed = atomic_load(&f->passed);
    return SLUICE_OK;
  }
  return sluice_store_control(f->inner, op, arg);
}

static unsigned f_caps(sluice_store *s) {
  return sluice_store_capabilities(((fail_store *)s)->inner);
}

static int f_close(sluice_store *s) {
  fail_store *f = (fail_store *)s;
  sluice_store_close(f->inner);
  f->inner = NULL;
  return SLUICE_OK;
}

static int flag(const char *uri, const char *name, int *out) {
  int64_t v = 0;
  if (sluice_uri_int(uri, name, 0, &v) != SLUICE_OK || v > 1)
    return SLUICE_EINVAL;
  *out = (int)v;
  return SLUICE_OK;
}

static int f_open(const sluice_backend *b, const char *uri,
                  const sluice_store_config *cfg, sluice_store *s) {
  fail_store *f = (fail_store *)s;
  int64_t nth = 0, count = 0, max_keys = 0;
  const char *v;
  size_t len;
  char inner_uri[64], err[SLUICE_STORE_ERRLEN];
  int rc, code = SLUICE_EBACKEND, many = 0, run = 0;
  (void)b;
  f->methods = (sluice_store_methods){
      .iVersion = 1, .xClose = f_close, .xApply = f_apply, .xGet = f_get,
      .xDelete = f_delete, .xControl = f_control, .xCapabilities = f_caps};
  s->pMethods = &f->methods;
  if (sluice_uri_int(uri, "nth", 0, &nth) != SLUICE_OK ||
      sluice_uri_int(uri, "count", 0, &count) != SLUICE_OK ||
      sluice_uri_int(uri, "max_keys", 0, &max_keys) != SLUICE_OK ||
      flag(uri, "many", &many) != SLUICE_OK ||
      flag(uri, "run", &run) != SLUICE_OK)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0, "fail: bad number");
  if (sluice_uri_param(uri, "code", &v, &len) == SLUICE_OK &&
      !(code = fail_code_by_name(v, len)))
    return sluice_store_seterr(s, SLUICE_EINVAL, 0, "fail: unknown code");
  /* The version is the highest group of methods the table fills. */
  if (many) {
    f->methods.iVersion = 2;
    f->methods.xApplyMany = f_apply_many;
  }
  if (run) {
    f->methods.iVersion = 3;
    f->methods.xRun = f_run;
  }
  atomic_store(&f->nth, (long)nth);
  atomic_store(&f->count, (long)count);
  atomic_store(&f->code, code);
  snprintf(inner_uri, sizeof inner_uri, "max_keys=%lld", (long long)max_keys);
  rc = sluice_store_open(sluice_backend_find("mem"), inner_uri, cfg->alloc,
                         cfg->flags, &f->inner, err, sizeof err);
  if (rc != SLUICE_OK)
    return sluice_store_seterr(s, rc, 0, "fail: inner mem: %s", err);
  return SLUICE_OK;
}

static const char *const fail_params[] = {"nth",  "count", "code", "max_keys",
                                          "many", "run",   NULL};

const sluice_backend fail_store_backend = {
    SLUICE_BACKEND_CLASS_VERSION, (int)sizeof(fail_store), "fail", NULL,
    f_open, fail_params};

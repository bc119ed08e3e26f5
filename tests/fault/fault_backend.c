/* The fault-injecting backend (fault_backend.h): a mem store inside. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "fault_backend.h"

typedef struct fault_store {
  sluice_store base;
  sluice_store *inner;
  _Atomic long nth, count, calls, injected;
  _Atomic int code;
} fault_store;

int fault_code_by_name(const char *name, size_t len) {
  for (int c = -30901; c >= SLUICE_ERRNO_LAST; c--) {
    const char *n = sluice_err_name(c) + 7; /* past "SLUICE_" */
    if (strlen(n) == len && memcmp(n, name, len) == 0)
      return c;
  }
  return 0;
}

/* 1 when this call must fail (and counts it). */
static int should_fail(fault_store *f) {
  long n = atomic_fetch_add(&f->calls, 1) + 1;
  long nth = atomic_load(&f->nth), count = atomic_load(&f->count);
  if (nth <= 0 || n < nth || (count > 0 && n >= nth + count))
    return 0;
  atomic_fetch_add(&f->injected, 1);
  return 1;
}

static int fault_fail(fault_store *f) {
  int code = atomic_load(&f->code);
  sluice_store_seterr(&f->base, code, 4242, "fault: injected %s",
                      sluice_err_name(code));
  return code;
}

static int fault_apply(sluice_store *s, const sluice_op *op, int64_t now,
                       sluice_verdict *v) {
  fault_store *f = (fault_store *)s;
  int rc;
  if (should_fail(f))
    return fault_fail(f);
  rc = f->inner->pMethods->xApply(f->inner, op, now, v);
  if (rc != SLUICE_OK)
    sluice_store_seterr(s, rc, f->inner->backend_err, "%s",
                        f->inner->errstr);
  return rc;
}

static int fault_apply_many(sluice_store *s, int n, const sluice_op *ops,
                            int64_t now, sluice_verdict *vs, int *rcs) {
  fault_store *f = (fault_store *)s;
  const sluice_store_methods *m = f->inner->pMethods;
  if (should_fail(f))
    return fault_fail(f);
  if (m->iVersion >= 2 && m->xApplyMany)
    return m->xApplyMany(f->inner, n, ops, now, vs, rcs);
  for (int i = 0; i < n; i++)
    rcs[i] = m->xApply(f->inner, &ops[i], now, &vs[i]);
  return SLUICE_OK;
}

static int fault_get(sluice_store *s, const sluice_key *k, int64_t now,
                     sluice_state *out, int64_t *exp) {
  fault_store *f = (fault_store *)s;
  return f->inner->pMethods->xGet(f->inner, k, now, out, exp);
}

static int fault_delete(sluice_store *s, const sluice_key *k) {
  fault_store *f = (fault_store *)s;
  return f->inner->pMethods->xDelete(f->inner, k);
}

static int fault_control(sluice_store *s, int op, void *arg) {
  fault_store *f = (fault_store *)s;
  if (op == FAULT_CTL_PLAN) {
    const fault_plan *p = arg;
    if (!p)
      return SLUICE_EINVAL;
    atomic_store(&f->nth, 0); /* never half a plan: disarm first */
    atomic_store(&f->code, p->code);
    atomic_store(&f->count, p->count);
    atomic_store(&f->calls, 0);
    atomic_store(&f->nth, p->nth);
    return SLUICE_OK;
  }
  if (op == FAULT_CTL_STATS) {
    fault_stats *st = arg;
    if (!st)
      return SLUICE_EINVAL;
    st->calls = atomic_load(&f->calls);
    st->injected = atomic_load(&f->injected);
    return SLUICE_OK;
  }
  if (!f->inner->pMethods->xControl)
    return SLUICE_ENOTFOUND;
  return f->inner->pMethods->xControl(f->inner, op, arg);
}

static unsigned fault_caps(sluice_store *s) {
  fault_store *f = (fault_store *)s;
  return f->inner->pMethods->xCapabilities
             ? f->inner->pMethods->xCapabilities(f->inner)
             : 0;
}

static void inner_free(fault_store *f) {
  const sluice_backend *ib = f->inner->pBackend;
  if (f->inner->pMethods && f->inner->pMethods->xClose)
    f->inner->pMethods->xClose(f->inner);
  sluice_store_free(&f->base, f->inner, (size_t)ib->szStore);
  f->inner = NULL;
}

static int fault_close(sluice_store *s) {
  fault_store *f = (fault_store *)s;
  if (f->inner)
    inner_free(f);
  return SLUICE_OK;
}

static const sluice_store_methods fault_methods = {
    2,           fault_close,   fault_apply, fault_get,
    fault_delete, fault_control, fault_caps,  fault_apply_many};

static int fault_open(const sluice_backend *b, const char *uri,
                      const sluice_store_config *cfg, sluice_store *s) {
  fault_store *f = (fault_store *)s;
  const sluice_backend *ib = sluice_backend_find("mem");
  int64_t nth = 0, count = 0, max_keys = 0;
  const char *v;
  size_t len;
  char inner_uri[64];
  int rc, code = SLUICE_EBACKEND;
  (void)b;
  s->pMethods = &fault_methods;
  if (sluice_uri_int(uri, "nth", 0, &nth) != SLUICE_OK ||
      sluice_uri_int(uri, "count", 0, &count) != SLUICE_OK ||
      sluice_uri_int(uri, "max_keys", 0, &max_keys) != SLUICE_OK)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0, "fault: bad number");
  if (sluice_uri_param(uri, "code", &v, &len) == SLUICE_OK &&
      !(code = fault_code_by_name(v, len)))
    return sluice_store_seterr(s, SLUICE_EINVAL, 0, "fault: unknown code");
  atomic_store(&f->nth, (long)nth);
  atomic_store(&f->count, (long)count);
  atomic_store(&f->code, code);
  f->inner = sluice_store_malloc(s, (size_t)ib->szStore);
  if (!f->inner)
    return SLUICE_ENOMEM;
  memset(f->inner, 0, (size_t)ib->szStore);
  f->inner->pBackend = ib;
  f->inner->pAlloc = s->pAlloc;
  snprintf(inner_uri, sizeof inner_uri, "max_keys=%lld", (long long)max_keys);
  rc = ib->xOpen(ib, inner_uri, cfg, f->inner);
  if (rc != SLUICE_OK) {
    sluice_store_seterr(s, rc, 0, "fault: inner mem: %s", f->inner->errstr);
    inner_free(f);
    return rc;
  }
  return SLUICE_OK;
}

const sluice_backend fault_backend = {1, (int)sizeof(fault_store), "fault",
                                      NULL, fault_open};

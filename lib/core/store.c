#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program_int.h"
#include "store.h"

static void *libc_malloc(void *ud, size_t n) {
  (void)ud;
  return malloc(n ? n : 1);
}
static void *libc_realloc(void *ud, void *p, size_t o, size_t n) {
  (void)ud;
  (void)o;
  return realloc(p, n ? n : 1);
}
static void libc_free(void *ud, void *p, size_t n) {
  (void)ud;
  (void)n;
  free(p);
}
const sluice_allocator sluice__libc_allocator = {libc_malloc, libc_realloc,
                                                 libc_free, NULL};

/* A spin lock, not a mutex: it is held for one short formatting call, in
** process-private memory, and needs no initialisation in a store the core
** allocated zeroed. */
void sluice__store_errlock(sluice_store *s, int lock) {
  if (lock)
    while (__atomic_exchange_n(&s->errlock, 1, __ATOMIC_ACQUIRE))
      ;
  else
    __atomic_store_n(&s->errlock, 0, __ATOMIC_RELEASE);
}

int sluice_store_seterr(sluice_store *s, int err, int backend_err,
                        const char *fmt, ...) {
  va_list ap;
  if (!s)
    return err;
  sluice__store_errlock(s, 1);
  s->backend_err = backend_err;
  if (fmt) {
    va_start(ap, fmt);
    vsnprintf(s->errstr, sizeof s->errstr, fmt, ap);
    va_end(ap);
  } else {
    s->errstr[0] = '\0';
  }
  sluice__store_errlock(s, 0);
  return err;
}

void *sluice_store_malloc(sluice_store *s, size_t n) {
  const sluice_allocator *a = (s && s->pAlloc) ? s->pAlloc
                                                : &sluice__libc_allocator;
  return a->xMalloc(a->ud, n);
}

void sluice_store_free(sluice_store *s, void *p, size_t n) {
  const sluice_allocator *a = (s && s->pAlloc) ? s->pAlloc
                                                : &sluice__libc_allocator;
  if (p)
    a->xFree(a->ud, p, n);
}

int sluice__store_open(const sluice_backend *b, const char *uri,
                       const sluice_allocator *a, unsigned flags,
                       sluice_store **out, char *errbuf, size_t errlen) {
  sluice_store *s;
  sluice_store_config cfg;
  int rc;
  *out = NULL;
  if (errbuf && errlen)
    errbuf[0] = '\0';
  if (!b || b->iVersion < 1 || !b->xOpen ||
      b->szStore < (int)sizeof(sluice_store))
    return SLUICE_EVERSION;
  if (!a)
    a = &sluice__libc_allocator;
  /* "//..." is a URL (redis://, rediss://): the backend rewrites it to
  ** parameters and checks those itself. */
  if (b->iVersion >= 2 && b->azParams &&
      !(uri && uri[0] == '/' && uri[1] == '/')) {
    char msg[512];
    rc = sluice__uri_check(b->zName, uri ? uri : "", b->azParams, msg,
                           sizeof msg);
    if (rc != SLUICE_OK) {
      if (errbuf && errlen)
        snprintf(errbuf, errlen, "%s", msg);
      return rc;
    }
  }
  s = a->xMalloc(a->ud, (size_t)b->szStore);
  if (!s)
    return SLUICE_ENOMEM;
  memset(s, 0, (size_t)b->szStore);
  s->pBackend = b;
  s->pAlloc = a;
  memset(&cfg, 0, sizeof cfg);
  cfg.alloc = a;
  cfg.flags = flags;
  rc = b->xOpen(b, uri ? uri : "", &cfg, s);
  if (rc == SLUICE_OK && (!s->pMethods || s->pMethods->iVersion < 1 ||
                          !s->pMethods->xApply || !s->pMethods->xClose)) {
    rc = SLUICE_EVERSION;
    snprintf(s->errstr, sizeof s->errstr,
             "backend '%s' returned an incomplete method table", b->zName);
  }
  if (rc != SLUICE_OK) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "%s", s->errstr);
    if (s->pMethods && s->pMethods->xClose)
      s->pMethods->xClose(s);
    a->xFree(a->ud, s, (size_t)b->szStore);
    return rc < 0 ? rc : SLUICE_EBACKEND;
  }
  *out = s;
  return SLUICE_OK;
}

void sluice__store_close(sluice_store *s) {
  const sluice_allocator *a;
  size_t sz;
  if (!s)
    return;
  a = s->pAlloc;
  sz = (size_t)s->pBackend->szStore;
  if (s->pMethods && s->pMethods->xClose)
    s->pMethods->xClose(s);
  s->pMethods = NULL;
  a->xFree(a->ud, s, sz);
}

int sluice__store_apply(sluice_store *s, const sluice_op *op, int64_t now,
                        sluice_verdict *v) {
  int rc = sluice_op_validate(op);
  if (rc != SLUICE_OK)
    return rc;
  if (!v || now < 0)
    return SLUICE_EINVAL;
  rc = s->pMethods->xApply(s, op, now, v);
  /* A backend must not hand out positive codes: they would read as OK to a
  ** caller testing rc < 0. */
  return rc > 0 ? SLUICE_EBACKEND : rc;
}

/* Hand a v2 backend only the valid ops, in one batch, keeping each op's
** result in its own slot.  Returns SLUICE_ENOMEM when the compacted copy
** cannot be made (the caller then goes one op at a time). */
static int apply_many_valid(sluice_store *s, int n, const sluice_op *ops,
                            int64_t now, sluice_verdict *vs, int *rcs) {
  int i, k = 0, nv = 0, rc;
  sluice_op *o;
  sluice_verdict *v;
  int *r, *idx;
  size_t sz;
  for (i = 0; i < n; i++)
    nv += rcs[i] == SLUICE_OK;
  if (nv == 0)
    return SLUICE_OK;
  sz = (size_t)nv * (sizeof *o + sizeof *v + 2 * sizeof(int));
  o = sluice_store_malloc(s, sz);
  if (!o)
    return SLUICE_ENOMEM;
  v = (sluice_verdict *)(o + nv);
  r = (int *)(v + nv);
  idx = r + nv;
  for (i = 0; i < n; i++)
    if (rcs[i] == SLUICE_OK) {
      o[k] = ops[i];
      idx[k++] = i;
    }
  rc = s->pMethods->xApplyMany(s, nv, o, now, v, r);
  for (k = 0; k < nv; k++) {
    vs[idx[k]] = v[k];
    rcs[idx[k]] = r[k] > 0 ? SLUICE_EBACKEND : r[k];
  }
  sluice_store_free(s, o, sz);
  return rc > 0 ? SLUICE_EBACKEND : rc;
}

/* An op whose shape (algorithm, kind, parameters, amount, id: all that
** sluice__op_validate_shape() reads) is the previous op's has its result:
** a batch usually repeats one shape over many keys, and its parameter
** checks were an eighth of a batched decision's instructions. */
static int same_shape(const sluice_op *a, const sluice_op *b) {
  return a->algo == b->algo && a->kind == b->kind && a->nkeys == b->nkeys &&
         a->params == b->params && a->arg == b->arg && a->id == b->id;
}

int sluice__store_apply_many(sluice_store *s, int n, const sluice_op *ops,
                             int64_t now, sluice_verdict *vs, int *rcs) {
  int i, ok = 1, shape = SLUICE_EINVAL;
  if (n < 0 || (n > 0 && (!ops || !vs || !rcs)) || now < 0)
    return SLUICE_EINVAL;
  for (i = 0; i < n; i++) {
    if (i == 0 || !same_shape(&ops[i], &ops[i - 1]))
      shape = sluice__op_validate_shape(&ops[i]);
    rcs[i] = shape != SLUICE_OK ? shape : sluice__keys_check(&ops[i]);
    ok &= rcs[i] == SLUICE_OK;
  }
  if (s->pMethods->iVersion >= 2 && s->pMethods->xApplyMany) {
    if (ok) {
      int rc = s->pMethods->xApplyMany(s, n, ops, now, vs, rcs);
      /* Per-op codes too: a positive one would read as OK (rc < 0 tests). */
      for (i = 0; i < n; i++)
        if (rcs[i] > 0)
          rcs[i] = SLUICE_EBACKEND;
      return rc > 0 ? SLUICE_EBACKEND : rc;
    }
    /* Some ops are invalid: batch the others rather than lose batching. */
    i = apply_many_valid(s, n, ops, now, vs, rcs);
    if (i != SLUICE_ENOMEM)
      return i;
  }
  /* Version 1 fallback (or no memory for the compacted batch). */
  for (i = 0; i < n; i++)
    if (rcs[i] == SLUICE_OK) {
      rcs[i] = s->pMethods->xApply(s, &ops[i], now, &vs[i]);
      if (rcs[i] > 0)
        rcs[i] = SLUICE_EBACKEND;
    }
  return SLUICE_OK;
}

/* A store without xRun: one xApply per step, the guards and folds by the
** same sequencer code.  Not atomic (backend.h says what that costs). */
static int run_steps(sluice_store *s, const sluice_program *p, int64_t now,
                     sluice_program_result *r) {
  int i, rc;
  sluice__program_start(r, now);
  for (i = 0; i < p->nsteps; i++) {
    sluice_lease_params lp;
    sluice_op op;
    if (!sluice__program_guard(p, i, r)) {
      memset(&r->v[i], 0, sizeof r->v[i]);
      r->v[i].now_ns = now;
      continue;
    }
    sluice__program_op(p, i, r, &op, &lp);
    rc = s->pMethods->xApply(s, &op, now, &r->v[i]);
    if (rc != SLUICE_OK)
      return rc > 0 ? SLUICE_EBACKEND : rc;
    if (i == 0)
      r->now_ns = r->v[0].now_ns; /* an own-clock store's time */
    (void)sluice__program_fold(p, i, r);
  }
  return SLUICE_OK;
}

static int has_run(const sluice_store *s) {
  return s->pMethods->iVersion >= 3 && s->pMethods->xRun;
}

int sluice__store_run(sluice_store *s, const sluice_program *p, int64_t now,
                      sluice_program_result *res) {
  int rc = sluice_program_validate(p);
  if (rc != SLUICE_OK)
    return rc;
  if (!res || now < 0)
    return SLUICE_EINVAL;
  rc = has_run(s) ? s->pMethods->xRun(s, p, now, res)
                  : run_steps(s, p, now, res);
  return rc > 0 ? SLUICE_EBACKEND : rc;
}

int sluice__store_run_many(sluice_store *s, int n, const sluice_program *ps,
                           int64_t now, sluice_program_result *res, int *rcs) {
  int i, ok = 1;
  if (n < 0 || (n > 0 && (!ps || !res || !rcs)) || now < 0)
    return SLUICE_EINVAL;
  for (i = 0; i < n; i++) {
    rcs[i] = sluice_program_validate(&ps[i]);
    ok &= rcs[i] == SLUICE_OK;
  }
  if (ok && n > 0 && s->pMethods->iVersion >= 3 && s->pMethods->xRunMany) {
    int rc = s->pMethods->xRunMany(s, n, ps, now, res, rcs);
    for (i = 0; i < n; i++)
      if (rcs[i] > 0)
        rcs[i] = SLUICE_EBACKEND;
    return rc > 0 ? SLUICE_EBACKEND : rc;
  }
  /* Invalid programs keep their own codes; the valid ones run one by one. */
  for (i = 0; i < n; i++)
    if (rcs[i] == SLUICE_OK) {
      rcs[i] = has_run(s) ? s->pMethods->xRun(s, &ps[i], now, &res[i])
                          : run_steps(s, &ps[i], now, &res[i]);
      if (rcs[i] > 0)
        rcs[i] = SLUICE_EBACKEND;
    }
  return SLUICE_OK;
}

int sluice__store_get(sluice_store *s, const sluice_key *k, int64_t now,
                      sluice_state *out, int64_t *exp) {
  if (!k || !k->data || k->len == 0 || k->len > SLUICE_KEY_MAX)
    return SLUICE_EKEY;
  if (!out)
    return SLUICE_EINVAL;
  if (!s->pMethods->xGet)
    return SLUICE_ENOTSUP;
  return s->pMethods->xGet(s, k, now, out, exp);
}

int sluice__store_delete(sluice_store *s, const sluice_key *k) {
  if (!k || !k->data || k->len == 0 || k->len > SLUICE_KEY_MAX)
    return SLUICE_EKEY;
  if (!s->pMethods->xDelete)
    return SLUICE_ENOTSUP;
  return s->pMethods->xDelete(s, k);
}

int sluice__store_control(sluice_store *s, int op, void *arg) {
  if (!s->pMethods->xControl)
    return SLUICE_ENOTFOUND;
  return s->pMethods->xControl(s, op, arg);
}

unsigned sluice__store_caps(sluice_store *s) {
  return s->pMethods->xCapabilities ? s->pMethods->xCapabilities(s) : 0;
}

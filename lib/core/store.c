#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
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
** process-private memory, and needs no initialisation in a header the core
** allocated zeroed. */
static void errlock(sluice_store_core *c, int lock) {
  if (lock)
    while (__atomic_exchange_n(&c->errlock, 1, __ATOMIC_ACQUIRE))
      ;
  else
    __atomic_store_n(&c->errlock, 0, __ATOMIC_RELEASE);
}

/* A store the core opened and has not closed.  A freed store cannot be
** told apart (that is a use after free); a closed one whose memory lives
** on, a struct the core never opened, and a backend's half-open store can. */
static int is_open(const sluice_store *s) {
  return s && s->pCore && s->pMethods;
}

int sluice_store_seterr(sluice_store *s, int err, int backend_err,
                        const char *fmt, ...) {
  sluice_store_core *c;
  va_list ap;
  if (!s || !(c = s->pCore))
    return err;
  errlock(c, 1);
  c->backend_err = backend_err;
  if (fmt) {
    va_start(ap, fmt);
    vsnprintf(c->errstr, sizeof c->errstr, fmt, ap);
    va_end(ap);
  } else {
    c->errstr[0] = '\0';
  }
  errlock(c, 0);
  return err;
}

/* Each thread reads its own snapshot, taken under the error lock, so that
** a detail another thread is writing never shows up half-written. */
const char *sluice_store_errmsg(sluice_store *s) {
  static _Thread_local char snapshot[SLUICE_STORE_ERRLEN];
  sluice_store_core *c;
  if (!s || !(c = s->pCore))
    return "";
  errlock(c, 1);
  memcpy(snapshot, c->errstr, sizeof snapshot);
  errlock(c, 0);
  snapshot[sizeof snapshot - 1] = '\0';
  return snapshot;
}

int sluice_store_errcode(sluice_store *s) {
  sluice_store_core *c;
  int e;
  if (!s || !(c = s->pCore))
    return 0;
  errlock(c, 1);
  e = c->backend_err;
  errlock(c, 0);
  return e;
}

static const sluice_allocator *alloc_of(const sluice_store *s) {
  return (s && s->pCore) ? s->pCore->alloc : &sluice__libc_allocator;
}

void *sluice__store_malloc(sluice_store *s, size_t n) {
  const sluice_allocator *a = alloc_of(s);
  return a->xMalloc(a->ud, n);
}

void sluice__store_free(sluice_store *s, void *p, size_t n) {
  const sluice_allocator *a = alloc_of(s);
  if (p)
    a->xFree(a->ud, p, n);
}

/* The header is padded to a cache line so that the subclass starts where
** the allocator's own alignment would have put it, and better. */
#define HDR_SIZE                                                               \
  ((sizeof(sluice_store_core) + 63) & ~(size_t)63)

static sluice_store *store_of(sluice_store_core *c) {
  return (sluice_store *)(void *)((char *)c + HDR_SIZE);
}

static void block_free(sluice_store_core *c) {
  const sluice_allocator *a = c->alloc;
  a->xFree(a->ud, c, c->size);
}

static int open_fail(char *errbuf, size_t errlen, int rc, const char *fmt,
                     const char *arg) {
  if (errbuf && errlen)
    snprintf(errbuf, errlen, fmt, arg);
  return rc;
}

int sluice_store_open(const sluice_backend *b, const char *uri,
                      const sluice_allocator *a, unsigned flags,
                      sluice_store **out, char *errbuf, size_t errlen) {
  sluice_store_core *c;
  sluice_store *s;
  sluice_store_config cfg;
  size_t ulen, size;
  char *ucopy;
  int rc;
  if (errbuf && errlen)
    errbuf[0] = '\0';
  if (!out)
    return open_fail(errbuf, errlen, SLUICE_EINVAL, "%s", "out is NULL");
  *out = NULL;
  if (!b)
    return open_fail(errbuf, errlen, SLUICE_EINVAL, "%s", "backend is NULL");
  if (b->iVersion != SLUICE_BACKEND_VERSION || !b->xOpen ||
      b->szStore < (int)sizeof(sluice_store))
    return open_fail(errbuf, errlen, SLUICE_EVERSION,
                     "backend '%s' was built for another sluice/backend.h "
                     "(class iVersion not SLUICE_BACKEND_VERSION, no xOpen "
                     "or szStore too small): rebuild it against this one",
                     b->zName ? b->zName : "?");
  if (flags & ~(SLUICE_OPEN_CREATE | SLUICE_OPEN_READONLY |
                SLUICE_OPEN_TESTCLOCK))
    return open_fail(errbuf, errlen, SLUICE_EINVAL, "%s",
                     "unknown SLUICE_OPEN_* flag");
  if (!a)
    a = &sluice__libc_allocator;
  if (!uri)
    uri = "";
  /* "//..." is a URL (redis://, rediss://): the backend rewrites it to
  ** parameters and checks those itself. */
  if (b->azParams && !(uri[0] == '/' && uri[1] == '/')) {
    char msg[512];
    rc = sluice__uri_check(b->zName, uri, b->azParams, msg, sizeof msg);
    if (rc != SLUICE_OK)
      return open_fail(errbuf, errlen, rc, "%s", msg);
  }
  ulen = strlen(uri);
  size = HDR_SIZE + (size_t)b->szStore + ulen + 1;
  c = a->xMalloc(a->ud, size);
  if (!c)
    return SLUICE_ENOMEM;
  memset(c, 0, size);
  c->alloc = a;
  c->size = size;
  s = store_of(c);
  s->pBackend = b;
  s->pCore = c;
  /* The backend may keep the string until xClose: it gets the copy. */
  ucopy = (char *)s + b->szStore;
  memcpy(ucopy, uri, ulen + 1);
  memset(&cfg, 0, sizeof cfg);
  cfg.alloc = a;
  cfg.flags = flags;
  rc = b->xOpen(b, ucopy, &cfg, s);
  if (rc == SLUICE_OK &&
      (!s->pMethods || s->pMethods->iVersion != SLUICE_BACKEND_VERSION ||
       !s->pMethods->xRun || !s->pMethods->xClose)) {
    rc = SLUICE_EVERSION;
    sluice_store_seterr(s, rc, 0,
                        "backend '%s' returned an incomplete method table",
                        b->zName);
  }
  if (rc != SLUICE_OK) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "%s", c->errstr);
    if (s->pMethods && s->pMethods->xClose)
      s->pMethods->xClose(s);
    block_free(c);
    return rc < 0 ? rc : SLUICE_EBACKEND;
  }
  *out = s;
  return SLUICE_OK;
}

void sluice_store_close(sluice_store *s) {
  sluice_store_core *c;
  if (!s || !(c = s->pCore))
    return;
  if (s->pMethods && s->pMethods->xClose)
    s->pMethods->xClose(s);
  /* As sqlite3OsClose: a store is never half-closed.  Cleared before the
  ** block goes back, for an allocator that keeps it. */
  s->pMethods = NULL;
  s->pCore = NULL;
  block_free(c);
}

/* Some programs are invalid: hand the backend only the valid ones, in one
** batch, each result going back to its own slot.  Without memory for the
** compacted copy they go one by one. */
static int run_valid(sluice_store *s, int n, const sluice_program *ps,
                     int64_t now, sluice_program_result *res, int *rcs) {
  int i, k = 0, nv = 0, rc = SLUICE_OK;
  sluice_program *p;
  sluice_program_result *r;
  int *c, *idx;
  size_t sz;
  for (i = 0; i < n; i++)
    nv += rcs[i] == SLUICE_OK;
  if (nv == 0)
    return SLUICE_OK;
  sz = (size_t)nv * (sizeof *p + sizeof *r + 2 * sizeof(int));
  r = sluice__store_malloc(s, sz);
  if (!r) {
    for (i = 0; i < n; i++)
      if (rcs[i] == SLUICE_OK &&
          (rc = s->pMethods->xRun(s, 1, &ps[i], now, &res[i], &rcs[i])) !=
              SLUICE_OK)
        rcs[i] = rc;
    return SLUICE_OK;
  }
  p = (sluice_program *)(r + nv);
  c = (int *)(p + nv);
  idx = c + nv;
  for (i = 0; i < n; i++)
    if (rcs[i] == SLUICE_OK) {
      p[k] = ps[i];
      idx[k++] = i;
    }
  rc = s->pMethods->xRun(s, nv, p, now, r, c);
  for (k = 0; k < nv; k++) {
    res[idx[k]] = r[k];
    rcs[idx[k]] = rc != SLUICE_OK ? rc : c[k];
  }
  sluice__store_free(s, r, sz);
  return rc;
}

/* Does q have p's shape: the same steps (the same array, so the same
** contents for the call), counts and class, and a key array? */
static int same_shape(const sluice_program *q, const sluice_program *p) {
  return q->steps == p->steps && q->nsteps == p->nsteps &&
         q->nkeys == p->nkeys && q->record_class == p->record_class &&
         q->keys != NULL;
}

/* n programs: validated one by one, the valid ones sent in one call. */
__attribute__((noinline)) static int
run_many(sluice_store *s, int n, const sluice_program *ps, int64_t now,
         sluice_program_result *res, int *rcs) {
  int i, ok = 1, rc;
  for (i = 0; i < n; i++) {
    /* A batch repeats one shape over many keys: a program with the same
    ** steps, counts and class as the valid one before it needs only its
    ** keys checked. */
    rcs[i] = i > 0 && rcs[i - 1] == SLUICE_OK && same_shape(&ps[i], &ps[i - 1])
                 ? sluice__program_keys_check(&ps[i])
                 : sluice_program_validate(&ps[i]);
    ok &= rcs[i] == SLUICE_OK;
  }
  rc = ok ? s->pMethods->xRun(s, n, ps, now, res, rcs)
          : run_valid(s, n, ps, now, res, rcs);
  /* A backend must not hand out positive codes: they would read as OK to
  ** a caller testing rc < 0. */
  for (i = 0; i < n; i++)
    if (rcs[i] > 0)
      rcs[i] = SLUICE_EBACKEND;
  return rc > 0 ? SLUICE_EBACKEND : rc;
}

int sluice_store_run(sluice_store *s, int n, const sluice_program *ps,
                     int64_t now, sluice_program_result *res, int *rcs) {
  if (!is_open(s) || n < 1 || !ps || !res || !rcs || now < 0)
    return SLUICE_EINVAL;
  if (n > 1)
    return run_many(s, n, ps, now, res, rcs);
  return sluice__store_run1(s, ps, sluice__program_plain(ps), now, res, rcs);
}

int sluice_store_get(sluice_store *s, const sluice_key *k, int64_t now,
                     sluice_state *out, int64_t *exp) {
  if (!is_open(s))
    return SLUICE_EINVAL;
  if (!k || !k->data || k->len == 0 || k->len > SLUICE_KEY_MAX)
    return SLUICE_EKEY;
  if (!out)
    return SLUICE_EINVAL;
  if (!s->pMethods->xGet)
    return SLUICE_ENOTSUP;
  return s->pMethods->xGet(s, k, now, out, exp);
}

int sluice_store_delete(sluice_store *s, const sluice_key *k) {
  if (!is_open(s))
    return SLUICE_EINVAL;
  if (!k || !k->data || k->len == 0 || k->len > SLUICE_KEY_MAX)
    return SLUICE_EKEY;
  if (!s->pMethods->xDelete)
    return SLUICE_ENOTSUP;
  return s->pMethods->xDelete(s, k);
}

int sluice_store_control(sluice_store *s, int op, void *arg) {
  if (!is_open(s))
    return SLUICE_EINVAL;
  if (!s->pMethods->xControl)
    return SLUICE_ENOTFOUND;
  return s->pMethods->xControl(s, op, arg);
}

unsigned sluice_store_capabilities(sluice_store *s) {
  if (!is_open(s))
    return 0;
  return s->pMethods->xCapabilities ? s->pMethods->xCapabilities(s) : 0;
}

/* lazy_store: see lazy_store.h. */
#include "lazy_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define BACKOFF_MIN_NS INT64_C(100000000)    /* 100 ms */
#define BACKOFF_MAX_NS INT64_C(30000000000)  /* 30 s */

typedef struct lazy_store {
  sluice_store base;
  const char *uri;
  pthread_mutex_t mu;
  sluice_limiter *_Atomic real; /* set once, under mu */
  int64_t retry_at_ns, backoff_ns;
} lazy_store;

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The real store's limiter, opening it when the backoff allows. */
static sluice_limiter *real_of(lazy_store *s) {
  sluice_limiter *lim = atomic_load(&s->real);
  sluice_limiter_options o;
  char err[128] = "";
  int rc;
  if (lim)
    return lim;
  pthread_mutex_lock(&s->mu);
  lim = atomic_load(&s->real);
  if (!lim && mono_ns() >= s->retry_at_ns) {
    memset(&o, 0, sizeof o);
    o.store = s->uri;
    o.flags = SLUICE_OPEN_CREATE;
    rc = sluice_limiter_open(&o, &lim, err, sizeof err);
    if (rc == SLUICE_OK) {
      atomic_store(&s->real, lim);
    } else {
      lim = NULL;
      s->backoff_ns = s->backoff_ns ? s->backoff_ns * 2 : BACKOFF_MIN_NS;
      if (s->backoff_ns > BACKOFF_MAX_NS)
        s->backoff_ns = BACKOFF_MAX_NS;
      s->retry_at_ns = mono_ns() + s->backoff_ns;
      sluice_store_seterr(&s->base, rc, 0, "store not open yet: %s",
                          err[0] ? err : sluice_strerror(rc));
    }
  }
  pthread_mutex_unlock(&s->mu);
  return lim;
}

static int lazy_run(sluice_store *st, int n, const sluice_program *ps,
                    int64_t now_ns, sluice_program_result *res, int *rcs) {
  sluice_limiter *lim = real_of((lazy_store *)st);
  return lim ? sluice_limiter_decide(lim, n, ps, now_ns, res, rcs)
             : SLUICE_EUNAVAIL;
}

static int lazy_get(sluice_store *st, const sluice_key *k, int64_t now_ns,
                    sluice_state *out, int64_t *exp) {
  sluice_limiter *lim = real_of((lazy_store *)st);
  (void)now_ns;
  return lim ? sluice_limiter_get(lim, k->data, k->len, out, exp)
             : SLUICE_EUNAVAIL;
}

static int lazy_delete(sluice_store *st, const sluice_key *k) {
  sluice_limiter *lim = real_of((lazy_store *)st);
  return lim ? sluice_limiter_delete(lim, k->data, k->len) : SLUICE_EUNAVAIL;
}

static int lazy_control(sluice_store *st, int op, void *arg) {
  sluice_limiter *lim = real_of((lazy_store *)st);
  return lim ? sluice_limiter_control(lim, op, arg) : SLUICE_EUNAVAIL;
}

static unsigned lazy_caps(sluice_store *st) {
  sluice_limiter *lim = atomic_load(&((lazy_store *)st)->real);
  return SLUICE_CAP_THREADSAFE | (lim ? sluice_limiter_capabilities(lim) : 0);
}

static int lazy_close(sluice_store *st) {
  lazy_store *s = (lazy_store *)st;
  sluice_limiter_close(atomic_load(&s->real));
  pthread_mutex_destroy(&s->mu);
  return SLUICE_OK;
}

static const sluice_store_methods lazy_methods = {
    SLUICE_BACKEND_VERSION, lazy_close, lazy_run, lazy_get, lazy_delete,
    lazy_control, lazy_caps};

static int lazy_open(const sluice_backend *b, const char *uri,
                     const sluice_store_config *cfg, sluice_store *st) {
  lazy_store *s = (lazy_store *)st;
  (void)uri;
  (void)cfg;
  s->uri = b->pAppData;
  if (pthread_mutex_init(&s->mu, NULL) != 0)
    return SLUICE_ENOMEM;
  st->pMethods = &lazy_methods;
  real_of(s); /* the first try now: most starts find the store up */
  return SLUICE_OK;
}

void lazy_store_backend(sluice_backend *out, const char *real_uri) {
  memset(out, 0, sizeof *out);
  out->iVersion = SLUICE_BACKEND_VERSION;
  out->szStore = (int)sizeof(lazy_store);
  out->zName = "lazy";
  out->pAppData = (void *)(uintptr_t)real_uri;
  out->xOpen = lazy_open;
}

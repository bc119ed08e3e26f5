/*
** Threads over the Redis store's pool of lanes, as a plain program (no
** Criterion) so that it also runs under TSan (scripts/ci-hardening.sh):
** 16 threads take from one bucket of 20 over pool=4, on plain TCP and,
** when the harness runs with --tls, over TLS; a 17th thread reads the
** stats and a key's node meanwhile.  Exactly 20 are admitted, none fails,
** and more than one connection carried them.  Then 16 threads make policy
** decisions on the same store (each a decision in two halves, the store
** carrying the bytes: the split lane's routing under its mutex, the lanes'
** connections): every one admitted (the key's burst is larger), none
** degraded.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice.h"
#include <sluice/sluice_redis.h>

#define T 16
#define PER 10

static const sluice_gcra_params still = {1, INT64_C(86400000000000), 20};
static char key[96];
static volatile int stop;

typedef struct arg {
  sluice_limiter *l;
  sluice_policy *p;
  int admitted, errors;
} arg;

static void *decider(void *p) {
  arg *a = p;
  sluice_request q;
  sluice_decision d;
  int i;
  memset(&q, 0, sizeof q);
  q.tenant_id = key;
  q.api_key_id = "pool-key";
  q.tier = "sandbox";
  q.method = "GET";
  q.route = "/v1/ledgers/l1/entries";
  for (i = 0; i < PER; i++) {
    if (sluice_policy_decide(a->p, 1, &q, &d, NULL) != SLUICE_OK ||
        d.store_error || (d.flags & SLUICE_DECISION_DEGRADED))
      a->errors++;
    else
      a->admitted += d.allowed;
  }
  return NULL;
}

/* 16 threads deciding through the policy on the store: T * PER admitted. */
static int decide_threads(const char *what, sluice_limiter *l) {
  sluice_policy_options po;
  sluice_policy *pol;
  pthread_t th[T];
  arg a[T];
  int i, rc, total = 0, errors = 0;
  memset(&po, 0, sizeof po);
  po.limiter = l;
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 7);
  rc = sluice_policy_open(&po, &pol);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "%s: policy: %s\n", what, sluice_err_name(rc));
    return 1;
  }
  for (i = 0; i < T; i++) {
    a[i] = (arg){l, pol, 0, 0};
    pthread_create(&th[i], NULL, decider, &a[i]);
  }
  for (i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    total += a[i].admitted;
    errors += a[i].errors;
  }
  printf("%s: policy: %d admitted, %d errors\n", what, total, errors);
  if (errors)
    fprintf(stderr, "%s: %s\n", what, sluice_limiter_errmsg(l));
  sluice_policy_close(pol);
  return total == T * PER && errors == 0 ? 0 : 1;
}

static void *taker(void *p) {
  arg *a = p;
  sluice_verdict v;
  int i;
  for (i = 0; i < PER; i++) {
    if (sluice_limiter_take(a->l, key, strlen(key), &still, 1, &v) !=
        SLUICE_OK)
      a->errors++;
    else
      a->admitted += v.allowed;
  }
  return NULL;
}

static void *watcher(void *p) {
  sluice_limiter *l = p;
  sluice_redis_stats st;
  sluice_redis_node_of q;
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    memset(&q, 0, sizeof q);
    q.key = key;
    q.keylen = strlen(key);
    (void)sluice_limiter_control(l, SLUICE_CTL_REDIS_STATS, &st);
    (void)sluice_limiter_control(l, SLUICE_CTL_REDIS_NODE_OF, &q);
  }
  return NULL;
}

static int run(const char *what, const char *store) {
  sluice_limiter_options o;
  sluice_limiter *l;
  sluice_redis_stats st;
  pthread_t th[T], w;
  arg a[T];
  char err[256];
  int i, rc, total = 0, errors = 0;
  memset(&o, 0, sizeof o);
  o.store = store;
  rc = sluice_limiter_open(&o, &l, err, sizeof err);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "%s: open: %s (%s)\n", what, sluice_err_name(rc), err);
    return 1;
  }
  snprintf(key, sizeof key, "{t:pool-%ld-%s}", (long)time(NULL), what);
  stop = 0;
  pthread_create(&w, NULL, watcher, l);
  for (i = 0; i < T; i++) {
    a[i] = (arg){l, NULL, 0, 0};
    pthread_create(&th[i], NULL, taker, &a[i]);
  }
  for (i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    total += a[i].admitted;
    errors += a[i].errors;
  }
  /* The policy's decisions, the watcher still reading the stats. */
  errors += decide_threads(what, l);
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  pthread_join(w, NULL);
  sluice_limiter_control(l, SLUICE_CTL_REDIS_STATS, &st);
  printf("%s: %d admitted, %d errors, %llu connections, pool %d\n", what,
         total, errors, (unsigned long long)st.connects, st.pool);
  rc = total == 20 && errors == 0 && st.connects >= 2 && st.pool == 4 ? 0 : 1;
  if (errors)
    fprintf(stderr, "%s: %s\n", what, sluice_limiter_errmsg(l));
  sluice_limiter_close(l);
  return rc;
}

int main(void) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *tport = getenv("SLUICE_REDIS_TLS_PORT");
  const char *d = getenv("SLUICE_REDIS_TLS_DIR");
  char store[1024];
  int fails = 0;
  if (!nodes) {
    printf("SKIP: run through tests/redis/harness.py\n");
    return 77;
  }
  snprintf(store, sizeof store,
           "redis:nodes=%s;timeout_ms=5000;connect_timeout_ms=5000;pool=4",
           nodes);
  fails += run("plain", store);
  if (tport && d) {
    snprintf(store, sizeof store,
             "redis:nodes=127.0.0.1:%s;timeout_ms=5000;"
             "connect_timeout_ms=5000;pool=4;tls=1;tls_ca=%s/ca.crt;"
             "tls_cert=%s/client.crt;tls_key=%s/client.key",
             tport, d, d, d);
    fails += run("tls", store);
  }
  return fails ? 1 : 0;
}

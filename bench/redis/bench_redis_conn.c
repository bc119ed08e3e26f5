/*
** The Redis store's connections, measured against one local server the
** harness starts with a TLS port (harness.py --mode single --tls):
**
**  1. decisions per second with 1, 4 and 16 threads of one process on one
**     store, with one connection (pool=1: how every store worked before
**     the pool) and with the default pool of 8;
**  2. the cost of TLS per decision: single decisions on the plain port and
**     on the TLS port of the same server, interleaved;
**  3. the time a store opened while Redis was down takes to decide again
**     once Redis answers, for two reconnect backoff ceilings.
**
** SLUICE_BENCH_SCALE=<percent> shrinks the runs (default 100).
*/
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"

extern char **environ;

#define ROUNDS 5
#define MAXT 16

static const sluice_gcra_params big = {1000000, 1000000000, 1000000};
static long g_scale = 100;
static char g_tag[64];

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static sluice_limiter *open_or_die(const char *store) {
  sluice_limiter_options o;
  sluice_limiter *l;
  char err[256];
  int rc;
  memset(&o, 0, sizeof o);
  o.store = store;
  rc = sluice_limiter_open2(&o, &l, err, sizeof err);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "bench: open %s: %s (%s)\n", store, sluice_err_name(rc),
            err);
    exit(1);
  }
  return l;
}

typedef struct worker {
  sluice_limiter *l;
  int id;
  long n;
  int errors;
  pthread_t th;
} worker;

/* n single decisions on this thread's own 1,000 keys (one tenant tag per
** thread: in a cluster they would spread; here one server serves all). */
static void *work(void *p) {
  worker *w = p;
  char key[96];
  sluice_verdict v;
  long i;
  for (i = 0; i < w->n; i++) {
    int len = snprintf(key, sizeof key, "%s%d:k%ld", g_tag, w->id, i % 1000);
    if (sluice_limiter_take(w->l, key, (size_t)len, &big, 1, &v) !=
        SLUICE_OK)
      w->errors++;
  }
  return NULL;
}

/* Decisions per second of nt threads sharing one store. */
static double run_threads(sluice_limiter *l, int nt, long per_thread) {
  worker w[MAXT];
  int64_t t0, t1;
  int i, errors = 0;
  t0 = now_ns();
  for (i = 0; i < nt; i++) {
    w[i] = (worker){l, i, per_thread, 0, 0};
    pthread_create(&w[i].th, NULL, work, &w[i]);
  }
  for (i = 0; i < nt; i++) {
    pthread_join(w[i].th, NULL);
    errors += w[i].errors;
  }
  t1 = now_ns();
  if (errors) {
    fprintf(stderr, "bench: %d errors: %s\n", errors,
            sluice_limiter_errmsg(l));
    exit(1);
  }
  return (double)nt * (double)per_thread * 1e9 / (double)(t1 - t0);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

/* Ratios and recovery times, printed last in the "ratios" section that
** scripts/bench-all.sh copies into its summary. */
static char g_notes[2048];
static size_t g_nlen;
#define NOTE(...)                                                              \
  (g_nlen += (size_t)snprintf(g_notes + g_nlen, sizeof g_notes - g_nlen,       \
                              __VA_ARGS__))

static void row(const char *name, double ns) {
  printf("  %-32s %10.0f ns/decision %10.0f /s\n", name, ns, 1e9 / ns);
}

static void bench_threads(const char *nodes) {
  static const int threads[] = {1, 4, 16};
  static const int pools[] = {1, 8};
  double r[2][3][ROUNDS];
  char store[512];
  sluice_limiter *l[2];
  long per = 20000 * g_scale / 100;
  int p, t, k;
  for (p = 0; p < 2; p++) {
    snprintf(store, sizeof store, "redis:nodes=%s;timeout_ms=2000;pool=%d",
             nodes, pools[p]);
    l[p] = open_or_die(store);
    run_threads(l[p], 16, per / 20); /* connect every lane, warm up */
  }
  /* Interleaved, so that load changes on the machine hit both alike. */
  for (k = 0; k < ROUNDS; k++)
    for (t = 0; t < 3; t++)
      for (p = 0; p < 2; p++)
        r[p][t][k] = run_threads(l[p], threads[t], per / threads[t]);
  printf("threads sharing one store:\n");
  for (t = 0; t < 3; t++) {
    double a = median(r[0][t], ROUNDS), b = median(r[1][t], ROUNDS);
    char name[64];
    for (p = 0; p < 2; p++) {
      snprintf(name, sizeof name, "%d thread%s, pool=%d", threads[t],
               threads[t] > 1 ? "s" : "", pools[p]);
      row(name, 1e9 / (p ? b : a));
    }
    NOTE("  %2d threads: pool=8 %.0f decisions/s, pool=1 (one connection) "
         "%.0f: %.2fx\n",
         threads[t], b, a, b / a);
  }
  for (p = 0; p < 2; p++)
    sluice_limiter_close(l[p]);
}

static void bench_tls(const char *nodes, const char *tls_port,
                      const char *dir) {
  char store[1024];
  sluice_limiter *plain, *tls;
  double a[ROUNDS], b[ROUNDS];
  long n = 20000 * g_scale / 100;
  int k;
  snprintf(store, sizeof store, "redis:nodes=%s;timeout_ms=2000;pool=1",
           nodes);
  plain = open_or_die(store);
  snprintf(store, sizeof store,
           "redis:nodes=127.0.0.1:%s;timeout_ms=2000;connect_timeout_ms=2000;"
           "pool=1;tls=1;tls_ca=%s/ca.crt;tls_cert=%s/client.crt;"
           "tls_key=%s/client.key",
           tls_port, dir, dir, dir);
  tls = open_or_die(store);
  run_threads(plain, 1, n / 10);
  run_threads(tls, 1, n / 10);
  for (k = 0; k < ROUNDS; k++) {
    a[k] = 1e9 / run_threads(plain, 1, n);
    b[k] = 1e9 / run_threads(tls, 1, n);
  }
  printf("TLS against plain TCP, one thread:\n");
  row("plain TCP, single decision", median(a, ROUNDS));
  row("TLS, single decision", median(b, ROUNDS));
  NOTE("  TLS costs %+.0f ns per decision (%.2fx plain TCP)\n",
       median(b, ROUNDS) - median(a, ROUNDS),
       median(b, ROUNDS) / median(a, ROUNDS));
  sluice_limiter_close(plain);
  sluice_limiter_close(tls);
}

static pid_t start_redis(int port, const char *dir) {
  char p[16];
  char *argv[] = {"redis-server", "--port", p, "--bind", "127.0.0.1",
                  "--save", "", "--appendonly", "no", "--dir", (char *)dir,
                  "--protected-mode", "no", "--logfile", "/dev/null", NULL};
  pid_t pid;
  snprintf(p, sizeof p, "%d", port);
  if (posix_spawnp(&pid, "redis-server", NULL, NULL, argv, environ) != 0) {
    fprintf(stderr, "bench: cannot start redis-server\n");
    exit(1);
  }
  return pid;
}

static int pings(int port) {
  struct timeval tv = {0, 2000};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  redisReply *r;
  int ok = 0;
  if (c && !c->err) {
    r = redisCommand(c, "PING");
    ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
      freeReplyObject(r);
  }
  if (c)
    redisFree(c);
  return ok;
}

/* A store opened while Redis is down, deciding every millisecond: how long
** after Redis first answers a PING does a decision succeed again? */
static double recovery_ms(int port, const char *dir, int backoff_max_ms) {
  char store[256], key[96];
  sluice_limiter *l;
  sluice_verdict v;
  int64_t t_ready = 0, t_ok = 0, t0, down_ms;
  pid_t pid;
  snprintf(store, sizeof store,
           "redis:nodes=127.0.0.1:%d;timeout_ms=2000;connect_timeout_ms=200;"
           "backoff_max_ms=%d",
           port, backoff_max_ms);
  l = open_or_die(store);
  snprintf(key, sizeof key, "%srecover", g_tag);
  /* Down long enough for the backoff to reach its ceiling, plus a random
  ** part of it: Redis then starts at a random point of the retry cycle. */
  t0 = now_ns();
  down_ms = 2 * backoff_max_ms + 200 + rand() % backoff_max_ms;
  while (now_ns() - t0 < down_ms * 1000000) {
    (void)sluice_limiter_take(l, key, strlen(key), &big, 1, &v);
    usleep(1000);
  }
  pid = start_redis(port, dir);
  for (;;) {
    int rc = sluice_limiter_take(l, key, strlen(key), &big, 1, &v);
    int64_t t = now_ns();
    if (!t_ready && pings(port))
      t_ready = now_ns();
    if (rc == SLUICE_OK && t_ready) {
      t_ok = t;
      break;
    }
    if (t - t0 > (int64_t)60 * 1000000000) {
      fprintf(stderr, "bench: no recovery in 60 s\n");
      exit(1);
    }
    usleep(1000);
  }
  sluice_limiter_close(l);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return t_ok > t_ready ? (double)(t_ok - t_ready) / 1e6 : 0.0;
}

static void bench_recovery(int port, const char *tmp) {
  static const int ceilings[] = {1000, 100};
  char dir[512];
  int c, k;
  snprintf(dir, sizeof dir, "%s/recovery", tmp);
  mkdir(dir, 0700);
  for (c = 0; c < 2; c++) {
    NOTE("  recovery, backoff_max_ms=%d: ms from Redis's first PONG to the "
         "first decision:",
         ceilings[c]);
    double v[ROUNDS], sum = 0;
    for (k = 0; k < ROUNDS; k++) {
      v[k] = recovery_ms(port, dir, ceilings[c]);
      sum += v[k];
    }
    qsort(v, ROUNDS, sizeof v[0], cmp_d);
    NOTE(" mean %.0f, min %.0f, max %.0f (%d runs)\n", sum / ROUNDS, v[0],
         v[ROUNDS - 1], ROUNDS);
  }
}

int main(void) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *tls_port = getenv("SLUICE_REDIS_TLS_PORT");
  const char *tls_dir = getenv("SLUICE_REDIS_TLS_DIR");
  const char *spare = getenv("SLUICE_REDIS_SPARE_PORT");
  const char *tmp = getenv("SLUICE_REDIS_TMP");
  const char *sc = getenv("SLUICE_BENCH_SCALE");
  if (!nodes || !tls_port || !tls_dir || !spare || !tmp) {
    printf("SKIP: run through tests/redis/harness.py --mode single --tls\n");
    return 77;
  }
  if (sc && atol(sc) > 0)
    g_scale = atol(sc);
  snprintf(g_tag, sizeof g_tag, "{t:bconn-%ld}", (long)time(NULL));
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  printf("redis connection benchmark: one local redis-server 7 (plain and "
         "TLS port); wall time per decision, medians of %d interleaved "
         "rounds of %ld decisions (scale %ld%%)\n",
         ROUNDS, 20000 * g_scale / 100, g_scale);
  bench_threads(nodes);
  bench_tls(nodes, tls_port, tls_dir);
  bench_recovery(atoi(spare), tmp);
  printf("ratios (same run; recovery: store opened while Redis was down, a "
         "decision every 1 ms):\n%s",
         g_notes);
  return 0;
}

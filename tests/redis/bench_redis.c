/*
** Redis backend throughput, against one local server, beside two baselines
** measured in the same run on the same server: plain PING round trips and
** raw EVALSHA of the spec's section-6 reference script (the shape of
** redis-benchmark's loop: one hiredis context, one command at a time, or
** pipelined).  Prints ns per decision and the ratios the issue asks about:
**   single decision vs raw spec EVALSHA (target: within 15%),
**   pipelined batch vs single decisions (target: at least 5x).
** Each figure is for 1 hot key and for 100,000 keys.
**
** SLUICE_BENCH_SCALE=<percent> shrinks the runs (default 100).
*/
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice.h"

#define BATCH 100
#define MANY 100000

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int die(const char *what) {
  fprintf(stderr, "bench: %s\n", what);
  return 1;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *b;
  long n;
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b)
    b[n] = '\0';
  *len = (size_t)n;
  return b;
}

static char sha[41];
static char tag[64];

/* One spec-script call for key id `id`, appended to the pipeline. */
static void spec_append(redisContext *c, long id) {
  char k[4][96];
  const char *argv[16];
  size_t lens[16];
  static const char *args[9] = {"1000000", "1000000", "1", "60", "20",
                                "300",     "3600",    "86400", "86400"};
  static const char *fmt[4] = {"rl:%s:tb:%ld", "pb:%s:box:%ld",
                               "pb:%s:strikes:%ld", "pb:%s:off:%ld"};
  int i, n = 0;
  argv[n] = "EVALSHA";
  lens[n++] = 7;
  argv[n] = sha;
  lens[n++] = 40;
  argv[n] = "4";
  lens[n++] = 1;
  for (i = 0; i < 4; i++) {
    snprintf(k[i], sizeof k[i], fmt[i], tag, id);
    argv[n] = k[i];
    lens[n++] = strlen(k[i]);
  }
  for (i = 0; i < 9; i++) {
    argv[n] = args[i];
    lens[n++] = strlen(args[i]);
  }
  redisAppendCommandArgv(c, n, argv, lens);
}

static int read_n(redisContext *c, int n, int want_array) {
  int i;
  for (i = 0; i < n; i++) {
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK || !r)
      return -1;
    if (r->type == REDIS_REPLY_ERROR ||
        (want_array && r->type != REDIS_REPLY_ARRAY)) {
      fprintf(stderr, "bench: reply error: %s\n", r->str ? r->str : "?");
      freeReplyObject(r);
      return -1;
    }
    freeReplyObject(r);
  }
  return 0;
}

/* Each measurement returns elapsed ns for n decisions starting at key
** offset `base`, so that rounds can be interleaved. */
static redisContext *g_c;
static sluice_limiter *g_l;

static int64_t run_ping(long n, long keys, int batch, long base) {
  int64_t t0 = now_ns();
  long i;
  (void)keys;
  (void)batch;
  (void)base;
  for (i = 0; i < n; i++) {
    redisAppendCommand(g_c, "PING");
    if (read_n(g_c, 1, 0))
      return -1;
  }
  return now_ns() - t0;
}

static int64_t run_spec(long n, long keys, int batch, long base) {
  int64_t t0 = now_ns();
  long i = 0;
  while (i < n) {
    int b;
    for (b = 0; b < batch && i < n; b++, i++)
      spec_append(g_c, (base + i) % keys);
    if (read_n(g_c, b, 1))
      return -1;
  }
  return now_ns() - t0;
}

static int64_t run_sluice(long n, long keys, int batch, long base) {
  static char names[BATCH][96];
  sluice_key k[BATCH];
  sluice_op ops[BATCH];
  sluice_verdict vs[BATCH];
  int rcs[BATCH];
  static const sluice_gcra_params p = {1000000, 1000000000, 1000000};
  int64_t t0 = now_ns();
  long i = 0;
  while (i < n) {
    int b, j;
    for (b = 0; b < batch && i < n; b++, i++) {
      snprintf(names[b], sizeof names[b], "%s:k:%ld", tag, (base + i) % keys);
      k[b].data = names[b];
      k[b].len = strlen(names[b]);
      ops[b] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[b], &p,
                           1, 0};
    }
    if (batch == 1) {
      if (sluice_limiter_apply(g_l, &ops[0], &vs[0]) != SLUICE_OK)
        return die(sluice_limiter_errmsg(g_l)), -1;
    } else {
      if (sluice_limiter_apply_many(g_l, b, ops, vs, rcs) != SLUICE_OK)
        return die("apply_many"), -1;
      for (j = 0; j < b; j++)
        if (rcs[j] != SLUICE_OK)
          return die(sluice_limiter_errmsg(g_l)), -1;
    }
  }
  return now_ns() - t0;
}

typedef int64_t (*runner)(long, long, int, long);

/* Run the variants of one scenario in interleaved rounds, so that a load
** change on the machine hits them alike; ns per decision into out[]. */
static int measure(const char *title, int nv, const runner *rv,
                   const char *const *names, const int *batch, long n,
                   long keys, double *out) {
  enum { ROUNDS = 10 };
  int64_t tot[8] = {0};
  int r, v;
  for (r = 0; r < ROUNDS; r++)
    for (v = 0; v < nv; v++) {
      int64_t dt = rv[v](n / ROUNDS, keys, batch[v], r * (n / ROUNDS));
      if (dt < 0)
        return -1;
      tot[v] += dt;
    }
  printf("%s\n", title);
  for (v = 0; v < nv; v++) {
    out[v] = (double)tot[v] / (double)((n / ROUNDS) * ROUNDS);
    printf("  %-40s %9.0f ns/decision %9.0f /s\n", names[v], out[v],
           1e9 / out[v]);
  }
  fflush(stdout);
  return 0;
}

int main(void) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *sc = getenv("SLUICE_BENCH_SCALE");
  long scale = sc ? atol(sc) : 100, n1, nmany;
  char uri[512], err[256];
  struct timeval tv = {5, 0};
  redisContext *c;
  redisReply *r;
  sluice_limiter *l;
  sluice_limiter_options o;
  char *script;
  size_t slen;
  int port;

  if (!nodes)
    return die("SLUICE_REDIS_NODES unset: run through tests/redis/harness.py");
  if (scale < 1)
    scale = 1;
  n1 = 20000 * scale / 100;
  nmany = MANY * scale / 100;
  port = atoi(strchr(nodes, ':') + 1);
  snprintf(tag, sizeof tag, "{t:bench-%ld}", (long)time(NULL));
  c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!c || c->err)
    return die("connect");
  script = slurp(SPEC_SCRIPT, &slen);
  if (!script)
    return die("cannot read " SPEC_SCRIPT);
  r = redisCommand(c, "SCRIPT LOAD %b", script, slen);
  if (!r || r->type != REDIS_REPLY_STRING)
    return die("SCRIPT LOAD of the spec script");
  snprintf(sha, sizeof sha, "%s", r->str);
  freeReplyObject(r);
  free(script);

  memset(&o, 0, sizeof o);
  snprintf(uri, sizeof uri, "redis:nodes=%s;timeout_ms=2000", nodes);
  o.store = uri;
  if (sluice_limiter_open2(&o, &l, err, sizeof err) != SLUICE_OK)
    return die(err);

  g_c = c;
  g_l = l;
  printf("redis benchmark: one local redis-server, one connection each, "
         "batches of %d, variants interleaved in 10 rounds\n", BATCH);
  {
    static const runner rv[5] = {run_ping, run_spec, run_sluice, run_spec,
                                 run_sluice};
    static const char *const nm[5] = {
        "PING, single", "spec script EVALSHA, single",
        "sluice decision, single", "spec script EVALSHA, pipelined",
        "sluice apply_many, pipelined"};
    static const int bt[5] = {1, 1, 1, BATCH, BATCH};
    double a[5], b[5];
    if (measure("1 key:", 5, rv, nm, bt, n1, 1, a) ||
        measure("100,000 keys:", 5, rv, nm, bt, nmany, MANY, b))
      return 1;
    printf("ratios (same run):\n");
    printf("  single, 1 key:      sluice / spec EVALSHA = %.2f (target <= "
           "1.15); / PING = %.2f\n", a[2] / a[1], a[2] / a[0]);
    printf("  single, 100k keys:  sluice / spec EVALSHA = %.2f (target <= "
           "1.15); / PING = %.2f\n", b[2] / b[1], b[2] / b[0]);
    printf("  batch speed-up, 1 key:      %.1fx over single (target >= 5)\n",
           a[2] / a[4]);
    printf("  batch speed-up, 100k keys:  %.1fx over single (target >= 5)\n",
           b[2] / b[4]);
    printf("  pipelined sluice / spec EVALSHA: 1 key %.2f, 100k keys %.2f\n",
           a[4] / a[3], b[4] / b[3]);
  }
  sluice_limiter_close(l);
  redisFree(c);
  return 0;
}

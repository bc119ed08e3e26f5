/*
** Shared helpers of the Redis suites.  The harness (harness.py) starts the
** servers and exports where they are; a test run outside it skips.
*/
#ifndef SLUICE_REDIS_TEST_H
#define SLUICE_REDIS_TEST_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice.h"
#include <sluice/sluice_redis.h>

static inline const char *rt_nodes(void) {
  const char *n = getenv("SLUICE_REDIS_NODES");
  if (!n || !*n)
    cr_skip_test("SLUICE_REDIS_NODES unset: run through tests/redis/harness.py");
  return n;
}

static inline int rt_is_cluster(void) {
  const char *m = getenv("SLUICE_REDIS_MODE");
  return m && strcmp(m, "cluster") == 0;
}

/* The i-th node's port (masters first), or 0. */
static inline int rt_port(int i) {
  const char *n = rt_nodes();
  while (i-- > 0) {
    n = strchr(n, ',');
    if (!n)
      return 0;
    n++;
  }
  return atoi(strchr(n, ':') + 1);
}

/* pid of the server on `port`, from SLUICE_REDIS_PIDS. */
static inline int rt_pid_of(int port) {
  const char *p = getenv("SLUICE_REDIS_PIDS");
  char pat[16];
  snprintf(pat, sizeof pat, "%d:", port);
  while (p && *p) {
    if (strncmp(p, pat, strlen(pat)) == 0)
      return atoi(p + strlen(pat));
    p = strchr(p, ',');
    if (p)
      p++;
  }
  return 0;
}

/* The harness's --engine (e.g. "engine=module"), for every store a suite
** opens, unless the test picks an engine itself. */
static inline const char *rt_engine(const char *extra) {
  const char *e = getenv("SLUICE_REDIS_STORE_EXTRA");
  if (!e || !*e || (extra && strstr(extra, "engine=")))
    return "";
  return e;
}

/* Open a raw store on the harness's servers with extra params. */
/* Tests that are not about timeouts get generous ones: a small CI machine
** (or a server fsyncing its cluster config) can stall for tens of ms. */
static inline sluice_store *rt_store(const char *extra, unsigned flags) {
  char uri[1024];
  char err[256];
  sluice_store *s = NULL;
  int rc;
  const char *eng = rt_engine(extra);
  if (!extra || !strstr(extra, "timeout_ms"))
    extra = extra && *extra ? extra : "", snprintf(
        uri, sizeof uri,
        "nodes=%s;timeout_ms=3000;connect_timeout_ms=3000%s%s%s%s",
        rt_nodes(), *extra ? ";" : "", extra, *eng ? ";" : "", eng);
  else
    snprintf(uri, sizeof uri, "nodes=%s;%s%s%s", rt_nodes(), extra,
             *eng ? ";" : "", eng);
  rc = sluice_store_open(sluice_backend_find("redis"), uri, NULL, flags, &s,
                          err, sizeof err);
  cr_assert_eq(rc, SLUICE_OK, "open redis:%s: %s (%s)", uri,
               sluice_err_name(rc), err);
  return s;
}

static inline sluice_limiter *rt_limiter(const char *extra, unsigned flags) {
  char uri[1024];
  char err[256];
  sluice_limiter *l = NULL;
  sluice_limiter_options o;
  int rc;
  memset(&o, 0, sizeof o);
  const char *eng = rt_engine(extra);
  snprintf(uri, sizeof uri, "redis:nodes=%s%s%s%s%s", rt_nodes(),
           extra && *extra ? ";" : "", extra ? extra : "", *eng ? ";" : "",
           eng);
  o.store = uri;
  o.flags = flags;
  rc = sluice_limiter_open(&o, &l, err, sizeof err);
  cr_assert_eq(rc, SLUICE_OK, "open %s: %s (%s)", uri, sluice_err_name(rc),
               err);
  return l;
}

/* The port of the node that serves `key`. */
static inline int rt_port_of(sluice_store *s, const char *key) {
  sluice_redis_node_of q;
  memset(&q, 0, sizeof q);
  q.key = key;
  q.keylen = strlen(key);
  cr_assert_eq(sluice_store_control(s, SLUICE_CTL_REDIS_NODE_OF, &q),
               SLUICE_OK);
  cr_assert_gt(q.port, 0, "a node serves %s", key);
  return q.port;
}

static inline int64_t rt_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A per-run tag so that reruns against a long-lived server never meet old
** state. */
static inline void rt_tag(char *buf, size_t n, const char *what) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(buf, n, "{t:%s-%ld-%ld}", what, (long)ts.tv_sec, ts.tv_nsec);
}

#ifdef __HIREDIS_H
/* calls= of one command in c's INFO commandstats (0 when never called). */
static inline long rt_cmd_calls(redisContext *c, const char *cmd) {
  redisReply *r = redisCommand(c, "INFO commandstats");
  char pat[64];
  const char *p;
  long n = 0;
  cr_assert(r && r->type == REDIS_REPLY_STRING, "INFO commandstats");
  snprintf(pat, sizeof pat, "cmdstat_%s:calls=", cmd);
  p = strstr(r->str, pat);
  if (p)
    n = atol(p + strlen(pat));
  freeReplyObject(r);
  return n;
}
#endif

static inline sluice_redis_stats rt_stats(sluice_store *s) {
  sluice_redis_stats st;
  cr_assert_eq(sluice_store_control(s, SLUICE_CTL_REDIS_STATS, &st),
               SLUICE_OK);
  return st;
}

#endif

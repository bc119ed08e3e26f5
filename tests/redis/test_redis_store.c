/*
** The Redis store's own contract, against real servers (one server, or a
** 3-master cluster, as the harness was asked): open errors, the time
** source, one round trip per decision and per node per batch, NOSCRIPT
** after SCRIPT FLUSH (FCALL's missing function after FUNCTION FLUSH), a server that stops answering, MOVED/ASK during a
** live slot migration, fork and threads, corrupt records and prefixes.
*/
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_test.h"
#include "sluice_rcl_script.h" /* the Lua, built */
#include "../common/one_step.h"
#include "wire.h"
#include "../common/units.h"


static redisContext *raw(int port) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  cr_assert(c && !c->err, "raw connect %d", port);
  return c;
}

static long long raw_int(redisContext *c, const char *fmt, const char *a) {
  redisReply *r = redisCommand(c, fmt, a);
  long long x;
  cr_assert(r, "raw command failed: %s", c->errstr);
  x = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  freeReplyObject(r);
  return x;
}

static void raw_ok(redisContext *c, const char *cmd) {
  redisReply *r = redisCommand(c, cmd);
  cr_assert(r && r->type != REDIS_REPLY_ERROR, "%s: %s", cmd,
            r ? r->str : c->errstr);
  freeReplyObject(r);
}

static int take(sluice_store *s, const char *key, const sluice_gcra_params *p,
                int64_t cost, sluice_verdict *v) {
  sluice_key k = {key, strlen(key)};
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, p, cost, 0};
  return store_op(s, &op, 1, v);
}

/* A bucket that does not refill during a test: burst points, then no more. */
static const sluice_gcra_params still = {1, 86400 * SEC, 20};

Test(store, open_errors) {
  static const char *bad[] = {
      "",                                  /* no nodes */
      "nodes=",                            /* empty */
      "nodes=localhost",                   /* no port */
      "nodes=127.0.0.1:99999",             /* port out of range */
      "nodes=127.0.0.1:6379;timeout_ms=0", /* zero timeout */
      "nodes=127.0.0.1:6379;timeout_ms=fast",
      "nodes=127.0.0.1:6379;colour=blue", /* unknown parameter */
      "nodes=127.0.0.1:6379;prefix={x}",  /* would move the hash slot */
  };
  size_t i;
  rt_nodes();
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sluice_store *s = (sluice_store *)1;
    char err[256] = "";
    int rc = sluice_store_open(sluice_backend_find("redis"), bad[i], NULL, 0,
                                &s, err, sizeof err);
    cr_assert_eq(rc, SLUICE_EINVAL, "'%s' gave %s", bad[i],
                 sluice_err_name(rc));
    cr_assert_null(s);
    cr_assert_str_not_empty(err, "'%s' says what is wrong", bad[i]);
  }
}

/* Nothing listens: the store opens (a service must start while Redis is
** down), and each decision is SLUICE_EUNAVAIL naming the failed connect. */
Test(store, unreachable_is_unavailable) {
  char uri[128], err[256];
  sluice_store *s;
  sluice_verdict v;
  int64_t t0;
  int rc, port = rt_port(0) + 3000; /* nothing listens there: harness range */
  snprintf(uri, sizeof uri, "nodes=127.0.0.1:%d;connect_timeout_ms=50", port);
  t0 = rt_mono_ms();
  rc = sluice_store_open(sluice_backend_find("redis"), uri, NULL, 0, &s, err,
                          sizeof err);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s", sluice_err_name(rc), err);
  rc = take(s, "{t:x}:k", &still, 1, &v);
  cr_assert_eq(rc, SLUICE_EUNAVAIL, "%s", sluice_err_name(rc));
  cr_assert(strstr(sluice_store_errmsg(s), "connect") != NULL ||
                strstr(sluice_store_errmsg(s), "backing off") != NULL,
            "detail names the failure: %s", sluice_store_errmsg(s));
  /* Budget check with generous slack: refused loopback connects are fast. */
  cr_assert_lt(rt_mono_ms() - t0, 2000);
  sluice_store_close(s);
}

Test(store, capabilities_and_server_time) {
  sluice_store *s = rt_store("", 0);
  sluice_verdict v;
  char tag[64], key[96];
  struct timespec ts;
  int64_t wall;
  unsigned caps = sluice_store_capabilities(s);
  cr_assert(caps & SLUICE_CAP_DISTRIBUTED);
  cr_assert(caps & SLUICE_CAP_NATIVE_ALGO);
  cr_assert(caps & SLUICE_CAP_OWN_CLOCK);
  cr_assert(caps & SLUICE_CAP_THREADSAFE);
  rt_tag(tag, sizeof tag, "time");
  snprintf(key, sizeof key, "t:%s", tag);
  /* The store is given now = 1 ns; outside test mode it must use TIME. */
  cr_assert_eq(take(s, key, &still, 1, &v), SLUICE_OK);
  clock_gettime(CLOCK_REALTIME, &ts);
  wall = (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
  cr_assert_gt(v.now_ns, wall - 60 * SEC, "verdict carries Redis's TIME");
  cr_assert_lt(v.now_ns, wall + 60 * SEC);
  cr_assert_eq(v.remaining, 19);
  sluice_store_close(s);
}

/* Redis's TIME in ns, by a raw connection. */
static int64_t redis_time_ns(redisContext *c) {
  redisReply *r = redisCommand(c, "TIME");
  int64_t t;
  cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  t = atoll(r->element[0]->str) * SEC + atoll(r->element[1]->str) * 1000;
  freeReplyObject(r);
  return t;
}

/* The Lua's now is Redis's TIME to the microsecond, between a TIME read
** before the call and one after, call after call (the library keeps the
** seconds' part from call to call), for a single op and a program. */
Test(store, now_is_times_to_the_microsecond) {
  static const char *const engines[] = {"engine=lua", "engine=script"};
  static const sluice_gcra_params g = {1000000, SEC, 4000000};
  int e, i;
  for (e = 0; e < 2; e++) {
    sluice_store *s = rt_store(engines[e], 0);
    char tag[64], key[96];
    sluice_key k;
    sluice_step st = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, &g, 1};
    sluice_program p = {1, &k, 1, &st, 0};
    redisContext *c;
    rt_tag(tag, sizeof tag, "now");
    snprintf(key, sizeof key, "n:%s", tag);
    k.data = key;
    k.len = strlen(key);
    c = raw(rt_port_of(s, key));
    for (i = 0; i < 40; i++) {
      sluice_program_result res;
      sluice_verdict v;
      int64_t before = redis_time_ns(c), now, after;
      if (i % 2) {
        cr_assert_eq(store_prog(s, &p, 0, &res), SLUICE_OK);
        now = res.now_ns;
      } else {
        cr_assert_eq(take(s, key, &g, 1, &v), SLUICE_OK);
        now = v.now_ns;
      }
      after = redis_time_ns(c);
      cr_assert(before <= now && now <= after,
                "%s: call %d: now %ld ns, TIME %ld .. %ld", engines[e], i,
                (long)now, (long)before, (long)after);
      cr_assert_eq(now % 1000, 0);
      if (i == 20) /* the next calls in a second of their own */
        usleep((useconds_t)(1000000 - after / 1000 % 1000000 + 1000));
    }
    redisFree(c);
    sluice_store_close(s);
  }
}

Test(store, one_round_trip_per_decision) {
  sluice_store *s = rt_store("", 0);
  sluice_redis_stats a, b;
  sluice_verdict v;
  char tag[64], key[96];
  int i;
  rt_tag(tag, sizeof tag, "rt");
  snprintf(key, sizeof key, "k:%s", tag);
  cr_assert_eq(take(s, key, &still, 1, &v), SLUICE_OK); /* warm: script */
  a = rt_stats(s);
  for (i = 0; i < 50; i++)
    cr_assert_eq(take(s, key, &still, 0 + 1, &v), SLUICE_OK);
  b = rt_stats(s);
  cr_assert_eq(b.round_trips - a.round_trips, 50);
  cr_assert_eq(b.ops - a.ops, 50);
  cr_assert_eq(v.allowed, 0, "20 points, 51 asked");
  sluice_store_close(s);
}

static sluice_store *mem_store(void) {
  sluice_store *m;
  char err[64];
  cr_assert_eq(sluice_store_open(sluice_backend_find("mem"), "", NULL, 0, &m,
                                  err, sizeof err),
               SLUICE_OK, "%s", err);
  return m;
}

/* Each of a batch's verdicts is what mem decides for the same operations
** applied one at a time, in order. */
static void expect_as_mem(sluice_store *s, sluice_store *m, int n,
                          const sluice_op *ops, int64_t now,
                          const sluice_verdict *vs, const int *rcs) {
  sluice_verdict vm;
  int i;
  for (i = 0; i < n; i++) {
    cr_assert_eq(rcs[i], SLUICE_OK, "op %d: %s (%s)", i,
                 sluice_err_name(rcs[i]), sluice_store_errmsg(s));
    cr_assert_eq(store_op(m, &ops[i], now, &vm), SLUICE_OK);
    cr_assert_eq(vs[i].allowed, vm.allowed, "op %d", i);
    cr_assert_eq(vs[i].limit, vm.limit, "op %d", i);
    cr_assert_eq(vs[i].remaining, vm.remaining, "op %d", i);
    cr_assert_eq(vs[i].reset_ns, vm.reset_ns, "op %d", i);
    cr_assert_eq(vs[i].retry_after_ns, vm.retry_after_ns, "op %d", i);
    cr_assert_eq(vs[i].now_ns, now, "op %d", i);
  }
}

Test(store, batch_is_one_round_trip_per_node) {
  enum { N = 300 };
  sluice_store *s = rt_store("", SLUICE_OPEN_TESTCLOCK);
  sluice_store *m;
  sluice_redis_stats a, b;
  static char names[N][96];
  sluice_key keys[N];
  sluice_op ops[N];
  sluice_verdict vs[N], vm;
  int rcs[N], i;
  char tag[64];
  int64_t now = 1764633600 * SEC;
  m = mem_store();
  rt_tag(tag, sizeof tag, "batch");
  for (i = 0; i < N; i++) {
    /* A tag per key: the batch spreads over every master. */
    snprintf(names[i], sizeof names[i], "b:{%d-%s}", i, tag);
    keys[i].data = names[i];
    keys[i].len = strlen(names[i]);
    ops[i] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &keys[i],
                         &still, 1 + i % 20, 0};
  }
  cr_assert_eq(take(s, "warm", &still, 1, &vm), SLUICE_OK);
  a = rt_stats(s);
  cr_assert_eq(store_ops(s, N, ops, now, vs, rcs), SLUICE_OK);
  b = rt_stats(s);
  cr_assert_leq(b.round_trips - a.round_trips, (uint64_t)b.nodes,
                "%lu round trips for %d ops on %d nodes",
                b.round_trips - a.round_trips, N, b.nodes);
  expect_as_mem(s, m, N, ops, now, vs, rcs);
  if (rt_is_cluster()) {
    cr_assert_geq(b.nodes, 3);
    cr_assert_geq(b.round_trips - a.round_trips, 3, "every master was used");
  }
  sluice_store_close(m);
  sluice_store_close(s);
}

/* Calls of several programs (one EVALSHA or FCALL for a run of
** decisions of one slot, each operation a one-step program) decide
** exactly what the same operations decide one at a time on mem: in order
** (the same key many times), a window and a group among them, and through
** a record the script's fast path refuses (the general step decides it in
** place). */
Test(store, batch_scripts_match_mem_in_order) {
  enum { N = 120 };
  static const sluice_gcra_params wide = {1, 3600 * SEC, 1000};
  static const sluice_window_params win = {5, 60 * SEC};
  sluice_store *s = rt_store("", SLUICE_OPEN_TESTCLOCK);
  sluice_store *m;
  sluice_redis_stats a, b;
  static char names[N][96];
  sluice_key keys[N], pair[2];
  sluice_gcra_params pairp[2] = {{1, 86400 * SEC, 20}, {1, 86400 * SEC, 30}};
  sluice_op ops[N];
  sluice_verdict vs[N], vm;
  int rcs[N], i, allowed_hot = 0;
  char tag[64];
  int64_t now = 1764633600 * SEC;
  m = mem_store();
  rt_tag(tag, sizeof tag, "bscript");
  for (i = 0; i < N; i++) {
    /* Every key under one tag: one slot, so the cluster batches too. */
    int id = i % 3 == 0 ? 0 : i; /* key 0: every third op */
    snprintf(names[i], sizeof names[i], "bs:%d:%s", id, tag);
    keys[i].data = names[i];
    keys[i].len = strlen(names[i]);
    ops[i] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &keys[i],
                         &still, 1, 0};
    if (i % 7 == 5)
      ops[i].kind = SLUICE_OP_PEEK;
  }
  /* Key 1 is first charged 900 of a 1000-point bucket, then asked under a
  ** 20-point one: over its burst, which only the general path decides. */
  snprintf(names[2], sizeof names[2], "bs:%d:%s", 1, tag);
  keys[2].len = strlen(names[2]);
  ops[1].params = &wide;
  ops[1].arg = 900;
  ops[2].arg = 1;
  ops[40] = (sluice_op){SLUICE_ALGO_SWINDOW, SLUICE_OP_CONSUME, 1, &keys[40],
                        &win, 1, 0};
  pair[0] = keys[0];
  pair[1] = keys[70];
  ops[70] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, pair, pairp,
                        1, 0};
  cr_assert_eq(take(s, "warm", &still, 1, &vm), SLUICE_OK);
  a = rt_stats(s);
  cr_assert_eq(store_ops(s, N, ops, now, vs, rcs), SLUICE_OK);
  b = rt_stats(s);
  expect_as_mem(s, m, N, ops, now, vs, rcs);
  for (i = 0; i < N; i++)
    if (i % 3 == 0 && i != 0 && ops[i].kind == SLUICE_OP_CONSUME &&
        ops[i].nkeys == 1)
      allowed_hot += vs[i].allowed;
  /* Key 0 (20 points) was asked 1 + 30-odd times: the first 20 consumes
  ** in order won, the group at 70 among them, so the order was kept. */
  cr_assert(vs[0].allowed);
  cr_assert(vs[1].allowed, "900 of 1000");
  cr_assert(!vs[2].allowed, "over a 20-point burst");
  cr_assert_eq(allowed_hot + vs[0].allowed + vs[70].allowed, 20);
  cr_assert(!vs[114].allowed, "a consume of key 0 after its 20");
  /* (a call carries up to SLUICE_GROUP_MAX programs: RCL_BATCH_MAX) */
  cr_assert_eq(b.batches - a.batches,
               (N + SLUICE_GROUP_MAX - 1) / SLUICE_GROUP_MAX,
               "calls of up to SLUICE_GROUP_MAX programs");
  cr_assert_eq(b.round_trips - a.round_trips, 1, "one slot, one round trip");
  cr_assert_eq(b.ops - a.ops, N);
  sluice_store_close(m);
  sluice_store_close(s);
}

/* Calls of a command on a node since its start (INFO commandstats). */
static long cmd_calls(int port, const char *cmd) {
  redisContext *c = raw(port);
  long n = rt_cmd_calls(c, cmd);
  redisFree(c);
  return n;
}

/* Decisions go on, state intact, after the Lua is flushed from every node
** by `flush` (the store reloads it on the NOSCRIPT / function-missing
** answer), and they run as `cmd` on the key's node, never as `other`. */
static void flush_keeps_deciding(const char *engine, const char *flush,
                                 const char *cmd, const char *other) {
  sluice_store *s = rt_store(engine, 0);
  sluice_redis_stats a, b;
  sluice_verdict v;
  char tag[64], key[96];
  int i, n, admitted = 0, port;
  long c0, o0;
  rt_tag(tag, sizeof tag, "flush");
  snprintf(key, sizeof key, "f:%s", tag);
  port = rt_port_of(s, key);
  c0 = cmd_calls(port, cmd);
  o0 = cmd_calls(port, other);
  for (i = 0; i < 10; i++) {
    cr_assert_eq(take(s, key, &still, 1, &v), SLUICE_OK);
    admitted += v.allowed;
  }
  cr_assert_geq(cmd_calls(port, cmd) - c0, 10, "%s runs the steps", cmd);
  a = rt_stats(s);
  for (n = 0; rt_port(n); n++) {
    redisContext *c = raw(rt_port(n));
    raw_ok(c, flush);
    redisFree(c);
  }
  for (i = 0; i < 15; i++) {
    int rc = take(s, key, &still, 1, &v);
    cr_assert_eq(rc, SLUICE_OK, "decisions continue after %s: %s", flush,
                 sluice_err_name(rc));
    admitted += v.allowed;
  }
  b = rt_stats(s);
  cr_assert_geq(b.noscript - a.noscript, 1, "the missing Lua was met and "
                "handled");
  cr_assert_eq(admitted, 20, "state survived: exactly the burst admitted");
  cr_assert_geq(cmd_calls(port, cmd) - c0, 25, "%s ran every decision", cmd);
  cr_assert_eq(cmd_calls(port, other), o0, "no %s", other);
  sluice_store_close(s);
}

Test(store, noscript_after_flush) {
  /* About the script (the path of servers without Redis Functions): with
  ** the module (engine=auto) nothing is flushed. */
  flush_keeps_deciding("engine=script", "SCRIPT FLUSH", "evalsha", "fcall");
}

Test(store, function_missing_after_flush) {
  /* engine=lua on Redis 7: the library, one FCALL per decision. */
  flush_keeps_deciding("engine=lua", "FUNCTION FLUSH", "fcall", "evalsha");
}

/* One program: a GCRA step over key, a bucket of `burst` that does not
** refill during a test.  Its remaining points after the call. */
static int64_t prog_take(sluice_store *s, const char *key, int64_t burst) {
  sluice_key k = {key, strlen(key)};
  sluice_gcra_params g = {1, 3600 * SEC, burst};
  sluice_step st = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, &g,
                    1, 0, SLUICE_WHEN_ALWAYS, 0, SLUICE_WHEN_ALWAYS, 0,
                    SLUICE_FOLD_GATE, 0};
  sluice_program p = {1, &k, 1, &st, 0};
  sluice_program_result res;
  cr_assert_eq(store_prog(s, &p, 0, &res), SLUICE_OK, "%s",
               sluice_store_errmsg(s));
  cr_assert(res.allowed && (res.ran & 1u));
  return res.v[0].remaining;
}

/* The library forgets every program: FUNCTION FLUSH, then the library
** loaded again (FUNCTION RESTORE of its dump, as another client's load
** would), on the node at port. */
static void reload_library(int port) {
  redisContext *c = raw(port);
  redisReply *d = redisCommand(c, "FUNCTION DUMP"), *r;
  cr_assert(d && d->type == REDIS_REPLY_STRING, "FUNCTION DUMP");
  raw_ok(c, "FUNCTION FLUSH");
  r = redisCommand(c, "FUNCTION RESTORE %b", d->str, d->len);
  cr_assert(r && r->type != REDIS_REPLY_ERROR, "FUNCTION RESTORE");
  freeReplyObject(r);
  freeReplyObject(d);
  redisFree(c);
}

/* A program goes by id once this lane sent it whole (lua/program.lua,
** redis_codec.c).  A library that does not know the id -- loaded again
** after FUNCTION FLUSH, its cache emptied by other programs, another node
** of a cluster -- answers SLUICE NOPROGRAM before it reads or writes
** anything, and the call goes again whole: every decision taken exactly
** once (the bucket's remaining points fall by one a call), one retry
** each (counted as noscript). */
Test(store, program_id_unknown_goes_whole) {
  sluice_store *s = rt_store("engine=lua", 0), *o;
  sluice_redis_stats a;
  char tag[64], key[96], other[96], tag2[64];
  int64_t left = 20;
  uint64_t noscript;
  int i;
  rt_tag(tag, sizeof tag, "pid");
  snprintf(key, sizeof key, "%sk", tag);
  a = rt_stats(s);
  noscript = a.noscript;
  for (i = 0; i < 3; i++) /* whole, then by id */
    cr_assert_eq(prog_take(s, key, 20), --left);
  cr_assert_eq(rt_stats(s).noscript, noscript, "the library knew the id");

  reload_library(rt_port_of(s, key));
  cr_assert_eq(prog_take(s, key, 20), --left, "after a reload: once");
  cr_assert_eq(rt_stats(s).noscript, ++noscript, "an unknown id, resent");
  cr_assert_eq(prog_take(s, key, 20), --left);
  cr_assert_eq(rt_stats(s).noscript, noscript, "known again");

  /* Another client's programs fill the library's cache on that node. */
  o = rt_store("engine=lua", 0);
  for (i = 0; i < 80; i++) {
    snprintf(other, sizeof other, "%sf%d", tag, i);
    prog_take(o, other, 100 + i);
  }
  sluice_store_close(o);
  cr_assert_eq(prog_take(s, key, 20), --left, "cache emptied: once");
  cr_assert_eq(rt_stats(s).noscript, ++noscript, "an unknown id, resent");

  if (rt_is_cluster()) {
    /* The same program over a key on another node, which never saw it. */
    for (i = 0; i < 64; i++) {
      rt_tag(tag2, sizeof tag2, "pid2");
      snprintf(other, sizeof other, "%sk", tag2);
      if (rt_port_of(s, other) != rt_port_of(s, key))
        break;
    }
    cr_assert_neq(rt_port_of(s, other), rt_port_of(s, key));
    /* The lane knows which nodes it sent the program to: whole there. */
    cr_assert_eq(prog_take(s, other, 20), 19, "a new node");
    cr_assert_eq(rt_stats(s).noscript, noscript, "sent whole, not by id");
    cr_assert_eq(prog_take(s, other, 20), 18);
    cr_assert_eq(rt_stats(s).noscript, noscript);
  }
  sluice_store_close(s);
}

Test(store, stalled_server_times_out) {
  sluice_store *s = rt_store("timeout_ms=20;connect_timeout_ms=20", 0);
  sluice_verdict v;
  char tag[64], key[96];
  redisContext *c;
  int64_t t0, dt;
  int rc, done = 0, ok = 0;
  rt_tag(tag, sizeof tag, "sleep");
  snprintf(key, sizeof key, "s:%s", tag);
  cr_assert_eq(take(s, key, &still, 1, &v), SLUICE_OK);
  c = raw(rt_port_of(s, key));
  /* Send DEBUG SLEEP without waiting for its reply: the server stalls. */
  redisAppendCommand(c, "DEBUG SLEEP 0.6");
  while (!done)
    cr_assert_eq(redisBufferWrite(c, &done), REDIS_OK);
  usleep(50000);
  t0 = rt_mono_ms();
  rc = take(s, key, &still, 1, &v);
  dt = rt_mono_ms() - t0;
  cr_assert_eq(rc, SLUICE_ETIMEDOUT, "got %s (%s)", sluice_err_name(rc),
               sluice_store_errmsg(s));
  /* The explicit budget check: 20 ms asked, generous slack for CI. */
  cr_assert_lt(dt, 300, "timed out after %ld ms", (long)dt);
  {
    void *r = NULL;
    redisGetReply(c, &r); /* the sleep is over */
    freeReplyObject(r);
    redisFree(c);
  }
  for (t0 = rt_mono_ms(); rt_mono_ms() - t0 < 5000 && !ok;) {
    ok = take(s, key, &still, 1, &v) == SLUICE_OK;
    if (!ok)
      usleep(20000);
  }
  cr_assert(ok, "decisions resume once the server answers again");
  sluice_store_close(s);
}

Test(store, migration_follows_ask_and_moved) {
  sluice_store *s;
  sluice_redis_stats a, b;
  sluice_verdict v;
  char tag[64], k1[96], k2[96], idA[64], idB[64], cmd[256];
  int pa, pb, slot, n;
  redisContext *ca, *cb;
  redisReply *r;
  sluice_redis_node_of q;
  if (!rt_is_cluster())
    cr_skip_test("needs a cluster");
  s = rt_store("timeout_ms=2000", 0);
  rt_tag(tag, sizeof tag, "mig");
  snprintf(k1, sizeof k1, "a:%s", tag);
  snprintf(k2, sizeof k2, "b:%s", tag);
  memset(&q, 0, sizeof q);
  q.key = k1;
  q.keylen = strlen(k1);
  cr_assert_eq(sluice_store_control(s, SLUICE_CTL_REDIS_NODE_OF, &q),
               SLUICE_OK);
  slot = q.slot;
  pa = q.port;
  pb = rt_port(0) == pa ? rt_port(1) : rt_port(0);
  ca = raw(pa);
  cb = raw(pb);
  r = redisCommand(ca, "CLUSTER MYID");
  snprintf(idA, sizeof idA, "%s", r->str);
  freeReplyObject(r);
  r = redisCommand(cb, "CLUSTER MYID");
  snprintf(idB, sizeof idB, "%s", r->str);
  freeReplyObject(r);

  for (n = 0; n < 3; n++)
    cr_assert_eq(take(s, k1, &still, 1, &v), SLUICE_OK);
  a = rt_stats(s);
  snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d IMPORTING %s", slot, idA);
  raw_ok(cb, cmd);
  snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d MIGRATING %s", slot, idB);
  raw_ok(ca, cmd);
  /* k2 is not on A: A answers ASK, the store retries on B with ASKING. */
  cr_assert_eq(take(s, k2, &still, 5, &v), SLUICE_OK, "%s", sluice_store_errmsg(s));
  cr_assert_eq(v.remaining, 15);
  /* k1 still lives on A and is served there. */
  cr_assert_eq(take(s, k1, &still, 1, &v), SLUICE_OK);
  cr_assert_eq(v.remaining, 16);
  b = rt_stats(s);
  cr_assert_geq(b.ask - a.ask, 1, "ASK followed");
  /* Move k1 and hand the slot over. */
  r = redisCommand(ca, "MIGRATE 127.0.0.1 %d %b 0 5000 KEYS %s", pb, "",
                   (size_t)0, k1);
  cr_assert(r && r->type != REDIS_REPLY_ERROR, "MIGRATE: %s",
            r ? r->str : ca->errstr);
  freeReplyObject(r);
  for (n = 0; rt_port(n); n++) {
    redisContext *c = raw(rt_port(n));
    snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d NODE %s", slot, idB);
    r = redisCommand(c, cmd);
    freeReplyObject(r); /* replicas refuse; masters accept */
    redisFree(c);
  }
  /* The store's map still says A: A answers MOVED, the store follows, and
  ** the bucket's state came along with the key. */
  cr_assert_eq(take(s, k1, &still, 1, &v), SLUICE_OK, "%s", sluice_store_errmsg(s));
  cr_assert_eq(v.remaining, 15, "state moved with the key");
  cr_assert_eq(take(s, k2, &still, 1, &v), SLUICE_OK);
  cr_assert_eq(v.remaining, 14);
  b = rt_stats(s);
  cr_assert_geq(b.moved - a.moved, 1, "MOVED followed");
  cr_assert_eq(rt_port_of(s, k1), pb, "slot map now points at the new owner");
  (void)raw_int;
  redisFree(ca);
  redisFree(cb);
  sluice_store_close(s);
}

Test(store, fork_child_gets_its_own_connection) {
  sluice_store *s = rt_store("timeout_ms=2000", 0);
  sluice_verdict v;
  char tag[64], key[96];
  int i, status, admitted = 0;
  pid_t pid;
  rt_tag(tag, sizeof tag, "fork");
  snprintf(key, sizeof key, "k:%s", tag);
  for (i = 0; i < 5; i++) {
    cr_assert_eq(take(s, key, &still, 1, &v), SLUICE_OK);
    admitted += v.allowed;
  }
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int ok = 0;
    sluice_redis_stats st0, st;
    sluice_store_control(s, SLUICE_CTL_REDIS_STATS, &st0);
    for (i = 0; i < 10; i++)
      if (take(s, key, &still, 1, &v) == SLUICE_OK && v.allowed)
        ok++;
    sluice_store_control(s, SLUICE_CTL_REDIS_STATS, &st);
    /* 10 admitted, over a connection of its own (made after the fork). */
    _exit(ok == 10 && st.connects > st0.connects ? 0 : 1);
  }
  /* The parent keeps using its socket meanwhile: replies must not cross. */
  for (i = 0; i < 3; i++) {
    cr_assert_eq(take(s, key, &still, 1, &v), SLUICE_OK);
    admitted += v.allowed;
  }
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
  for (i = 0; i < 5; i++) {
    cr_assert_eq(take(s, key, &still, 1, &v), SLUICE_OK);
    admitted += v.allowed;
  }
  cr_assert_eq(admitted + 10, 20, "one bucket shared by both processes");
  sluice_store_close(s);
}

typedef struct thr_arg {
  sluice_store *s;
  const char *key;
  int admitted, errors;
} thr_arg;

static void *thr_main(void *p) {
  thr_arg *a = p;
  sluice_verdict v;
  int i;
  for (i = 0; i < 40; i++) {
    if (take(a->s, a->key, &still, 1, &v) != SLUICE_OK)
      a->errors++;
    else
      a->admitted += v.allowed;
  }
  return NULL;
}

Test(store, threads_never_over_admit) {
  sluice_store *s = rt_store("timeout_ms=2000", 0);
  pthread_t t[4];
  thr_arg a[4];
  char tag[64], key[96];
  int i, total = 0;
  rt_tag(tag, sizeof tag, "thr");
  snprintf(key, sizeof key, "k:%s", tag);
  for (i = 0; i < 4; i++) {
    a[i] = (thr_arg){s, key, 0, 0};
    cr_assert_eq(pthread_create(&t[i], NULL, thr_main, &a[i]), 0);
  }
  for (i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    cr_assert_eq(a[i].errors, 0);
    total += a[i].admitted;
  }
  cr_assert_eq(total, 20, "160 asked of a 20-point bucket");
  sluice_store_close(s);
}

Test(store, prefix_get_delete) {
  sluice_store *s1 = rt_store("prefix=app1:", 0);
  sluice_store *s2 = rt_store("prefix=app2:", 0);
  sluice_verdict v;
  sluice_state st;
  int64_t exp;
  char tag[64], key[96], full[128];
  sluice_key k;
  redisContext *c;
  rt_tag(tag, sizeof tag, "pfx");
  snprintf(key, sizeof key, "k:%s", tag);
  k.data = key;
  k.len = strlen(key);
  cr_assert_eq(take(s1, key, &still, 7, &v), SLUICE_OK);
  cr_assert_eq(take(s2, key, &still, 1, &v), SLUICE_OK);
  cr_assert_eq(v.remaining, 19, "prefixes keep stores apart");
  cr_assert_eq(sluice_store_get(s1, &k, 0, &st, &exp), SLUICE_OK);
  cr_assert_gt(exp, 0);
  c = raw(rt_port_of(s1, key));
  snprintf(full, sizeof full, "app1:%s", key);
  cr_assert_eq(raw_int(c, "STRLEN %s", full), 25, "record + expiry + layout");
  cr_assert_gt(raw_int(c, "PTTL %s", full), 0, "collected by a Redis TTL");
  redisFree(c);
  cr_assert_eq(sluice_store_delete(s1, &k), SLUICE_OK);
  cr_assert_eq(sluice_store_delete(s1, &k), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_store_get(s1, &k, 0, &st, &exp), SLUICE_ENOTFOUND);
  sluice_store_close(s1);
  sluice_store_close(s2);
}

Test(store, foreign_values_are_refused_untouched) {
  sluice_store *s = rt_store("", 0);
  sluice_verdict v;
  char tag[64], k1[96], k2[96];
  redisContext *c;
  redisReply *r;
  rt_tag(tag, sizeof tag, "bad");
  snprintf(k1, sizeof k1, "x:%s", tag);
  snprintf(k2, sizeof k2, "y:%s", tag);
  c = raw(rt_port_of(s, k1));
  r = redisCommand(c, "SET %s not-a-record", k1);
  freeReplyObject(r);
  r = redisCommand(c, "HSET %s tokens 5", k2);
  freeReplyObject(r);
  cr_assert_eq(take(s, k1, &still, 1, &v), SLUICE_ECORRUPT);
  cr_assert_eq(take(s, k2, &still, 1, &v), SLUICE_EBACKEND, "WRONGTYPE");
  r = redisCommand(c, "GET %s", k1);
  cr_assert_str_eq(r->str, "not-a-record", "nothing was overwritten");
  freeReplyObject(r);
  redisFree(c);
  sluice_store_close(s);
}

/* A bucket whose stored expiry is not its TAT's (a value another writer
** left) gets its expiry back from a step that changes nothing in it, a
** peek, as the C stores write every record a step runs over: the fast
** step leaves such a record to the general one, which rewrites it. */
Test(store, a_moved_expiry_is_put_back) {
  sluice_store *s = rt_store("", 0);
  sluice_verdict v;
  sluice_state st;
  sluice_key k;
  sluice_op peek;
  char tag[64], key[96];
  int64_t exp0, exp1, later;
  redisContext *c;
  redisReply *r;
  unsigned char rec[SLUICE_WIRE_RECORD];
  int i;
  rt_tag(tag, sizeof tag, "moved");
  snprintf(key, sizeof key, "mv:%s", tag);
  k.data = key;
  k.len = strlen(key);
  cr_assert_eq(take(s, key, &still, 1, &v), SLUICE_OK);
  cr_assert_eq(sluice_store_get(s, &k, 0, &st, &exp0), SLUICE_OK);
  later = exp0 + 3600 * SEC;
  c = raw(rt_port_of(s, key));
  r = redisCommand(c, "GET %s", key);
  cr_assert(r && r->type == REDIS_REPLY_STRING &&
            r->len == SLUICE_WIRE_RECORD);
  memcpy(rec, r->str, sizeof rec);
  freeReplyObject(r);
  for (i = 0; i < 8; i++)
    rec[SLUICE_WIRE_REC_EXPIRY + i] = (unsigned char)((uint64_t)later >> (8 * i));
  r = redisCommand(c, "SET %s %b KEEPTTL", key, rec, sizeof rec);
  freeReplyObject(r);
  cr_assert_eq(sluice_store_get(s, &k, 0, &st, &exp1), SLUICE_OK);
  cr_assert_eq(exp1, later, "the stored expiry moved");
  peek = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &still, 1, 0};
  cr_assert_eq(store_op(s, &peek, 1, &v), SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(sluice_store_get(s, &k, 0, &st, &exp1), SLUICE_OK);
  cr_assert_eq(exp1, exp0, "the peek put the TAT's expiry back");
  redisFree(c);
  sluice_store_close(s);
}

/* A one-step program consuming one point of `still` at the server's
** clock, as the store sends it (wire.h); its length in bytes. */
#define ONE_NUMS (SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP + 3)
static size_t one_program(unsigned char *b) {
  int64_t x[ONE_NUMS] = {0};
  int i, k;
  x[SLUICE_WIRE_NKEYS] = 1;
  x[SLUICE_WIRE_NSTEPS] = 1;
  x[SLUICE_WIRE_NOW_HI] = -1;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_ALGO] = SLUICE_ALGO_GCRA;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_KIND] = SLUICE_OP_CONSUME;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_NKEYS] = 1;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_ARG] = 1;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_NPARAMS] = 3;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP] = still.rate;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP + 1] = still.period_ns;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP + 2] = still.burst;
  for (i = 0; i < ONE_NUMS; i++)
    for (k = 0; k < 8; k++)
      b[8 * i + k] = (unsigned char)((uint64_t)x[i] >> (8 * k));
  return 8 * ONE_NUMS;
}

/* The Lua's calls of n programs (EVAL of the script, whatever the
** store's engine): each program's answer, in order, in an array; and a
** call whose programs' records do not add up to its keys, or with a
** program not whole int64s, runs none of them. */
Test(store, lua_calls_of_several_programs) {
  unsigned char p[8 * ONE_NUMS];
  size_t n = one_program(p);
  char tag[64], k1[96], k2[96];
  redisContext *c;
  redisReply *r;
  rt_tag(tag, sizeof tag, "many");
  snprintf(k1, sizeof k1, "m1:%s", tag);
  snprintf(k2, sizeof k2, "m2:%s", tag);
  c = raw(rt_port(0));
  if (rt_is_cluster()) { /* the node of the tag's slot */
    sluice_store *s = rt_store("", 0);
    redisFree(c);
    c = raw(rt_port_of(s, k1));
    sluice_store_close(s);
  }
  r = redisCommand(c, "EVAL %s 1 %s %b %b", sluice_rcl_script, k1, p, n, p,
                   n);
  cr_assert(r && r->type == REDIS_REPLY_ERROR &&
                strstr(r->str, "SLUICE EINVAL"),
            "records for one of two programs: %s", r ? r->str : c->errstr);
  freeReplyObject(r);
  r = redisCommand(c, "EVAL %s 2 %s %s %b %b", sluice_rcl_script, k1, k2, p,
                   n, p, n - 3);
  cr_assert(r && r->type == REDIS_REPLY_ERROR &&
                strstr(r->str, "SLUICE EINVAL"),
            "a program cut short: %s", r ? r->str : c->errstr);
  freeReplyObject(r);
  cr_assert_eq(raw_int(c, "EXISTS %s", k1), 0, "no program ran");
  r = redisCommand(c, "EVAL %s 2 %s %s %b %b", sluice_rcl_script, k1, k2, p,
                   n, p, n);
  cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2,
            "two answers");
  for (size_t i = 0; i < 2; i++)
    cr_assert(r->element[i]->type == REDIS_REPLY_STRING &&
                  r->element[i]->len ==
                      SLUICE_WIRE_PROG_HEADER + SLUICE_WIRE_VERDICT &&
                  r->element[i]->str[SLUICE_WIRE_PROG_ALLOWED] == 1,
              "answer %zu: allowed", i);
  freeReplyObject(r);
  cr_assert_eq(raw_int(c, "STRLEN %s", k1), SLUICE_WIRE_RECORD);
  cr_assert_eq(raw_int(c, "STRLEN %s", k2), SLUICE_WIRE_RECORD);
  redisFree(c);
}

Test(store, readonly_refuses_writes) {
  sluice_store *s = rt_store("", SLUICE_OPEN_READONLY);
  sluice_verdict v;
  cr_assert_eq(take(s, "ro-key", &still, 1, &v), SLUICE_EPERM);
  sluice_store_close(s);
}

/* ------------------------------------------- a server without Lua --- */

/* A fake server on a loopback port that answers like a server without
** Lua and without the module (Valkey 9.1 built or started without its Lua
** engine; no such server is packaged for Debian 12, so the replies are
** made here): PING, no cluster, COMMAND INFO sluice.run a nil, and
** `lua_err` to FUNCTION, SCRIPT, EVALSHA and FCALL. */
typedef struct fake_srv {
  int fd, port;
  const char *lua_err;
  pthread_t t;
  volatile int stop;
} fake_srv;

static void *fake_main(void *p) {
  fake_srv *f = p;
  struct timeval tv = {0, 50000}; /* so that it sees stop */
  setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (!f->stop) {
    char buf[65536];
    size_t have = 0;
    ssize_t n;
    int c = accept(f->fd, NULL, NULL);
    if (c < 0)
      continue;
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (!f->stop &&
           ((n = read(c, buf + have, sizeof buf - 1 - have)) > 0 ||
            (n < 0 && errno == EAGAIN))) {
      if (n < 0)
        continue;
      char *cmd, out[256];
      have += (size_t)n;
      buf[have] = 0;
      /* The first bulk string of the request names the command; answer
      ** once a whole request (the SCRIPT LOAD body is long) is in, judged
      ** by the count of its parts. */
      if (have < 4 || !(cmd = strstr(buf, "\r\n$")))
        continue;
      cmd = strstr(cmd + 3, "\r\n");
      if (!cmd)
        continue;
      cmd += 2;
      if (strncasecmp(cmd, "SCRIPT", 6) == 0 && have < 10000 &&
          !strstr(buf, "return run(KEYS, ARGV)"))
        continue; /* the script's body is not all here yet */
      if (strncasecmp(cmd, "PING", 4) == 0)
        snprintf(out, sizeof out, "+PONG\r\n");
      else if (strncasecmp(cmd, "CLUSTER", 7) == 0)
        snprintf(out, sizeof out,
                 "-ERR This instance has cluster support disabled\r\n");
      else if (strncasecmp(cmd, "COMMAND", 7) == 0)
        snprintf(out, sizeof out, "*1\r\n*-1\r\n");
      else
        snprintf(out, sizeof out, "-%s\r\n", f->lua_err);
      if (write(c, out, strlen(out)) < 0)
        break;
      have = 0;
    }
    close(c);
  }
  return NULL;
}

static void fake_start(fake_srv *f, const char *lua_err) {
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  f->fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert(f->fd >= 0);
  cr_assert_eq(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(listen(f->fd, 8), 0);
  cr_assert_eq(getsockname(f->fd, (struct sockaddr *)&a, &al), 0);
  f->port = ntohs(a.sin_port);
  f->lua_err = lua_err;
  f->stop = 0;
  cr_assert_eq(pthread_create(&f->t, NULL, fake_main, f), 0);
}

static void fake_stop(fake_srv *f) {
  f->stop = 1;
  pthread_join(f->t, NULL);
  close(f->fd);
}

static void no_lua_refused(const char *lua_err) {
  fake_srv f;
  char uri[256], err[256] = "";
  sluice_store *s = NULL;
  int rc;
  fake_start(&f, lua_err);
  snprintf(uri, sizeof uri, "nodes=127.0.0.1:%d;timeout_ms=3000", f.port);
  rc = sluice_store_open(sluice_backend_find("redis"), uri, NULL, 0, &s, err,
                         sizeof err);
  fake_stop(&f);
  cr_assert_eq(rc, SLUICE_ENOTSUP, "%s: got %s (%s)", lua_err,
               sluice_err_name(rc), err);
  cr_assert_null(s);
  cr_assert(strstr(err, "no Lua") && strstr(err, "sluice module"),
            "the message names the cause and the module: %s", err);
}

Test(store, server_without_lua_is_refused_naming_the_module) {
  no_lua_refused("ERR unknown command 'SCRIPT', with args beginning with: "
                 "'LOAD'");
  no_lua_refused("ERR Engine 'lua' not found");
}

/* ------------------------------------- a record whose expiry stays --- */

/* Keyspace events of `key` on its node while `ops` runs (the notifications
** switched on for the run): how many "set" and "expire" events. */
static void key_events(sluice_store *s, const char *key,
                       void (*ops)(sluice_store *, const char *), int *sets,
                       int *expires) {
  int port = rt_port_of(s, key);
  redisContext *c = raw(port), *sub = raw(port);
  redisReply *r;
  char chan[160], old[64] = "";
  snprintf(chan, sizeof chan, "__keyspace@0__:%s", key);
  r = redisCommand(c, "CONFIG GET notify-keyspace-events");
  if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
    snprintf(old, sizeof old, "%s", r->element[1]->str);
  freeReplyObject(r);
  raw_ok(c, "CONFIG SET notify-keyspace-events Kg$");
  r = redisCommand(sub, "SUBSCRIBE %s", chan);
  freeReplyObject(r);
  ops(s, key);
  r = redisCommand(c, "PUBLISH %s done", chan);
  freeReplyObject(r);
  *sets = *expires = 0;
  for (;;) {
    void *m = NULL;
    redisReply *e;
    cr_assert_eq(redisGetReply(sub, &m), REDIS_OK, "keyspace event");
    e = m;
    cr_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 3);
    if (strcmp(e->element[2]->str, "done") == 0) {
      freeReplyObject(e);
      break;
    }
    *sets += strcmp(e->element[2]->str, "set") == 0;
    *expires += strcmp(e->element[2]->str, "expire") == 0;
    freeReplyObject(e);
  }
  r = redisCommand(c, "CONFIG SET notify-keyspace-events %s", old);
  freeReplyObject(r);
  redisFree(sub);
  redisFree(c);
}

/* A fixed window's count goes up and its expiry (the window's end) stays. */
static const sluice_window_params day_window = {1000000, 86400 * SEC};

static void count_twice(sluice_store *s, const char *key) {
  sluice_key k = {key, strlen(key)};
  sluice_op op = {SLUICE_ALGO_FWINDOW, SLUICE_OP_COUNT, 1, &k, &day_window,
                  1, 0};
  sluice_verdict v;
  int i;
  for (i = 0; i < 2; i++)
    cr_assert_eq(store_op(s, &op, 0, &v), SLUICE_OK, "%s",
                 sluice_store_errmsg(s));
}

static void count_twice_in_programs(sluice_store *s, const char *key) {
  sluice_key k = {key, strlen(key)};
  sluice_step st = {SLUICE_ALGO_FWINDOW, SLUICE_OP_COUNT, 0, 1, &day_window,
                    1, 0, SLUICE_WHEN_ALWAYS, 0, SLUICE_WHEN_ALWAYS, 0,
                    SLUICE_FOLD_NOTE, 0};
  sluice_program p = {1, &k, 1, &st, 0};
  sluice_program_result res;
  int i;
  for (i = 0; i < 2; i++) {
    cr_assert_eq(store_prog(s, &p, 0, &res), SLUICE_OK, "%s",
                 sluice_store_errmsg(s));
    cr_assert(res.ran & 1u);
  }
}

/* The second write of a record whose expiry did not move keeps the Redis
** TTL (SET ... KEEPTTL): one "expire" event for two writes, by the script
** and by the library, as one op and in a program. */
Test(store, expiry_set_only_when_it_moves) {
  static const char *const engines[] = {"engine=lua", "engine=script"};
  int e, sets, expires;
  for (e = 0; e < 2; e++) {
    sluice_store *s = rt_store(engines[e], 0);
    char tag[64], key[96];
    rt_tag(tag, sizeof tag, "keep");
    snprintf(key, sizeof key, "w:%s", tag);
    key_events(s, key, count_twice, &sets, &expires);
    cr_assert_eq(sets, 2, "%s: two writes (%d)", engines[e], sets);
    cr_assert_eq(expires, 1, "%s: one expiry set (%d)", engines[e], expires);
    snprintf(key, sizeof key, "wp:%s", tag);
    key_events(s, key, count_twice_in_programs, &sets, &expires);
    cr_assert_eq(sets, 2, "%s, program: two writes (%d)", engines[e], sets);
    cr_assert_eq(expires, 1, "%s, program: one expiry set (%d)", engines[e],
                 expires);
    sluice_store_close(s);
  }
}

/* A key's Redis deadline (PEXPIRETIME, ms) and the expiry its record
** carries; at -2 for a key that does not exist. */
static void deadline_of(redisContext *c, const char *key, long long *at,
                        int64_t *exp) {
  redisReply *r = redisCommand(c, "GET %s", key);
  uint64_t x = 0;
  int b;
  cr_assert(r && (r->type == REDIS_REPLY_NIL ||
                  (r->type == REDIS_REPLY_STRING &&
                   r->len == SLUICE_WIRE_RECORD)), "GET %s", key);
  if (r->type == REDIS_REPLY_STRING)
    for (b = 7; b >= 0; b--)
      x = x << 8 | (unsigned char)r->str[SLUICE_WIRE_REC_EXPIRY + b];
  freeReplyObject(r);
  *exp = (int64_t)x;
  *at = raw_int(c, "PEXPIRETIME %s", key);
}

/* Whatever path wrote a record (the library's straight line for a
** standard request, the sequencer, the script, the module), its Redis
** deadline is the grid's of the expiry it carries (wire.h), never before
** it: a record collected early would hand out a full bucket.  The
** tenant's bucket (a point in 5 s) moves its expiry 5 s a call, across a
** grid step (2^32 ns) every time, so a write that kept the TTL there
** would leave it short; the key's (a point a us, a debt of 3 s taken
** first) moves it a us a call and keeps its TTL.  The box is tripped
** halfway, which sends the later requests through the sequencer and
** writes the box and the notice. */
Test(store, deadlines_are_the_grid_of_the_expiry) {
  static const char *const engines[] = {"engine=lua", "engine=script",
                                        "engine=module"};
  static const sluice_penalty_params pen = {
      3, 10 * SEC, {SEC, 60 * SEC, SLUICE_FOREVER}, 3600 * SEC};
  static const sluice_gcra_params g[2] = {{1, 5 * SEC, 100},
                                          {1000000, SEC, 4000000}};
  static const sluice_lease_params notice = {1, SEC};
  int ne = strstr(rt_engine(NULL), "module") ? 3 : 2, e, i, j;
  for (e = 0; e < ne; e++) {
    sluice_store *s = rt_store(engines[e], 0);
    char tag[64], names[4][96];
    sluice_key k[4];
    redisContext *c;
    sluice_step st[5] = {
        {SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &pen},
        {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, 2, g, 1, 0,
         SLUICE_WHEN_PASSED, 0},
        {SLUICE_ALGO_LEASE, SLUICE_OP_RENEW, 3, 1, &notice, 0, 1,
         SLUICE_WHEN_DENIED, 1, 0, 0, SLUICE_FOLD_NOTE, SLUICE_TTL_OF(1)},
        {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 3, 1, &notice, 0, 1,
         SLUICE_WHEN_DENIED, 2, 0, 0, SLUICE_FOLD_NOTE, SLUICE_TTL_OF(1)},
        {SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 0, 1, &pen, 0, 0,
         SLUICE_WHEN_ALLOWED, 2, SLUICE_WHEN_ALLOWED, 0, SLUICE_FOLD_NOTE}};
    sluice_program p = {4, k, 5, st, 0};
    sluice_op debt = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[2], &g[1],
                      3000000, 0};
    sluice_verdict v;
    rt_tag(tag, sizeof tag, "grid");
    for (i = 0; i < 4; i++) {
      snprintf(names[i], sizeof names[i], "{%s}:%d", tag, i);
      k[i].data = names[i];
      k[i].len = strlen(names[i]);
    }
    c = raw(rt_port_of(s, names[0]));
    /* the key's TAT 3 s ahead: a point then moves it by a us */
    cr_assert_eq(store_op(s, &debt, 0, &v), SLUICE_OK);
    cr_assert(v.allowed);
    for (i = 0; i < 8; i++) {
      sluice_program_result res;
      if (i == 4) {
        sluice_op trip = {SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 1, &k[0], &pen,
                          1, 0};
        cr_assert_eq(store_op(s, &trip, 0, &v), SLUICE_OK);
      }
      cr_assert_eq(store_prog(s, &p, 0, &res), SLUICE_OK, "%s: %s",
                   engines[e], sluice_store_errmsg(s));
      cr_assert_eq(res.allowed, i < 4, "%s: call %d allowed", engines[e], i);
      for (j = 0; j < 4; j++) {
        int64_t exp;
        long long at;
        deadline_of(c, names[j], &at, &exp);
        if (at == -2) /* no record (the notice before a denial) */
          continue;
        cr_assert_eq(at, sluice_wire_deadline_ms(exp),
                     "%s: call %d: key %d: deadline %lld ms, the grid's of "
                     "its expiry %ld ns is %ld ms", engines[e], i, j, at,
                     (long)exp, (long)sluice_wire_deadline_ms(exp));
        cr_assert_geq((int64_t)at * 1000000, exp);
      }
    }
    redisFree(c);
    sluice_store_close(s);
  }
}

/* The Lua keeps the PXAT argument of the last two grid steps it wrote
** (entry.lua, pxat): writes that move their keys' expiries across steps,
** in an order that meets the newer step, the older one and a third, each
** key's deadline the grid's of the expiry it carries.  A and C move alike
** (5 s a point), B 50 s ahead of them, so A, B, C meet the cache's newer
** entry, its older one and a miss, round after round. */
Test(store, deadlines_kept_for_two_steps) {
  static const sluice_gcra_params g = {1, 5 * SEC, 1000};
  static const char *const engines[] = {"engine=lua", "engine=script"};
  int e, i, j;
  for (e = 0; e < 2; e++) {
    sluice_store *s = rt_store(engines[e], 0);
    char tag[64], names[3][96];
    sluice_key k[3];
    redisContext *c;
    sluice_verdict v;
    rt_tag(tag, sizeof tag, "dl2");
    for (j = 0; j < 3; j++) {
      snprintf(names[j], sizeof names[j], "{%s}:%c", tag, 'a' + j);
      k[j].data = names[j];
      k[j].len = strlen(names[j]);
    }
    c = raw(rt_port_of(s, names[0]));
    {
      sluice_op ahead = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[1], &g, 10,
                         0};
      cr_assert_eq(store_op(s, &ahead, 0, &v), SLUICE_OK);
    }
    for (i = 0; i < 12; i++)
      for (j = 0; j < 3; j++) {
        /* a, b, c, then c, b, a: either entry of the cache meets the
        ** step a key's write lands in */
        int w = i % 2 ? 2 - j : j;
        sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[w], &g, 1,
                        0};
        int64_t exp;
        long long at;
        cr_assert_eq(store_op(s, &op, 0, &v), SLUICE_OK, "%s: %s",
                     engines[e], sluice_store_errmsg(s));
        cr_assert(v.allowed);
        deadline_of(c, names[w], &at, &exp);
        cr_assert_eq(at, sluice_wire_deadline_ms(exp),
                     "%s: round %d: key %c: deadline %lld ms, the grid's of "
                     "its expiry %ld ns is %ld ms", engines[e], i, 'a' + w, at,
                     (long)exp, (long)sluice_wire_deadline_ms(exp));
      }
    redisFree(c);
    sluice_store_close(s);
  }
}

/* A standard request whose buckets' expiries stay in one grid step keeps
** their TTLs: eight requests whose buckets move by a us each (their TATs
** 3 s ahead) set no expiry, whichever engine wrote the records before. */
static sluice_store *keep_store;
static const sluice_gcra_params keep_g[2] = {{1000000, SEC, 4000000},
                                             {1000000, SEC, 4000000}};
static void keep_requests(sluice_store *s, const char *key) {
  static const sluice_penalty_params pen = {
      3, 10 * SEC, {SEC, 60 * SEC, SLUICE_FOREVER}, 3600 * SEC};
  char names[3][128];
  sluice_key k[3];
  sluice_step st[2] = {
      {SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &pen},
      {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, 2, keep_g, 1, 0,
       SLUICE_WHEN_PASSED, 0}};
  sluice_program p = {3, k, 2, st, 0};
  int i;
  (void)s;
  for (i = 0; i < 3; i++) {
    snprintf(names[i], sizeof names[i], "%s%s", key, i == 0 ? ":box"
                                                     : i == 1 ? ""
                                                              : ":k");
    k[i].data = names[i];
    k[i].len = strlen(names[i]);
  }
  for (i = 0; i < 8; i++) {
    sluice_program_result res;
    cr_assert_eq(store_prog(keep_store, &p, 0, &res), SLUICE_OK, "%s",
                 sluice_store_errmsg(keep_store));
    cr_assert(res.allowed);
  }
}

Test(store, standard_requests_keep_ttl_within_a_grid_step) {
  static const char *const engines[] = {"engine=lua", "engine=script",
                                        "engine=module"};
  int ne = strstr(rt_engine(NULL), "module") ? 3 : 2, e, w, sets, expires;
  for (w = 0; w < ne; w++)
    for (e = 0; e < 2; e++) {
      sluice_store *s = rt_store(engines[w], 0);
      char tag[64], key[96];
      sluice_op debt = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, NULL,
                        keep_g, 3000000, 0};
      sluice_key k;
      sluice_verdict v;
      rt_tag(tag, sizeof tag, "kstd");
      snprintf(key, sizeof key, "{%s}:%d%d", tag, w, e);
      /* the bucket's TAT 3 s ahead, written by engine w */
      k.data = key;
      k.len = strlen(key);
      debt.keys = &k;
      cr_assert_eq(store_op(s, &debt, 0, &v), SLUICE_OK);
      sluice_store_close(s);
      keep_store = rt_store(engines[e], 0);
      key_events(keep_store, key, keep_requests, &sets, &expires);
      cr_assert_eq(sets, 8, "%s after %s: eight writes (%d)", engines[e],
                   engines[w], sets);
      /* (one if the expiry crossed a grid step: a chance of 2e-6) */
      cr_assert_leq(expires, 1, "%s after %s: %d expiries set", engines[e],
                    engines[w], expires);
      sluice_store_close(keep_store);
    }
}

/* The library keeps compiled programs, keyed by the call's bytes: two
** programs that differ only after their first step, run in turns at
** server time, each get their own (a bucket of 2 refuses the third call,
** one of 50 admits all five). */
Test(store, compiled_programs_are_their_own) {
  static const char *const engines[] = {"engine=lua", "engine=script"};
  static const sluice_penalty_params pen = {
      3, 10 * SEC, {SEC, 60 * SEC, SLUICE_FOREVER}, 3600 * SEC};
  static const sluice_gcra_params small = {1, 3600 * SEC, 2},
                                  large = {1, 3600 * SEC, 50};
  int e, i, w;
  for (e = 0; e < 2; e++) {
    sluice_store *s = rt_store(engines[e], 0);
    char tag[64], names[2][2][96];
    sluice_key k[2][2];
    rt_tag(tag, sizeof tag, "cprog");
    for (w = 0; w < 2; w++)
      for (i = 0; i < 2; i++) {
        snprintf(names[w][i], sizeof names[w][i], "{%s}:%d:%d", tag, w, i);
        k[w][i].data = names[w][i];
        k[w][i].len = strlen(names[w][i]);
      }
    for (i = 0; i < 5; i++) {
      for (w = 0; w < 2; w++) {
        sluice_step st[2] = {
            {SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &pen},
            {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, 1, w ? &large : &small,
             1, 0, SLUICE_WHEN_PASSED, 0}};
        sluice_program p = {2, k[w], 2, st, 0};
        sluice_program_result res;
        cr_assert_eq(store_prog(s, &p, 0, &res), SLUICE_OK, "%s: %s",
                     engines[e], sluice_store_errmsg(s));
        cr_assert_eq(res.allowed, w == 1 || i < 2,
                     "%s: program %d, call %d: allowed %d", engines[e], w, i,
                     res.allowed);
        cr_assert_eq(res.v[1].limit, w ? 50 : 2, "%s: program %d: limit",
                     engines[e], w);
      }
    }
    sluice_store_close(s);
  }
}

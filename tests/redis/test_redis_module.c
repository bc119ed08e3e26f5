/*
** The Redis module (backends/redis/module) where the script and the module
** part ways: which engine each node of a mixed cluster runs, engine=module
** against a node without it, Redis Cluster's routing of SLUICE.RUN, and the
** records a replica and an AOF reload hold (the module replicates effects:
** SET ... PXAT / DEL, never the command).  The C-vs-Lua differential and
** the conformance suite run against the module through the harness's
** --module/--engine (tests/redis/meson.build, suite redis-module).
*/
#include <hiredis/hiredis.h>
#include <unistd.h>

#include "redis_test.h"
#include "../common/units.h"
#include "wire.h" /* backends/redis/wire.h */

static redisContext *raw(int port) {
  struct timeval tv = {10, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  cr_assert(c && !c->err, "raw connect %d", port);
  return c;
}

/* A command's reply as text ("" for nil, the number for an integer). */
static void raw_text(redisContext *c, char *out, size_t n, const char *fmt,
                     ...) {
  va_list ap;
  redisReply *r;
  va_start(ap, fmt);
  r = redisvCommand(c, fmt, ap);
  va_end(ap);
  cr_assert(r, "raw command failed: %s", c->errstr);
  if (r->type == REDIS_REPLY_INTEGER)
    snprintf(out, n, "%lld", r->integer);
  else if (r->type == REDIS_REPLY_NIL)
    snprintf(out, n, "%s", "");
  else
    snprintf(out, n, "%.*s", (int)r->len, r->str ? r->str : "");
  freeReplyObject(r);
}

static int on_list(const char *list, int port) {
  char pat[16];
  size_t n = (size_t)snprintf(pat, sizeof pat, "%d", port);
  const char *p = list;
  while (p && *p) {
    if (strncmp(p, pat, n) == 0 && (p[n] == ',' || p[n] == '\0'))
      return 1;
    p = strchr(p, ',');
    if (p)
      p++;
  }
  return 0;
}

/* calls= of one command in INFO commandstats (0 when never called). */
static long calls_of(int port, const char *cmd) {
  redisContext *c = raw(port);
  long n = rt_cmd_calls(c, cmd);
  redisFree(c);
  return n;
}

/* ------------------------------------------------------ records made --- */

#define NREC 6
typedef struct recs {
  char key[NREC][96];
  /* As read back: the value, its length, PEXPIRETIME. */
  unsigned char val[NREC][32];
  size_t len[NREC];
  long long pexp[NREC];
} recs;

/* One record of each kind under one hash tag, on the server's clock:
** buckets, a window, a strike, a lease; the window counted twice, so that
** its second write (the same window, the same expiry) rewrites the record
** in place, replicated as SET ... KEEPTTL. */
static void make_records(sluice_store *s, const char *tag, recs *R) {
  static const sluice_gcra_params g = {1, 3600 * SEC, 50};
  static const sluice_window_params w = {100, 3600 * SEC};
  static const sluice_penalty_params pen = {
      3, 3600 * SEC, {60 * SEC, 600 * SEC, SLUICE_FOREVER}, 7200 * SEC};
  static const sluice_lease_params lp = {1, 600 * SEC};
  sluice_verdict v;
  sluice_key k[NREC];
  int i;
  for (i = 0; i < NREC; i++) {
    snprintf(R->key[i], sizeof R->key[i], "m%d:%s", i, tag);
    k[i].data = R->key[i];
    k[i].len = strlen(R->key[i]);
  }
  for (i = 0; i < 3; i++) {
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[i], &g, i + 1,
                    0};
    cr_assert_eq(sluice_store_apply(s, &op, 0, &v), SLUICE_OK, "%s",
                 sluice_store_errmsg(s));
  }
  {
    sluice_op op = {SLUICE_ALGO_FWINDOW, SLUICE_OP_COUNT, 1, &k[3], &w, 7, 0};
    cr_assert_eq(sluice_store_apply(s, &op, 0, &v), SLUICE_OK);
    cr_assert_eq(sluice_store_apply(s, &op, 0, &v), SLUICE_OK);
  }
  {
    sluice_op op = {SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 1, &k[4], &pen, 1,
                    0};
    cr_assert_eq(sluice_store_apply(s, &op, 0, &v), SLUICE_OK);
  }
  {
    sluice_op op = {SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, 1, &k[5], &lp, 1,
                    42};
    cr_assert_eq(sluice_store_apply(s, &op, 0, &v), SLUICE_OK);
    cr_assert(v.allowed);
  }
}

/* Read R's records from one server (a replica: readonly set). */
static void read_records(int port, int replica, recs *R) {
  redisContext *c = raw(port);
  int i;
  if (replica) {
    redisReply *r = redisCommand(c, "READONLY");
    freeReplyObject(r);
  }
  for (i = 0; i < NREC; i++) {
    redisReply *r = redisCommand(c, "GET %s", R->key[i]);
    cr_assert(r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL),
              "GET %s on %d", R->key[i], port);
    R->len[i] = r->type == REDIS_REPLY_STRING ? r->len : 0;
    cr_assert_leq(R->len[i], sizeof R->val[i]);
    memcpy(R->val[i], r->str ? r->str : "", R->len[i]);
    freeReplyObject(r);
    r = redisCommand(c, "PEXPIRETIME %s", R->key[i]);
    cr_assert(r && r->type == REDIS_REPLY_INTEGER);
    R->pexp[i] = r->integer;
    freeReplyObject(r);
  }
  redisFree(c);
}

static void same_records(const recs *a, const recs *b, const char *what) {
  int i;
  for (i = 0; i < NREC; i++) {
    cr_assert_eq(a->len[i], 25, "%s: %s is a record (%zu bytes)", what,
                 a->key[i], a->len[i]);
    cr_assert_eq(b->len[i], a->len[i], "%s: %s: %zu bytes, want %zu", what,
                 a->key[i], b->len[i], a->len[i]);
    cr_assert(memcmp(a->val[i], b->val[i], a->len[i]) == 0,
              "%s: %s: the value differs", what, a->key[i]);
    cr_assert_eq(b->pexp[i], a->pexp[i], "%s: %s: PEXPIRETIME %lld != %lld",
                 what, a->key[i], b->pexp[i], a->pexp[i]);
  }
}

/* The port of the first replica of the master on `port`. */
static int replica_of(int port) {
  char info[4096];
  redisContext *c = raw(port);
  const char *p;
  raw_text(c, info, sizeof info, "INFO replication");
  redisFree(c);
  p = strstr(info, "slave0:");
  cr_assert(p, "master %d has a replica", port);
  p = strstr(p, "port=");
  cr_assert(p);
  return atoi(p + 5);
}

static void wait_replicas(int port) {
  char n[32];
  redisContext *c = raw(port);
  raw_text(c, n, sizeof n, "WAIT 1 5000");
  redisFree(c);
  cr_assert_geq(atoi(n), 1, "a replica acknowledged the writes");
}

/* --------------------------------------------------------- engines --- */

/* Mixed cluster (the harness loads the module into some masters only):
** engine=auto asks each node and runs the module where it is, the script
** elsewhere; engine=module refuses to open rather than run the script. */
Test(module, mixed_cluster_engine_per_node) {
  const char *mods = getenv("SLUICE_REDIS_MODULE_PORTS");
  static const sluice_gcra_params g = {10, SEC, 10};
  sluice_store *s, *bad = NULL;
  char tag[64], key[96], err[256], uri[512];
  long run0[3], lua0[3];
  int i, n, rc, with = 0, without = 0;
  if (!rt_is_cluster() || !mods || !*mods)
    cr_skip_test("needs a cluster with the module on some masters");
  for (n = 0; n < 3; n++) {
    run0[n] = calls_of(rt_port(n), "sluice.run");
    lua0[n] = calls_of(rt_port(n), "evalsha") + calls_of(rt_port(n), "fcall");
  }
  s = rt_store("engine=auto", 0);
  rt_tag(tag, sizeof tag, "mix");
  for (i = 0; i < 64; i++) { /* every master gets some */
    sluice_verdict v;
    sluice_key k;
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &g, 1, 0};
    snprintf(key, sizeof key, "{%d}%s", i, tag);
    k.data = key;
    k.len = strlen(key);
    cr_assert_eq(sluice_store_apply(s, &op, 0, &v), SLUICE_OK, "%s",
                 sluice_store_errmsg(s));
    cr_assert(v.allowed);
    (void)rt_port_of(s, key);
  }
  sluice_store_close(s);
  for (n = 0; n < 3; n++) {
    int port = rt_port(n);
    long run = calls_of(port, "sluice.run") - run0[n];
    long lua = calls_of(port, "evalsha") + calls_of(port, "fcall") - lua0[n];
    if (on_list(mods, port)) {
      cr_assert_gt(run, 0, "%d has the module: SLUICE.RUN ran there", port);
      cr_assert_eq(lua, 0, "%d has the module: no script ran there", port);
      with++;
    } else {
      cr_assert_gt(lua, 0, "%d has no module: the script ran there", port);
      cr_assert_eq(run, 0);
      without++;
    }
  }
  cr_assert(with > 0 && without > 0, "the cluster is mixed (%d/%d)", with,
            without);
  snprintf(uri, sizeof uri, "nodes=%s;engine=module;timeout_ms=3000",
           rt_nodes());
  rc = sluice_store_open(sluice_backend_find("redis"), uri, NULL, 0, &bad,
                          err, sizeof err);
  cr_assert_eq(rc, SLUICE_ENOTSUP, "engine=module with a master lacking it: %s",
               sluice_err_name(rc));
  cr_assert(strstr(err, "sluice module"), "the message says why: %s", err);
  cr_assert_null(bad);
}

/* A bad engine= value is refused at open. */
Test(module, engine_param_checked) {
  char uri[512], err[256];
  sluice_store *s = NULL;
  snprintf(uri, sizeof uri, "nodes=%s;engine=fast", rt_nodes());
  cr_assert_eq(sluice_store_open(sluice_backend_find("redis"), uri, NULL, 0,
                                  &s, err, sizeof err),
               SLUICE_EINVAL);
  cr_assert(strstr(err, "engine"), "%s", err);
}

/* Redis Cluster routes SLUICE.RUN by its keys (getkeys-api): a key on
** another node is MOVED, keys of two slots are CROSSSLOT. */
Test(module, cluster_routes_by_keys) {
  unsigned char nums[64];
  char out[256];
  redisContext *c;
  sluice_store *s;
  int i, home, other = 0;
  if (!rt_is_cluster() || !getenv("SLUICE_REDIS_MODULE"))
    cr_skip_test("needs a cluster with the module");
  memset(nums, 0, sizeof nums); /* a program of no steps (a read), now 0 */
  nums[8 * SLUICE_WIRE_NKEYS] = 1;
  s = rt_store("", 0);
  home = rt_port_of(s, "route-a");
  for (i = 0; !other && rt_port(i); i++)
    if (rt_port(i) != home &&
        on_list(getenv("SLUICE_REDIS_MODULE_PORTS"), rt_port(i)))
      other = rt_port(i);
  cr_assert_gt(other, 0);
  c = raw(other);
  raw_text(c, out, sizeof out, "SLUICE.RUN 1 %s %b", "route-a", nums,
           sizeof nums);
  cr_assert(strncmp(out, "MOVED ", 6) == 0, "got: %s", out);
  raw_text(c, out, sizeof out, "SLUICE.RUN 2 %s %s %b", "{x}a", "{y}b", nums,
           sizeof nums);
  cr_assert(strncmp(out, "CROSSSLOT", 9) == 0, "got: %s", out);
  redisFree(c);
  sluice_store_close(s);
}

/* ---------------------------------------------------- replication --- */

/* The module's writes reach the replica as SET ... PXAT / DEL: the
** replica holds the master's records byte for byte with the same expiry,
** and after a failover the promoted replica decides from them. */
Test(module, replica_holds_the_records, .timeout = 120) {
  static const sluice_gcra_params g = {1, 3600 * SEC, 50};
  sluice_store *s;
  recs on_master, on_replica, after;
  sluice_verdict v;
  sluice_key k;
  char tag[64], out[64];
  redisContext *c;
  int master, replica, i;
  if (!rt_is_cluster() || !getenv("SLUICE_REDIS_MODULE"))
    cr_skip_test("needs a cluster with replicas and the module");
  s = rt_store("engine=module;backoff_max_ms=100", 0);
  rt_tag(tag, sizeof tag, "rep");
  make_records(s, tag, &on_master);
  master = rt_port_of(s, on_master.key[0]);
  replica = replica_of(master);
  wait_replicas(master);
  read_records(master, 0, &on_master);
  on_replica = after = on_master; /* the key names */
  read_records(replica, 1, &on_replica);
  same_records(&on_master, &on_replica, "replica");
  /* Promote the replica (a coordinated failover: nothing is lost). */
  c = raw(replica);
  raw_text(c, out, sizeof out, "CLUSTER FAILOVER");
  cr_assert_str_eq(out, "OK");
  for (i = 0;; i++) {
    char info[2048];
    cr_assert_lt(i, 600, "replica %d promoted", replica);
    raw_text(c, info, sizeof info, "INFO replication");
    if (strstr(info, "role:master"))
      break;
    usleep(50000);
  }
  redisFree(c);
  read_records(replica, 0, &after);
  same_records(&on_master, &after, "promoted replica");
  /* The store finds the new master, and the first bucket still has the
  ** point it spent (no refill to speak of in an hour-long period). */
  k.data = on_master.key[0];
  k.len = strlen(on_master.key[0]);
  {
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &g, 0, 0};
    int rc = SLUICE_EUNAVAIL;
    /* Up to 30 s: on a loaded 2-core machine the cluster can take seconds
    ** to agree on the new slot owner (5 s failed one run in a full suite). */
    for (i = 0; i < 600 && rc != SLUICE_OK; i++) {
      rc = sluice_store_apply(s, &op, 0, &v);
      if (rc != SLUICE_OK)
        usleep(50000);
    }
    cr_assert_eq(rc, SLUICE_OK, "the store reaches the promoted replica: %s",
                 sluice_strerror(rc));
    cr_assert_eq(rt_port_of(s, on_master.key[0]), replica);
    cr_assert_eq(v.remaining, 49, "the first bucket spent 1 of 50: %ld",
                 (long)v.remaining);
  }
  sluice_store_close(s);
}

/* ------------------------------------------------------------ AOF --- */

static void aof_settled(redisContext *c) {
  int i;
  for (i = 0;; i++) {
    char info[4096];
    cr_assert_lt(i, 400, "AOF rewrite finished");
    raw_text(c, info, sizeof info, "INFO persistence");
    if (strstr(info, "aof_enabled:1") &&
        strstr(info, "aof_rewrite_in_progress:0") &&
        strstr(info, "aof_rewrite_scheduled:0"))
      return;
    usleep(25000);
  }
}

/* The AOF holds the module's effects: replaying it (DEBUG LOADAOF), and
** after a rewrite (BGREWRITEAOF), gives back the same records. */
Test(module, aof_reload_keeps_the_records, .timeout = 120) {
  sluice_store *s;
  recs before, replayed, rewritten;
  redisContext *c;
  char tag[64], out[128];
  int port;
  if (rt_is_cluster() || !getenv("SLUICE_REDIS_MODULE"))
    cr_skip_test("needs a single server with the module");
  port = rt_port(0);
  c = raw(port);
  raw_text(c, out, sizeof out, "CONFIG SET appendonly yes");
  cr_assert_str_eq(out, "OK");
  aof_settled(c);
  s = rt_store("engine=module", 0);
  rt_tag(tag, sizeof tag, "aof");
  make_records(s, tag, &before);
  read_records(port, 0, &before);
  replayed = rewritten = before; /* the key names */
  /* Replay the AOF as it is: the base plus the effects appended since. */
  raw_text(c, out, sizeof out, "DEBUG LOADAOF");
  cr_assert_str_eq(out, "OK");
  read_records(port, 0, &replayed);
  same_records(&before, &replayed, "AOF replay");
  raw_text(c, out, sizeof out, "BGREWRITEAOF");
  aof_settled(c);
  raw_text(c, out, sizeof out, "DEBUG LOADAOF");
  cr_assert_str_eq(out, "OK");
  read_records(port, 0, &rewritten);
  same_records(&before, &rewritten, "AOF rewrite");
  raw_text(c, out, sizeof out, "CONFIG SET appendonly no");
  redisFree(c);
  sluice_store_close(s);
}

/* ------------------------------------------------- hostile callers --- */

/* A call's numbers: a program's header (the server's clock unless
** nh >= 0), then one step of algorithm algo consuming one GCRA bucket;
** its length in bytes. */
#define HOSTILE_NUMS (SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP + 3)
static size_t hostile_nums(unsigned char *b, int64_t algo, int64_t nh,
                           int64_t nl, int64_t min_ttl_ms) {
  int64_t x[HOSTILE_NUMS] = {0};
  int i;
  x[SLUICE_WIRE_NKEYS] = 1;
  x[SLUICE_WIRE_NSTEPS] = 1;
  x[SLUICE_WIRE_NOW_HI] = nh;
  x[SLUICE_WIRE_NOW_LO] = nl;
  x[SLUICE_WIRE_MIN_TTL_MS] = min_ttl_ms;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_ALGO] = algo;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_KIND] = SLUICE_OP_CONSUME;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_NKEYS] = 1;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_ARG] = 1;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP_NPARAMS] = 3;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP] = 10;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP + 1] = SEC;
  x[SLUICE_WIRE_HEADER + SLUICE_WIRE_STEP + 2] = 10;
  for (i = 0; i < HOSTILE_NUMS; i++) {
    uint64_t u = (uint64_t)x[i];
    int k;
    for (k = 0; k < 8; k++)
      b[8 * i + k] = (unsigned char)(u >> (8 * k));
  }
  return 8 * HOSTILE_NUMS;
}

/* What a key holds, for "left unchanged": TYPE, its value if a string,
** PEXPIRETIME. */
static void key_state(redisContext *c, const char *key, char *out, size_t n) {
  char type[32], val[64], exp[32];
  raw_text(c, type, sizeof type, "TYPE %s", key);
  if (strcmp(type, "string") == 0)
    raw_text(c, val, sizeof val, "GET %s", key);
  else
    val[0] = '\0';
  raw_text(c, exp, sizeof exp, "PEXPIRETIME %s", key);
  snprintf(out, n, "%s|%s|%s", type, val, exp);
}

/* The keys of the hostile calls, and their numbers. */
enum { H_LIST, H_HASH, H_STR, H_REC, H_NONE, H_NK };
enum { N_OK, N_CUT, N_JUNK, N_TTL, N_TTL_CLOCK, N_ALGO, N_LO, N_NONE };

/* A caller sharing the server can send anything: each call here answers
** an error, the server stays up, and no key changes.  Among them, numbers
** outside wire.h's ranges that the module used to cut down and run: a
** least TTL so large that now + TTL overflowed (the record stayed without
** TTL on the master, and its replicated SET ... PXAT was refused by every
** replica and by an AOF replay), an algorithm of 2^32 + 1 run as GCRA. */
Test(module, hostile_calls_answer_errors) {
  static const char *const keys[H_NK] = {"{h}list", "{h}hash", "{h}str",
                                         "{h}rec", "{h}none"};
  /* what, command, numkeys, keys (-1 ends), numbers, programs (0: 1) */
  static const struct {
    const char *what, *cmd, *nk;
    int key[4], nums, nprog;
  } calls[] = {
      {"no arguments", "SLUICE.RUN", NULL, {-1}, N_NONE},
      {"numkeys not a number", "SLUICE.RUN", "x", {H_NONE, -1}, N_OK},
      {"more keys than arguments", "SLUICE.RUN", "3", {H_NONE, -1}, N_OK},
      {"numbers not a multiple of 8 bytes", "SLUICE.RUN", "1",
       {H_NONE, -1}, N_CUT},
      {"binary junk", "SLUICE.RUN", "1", {H_NONE, -1}, N_JUNK},
      {"a list", "SLUICE.RUN", "1", {H_LIST, -1}, N_OK},
      {"a hash", "SLUICE.RUN", "1", {H_HASH, -1}, N_OK},
      {"a string not a record", "SLUICE.RUN", "1", {H_STR, -1}, N_OK},
      {"a key twice", "SLUICE.RUN", "2", {H_REC, H_REC, -1}, N_OK},
      {"least TTL INT64_MAX", "SLUICE.RUN", "1", {H_NONE, -1}, N_TTL},
      {"least TTL INT64_MAX, test clock", "SLUICE.RUN", "1",
       {H_NONE, -1}, N_TTL_CLOCK},
      {"algorithm 2^32 + 1", "SLUICE.RUN", "1", {H_NONE, -1}, N_ALGO},
      {"test clock lo 2^32", "SLUICE.RUN", "1", {H_NONE, -1}, N_LO},
      /* A call of n programs runs none unless their records add up. */
      {"two programs, the records of one", "SLUICE.RUN", "1", {H_NONE, -1},
       N_OK, 2},
      {"two programs, one malformed", "SLUICE.RUN", "2", {H_NONE, H_REC, -1},
       N_CUT, 2},
      {"two programs, a record too many", "SLUICE.RUN", "3",
       {H_NONE, H_REC, H_LIST, -1}, N_OK, 2},
      {"junk from a script", "EVAL", NULL, {H_NONE, -1}, N_JUNK},
  };
  static const char script[] =
      "return redis.call('SLUICE.RUN', '1', KEYS[1], ARGV[1])";
  unsigned char nums[N_NONE][8 * HOSTILE_NUMS];
  size_t len[N_NONE];
  char before[H_NK][160], after[160], out[256];
  redisContext *c;
  size_t i;
  int k;
  if (rt_is_cluster() || !getenv("SLUICE_REDIS_MODULE"))
    cr_skip_test("needs a single server with the module");
  len[N_OK] = hostile_nums(nums[N_OK], SLUICE_ALGO_GCRA, -1, 0, 0);
  len[N_CUT] = hostile_nums(nums[N_CUT], SLUICE_ALGO_GCRA, -1, 0, 0) - 3;
  len[N_JUNK] = 40;
  memset(nums[N_JUNK], 0xff, len[N_JUNK]);
  len[N_TTL] = hostile_nums(nums[N_TTL], SLUICE_ALGO_GCRA, -1, 0, INT64_MAX);
  len[N_TTL_CLOCK] =
      hostile_nums(nums[N_TTL_CLOCK], SLUICE_ALGO_GCRA, 0, 5, INT64_MAX);
  len[N_ALGO] = hostile_nums(nums[N_ALGO],
                             ((int64_t)1 << 32) + SLUICE_ALGO_GCRA, -1, 0, 0);
  len[N_LO] =
      hostile_nums(nums[N_LO], SLUICE_ALGO_GCRA, 0, (int64_t)1 << 32, 0);
  c = raw(rt_port(0));
  freeReplyObject(redisCommand(c, "DEL %s %s %s %s %s", keys[0], keys[1],
                               keys[2], keys[3], keys[4]));
  freeReplyObject(redisCommand(c, "RPUSH %s a", keys[H_LIST]));
  freeReplyObject(redisCommand(c, "HSET %s a b", keys[H_HASH]));
  freeReplyObject(redisCommand(c, "SET %s hello", keys[H_STR]));
  raw_text(c, out, sizeof out, "SLUICE.RUN 1 %s %b", keys[H_REC], nums[N_OK],
           len[N_OK]);
  cr_assert(*out && strncmp(out, "SLUICE", 6) != 0, "a record made: %s", out);
  for (k = 0; k < H_NK; k++)
    key_state(c, keys[k], before[k], sizeof before[k]);
  for (i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    const char *argv[8];
    size_t argl[8];
    int argc = 0;
    redisReply *r, *e;
#define ARG(p, n) (argv[argc] = (const char *)(p), argl[argc++] = (n))
    ARG(calls[i].cmd, strlen(calls[i].cmd));
    if (strcmp(calls[i].cmd, "EVAL") == 0) {
      ARG(script, strlen(script));
      ARG("1", 1);
    } else if (calls[i].nk) {
      ARG(calls[i].nk, strlen(calls[i].nk));
    }
    for (k = 0; calls[i].nk && calls[i].key[k] >= 0; k++)
      ARG(keys[calls[i].key[k]], strlen(keys[calls[i].key[k]]));
    if (!calls[i].nk && calls[i].key[0] >= 0)
      ARG(keys[calls[i].key[0]], strlen(keys[calls[i].key[0]]));
    if (calls[i].nums != N_NONE)
      ARG(nums[calls[i].nums], len[calls[i].nums]);
    for (k = 1; k < calls[i].nprog; k++) /* the others: well formed */
      ARG(nums[N_OK], len[N_OK]);
#undef ARG
    r = redisCommandArgv(c, argc, argv, argl);
    cr_assert(r, "%s: the connection holds (%s)", calls[i].what, c->errstr);
    e = r;
    cr_assert_eq(e->type, REDIS_REPLY_ERROR, "%s: an error reply (type %d)",
                 calls[i].what, e->type);
    freeReplyObject(r);
    raw_text(c, out, sizeof out, "PING");
    cr_assert_str_eq(out, "PONG", "%s: the server answers", calls[i].what);
    for (k = 0; k < H_NK; k++) {
      key_state(c, keys[k], after, sizeof after);
      cr_assert_str_eq(after, before[k], "%s: %s unchanged", calls[i].what,
                       keys[k]);
    }
  }
  redisFree(c);
}

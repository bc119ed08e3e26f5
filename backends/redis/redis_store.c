/*
** Redis store: the same limits across a fleet.
**
** State lives in Redis, one key per record, and each step runs inside
** Redis as a Lua script (in lua/), a port of lib/algo over the same
** 16-byte records, so a decision is atomic where the state lives and there
** is one truth per algorithm.  The C side only routes, pipelines and maps failures; it never
** decides.
**
** Routing.  A Redis Cluster shards keys by CRC16(hash tag) mod 16384.  The
** store keeps a slot -> master map loaded with CLUSTER SLOTS from any known
** node, follows MOVED (patching the slot at once and reloading the map on
** the next call) and ASK (one ASKING'd retry, no map change).  A server
** without cluster support answers CLUSTER SLOTS with an error; it is then
** used for every slot.  Every key of a group carries the same hash tag (the
** core validates that), so an operation is one EVALSHA on one node.
**
** Round trips.  Operations are pipelined per node: a batch writes every
** node's commands before reading any reply, so it costs one round trip per
** node touched, and a single decision costs one.  A reply that says the
** script did not run (NOSCRIPT, MOVED, ASK, TRYAGAIN) is retried in a later
** round; NOSCRIPT first reloads the script on that node (after a restart, a
** failover or SCRIPT FLUSH).
**
** Failure.  A connection error or a timeout after a command was written
** means the script may or may not have run: it is never retried (a retry
** could charge twice) and the caller gets SLUICE_ETIMEDOUT or
** SLUICE_EUNAVAIL, which the policy layer turns into fail-closed or
** degraded answers.  The connection is dropped (a late reply must not be
** read as the answer to the next command), the slot map marked stale, and
** reconnection to that node is held back by an exponential backoff so that
** a dead node costs the caller nothing but an immediate error.
**
** Choices:
**  a) Records are 25-byte strings (wire.h): the record, its expiry in ns
**     and the layout byte.  The expiry in the value makes "expired =
**     fresh" exact under any clock (the Redis TTL, rounded up to the ms,
**     only collects).
**  b) Lanes: hiredis contexts are not thread-safe, so a store is `pool`
**     copies of its routing state, each with its own connections and
**     mutex; a thread keeps to one lane while it is free and takes any
**     idle one when it is not (lane_lock).  Lanes share only the
**     configuration; connections are made on first use.
**  c) Fork: a marker page mapped MADV_WIPEONFORK reads zero in a child
**     (getpid() against the pid recorded at open where that is missing);
**     a child drops (frees without writing) every inherited context and
**     reconnects, so a prefork parent and its workers never share a
**     socket, and the common case costs no system call.
**  d) With wait_replicas=N every round trip ends with WAIT N; when fewer
**     replicas acknowledged, the results of that round trip are reported
**     as SLUICE_EUNAVAIL, so an admission the caller saw cannot be lost in
**     a failover (Redis replication is otherwise asynchronous).
**  e) Connecting (TCP, unix socket, TLS, AUTH, SELECT) and moving bytes
**     over TLS live in redis_conn.c.  A store opens even when no seed
**     answers; every call then asks for the slot map again (cheaply: each
**     seed backs off), so the store recovers on its own.
*/
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "backends.h"
#include "redis_conn.h"
#include "store.h"
#include "sluice.h"
#include <sluice/sluice_redis.h>
#include "sluice_rcl_script.h"
#include "wire.h"

#define RCL_SLOTS 16384
#define RCL_MAX_NODES 64
#define RCL_NO_NODE 0xff
#define RCL_ROUNDS 6
#define RCL_STACK_JOBS 8
/* Most argv entries one call needs: EVALSHA sha numkeys, a program's 48
** keys, the numbers as one argument (see arg_int) and a batch's marker. */
#define RCL_MAX_ARGS (3 + SLUICE_PROGRAM_KEYS + 2)
/* A batch script call carries at most this many single-bucket GCRA
** decisions (lua/dispatch.lua, "A batch"). */
#define RCL_BATCH_MAX SLUICE_GROUP_MAX
/* A program's numbers: the header, then per step its numbers and its
** parameters (at most a GCRA group's per key). */
#define RCL_PROG_NUMS                                                          \
  (SLUICE_WIRE_HEADER +                                                        \
   SLUICE_PROGRAM_STEPS *                                                      \
       (SLUICE_WIRE_STEP + SLUICE_WIRE_GCRA_PARAMS * SLUICE_GROUP_MAX))
#define RCL_BATCH_NUMS (SLUICE_WIRE_BATCH_MEMBER * RCL_BATCH_MAX)
#define RCL_MAX_NUMS                                                           \
  (RCL_PROG_NUMS > RCL_BATCH_NUMS ? RCL_PROG_NUMS : RCL_BATCH_NUMS)
#define RCL_PREFIX_MAX 64
/* Test mode keeps records at least this long in Redis (the manual clock
** may stand still while real time passes; the stored expiry decides). */
#define RCL_TEST_MIN_TTL_MS 86400000
/* Most lanes (connection sets) a store keeps, and the default. */
#define RCL_POOL_MAX 64
#define RCL_POOL_DEFAULT 8

typedef struct rcl_node {
  char host[64];
  int port;           /* 0: the unix socket of rcl_conf */
  redisContext *c;
  struct ssl_st *tls; /* the TLS session on c's descriptor, or NULL */
  int64_t retry_at;   /* monotonic ns: no reconnect before */
  int backoff_ms;
  int module;         /* this connection runs SLUICE.RUN, not the script */
} rcl_node;

/* engine=: which of the two runs the steps on a node (see node_engine). */
enum { RCL_ENGINE_AUTO, RCL_ENGINE_MODULE, RCL_ENGINE_LUA };

typedef struct rcl_store {
  sluice_store base;
  pthread_mutex_t mu;
  /* A store is a set of lanes, each a full copy of the routing state with
  ** its own connections and mutex, so threads deciding at once do not
  ** queue on one socket (see lane_lock).  The store the core holds is
  ** lane 0 and owns the others, the configuration and the marker page. */
  struct rcl_store **lanes; /* lane 0 only: nlanes entries, [0] = itself */
  int nlanes;
  struct rcl_store *home;   /* lane 0 */
  rcl_conf *conf;           /* shared, read-only after open */
  char *url_params;         /* lane 0: a redis:// URL rewritten (or NULL) */
  size_t url_params_len;
  int hard_rc;              /* a node answered and refused us: the code */
  int map_ok;               /* a slot map was ever loaded */
  pid_t pid;
  /* A page the kernel zeroes in a forked child (MADV_WIPEONFORK): reading
  ** it tells "same process" without a getpid() system call per decision.
  ** NULL where unsupported; then getpid() is compared on every call. */
  volatile unsigned char *fork_page;
  int timeout_ms, connect_timeout_ms, backoff_max_ms;
  int wait_replicas;
  int testclock, readonly;
  int engine; /* RCL_ENGINE_* */
  int cluster;
  int map_stale;
  int64_t map_loaded_at;
  int nnodes;
  int refresh_cursor;
  rcl_node nodes[RCL_MAX_NODES];
  uint8_t slot_node[RCL_SLOTS];
  uint16_t crc_tab[256];
  char prefix[RCL_PREFIX_MAX];
  size_t prefix_len;
  sluice_redis_stats st;
  struct rcl_cmd *cmd; /* scratch for building commands, under mu */
} rcl_store;

/* One unit of work in a pipeline. */
enum { JOB_APPLY, JOB_GET, JOB_DEL, JOB_RUN };
typedef struct rcl_job {
  int type;
  const sluice_op *op;      /* JOB_APPLY */
  const sluice_program *prog;  /* JOB_RUN */
  sluice_program_result *res;  /* JOB_RUN */
  const sluice_key *key;    /* JOB_GET, JOB_DEL */
  sluice_verdict *v;
  sluice_state *st_out;     /* JOB_GET */
  int64_t *exp_out;         /* JOB_GET */
  int64_t now;              /* the caller's time (test mode) */
  int rc;
  int pending;
  int slot;
  int node;                 /* node this round */
  int ask_node;             /* -1, or the ASK target for the next round */
  int sent;
  int batch;                /* this round: 0 own command; n > 0 leads a
                               batch script call of n jobs; -1 a member */
  int bnext;                /* next member of the batch, -1 at the end */
} rcl_job;

/* ------------------------------------------------------------ helpers --- */

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void crc_init(rcl_store *r) {
  int i, j;
  for (i = 0; i < 256; i++) {
    uint16_t c = (uint16_t)(i << 8);
    for (j = 0; j < 8; j++)
      c = (uint16_t)((c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1);
    r->crc_tab[i] = c;
  }
}

/* Redis Cluster key slot: CRC16-XMODEM of the hash tag (the bytes between
** the first '{' and the next '}', when non-empty), else of the whole key. */
static int key_slot(const rcl_store *r, const char *k, size_t len) {
  size_t i, j, off = 0, n = len;
  uint16_t crc = 0;
  for (i = 0; i < len && k[i] != '{'; i++)
    ;
  if (i < len) {
    for (j = i + 1; j < len && k[j] != '}'; j++)
      ;
    if (j < len && j > i + 1) {
      off = i + 1;
      n = j - i - 1;
    }
  }
  for (i = 0; i < n; i++)
    crc = (uint16_t)((crc << 8) ^
                     r->crc_tab[((crc >> 8) ^ (uint8_t)k[off + i]) & 0xff]);
  return crc & (RCL_SLOTS - 1);
}

static int jkey_slot(const rcl_store *r, const sluice_key *k) {
  /* The prefix holds no braces, so a tagged key keeps its slot; an untagged
  ** key hashes over prefix + key, which is what Redis sees. */
  char buf[RCL_PREFIX_MAX + SLUICE_KEY_MAX];
  memcpy(buf, r->prefix, r->prefix_len);
  memcpy(buf + r->prefix_len, k->data, k->len);
  return key_slot(r, buf, r->prefix_len + k->len);
}

static int find_node(rcl_store *r, const char *host, size_t hlen, int port,
                     int add) {
  int i;
  if (hlen == 0 || hlen >= sizeof r->nodes[0].host || port <= 0 ||
      port > 65535)
    return -1;
  for (i = 0; i < r->nnodes; i++)
    if (r->nodes[i].port == port && strlen(r->nodes[i].host) == hlen &&
        memcmp(r->nodes[i].host, host, hlen) == 0)
      return i;
  if (!add || r->nnodes >= RCL_MAX_NODES)
    return -1;
  i = r->nnodes++;
  memset(&r->nodes[i], 0, sizeof r->nodes[i]);
  memcpy(r->nodes[i].host, host, hlen);
  r->nodes[i].host[hlen] = '\0';
  r->nodes[i].port = port;
  return i;
}

static void node_drop(rcl_node *n) {
  /* Nothing is written (rcl_link_close), which is what makes this safe on
  ** a connection inherited across fork(). */
  rcl_link_close(&n->c, &n->tls);
}

static void fork_check(rcl_store *r) {
  pid_t p;
  int i;
  if (r->fork_page && r->fork_page[0])
    return;
  p = getpid();
  if (r->fork_page)
    r->fork_page[0] = 1; /* this process's mark, wiped again by a fork */
  if (p == r->pid)
    return;
  for (i = 0; i < r->nnodes; i++) {
    node_drop(&r->nodes[i]);
    r->nodes[i].retry_at = 0;
    r->nodes[i].backoff_ms = 0;
  }
  r->pid = p;
}

/* A connection failed mid-command: drop it, and say which code applies. */
static int node_io_error(rcl_store *r, int ni, int saved_errno) {
  rcl_node *n = &r->nodes[ni];
  int timeout = n->c && n->c->err == REDIS_ERR_IO &&
                rcl_is_timeout_errno(saved_errno);
  int rc = timeout ? SLUICE_ETIMEDOUT : SLUICE_EUNAVAIL;
  sluice_store_seterr(&r->base, rc, n->c ? n->c->err : 0,
                      "redis %s:%d: %s (%s)", n->host, n->port,
                      timeout ? "timed out" : "connection lost",
                      n->c ? n->c->errstr : "no context");
  node_drop(n);
  r->map_stale = 1;
  return rc;
}

static int node_command(rcl_store *r, int ni, int argc, const char **argv,
                        const size_t *lens, redisReply **out);

/* Which engine a fresh connection uses.  engine=lua: the script.  Else ask
** the node whether it has the module (sluice_redis.so, backends/redis/
** module): COMMAND INFO answers a nil for an unknown command.  The answer
** belongs to the connection: each node of a cluster is asked for itself,
** so a cluster with the module on some nodes only works, and a node that
** restarts with or without it is asked again on reconnect.  A refusal
** (an ACL user without +command|info) counts as "no module".
** engine=module on a node without it: SLUICE_ENOTSUP, the connection
** dropped (a decision must not quietly run the script instead). */
static int node_engine(rcl_store *r, int ni) {
  static const char *const argv[3] = {"COMMAND", "INFO", "sluice.run"};
  static const size_t lens[3] = {7, 4, 10};
  rcl_node *n = &r->nodes[ni];
  redisReply *rep;
  int rc;
  n->module = 0;
  if (r->engine == RCL_ENGINE_LUA)
    return SLUICE_OK;
  rc = node_command(r, ni, 3, (const char **)argv, lens, &rep);
  if (rc != SLUICE_OK)
    return rc;
  n->module = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
              rep->element[0]->type == REDIS_REPLY_ARRAY;
  freeReplyObject(rep);
  if (n->module || r->engine == RCL_ENGINE_AUTO)
    return SLUICE_OK;
  node_drop(n);
  r->hard_rc = SLUICE_ENOTSUP;
  n->backoff_ms = r->backoff_max_ms;
  n->retry_at = mono_ns() + (int64_t)n->backoff_ms * 1000000;
  return sluice_store_seterr(&r->base, SLUICE_ENOTSUP, 0,
                             "redis %s:%d: engine=module, but the node has "
                             "no sluice module (load sluice_redis.so)",
                             n->host, n->port);
}

static int node_connect(rcl_store *r, int ni) {
  rcl_node *n = &r->nodes[ni];
  char why[200];
  int64_t now;
  int rc;
  if (n->c)
    return SLUICE_OK;
  now = mono_ns();
  if (now < n->retry_at)
    return sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                               "redis %s:%d: down, reconnect backing off",
                               n->host, n->port);
  rc = rcl_link_open(r->conf, n->port ? n->host : NULL, n->port, &n->c,
                     &n->tls, why, sizeof why);
  if (rc != SLUICE_OK) {
    r->st.connect_failures++;
    /* A refusal (AUTH, certificate, SELECT) is kept for open to report;
    ** a decision sees it as the node being unavailable. */
    if (rc != SLUICE_ETIMEDOUT && rc != SLUICE_EUNAVAIL) {
      r->hard_rc = rc;
      rc = SLUICE_EUNAVAIL;
    }
    sluice_store_seterr(&r->base, rc, 0, "redis %s:%d: %s", n->host, n->port,
                        why);
    n->backoff_ms = n->backoff_ms ? n->backoff_ms * 2 : 5;
    if (n->backoff_ms > r->backoff_max_ms)
      n->backoff_ms = r->backoff_max_ms;
    n->retry_at = now + (int64_t)n->backoff_ms * 1000000;
    return rc;
  }
  n->backoff_ms = 0;
  n->retry_at = 0;
  r->st.connects++;
  return node_engine(r, ni);
}

/* One command, one reply, on node ni (admin paths: slot map, SCRIPT LOAD). */
static int node_command(rcl_store *r, int ni, int argc, const char **argv,
                        const size_t *lens, redisReply **out) {
  void *rep = NULL;
  int rc = node_connect(r, ni), e;
  *out = NULL;
  if (rc != SLUICE_OK)
    return rc;
  redisAppendCommandArgv(r->nodes[ni].c, argc, argv, lens);
  errno = 0;
  if (rcl_link_reply(r->nodes[ni].c, r->nodes[ni].tls, &rep) != REDIS_OK ||
      !rep) {
    e = errno;
    return node_io_error(r, ni, e);
  }
  r->st.round_trips++;
  *out = rep;
  return SLUICE_OK;
}

static int load_script(rcl_store *r, int ni) {
  const char *argv[3] = {"SCRIPT", "LOAD", sluice_rcl_script};
  size_t lens[3] = {6, 4, sizeof sluice_rcl_script - 1};
  redisReply *rep;
  int rc = node_command(r, ni, 3, argv, lens, &rep);
  if (rc != SLUICE_OK)
    return rc;
  if (rep->type != REDIS_REPLY_STRING) {
    rc = sluice_store_seterr(&r->base, SLUICE_EBACKEND, 0,
                             "redis %s:%d: SCRIPT LOAD: %.80s",
                             r->nodes[ni].host, r->nodes[ni].port,
                             rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
  }
  freeReplyObject(rep);
  return rc;
}

/* ----------------------------------------------------------- slot map --- */

static int parse_slots(rcl_store *r, int ni, const redisReply *rep) {
  size_t i;
  uint8_t map[RCL_SLOTS];
  memset(map, RCL_NO_NODE, sizeof map);
  for (i = 0; i < rep->elements; i++) {
    const redisReply *e = rep->element[i], *m;
    long long a, b, s;
    int idx;
    const char *host;
    size_t hlen;
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER)
      return SLUICE_EBACKEND;
    m = e->element[2];
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
        m->element[0]->type != REDIS_REPLY_STRING ||
        m->element[1]->type != REDIS_REPLY_INTEGER)
      return SLUICE_EBACKEND;
    a = e->element[0]->integer;
    b = e->element[1]->integer;
    host = m->element[0]->str;
    hlen = m->element[0]->len;
    if (hlen == 0 || (hlen == 1 && host[0] == '?')) {
      /* Unknown endpoint: the node we asked, per the protocol. */
      host = r->nodes[ni].host;
      hlen = strlen(host);
    }
    idx = find_node(r, host, hlen, (int)m->element[1]->integer, 1);
    if (idx < 0 || a < 0 || b >= RCL_SLOTS || a > b)
      continue;
    for (s = a; s <= b; s++)
      map[s] = (uint8_t)idx;
  }
  memcpy(r->slot_node, map, sizeof map);
  return SLUICE_OK;
}

/* Load the slot map from the first node that answers, starting after the
** one used last time so that a dead node is not asked first forever. */
static int refresh_map(rcl_store *r, int max_tries) {
  const char *argv[2] = {"CLUSTER", "SLOTS"};
  size_t lens[2] = {7, 5};
  int tries, rc = SLUICE_EUNAVAIL;
  for (tries = 0; tries < r->nnodes && tries < max_tries; tries++) {
    int ni = (r->refresh_cursor + tries) % r->nnodes;
    redisReply *rep;
    rc = node_command(r, ni, 2, argv, lens, &rep);
    if (rc != SLUICE_OK)
      continue;
    if (rep->type == REDIS_REPLY_ERROR &&
        strstr(rep->str, "cluster support disabled")) {
      r->cluster = 0;
      memset(r->slot_node, ni, sizeof r->slot_node);
      rc = SLUICE_OK;
    } else if (rep->type == REDIS_REPLY_ARRAY) {
      r->cluster = 1;
      rc = parse_slots(r, ni, rep);
      if (rc != SLUICE_OK)
        sluice_store_seterr(&r->base, rc, 0, "redis: bad CLUSTER SLOTS reply");
    } else {
      /* NOAUTH, WRONGPASS, NOPERM: it answered and refused us. */
      if (rep->type == REDIS_REPLY_ERROR &&
          (strncmp(rep->str, "NOAUTH", 6) == 0 ||
           strncmp(rep->str, "NOPERM", 6) == 0 ||
           strncmp(rep->str, "WRONGPASS", 9) == 0))
        r->hard_rc = SLUICE_EPERM;
      rc = sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                               "redis %s:%d: CLUSTER SLOTS: %.80s",
                               r->nodes[ni].host, r->nodes[ni].port,
                               rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    }
    freeReplyObject(rep);
    if (rc == SLUICE_OK) {
      r->refresh_cursor = ni;
      r->map_ok = 1;
      r->map_stale = 0;
      r->map_loaded_at = mono_ns();
      r->st.refreshes++;
      return SLUICE_OK;
    }
  }
  r->refresh_cursor = (r->refresh_cursor + 1) % (r->nnodes ? r->nnodes : 1);
  return rc;
}

/* A stale map is reloaded at most every 50 ms: during a failover every
** call would otherwise pay for a refresh that cannot succeed yet.  A store
** opened while no seed answered has no map: every call asks for one (each
** seed's reconnect backoff keeps that cheap) until a seed answers. */
static void maybe_refresh(rcl_store *r) {
  if (!r->map_ok ||
      (r->cluster && r->map_stale &&
       mono_ns() - r->map_loaded_at > 50 * (int64_t)1000000))
    (void)refresh_map(r, 2);
}

/* -------------------------------------------------- command building --- */

typedef struct rcl_cmd {
  int argc;
  const char *argv[RCL_MAX_ARGS];
  size_t lens[RCL_MAX_ARGS];
  unsigned char nums[RCL_MAX_NUMS * 8];
  char numkeys[2];
  char keys[SLUICE_PROGRAM_KEYS][RCL_PREFIX_MAX + SLUICE_KEY_MAX];
  int nnum;
} rcl_cmd;

static void arg_raw(rcl_cmd *c, const char *p, size_t n) {
  c->argv[c->argc] = p;
  c->lens[c->argc] = n;
  c->argc++;
}
/* The numbers of a script call go as one binary argument of int64s,
** little-endian (the script unpacks them with struct): Redis interns every
** argument as a Lua string before the script runs, and a dozen decimal
** arguments cost the server more than the GCRA step itself. */
static void arg_int(rcl_cmd *c, long long x) {
  unsigned char *b = c->nums + 8 * c->nnum++;
  uint64_t u = (uint64_t)x;
  int i;
  for (i = 0; i < 8; i++)
    b[i] = (unsigned char)(u >> (8 * i));
}
static void arg_nums(rcl_cmd *c) {
  arg_raw(c, (const char *)c->nums, 8 * (size_t)c->nnum);
}
/* numkeys, the one decimal argument: 1..SLUICE_GROUP_MAX */
static void arg_numkeys(rcl_cmd *c, int nk) {
  c->numkeys[0] = (char)('0' + nk / 10);
  c->numkeys[1] = (char)('0' + nk % 10);
  if (nk < 10)
    arg_raw(c, c->numkeys + 1, 1);
  else
    arg_raw(c, c->numkeys, 2);
}
static void arg_key(rcl_cmd *c, const rcl_store *r, int i,
                    const sluice_key *k) {
  char *b = c->keys[i];
  memcpy(b, r->prefix, r->prefix_len);
  memcpy(b + r->prefix_len, k->data, k->len);
  arg_raw(c, b, r->prefix_len + k->len);
}

/* The command that runs the steps on node ni: the module's, or the
** script's (the same arguments follow, and the same reply comes back). */
static void arg_engine(rcl_cmd *c, const rcl_store *r, int ni, int batch) {
  if (r->nodes[ni].module) {
    if (batch)
      arg_raw(c, "SLUICE.BATCH", 12);
    else
      arg_raw(c, "SLUICE.RUN", 10);
    return;
  }
  arg_raw(c, "EVALSHA", 7);
  arg_raw(c, sluice_rcl_script_sha, 40);
}

static long long dur_arg(int64_t d) {
  return d == SLUICE_FOREVER ? -1 : (long long)d;
}

/* The parameters the Lua port reproduces exactly (lua/entry.lua). */
static int range_check(const sluice_op *op) {
  const int64_t M = SLUICE_WIRE_EXACT_MAX;
  int i;
  switch (op->algo) {
  case SLUICE_ALGO_GCRA: {
    const sluice_gcra_params *p = op->params;
    for (i = 0; i < op->nkeys; i++)
      if (p[i].period_ns > M || p[i].burst > M / p[i].period_ns)
        return SLUICE_ERANGE;
    return SLUICE_OK;
  }
  case SLUICE_ALGO_SWINDOW: {
    const sluice_window_params *p = op->params;
    return (p->window_ns > M || p->limit > M / p->window_ns) ? SLUICE_ERANGE
                                                             : SLUICE_OK;
  }
  case SLUICE_ALGO_FWINDOW:
    return ((const sluice_window_params *)op->params)->window_ns > M
               ? SLUICE_ERANGE
               : SLUICE_OK;
  case SLUICE_ALGO_DISTINCT:
    return ((const sluice_distinct_params *)op->params)->window_ns > M
               ? SLUICE_ERANGE
               : SLUICE_OK;
  case SLUICE_ALGO_PENALTY: {
    const sluice_penalty_params *p = op->params;
    if (p->strike_window_ns > M || p->offense_ttl_ns > M)
      return SLUICE_ERANGE;
    for (i = 0; i < 3; i++)
      if (p->box_ns[i] != SLUICE_FOREVER && p->box_ns[i] > M)
        return SLUICE_ERANGE;
    return SLUICE_OK;
  }
  case SLUICE_ALGO_LEASE:
    return ((const sluice_lease_params *)op->params)->ttl_ns > M
               ? SLUICE_ERANGE
               : SLUICE_OK;
  default:
    return SLUICE_EINVAL;
  }
}

/* The header of a call, in wire.h's SLUICE_WIRE_* order. */
static void build_common(rcl_cmd *c, const rcl_store *r, int algo, int kind,
                         int64_t now, int64_t arg, uint64_t id) {
  arg_int(c, algo);
  arg_int(c, kind);
  if (r->testclock) {
    arg_int(c, (long long)((uint64_t)now >> 32));
    arg_int(c, (long long)((uint64_t)now & 0xffffffffu));
  } else {
    arg_int(c, -1);
    arg_int(c, 0);
  }
  arg_int(c, (long long)arg);
  arg_int(c, (long long)(id >> 32));
  arg_int(c, (long long)(id & 0xffffffffu));
  if (r->testclock)
    arg_int(c, RCL_TEST_MIN_TTL_MS);
  else
    arg_int(c, 0);
}

static void arg_gcra(rcl_cmd *c, const sluice_gcra_params *p) {
  arg_int(c, (long long)p->rate);
  arg_int(c, (long long)p->period_ns);
  arg_int(c, (long long)p->burst);
}

/* What a batch script call may carry: what the script's fast path takes. */
static int job_batchable(const rcl_job *j) {
  return j->type == JOB_APPLY && j->ask_node < 0 &&
         j->op->algo == SLUICE_ALGO_GCRA && j->op->nkeys == 1 &&
         (j->op->kind == SLUICE_OP_CONSUME || j->op->kind == SLUICE_OP_PEEK);
}

/* The batch led by jobs[head]: its keys, then the 11 numbers of each
** member's single call back to back, then the marker argument. */
static void build_batch(rcl_cmd *c, const rcl_store *r, const rcl_job *jobs,
                        int head) {
  int i, k;
  int ni = jobs[head].node;
  c->argc = 0;
  c->nnum = 0;
  arg_engine(c, r, ni, 1);
  arg_numkeys(c, jobs[head].batch);
  for (i = head, k = 0; i >= 0; i = jobs[i].bnext, k++)
    arg_key(c, r, k, &jobs[i].op->keys[0]);
  for (i = head; i >= 0; i = jobs[i].bnext) {
    const rcl_job *j = &jobs[i];
    build_common(c, r, SLUICE_ALGO_GCRA, j->op->kind, j->now, j->op->arg,
                 j->op->id);
    arg_gcra(c, j->op->params);
  }
  arg_nums(c);
  if (!r->nodes[ni].module) /* the script's batch marker */
    arg_raw(c, "b", 1);
}

/* An op's parameters, in the order the script reads them; returns how many
** numbers that was. */
static int arg_params(rcl_cmd *c, int algo, int nk, const void *params) {
  int i, n0 = c->nnum;
  switch (algo) {
  case SLUICE_ALGO_GCRA:
    for (i = 0; i < nk; i++)
      arg_gcra(c, (const sluice_gcra_params *)params + i);
    break;
  case SLUICE_ALGO_SWINDOW:
  case SLUICE_ALGO_FWINDOW: {
    const sluice_window_params *p = params;
    arg_int(c, (long long)p->limit);
    arg_int(c, (long long)p->window_ns);
    break;
  }
  case SLUICE_ALGO_DISTINCT: {
    const sluice_distinct_params *p = params;
    arg_int(c, (long long)p->threshold);
    arg_int(c, (long long)p->window_ns);
    break;
  }
  case SLUICE_ALGO_PENALTY: {
    const sluice_penalty_params *p = params;
    arg_int(c, (long long)p->strike_threshold);
    arg_int(c, (long long)p->strike_window_ns);
    for (i = 0; i < 3; i++)
      arg_int(c, dur_arg(p->box_ns[i]));
    arg_int(c, (long long)p->offense_ttl_ns);
    break;
  }
  default: { /* SLUICE_ALGO_LEASE */
    const sluice_lease_params *p = params;
    arg_int(c, (long long)p->max);
    arg_int(c, (long long)p->ttl_ns);
    break;
  }
  }
  return c->nnum - n0;
}

/* A program: its records as KEYS, a header (the step count in the kind's
** place), then each step's numbers and its parameters (wire.h; the
** script's lua/program.lua). */
static void build_program(rcl_cmd *c, const rcl_store *r, const rcl_job *j) {
  const sluice_program *p = j->prog;
  int i;
  arg_numkeys(c, p->nkeys);
  for (i = 0; i < p->nkeys; i++)
    arg_key(c, r, i, &p->keys[i]);
  build_common(c, r, SLUICE_WIRE_PROGRAM, p->nsteps, j->now, 0, 0);
  for (i = 0; i < p->nsteps; i++) {
    const sluice_step *s = &p->steps[i];
    int at, np, end;
    /* In wire.h's SLUICE_WIRE_STEP_* order. */
    arg_int(c, s->algo);
    arg_int(c, s->kind);
    arg_int(c, s->key);
    arg_int(c, s->nkeys);
    arg_int(c, (long long)s->arg);
    arg_int(c, (long long)(s->id >> 32));
    arg_int(c, (long long)(s->id & 0xffffffffu));
    arg_int(c, s->when);
    arg_int(c, s->ref);
    arg_int(c, s->when2);
    arg_int(c, s->ref2);
    arg_int(c, s->fold);
    arg_int(c, s->ttl_from);
    at = c->nnum; /* the parameter count, known once they are in */
    arg_int(c, 0);
    np = arg_params(c, s->algo, s->nkeys, s->params);
    end = c->nnum;
    c->nnum = at;
    arg_int(c, np);
    c->nnum = end;
  }
  arg_nums(c);
}

static void build_job(rcl_cmd *c, const rcl_store *r, const rcl_job *j) {
  int i, nk = j->type == JOB_APPLY ? j->op->nkeys : 1;
  c->argc = 0;
  c->nnum = 0;
  if (j->type == JOB_DEL) {
    arg_raw(c, "DEL", 3);
    arg_key(c, r, 0, j->key);
    return;
  }
  arg_engine(c, r, j->node, 0);
  if (j->type == JOB_RUN) {
    build_program(c, r, j);
    return;
  }
  arg_numkeys(c, nk);
  if (j->type == JOB_GET) {
    arg_key(c, r, 0, j->key);
    build_common(c, r, 0, 0, j->now, 0, 0);
    arg_nums(c);
    return;
  }
  for (i = 0; i < nk; i++)
    arg_key(c, r, i, &j->op->keys[i]);
  build_common(c, r, j->op->algo, j->op->kind, j->now, j->op->arg, j->op->id);
  arg_params(c, j->op->algo, nk, j->op->params);
  arg_nums(c);
}

/* ---------------------------------------------------- reply decoding --- */

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static int64_t le64(const unsigned char *p) {
  return (int64_t)((uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32);
}

/* A verdict, field by field as wire.h lists them. */
#define RD_I32(f)                                                              \
  v->f = (int)le32(p + at);                                                    \
  at += 4;
#define RD_U32(f)                                                              \
  v->f = le32(p + at);                                                         \
  at += 4;
#define RD_I64(f)                                                              \
  v->f = le64(p + at);                                                         \
  at += 8;
static void verdict_at(const unsigned char *p, sluice_verdict *v) {
  size_t at = 0;
  memset(v, 0, sizeof *v);
  SLUICE_WIRE_VERDICT_FIELDS(RD_I32, RD_U32, RD_I64)
}

static int decode_verdict(const redisReply *rep, sluice_verdict *v) {
  if (rep->type != REDIS_REPLY_STRING || rep->len != SLUICE_WIRE_VERDICT)
    return SLUICE_EBACKEND;
  verdict_at((const unsigned char *)rep->str, v);
  return SLUICE_OK;
}

/* A program's answer: its header, then a verdict per step. */
static int decode_program(const redisReply *rep, const sluice_program *p,
                          sluice_program_result *res) {
  const unsigned char *b = (const unsigned char *)rep->str;
  int i;
  if (rep->type != REDIS_REPLY_STRING ||
      rep->len != SLUICE_WIRE_PROG_HEADER +
                      SLUICE_WIRE_VERDICT * (size_t)p->nsteps)
    return SLUICE_EBACKEND;
  res->allowed = (int)le32(b + SLUICE_WIRE_PROG_ALLOWED);
  res->denied_by = (int)le32(b + SLUICE_WIRE_PROG_DENIED_BY);
  res->ran = le32(b + SLUICE_WIRE_PROG_RAN);
  res->now_ns = le64(b + SLUICE_WIRE_PROG_NOW);
  if (res->denied_by < -1 || res->denied_by >= p->nsteps)
    return SLUICE_EBACKEND;
  for (i = 0; i < p->nsteps; i++)
    verdict_at(b + SLUICE_WIRE_PROG_HEADER + SLUICE_WIRE_VERDICT * i,
               &res->v[i]);
  return SLUICE_OK;
}

static int decode_get(const redisReply *rep, rcl_job *j) {
  const redisReply *val, *h, *l;
  const unsigned char *p;
  int64_t now, exp;
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3)
    return SLUICE_EBACKEND;
  val = rep->element[0];
  h = rep->element[1];
  l = rep->element[2];
  if (h->type != REDIS_REPLY_INTEGER || l->type != REDIS_REPLY_INTEGER)
    return SLUICE_EBACKEND;
  now = (int64_t)(((uint64_t)h->integer << 32) | (uint64_t)l->integer);
  if (val->type == REDIS_REPLY_NIL)
    return SLUICE_ENOTFOUND;
  if (val->type != REDIS_REPLY_STRING || val->len != SLUICE_WIRE_RECORD ||
      (unsigned char)val->str[SLUICE_WIRE_REC_LAYOUT] != SLUICE_STATE_LAYOUT)
    return SLUICE_ECORRUPT;
  p = (const unsigned char *)val->str;
  exp = le64(p + SLUICE_WIRE_REC_EXPIRY);
  if (exp <= now)
    return SLUICE_ENOTFOUND;
  j->st_out->w[0] = (uint64_t)le64(p + SLUICE_WIRE_REC_W0);
  j->st_out->w[1] = (uint64_t)le64(p + SLUICE_WIRE_REC_W1);
  *j->exp_out = exp;
  return SLUICE_OK;
}

/* What to do with one reply. */
enum { R_DONE, R_RETRY, R_NOSCRIPT };

static int parse_redirect(rcl_store *r, const char *s, int *slot) {
  /* "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" */
  const char *sp = strchr(s, ' '), *sp2, *colon;
  if (!sp)
    return -1;
  *slot = atoi(sp + 1);
  sp2 = strchr(sp + 1, ' ');
  if (!sp2)
    return -1;
  colon = strrchr(sp2 + 1, ':');
  if (!colon)
    return -1;
  return find_node(r, sp2 + 1, (size_t)(colon - sp2 - 1), atoi(colon + 1), 1);
}

static int handle_reply(rcl_store *r, rcl_job *j, int ni,
                        const redisReply *rep) {
  rcl_node *n = &r->nodes[ni];
  if (rep->type == REDIS_REPLY_ERROR) {
    const char *s = rep->str;
    int slot, t;
    if (strncmp(s, "NOSCRIPT", 8) == 0) {
      r->st.noscript++;
      return R_NOSCRIPT;
    }
    /* The module went away (MODULE UNLOAD) under engine=auto: the
    ** script from now on, on this connection. */
    if (n->module && r->engine == RCL_ENGINE_AUTO &&
        strncmp(s, "ERR unknown command", 19) == 0) {
      n->module = 0;
      return R_RETRY;
    }
    if (strncmp(s, "MOVED ", 6) == 0) {
      r->st.moved++;
      t = parse_redirect(r, s, &slot);
      if (t >= 0 && slot >= 0 && slot < RCL_SLOTS) {
        r->slot_node[slot] = (uint8_t)t;
        r->cluster = 1;
      }
      r->map_stale = 1;
      return R_RETRY;
    }
    if (strncmp(s, "ASK ", 4) == 0) {
      r->st.ask++;
      j->ask_node = parse_redirect(r, s, &slot);
      return R_RETRY;
    }
    if (strncmp(s, "TRYAGAIN", 8) == 0) {
      r->st.tryagain++;
      return R_RETRY;
    }
    if (strncmp(s, "CLUSTERDOWN", 11) == 0 || strncmp(s, "LOADING", 7) == 0 ||
        strncmp(s, "MASTERDOWN", 10) == 0 || strncmp(s, "READONLY", 8) == 0 ||
        strncmp(s, "BUSY", 4) == 0) {
      r->map_stale = 1;
      j->rc = SLUICE_EUNAVAIL;
    } else if (strncmp(s, "SLUICE ERANGE", 13) == 0) {
      j->rc = SLUICE_ERANGE;
    } else if (strncmp(s, "SLUICE ECORRUPT", 15) == 0) {
      j->rc = SLUICE_ECORRUPT;
    } else if (strncmp(s, "SLUICE EINVAL", 13) == 0) {
      j->rc = SLUICE_EINVAL;
    } else {
      j->rc = SLUICE_EBACKEND;
    }
    sluice_store_seterr(&r->base, j->rc, 0, "redis %s:%d: %.90s", n->host,
                        n->port, s);
    return R_DONE;
  }
  switch (j->type) {
  case JOB_APPLY:
    j->rc = decode_verdict(rep, j->v);
    break;
  case JOB_GET:
    j->rc = decode_get(rep, j);
    break;
  case JOB_RUN:
    j->rc = decode_program(rep, j->prog, j->res);
    break;
  default:
    j->rc = rep->type != REDIS_REPLY_INTEGER ? SLUICE_EBACKEND
            : rep->integer > 0               ? SLUICE_OK
                                             : SLUICE_ENOTFOUND;
    break;
  }
  if (j->rc == SLUICE_EBACKEND || j->rc == SLUICE_ECORRUPT)
    sluice_store_seterr(&r->base, j->rc, 0, "redis %s:%d: unexpected reply",
                        n->host, n->port);
  return R_DONE;
}

/* ------------------------------------------------------------ rounds --- */

static void job_fail(rcl_store *r, rcl_job *j, int rc) {
  j->rc = rc;
  j->pending = 0;
  if (rc == SLUICE_ETIMEDOUT)
    r->st.timeouts++;
  else if (rc == SLUICE_EUNAVAIL)
    r->st.unavailable++;
}

static int job_slot(const rcl_store *r, const rcl_job *j) {
  return jkey_slot(r, j->type == JOB_APPLY ? &j->op->keys[0]
                     : j->type == JOB_RUN ? &j->prog->keys[0]
                                          : j->key);
}

/* Append the node's open batch (if any) to its pipeline: a batch of one
** goes as its own call, so a single decision costs what it always did. */
static void flush_batch(rcl_store *r, rcl_job *jobs, int *bhead, int ni,
                        rcl_cmd *cmd) {
  int h = bhead[ni];
  if (h < 0)
    return;
  bhead[ni] = -1;
  if (jobs[h].batch == 1) {
    jobs[h].batch = 0;
    build_job(cmd, r, &jobs[h]);
  } else {
    build_batch(cmd, r, jobs, h);
    r->st.batches++;
  }
  redisAppendCommandArgv(r->nodes[ni].c, cmd->argc, cmd->argv, cmd->lens);
}

static void settle(rcl_store *r, rcl_job *j, int what, int *reload) {
  if (what == R_DONE) {
    j->pending = 0;
    if (j->rc == SLUICE_EUNAVAIL)
      r->st.unavailable++;
  } else if (what == R_NOSCRIPT) {
    *reload = 1;
  }
}

/* The reply to a batch led by jobs[head]: every member's verdict (or
** error), in order.  An error reply (MOVED, NOSCRIPT, ...) applies to
** every member. */
static void batch_reply(rcl_store *r, rcl_job *jobs, int head, int ni,
                        const redisReply *rep, int *reload) {
  int m;
  size_t k = 0;
  if (rep->type != REDIS_REPLY_ARRAY ||
      rep->elements != (size_t)jobs[head].batch) {
    for (m = head; m >= 0; m = jobs[m].bnext)
      settle(r, &jobs[m], handle_reply(r, &jobs[m], ni, rep), reload);
    return;
  }
  for (m = head; m >= 0; m = jobs[m].bnext, k++)
    settle(r, &jobs[m], handle_reply(r, &jobs[m], ni, rep->element[k]),
           reload);
}

/* One round: route every pending job, write each node's pipeline, then
** read the replies node by node.  Jobs that must be retried stay pending.
** Consecutive single-bucket GCRA jobs of one node (and, in a cluster, one
** slot: a script's keys must share it) go as one batch script call. */
static void run_round(rcl_store *r, rcl_job *jobs, int n, rcl_cmd *cmd) {
  /* Zeroed: gcc -O3 cannot see that used[k] is read only below nused. */
  int used[RCL_MAX_NODES] = {0}, nused = 0, i, k;
  int nerr[RCL_MAX_NODES];      /* per node: 0, or the error of this round */
  int reload[RCL_MAX_NODES];    /* per node: a NOSCRIPT was seen */
  int bhead[RCL_MAX_NODES];     /* per node: leader of the open batch, -1 */
  int btail[RCL_MAX_NODES];
  memset(nerr, 0, sizeof nerr);
  memset(reload, 0, sizeof reload);
  for (k = 0; k < RCL_MAX_NODES; k++)
    bhead[k] = -1;

  for (i = 0; i < n; i++) {
    rcl_job *j = &jobs[i];
    int ni;
    j->sent = 0;
    j->batch = 0;
    j->bnext = -1;
    if (!j->pending)
      continue;
    if (r->cluster && j->slot < 0)
      j->slot = job_slot(r, j);
    ni = j->ask_node >= 0 ? j->ask_node
         : r->cluster    ? r->slot_node[j->slot]
                         : r->slot_node[0];
    if (ni == RCL_NO_NODE || ni >= r->nnodes) {
      r->map_stale = 1;
      if (r->map_ok) /* else keep why no seed answered */
        sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                            "redis: no node serves slot %d", j->slot);
      job_fail(r, j, SLUICE_EUNAVAIL);
      continue;
    }
    j->node = ni;
    for (k = 0; k < nused && used[k] != ni; k++)
      ;
    if (k == nused) {
      int rc = node_connect(r, ni);
      used[nused++] = ni;
      if (rc != SLUICE_OK) {
        r->map_stale = 1;
        nerr[ni] = rc;
      }
    }
    if (nerr[ni] < 0) {
      job_fail(r, j, nerr[ni]);
      continue;
    }
    r->st.ops++;
    if (job_batchable(j)) {
      int h = bhead[ni];
      j->sent = 1;
      if (h >= 0 && jobs[h].batch < RCL_BATCH_MAX &&
          (!r->cluster || jobs[h].slot == j->slot)) {
        jobs[btail[ni]].bnext = i;
        btail[ni] = i;
        jobs[h].batch++;
        j->batch = -1;
        continue;
      }
      flush_batch(r, jobs, bhead, ni, cmd);
      bhead[ni] = btail[ni] = i;
      j->batch = 1;
      continue;
    }
    flush_batch(r, jobs, bhead, ni, cmd);
    if (j->ask_node >= 0) {
      static const char *const asking[1] = {"ASKING"};
      static const size_t asklen[1] = {6};
      redisAppendCommandArgv(r->nodes[ni].c, 1, (const char **)asking, asklen);
    }
    build_job(cmd, r, j);
    redisAppendCommandArgv(r->nodes[ni].c, cmd->argc, cmd->argv, cmd->lens);
    j->sent = 1 + (j->ask_node >= 0);
    j->ask_node = -1;
  }
  for (k = 0; k < nused; k++)
    if (nerr[used[k]] == 0)
      flush_batch(r, jobs, bhead, used[k], cmd);
  /* Append WAIT, then write every pipeline before reading any reply, so
  ** the nodes work in parallel. */
  for (k = 0; k < nused; k++) {
    int ni = used[k], done = 0, e;
    if (nerr[ni] < 0 || !r->nodes[ni].c)
      continue;
    if (r->wait_replicas > 0) {
      char a[16], b[16];
      const char *argv[3] = {"WAIT", a, b};
      size_t lens[3];
      lens[0] = 4;
      lens[1] = (size_t)snprintf(a, sizeof a, "%d", r->wait_replicas);
      lens[2] = (size_t)snprintf(b, sizeof b, "%d", r->timeout_ms);
      redisAppendCommandArgv(r->nodes[ni].c, 3, argv, lens);
    }
    errno = 0;
    while (!done) {
      if (rcl_link_write(r->nodes[ni].c, r->nodes[ni].tls, &done) !=
          REDIS_OK) {
        e = errno;
        nerr[ni] = node_io_error(r, ni, e);
        break;
      }
    }
  }
  for (k = 0; k < nused; k++) {
    int ni = used[k], err = nerr[ni], e;
    int wait_short = 0;
    r->st.round_trips++;
    for (i = 0; i < n; i++) {
      rcl_job *j = &jobs[i];
      void *rep = NULL;
      int m;
      if (!j->sent || j->node != ni || j->batch < 0)
        continue;
      if (err == 0 && j->sent == 2) { /* the ASKING reply */
        errno = 0;
        if (rcl_link_reply(r->nodes[ni].c, r->nodes[ni].tls, &rep) !=
                REDIS_OK ||
            !rep) {
          e = errno;
          err = node_io_error(r, ni, e);
        } else {
          freeReplyObject(rep);
          rep = NULL;
        }
      }
      if (err == 0) {
        errno = 0;
        if (rcl_link_reply(r->nodes[ni].c, r->nodes[ni].tls, &rep) !=
                REDIS_OK ||
            !rep) {
          e = errno;
          err = node_io_error(r, ni, e);
        }
      }
      if (err != 0) {
        for (m = i; m >= 0; m = jobs[m].bnext)
          job_fail(r, &jobs[m], err);
        continue;
      }
      if (j->batch > 0)
        batch_reply(r, jobs, i, ni, rep, &reload[ni]);
      else
        settle(r, j, handle_reply(r, j, ni, rep), &reload[ni]);
      freeReplyObject(rep);
    }
    if (err == 0 && r->wait_replicas > 0 && r->nodes[ni].c) {
      void *rep = NULL;
      errno = 0;
      if (rcl_link_reply(r->nodes[ni].c, r->nodes[ni].tls, &rep) !=
              REDIS_OK ||
          !rep) {
        e = errno;
        err = node_io_error(r, ni, e);
        wait_short = 1;
      } else {
        redisReply *w = rep;
        wait_short = w->type != REDIS_REPLY_INTEGER ||
                     w->integer < r->wait_replicas;
        freeReplyObject(rep);
      }
      if (wait_short) {
        for (i = 0; i < n; i++)
          if (jobs[i].sent && jobs[i].node == ni && !jobs[i].pending &&
              jobs[i].rc == SLUICE_OK)
            job_fail(r, &jobs[i], err ? err : SLUICE_EUNAVAIL);
        if (!err)
          sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                              "redis %s:%d: write not acknowledged by %d "
                              "replicas", r->nodes[ni].host,
                              r->nodes[ni].port, r->wait_replicas);
      }
    }
    if (err == 0 && reload[ni]) {
      int rc = load_script(r, ni);
      if (rc != SLUICE_OK)
        for (i = 0; i < n; i++)
          if (jobs[i].pending && jobs[i].sent && jobs[i].node == ni)
            job_fail(r, &jobs[i], rc);
    }
  }
}

static int run_jobs(rcl_store *r, rcl_job *jobs, int n) {
  rcl_cmd *cmd = r->cmd;
  int round, i, left;
  fork_check(r);
  maybe_refresh(r);
  for (i = 0; i < n; i++) {
    jobs[i].pending = 1;
    jobs[i].ask_node = -1;
    jobs[i].rc = SLUICE_EUNAVAIL;
    /* A single server serves every slot: hash only in cluster mode (a
    ** MOVED can switch it on; run_round then hashes). */
    jobs[i].slot = r->cluster ? job_slot(r, &jobs[i]) : -1;
  }
  for (round = 0; round < RCL_ROUNDS; round++) {
    if (round > 0)
      maybe_refresh(r);
    run_round(r, jobs, n, cmd);
    for (i = 0, left = 0; i < n; i++)
      left += jobs[i].pending;
    if (!left)
      break;
  }
  for (i = 0; i < n; i++)
    if (jobs[i].pending) {
      sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                          "redis: redirections or TRYAGAIN exhausted");
      job_fail(r, &jobs[i], SLUICE_EUNAVAIL);
    }
  return SLUICE_OK;
}

/* ------------------------------------------------------------- lanes --- */

/* Which lane a thread tries first: threads are numbered on their first call
** and spread over the lanes, so up to nlanes threads each keep their own
** connections; when that lane is busy any idle one will do. */
static _Thread_local unsigned rcl_thread_no;
static unsigned rcl_threads;

static rcl_store *lane_lock(rcl_store *home) {
  unsigned pref;
  int i, n = home->nlanes;
  rcl_store *l;
  if (n <= 1) {
    pthread_mutex_lock(&home->mu);
    return home;
  }
  if (!rcl_thread_no)
    rcl_thread_no = __atomic_add_fetch(&rcl_threads, 1, __ATOMIC_RELAXED);
  pref = (rcl_thread_no - 1) % (unsigned)n;
  for (i = 0; i < n; i++) {
    l = home->lanes[(pref + (unsigned)i) % (unsigned)n];
    if (pthread_mutex_trylock(&l->mu) == 0)
      return l;
  }
  l = home->lanes[pref];
  pthread_mutex_lock(&l->mu);
  return l;
}

/* A lane's error detail becomes the store's (what sluice_limiter_errmsg
** reads); lane 0 writes the store's own. */
static void lane_unlock(rcl_store *home, rcl_store *l) {
  if (l != home && l->base.errstr[0]) {
    sluice_store_seterr(&home->base, SLUICE_EBACKEND, l->base.backend_err,
                        "%s", l->base.errstr);
    l->base.errstr[0] = '\0';
  }
  pthread_mutex_unlock(&l->mu);
}

static void stats_add(sluice_redis_stats *t, const sluice_redis_stats *a) {
  t->ops += a->ops;
  t->round_trips += a->round_trips;
  t->moved += a->moved;
  t->ask += a->ask;
  t->noscript += a->noscript;
  t->tryagain += a->tryagain;
  t->connects += a->connects;
  t->connect_failures += a->connect_failures;
  t->refreshes += a->refreshes;
  t->timeouts += a->timeouts;
  t->unavailable += a->unavailable;
  t->batches += a->batches;
}

/* ----------------------------------------------------------- methods --- */

/* Every step of a program within the Lua port's exact range. */
static int prog_range_check(const sluice_program *p) {
  int i, rc;
  for (i = 0; i < p->nsteps; i++) {
    sluice_op op;
    sluice_program_step_op(p, i, &op);
    if ((rc = range_check(&op)) != SLUICE_OK)
      return rc;
  }
  return SLUICE_OK;
}

/* n operations (ops/vs) or n programs (ps/res; the other pair NULL) over one
** lane, pipelined: every node's share written before any reply is read.
** Programs are the policy's path, so they take a lane like any call: on
** lane 0 alone every thread of a service would queue on one connection. */
static int submit(sluice_store *s, int n, const sluice_op *ops,
                  sluice_verdict *vs, const sluice_program *ps,
                  sluice_program_result *res, int64_t now, int *rcs) {
  rcl_store *home = (rcl_store *)s, *r;
  rcl_job stack[RCL_STACK_JOBS], *jobs = stack;
  int smap[RCL_STACK_JOBS], *map = smap;
  int i, nj = 0, rc = SLUICE_OK;
  if (n <= 0)
    return SLUICE_OK;
  if (n > RCL_STACK_JOBS) {
    jobs = sluice_store_malloc(s, sizeof(rcl_job) * (size_t)n);
    map = sluice_store_malloc(s, sizeof(int) * (size_t)n);
    if (!jobs || !map) {
      sluice_store_free(s, jobs, sizeof(rcl_job) * (size_t)n);
      sluice_store_free(s, map, sizeof(int) * (size_t)n);
      return SLUICE_ENOMEM;
    }
  }
  /* Everything that may write the error detail runs under the mutex. */
  r = lane_lock(home);
  for (i = 0; i < n; i++) {
    if (r->readonly) {
      rcs[i] = sluice_store_seterr(s, SLUICE_EPERM, 0,
                                   "redis: store opened read-only");
      continue;
    }
    rcs[i] = ops ? range_check(&ops[i]) : prog_range_check(&ps[i]);
    if (rcs[i] != SLUICE_OK) {
      sluice_store_seterr(s, rcs[i], 0,
                          "redis: parameters outside the exact range of the "
                          "Lua port (see docs/redis.md)");
      continue;
    }
    memset(&jobs[nj], 0, sizeof jobs[nj]);
    if (ops) {
      jobs[nj].type = JOB_APPLY;
      jobs[nj].op = &ops[i];
      jobs[nj].v = &vs[i];
    } else {
      jobs[nj].type = JOB_RUN;
      jobs[nj].prog = &ps[i];
      jobs[nj].res = &res[i];
    }
    jobs[nj].now = now;
    map[nj++] = i;
  }
  if (nj > 0)
    rc = run_jobs(r, jobs, nj);
  lane_unlock(home, r);
  for (i = 0; i < nj; i++)
    rcs[map[i]] = jobs[i].rc;
  if (jobs != stack) {
    sluice_store_free(s, jobs, sizeof(rcl_job) * (size_t)n);
    sluice_store_free(s, map, sizeof(int) * (size_t)n);
  }
  return rc;
}

static int rcl_apply_many(sluice_store *s, int n, const sluice_op *ops,
                          int64_t now, sluice_verdict *vs, int *rcs) {
  return submit(s, n, ops, vs, NULL, NULL, now, rcs);
}

static int rcl_apply(sluice_store *s, const sluice_op *op, int64_t now,
                     sluice_verdict *v) {
  int rcs = SLUICE_OK;
  int rc = rcl_apply_many(s, 1, op, now, v, &rcs);
  return rc != SLUICE_OK ? rc : rcs;
}

static int rcl_run_many(sluice_store *s, int n, const sluice_program *ps,
                        int64_t now, sluice_program_result *res, int *rcs) {
  return submit(s, n, NULL, NULL, ps, res, now, rcs);
}

static int rcl_run(sluice_store *s, const sluice_program *p, int64_t now,
                   sluice_program_result *res) {
  int rcs = SLUICE_OK;
  int rc = rcl_run_many(s, 1, p, now, res, &rcs);
  return rc != SLUICE_OK ? rc : rcs;
}

static int rcl_get(sluice_store *s, const sluice_key *key, int64_t now,
                   sluice_state *out, int64_t *exp) {
  rcl_store *home = (rcl_store *)s, *r;
  rcl_job j;
  int rc;
  memset(&j, 0, sizeof j);
  j.type = JOB_GET;
  j.key = key;
  j.st_out = out;
  j.exp_out = exp;
  j.now = now;
  r = lane_lock(home);
  rc = run_jobs(r, &j, 1);
  lane_unlock(home, r);
  return rc != SLUICE_OK ? rc : j.rc;
}

static int rcl_delete(sluice_store *s, const sluice_key *key) {
  rcl_store *home = (rcl_store *)s, *r;
  rcl_job j;
  int rc;
  memset(&j, 0, sizeof j);
  j.type = JOB_DEL;
  j.key = key;
  r = lane_lock(home);
  rc = r->readonly ? sluice_store_seterr(s, SLUICE_EPERM, 0,
                                         "redis: store opened read-only")
                   : run_jobs(r, &j, 1);
  lane_unlock(home, r);
  return rc != SLUICE_OK ? rc : j.rc;
}

/* A control op that concerns every lane: each in turn, under its lock. */
static int control_lanes(rcl_store *home, int op, void *arg) {
  sluice_redis_stats sum;
  int k, i, rc = SLUICE_OK;
  memset(&sum, 0, sizeof sum);
  for (k = 0; k < home->nlanes; k++) {
    rcl_store *r = home->lanes[k];
    pthread_mutex_lock(&r->mu);
    fork_check(r);
    if (op == SLUICE_CTL_REDIS_REFRESH) {
      int lrc = refresh_map(r, r->nnodes);
      if (k == 0)
        rc = lrc;
    } else if (op == SLUICE_CTL_REDIS_STATS) {
      stats_add(&sum, &r->st);
      if (k == 0) {
        sum.nodes = r->nnodes;
        sum.cluster = r->cluster;
      }
    } else {
      for (i = 0; i < r->nnodes; i++)
        node_drop(&r->nodes[i]);
    }
    lane_unlock(home, r);
  }
  if (op == SLUICE_CTL_REDIS_STATS) {
    sum.pool = home->nlanes;
    *(sluice_redis_stats *)arg = sum;
  }
  return rc;
}

static int rcl_control(sluice_store *s, int op, void *arg) {
  rcl_store *home = (rcl_store *)s, *r;
  int rc = SLUICE_OK;
  if (op == SLUICE_CTL_REDIS_REFRESH || op == SLUICE_CTL_REDIS_DROP ||
      op == SLUICE_CTL_REDIS_STATS)
    return op == SLUICE_CTL_REDIS_STATS && !arg ? SLUICE_EINVAL
                                                : control_lanes(home, op, arg);
  /* NODE_OF answers from the map of the lane this thread decides on. */
  r = lane_lock(home);
  fork_check(r);
  switch (op) {
  case SLUICE_CTL_REDIS_NODE_OF: {
    sluice_redis_node_of *q = arg;
    sluice_key k;
    int ni;
    if (!q || !q->key || q->keylen == 0 || q->keylen > SLUICE_KEY_MAX) {
      rc = SLUICE_EINVAL;
      break;
    }
    k.data = q->key;
    k.len = q->keylen;
    q->slot = jkey_slot(r, &k);
    ni = r->cluster ? r->slot_node[q->slot] : r->slot_node[0];
    q->port = 0;
    q->host[0] = '\0';
    if (ni != RCL_NO_NODE && ni < r->nnodes) {
      q->port = r->nodes[ni].port;
      snprintf(q->host, sizeof q->host, "%s", r->nodes[ni].host);
    }
    break;
  }
  default:
    rc = SLUICE_ENOTFOUND;
  }
  lane_unlock(home, r);
  return rc;
}

static unsigned rcl_caps(sluice_store *s) {
  (void)s;
  return SLUICE_CAP_THREADSAFE | SLUICE_CAP_CROSS_PROCESS |
         SLUICE_CAP_DISTRIBUTED | SLUICE_CAP_NATIVE_ALGO |
         SLUICE_CAP_OWN_CLOCK;
}

static void lane_free(rcl_store *home, rcl_store *l) {
  int i;
  /* A child closing a store its parent opened must not touch the parent's
  ** sockets beyond closing its own descriptors, which node_drop does. */
  for (i = 0; i < l->nnodes; i++)
    node_drop(&l->nodes[i]);
  pthread_mutex_destroy(&l->mu);
  sluice_store_free(&home->base, l->cmd, sizeof *l->cmd);
}

static int rcl_close(sluice_store *s) {
  rcl_store *r = (rcl_store *)s;
  int k;
  for (k = 1; k < r->nlanes; k++) {
    lane_free(r, r->lanes[k]);
    sluice_store_free(s, r->lanes[k], sizeof *r);
  }
  sluice_store_free(s, r->lanes, sizeof *r->lanes * RCL_POOL_MAX);
  if (r->fork_page)
    munmap((void *)r->fork_page, (size_t)sysconf(_SC_PAGESIZE));
  lane_free(r, r);
  if (r->conf) {
    rcl_conf_free(r->conf);
    sluice_store_free(s, r->conf, sizeof *r->conf);
  }
  sluice_store_free(s, r->url_params, r->url_params_len);
  return SLUICE_OK;
}

static const sluice_store_methods rcl_methods = {
    3,              /* iVersion */
    rcl_close,      /* xClose */
    rcl_apply,      /* xApply: one EVALSHA, one round trip */
    rcl_get,        /* xGet */
    rcl_delete,     /* xDelete */
    rcl_control,    /* xControl: SLUICE_CTL_REDIS_* */
    rcl_caps,       /* xCapabilities */
    rcl_apply_many, /* xApplyMany: pipelined, one round trip per node */
    rcl_run,        /* xRun: a whole program in one EVALSHA */
    rcl_run_many,   /* xRunMany: pipelined, one EVALSHA per program */
};

/* ------------------------------------------------------------- open --- */

/* The parameters the core lets through (sluice_backend.azParams): add a
** new one here and the store string accepts it. */
static const char *const known_params[] = {
    "nodes",          "timeout_ms", "connect_timeout_ms", "prefix",
    "wait_replicas",  "backoff_max_ms", "pool", "engine", RCL_CONN_PARAMS,
    NULL};

/* A URL ("//host...") is rewritten to parameters here, so the core, which
** checks "k=v" strings only, leaves its check to the backend. */
static int check_params(sluice_store *s, const char *uri) {
  char msg[512];
  int rc = sluice__uri_check("redis", uri, known_params, msg, sizeof msg);
  return rc == SLUICE_OK ? rc : sluice_store_seterr(s, rc, 0, "%s", msg);
}

static int int_param(sluice_store *s, const char *uri, const char *name,
                     int64_t dflt, int64_t lo, int64_t hi, int *out) {
  int64_t v;
  if (sluice_uri_int(uri, name, dflt, &v) != SLUICE_OK || v < lo || v > hi)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: %s must be an integer in %lld..%lld",
                               name, (long long)lo, (long long)hi);
  *out = (int)v;
  return SLUICE_OK;
}

/* engine=auto|module|lua (docs/redis.md, "The module"). */
static int engine_param(sluice_store *s, const char *uri, int *out) {
  static const char *const names[] = {"auto", "module", "lua"};
  const char *v;
  size_t len;
  int i;
  *out = RCL_ENGINE_AUTO;
  if (sluice_uri_param(uri, "engine", &v, &len) != SLUICE_OK)
    return SLUICE_OK;
  for (i = 0; i < 3; i++)
    if (len == strlen(names[i]) && memcmp(v, names[i], len) == 0) {
      *out = i;
      return SLUICE_OK;
    }
  return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                             "redis: engine must be auto, module or lua");
}

static int parse_nodes(rcl_store *r, const char *v, size_t len) {
  size_t i = 0;
  while (i < len) {
    size_t j = i, colon = (size_t)-1;
    long port = 0;
    while (j < len && v[j] != ',') {
      if (v[j] == ':')
        colon = j;
      j++;
    }
    if (colon == (size_t)-1 || colon == i || colon + 1 >= j)
      return SLUICE_EINVAL;
    for (size_t k = colon + 1; k < j; k++) {
      if (v[k] < '0' || v[k] > '9')
        return SLUICE_EINVAL;
      port = port * 10 + (v[k] - '0');
      if (port > 65535)
        return SLUICE_EINVAL;
    }
    if (find_node(r, v + i, colon - i, (int)port, 1) < 0)
      return SLUICE_EINVAL;
    i = j + 1;
  }
  return r->nnodes > 0 ? SLUICE_OK : SLUICE_EINVAL;
}

/* Lanes 1..pool-1: copies of lane 0 (its parameters and whatever slot map
** it has) without connections; each connects on first use. */
static int make_lanes(rcl_store *r, int pool) {
  int k, i;
  r->lanes = sluice_store_malloc(&r->base, sizeof *r->lanes * RCL_POOL_MAX);
  if (!r->lanes)
    return SLUICE_ENOMEM;
  r->lanes[0] = r;
  r->nlanes = 1;
  for (k = 1; k < pool; k++) {
    rcl_store *l = sluice_store_malloc(&r->base, sizeof *l);
    if (!l)
      return SLUICE_ENOMEM;
    memcpy(l, r, sizeof *l);
    l->cmd = sluice_store_malloc(&r->base, sizeof *l->cmd);
    if (!l->cmd) {
      sluice_store_free(&r->base, l, sizeof *l);
      return SLUICE_ENOMEM;
    }
    l->base.errstr[0] = '\0';
    l->base.errlock = 0;
    l->lanes = NULL;
    l->nlanes = 0;
    l->url_params = NULL;
    memset(&l->st, 0, sizeof l->st);
    for (i = 0; i < l->nnodes; i++) {
      l->nodes[i].c = NULL;
      l->nodes[i].tls = NULL;
      l->nodes[i].retry_at = 0;
      l->nodes[i].backoff_ms = 0;
    }
    /* Each lane its own byte of the marker page: every lane must see the
    ** fork for itself. */
    l->fork_page = r->fork_page ? r->fork_page + k : NULL;
    pthread_mutex_init(&l->mu, NULL);
    r->lanes[k] = l;
    r->nlanes = k + 1;
  }
  return SLUICE_OK;
}

static int rcl_open_as(const char *uri, const sluice_store_config *cfg,
                       sluice_store *s, int force_tls) {
  rcl_store *r = (rcl_store *)s;
  const char *v;
  size_t len, i;
  int rc, pool;
  r->home = r;
  r->nlanes = 1;
  pthread_mutex_init(&r->mu, NULL);
  r->cmd = sluice_store_malloc(s, sizeof *r->cmd);
  r->conf = sluice_store_malloc(s, sizeof *r->conf);
  s->pMethods = &rcl_methods; /* from here xClose cleans up */
  if (!r->cmd || !r->conf)
    return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "redis: out of memory");
  memset(r->conf, 0, sizeof *r->conf);
  if (uri[0] == '/' && uri[1] == '/') {
    r->url_params_len = strlen(uri) + 64;
    r->url_params = sluice_store_malloc(s, r->url_params_len);
    if (!r->url_params)
      return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "redis: out of memory");
    rc = rcl_url_rewrite(s, uri, r->conf, r->url_params, r->url_params_len);
    if (rc != SLUICE_OK)
      return rc;
    uri = r->url_params;
  }
  if ((rc = check_params(s, uri)) != SLUICE_OK ||
      (rc = rcl_conf_parse(s, uri, force_tls, r->conf)) != SLUICE_OK)
    return rc;
  if (r->conf->socket[0]) {
    if (sluice_uri_param(uri, "nodes", &v, &len) == SLUICE_OK)
      return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                                 "redis: give nodes= or socket=, not both");
    /* The seed is the socket (port 0); nodes a cluster names are TCP. */
    snprintf(r->nodes[0].host, sizeof r->nodes[0].host, "%.63s",
             r->conf->socket);
    r->nnodes = 1;
  } else if (sluice_uri_param(uri, "nodes", &v, &len) != SLUICE_OK ||
             len == 0) {
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: nodes=host:port[,host:port...] (or "
                               "socket=/path) is required");
  } else if (parse_nodes(r, v, len) != SLUICE_OK) {
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: bad nodes list '%.*s' (want "
                               "host:port,host:port)",
                               (int)(len > 60 ? 60 : len), v);
  }
  if ((rc = int_param(s, uri, "timeout_ms", 20, 1, 600000, &r->timeout_ms)) ||
      (rc = int_param(s, uri, "connect_timeout_ms", 20, 1, 600000,
                      &r->connect_timeout_ms)) ||
      (rc = int_param(s, uri, "wait_replicas", 0, 0, 16, &r->wait_replicas)) ||
      (rc = int_param(s, uri, "backoff_max_ms", 1000, 1, 600000,
                      &r->backoff_max_ms)) ||
      (rc = int_param(s, uri, "pool", RCL_POOL_DEFAULT, 1, RCL_POOL_MAX,
                      &pool)))
    return rc;
  r->conf->timeout_ms = r->timeout_ms;
  r->conf->connect_timeout_ms = r->connect_timeout_ms;
  if ((rc = engine_param(s, uri, &r->engine)) != SLUICE_OK)
    return rc;
  if (sluice_uri_param(uri, "prefix", &v, &len) == SLUICE_OK) {
    if (len >= RCL_PREFIX_MAX)
      return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                                 "redis: prefix longer than %d bytes",
                                 RCL_PREFIX_MAX - 1);
    for (i = 0; i < len; i++)
      if (v[i] == '{' || v[i] == '}')
        return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                                   "redis: prefix must not contain braces "
                                   "(it would change the keys' hash slot)");
    memcpy(r->prefix, v, len);
    r->prefix_len = len;
  }
  r->testclock = (cfg->flags & SLUICE_OPEN_TESTCLOCK) != 0;
  r->readonly = (cfg->flags & SLUICE_OPEN_READONLY) != 0;
  r->pid = getpid();
#ifdef MADV_WIPEONFORK
  {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, pg, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED && madvise(m, pg, MADV_WIPEONFORK) == 0) {
      r->fork_page = m;
      r->fork_page[0] = 1;
    } else if (m != MAP_FAILED) {
      munmap(m, pg);
    }
  }
#endif
  crc_init(r);
  memset(r->slot_node, RCL_NO_NODE, sizeof r->slot_node);
  /* Ask every seed.  A seed that answers and refuses us (password,
  ** certificate, SELECT) fails the open: that is configuration, best fixed
  ** now.  When none answers at all, the store opens anyway: decisions fail
  ** with SLUICE_EUNAVAIL (the policy layer fails closed or degrades) and
  ** every call asks for the slot map again until a seed answers. */
  rc = refresh_map(r, r->nnodes);
  if (rc != SLUICE_OK && r->hard_rc)
    return r->hard_rc;
  if (rc == SLUICE_OK) {
    /* Load the script on every master now, so that the first decision on
    ** each is one round trip too; a failure here is handled later by the
    ** NOSCRIPT path. */
    uint8_t seen[RCL_MAX_NODES];
    memset(seen, 0, sizeof seen);
    for (i = 0; i < RCL_SLOTS; i++) {
      uint8_t ni = r->slot_node[i];
      if (ni != RCL_NO_NODE && !seen[ni]) {
        seen[ni] = 1;
        if (node_connect(r, ni) == SLUICE_OK && !r->nodes[ni].module)
          (void)load_script(r, ni);
      }
    }
  }
  /* engine=module and a master without the module: configuration. */
  if (r->hard_rc == SLUICE_ENOTSUP)
    return r->hard_rc;
  if (make_lanes(r, pool) != SLUICE_OK)
    return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "redis: out of memory");
  s->errstr[0] = '\0';
  s->backend_err = 0;
  return SLUICE_OK;
}

static int rcl_open(const sluice_backend *b, const char *uri,
                    const sluice_store_config *cfg, sluice_store *s) {
  (void)b;
  return rcl_open_as(uri, cfg, s, 0);
}

/* "rediss:": the same store, TLS required (rediss://host:port URLs). */
static int rcls_open(const sluice_backend *b, const char *uri,
                     const sluice_store_config *cfg, sluice_store *s) {
  (void)b;
  return rcl_open_as(uri, cfg, s, 1);
}

const sluice_backend sluice__backend_redis = {2, (int)sizeof(rcl_store),
                                              "redis", NULL, rcl_open,
                                              known_params};
const sluice_backend sluice__backend_rediss = {2, (int)sizeof(rcl_store),
                                               "rediss", NULL, rcls_open,
                                               known_params};

/*
** Redis store: the same limits across a fleet.
**
** State lives in Redis, one key per record, and each decision (a
** program: an operation is a program of one step) runs inside Redis as a
** Lua script (in lua/), a port of lib/algo over the same 16-byte records,
** or as the module's command (module/), so a decision is atomic where the
** state lives and there is one truth per algorithm.  The C side only
** routes, pipelines and maps failures; it never decides.
**
** Routing.  A Redis Cluster shards keys by CRC16(hash tag) mod 16384.  The
** store keeps a slot -> master map loaded with CLUSTER SLOTS from any known
** node, follows MOVED (patching the slot at once and reloading the map on
** the next call) and ASK (one ASKING'd retry, no map change).  A server
** without cluster support answers CLUSTER SLOTS with an error; it is then
** used for every slot.  Every key of a group carries the same hash tag (the
** core validates that), so a program is one EVALSHA on one node.
**
** Round trips.  Programs are pipelined per node: a batch writes every
** node's commands before reading any reply, so it costs one round trip per
** node touched, and a single decision costs one; a node's consecutive
** programs (of one slot) go as one call.  A reply that says the
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
**     idle one when it is not (lane_lock in redis_route.c).  Lanes share
**     only the configuration; connections are made on first use.
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
**
** Files: this one has the methods (redis_run, get, delete, control) and
** open/close/params; redis_route.c the nodes and their connections, the
** engine each runs (module or script), the slot map and the lanes;
** redis_codec.c the wire codec (building calls over wire.h, decoding
** replies, redirects); redis_round.c the pipelined rounds; redis_int.h
** the types they share.
*/
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "redis_int.h"
#include "split.h"
#include "op.h"
#include "store.h"

/* ----------------------------------------------------------- methods --- */

/* What a program must pass before anything is sent, whichever path
** carries it (the rounds here, the halves in redis_split.c): a writable
** store, and every step within the Lua port's exact range.  The error
** detail is set (under the lane's or the split lane's mutex). */
int sluice__rcl_prog_check(rcl_store *r, const sluice_program *p) {
  int i, rc = SLUICE_OK;
  if (r->readonly)
    return sluice_store_seterr(&r->base, SLUICE_EPERM, 0,
                               "redis: store opened read-only");
  for (i = 0; i < p->nsteps && rc == SLUICE_OK; i++) {
    sluice_op op;
    sluice__program_step_op(p, i, &op);
    rc = sluice__rcl_range_check(&op);
  }
  return rc == SLUICE_OK ? rc
                         : sluice_store_seterr(&r->base, rc, 0,
                                               "redis: parameters outside the "
                                               "exact range of the Lua port "
                                               "(see docs/redis.md)");
}

/* The store's one decision path: n programs over one lane, pipelined,
** every node's share written before any reply is read, consecutive
** programs of a node (a slot, in a cluster) in one call (run_round).
** Programs take a lane like any call: on lane 0 alone every thread of a
** service would queue on one connection. */
static int redis_run(sluice_store *s, int n, const sluice_program *ps,
                     int64_t now, sluice_program_result *res, int *rcs) {
  rcl_store *home = (rcl_store *)s, *r;
  rcl_job stack[RCL_STACK_JOBS], *jobs = stack;
  int i, nj = 0, rc = SLUICE_OK;
  if (n <= 0)
    return SLUICE_OK;
  if (n > RCL_STACK_JOBS &&
      !(jobs = sluice__store_malloc(s, sizeof(rcl_job) * (size_t)n)))
    return SLUICE_ENOMEM;
  /* Everything that may write the error detail runs under the mutex. */
  r = sluice__rcl_lane_lock(home);
  for (i = 0; i < n; i++) {
    if ((rcs[i] = sluice__rcl_prog_check(r, &ps[i])) != SLUICE_OK)
      continue;
    memset(&jobs[nj], 0, sizeof jobs[nj]);
    jobs[nj].type = JOB_RUN;
    jobs[nj].prog = &ps[i];
    jobs[nj].res = &res[i];
    jobs[nj++].now = now;
  }
  if (nj > 0)
    rc = sluice__rcl_run_jobs(r, jobs, nj);
  pthread_mutex_unlock(&r->mu);
  for (i = 0; i < nj; i++)
    rcs[jobs[i].prog - ps] = jobs[i].rc;
  if (jobs != stack)
    sluice__store_free(s, jobs, sizeof(rcl_job) * (size_t)n);
  return rc;
}

/* A get or a delete: one job on a lane. */
static int run_one(sluice_store *s, rcl_job *j) {
  rcl_store *home = (rcl_store *)s, *r = sluice__rcl_lane_lock(home);
  int rc = j->type == JOB_DEL && r->readonly
               ? sluice_store_seterr(s, SLUICE_EPERM, 0,
                                     "redis: store opened read-only")
               : sluice__rcl_run_jobs(r, j, 1);
  pthread_mutex_unlock(&r->mu);
  return rc != SLUICE_OK ? rc : j->rc;
}

static int rcl_get(sluice_store *s, const sluice_key *key, int64_t now,
                   sluice_state *out, int64_t *exp) {
  rcl_job j = {.type = JOB_GET, .key = key, .st_out = out, .exp_out = exp,
               .now = now};
  return run_one(s, &j);
}

static int rcl_delete(sluice_store *s, const sluice_key *key) {
  rcl_job j = {.type = JOB_DEL, .key = key};
  return run_one(s, &j);
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

/* A control op that concerns every lane: each in turn, under its lock. */
static int control_lanes(rcl_store *home, int op, void *arg) {
  sluice_redis_stats sum;
  int k, i, rc = SLUICE_OK;
  memset(&sum, 0, sizeof sum);
  for (k = 0; k < home->nlanes; k++) {
    rcl_store *r = home->lanes[k];
    pthread_mutex_lock(&r->mu);
    sluice__rcl_fork_check(r);
    if (op == SLUICE_CTL_REDIS_REFRESH) {
      int lrc = sluice__rcl_refresh_map(r, r->nnodes);
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
        sluice__rcl_link_close(&r->nodes[i].c, &r->nodes[i].tls);
    }
    pthread_mutex_unlock(&r->mu);
  }
  if (op == SLUICE_CTL_REDIS_STATS && home->split) {
    /* The policy's decisions are read on the split lane (redis_split.c),
    ** whoever carried them. */
    pthread_mutex_lock(&home->split->mu);
    stats_add(&sum, &home->split->st);
    pthread_mutex_unlock(&home->split->mu);
  }
  if (op == SLUICE_CTL_REDIS_STATS) {
    sum.pool = home->nlanes;
    *(sluice_redis_stats *)arg = sum;
  }
  return rc;
}

static int rcl_control(sluice_store *s, int op, void *arg) {
  rcl_store *home = (rcl_store *)s, *r;
  sluice_redis_node_of *q = arg;
  sluice_key k;
  int rc, ni;
  if (op <= SLUICE__CTL_SPLIT_OPEN && op >= SLUICE__CTL_SPLIT_CLOSE)
    return sluice__rcl_split_control(home, op, arg);
  if (op == SLUICE_CTL_PARAMS_IN_RANGE) {
    /* The check every op gets before a command is sent, asked ahead. */
    if (!arg || (rc = sluice__op_validate_params(arg)) != SLUICE_OK)
      return arg ? rc : SLUICE_EINVAL;
    rc = sluice__rcl_range_check(arg);
    return rc == SLUICE_ERANGE
               ? sluice_store_seterr(s, rc, 0,
                                     "beyond the exact range of the Redis "
                                     "scripts (2^52 ns: GCRA burst * "
                                     "period_ns, window and box lengths, "
                                     "TTLs; docs/redis.md)")
               : rc;
  }
  if (op == SLUICE_CTL_REDIS_REFRESH || op == SLUICE_CTL_REDIS_DROP ||
      op == SLUICE_CTL_REDIS_STATS)
    return op == SLUICE_CTL_REDIS_STATS && !arg ? SLUICE_EINVAL
                                                : control_lanes(home, op, arg);
  if (op != SLUICE_CTL_REDIS_NODE_OF)
    return SLUICE_ENOTFOUND;
  if (!q || !q->key || q->keylen == 0 || q->keylen > SLUICE_KEY_MAX)
    return SLUICE_EINVAL;
  k.data = q->key;
  k.len = q->keylen;
  /* NODE_OF answers from the map of the lane this thread decides on. */
  r = sluice__rcl_lane_lock(home);
  q->slot = sluice__rcl_jkey_slot(r, &k);
  ni = r->slot_node[r->cluster ? q->slot : 0];
  q->port = 0;
  q->host[0] = '\0';
  if (ni != RCL_NO_NODE && ni < r->nnodes) {
    q->port = r->nodes[ni].port;
    snprintf(q->host, sizeof q->host, "%s", r->nodes[ni].host);
  }
  pthread_mutex_unlock(&r->mu);
  return SLUICE_OK;
}

static unsigned rcl_caps(sluice_store *s) {
  (void)s;
  return SLUICE_CAP_THREADSAFE | SLUICE_CAP_CROSS_PROCESS |
         SLUICE_CAP_DISTRIBUTED | SLUICE_CAP_NATIVE_ALGO |
         SLUICE_CAP_OWN_CLOCK;
}

static void lane_free(rcl_store *l) {
  int i;
  /* A child closing a store its parent opened must not touch the parent's
  ** sockets beyond closing its own descriptors, which link_close does. */
  for (i = 0; i < l->nnodes; i++)
    sluice__rcl_link_close(&l->nodes[i].c, &l->nodes[i].tls);
  pthread_mutex_destroy(&l->mu);
}

static int rcl_close(sluice_store *s) {
  rcl_store *r = (rcl_store *)s;
  int k;
  for (k = 1; k <= r->nlanes; k++) { /* lanes 1.., then the split lane */
    rcl_store *l = k < r->nlanes ? r->lanes[k] : r->split;
    if (l) {
      lane_free(l);
      sluice__store_free(s, l, sizeof *r);
    }
  }
  sluice__store_free(s, r->lanes, sizeof *r->lanes * RCL_POOL_MAX);
  if (r->fork_page)
    munmap((void *)r->fork_page, (size_t)sysconf(_SC_PAGESIZE));
  lane_free(r);
  if (r->conf) {
    sluice__rcl_conf_free(r->conf);
    sluice__store_free(s, r->conf, sizeof *r->conf);
  }
  sluice__store_free(s, r->url_params, r->url_params_len);
  return SLUICE_OK;
}

static const sluice_store_methods rcl_methods = {
    SLUICE_BACKEND_VERSION,
    rcl_close,
    redis_run, /* xRun: the one decision path */
    rcl_get,
    rcl_delete,
    rcl_control, /* SLUICE_CTL_REDIS_* */
    rcl_caps,
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
  if (sluice__uri_int(uri, name, dflt, &v) != SLUICE_OK || v < lo || v > hi)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: %s must be an integer in %lld..%lld",
                               name, (long long)lo, (long long)hi);
  *out = (int)v;
  return SLUICE_OK;
}

/* engine=auto|module|lua|script (docs/redis.md, "The module"). */
static int engine_param(sluice_store *s, const char *uri, int *out) {
  static const char *const names[] = {"auto", "module", "lua", "script"};
  const char *v;
  size_t len;
  int i;
  *out = RCL_ENGINE_AUTO;
  if (sluice_uri_param(uri, "engine", &v, &len) != SLUICE_OK)
    return SLUICE_OK;
  for (i = 0; i < 4; i++)
    if (len == strlen(names[i]) && memcmp(v, names[i], len) == 0) {
      *out = i;
      return SLUICE_OK;
    }
  return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                             "redis: engine must be auto, module, lua or "
                             "script");
}

static int parse_nodes(rcl_store *r, const char *v, size_t len) {
  size_t i = 0;
  while (i < len) {
    size_t j = i, colon = (size_t)-1;
    char *end;
    long port;
    while (j < len && v[j] != ',') {
      if (v[j] == ':')
        colon = j;
      j++;
    }
    if (colon == (size_t)-1 || colon == i || colon + 1 >= j ||
        !isdigit((unsigned char)v[colon + 1]))
      return SLUICE_EINVAL;
    port = strtol(v + colon + 1, &end, 10);
    if (end != v + j || port > 65535 ||
        sluice__rcl_find_node(r, v + i, colon - i, (int)port, 1) < 0)
      return SLUICE_EINVAL;
    i = j + 1;
  }
  return r->nnodes > 0 ? SLUICE_OK : SLUICE_EINVAL;
}

/* A copy of lane 0 (its parameters and whatever slot map it has) without
** connections; a lane connects on first use. */
static rcl_store *lane_copy(rcl_store *r) {
  rcl_store *l = sluice__store_malloc(&r->base, sizeof *l);
  int i;
  if (!l)
    return NULL;
  memcpy(l, r, sizeof *l);
  memset(&l->cmd, 0, sizeof l->cmd);
  l->lanes = NULL;
  l->nlanes = 0;
  l->url_params = NULL;
  l->split = NULL;
  l->fork_page = NULL;
  memset(&l->st, 0, sizeof l->st);
  for (i = 0; i < l->nnodes; i++) {
    l->nodes[i].c = NULL;
    l->nodes[i].tls = NULL;
    l->nodes[i].retry_at = 0;
    l->nodes[i].backoff_ms = 0;
  }
  pthread_mutex_init(&l->mu, NULL);
  return l;
}

/* Lanes 1..pool-1, and the routing of calls in two halves. */
static int make_lanes(rcl_store *r, int pool) {
  int k;
  r->lanes = sluice__store_malloc(&r->base, sizeof *r->lanes * RCL_POOL_MAX);
  if (!r->lanes)
    return SLUICE_ENOMEM;
  r->lanes[0] = r;
  r->nlanes = 1;
  for (k = 1; k < pool; k++) {
    rcl_store *l = lane_copy(r);
    if (!l)
      return SLUICE_ENOMEM;
    /* Each lane its own byte of the marker page: every lane must see the
    ** fork for itself. */
    l->fork_page = r->fork_page ? r->fork_page + k : NULL;
    r->lanes[k] = l;
    r->nlanes = k + 1;
  }
  r->split = lane_copy(r);
  return r->split ? SLUICE_OK : SLUICE_ENOMEM;
}

static int rcl_open_as(const char *uri, const sluice_store_config *cfg,
                       sluice_store *s, int force_tls) {
  rcl_store *r = (rcl_store *)s;
  const char *v;
  size_t len, i;
  int rc, pool;
  r->nlanes = 1;
  pthread_mutex_init(&r->mu, NULL);
  r->conf = sluice__store_malloc(s, sizeof *r->conf);
  s->pMethods = &rcl_methods; /* from here xClose cleans up */
  if (!r->conf)
    return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "redis: out of memory");
  memset(r->conf, 0, sizeof *r->conf);
  if (uri[0] == '/' && uri[1] == '/') {
    r->url_params_len = strlen(uri) + 64;
    r->url_params = sluice__store_malloc(s, r->url_params_len);
    if (!r->url_params)
      return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "redis: out of memory");
    rc = sluice__rcl_url_rewrite(s, uri, r->conf, r->url_params,
                                 r->url_params_len);
    if (rc != SLUICE_OK)
      return rc;
    uri = r->url_params;
  }
  if ((rc = check_params(s, uri)) != SLUICE_OK ||
      (rc = sluice__rcl_conf_parse(s, uri, force_tls, r->conf)) != SLUICE_OK)
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
  if ((rc = int_param(s, uri, "timeout_ms", 20, 1, 600000,
                      &r->conf->timeout_ms)) ||
      (rc = int_param(s, uri, "connect_timeout_ms", 20, 1, 600000,
                      &r->conf->connect_timeout_ms)) ||
      (rc = int_param(s, uri, "wait_replicas", 0, 0, 16, &r->wait_replicas)) ||
      (rc = int_param(s, uri, "backoff_max_ms", 1000, 1, 600000,
                      &r->backoff_max_ms)) ||
      (rc = int_param(s, uri, "pool", RCL_POOL_DEFAULT, 1, RCL_POOL_MAX,
                      &pool)))
    return rc;
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
  sluice__rcl_crc_init(r);
  memset(r->slot_node, RCL_NO_NODE, sizeof r->slot_node);
  /* Ask every seed.  A seed that answers and refuses us (password,
  ** certificate, SELECT) fails the open: that is configuration, best fixed
  ** now.  When none answers at all, the store opens anyway: decisions fail
  ** with SLUICE_EUNAVAIL (the policy layer fails closed or degrades) and
  ** every call asks for the slot map again until a seed answers. */
  rc = sluice__rcl_refresh_map(r, r->nnodes);
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
        if (sluice__rcl_node_connect(r, ni) == SLUICE_OK &&
            !r->nodes[ni].module && !r->nodes[ni].fn)
          (void)sluice__rcl_load_script(r, ni);
      }
    }
  }
  /* engine=module and a master without the module, or a master that has
  ** neither the module nor Lua: configuration. */
  if (r->hard_rc == SLUICE_ENOTSUP)
    return r->hard_rc;
  if (make_lanes(r, pool) != SLUICE_OK)
    return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "redis: out of memory");
  (void)sluice_store_seterr(s, SLUICE_OK, 0, NULL); /* connects that failed */
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

const sluice_backend sluice__backend_redis = {SLUICE_BACKEND_VERSION, (int)sizeof(rcl_store),
                                              "redis", NULL, rcl_open,
                                              known_params};
const sluice_backend sluice__backend_rediss = {SLUICE_BACKEND_VERSION, (int)sizeof(rcl_store),
                                               "rediss", NULL, rcls_open,
                                               known_params};


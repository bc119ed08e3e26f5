/*
** Redis store: nodes and their connections, which engine each runs
** (module or script), the slot map and the lanes.  The design is in
** redis_store.c (Routing, Failure, and its choices on lanes and fork).
*/
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redis_int.h"
#include "sluice_rcl_script.h"

/* ------------------------------------------------------------ helpers --- */

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sluice__rcl_crc_init(rcl_store *r) {
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

int sluice__rcl_jkey_slot(const rcl_store *r, const sluice_key *k) {
  /* The prefix holds no braces, so a tagged key keeps its slot; an untagged
  ** key hashes over prefix + key, which is what Redis sees. */
  char buf[RCL_PREFIX_MAX + SLUICE_KEY_MAX];
  memcpy(buf, r->prefix, r->prefix_len);
  memcpy(buf + r->prefix_len, k->data, k->len);
  return key_slot(r, buf, r->prefix_len + k->len);
}

int sluice__rcl_find_node(rcl_store *r, const char *host, size_t hlen, int port,
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
  /* Until it is connected (the split lane never connects, redis_split.c),
  ** a node runs the engine the first seed runs. */
  r->nodes[i].module = r->nodes[0].module;
  r->nodes[i].fn = r->nodes[0].fn;
  memcpy(r->nodes[i].host, host, hlen);
  r->nodes[i].host[hlen] = '\0';
  r->nodes[i].port = port;
  return i;
}

void sluice__rcl_fork_check(rcl_store *r) {
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
    sluice__rcl_link_close(&r->nodes[i].c, &r->nodes[i].tls);
    r->nodes[i].retry_at = 0;
    r->nodes[i].backoff_ms = 0;
  }
  r->pid = p;
}

/* A connection failed mid-command: drop it, and say which code applies. */
int sluice__rcl_node_io_error(rcl_store *r, int ni, int saved_errno) {
  rcl_node *n = &r->nodes[ni];
  int timeout = n->c && n->c->err == REDIS_ERR_IO &&
                sluice__rcl_is_timeout_errno(saved_errno);
  int rc = timeout ? SLUICE_ETIMEDOUT : SLUICE_EUNAVAIL;
  sluice_store_seterr(&r->base, rc, n->c ? n->c->err : 0,
                      "redis %s:%d: %s (%s)", n->host, n->port,
                      timeout ? "timed out" : "connection lost",
                      n->c ? n->c->errstr : "no context");
  sluice__rcl_link_close(&n->c, &n->tls);
  r->map_stale = 1;
  return rc;
}

/* One command (hiredis's format), one reply, on node ni (admin paths:
** slot map, engine, loading the Lua). */
static int node_command(rcl_store *r, int ni, redisReply **out,
                        const char *fmt, ...) {
  void *rep = NULL;
  int rc = sluice__rcl_node_connect(r, ni), e;
  va_list ap;
  *out = NULL;
  if (rc != SLUICE_OK)
    return rc;
  va_start(ap, fmt);
  redisvAppendCommand(r->nodes[ni].c, fmt, ap);
  va_end(ap);
  errno = 0;
  if (sluice__rcl_link_reply(r->nodes[ni].c, r->nodes[ni].tls, &rep) !=
          REDIS_OK ||
      !rep) {
    e = errno;
    return sluice__rcl_node_io_error(r, ni, e);
  }
  r->st.round_trips++;
  *out = rep;
  return SLUICE_OK;
}

/* Whether a fresh connection runs the Lua as a library (FCALL) or as a
** script (EVALSHA).  A node with Redis Functions (Redis 7, Valkey) gets
** the library, loaded now when it lacks this version of it: its helpers
** are made once at load instead of on every call.  FUNCTION LIST answers
** an array there; an error (an older server: unknown command; an ACL user
** without +function|list or +function|load) leaves the script, which
** the NOSCRIPT path loads.  engine=script: always the script. */
static int node_functions(rcl_store *r, int ni) {
  rcl_node *n = &r->nodes[ni];
  redisReply *rep;
  int rc, have;
  if (r->engine == RCL_ENGINE_SCRIPT)
    return SLUICE_OK;
  rc = node_command(r, ni, &rep, "FUNCTION LIST LIBRARYNAME %s",
                    sluice_rcl_script_function);
  if (rc != SLUICE_OK)
    return rc;
  /* LIBRARYNAME is a pattern; the name has no pattern characters. */
  have = rep->type == REDIS_REPLY_ARRAY ? (int)rep->elements : -1;
  freeReplyObject(rep);
  if (have < 0)
    return SLUICE_OK;
  n->fn = 1;
  if (have == 0 && sluice__rcl_load_script(r, ni) != SLUICE_OK && n->c) {
    n->fn = 0; /* loading refused (ACL): the script */
    (void)sluice_store_seterr(&r->base, SLUICE_OK, 0, NULL);
  }
  return n->c ? SLUICE_OK : SLUICE_EUNAVAIL;
}

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
  rcl_node *n = &r->nodes[ni];
  redisReply *rep;
  int rc;
  n->module = 0;
  n->fn = 0;
  if (r->engine == RCL_ENGINE_LUA || r->engine == RCL_ENGINE_SCRIPT)
    return node_functions(r, ni);
  rc = node_command(r, ni, &rep, "COMMAND INFO sluice.run");
  if (rc != SLUICE_OK)
    return rc;
  n->module = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
              rep->element[0]->type == REDIS_REPLY_ARRAY;
  freeReplyObject(rep);
  if (!n->module && r->engine == RCL_ENGINE_AUTO)
    return node_functions(r, ni);
  if (n->module)
    return SLUICE_OK;
  sluice__rcl_link_close(&n->c, &n->tls);
  r->hard_rc = SLUICE_ENOTSUP;
  n->backoff_ms = r->backoff_max_ms;
  n->retry_at = mono_ns() + (int64_t)n->backoff_ms * 1000000;
  return sluice_store_seterr(&r->base, SLUICE_ENOTSUP, 0,
                             "redis %s:%d: engine=module, but the node has "
                             "no sluice module (load sluice_redis.so)",
                             n->host, n->port);
}

int sluice__rcl_node_connect(rcl_store *r, int ni) {
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
  rc = sluice__rcl_link_open(r->conf, n->port ? n->host : NULL, n->port, &n->c,
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

/* An error reply that says the server runs no Lua at all: the command
** unknown (a server built without scripting), or Valkey 9.1 without its
** Lua engine module. */
static int no_lua(const redisReply *rep) {
  return rep->type == REDIS_REPLY_ERROR && rep->str &&
         (strncmp(rep->str, "ERR unknown command", 19) == 0 ||
          strcasestr(rep->str, "engine") || strcasestr(rep->str, "disabled"));
}

/* The command that loads the Lua on node ni: the library (FUNCTION LOAD)
** where the connection calls it, else the script (SCRIPT LOAD). */
void sluice__rcl_load_argv(const rcl_store *r, int ni, const char *argv[3],
                           size_t lens[3]) {
  int fn = r->nodes[ni].fn;
  argv[0] = fn ? "FUNCTION" : "SCRIPT";
  lens[0] = fn ? 8 : 6;
  argv[1] = "LOAD";
  lens[1] = 4;
  argv[2] = fn ? sluice_rcl_script_library : sluice_rcl_script;
  lens[2] = fn ? sizeof sluice_rcl_script_library - 1
               : sizeof sluice_rcl_script - 1;
}

/* What the load's reply says: SLUICE_OK (a library there already is
** fine), or why nothing can decide on this node. */
int sluice__rcl_load_reply(rcl_store *r, int ni, const redisReply *rep) {
  rcl_node *n = &r->nodes[ni];
  int ok = n->fn ? rep->type == REDIS_REPLY_STRING ||
                       (rep->type == REDIS_REPLY_ERROR &&
                        strstr(rep->str, "already exists"))
                 : rep->type == REDIS_REPLY_STRING;
  if (ok)
    return SLUICE_OK;
  if (!n->fn && no_lua(rep)) {
    /* No module here (else the script would not be loaded) and no Lua:
    ** nothing can decide on this node. */
    r->hard_rc = SLUICE_ENOTSUP;
    return sluice_store_seterr(&r->base, SLUICE_ENOTSUP, 0,
                               "redis %s:%d: no Lua on the server: load the "
                               "sluice module (sluice_redis.so) or enable "
                               "Lua (%.40s)",
                               n->host, n->port, rep->str);
  }
  return sluice_store_seterr(&r->base, SLUICE_EBACKEND, 0,
                             "redis %s:%d: %s LOAD: %.80s", n->host, n->port,
                             n->fn ? "FUNCTION" : "SCRIPT",
                             rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
}

/* Load the Lua on node ni. */
int sluice__rcl_load_script(rcl_store *r, int ni) {
  const char *argv[3];
  size_t lens[3];
  redisReply *rep;
  int rc;
  sluice__rcl_load_argv(r, ni, argv, lens);
  rc = node_command(r, ni, &rep, "%b %b %b", argv[0], lens[0], argv[1],
                    lens[1], argv[2], lens[2]);
  if (rc != SLUICE_OK)
    return rc;
  rc = sluice__rcl_load_reply(r, ni, rep);
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
    idx = sluice__rcl_find_node(r, host, hlen, (int)m->element[1]->integer, 1);
    if (idx < 0 || a < 0 || b >= RCL_SLOTS || a > b)
      continue;
    for (s = a; s <= b; s++)
      map[s] = (uint8_t)idx;
  }
  memcpy(r->slot_node, map, sizeof map);
  return SLUICE_OK;
}

/* Node ni's answer to CLUSTER SLOTS into the map: SLUICE_OK (a server
** without cluster support serves every slot), or why not. */
int sluice__rcl_slots_reply(rcl_store *r, int ni, const redisReply *rep) {
  int rc;
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
  if (rc == SLUICE_OK) {
    r->map_ok = 1;
    r->map_stale = 0;
    r->map_loaded_at = mono_ns();
    r->st.refreshes++;
  }
  return rc;
}

/* Load the slot map from the first node that answers, starting after the
** one used last time so that a dead node is not asked first forever. */
int sluice__rcl_refresh_map(rcl_store *r, int max_tries) {
  int tries, rc = SLUICE_EUNAVAIL;
  for (tries = 0; tries < r->nnodes && tries < max_tries; tries++) {
    int ni = (r->refresh_cursor + tries) % r->nnodes;
    redisReply *rep;
    rc = node_command(r, ni, &rep, "CLUSTER SLOTS");
    if (rc != SLUICE_OK)
      continue;
    rc = sluice__rcl_slots_reply(r, ni, rep);
    freeReplyObject(rep);
    if (rc == SLUICE_OK) {
      r->refresh_cursor = ni;
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
void sluice__rcl_maybe_refresh(rcl_store *r) {
  if (!r->map_ok ||
      (r->cluster && r->map_stale &&
       mono_ns() - r->map_loaded_at > 50 * (int64_t)1000000))
    (void)sluice__rcl_refresh_map(r, 2);
}

/* ------------------------------------------------------------- lanes --- */

/* Which lane a thread tries first: threads are numbered on their first call
** and spread over the lanes, so up to nlanes threads each keep their own
** connections; when that lane is busy any idle one will do.  The caller
** unlocks the lane's mutex.  A lane is a copy of the home store, its base
** included: its pCore is the store's, so the error detail a lane sets is
** already the store's (what sluice_limiter_errmsg reads), under the core's
** lock. */
static _Thread_local unsigned rcl_thread_no;
static unsigned rcl_threads;

rcl_store *sluice__rcl_lane_lock(rcl_store *home) {
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

/*
** A decision in two halves (sluice/halves.h), with this file as the host:
** it carries the bytes on its own sockets, as an event loop would.
**
**  - On mem, begin decides at once (no store call leaves the process).
**  - On a real Redis (single server and cluster, under tests/redis/
**    harness.py, both engines): the halves give the same decisions as the
**    blocking sluice_policy_decide() on the same trace, each on its own
**    key prefix with the same manual clock (the store in test mode).
**  - Redirections: a slot migrating (ASK) and moved (MOVED) mid-run; the
**    script or library flushed (NOSCRIPT, function missing); a node that
**    fails mid-call; bytes that are not a reply, or only part of one.
**  - Settling (begin with SLUICE_CALL_SETTLE): the LLM gateway's trace with
**    settles, blocking on one policy and in halves on another, gives the
**    same decisions and settle results, on mem (no call leaves) and on
**    Redis; a settle whose call fails is not marked settled.
*/
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "helpers.h"
#include "../redis/redis_test.h"

/* ------------------------------------------------------------ the host --- */

#define HOST_CONNS 16

typedef struct host {
  int n;
  int fd[HOST_CONNS];
  int port[HOST_CONNS];
  int sends;      /* bytes sent, all decisions */
  int saw_load;   /* a call carried SCRIPT/FUNCTION LOAD */
  int saw_asking; /* a call carried ASKING */
  int other_node; /* a call went to a node the first did not */
  char buf[1 << 16];
} host;

static void host_init(host *h) {
  memset(h, 0, sizeof *h);
}

static void host_drop(host *h, int i) {
  close(h->fd[i]);
  h->fd[i] = h->fd[h->n - 1];
  h->port[i] = h->port[h->n - 1];
  h->n--;
}

static void host_close(host *h) {
  while (h->n > 0)
    host_drop(h, 0);
}

/* A connection to 127.0.0.1:port (the harness's nodes all listen there). */
static int host_conn(host *h, int port) {
  struct sockaddr_in a;
  struct timeval tv = {5, 0};
  int i, fd;
  for (i = 0; i < h->n; i++)
    if (h->port[i] == port)
      return i;
  cr_assert_lt(h->n, HOST_CONNS);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_geq(fd, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0,
               "connect %d: %s", port, strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  h->fd[h->n] = fd;
  h->port[h->n] = port;
  return h->n++;
}

static int has(const void *b, size_t n, const char *w) {
  return memmem(b, n, w, strlen(w)) != NULL;
}

/* Where the handle stands. */
static sluice_call_info call_info(const sluice_call *call) {
  sluice_call_info ci;
  cr_assert_eq(sluice_call_get(call, &ci), SLUICE_OK);
  return ci;
}

/* Carry one call: write its bytes, read until finish stops asking. */
static int host_carry(host *h, sluice_call *call, sluice_decision *d) {
  size_t n = call_info(call).len, len = 0;
  const void *b = call_info(call).bytes;
  int i, rc, first = h->sends == 0 ? call_info(call).port : 0;
  cr_assert(b && n > 0, "bytes to send");
  cr_assert_str_eq(call_info(call).host, "127.0.0.1");
  cr_assert_geq(call_info(call).replies, 1);
  h->saw_load |= has(b, n, "LOAD");
  h->saw_asking |= has(b, n, "ASKING");
  (void)first;
  i = host_conn(h, call_info(call).port);
  h->sends++;
  cr_assert_eq(write(h->fd[i], b, n), (ssize_t)n);
  do {
    ssize_t k = read(h->fd[i], h->buf + len, sizeof h->buf - len);
    if (k <= 0) {
      host_drop(h, i);
      return sluice_policy_finish(call, SLUICE_EUNAVAIL, NULL, 0, d);
    }
    len += (size_t)k;
    rc = sluice_policy_finish(call, 0, h->buf, len, d);
  } while (rc == SLUICE_CALL_MORE);
  if (rc == SLUICE_CALL_DONE && call_info(call).store_error < 0)
    host_drop(h, i);
  return rc;
}

/* One whole reply from fd into buf (hiredis's reader says when). */
static size_t read_whole(int fd, char *buf, size_t cap) {
  redisReader *rd = redisReaderCreate();
  void *rep = NULL;
  size_t len = 0;
  while (!rep) {
    ssize_t k = read(fd, buf + len, cap - len);
    cr_assert_gt(k, 0, "a reply");
    cr_assert_eq(redisReaderFeed(rd, buf + len, (size_t)k), REDIS_OK);
    len += (size_t)k;
    cr_assert_eq(redisReaderGetReply(rd, &rep), REDIS_OK);
  }
  freeReplyObject(rep);
  redisReaderFree(rd);
  return len;
}

static int host_decide(host *h, sluice_call *call, const sluice_request *q,
                       sluice_decision *d) {
  int rc = sluice_policy_begin(call, SLUICE_CALL_DECIDE, q, d, NULL, 0);
  while (rc == SLUICE_CALL_SEND)
    rc = host_carry(h, call, d);
  return rc;
}

/* ------------------------------------------------------------ fixtures --- */

/* A policy over the harness's Redis in test mode, its keys under prefix. */
/* The store's clock: the test clock, but where a test runs on Redis's. */
static int open_flags = SLUICE_OPEN_TESTCLOCK;

static void open_redis(fixture *f, const sluice_policy_config *cfg,
                       const char *prefix, const char *extra) {
  char store[1024];
  const char *eng = rt_engine(extra);
  int rc;
  snprintf(store, sizeof store,
           "redis:nodes=%s;timeout_ms=3000;connect_timeout_ms=3000;"
           "prefix=%s%s%s%s%s",
           rt_nodes(), prefix, extra && *extra ? ";" : "", extra ? extra : "",
           *eng ? ";" : "", eng);
  rc = fx_open_store(f, cfg, store, open_flags);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s", store, sluice_strerror(rc));
}

static sluice_policy_config *small_cfg(void) {
  sluice_policy_config *cfg = cfg_new();
  cfg_set(cfg, "limits.tenant.burst", 80);
  cfg_set(cfg, "limits.key.burst", 50);
  cfg_set(cfg, "penalties.keys.strikes", 3);
  cfg_set(cfg, "limits.key.params.growth.burst", 60);
  cfg_set(cfg, "limits.exports_per_hour.params.growth.limit", 2);
  cfg_set(cfg, "ip_backstop.limit", 110);
  return cfg;
}

/* The fields a decision reports, compared one by one (a lease id is
** random: only whether there is one). */
static void same_decision(const sluice_decision *a, const sluice_decision *b,
                          int i) {
  cr_assert_eq(a->outcome, b->outcome, "request %d: outcome %d vs %d", i,
               a->outcome, b->outcome);
  cr_assert_eq(a->allowed, b->allowed, "request %d", i);
  cr_assert_eq(a->status, b->status, "request %d", i);
  cr_assert_eq(a->flags, b->flags, "request %d: flags %x vs %x", i, a->flags,
               b->flags);
  cr_assert_eq(a->binding, b->binding, "request %d", i);
  cr_assert_eq(a->limit, b->limit, "request %d", i);
  cr_assert_eq(a->remaining, b->remaining, "request %d: remaining", i);
  cr_assert_eq(a->reset_ns, b->reset_ns, "request %d", i);
  cr_assert_eq(a->retry_after_ns, b->retry_after_ns, "request %d", i);
  cr_assert_eq(a->penalty_level, b->penalty_level, "request %d", i);
  cr_assert_eq(a->lockout_end_ns, b->lockout_end_ns, "request %d", i);
  cr_assert_eq(a->strikes_remaining, b->strikes_remaining, "request %d", i);
  cr_assert_eq(a->cap_limit, b->cap_limit, "request %d", i);
  cr_assert_eq(a->store_error, b->store_error, "request %d", i);
  cr_assert_eq(a->lease_id != 0, b->lease_id != 0, "request %d", i);
  cr_assert_eq(a->now_ns, b->now_ns, "request %d", i);
}

/* Request i of the trace: standard requests over three tenants and their
** keys (some over their buckets, so throttles, strikes and boxes come),
** reconciles and exports (leases, the ledger lock, the export cap), auth
** failures (subject and IP windows, boxes), from a few client IPs (the
** backstop). */
static sluice_request trace_req(int i, unsigned *seed) {
  static const char *const T[] = {"acme", "globex", "initech"};
  static const char *const K[] = {"k1", "k2", "k3"};
  static const char *const IP[] = {"10.1.0.1", "10.1.0.2", "10.1.0.3"};
  static const char *const S[] = {"alice", "bob", "carol", "dave"};
  unsigned r = (unsigned)rand_r(seed);
  sluice_request q;
  int t = (int)(r % 3), k = (int)((r >> 4) % 3), kind = (int)((r >> 8) % 20);
  (void)i;
  if (kind < 9) {
    q = rq_std("acme", "hot", "sandbox"); /* over its bucket: strikes, a box */
  } else if (kind < 13) {
    q = rq_std(T[t], K[k], t == 1 ? "growth" : "sandbox");
  } else if (kind < 15) {
    q = rq_reconcile(T[t], K[k], "growth", k == 0 ? "L1" : "L2");
  } else if (kind < 17) {
    q = rq_export(T[t], K[k], "growth", 0);
  } else {
    q = rq_signin(IP[k], S[(r >> 12) % 4],
                  (r >> 16) % 3 ? "bad_secret" : "ok");
  }
  q.client_ip = IP[(r >> 20) % 3];
  return q;
}

/* The same trace, blocking on one prefix and in halves on another. */
static void differential(const char *extra, int n) {
  char pa[96], pb[96], tag[64];
  sluice_policy_config *cfg;
  fixture fa, fb;
  sluice_call *call;
  host h;
  unsigned sa = 7, sb = 7;
  int i, denied = 0, boxed = 0, heavy = 0, degraded = 0, released = 0;
  rt_tag(tag, sizeof tag, "x");
  snprintf(pa, sizeof pa, "blk%s:", tag + 3);
  snprintf(pb, sizeof pb, "hlv%s:", tag + 3);
  pa[strcspn(pa, "}")] = 0; /* no braces in a prefix */
  pb[strcspn(pb, "}")] = 0;
  strcat(pa, ":");
  strcat(pb, ":");
  cfg = small_cfg();
  open_redis(&fa, cfg, pa, extra);
  open_redis(&fb, cfg, pb, extra);
  host_init(&h);
  cr_assert_eq(sluice_call_open(fb.pol, &call), SLUICE_OK);
  for (i = 0; i < n; i++) {
    sluice_request qa = trace_req(i, &sa), qb = trace_req(i, &sb);
    sluice_decision da, db;
    int64_t step = (int64_t)((unsigned)rand_r(&sa) % 40) * 1000000;
    (void)rand_r(&sb);
    da = decide(&fa, &qa);
    cr_assert_eq(host_decide(&h, call, &qb, &db), SLUICE_CALL_DONE,
                 "request %d", i);
    same_decision(&da, &db, i);
    denied += !da.allowed;
    boxed += da.outcome == SLUICE_OUTCOME_BOXED;
    heavy += da.lease_id != 0;
    degraded += (da.flags & SLUICE_DECISION_DEGRADED) != 0;
    /* Leases go back now and then, on both sides alike (the halves'
    ** side in halves too); the second release of one finds it gone. */
    if (da.lease_id && i % 3 == 0) {
      int k, rc = sluice_policy_begin(call, SLUICE_CALL_RELEASE, &qb, &db, NULL,
                                      0);
      for (k = 0; k < 2; k++) {
        cr_assert_eq(
            sluice_policy_release(fa.pol, &qa,
                                  &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                 .lease_id = da.lease_id}),
            k ? SLUICE_ENOTFOUND : SLUICE_OK);
        while (rc == SLUICE_CALL_SEND)
          rc = host_carry(&h, call, NULL);
        cr_assert_eq(rc, SLUICE_CALL_DONE);
        cr_assert_eq(call_info(call).result, k ? SLUICE_ENOTFOUND : SLUICE_OK,
                     "release %d: %s", k,
                     sluice_err_name(call_info(call).result));
        released++;
        if (!k)
          rc =
              sluice_policy_begin(call, SLUICE_CALL_RELEASE, &qb, &db, NULL, 0);
      }
    }
    sluice_clock_advance(fa.clock, step);
    sluice_clock_advance(fb.clock, step);
  }
  /* The trace meets what it is meant to. */
  cr_assert_gt(denied, n / 10, "denials: %d", denied);
  cr_assert_gt(boxed, 0, "boxes (denied %d, heavy %d)", denied, heavy);
  cr_assert_gt(heavy, 0, "leases");
  cr_assert_gt(released, 0, "releases");
  cr_assert_eq(degraded, 0, "the store answered every call");
  cr_assert_geq(h.sends, n / 2, "the halves carried the calls");
  sluice_call_close(call);
  host_close(&h);
  fx_close(&fa);
  fx_close(&fb);
}

/* ------------------------------------------------------------ settle --- */

/* Request i of an LLM gateway trace: two organizations, three projects,
** two models, mostly small requests with a few of the whole 100000. */
typedef struct llm_req {
  sluice_attr a[4];
  char tokens[16];
  sluice_request q;
} llm_req;

static void llm_trace_req(llm_req *r, unsigned *seed) {
  static const char *const O[] = {"acme", "globex"};
  static const char *const P[] = {"p1", "p2", "p3"};
  static const char *const M[] = {"large", "small"};
  unsigned x = (unsigned)rand_r(seed);
  unsigned t = x % 10 == 0 ? 100000 : (unsigned)rand_r(seed) % 10000;
  snprintf(r->tokens, sizeof r->tokens, "%u", t);
  r->a[0] = (sluice_attr){"org", O[(x >> 4) % 2]};
  r->a[1] = (sluice_attr){"project", P[(x >> 6) % 3]};
  r->a[2] = (sluice_attr){"model", M[(x >> 9) % 2]};
  r->a[3] = (sluice_attr){"tokens", r->tokens};
  memset(&r->q, 0, sizeof r->q);
  r->q.method = "POST";
  r->q.route = "/v1/chat/completions";
  r->q.attrs = r->a;
  r->q.nattrs = 4;
}

/* Settle d in halves (the host carrying any call): the settle's result. */
static int host_settle(host *h, sluice_call *call, const sluice_request *q,
                       sluice_decision *d, const sluice_attr *a) {
  int rc = sluice_policy_begin(call, SLUICE_CALL_SETTLE, q, d, a, 1);
  if (rc < 0)
    return rc;
  while (rc == SLUICE_CALL_SEND)
    rc = host_carry(h, call, NULL);
  cr_assert_eq(rc, SLUICE_CALL_DONE);
  return call_info(call).result;
}

/* The trace decided and settled blocking on fa and in halves on fb: the
** same decisions, the same settle results.  Admitted requests are settled
** a few requests later (mostly below the charge, some above, some twice);
** a denied one is settled too (nothing to settle).  Returns the calls the
** halves' side sent. */
#define NPEND 4
static int settle_differential(fixture *fa, fixture *fb, int n) {
  struct pend {
    llm_req ra, rb;
    sluice_decision da, db;
  } *pend = calloc(NPEND, sizeof *pend);
  sluice_call *call;
  host h;
  unsigned sa = 11, sb = 11, sv = 5;
  int i, k, npend = 0, denied = 0, settled = 0, twice = 0;
  cr_assert_not_null(pend);
  host_init(&h);
  cr_assert_eq(sluice_call_open(fb->pol, &call), SLUICE_OK);
  for (i = 0; i < n; i++) {
    llm_req ra, rb;
    sluice_decision da, db;
    int64_t step = (int64_t)((unsigned)rand_r(&sv) % 3000) * 1000000;
    llm_trace_req(&ra, &sa);
    llm_trace_req(&rb, &sb);
    da = decide(fa, &ra.q);
    cr_assert_eq(host_decide(&h, call, &rb.q, &db), SLUICE_CALL_DONE,
                 "request %d", i);
    same_decision(&da, &db, i);
    if (!da.allowed) {
      sluice_attr z = {"tokens", "0"};
      denied++;
      cr_assert_eq(sluice_policy_settle(fa->pol, &ra.q, &da, &z, 1),
                   SLUICE_ENOTFOUND);
      cr_assert_eq(host_settle(&h, call, &rb.q, &db, &z), SLUICE_ENOTFOUND);
    } else if (npend < NPEND) {
      pend[npend].ra = ra;
      pend[npend].rb = rb;
      pend[npend].da = da;
      pend[npend].db = db;
      npend++;
    }
    /* The oldest pending one settled now and then, at a real size. */
    if (npend == NPEND || (npend > 0 && rand_r(&sv) % 2)) {
      struct pend *o = &pend[0];
      char v[16];
      sluice_attr a = {"tokens", v};
      unsigned r = (unsigned)rand_r(&sv);
      int ca, cb;
      snprintf(v, sizeof v, "%u", r % 4 == 0 ? r % 100001 : r % 5000);
      o->ra.q.attrs = o->ra.a; /* the copies' own attributes */
      o->rb.q.attrs = o->rb.a;
      o->ra.a[3].value = o->ra.tokens;
      o->rb.a[3].value = o->rb.tokens;
      ca = sluice_policy_settle(fa->pol, &o->ra.q, &o->da, &a, 1);
      cb = host_settle(&h, call, &o->rb.q, &o->db, &a);
      cr_assert_eq(ca, SLUICE_OK, "settle %d: %s", i, sluice_err_name(ca));
      cr_assert_eq(cb, ca, "settle %d: %s", i, sluice_err_name(cb));
      cr_assert(o->db.flags & SLUICE_DECISION_SETTLED);
      settled++;
      if (r % 7 == 0) { /* once is all */
        cr_assert_eq(host_settle(&h, call, &o->rb.q, &o->db, &a),
                     SLUICE_EEXIST);
        twice++;
      }
      for (k = 1; k < npend; k++)
        pend[k - 1] = pend[k];
      npend--;
    }
    sluice_clock_advance(fa->clock, step);
    sluice_clock_advance(fb->clock, step);
  }
  cr_assert_gt(denied, n / 10, "denials: %d", denied);
  cr_assert_gt(settled, n / 4, "settles: %d (denied %d)", settled, denied);
  cr_assert_gt(twice, 0);
  sluice_call_close(call);
  host_close(&h);
  free(pend);
  return h.sends;
}

Test(halves, mem_settles_in_begin) {
  fixture fa, fb;
  cr_assert_eq(fx_open_file(&fa, SLUICE_ETC "/llm-gateway.conf", NULL, 0),
               SLUICE_OK);
  cr_assert_eq(fx_open_file(&fb, SLUICE_ETC "/llm-gateway.conf", NULL, 0),
               SLUICE_OK);
  cr_assert_eq(settle_differential(&fa, &fb, 600), 0, "nothing sent");
  fx_close(&fa);
  fx_close(&fb);
}

/* A policy with the file at path over the harness's Redis. */
static void open_redis_file(fixture *f, const char *path, const char *prefix) {
  char store[1024];
  const char *eng = rt_engine("");
  int rc;
  snprintf(store, sizeof store,
           "redis:nodes=%s;timeout_ms=3000;connect_timeout_ms=3000;"
           "prefix=%s%s%s",
           rt_nodes(), prefix, *eng ? ";" : "", eng);
  rc = fx_open_file(f, path, store, SLUICE_OPEN_TESTCLOCK);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s", store, sluice_strerror(rc));
}

/* A policy with the LLM gateway file over the harness's Redis. */
static void open_redis_llm(fixture *f, const char *prefix) {
  open_redis_file(f, SLUICE_ETC "/llm-gateway.conf", prefix);
}

static void llm_prefixes(char pa[96], char pb[96]) {
  char tag[64];
  rt_tag(tag, sizeof tag, "x");
  snprintf(pa, 96, "sblk%s", tag + 3);
  snprintf(pb, 96, "shlv%s", tag + 3);
  pa[strcspn(pa, "}")] = 0;
  pb[strcspn(pb, "}")] = 0;
  strcat(pa, ":");
  strcat(pb, ":");
}

Test(halves, redis_settle_same_as_blocking) {
  char pa[96], pb[96];
  fixture fa, fb;
  llm_prefixes(pa, pb);
  open_redis_llm(&fa, pa);
  open_redis_llm(&fb, pb);
  cr_assert_gt(settle_differential(&fa, &fb, 300), 300, "settles carried");
  fx_close(&fa);
  fx_close(&fb);
}

/* A route whose limits fall in two hash-tag groups (tests/policy/
** groups.conf: per user and per client address): the halves carry each
** group's program and, after a refusal by the second, the first's
** give-back, and decide as the blocking call does. */
Test(halves, redis_groups_same_as_blocking) {
  static const char *const U[] = {"ua", "ub", "uc", "ud"};
  char pa[96], pb[96], ip[32];
  fixture fa, fb;
  sluice_call *call;
  host h;
  unsigned seed = 11;
  int i, by_ip = 0, by_user = 0, released = 0, n = 300;
  llm_prefixes(pa, pb);
  open_redis_file(&fa, SLUICE_POLICY_TESTS "/groups.conf", pa);
  open_redis_file(&fb, SLUICE_POLICY_TESTS "/groups.conf", pb);
  host_init(&h);
  cr_assert_eq(sluice_call_open(fb.pol, &call), SLUICE_OK);
  for (i = 0; i < n; i++) {
    unsigned r = (unsigned)rand_r(&seed);
    sluice_attr a = {"user", U[r % 4]};
    sluice_request q;
    sluice_decision da, db;
    int k;
    memset(&q, 0, sizeof q);
    q.method = "POST";
    q.route = (r >> 8) % 4 ? "/login" : "/job";
    q.tenant_id = "acme";
    /* 12 addresses (36 tokens) over 4 users (20 a window): both groups
    ** refuse. */
    snprintf(ip, sizeof ip, "10.7.0.%u", (r >> 4) % 12);
    q.client_ip = ip;
    q.attrs = &a;
    q.nattrs = 1;
    da = decide(&fa, &q);
    cr_assert_eq(host_decide(&h, call, &q, &db), SLUICE_CALL_DONE,
                 "request %d", i);
    same_decision(&da, &db, i);
    cr_assert_eq(da.nlimits, db.nlimits);
    for (k = 0; k < da.nlimits; k++)
      cr_assert_eq(da.limits[k].flags, db.limits[k].flags, "request %d", i);
    if (!da.allowed) {
      by_ip += !strcmp(da.limit_name, "per_ip");
      by_user += strcmp(da.limit_name, "per_ip") != 0;
    }
    if (da.lease_id) { /* the job ends: both sides release */
      int rc = sluice_policy_begin(call, SLUICE_CALL_RELEASE, &q, &db, NULL, 0);
      cr_assert_eq(
          sluice_policy_release(fa.pol, &q,
                                &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                               .lease_id = da.lease_id}),
          SLUICE_OK);
      while (rc == SLUICE_CALL_SEND)
        rc = host_carry(&h, call, NULL);
      cr_assert_eq(call_info(call).result, SLUICE_OK, "release %d", i);
      released++;
    }
    sluice_clock_advance(fa.clock, 1000000000LL);
    sluice_clock_advance(fb.clock, 1000000000LL);
  }
  cr_assert_gt(by_ip, 0, "refusals by the second group");
  cr_assert_gt(by_user, 0, "refusals by the first group");
  /* Every decision calls the user's group, the address's unless the user's
  ** refused, and gives the user's back when the address's refused; a
  ** release calls the user's group (the leases') alone. */
  cr_assert_geq(h.sends, 2 * n - by_user + by_ip + released,
                "sends %d: a call per group and a give-back per refusal by "
                "the second (%d, %d, %d)",
                h.sends, by_user, by_ip, released);
  sluice_call_close(call);
  host_close(&h);
  fx_close(&fa);
  fx_close(&fb);
}

/* A settle whose call is lost: the store's error, the decision not marked
** (it may or may not have applied), the handle free for the next. */
Test(halves, redis_settle_call_lost) {
  char pa[96], pb[96];
  fixture f;
  llm_req r;
  sluice_call *call;
  sluice_decision d;
  sluice_attr a = {"tokens", "7"};
  host h;
  unsigned seed = 3;
  llm_prefixes(pa, pb);
  open_redis_llm(&f, pa);
  host_init(&h);
  cr_assert_eq(sluice_call_open(f.pol, &call), SLUICE_OK);
  llm_trace_req(&r, &seed);
  cr_assert_eq(host_decide(&h, call, &r.q, &d), SLUICE_CALL_DONE);
  cr_assert(d.allowed);
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_SETTLE, &r.q, &d, &a, 1),
               SLUICE_CALL_SEND);
  cr_assert_eq(sluice_policy_finish(call, SLUICE_ETIMEDOUT, NULL, 0, NULL),
               SLUICE_CALL_DONE);
  cr_assert_eq(call_info(call).result, SLUICE_ETIMEDOUT);
  cr_assert_eq(call_info(call).store_error, SLUICE_ETIMEDOUT);
  cr_assert_eq(d.flags & SLUICE_DECISION_SETTLED, 0);
  /* Bad reports are refused at once, nothing sent. */
  a.value = "-1";
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_SETTLE, &r.q, &d, &a, 1),
               SLUICE_ERANGE);
  cr_assert_null(call_info(call).bytes);
  a.value = "7";
  cr_assert_eq(host_settle(&h, call, &r.q, &d, &a), SLUICE_OK);
  cr_assert(d.flags & SLUICE_DECISION_SETTLED);
  sluice_call_close(call);
  host_close(&h);
  fx_close(&f);
}

/* ------------------------------------------------------------------ mem --- */

Test(halves, mem_decides_in_begin) {
  fixture f;
  sluice_call *call;
  sluice_request q = rq_std("acme", "k", "sandbox");
  sluice_decision d, e;
  int i;
  cr_assert_eq(fx_open_store(&f, NULL, "mem", 0), SLUICE_OK);
  cr_assert_eq(sluice_call_open(f.pol, &call), SLUICE_OK);
  for (i = 0; i < 400; i++) {
    cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
                 SLUICE_CALL_DONE);
    cr_assert_null(call_info(call).bytes);
    if (!d.allowed)
      break;
  }
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED, "the bucket ran out");
  e = decide(&f, &q);
  cr_assert_eq(e.outcome, SLUICE_OUTCOME_THROTTLED, "one bucket for both");
  /* Nothing out: finish and fail are misuse, and say so. */
  cr_assert_eq(sluice_policy_finish(call, 0, "+OK\r\n", 5, &d), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_finish(call, SLUICE_ETIMEDOUT, NULL, 0, &d),
               SLUICE_EINVAL);
  q.tier = "no-such-tier";
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_ENOTFOUND);
  cr_assert_str_eq(d.invalid_field, "tier");
  /* A kind begin does not know, and a read into nowhere, are refused. */
  q.tier = "sandbox";
  cr_assert_eq(sluice_policy_begin(call, 3, &q, &d, NULL, 0), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_begin(call, -1, &q, &d, NULL, 0), SLUICE_EINVAL);
  cr_assert_eq(sluice_call_get(call, NULL), SLUICE_EINVAL);
  sluice_call_close(call);
  fx_close(&f);
}

/* ---------------------------------------------------------------- redis --- */

Test(halves, redis_same_decisions_as_blocking) {
  differential("", 400);
}

Test(halves, redis_garbage_and_truncated_replies) {
  fixture f;
  sluice_call *call;
  sluice_request q = rq_std("acme", "garbage", "sandbox");
  sluice_request rec = rq_reconcile("acme", "garbage", "growth", "L");
  sluice_decision d, d2;
  host h;
  size_t n, len;
  char tag[64], prefix[80];
  int i, rc;
  rt_tag(tag, sizeof tag, "g");
  snprintf(prefix, sizeof prefix, "g%.20s:", tag + 3);
  prefix[strcspn(prefix, "}")] = ':';
  open_redis(&f, NULL, prefix, "");
  host_init(&h);
  cr_assert_eq(sluice_call_open(f.pol, &call), SLUICE_OK);

  /* Not a reply: the call ends as a store failure, degraded. */
  rc = sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0);
  cr_assert_eq(rc, SLUICE_CALL_SEND, "begin: %d (%s) flags %x err %d", rc,
               sluice_err_name(rc), d.flags, d.store_error);
  rc = sluice_policy_finish(call, 0, "hello\r\n", 7, &d);
  cr_assert_eq(rc, SLUICE_CALL_DONE);
  cr_assert_eq(call_info(call).store_error, SLUICE_EBACKEND);
  cr_assert_eq(d.store_error, SLUICE_EBACKEND);
  cr_assert(d.flags & SLUICE_DECISION_DEGRADED, "degraded, flags %x",
            d.flags);
  cr_assert_eq(d.allowed, 1, "the degraded limiter admits");
  /* A fail-closed class: 503. */
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &rec, &d, NULL, 0),
               SLUICE_CALL_SEND);
  cr_assert_eq(sluice_policy_finish(call, 0, "$5\r\nab\r\n\r\nxx", 12, &d),
               SLUICE_CALL_DONE);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_UNAVAILABLE);
  cr_assert_eq(d.status, 503);

  /* After a failure a cluster's map is asked for again (CLUSTER SLOTS to
  ** another node) before the command: the host just carries both. */
  cr_assert_eq(host_decide(&h, call, &q, &d2), SLUICE_CALL_DONE);
  cr_assert_eq(d2.store_error, 0);
  cr_assert_eq(d2.flags & SLUICE_DECISION_DEGRADED, 0);
  /* A real reply, byte by byte: MORE until the last byte, then the same
  ** decision as the whole reply gives. */
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_CALL_SEND);
  i = host_conn(&h, call_info(call).port);
  {
    sluice_call_info ci = call_info(call);
    cr_assert_eq(write(h.fd[i], ci.bytes, ci.len), (ssize_t)ci.len);
  }
  len = read_whole(h.fd[i], h.buf, sizeof h.buf);
  rc = sluice_policy_finish(call, 0, h.buf, 0, &d); /* nothing yet */
  cr_assert_eq(rc, SLUICE_CALL_MORE, "no bytes: more");
  for (n = 1; n < len; n++)
    cr_assert_eq(sluice_policy_finish(call, 0, h.buf, n, &d), SLUICE_CALL_MORE,
                 "%zu of %zu bytes", n, len);
  /* Fewer bytes than before: misuse, nothing lost. */
  cr_assert_eq(sluice_policy_finish(call, 0, h.buf, n - 2, &d), SLUICE_EINVAL);
  cr_assert_eq(sluice_policy_finish(call, 0, h.buf, len, &d), SLUICE_CALL_DONE);
  cr_assert_eq(call_info(call).store_error, 0);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  cr_assert_eq(d.store_error, 0);
  /* The store charged that one request: the next one sees it. */
  cr_assert_eq(host_decide(&h, call, &q, &d2), SLUICE_CALL_DONE);
  cr_assert_eq(d2.remaining, d.remaining - 1, "%lld then %lld",
               (long long)d.remaining, (long long)d2.remaining);

  /* A reply cut short, then the connection lost: the failure mode. */
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_CALL_SEND);
  cr_assert_eq(sluice_policy_finish(call, 0, h.buf, len / 2, &d),
               SLUICE_CALL_MORE);
  cr_assert_eq(sluice_policy_finish(call, SLUICE_EINVAL, NULL, 0, &d),
               SLUICE_EINVAL, "only link errors");
  cr_assert_eq(sluice_policy_finish(call, SLUICE_EUNAVAIL, NULL, 0, &d),
               SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, SLUICE_EUNAVAIL);
  cr_assert(d.flags & SLUICE_DECISION_DEGRADED);
  /* More bytes than the replies owed: out of step. */
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_CALL_SEND);
  {
    char two[256];
    memcpy(two, h.buf, len);
    memcpy(two + len, "+OK\r\n", 5);
    cr_assert_eq(sluice_policy_finish(call, 0, two, len + 5, &d),
                 SLUICE_CALL_DONE);
    cr_assert_eq(d.store_error, SLUICE_EBACKEND);
  }
  /* And the handle decides on as before. */
  host_close(&h);
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0);
  cr_assert_eq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  sluice_call_close(call);
  host_close(&h);
  fx_close(&f);
}

/* wait_replicas=1 on servers without replicas: each call carries WAIT
** after the command and draws its reply too; WAIT answers 0 (after its
** timeout), so the call fails as unacknowledged: SLUICE_EUNAVAIL, the
** failure mode's decision (the write may be lost in a failover). */
Test(halves, redis_wait_unacknowledged) {
  fixture f;
  sluice_call *call;
  sluice_request q = rq_std("acme", "waiting", "sandbox");
  sluice_decision d;
  host h;
  char tag[64], prefix[80], store[1024];
  const char *eng = rt_engine("");
  int rc;
  rt_tag(tag, sizeof tag, "w");
  snprintf(prefix, sizeof prefix, "w%.20s:", tag + 3);
  prefix[strcspn(prefix, "}")] = ':';
  snprintf(store, sizeof store,
           "redis:nodes=%s;timeout_ms=100;connect_timeout_ms=3000;"
           "wait_replicas=1;prefix=%s%s%s",
           rt_nodes(), prefix, *eng ? ";" : "", eng);
  cr_assert_eq(fx_open_store(&f, NULL, store, SLUICE_OPEN_TESTCLOCK),
               SLUICE_OK, "%s", store);
  host_init(&h);
  cr_assert_eq(sluice_call_open(f.pol, &call), SLUICE_OK);
  rc = sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0);
  cr_assert_eq(rc, SLUICE_CALL_SEND);
  cr_assert(has(call_info(call).bytes, call_info(call).len, "WAIT"),
            "WAIT follows the command");
  cr_assert_geq(call_info(call).replies, 2);
  while (rc == SLUICE_CALL_SEND)
    rc = host_carry(&h, call, &d);
  cr_assert_eq(rc, SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, SLUICE_EUNAVAIL, "store_error %d",
               d.store_error);
  cr_assert(d.flags & SLUICE_DECISION_DEGRADED, "flags %x", d.flags);
  sluice_call_close(call);
  host_close(&h);
  fx_close(&f);
}

/* ------------------------------------------- redirections and failures --- */

static redisContext *raw(int port) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  cr_assert(c && !c->err, "raw connect %d", port);
  return c;
}

static void raw_cmd(int port, const char *cmd, int must) {
  redisContext *c = raw(port);
  redisReply *r = redisCommand(c, cmd);
  cr_assert(r, "%s: %s", cmd, c->errstr);
  if (must)
    cr_assert(r->type != REDIS_REPLY_ERROR, "%s: %s", cmd, r->str);
  freeReplyObject(r);
  redisFree(c);
}

static void raw_id(int port, char *id, size_t n) {
  redisContext *c = raw(port);
  redisReply *r = redisCommand(c, "CLUSTER MYID");
  cr_assert(r && r->type == REDIS_REPLY_STRING);
  snprintf(id, n, "%s", r->str);
  freeReplyObject(r);
  redisFree(c);
}

/* A fixture in halves with a per-run prefix, and its handle. */
static sluice_call *open_halves(fixture *f, host *h, const char *what,
                                const sluice_policy_config *cfg,
                                const char *extra) {
  char tag[64], prefix[80];
  sluice_call *call;
  rt_tag(tag, sizeof tag, what);
  snprintf(prefix, sizeof prefix, "%.40s", tag + 3);
  prefix[strcspn(prefix, "}")] = 0;
  strcat(prefix, ":");
  open_redis(f, cfg, prefix, extra);
  host_init(h);
  cr_assert_eq(sluice_call_open(f->pol, &call), SLUICE_OK);
  return call;
}

/* A slot migrating, then moved, under the per-IP backstop's record (one
** key: a call with several keys in a migrating slot gets TRYAGAIN from
** Redis until the slot is stable, on any path). */
Test(halves, redis_migration_asks_then_moves) {
  sluice_policy_config *cfg;
  fixture f;
  host h;
  sluice_call *call;
  sluice_request q = rq_std("migrant", "k", "sandbox");
  sluice_decision d;
  char idA[64], idB[64], cmd[160];
  int slot, pa, pb, n, admitted = 0;
  if (!rt_is_cluster())
    cr_skip_test("needs a cluster");
  cfg = small_cfg();
  cfg_set(cfg, "ip_backstop.limit", 4);
  call = open_halves(&f, &h, "mig", cfg, "");
  q.client_ip = "10.77.0.1";
  /* Where the address's window lives, from the call itself. */
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_CALL_SEND);
  slot = call_info(call).slot;
  pa = call_info(call).port;
  cr_assert(slot >= 0 && slot < 16384, "slot %d", slot);
  pb = rt_port(0) == pa ? rt_port(1) : rt_port(0);
  raw_id(pa, idA, sizeof idA);
  raw_id(pb, idB, sizeof idB);
  /* The slot migrates A -> B before the call runs: the window has no
  ** record on A, so A answers ASK and the call goes to B with ASKING. */
  snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d IMPORTING %s", slot, idA);
  raw_cmd(pb, cmd, 1);
  snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d MIGRATING %s", slot, idB);
  raw_cmd(pa, cmd, 1);
  cr_assert_eq(host_carry(&h, call, &d), SLUICE_CALL_SEND, "ASK");
  cr_assert_eq(call_info(call).port, pb, "to B");
  cr_assert_eq(call_info(call).replies, 2, "ASKING and the call");
  cr_assert_eq(host_carry(&h, call, &d), SLUICE_CALL_SEND,
               "the backstop passed: the tenant's program next");
  cr_assert(h.saw_asking);
  while (host_carry(&h, call, &d) == SLUICE_CALL_SEND)
    ;
  cr_assert_eq(d.store_error, 0, "%s", sluice_err_name(d.store_error));
  admitted += d.allowed;
  /* The slot is B's now; the handle's map still says A: MOVED. */
  for (n = 0; rt_port(n); n++) {
    snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d NODE %s", slot, idB);
    raw_cmd(rt_port(n), cmd, 0); /* replicas refuse, masters accept */
  }
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_CALL_SEND);
  cr_assert_eq(call_info(call).port, pa, "the map says A");
  cr_assert_eq(host_carry(&h, call, &d), SLUICE_CALL_SEND, "MOVED");
  cr_assert_eq(call_info(call).port, pb, "to B");
  cr_assert_eq(call_info(call).slot, slot);
  while (host_carry(&h, call, &d) == SLUICE_CALL_SEND)
    ;
  admitted += d.allowed;
  /* From now on straight to B, and the window counted every request
  ** once, wherever it ran: the fifth is refused. */
  for (n = 0; n < 3; n++) {
    cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
                 SLUICE_CALL_SEND);
    cr_assert_eq(call_info(call).port, pb);
    while (host_carry(&h, call, &d) == SLUICE_CALL_SEND)
      ;
    cr_assert_eq(d.store_error, 0);
    admitted += d.allowed;
  }
  cr_assert_eq(admitted, 4, "ip_limit 4: %d admitted", admitted);
  cr_assert_eq(d.binding, SLUICE_BINDING_IP, "the fifth: the backstop");
  sluice_call_close(call);
  host_close(&h);
  fx_close(&f);
}

/* The Lua flushed from every node (script and library): the next call
** loads it and runs, state intact. */
Test(halves, redis_flushed_lua_is_loaded_again) {
  fixture f;
  host h;
  sluice_call *call = open_halves(&f, &h, "flush", NULL, "");
  sluice_request q = rq_std("flushed", "k", "sandbox");
  sluice_decision d;
  int64_t left;
  int n;
  if (strstr(rt_engine(NULL), "module"))
    cr_skip_test("the module has no script to flush");
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0);
  left = d.remaining;
  cr_assert_eq(h.saw_load, 0, "loaded at open");
  for (n = 0; rt_port(n); n++) {
    raw_cmd(rt_port(n), "SCRIPT FLUSH", 0);
    raw_cmd(rt_port(n), "FUNCTION FLUSH", 0); /* replicas refuse */
  }
  n = h.sends;
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0, "%s", sluice_err_name(d.store_error));
  cr_assert(h.saw_load, "SCRIPT / FUNCTION LOAD carried");
  cr_assert_eq(h.sends - n, 2, "the call, then load + call");
  cr_assert_eq(d.remaining, left - 1, "charged once");
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.remaining, left - 2);
  sluice_call_close(call);
  host_close(&h);
  fx_close(&f);
}

/* The library loaded again on every node (FUNCTION FLUSH, then FUNCTION
** RESTORE of its dump, as another client's load would): it knows no
** program.  The next call goes by id, is answered SLUICE NOPROGRAM before
** anything is read or written, and goes again whole: charged once, no
** load carried. */
Test(halves, redis_program_id_unknown_goes_whole) {
  fixture f;
  host h;
  sluice_call *call = open_halves(&f, &h, "pid", NULL, "");
  sluice_request q = rq_std("pid", "k", "sandbox");
  sluice_decision d;
  int64_t left;
  int n;
  if (strstr(rt_engine(NULL), "module") || strstr(rt_engine(NULL), "script"))
    cr_skip_test("programs go by id to the library (FCALL) only");
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0);
  left = d.remaining;
  for (n = 0; rt_port(n); n++) {
    redisContext *c = raw(rt_port(n));
    redisReply *dump = redisCommand(c, "FUNCTION DUMP");
    redisReply *r = redisCommand(c, "FUNCTION FLUSH");
    cr_assert(dump && dump->type == REDIS_REPLY_STRING && r);
    if (r->type != REDIS_REPLY_ERROR) { /* replicas refuse */
      freeReplyObject(r);
      r = redisCommand(c, "FUNCTION RESTORE %b", dump->str, dump->len);
      cr_assert(r && r->type != REDIS_REPLY_ERROR, "FUNCTION RESTORE");
    }
    freeReplyObject(r);
    freeReplyObject(dump);
    redisFree(c);
  }
  n = h.sends;
  h.saw_load = 0;
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0, "%s", sluice_err_name(d.store_error));
  cr_assert_eq(h.sends - n, 2, "by id, then whole");
  cr_assert(!h.saw_load, "the library was there");
  cr_assert_eq(d.remaining, left - 1, "charged once");
  n = h.sends;
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(h.sends - n, 1, "known again");
  cr_assert_eq(d.remaining, left - 2);
  sluice_call_close(call);
  host_close(&h);
  fx_close(&f);
}

/* The same at Redis's time, where a program by id goes as its id alone
** (wire.h), which the whole program replaces in the call's bytes. */
Test(halves, redis_program_id_alone_unknown_goes_whole) {
  fixture f;
  host h;
  sluice_call *call;
  sluice_request q = rq_std("pid1", "k", "sandbox");
  sluice_decision d;
  int n;
  if (strstr(rt_engine(NULL), "module") || strstr(rt_engine(NULL), "script"))
    cr_skip_test("programs go by id to the library (FCALL) only");
  open_flags = 0;
  call = open_halves(&f, &h, "pid1", NULL, "");
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0);
  for (n = 0; rt_port(n); n++) {
    redisContext *c = raw(rt_port(n));
    redisReply *r = redisCommand(c, "FUNCTION FLUSH");
    cr_assert(r);
    freeReplyObject(r);
    redisFree(c);
  }
  n = h.sends;
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0, "%s", sluice_err_name(d.store_error));
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_ALLOW);
  n = h.sends;
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(h.sends - n, 1, "known again");
  cr_assert_eq(d.store_error, 0);
  sluice_call_close(call);
  host_close(&h);
  fx_close(&f);
}

/* A node that fails mid-call (the host's read times out): the failure
** mode as the blocking path has it -- degraded for a standard request,
** 503 for a fail-closed class, the breaker opening after breaker_run
** failures in a row (no store call then), a probe after
** degraded_probe_ns, closed again once the store answers. */
Test(halves, redis_node_fails_mid_call) {
  sluice_policy_config *cfg;
  fixture f;
  host h;
  sluice_call *call;
  sluice_request q = rq_std("failing", "k", "sandbox");
  sluice_request rec = rq_reconcile("failing", "k", "growth", "L");
  sluice_decision d;
  int i;
  cfg = small_cfg();
  cfg_set(cfg, "breaker.consecutive_failures", 3);
  call = open_halves(&f, &h, "fail", cfg, "");
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0);
  /* Sent, then nothing back in time. */
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_CALL_SEND);
  cr_assert_eq(sluice_policy_finish(call, SLUICE_ETIMEDOUT, NULL, 0, &d),
               SLUICE_CALL_DONE);
  cr_assert_eq(d.allowed, 1);
  cr_assert(d.flags & SLUICE_DECISION_DEGRADED);
  cr_assert_eq(d.store_error, SLUICE_ETIMEDOUT);
  cr_assert_eq(call_info(call).store_error, SLUICE_ETIMEDOUT);
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &rec, &d, NULL, 0),
               SLUICE_CALL_SEND);
  cr_assert_eq(sluice_policy_finish(call, SLUICE_EUNAVAIL, NULL, 0, &d),
               SLUICE_CALL_DONE);
  cr_assert_eq(d.status, 503, "reconcile fails closed");
  cr_assert(d.flags & SLUICE_DECISION_FAIL_CLOSED);
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_CALL_SEND);
  cr_assert_eq(sluice_policy_finish(call, SLUICE_EIO, NULL, 0, &d),
               SLUICE_CALL_DONE);
  /* Three in a row: the breaker is open, no call goes out. */
  for (i = 0; i < 5; i++) {
    cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
                 SLUICE_CALL_DONE, "breaker open: decided without the store");
    cr_assert(d.flags & SLUICE_DECISION_DEGRADED);
  }
  /* After the probe delay one trial goes to the store and closes it. */
  sluice_clock_advance(f.clock, cfg_ns(cfg, "failure.probe_interval_ms") + 1);
  cr_assert_eq(host_decide(&h, call, &q, &d), SLUICE_CALL_DONE);
  cr_assert_eq(d.store_error, 0, "%s", sluice_err_name(d.store_error));
  cr_assert_eq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  cr_assert_eq(sluice_policy_begin(call, SLUICE_CALL_DECIDE, &q, &d, NULL, 0),
               SLUICE_CALL_SEND, "closed again");
  sluice_call_close(call); /* with a call out: abandoned, nothing leaks */
  host_close(&h);
  fx_close(&f);
}

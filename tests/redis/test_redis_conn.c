/*
** Connecting to Redis as deployments run it, against real servers the
** harness starts (tests/redis/harness.py --auth --tls): passwords and ACL
** users, redis:// URLs, SELECT, a unix socket, TLS (good, wrong CA, wrong
** name, no client certificate, a plaintext port), a service opened before
** its Redis starts, and many threads over a pool of connections with no
** over-admission.
*/
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_test.h"
#include "sluice/policy.h"
#include "../common/units.h"


extern char **environ;

/* A bucket that does not refill during a test: burst points, then no more. */
static const sluice_gcra_params still = {1, 86400 * SEC, 20};

static const char *env_or_skip(const char *name, const char *why) {
  const char *v = getenv(name);
  rt_nodes();
  if (!v || !*v)
    cr_skip_test("%s unset: %s", name, why);
  return v;
}

/* ";user=..;password=.." when the servers want a password, else "". */
static const char *auth_sfx(void) {
  static char buf[256];
  const char *a = getenv("SLUICE_REDIS_AUTH");
  snprintf(buf, sizeof buf, "%s%s", a && *a ? ";" : "", a && *a ? a : "");
  return buf;
}

static int try_open(const char *store, sluice_limiter **l, char *err,
                    size_t n) {
  sluice_limiter_options o;
  memset(&o, 0, sizeof o);
  o.store = store;
  *l = NULL;
  return sluice_limiter_open(&o, l, err, n);
}

static sluice_limiter *must_open(const char *store) {
  char err[256];
  sluice_limiter *l;
  int rc = try_open(store, &l, err, sizeof err);
  cr_assert_eq(rc, SLUICE_OK, "open %s: %s (%s)", store, sluice_err_name(rc),
               err);
  return l;
}

/* One decision on a fresh bucket: admitted, with 19 of 20 left. */
static void decides(sluice_limiter *l, const char *what) {
  char key[96];
  sluice_verdict v;
  int rc;
  rt_tag(key, sizeof key, what);
  rc = sluice_limiter_take(l, key, strlen(key), &still, 1, &v);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s (%s)", what, sluice_err_name(rc),
               sluice_limiter_errmsg(l));
  cr_assert_eq(v.allowed, 1, "%s", what);
  cr_assert_eq(v.remaining, 19, "%s", what);
}

static void refused(const char *store, int want, const char *needle,
                    const char *secret) {
  char err[256] = "";
  sluice_limiter *l;
  int rc = try_open(store, &l, err, sizeof err);
  cr_assert_eq(rc, want, "%s: got %s (%s), want %s", store,
               sluice_err_name(rc), err, sluice_err_name(want));
  cr_assert_null(l);
  cr_assert(strstr(err, needle) != NULL, "%s: '%s' lacks '%s'", store, err,
            needle);
  if (secret)
    cr_assert_null(strstr(err, secret), "the message shows the password");
}

/* ------------------------------------------------------- passwords --- */

Test(conn, password_and_acl_user) {
  const char *pw = env_or_skip("SLUICE_REDIS_PASSWORD", "run with --auth");
  char store[512];
  sluice_limiter *l;
  snprintf(store, sizeof store, "redis:nodes=%s;timeout_ms=3000%s",
           rt_nodes(), auth_sfx());
  l = must_open(store); /* the ACL user */
  decides(l, "acl");
  sluice_limiter_close(l);
  snprintf(store, sizeof store, "redis:nodes=%s;timeout_ms=3000;password=%s",
           rt_nodes(), pw);
  l = must_open(store); /* the default user */
  decides(l, "default-user");
  sluice_limiter_close(l);

  snprintf(store, sizeof store,
           "redis:nodes=%s;user=limiter;password=not-the-Secret-42",
           rt_nodes());
  refused(store, SLUICE_EPERM, "WRONGPASS", "not-the-Secret-42");
  snprintf(store, sizeof store, "redis:nodes=%s;password=not-the-Secret-42",
           rt_nodes());
  refused(store, SLUICE_EPERM, "AUTH", "not-the-Secret-42");
  snprintf(store, sizeof store, "redis:nodes=%s", rt_nodes());
  refused(store, SLUICE_EPERM, "NOAUTH", NULL);
  snprintf(store, sizeof store, "redis:nodes=%s;user=limiter", rt_nodes());
  refused(store, SLUICE_EINVAL, "needs a password", NULL);
}

/* EVALSHA calls over every node, as the default user; with make_user,
** first give every node the ACL user "scriptonly", allowed the script but
** not Redis Functions (the rules of earlier sluice versions). */
static long evalsha_calls(const char *pw, int make_user) {
  long sum = 0;
  int n;
  for (n = 0; rt_port(n); n++) {
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", rt_port(n), tv);
    redisReply *r;
    cr_assert(c && !c->err);
    r = redisCommand(c, "AUTH %s", pw);
    freeReplyObject(r);
    if (make_user) {
      r = redisCommand(c, "ACL SETUSER scriptonly on >scriptonly-pw ~* "
                          "resetchannels -@all +evalsha +script|load "
                          "+cluster|slots +asking +wait +del +get +mget +set "
                          "+time +ping +select +command|info");
      cr_assert(r && r->type == REDIS_REPLY_STATUS, "ACL SETUSER");
      freeReplyObject(r);
    }
    sum += rt_cmd_calls(c, "evalsha");
    redisFree(c);
  }
  return sum;
}

/* An ACL user without Redis Functions: FUNCTION LIST is refused, and the
** store runs the script (EVALSHA) instead of failing. */
Test(conn, acl_user_without_functions_runs_the_script) {
  const char *pw = env_or_skip("SLUICE_REDIS_PASSWORD", "run with --auth");
  char store[512];
  sluice_limiter *l;
  long before;
  before = evalsha_calls(pw, 1);
  snprintf(store, sizeof store, "redis:nodes=%s;timeout_ms=3000;"
           "user=scriptonly;password=scriptonly-pw", rt_nodes());
  l = must_open(store);
  decides(l, "scriptonly");
  sluice_limiter_close(l);
  cr_assert_geq(evalsha_calls(pw, 0) - before, 1,
                "the decision ran as EVALSHA");
}

Test(conn, password_file) {
  const char *tmp = env_or_skip("SLUICE_REDIS_TMP", "run via harness");
  char path[512], store[1024];
  FILE *f;
  sluice_limiter *l;
  env_or_skip("SLUICE_REDIS_PASSWORD", "run with --auth");
  snprintf(path, sizeof path, "%s/limiter.pw", tmp);
  f = fopen(path, "w");
  cr_assert(f);
  fputs("limiter-pw\n", f); /* as `echo pw > file` writes it */
  fclose(f);
  snprintf(store, sizeof store,
           "redis:nodes=%s;timeout_ms=3000;user=limiter;password_file=%s",
           rt_nodes(), path);
  l = must_open(store);
  decides(l, "pwfile");
  sluice_limiter_close(l);
  snprintf(store, sizeof store,
           "redis:nodes=%s;user=limiter;password_file=%s.missing", rt_nodes(),
           path);
  refused(store, SLUICE_ECONFIG, "password_file", NULL);
  snprintf(store, sizeof store,
           "redis:nodes=%s;user=limiter;password=x;password_file=%s",
           rt_nodes(), path);
  refused(store, SLUICE_EINVAL, "not both", NULL);
}

/* ------------------------------------------------------------ URLs --- */

Test(conn, url_forms) {
  const char *a = getenv("SLUICE_REDIS_AUTH");
  char store[512], hosts[256];
  sluice_limiter *l;
  const char *n = rt_nodes(), *comma;
  int authed = a && *a;
  /* Up to two seeds, as a provider's URL lists them. */
  comma = strchr(n, ',');
  if (comma && strchr(comma + 1, ','))
    snprintf(hosts, sizeof hosts, "%.*s",
             (int)(strchr(comma + 1, ',') - n), n);
  else
    snprintf(hosts, sizeof hosts, "%s", n);
  /* limiter:limiter-pw, the '-' percent-encoded as a URL may carry it. */
  snprintf(store, sizeof store, "redis://%s%s/0?timeout_ms=3000",
           authed ? "limiter:limiter%2Dpw@" : "", hosts);
  l = must_open(store);
  decides(l, "url");
  sluice_limiter_close(l);
  if (authed) {
    snprintf(store, sizeof store, "redis://limiter:wrong@%s", hosts);
    refused(store, SLUICE_EPERM, "WRONGPASS", NULL);
  }
  refused("redis://", SLUICE_EINVAL, "no host", NULL);
  refused("redis://:pw@/0", SLUICE_EINVAL, "no host", NULL);
  refused("redis://[::1:6379", SLUICE_EINVAL, "'['", NULL);
  refused("redis://127.0.0.1:1?tls_ca=%zz", SLUICE_EINVAL, "query", NULL);
  refused("redis://127.0.0.1:1?nodes=127.0.0.1:2", SLUICE_EINVAL, "nodes",
          NULL);
  refused("redis://u:p@127.0.0.1:1?password=q", SLUICE_EINVAL, "twice", NULL);
  refused("redis://127.0.0.1:1?colour=blue", SLUICE_EINVAL, "colour", NULL);
}

/* ---------------------------------------------------------- SELECT --- */

Test(conn, select_db) {
  char store[512], key[96];
  sluice_limiter *l;
  sluice_verdict v;
  redisContext *c;
  redisReply *r;
  const char *pw = getenv("SLUICE_REDIS_PASSWORD");
  int port = rt_port(0);
  snprintf(store, sizeof store, "redis:nodes=%s;timeout_ms=3000;db=3%s",
           rt_nodes(), auth_sfx());
  if (rt_is_cluster()) { /* a cluster has only db 0 */
    refused(store, SLUICE_ECONFIG, "SELECT 3 refused", NULL);
    return;
  }
  l = must_open(store);
  rt_tag(key, sizeof key, "db");
  cr_assert_eq(sluice_limiter_take(l, key, strlen(key), &still, 1, &v),
               SLUICE_OK, "%s", sluice_limiter_errmsg(l));
  sluice_limiter_close(l);
  c = redisConnect("127.0.0.1", port);
  cr_assert(c && !c->err);
  if (pw && *pw)
    freeReplyObject(redisCommand(c, "AUTH %s", pw));
  r = redisCommand(c, "EXISTS %s", key);
  cr_assert_eq(r->integer, 0, "not in db 0");
  freeReplyObject(r);
  freeReplyObject(redisCommand(c, "SELECT 3"));
  r = redisCommand(c, "EXISTS %s", key);
  cr_assert_eq(r->integer, 1, "the record is in db 3");
  freeReplyObject(r);
  redisFree(c);
}

/* ----------------------------------------------------- unix socket --- */

Test(conn, unix_socket) {
  const char *sock = env_or_skip("SLUICE_REDIS_SOCKET", "single mode only");
  char store[512];
  sluice_limiter *l;
  snprintf(store, sizeof store, "redis:socket=%s;timeout_ms=3000%s", sock,
           auth_sfx());
  l = must_open(store);
  decides(l, "unix");
  sluice_limiter_close(l);
  refused("redis:socket=relative.sock", SLUICE_EINVAL, "absolute", NULL);
  snprintf(store, sizeof store, "redis:socket=%s;nodes=%s", sock,
           rt_nodes());
  refused(store, SLUICE_EINVAL, "not both", NULL);
}

/* ------------------------------------------------------------- TLS --- */

static const char *tls_dir(void) {
  return env_or_skip("SLUICE_REDIS_TLS_DIR", "run with --tls");
}

/* The TLS port with the test CA and client certificate, plus extra. */
static void tls_store(char *buf, size_t n, const char *host, const char *ca,
                      const char *extra) {
  const char *d = tls_dir();
  snprintf(buf, n,
           "redis:nodes=%s:%s;timeout_ms=3000;connect_timeout_ms=3000;"
           "tls=1;tls_ca=%s/%s;"
           "tls_cert=%s/client.crt;tls_key=%s/client.key%s%s",
           host, getenv("SLUICE_REDIS_TLS_PORT"), d, ca, d, d, auth_sfx(),
           extra);
}

Test(conn, tls_good) {
  char store[1024], url[1024];
  const char *d = tls_dir();
  sluice_limiter *l;
  tls_store(store, sizeof store, "127.0.0.1", "ca.crt", "");
  l = must_open(store); /* an IP literal, matched against the IP SAN */
  decides(l, "tls-ip");
  sluice_limiter_close(l);
  tls_store(store, sizeof store, "127.0.0.1", "ca.crt", ";tls_name=localhost");
  l = must_open(store); /* a name, matched against the DNS SAN */
  decides(l, "tls-name");
  sluice_limiter_close(l);
  snprintf(url, sizeof url,
           "rediss://%s127.0.0.1:%s?tls_ca=%s/ca.crt&tls_cert=%s/client.crt&"
           "tls_key=%s/client.key&timeout_ms=3000",
           getenv("SLUICE_REDIS_AUTH") ? "limiter:limiter-pw@" : "",
           getenv("SLUICE_REDIS_TLS_PORT"), d, d, d);
  l = must_open(url);
  decides(l, "rediss-url");
  sluice_limiter_close(l);
}

Test(conn, tls_wrong_ca_or_name_is_refused) {
  char store[1024];
  tls_store(store, sizeof store, "127.0.0.1", "other-ca.crt", "");
  refused(store, SLUICE_ECONFIG, "certificate not accepted", NULL);
  tls_store(store, sizeof store, "127.0.0.1", "ca.crt",
            ";tls_name=redis.example.org");
  refused(store, SLUICE_ECONFIG, "hostname mismatch", NULL);
  tls_store(store, sizeof store, "127.0.0.1", "ca.crt", ";tls_name=127.0.0.2");
  refused(store, SLUICE_ECONFIG, "IP address mismatch", NULL);
}

Test(conn, tls_never_falls_back_to_plaintext) {
  char store[1024];
  const char *d = tls_dir();
  sluice_limiter *l;
  sluice_verdict v;
  int i, rc;
  /* TLS asked for, a plaintext port: Redis waits for the rest of what it
  ** takes for an inline command, the handshake times out, and every
  ** decision fails saying so; none is ever made in plaintext. */
  snprintf(store, sizeof store,
           "redis:nodes=%s;tls=1;tls_ca=%s/ca.crt;tls_cert=%s/client.crt;"
           "tls_key=%s/client.key;connect_timeout_ms=200;backoff_max_ms=1%s",
           rt_nodes(), d, d, d, auth_sfx());
  l = must_open(store);
  for (i = 0; i < 3; i++) {
    usleep(2000); /* past the backoff: each call tries the handshake */
    rc = sluice_limiter_take(l, "{t:p}k", 6, &still, 1, &v);
    cr_assert(rc == SLUICE_ETIMEDOUT || rc == SLUICE_EUNAVAIL, "%s",
              sluice_err_name(rc));
    cr_assert(strstr(sluice_limiter_errmsg(l), "TLS handshake"), "%s",
              sluice_limiter_errmsg(l));
  }
  sluice_limiter_close(l);
  /* A CA without tls=1 would have meant plaintext: refused. */
  snprintf(store, sizeof store, "redis:nodes=%s;tls_ca=%s/ca.crt",
           rt_nodes(), d);
  refused(store, SLUICE_EINVAL, "need tls=1", NULL);
  refused("rediss://127.0.0.1:1?tls=0", SLUICE_EINVAL, "contradicts", NULL);
}

Test(conn, tls_client_certificate) {
  char store[1024];
  const char *d = tls_dir();
  /* The server requires a client certificate: without one, refused. */
  snprintf(store, sizeof store,
           "redis:nodes=127.0.0.1:%s;timeout_ms=3000;tls=1;tls_ca=%s/ca.crt%s",
           getenv("SLUICE_REDIS_TLS_PORT"), d, auth_sfx());
  refused(store, SLUICE_ECONFIG, "TLS", NULL);
  snprintf(store, sizeof store,
           "redis:nodes=127.0.0.1:1;tls=1;tls_cert=%s/client.crt", d);
  refused(store, SLUICE_EINVAL, "go together", NULL);
  snprintf(store, sizeof store,
           "redis:nodes=127.0.0.1:1;tls=1;tls_cert=%s/client.crt;"
           "tls_key=%s/server.key",
           d, d);
  refused(store, SLUICE_ECONFIG, "tls_key", NULL);
}

/* A forked child must not touch its parent's TLS session: had it reused
** it (or sent a close_notify on the shared socket), the parent's next
** reply would fail to decrypt or read as end of stream. */
Test(conn, tls_fork_child_gets_its_own_session) {
  char store[1024], key[96];
  sluice_limiter *l;
  sluice_verdict v;
  sluice_redis_stats st;
  int i, status, admitted = 0;
  pid_t pid;
  tls_store(store, sizeof store, "127.0.0.1", "ca.crt", ";pool=1");
  l = must_open(store);
  rt_tag(key, sizeof key, "tlsfork");
  for (i = 0; i < 5; i++) {
    cr_assert_eq(sluice_limiter_take(l, key, strlen(key), &still, 1, &v),
                 SLUICE_OK);
    admitted += v.allowed;
  }
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int ok = 0;
    for (i = 0; i < 10; i++)
      if (sluice_limiter_take(l, key, strlen(key), &still, 1, &v) ==
              SLUICE_OK &&
          v.allowed)
        ok++;
    sluice_limiter_control(l, SLUICE_CTL_REDIS_STATS, &st);
    /* Its own connection: the parent's one (open) and a new one. */
    _exit(ok == 10 && st.connects == 2 ? 0 : 1);
  }
  for (i = 0; i < 3; i++) {
    cr_assert_eq(sluice_limiter_take(l, key, strlen(key), &still, 1, &v),
                 SLUICE_OK, "%s", sluice_limiter_errmsg(l));
    admitted += v.allowed;
  }
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
  /* The child has exited (closing its descriptors): the parent's session
  ** still works, with no reconnect. */
  for (i = 0; i < 2; i++) {
    cr_assert_eq(sluice_limiter_take(l, key, strlen(key), &still, 1, &v),
                 SLUICE_OK, "%s", sluice_limiter_errmsg(l));
    admitted += v.allowed;
  }
  sluice_limiter_control(l, SLUICE_CTL_REDIS_STATS, &st);
  cr_assert_eq(st.connects, 1, "the parent kept its TLS connection");
  cr_assert_eq(admitted + 10, 20, "one bucket shared by both processes");
  sluice_limiter_close(l);
}

/* --------------------------------------------- threads over a pool --- */

typedef struct thr_arg {
  sluice_limiter *l;
  const char *key;
  int admitted, errors;
  int program; /* decide through a one-step program (the policy's path) */
} thr_arg;

/* One decision on a->key: a take, or the same consume as a program. */
static int thr_decide(thr_arg *a, int *allowed) {
  sluice_key k = {a->key, strlen(a->key)};
  sluice_step st = {.algo = SLUICE_ALGO_GCRA, .kind = SLUICE_OP_CONSUME,
                    .key = 0, .nkeys = 1, .params = &still, .arg = 1};
  sluice_program pr = {1, &k, 1, &st};
  sluice_program_result res;
  sluice_verdict v;
  int rc;
  if (!a->program) {
    rc = sluice_limiter_take(a->l, a->key, strlen(a->key), &still, 1, &v);
    *allowed = v.allowed;
    return rc;
  }
  rc = sluice_limiter_decide(a->l, 1, &pr, SLUICE_NOW, &res, NULL);
  *allowed = res.allowed;
  return rc;
}

static void *thr_main(void *p) {
  thr_arg *a = p;
  int i, allowed = 0;
  for (i = 0; i < 10; i++) {
    if (thr_decide(a, &allowed) != SLUICE_OK)
      a->errors++;
    else
      a->admitted += allowed;
  }
  return NULL;
}

/* 16 threads, 160 requests on one bucket of 20: exactly 20 admitted, and
** the threads went over more than one connection. */
static void threads_on(const char *store, int pool, int program) {
  enum { T = 16 };
  pthread_t t[T];
  thr_arg a[T];
  char key[96];
  sluice_limiter *l = must_open(store);
  sluice_redis_stats st;
  int i, total = 0;
  rt_tag(key, sizeof key, "pool");
  for (i = 0; i < T; i++) {
    a[i] = (thr_arg){l, key, 0, 0, program};
    cr_assert_eq(pthread_create(&t[i], NULL, thr_main, &a[i]), 0);
  }
  for (i = 0; i < T; i++)
    pthread_join(t[i], NULL);
  for (i = 0; i < T; i++) {
    cr_assert_eq(a[i].errors, 0, "%s", sluice_limiter_errmsg(l));
    total += a[i].admitted;
  }
  cr_assert_eq(total, 20, "exactly the burst, over %d threads", T);
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_REDIS_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.pool, pool);
  cr_assert_eq(st.ops, T * 10);
  /* Each lane connects to the node on first use: threads that start on
  ** different lanes give more than one connection. */
  cr_assert_geq(st.connects, 2, "%d threads shared one connection", T);
  sluice_limiter_close(l);
}

Test(conn, threads_over_a_pool_never_over_admit) {
  char store[512];
  snprintf(store, sizeof store, "redis:nodes=%s;timeout_ms=3000;pool=4%s",
           rt_nodes(), auth_sfx());
  threads_on(store, 4, 0);
}

/* Programs are how the policy decides: they must take lanes too. */
Test(conn, programs_over_a_pool_never_over_admit) {
  char store[512];
  snprintf(store, sizeof store, "redis:nodes=%s;timeout_ms=3000;pool=4%s",
           rt_nodes(), auth_sfx());
  threads_on(store, 4, 1);
}

Test(conn, threads_over_tls_never_over_admit) {
  char store[1024];
  tls_store(store, sizeof store, "127.0.0.1", "ca.crt", ";pool=16");
  threads_on(store, 16, 0);
}

/* ------------------------------------------ Redis starting late --- */

static pid_t start_redis(int port, const char *dir) {
  char p[16];
  char *argv[] = {"redis-server", "--port", p, "--bind", "127.0.0.1",
                  "--save", "", "--appendonly", "no", "--dir", (char *)dir,
                  "--protected-mode", "no", "--logfile", "/dev/null", NULL};
  pid_t pid;
  snprintf(p, sizeof p, "%d", port);
  cr_assert_eq(posix_spawnp(&pid, "redis-server", NULL, NULL, argv, environ),
               0);
  return pid;
}

static void on_event(void *ud, const sluice_event *ev) {
  int *n = ud;
  if (ev->type == SLUICE_EVENT_DEGRADED_OFF)
    n[1]++;
  else if (ev->type == SLUICE_EVENT_DEGRADED_ON)
    n[0]++;
}

/* A service starts before its Redis: the limiter and the policy open,
** decisions take the failure path, and once Redis answers both recover on
** their own. */
Test(conn, opened_before_redis_starts) {
  const char *spare = env_or_skip("SLUICE_REDIS_SPARE_PORT", "run via harness");
  const char *tmp = env_or_skip("SLUICE_REDIS_TMP", "run via harness");
  char store[256], dir[512], key[96];
  sluice_limiter *l;
  sluice_policy *pol;
  sluice_policy_options po;
  sluice_request std, rec;
  sluice_attr ledger = {"ledger", "L"};
  sluice_decision d;
  sluice_verdict v;
  int port = atoi(spare), rc, events[2] = {0, 0};
  int64_t t0, deadline;
  pid_t pid;
  if (rt_is_cluster())
    cr_skip_test("one server is enough (single mode)");
  snprintf(store, sizeof store,
           "redis:nodes=127.0.0.1:%d;connect_timeout_ms=500;timeout_ms=3000;"
           "backoff_max_ms=50",
           port);
  l = must_open(store);
  rt_tag(key, sizeof key, "late");
  rc = sluice_limiter_take(l, key, strlen(key), &still, 1, &v);
  cr_assert_eq(rc, SLUICE_EUNAVAIL, "%s", sluice_err_name(rc));

  memset(&po, 0, sizeof po);
  po.limiter = l;
  po.config_path = SLUICE_LEDGER_CONF;
  memset(po.secret, 7, sizeof po.secret);
  po.on_event = on_event;
  po.userdata = events;
  cr_assert_eq(sluice_policy_open(&po, &pol), SLUICE_OK);
  memset(&std, 0, sizeof std);
  std.tenant_id = "acme";
  std.api_key_id = "key-1";
  std.tier = "growth";
  std.method = "GET";
  std.route = "/v1/ledgers/l1/entries";
  rec = std;
  rec.method = "POST";
  rec.route = "/v1/ledgers/reconcile";
  rec.attrs = &ledger;
  rec.nattrs = 1;
  cr_assert_eq(sluice_policy_decide(pol, 1, &std, &d, NULL), SLUICE_OK);
  cr_assert_eq(d.allowed, 1);
  cr_assert_neq(d.flags & SLUICE_DECISION_DEGRADED, 0, "degraded");
  cr_assert_eq(d.store_error, SLUICE_EUNAVAIL);
  cr_assert_eq(sluice_policy_decide(pol, 1, &rec, &d, NULL), SLUICE_OK);
  cr_assert_eq(d.status, 503, "reconcile fails closed");
  cr_assert_eq(events[0], 1);

  snprintf(dir, sizeof dir, "%s/late", tmp);
  mkdir(dir, 0700);
  pid = start_redis(port, dir);
  /* A liveness bound only; the recovery time is measured by the redis
  ** benchmark. */
  t0 = rt_mono_ms();
  deadline = t0 + 20000;
  do {
    usleep(5000);
    rc = sluice_limiter_take(l, key, strlen(key), &still, 1, &v);
  } while (rc != SLUICE_OK && rt_mono_ms() < deadline);
  cr_assert_eq(rc, SLUICE_OK, "the limiter recovered: %s",
               sluice_limiter_errmsg(l));
  cr_assert_eq(v.remaining, 19, "the first decision Redis saw");
  do {
    usleep(20000);
    cr_assert_eq(sluice_policy_decide(pol, 1, &std, &d, NULL), SLUICE_OK);
  } while ((d.flags & SLUICE_DECISION_DEGRADED) && rt_mono_ms() < deadline);
  cr_assert_eq(d.flags & SLUICE_DECISION_DEGRADED, 0, "the policy recovered");
  cr_assert_eq(d.store_error, 0);
  cr_assert_eq(events[1], 1, "one DEGRADED_OFF event");
  sluice_policy_close(pol);
  sluice_limiter_close(l);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* A decision on a fresh bucket until one succeeds (reconnects back off),
** within 20 s; then "fcall" and "evalsha" calls on the server at port. */
static void decide_until_ok(sluice_limiter *l, const char *key) {
  int64_t deadline = rt_mono_ms() + 20000;
  sluice_verdict v;
  int rc;
  do {
    usleep(5000);
    rc = sluice_limiter_take(l, key, strlen(key), &still, 1, &v);
  } while (rc != SLUICE_OK && rt_mono_ms() < deadline);
  cr_assert_eq(rc, SLUICE_OK, "decided: %s", sluice_limiter_errmsg(l));
}

static long calls_on(int port, const char *cmd) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  long n;
  cr_assert(c && !c->err);
  n = rt_cmd_calls(c, cmd);
  redisFree(c);
  return n;
}

/* The server the restart test runs, stopped even when an assertion ends
** the test early (it would hold the harness's output open). */
static pid_t restarted_pid;
static void stop_restarted(void) {
  if (restarted_pid > 0) {
    kill(restarted_pid, SIGKILL);
    waitpid(restarted_pid, NULL, 0);
    restarted_pid = 0;
  }
}

/* A server restarted without persistence has lost the Lua library: the
** store's new connection finds it missing (FUNCTION LIST), loads it, and
** decides by FCALL again, never falling back to the script. */
Test(conn, restart_without_the_library, .fini = stop_restarted) {
  const char *spare = env_or_skip("SLUICE_REDIS_SPARE_PORT", "run via harness");
  const char *tmp = env_or_skip("SLUICE_REDIS_TMP", "run via harness");
  char store[256], dir[512], key[96];
  sluice_limiter *l;
  int port = atoi(spare), i;
  if (rt_is_cluster())
    cr_skip_test("one server is enough (single mode)");
  snprintf(dir, sizeof dir, "%s/restart", tmp);
  mkdir(dir, 0700);
  restarted_pid = start_redis(port, dir);
  snprintf(store, sizeof store,
           "redis:nodes=127.0.0.1:%d;connect_timeout_ms=500;timeout_ms=3000;"
           "backoff_max_ms=50;engine=lua",
           port);
  l = must_open(store);
  for (i = 0; i < 2; i++) {
    rt_tag(key, sizeof key, i ? "restarted" : "before");
    decide_until_ok(l, key);
    cr_assert_geq(calls_on(port, "fcall"), 1, "run %d: by FCALL", i);
    cr_assert_eq(calls_on(port, "evalsha"), 0, "run %d: no EVALSHA", i);
    if (i == 0) { /* a restart that keeps nothing */
      stop_restarted();
      restarted_pid = start_redis(port, dir);
    }
  }
  sluice_limiter_close(l);
}

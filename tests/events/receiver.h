/*
** The webhook suites' HTTP receiver: libmicrohttpd on 127.0.0.1 (a free
** port, or a given one), a thread per connection, recording each
** request's path and body.  It can fail its first requests (500), answer
** late (delay_ms), answer with another 2xx (status), or hang: hold every
** request until rx_stop() (then the sink's timeout or close ends it).
** Below it, what the sink suites share: counters read, waits for a count,
** a sample event.
*/
#ifndef SLUICE_TESTS_EVENTS_RECEIVER_H
#define SLUICE_TESTS_EVENTS_RECEIVER_H

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXREQ 64

typedef struct receiver {
  struct MHD_Daemon *d;
  int port;
  int fail_first; /* answer 500 to this many first requests */
  int delay_ms;   /* before answering */
  int status;     /* the answer when not failing; 0: 204 */
  int hang;       /* hold requests until rx_stop */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stopping;
  int n, holding, max_holding;
  char path[MAXREQ][64];
  char body[MAXREQ][4096];
} receiver;

typedef struct upload {
  size_t len;
  char buf[4096];
} upload;

static inline enum MHD_Result rx_on_req(void *cls, struct MHD_Connection *c,
                                        const char *url, const char *method,
                                        const char *version, const char *data,
                                        size_t *size, void **ctx) {
  receiver *r = cls;
  upload *u = *ctx;
  struct MHD_Response *resp;
  enum MHD_Result ret;
  int i, status;
  (void)method;
  (void)version;
  if (!u) {
    *ctx = calloc(1, sizeof(upload));
    return *ctx ? MHD_YES : MHD_NO;
  }
  if (*size) {
    size_t n = *size < sizeof u->buf - 1 - u->len ? *size
                                                   : sizeof u->buf - 1 - u->len;
    memcpy(u->buf + u->len, data, n);
    u->len += n;
    *size = 0;
    return MHD_YES;
  }
  if (r->delay_ms)
    usleep((useconds_t)r->delay_ms * 1000);
  pthread_mutex_lock(&r->mu);
  i = r->n++;
  if (i < MAXREQ) {
    snprintf(r->path[i], sizeof r->path[i], "%s", url);
    memcpy(r->body[i], u->buf, u->len + 1);
  }
  if (r->hang) {
    if (++r->holding > r->max_holding)
      r->max_holding = r->holding;
    while (!r->stopping)
      pthread_cond_wait(&r->cv, &r->mu);
    r->holding--;
  }
  status = i < r->fail_first ? 500 : r->status ? r->status : 204;
  pthread_mutex_unlock(&r->mu);
  resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  ret = MHD_queue_response(c, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static inline void rx_on_done(void *cls, struct MHD_Connection *c, void **ctx,
                              enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)c;
  (void)toe;
  free(*ctx);
  *ctx = NULL;
}

/* On `port` (0: any free one); 0 when it could not bind. */
static inline int rx_start_on(receiver *r, int port, int fail_first,
                              int delay_ms) {
  struct sockaddr_in sa;
  const union MHD_DaemonInfo *di;
  memset(r, 0, sizeof *r);
  r->fail_first = fail_first;
  r->delay_ms = delay_ms;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  r->d = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
      NULL, rx_on_req, r, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
      MHD_OPTION_NOTIFY_COMPLETED, rx_on_done, NULL, MHD_OPTION_END);
  if (!r->d)
    return 0;
  di = MHD_get_daemon_info(r->d, MHD_DAEMON_INFO_BIND_PORT);
  r->port = di ? di->port : 0;
  return r->port != 0;
}

static inline void rx_start(receiver *r, int fail_first, int delay_ms) {
  cr_assert(rx_start_on(r, 0, fail_first, delay_ms), "receiver did not start");
}

static inline void rx_stop(receiver *r) {
  pthread_mutex_lock(&r->mu);
  r->stopping = 1;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  MHD_stop_daemon(r->d);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
}

static inline int rx_count(receiver *r) {
  int n;
  pthread_mutex_lock(&r->mu);
  n = r->n;
  pthread_mutex_unlock(&r->mu);
  return n;
}

/* The body of the first request to `path` ("" when none came: every
** strstr on it then fails the test). */
static inline const char *rx_find(receiver *r, const char *path) {
  int i, n = rx_count(r);
  for (i = 0; i < n && i < MAXREQ; i++)
    if (!strcmp(r->path[i], path))
      return r->body[i];
  return "";
}

/* A port nobody listens on, which a test may later listen on itself (a
** spool's deliveries arrive once a receiver starts there).  Taken below the
** kernel's ephemeral range (ip_local_port_range): a port from that range,
** once closed, is handed to any client's connect() on the host, the sink's
** own included (a connection to a dead port can then meet itself, a TCP
** self-connect, or another suite's client holds the port when the
** receiver wants it).  Outside it only an explicit bind can take it. */
static inline int dead_port(void) {
  struct sockaddr_in sa;
  int lo = 32768, hi, port = 0, i;
  unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2)
      lo = 32768;
    fclose(f);
  }
  if (lo > 32768 || lo < 12000)
    lo = 32768;
  for (i = 0; i < 1000 && !port; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int p = 10000 + (int)(rand_r(&seed) % (unsigned)(lo - 10000));
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)p);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
      port = p;
    if (fd >= 0)
      close(fd);
  }
  cr_assert(port, "no free port below the ephemeral range");
  return port;
}

/* ------------------------------------------- helpers for sink tests --- */

#include <sluice.h>

/* A sink's counters, which must be there to read. */
static inline sluice_webhook_stats stats(sluice_webhook *w) {
  sluice_webhook_stats s;
  memset(&s, 0xa5, sizeof s);
  cr_assert_eq(sluice_webhook_stats_get(w, &s), SLUICE_OK);
  return s;
}

/* How many 10 ms ticks a test waits for what it expects before it fails:
** 60 s.  A passing run never waits it out, and a loaded machine (the
** suites side by side, the docs test running the unit suite again) can
** take many seconds over what a quiet one does. */
#define RX_WAIT_TICKS 6000

/* Wait (RX_WAIT_TICKS at most) until delivered + failed reaches n. */
static inline sluice_webhook_stats settle(sluice_webhook *w, uint64_t n) {
  int i;
  for (i = 0; i < RX_WAIT_TICKS; i++) {
    sluice_webhook_stats s = stats(w);
    if (s.delivered + s.failed >= n)
      return s;
    usleep(10000);
  }
  return stats(w);
}

static const char SCOPE[] = "0123456789abcdef0123456789abcdef";
static const char TENANT[] = "fedcba9876543210fedcba9876543210";
#define UNTIL (INT64_C(1796328000) * 1000000000) /* 2026-12-03T20:00:00Z */

static inline sluice_event event(int type, int level, const sluice_request *rq) {
  sluice_event ev;
  memset(&ev, 0, sizeof ev);
  ev.type = type;
  ev.scope = SLUICE_SCOPE_KEY;
  ev.level = level;
  ev.scope_id = SCOPE;
  ev.tenant_scope_id = TENANT;
  ev.tier = "growth";
  ev.request = rq;
  ev.now_ns = UNTIL - INT64_C(3600) * 1000000000;
  ev.until_ns = UNTIL;
  return ev;
}

static inline void url(char *out, size_t n, int port, const char *path) {
  snprintf(out, n, "http://127.0.0.1:%d%s", port, path);
}

/* A sink sending ALERT to /a on `port` (other options as o has them), and
** one ALERT posted into it. */
static inline sluice_webhook *alert_once(sluice_webhook_options *o, char u[128],
                                  int port) {
  sluice_webhook *w;
  sluice_event ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  url(u, 128, port, "/a");
  o->url[SLUICE_EVENT_ALERT] = u;
  cr_assert_eq(sluice_webhook_open(o, &w), SLUICE_OK);
  sluice_webhook_on_event(w, &ev);
  return w;
}

/* A live receiver and one that hangs, and options (zeroed, loopback
** allowed) sending to both: d[0] the hanging one at uh, d[1] the live one
** at ul. */
static inline void live_and_hanging(receiver *live, receiver *hang,
                                    sluice_webhook_options *o,
                                    sluice_webhook_dest d[2], char uh[128],
                                    char ul[128]) {
  rx_start(live, 0, 0);
  rx_start(hang, 0, 0);
  hang->hang = 1;
  memset(o, 0, sizeof *o);
  memset(d, 0, 2 * sizeof *d);
  url(uh, 128, hang->port, "/hang");
  url(ul, 128, live->port, "/live");
  d[0].url = uh;
  d[1].url = ul;
  o->dests = d;
  o->ndests = 2;
  o->flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
}

#endif

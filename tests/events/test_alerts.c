/*
** Alerts where people look, against local receivers: a Slack message and
** PagerDuty events checked against the schemas those services document
** (trigger and resolve paired by dedup_key, the owner paged at level 3),
** an email taken by an SMTP server (Debian's python3-aiosmtpd,
** smtp_sink.py), deliveries to a live receiver going on while another is
** down and a third hangs, a spool that outlives a close and a kill, the
** addresses refused at open and at connect, and the proxy environment
** ignored.
**
** No assertion depends on speed: waits are for a count to reach a value
** (RX_WAIT_TICKS deadline); the hanging receiver holds its requests until the end.
*/
#include <criterion/criterion.h>
#include <jansson.h>
#include <netdb.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include <sluice.h>

#include "receiver.h"

#define ROUTING_KEY "R0UT1NGKEY0123456789abcdef012345" /* 32 characters */
#define OWNER_KEY "0WNERKEY0123456789abcdef01234567"

static int rx_wait(receiver *r, int n) {
  int i;
  for (i = 0; i < RX_WAIT_TICKS && rx_count(r) < n; i++)
    usleep(10000);
  return rx_count(r);
}

static sluice_webhook *open_sink(sluice_webhook_options *o) {
  sluice_webhook *w = NULL;
  char err[256] = "";
  o->errbuf = err;
  o->errlen = sizeof err;
  cr_assert_eq(sluice_webhook_open(o, &w), SLUICE_OK, "%s", err);
  o->errbuf = NULL;
  return w;
}

static const char *str(json_t *o, const char *k) {
  return json_string_value(json_object_get(o, k));
}

/* ------------------------------------------------------------- Slack --- */

/* api.slack.com/messaging/webhooks and the Block Kit reference: "text"
** (required with blocks, the notification line), blocks of known types,
** a section's text object {type: mrkdwn|plain_text, text <= 3000}, a
** context's 1..10 elements. */
static void check_slack(json_t *m) {
  json_t *blocks = json_object_get(m, "blocks"), *b;
  const char *k;
  json_t *v;
  size_t i;
  json_object_foreach(m, k, v) cr_assert(!strcmp(k, "text") ||
                                             !strcmp(k, "blocks"),
                                         "unknown member %s", k);
  cr_assert(str(m, "text") && str(m, "text")[0], "no text");
  cr_assert(json_is_array(blocks) && json_array_size(blocks) >= 1 &&
            json_array_size(blocks) <= 50);
  json_array_foreach(blocks, i, b) {
    const char *type = str(b, "type");
    cr_assert_not_null(type);
    if (!strcmp(type, "section")) {
      json_t *t = json_object_get(b, "text");
      cr_assert(!strcmp(str(t, "type"), "mrkdwn") ||
                !strcmp(str(t, "type"), "plain_text"));
      cr_assert(str(t, "text") && strlen(str(t, "text")) <= 3000);
    } else {
      json_t *els = json_object_get(b, "elements"), *e;
      size_t j;
      cr_assert_str_eq(type, "context");
      cr_assert(json_array_size(els) >= 1 && json_array_size(els) <= 10);
      json_array_foreach(els, j, e) {
        cr_assert_str_eq(str(e, "type"), "mrkdwn");
        cr_assert(str(e, "text") && str(e, "text")[0]);
      }
    }
  }
}

Test(alerts, slack_message_follows_the_incoming_webhook_schema) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook_dest d;
  sluice_webhook *w;
  sluice_request rq;
  sluice_event ev;
  char u[128];
  json_t *m;
  json_error_t e;
  rx_start(&r, 0, 0);
  memset(&o, 0, sizeof o);
  memset(&d, 0, sizeof d);
  url(u, sizeof u, r.port, "/slack");
  d.format = SLUICE_WEBHOOK_SLACK;
  d.url = u;
  o.dests = &d;
  o.ndests = 1;
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  w = open_sink(&o);
  memset(&rq, 0, sizeof rq);
  rq.method = "POST";
  rq.route = "/v1/ledgers/reconcile";
  rq.api_key_id = "sk_live_SECRET_0000000001";
  ev = event(SLUICE_EVENT_ALERT, 2, &rq);
  sluice_webhook_on_event(w, &ev);
  cr_assert_eq(settle(w, 1).delivered, 1);
  m = json_loads(r.body[0], 0, &e);
  cr_assert_not_null(m, "not JSON: %s", r.body[0]);
  check_slack(m);
  cr_assert_not_null(strstr(str(m, "text"), SCOPE), "%s", r.body[0]);
  cr_assert_not_null(strstr(r.body[0], "POST /v1/ledgers/reconcile"));
  cr_assert_not_null(strstr(r.body[0], SLUICE_WEBHOOK_GUIDE_DEFAULT));
  cr_assert_not_null(strstr(r.body[0], "2026-12-03T20:00:00Z"));
  cr_assert_null(strstr(r.body[0], "SECRET"));
  json_decref(m);
  sluice_webhook_close(w);
  rx_stop(&r);
}

/* --------------------------------------------------------- PagerDuty --- */

/* developer.pagerduty.com, Events API v2 "Send an Alert Event": a
** 32-character routing_key, event_action trigger|acknowledge|resolve, a
** dedup_key of at most 255; a trigger's payload has summary (<= 1024),
** source, severity critical|error|warning|info, an ISO 8601 timestamp. */
static void check_pagerduty(json_t *m) {
  const char *action = str(m, "event_action"), *sev;
  json_t *p = json_object_get(m, "payload");
  cr_assert(str(m, "routing_key") && strlen(str(m, "routing_key")) == 32);
  cr_assert(action && (!strcmp(action, "trigger") ||
                       !strcmp(action, "resolve")));
  cr_assert(str(m, "dedup_key") && strlen(str(m, "dedup_key")) <= 255);
  if (strcmp(action, "trigger"))
    return;
  cr_assert(json_is_object(p), "a trigger needs a payload");
  cr_assert(str(p, "summary") && str(p, "summary")[0] &&
            strlen(str(p, "summary")) <= 1024);
  cr_assert(str(p, "source") && str(p, "source")[0]);
  sev = str(p, "severity");
  cr_assert(sev && (!strcmp(sev, "critical") || !strcmp(sev, "error") ||
                    !strcmp(sev, "warning") || !strcmp(sev, "info")));
  cr_assert(str(p, "timestamp") && strlen(str(p, "timestamp")) == 20 &&
            str(p, "timestamp")[10] == 'T');
}

static int pd_contacts(void *ud, const char *tenant, int role, char *buf,
                       size_t len) {
  (void)ud;
  if (strcmp(tenant, "acme"))
    return SLUICE_ENOTFOUND;
  snprintf(buf, len, "%s",
           role == SLUICE_WEBHOOK_OWNER
               ? "owner@vendor.example,pagerduty:" OWNER_KEY
               : "ops@acme.example");
  return SLUICE_OK;
}

Test(alerts, pagerduty_trigger_and_resolve_pair_by_dedup_key) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook_dest d;
  sluice_webhook *w;
  sluice_event ev;
  char u[128];
  json_t *m[2];
  json_error_t e;
  int i;
  /* The trigger's first attempt fails (500): the resolve, queued after
  ** it, must still arrive after it. */
  rx_start(&r, 1, 0);
  r.status = 202; /* what PagerDuty answers */
  memset(&o, 0, sizeof o);
  memset(&d, 0, sizeof d);
  url(u, sizeof u, r.port, "/v2/enqueue");
  d.format = SLUICE_WEBHOOK_PAGERDUTY;
  d.url = u;
  d.routing_key = ROUTING_KEY;
  o.dests = &d;
  o.ndests = 1;
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  o.backoff_base_ms = 20;
  w = open_sink(&o);
  ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  sluice_webhook_on_event(w, &ev);
  ev = event(SLUICE_EVENT_RELEASE, 2, NULL);
  ev.who = "support";
  ev.why = "customer fixed its retry loop";
  ev.until_ns = 0;
  sluice_webhook_on_event(w, &ev);
  cr_assert_eq(settle(w, 2).delivered, 2);
  cr_assert_eq(rx_count(&r), 3);
  cr_assert_str_eq(r.body[0], r.body[1], "the trigger, then its retry");
  for (i = 0; i < 2; i++) {
    m[i] = json_loads(r.body[i + 1], 0, &e);
    cr_assert_not_null(m[i], "not JSON: %s", r.body[i]);
    check_pagerduty(m[i]);
    cr_assert_str_eq(str(m[i], "routing_key"), ROUTING_KEY);
  }
  /* in order: the trigger, then the resolve of the same incident */
  cr_assert_str_eq(str(m[0], "event_action"), "trigger");
  cr_assert_str_eq(str(m[1], "event_action"), "resolve");
  cr_assert_str_eq(str(m[0], "dedup_key"), str(m[1], "dedup_key"));
  cr_assert(!strncmp(str(m[0], "dedup_key"), "key:", 4) &&
            !strcmp(str(m[0], "dedup_key") + 4, SCOPE));
  cr_assert_str_eq(
      str(json_object_get(m[0], "payload"), "severity"), "warning");
  json_decref(m[0]);
  json_decref(m[1]);
  sluice_webhook_close(w);
  rx_stop(&r);
}

Test(alerts, an_enterprise_level_three_pages_on_call_and_the_account_owner) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook_dest d;
  sluice_webhook *w;
  sluice_request rq;
  sluice_event ev;
  char u[128];
  int i, oncall = 0, owner = 0;
  rx_start(&r, 0, 0);
  r.status = 202;
  memset(&o, 0, sizeof o);
  memset(&d, 0, sizeof d);
  url(u, sizeof u, r.port, "/v2/enqueue");
  d.format = SLUICE_WEBHOOK_PAGERDUTY;
  d.url = u;
  d.routing_key = ROUTING_KEY;
  o.dests = &d;
  o.ndests = 1;
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  o.contacts = pd_contacts;
  w = open_sink(&o);
  memset(&rq, 0, sizeof rq);
  rq.tenant_id = "acme";
  rq.tier = "enterprise";
  ev = event(SLUICE_EVENT_PAGE, 3, &rq);
  ev.tier = "enterprise";
  ev.until_ns = SLUICE_FOREVER;
  sluice_webhook_on_event(w, &ev);
  cr_assert_eq(settle(w, 2).delivered, 2);
  for (i = 0; i < 2; i++) {
    json_error_t e;
    json_t *m = json_loads(r.body[i], 0, &e);
    cr_assert_not_null(m);
    check_pagerduty(m);
    cr_assert_str_eq(str(json_object_get(m, "payload"), "severity"),
                     "critical");
    oncall += !strcmp(str(m, "routing_key"), ROUTING_KEY);
    owner += !strcmp(str(m, "routing_key"), OWNER_KEY);
    json_decref(m);
  }
  cr_assert_eq(oncall, 1);
  cr_assert_eq(owner, 1);
  sluice_webhook_close(w);
  rx_stop(&r);
}

/* -------------------------------------------------------------- email --- */

static pid_t smtp_start(char dir[64], int *port) {
  char p[16], ready[128];
  pid_t pid;
  int i;
  snprintf(dir, 64, "/tmp/sluice-smtp-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  *port = dead_port();
  snprintf(p, sizeof p, "%d", *port);
  pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    execl("/usr/bin/python3", "python3", SMTP_SINK, p, dir, (char *)NULL);
    _exit(127);
  }
  snprintf(ready, sizeof ready, "%s/ready", dir);
  for (i = 0; i < RX_WAIT_TICKS && access(ready, F_OK); i++)
    usleep(10000);
  if (access(ready, F_OK)) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_skip_test("smtp_sink.py did not start (python3-aiosmtpd missing?)");
  }
  return pid;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  static char buf[16384];
  size_t n;
  if (!f)
    return NULL;
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

Test(alerts, email_reaches_the_tenants_technical_contacts_over_smtp) {
  sluice_webhook_options o;
  sluice_webhook_dest d;
  sluice_webhook *w;
  sluice_request rq;
  sluice_event ev;
  char dir[64], u[128], book[128], path[160], *msg;
  FILE *f;
  int port;
  pid_t pid = smtp_start(dir, &port);
  snprintf(book, sizeof book, "%s/contacts", dir);
  f = fopen(book, "w");
  cr_assert_not_null(f);
  fprintf(f, "# tenant role addresses\n"
             "acme tech ops@acme.example\n"
             "acme tech cto@acme.example  # two lines join\n"
             "acme owner am@vendor.example\n"
             "other tech nobody@other.example\n");
  fclose(f);
  memset(&o, 0, sizeof o);
  memset(&d, 0, sizeof d);
  snprintf(u, sizeof u, "smtp://127.0.0.1:%d", port);
  d.format = SLUICE_WEBHOOK_EMAIL;
  d.url = u;
  d.mail_from = "rate-limits@vendor.example";
  d.mail_to = "support@vendor.example";
  o.dests = &d;
  o.ndests = 1;
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  o.contacts_path = book;
  w = open_sink(&o);
  memset(&rq, 0, sizeof rq);
  rq.tenant_id = "acme";
  rq.api_key_id = "sk_live_SECRETSECRET_9f3a";
  rq.method = "GET";
  rq.route = "/v1/reports/audit-export";
  ev = event(SLUICE_EVENT_ALERT, 2, &rq);
  sluice_webhook_on_event(w, &ev);
  cr_assert_eq(settle(w, 1).delivered, 1);
  sluice_webhook_close(w);
  snprintf(path, sizeof path, "%s/1.eml", dir);
  msg = slurp(path);
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
  cr_assert_not_null(msg, "no message at %s", path);
  cr_assert_not_null(strstr(msg, "MAIL FROM:rate-limits@vendor.example\n"));
  cr_assert_not_null(strstr(msg, "RCPT TO:support@vendor.example\n"));
  cr_assert_not_null(strstr(msg, "RCPT TO:ops@acme.example\n"));
  cr_assert_not_null(strstr(msg, "RCPT TO:cto@acme.example\n"));
  cr_assert_null(strstr(msg, "am@vendor.example"), "the owner: pages only");
  cr_assert_null(strstr(msg, "other.example"), "another tenant's contact");
  cr_assert_not_null(strstr(msg, "Subject: [rate limits] "));
  cr_assert_not_null(strstr(msg, SCOPE), "the key's id");
  cr_assert_not_null(strstr(msg, "ending in 9f3a"), "%s", msg);
  cr_assert_null(strstr(msg, "SECRET"), "the raw key was sent");
  cr_assert_not_null(strstr(msg, "GET /v1/reports/audit-export"));
  cr_assert_not_null(strstr(msg, SLUICE_WEBHOOK_GUIDE_DEFAULT));
  cr_assert_not_null(strstr(msg, "Retry-After"));
}

Test(alerts, a_contacts_file_with_a_bad_line_fails_open_naming_it) {
  sluice_webhook_options o;
  sluice_webhook_dest d;
  sluice_webhook *w;
  char book[] = "/tmp/sluice-contacts-XXXXXX", err[256] = "";
  int fd = mkstemp(book);
  cr_assert(fd >= 0);
  cr_assert(write(fd, "acme tech a@b.example\nacme boss c@d.example\n", 44) ==
            44);
  close(fd);
  memset(&o, 0, sizeof o);
  memset(&d, 0, sizeof d);
  d.format = SLUICE_WEBHOOK_EMAIL;
  d.url = "smtp://mail.example.com";
  d.mail_from = "a@b.example";
  o.dests = &d;
  o.ndests = 1;
  o.contacts_path = book;
  o.errbuf = err;
  o.errlen = sizeof err;
  cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_ECONFIG);
  cr_assert_null(w);
  cr_assert_not_null(strstr(err, ":2:"), "%s", err);
  unlink(book);
}

/* ------------------------------------------------- bounded concurrency --- */

/* The old sink posted one event at a time: the hanging receiver would
** have held every delivery behind it for a timeout each (a minute here). */
Test(alerts, a_dead_and_a_hanging_receiver_do_not_stop_a_live_one) {
  receiver live, hang;
  sluice_webhook_options o;
  sluice_webhook_dest d[3];
  sluice_webhook *w;
  sluice_event ev;
  char ul[128], uh[128], ud[128], m[4096];
  int i;
  memset(d, 0, sizeof d);
  live_and_hanging(&live, &hang, &o, d + 1, uh, ul);
  url(ud, sizeof ud, dead_port(), "/dead");
  d[0].url = ud;
  d[0].name = "dead";
  d[1].name = "hanging";
  d[2].name = "live";
  o.dests = d;
  o.ndests = 3;
  o.timeout_ms = 60000;
  o.max_inflight = 2;
  o.max_attempts = 1000;
  o.backoff_base_ms = 1;
  o.backoff_max_ms = 5;
  w = open_sink(&o);
  ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  for (i = 0; i < 20; i++)
    sluice_webhook_on_event(w, &ev);
  cr_assert_eq(rx_wait(&live, 20), 20, "the live receiver got %d of 20",
               rx_count(&live));
  /* The receiver counts a delivery when its body arrives, the sink when
  ** the answer reaches it: wait for the sink's count too. */
  for (i = 0; i < RX_WAIT_TICKS && stats(w).delivered < 20; i++)
    usleep(10000);
  cr_assert_eq(stats(w).delivered, 20);
  pthread_mutex_lock(&hang.mu);
  cr_assert(hang.max_holding >= 1 && hang.max_holding <= 2,
            "attempts at once on the hanging receiver: %d",
            hang.max_holding);
  pthread_mutex_unlock(&hang.mu);
  cr_assert_eq(sluice_webhook_metrics(w, m, sizeof m, NULL), SLUICE_OK);
  cr_assert_not_null(strstr(m, "sluice_webhook_deliveries_total{dest=\"live\","
                               "format=\"json\",result=\"sent\"} 20\n"),
                     "%s", m);
  cr_assert_not_null(strstr(m, "sluice_webhook_deliveries_total{dest=\"dead\","
                               "format=\"json\",result=\"sent\"} 0\n"),
                     "%s", m);
  cr_assert_not_null(strstr(m, "sluice_webhook_deliveries_spooled{dest="
                               "\"hanging\",format=\"json\"} 20\n"),
                     "%s", m);
  sluice_webhook_close(w);
  rx_stop(&hang);
  rx_stop(&live);
}

/* A destination that hangs builds a backlog: it must stay within its
** share of the sink's memory (then in the spool, or dropped without one),
** or it would stop the queue for the live one.  queue_max 8 and 40 events,
** each sent once the live receiver has the one before. */
static void backlog_beside_live(const char *spool) {
  receiver live, hang;
  sluice_webhook_options o;
  sluice_webhook_dest d[2];
  sluice_webhook *w;
  sluice_webhook_stats s;
  sluice_event ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  char ul[128], uh[128];
  int i;
  live_and_hanging(&live, &hang, &o, d, uh, ul);
  o.queue_max = 8;
  o.timeout_ms = 60000;
  o.max_inflight = 2;
  o.spool_path = spool;
  w = open_sink(&o);
  for (i = 0; i < 40; i++) {
    sluice_webhook_on_event(w, &ev);
    cr_assert_eq(rx_wait(&live, i + 1), i + 1,
                 "%s: the live receiver stopped at %d of 40",
                 spool ? "spool" : "memory", rx_count(&live));
  }
  s = stats(w);
  cr_assert_eq(s.queued, 40);
  if (spool) {
    cr_assert_eq(s.dropped, 0, "the spool keeps the hanging backlog");
    cr_assert_eq(s.spooled, 80);
  } else {
    cr_assert(s.dropped >= 40 - 8, "beyond its share (8): %llu dropped",
              (unsigned long long)s.dropped);
  }
  sluice_webhook_close(w);
  rx_stop(&hang);
  rx_stop(&live);
}

static void spool_path(char out[64]);
static void spool_cleanup(const char *path);

Test(alerts, a_hanging_receivers_backlog_does_not_hold_up_a_live_one) {
  char spool[64];
  backlog_beside_live(NULL);
  spool_path(spool);
  backlog_beside_live(spool);
  spool_cleanup(spool);
}

/* -------------------------------------------------------------- spool --- */

static void spool_path(char out[64]) {
  int fd;
  snprintf(out, 64, "/tmp/sluice-spool-XXXXXX");
  fd = mkstemp(out);
  cr_assert(fd >= 0);
  close(fd);
  unlink(out); /* LMDB creates it */
}

static void spool_cleanup(const char *path) {
  char lock[80];
  snprintf(lock, sizeof lock, "%s-lock", path);
  unlink(path);
  unlink(lock);
}

/* A sink sending ALERTs to `port` (down for now) through a spool. */
static sluice_webhook *spooling(const char *spool, char u[128], int port) {
  sluice_webhook_options o;
  memset(&o, 0, sizeof o);
  url(u, 128, port, "/a");
  o.url[SLUICE_EVENT_ALERT] = u;
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  o.spool_path = spool;
  o.max_attempts = 1000000; /* down for now, never given up */
  o.backoff_base_ms = 1;
  o.backoff_max_ms = 20;
  return open_sink(&o);
}

static void wait_spooled(sluice_webhook *w, uint64_t n) {
  int i;
  for (i = 0; i < RX_WAIT_TICKS && stats(w).spooled < n; i++)
    usleep(10000);
  cr_assert_eq(stats(w).spooled, n);
}

/* Reopened with a receiver on `port`: the n deliveries a previous sink
** left in the spool arrive, and the spool is removed. */
static void reopen_delivers(const char *spool, int port, int n) {
  receiver r;
  sluice_webhook *w;
  sluice_webhook_stats s;
  char u[128];
  cr_assert(rx_start_on(&r, port, 0, 0), "port %d taken meanwhile", port);
  w = spooling(spool, u, port);
  s = settle(w, (uint64_t)n);
  cr_assert_eq(s.restored, (uint64_t)n);
  cr_assert_eq(s.delivered, (uint64_t)n);
  cr_assert_eq(s.abandoned, 0);
  cr_assert_eq(rx_count(&r), n);
  sluice_webhook_close(w);
  rx_stop(&r);
  spool_cleanup(spool);
}

Test(alerts, a_spool_delivers_after_a_close_and_reopen) {
  sluice_webhook *w;
  sluice_event ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  sluice_webhook_stats s;
  char spool[64], u[128];
  int port = dead_port(), i;
  spool_path(spool);
  w = spooling(spool, u, port);
  for (i = 0; i < 3; i++)
    sluice_webhook_on_event(w, &ev);
  wait_spooled(w, 3);
  s = stats(w);
  cr_assert_eq(s.delivered, 0);
  sluice_webhook_close(w);
  reopen_delivers(spool, port, 3);
}

/* Closed at once after a storm: what the queue still held goes into the
** spool with the rest (nothing abandoned), and the next open delivers it. */
Test(alerts, a_close_spools_what_is_still_queued) {
  sluice_webhook *w;
  sluice_event ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  sluice_webhook_stats s;
  char spool[64], u[128];
  int port = dead_port(), i;
  spool_path(spool);
  w = spooling(spool, u, port);
  for (i = 0; i < 500; i++)
    sluice_webhook_on_event(w, &ev);
  s = stats(w);
  cr_assert_eq(s.queued, 500);
  sluice_webhook_close(w);
  reopen_delivers(spool, port, 500);
}

Test(alerts, a_spool_delivers_what_a_killed_process_left, .timeout = 180) {
  sluice_webhook *w;
  char spool[64], u[128], c;
  int port = dead_port(), pipefd[2];
  pid_t pid;
  spool_path(spool);
  cr_assert_eq(pipe(pipefd), 0);
  pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) { /* queue 3 alerts to a dead receiver, say so, be killed */
    sluice_event ev = event(SLUICE_EVENT_ALERT, 2, NULL);
    sluice_webhook_options o;
    sluice_webhook_stats cs;
    int i;
    /* no assertions here: a failure is the parent's, by an empty pipe */
    memset(&o, 0, sizeof o);
    url(u, sizeof u, port, "/a");
    o.url[SLUICE_EVENT_ALERT] = u;
    o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
    o.spool_path = spool;
    o.max_attempts = 1000000;
    o.backoff_base_ms = 1;
    o.backoff_max_ms = 20;
    if (sluice_webhook_open(&o, &w) != SLUICE_OK)
      _exit(1);
    for (i = 0; i < 3; i++)
      sluice_webhook_on_event(w, &ev);
    for (i = 0; i < RX_WAIT_TICKS; i++) {
      sluice_webhook_stats_get(w, &cs);
      if (cs.spooled == 3)
        break;
      usleep(10000);
    }
    if (cs.spooled != 3 || write(pipefd[1], "k", 1) != 1)
      _exit(1);
    pause();
    _exit(0);
  }
  close(pipefd[1]);
  cr_assert_eq(read(pipefd[0], &c, 1), 1, "the child did not spool");
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  close(pipefd[0]);
  reopen_delivers(spool, port, 3);
}

Test(alerts, a_spool_is_one_sinks_at_a_time) {
  sluice_webhook_options o;
  sluice_webhook *w1, *w2 = NULL;
  char spool[64], u[128];
  spool_path(spool);
  w1 = spooling(spool, u, dead_port());
  memset(&o, 0, sizeof o);
  o.url[SLUICE_EVENT_ALERT] = u;
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  o.spool_path = spool;
  cr_assert_eq(sluice_webhook_open(&o, &w2), SLUICE_EBUSY);
  cr_assert_null(w2);
  sluice_webhook_close(w1);
  spool_cleanup(spool);
}

/* ----------------------------------------------------------- addresses --- */

Test(alerts, open_refuses_loopback_link_local_and_private_unless_allowed) {
  static const struct {
    const char *url;
    unsigned allow; /* the flag that lets it through */
  } cases[] = {
      {"http://127.0.0.1:8080/x", SLUICE_WEBHOOK_ALLOW_LOOPBACK},
      {"http://127.9.9.9/x", SLUICE_WEBHOOK_ALLOW_LOOPBACK},
      {"http://localhost/x", SLUICE_WEBHOOK_ALLOW_LOOPBACK},
      {"http://api.localhost/x", SLUICE_WEBHOOK_ALLOW_LOOPBACK},
      {"http://[::1]/x", SLUICE_WEBHOOK_ALLOW_LOOPBACK},
      {"http://[::ffff:127.0.0.1]/x", SLUICE_WEBHOOK_ALLOW_LOOPBACK},
      {"http://169.254.169.254/latest/meta-data/",
       SLUICE_WEBHOOK_ALLOW_LINK_LOCAL},
      {"http://[fe80::1]/x", SLUICE_WEBHOOK_ALLOW_LINK_LOCAL},
      {"http://10.1.2.3/x", SLUICE_WEBHOOK_ALLOW_PRIVATE},
      {"http://172.16.0.1/x", SLUICE_WEBHOOK_ALLOW_PRIVATE},
      {"http://192.168.1.1/x", SLUICE_WEBHOOK_ALLOW_PRIVATE},
      {"http://100.64.0.1/x", SLUICE_WEBHOOK_ALLOW_PRIVATE},
      {"http://[fd00:ec2::254]/x", SLUICE_WEBHOOK_ALLOW_PRIVATE},
      {"smtp://127.0.0.1:25", SLUICE_WEBHOOK_ALLOW_LOOPBACK},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sluice_webhook_options o;
    sluice_webhook_dest d;
    sluice_webhook *w = NULL;
    char err[256] = "";
    memset(&o, 0, sizeof o);
    memset(&d, 0, sizeof d);
    d.url = cases[i].url;
    if (!strncmp(d.url, "smtp", 4)) {
      d.format = SLUICE_WEBHOOK_EMAIL;
      d.mail_from = "a@b.example";
    }
    o.dests = &d;
    o.ndests = 1;
    o.errbuf = err;
    o.errlen = sizeof err;
    /* every flag but the one it needs */
    o.flags = (SLUICE_WEBHOOK_ALLOW_LOOPBACK | SLUICE_WEBHOOK_ALLOW_PRIVATE |
               SLUICE_WEBHOOK_ALLOW_LINK_LOCAL) & ~cases[i].allow;
    cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_EINVAL, "%s",
                 cases[i].url);
    cr_assert_null(w);
    cr_assert(err[0], "no message for %s", cases[i].url);
    o.flags = cases[i].allow;
    cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_OK, "%s: %s",
                 cases[i].url, err);
    sluice_webhook_close(w);
  }
  {
    sluice_webhook_options o;
    sluice_webhook *w = NULL;
    memset(&o, 0, sizeof o);
    o.url[SLUICE_EVENT_ALERT] = "http://0.0.0.0/x";
    o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK | SLUICE_WEBHOOK_ALLOW_PRIVATE |
              SLUICE_WEBHOOK_ALLOW_LINK_LOCAL;
    cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_EINVAL, "never");
    o.url[SLUICE_EVENT_ALERT] = "http://hooks.example.com/x";
    o.flags = 0;
    cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_OK, "a public name");
    sluice_webhook_close(w);
  }
}

/* This host's name, when it resolves to loopback and is not "localhost":
** a name the URL check cannot judge, so only the check at connect stops
** it. */
static int loopback_name(char *out, size_t n) {
  struct addrinfo hints, *res, *a;
  int ok = 1;
  if (gethostname(out, n) || !out[0] || strstr(out, "localhost"))
    return 0;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(out, NULL, &hints, &res))
    return 0;
  for (a = res; a; a = a->ai_next)
    ok &= a->ai_family == AF_INET &&
          ((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr ==
              htonl(INADDR_LOOPBACK);
  freeaddrinfo(res);
  return ok;
}

Test(alerts, a_name_resolving_to_loopback_is_refused_at_connect) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook *w;
  sluice_webhook_stats s;
  sluice_event ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  char host[128], u[256];
  if (!loopback_name(host, sizeof host))
    cr_skip_test("this host's name does not resolve to 127.0.0.1 only");
  rx_start(&r, 0, 0);
  snprintf(u, sizeof u, "http://%s:%d/a", host, r.port);
  memset(&o, 0, sizeof o);
  o.url[SLUICE_EVENT_ALERT] = u;
  o.max_attempts = 3;
  o.backoff_base_ms = 1;
  w = open_sink(&o); /* a name: judged when it resolves */
  sluice_webhook_on_event(w, &ev);
  s = settle(w, 1);
  cr_assert_eq(s.failed, 1);
  cr_assert_eq(s.delivered, 0);
  cr_assert(s.refused >= 1);
  cr_assert_eq(s.retries, 0, "a refused address is not retried");
  cr_assert_eq(rx_count(&r), 0);
  sluice_webhook_close(w);
  /* allowed, the same name reaches the receiver */
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  w = open_sink(&o);
  sluice_webhook_on_event(w, &ev);
  cr_assert_eq(settle(w, 1).delivered, 1);
  cr_assert_eq(rx_count(&r), 1);
  sluice_webhook_close(w);
  rx_stop(&r);
}

Test(alerts, the_proxy_environment_is_ignored) {
  receiver live, proxy;
  sluice_webhook_options o;
  sluice_webhook *w;
  char u[128], p[128];
  rx_start(&live, 0, 0);
  rx_start(&proxy, 0, 0);
  snprintf(p, sizeof p, "http://127.0.0.1:%d", proxy.port);
  setenv("http_proxy", p, 1);
  setenv("HTTPS_PROXY", p, 1);
  setenv("ALL_PROXY", p, 1);
  unsetenv("no_proxy");
  unsetenv("NO_PROXY");
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  w = alert_once(&o, u, live.port);
  cr_assert_eq(settle(w, 1).delivered, 1);
  cr_assert_eq(rx_count(&live), 1);
  cr_assert_eq(rx_count(&proxy), 0, "went through the environment's proxy");
  sluice_webhook_close(w);
  /* configured, the proxy is used */
  o.proxy = p;
  o.url[SLUICE_EVENT_ALERT] = NULL;
  w = alert_once(&o, u, live.port);
  cr_assert_eq(settle(w, 1).delivered, 1);
  cr_assert_eq(rx_count(&proxy), 1);
  sluice_webhook_close(w);
  rx_stop(&proxy);
  rx_stop(&live);
}

/*
** The webhook sink against a real HTTP receiver (libmicrohttpd on
** 127.0.0.1, a free port): the body it posts, routing per event type,
** retries, a receiver that is down, one that is slow (the queue drops
** instead of blocking the caller, a post times out), the counters, and a
** policy whose level-2 trip is delivered with the endpoints that led to it.
**
** No assertion depends on speed: waits are for a counter to reach a value
** (10 s deadline), and the slow receiver is slower than any wait involved.
**
** Built twice: with Criterion (test "webhook") and as a plain program
** (test "webhook-plain", cr_plain.h), which CI also runs under TSan.
*/
#include "cr_plain.h"
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sluice.h>

#include "receiver.h"

/* A receiver answering after delay_ms, and a sink sending it ALERTs (to
** /a) through a queue of queue_max. */
static sluice_webhook *alert_sink(receiver *r, int delay_ms, size_t queue_max) {
  sluice_webhook_options o;
  sluice_webhook *w;
  char u[128];
  rx_start(r, 0, delay_ms);
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK; /* receivers on 127.0.0.1 */
  url(u, sizeof u, r->port, "/a");
  o.url[SLUICE_EVENT_ALERT] = u; /* copied at open */
  o.queue_max = queue_max;
  cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_OK);
  return w;
}

Test(webhook, alert_body_names_scope_level_key_endpoints_guide_end) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook *w;
  sluice_request get, post;
  sluice_event ev;
  char u[128];
  json_t *b;
  json_error_t e;
  rx_start(&r, 0, 0);
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK; /* receivers on 127.0.0.1 */
  url(u, sizeof u, r.port, "/alert");
  o.url[SLUICE_EVENT_ALERT] = u;
  cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_OK);
  memset(&get, 0, sizeof get);
  get.api_key_id = "sk_live_SECRET_1";
  get.method = "GET";
  get.route = "/v1/ledgers/L1/entries";
  post = get;
  post.method = "POST";
  post.route = "/v1/ledgers/reconcile";
  /* level 1 on one endpoint (not sent, remembered), then level 2 */
  ev = event(SLUICE_EVENT_BOX_TRIP, 1, &get);
  sluice_webhook_on_event(w, &ev);
  ev = event(SLUICE_EVENT_ALERT, 2, &post);
  sluice_webhook_on_event(w, &ev);
  cr_assert_eq(settle(w, 1).delivered, 1);
  cr_assert_eq(rx_count(&r), 1);
  cr_assert_str_eq(r.path[0], "/alert");
  cr_assert_null(strstr(r.body[0], "sk_live_SECRET"), "a secret was sent");
  b = json_loads(r.body[0], 0, &e);
  cr_assert_not_null(b, "not JSON: %s", r.body[0]);
  cr_assert_str_eq(json_string_value(json_object_get(b, "event")), "alert");
  cr_assert_str_eq(json_string_value(json_object_get(b, "scope")), "key");
  cr_assert_eq(json_integer_value(json_object_get(b, "level")), 2);
  cr_assert_str_eq(json_string_value(json_object_get(b, "key_id")), SCOPE);
  cr_assert_str_eq(json_string_value(json_object_get(b, "tenant_id")), TENANT);
  cr_assert_str_eq(json_string_value(json_object_get(b, "tier")), "growth");
  cr_assert_str_eq(json_string_value(json_object_get(b, "backoff_guide")),
                   SLUICE_WEBHOOK_GUIDE_DEFAULT);
  cr_assert_str_eq(json_string_value(json_object_get(b, "ends_at")),
                   "2026-12-03T20:00:00Z");
  cr_assert_str_eq(json_string_value(json_object_get(b, "at")),
                   "2026-12-03T19:00:00Z");
  {
    json_t *eps = json_object_get(b, "offending_endpoints");
    cr_assert_eq(json_array_size(eps), 2);
    cr_assert_str_eq(json_string_value(json_array_get(eps, 0)),
                     "POST /v1/ledgers/reconcile");
    cr_assert_str_eq(json_string_value(json_array_get(eps, 1)),
                     "GET /v1/ledgers/L1/entries");
  }
  json_decref(b);
  sluice_webhook_close(w);
  rx_stop(&r);
}

Test(webhook, each_event_type_goes_to_its_url_and_others_nowhere) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook *w;
  sluice_event ev;
  sluice_webhook_stats s;
  char ua[128], up[128], ub[128];
  rx_start(&r, 0, 0);
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK; /* receivers on 127.0.0.1 */
  url(ua, sizeof ua, r.port, "/a");
  url(up, sizeof up, r.port, "/p");
  url(ub, sizeof ub, r.port, "/ban");
  o.url[SLUICE_EVENT_ALERT] = ua;
  o.url[SLUICE_EVENT_PAGE] = up;
  o.url[SLUICE_EVENT_IP_BAN] = ub;
  cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_OK);
  ev = event(SLUICE_EVENT_EDGE_DENY, 2, NULL);
  sluice_webhook_on_event(w, &ev);
  ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  sluice_webhook_on_event(w, &ev);
  ev = event(SLUICE_EVENT_PAGE, 3, NULL);
  ev.until_ns = SLUICE_FOREVER;
  sluice_webhook_on_event(w, &ev);
  ev = event(SLUICE_EVENT_IP_BAN, 3, NULL);
  ev.scope = SLUICE_SCOPE_IP;
  sluice_webhook_on_event(w, &ev);
  s = settle(w, 3);
  cr_assert_eq(s.queued, 3, "EDGE_DENY has no URL: not queued");
  cr_assert_eq(s.delivered, 3);
  cr_assert_eq(rx_count(&r), 3);
  /* delivered concurrently: in any order */
  cr_assert_not_null(strstr(rx_find(&r, "/a"), "\"event\":\"alert\""));
  cr_assert_not_null(strstr(rx_find(&r, "/p"), "\"ends_at\":\"never\""));
  cr_assert_not_null(strstr(rx_find(&r, "/ban"), "\"scope\":\"ip\""));
  cr_assert_not_null(strstr(rx_find(&r, "/ban"), "\"scope_id\":\""));
  sluice_webhook_close(w);
  rx_stop(&r);
}

Test(webhook, a_failing_receiver_is_retried_until_it_answers) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook *w;
  sluice_webhook_stats s;
  char u[128];
  rx_start(&r, 2, 0);
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK; /* receivers on 127.0.0.1 */
  o.backoff_base_ms = 1;
  w = alert_once(&o, u, r.port);
  s = settle(w, 1);
  cr_assert_eq(s.delivered, 1);
  cr_assert_eq(s.failed, 0);
  cr_assert_eq(s.retries, 2);
  cr_assert_eq(rx_count(&r), 3);
  cr_assert_str_eq(r.body[0], r.body[2], "a retry posts the same body");
  sluice_webhook_close(w);
  rx_stop(&r);
}

Test(webhook, a_receiver_that_is_down_counts_a_failure_after_max_attempts) {
  sluice_webhook_options o;
  sluice_webhook *w;
  sluice_webhook_stats s;
  char u[128], m[2048];
  size_t need = 0;
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK; /* receivers on 127.0.0.1 */
  o.max_attempts = 3;
  o.backoff_base_ms = 1;
  w = alert_once(&o, u, dead_port());
  s = settle(w, 1);
  cr_assert_eq(s.failed, 1);
  cr_assert_eq(s.delivered, 0);
  cr_assert_eq(s.retries, 2);
  cr_assert_eq(sluice_webhook_metrics(w, m, sizeof m, &need), SLUICE_OK);
  cr_assert_not_null(
      strstr(m, "sluice_webhook_events_total{result=\"failed\"} 1\n"), "%s",
      m);
  cr_assert_not_null(strstr(m, "sluice_webhook_retries_total 2\n"), "%s", m);
  cr_assert_eq(need, strlen(m));
  cr_assert_eq(sluice_webhook_metrics(w, NULL, 0, &need), SLUICE_OK);
  cr_assert_eq(need, strlen(m));
  cr_assert_eq(sluice_webhook_metrics(w, m, 10, &need), SLUICE_ERANGE);
  sluice_webhook_close(w);
}

Test(webhook, a_slow_receiver_fills_the_queue_and_the_rest_is_dropped) {
  receiver r;
  sluice_webhook *w = alert_sink(&r, 3000, 4);
  sluice_event ev;
  sluice_webhook_stats s;
  int i;
  ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  /* Had a call waited for the receiver, nothing would be dropped. */
  for (i = 0; i < 20; i++)
    sluice_webhook_on_event(w, &ev);
  s = stats(w);
  cr_assert_eq(s.queued + s.dropped, 20);
  /* the queue (4) and the deliveries in memory (as many) hold the rest */
  cr_assert(s.dropped >= 12 && s.dropped <= 16,
            "4 queued and at most 4 taken; dropped %llu",
            (unsigned long long)s.dropped);
  /* Close cuts the post in flight short and abandons the queue. */
  sluice_webhook_close(w);
  rx_stop(&r);
}

Test(webhook, a_post_that_outlasts_the_timeout_fails) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook *w;
  sluice_webhook_stats s;
  char u[128];
  rx_start(&r, 0, 3000);
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK; /* receivers on 127.0.0.1 */
  o.timeout_ms = 100;
  o.max_attempts = 2;
  o.backoff_base_ms = 1;
  w = alert_once(&o, u, r.port);
  s = settle(w, 1);
  cr_assert_eq(s.failed, 1);
  cr_assert_eq(s.delivered, 0);
  cr_assert_eq(s.retries, 1);
  sluice_webhook_close(w);
  rx_stop(&r);
}

/* Threads deciding while the sender posts: 4 producers, each with its own
** scope and endpoint (the scope table is shared), and a thread reading the
** counters meanwhile.  Under TSan this is the race check of the sink. */
#define PRODUCERS 4
#define PER_PRODUCER 50

typedef struct producer {
  sluice_webhook *w;
  int id;
} producer;

static void *produce(void *arg) {
  producer *p = arg;
  sluice_request rq;
  sluice_event ev;
  char scope[33], route[64];
  int i;
  snprintf(scope, sizeof scope, "%032d", p->id);
  snprintf(route, sizeof route, "/v1/ledgers/L%d/entries", p->id);
  memset(&rq, 0, sizeof rq);
  rq.method = "POST";
  rq.route = route;
  for (i = 0; i < PER_PRODUCER; i++) {
    ev = event(SLUICE_EVENT_ALERT, 2, &rq);
    ev.scope_id = scope;
    sluice_webhook_on_event(p->w, &ev);
  }
  return NULL;
}

static _Atomic int watching;

static void *watch(void *arg) {
  sluice_webhook *w = arg;
  char m[2048];
  while (atomic_load(&watching)) {
    (void)stats(w);
    cr_assert_eq(sluice_webhook_metrics(w, m, sizeof m, NULL), SLUICE_OK);
  }
  return NULL;
}

Test(webhook, events_from_threads_are_all_delivered_while_counters_are_read) {
  receiver r;
  /* a queue for all: nothing dropped */
  sluice_webhook *w = alert_sink(&r, 0, PRODUCERS * PER_PRODUCER);
  sluice_webhook_stats s;
  pthread_t th[PRODUCERS], watcher;
  producer p[PRODUCERS];
  int i;
  atomic_store(&watching, 1);
  cr_assert_eq(pthread_create(&watcher, NULL, watch, w), 0);
  for (i = 0; i < PRODUCERS; i++) {
    p[i] = (producer){w, i + 1};
    cr_assert_eq(pthread_create(&th[i], NULL, produce, &p[i]), 0);
  }
  for (i = 0; i < PRODUCERS; i++)
    pthread_join(th[i], NULL);
  s = settle(w, PRODUCERS * PER_PRODUCER);
  atomic_store(&watching, 0);
  pthread_join(watcher, NULL);
  cr_assert_eq(s.queued, PRODUCERS * PER_PRODUCER);
  cr_assert_eq(s.dropped, 0);
  cr_assert_eq(s.delivered, PRODUCERS * PER_PRODUCER);
  cr_assert_eq(rx_count(&r), PRODUCERS * PER_PRODUCER);
  /* each body names its own producer's endpoint first */
  for (i = 0; i < MAXREQ; i++)
    cr_assert_not_null(strstr(r.body[i], "[\"POST /v1/ledgers/L"), "%s",
                       r.body[i]);
  sluice_webhook_close(w);
  rx_stop(&r);
}

Test(webhook, open_refuses_bad_options) {
  sluice_webhook_options o;
  sluice_webhook *w = (sluice_webhook *)&o;
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK; /* receivers on 127.0.0.1 */
  cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_EINVAL, "no URL");
  cr_assert_null(w);
  o.url[SLUICE_EVENT_ALERT] = "ftp://127.0.0.1/x";
  cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_EINVAL, "not http");
  o.url[SLUICE_EVENT_ALERT] = "http://127.0.0.1:1/x";
  o.max_attempts = -1;
  cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_EINVAL, "negative");
  cr_assert_eq(sluice_webhook_open(NULL, &w), SLUICE_EINVAL);
  sluice_webhook_close(NULL);
}

/* A policy on a manual clock, its events into the sink: the key's second
** box (level 2) arrives as an ALERT naming the endpoint hammered. */
Test(webhook, a_policy_level_two_trip_is_delivered) {
  receiver r;
  sluice_webhook_options o;
  sluice_webhook *w;
  sluice_clock *clk;
  sluice_limiter *lim;
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_policy *pol;
  sluice_request rq;
  sluice_decision d;
  char ua[128], ue[128];
  int trips = 0, i;
  rx_start(&r, 0, 0);
  memset(&o, 0, sizeof o);
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK; /* receivers on 127.0.0.1 */
  url(ua, sizeof ua, r.port, "/alert");
  url(ue, sizeof ue, r.port, "/edge");
  o.url[SLUICE_EVENT_ALERT] = ua;
  o.url[SLUICE_EVENT_EDGE_DENY] = ue;
  cr_assert_eq(sluice_webhook_open(&o, &w), SLUICE_OK);
  cr_assert_eq(sluice_clock_manual(INT64_C(1767225600) * 1000000000, &clk),
               SLUICE_OK);
  memset(&lo, 0, sizeof lo);
  lo.clock = clk;
  cr_assert_eq(sluice_limiter_open(&lo, &lim, NULL, 0), SLUICE_OK);
  memset(&po, 0, sizeof po);
  po.limiter = lim;
  memset(po.secret, 7, sizeof po.secret);
  po.on_event = sluice_webhook_on_event;
  po.userdata = w;
  cr_assert_eq(sluice_policy_open(&po, &pol), SLUICE_OK);
  memset(&rq, 0, sizeof rq);
  rq.tenant_id = "acme";
  rq.api_key_id = "sk_live_SECRET_2";
  rq.tier = "sandbox";
  rq.method = "POST";
  rq.route = "/v1/ledgers/L7/entries";
  for (i = 0; i < 100000 && trips < 2; i++) {
    cr_assert_eq(sluice_policy_decide(pol, 1, &rq, &d, NULL), SLUICE_OK);
    if (d.flags & SLUICE_DECISION_TRIPPED) {
      trips++;
      /* past the first box */
      sluice_clock_advance(clk, d.lockout_end_ns - d.now_ns);
    }
  }
  cr_assert_eq(trips, 2);
  cr_assert_eq(d.penalty_level, 2);
  cr_assert_eq(settle(w, 2).delivered, 2);
  cr_assert_eq(rx_count(&r), 2);
  for (i = 0; i < 2; i++) {
    json_error_t e;
    json_t *b = json_loads(r.body[i], 0, &e);
    cr_assert_not_null(b);
    cr_assert_eq(json_integer_value(json_object_get(b, "level")), 2);
    cr_assert_eq(strlen(json_string_value(json_object_get(b, "key_id"))), 32);
    cr_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(b, "offending_endpoints"), 0)),
                     "POST /v1/ledgers/L7/entries");
    cr_assert_not_null(json_object_get(b, "ends_at"));
    cr_assert_null(strstr(r.body[i], "SECRET"));
    json_decref(b);
  }
  cr_assert(!strcmp(r.path[0], "/edge") || !strcmp(r.path[0], "/alert"));
  cr_assert_str_neq(r.path[0], r.path[1]);
  sluice_policy_close(pol);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
  sluice_webhook_close(w);
  rx_stop(&r);
}

/*
** Webhook sink for policy events (include/sluice/webhook.h).
**
** Shape.  A ring of queue_max fixed-size items and one sender thread.  The
** deciding thread (sluice_webhook_on_event) holds the mutex only to copy
** the event in: no allocation, no JSON, no I/O, so a decision pays a copy
** of about a kilobyte whatever the receiver does.  The sender holds it
** only to copy an item out; it builds the body and posts it unlocked.
**
** Choices:
**  a) Events go out in order, one at a time: an alert storm is bounded by
**     the queue, and a receiver that is down costs one thread's retries,
**     not a connection per event.  What does not fit is dropped and
**     counted, never waited for.
**  b) Offending endpoints: the sink remembers, per scope, the endpoints of
**     the last requests that drew an event (box trips at levels 1 and 2
**     come before the alert), in a small table that forgets the least
**     recently seen scope.  Only what is configured to be sent is queued,
**     but every event with a scope feeds the table.
**  c) Retries: full jitter exponential backoff (spec section 7) between
**     attempts, on the sender thread; close interrupts both the wait and a
**     post in flight (libcurl's progress callback), so close is prompt.
**  d) No secret leaves: the body names the key by its hashed scope id;
**     ev->request->api_key_id (the raw key) is never read.
*/
#include "sluice/webhook.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "rng.h"

#define ID_LEN 32           /* hashed scope ids: 32 hex digits */
#define ENDPOINT_LEN 112    /* "METHOD /route", truncated */
#define ENDPOINTS_MAX 8
#define SCOPES_MAX 64
#define TEXT_LEN 128        /* who, why */
#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)

typedef struct item {
  int type, scope, level, outcome;
  int64_t now_ns, until_ns;
  char scope_id[ID_LEN + 1], tenant_id[ID_LEN + 1];
  char tier[SLUICE_POLICY_NAME_MAX + 1];
  char who[TEXT_LEN], why[TEXT_LEN];
  int nendpoints;
  char endpoints[ENDPOINTS_MAX][ENDPOINT_LEN];
} item;

typedef struct scope_seen {
  char scope_id[ID_LEN + 1]; /* "" : free */
  uint64_t used;             /* LRU stamp */
  int n;
  char endpoints[ENDPOINTS_MAX][ENDPOINT_LEN]; /* most recent first */
} scope_seen;

struct sluice_webhook {
  char *url[SLUICE_EVENT__COUNT];
  char *guide;
  int max_attempts;
  int64_t base_ns, cap_ns, timeout_ms;
  sluice__rng rng;
  CURL *curl;
  struct curl_slist *headers;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic int stop;
  item current; /* the sender's, being delivered */
  /* under mu */
  item *ring;
  size_t cap, head, depth;
  scope_seen seen[SCOPES_MAX];
  uint64_t clock;
  /* counters */
  _Atomic uint64_t queued, dropped, delivered, failed, retries, abandoned;
};

/* ------------------------------------------------------------ deciding --- */

static void copy_str(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", src ? src : "");
}

/* "POST /v1/ledgers/reconcile", or the class name without a route. */
static void endpoint_of(const sluice_request *rq, char out[ENDPOINT_LEN]) {
  if (rq->route)
    snprintf(out, ENDPOINT_LEN, "%s%s%s", rq->method ? rq->method : "",
             rq->method ? " " : "", rq->route);
  else
    snprintf(out, ENDPOINT_LEN, "%s",
             sluice_endpoint_class_name(rq->endpoint_class));
}

/* Under mu: this scope's remembered endpoints, `ep` (if any) first. */
static scope_seen *remember(sluice_webhook *w, const char *scope_id,
                            const char *ep) {
  scope_seen *s = NULL, *victim = &w->seen[0];
  int i;
  for (i = 0; i < SCOPES_MAX && !s; i++) {
    if (!strcmp(w->seen[i].scope_id, scope_id))
      s = &w->seen[i];
    else if (w->seen[i].used < victim->used)
      victim = &w->seen[i];
  }
  if (!s) {
    s = victim;
    memset(s, 0, sizeof *s);
    copy_str(s->scope_id, sizeof s->scope_id, scope_id);
  }
  s->used = ++w->clock;
  if (ep && ep[0]) {
    for (i = 0; i < s->n && strcmp(s->endpoints[i], ep); i++)
      ;
    if (i == s->n && s->n < ENDPOINTS_MAX)
      s->n++;
    if (i == ENDPOINTS_MAX)
      i = ENDPOINTS_MAX - 1; /* full: the oldest goes */
    memmove(s->endpoints[1], s->endpoints[0], (size_t)i * ENDPOINT_LEN);
    copy_str(s->endpoints[0], ENDPOINT_LEN, ep);
  }
  return s;
}

void sluice_webhook_on_event(void *userdata, const sluice_event *ev) {
  sluice_webhook *w = userdata;
  char ep[ENDPOINT_LEN] = "";
  scope_seen *s = NULL;
  item *it;
  int send;
  if (!w || !ev || ev->type <= 0 || ev->type >= SLUICE_EVENT__COUNT)
    return;
  send = w->url[ev->type] != NULL;
  if (!send && !ev->scope_id)
    return;
  if (ev->request)
    endpoint_of(ev->request, ep);
  pthread_mutex_lock(&w->mu);
  if (ev->scope_id)
    s = remember(w, ev->scope_id, ep);
  if (send && w->depth == w->cap) {
    atomic_fetch_add(&w->dropped, 1);
  } else if (send) {
    it = &w->ring[(w->head + w->depth) % w->cap];
    it->type = ev->type;
    it->scope = ev->scope;
    it->level = ev->level;
    it->outcome = ev->outcome;
    it->now_ns = ev->now_ns;
    it->until_ns = ev->until_ns;
    copy_str(it->scope_id, sizeof it->scope_id, ev->scope_id);
    copy_str(it->tenant_id, sizeof it->tenant_id, ev->tenant_scope_id);
    copy_str(it->tier, sizeof it->tier, ev->tier);
    copy_str(it->who, sizeof it->who, ev->who);
    copy_str(it->why, sizeof it->why, ev->why);
    if (s) {
      it->nendpoints = s->n;
      memcpy(it->endpoints, s->endpoints, (size_t)s->n * ENDPOINT_LEN);
    } else {
      it->nendpoints = ep[0] != 0;
      memcpy(it->endpoints[0], ep, ENDPOINT_LEN);
    }
    w->depth++;
    atomic_fetch_add(&w->queued, 1);
    pthread_cond_signal(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
}

/* -------------------------------------------------------------- sending --- */

static const char *scope_name(int scope) {
  switch (scope) {
  case SLUICE_SCOPE_KEY:
    return "key";
  case SLUICE_SCOPE_IP:
    return "ip";
  case SLUICE_SCOPE_SUBJECT:
    return "subject";
  case SLUICE_SCOPE_TENANT:
    return "tenant";
  default:
    return NULL;
  }
}

/* RFC 3339 UTC, whole seconds rounded up (as lockout_ends_at). */
static void rfc3339(char out[32], int64_t ns) {
  time_t s = (time_t)(ns / NS_PER_S + (ns % NS_PER_S > 0));
  struct tm tm;
  if (!gmtime_r(&s, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
    snprintf(out, 32, "%" PRId64, ns / NS_PER_S);
}

/* Members with no value are left out. */
static int put_str(json_t *o, const char *k, const char *v) {
  return v && v[0] ? json_object_set_new(o, k, json_string(v)) : 0;
}

static char *body_of(const sluice_webhook *w, const item *it) {
  json_t *o = json_object(), *eps = json_array();
  char when[32];
  char *txt = NULL;
  int i, bad = !o || !eps;
  for (i = 0; !bad && i < it->nendpoints; i++)
    bad |= json_array_append_new(eps, json_string(it->endpoints[i]));
  if (!bad) {
    bad |= put_str(o, "event", sluice_event_name(it->type));
    bad |= put_str(o, "scope", scope_name(it->scope));
    if (it->level)
      bad |= json_object_set_new(o, "level", json_integer(it->level));
    bad |= put_str(o, "tier", it->tier);
    /* The hashed scope id: for a key scope, the key's id. */
    bad |= put_str(o, it->scope == SLUICE_SCOPE_KEY ? "key_id" : "scope_id",
                   it->scope_id);
    bad |= put_str(o, "tenant_id", it->tenant_id);
    if (it->type == SLUICE_EVENT_LEASE_DENIED)
      bad |= put_str(o, "outcome", sluice_outcome_name(it->outcome));
    bad |= json_object_set(o, "offending_endpoints", eps);
    bad |= put_str(o, "backoff_guide", w->guide);
    if (it->until_ns == SLUICE_FOREVER) {
      bad |= put_str(o, "ends_at", "never");
    } else if (it->until_ns > 0) {
      rfc3339(when, it->until_ns);
      bad |= put_str(o, "ends_at", when);
    }
    rfc3339(when, it->now_ns);
    bad |= put_str(o, "at", when);
    bad |= put_str(o, "who", it->who);
    bad |= put_str(o, "why", it->why);
  }
  if (!bad)
    txt = json_dumps(o, JSON_COMPACT);
  json_decref(eps);
  json_decref(o);
  return txt;
}

static size_t discard(char *p, size_t size, size_t n, void *ud) {
  (void)p;
  (void)ud;
  return size * n;
}

/* Nonzero aborts the transfer: close does not wait for a slow receiver. */
static int progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c,
                    curl_off_t d) {
  (void)a;
  (void)b;
  (void)c;
  (void)d;
  return atomic_load(&((sluice_webhook *)ud)->stop);
}

/* One attempt: 1 for a 2xx answer. */
static int post(sluice_webhook *w, const char *url, const char *body) {
  long status = 0;
  curl_easy_setopt(w->curl, CURLOPT_URL, url);
  curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
  return curl_easy_perform(w->curl) == CURLE_OK &&
         curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status) ==
             CURLE_OK &&
         status >= 200 && status < 300;
}

/* Wait until `ns` from now unless closed; 0 when closed. */
static int pause_ns(sluice_webhook *w, int64_t ns) {
  struct timespec ts;
  int stopped;
  clock_gettime(CLOCK_REALTIME, &ts);
  ns += ts.tv_nsec;
  ts.tv_sec += (time_t)(ns / NS_PER_S);
  ts.tv_nsec = (long)(ns % NS_PER_S);
  pthread_mutex_lock(&w->mu);
  while (!(stopped = atomic_load(&w->stop)))
    if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) != 0)
      break;
  pthread_mutex_unlock(&w->mu);
  return !stopped;
}

static void deliver(sluice_webhook *w, const item *it) {
  char *body = body_of(w, it);
  int attempt;
  if (!body) {
    atomic_fetch_add(&w->failed, 1);
    return;
  }
  for (attempt = 1;; attempt++) {
    int64_t wait = w->base_ns;
    int i;
    if (post(w, w->url[it->type], body)) {
      atomic_fetch_add(&w->delivered, 1);
      break;
    }
    if (atomic_load(&w->stop)) {
      atomic_fetch_add(&w->abandoned, 1);
      break;
    }
    if (attempt >= w->max_attempts) {
      atomic_fetch_add(&w->failed, 1);
      break;
    }
    for (i = 1; i < attempt && wait < w->cap_ns; i++)
      wait *= 2;
    if (wait > w->cap_ns)
      wait = w->cap_ns;
    atomic_fetch_add(&w->retries, 1);
    if (!pause_ns(w, (int64_t)sluice__rng_upto(&w->rng, (uint64_t)wait))) {
      atomic_fetch_add(&w->abandoned, 1);
      break;
    }
  }
  free(body);
}

static void *sender(void *arg) {
  sluice_webhook *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    while (!atomic_load(&w->stop) && w->depth == 0)
      pthread_cond_wait(&w->cv, &w->mu);
    if (atomic_load(&w->stop)) {
      atomic_fetch_add(&w->abandoned, w->depth);
      w->depth = 0;
      pthread_mutex_unlock(&w->mu);
      return NULL;
    }
    w->current = w->ring[w->head];
    w->head = (w->head + 1) % w->cap;
    w->depth--;
    pthread_mutex_unlock(&w->mu);
    deliver(w, &w->current);
  }
}

/* ------------------------------------------------------------ lifecycle --- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_ALL); }

static int is_http_url(const char *u) {
  return !strncmp(u, "http://", 7) || !strncmp(u, "https://", 8);
}

static void free_sink(sluice_webhook *w) {
  int i;
  for (i = 0; i < SLUICE_EVENT__COUNT; i++)
    free(w->url[i]);
  free(w->guide);
  free(w->ring);
  curl_slist_free_all(w->headers);
  if (w->curl)
    curl_easy_cleanup(w->curl);
  free(w);
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  return d ? memcpy(d, s, n) : NULL;
}

int sluice_webhook_open(const sluice_webhook_options *o, sluice_webhook **out) {
  sluice_webhook *w;
  int i, any = 0, oom = 0;
  if (out)
    *out = NULL;
  if (!o || !out || o->max_attempts < 0 || o->backoff_base_ms < 0 ||
      o->backoff_max_ms < 0 || o->timeout_ms < 0)
    return SLUICE_EINVAL;
  for (i = 0; i < SLUICE_EVENT__COUNT; i++)
    if (o->url[i]) {
      if (i == 0 || !is_http_url(o->url[i]))
        return SLUICE_EINVAL;
      any = 1;
    }
  if (!any)
    return SLUICE_EINVAL;
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return SLUICE_EBACKEND;
  if (!(w = calloc(1, sizeof *w)))
    return SLUICE_ENOMEM;
  w->cap = o->queue_max ? o->queue_max : 1024;
  w->max_attempts = o->max_attempts ? o->max_attempts : 5;
  w->base_ns = (o->backoff_base_ms ? o->backoff_base_ms : 500) * NS_PER_MS;
  w->cap_ns = (o->backoff_max_ms ? o->backoff_max_ms : 30000) * NS_PER_MS;
  w->timeout_ms = o->timeout_ms ? o->timeout_ms : 5000;
  w->guide = dup_str(o->backoff_guide ? o->backoff_guide
                                      : SLUICE_WEBHOOK_GUIDE_DEFAULT);
  w->ring = w->cap <= SIZE_MAX / sizeof(item) ? calloc(w->cap, sizeof(item))
                                               : NULL;
  for (i = 0; i < SLUICE_EVENT__COUNT; i++)
    if (o->url[i] && !(w->url[i] = dup_str(o->url[i])))
      oom = 1;
  if (oom || !w->guide || !w->ring) {
    free_sink(w);
    return SLUICE_ENOMEM;
  }
  if (sluice__rng_init(&w->rng, NULL, NULL) != SLUICE_OK ||
      !(w->curl = curl_easy_init()) ||
      !(w->headers = curl_slist_append(NULL,
                                       "Content-Type: application/json"))) {
    free_sink(w);
    return SLUICE_EBACKEND;
  }
  curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, w->headers);
  curl_easy_setopt(w->curl, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
  curl_easy_setopt(w->curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(w->curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(w->curl, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(w->curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(w->curl, CURLOPT_XFERINFOFUNCTION, progress);
  curl_easy_setopt(w->curl, CURLOPT_XFERINFODATA, w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  if (pthread_create(&w->thread, NULL, sender, w) != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free_sink(w);
    return SLUICE_EBACKEND;
  }
  *out = w;
  return SLUICE_OK;
}

void sluice_webhook_close(sluice_webhook *w) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  atomic_store(&w->stop, 1);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free_sink(w);
}

/* ---------------------------------------------------------------- stats --- */

int sluice_webhook_stats_get(const sluice_webhook *cw,
                             sluice_webhook_stats *out) {
  sluice_webhook *w = (sluice_webhook *)cw;
  if (!w || !out)
    return SLUICE_EINVAL;
  memset(out, 0, sizeof *out);
  out->queued = atomic_load(&w->queued);
  out->dropped = atomic_load(&w->dropped);
  out->delivered = atomic_load(&w->delivered);
  out->failed = atomic_load(&w->failed);
  out->retries = atomic_load(&w->retries);
  out->abandoned = atomic_load(&w->abandoned);
  pthread_mutex_lock(&w->mu);
  out->depth = w->depth;
  pthread_mutex_unlock(&w->mu);
  return SLUICE_OK;
}

int sluice_webhook_metrics(const sluice_webhook *w, char *buf, size_t len,
                           size_t *needed) {
  sluice_webhook_stats s;
  int n;
  if (!w || (!buf && len))
    return SLUICE_EINVAL;
  sluice_webhook_stats_get(w, &s);
  n = snprintf(buf, len,
      "# HELP sluice_webhook_events_total Policy events by what became of "
      "their webhook.\n"
      "# TYPE sluice_webhook_events_total counter\n"
      "sluice_webhook_events_total{result=\"queued\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"dropped\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"delivered\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"failed\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"abandoned\"} %" PRIu64 "\n"
      "# HELP sluice_webhook_retries_total Posts after an event's first.\n"
      "# TYPE sluice_webhook_retries_total counter\n"
      "sluice_webhook_retries_total %" PRIu64 "\n"
      "# HELP sluice_webhook_queue_depth Events waiting to be posted.\n"
      "# TYPE sluice_webhook_queue_depth gauge\n"
      "sluice_webhook_queue_depth %" PRIu64 "\n",
      s.queued, s.dropped, s.delivered, s.failed, s.abandoned, s.retries,
      s.depth);
  if (n < 0)
    return SLUICE_EINVAL;
  if (needed)
    *needed = (size_t)n;
  return buf && (size_t)n < len ? SLUICE_OK : buf ? SLUICE_ERANGE : SLUICE_OK;
}

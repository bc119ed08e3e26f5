/*
** Webhook sink for policy events (include/sluice/webhook.h): open, the
** deciding side, and the counters.  Delivery is deliver.c's.
**
** Shape.  A ring of queue_max fixed-size items, and one sender thread
** driving every delivery on a libcurl multi handle.  The deciding thread
** (sluice_webhook_on_event) holds the mutex only to copy the event in: no
** allocation, no JSON, no I/O, so a decision pays a copy of about a
** kilobyte whatever the receivers do.
**
** Choices:
**  a) What does not fit in the queue is dropped and counted, never
**     waited for; an alert storm is bounded by the queue (and the spool).
**  b) Offending endpoints: the sink remembers, per scope, the endpoints of
**     the last requests that drew an event (box trips at levels 1 and 2
**     come before the alert), in a small table that forgets the least
**     recently seen scope.  Only what is configured to be sent is queued,
**     but every event with a scope feeds the table.
**  c) The destinations are url[] (one JSON destination per type, as
**     before) followed by dests[], checked at open (guard.c) so a bad URL
**     fails the open, not every delivery.
**  d) No secret leaves: bodies name the key by its hashed scope id (and
**     the email its last four characters); the raw key is read here only
**     to take those four.
*/
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sink.h"

/* ------------------------------------------------------------ deciding --- */

static void copy_str(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", src ? src : "");
}

/* "POST /v1/ledgers/reconcile". */
static void endpoint_of(const sluice_request *rq, char out[ENDPOINT_LEN]) {
  snprintf(out, ENDPOINT_LEN, "%s%s%s", rq->method ? rq->method : "",
           rq->method ? " " : "", rq->route ? rq->route : "");
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

/* Whether any destination wants this type. */
static int wanted(const sluice_webhook *w, int type) {
  int i;
  for (i = 0; i < w->ndests; i++)
    if (w->dests[i].events & SLUICE_WEBHOOK_EVENT(type))
      return 1;
  return 0;
}

/* The raw key's last 4 characters, for a long enough key only. */
static void key_tail(const sluice_request *rq, char out[8]) {
  size_t n = rq && rq->api_key_id ? strlen(rq->api_key_id) : 0;
  out[0] = 0;
  if (n >= 16)
    memcpy(out, rq->api_key_id + n - 4, 5);
}

void sluice_webhook_on_event(void *userdata, const sluice_event *ev) {
  sluice_webhook *w = userdata;
  char ep[ENDPOINT_LEN] = "";
  scope_seen *s = NULL;
  item *it;
  int send;
  if (!w || !ev || ev->type <= 0 || ev->type >= SLUICE_EVENT__COUNT)
    return;
  send = wanted(w, ev->type);
  if (!send && !ev->scope_id)
    return;
  if (ev->request)
    endpoint_of(ev->request, ep);
  pthread_mutex_lock(&w->mu);
  if (ev->scope_id)
    s = remember(w, ev->scope_id, ep);
  if (send && w->depth == w->cap) {
    atomic_fetch_add(&w->dropped, 1);
    send = 0;
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
    copy_str(it->tenant, sizeof it->tenant,
             ev->request ? ev->request->tenant_id : NULL);
    key_tail(ev->request, it->key_tail);
    if (s) {
      it->nendpoints = s->n;
      memcpy(it->endpoints, s->endpoints, (size_t)s->n * ENDPOINT_LEN);
    } else {
      it->nendpoints = ep[0] != 0;
      memcpy(it->endpoints[0], ep, ENDPOINT_LEN);
    }
    w->depth++;
    atomic_fetch_add(&w->queued, 1);
  }
  pthread_mutex_unlock(&w->mu);
  if (send)
    curl_multi_wakeup(w->multi);
}

/* ------------------------------------------------------------ lifecycle --- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_ALL); }

static void free_sink(sluice_webhook *w) {
  int i;
  for (i = 0; w->dests && i < w->ndests; i++) {
    free(w->dests[i].url);
    free(w->dests[i].routing_key);
    free(w->dests[i].from);
    free(w->dests[i].to);
    free(w->dests[i].name);
  }
  free(w->dests);
  free(w->guide);
  free(w->proxy);
  free(w->ring);
  free(w->jobs);
  sluice__contacts_free(w->book);
  sluice__spool_close(w->spool);
  curl_slist_free_all(w->json_headers);
  if (w->multi)
    curl_multi_cleanup(w->multi);
  free(w);
}

static char *dup_str(const char *s) { return s ? strdup(s) : NULL; }

/* FNV-1a: which destination a spooled delivery was for. */
static uint64_t fnv(uint64_t h, const char *s) {
  for (; s && *s; s++)
    h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
  return h * UINT64_C(0x100000001b3); /* a separator */
}

static int fail(char *err, size_t errlen, int rc, const char *fmt,
                const char *arg) {
  if (err && errlen)
    snprintf(err, errlen, fmt, arg);
  return rc;
}

/* Check one destination and copy it into *d. */
static int take_dest(const sluice_webhook_options *o,
                     const sluice_webhook_dest *in, int index, dest *d,
                     char *err, size_t errlen) {
  char label[32];
  int rc;
  if (in->format < 0 || in->format >= SLUICE_WEBHOOK__FORMATS)
    return fail(err, errlen, SLUICE_EINVAL, "destination %s: unknown format",
                in->name ? in->name : "?");
  if (!in->url)
    return fail(err, errlen, SLUICE_EINVAL, "destination %s: no URL",
                in->name ? in->name : sluice__sink_format_name(in->format));
  if ((rc = sluice__sink_url_ok(in->url, in->format == SLUICE_WEBHOOK_EMAIL,
                                o->flags, err, errlen)) != SLUICE_OK)
    return rc;
  if (in->format == SLUICE_WEBHOOK_PAGERDUTY &&
      (!in->routing_key || !in->routing_key[0]))
    return fail(err, errlen, SLUICE_EINVAL, "%s: PagerDuty needs routing_key",
                in->url);
  if (in->format == SLUICE_WEBHOOK_EMAIL &&
      (!in->mail_from || !in->mail_from[0] || strpbrk(in->mail_from, "\r\n") ||
       (in->mail_to && strpbrk(in->mail_to, "\r\n"))))
    return fail(err, errlen, SLUICE_EINVAL,
                "%s: email needs mail_from (one line; mail_to too)", in->url);
  if (in->name && (!in->name[0] || strlen(in->name) > 64 ||
                   in->name[strspn(in->name, "abcdefghijklmnopqrstuvwxyz"
                                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789_.-")]))
    return fail(err, errlen, SLUICE_EINVAL,
                "destination name \"%s\": 1-64 of [A-Za-z0-9_.-]", in->name);
  snprintf(label, sizeof label, "%s%d", sluice__sink_format_name(in->format),
           index);
  d->format = in->format;
  d->events = in->events ? in->events
                         : sluice__sink_default_events(in->format);
  d->url = dup_str(in->url);
  d->routing_key = dup_str(in->routing_key);
  d->from = dup_str(in->mail_from);
  d->to = dup_str(in->mail_to);
  d->name = dup_str(in->name ? in->name : label);
  d->fp = fnv(fnv(fnv(UINT64_C(0xcbf29ce484222325),
                      sluice__sink_format_name(in->format)),
                  in->url),
              in->routing_key);
  if (!d->url || !d->name || (in->routing_key && !d->routing_key) ||
      (in->mail_from && !d->from) || (in->mail_to && !d->to))
    return fail(err, errlen, SLUICE_ENOMEM, "%s", "out of memory");
  return SLUICE_OK;
}

static int setup(sluice_webhook *w, const sluice_webhook_options *o,
                 char *err, size_t errlen) {
  int i, n = 0, rc;
  for (i = 1; i < SLUICE_EVENT__COUNT; i++)
    if (o->url[i]) {
      sluice_webhook_dest d;
      memset(&d, 0, sizeof d);
      d.format = SLUICE_WEBHOOK_JSON;
      d.url = o->url[i];
      d.events = SLUICE_WEBHOOK_EVENT(i);
      d.name = sluice_name(SLUICE_NAME_EVENT, i);
      if ((rc = take_dest(o, &d, n, &w->dests[n], err, errlen)) != SLUICE_OK)
        return rc;
      w->ndests = ++n;
    }
  for (i = 0; (size_t)i < o->ndests; i++) {
    if ((rc = take_dest(o, &o->dests[i], n, &w->dests[n], err, errlen)) !=
        SLUICE_OK)
      return rc;
    w->ndests = ++n;
  }
  /* Each destination may hold queue_max (cap) deliveries in memory: a
  ** burst the queue takes reaches every destination, and one that is
  ** stuck fills its own share only. */
  w->cap = o->queue_max ? o->queue_max : 1024;
  w->njobs = w->cap <= SIZE_MAX / (size_t)w->ndests ? w->cap * (size_t)w->ndests
                                                     : 0;
  w->max_attempts = o->max_attempts ? o->max_attempts : 5;
  w->max_inflight = o->max_inflight ? o->max_inflight : 4;
  w->base_ns = (o->backoff_base_ms ? o->backoff_base_ms : 500) * NS_PER_MS;
  w->cap_ns = (o->backoff_max_ms ? o->backoff_max_ms : 30000) * NS_PER_MS;
  w->timeout_ms = o->timeout_ms ? o->timeout_ms : 3000;
  w->connect_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 1000;
  if (w->connect_ms > w->timeout_ms)
    w->connect_ms = w->timeout_ms;
  w->allow = o->flags;
  w->guide = dup_str(o->backoff_guide ? o->backoff_guide
                                      : SLUICE_WEBHOOK_GUIDE_DEFAULT);
  w->proxy = o->proxy && o->proxy[0] ? dup_str(o->proxy) : NULL;
  w->ring = calloc(w->cap, sizeof(item)); /* calloc checks the product */
  w->jobs = w->njobs ? calloc(w->njobs, sizeof(job)) : NULL;
  if (!w->guide || !w->ring || !w->jobs || (o->proxy && o->proxy[0] && !w->proxy))
    return fail(err, errlen, SLUICE_ENOMEM, "%s", "out of memory");
  w->contacts = o->contacts;
  w->contacts_ud = o->contacts_userdata;
  if (!o->contacts && o->contacts_path &&
      (rc = sluice__contacts_load(o->contacts_path, &w->book, err, errlen)) !=
          SLUICE_OK)
    return rc;
  if (o->spool_path) {
    if ((rc = sluice__spool_open(o->spool_path, &w->spool, err, errlen)) !=
        SLUICE_OK)
      return rc;
    sluice__sink_restore(w);
  }
  if (sluice__rng_init(&w->rng, NULL, NULL) != SLUICE_OK ||
      !(w->multi = curl_multi_init()) ||
      !(w->json_headers = curl_slist_append(
            NULL, "Content-Type: application/json")))
    return fail(err, errlen, SLUICE_EBACKEND, "%s", "libcurl failed to start");
  return SLUICE_OK;
}

int sluice_webhook_open(const sluice_webhook_options *o, sluice_webhook **out) {
  sluice_webhook *w;
  char *err = o ? o->errbuf : NULL;
  size_t errlen = o && o->errbuf ? o->errlen : 0, n = 0;
  int i, rc;
  if (out)
    *out = NULL;
  if (!o || !out || o->max_attempts < 0 || o->backoff_base_ms < 0 ||
      o->backoff_max_ms < 0 || o->timeout_ms < 0 || o->max_inflight < 0 ||
      o->connect_timeout_ms < 0 || (o->ndests && !o->dests) ||
      (o->flags & ~(SLUICE_WEBHOOK_ALLOW_LOOPBACK |
                    SLUICE_WEBHOOK_ALLOW_PRIVATE |
                    SLUICE_WEBHOOK_ALLOW_LINK_LOCAL)))
    return fail(err, errlen, SLUICE_EINVAL, "%s",
                "webhook: NULL, a negative setting or unknown flags");
  if (o->url[0])
    return fail(err, errlen, SLUICE_EINVAL, "%s", "webhook: url[0] is no event");
  for (i = 1; i < SLUICE_EVENT__COUNT; i++)
    n += o->url[i] != NULL;
  if (!n && !o->ndests)
    return fail(err, errlen, SLUICE_EINVAL, "%s", "webhook: no destination");
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return fail(err, errlen, SLUICE_EBACKEND, "%s", "libcurl failed to start");
  if (!(w = calloc(1, sizeof *w)) ||
      !(w->dests = calloc(n + o->ndests, sizeof *w->dests))) {
    free(w);
    return fail(err, errlen, SLUICE_ENOMEM, "%s", "out of memory");
  }
  if ((rc = setup(w, o, err, errlen)) != SLUICE_OK) {
    free_sink(w);
    return rc;
  }
  pthread_mutex_init(&w->mu, NULL);
  if (pthread_create(&w->thread, NULL, sluice__sink_run, w) != 0) {
    pthread_mutex_destroy(&w->mu);
    free_sink(w);
    return fail(err, errlen, SLUICE_EBACKEND, "%s", "no thread");
  }
  *out = w;
  return SLUICE_OK;
}

void sluice_webhook_close(sluice_webhook *w) {
  if (!w)
    return;
  atomic_store(&w->stop, 1);
  curl_multi_wakeup(w->multi);
  pthread_join(w->thread, NULL);
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
  out->spooled = atomic_load(&w->spooled);
  out->restored = atomic_load(&w->restored);
  out->refused = atomic_load(&w->refused);
  pthread_mutex_lock(&w->mu);
  out->depth = w->depth;
  pthread_mutex_unlock(&w->mu);
  out->depth += atomic_load(&w->pending);
  return SLUICE_OK;
}

/* snprintf into what is left of buf, counting what it would take. */
static void emit(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void emit(char *buf, size_t len, size_t *used, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(buf && *used < len ? buf + *used : NULL,
                buf && *used < len ? len - *used : 0, fmt, ap);
  va_end(ap);
  if (n > 0)
    *used += (size_t)n;
}

int sluice_webhook_metrics(const sluice_webhook *cw, char *buf, size_t len,
                           size_t *needed) {
  sluice_webhook *w = (sluice_webhook *)cw;
  sluice_webhook_stats s;
  size_t used = 0;
  int i;
  if (!w || (!buf && len))
    return SLUICE_EINVAL;
  sluice_webhook_stats_get(w, &s);
  emit(buf, len, &used,
      "# HELP sluice_webhook_events_total Policy events by what became of "
      "their webhook.\n"
      "# TYPE sluice_webhook_events_total counter\n"
      "sluice_webhook_events_total{result=\"queued\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"dropped\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"delivered\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"failed\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"abandoned\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"spooled\"} %" PRIu64 "\n"
      "sluice_webhook_events_total{result=\"restored\"} %" PRIu64 "\n"
      "# HELP sluice_webhook_retries_total Attempts after a delivery's "
      "first.\n"
      "# TYPE sluice_webhook_retries_total counter\n"
      "sluice_webhook_retries_total %" PRIu64 "\n"
      "# HELP sluice_webhook_refused_total Attempts refused for the "
      "address connected to.\n"
      "# TYPE sluice_webhook_refused_total counter\n"
      "sluice_webhook_refused_total %" PRIu64 "\n"
      "# HELP sluice_webhook_queue_depth Events and deliveries waiting.\n"
      "# TYPE sluice_webhook_queue_depth gauge\n"
      "sluice_webhook_queue_depth %" PRIu64 "\n"
      "# HELP sluice_webhook_deliveries_total Deliveries per destination "
      "done: sent, or failed for good.\n"
      "# TYPE sluice_webhook_deliveries_total counter\n",
      s.queued, s.dropped, s.delivered, s.failed, s.abandoned, s.spooled,
      s.restored, s.retries, s.refused, s.depth);
  for (i = 0; i < w->ndests; i++) {
    dest *d = &w->dests[i];
    const char *f = sluice__sink_format_name(d->format);
    emit(buf, len, &used,
         "sluice_webhook_deliveries_total{dest=\"%s\",format=\"%s\","
         "result=\"sent\"} %" PRIu64 "\n"
         "sluice_webhook_deliveries_total{dest=\"%s\",format=\"%s\","
         "result=\"failed\"} %" PRIu64 "\n",
         d->name, f, atomic_load(&d->sent), d->name, f,
         atomic_load(&d->failed));
  }
  emit(buf, len, &used,
       "# HELP sluice_webhook_deliveries_spooled Deliveries per destination "
       "waiting (in the spool, or in memory without one).\n"
       "# TYPE sluice_webhook_deliveries_spooled gauge\n");
  for (i = 0; i < w->ndests; i++)
    emit(buf, len, &used,
         "sluice_webhook_deliveries_spooled{dest=\"%s\",format=\"%s\"} "
         "%" PRIu64 "\n",
         w->dests[i].name, sluice__sink_format_name(w->dests[i].format),
         atomic_load(&w->dests[i].waiting));
  if (needed)
    *needed = used;
  return buf && used >= len ? SLUICE_ERANGE : SLUICE_OK;
}

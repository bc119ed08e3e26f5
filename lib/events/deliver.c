/*
** The sink's sender thread: every delivery on one libcurl multi handle.
**
**  a) An event taken off the queue becomes one delivery per destination
**     that wants its type (two for a level 3 page whose account owner has
**     a PagerDuty key); a delivery is the unit attempted, retried, spooled
**     and counted.  With a spool, deliveries are written there first and
**     read back in order as the table of jobs in memory has room, so the
**     spool holds what memory cannot.  Each destination has its share of
**     that table (queue_max deliveries): one that is down fills its own
**     share (then its deliveries wait in the spool, or without one are
**     dropped and counted), never another's, and the queue is always
**     taken.
**  b) Up to max_inflight attempts per destination at once, each bounded
**     by timeout_ms: a destination that is down or hangs holds its own
**     slots, never another's, and fails its deliveries in about
**     max_attempts timeouts instead of one event per timeout.
**     A release or lift goes after the deliveries of its scope queued
**     before it (a resolve after its trigger); the rest in any order.
**  c) A failed attempt waits a full-jitter exponential backoff (spec
**     section 7) as a due time in its job, not a sleep: other deliveries
**     go on meanwhile.  A 4xx other than 408 and 429 is not retried (the
**     receiver refuses the body; sending it again changes nothing), nor
**     is an attempt refused for its address.
**  d) Every connection's address is checked just before the socket is
**     made (guard.c), whatever the name resolved to.  Proxies: only the
**     configured one; CURLOPT_PROXY "" turns the environment's off.
**  e) The thread sleeps in curl_multi_poll() until a transfer moves, a
**     retry falls due or sluice_webhook_on_event()/close wakes it
**     (curl_multi_wakeup(), which any thread may call).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "sink.h"

#define POLL_MAX_MS 1000
#define OWNER_KEYS_MAX 2

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* ---------------------------------------------------------------- jobs --- */

static job *free_slot(sluice_webhook *w) {
  size_t i;
  for (i = 0; i < w->njobs; i++)
    if (!w->jobs[i].used)
      return &w->jobs[i];
  return NULL;
}

/* j's in-memory part is zero (fan_out() and the spool start from zero). */
static void place(sluice_webhook *w, job *slot, const job *j) {
  *slot = *j;
  slot->order = j->seq ? j->seq : ++w->orders;
  w->dests[j->kept.dest].held++;
  slot->w = w;
  slot->used = 1;
}

/* A new delivery: into the spool, or straight into memory. */
static void add(sluice_webhook *w, job *j) {
  dest *d = &w->dests[j->kept.dest];
  job *slot;
  if (w->spool) {
    if (sluice__spool_put(w->spool, j) != SLUICE_OK) {
      atomic_fetch_add(&w->dropped, 1);
      return;
    }
    atomic_fetch_add(&w->spooled, 1);
  } else if (d->held >= w->cap || !(slot = free_slot(w))) {
    atomic_fetch_add(&w->dropped, 1); /* this destination's share is full */
    return;
  } else {
    place(w, slot, j);
  }
  atomic_fetch_add(&w->pending, 1);
  atomic_fetch_add(&d->waiting, 1);
}

/* Done with a delivery, for good. */
static void finish(sluice_webhook *w, job *j, int ok) {
  dest *d = &w->dests[j->kept.dest];
  if (w->spool && j->seq)
    sluice__spool_del(w->spool, j->seq);
  atomic_fetch_add(ok ? &w->delivered : &w->failed, 1);
  atomic_fetch_add(ok ? &d->sent : &d->failed, 1);
  atomic_fetch_sub(&d->waiting, 1);
  atomic_fetch_sub(&w->pending, 1);
  d->held--;
  j->used = 0;
}

/* Spooled deliveries into memory, in order, each destination up to its
** share: a destination that is down keeps its backlog on disk without
** holding up another's. */
static void refill(sluice_webhook *w) {
  int i;
  for (i = 0; i < w->ndests; i++) {
    dest *d = &w->dests[i];
    job j, *slot;
    while (d->held < w->cap && (slot = free_slot(w)) &&
           sluice__spool_next(w->spool, d->cursor, i, &j)) {
      d->cursor = j.seq;
      place(w, slot, &j);
    }
  }
}

void sluice__sink_restore(sluice_webhook *w) {
  job j;
  uint64_t after = 0;
  while (sluice__spool_next(w->spool, after, -1, &j)) {
    after = j.seq;
    atomic_fetch_add(&w->restored, 1);
    atomic_fetch_add(&w->pending, 1);
    if (j.kept.dest < 0 || j.kept.dest >= w->ndests ||
        w->dests[j.kept.dest].fp != j.kept.dest_fp) {
      sluice__spool_del(w->spool, j.seq);
      atomic_fetch_add(&w->failed, 1);
      atomic_fetch_sub(&w->pending, 1);
    } else {
      atomic_fetch_add(&w->dests[j.kept.dest].waiting, 1);
    }
  }
}

/* Whom: the addresses of a role from the callback or the file. */
static int contacts_of(sluice_webhook *w, const char *tenant, int role,
                       char *buf, size_t len) {
  buf[0] = 0;
  if (!tenant[0])
    return SLUICE_ENOTFOUND;
  if (w->contacts)
    return w->contacts(w->contacts_ud, tenant, role, buf, len) == SLUICE_OK &&
                   buf[0]
               ? SLUICE_OK
               : SLUICE_ENOTFOUND;
  return w->book ? sluice__contacts_find(w->book, tenant, role, buf, len)
                 : SLUICE_ENOTFOUND;
}

/* Append the entries of list (comma-separated) that are (or are not, per
** `pd`) "pagerduty:" keys to out. */
static void pick(const char *list, int pd, char *out, size_t n) {
  const char *p = list;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    int is_pd = len > 10 && !strncmp(p, "pagerduty:", 10);
    if (len && is_pd == pd) {
      size_t used = strlen(out);
      const char *v = pd ? p + 10 : p;
      size_t vlen = pd ? len - 10 : len;
      if (used + vlen + 2 < n)
        snprintf(out + used, n - used, "%s%.*s", used ? "," : "", (int)vlen,
                 v);
    }
    p += len + (end != NULL);
  }
}

/* One event to every destination that wants it. */
static void fan_out(sluice_webhook *w, const item *it) {
  int i;
  for (i = 0; i < w->ndests; i++) {
    dest *d = &w->dests[i];
    job j;
    char who[EXTRA_LEN];
    if (!(d->events & SLUICE_WEBHOOK_EVENT(it->type)))
      continue;
    memset(&j, 0, sizeof j);
    j.kept.it = *it;
    j.kept.dest = i;
    j.kept.dest_fp = d->fp;
    if (d->format == SLUICE_WEBHOOK_EMAIL) {
      /* the tenant's technical contacts; the owner for a page; support */
      if (d->to)
        pick(d->to, 0, j.kept.extra, sizeof j.kept.extra);
      if (contacts_of(w, it->tenant, SLUICE_WEBHOOK_TECH, who, sizeof who) ==
          SLUICE_OK)
        pick(who, 0, j.kept.extra, sizeof j.kept.extra);
      if (it->type == SLUICE_EVENT_PAGE &&
          contacts_of(w, it->tenant, SLUICE_WEBHOOK_OWNER, who, sizeof who) ==
              SLUICE_OK)
        pick(who, 0, j.kept.extra, sizeof j.kept.extra);
      if (!j.kept.extra[0])
        continue; /* nobody to write to */
      add(w, &j);
    } else if (d->format == SLUICE_WEBHOOK_PAGERDUTY) {
      snprintf(j.kept.extra, sizeof j.kept.extra, "%s", d->routing_key);
      add(w, &j);
      /* a level 3 page pages the account owner too */
      if (it->type == SLUICE_EVENT_PAGE &&
          contacts_of(w, it->tenant, SLUICE_WEBHOOK_OWNER, who, sizeof who) ==
              SLUICE_OK) {
        char keys[EXTRA_LEN] = "", *k, *save = NULL;
        int n = 0;
        pick(who, 1, keys, sizeof keys);
        for (k = strtok_r(keys, ",", &save); k && n < OWNER_KEYS_MAX;
             k = strtok_r(NULL, ",", &save), n++) {
          snprintf(j.kept.extra, sizeof j.kept.extra, "%s", k);
          add(w, &j);
        }
      }
    } else {
      add(w, &j);
    }
  }
}

/* Whether a delivery can go anywhere now: the spool, or memory with a
** free slot and a destination under its share.  When none can, events
** stay in the queue, where sluice_webhook_on_event() counts what does not
** fit as dropped, once: taken now, an event would be dropped here too and
** counted both queued and dropped. */
static int room(sluice_webhook *w) {
  int i;
  if (w->spool)
    return 1;
  if (!free_slot(w))
    return 0;
  for (i = 0; i < w->ndests; i++)
    if (w->dests[i].held < w->cap)
      return 1;
  return 0;
}

/* Events off the queue while memory (or the spool) can take them. */
static void take(sluice_webhook *w) {
  for (;;) {
    item it;
    pthread_mutex_lock(&w->mu);
    if (!w->depth || !room(w)) {
      pthread_mutex_unlock(&w->mu);
      return;
    }
    it = w->ring[w->head];
    w->head = (w->head + 1) % w->cap;
    w->depth--;
    pthread_mutex_unlock(&w->mu);
    fan_out(w, &it);
  }
}

/* ------------------------------------------------------------ attempts --- */

static size_t discard(char *p, size_t size, size_t n, void *ud) {
  (void)p;
  (void)ud;
  return size * n;
}

static size_t read_body(char *buf, size_t size, size_t n, void *ud) {
  job *j = ud;
  size_t left = j->len - j->sent, want = size * n;
  if (want > left)
    want = left;
  memcpy(buf, j->body + j->sent, want);
  j->sent += want;
  return want;
}

static curl_socket_t open_socket(void *ud, curlsocktype purpose,
                                 struct curl_sockaddr *a) {
  job *j = ud;
  (void)purpose;
  if (!sluice__sink_addr_ok(&a->addr, j->w->allow)) {
    j->refused = 1;
    atomic_fetch_add(&j->w->refused, 1);
    return CURL_SOCKET_BAD;
  }
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static struct curl_slist *recipients(const char *list) {
  struct curl_slist *l = NULL, *n;
  char buf[EXTRA_LEN], *k, *save = NULL;
  snprintf(buf, sizeof buf, "%s", list);
  for (k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
    if (!(n = curl_slist_append(l, k))) {
      curl_slist_free_all(l);
      return NULL;
    }
    l = n;
  }
  return l;
}

static void drop_transfer(sluice_webhook *w, job *j) {
  if (j->easy) {
    curl_multi_remove_handle(w->multi, j->easy);
    curl_easy_cleanup(j->easy);
  }
  free(j->body);
  curl_slist_free_all(j->list);
  j->easy = NULL;
  j->body = NULL;
  j->list = NULL;
  if (j->busy)
    w->dests[j->kept.dest].inflight--;
  j->busy = 0;
}

/* Start an attempt; 0 when it could not be set up (then it failed). */
static int start(sluice_webhook *w, job *j) {
  dest *d = &w->dests[j->kept.dest];
  CURL *e;
  int email = d->format == SLUICE_WEBHOOK_EMAIL;
  j->body = sluice__sink_body(w, d, &j->kept.it, j->kept.extra);
  if (!j->body || !(e = curl_easy_init()))
    return 0;
  j->easy = e;
  j->len = strlen(j->body);
  j->sent = 0;
  j->refused = 0;
  j->busy = 1;
  d->inflight++;
  curl_easy_setopt(e, CURLOPT_PRIVATE, j);
  curl_easy_setopt(e, CURLOPT_URL, d->url);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)w->connect_ms);
  curl_easy_setopt(e, CURLOPT_PROXY, w->proxy ? w->proxy : "");
  if (!w->proxy) { /* through a proxy the socket goes to the proxy */
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, j);
  }
  if (email) {
    if (!(j->list = recipients(j->kept.extra)))
      return 0;
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    curl_easy_setopt(e, CURLOPT_MAIL_FROM, d->from);
    curl_easy_setopt(e, CURLOPT_MAIL_RCPT, j->list);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(e, CURLOPT_READDATA, j);
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, w->json_headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, j->body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
  }
  if (++j->kept.attempts > 1)
    atomic_fetch_add(&w->retries, 1);
  return curl_multi_add_handle(w->multi, e) == CURLM_OK;
}

static int64_t backoff(sluice_webhook *w, int attempts) {
  int64_t wait = w->base_ns;
  int i;
  for (i = 1; i < attempts && wait < w->cap_ns; i++)
    wait *= 2;
  if (wait > w->cap_ns)
    wait = w->cap_ns;
  return (int64_t)sluice__rng_upto(&w->rng, (uint64_t)wait);
}

static void done(sluice_webhook *w, CURLMsg *m) {
  job *j = NULL;
  long status = 0;
  int ok, final, email;
  curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
  email = w->dests[j->kept.dest].format == SLUICE_WEBHOOK_EMAIL;
  curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
  ok = m->data.result == CURLE_OK &&
       (email || (status >= 200 && status < 300));
  final = ok || j->refused || j->kept.attempts >= w->max_attempts ||
          (!email && status >= 400 && status < 500 && status != 408 &&
           status != 429);
  drop_transfer(w, j);
  if (final)
    finish(w, j, ok);
  else
    j->due_ns = mono_ns() + backoff(w, j->kept.attempts);
}

/* Whether an earlier delivery of the same scope to the same destination is
** not done: a release or lift waits for it, so a PagerDuty resolve never
** overtakes its trigger, nor a lift the alert it ends.  Only those wait:
** the rest go at once, whatever their scope. */
static int behind(const sluice_webhook *w, const job *j) {
  size_t i;
  for (i = 0; i < w->njobs; i++) {
    const job *k = &w->jobs[i];
    if (k->used && k->order < j->order && k->kept.dest == j->kept.dest &&
        k->kept.it.scope_id[0] == j->kept.it.scope_id[0] &&
        !strcmp(k->kept.it.scope_id, j->kept.it.scope_id))
      return 1;
  }
  return 0;
}

/* Start what is due; the wait until the next due time (ms). */
static long launch(sluice_webhook *w) {
  int64_t now = mono_ns(), next = INT64_MAX;
  size_t i;
  for (i = 0; i < w->njobs; i++) {
    job *j = &w->jobs[i];
    if (!j->used || j->busy)
      continue;
    if (j->due_ns > now) {
      if (j->due_ns < next)
        next = j->due_ns;
      continue;
    }
    if (w->dests[j->kept.dest].inflight >= w->max_inflight ||
        (sluice__sink_resolves(&j->kept.it) && behind(w, j)))
      continue; /* woken when one of its transfers ends */
    if (!start(w, j)) {
      drop_transfer(w, j);
      finish(w, j, 0);
    }
  }
  if (next == INT64_MAX)
    return POLL_MAX_MS;
  next = (next - now) / NS_PER_MS + 1;
  return next < POLL_MAX_MS ? (long)next : POLL_MAX_MS;
}

/* Close: transfers cut short; without a spool what is left is abandoned
** (with one, it is there for the next open, the queue's events too). */
static void wind_down(sluice_webhook *w) {
  size_t i;
  uint64_t left = 0;
  for (i = 0; i < w->njobs; i++)
    if (w->jobs[i].used) {
      drop_transfer(w, &w->jobs[i]);
      left++;
    }
  if (w->spool) {
    take(w); /* with a spool there is always room: the whole queue */
    return;
  }
  pthread_mutex_lock(&w->mu);
  left += w->depth;
  w->depth = 0;
  pthread_mutex_unlock(&w->mu);
  atomic_fetch_add(&w->abandoned, left);
}

void *sluice__sink_run(void *arg) {
  sluice_webhook *w = arg;
  while (!atomic_load(&w->stop)) {
    CURLMsg *m;
    int running, left;
    long wait;
    take(w);
    if (w->spool)
      refill(w);
    wait = launch(w);
    curl_multi_perform(w->multi, &running);
    while ((m = curl_multi_info_read(w->multi, &left)))
      if (m->msg == CURLMSG_DONE) {
        done(w, m);
        wait = 0; /* a slot is free: look again */
      }
    if (wait)
      curl_multi_poll(w->multi, NULL, 0, (int)wait, NULL);
  }
  wind_down(w);
  return NULL;
}

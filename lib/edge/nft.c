/*
** The nftables sink (include/sluice/nft.h): open and close, the event
** callback and its queue, the counters.
**
** Shape.  A ring of queue_max fixed-size updates and one thread.  The
** deciding thread (sluice_nft_on_event) filters the event without a lock,
** then holds the mutex only to copy a raw address and a scope id in: no
** allocation, no parsing, no system call but the condition signal.  What
** does not fit is dropped and counted.  The thread (nft_worker.c) takes
** up to batch_max updates at a time and sends them to the kernel as one
** nftables transaction.
**
** Choices:
**  a) libnftables, not a netlink encoder of our own: the sink hands it the
**     same commands an operator types (docs/nft.md), and nftables owns the
**     wire format.  Its output and error streams are buffered, so nothing
**     is printed; its message for a failure is kept (sluice_nft_last_error).
**  b) libnftables ends the process when it cannot open its netlink socket
**     (netlink_init_error() calls exit()).  A library must not let that
**     happen on a host without nf_tables, so open first opens an nfnetlink
**     socket itself and answers SLUICE_ENOTSUP when that fails.  Its
**     allocator exits on a failed malloc too; that one the sink cannot
**     catch (docs/nft.md says so).
**  c) Time left, not end time, crosses the queue: the event's times are the
**     limiter's clock (a manual one in tests and simulations), the kernel's
**     timeouts are relative; the thread subtracts the time an update waited.
*/
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/netlink.h>

#include "nft_int.h"

#define QUEUE_DEFAULT 4096
#define BATCH_DEFAULT 1024
#define ELEMENTS_DEFAULT 65536
#define RESYNC_DEFAULT_MS 60000
#define NS_PER_MS INT64_C(1000000)

int64_t sluice__nft_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sluice__nft_real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void set_err(char *buf, size_t len, const char *msg) {
  if (buf && len)
    snprintf(buf, len, "%s", msg);
}

static int nfnetlink_here(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0)
    return 0;
  close(fd);
  return 1;
}

static int options_check(const sluice_nft_options *o) {
  if (o->ipv6_prefix < 0 || o->ipv6_prefix > 128 || o->min_level < 0 ||
      o->min_level > 3 || (o->flags & ~SLUICE_NFT_CREATE) ||
      o->resync_ms < -1 || (o->state_path && !o->state_path[0]) ||
      (o->errlen && !o->errbuf))
    return SLUICE_EINVAL;
  return SLUICE_OK;
}

static void free_sink(sluice_nft *s) {
  sluice__nft_list_free(&s->list);
  sluice__nft_list_free(&s->pending);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->errmu);
  pthread_cond_destroy(&s->wake);
  pthread_cond_destroy(&s->done);
  free(s->ring);
  free(s->batch);
  free(s->cmd);
  free(s->state_path);
  free(s);
}

int sluice_nft_open(const sluice_nft_options *o, sluice_nft **out) {
  sluice_nft *s;
  pthread_condattr_t ca;
  int rc;
  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  if (!o || options_check(o))
    return SLUICE_EINVAL;
  if (!(s = calloc(1, sizeof *s)))
    return SLUICE_ENOMEM;
  if (sluice__nft_names(o, &s->names)) {
    free(s);
    return SLUICE_EINVAL;
  }
  s->prefix6 = o->ipv6_prefix ? o->ipv6_prefix : 64;
  s->min_level = o->min_level ? o->min_level : 2;
  s->flags = o->flags;
  s->qmax = o->queue_max ? o->queue_max : QUEUE_DEFAULT;
  s->batch_max = o->batch_max ? o->batch_max : BATCH_DEFAULT;
  s->resync_ns = o->resync_ms < 0    ? 0
                 : o->resync_ms == 0 ? RESYNC_DEFAULT_MS * NS_PER_MS
                                     : o->resync_ms * NS_PER_MS;
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->errmu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->wake, &ca);
  pthread_cond_init(&s->done, &ca);
  pthread_condattr_destroy(&ca);
  if (s->qmax > SIZE_MAX / sizeof *s->ring ||
      s->batch_max > SIZE_MAX / sizeof *s->batch) {
    free_sink(s);
    return SLUICE_EINVAL;
  }
  s->ring = malloc(s->qmax * sizeof *s->ring);
  s->batch = malloc(s->batch_max * sizeof *s->batch);
  if (!s->ring || !s->batch ||
      (o->state_path && !(s->state_path = strdup(o->state_path))) ||
      sluice__nft_list_init(&s->list, o->max_elements ? o->max_elements
                                                      : ELEMENTS_DEFAULT) ||
      sluice__nft_list_init(&s->pending, s->batch_max)) {
    free_sink(s);
    return SLUICE_ENOMEM;
  }
  if (s->state_path &&
      (rc = sluice__nft_list_load(&s->list, s->state_path, s->prefix6,
                                  sluice__nft_mono_ns(),
                                  sluice__nft_real_ns()))) {
    set_err(o->errbuf, o->errlen,
            rc == SLUICE_ECORRUPT ? "state_path: not a sluice nft list"
                                  : "state_path: cannot read");
    free_sink(s);
    return rc;
  }
  atomic_store(&s->elements, s->list.n);
  if (!nfnetlink_here()) {
    set_err(o->errbuf, o->errlen, "no nfnetlink socket (nf_tables)");
    free_sink(s);
    return SLUICE_ENOTSUP;
  }
  if ((rc = sluice__nft_create(s))) {
    set_err(o->errbuf, o->errlen, s->lasterr);
    sluice__nft_run(s, NULL); /* frees the context */
    free_sink(s);
    return rc;
  }
  /* What the file remembered goes back into the sets at once; the store
  ** has its say when the caller reconciles. */
  s->resync_asked = s->list.n > 0;
  s->enq_seq = (uint64_t)s->resync_asked; /* sync waits for it */
  s->next_resync = s->resync_ns ? sluice__nft_mono_ns() + s->resync_ns : 0;
  if (pthread_create(&s->thread, NULL, sluice__nft_thread, s)) {
    sluice__nft_run(s, NULL);
    set_err(o->errbuf, o->errlen, "cannot start the thread");
    free_sink(s);
    return SLUICE_EBACKEND;
  }
  s->started = 1;
  *out = s;
  return SLUICE_OK;
}

void sluice_nft_close(sluice_nft *s) {
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->mu);
  if (s->started)
    pthread_join(s->thread, NULL);
  free_sink(s);
}

static void enqueue(sluice_nft *s, int op, const sluice_event *ev) {
  const char *raw = ev->request ? ev->request->client_ip : NULL;
  nft_item *it;
  if (op == NFT_DEL && !raw && !ev->scope_id)
    return;
  pthread_mutex_lock(&s->mu);
  if (s->count == s->qmax) {
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
    return;
  }
  it = &s->ring[(s->head + s->count) % s->qmax];
  it->op = op;
  it->raw[0] = 0;
  if (raw)
    snprintf(it->raw, sizeof it->raw, "%s", raw);
  it->scope_id[0] = 0;
  if (ev->scope_id)
    snprintf(it->scope_id, sizeof it->scope_id, "%s", ev->scope_id);
  it->ttl_ns = ev->until_ns == SLUICE_FOREVER ? -1 : ev->until_ns - ev->now_ns;
  it->enq_mono = sluice__nft_mono_ns();
  s->enq_seq++;
  /* The thread waits only on an empty queue: the first update wakes it,
  ** the rest of a flood finds it awake (no futex call per ban). */
  if (s->count++ == 0)
    pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->mu);
  atomic_fetch_add_explicit(&s->queued, 1, memory_order_relaxed);
}

void sluice_nft_on_event(void *userdata, const sluice_event *ev) {
  sluice_nft *s = userdata;
  if (!s || !ev || ev->scope != SLUICE_SCOPE_IP)
    return;
  switch (ev->type) {
  case SLUICE_EVENT_EDGE_DENY:
    if (ev->level < s->min_level || !ev->request || !ev->request->client_ip)
      return;
    if (ev->until_ns != SLUICE_FOREVER && ev->until_ns <= ev->now_ns)
      return;
    enqueue(s, NFT_ADD, ev);
    break;
  case SLUICE_EVENT_RELEASE:
  case SLUICE_EVENT_LIFT:
    enqueue(s, NFT_DEL, ev);
    break;
  default:
    break;
  }
}

int sluice_nft_reconcile(sluice_nft *s, sluice_policy *p) {
  if (!s)
    return SLUICE_EINVAL;
  pthread_mutex_lock(&s->mu);
  if (p)
    s->reconcile = p;
  else
    s->resync_asked = 1;
  s->enq_seq++; /* sync waits for it like for an update */
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->mu);
  return SLUICE_OK;
}

int sluice_nft_sync(sluice_nft *s, int64_t timeout_ms) {
  struct timespec ts;
  uint64_t want;
  int rc = SLUICE_OK;
  if (!s || timeout_ms < 0)
    return SLUICE_EINVAL;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(timeout_ms / 1000);
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&s->mu);
  want = s->enq_seq;
  while (s->applied_seq < want && rc == SLUICE_OK)
    if (pthread_cond_timedwait(&s->done, &s->mu, &ts) == ETIMEDOUT)
      rc = s->applied_seq < want ? SLUICE_ETIMEDOUT : SLUICE_OK;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int sluice_nft_stats_get(const sluice_nft *cs, sluice_nft_stats *out) {
  sluice_nft *s = (sluice_nft *)cs; /* the mutex; nothing else changes */
  if (!s || !out)
    return SLUICE_EINVAL;
  memset(out, 0, sizeof *out);
  out->queued = atomic_load(&s->queued);
  out->dropped = atomic_load(&s->dropped);
  out->added = atomic_load(&s->added);
  out->removed = atomic_load(&s->removed);
  out->failed = atomic_load(&s->failed);
  out->invalid = atomic_load(&s->invalid);
  out->transactions = atomic_load(&s->transactions);
  out->resyncs = atomic_load(&s->resyncs);
  out->elements = atomic_load(&s->elements);
  pthread_mutex_lock(&s->mu);
  out->depth = s->count;
  pthread_mutex_unlock(&s->mu);
  return SLUICE_OK;
}

int sluice_nft_last_error(const sluice_nft *cs, char *buf, size_t len) {
  sluice_nft *s = (sluice_nft *)cs;
  if (!s || !buf || !len)
    return SLUICE_EINVAL;
  pthread_mutex_lock(&s->errmu);
  snprintf(buf, len, "%s", s->lasterr);
  pthread_mutex_unlock(&s->errmu);
  return SLUICE_OK;
}

int sluice_nft_metrics(const sluice_nft *s, char *buf, size_t len,
                       size_t *needed) {
  sluice_nft_stats st;
  int w;
  if (!s || (!buf && len) || sluice_nft_stats_get(s, &st))
    return SLUICE_EINVAL;
  w = snprintf(
      buf, len,
      "# HELP sluice_nft_updates_total Kernel IP set updates of the "
      "nftables sink, by result.\n"
      "# TYPE sluice_nft_updates_total counter\n"
      "sluice_nft_updates_total{result=\"added\"} %" PRIu64 "\n"
      "sluice_nft_updates_total{result=\"removed\"} %" PRIu64 "\n"
      "sluice_nft_updates_total{result=\"failed\"} %" PRIu64 "\n"
      "sluice_nft_updates_total{result=\"dropped\"} %" PRIu64 "\n"
      "sluice_nft_updates_total{result=\"invalid\"} %" PRIu64 "\n"
      "# HELP sluice_nft_queue_depth Updates waiting for the sink's thread.\n"
      "# TYPE sluice_nft_queue_depth gauge\n"
      "sluice_nft_queue_depth %" PRIu64 "\n"
      "# HELP sluice_nft_elements Addresses the sink keeps in its sets.\n"
      "# TYPE sluice_nft_elements gauge\n"
      "sluice_nft_elements %" PRIu64 "\n",
      st.added, st.removed, st.failed, st.dropped, st.invalid, st.depth,
      st.elements);
  if (w < 0)
    return SLUICE_EINVAL;
  if (needed)
    *needed = (size_t)w;
  return (size_t)w < len || (!buf && !len) ? SLUICE_OK : SLUICE_ERANGE;
}

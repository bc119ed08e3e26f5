/* conn_guard: see conn_guard.h. */
#include "conn_guard.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define MS_NS INT64_C(1000000)
#define SWEEP_MS 200

typedef struct guarded {
  struct guarded *prev, *next;
  int fd;
  int shut;
  int64_t deadline_ns;
} guarded;

struct conn_guard {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int stop;
  int64_t head_ns, body_ns;
  guarded list; /* sentinel */
};

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *sweep(void *arg) {
  conn_guard *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->stop) {
    struct timespec ts;
    int64_t now = mono_ns();
    guarded *e;
    /* Entries leave the list (CLOSED) before MHD closes their socket, and
    ** that needs this lock: an fd here is never one reused by another. */
    for (e = g->list.next; e != &g->list; e = e->next)
      if (!e->shut && e->deadline_ns <= now) {
        shutdown(e->fd, SHUT_RDWR);
        e->shut = 1;
      }
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += SWEEP_MS * MS_NS;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

conn_guard *conn_guard_start(int64_t head_ms, int64_t body_ms) {
  conn_guard *g = calloc(1, sizeof *g);
  if (!g)
    return NULL;
  g->head_ns = head_ms * MS_NS;
  g->body_ns = body_ms * MS_NS;
  g->list.next = g->list.prev = &g->list;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  if (pthread_create(&g->thread, NULL, sweep, g) != 0) {
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
    return NULL;
  }
  return g;
}

void conn_guard_stop(conn_guard *g) {
  guarded *e, *next;
  if (!g)
    return;
  pthread_mutex_lock(&g->mu);
  g->stop = 1;
  pthread_cond_signal(&g->cv);
  pthread_mutex_unlock(&g->mu);
  pthread_join(g->thread, NULL);
  for (e = g->list.next; e != &g->list; e = next) {
    next = e->next;
    free(e);
  }
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g);
}

void conn_guard_notify(void *cls, struct MHD_Connection *c,
                       void **socket_context,
                       enum MHD_ConnectionNotificationCode toe) {
  conn_guard *g = cls;
  guarded *e = *socket_context;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || !(e = calloc(1, sizeof *e)))
      return; /* unguarded: the idle timeout still applies */
    e->fd = ci->connect_fd;
    e->deadline_ns = mono_ns() + g->head_ns;
    pthread_mutex_lock(&g->mu);
    e->next = g->list.next;
    e->prev = &g->list;
    e->next->prev = e;
    g->list.next = e;
    pthread_mutex_unlock(&g->mu);
    *socket_context = e;
  } else if (e) {
    pthread_mutex_lock(&g->mu);
    e->prev->next = e->next;
    e->next->prev = e->prev;
    pthread_mutex_unlock(&g->mu);
    free(e);
    *socket_context = NULL;
  }
}

static void set_deadline(conn_guard *g, struct MHD_Connection *c,
                         int64_t in_ns) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  guarded *e = ci ? ci->socket_context : NULL;
  if (!e)
    return;
  pthread_mutex_lock(&g->mu);
  e->deadline_ns = mono_ns() + in_ns;
  pthread_mutex_unlock(&g->mu);
}

void conn_guard_head_done(conn_guard *g, struct MHD_Connection *c) {
  set_deadline(g, c, g->body_ns);
}

void conn_guard_request_done(conn_guard *g, struct MHD_Connection *c) {
  set_deadline(g, c, g->head_ns);
}

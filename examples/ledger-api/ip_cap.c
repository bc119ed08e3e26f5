/* ip_cap: see ip_cap.h. */
#include "ip_cap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 4096

typedef struct holder {
  struct holder *next;
  unsigned n;
  char addr[64];
} holder;

struct ip_cap {
  pthread_mutex_t mu; /* the HTTP thread and the request handlers */
  unsigned limit;
  const realip *proxies;
  holder *bucket[NBUCKETS];
};

ip_cap *ip_cap_new(unsigned limit, const realip *proxies) {
  ip_cap *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  pthread_mutex_init(&c->mu, NULL);
  c->limit = limit;
  c->proxies = proxies;
  return c;
}

void ip_cap_free(ip_cap *c) {
  size_t i;
  if (!c)
    return;
  for (i = 0; i < NBUCKETS; i++)
    while (c->bucket[i]) {
      holder *h = c->bucket[i];
      c->bucket[i] = h->next;
      free(h);
    }
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static holder **slot(ip_cap *c, const char *addr) {
  uint32_t x = 2166136261u; /* FNV-1a: spreads text addresses evenly */
  const unsigned char *p;
  holder **h;
  for (p = (const unsigned char *)addr; *p; p++)
    x = (x ^ *p) * 16777619u;
  for (h = &c->bucket[x % NBUCKETS]; *h; h = &(*h)->next)
    if (!strcmp((*h)->addr, addr))
      break;
  return h;
}

/* force: take past the limit (a connection MHD has already accepted). */
static int take(ip_cap *c, const char *addr, int force) {
  holder **h;
  int rc = 0;
  pthread_mutex_lock(&c->mu);
  h = slot(c, addr);
  if (!*h && strlen(addr) < sizeof (*h)->addr &&
      (*h = calloc(1, sizeof **h)))
    memcpy((*h)->addr, addr, strlen(addr) + 1);
  if (!*h || (!force && (*h)->n >= c->limit))
    rc = -1;
  else
    (*h)->n++;
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int ip_cap_take(ip_cap *c, const char *addr) { return take(c, addr, 0); }

void ip_cap_give(ip_cap *c, const char *addr) {
  holder **h, *gone = NULL;
  pthread_mutex_lock(&c->mu);
  h = slot(c, addr);
  if (*h && (*h)->n > 0 && --(*h)->n == 0) {
    gone = *h;
    *h = gone->next;
  }
  pthread_mutex_unlock(&c->mu);
  free(gone);
}

void ip_cap_peer_text(const struct sockaddr *sa, char *out, size_t n) {
  snprintf(out, n, "unknown");
  if (sa && sa->sa_family == AF_INET)
    inet_ntop(AF_INET,
              &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
              (socklen_t)n);
  else if (sa && sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6,
              &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
              out, (socklen_t)n);
}

/* The peer counts unless it is a trusted proxy; *peer gets its text. */
static int counted(ip_cap *c, const struct sockaddr *sa, char *peer,
                   size_t n) {
  ip_cap_peer_text(sa, peer, n);
  return !realip_trusted(c->proxies, peer);
}

enum MHD_Result ip_cap_accept(void *cls, const struct sockaddr *addr,
                              socklen_t addrlen) {
  ip_cap *c = cls;
  char peer[64];
  holder **h;
  int full;
  (void)addrlen;
  if (!counted(c, addr, peer, sizeof peer))
    return MHD_YES;
  pthread_mutex_lock(&c->mu);
  h = slot(c, peer);
  full = *h && (*h)->n >= c->limit;
  pthread_mutex_unlock(&c->mu);
  return full ? MHD_NO : MHD_YES;
}

void ip_cap_notify(ip_cap *c, struct MHD_Connection *conn,
                   enum MHD_ConnectionNotificationCode toe) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  char peer[64];
  if (!ci || !counted(c, ci->client_addr, peer, sizeof peer))
    return;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED)
    (void)take(c, peer, 1);
  else
    ip_cap_give(c, peer);
}

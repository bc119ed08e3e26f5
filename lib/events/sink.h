/*
** The webhook sink's parts (include/sluice/webhook.h), shared by its
** files: webhook.c (open, the deciding side, counters), deliver.c (the
** sender thread on libcurl's multi interface), format.c (the bodies),
** guard.c (which addresses a destination may have), spool.c (the LMDB
** spool) and contacts.c (the tenants' contacts).
*/
#ifndef SLUICE_EVENTS_SINK_H
#define SLUICE_EVENTS_SINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <curl/curl.h>

#include "rng.h"
#include "sluice/webhook.h"

#define ID_LEN 32        /* hashed scope ids: 32 hex digits */
#define TENANT_LEN 64    /* a raw tenant id, truncated */
#define ENDPOINT_LEN 112 /* "METHOD /route", truncated */
#define ENDPOINTS_MAX 8
#define SCOPES_MAX 64
#define TEXT_LEN 128     /* who, why */
#define EXTRA_LEN 512    /* a job's recipients or routing key */
#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)

/* An event as queued and spooled: plain bytes, no pointers. */
typedef struct item {
  int type, scope, level, outcome;
  int64_t now_ns, until_ns;
  char scope_id[ID_LEN + 1], tenant_id[ID_LEN + 1];
  char tier[SLUICE_POLICY_NAME_MAX + 1];
  char who[TEXT_LEN], why[TEXT_LEN];
  char tenant[TENANT_LEN]; /* raw tenant id: whose contacts */
  char key_tail[8];        /* the raw key's last 4 characters, or "" */
  int nendpoints;
  char endpoints[ENDPOINTS_MAX][ENDPOINT_LEN];
} item;

/* What the spool keeps of a delivery (spool.c stores it as it is): plain
** bytes, no pointers. */
typedef struct kept {
  uint64_t dest_fp; /* the destination's fingerprint, checked on restore */
  int32_t dest;
  int32_t attempts;
  item it;
  char extra[EXTRA_LEN]; /* EMAIL: recipients; PAGERDUTY: routing key */
} kept;

/* One event to one destination: the unit that is attempted, retried,
** spooled and counted. */
typedef struct job {
  kept kept;
  uint64_t seq;     /* spool key (0: not spooled) */
  /* in memory only */
  uint64_t order;   /* queued before a higher one */
  struct sluice_webhook *w;
  int used, busy, refused;
  size_t len;       /* of body */
  int64_t due_ns;   /* CLOCK_MONOTONIC */
  CURL *easy;
  char *body;
  size_t sent;      /* EMAIL: read position in body */
  struct curl_slist *list;
} job;

struct sluice_webhook;

typedef struct dest {
  int format;
  char *url, *routing_key, *from, *to, *name;
  uint32_t events;
  uint64_t fp;
  int inflight;     /* the sender's: attempts under way */
  size_t held;      /* the sender's: jobs in memory */
  uint64_t cursor;  /* the sender's: the last seq read from the spool */
  _Atomic uint64_t sent, failed, waiting;
} dest;

typedef struct scope_seen {
  char scope_id[ID_LEN + 1]; /* "" : free */
  uint64_t used;             /* LRU stamp */
  int n;
  char endpoints[ENDPOINTS_MAX][ENDPOINT_LEN]; /* most recent first */
} scope_seen;

typedef struct contact contact;
typedef struct spool spool;

struct sluice_webhook {
  dest *dests;
  int ndests;
  char *guide, *proxy;
  unsigned allow;
  int max_attempts, max_inflight;
  int64_t base_ns, cap_ns, timeout_ms, connect_ms;
  sluice__rng rng;
  sluice_webhook_contacts_fn contacts;
  void *contacts_ud;
  contact *book; /* the contacts file, or NULL */
  spool *spool;  /* or NULL */
  CURLM *multi;
  pthread_t thread;
  pthread_mutex_t mu;
  _Atomic int stop;
  /* the sender's */
  job *jobs;
  size_t njobs;
  /* under mu */
  item *ring;
  size_t cap, head, depth; /* cap: queue_max, also each destination's jobs */
  scope_seen seen[SCOPES_MAX];
  uint64_t clock;
  /* counters */
  _Atomic uint64_t queued, dropped, delivered, failed, retries, abandoned,
      spooled, restored, refused;
  _Atomic uint64_t pending; /* deliveries not done (a gauge) */
  struct curl_slist *json_headers;
  uint64_t orders;                 /* without a spool: the last order */
};

/* deliver.c */
void *sluice__sink_run(void *w);
/* At open: what a previous run left in the spool, counted (restored,
** waiting); deliveries for a destination no longer configured fail. */
void sluice__sink_restore(struct sluice_webhook *w);

/* format.c: a malloc'd body, or NULL (no memory).  extra: a routing key
** (PAGERDUTY) or the recipients (EMAIL). */
char *sluice__sink_body(const sluice_webhook *w, const dest *d,
                        const item *it, const char *extra);
int sluice__sink_resolves(const item *it); /* PAGERDUTY resolve, not trigger */
uint32_t sluice__sink_default_events(int format);
const char *sluice__sink_format_name(int format);

/* guard.c */
/* 1 when addr (sockaddr_in / sockaddr_in6) is allowed by `allow`. */
int sluice__sink_addr_ok(const struct sockaddr *addr, unsigned allow);
/* SLUICE_OK, or SLUICE_EINVAL with a message: scheme and literal host. */
int sluice__sink_url_ok(const char *url, int email, unsigned allow,
                        char *err, size_t errlen);

/* spool.c */
int sluice__spool_open(const char *path, spool **out, char *err,
                       size_t errlen);
void sluice__spool_close(spool *s);
/* Put a job (seq assigned); 0 or SLUICE_EFULL / SLUICE_EIO. */
int sluice__spool_put(spool *s, job *j);
int sluice__spool_del(spool *s, uint64_t seq);
/* The next spooled job after seq `after` (for destination for_dest, or any
** when -1), in order: 1 found, 0 none. */
int sluice__spool_next(spool *s, uint64_t after, int for_dest, job *out);

/* contacts.c */
int sluice__contacts_load(const char *path, contact **out, char *err,
                          size_t errlen);
void sluice__contacts_free(contact *c);
/* The addresses of tenant's role, comma-separated, into buf: SLUICE_OK or
** SLUICE_ENOTFOUND. */
int sluice__contacts_find(const contact *c, const char *tenant, int role,
                          char *buf, size_t len);

#endif

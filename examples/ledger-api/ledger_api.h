/*
** ledger-api's private header: the shared state (a MAP_SHARED mapping made
** before fork), the server's settings and per-process handles (S), and
** what its files share.  ledger_api.c: configuration, processes, main;
** ledger_state.c: the shared tables (ledgers, tokens, jobs, idempotency);
** ledger_http.c: requests, answers and handlers.
*/
#ifndef LEDGER_API_H
#define LEDGER_API_H

#include "conn_guard.h"
#include "http_strict.h"
#include "ip_cap.h"
#include "lazy_store.h"
#include "realip.h"
#include "secret_file.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"

#define S_NS INT64_C(1000000000)
#define MS_NS INT64_C(1000000)
#define MAX_BODY 16384
#define MAX_WORKERS 64
#define MAX_CONNECTIONS 16384 /* per worker; RLIMIT_NOFILE is raised to fit */
#define ID_MAX 64
#define MAX_KEYS 256 /* in --keys */

/* Exit codes: 0 clean shutdown, 2 usage, 3 system failure. */
enum { EX_OK = 0, EX_USAGE_ = 2, EX_RUNTIME = 3 };

/* ------------------------------------------------------ shared state --- */

enum { JOB_FREE = 0, JOB_RUNNING = 1, JOB_DONE = 2 };
/* What a job does: its route in etc/ledger.conf, whose leases it holds. */
enum { JOB_RECONCILE = 1, JOB_EXPORT = 2 };

typedef struct job {
  _Atomic int state;
  _Atomic uint64_t seq; /* job number; 0 while being written */
  int kind;             /* JOB_RECONCILE or JOB_EXPORT */
  int64_t created_ns, done_ns;
  uint64_t lease_id;
  char tenant[ID_MAX + 1], key[ID_MAX + 1], tier[SLUICE_POLICY_NAME_MAX + 1];
  char ledger[ID_MAX + 1];
  char range_s[24]; /* an export's export_range_s ("0": not given) */
} job;

#define NJOBS 4096
#define NLEDGERS 1024
#define NTOKENS 4096
#define PROBE 64 /* slots a lookup in the token table tries */

typedef struct ledger_slot {
  _Atomic uint64_t hash; /* 0: free */
  _Atomic int64_t entries, balance;
} ledger_slot;

/* An Idempotency-Key seen, under idem_mu.  A slot is never emptied once
** used (so probe chains stay whole); a record older than --idem-ttl-s is
** reused for another key. */
enum { IDEM_FREE = 0, IDEM_PENDING = 1, IDEM_DONE = 2 };
typedef struct idem_slot {
  uint64_t hash;      /* tenant, endpoint and key; 0: never used */
  uint64_t body_hash; /* what was asked: the same key must ask the same */
  int64_t created_ns; /* wall clock; 0: free for reuse */
  int state;
  int64_t value; /* entry id, or job number */
  int64_t amount;
  int tenant; /* whose share the record counts in (api_key.tenant_ix) */
} idem_slot;

/* An access token from /v1/auth/token: only its hash is kept. */
typedef struct token_slot {
  uint64_t hash; /* 0: free */
  int key_index;
  int64_t expires_ns;
} token_slot;

typedef struct shared {
  _Atomic uint64_t next_job;
  _Atomic uint64_t next_entry;
  pthread_mutex_t idem_mu; /* process-shared, robust: idem and tokens */
  job jobs[NJOBS];
  ledger_slot ledgers[NLEDGERS];
  token_slot tokens[NTOKENS];
  size_t nidem;
  /* Records counted in each tenant's share: live ones and expired ones
  ** not yet reused or swept.  idem_swept_ns: the last sweep. */
  int64_t idem_held[MAX_KEYS];
  int64_t idem_swept_ns;
  idem_slot idem[]; /* --idem-slots */
} shared;

/* ---------------------------------------------------------- config --- */

typedef struct api_key {
  char key[ID_MAX + 1], tenant[ID_MAX + 1], tier[SLUICE_POLICY_NAME_MAX + 1];
  char client_id[ID_MAX + 1], client_secret[ID_MAX + 1];
  int line; /* in --keys (0: a demo key) */
  int tenant_ix; /* the first key of its tenant: the tenant's number */
} api_key;


typedef struct server {
  const char *store;   /* as given */
  char store_uri[512]; /* what workers open */
  const char *config_path;
  int port, nworkers, shadow, trust_forwarded, header_form;
  int64_t job_ms;
  int64_t idem_slots, idem_ttl_s, per_ip, head_ms, body_ms;
  int64_t idem_share, idem_tenant_max; /* --idem-tenant-share: %, slots */
  realip proxies;               /* --trusted-proxies */
  sluice_backend lazy;          /* the store, opened when it answers */
  sluice_webhook_options hooks; /* --webhook; each worker opens its sink */
  int nhooks;
  /* The host segments every worker shares (NULL: the --config's host
  ** group; "": in-process).  host_seg_own: names made for this run, which
  ** the master removes when it stops. */
  const char *degraded_store, *deny_cache;
  char host_seg_own[2][64];
  /* --nft: each worker opens a sink on the table (its list in
  ** --nft-state FILE.<worker slot>) */
  int nft;
  sluice_nft_options nft_opts;
  char nft_state[4096];
  uint8_t secret[16];
  int nkeys;
  api_key keys[MAX_KEYS];
  int listen_fd, shm_fd;
  shared *sh;
  uint8_t hash_key[16];
  size_t shared_size;
  /* per process */
  conn_guard *guard;
  ip_cap *cap; /* --trust-forwarded: --per-ip counted per client address */
  sluice_webhook *webhook;
  sluice_nft *nft_sink;
  sluice_limiter *lim;
  sluice_policy *pol;
  sluice_http *http;
  _Atomic uint64_t reqno;
} server;

typedef struct reqctx {
  int started; /* the access handler has seen the headers */
  char *body;
  size_t len;
  http_strict_uri uri;
  char capped[64]; /* the client address this request counts for, or "" */
} reqctx;

#define IDEM_PROBE 1024 /* slots a lookup may visit */

enum { IDEM_NEW, IDEM_REPLAY, IDEM_BUSY, IDEM_MISMATCH, IDEM_FULL,
       IDEM_SHARE };

#define AMOUNT_MAX INT64_C(1000000000000000000) /* 10^18 minor units */

#define TOKEN_TTL_S 3600 /* access tokens */
#define PROBLEM_BASE "https://api.example.com/errors/"
#define UNAVAILABLE_RETRY_S "15" /* Retry-After of our own 503s */

extern server S;

/* ledger_alerts.c: --alert and its companions; each worker's sink. */
int ledger_alert_option(const char *name, char *arg);
int ledger_alerts_wanted(void);
int ledger_alerts_open(int slot, char *err, size_t errlen);
int ledger_alerts_check(char *err, size_t errlen); /* the master, at start */

int64_t wall_ns(void);
uint64_t hash2(const char *a, const char *b);
int valid_id(const char *s);
ledger_slot *ledger_find(const char *tenant, const char *ledger, int create);
int shared_lock_init(void);
int token_issue(const api_key *k, char *out, size_t n);
const api_key *token_find(const char *tok);
job *job_create(const api_key *k, int kind, const char *ledger,
                const char *range_s,
                uint64_t lease_id, uint64_t *seq_out);
/* The request that got the job's leases (to release them): its route and
** attribute (a ledger, an export's range) in rq and *a. */
void job_request(const job *j, sluice_request *rq, sluice_attr *a);
/* A job kind's method and route (etc/ledger.conf's route entry). */
const char *job_route(int kind);
uint64_t idem_hash(const api_key *k, char endpoint, const char *ik);
int idem_begin(const api_key *k, uint64_t h, uint64_t bh, idem_slot *out,
               size_t *index);
void idem_done(size_t index, int64_t value, int64_t amount);
void idem_abandon(size_t index);
int running_job(const char *tenant, int kind, const char *ledger, char *out,
                size_t n);
int balance_add(ledger_slot *l, int64_t amount);
enum MHD_Result problem(struct MHD_Connection *c, int status, const char *type,
                        const char *title, const char *detail,
                        const char *instance);
enum MHD_Result answer(struct MHD_Connection *c, const sluice_request *rq,
                       const sluice_decision *d, int ok_status,
                       const char *location, const char *json);
enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                           const char *method, const char *version,
                           const char *upload, size_t *upload_size,
                           void **con_cls);
void *on_uri(void *cls, const char *uri, struct MHD_Connection *c);
void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                   enum MHD_ConnectionNotificationCode toe);
void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                  enum MHD_RequestTerminationCode toe);

#endif

/*
** ledger-api: a small payment-ledger HTTP service with sluice enforcing
** everything the spec asks of the API tier: tenant and key buckets with
** endpoint costs, RateLimit headers, Retry-After, problem+json, the penalty
** box, concurrency leases for reconcile and export, the per-ledger mutex
** (409 on a second reconcile), the export cap and the auth lockout.
**
** Process model (nginx-style prefork): the master binds one listening
** socket on 127.0.0.1, creates the shared state, forks N workers and waits.
** Each worker runs libmicrohttpd on the inherited socket and opens its own
** limiter and policy on the shared store:
**   shm    (default) a memfd created by the master, inherited by the workers
**          ("shm:fd=N"); or "shm:name=/x" to share it with `sluice inspect`
**   lmdb   "lmdb:path=DIR", opened by every worker after fork
**   redis  "redis:nodes=127.0.0.1:7000"
** Jobs (reconcile, export) and ledger balances live in a MAP_SHARED mapping
** made before fork, so any worker answers for any job.  The master finishes
** jobs when their time is up and releases their leases; it forwards SIGTERM
** to the workers, waits for them and exits 0.
**
** Answers: every decision goes through sluice_decision_http_facts() and the
** sluice_http renderer, so headers and problem bodies are the library's.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conn_guard.h"
#include "http_strict.h"
#include "lazy_store.h"
#include "realip.h"
#include "secret_file.h"
#include "sluice.h"

#define S_NS INT64_C(1000000000)
#define MS_NS INT64_C(1000000)
#define MAX_BODY 16384
#define MAX_WORKERS 64
#define MAX_CONNECTIONS 16384 /* per worker; RLIMIT_NOFILE is raised to fit */
#define ID_MAX 64

/* Exit codes: 0 clean shutdown, 2 usage, 3 system failure. */
enum { EX_OK = 0, EX_USAGE_ = 2, EX_RUNTIME = 3 };

/* ------------------------------------------------------ shared state --- */

enum { JOB_FREE = 0, JOB_RUNNING = 1, JOB_DONE = 2 };

typedef struct job {
  _Atomic int state;
  _Atomic uint64_t seq; /* job number; 0 while being written */
  int cls;              /* SLUICE_EP_RECONCILE or SLUICE_EP_EXPORT */
  int64_t created_ns, done_ns;
  uint64_t lease_id;
  char tenant[ID_MAX + 1], key[ID_MAX + 1], tier[SLUICE_POLICY_NAME_MAX + 1];
  char ledger[ID_MAX + 1];
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
  int64_t value;      /* entry id, or job number */
  int64_t amount;
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
  idem_slot idem[]; /* --idem-slots */
} shared;

/* ---------------------------------------------------------- config --- */

typedef struct api_key {
  char key[ID_MAX + 1], tenant[ID_MAX + 1], tier[SLUICE_POLICY_NAME_MAX + 1];
  char client_id[ID_MAX + 1], client_secret[ID_MAX + 1];
} api_key;

#define MAX_KEYS 256

typedef struct server {
  const char *store;      /* as given */
  char store_uri[512];    /* what workers open */
  const char *config_path;
  int port, nworkers, shadow, trust_forwarded, header_form;
  int64_t job_ms;
  long idem_slots, idem_ttl_s, per_ip, head_ms, body_ms;
  realip proxies; /* --trusted-proxies */
  sluice_backend lazy; /* the store, opened when it answers */
  sluice_webhook_options hooks; /* --webhook; each worker opens its sink */
  int nhooks;
  uint8_t secret[16];
  int nkeys;
  api_key keys[MAX_KEYS];
  int listen_fd, shm_fd;
  shared *sh;
  uint8_t hash_key[16];
  size_t shared_size;
  /* per process */
  conn_guard *guard;
  sluice_webhook *webhook;
  sluice_limiter *lim;
  sluice_policy *pol;
  sluice_http *http;
  _Atomic uint64_t reqno;
} server;

static server S;

static const api_key demo_keys[] = {
    {"sk_sandbox_demo", "demo-sandbox", "sandbox", "cli_sandbox",
     "secret-sandbox"},
    {"sk_growth_acme_1", "acme", "growth", "cli_acme_1", "secret-acme-1"},
    {"sk_growth_acme_2", "acme", "growth", "cli_acme_2", "secret-acme-2"},
    {"sk_enterprise_bank", "bigbank", "enterprise", "cli_bank",
     "secret-bank"},
};

static void usage(FILE *f) {
  fprintf(f,
      "usage: ledger-api [--port N] [--workers N] [--store STORE]\n"
      "                  [--config FILE] [--keys FILE] [--secret-file FILE]\n"
      "                  [--job-ms N] [--shadow] [--trust-forwarded]\n"
      "                  [--trusted-proxies LIST] [--header-form legacy|sf|both]\n"
      "                  [--idem-slots N] [--idem-ttl-s N] [--per-ip N]\n"
      "                  [--head-timeout-ms N] [--body-timeout-ms N]\n"
      "                  [--webhook EVENT=URL]...\n\n"
      "Serves the spec's ledger API on 127.0.0.1 with sluice enforcing it.\n"
      "  --port N         TCP port; 0 (default) picks a free one.  The first\n"
      "                   line on stdout is `listening 127.0.0.1:PORT`\n"
      "  --workers N      prefork worker processes (default 2, 1..64)\n"
      "  --store STORE    shm (default: a memfd shared by the workers),\n"
      "                   shm:name=/NAME, lmdb:path=DIR, redis:nodes=H:P\n"
      "  --config FILE    policy configuration (the defaults, commented, are\n"
      "                   installed as " SLUICE_CONF_PATH ")\n"
      "  --keys FILE      API keys, CSV: api_key,tenant,tier,client_id,"
      "client_secret\n"
      "                   (default: four demo keys, see docs/cli.md)\n"
      "  --secret-file F  16-byte scope-id secret as 32 hex digits (default:\n"
      "                   random per run; give one to use `sluice inspect`)\n"
      "  --job-ms N       how long a reconcile or export job runs (2000)\n"
      "  --shadow         decide and report everything, enforce nothing\n"
      "  --trust-forwarded  take the client IP from X-Forwarded-For: the\n"
      "                   rightmost address not in --trusted-proxies\n"
      "  --trusted-proxies LIST  addresses and networks (ADDR/BITS), comma-\n"
      "                   separated, whose X-Forwarded-For entries are\n"
      "                   believed (default 127.0.0.1,::1)\n"
      "  --header-form F  RateLimit header generation (default legacy)\n"
      "  --idem-slots N   Idempotency-Key records kept (default 65536); a\n"
      "                   POST that cannot be recorded is refused (503)\n"
      "  --idem-ttl-s N   how long a record is kept (default 86400)\n"
      "  --per-ip N       connections per client address and worker (64)\n"
      "  --head-timeout-ms N  time for a request's headers (10000)\n"
      "  --body-timeout-ms N  time for its body and answer (30000)\n"
      "  --webhook EVENT=URL  post policy events of that type (alert,\n"
      "                   edge_deny, ip_ban, suspend, page, ...) as JSON\n\n"
      "SIGTERM or SIGINT: the master stops the workers and exits 0.\n"
      "exit codes: 0 clean shutdown, 2 usage error, 3 system failure\n");
}

static int parse_int(const char *opt, const char *v, long lo, long hi,
                     long *out) {
  char *end;
  long x;
  errno = 0;
  x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    fprintf(stderr, "ledger-api: %s: expected an integer from %ld to %ld, "
                    "got '%s'\n", opt, lo, hi, v);
    return -1;
  }
  *out = x;
  return 0;
}

static int load_keys(const char *path) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int lineno = 0;
  if (!f) {
    fprintf(stderr, "ledger-api: --keys %s: %s\n", path, strerror(errno));
    return -1;
  }
  S.nkeys = 0;
  while (fgets(line, sizeof line, f)) {
    char *fld[5], *p = line;
    int n = 0;
    lineno++;
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0] || line[0] == '#')
      continue;
    while (n < 5) {
      fld[n++] = p;
      p = strchr(p, ',');
      if (!p)
        break;
      *p++ = 0;
    }
    if (n != 5 || p) {
      fprintf(stderr, "ledger-api: --keys %s:%d: expected 5 fields: "
                      "api_key,tenant,tier,client_id,client_secret\n",
              path, lineno);
      fclose(f);
      return -1;
    }
    if (S.nkeys == MAX_KEYS) {
      fprintf(stderr, "ledger-api: --keys %s: more than %d keys\n", path,
              MAX_KEYS);
      fclose(f);
      return -1;
    }
    {
      api_key *k = &S.keys[S.nkeys++];
      int i;
      for (i = 0; i < 5; i++)
        if (!fld[i][0] || strlen(fld[i]) > (i == 2 ? SLUICE_POLICY_NAME_MAX
                                                   : ID_MAX)) {
          fprintf(stderr, "ledger-api: --keys %s:%d: field %d is empty or "
                          "too long\n", path, lineno, i + 1);
          fclose(f);
          return -1;
        }
      snprintf(k->key, sizeof k->key, "%s", fld[0]);
      snprintf(k->tenant, sizeof k->tenant, "%s", fld[1]);
      snprintf(k->tier, sizeof k->tier, "%s", fld[2]);
      snprintf(k->client_id, sizeof k->client_id, "%s", fld[3]);
      snprintf(k->client_secret, sizeof k->client_secret, "%s", fld[4]);
    }
  }
  fclose(f);
  if (!S.nkeys) {
    fprintf(stderr, "ledger-api: --keys %s: no keys\n", path);
    return -1;
  }
  return 0;
}

/* ----------------------------------------------------------- helpers --- */

static int64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * S_NS + ts.tv_nsec;
}

static uint64_t hash2(const char *a, const char *b) {
  char buf[2 * ID_MAX + 300];
  int n = snprintf(buf, sizeof buf, "%s|%s", a, b);
  uint64_t h = sluice_siphash64(S.hash_key, buf,
                                (size_t)(n < (int)sizeof buf ? n : 0));
  return h ? h : 1;
}

static int valid_id(const char *s) {
  size_t i, n = s ? strlen(s) : 0;
  if (n == 0 || n > ID_MAX)
    return 0;
  for (i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
      return 0;
  }
  return 1;
}

static ledger_slot *ledger_find(const char *tenant, const char *ledger,
                                int create) {
  uint64_t h = hash2(tenant, ledger);
  size_t i;
  for (i = 0; i < NLEDGERS; i++) {
    ledger_slot *l = &S.sh->ledgers[(h + i) % NLEDGERS];
    uint64_t cur = atomic_load(&l->hash);
    if (cur == h)
      return l;
    if (cur == 0) {
      uint64_t zero = 0;
      if (!create)
        return NULL;
      if (atomic_compare_exchange_strong(&l->hash, &zero, h) || zero == h)
        return l;
    }
  }
  return NULL;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_seq(const unsigned char *s) {
  size_t n, i;
  uint32_t cp;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    n = 2, cp = s[0] & 0x1f;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    n = 3, cp = s[0] & 0x0f;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    n = 4, cp = s[0] & 0x07;
  else
    return 0;
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return n;
}

static int utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n;
  while (*p) {
    if (!(n = utf8_seq(p)))
      return 0;
    p += n;
  }
  return 1;
}

/* s with every byte that is not valid UTF-8 written as %XX, truncated to
** fit: a path that can go into a JSON string whatever the client sent. */
static void utf8_escape(const char *s, char *out, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0, k;
  while (*p) {
    k = utf8_seq(p);
    if (k && o + k < n) {
      memcpy(out + o, p, k);
      o += k;
      p += k;
    } else if (!k && o + 3 < n) {
      snprintf(out + o, 4, "%%%02X", *p++);
      o += 3;
    } else {
      break;
    }
  }
  out[o] = 0;
}

/* ------------------------------------------------------------ answers --- */

typedef struct reqctx {
  int started; /* the access handler has seen the headers */
  char *body;
  size_t len;
  http_strict_uri uri;
} reqctx;

static enum MHD_Result send_raw(struct MHD_Connection *c, int status,
                                const char *ctype, const char *body,
                                const sluice_http_header *h, size_t nh,
                                const char *location) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  enum MHD_Result ret;
  size_t i;
  int have_ctype = 0;
  if (!r)
    return MHD_NO;
  for (i = 0; i < nh; i++) {
    if (!strcasecmp(h[i].name, "Content-Type"))
      have_ctype = 1;
    MHD_add_response_header(r, h[i].name, h[i].value);
  }
  if (!have_ctype && ctype)
    MHD_add_response_header(r, "Content-Type", ctype);
  if (location && !MHD_get_response_header(r, "Location"))
    MHD_add_response_header(r, "Location", location);
  ret = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

/* A problem the server decides itself (400, 401, 404, 405, 413). */
static enum MHD_Result problem(struct MHD_Connection *c, int status,
                               const char *type, const char *title,
                               const char *detail, const char *instance) {
  char inst[512];
  json_t *o;
  utf8_escape(instance ? instance : "/", inst, sizeof inst);
  o = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", title,
                "status", status, "detail", detail, "instance", inst);
  char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
  enum MHD_Result r;
  json_decref(o);
  if (!txt)
    return MHD_NO;
  r = send_raw(c, status, "application/problem+json", txt, NULL, 0, NULL);
  free(txt);
  return r;
}

#define PROBLEM_BASE "https://api.example.com/errors/"

/* A refused heavy request names the job the client should poll instead
** of submitting again (spec section 7, rule 7): `job_id` and `job_url` in
** the problem and a Link header with rel="monitor" (RFC 5989). */
static enum MHD_Result send_refusal_with_job(struct MHD_Connection *c,
                                             int status, const char *body,
                                             sluice_http_header *h, size_t nh,
                                             const char *job_id) {
  char url[64], link[96];
  json_error_t e;
  json_t *o = json_loads(body, 0, &e);
  char *txt;
  enum MHD_Result r;
  snprintf(url, sizeof url, "/v1/jobs/%s", job_id);
  snprintf(link, sizeof link, "<%s>; rel=\"monitor\"", url);
  if (!o || json_object_set_new(o, "job_id", json_string(job_id)) ||
      json_object_set_new(o, "job_url", json_string(url)) ||
      !(txt = json_dumps(o, JSON_COMPACT))) {
    json_decref(o);
    return send_raw(c, status, "application/problem+json", body, h, nh, NULL);
  }
  json_decref(o);
  h[nh].name = "Link";
  h[nh].value = link;
  r = send_raw(c, status, "application/problem+json", txt, h, nh + 1, NULL);
  free(txt);
  return r;
}

/* Answer a policy decision: the library renders headers and, when refused,
** the problem body; an allowed answer gets `json` (status `ok_status`; 202
** with a Location for accepted jobs).  `job_id`: see above. */
static enum MHD_Result answer_job(struct MHD_Connection *c,
                                  const sluice_request *rq,
                                  const sluice_decision *d, int ok_status,
                                  const char *location, const char *json,
                                  const char *job_id) {
  sluice_http_facts f;
  sluice_http_answer a;
  sluice_http_header h[SLUICE_HTTP_MAX_HEADERS + 1];
  char hbuf[SLUICE_HTTP_HEADER_BUF], rid[40], body[4096];
  size_t nh = 0, blen = 0;
  snprintf(rid, sizeof rid, "req_%08x%08" PRIx64, (unsigned)getpid(),
           atomic_fetch_add(&S.reqno, 1));
  if (sluice_decision_http_facts(d, rq, rid, &f) != SLUICE_OK)
    return MHD_NO;
  if (d->allowed) {
    if (ok_status == 202) {
      f.outcome = SLUICE_HTTP_ACCEPTED;
      f.location = location;
    } else if (ok_status != 200) {
      f.status = ok_status;
    }
  }
  if (sluice_http_answer_make(S.http, &f, wall_ns(), &a) != SLUICE_OK ||
      sluice_http_answer_headers(S.http, &a, h, SLUICE_HTTP_MAX_HEADERS, &nh,
                                 hbuf, sizeof hbuf, NULL) != SLUICE_OK)
    return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                   "cannot render the answer", rq->route);
  if (d->allowed)
    return send_raw(c, a.status, "application/json", json ? json : "{}", h,
                    nh, location);
  if (a.has_body && sluice_http_answer_body(S.http, &a, body, sizeof body,
                                            &blen) != SLUICE_OK)
    return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                   "cannot render the problem", rq->route);
  if (job_id && a.has_body)
    return send_refusal_with_job(c, a.status, body, h, nh, job_id);
  return send_raw(c, a.status, "application/problem+json",
                  a.has_body ? body : "", h, nh, NULL);
}

static enum MHD_Result answer(struct MHD_Connection *c, const sluice_request *rq,
                              const sluice_decision *d, int ok_status,
                              const char *location, const char *json) {
  return answer_job(c, rq, d, ok_status, location, json, NULL);
}

/* ------------------------------------------------- shared-table lock --- */

static int shared_lock_init(void) {
  pthread_mutexattr_t a;
  int rc;
  if (pthread_mutexattr_init(&a))
    return -1;
  rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
       pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) ||
       pthread_mutex_init(&S.sh->idem_mu, &a);
  pthread_mutexattr_destroy(&a);
  return rc ? -1 : 0;
}

/* A worker that died holding the lock left at most one record pending:
** the tables stay usable. */
static void shared_lock(void) {
  if (pthread_mutex_lock(&S.sh->idem_mu) == EOWNERDEAD)
    pthread_mutex_consistent(&S.sh->idem_mu);
}

static void shared_unlock(void) { pthread_mutex_unlock(&S.sh->idem_mu); }

/* ------------------------------------------------------ access tokens --- */

#define TOKEN_TTL_S 3600

static uint64_t token_hash(const char *tok) {
  uint64_t h = sluice_siphash64(S.hash_key, tok, strlen(tok));
  return h ? h : 1;
}

/* A new opaque token for key k in out ("at_" and 32 hex digits); -1 when
** the table is full of live tokens or there is no randomness. */
static int token_issue(const api_key *k, char *out, size_t n) {
  uint8_t raw[16];
  uint64_t h;
  int64_t now = wall_ns();
  size_t i, o;
  int done = 0;
  if (n < 36 || sluice_random_bytes(raw, sizeof raw) != SLUICE_OK)
    return -1;
  o = (size_t)snprintf(out, n, "at_");
  for (i = 0; i < sizeof raw; i++)
    o += (size_t)snprintf(out + o, n - o, "%02x", raw[i]);
  h = token_hash(out);
  shared_lock();
  for (i = 0; i < PROBE && !done; i++) {
    token_slot *t = &S.sh->tokens[(h + i) % NTOKENS];
    if (t->hash == 0 || t->expires_ns <= now) {
      t->hash = h;
      t->key_index = (int)(k - S.keys);
      t->expires_ns = now + (int64_t)TOKEN_TTL_S * S_NS;
      done = 1;
    }
  }
  shared_unlock();
  return done ? 0 : -1;
}

static const api_key *token_find(const char *tok) {
  uint64_t h = token_hash(tok);
  int64_t now = wall_ns();
  const api_key *k = NULL;
  size_t i;
  shared_lock();
  for (i = 0; i < PROBE && !k; i++) {
    const token_slot *t = &S.sh->tokens[(h + i) % NTOKENS];
    if (t->hash == h && t->expires_ns > now)
      k = &S.keys[t->key_index];
  }
  shared_unlock();
  return k;
}

/* ---------------------------------------------------------- handlers --- */

/* An API key, or an access token from /v1/auth/token. */
static const api_key *authenticate(struct MHD_Connection *c) {
  const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                              MHD_HTTP_HEADER_AUTHORIZATION);
  int i;
  if (v && !strncasecmp(v, "Bearer ", 7))
    v += 7;
  else
    v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
  if (!v)
    return NULL;
  if (!strncmp(v, "at_", 3))
    return token_find(v);
  for (i = 0; i < S.nkeys; i++)
    if (!strcmp(S.keys[i].key, v))
      return &S.keys[i];
  return NULL;
}

static void client_ip(struct MHD_Connection *c, char *out, size_t n) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  char peer[INET6_ADDRSTRLEN] = "unknown";
  if (ci && ci->client_addr) {
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
      inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                peer, sizeof peer);
    else if (sa->sa_family == AF_INET6)
      inet_ntop(AF_INET6,
                &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                peer, sizeof peer);
  }
  realip_client(&S.proxies, peer,
                S.trust_forwarded ? MHD_lookup_connection_value(
                                        c, MHD_HEADER_KIND, "X-Forwarded-For")
                                  : NULL,
                out, n);
}

static json_t *parse_body(const reqctx *rc) {
  json_error_t e;
  if (!rc->len)
    return json_object();
  return json_loadb(rc->body, rc->len, 0, &e);
}

static char *dumps(json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return s;
}

static job *job_create(const api_key *k, int cls, const char *ledger,
                       uint64_t lease_id, uint64_t *seq_out) {
  uint64_t seq = atomic_fetch_add(&S.sh->next_job, 1) + 1;
  job *j = &S.sh->jobs[seq % NJOBS];
  int st = atomic_load(&j->state);
  /* A slot still running a job 4096 jobs ago: refuse rather than lose it. */
  if (st == JOB_RUNNING)
    return NULL;
  atomic_store(&j->seq, 0);
  j->cls = cls;
  j->created_ns = wall_ns();
  j->done_ns = j->created_ns + S.job_ms * MS_NS;
  j->lease_id = lease_id;
  snprintf(j->tenant, sizeof j->tenant, "%s", k->tenant);
  snprintf(j->key, sizeof j->key, "%s", k->key);
  snprintf(j->tier, sizeof j->tier, "%s", k->tier);
  snprintf(j->ledger, sizeof j->ledger, "%s", ledger ? ledger : "");
  atomic_store(&j->state, JOB_RUNNING);
  atomic_store(&j->seq, seq); /* publish */
  *seq_out = seq;
  return j;
}

static void job_request(const job *j, sluice_request *rq) {
  memset(rq, 0, sizeof *rq);
  rq->tenant_id = j->tenant;
  rq->api_key_id = j->key;
  rq->tier = j->tier;
  rq->endpoint_class = j->cls;
  rq->ledger_id = j->ledger[0] ? j->ledger : NULL;
}

/* ---------------------------------------------------- idempotency --- */

#define IDEM_PROBE 1024 /* slots a lookup may visit */

enum { IDEM_NEW, IDEM_REPLAY, IDEM_BUSY, IDEM_MISMATCH, IDEM_FULL };

/* The record's name: tenant, endpoint ('e' entries, 'r' reconcile), key. */
static uint64_t idem_hash(const api_key *k, char endpoint, const char *ik) {
  char buf[256];
  snprintf(buf, sizeof buf, "%c:%s", endpoint, ik);
  return hash2(k->tenant, buf);
}

static int idem_live(const idem_slot *s, int64_t now) {
  return s->created_ns != 0 && now - s->created_ns < S.idem_ttl_s * S_NS;
}

/* Find the record (h): IDEM_REPLAY with *out a copy, IDEM_BUSY while its
** first request is still being applied, IDEM_MISMATCH when it asked for
** something else (body hash bh).  Otherwise claim a slot for it, pending,
** and return IDEM_NEW with *index, or IDEM_FULL when every slot it may
** use holds a live record: then the request must not be applied. */
static int idem_begin(uint64_t h, uint64_t bh, idem_slot *out,
                      size_t *index) {
  int64_t now = wall_ns();
  size_t i, n = S.sh->nidem, probe = n < IDEM_PROBE ? n : IDEM_PROBE,
            reuse = SIZE_MAX;
  int rc = IDEM_FULL;
  shared_lock();
  for (i = 0; i < probe; i++) {
    size_t at = (h + i) % n;
    idem_slot *s = &S.sh->idem[at];
    if (s->hash == h && idem_live(s, now)) {
      *out = *s;
      rc = s->body_hash != bh            ? IDEM_MISMATCH
           : s->state == IDEM_PENDING ? IDEM_BUSY
                                      : IDEM_REPLAY;
      break;
    }
    if (reuse == SIZE_MAX && !idem_live(s, now))
      reuse = at;
    if (s->hash == 0) /* never used: the probe chain ends here */
      break;
  }
  if (rc == IDEM_FULL && reuse != SIZE_MAX) {
    idem_slot *s = &S.sh->idem[reuse];
    s->hash = h;
    s->body_hash = bh;
    s->created_ns = now;
    s->state = IDEM_PENDING;
    s->value = s->amount = 0;
    *index = reuse;
    rc = IDEM_NEW;
  }
  shared_unlock();
  return rc;
}

/* The request was applied: replays answer with value and amount. */
static void idem_done(size_t index, int64_t value, int64_t amount) {
  shared_lock();
  S.sh->idem[index].value = value;
  S.sh->idem[index].amount = amount;
  S.sh->idem[index].state = IDEM_DONE;
  shared_unlock();
}

/* The request was not applied (refused): the key is free again. */
static void idem_abandon(size_t index) {
  shared_lock();
  S.sh->idem[index].created_ns = 0;
  S.sh->idem[index].state = IDEM_FREE;
  shared_unlock();
}

/* The answer for a key that is busy, reused or cannot be recorded. */
static enum MHD_Result idem_refusal(struct MHD_Connection *c, int rc,
                                    const char *url) {
  if (rc == IDEM_MISMATCH)
    return problem(c, 422, PROBLEM_BASE "idempotency-key-reused",
                   "Unprocessable Content",
                   "this Idempotency-Key was used with a different request",
                   url);
  if (rc == IDEM_BUSY)
    return problem(c, 409, PROBLEM_BASE "idempotency-key-in-use", "Conflict",
                   "a request with this Idempotency-Key is still being "
                   "processed; retry later", url);
  return problem(c, 503, PROBLEM_BASE "idempotency-table-full",
                 "Service Unavailable",
                 "the request cannot be recorded for idempotent retries, so "
                 "it was not applied; retry later", url);
}

/* The newest running job of the tenant's class (and ledger), for a client
** refused with 409 or a concurrency 429 to poll. */
static int running_job(const char *tenant, int cls, const char *ledger,
                       char *out, size_t n) {
  uint64_t best = 0;
  size_t i;
  for (i = 0; i < NJOBS; i++) {
    const job *j = &S.sh->jobs[i];
    uint64_t seq = atomic_load(&j->seq);
    if (seq > best && atomic_load(&j->state) == JOB_RUNNING &&
        j->cls == cls && !strcmp(j->tenant, tenant) &&
        (!ledger || !strcmp(j->ledger, ledger)))
      best = seq;
  }
  if (!best)
    return 0;
  snprintf(out, n, "job_%" PRIu64, best);
  return 1;
}

/* Parse YYYY-MM-DD into ns since the epoch. */
static int parse_day(const char *s, int64_t *out) {
  int y, m, d;
  char tail;
  struct tm tm;
  time_t t;
  if (!s || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3 || y < 1970 ||
      m < 1 || m > 12 || d < 1 || d > 31)
    return -1;
  memset(&tm, 0, sizeof tm);
  tm.tm_year = y - 1900;
  tm.tm_mon = m - 1;
  tm.tm_mday = d;
  t = timegm(&tm);
  /* int64 ns end on 2262-04-11: later days do not fit */
  if (t == (time_t)-1 || t > INT64_MAX / S_NS)
    return -1;
  *out = (int64_t)t * S_NS;
  return 0;
}

static enum MHD_Result decide_error(struct MHD_Connection *c, int rc,
                                    const sluice_decision *d,
                                    const char *url) {
  char detail[200];
  snprintf(detail, sizeof detail, "request field '%s': %s",
           d->invalid_field ? d->invalid_field : "?", sluice_strerror(rc));
  if (rc == SLUICE_ENOTFOUND || rc == SLUICE_EINVAL || rc == SLUICE_EKEY ||
      rc == SLUICE_ERANGE)
    return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request", detail,
                   url);
  return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                 detail, url);
}

/* One field of an application/x-www-form-urlencoded body, decoded. */
static int form_field(const reqctx *rc, const char *name, char *out,
                      size_t n) {
  size_t nl = strlen(name), i = 0;
  const char *b = rc->body;
  if (!b)
    return -1;
  while (i < rc->len) {
    size_t end = i;
    while (end < rc->len && b[end] != '&')
      end++;
    if (end - i > nl && !memcmp(b + i, name, nl) && b[i + nl] == '=') {
      size_t j = i + nl + 1, o = 0;
      while (j < end && o + 1 < n) {
        int h, l;
        if (b[j] == '+') {
          out[o++] = ' ';
          j++;
        } else if (b[j] == '%' && j + 2 < end + 1 &&
                   (h = ex_hex_digit(b[j + 1])) >= 0 && (l = ex_hex_digit(b[j + 2])) >= 0) {
          out[o++] = (char)(h * 16 + l);
          j += 3;
        } else {
          out[o++] = b[j++];
        }
      }
      out[o] = 0;
      return j == end ? 0 : -1;
    }
    i = end + 1;
  }
  return -1;
}

static enum MHD_Result handle_auth(struct MHD_Connection *c, const char *url,
                                   reqctx *rc, const char *ip) {
  sluice_request rq;
  sluice_decision d;
  const char *cid = NULL, *csec = NULL;
  char fcid[ID_MAX + 2], fsec[ID_MAX + 2];
  json_t *body = NULL;
  const api_key *k = NULL;
  int i, r, ok;
  enum MHD_Result ret;
  const char *ctype =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
  if (ctype && strstr(ctype, "json")) {
    body = parse_body(rc);
    if (!body || !json_is_object(body)) {
      json_decref(body);
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                     "the body is not a JSON object", url);
    }
    cid = json_string_value(json_object_get(body, "client_id"));
    csec = json_string_value(json_object_get(body, "client_secret"));
  } else {
    if (form_field(rc, "client_id", fcid, sizeof fcid) == 0)
      cid = fcid;
    if (form_field(rc, "client_secret", fsec, sizeof fsec) == 0)
      csec = fsec;
  }
  if (!cid || !cid[0] || !csec || strlen(cid) > ID_MAX) {
    json_decref(body);
    return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                   "client_id and client_secret are required", url);
  }
  memset(&rq, 0, sizeof rq);
  rq.method = "POST";
  rq.route = url;
  rq.endpoint_class = SLUICE_EP_AUTH;
  rq.client_ip = ip;
  rq.auth_subject = cid;
  rq.auth_result = SLUICE_AUTH_PENDING;
  /* Box check before verifying: a boxed caller costs no secret check. */
  if ((r = sluice_policy_decide(S.pol, &rq, &d)) != SLUICE_OK) {
    ret = decide_error(c, r, &d, url);
    json_decref(body);
    return ret;
  }
  if (!d.allowed) {
    ret = answer(c, &rq, &d, 200, NULL, NULL);
    json_decref(body);
    return ret;
  }
  for (i = 0; i < S.nkeys; i++)
    if (!strcmp(S.keys[i].client_id, cid))
      k = &S.keys[i];
  /* Both failure kinds are checked the same way and answered alike. */
  ok = k && strcmp(k->client_secret, csec) == 0;
  rq.auth_result = !k ? SLUICE_AUTH_UNKNOWN_CLIENT
                      : ok ? SLUICE_AUTH_OK : SLUICE_AUTH_BAD_SECRET;
  if ((r = sluice_policy_decide(S.pol, &rq, &d)) != SLUICE_OK) {
    ret = decide_error(c, r, &d, url);
    json_decref(body);
    return ret;
  }
  if (!ok) {
    ret = problem(c, 401, PROBLEM_BASE "invalid-client", "Unauthorized",
                  "invalid client credentials", url);
  } else {
    char tok[40], *txt;
    if (token_issue(k, tok, sizeof tok) != 0) {
      json_decref(body);
      return problem(c, 503, PROBLEM_BASE "service-unavailable",
                     "Service Unavailable", "cannot issue a token now", url);
    }
    txt = dumps(json_pack("{s:s, s:s, s:i}", "access_token", tok,
                          "token_type", "Bearer", "expires_in", TOKEN_TTL_S));
    ret = answer(c, &rq, &d, 200, NULL, txt);
    free(txt);
  }
  json_decref(body);
  return ret;
}

static enum MHD_Result handle_job(struct MHD_Connection *c, const char *url,
                                  const api_key *k, sluice_request *rq) {
  sluice_decision d;
  const char *id = url + strlen("/v1/jobs/");
  char *end;
  uint64_t seq;
  job *j;
  char *txt;
  int r, st;
  enum MHD_Result ret;
  rq->endpoint_class = SLUICE_EP_JOB_POLL;
  if ((r = sluice_policy_decide(S.pol, rq, &d)) != SLUICE_OK)
    return decide_error(c, r, &d, url);
  if (!d.allowed)
    return answer(c, rq, &d, 200, NULL, NULL);
  if (strncmp(id, "job_", 4) != 0)
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such job", url);
  errno = 0;
  seq = strtoull(id + 4, &end, 10);
  if (errno || *end || seq == 0)
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such job", url);
  j = &S.sh->jobs[seq % NJOBS];
  if (atomic_load(&j->seq) != seq || strcmp(j->tenant, k->tenant) != 0)
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such job", url);
  st = atomic_load(&j->state);
  if (st == JOB_DONE && j->cls == SLUICE_EP_EXPORT) {
    char dl[200];
    snprintf(dl, sizeof dl,
             "https://storage.example.com/exports/job_%" PRIu64
             ".csv?expires=600&sig=demo", seq);
    txt = dumps(json_pack("{s:s, s:s, s:s, s:s}", "job_id", id, "kind",
                          "audit-export", "status", "succeeded",
                          "download_url", dl));
  } else {
    txt = dumps(json_pack("{s:s, s:s, s:s, s:s}", "job_id", id, "kind",
                          j->cls == SLUICE_EP_RECONCILE ? "reconcile"
                                                        : "audit-export",
                          "status", st == JOB_DONE ? "succeeded" : "running",
                          "ledger_id", j->ledger));
  }
  ret = answer(c, rq, &d, 200, NULL, txt);
  free(txt);
  return ret;
}

/* The answer to a reconcile retried with its Idempotency-Key: the job
** the first request started.  Costs what a poll of the job costs. */
static enum MHD_Result reconcile_replay(struct MHD_Connection *c,
                                        const char *url, sluice_request *rq,
                                        const idem_slot *rec,
                                        const char *ledger) {
  sluice_decision d;
  sluice_request poll = *rq;
  char jid[32], loc[64], *txt;
  enum MHD_Result ret;
  int r;
  poll.endpoint_class = SLUICE_EP_JOB_POLL;
  poll.ledger_id = NULL;
  if ((r = sluice_policy_decide(S.pol, &poll, &d)) != SLUICE_OK)
    return decide_error(c, r, &d, url);
  if (!d.allowed)
    return answer(c, &poll, &d, 200, NULL, NULL);
  snprintf(jid, sizeof jid, "job_%" PRId64, rec->value);
  snprintf(loc, sizeof loc, "/v1/jobs/%s", jid);
  txt = dumps(json_pack("{s:s, s:s, s:s, s:b}", "job_id", jid, "ledger_id",
                        ledger, "job_url", loc, "idempotent_replay", 1));
  ret = answer(c, &poll, &d, 202, loc, txt);
  free(txt);
  return ret;
}

static enum MHD_Result handle_heavy(struct MHD_Connection *c, const char *url,
                                    const api_key *k, sluice_request *rq,
                                    reqctx *rc) {
  sluice_decision d;
  char ledger[ID_MAX + 1] = "", loc[64], jid[32];
  uint64_t seq = 0;
  size_t slot = 0;
  int r, is_rec = rq->endpoint_class == SLUICE_EP_RECONCILE;
  char *txt;
  enum MHD_Result ret;
  if (is_rec) {
    json_t *b = parse_body(rc);
    const char *l, *ik;
    idem_slot rec;
    if (!b || !json_is_object(b)) {
      json_decref(b);
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                     "the body is not a JSON object", url);
    }
    l = json_string_value(json_object_get(b, "ledger_id"));
    if (!valid_id(l)) {
      json_decref(b);
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                     "ledger_id: required, 1-64 of [A-Za-z0-9._-]", url);
    }
    snprintf(ledger, sizeof ledger, "%s", l);
    json_decref(b);
    ik = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
    if (!ik || !ik[0] || strlen(ik) > 200)
      return problem(c, 400, PROBLEM_BASE "idempotency-key-required",
                     "Bad Request",
                     "POST /v1/ledgers/reconcile requires an Idempotency-Key "
                     "header (1-200 bytes)", url);
    rq->ledger_id = ledger;
    r = idem_begin(idem_hash(k, 'r', ik), hash2("reconcile", ledger), &rec,
                   &slot);
    if (r == IDEM_REPLAY)
      return reconcile_replay(c, url, rq, &rec, ledger);
    if (r != IDEM_NEW)
      return idem_refusal(c, r, url);
  } else {
    const char *from =
        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from");
    const char *to = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "to");
    if (from || to) {
      if (parse_day(from, &rq->export_from_ns) ||
          parse_day(to, &rq->export_to_ns) ||
          rq->export_to_ns < rq->export_from_ns)
        return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                       "from and to: YYYY-MM-DD up to 2262-04-11, from <= to",
                       url);
    }
  }
  if ((r = sluice_policy_decide(S.pol, rq, &d)) != SLUICE_OK) {
    if (is_rec)
      idem_abandon(slot);
    return decide_error(c, r, &d, url);
  }
  if (!d.allowed) {
    char busy[32];
    int hint = (d.outcome == SLUICE_OUTCOME_CONFLICT ||
                d.outcome == SLUICE_OUTCOME_CONCURRENCY) &&
               running_job(k->tenant, rq->endpoint_class,
                           d.outcome == SLUICE_OUTCOME_CONFLICT ? ledger : NULL,
                           busy, sizeof busy);
    if (is_rec)
      idem_abandon(slot);
    return answer_job(c, rq, &d, 200, NULL, NULL, hint ? busy : NULL);
  }
  if (!job_create(k, rq->endpoint_class, is_rec ? ledger : NULL, d.lease_id,
                  &seq)) {
    if (d.lease_id)
      sluice_policy_release_lease(S.pol, rq, d.lease_id);
    if (is_rec)
      idem_abandon(slot);
    return problem(c, 503, PROBLEM_BASE "service-unavailable",
                   "Service Unavailable", "job table full", url);
  }
  if (is_rec)
    idem_done(slot, (int64_t)seq, 0);
  snprintf(jid, sizeof jid, "job_%" PRIu64, seq);
  snprintf(loc, sizeof loc, "/v1/jobs/%s", jid);
  if (is_rec)
    txt = dumps(json_pack("{s:s, s:s, s:s, s:s}", "job_id", jid, "status",
                          "running", "ledger_id", ledger, "job_url", loc));
  else
    txt = dumps(json_pack("{s:s, s:s, s:I, s:s}", "job_id", jid, "status",
                          "running", "cost", (json_int_t)d.cost, "job_url",
                          loc));
  ret = answer(c, rq, &d, 202, loc, txt);
  free(txt);
  return ret;
}

#define AMOUNT_MAX INT64_C(1000000000000000000) /* 10^18 minor units */

/* Add amount to the ledger's balance unless the sum would overflow. */
static int balance_add(ledger_slot *l, int64_t amount) {
  int64_t cur = atomic_load(&l->balance);
  do {
    if (cur > INT64_MAX - amount)
      return -1;
  } while (!atomic_compare_exchange_weak(&l->balance, &cur, cur + amount));
  return 0;
}

/* POST /v1/ledgers/{id}/entries: applied once per Idempotency-Key. */
static enum MHD_Result post_entry(struct MHD_Connection *c, const char *url,
                                  const api_key *k, sluice_request *rq,
                                  reqctx *rc, const char *ledger) {
  json_t *b = parse_body(rc);
  json_t *amt = b ? json_object_get(b, "amount") : NULL;
  const char *ik =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
  json_int_t amount = amt && json_is_integer(amt) ? json_integer_value(amt) : 0;
  sluice_decision d;
  idem_slot rec;
  ledger_slot *l;
  size_t slot;
  int64_t entry;
  char what[ID_MAX + 32], *txt;
  int r, replay = 0;
  enum MHD_Result ret;
  int ok = b && json_is_object(b) && amount >= 1 && amount <= AMOUNT_MAX;
  json_decref(b);
  if (!ok)
    return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                   "body: a JSON object with an integer amount from 1 to "
                   "10^18", url);
  if (!ik || !ik[0] || strlen(ik) > 200)
    return problem(c, 400, PROBLEM_BASE "idempotency-key-required",
                   "Bad Request",
                   "mutating requests require an Idempotency-Key header "
                   "(1-200 bytes)", url);
  snprintf(what, sizeof what, "%s|%" PRId64, ledger, (int64_t)amount);
  r = idem_begin(idem_hash(k, 'e', ik), hash2("entry", what), &rec, &slot);
  if (r != IDEM_NEW && r != IDEM_REPLAY)
    return idem_refusal(c, r, url);
  replay = r == IDEM_REPLAY;
  if ((r = sluice_policy_decide(S.pol, rq, &d)) != SLUICE_OK) {
    if (!replay)
      idem_abandon(slot);
    return decide_error(c, r, &d, url);
  }
  if (!d.allowed) {
    if (!replay)
      idem_abandon(slot);
    return answer(c, rq, &d, 200, NULL, NULL);
  }
  if (replay) {
    entry = rec.value;
  } else {
    if (!(l = ledger_find(k->tenant, ledger, 1))) {
      idem_abandon(slot);
      return problem(c, 503, PROBLEM_BASE "service-unavailable",
                     "Service Unavailable", "ledger table full", url);
    }
    if (balance_add(l, (int64_t)amount) != 0) {
      idem_abandon(slot);
      return problem(c, 422, PROBLEM_BASE "balance-overflow",
                     "Unprocessable Content",
                     "the entry would overflow the ledger's balance", url);
    }
    entry = (int64_t)atomic_fetch_add(&S.sh->next_entry, 1) + 1;
    atomic_fetch_add(&l->entries, 1);
    idem_done(slot, entry, (int64_t)amount);
  }
  txt = dumps(json_pack("{s:s, s:I, s:I, s:b}", "ledger_id", ledger,
                        "entry_id", (json_int_t)entry, "amount", amount,
                        "idempotent_replay", replay));
  ret = answer(c, rq, &d, replay ? 200 : 201, NULL, txt);
  free(txt);
  return ret;
}

static enum MHD_Result handle_ledger(struct MHD_Connection *c, const char *url,
                                     const char *method, const api_key *k,
                                     sluice_request *rq, reqctx *rc) {
  /* /v1/ledgers/{id} or /v1/ledgers/{id}/entries */
  char ledger[ID_MAX + 1];
  const char *p = url + strlen("/v1/ledgers/"), *slash = strchr(p, '/');
  size_t n = slash ? (size_t)(slash - p) : strlen(p);
  int entries = slash && !strcmp(slash, "/entries");
  int post = !strcmp(method, "POST");
  sluice_decision d;
  ledger_slot *l;
  char *txt;
  int r;
  enum MHD_Result ret;
  if (n == 0 || n > ID_MAX || (slash && !entries))
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such resource", url);
  memcpy(ledger, p, n);
  ledger[n] = 0;
  if (!valid_id(ledger))
    return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                   "ledger id: 1-64 of [A-Za-z0-9._-]", url);
  if (post && !entries)
    return problem(c, 405, PROBLEM_BASE "method-not-allowed",
                   "Method Not Allowed", "POST the entries collection", url);
  if (strcmp(method, "GET") && !post)
    return problem(c, 405, PROBLEM_BASE "method-not-allowed",
                   "Method Not Allowed", "GET or POST", url);
  if (post)
    return post_entry(c, url, k, rq, rc, ledger);
  if ((r = sluice_policy_decide(S.pol, rq, &d)) != SLUICE_OK)
    return decide_error(c, r, &d, url);
  if (!d.allowed)
    return answer(c, rq, &d, 200, NULL, NULL);
  l = ledger_find(k->tenant, ledger, 0);
  txt = dumps(json_pack("{s:s, s:I, s:I}", "ledger_id", ledger, "entries",
                        (json_int_t)(l ? atomic_load(&l->entries) : 0),
                        "balance",
                        (json_int_t)(l ? atomic_load(&l->balance) : 0)));
  ret = answer(c, rq, &d, 200, NULL, txt);
  free(txt);
  return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  reqctx *rc = *con_cls;
  const api_key *k;
  sluice_request rq;
  char ip[64];
  (void)cls;
  if (!rc)
    return MHD_NO; /* on_uri made it; NULL: out of memory */
  if (!rc->started) {
    const char *why = http_strict_check(c, &rc->uri, method, version), *cl;
    rc->started = 1;
    conn_guard_head_done(S.guard, c);
    if (why)
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request", why,
                     url);
    if (!utf8_valid(url))
      return problem(c, 400, PROBLEM_BASE "bad-request", "Bad Request",
                     "the path is not valid UTF-8", url);
    /* Refused before a byte of it is read (the connection then closes). */
    cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > MAX_BODY)
      return problem(c, 413, PROBLEM_BASE "too-large", "Content Too Large",
                     "bodies are limited to 16 KiB", url);
    return MHD_YES;
  }
  if (*upload_size) {
    char *nb;
    if (rc->len + *upload_size > MAX_BODY)
      return MHD_NO; /* chunked, over the limit: stop reading, close */
    if (!(nb = realloc(rc->body, rc->len + *upload_size + 1)))
      return MHD_NO;
    rc->body = nb;
    memcpy(rc->body + rc->len, upload, *upload_size);
    rc->len += *upload_size;
    rc->body[rc->len] = 0;
    *upload_size = 0;
    return MHD_YES;
  }
  client_ip(c, ip, sizeof ip);
  if (!strcmp(url, "/metrics") && !strcmp(method, "GET")) {
    size_t need = 0;
    char *buf;
    enum MHD_Result ret;
    /* Measure, then render (counters may grow in between: retry once). */
    if (sluice_policy_metrics(S.pol, NULL, 0, &need) != SLUICE_OK ||
        !(buf = malloc(need + 4096)))
      return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                     "cannot render metrics", url);
    if (sluice_policy_metrics(S.pol, buf, need + 4096, &need) != SLUICE_OK) {
      free(buf);
      return problem(c, 500, PROBLEM_BASE "internal", "Internal Server Error",
                     "cannot render metrics", url);
    }
    /* the sink's counters fit in what is left (a few hundred bytes) */
    if (S.webhook)
      sluice_webhook_metrics(S.webhook, buf + need, 4096, NULL);
    ret = send_raw(c, 200, "text/plain; version=0.0.4", buf, NULL, 0, NULL);
    free(buf);
    return ret;
  }
  if (!strcmp(url, "/v1/auth/token")) {
    if (strcmp(method, "POST"))
      return problem(c, 405, PROBLEM_BASE "method-not-allowed",
                     "Method Not Allowed", "POST only", url);
    return handle_auth(c, url, rc, ip);
  }
  if (strncmp(url, "/v1/", 4) != 0)
    return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                   "no such resource", url);
  k = authenticate(c);
  if (!k)
    return problem(c, 401, PROBLEM_BASE "unauthorized", "Unauthorized",
                   "send an API key: Authorization: Bearer KEY", url);
  memset(&rq, 0, sizeof rq);
  rq.tenant_id = k->tenant;
  rq.api_key_id = k->key;
  rq.tier = k->tier;
  rq.method = method;
  rq.route = url;
  rq.client_ip = ip;
  if (!strcmp(url, "/v1/ledgers/reconcile")) {
    if (strcmp(method, "POST"))
      return problem(c, 405, PROBLEM_BASE "method-not-allowed",
                     "Method Not Allowed", "POST only", url);
    rq.endpoint_class = SLUICE_EP_RECONCILE;
    return handle_heavy(c, url, k, &rq, rc);
  }
  if (!strcmp(url, "/v1/reports/audit-export")) {
    if (strcmp(method, "GET"))
      return problem(c, 405, PROBLEM_BASE "method-not-allowed",
                     "Method Not Allowed", "GET only", url);
    rq.endpoint_class = SLUICE_EP_EXPORT;
    return handle_heavy(c, url, k, &rq, rc);
  }
  if (!strncmp(url, "/v1/jobs/", 9)) {
    if (strcmp(method, "GET"))
      return problem(c, 405, PROBLEM_BASE "method-not-allowed",
                     "Method Not Allowed", "GET only", url);
    return handle_job(c, url, k, &rq);
  }
  if (!strncmp(url, "/v1/ledgers/", 12)) {
    rq.endpoint_class = SLUICE_EP_STANDARD;
    return handle_ledger(c, url, method, k, &rq, rc);
  }
  return problem(c, 404, PROBLEM_BASE "not-found", "Not Found",
                 "no such resource", url);
}

/* Every request starts here (URI log callback), with its raw target. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
  reqctx *rc = calloc(1, sizeof *rc);
  (void)cls;
  (void)c;
  if (rc)
    http_strict_uri_seen(&rc->uri, uri);
  return rc;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  reqctx *rc = *con_cls;
  (void)cls;
  (void)toe;
  conn_guard_request_done(S.guard, c);
  if (rc) {
    free(rc->body);
    free(rc);
    *con_cls = NULL;
  }
}

/* ------------------------------------------------------- processes --- */

static int open_policy(const char *who) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_http_options ho;
  char err[256];
  int rc;
  memset(&lo, 0, sizeof lo);
  lo.store = "lazy";
  lo.backend = &S.lazy; /* S.store_uri, opened when it answers */
  lo.flags = SLUICE_OPEN_CREATE;
  rc = sluice_limiter_open2(&lo, &S.lim, err, sizeof err);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "ledger-api %s: --store %s: %s%s%s\n", who, S.store,
            sluice_strerror(rc), err[0] ? ": " : "", err);
    return -1;
  }
  memset(&po, 0, sizeof po);
  po.limiter = S.lim;
  po.config_path = S.config_path;
  memcpy(po.secret, S.secret, 16);
  po.flags = S.shadow ? SLUICE_POLICY_SHADOW : 0;
  if (S.webhook) {
    po.on_event = sluice_webhook_on_event;
    po.userdata = S.webhook;
  }
  po.errbuf = err;
  po.errlen = sizeof err;
  rc = sluice_policy_open(&po, &S.pol);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "ledger-api %s: --config %s: %s\n", who,
            S.config_path ? S.config_path : "(defaults)", err);
    return -1;
  }
  memset(&ho, 0, sizeof ho);
  ho.problem_base = PROBLEM_BASE;
  ho.header_form = S.header_form;
  ho.flags = SLUICE_HTTP_DATE_HEADER;
  rc = sluice_http_open(&ho, &S.http);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "ledger-api %s: http: %s\n", who, sluice_strerror(rc));
    return -1;
  }
  return 0;
}

static void close_policy(void) {
  sluice_http_close(S.http);
  sluice_policy_close(S.pol);
  sluice_limiter_close(S.lim);
  S.http = NULL;
  S.pol = NULL;
  S.lim = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  fprintf(stderr, "ledger-api worker %d: ", (int)getpid());
  vfprintf(stderr, fmt, ap);
}

static int worker_main(void) {
  struct MHD_Daemon *d;
  sigset_t set;
  int sig, rc;
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1)
    return EX_RUNTIME;
  /* After fork: the sink's thread belongs to this process. */
  if (S.nhooks && (rc = sluice_webhook_open(&S.hooks, &S.webhook)) != 0) {
    fprintf(stderr, "ledger-api worker %d: --webhook: %s\n", (int)getpid(),
            sluice_strerror(rc));
    return EX_RUNTIME;
  }
  if (open_policy("worker") != 0) {
    sluice_webhook_close(S.webhook);
    return EX_RUNTIME;
  }
  if (!(S.guard = conn_guard_start(S.head_ms, S.body_ms))) {
    close_policy();
    return EX_RUNTIME;
  }
  /* epoll: no FD_SETSIZE ceiling on connections.  Per-address limit: one
  ** client cannot take every connection.  The idle timeout stays as a
  ** backstop; the guard's deadlines do not restart on every byte. */
  d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0,
                       NULL, NULL, on_request, NULL,
                       MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                       MHD_OPTION_LISTEN_SOCKET, S.listen_fd,
                       MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
                       MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                       MHD_OPTION_NOTIFY_CONNECTION, conn_guard_notify,
                       S.guard,
                       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                       MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
                       MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)S.per_ip,
                       MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
                       MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "ledger-api worker %d: cannot start the HTTP server\n",
            (int)getpid());
    conn_guard_stop(S.guard);
    close_policy();
    return EX_RUNTIME;
  }
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigwait(&set, &sig);
  MHD_stop_daemon(d);
  conn_guard_stop(S.guard);
  close_policy();
  sluice_webhook_close(S.webhook);
  return EX_OK;
}

static pid_t spawn_worker(void) {
  pid_t pid = fork();
  if (pid == 0) {
    int rc = worker_main();
    fflush(stderr);
    _exit(rc);
  }
  return pid;
}

/* The master finishes jobs whose time is up and releases their leases. */
static void finish_jobs(void) {
  int64_t now = wall_ns();
  size_t i;
  for (i = 0; i < NJOBS; i++) {
    job *j = &S.sh->jobs[i];
    sluice_request rq;
    if (atomic_load(&j->state) != JOB_RUNNING || atomic_load(&j->seq) == 0 ||
        j->done_ns > now)
      continue;
    job_request(j, &rq);
    if (j->lease_id)
      sluice_policy_release_lease(S.pol, &rq, j->lease_id);
    atomic_store(&j->state, JOB_DONE);
  }
}

/* --webhook EVENT=URL: EVENT as sluice_event_name() spells it. */
static int add_webhook(const char *arg) {
  const char *eq = strchr(arg, '=');
  int t;
  for (t = 1; eq && t < SLUICE_EVENT__COUNT; t++) {
    const char *name = sluice_event_name(t);
    if (strlen(name) == (size_t)(eq - arg) &&
        !strncmp(arg, name, (size_t)(eq - arg)) &&
        (!strncmp(eq + 1, "http://", 7) || !strncmp(eq + 1, "https://", 8))) {
      S.hooks.url[t] = eq + 1;
      S.nhooks++;
      return 0;
    }
  }
  fprintf(stderr, "ledger-api: --webhook: expected EVENT=http(s)://..., "
                  "EVENT one of alert, edge_deny, ip_ban, suspend, page, "
                  "box_trip, stuffing, ...; got '%s'\n", arg);
  return -1;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {
      {"port", required_argument, 0, 'p'},
      {"workers", required_argument, 0, 'w'},
      {"store", required_argument, 0, 's'},
      {"config", required_argument, 0, 'c'},
      {"keys", required_argument, 0, 'k'},
      {"secret-file", required_argument, 0, 'S'},
      {"job-ms", required_argument, 0, 'j'},
      {"shadow", no_argument, 0, 'H'},
      {"trust-forwarded", no_argument, 0, 'F'},
      {"header-form", required_argument, 0, 'f'},
      {"trusted-proxies", required_argument, 0, 'T'},
      {"idem-slots", required_argument, 0, 'I'},
      {"idem-ttl-s", required_argument, 0, 'L'},
      {"per-ip", required_argument, 0, 'P'},
      {"head-timeout-ms", required_argument, 0, 'D'},
      {"body-timeout-ms", required_argument, 0, 'B'},
      {"webhook", required_argument, 0, 'W'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *keys_path = NULL, *secret_path = NULL;
  const char *proxies = "127.0.0.1,::1";
  pid_t workers[MAX_WORKERS];
  int64_t respawn_at[MAX_WORKERS], backoff_ms = 0;
  struct rlimit nofile;
  char perr[160];
  struct sockaddr_in sa;
  socklen_t salen = sizeof sa;
  sigset_t set;
  long v;
  int c, i, one = 1, running = 1, exit_code = EX_OK;

  memset(&S, 0, sizeof S);
  S.store = "shm";
  S.nworkers = 2;
  S.job_ms = 2000;
  S.shm_fd = -1;
  S.idem_slots = 65536;
  S.idem_ttl_s = 86400;
  S.per_ip = 64;
  S.head_ms = 10000;
  S.body_ms = 30000;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'p':
      if (parse_int("--port", optarg, 0, 65535, &v))
        return EX_USAGE_;
      S.port = (int)v;
      break;
    case 'w':
      if (parse_int("--workers", optarg, 1, MAX_WORKERS, &v))
        return EX_USAGE_;
      S.nworkers = (int)v;
      break;
    case 's':
      S.store = optarg;
      break;
    case 'c':
      S.config_path = optarg;
      break;
    case 'k':
      keys_path = optarg;
      break;
    case 'S':
      secret_path = optarg;
      break;
    case 'j':
      if (parse_int("--job-ms", optarg, 1, 86400000, &v))
        return EX_USAGE_;
      S.job_ms = v;
      break;
    case 'H':
      S.shadow = 1;
      break;
    case 'F':
      S.trust_forwarded = 1;
      break;
    case 'f':
      if (!strcmp(optarg, "legacy"))
        S.header_form = SLUICE_HTTP_FORM_LEGACY;
      else if (!strcmp(optarg, "sf"))
        S.header_form = SLUICE_HTTP_FORM_SF;
      else if (!strcmp(optarg, "both"))
        S.header_form = SLUICE_HTTP_FORM_BOTH;
      else {
        fprintf(stderr, "ledger-api: --header-form: expected legacy, sf or "
                        "both, got '%s'\n", optarg);
        return EX_USAGE_;
      }
      break;
    case 'T':
      proxies = optarg;
      break;
    case 'I':
      if (parse_int("--idem-slots", optarg, 1, 1 << 24, &S.idem_slots))
        return EX_USAGE_;
      break;
    case 'L':
      if (parse_int("--idem-ttl-s", optarg, 1, 30 * 86400, &S.idem_ttl_s))
        return EX_USAGE_;
      break;
    case 'P':
      if (parse_int("--per-ip", optarg, 1, MAX_CONNECTIONS, &S.per_ip))
        return EX_USAGE_;
      break;
    case 'D':
      if (parse_int("--head-timeout-ms", optarg, 100, 600000, &S.head_ms))
        return EX_USAGE_;
      break;
    case 'B':
      if (parse_int("--body-timeout-ms", optarg, 100, 600000, &S.body_ms))
        return EX_USAGE_;
      break;
    case 'W':
      if (add_webhook(optarg))
        return EX_USAGE_;
      break;
    case 'h':
      usage(stdout);
      return EX_OK;
    default:
      fprintf(stderr, "ledger-api: unknown or incomplete option '%s'\n",
              argv[optind - 1]);
      usage(stderr);
      return EX_USAGE_;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "ledger-api: unexpected argument '%s'\n", argv[optind]);
    return EX_USAGE_;
  }
  if (realip_parse(&S.proxies, proxies, perr, sizeof perr) != 0) {
    fprintf(stderr, "ledger-api: --trusted-proxies: %s\n", perr);
    return EX_USAGE_;
  }
  /* epoll takes as many connections as there are descriptors */
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
      nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (keys_path) {
    if (load_keys(keys_path))
      return EX_USAGE_;
  } else {
    S.nkeys = (int)(sizeof demo_keys / sizeof demo_keys[0]);
    memcpy(S.keys, demo_keys, sizeof demo_keys);
  }
  if (secret_path) {
    char err[128];
    if (ex_read_secret_file(secret_path, S.secret, err, sizeof err)) {
      fprintf(stderr, "ledger-api: --secret-file %s: %s\n", secret_path, err);
      return EX_USAGE_;
    }
  } else if (sluice_random_bytes(S.secret, 16) != SLUICE_OK) {
    fprintf(stderr, "ledger-api: no OS randomness for the secret\n");
    return EX_RUNTIME;
  }
  if (sluice_random_bytes(S.hash_key, 16) != SLUICE_OK)
    return EX_RUNTIME;
  /* Check the configuration now, so a typo is reported once, by name. */
  if (S.config_path) {
    sluice_policy_config cfg;
    char err[256];
    int rc = sluice_policy_config_load(S.config_path, &cfg, err, sizeof err);
    if (rc != SLUICE_OK) {
      fprintf(stderr, "ledger-api: --config %s: %s\n", S.config_path, err);
      return EX_USAGE_;
    }
  }
  if (!strcmp(S.store, "shm")) {
    S.shm_fd = memfd_create("ledger-api-sluice", 0);
    if (S.shm_fd < 0) {
      fprintf(stderr, "ledger-api: memfd_create: %s\n", strerror(errno));
      return EX_RUNTIME;
    }
    snprintf(S.store_uri, sizeof S.store_uri,
             "shm:fd=%d;capacity=262144;create=1", S.shm_fd);
  } else if (!strncmp(S.store, "shm:", 4) || !strncmp(S.store, "lmdb:", 5) ||
             !strncmp(S.store, "redis:", 6) || !strncmp(S.store, "rediss:", 7) ||
             !strcmp(S.store, "mem")) {
    if (!strcmp(S.store, "mem") && S.nworkers > 1) {
      fprintf(stderr, "ledger-api: --store mem: workers would not share "
                      "state; use --workers 1 or a shared store\n");
      return EX_USAGE_;
    }
    snprintf(S.store_uri, sizeof S.store_uri, "%s", S.store);
  } else {
    fprintf(stderr, "ledger-api: --store: expected shm, shm:..., lmdb:..., "
                    "redis:..., rediss:... or mem, got '%s'\n", S.store);
    return EX_USAGE_;
  }
  S.shared_size = sizeof(shared) + (size_t)S.idem_slots * sizeof(idem_slot);
  S.sh = mmap(NULL, S.shared_size, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (S.sh == MAP_FAILED) {
    fprintf(stderr, "ledger-api: mmap: %s\n", strerror(errno));
    return EX_RUNTIME;
  }
  S.sh->nidem = (size_t)S.idem_slots;
  if (shared_lock_init() != 0) {
    fprintf(stderr, "ledger-api: cannot make a process-shared lock\n");
    return EX_RUNTIME;
  }
  lazy_store_backend(&S.lazy, S.store_uri);
  S.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  if (S.listen_fd < 0) {
    fprintf(stderr, "ledger-api: socket: %s\n", strerror(errno));
    return EX_RUNTIME;
  }
  setsockopt(S.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)S.port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(S.listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(S.listen_fd, 256) != 0 ||
      getsockname(S.listen_fd, (struct sockaddr *)&sa, &salen) != 0) {
    fprintf(stderr, "ledger-api: --port %d: %s\n", S.port, strerror(errno));
    return S.port ? EX_USAGE_ : EX_RUNTIME;
  }
  /* A store that cannot be opened as given fails here, before any worker
  ** exists; one that is only down (Redis restarting) is opened later, by
  ** every process on its own, and decisions are degraded until then. */
  {
    sluice_limiter_options lo;
    sluice_limiter *probe = NULL;
    char err[256] = "";
    int rc;
    memset(&lo, 0, sizeof lo);
    lo.store = S.store_uri;
    lo.flags = SLUICE_OPEN_CREATE;
    rc = sluice_limiter_open2(&lo, &probe, err, sizeof err);
    sluice_limiter_close(probe);
    if (rc == SLUICE_EINVAL || rc == SLUICE_ENOTSUP) {
      fprintf(stderr, "ledger-api: --store %s: %s%s%s\n", S.store,
              sluice_strerror(rc), err[0] ? ": " : "", err);
      return EX_USAGE_;
    }
    if (rc != SLUICE_OK)
      fprintf(stderr, "ledger-api: --store %s: %s%s%s; serving degraded "
                      "until it opens\n", S.store, sluice_strerror(rc),
              err[0] ? ": " : "", err);
  }
  /* The master's own store handle (job completion).  lmdb handles must
  ** not cross fork(): the master reopens after forking. */
  if (open_policy("master") != 0)
    return EX_RUNTIME;
  if (!strncmp(S.store_uri, "lmdb:", 5))
    close_policy();
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, NULL);
  fflush(stdout);
  for (i = 0; i < S.nworkers; i++) {
    respawn_at[i] = 0;
    workers[i] = spawn_worker();
    if (workers[i] < 0) {
      fprintf(stderr, "ledger-api: fork: %s\n", strerror(errno));
      return EX_RUNTIME;
    }
  }
  if (!S.pol && open_policy("master") != 0)
    return EX_RUNTIME;
  printf("listening 127.0.0.1:%d\n", ntohs(sa.sin_port));
  fflush(stdout);
  fprintf(stderr, "ledger-api: %d workers, store %s%s\n", S.nworkers, S.store,
          S.shadow ? ", shadow mode" : "");
  while (running) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    siginfo_t si;
    int sig = sigtimedwait(&set, &si, &ts);
    if (sig == SIGTERM || sig == SIGINT) {
      running = 0;
    } else if (sig == SIGCHLD) {
      pid_t pid;
      int st;
      while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        for (i = 0; i < S.nworkers; i++)
          if (workers[i] == pid) {
            /* Never stop serving for one worker: the others go on, and
            ** a worker that failed to start is retried with a backoff
            ** (100 ms doubling to 30 s, reset by any other exit). */
            workers[i] = 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) == EX_RUNTIME)
              backoff_ms = backoff_ms ? backoff_ms * 2 : 100;
            else
              backoff_ms = 0;
            if (backoff_ms > 30000)
              backoff_ms = 30000;
            respawn_at[i] = wall_ns() + backoff_ms * MS_NS;
            fprintf(stderr, "ledger-api: worker %d exited (status %d); "
                            "another in %" PRId64 " ms\n", (int)pid, st,
                    backoff_ms);
          }
    }
    for (i = 0; i < S.nworkers; i++)
      if (workers[i] == 0 && wall_ns() >= respawn_at[i] &&
          (workers[i] = spawn_worker()) < 0) {
        workers[i] = 0; /* fork failed: try again in a second */
        respawn_at[i] = wall_ns() + 1000 * MS_NS;
      }
    finish_jobs();
  }
  for (i = 0; i < S.nworkers; i++)
    if (workers[i] > 0)
      kill(workers[i], SIGTERM);
  for (i = 0; i < S.nworkers; i++)
    if (workers[i] > 0)
      waitpid(workers[i], NULL, 0);
  close_policy();
  close(S.listen_fd);
  if (S.shm_fd >= 0)
    close(S.shm_fd);
  fprintf(stderr, "ledger-api: stopped\n");
  return exit_code;
}

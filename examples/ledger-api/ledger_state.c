/*
** ledger-api: the tables in the shared mapping that every worker uses --
** ledger balances, access tokens, jobs and Idempotency-Key records.
*/
#include "ledger_api.h"
#include <sys/random.h>

/* ----------------------------------------------------------- helpers --- */

int64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * S_NS + ts.tv_nsec;
}

/* A keyed hash of the table keys (S.hash_key), so that a client cannot aim
** its ids at one slot: the first 64 bits of the library's scope id. */
static uint64_t keyed_hash(const void *data, size_t len) {
  char id[SLUICE_SCOPE_ID_LEN + 1];
  if (sluice_scope_id(S.hash_key, data, len, id) != SLUICE_OK)
    return 1;
  id[16] = 0;
  return strtoull(id, NULL, 16);
}

uint64_t hash2(const char *a, const char *b) {
  char buf[2 * ID_MAX + 300];
  int n = snprintf(buf, sizeof buf, "%s|%s", a, b);
  uint64_t h = keyed_hash(buf, (size_t)(n < (int)sizeof buf ? n : 0));
  return h ? h : 1;
}

int valid_id(const char *s) {
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

ledger_slot *ledger_find(const char *tenant, const char *ledger,
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

/* ------------------------------------------------- shared-table lock --- */

int shared_lock_init(void) {
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

static uint64_t token_hash(const char *tok) {
  uint64_t h = keyed_hash(tok, strlen(tok));
  return h ? h : 1;
}

/* A new opaque token for key k in out ("at_" and 32 hex digits); -1 when
** the table is full of live tokens or there is no randomness. */
int token_issue(const api_key *k, char *out, size_t n) {
  uint8_t raw[16];
  uint64_t h;
  int64_t now = wall_ns();
  size_t i, o;
  int done = 0;
  if (n < 36 || getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
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

const api_key *token_find(const char *tok) {
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

job *job_create(const api_key *k, int kind, const char *ledger,
                const char *range_s, uint64_t lease_id, uint64_t *seq_out) {
  uint64_t seq = atomic_fetch_add(&S.sh->next_job, 1) + 1;
  job *j = &S.sh->jobs[seq % NJOBS];
  int st = atomic_load(&j->state);
  /* A slot still running a job 4096 jobs ago: refuse rather than lose it. */
  if (st == JOB_RUNNING)
    return NULL;
  atomic_store(&j->seq, 0);
  j->kind = kind;
  j->created_ns = wall_ns();
  j->done_ns = j->created_ns + S.job_ms * MS_NS;
  j->lease_id = lease_id;
  snprintf(j->tenant, sizeof j->tenant, "%s", k->tenant);
  snprintf(j->key, sizeof j->key, "%s", k->key);
  snprintf(j->tier, sizeof j->tier, "%s", k->tier);
  snprintf(j->ledger, sizeof j->ledger, "%s", ledger ? ledger : "");
  snprintf(j->range_s, sizeof j->range_s, "%s", range_s ? range_s : "");
  atomic_store(&j->state, JOB_RUNNING);
  atomic_store(&j->seq, seq); /* publish */
  *seq_out = seq;
  return j;
}

const char *job_route(int kind) {
  return kind == JOB_RECONCILE ? "/v1/ledgers/reconcile"
                               : "/v1/reports/audit-export";
}

void job_request(const job *j, sluice_request *rq, sluice_attr *a) {
  memset(rq, 0, sizeof *rq);
  rq->tenant_id = j->tenant;
  rq->api_key_id = j->key;
  rq->tier = j->tier;
  rq->method = j->kind == JOB_RECONCILE ? "POST" : "GET";
  rq->route = job_route(j->kind);
  if (j->kind == JOB_RECONCILE)
    *a = (sluice_attr){"ledger", j->ledger};
  else
    *a = (sluice_attr){"export_range_s", j->range_s};
  rq->attrs = a;
  rq->nattrs = 1;
}

/* ---------------------------------------------------- idempotency --- */

#define IDEM_PROBE 1024 /* slots a lookup may visit */


/* The record's name: tenant, endpoint ('e' entries, 'r' reconcile), key. */
uint64_t idem_hash(const api_key *k, char endpoint, const char *ik) {
  char buf[256];
  snprintf(buf, sizeof buf, "%c:%s", endpoint, ik);
  return hash2(k->tenant, buf);
}

static int idem_live(const idem_slot *s, int64_t now) {
  return s->created_ns != 0 && now - s->created_ns < S.idem_ttl_s * S_NS;
}

/* Every expired record leaves its tenant's share (under idem_mu).  At
** most once a second: it reads the whole table, and only a tenant at its
** share asks for it. */
static void idem_sweep(int64_t now) {
  size_t i;
  if (now - S.sh->idem_swept_ns < S_NS && now >= S.sh->idem_swept_ns)
    return; /* (a clock stepped back does not stop sweeps) */
  S.sh->idem_swept_ns = now;
  for (i = 0; i < S.sh->nidem; i++) {
    idem_slot *s = &S.sh->idem[i];
    if (s->created_ns != 0 && !idem_live(s, now)) {
      S.sh->idem_held[s->tenant]--;
      s->created_ns = 0;
      s->state = IDEM_FREE;
    }
  }
}

/* Find the record (h): IDEM_REPLAY with *out a copy, IDEM_BUSY while its
** first request is still being applied, IDEM_MISMATCH when it asked for
** something else (body hash bh).  Otherwise claim a slot for it, pending,
** and return IDEM_NEW with *index; IDEM_SHARE when k's tenant holds its
** share of the table (--idem-tenant-share), or IDEM_FULL when every slot
** it may use holds a live record: then the request must not be applied. */
int idem_begin(const api_key *k, uint64_t h, uint64_t bh, idem_slot *out,
               size_t *index) {
  int64_t now = wall_ns();
  size_t i, n = S.sh->nidem, probe = n < IDEM_PROBE ? n : IDEM_PROBE,
            reuse = SIZE_MAX;
  int rc = IDEM_FULL, t = k->tenant_ix;
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
  if (rc == IDEM_FULL && S.sh->idem_held[t] >= S.idem_tenant_max) {
    idem_sweep(now);
    if (S.sh->idem_held[t] >= S.idem_tenant_max)
      rc = IDEM_SHARE;
  }
  if (rc == IDEM_FULL && reuse != SIZE_MAX) {
    idem_slot *s = &S.sh->idem[reuse];
    if (s->created_ns != 0) /* expired, still in its tenant's share */
      S.sh->idem_held[s->tenant]--;
    S.sh->idem_held[t]++;
    s->hash = h;
    s->body_hash = bh;
    s->created_ns = now;
    s->state = IDEM_PENDING;
    s->value = s->amount = 0;
    s->tenant = t;
    *index = reuse;
    rc = IDEM_NEW;
  }
  shared_unlock();
  return rc;
}

/* The request was applied: replays answer with value and amount. */
void idem_done(size_t index, int64_t value, int64_t amount) {
  shared_lock();
  S.sh->idem[index].value = value;
  S.sh->idem[index].amount = amount;
  S.sh->idem[index].state = IDEM_DONE;
  shared_unlock();
}

/* The request was not applied (refused): the key is free again. */
void idem_abandon(size_t index) {
  shared_lock();
  if (S.sh->idem[index].created_ns != 0)
    S.sh->idem_held[S.sh->idem[index].tenant]--;
  S.sh->idem[index].created_ns = 0;
  S.sh->idem[index].state = IDEM_FREE;
  shared_unlock();
}

/* The newest running job of the tenant's kind (and ledger), for a client
** refused with 409 or a concurrency 429 to poll. */
int running_job(const char *tenant, int kind, const char *ledger,
                       char *out, size_t n) {
  uint64_t best = 0;
  size_t i;
  for (i = 0; i < NJOBS; i++) {
    const job *j = &S.sh->jobs[i];
    uint64_t seq = atomic_load(&j->seq);
    if (seq > best && atomic_load(&j->state) == JOB_RUNNING &&
        j->kind == kind && !strcmp(j->tenant, tenant) &&
        (!ledger || !strcmp(j->ledger, ledger)))
      best = seq;
  }
  if (!best)
    return 0;
  snprintf(out, n, "job_%" PRIu64, best);
  return 1;
}


/* Add amount to the ledger's balance unless the sum would overflow. */
int balance_add(ledger_slot *l, int64_t amount) {
  int64_t cur = atomic_load(&l->balance);
  do {
    if (cur > INT64_MAX - amount)
      return -1;
  } while (!atomic_compare_exchange_weak(&l->balance, &cur, cur + amount));
  return 0;
}

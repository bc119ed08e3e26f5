/*
** The deny cache: the boxes, suspensions and edge denies (level 2 and up)
** a host has seen, with their end times, where every worker reads them.
** The policy consults it in degraded mode, so that a store outage does not
** release a boxed key (the spec keeps boxed keys out at the edge, its Kong
** deny cache, for exactly that reason), and, when it is a shared segment,
** before the store too: a live entry denies without a store call.  The
** in-process cache is not read before the store because a release made by
** another process (sluice release) cannot drop its entries.
**
** An open-addressed table of fixed slots, in process memory or in a named
** shm segment (segment.c).  An entry lives in one of the DC_PROBE slots
** after its hash.  Bounded, and it never evicts a live entry: a new entry
** takes a slot that is unused, expired or already holds its key; when all
** DC_PROBE slots hold other live entries the new one is NOT cached (the
** `full` counter says so) and that key is decided by the store as before,
** or by the degraded limiter while the store is down.
**
** Each slot is a seqlock: a writer claims it by a CAS of its sequence from
** even to odd and publishes with a release store of the next even value;
** a reader retries while the sequence is odd or moved.  No lock can be held
** across a crash, except that a writer killed mid-write leaves its one slot
** claimed: the slot is lost to the table, never misread.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "policy_int.h"
#include "siphash.h"

#define DC_MAGIC UINT64_C(0x31796e64636c73) /* "slcdny1" */
#define DC_LAYOUT 1u
#define DC_PROBE 16
#define DC_SLOTS_DEFAULT 4096
#define DC_SLOTS_MAX (UINT64_C(1) << 24)
#define DC_READ_TRIES 64

typedef struct dc_slot {
  _Atomic uint64_t seq; /* odd while a writer holds the slot */
  _Atomic uint64_t key; /* 0: never used */
  _Atomic int64_t until;
  _Atomic int32_t level;
  uint32_t pad;
} dc_slot;

typedef struct dc_table {
  sluice__seg_head h;
  uint64_t nslots;
  _Atomic uint64_t hits, stored, full;
  dc_slot slot[];
} dc_table;

struct sluice__deny_cache {
  dc_table *t;
  size_t bytes;
  int shared; /* munmap, not free */
};

#define RLX memory_order_relaxed

static uint64_t key_of(const sluice_policy *p, int kind, const char *id) {
  char b[SLUICE_SCOPE_ID_LEN + 2];
  size_t n = strnlen(id, SLUICE_SCOPE_ID_LEN);
  uint64_t k;
  b[0] = (char)('0' + kind);
  memcpy(b + 1, id, n);
  k = sluice__siphash64(p->secret, b, n + 1);
  return k ? k : 1;
}

/* A consistent copy of slot s; 0 when writers kept it busy. */
static int read_slot(dc_slot *s, uint64_t *key, int64_t *until, int *level) {
  int i;
  for (i = 0; i < DC_READ_TRIES; i++) {
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (q & 1)
      continue;
    *key = atomic_load_explicit(&s->key, RLX);
    *until = atomic_load_explicit(&s->until, RLX);
    *level = atomic_load_explicit(&s->level, RLX);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&s->seq, RLX) == q)
      return 1;
  }
  return 0;
}

/* Claim slot s for writing: the sequence it had (even), or 1 if busy. */
static uint64_t claim(dc_slot *s) {
  uint64_t q = atomic_load_explicit(&s->seq, RLX);
  if ((q & 1) || !atomic_compare_exchange_strong_explicit(
                     &s->seq, &q, q + 1, memory_order_acquire, RLX))
    return 1;
  return q;
}

static void publish(dc_slot *s, uint64_t q) {
  atomic_store_explicit(&s->seq, q + 2, memory_order_release);
}

static dc_slot *slot_at(dc_table *t, uint64_t k, int i) {
  return &t->slot[(k + (uint64_t)i) % t->nslots];
}

static int probe_len(const dc_table *t) {
  return t->nslots < DC_PROBE ? (int)t->nslots : DC_PROBE;
}

int sluice__deny_get(sluice_policy *p, int kind, const char *id, int64_t now,
                     sluice__deny *out) {
  dc_table *t = p->deny ? p->deny->t : NULL;
  uint64_t k, sk;
  int64_t until;
  int i, level;
  if (!t)
    return 0;
  k = key_of(p, kind, id);
  for (i = 0; i < probe_len(t); i++) {
    if (!read_slot(slot_at(t, k, i), &sk, &until, &level))
      continue;
    /* Slots are taken in order and never emptied again: past a slot never
    ** used there is nothing of k's (but for a put that raced a refresh,
    ** which at worst leaves one box to the store). */
    if (sk == 0)
      return 0;
    if (sk == k && until > now) {
      out->until_ns = until;
      out->level = level;
      atomic_fetch_add_explicit(&t->hits, 1, RLX);
      return 1;
    }
  }
  return 0;
}

/* Write (k, until, level) into a claimed slot that is free for it. */
static int fill(dc_slot *s, uint64_t q, uint64_t k, int64_t now,
                int64_t until, int level, int same_only) {
  uint64_t sk = atomic_load_explicit(&s->key, RLX);
  int64_t su = atomic_load_explicit(&s->until, RLX);
  int ok = same_only ? sk == k : (sk == 0 || sk == k || su <= now);
  if (ok) {
    atomic_store_explicit(&s->key, k, RLX);
    atomic_store_explicit(&s->until, until, RLX);
    atomic_store_explicit(&s->level, level, RLX);
  }
  publish(s, q);
  return ok;
}

void sluice__deny_put(sluice_policy *p, int kind, const char *id, int64_t now,
                      int64_t until_ns, int level) {
  dc_table *t = p->deny ? p->deny->t : NULL;
  uint64_t k, q;
  int i, pass;
  if (!t || until_ns <= now)
    return;
  k = key_of(p, kind, id);
  /* Pass 0 refreshes the key's own slot (the store's end time is the
  ** truth: a later box, or one shortened by a release elsewhere); pass 1
  ** takes an unused or expired slot. */
  for (pass = 0; pass < 2; pass++)
    for (i = 0; i < probe_len(t); i++) {
      dc_slot *s = slot_at(t, k, i);
      if ((q = claim(s)) == 1)
        continue;
      if (fill(s, q, k, now, until_ns, level, pass == 0)) {
        if (pass == 1)
          atomic_fetch_add_explicit(&t->stored, 1, RLX);
        return;
      }
    }
  atomic_fetch_add_explicit(&t->full, 1, RLX);
}

void sluice__deny_drop(sluice_policy *p, int kind, const char *id) {
  dc_table *t = p->deny ? p->deny->t : NULL;
  uint64_t k, q;
  int i;
  if (!t)
    return;
  k = key_of(p, kind, id);
  /* Every copy: two workers may have cached one box in two slots. */
  for (i = 0; i < probe_len(t); i++) {
    dc_slot *s = slot_at(t, k, i);
    int n = 0;
    /* A writer holds a slot for a few stores; one that stays held lost its
    ** writer, and readers never see what it holds. */
    while ((q = claim(s)) == 1 && n < DC_READ_TRIES * 16)
      n++;
    if (q == 1)
      continue;
    if (atomic_load_explicit(&s->key, RLX) == k)
      atomic_store_explicit(&s->until, 0, RLX);
    publish(s, q);
  }
}

int sluice__deny_shared(const sluice_policy *p) {
  return p->deny && p->deny->shared;
}

void sluice__deny_stats(const sluice_policy *p, uint64_t *hits,
                        uint64_t *stored, uint64_t *full) {
  dc_table *t = p->deny ? p->deny->t : NULL;
  *hits = t ? atomic_load_explicit(&t->hits, RLX) : 0;
  *stored = t ? atomic_load_explicit(&t->stored, RLX) : 0;
  *full = t ? atomic_load_explicit(&t->full, RLX) : 0;
}

/* ------------------------------------------------------------ open --- */

static void init_table(sluice__seg_head *h, void *arg) {
  dc_table *t = (dc_table *)h;
  t->h.layout = DC_LAYOUT;
  t->nslots = *(const uint64_t *)arg;
}

static int slots_param(const char *uri, uint64_t *n, char *msg, size_t len) {
  const char *v;
  size_t vl, i;
  uint64_t x = 0;
  *n = DC_SLOTS_DEFAULT;
  if (!uri || !uri[0] ||
      sluice_uri_param(uri + 4, "slots", &v, &vl) != SLUICE_OK)
    return SLUICE_OK;
  for (i = 0; i < vl && x <= DC_SLOTS_MAX; i++) {
    if (v[i] < '0' || v[i] > '9')
      break;
    x = x * 10 + (uint64_t)(v[i] - '0');
  }
  if (vl == 0 || i < vl || x < 1 || x > DC_SLOTS_MAX) {
    if (msg && len)
      snprintf(msg, len, "deny_cache: slots must be 1 to %llu",
               (unsigned long long)DC_SLOTS_MAX);
    return SLUICE_EINVAL;
  }
  *n = x;
  return SLUICE_OK;
}

int sluice__deny_check(const char *uri, char *msg, size_t len) {
  uint64_t n;
  char name[256];
  int rc = slots_param(uri, &n, msg, len);
  return rc != SLUICE_OK ? rc
                         : sluice__seg_name("deny_cache", uri, name, msg, len);
}

int sluice__deny_open(sluice_policy *p, const char *uri, char *msg,
                      size_t len) {
  sluice__deny_cache *c;
  uint64_t n;
  size_t bytes;
  void *m;
  int rc;
  char name[256];

  p->deny = NULL;
  if ((rc = slots_param(uri, &n, msg, len)) != SLUICE_OK)
    return rc;
  bytes = sizeof(dc_table) + (size_t)n * sizeof(dc_slot);
  if (!(c = calloc(1, sizeof *c)))
    return SLUICE_ENOMEM;
  c->bytes = bytes;
  if (!uri || !uri[0]) {
    if (!(c->t = calloc(1, bytes))) {
      free(c);
      return SLUICE_ENOMEM;
    }
    init_table(&c->t->h, &n);
  } else {
    if ((rc = sluice__seg_name("deny_cache", uri, name, msg, len)) ||
        (rc = sluice__seg_attach("deny_cache", uri, bytes, DC_MAGIC,
                                 init_table, &n, &m, msg, len))) {
      free(c);
      return rc;
    }
    c->t = m;
    c->shared = 1;
    if (c->t->h.layout != DC_LAYOUT || c->t->nslots != n) {
      rc = sluice__seg_fail(msg, len, SLUICE_ECONFIG, "deny_cache", name,
                            c->t->h.layout != DC_LAYOUT
                                ? "made by another sluice version"
                                : "made with another slots= (every process "
                                  "must give the same)",
                            0);
      munmap(m, bytes);
      free(c);
      return rc;
    }
  }
  p->deny = c;
  return SLUICE_OK;
}

void sluice__deny_close(sluice_policy *p) {
  sluice__deny_cache *c = p->deny;
  if (!c)
    return;
  if (c->shared)
    munmap(c->t, c->bytes);
  else
    free(c->t);
  free(c);
  p->deny = NULL;
}

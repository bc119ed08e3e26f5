/*
** In-memory store.  A record is a node in a chained hash table of one of 64
** shards; the shard is picked by the top bits of the key's keyed hash and
** the chain by the low bits.  A group's shards are locked in ascending order
** and the step runs under all of them, which makes a group (tenant bucket +
** key bucket, a lease set) one atomic unit.
**
** Reclamation: a record whose expiry (sluice_op_expiry) has passed is
** exactly a fresh key, so it is dropped when met on a lookup, when a step
** leaves a record fresh, and by an incremental sweep of one chain per insert.
** Nothing live is ever dropped: at max_keys a new key gets SLUICE_EFULL, so a
** flood of new keys can neither evict a penalty box nor refund a bucket.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_int.h"
#include "backends.h"
#include "sluice.h"
#include "sluice_mem.h"

#define NSHARD 64
#define SHARD_OF(h) ((unsigned)((h) >> 58))

typedef struct node {
  struct node *next;
  uint64_t hash;
  int64_t expires;
  sluice_state st;
  uint32_t keylen;
  unsigned char key[];
} node;

typedef struct shard {
  pthread_mutex_t mu;
  node **buckets;
  size_t nbuckets; /* power of two */
  size_t count;
  size_t sweep_cursor;
} shard;

typedef struct mem_store {
  sluice_store base;
  uint8_t hkey[16];
  int64_t max_keys;
  _Atomic int64_t count;
  shard shards[NSHARD];
} mem_store;

static size_t node_size(size_t keylen) { return sizeof(node) + keylen; }

static void node_free(mem_store *m, node *n) {
  sluice_store_free(&m->base, n, node_size(n->keylen));
}

static int shard_grow(mem_store *m, shard *sh) {
  size_t nb = sh->nbuckets * 2, i;
  node **b = sluice_store_malloc(&m->base, nb * sizeof *b);
  if (!b)
    return SLUICE_ENOMEM;
  memset(b, 0, nb * sizeof *b);
  for (i = 0; i < sh->nbuckets; i++) {
    node *n = sh->buckets[i], *next;
    for (; n; n = next) {
      next = n->next;
      n->next = b[n->hash & (nb - 1)];
      b[n->hash & (nb - 1)] = n;
    }
  }
  sluice_store_free(&m->base, sh->buckets, sh->nbuckets * sizeof *b);
  sh->buckets = b;
  sh->nbuckets = nb;
  return SLUICE_OK;
}

static void unlink_node(mem_store *m, shard *sh, node **pp) {
  node *n = *pp;
  *pp = n->next;
  sh->count--;
  atomic_fetch_sub_explicit(&m->count, 1, memory_order_relaxed);
  node_free(m, n);
}

/* Find a live record; drops an expired one met on the way. */
static node **lookup(mem_store *m, shard *sh, uint64_t h, const sluice_key *k,
                     int64_t now) {
  node **pp = &sh->buckets[h & (sh->nbuckets - 1)];
  while (*pp) {
    node *n = *pp;
    if (n->hash == h && n->keylen == k->len &&
        memcmp(n->key, k->data, k->len) == 0) {
      if (n->expires <= now) {
        unlink_node(m, sh, pp);
        return NULL;
      }
      return pp;
    }
    pp = &n->next;
  }
  return NULL;
}

static int64_t sweep_chain(mem_store *m, shard *sh, size_t b, int64_t now) {
  node **pp = &sh->buckets[b];
  int64_t removed = 0;
  while (*pp) {
    if ((*pp)->expires <= now) {
      unlink_node(m, sh, pp);
      removed++;
    } else {
      pp = &(*pp)->next;
    }
  }
  return removed;
}

static int64_t sweep_all(mem_store *m, int64_t now) {
  int64_t removed = 0;
  int s;
  size_t b;
  for (s = 0; s < NSHARD; s++) {
    shard *sh = &m->shards[s];
    pthread_mutex_lock(&sh->mu);
    for (b = 0; b < sh->nbuckets; b++)
      removed += sweep_chain(m, sh, b, now);
    pthread_mutex_unlock(&sh->mu);
  }
  return removed;
}

static int mem_apply_locked(mem_store *m, const sluice_op *op,
                            const uint64_t *h, int64_t now, sluice_verdict *v) {
  sluice_state in[SLUICE_GROUP_MAX], out[SLUICE_GROUP_MAX];
  node **found[SLUICE_GROUP_MAX];
  node *fresh[SLUICE_GROUP_MAX];
  int64_t exp[SLUICE_GROUP_MAX];
  int i, rc, nnew = 0;

  for (i = 0; i < op->nkeys; i++) {
    shard *sh = &m->shards[SHARD_OF(h[i])];
    found[i] = lookup(m, sh, h[i], &op->keys[i], now);
    if (found[i])
      in[i] = (*found[i])->st;
    else
      memset(&in[i], 0, sizeof in[i]);
  }
  rc = sluice__op_step_valid(op, in, out, now, v);
  if (rc != SLUICE_OK)
    return rc;
  /* Allocate every new node before changing anything, so that a failure
  ** leaves the store as it was. */
  for (i = 0; i < op->nkeys; i++) {
    fresh[i] = NULL;
    exp[i] = sluice_op_expiry(op, i, &out[i]);
    if (!found[i] && exp[i] > now)
      nnew++;
  }
  if (nnew > 0 && m->max_keys > 0 &&
      atomic_load_explicit(&m->count, memory_order_relaxed) + nnew >
          m->max_keys)
    return SLUICE_EFULL;
  for (i = 0; i < op->nkeys; i++) {
    if (found[i] || exp[i] <= now)
      continue;
    fresh[i] = sluice_store_malloc(&m->base, node_size(op->keys[i].len));
    if (!fresh[i]) {
      while (--i >= 0)
        if (fresh[i])
          node_free(m, fresh[i]);
      return SLUICE_ENOMEM;
    }
  }
  for (i = 0; i < op->nkeys; i++) {
    shard *sh = &m->shards[SHARD_OF(h[i])];
    if (found[i]) {
      if (exp[i] <= now) {
        unlink_node(m, sh, found[i]);
        /* Later pointers into the same chain may have moved: re-find. */
        {
          int j;
          for (j = i + 1; j < op->nkeys; j++)
            if (found[j])
              found[j] = lookup(m, &m->shards[SHARD_OF(h[j])], h[j],
                                &op->keys[j], now);
        }
      } else {
        (*found[i])->st = out[i];
        (*found[i])->expires = exp[i];
      }
    } else if (fresh[i]) {
      node *n = fresh[i];
      size_t b;
      n->hash = h[i];
      n->expires = exp[i];
      n->st = out[i];
      n->keylen = (uint32_t)op->keys[i].len;
      memcpy(n->key, op->keys[i].data, op->keys[i].len);
      b = h[i] & (sh->nbuckets - 1);
      n->next = sh->buckets[b];
      sh->buckets[b] = n;
      sh->count++;
      atomic_fetch_add_explicit(&m->count, 1, memory_order_relaxed);
      /* Amortised reclamation: one chain swept per insert. */
      sh->sweep_cursor = (sh->sweep_cursor + 1) & (sh->nbuckets - 1);
      if (sh->sweep_cursor != b)
        sweep_chain(m, sh, sh->sweep_cursor, now);
      if (sh->count > sh->nbuckets * 2)
        (void)shard_grow(m, sh); /* a failed grow only costs speed */
      /* Chains of later group members in this shard may have moved. */
      {
        int j;
        for (j = i + 1; j < op->nkeys; j++)
          if (found[j] && SHARD_OF(h[j]) == SHARD_OF(h[i]))
            found[j] = lookup(m, sh, h[j], &op->keys[j], now);
      }
    }
  }
  return SLUICE_OK;
}

static void lock_group(mem_store *m, const uint64_t *h, int n, int lock) {
  uint64_t mask = 0;
  int s;
  if (n == 1) { /* the common case: one shard, no ordering to work out */
    pthread_mutex_t *mu = &m->shards[SHARD_OF(h[0])].mu;
    if (lock)
      pthread_mutex_lock(mu);
    else
      pthread_mutex_unlock(mu);
    return;
  }
  for (s = 0; s < n; s++)
    mask |= UINT64_C(1) << SHARD_OF(h[s]);
  /* Ascending shard order for every group: no two groups can deadlock. */
  while (mask) {
    s = __builtin_ctzll(mask);
    mask &= mask - 1;
    if (lock)
      pthread_mutex_lock(&m->shards[s].mu);
    else
      pthread_mutex_unlock(&m->shards[s].mu);
  }
}

static int mem_apply(sluice_store *s, const sluice_op *op, int64_t now,
                     sluice_verdict *v) {
  mem_store *m = (mem_store *)s;
  uint64_t h[SLUICE_GROUP_MAX];
  int i, rc;
  for (i = 0; i < op->nkeys; i++)
    h[i] = sluice_siphash64(m->hkey, op->keys[i].data, op->keys[i].len);
  lock_group(m, h, op->nkeys, 1);
  rc = mem_apply_locked(m, op, h, now, v);
  lock_group(m, h, op->nkeys, 0);
  if (rc == SLUICE_EFULL && sweep_all(m, now) > 0) {
    lock_group(m, h, op->nkeys, 1);
    rc = mem_apply_locked(m, op, h, now, v);
    lock_group(m, h, op->nkeys, 0);
  }
  if (rc == SLUICE_EFULL)
    sluice_store_seterr(s, rc, 0, "mem store holds max_keys=%lld live records",
                        (long long)m->max_keys);
  else if (rc == SLUICE_ENOMEM)
    sluice_store_seterr(s, rc, 0, "out of memory allocating a record");
  return rc;
}

static int mem_get(sluice_store *s, const sluice_key *k, int64_t now,
                   sluice_state *out, int64_t *exp) {
  mem_store *m = (mem_store *)s;
  uint64_t h = sluice_siphash64(m->hkey, k->data, k->len);
  shard *sh = &m->shards[SHARD_OF(h)];
  node **pp;
  int rc = SLUICE_ENOTFOUND;
  pthread_mutex_lock(&sh->mu);
  pp = lookup(m, sh, h, k, now);
  if (pp) {
    *out = (*pp)->st;
    *exp = (*pp)->expires;
    rc = SLUICE_OK;
  }
  pthread_mutex_unlock(&sh->mu);
  return rc;
}

static int mem_delete(sluice_store *s, const sluice_key *k) {
  mem_store *m = (mem_store *)s;
  uint64_t h = sluice_siphash64(m->hkey, k->data, k->len);
  shard *sh = &m->shards[SHARD_OF(h)];
  node **pp;
  int rc = SLUICE_ENOTFOUND;
  pthread_mutex_lock(&sh->mu);
  pp = lookup(m, sh, h, k, INT64_MIN);
  if (pp) {
    unlink_node(m, sh, pp);
    rc = SLUICE_OK;
  }
  pthread_mutex_unlock(&sh->mu);
  return rc;
}

static int mem_control(sluice_store *s, int op, void *arg) {
  mem_store *m = (mem_store *)s;
  if (!arg)
    return SLUICE_EINVAL;
  switch (op) {
  case SLUICE_CTL_MEM_COUNT:
    *(int64_t *)arg = atomic_load(&m->count);
    return SLUICE_OK;
  case SLUICE_CTL_MEM_SWEEP:
    *(int64_t *)arg = sweep_all(m, *(int64_t *)arg);
    return SLUICE_OK;
  default:
    return SLUICE_ENOTFOUND;
  }
}

static unsigned mem_caps(sluice_store *s) {
  (void)s;
  return SLUICE_CAP_THREADSAFE;
}

static int mem_close(sluice_store *s) {
  mem_store *m = (mem_store *)s;
  int i;
  size_t b;
  for (i = 0; i < NSHARD; i++) {
    shard *sh = &m->shards[i];
    if (!sh->buckets)
      continue;
    for (b = 0; b < sh->nbuckets; b++) {
      node *n = sh->buckets[b], *next;
      for (; n; n = next) {
        next = n->next;
        node_free(m, n);
      }
    }
    sluice_store_free(s, sh->buckets, sh->nbuckets * sizeof(node *));
    pthread_mutex_destroy(&sh->mu);
  }
  return SLUICE_OK;
}

static const sluice_store_methods mem_methods = {
    1,          /* iVersion: xApplyMany falls back to one xApply per op */
    mem_close,  /* xClose */
    mem_apply,  /* xApply */
    mem_get,    /* xGet */
    mem_delete, /* xDelete */
    mem_control, /* xControl */
    mem_caps,   /* xCapabilities */
    NULL,       /* xApplyMany */
};

static int mem_open(const sluice_backend *b, const char *uri,
                    const sluice_store_config *cfg, sluice_store *s) {
  mem_store *m = (mem_store *)s;
  int i, rc;
  (void)b;
  (void)cfg;
  rc = sluice_uri_int(uri, "max_keys", 0, &m->max_keys);
  if (rc != SLUICE_OK)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "mem: max_keys must be a non-negative integer");
  rc = sluice_random_bytes(m->hkey, sizeof m->hkey);
  if (rc != SLUICE_OK)
    return sluice_store_seterr(s, rc, 0, "mem: no random source for the hash key");
  for (i = 0; i < NSHARD; i++) {
    shard *sh = &m->shards[i];
    sh->nbuckets = 16;
    sh->buckets = sluice_store_malloc(s, sh->nbuckets * sizeof(node *));
    if (!sh->buckets) {
      s->pMethods = &mem_methods; /* xClose frees what was made */
      return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "mem: out of memory");
    }
    memset(sh->buckets, 0, sh->nbuckets * sizeof(node *));
    pthread_mutex_init(&sh->mu, NULL);
  }
  s->pMethods = &mem_methods;
  return SLUICE_OK;
}

const sluice_backend sluice__backend_mem = {1, (int)sizeof(mem_store), "mem",
                                            NULL, mem_open};

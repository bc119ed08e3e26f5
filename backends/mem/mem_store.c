/*
** In-memory store.  64 shards, each an open-addressing table (linear
** probing, backward-shift deletion) of 48-byte slots guarded by a mutex.  A
** slot holds the key's 128-bit fingerprint, the record and its expiry, so a
** lookup touches one cache line and no key bytes: the fingerprint is
** SipHash-1-3-128 under a per-store random key, which an attacker cannot
** predict (no hash flooding) and which collides for two keys of one store
** with probability 2^-128 per pair (at 10^9 live keys, about 10^-21).
** 1-3 rather than 2-4: it runs in every decision, 1-3 is the variant hash
** tables keyed against flooding use (CPython, Rust), and the shm store's
** fingerprints are the same function.
**
** A group's shards are locked in ascending order and the step runs under
** all of them, which makes a group (tenant bucket + key bucket, a lease set)
** one atomic unit.
**
** Reclamation: a record whose expiry (sluice__op_expiry) has passed is
** exactly a fresh key, so its slot is reused when its key comes back, freed
** when a step leaves it fresh, and dropped when a shard is rebuilt (which
** happens before the shard would grow).  Nothing live is ever dropped: at
** max_keys a new key gets SLUICE_EFULL, so a flood of new keys can neither
** evict a penalty box nor refund a bucket.  Untrusted records (record
** class SLUICE_CLASS_UNTRUSTED*: client IPs, auth subjects) have a bound
** of their own within max_keys (untrusted=N), so a stranger's flood gets
** SLUICE_EFULL before it can take the service's room.
**
** huge_pages=1: a shard's table of 1 MiB or more is its own mapping,
** advised to use transparent huge pages (lib/core/huge.c), instead of coming
** from the allocator; at 10M keys a decision otherwise pays a TLB miss on
** top of its cache miss.  What the system gave is counted
** (SLUICE_CTL_MEM_HUGE): tables on huge pages, tables that fell back to
** normal ones.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends.h"
#include "huge.h"
#include "job.h"
#include "mem_memo.h"
#include "sluice.h"
#include "siphash.h"
#include "random.h"
#include "store.h"
#include <sluice/sluice_mem.h>

#define NSHARD 64
#define MIN_SLOTS 16

typedef struct slot {
  uint64_t fp[2]; /* {0,0}: empty */
  int64_t expires;
  uint64_t untrusted; /* 1: counted in ucount (a SLUICE_CLASS_UNTRUSTED* record) */
  sluice_state st;
} slot;

typedef struct shard {
  pthread_mutex_t mu;
  slot *slots;
  size_t cap; /* power of two */
  size_t used;
  size_t mapped; /* slots is a mapping of this length; 0: the allocator's */
  int huge;      /* ... and the system backs it with huge pages */
} shard;

typedef struct mem_store {
  sluice_store base;
  uint8_t hkey[16];
  int64_t max_keys;
  _Atomic int64_t count;
  /* Untrusted records (client IPs, auth subjects) have their own bound
  ** within max_keys, so that strangers cannot take the tenants' room. */
  int64_t max_untrusted;
  _Atomic int64_t ucount;
  /* No record expires before this time, as far as the last full sweep and
  ** the inserts since know: a store at max_keys does not sweep again
  ** before it, so a flood of new keys costs no table pass per request. */
  _Atomic int64_t no_expiry_before;
  int huge; /* huge_pages=1 */
  _Atomic int64_t huge_tables, huge_bytes, huge_fallbacks;
  memo *memo;     /* NULL: memo=0 */
  void *memo_mem; /* its allocation, which memo is aligned in */
  shard shards[NSHARD];
} mem_store;

/* A table of `bytes`, zeroed, into *out (slots, mapped, huge; cap is the
** caller's).  With huge_pages=1 a big one is a mapping; a mapping the
** system does not back with huge pages, or a failed mmap (then the
** allocator's memory), counts as a fallback. */
static int table_alloc(mem_store *m, size_t bytes, shard *out) {
  out->mapped = 0;
  out->huge = 0;
  /* From half a huge page: the mapping rounds up to a whole one, so a
  ** table wastes at most a third of it (1.5 MiB at 1M keys). */
  if (m->huge && bytes >= SLUICE__HUGE_PAGE / 2) {
    out->slots = sluice__huge_map(bytes, &out->mapped, &out->huge);
    if (out->huge) {
      atomic_fetch_add_explicit(&m->huge_tables, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&m->huge_bytes, (int64_t)out->mapped,
                                memory_order_relaxed);
    } else {
      atomic_fetch_add_explicit(&m->huge_fallbacks, 1, memory_order_relaxed);
    }
    if (out->slots)
      return SLUICE_OK; /* mmap zeroes it */
  }
  out->slots = sluice__store_malloc(&m->base, bytes);
  if (!out->slots)
    return SLUICE_ENOMEM;
  memset(out->slots, 0, bytes);
  return SLUICE_OK;
}

static void table_free(mem_store *m, const shard *t, size_t bytes) {
  if (t->huge) {
    atomic_fetch_sub_explicit(&m->huge_tables, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&m->huge_bytes, (int64_t)t->mapped,
                              memory_order_relaxed);
  }
  if (t->mapped)
    sluice__huge_unmap(t->slots, t->mapped);
  else
    sluice__store_free(&m->base, t->slots, bytes);
}

typedef struct fpkey {
  uint64_t fp[2];
} fpkey;

static fpkey fingerprint(const mem_store *m, const sluice_key *k) {
  uint8_t h[16];
  fpkey f;
  sluice__siphash13_128(m->hkey, k->data, k->len, h);
  memcpy(f.fp, h, 16);
  if (f.fp[0] == 0 && f.fp[1] == 0)
    f.fp[0] = 1; /* {0,0} marks an empty slot */
  return f;
}

/* The fingerprint of a key being decided at `now`: from the hot-key memo
** when it has the key, else made and (sampled) memoised.  Batches stage
** with fingerprint() alone: their keys are many and seldom repeat. */
#if defined(__GNUC__)
__attribute__((always_inline)) /* a call returning two words spills them */
#endif
static inline fpkey fingerprint_at(const mem_store *m, const sluice_key *k,
                                   int64_t now) {
  memo_probe p;
  fpkey f = {{0, 0}}; /* memo_get() fills it on a hit; gcc drops the zeros */
  if (!m->memo)
    return fingerprint(m, k);
  memo_probe_make(k, &p);
  if (memo_get(m->memo, &p, f.fp))
    return f;
  f = fingerprint(m, k);
  if (memo_sampled(&p, now))
    memo_put(m->memo, &p, f.fp);
  return f;
}

static unsigned shard_of(const fpkey *f) { return (unsigned)(f->fp[1] >> 58); }
static size_t home(const shard *sh, const uint64_t *fp) {
  return (size_t)fp[0] & (sh->cap - 1);
}
static int is_empty(const slot *s) { return (s->fp[0] | s->fp[1]) == 0; }

/* Index of the key's slot, or -1; *ins gets the first empty slot seen. */
static long find(const shard *sh, const fpkey *f, size_t *ins) {
  size_t mask = sh->cap - 1, i = home(sh, f->fp);
  for (;;) {
    const slot *s = &sh->slots[i];
    if (is_empty(s)) {
      if (ins)
        *ins = i;
      return -1;
    }
    if (s->fp[0] == f->fp[0] && s->fp[1] == f->fp[1])
      return (long)i;
    i = (i + 1) & mask;
  }
}

/* Backward-shift deletion keeps every probe chain unbroken without
** tombstones. */
static void remove_at(mem_store *m, shard *sh, size_t i) {
  size_t mask = sh->cap - 1, j = i;
  for (;;) {
    size_t k;
    j = (j + 1) & mask;
    if (is_empty(&sh->slots[j]))
      break;
    k = home(sh, sh->slots[j].fp);
    /* Move j back to i unless its home lies cyclically in (i, j]. */
    if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j))
      continue;
    sh->slots[i] = sh->slots[j];
    i = j;
  }
  if (sh->slots[i].untrusted)
    atomic_fetch_sub_explicit(&m->ucount, 1, memory_order_relaxed);
  memset(&sh->slots[i], 0, sizeof(slot));
  sh->used--;
  atomic_fetch_sub_explicit(&m->count, 1, memory_order_relaxed);
}

/* Rebuild a shard into `cap` slots, dropping records expired at `now`.
** Returns SLUICE_ENOMEM (shard untouched) or SLUICE_OK. */
static int rebuild(mem_store *m, shard *sh, size_t cap, int64_t now,
                   int64_t *dropped, int64_t *min_exp) {
  shard nt;
  slot *ns;
  size_t i, used = 0;
  int64_t gone = 0, ugone = 0;
  if (table_alloc(m, cap * sizeof(slot), &nt) != SLUICE_OK)
    return SLUICE_ENOMEM;
  ns = nt.slots;
  for (i = 0; i < sh->cap; i++) {
    const slot *s = &sh->slots[i];
    size_t j;
    if (is_empty(s))
      continue;
    if (s->expires <= now) {
      gone++;
      ugone += (int64_t)s->untrusted;
      continue;
    }
    j = (size_t)s->fp[0] & (cap - 1);
    while (!is_empty(&ns[j]))
      j = (j + 1) & (cap - 1);
    ns[j] = *s;
    used++;
    if (min_exp && s->expires < *min_exp)
      *min_exp = s->expires;
  }
  table_free(m, sh, sh->cap * sizeof(slot));
  /* Atomic stores: a batch's prefetch reads these without the lock. */
  __atomic_store_n(&sh->slots, ns, __ATOMIC_RELAXED);
  sh->mapped = nt.mapped;
  sh->huge = nt.huge;
  __atomic_store_n(&sh->cap, cap, __ATOMIC_RELAXED);
  sh->used = used;
  atomic_fetch_sub_explicit(&m->count, gone, memory_order_relaxed);
  atomic_fetch_sub_explicit(&m->ucount, ugone, memory_order_relaxed);
  if (dropped)
    *dropped += gone;
  return SLUICE_OK;
}

/* Make room for `extra` inserts below a 3/4 load factor: drop expired
** records first, grow only if the live ones need it.  Fails only when the
** shard would be completely full (probing needs one empty slot).  A sweep
** that leaves the shard over half full grows it all the same: else live
** records just under 3/4 of it, and keys that come and go (a bucket that
** refills between two requests is a fresh key again), would pay a pass
** over the whole table every few inserts; so a rebuild is always followed
** by a quarter of the table's inserts at least. */
static int reserve(mem_store *m, shard *sh, size_t extra, int64_t now) {
  size_t cap;
  int rc;
  if ((sh->used + extra) * 4 <= sh->cap * 3)
    return SLUICE_OK;
  rc = rebuild(m, sh, sh->cap, now, NULL, NULL);
  if (rc == SLUICE_OK && (sh->used + extra) * 2 <= sh->cap)
    return SLUICE_OK;
  for (cap = sh->cap * 2; (sh->used + extra) * 2 > cap; cap *= 2)
    ;
  rc = rebuild(m, sh, cap, now, NULL, NULL);
  if (rc == SLUICE_OK || sh->used + extra < sh->cap)
    return SLUICE_OK;
  return SLUICE_ENOMEM;
}

/* A write of a record expiring at `exp` lowers the sweep gate. */
static void note_expiry(mem_store *m, int64_t exp) {
  int64_t cur = atomic_load_explicit(&m->no_expiry_before, memory_order_relaxed);
  while (exp < cur &&
         !atomic_compare_exchange_weak_explicit(&m->no_expiry_before, &cur, exp,
                                                memory_order_relaxed,
                                                memory_order_relaxed))
    ;
}

static void lock_group(mem_store *m, const fpkey *f, int n, int lock) {
  uint64_t mask = 0;
  int s;
  if (n == 1) { /* the common case: one shard, no ordering to work out */
    pthread_mutex_t *mu = &m->shards[shard_of(&f[0])].mu;
    if (lock)
      pthread_mutex_lock(mu);
    else
      pthread_mutex_unlock(mu);
    return;
  }
  for (s = 0; s < n; s++)
    mask |= UINT64_C(1) << shard_of(&f[s]);
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

/* Claim n new records' share of max_keys atomically: a check-then-add
** would let groups on other shards pass the same check at once. */
static int claim_keys(mem_store *m, int64_t n) {
  int64_t before = atomic_fetch_add_explicit(&m->count, n, memory_order_relaxed);
  if (m->max_keys > 0 && before + n > m->max_keys) {
    atomic_fetch_sub_explicit(&m->count, n, memory_order_relaxed);
    return SLUICE_EFULL;
  }
  return SLUICE_OK;
}

/* The same for untrusted records, which claim both bounds.  No eviction
** here (the shm store evicts): a heap store's bound is a process's own. */
static int claim_untrusted(mem_store *m, int64_t n) {
  int64_t before;
  if (claim_keys(m, n) != SLUICE_OK)
    return SLUICE_EFULL;
  before = atomic_fetch_add_explicit(&m->ucount, n, memory_order_relaxed);
  if (m->max_untrusted > 0 && before + n > m->max_untrusted) {
    atomic_fetch_sub_explicit(&m->ucount, n, memory_order_relaxed);
    atomic_fetch_sub_explicit(&m->count, n, memory_order_relaxed);
    return SLUICE_EFULL;
  }
  return SLUICE_OK;
}

static int mem_apply_locked(mem_store *m, const sluice__job *job,
                            const fpkey *f, int64_t now) {
  sluice_state in[SLUICE_PROGRAM_KEYS], out[SLUICE_PROGRAM_KEYS];
  int64_t exp[SLUICE_PROGRAM_KEYS];
  long at[SLUICE_PROGRAM_KEYS];
  size_t gap[SLUICE_PROGRAM_KEYS]; /* an absent key's empty slot */
  int i, rc, nnew = 0, inserted = 0, moved = 0, n = job->nkeys;
  int untrusted = sluice__job_record_class(job) != SLUICE_CLASS_SERVICE;
  uint64_t reserved = 0; /* shards whose room is made */

  if (n < 1) /* mem_job_pre() checked; this tells the compiler in[] is set */
    return SLUICE_EINVAL;
  for (i = 0; i < n; i++) {
    const shard *sh = &m->shards[shard_of(&f[i])];
    at[i] = find(sh, &f[i], &gap[i]);
    if (at[i] >= 0 && sh->slots[at[i]].expires > now)
      in[i] = sh->slots[at[i]].st;
    else
      memset(&in[i], 0, sizeof in[i]);
  }
  rc = sluice__job_run(job, in, out, now);
  if (rc != SLUICE_OK)
    return rc;
  /* Everything that can fail happens before the first write. */
  for (i = 0; i < n; i++) {
    exp[i] = sluice__job_expiry(job, i, &out[i]);
    nnew += at[i] < 0 && exp[i] > now;
  }
  if (nnew > 0 && (untrusted ? claim_untrusted(m, nnew)
                             : claim_keys(m, nnew)) != SLUICE_OK)
    return SLUICE_EFULL;
  /* Room for each shard's new records, once per shard: the first new
  ** record of a shard counts every new one of that shard. */
  for (i = 0; nnew > 0 && i < n; i++) {
    unsigned s = shard_of(&f[i]);
    size_t need = 0;
    int k;
    if (at[i] >= 0 || exp[i] <= now || (reserved >> s & 1u))
      continue;
    reserved |= UINT64_C(1) << s;
    for (k = i; k < n; k++)
      need += shard_of(&f[k]) == s && at[k] < 0 && exp[k] > now;
    /* reserve() rebuilds, moving slots, exactly when they do not fit. */
    moved |= (m->shards[s].used + need) * 4 > m->shards[s].cap * 3;
    rc = reserve(m, &m->shards[s], need, now);
    if (rc != SLUICE_OK) {
      atomic_fetch_sub_explicit(&m->count, nnew, memory_order_relaxed);
      if (untrusted)
        atomic_fetch_sub_explicit(&m->ucount, nnew, memory_order_relaxed);
      return rc;
    }
  }
  for (i = 0; i < n; i++) {
    shard *sh = &m->shards[shard_of(&f[i])];
    size_t ins = 0;
    long j = -1;
    /* An absent record that stays absent is left alone. */
    if (at[i] < 0 && exp[i] <= now)
      continue;
    /* A new key needs its empty slot; after a rebuild or a deletion
    ** (which shifts its neighbours) every key is found again.  The lines
    ** are in cache by now.  Else the slot its first lookup ended on, when
    ** no new key of this program took it: the slots before it are as
    ** they were (inserts fill gaps only) and none of them is the key. */
    if (!moved && at[i] < 0 && is_empty(&sh->slots[gap[i]]))
      ins = gap[i]; /* still the first gap after its chain: j stays -1 */
    else
      j = moved || at[i] < 0 ? find(sh, &f[i], &ins) : at[i];
    if (exp[i] <= now) {
      if (j >= 0) {
        remove_at(m, sh, (size_t)j);
        moved = 1;
      }
      continue;
    }
    if (j < 0) {
      j = (long)ins;
      sh->slots[j].fp[0] = f[i].fp[0];
      sh->slots[j].fp[1] = f[i].fp[1];
      sh->slots[j].untrusted = (uint64_t)untrusted;
      sh->used++;
      inserted++;
    }
    sh->slots[j].st = out[i];
    sh->slots[j].expires = exp[i];
    note_expiry(m, exp[i]);
  }
  /* More than claimed when a rebuild above dropped an expired record that
  ** this program rewrites (the rebuild already took it off the count). */
  if (inserted != nnew) {
    atomic_fetch_add_explicit(&m->count, inserted - nnew, memory_order_relaxed);
    if (untrusted)
      atomic_fetch_add_explicit(&m->ucount, inserted - nnew,
                                memory_order_relaxed);
  }
  return SLUICE_OK;
}

static int64_t sweep_all(mem_store *m, int64_t now) {
  int64_t dropped = 0, min_exp = INT64_MAX;
  int s;
  for (s = 0; s < NSHARD; s++) {
    shard *sh = &m->shards[s];
    pthread_mutex_lock(&sh->mu);
    /* ENOMEM keeps the shard as it is; min_exp then only covers the rest,
    ** so leave the gate open. */
    if (rebuild(m, sh, sh->cap, now, &dropped, &min_exp) != SLUICE_OK)
      min_exp = now;
    pthread_mutex_unlock(&sh->mu);
  }
  atomic_store_explicit(&m->no_expiry_before, min_exp, memory_order_relaxed);
  return dropped;
}

/* A program: every record's shard locked (ascending), the whole program
** run under them.  pre: the fingerprints of the
** first npre keys, made already (a batch's staging); the rest are made
** here. */
static int mem_job_pre(sluice_store *s, const sluice__job *job, int64_t now,
                       const fpkey *pre, int npre) {
  mem_store *m = (mem_store *)s;
  fpkey f[SLUICE_PROGRAM_KEYS];
  int i, rc, n = job->nkeys;
  if (n < 1 || n > SLUICE_PROGRAM_KEYS) /* the core validated it */
    return SLUICE_EINVAL;
  for (i = 0; i < n; i++)
    f[i] = i < npre ? pre[i] : fingerprint_at(m, &job->keys[i], now);
  lock_group(m, f, n, 1);
  rc = mem_apply_locked(m, job, f, now);
  lock_group(m, f, n, 0);
  if (rc == SLUICE_EFULL &&
      now >= atomic_load_explicit(&m->no_expiry_before, memory_order_relaxed) &&
      sweep_all(m, now) > 0) {
    lock_group(m, f, n, 1);
    rc = mem_apply_locked(m, job, f, now);
    lock_group(m, f, n, 0);
  }
  if (rc == SLUICE_EFULL &&
      sluice__job_record_class(job) != SLUICE_CLASS_SERVICE)
    sluice_store_seterr(s, rc, 0,
                        "mem store holds max_keys=%lld live records, or "
                        "untrusted=%lld of untrusted ones",
                        (long long)m->max_keys, (long long)m->max_untrusted);
  else if (rc == SLUICE_EFULL)
    sluice_store_seterr(s, rc, 0, "mem store holds max_keys=%lld live records",
                        (long long)m->max_keys);
  else if (rc == SLUICE_ENOMEM)
    sluice_store_seterr(s, rc, 0, "out of memory growing the table");
  return rc;
}

/* The hot path, a one-step program over one key that stays live, decided
** under its shard's lock with nothing else around it: a key with a slot is
** rewritten in place (nothing can fail, nothing moves); a new key goes
** into the empty slot its lookup ended on, when the shard has room without
** a rebuild.  Returns 1 when it decided; 0 when it wrote nothing and the
** program needs the general path (a rebuild, a record to free, max_keys),
** which decides it again from the start under the lock: the first try
** left no trace. */
#if defined(__GNUC__)
__attribute__((always_inline)) /* into the single program's path, and the batch's */
#endif
static inline int mem_one(mem_store *m, const sluice_program *p, int64_t now,
                          sluice_program_result *r, int *rc,
                          const fpkey *pre) {
  static const sluice_state fresh;
  fpkey f = pre ? *pre : fingerprint_at(m, &p->keys[0], now);
  shard *sh = &m->shards[shard_of(&f)];
  const sluice_state *in = &fresh;
  sluice_state out;
  slot *sl = NULL;
  size_t ins = 0;
  long at;
  int64_t e;
  pthread_mutex_lock(&sh->mu);
  at = find(sh, &f, &ins);
  /* Read in place: the step writes `out`, never its input. */
  if (at >= 0 && sh->slots[at].expires > now)
    in = &sh->slots[at].st;
  *rc = sluice__program_single(p, in, &out, now, r, &e);
  if (*rc != SLUICE_OK) {
    pthread_mutex_unlock(&sh->mu);
    return 1;
  }
  if (e > now && at >= 0) {
    sl = &sh->slots[at];
  } else if (e > now && p->record_class == SLUICE_CLASS_SERVICE &&
             (sh->used + 1) * 4 <= sh->cap * 3 &&
             claim_keys(m, 1) == SLUICE_OK) {
    sl = &sh->slots[ins];
    sl->fp[0] = f.fp[0];
    sl->fp[1] = f.fp[1];
    sh->used++;
  } else if (e <= now && at < 0) {
    pthread_mutex_unlock(&sh->mu); /* stays fresh: nothing to keep */
    return 1;
  }
  if (sl) {
    sl->st = out;
    sl->expires = e;
    note_expiry(m, e);
  }
  pthread_mutex_unlock(&sh->mu);
  return sl != NULL;
}

/* A program of one step over one record: the hot path's. */
static int is_single(const sluice_program *p) {
  return p->nsteps == 1 && p->nkeys == 1;
}

/* A batch on a big table is a string of independent memory misses, one per
** key; deciding program after program leaves them in series.  So the batch
** runs as a pipeline over a ring of fingerprints: some programs ahead of
** the one being decided, a program's first keys are hashed and their slots
** prefetched; then the programs are decided in order, one by one as a
** single one is (the same results, in the same order: the prefetch changes
** nothing).  The prefetch reads a shard's table pointer and size without
** its lock (atomic loads; a rebuild stores them atomically): a stale pair
** points at a table being replaced, and a prefetch of it costs a useless
** line fetch at worst (a prefetch never faults).  One-record programs
** (operations) run SINGLE_AHEAD ahead: about a DRAM latency of work, and as
** many misses as the core keeps in flight.  A policy program reads four
** records before its heavy ones, so RUN_AHEAD programs ahead keep about as
** many misses in flight; only its first RUN_STAGED records are prefetched,
** since a heavy program's lease slots are many and seldom all read. */
#define SINGLE_AHEAD 16
#define RUN_AHEAD 4
#define RUN_STAGED 6

/* The lines a decision reads: a 48-byte slot straddles two cache lines
** for every other home, and a key is one past its home about a third of
** the time (linear probing below a 3/4 load), so the home slot's first and
** last byte and the next slot's last byte.  Prefetching the first line
** alone left the second miss of half the decisions in series.  Always
** inlined, as the shm store's: GCC can drop calls of a function it finds
** free of side effects, and a prefetch is not one to it. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void prefetch_home(mem_store *m, const fpkey *f) {
  shard *sh = &m->shards[shard_of(f)];
  slot *t = __atomic_load_n(&sh->slots, __ATOMIC_RELAXED);
  size_t cap = __atomic_load_n(&sh->cap, __ATOMIC_RELAXED);
  size_t i = (size_t)f->fp[0] & (cap - 1);
  const char *a = (const char *)&t[i];
  __builtin_prefetch(a, 1);
  __builtin_prefetch(a + sizeof(slot) - 1, 1);
  if (i + 1 < cap) /* the last slot's chain wraps to the first */
    __builtin_prefetch(a + 2 * sizeof(slot) - 1, 1);
}

/* The program's first RUN_STAGED keys hashed into f; returns how many. */
static int run_stage(mem_store *m, const sluice_program *p, fpkey *f) {
  int i;
  for (i = 0; i < p->nkeys && i < RUN_STAGED; i++) {
    f[i] = fingerprint(m, &p->keys[i]);
    prefetch_home(m, &f[i]);
  }
  return i;
}

/* One program, its first nf fingerprints made already. */
/* Inline in mem_run too: a one-program call crosses one frame less. */
__attribute__((always_inline)) static inline int
mem_run_one(mem_store *m, const sluice_program *p, int64_t now,
            sluice_program_result *r, const fpkey *f, int nf) {
  sluice__job job;
  int rc;
  if (is_single(p) && mem_one(m, p, now, r, &rc, nf ? f : NULL))
    return rc;
  sluice__job_program(&job, p, r);
  return mem_job_pre(&m->base, &job, now, f, nf);
}

/* A batch: each program's keys hashed and prefetched `ahead` programs
** before it runs.  Kept out of mem_run, whose one-program call must not pay
** for this frame. */
__attribute__((noinline)) static int
mem_run_batch(mem_store *m, int n, const sluice_program *ps, int64_t now,
              sluice_program_result *res, int *rcs) {
  fpkey ring[SINGLE_AHEAD][RUN_STAGED], f[RUN_STAGED];
  int staged[SINGLE_AHEAD], ahead, j;
  ahead = is_single(&ps[0]) ? SINGLE_AHEAD : RUN_AHEAD;
  for (j = 0; j < n && j < ahead; j++)
    staged[j] = run_stage(m, &ps[j], ring[j]);
  for (j = 0; j < n; j++) {
    int k = j % ahead, nf = staged[k];
    /* Copied out, so that its ring entry takes the program `ahead` on. */
    memcpy(f, ring[k], (size_t)nf * sizeof *f);
    if (j + ahead < n)
      staged[k] = run_stage(m, &ps[j + ahead], ring[k]);
    rcs[j] = mem_run_one(m, &ps[j], now, &res[j], f, nf);
  }
  return SLUICE_OK;
}

static int mem_run(sluice_store *s, int n, const sluice_program *ps,
                   int64_t now, sluice_program_result *res, int *rcs) {
  mem_store *m = (mem_store *)s;
  if (n > 1)
    return mem_run_batch(m, n, ps, now, res, rcs);
  rcs[0] = mem_run_one(m, ps, now, res, NULL, 0);
  return SLUICE_OK;
}

/* The limiter's single program (store.h). */
static int mem_run1(sluice_store *s, const sluice_program *p, int64_t now,
                    sluice_program_result *res) {
  return mem_run_one((mem_store *)s, p, now, res, NULL, 0);
}

static int mem_get(sluice_store *s, const sluice_key *k, int64_t now,
                   sluice_state *out, int64_t *exp) {
  mem_store *m = (mem_store *)s;
  fpkey f = fingerprint_at(m, k, now);
  shard *sh = &m->shards[shard_of(&f)];
  long j;
  int rc = SLUICE_ENOTFOUND;
  pthread_mutex_lock(&sh->mu);
  j = find(sh, &f, NULL);
  if (j >= 0 && sh->slots[j].expires > now) {
    *out = sh->slots[j].st;
    *exp = sh->slots[j].expires;
    rc = SLUICE_OK;
  } else if (j >= 0) {
    remove_at(m, sh, (size_t)j); /* met an expired record: reclaim it */
  }
  pthread_mutex_unlock(&sh->mu);
  return rc;
}

static int mem_delete(sluice_store *s, const sluice_key *k) {
  mem_store *m = (mem_store *)s;
  fpkey f = fingerprint(m, k);
  shard *sh = &m->shards[shard_of(&f)];
  long j;
  int rc = SLUICE_ENOTFOUND;
  pthread_mutex_lock(&sh->mu);
  j = find(sh, &f, NULL);
  if (j >= 0) {
    remove_at(m, sh, (size_t)j);
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
  case SLUICE_CTL_MEM_HUGE: {
    sluice_mem_huge *h = arg;
    memset(h, 0, sizeof *h);
    h->asked = m->huge;
    h->tables = atomic_load(&m->huge_tables);
    h->bytes = atomic_load(&m->huge_bytes);
    h->fallbacks = atomic_load(&m->huge_fallbacks);
    return SLUICE_OK;
  }
  case SLUICE_CTL_MEM_MEMO:
    *(int64_t *)arg = m->memo ? memo_held(m->memo) : -1;
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
  for (i = 0; i < NSHARD; i++) {
    shard *sh = &m->shards[i];
    if (!sh->slots)
      continue;
    table_free(m, sh, sh->cap * sizeof(slot));
    pthread_mutex_destroy(&sh->mu);
  }
  if (m->memo_mem)
    sluice__store_free(s, m->memo_mem, sizeof(memo) + MEMO_ALIGN - 1);
  return SLUICE_OK;
}

static const sluice_store_methods mem_methods = {
    SLUICE_BACKEND_VERSION,
    mem_close,
    mem_run,     /* xRun: hash and prefetch ahead, then in order */
    mem_get,
    mem_delete,
    mem_control,
    mem_caps,
};

static int mem_open(const sluice_backend *b, const char *uri,
                    const sluice_store_config *cfg, sluice_store *s) {
  mem_store *m = (mem_store *)s;
  int64_t huge = 0, memo_on = 1;
  int i, rc;
  (void)b;
  /* A heap store starts empty: read-only it would have nothing to show. */
  if (cfg->flags & SLUICE_OPEN_READONLY)
    return sluice_store_seterr(s, SLUICE_ENOTSUP, 0,
                               "mem: read-only open is not supported");
  rc = sluice__uri_int(uri, "max_keys", 0, &m->max_keys);
  if (rc != SLUICE_OK)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "mem: max_keys must be a non-negative integer");
  m->max_untrusted = m->max_keys / 4 > 0 ? m->max_keys / 4 : m->max_keys;
  rc = sluice__uri_int(uri, "untrusted", m->max_untrusted, &m->max_untrusted);
  if (rc != SLUICE_OK || m->max_untrusted < 0 ||
      (m->max_keys > 0 && m->max_untrusted > m->max_keys))
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "mem: untrusted must be 0..max_keys");
  rc = sluice__uri_int(uri, "huge_pages", 0, &huge);
  if (rc != SLUICE_OK || huge > 1)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "mem: huge_pages must be 0 or 1");
  m->huge = (int)huge;
  rc = sluice__uri_int(uri, "memo", 1, &memo_on);
  if (rc != SLUICE_OK || memo_on > 1)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "mem: memo must be 0 or 1");
  rc = sluice__random_bytes(m->hkey, sizeof m->hkey);
  if (rc != SLUICE_OK)
    return sluice_store_seterr(s, rc, 0,
                               "mem: no random source for the hash key");
  s->pMethods = &mem_methods; /* from here on xClose frees what was made */
  s->pCore->run1 = mem_run1;
  for (i = 0; i < NSHARD; i++) {
    shard *sh = &m->shards[i];
    sh->slots = sluice__store_malloc(s, MIN_SLOTS * sizeof(slot));
    if (!sh->slots)
      return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "mem: out of memory");
    memset(sh->slots, 0, MIN_SLOTS * sizeof(slot));
    sh->cap = MIN_SLOTS;
    pthread_mutex_init(&sh->mu, NULL);
  }
  if (memo_on) {
    /* Aligned by hand, since the allocator promises no more than malloc's
    ** alignment: a line must not share a cache line with another. */
    m->memo_mem = sluice__store_malloc(s, sizeof(memo) + MEMO_ALIGN - 1);
    if (!m->memo_mem)
      return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "mem: out of memory");
    m->memo = (memo *)(((uintptr_t)m->memo_mem + MEMO_ALIGN - 1) &
                       ~(uintptr_t)(MEMO_ALIGN - 1));
    memset(m->memo, 0, sizeof(memo));
  }
  return SLUICE_OK;
}

static const char *const mem_params[] = {"max_keys", "untrusted", "huge_pages", "memo",
                                         NULL};

const sluice_backend sluice__backend_mem = {SLUICE_BACKEND_VERSION,
                                            (int)sizeof(mem_store),
                                            "mem", NULL,
                                            mem_open, mem_params};

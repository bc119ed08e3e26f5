/*
** Lock-free shared-memory store.
**
** The table is one mapping (shm_open or an inherited memfd): a header page,
** then `nslots` slots of 48 bytes in open addressing with linear probing.
** Nothing in it is ever locked, so a worker SIGKILLed at any instruction
** leaves nothing held; every transition is one double-width CAS
** (ck_pr_cas_64_2, cmpxchg16b) and every state a crash can leave behind is
** one that the next process knows how to finish or reclaim.
**
** A slot is three words:
**
**   meta  (16 B, CAS)  lo: fingerprint bits 0..63
**                      hi: status 2 | gen 10 | fingerprint 64..74 11 |
**                          evictable 1 | expiry 40 (units of 2^24 ns,
**                          rounded up)
**   state (16 B, CAS)  the algorithm record XOR mask(fingerprint, gen)
**   exp   (8 B)        exact expiry of the last write (xGet only)
**   reach (8 B)        the farthest chain distance at which a key whose
**                      home is this slot was ever claimed
**
** The key itself is never stored: a 75-bit fingerprint of SipHash-1-3-128
** under a random key kept in the header identifies it.  Status is NEVER
** (all zero: ends every probe chain), TENTATIVE (being claimed), LIVE or
** FREE (deleted or given up; keeps probe chains intact).
**
** Why the XOR mask: the state and the meta are separate CAS words, so a
** writer that read key K's state could otherwise land its CAS after the
** slot was reclaimed for key J and happened to hold an equal value.  With
** the state stored under a mask that changes with every (fingerprint,
** generation) binding, such a late CAS compares against a value that the
** new binding produces only with probability 2^-128.  That makes the state
** CAS itself the check that the binding is still the one the writer read.
**
** Invariants, and the ordering that keeps them:
**  a) The meta expiry is an upper bound of the true expiry of the record:
**     a writer raises it (CAS on meta) *before* it CASes in a state that
**     lives longer.  A reclaimer only takes a slot whose meta expiry has
**     passed, so a record it reclaims behaves like a zeroed one: nothing
**     live (a bucket, a box, an offense counter) is ever evicted.  (It also
**     waits RECLAIM_GRACE, about a second, past that expiry: each process
**     reads its own clock, and one that lags must not find its record gone
**     and start from a fresh one.)  Raises round up and add slack (up to
**     2^30 ns) so that a hot key pays for a meta CAS about once a second,
**     not on every decision.
**  b) One LIVE binding per key.  A claim is TENTATIVE until it has been
**     validated: whoever finishes it (the claimer, or any process that
**     meets it while looking for the same key) resets the state to the
**     fresh encoding, scans the key's probe chain, gives way to a LIVE
**     binding or to a TENTATIVE one earlier in the chain, aborts TENTATIVE
**     ones later in it, and only then CASes TENTATIVE -> LIVE.  Any two
**     claims that race meet in each other's scan, so at most one commits.
**  c) A crashed claimer leaves a TENTATIVE slot whose expiry is one unit
**     past its claim: the next user of the same key finishes it, and any
**     other key may reclaim it once that unit has passed.
**  d) Every binding of a key lies within its home slot's reach.  A claimer
**     raises the reach (only ever upwards) before its claim CAS, and every
**     scan for a key stops at the reach it read before scanning.  Of two
**     claims of one key that race, the later claim CAS comes after the
**     earlier one's raise, so the later claimer's validation scan meets the
**     earlier claim; meeting it from one side is enough, because giving
**     way and aborting are each a CAS that the other's commit cannot pass.
**     Why a reach and not just the never-used slot that ends a chain:
**     reclaimed and deleted slots never return to never-used, so once a
**     table has churned every miss would scan the whole window; the reach
**     keeps a scan to the key's own cluster, and so lets the window be
**     wide enough that a table at its capacity (load 3/4) practically
**     never finds a window full (docs/shm.md has the figures).
**
** Decisions.  A decision reads the group's records, runs the program
** on them (records past their expiry read as zeroed, as in every backend),
** and CASes back each record that changed.  A decision that changes nothing
** is linearized by re-reading every record it used with an atomic 16-byte
** load.  A single record whose CAS loses a race is retried on the value
** the failed cmpxchg16b returned (an atomic snapshot; the meta is re-read
** to vouch for the binding), after a pause that doubles up to a bound:
** on a hot key two processes that retry at once collide on about half
** their CASes, and the pause lets one of them through.  This
** keeps the window between a record's read and its CAS to the step
** itself.  Groups of several changed records (a GCRA tenant bucket + key
** bucket) commit in key order; if a later CAS fails, the step is re-run on
** the fresh record, and if the group would now be denied the records
** already charged are rolled back: an exact CAS, or, when another process
** has written the record since, a CAS that takes out this write alone
** (sluice__job_undo; docs/shm.md says where that is exact).  So
** the per-key bound  admitted <= burst + rate * elapsed  holds under any
** interleaving and any crash, give or take the one inexact refund (rate *
** the clock difference of two racing decisions, once per busy period); a crash loses at most the decision in flight
** (and possibly a charge on the group's first key).
**
** Programs (xRun) run the same way over all of their records: one run of
** the sequencer, the changed records CASed in key order as above, and then
** every record the program only looked at (every step over it that ran was
** a CHECK or a PEEK: its box check) re-read: if one changed since it was
** read (a box tripped by another process), the writes are rolled back and
** the program runs again on what is there now.  So an admission is
** linearized at that re-read: once any process's trip is in, no program
** admits the key.  A rollback here is the same as a group's, so a denial
** leaves no charge, lease slot or export-cap count behind (a strike stays:
** it only punishes).  docs/shm.md states the guarantees.
**
** Memory ordering.  Every ck_pr_cas_64_2 is a `lock cmpxchg16b`, a full
** barrier, and so is ck_pr_load_64_2; the three publish points need no
** other fence: the expiry raise (meta CAS) is ordered before the state CAS
** that needs it, a binding's state reset (state CAS) before its
** TENTATIVE -> LIVE commit (meta CAS), and a record's state CAS before the
** advisory exact-expiry store.  Plain reads (meta_read, member_read) use
** ck_pr_load_64 with ck_pr_fence_load between them, which orders them
** (x86-64 keeps loads in order; the fence stops the compiler) so that a
** meta word re-read after a state word vouches for it.  The header is
** written with plain stores and published by storing the magic after
** ck_pr_fence_store; an opener reads the magic, then ck_pr_fence_load,
** then the rest.
**
** Capacity: nslots = capacity * 4/3 (load factor 3/4) and a key lives
** within PROBE_WINDOW slots of its home slot.  A new key that finds no
** never-used, free or expired slot in its window gets SLUICE_EFULL; live
** records are never evicted for it.
**
** Record classes (docs/shm.md): the untrusted records (client IPs, auth
** subjects) are a second table of the same kind after the service's
** slots, so a stranger's flood fills only that one.  There, and only
** there, a new record that finds no slot takes the live slot of the
** evictable record (an untrusted counter: the meta bit, set at its claim)
** with the smallest expiry in its window, the way an expired slot is
** taken: a new generation, so every late write of the old key fails
** (invariant a's argument, for a record that is let go on purpose).
*/
#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends.h"
#include "huge.h"
#include "job.h"
#include "sluice.h"
#include "siphash.h"
#include "random.h"
#include "store.h"
#include <sluice/sluice_shm.h>

#if !defined(CK_F_PR_CAS_64_2) || !defined(CK_F_PR_LOAD_64_2)
#error "the shm backend needs a double-width CAS (ck_pr_cas_64_2)"
#endif

#define SHM_MAGIC "SLUICESH"
#define SHM_LAYOUT 4u /* tests/shm/meson.build names the conformance table after it */
#define HEADER_BYTES 4096u
#define PROBE_WINDOW 1024u
#define DEFAULT_CAPACITY 65536
#define MIN_UNTRUSTED 64 /* keys (and slots) of the untrusted region, at least */
#define MAX_CAPACITY ((int64_t)1 << 32)
#define OPEN_WAIT_MS 500
#define RETRY_MAX (1 << 22) /* pathological contention or a corrupt table */
#define TIGHT_RETRY_MAX 64  /* CAS retries on one snapshot, then a re-read */
#define BACKOFF_MIN 2048u   /* compiler-barrier spins after a lost CAS */
#define BACKOFF_MAX 32768u  /* ... doubling up to this many */

/* meta.hi fields */
#define ST_NEVER 0u
#define ST_TENT 1u
#define ST_LIVE 2u
#define ST_FREE 3u
#define ST_MASK UINT64_C(0x3)
#define GEN_SHIFT 2
#define GEN_MASK (UINT64_C(0x3ff) << GEN_SHIFT)
#define FPX_SHIFT 12
#define FPX_MASK (UINT64_C(0x7ff) << FPX_SHIFT)
#define EVICT_BIT (UINT64_C(1) << 23) /* an untrusted counter: evictable */
#define EXP_SHIFT 24
#define EXP_UNIT_BITS 24
#define EXP_MAX ((UINT64_C(1) << 40) - 1)
#define SLACK_MAX ((int64_t)1 << 30)
#define RECLAIM_GRACE ((int64_t)1 << 30)

typedef struct shm_header {
  uint64_t magic; /* "SLUICESH" in memory order */
  uint32_t layout;       /* SHM_LAYOUT */
  uint32_t state_layout; /* SLUICE_STATE_LAYOUT */
  uint32_t header_bytes;
  uint32_t slot_bytes;
  uint32_t probe_window;
  uint32_t init_claim; /* 0 -> 1 by the one process that initialises */
  uint64_t capacity;
  uint64_t nslots;
  uint64_t total_bytes;
  uint8_t hkey[16];
  uint64_t ucapacity; /* the untrusted region, after the service's slots */
  uint64_t unslots;
  uint32_t uwindow;
  uint32_t pad;
  uint64_t check; /* SipHash of the fields above, magic excluded */
  uint64_t evictions; /* counters evicted from the untrusted region */
} shm_header;

typedef struct shm_slot {
  uint64_t meta[2];
  uint64_t state[2];
  int64_t exp_exact;
  uint64_t reach; /* of the keys whose home is this slot: invariant d */
} __attribute__((aligned(16))) shm_slot;

_Static_assert(sizeof(shm_slot) == 48, "slot layout is part of the format");
_Static_assert(sizeof(shm_header) <= HEADER_BYTES, "header fits its page");

/* One open-addressed table: the service's records, or the untrusted ones
** (region 1), each with its own slots, so neither can take the other's. */
typedef struct shm_region {
  shm_slot *slots;
  uint64_t nslots;
  uint32_t window;
} shm_region;

typedef struct shm_store {
  sluice_store base;
  void *map;
  size_t map_bytes;
  shm_header *hdr;
  shm_region reg[2]; /* by enum sluice_record_class */
  uint8_t hkey[16];
  int huge; /* huge_pages: -1 not asked, 1 on huge pages, 0 fell back */
} shm_store;

/* A key's identity in this table. */
typedef struct khash {
  uint64_t fp;  /* fingerprint bits 0..63 */
  uint64_t fpx; /* fingerprint bits 64..74, in place in meta.hi */
  uint64_t home;
  const shm_region *r; /* the region of its record class */
  uint64_t evict;      /* EVICT_BIT when a claim of it may be evicted */
} khash;

/* ------------------------------------------------------------ helpers --- */

static inline unsigned m_status(const uint64_t m[2]) {
  return (unsigned)(m[1] & ST_MASK);
}
static inline uint64_t m_gen(const uint64_t m[2]) {
  return (m[1] & GEN_MASK) >> GEN_SHIFT;
}
static inline uint64_t m_units(const uint64_t m[2]) { return m[1] >> EXP_SHIFT; }
static inline int m_is(const uint64_t m[2], const khash *k) {
  return m[0] == k->fp && (m[1] & FPX_MASK) == k->fpx;
}
/* Same binding: fingerprint and generation (status and expiry may move). */
static inline int m_same(const uint64_t a[2], const uint64_t b[2]) {
  return a[0] == b[0] && ((a[1] ^ b[1]) & (GEN_MASK | FPX_MASK)) == 0;
}

static uint64_t units_of(int64_t exp_ns) {
  uint64_t u;
  if (exp_ns <= 0)
    return 0;
  u = ((uint64_t)exp_ns + ((UINT64_C(1) << EXP_UNIT_BITS) - 1)) >>
      EXP_UNIT_BITS;
  return u > EXP_MAX ? EXP_MAX : u;
}
/* Expired at now: every instant the units can stand for has passed. */
static inline int units_passed(uint64_t units, int64_t now) {
  return now >= 0 && units <= ((uint64_t)now >> EXP_UNIT_BITS);
}
/* Another key may take the slot: expired, and by more than RECLAIM_GRACE,
** so that a process whose clock lags the reclaimer's (they each read their
** own) still finds the record it may be about to charge. */
static inline int units_reclaimable(uint64_t units, int64_t now) {
  return now >= RECLAIM_GRACE && units_passed(units, now - RECLAIM_GRACE);
}

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* The state mask of a binding: a function of fingerprint and generation
** only, so TENTATIVE and LIVE of one binding share it.  Each word is one
** mix (a bijection) of its own combination of the two: a new generation of
** one key always changes both inputs (an odd multiplier is a bijection too),
** and another key's fingerprint is random.  The two mixes do not depend on
** each other, so they run in parallel; layout 1 chained three. */
static inline void mask_of(const uint64_t m[2], uint64_t out[2]) {
  uint64_t id = m[1] & (GEN_MASK | FPX_MASK);
  out[0] = mix64(m[0] ^ id * UINT64_C(0x9e3779b97f4a7c15));
  out[1] = mix64(m[0] + (id ^ UINT64_C(0x6a09e667f3bcc909)) *
                            UINT64_C(0xd6e8feb86659fd93));
}

/* A meta snapshot from two plain loads: the fingerprint word only changes
** together with the generation in the hi word, so an unchanged hi word
** around the lo load means the pair belongs together. */
static void meta_read(shm_slot *s, uint64_t m[2]) {
  uint64_t hi;
  for (;;) {
    hi = ck_pr_load_64(&s->meta[1]);
    ck_pr_fence_load();
    m[0] = ck_pr_load_64(&s->meta[0]);
    ck_pr_fence_load();
    m[1] = ck_pr_load_64(&s->meta[1]);
    if (m[1] == hi)
      return;
  }
}

/* cls: enum sluice_record_class; evict: the record may be evicted. */
static inline void khash_of(shm_store *t, const sluice_key *key, int cls,
                            int evict, khash *k) {
  uint8_t h[16];
  uint64_t h0, h1;
  sluice__siphash13_128(t->hkey, key->data, key->len, h);
  /* Host byte order, as in the mem store: a mapping is only ever shared
  ** by processes of one host (and this table needs x86-64's cmpxchg16b). */
  memcpy(&h0, h, 8);
  memcpy(&h1, h + 8, 8);
  k->fp = h0;
  k->fpx = (h1 & 0x7ff) << FPX_SHIFT;
  k->r = &t->reg[cls != SLUICE_CLASS_SERVICE];
  k->evict = cls == SLUICE_CLASS_UNTRUSTED && evict ? EVICT_BIT : 0;
  k->home = (uint64_t)(((unsigned __int128)h1 * k->r->nslots) >> 64);
}

static inline shm_slot *slot_at(const khash *k, uint32_t d) {
  uint64_t i = k->home + d;
  if (i >= k->r->nslots)
    i -= k->r->nslots;
  return &k->r->slots[i];
}

/* Slot i's reach, clamped, so that a damaged mapping cannot send a scan
** past the window. */
static inline uint32_t reach_at(const shm_region *r, uint64_t i) {
  uint64_t v = ck_pr_load_64(&r->slots[i].reach);
  return v < r->window ? (uint32_t)v : r->window - 1;
}

/* Key k's chain ends at this distance (invariant d). */
static inline uint32_t reach_of(const khash *k) {
  return reach_at(k->r, k->home);
}

/* Before a claim at distance d.  When the reach is already as far, the load
** that saw it is enough: the claim CAS that follows cannot pass it. */
static void reach_raise(const khash *k, uint32_t d) {
  uint64_t *p = &k->r->slots[k->home].reach, cur = ck_pr_load_64(p);
  while (cur < d && !ck_pr_cas_64_value(p, cur, d, &cur))
    ;
}

static int reclaimable(const uint64_t m[2], int64_t now) {
  unsigned st = m_status(m);
  if (st == ST_NEVER || st == ST_FREE)
    return 1;
  return units_reclaimable(m_units(m), now);
}

/* A new binding of `k` replacing meta `old` (generation moves on). */
static void meta_bind(const uint64_t old[2], const khash *k, unsigned status,
                      uint64_t units, uint64_t out[2]) {
  uint64_t gen = (m_gen(old) + 1) & 0x3ff;
  out[0] = k->fp;
  out[1] = (uint64_t)status | gen << GEN_SHIFT | k->fpx | k->evict |
           units << EXP_SHIFT;
}

static void meta_free(const uint64_t old[2], uint64_t out[2]) {
  uint64_t gen = (m_gen(old) + 1) & 0x3ff;
  out[0] = 0;
  out[1] = ST_FREE | gen << GEN_SHIFT;
}

/* ------------------------------------------------------ claim protocol --- */

enum { FIN_LIVE, FIN_GONE };

/* Give up a TENTATIVE binding.  Losing the race is fine: whatever won has
** moved the slot on (committed it, or aborted it first). */
static void tent_abort(shm_slot *s, const uint64_t tm[2]) {
  uint64_t cmp[2] = {tm[0], tm[1]}, set[2];
  meta_free(tm, set);
  (void)ck_pr_cas_64_2(s->meta, cmp, set);
}

/* Finish the TENTATIVE binding `tm` of key `k` at chain distance `dt`: the
** claimer and every helper run the same steps, each of which is a CAS that
** either succeeds or was made moot by another process's success. */
static int tent_finish(const khash *k, uint32_t dt, const uint64_t tm[2]) {
  shm_slot *s = slot_at(k, dt);
  uint64_t fresh[2], x[2], m[2], cmp[2], set[2];
  uint32_t d, reach;
  long n;

  /* 1. Reset the state to the fresh encoding.  The state is read, then the
  ** meta is re-read: if it still holds this TENTATIVE binding, the value
  ** read is the previous binding's (or already fresh), never a committed
  ** write of this binding, so the CAS cannot wipe one.  (A CAS landing after
  ** a commit compares against a masked value of this binding and fails.) */
  mask_of(tm, fresh);
  for (n = 0;; n++) {
    ck_pr_load_64_2(s->state, x);
    meta_read(s, m);
    if (m[0] != tm[0] || m[1] != tm[1])
      return (m_same(m, tm) && m_status(m) == ST_LIVE) ? FIN_LIVE : FIN_GONE;
    if (x[0] == fresh[0] && x[1] == fresh[1])
      break;
    if (ck_pr_cas_64_2(s->state, x, fresh)) {
      ck_pr_store_64((uint64_t *)&s->exp_exact, 0);
      break;
    }
    if (n > RETRY_MAX)
      return FIN_GONE;
  }

  /* 2. Validate against every other binding of this key in its chain. */
  reach = reach_of(k);
  for (d = 0; d <= reach; d++) {
    shm_slot *o;
    if (d == dt)
      continue;
    o = slot_at(k, d);
    meta_read(o, m);
    if (m_status(m) == ST_NEVER)
      break;
    if (!m_is(m, k))
      continue;
    if (m_status(m) == ST_LIVE || (m_status(m) == ST_TENT && d < dt)) {
      tent_abort(s, tm);
      return FIN_GONE;
    }
    if (m_status(m) == ST_TENT) {
      tent_abort(o, m);
      meta_read(o, m);
      if (m_is(m, k) && m_status(m) == ST_LIVE) {
        tent_abort(s, tm);
        return FIN_GONE;
      }
    }
  }

  /* 3. Commit.  The CAS publishes the reset state (cmpxchg16b is a full
  ** barrier): a reader that sees LIVE sees the fresh encoding or later. */
  cmp[0] = tm[0];
  cmp[1] = tm[1];
  set[0] = tm[0];
  set[1] = (tm[1] & ~ST_MASK) | ST_LIVE;
  if (ck_pr_cas_64_2(s->meta, cmp, set))
    return FIN_LIVE;
  meta_read(s, m);
  return (m_same(m, tm) && m_status(m) == ST_LIVE) ? FIN_LIVE : FIN_GONE;
}

/* Find key k's LIVE binding; with `create`, claim a slot for it.  On
** SLUICE_OK, *dist is its chain distance and m its meta as read. */
static int find(shm_store *t, const khash *k, int64_t now, int create,
                uint32_t *dist, uint64_t m[2]) {
  long n;
  for (n = 0; n < RETRY_MAX; n++) {
    uint32_t d, cand = UINT32_MAX, reach = reach_of(k), vict = UINT32_MAX;
    uint64_t cm[2] = {0, 0}, tm[2], vm[2] = {0, 0};
    int restart = 0;
    /* Past the reach only a slot to claim is looked for. */
    for (d = 0; d < k->r->window; d++) {
      shm_slot *s = slot_at(k, d);
      meta_read(s, m);
      if (m_status(m) == ST_NEVER) {
        if (cand == UINT32_MAX) {
          cand = d;
          cm[0] = m[0];
          cm[1] = m[1];
        }
        break;
      }
      if (m_is(m, k)) {
        if (m_status(m) == ST_LIVE) {
          *dist = d;
          return SLUICE_OK;
        }
        if (m_status(m) == ST_TENT) {
          /* Someone is claiming this key, or died doing so: help. */
          if (tent_finish(k, d, m) == FIN_LIVE) {
            meta_read(s, m);
            if (m_is(m, k) && m_status(m) == ST_LIVE) {
              *dist = d;
              return SLUICE_OK;
            }
          }
          restart = 1;
          break;
        }
      }
      if (cand == UINT32_MAX && reclaimable(m, now)) {
        cand = d;
        cm[0] = m[0];
        cm[1] = m[1];
      } else if (create && (m[1] & EVICT_BIT) && m_status(m) == ST_LIVE &&
                 m_units(m) > units_of(now) + 2 &&
                 (vict == UINT32_MAX || m_units(m) < m_units(vm))) {
        /* The untrusted counter written longest ago (its expiry is its
        ** last write plus its window): the one to evict if nothing is
        ** free.  Only untrusted records carry the bit, in their region.
        ** A claim not yet written (its expiry a unit past its claim) is
        ** not one: it may be another record of this very decision, which
        ** would take this one's slot back in turn. */
        vict = d;
        vm[0] = m[0];
        vm[1] = m[1];
      }
      if (d >= reach && (cand != UINT32_MAX || !create))
        break;
    }
    if (restart)
      continue;
    if (!create)
      return SLUICE_ENOTFOUND;
    if (cand == UINT32_MAX && vict == UINT32_MAX)
      return SLUICE_EFULL;
    if (cand == UINT32_MAX) {
      /* Evict: taken like an expired slot (a new generation, so a late
      ** write of the old key fails its CAS and finds its binding gone, and
      ** starts again from a fresh record, as after an expiry). */
      cand = vict;
      cm[0] = vm[0];
      cm[1] = vm[1];
    }
    /* Claim: the expiry is one unit past now, so an abandoned claim of
    ** another key is reclaimable almost at once. */
    meta_bind(cm, k, ST_TENT, units_of(now) + 1, tm);
    reach_raise(k, cand);
    if (!ck_pr_cas_64_2(slot_at(k, cand)->meta, cm, tm))
      continue;
    if (cand == vict)
      ck_pr_faa_64(&t->hdr->evictions, 1);
    if (tent_finish(k, cand, tm) == FIN_LIVE) {
      meta_read(slot_at(k, cand), m);
      if (m_is(m, k) && m_status(m) == ST_LIVE) {
        *dist = cand;
        return SLUICE_OK;
      }
    }
  }
  return SLUICE_EBUSY;
}

/* find(t, k, now, 0, ...) inline, for a decision's common case, a key
** that is LIVE or absent: the same scan (from the home to the reach read
** first, or to a never-used slot) with the same loads, without the claim
** candidates find() also tracks.  A TENTATIVE binding of the key in the
** way goes to find(), which helps to finish it. */
static inline int lookup(shm_store *t, const khash *k, int64_t now,
                         uint32_t *dist, uint64_t m[2]) {
  uint32_t d, reach = reach_of(k);
  for (d = 0; d <= reach; d++) {
    meta_read(slot_at(k, d), m);
    if (m_status(m) == ST_NEVER)
      break;
    if (m_is(m, k) && m_status(m) == ST_LIVE) {
      *dist = d;
      return SLUICE_OK;
    }
    if (m_is(m, k) && m_status(m) == ST_TENT)
      return find(t, k, now, 0, dist, m);
  }
  return SLUICE_ENOTFOUND;
}

/* Raise binding m's expiry to cover exp_ns (invariant a).  Returns 0 when
** the binding is gone. */
static inline int raise_expiry(shm_slot *s, uint64_t m[2], int64_t exp_ns,
                               int64_t now) {
  uint64_t have, need, cur[2], set[2];
  int64_t target = exp_ns;
  if (exp_ns <= now)
    return 1;
  have = units_of(exp_ns);
  /* Already covered: what a hot key finds on all but about one write a
  ** second (the slack below). */
  if (m_units(m) >= have)
    return 1;
  if (exp_ns != SLUICE_FOREVER) {
    int64_t slack = exp_ns - now;
    if (slack > SLACK_MAX)
      slack = SLACK_MAX;
    target = exp_ns > INT64_MAX - slack ? INT64_MAX : exp_ns + slack;
  }
  need = units_of(target);
  if (have > need)
    need = have;
  for (;;) {
    set[0] = m[0];
    set[1] = (m[1] & ((UINT64_C(1) << EXP_SHIFT) - 1)) | need << EXP_SHIFT;
    if (ck_pr_cas_64_2_value(s->meta, m, set, cur)) {
      m[1] = set[1];
      return 1;
    }
    if (!m_same(cur, m) || m_status(cur) != ST_LIVE)
      return 0;
    m[0] = cur[0];
    m[1] = cur[1];
    if (m_units(m) >= have)
      return 1;
  }
}

/* -------------------------------------------------------------- decide --- */

typedef struct member {
  khash k;
  shm_slot *s;      /* its slot, when bound */
  int bound;        /* s and m are a LIVE binding of k */
  int need;         /* out differs from in: write it */
  int done;         /* written */
  uint64_t m[2];    /* meta as last seen */
  uint64_t mk[2];   /* state mask of that binding */
  uint64_t x[2];    /* raw (masked) state as read */
  sluice_state in;  /* decoded, zeroed when expired */
  sluice_state out;
  int64_t exp;      /* out's expiry, when need */
} member;

/* A read of slot s's state is g's if the meta re-read after it still
** holds g's binding, LIVE; g->m takes the meta as it is now. */
static inline int vouch(shm_slot *s, uint64_t m[2]) {
  uint64_t now_m[2];
  meta_read(s, now_m);
  if (!m_same(now_m, m) || m_status(now_m) != ST_LIVE)
    return 0;
  m[0] = now_m[0];
  m[1] = now_m[1];
  return 1;
}

/* Read bound member g's state with two plain loads (the mask was made at
** the binding, out of the read-to-CAS window), then the meta re-read after
** a load fence, which vouches for it.  0: the binding moved. */
static inline int read_state(member *g) {
  g->x[0] = ck_pr_load_64(&g->s->state[0]);
  g->x[1] = ck_pr_load_64(&g->s->state[1]);
  ck_pr_fence_load();
  return vouch(g->s, g->m);
}

static void encode(const member *g, const sluice_state *st, uint64_t out[2]) {
  out[0] = st->w[0] ^ g->mk[0];
  out[1] = st->w[1] ^ g->mk[1];
}

/* Write g->out: the expiry raise (a CAS on the meta, a full barrier)
** lands before the state CAS that needs it (invariant a).  1: written;
** 0: the CAS lost and cur holds the record's atomic snapshot; -1: the
** binding is gone. */
static inline int write_member(member *g, int64_t now, uint64_t cur[2]) {
  uint64_t set[2];
  if (!raise_expiry(g->s, g->m, g->exp, now))
    return -1;
  encode(g, &g->out, set);
  if (!ck_pr_cas_64_2_value(g->s->state, g->x, set, cur))
    return 0;
  /* Advisory: the exact expiry for xGet; after the CAS, so a reader may
  ** briefly see the previous write's expiry. */
  ck_pr_store_64((uint64_t *)&g->s->exp_exact, (uint64_t)g->exp);
  return 1;
}

/* Member g's record still holds what was read: an atomic re-read of the
** state, then the meta that vouches for it. */
static inline int unchanged(member *g) {
  uint64_t x[2];
  ck_pr_load_64_2(g->s->state, x);
  return vouch(g->s, g->m) && x[0] == g->x[0] && x[1] == g->x[1];
}

/* One program being decided over its records. */
typedef struct decision {
  shm_store *t;
  int64_t now;
  int n;           /* records */
  int writes;      /* after a run: members that need a write */
  int claims;      /* ... of which have no slot yet */
  sluice__job job; /* the program's */
  member g[SLUICE_PROGRAM_KEYS];
} decision;

static inline void decode(decision *c, member *g) {
  g->in.w[0] = g->x[0] ^ g->mk[0];
  g->in.w[1] = g->x[1] ^ g->mk[1];
  if (sluice__job_expiry(&c->job, (int)(g - c->g), &g->in) <= c->now)
    memset(&g->in, 0, sizeof g->in);
}

/* Read a member's state and check its binding still holds. */
/* Member g's lookup or claim returned rc (SLUICE_OK: its slot at distance
** d, meta g->m).  The state mask belongs to the binding, which each read's
** meta check confirms; computed here, before the state is read, it stays
** out of the window between that read and the CAS, which is what a hot
** key contends on. */
static inline void bind(member *g, int rc, uint32_t d) {
  g->bound = rc == SLUICE_OK;
  if (g->bound) {
    g->s = slot_at(&g->k, d);
    mask_of(g->m, g->mk);
  }
}

static inline int member_read(decision *c, member *g) {
  if (!g->bound) {
    memset(&g->in, 0, sizeof g->in);
    return 1;
  }
  if (!read_state(g))
    return 0;
  decode(c, g);
  return 1;
}

/* The program on the records as read.  The core validated it before
** xRun; a retry re-runs only the step, which keeps the window between
** read and CAS short. */
static int run_step(decision *c) {
  sluice_state in[SLUICE_PROGRAM_KEYS], out[SLUICE_PROGRAM_KEYS];
  int i, rc;
  for (i = 0; i < c->n; i++)
    in[i] = c->g[i].in;
  rc = sluice__job_run(&c->job, in, out, c->now);
  if (rc != SLUICE_OK)
    return rc;
  c->writes = c->claims = 0;
  for (i = 0; i < c->n; i++) {
    member *g = &c->g[i];
    g->out = out[i];
    g->need = memcmp(&out[i], &in[i], sizeof out[i]) != 0;
    if (g->need)
      g->exp = sluice__job_expiry(&c->job, i, &out[i]);
    c->writes += g->need;
    c->claims += g->need && !g->bound;
  }
  return SLUICE_OK;
}

/* Undo the writes already made to the first n members: an exact CAS back
** to the pre-image; when others have written the record since, re-read it
** and take out only this write's contribution (sluice__job_undo: the
** charge, the count, the slot), so that a denial leaves no charge behind
** even under contention.  What the undo cannot take out exactly stays
** (only under-admits). */
static void rollback(decision *c, int n) {
  int i;
  for (i = 0; i < n; i++) {
    member *g = &c->g[i];
    shm_slot *s = g->s;
    uint64_t exp[2], cur[2], set[2];
    long tries;
    if (!g->done)
      continue;
    g->done = 0;
    encode(g, &g->out, exp);
    for (tries = 0; tries < RETRY_MAX; tries++) {
      sluice_state now_is, fixed;
      if (ck_pr_cas_64_2_value(s->state, exp, tries == 0 ? g->x : set, cur))
        break;
      /* The slot must still be this key's binding for cur to be its. */
      if (!vouch(s, g->m))
        break;
      now_is.w[0] = cur[0] ^ g->mk[0];
      now_is.w[1] = cur[1] ^ g->mk[1];
      if (!sluice__job_undo(&c->job, i, &g->in, &g->out, &now_is, c->now,
                            &fixed))
        break;
      exp[0] = cur[0];
      exp[1] = cur[1];
      encode(g, &fixed, set);
    }
  }
}

/* After a lost CAS on a hot record: two processes that retry at once keep
** colliding (about half of all CASes fail), and every collision moves the
** cache line between CPUs, a cost of several decisions each time.  A
** pause lets the winner run its next decisions alone with the line in its
** cache.  On bench/shm's hot key (2 processes), BACKOFF_MIN..BACKOFF_MAX
** spins made two processes as fast as one alone where shorter pauses did
** not, and longer ones gained nothing more.  Bounded (unlike
** ck_backoff_eb's 2^20) so that no pause grows long. */
static unsigned lost_cas_pause(unsigned spins) {
  unsigned i;
  for (i = 0; i < spins; i++)
    ck_pr_barrier();
  return spins < BACKOFF_MAX ? spins << 1 : spins;
}

/* Write the changed members in order.  1: committed; 0: start over. */
static int commit(decision *c) {
  int i, j, any = 0, tight = 0;
  unsigned backoff = BACKOFF_MIN;
  for (i = 0; i < c->n; i++) {
    member *g = &c->g[i];
    if (!g->need)
      continue;
    for (;;) {
      uint64_t cur[2];
      sluice_state keep[SLUICE_PROGRAM_KEYS];
      int same = 1, w = write_member(g, c->now, cur);
      if (w < 0) {
        rollback(c, i);
        return 0;
      }
      if (w) {
        g->done = 1; /* x keeps the pre-image, for rollback */
        any = 1;
        break;
      }
      /* Nothing written yet: the caller re-reads everything, except for a
      ** single key, whose failed CAS just returned an atomic snapshot of
      ** the record: the step re-runs on it at once (a hot key's retries
      ** then cost one step, not a whole lookup). */
      if (!any && (c->n > 1 || ++tight > TIGHT_RETRY_MAX))
        return 0;
      backoff = lost_cas_pause(backoff);
      /* A later member moved under us: re-read it (the meta vouches for
      ** the snapshot) and re-run the step.  The members already written
      ** keep their outputs only if the step still gives them the same ones
      ** (GCRA: the group is still admitted). */
      g->x[0] = cur[0];
      g->x[1] = cur[1];
      if (!vouch(g->s, g->m)) {
        rollback(c, i);
        return 0;
      }
      decode(c, g);
      for (j = 0; j < i; j++)
        keep[j] = c->g[j].out;
      if (run_step(c) != SLUICE_OK) {
        rollback(c, i);
        return 0;
      }
      for (j = 0; j < i; j++)
        if (c->g[j].done && memcmp(&keep[j], &c->g[j].out, sizeof keep[j]))
          same = 0;
      if (!same) {
        for (j = 0; j < i; j++)
          c->g[j].out = keep[j];
        rollback(c, i);
        return 0;
      }
      if (!g->need)
        break;
    }
  }
  return 1;
}

/* Every record the decision read and did not write still holds what it
** read.  With nothing written (`all`): every record held those values at
** one instant between the two reads, where the decision is linearized.
** After the writes, only the records the program merely looked at (its
** box check; a record read as absent must still be absent): the writes and
** those reads are then one atomic snapshot (a box tripped by another
** process after the check sends the program round again).  Records its
** steps may write are not watched then: a lease slot that another process
** took meanwhile does not undo a grant of another slot, and undoing a
** release that someone has already used cannot succeed. */
static inline int unchanged_since_read(decision *c, int all) {
  int i;
  for (i = 0; i < c->n; i++) {
    member *g = &c->g[i];
    uint64_t m[2];
    uint32_t d;
    if (g->need || (!all && !sluice__job_watched(&c->job, i)))
      continue;
    if (g->bound ? !unchanged(g)
                 : !all && lookup(c->t, &g->k, c->now, &d, m) !=
                               SLUICE_ENOTFOUND)
      return 0;
  }
  return 1;
}

/* The class and evictability of a program's key i, for khash_of(). */
static inline void prog_khash(shm_store *t, const sluice_program *p, int i,
                              khash *k) {
  int evict = 0;
  if (p->record_class == SLUICE_CLASS_UNTRUSTED) {
    sluice__job j;
    sluice_program_result unused;
    sluice__job_program(&j, p, &unused);
    evict = sluice__job_evictable(&j, i);
  }
  khash_of(t, &p->keys[i], (int)p->record_class, evict, k);
}

/* Claim slots for the records that will hold something and have none, so
** that a peek or a denial of an unknown key never takes a slot. */
static int claim(decision *c) {
  shm_store *t = c->t;
  int i, rc;
  for (i = 0; i < c->n; i++) {
    member *g = &c->g[i];
    uint32_t d;
    if (!g->need || g->bound)
      continue;
    rc = find(t, &g->k, c->now, 1, &d, g->m);
    if (rc == SLUICE_EFULL)
      return sluice_store_seterr(
          &t->base, rc, 0,
          "shm: no free slot within %u of the key's home (%s capacity %llu)",
          (unsigned)g->k.r->window,
          g->k.r == &t->reg[0] ? "service" : "untrusted, every one a box;",
          (unsigned long long)(g->k.r == &t->reg[0] ? t->hdr->capacity
                                                    : t->hdr->ucapacity));
    if (rc != SLUICE_OK)
      return sluice_store_seterr(&t->base, rc, 0,
                                 "shm: table under contention");
    bind(g, rc, d);
  }
  return SLUICE_OK;
}

/* One program over its records, lock-free: read them, run the program,
** claim slots for new records that will hold something, write back what
** changed, re-read what it relied on.  `pre`: the keys' hashes, already
** made (a batch makes them ahead to prefetch their slots), or NULL. */
static int shm_job(shm_store *t, const sluice_program *p, int64_t now,
                   sluice_program_result *res, const khash *pre) {
  decision c;
  int i, rc;
  long attempt;

  c.t = t;
  c.now = now;
  c.n = p->nkeys;
  sluice__job_program(&c.job, p, res);
  for (i = 0; i < c.n; i++) {
    if (pre)
      c.g[i].k = pre[i];
    else
      prog_khash(t, p, i, &c.g[i].k);
    c.g[i].bound = c.g[i].done = 0;
  }
  for (attempt = 0; attempt < RETRY_MAX; attempt++) {
    for (i = 0; i < c.n; i++) {
      member *g = &c.g[i];
      uint32_t d;
      if (!g->bound) {
        rc = lookup(t, &g->k, now, &d, g->m);
        if (rc != SLUICE_OK && rc != SLUICE_ENOTFOUND)
          return sluice_store_seterr(&t->base, rc, 0,
                                     "shm: table under contention");
        bind(g, rc, d);
      }
      if (!member_read(&c, g)) {
        g->bound = 0;
        break;
      }
    }
    if (i < c.n)
      continue;
    rc = run_step(&c);
    if (rc != SLUICE_OK)
      return rc;
    if (c.claims) {
      rc = claim(&c);
      if (rc != SLUICE_OK)
        return rc;
      continue; /* decide again on the claimed records */
    }
    if (!c.writes) {
      if (unchanged_since_read(&c, 1))
        return SLUICE_OK;
      continue;
    }
    if (commit(&c)) {
      if (unchanged_since_read(&c, 0))
        return SLUICE_OK;
      /* Undo (exact CAS, or the undo of this write alone) and decide
      ** again on what is there now. */
      rollback(&c, c.n);
    }
    for (i = 0; i < c.n; i++)
      c.g[i].done = 0;
  }
  return sluice_store_seterr(&t->base, SLUICE_EBUSY, 0,
                             "shm: gave up after %d retries", RETRY_MAX);
}

/* The hot path: a one-step program over one key (nkeys 1, an operation),
** the same steps as shm_job() takes for it, in the same order, with the
** same loads, CASes and checks (the same member helpers), but on one
** member of its own instead of the decision context and the job (whose
** setup, zeroing, copies and two expiry calls were about a third of a
** batched decision's instructions), and with sluice__program_single(), which makes
** the step and the new record's expiry in one call (a single GCRA bucket
** straight to its int64 step).  Returns 1 when it decided (*rc; *r on
** SLUICE_OK); 0 when the program must go through shm_job() from the start: a
** lookup that gave up under contention, a binding that moved, a read-only outcome
** whose re-read differs, a claim that failed, a step that failed on a
** retry, TIGHT_RETRY_MAX lost CASes.  Each of those is a point where
** shm_job() too reads the record again; what this path may have left
** behind is what shm_job() leaves there: a claimed binding (as its first
** pass does) or a raised expiry (invariant a: harmless), never a state
** write.  *r may hold an abandoned try's result then: shm_job()'s
** replaces it (on an error, as for every store, *r means nothing). */
static inline __attribute__((always_inline)) int
shm_one(shm_store *t, const sluice_program *p, int64_t now,
        sluice_program_result *res, int *rc, const khash *k) {
  const sluice_step *st = p->steps;
  member g;
  uint64_t cur[2];
  uint32_t d;
  unsigned backoff = BACKOFF_MIN;
  int tight = 0, atomic_x = 0, r;

  r = lookup(t, k, now, &d, g.m);
  if (r == SLUICE_ENOTFOUND) {
    /* As shm_job(): the step on a fresh record first, and a slot claimed
    ** only for a record that will hold something. */
    memset(&g.in, 0, sizeof g.in);
    *rc = sluice__program_single(p, &g.in, &g.out, now, res, &g.exp);
    if (*rc != SLUICE_OK || memcmp(&g.out, &g.in, sizeof g.in) == 0)
      return 1;
    if (find(t, k, now, 1, &d, g.m) != SLUICE_OK)
      return 0; /* shm_job() says why (SLUICE_EFULL, contention) */
  } else if (r != SLUICE_OK) {
    return 0;
  }
  g.s = slot_at(k, d);
  mask_of(g.m, g.mk);
  if (!read_state(&g))
    return 0;
  for (;;) {
    g.in.w[0] = g.x[0] ^ g.mk[0];
    g.in.w[1] = g.x[1] ^ g.mk[1];
    if (sluice__rec_expiry(st->algo, st->params, 0, &g.in) <= now)
      memset(&g.in, 0, sizeof g.in);
    r = sluice__program_single(p, &g.in, &g.out, now, res, &g.exp);
    if (r != SLUICE_OK) {
      if (atomic_x)
        return 0; /* shm_job() re-reads and decides again */
      *rc = r;
      return 1;
    }
    if (memcmp(&g.out, &g.in, sizeof g.in) == 0) {
      /* Nothing to write.  A snapshot from a failed cmpxchg16b is atomic
      ** and the meta re-read after it vouched for it: the decision is
      ** linearized there (as commit() finds it).  Plain loads are not: an
      ** atomic re-read must find the record unchanged, as in shm_job(). */
      if (!atomic_x && !unchanged(&g))
        return 0;
      break;
    }
    r = write_member(&g, now, cur);
    if (r > 0)
      break;
    /* Lost: re-run the step on the snapshot the failed CAS returned, once
    ** the meta vouches the binding is still this one. */
    if (r < 0 || ++tight > TIGHT_RETRY_MAX)
      return 0;
    backoff = lost_cas_pause(backoff);
    g.x[0] = cur[0];
    g.x[1] = cur[1];
    atomic_x = 1;
    if (!vouch(g.s, g.m))
      return 0;
  }
  *rc = SLUICE_OK;
  return 1;
}

/* Any program: a one-step one-key program on the hot path, else (or when
** it gives up) the job.  `pre`: the keys' hashes, already made, or NULL. */
static int shm_run_one(shm_store *t, const sluice_program *p, int64_t now,
                       sluice_program_result *res, const khash *pre) {
  khash k;
  int rc;
  if (p->nkeys == 1 && p->nsteps == 1) {
    if (!pre) {
      prog_khash(t, p, 0, &k);
      pre = &k;
    }
    if (shm_one(t, p, now, res, &rc, pre))
      return rc;
  }
  return shm_job(t, p, now, res, pre);
}

/* A batch on a big table is a string of independent misses, one per key,
** which deciding op after op leaves in series.  A key's lines form a
** chain of two: its home slot (the reach, and the first metas) and, at a
** 3/4 load, often a slot a few past it where the key lives, which is only
** known once the home is read.  So the batch is a three-stage pipeline
** over a ring of hashes:
**  1. PIPE_AHEAD programs ahead: hash the program's keys and prefetch each
**     home slot
**     (both ends: a 48-byte slot may straddle two lines) and the end of
**     the slot after it;
**  2. CHAIN_AHEAD programs ahead, when the home line has had time to arrive:
**     read the home's reach and prefetch the lines of the slots past the
**     two already fetched, up to the reach (at most CHAIN_MAX from the
**     home): the key lies within its home's reach (invariant d).  On a
**     full 1M-key table 1.4% of the keys decided lie farther than 16
**     from their home and 7% farther than 5 (the previous bound, which
**     left them a miss in series);
**  3. decide the program, exactly as a single one is decided, on the hashes
**     already made: the same verdicts, in the same order.
** A prefetch and the reach read in stage 2 are hints: nothing a decision
** relies on comes from them (the decision reads the reach and every meta
** again with its own atomic loads), so a line another process changes
** meanwhile costs a second fetch, never a wrong verdict.  A program's keys
** are kept when they are at most MANY_KEYS (a tenant + key group); larger
** programs hash their keys again when decided. */
#define PIPE_AHEAD 16
#define CHAIN_AHEAD 8
#define CHAIN_MAX 16
#define MANY_KEYS 2

/* Always inlined: as a function of its own GCC 12 finds it free of side
** effects (a prefetch is not one to its analysis) and drops the calls. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void prefetch_home(const khash *k) {
  const char *s = (const char *)&k->r->slots[k->home];
  __builtin_prefetch(s, 1);
  __builtin_prefetch(s + sizeof(shm_slot) - 1, 1);
  /* The last slot's chain wraps to the first: no line past the table. */
  if (k->home + 1 < k->r->nslots)
    __builtin_prefetch(s + 2 * sizeof(shm_slot) - 1, 1);
}

#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void prefetch_chain(const khash *k) {
  uint32_t d, r = reach_of(k);
  if (r > CHAIN_MAX)
    r = CHAIN_MAX;
  if (r < 2)
    return;
  /* Line by line: a run of slots shares lines (4 slots, 3 lines). */
  if (k->home + r < k->r->nslots) {
    uintptr_t a = (uintptr_t)&k->r->slots[k->home + 2] & ~(uintptr_t)63;
    uintptr_t z = (uintptr_t)&k->r->slots[k->home + r] + sizeof(shm_slot) - 1;
    for (; a <= z; a += 64)
      __builtin_prefetch((const void *)a, 1);
    return;
  }
  for (d = 2; d <= r; d++) { /* the chain wraps to the first slot */
    const char *s = (const char *)slot_at(k, d);
    __builtin_prefetch(s, 1);
    __builtin_prefetch(s + sizeof(shm_slot) - 1, 1);
  }
}

typedef struct many_ent {
  khash k[MANY_KEYS];
  int nk; /* keys hashed: the program's all, or 0 (hashed when decided) */
} many_ent;

static inline void many_stage1(shm_store *t, const sluice_program *p,
                               many_ent *e) {
  e->nk = p->nkeys <= MANY_KEYS ? p->nkeys : 0;
  for (int i = 0; i < e->nk; i++) {
    prog_khash(t, p, i, &e->k[i]);
    prefetch_home(&e->k[i]);
  }
}

static inline void many_stage2(const many_ent *e) {
  for (int i = 0; i < e->nk; i++)
    prefetch_chain(&e->k[i]);
}

/* A batch: each program's keys hashed and their lines fetched ahead of it.
** Kept out of shm_run, whose one-program call must not pay for this
** frame. */
__attribute__((noinline)) static int
shm_run_batch(sluice_store *st, int n, const sluice_program *ps, int64_t now,
              sluice_program_result *res, int *rcs) {
  shm_store *t = (shm_store *)st;
  many_ent ring[PIPE_AHEAD];
  int j;
  for (j = 0; j < n && j < PIPE_AHEAD; j++)
    many_stage1(t, &ps[j], &ring[j]);
  for (j = 0; j < n && j < CHAIN_AHEAD; j++)
    many_stage2(&ring[j]);
  for (j = 0; j < n; j++) {
    many_ent *e = &ring[j % PIPE_AHEAD];
    rcs[j] = shm_run_one(t, &ps[j], now, &res[j], e->nk ? e->k : NULL);
    /* e is decided: its ring entry takes the program PIPE_AHEAD on. */
    if (j + PIPE_AHEAD < n)
      many_stage1(t, &ps[j + PIPE_AHEAD], e);
    if (j + CHAIN_AHEAD < n)
      many_stage2(&ring[(j + CHAIN_AHEAD) % PIPE_AHEAD]);
  }
  return SLUICE_OK;
}

static int shm_run(sluice_store *st, int n, const sluice_program *ps,
                   int64_t now, sluice_program_result *res, int *rcs) {
  if (n > 1)
    return shm_run_batch(st, n, ps, now, res, rcs);
  rcs[0] = shm_run_one((shm_store *)st, ps, now, res, NULL);
  return SLUICE_OK;
}

/* ------------------------------------------------------- get / delete --- */

/* A key read or deleted without its class: it is in one region or none. */
static int find_any(shm_store *t, const sluice_key *key, int64_t now,
                    khash *k, uint32_t *d, uint64_t m[2]) {
  int rc;
  khash_of(t, key, SLUICE_CLASS_SERVICE, 0, k);
  rc = find(t, k, now, 0, d, m);
  if (rc != SLUICE_ENOTFOUND)
    return rc;
  khash_of(t, key, SLUICE_CLASS_UNTRUSTED, 0, k);
  return find(t, k, now, 0, d, m);
}

static int shm_get(sluice_store *st, const sluice_key *key, int64_t now,
                   sluice_state *out, int64_t *exp) {
  shm_store *t = (shm_store *)st;
  khash k;
  long n;
  for (n = 0; n < RETRY_MAX; n++) {
    shm_slot *s;
    uint64_t x[2], m[2], mk[2];
    uint32_t d;
    int64_t e;
    int rc = find_any(t, key, now, &k, &d, m);
    if (rc != SLUICE_OK)
      return rc;
    s = slot_at(&k, d);
    ck_pr_load_64_2(s->state, x);
    e = (int64_t)ck_pr_load_64((uint64_t *)&s->exp_exact);
    if (!vouch(s, m))
      continue;
    mask_of(m, mk);
    out->w[0] = x[0] ^ mk[0];
    out->w[1] = x[1] ^ mk[1];
    /* A zero record is a fresh key, absent in every backend. */
    if ((out->w[0] | out->w[1]) == 0 || e <= now)
      return SLUICE_ENOTFOUND;
    *exp = e;
    return SLUICE_OK;
  }
  return SLUICE_EBUSY;
}

static int shm_delete(sluice_store *st, const sluice_key *key) {
  shm_store *t = (shm_store *)st;
  khash k;
  long n;
  for (n = 0; n < RETRY_MAX; n++) {
    uint32_t d;
    uint64_t m[2], set[2];
    int rc = find_any(t, key, INT64_MIN, &k, &d, m);
    if (rc != SLUICE_OK)
      return rc;
    meta_free(m, set);
    if (ck_pr_cas_64_2(slot_at(&k, d)->meta, m, set))
      return SLUICE_OK;
  }
  return SLUICE_EBUSY;
}

/* ------------------------------------------------------------ control --- */

static int64_t real_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int shm_control(sluice_store *st, int op, void *arg) {
  shm_store *t = (shm_store *)st;
  sluice_shm_stats *ss = (sluice_shm_stats *)arg;
  uint64_t i;
  int c;
  int64_t now;
  if (op == SLUICE_CTL_SHM_HUGE && arg) {
    *(int64_t *)arg = t->huge;
    return SLUICE_OK;
  }
  if (op != SLUICE_CTL_SHM_STATS && op != SLUICE_CTL_SHM_HUGE)
    return SLUICE_ENOTFOUND;
  if (!arg)
    return SLUICE_EINVAL;
  now = ss->now_ns > 0 ? ss->now_ns : real_now();
  ss->capacity = (int64_t)t->hdr->capacity;
  ss->slots = (int64_t)t->reg[0].nslots;
  ss->slot_bytes = (int64_t)sizeof(shm_slot);
  ss->mapping_bytes = (int64_t)t->map_bytes;
  /* The table's own cost per key; the fixed header page comes on top. */
  ss->bytes_per_key =
      (ss->slots * ss->slot_bytes + ss->capacity - 1) / ss->capacity;
  ss->probe_window = t->reg[0].window;
  ss->untrusted_capacity = (int64_t)t->hdr->ucapacity;
  ss->evictions = (int64_t)ck_pr_load_64(&t->hdr->evictions);
  ss->live = ss->pending = ss->longest_reach = ss->untrusted_live = 0;
  for (c = 0; c < 2; c++) {
    const shm_region *rg = &t->reg[c];
    for (i = 0; i < rg->nslots; i++) {
      uint64_t m[2];
      int64_t r = reach_at(rg, i);
      if (r > ss->longest_reach)
        ss->longest_reach = r;
      meta_read(&rg->slots[i], m);
      if (m_status(m) == ST_LIVE && !units_passed(m_units(m), now)) {
        ss->live++;
        ss->untrusted_live += c;
      } else if (m_status(m) == ST_TENT) {
        ss->pending++;
      }
    }
  }
  return SLUICE_OK;
}

static unsigned shm_caps(sluice_store *st) {
  (void)st;
  return SLUICE_CAP_THREADSAFE | SLUICE_CAP_CROSS_PROCESS;
}

static int shm_close(sluice_store *st) {
  shm_store *t = (shm_store *)st;
  if (t->map)
    munmap(t->map, t->map_bytes);
  t->map = NULL;
  return SLUICE_OK;
}

static const sluice_store_methods shm_methods = {
    SLUICE_BACKEND_VERSION,
    shm_close,
    shm_run, /* xRun: lock-free, a batch pipelined (see above) */
    shm_get,
    shm_delete,
    shm_control,
    shm_caps,
};

/* --------------------------------------------------------------- open --- */

static const uint8_t check_key[16] = "sluice-shm-hdr-1";

static uint64_t header_check(const shm_header *h) {
  return sluice__siphash64(check_key, (const uint8_t *)h + 8,
                          offsetof(shm_header, check) - 8);
}

static uint64_t slots_for(int64_t capacity) {
  uint64_t n = (uint64_t)capacity * 4 / 3;
  if (n < PROBE_WINDOW)
    n = PROBE_WINDOW;
  return n;
}

/* The untrusted region: as small as asked (its window shrinks to fit). */
static uint64_t uslots_for(int64_t ucapacity) {
  uint64_t n = (uint64_t)ucapacity * 4 / 3;
  return n < MIN_UNTRUSTED ? MIN_UNTRUSTED : n;
}

static int sys_err(sluice_store *s, int e, const char *what, const char *obj) {
  int rc = (e == EACCES || e == EPERM)   ? SLUICE_EPERM
           : e == ENOENT                 ? SLUICE_ENOTFOUND
           : (e == ENOMEM || e == ENOSPC) ? SLUICE_ENOMEM
                                         : SLUICE_EIO;
  return sluice_store_seterr(s, rc, e, "shm: %s %s: %s", what, obj,
                             strerror(e));
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* Size of fd, waiting briefly for a creator between create and ftruncate. */
static int wait_size(int fd, off_t want, off_t *got) {
  struct stat sb;
  int i;
  for (i = 0; i <= OPEN_WAIT_MS; i++) {
    if (fstat(fd, &sb) != 0)
      return -1;
    *got = sb.st_size;
    if (sb.st_size >= want)
      return 0;
    sleep_ms(1);
  }
  return 0;
}

/* A header word read through the file, not the mapping: a page of a
** tmpfs object or a memfd is allocated on its first touch, and touching one
** that cannot be (/dev/shm full, a memory cgroup at its limit) raises
** SIGBUS in the caller.  Until the table is initialised its pages may be
** holes; pread() of a hole allocates nothing.  0 when it cannot be read. */
static uint64_t header_word(int fd, size_t off, size_t n) {
  uint64_t w = 0;
  if (pread(fd, &w, n, (off_t)off) != (ssize_t)n)
    return 0;
  return w;
}

/* Back every page of the table before it is used, so that a full /dev/shm
** is an error here and never a SIGBUS later in whichever process touches a
** page first.  huge_pages=1 populates through the mapping, which allocates
** the pages as the mapping's advice says (fallocate would take 4 KiB pages
** where huge pages are only given to advised mappings); 0 or an errno. */
static int reserve(shm_store *t, int fd, uint64_t total, int huge_p) {
  int e;
#ifdef MADV_POPULATE_WRITE
  if (huge_p) {
    if (madvise(t->map, (size_t)total, MADV_POPULATE_WRITE) == 0)
      return 0;
    if (errno != EINVAL) /* EINVAL: a kernel before 5.14 */
      return errno == EFAULT ? ENOSPC : errno; /* EFAULT: it would SIGBUS */
  }
#else
  (void)t;
  (void)huge_p;
#endif
  do
    e = posix_fallocate(fd, 0, (off_t)total);
  while (e == EINTR);
  return e;
}

static int shm_open_store(const sluice_backend *b, const char *uri,
                          const sluice_store_config *cfg, sluice_store *s) {
  shm_store *t = (shm_store *)s;
  const char *name = NULL, *v;
  char path[256];
  size_t len;
  int64_t fdnum = -1, capacity = DEFAULT_CAPACITY, create_p = 0, huge_p = 0;
  int64_t ucapacity;
  int have_cap, have_ucap, create, init, fd = -1, own_fd = 0, created = 0, rc, i;
  off_t size = 0;
  uint64_t nslots, unslots, total;
  shm_header *h;
  (void)b;

  s->pMethods = &shm_methods; /* xClose copes with a half-open store */
  if (sluice_uri_param(uri, "name", &v, &len) == SLUICE_OK) {
    if (len < 2 || len >= sizeof path || v[0] != '/' ||
        memchr(v + 1, '/', len - 1))
      return sluice_store_seterr(
          s, SLUICE_EINVAL, 0,
          "shm: name must be '/' then 1..254 characters without '/'");
    memcpy(path, v, len);
    path[len] = '\0';
    name = path;
  }
  if (sluice__uri_int(uri, "fd", -1, &fdnum) != SLUICE_OK ||
      fdnum > INT_MAX)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "shm: fd must be a descriptor number");
  if ((name != NULL) == (fdnum >= 0))
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "shm: give exactly one of name=/NAME or fd=N");
  have_cap = sluice_uri_param(uri, "capacity", &v, &len) == SLUICE_OK;
  if (sluice__uri_int(uri, "capacity", DEFAULT_CAPACITY, &capacity) !=
          SLUICE_OK ||
      capacity < 1 || capacity > MAX_CAPACITY)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "shm: capacity must be 1..2^32 keys");
  have_ucap = sluice_uri_param(uri, "untrusted", &v, &len) == SLUICE_OK;
  ucapacity = capacity / 4 > MIN_UNTRUSTED ? capacity / 4 : MIN_UNTRUSTED;
  if (sluice__uri_int(uri, "untrusted", ucapacity, &ucapacity) != SLUICE_OK ||
      ucapacity < MIN_UNTRUSTED || ucapacity > MAX_CAPACITY)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "shm: untrusted must be 64..2^32 keys");
  if (sluice__uri_int(uri, "create", 0, &create_p) != SLUICE_OK ||
      create_p > 1)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0, "shm: create must be 0 or 1");
  if (sluice__uri_int(uri, "huge_pages", 0, &huge_p) != SLUICE_OK || huge_p > 1)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "shm: huge_pages must be 0 or 1");
  create = create_p || (cfg->flags & SLUICE_OPEN_CREATE);
  if (cfg->flags & SLUICE_OPEN_READONLY)
    return sluice_store_seterr(s, SLUICE_ENOTSUP, 0,
                               "shm: read-only open is not supported");

  nslots = slots_for(capacity);
  unslots = uslots_for(ucapacity);
  total = HEADER_BYTES + (nslots + unslots) * sizeof(shm_slot);

  if (name) {
    if (create) {
      fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd >= 0)
        created = 1;
      else if (errno != EEXIST)
        return sys_err(s, errno, "create", name);
    }
    if (fd < 0)
      fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
      return sys_err(s, errno, "open", name);
    own_fd = 1;
  } else {
    fd = (int)fdnum;
    snprintf(path, sizeof path, "fd %d", fd);
    if (fstat(fd, &(struct stat){0}) != 0)
      return sys_err(s, errno, "stat", path);
  }

  if (created) {
    if (ftruncate(fd, (off_t)total) != 0) {
      rc = sys_err(s, errno, "size", path);
      shm_unlink(name);
      close(fd);
      return rc;
    }
  } else if (!name && create) {
    struct stat sb;
    if (fstat(fd, &sb) == 0 && sb.st_size == 0 &&
        ftruncate(fd, (off_t)total) != 0)
      return sys_err(s, errno, "size", path);
  }

  if (wait_size(fd, (off_t)HEADER_BYTES, &size) != 0) {
    rc = sys_err(s, errno, "stat", path);
    goto fail;
  }
  if (size < (off_t)HEADER_BYTES) {
    rc = sluice_store_seterr(s, SLUICE_ECORRUPT, 0,
                             "shm: %s is truncated (%lld bytes, no header)",
                             path, (long long)size);
    goto fail;
  }
  t->map_bytes = (size_t)size;
  if (huge_p)
    t->map = sluice__huge_map_shared(fd, t->map_bytes);
  else
    t->map = mmap(NULL, t->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                  0);
  if (t->map == MAP_FAILED) {
    t->map = NULL;
    rc = sys_err(s, errno, "map", path);
    goto fail;
  }
  h = t->hdr = (shm_header *)t->map;
  /* Per process: each maps the table itself.  Shared memory gets huge
  ** pages only where shmem_enabled allows them (advise or always). */
  t->huge = huge_p ? sluice__huge_advise(t->map, t->map_bytes, 1) : -1;

  /* One process initialises: the one that wins the claim word.  It writes
  ** every field, then publishes the magic after a store fence, so a process
  ** that sees the magic sees a complete header.  Every page is reserved
  ** before that (and before the claim word's page is touched), so a table
  ** whose magic is set never faults on a page that cannot be had. */
  init = create && (uint64_t)size >= total &&
         header_word(fd, offsetof(shm_header, init_claim), 4) == 0 &&
         header_word(fd, offsetof(shm_header, magic), 8) == 0;
  if (init) {
    int e = reserve(t, fd, total, (int)huge_p);
    if (e != 0) {
      rc = sys_err(s, e, "reserve", path);
      goto fail;
    }
  }
  if (init && ck_pr_cas_32(&h->init_claim, 0, 1)) {
    h->layout = SHM_LAYOUT;
    h->state_layout = SLUICE_STATE_LAYOUT;
    h->header_bytes = HEADER_BYTES;
    h->slot_bytes = (uint32_t)sizeof(shm_slot);
    h->probe_window = PROBE_WINDOW;
    h->capacity = (uint64_t)capacity;
    h->nslots = nslots;
    h->ucapacity = (uint64_t)ucapacity;
    h->unslots = unslots;
    h->uwindow = unslots < PROBE_WINDOW ? (uint32_t)unslots : PROBE_WINDOW;
    h->total_bytes = total;
    rc = sluice__random_bytes(h->hkey, sizeof h->hkey);
    if (rc != SLUICE_OK) {
      ck_pr_store_32(&h->init_claim, 0);
      rc = sluice_store_seterr(s, rc, 0, "shm: no random source");
      goto fail;
    }
    h->check = header_check(h);
    ck_pr_fence_store(); /* every field before the magic that vouches */
    {
      uint64_t mg;
      memcpy(&mg, SHM_MAGIC, 8);
      ck_pr_store_64(&h->magic, mg);
    }
    have_cap = have_ucap = 0;
  }
  for (i = 0; i <= OPEN_WAIT_MS; i++) {
    uint64_t mg = header_word(fd, offsetof(shm_header, magic), 8), want;
    memcpy(&want, SHM_MAGIC, 8);
    if (mg == want)
      break;
    if (mg != 0) {
      rc = sluice_store_seterr(s, SLUICE_ECORRUPT, 0,
                               "shm: %s is not a sluice table (bad magic)",
                               path);
      goto fail;
    }
    sleep_ms(1);
  }
  if (i > OPEN_WAIT_MS) {
    rc = sluice_store_seterr(s, SLUICE_EBUSY, 0,
                             "shm: %s was never initialised (creator died?)",
                             path);
    goto fail;
  }
  ck_pr_fence_load(); /* pairs with the creator's store fence */
  if (h->layout != SHM_LAYOUT || h->state_layout != SLUICE_STATE_LAYOUT) {
    rc = sluice_store_seterr(
        s, SLUICE_EVERSION, 0,
        "shm: %s has layout %u / state layout %u, this library uses %u / %u",
        path, h->layout, h->state_layout, SHM_LAYOUT, SLUICE_STATE_LAYOUT);
    goto fail;
  }
  if (h->check != header_check(h) || h->header_bytes != HEADER_BYTES ||
      h->slot_bytes != sizeof(shm_slot) || h->probe_window < 1 ||
      h->nslots < h->probe_window || h->uwindow < 1 ||
      h->unslots < h->uwindow || h->nslots > (uint64_t)1 << 40 ||
      h->unslots > (uint64_t)1 << 40 ||
      h->total_bytes !=
          HEADER_BYTES + (h->nslots + h->unslots) * sizeof(shm_slot)) {
    rc = sluice_store_seterr(s, SLUICE_ECORRUPT, 0,
                             "shm: %s has a corrupt header", path);
    goto fail;
  }
  if ((uint64_t)size < h->total_bytes) {
    rc = sluice_store_seterr(
        s, SLUICE_ECORRUPT, 0, "shm: %s is truncated (%lld of %llu bytes)",
        path, (long long)size, (unsigned long long)h->total_bytes);
    goto fail;
  }
  if (have_cap && h->capacity != (uint64_t)capacity) {
    rc = sluice_store_seterr(
        s, SLUICE_ECONFIG, 0, "shm: %s exists with capacity %llu, not %lld",
        path, (unsigned long long)h->capacity, (long long)capacity);
    goto fail;
  }
  if (have_ucap && h->ucapacity != (uint64_t)ucapacity) {
    rc = sluice_store_seterr(
        s, SLUICE_ECONFIG, 0, "shm: %s exists with untrusted %llu, not %lld",
        path, (unsigned long long)h->ucapacity, (long long)ucapacity);
    goto fail;
  }
  t->reg[0].slots = (shm_slot *)((char *)t->map + HEADER_BYTES);
  t->reg[0].nslots = h->nslots;
  t->reg[0].window = h->probe_window;
  t->reg[1].slots = t->reg[0].slots + h->nslots;
  t->reg[1].nslots = h->unslots;
  t->reg[1].window = h->uwindow;
  memcpy(t->hkey, h->hkey, sizeof t->hkey);
  if (own_fd)
    close(fd);
  return SLUICE_OK;

fail:
  if (t->map)
    munmap(t->map, t->map_bytes);
  t->map = NULL;
  if (created)
    shm_unlink(name);
  if (own_fd)
    close(fd);
  return rc;
}

static const char *const shm_params[] = {"name",   "fd",         "capacity",
                                         "create", "huge_pages", "untrusted",
                                         NULL};

const sluice_backend sluice__backend_shm = {SLUICE_BACKEND_VERSION,
                                            (int)sizeof(shm_store), "shm",
                                            NULL, shm_open_store,
                                            shm_params};

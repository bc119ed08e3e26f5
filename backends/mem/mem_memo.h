/*
** The hot-key memo of the mem store: fingerprints of keys decided again
** and again, so that a hot key does not pay SipHash on every decision.
**
** A fingerprint (SipHash-1-3-128 under the store's random key) is a large
** share of a hot key's decision, the more so for the policy's 40- to
** 75-byte keys (bench-core's hot key shows how much).  Rate-limit traffic is skewed: one
** tenant's bucket under load is the same key thousands of times a second.
** The memo is 64 lines, each one key of 8 to 104 bytes with its
** fingerprint, found by a cheap unkeyed hash of the key and confirmed by
** comparing the whole key and its length, so a hit is exactly the
** fingerprint SipHash would give: no key is ever taken for another.
**
** What an attacker can do with the unkeyed index is choose keys that land
** on a victim's line and evict it: the victim's decisions then cost the
** SipHash they cost without a memo.  The flood resistance of the table is
** the fingerprint's, which the memo does not change.
**
** Lines are shared by the store's threads without a lock (a seqlock per
** line): a reader copies the line between two reads of its sequence and
** keeps the copy only when the sequence was even and unchanged; a writer
** claims the line with a compare-and-swap to an odd sequence (losing the
** race costs only the insert) and publishes with a release store.  Every
** field is an atomic read or written relaxed, on x86 plain moves.
**
** A miss inserts only one time in 64 (chosen by the time of the decision
** and the key's index hash; memo_sampled() says why), so a stream of
** distinct keys, which never hits, seldom writes a line, and a hot key is
** in the memo within tens of microseconds.
*/
#ifndef SLUICE_MEM_MEMO_H
#define SLUICE_MEM_MEMO_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <sluice/algo.h>

#define MEMO_LINES 64 /* a power of two */
#define MEMO_MIN 8    /* keys shorter or longer are not memoised */
#define MEMO_MAX 104
#define MEMO_WORDS 13 /* MEMO_MAX / 8 */
#define MEMO_ALIGN 128 /* a line's size: two cache lines, paired */

/* A key is its length and its words: w[0] its last 8 bytes, then the whole
** 8-byte words from its start that w[0] does not cover entirely, (len - 1)
** / 8 of them.  A word of the start may overlap w[0] when the length is
** not a multiple of 8; with the length, the words are the key, and every
** load reads only the key's own bytes.  The last word comes first because
** keys of one schema mostly differ at their end, and because a key of up
** to 40 bytes then lies in the line's first cache line with its
** fingerprint. */
typedef struct memo_line {
  _Atomic uint32_t seq; /* even: stable; odd: being written */
  _Atomic uint32_t len; /* 0: empty */
  _Atomic uint64_t fp[2];
  _Atomic uint64_t w[MEMO_WORDS];
} memo_line; /* 128 bytes: two cache lines once the array is aligned */

typedef struct memo {
  memo_line line[MEMO_LINES];
} memo;

/* A key as the memo sees it.  Its words are read from the key itself when
** needed, not copied: a copy made in a loop becomes a string move whose
** stores the loads after it cannot forward from. */
typedef struct memo_probe {
  const char *d; /* the key's bytes */
  uint64_t last; /* its last word, w[0] */
  uint64_t h;    /* the unkeyed index hash */
  uint32_t len;  /* 0: the key is not memoised */
  uint32_t nw;   /* words, 1 + (len - 1) / 8 */
} memo_probe;

static inline uint64_t memo_load(const char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Word i of the key, i >= 1. */
static inline uint64_t memo_word(const memo_probe *p, uint32_t i) {
  return memo_load(p->d + 8 * (i - 1));
}

static inline void memo_probe_make(const sluice_key *k, memo_probe *p) {
  const char *d = (const char *)k->data;
  size_t n = k->len;
  if (!d || n < MEMO_MIN || n > MEMO_MAX) {
    memset(p, 0, sizeof *p);
    return;
  }
  p->d = d;
  p->len = (uint32_t)n;
  p->nw = 1 + (uint32_t)(n - 1) / 8;
  p->last = memo_load(d + n - 8);
  /* The last word, the first and the length, one multiply on the critical
  ** path: this runs on every decision, and an index that collides only
  ** costs an eviction. */
  p->h = ((p->last * UINT64_C(0xff51afd7ed558ccd)) ^ memo_load(d) ^ n) *
         UINT64_C(0x9e3779b97f4a7c15);
}

static inline memo_line *memo_line_of(memo *mm, const memo_probe *p) {
  return &mm->line[p->h >> 58]; /* MEMO_LINES == 64 */
}

/* 1 and fp[] set when the memo holds the key. */
static inline int memo_get(memo *mm, const memo_probe *p, uint64_t fp[2]) {
  memo_line *l;
  uint32_t s, i;
  uint64_t f0, f1, diff;
  if (p->len == 0)
    return 0;
  l = memo_line_of(mm, p);
  s = atomic_load_explicit(&l->seq, memory_order_acquire);
  if (s & 1)
    return 0;
  /* A miss is usually known after the first word. */
  if (atomic_load_explicit(&l->w[0], memory_order_relaxed) != p->last ||
      atomic_load_explicit(&l->len, memory_order_relaxed) != p->len)
    return 0;
  diff = 0;
  for (i = 1; i < p->nw; i++)
    diff |= atomic_load_explicit(&l->w[i], memory_order_relaxed) ^
            memo_word(p, i);
  f0 = atomic_load_explicit(&l->fp[0], memory_order_relaxed);
  f1 = atomic_load_explicit(&l->fp[1], memory_order_relaxed);
  /* Orders the copy before the sequence's second read: a writer that
  ** started meanwhile has changed it. */
  atomic_thread_fence(memory_order_acquire);
  if (diff != 0 || atomic_load_explicit(&l->seq, memory_order_relaxed) != s)
    return 0;
  fp[0] = f0;
  fp[1] = f1;
  return 1;
}

/* Whether a miss at `now` inserts: one in 64, varying with the time (the
** microsecond) so that a hot key gets its turn within tens of
** microseconds.  An insert costs as much as a whole hot-key decision (a
** locked instruction on a line other cores read, and the locked
** instructions after it wait for its stores); one in 64 spreads that
** thin over a stream of distinct keys. */
static inline int memo_sampled(const memo_probe *p, int64_t now) {
  return p->len != 0 && ((((uint64_t)now >> 10) ^ (p->h >> 40)) & 63) == 0;
}

static inline void memo_put(memo *mm, const memo_probe *p,
                            const uint64_t fp[2]) {
  memo_line *l;
  uint32_t s, i;
  if (p->len == 0)
    return;
  l = memo_line_of(mm, p);
  s = atomic_load_explicit(&l->seq, memory_order_relaxed);
  if ((s & 1) ||
      !atomic_compare_exchange_strong_explicit(&l->seq, &s, s + 1,
                                               memory_order_relaxed,
                                               memory_order_relaxed))
    return; /* another thread is writing it: skip this insert */
  /* Orders the odd sequence before the new contents: a reader that sees
  ** any of them sees the sequence changed on its second read. */
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&l->len, p->len, memory_order_relaxed);
  atomic_store_explicit(&l->w[0], p->last, memory_order_relaxed);
  for (i = 1; i < p->nw; i++)
    atomic_store_explicit(&l->w[i], memo_word(p, i), memory_order_relaxed);
  atomic_store_explicit(&l->fp[0], fp[0], memory_order_relaxed);
  atomic_store_explicit(&l->fp[1], fp[1], memory_order_relaxed);
  atomic_store_explicit(&l->seq, s + 2, memory_order_release);
}

/* Lines holding a key (SLUICE_CTL_MEM_MEMO): a look, not a snapshot. */
static inline int64_t memo_held(memo *mm) {
  int64_t n = 0;
  int i;
  for (i = 0; i < MEMO_LINES; i++)
    n += atomic_load_explicit(&mm->line[i].len, memory_order_relaxed) != 0;
  return n;
}

#endif

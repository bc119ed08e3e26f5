/*
** The mem store's hot-key memo (backends/mem/mem_memo.h) on its own: a hit
** is only ever the key's own fingerprint.  Every length it memoises, every
** byte of the key, the length itself: a key that differs from the one a
** line holds in any of them misses, even when it lands on that line.
** Keys are allocated at their exact length, so that under ASan a load past
** a key's end fails the run.
*/
#include <stdlib.h>

#include "mem_memo.h"
#include "unit.h"

static memo *memo_new(void) {
  memo *mm = aligned_alloc(MEMO_ALIGN, sizeof(memo));
  cr_assert_not_null(mm);
  memset(mm, 0, sizeof *mm);
  return mm;
}

static sluice_key key_of(const char *src, size_t n) {
  char *d = malloc(n ? n : 1);
  cr_assert_not_null(d);
  memcpy(d, src, n);
  return (sluice_key){d, n};
}

static void key_free(sluice_key k) { free((void *)k.data); }

/* The probe of k, on the line of `on` (so that the whole-key confirmation,
** not the index, decides the miss). */
static memo_probe probe_on(const sluice_key *k, const memo_probe *on) {
  memo_probe p;
  memo_probe_make(k, &p);
  if (on)
    p.h = on->h;
  return p;
}

static int hit(memo *mm, const memo_probe *p, const uint64_t want[2]) {
  uint64_t f[2] = {0, 0};
  int got = memo_get(mm, p, f);
  if (got && want)
    cr_assert(f[0] == want[0] && f[1] == want[1], "a hit with a wrong "
              "fingerprint");
  return got;
}

/* For each length and each byte position, a key differing from the held
** one in that byte alone, and the keys one byte shorter and longer. */
static void every_byte(int fill) {
  rng r = {0x3e3 + (uint64_t)fill};
  char buf[MEMO_MAX + 1];
  for (size_t n = MEMO_MIN; n <= MEMO_MAX; n++) {
    memo *mm = memo_new();
    uint64_t fp[2] = {rng_next(&r), rng_next(&r)};
    sluice_key k;
    memo_probe p;
    for (size_t i = 0; i <= MEMO_MAX; i++)
      buf[i] = fill >= 0 ? (char)fill : (char)rng_next(&r);
    k = key_of(buf, n);
    memo_probe_make(&k, &p);
    cr_assert_eq(p.len, n);
    cr_assert(!hit(mm, &p, NULL), "len %zu: a hit in an empty memo", n);
    memo_put(mm, &p, fp);
    cr_assert(hit(mm, &p, fp), "len %zu: the key put is not found", n);
    for (size_t i = 0; i < n; i++) {
      sluice_key o;
      memo_probe q;
      buf[i] ^= 0x20;
      o = key_of(buf, n);
      q = probe_on(&o, &p);
      cr_assert(!hit(mm, &q, NULL), "len %zu: byte %zu differs, yet a hit", n,
                i);
      key_free(o);
      buf[i] ^= 0x20;
    }
    for (int d = -1; d <= 1; d += 2) {
      sluice_key o = key_of(buf, n + (size_t)d);
      memo_probe q = probe_on(&o, &p);
      if (n + (size_t)d >= MEMO_MIN && n + (size_t)d <= MEMO_MAX)
        cr_assert(!hit(mm, &q, NULL), "len %zu: a key of %zu bytes hits", n,
                  n + (size_t)d);
      key_free(o);
    }
    cr_assert(hit(mm, &p, fp), "len %zu: lost by misses", n);
    cr_assert_eq(memo_held(mm), 1);
    key_free(k);
    free(mm);
  }
}

Test(mem_memo, every_byte_and_the_length_are_the_key) {
  every_byte(-1); /* random bytes */
  every_byte('a'); /* one byte: words that overlap agree, only lengths differ */
  every_byte(0);
}

Test(mem_memo, keys_outside_its_lengths_are_not_memoised) {
  char buf[MEMO_MAX + 2];
  memo *mm = memo_new();
  uint64_t fp[2] = {1, 2};
  memset(buf, 'k', sizeof buf);
  for (size_t n = 0; n < sizeof buf; n++) {
    sluice_key k = key_of(buf, n);
    memo_probe p;
    if (n >= MEMO_MIN && n <= MEMO_MAX) {
      key_free(k);
      continue;
    }
    memo_probe_make(&k, &p);
    cr_assert_eq(p.len, 0, "len %zu memoised", n);
    cr_assert(!memo_sampled(&p, 0));
    memo_put(mm, &p, fp);
    cr_assert_eq(memo_held(mm), 0, "len %zu: put", n);
    key_free(k);
  }
  {
    sluice_key none = {NULL, 16};
    memo_probe p;
    memo_probe_make(&none, &p);
    cr_assert_eq(p.len, 0);
  }
  free(mm);
}

/* One miss in 64 inserts, by the time: over 64 consecutive microseconds
** (1024 ns steps) a key is sampled exactly once. */
Test(mem_memo, a_miss_inserts_one_time_in_64) {
  sluice_key k = key_of("rl:{t:00000001}:kb", 18);
  memo_probe p;
  int n = 0;
  memo_probe_make(&k, &p);
  for (int64_t t = 0; t < 6400 * 1024; t += 1024)
    n += memo_sampled(&p, INT64_C(1764800000000000000) + t);
  cr_assert_eq(n, 100);
  key_free(k);
}

/* A line being written (odd sequence) or rewritten meanwhile is a miss. */
Test(mem_memo, a_line_being_written_is_a_miss) {
  memo *mm = memo_new();
  sluice_key k = key_of("pb:{t:0123456789abcdef}:k", 25);
  uint64_t fp[2] = {7, 9};
  memo_probe p;
  memo_line *l;
  memo_probe_make(&k, &p);
  memo_put(mm, &p, fp);
  l = memo_line_of(mm, &p);
  cr_assert(hit(mm, &p, fp));
  atomic_fetch_add(&l->seq, 1);
  cr_assert(!hit(mm, &p, NULL), "a line mid-write was read");
  memo_put(mm, &p, fp); /* a writer finding it claimed skips */
  cr_assert_eq(atomic_load(&l->seq) & 1, 1);
  atomic_fetch_add(&l->seq, 1);
  cr_assert(hit(mm, &p, fp));
  key_free(k);
  free(mm);
}

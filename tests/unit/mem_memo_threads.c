/*
** Threads sharing the hot-key memo (backends/mem/mem_memo.h) with no lock:
** many keys of many lengths fight over few lines, every miss inserts (not
** one in 64, so that lines are rewritten all the time), and every hit must
** be the fingerprint of the key asked for, never a torn mix of two keys'
** words and fingerprints.  The "fingerprint" here is a fixed function of
** the key: the memo stores whatever it is given.
**
** A plain program, not a Criterion suite: under -Db_sanitize=thread
** (scripts/ci-hardening.sh) it is the data-race check of the memo, which
** ThreadSanitizer cannot run inside Criterion.  Exit status 0: passed.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mem_memo.h"
#include "../common/splitmix.h"

#define THREADS 4
#define NKEYS 512 /* 8 keys a line */
#define ROUNDS 200000

static char keys[NKEYS][MEMO_MAX];
static size_t lens[NKEYS];
static _Alignas(MEMO_ALIGN) memo mm;
static _Atomic long hits, wrong;

/* FNV-1a, then splitmix: a fixed fingerprint of the key's bytes. */
static void fp_of(const char *d, size_t n, uint64_t fp[2]) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < n; i++)
    h = (h ^ (uint8_t)d[i]) * UINT64_C(0x100000001b3);
  fp[0] = splitmix64(&h);
  fp[1] = splitmix64(&h);
}

static void *thread_main(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1;
  long mine = 0, bad = 0;
  for (int r = 0; r < ROUNDS; r++) {
    /* half the time one of 16 hot keys, so that lines also hold still */
    int i = (int)(splitmix64(&seed) % (r & 1 ? 16 : NKEYS));
    sluice_key k = {keys[i], lens[i]};
    memo_probe p;
    uint64_t got[2], want[2];
    memo_probe_make(&k, &p);
    fp_of(keys[i], lens[i], want);
    if (memo_get(&mm, &p, got)) {
      mine++;
      bad += got[0] != want[0] || got[1] != want[1];
    } else {
      memo_put(&mm, &p, want);
    }
  }
  atomic_fetch_add(&hits, mine);
  atomic_fetch_add(&wrong, bad);
  return NULL;
}

int main(void) {
  pthread_t th[THREADS];
  uint64_t seed = 42;
  for (int i = 0; i < NKEYS; i++) {
    /* keys alike but for a few bytes: same prefix, same length classes */
    lens[i] = MEMO_MIN + (size_t)(splitmix64(&seed) % (MEMO_MAX - MEMO_MIN + 1));
    memset(keys[i], 'x', MEMO_MAX);
    snprintf(keys[i], 8, "k%05d", i);
    keys[i][7] = (char)('a' + i % 26);
  }
  for (intptr_t t = 0; t < THREADS; t++)
    if (pthread_create(&th[t], NULL, thread_main, (void *)t) != 0) {
      fprintf(stderr, "mem_memo_threads: pthread_create failed\n");
      return 1;
    }
  for (int t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);
  printf("mem_memo_threads: %ld hits of %d lookups, %ld wrong\n",
         (long)atomic_load(&hits), THREADS * ROUNDS, (long)atomic_load(&wrong));
  if (atomic_load(&wrong) != 0) {
    fprintf(stderr, "mem_memo_threads: a hit gave another key's "
            "fingerprint\n");
    return 1;
  }
  if (atomic_load(&hits) < ROUNDS / 10) {
    fprintf(stderr, "mem_memo_threads: too few hits to test anything\n");
    return 1;
  }
  return 0;
}

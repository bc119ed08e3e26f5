/*
** Threads deciding in batches (apply_many), and one by one through the
** hot-key memo, on shared keys of one mem store, with a clock that refills
** nothing: each key admits exactly its burst, never more.
** A batch's ops are each atomic under their shard's lock; the pipeline's
** prefetch reads a shard's table pointer and size without the lock while
** other threads' new keys grow that table, and must change no verdict.
**
** A plain program, not a Criterion suite: ThreadSanitizer cannot start
** Criterion (tests/events/cr_plain.h says why), and under
** -Db_sanitize=thread (scripts/ci-hardening.sh) this is the data-race check
** of the batch path.  Exit status 0: passed; 1: a failed check (printed).
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sluice.h"
#include "../common/one_step.h"
#include <sluice/sluice_mem.h>
#include "../common/splitmix.h"
#include "../common/units.h"

#define THREADS 4
#define KEYS 4
#define BATCH 40
#define ROUNDS 100
#define GROW 20 /* new keys per thread per round */

typedef struct targ {
  sluice_limiter *l;
  int id;
} targ;

static const sluice_gcra_params p = {1, HOUR, 1500};
static _Atomic long admitted[KEYS], errors;

static void *thread_main(void *arg) {
  targ *t = arg;
  uint64_t seed = (uint64_t)t->id + 77;
  char grow[48];
  for (int round = 0; round < ROUNDS; round++) {
    sluice_key k[BATCH];
    sluice_op ops[BATCH];
    sluice_verdict v[BATCH];
    int rcs[BATCH], w[BATCH];
    char names[BATCH][32];
    for (int b = 0; b < BATCH; b++) {
      /* a key twice in a row half the time */
      w[b] = b % 2 && splitmix64(&seed) % 2
                 ? w[b - 1]
                 : (int)(splitmix64(&seed) % KEYS);
      /* long enough for the hot-key memo (8 to 104 bytes) */
      snprintf(names[b], sizeof names[b], "rl:{t:%d}:tb", w[b]);
      k[b] = (sluice_key){names[b], strlen(names[b])};
      ops[b] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k[b], &p,
                           1, 0};
    }
    if (round % 2 == 0) {
      if (ops_decide(t->l, BATCH, ops, SLUICE_NOW, v, rcs) != SLUICE_OK)
        atomic_fetch_add(&errors, 1);
    } else {
      /* One by one, through the memo: a time that moves by 1024 ns a round
      ** (the memo samples its inserts by the microsecond) and refills
      ** nothing at a point an hour. */
      for (int b = 0; b < BATCH; b++)
        rcs[b] = op_decide(t->l, &ops[b],
                                         1000 * SEC + round * 1024, &v[b]);
    }
    for (int b = 0; b < BATCH; b++) {
      if (rcs[b] != SLUICE_OK)
        atomic_fetch_add(&errors, 1);
      else if (v[b].allowed)
        atomic_fetch_add(&admitted[w[b]], 1);
    }
    /* new keys of its own, so that shard tables grow under the batches */
    for (int i = 0; i < GROW; i++) {
      sluice_verdict gv;
      snprintf(grow, sizeof grow, "tb-grow-%d-%d-%d", t->id, round, i);
      if (sluice_limiter_take(t->l, grow, strlen(grow), &p, 1, &gv) !=
          SLUICE_OK)
        atomic_fetch_add(&errors, 1);
    }
  }
  return NULL;
}

int main(void) {
  sluice_clock *c;
  sluice_limiter *l;
  sluice_limiter_options o;
  pthread_t th[THREADS];
  targ args[THREADS];
  int bad = 0;
  memset(&o, 0, sizeof o);
  if (sluice_clock_manual(1000 * SEC, &c) != SLUICE_OK)
    return 1;
  o.clock = c;
  o.store = "mem";
  if (sluice_limiter_open(&o, &l, NULL, 0) != SLUICE_OK)
    return 1;
  for (int i = 0; i < THREADS; i++) {
    args[i] = (targ){l, i};
    if (pthread_create(&th[i], NULL, thread_main, &args[i]) != 0)
      return 1;
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  if (atomic_load(&errors) != 0) {
    fprintf(stderr, "mem_batch_threads: %ld errors\n", atomic_load(&errors));
    bad = 1;
  }
  /* 4 threads x 100 batches x 40 ops over 4 keys: every key was asked about
  ** 4000 times for its burst of 1500, most of them while other threads
  ** were asking too (a lost update would admit more) */
  for (int i = 0; i < KEYS; i++)
    if (atomic_load(&admitted[i]) != p.burst) {
      fprintf(stderr, "mem_batch_threads: key %d admitted %ld of a burst of "
              "%lld\n", i, atomic_load(&admitted[i]), (long long)p.burst);
      bad = 1;
    }
  {
    int64_t held = -1;
    if (sluice_limiter_control(l, SLUICE_CTL_MEM_MEMO, &held) != SLUICE_OK ||
        held < 1) {
      fprintf(stderr, "mem_batch_threads: the memo holds %lld keys: the "
              "test did not go through it\n", (long long)held);
      bad = 1;
    }
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
  if (!bad)
    printf("mem_batch_threads: %d threads, each key admitted exactly its "
           "burst\n", THREADS);
  return bad;
}

/*
** The store's circuit breaker.
**
** A store that fails (a timeout, a refused connection) makes every request
** wait for its timeout before the policy can fall back.  The breaker stops
** calling a store that fails for a sustained stretch, and only that: a
** short stall must cost only the requests it actually delays.  (Before it,
** one failed call made a worker leave the store alone for the probe
** interval, and a Redis stalling 30 ms every 100 ms turned most of the
** fail-closed requests into 503s.)
**
** States (the usual three):
**
**   CLOSED    every request calls the store, each within its own timeout.
**             Each outcome is counted in a sliding window of SLOTS slots;
**             the breaker opens when, in the window, at least min_calls
**             calls were made and failure_percent of them failed (in at
**             least SPAN slots: choice e), or when
**             `run` calls in a row failed (run > 0).
**   OPEN      nobody calls the store (the policy decides as if it had
**             failed) until open_ns after it opened.
**   HALF_OPEN up to `probes` requests at a time call the store as trials;
**             the others still leave it alone.  The first trial that
**             succeeds closes the breaker with an empty window; a trial
**             that fails opens it again for open_ns.
**
** Concurrency: a closed breaker costs a request one load to admit it and
** one CAS on the current slot word (plus a load of the run) to record it;
** a failure that crosses a threshold and every transition take the mutex
** and re-check the state under it, so exactly one thread opens or closes.
** `until_ns` is stored before the OPEN state (release) and read after it
** (acquire), so a reader that sees OPEN sees its end.
**
** Choices:
**  a) A slot word packs its slot number (mod 2^32), failures and calls
**     (16 bits each) so a slot is reset and counted in one CAS.  When its
**     calls would overflow, both counts are halved: the share, which is all
**     that is compared, is kept.  A slot number 2^32 slots stale (49 days
**     at the smallest slot) could pass for a current one: harmless, it only
**     feeds one estimate.
**  b) Outcomes of calls admitted while CLOSED that finish after the breaker
**     opened are counted in the window but change no state: only trials
**     decide how an open breaker ends.
**  c) The run counts failures across all threads.  In a multi-threaded
**     worker one short stall fails every call in flight at once, so the
**     run is off by default and the share over the window decides.
**  d) Time going backwards: a slot older than `now` says nothing of it
**     and is skipped; an open breaker stays open until its end.
**  e) The share counts only when failures fall in at least SPAN slots of
**     the window, i.e. they lasted longer than a slot (a tenth of it).  A window that
**     holds nothing but one short stall (a policy opened a moment before
**     it, or after a quiet spell) is all failures, and is still not a
**     sustained outage.
*/
#include "breaker.h"

#include <string.h>

#define CALLS_MAX 0xffffu
/* Slots of the window that must hold failures for the share to count
** (choice e). */
#define SPAN 3

static uint64_t slot_no(const sluice__breaker *b, int64_t now) {
  return now > 0 ? (uint64_t)(now / b->slot_ns) : 0;
}

static uint64_t pack(uint64_t epoch, uint64_t fails, uint64_t calls) {
  return (epoch & 0xffffffffu) << 32 | (fails & 0xffffu) << 16 |
         (calls & 0xffffu);
}

int sluice__breaker_init(sluice__breaker *b, const sluice__breaker_params *p) {
  int i;
  memset(b, 0, sizeof *b);
  b->p = *p;
  b->slot_ns = p->window_ns / SLUICE__BRK_SLOTS;
  for (i = 0; i < SLUICE__BRK_SLOTS; i++)
    atomic_init(&b->slot[i], 0);
  atomic_init(&b->run, 0);
  atomic_init(&b->state, SLUICE__BRK_CLOSED);
  atomic_init(&b->until_ns, 0);
  atomic_init(&b->probes_out, 0);
  atomic_init(&b->episode, 0);
  return pthread_mutex_init(&b->mu, NULL) == 0 ? 0 : -1;
}

void sluice__breaker_destroy(sluice__breaker *b) {
  pthread_mutex_destroy(&b->mu);
}

int sluice__breaker_state(const sluice__breaker *b) {
  return atomic_load_explicit(&b->state, memory_order_acquire);
}

/* Count one outcome in the current slot. */
static void count(sluice__breaker *b, int64_t now, int failed) {
  uint64_t e = slot_no(b, now) & 0xffffffffu;
  _Atomic uint64_t *s = &b->slot[e % SLUICE__BRK_SLOTS];
  uint64_t old = atomic_load_explicit(s, memory_order_relaxed), nw;
  do {
    uint64_t fails = 0, calls = 0;
    if ((old >> 32) == e) {
      fails = (old >> 16) & 0xffffu;
      calls = old & 0xffffu;
      if (calls == CALLS_MAX) { /* choice a: keep the share */
        fails /= 2;
        calls /= 2;
      }
    }
    nw = pack(e, fails + (failed != 0), calls + 1);
  } while (!atomic_compare_exchange_weak_explicit(
      s, &old, nw, memory_order_relaxed, memory_order_relaxed));
}

/* The window's share of failures is over the threshold. */
static int rate_trips(sluice__breaker *b, int64_t now) {
  uint64_t e = slot_no(b, now) & 0xffffffffu, calls = 0, fails = 0;
  int i, failing = 0;
  for (i = 0; i < SLUICE__BRK_SLOTS; i++) {
    uint64_t w = atomic_load_explicit(&b->slot[i], memory_order_relaxed);
    uint32_t age = (uint32_t)e - (uint32_t)(w >> 32);
    if (age >= SLUICE__BRK_SLOTS) /* stale, or from the future (d) */
      continue;
    fails += (w >> 16) & 0xffffu;
    calls += w & 0xffffu;
    failing += ((w >> 16) & 0xffffu) != 0;
  }
  return failing >= SPAN && calls >= (uint64_t)b->p.min_calls &&
         fails * 100 >= (uint64_t)b->p.failure_percent * calls;
}

static void clear_window(sluice__breaker *b) {
  int i;
  for (i = 0; i < SLUICE__BRK_SLOTS; i++)
    atomic_store_explicit(&b->slot[i], 0, memory_order_relaxed);
  atomic_store_explicit(&b->run, 0, memory_order_relaxed);
}

/* Under the mutex: the trial was admitted in the current half-open
** episode (a late trial of an earlier one decides nothing). */
static int current_trial(sluice__breaker *b, int ticket) {
  unsigned ep = atomic_load_explicit(&b->episode, memory_order_relaxed);
  return atomic_load_explicit(&b->state, memory_order_relaxed) ==
             SLUICE__BRK_HALF_OPEN &&
         ((unsigned)ticket >> 2) == (ep & 0x1fffffffu);
}

/* Under the mutex: open from now. */
static void open_locked(sluice__breaker *b, int64_t now) {
  int64_t until = now > INT64_MAX - b->p.open_ns ? INT64_MAX
                                                 : now + b->p.open_ns;
  atomic_store_explicit(&b->until_ns, until, memory_order_relaxed);
  atomic_store_explicit(&b->probes_out, 0, memory_order_relaxed);
  atomic_store_explicit(&b->state, SLUICE__BRK_OPEN, memory_order_release);
}

int sluice__breaker_admit(sluice__breaker *b, int64_t now) {
  int st = atomic_load_explicit(&b->state, memory_order_acquire), t;
  if (st == SLUICE__BRK_CLOSED)
    return SLUICE__BRK_CALL;
  if (st == SLUICE__BRK_OPEN &&
      now < atomic_load_explicit(&b->until_ns, memory_order_relaxed))
    return SLUICE__BRK_SKIP;
  if (st == SLUICE__BRK_HALF_OPEN &&
      atomic_load_explicit(&b->probes_out, memory_order_relaxed) >=
          b->p.probes)
    return SLUICE__BRK_SKIP;
  pthread_mutex_lock(&b->mu);
  st = atomic_load_explicit(&b->state, memory_order_relaxed);
  if (st == SLUICE__BRK_OPEN &&
      now >= atomic_load_explicit(&b->until_ns, memory_order_relaxed)) {
    atomic_store_explicit(&b->probes_out, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->episode, 1, memory_order_relaxed);
    atomic_store_explicit(&b->state, SLUICE__BRK_HALF_OPEN,
                          memory_order_release);
    st = SLUICE__BRK_HALF_OPEN;
  }
  if (st == SLUICE__BRK_CLOSED) {
    t = SLUICE__BRK_CALL;
  } else if (st == SLUICE__BRK_HALF_OPEN &&
             atomic_load_explicit(&b->probes_out, memory_order_relaxed) <
                 b->p.probes) {
    atomic_fetch_add_explicit(&b->probes_out, 1, memory_order_relaxed);
    t = SLUICE__BRK_PROBE | (int)((atomic_load_explicit(
                                       &b->episode, memory_order_relaxed) &
                                   0x1fffffffu)
                                  << 2);
  } else {
    t = SLUICE__BRK_SKIP;
  }
  pthread_mutex_unlock(&b->mu);
  return t;
}

int sluice__breaker_done(sluice__breaker *b, int64_t now, int ticket,
                         int failed) {
  int change = SLUICE__BRK_SAME;
  int64_t run;
  if (SLUICE__BRK_KIND(ticket) == SLUICE__BRK_PROBE) {
    pthread_mutex_lock(&b->mu);
    if (current_trial(b, ticket)) {
      if (failed) {
        open_locked(b, now);
        change = SLUICE__BRK_OPENED;
      } else {
        clear_window(b);
        atomic_store_explicit(&b->state, SLUICE__BRK_CLOSED,
                              memory_order_release);
        change = SLUICE__BRK_CLOSED_NOW;
      }
    }
    pthread_mutex_unlock(&b->mu);
    return change;
  }
  if (ticket != SLUICE__BRK_CALL)
    return SLUICE__BRK_SAME;
  count(b, now, failed);
  if (!failed) {
    if (atomic_load_explicit(&b->run, memory_order_relaxed) != 0)
      atomic_store_explicit(&b->run, 0, memory_order_relaxed);
    return SLUICE__BRK_SAME;
  }
  run = atomic_fetch_add_explicit(&b->run, 1, memory_order_relaxed) + 1;
  if (atomic_load_explicit(&b->state, memory_order_relaxed) !=
      SLUICE__BRK_CLOSED)
    return SLUICE__BRK_SAME; /* choice b */
  if (!((b->p.run > 0 && run >= b->p.run) || rate_trips(b, now)))
    return SLUICE__BRK_SAME;
  pthread_mutex_lock(&b->mu);
  if (atomic_load_explicit(&b->state, memory_order_relaxed) ==
      SLUICE__BRK_CLOSED) {
    open_locked(b, now);
    change = SLUICE__BRK_OPENED;
  }
  pthread_mutex_unlock(&b->mu);
  return change;
}

void sluice__breaker_abandon(sluice__breaker *b, int ticket) {
  if (SLUICE__BRK_KIND(ticket) != SLUICE__BRK_PROBE)
    return;
  pthread_mutex_lock(&b->mu);
  if (current_trial(b, ticket) &&
      atomic_load_explicit(&b->probes_out, memory_order_relaxed) > 0)
    atomic_fetch_sub_explicit(&b->probes_out, 1, memory_order_relaxed);
  pthread_mutex_unlock(&b->mu);
}

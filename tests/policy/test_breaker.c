/*
** The store's circuit breaker as a state machine (lib/policy/breaker.c),
** driven by a manual clock: when it opens (a share of failures over the
** window, a run of failures), how long it stays open, how many trials it
** lets through half-open, what closes it; and, with threads, that it
** never lets more trials through at once than it was given.
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "../common/splitmix.h"
#include "helpers.h"
#include "policy/breaker.h"

#define MSEC INT64_C(1000000)

static sluice__breaker_params params(void) {
  sluice__breaker_params p;
  p.window_ns = 1000 * MSEC;
  p.min_calls = 20;
  p.failure_percent = 50;
  p.run = 0;
  p.open_ns = 1000 * MSEC;
  p.probes = 3;
  return p;
}

static int64_t step; /* the clock's advance after each call() */

typedef struct rig {
  sluice_clock *clock;
  sluice__breaker b;
} rig;

static void rig_open(rig *r, const sluice__breaker_params *p) {
  cr_assert_eq(sluice_clock_manual(T0, &r->clock), SLUICE_OK);
  cr_assert_eq(sluice__breaker_init(&r->b, p), 0);
  step = 20 * MSEC;
}

static void rig_close(rig *r) {
  sluice__breaker_destroy(&r->b);
  sluice_clock_free(r->clock);
}

static int64_t now(rig *r) { return sluice_clock_now(r->clock); }

/* `step` ns pass, then one closed call with this outcome; returns what
** the call changed. */
static int call(rig *r, int failed) {
  int t, ch;
  sluice_clock_advance(r->clock, step);
  t = sluice__breaker_admit(&r->b, now(r));
  cr_assert_eq(SLUICE__BRK_KIND(t), SLUICE__BRK_CALL);
  ch = sluice__breaker_done(&r->b, now(r), t, failed);
  return ch;
}

static int state(rig *r) { return sluice__breaker_state(&r->b); }

Test(breaker, opens_at_the_share_once_the_window_has_enough_calls) {
  rig r;
  sluice__breaker_params p = params();
  int i;
  rig_open(&r, &p);
  step = 40 * MSEC; /* 20 calls in 0.8 s: one window */
  /* 19 failures of 19 calls: below min_calls, still closed. */
  for (i = 0; i < 19; i++)
    cr_assert_eq(call(&r, 1), SLUICE__BRK_SAME);
  cr_assert_eq(state(&r), SLUICE__BRK_CLOSED);
  cr_assert_eq(call(&r, 1), SLUICE__BRK_OPENED, "the 20th");
  cr_assert_eq(state(&r), SLUICE__BRK_OPEN);
  rig_close(&r);

  rig_open(&r, &p);
  step = 40 * MSEC;
  /* 50% exactly opens it; 9 of 19 (47%) did not. */
  for (i = 0; i < 10; i++)
    call(&r, 0);
  for (i = 0; i < 9; i++)
    cr_assert_eq(call(&r, 1), SLUICE__BRK_SAME);
  cr_assert_eq(call(&r, 1), SLUICE__BRK_OPENED);
  rig_close(&r);
}

Test(breaker, a_success_never_opens_it) {
  rig r;
  sluice__breaker_params p = params();
  int i;
  rig_open(&r, &p);
  for (i = 0; i < 30 && state(&r) == SLUICE__BRK_CLOSED; i++)
    call(&r, 1 - (i % 3 == 0)); /* 2 of 3 failed... */
  cr_assert_eq(state(&r), SLUICE__BRK_OPEN, "...opened it");
  rig_close(&r);
  rig_open(&r, &p);
  for (i = 0; i < 1000; i++)
    cr_assert_eq(call(&r, 0), SLUICE__BRK_SAME);
  cr_assert_eq(state(&r), SLUICE__BRK_CLOSED);
  rig_close(&r);
}

Test(breaker, old_failures_slide_out_of_the_window) {
  rig r;
  sluice__breaker_params p = params();
  int i;
  rig_open(&r, &p);
  for (i = 0; i < 15; i++)
    call(&r, 1);
  sluice_clock_advance(r.clock, 1100 * MSEC);
  /* The 15 are gone: 5 failed of 15 is a third. */
  for (i = 0; i < 10; i++)
    call(&r, 0);
  for (i = 0; i < 5; i++)
    cr_assert_eq(call(&r, 1), SLUICE__BRK_SAME);
  cr_assert_eq(state(&r), SLUICE__BRK_CLOSED);
  rig_close(&r);
}

Test(breaker, a_stall_pattern_never_opens_it) {
  /* 30 ms failing in every 100 ms, a call every ms: 30% fail.  (It
  ** starts with the good 70 ms: a window holding nothing but the first
  ** stall would be all failures.) */
  rig r;
  sluice__breaker_params p = params();
  int i;
  rig_open(&r, &p);
  step = MSEC;
  for (i = 0; i < 5000; i++)
    cr_assert_eq(call(&r, i % 100 >= 70), SLUICE__BRK_SAME, "call %d", i);
  rig_close(&r);
}

Test(breaker, a_run_opens_it_when_configured) {
  rig r;
  sluice__breaker_params p = params();
  int i;
  p.run = 4;
  p.min_calls = 65535;
  rig_open(&r, &p);
  for (i = 0; i < 100; i++)
    call(&r, 0);
  for (i = 0; i < 3; i++)
    cr_assert_eq(call(&r, 1), SLUICE__BRK_SAME);
  call(&r, 0); /* a success ends the run */
  for (i = 0; i < 3; i++)
    cr_assert_eq(call(&r, 1), SLUICE__BRK_SAME);
  cr_assert_eq(call(&r, 1), SLUICE__BRK_OPENED, "4 in a row");
  rig_close(&r);
}

static void trip(rig *r) {
  int i;
  for (i = 0; i < 20; i++)
    call(r, 1);
  cr_assert_eq(state(r), SLUICE__BRK_OPEN);
}

Test(breaker, open_then_half_open_with_a_limited_number_of_trials) {
  rig r;
  sluice__breaker_params p = params();
  int t[3], i;
  rig_open(&r, &p);
  trip(&r);
  sluice_clock_advance(r.clock, 999 * MSEC);
  for (i = 0; i < 100; i++)
    cr_assert_eq(sluice__breaker_admit(&r.b, now(&r)), SLUICE__BRK_SKIP);
  sluice_clock_advance(r.clock, MSEC);
  for (i = 0; i < 3; i++) {
    t[i] = sluice__breaker_admit(&r.b, now(&r));
    cr_assert_eq(SLUICE__BRK_KIND(t[i]), SLUICE__BRK_PROBE, "trial %d", i);
  }
  cr_assert_eq(state(&r), SLUICE__BRK_HALF_OPEN);
  cr_assert_eq(sluice__breaker_admit(&r.b, now(&r)), SLUICE__BRK_SKIP,
               "no fourth trial at once");
  /* A trial that ended without a word about the store gives its place. */
  sluice__breaker_abandon(&r.b, t[2]);
  t[2] = sluice__breaker_admit(&r.b, now(&r));
  cr_assert_eq(SLUICE__BRK_KIND(t[2]), SLUICE__BRK_PROBE);
  /* The first good trial closes it; the others then decide nothing. */
  cr_assert_eq(sluice__breaker_done(&r.b, now(&r), t[1], 0),
               SLUICE__BRK_CLOSED_NOW);
  cr_assert_eq(state(&r), SLUICE__BRK_CLOSED);
  cr_assert_eq(sluice__breaker_done(&r.b, now(&r), t[0], 1), SLUICE__BRK_SAME);
  cr_assert_eq(state(&r), SLUICE__BRK_CLOSED);
  /* Closed with an empty window: one failure does not reopen it. */
  cr_assert_eq(call(&r, 1), SLUICE__BRK_SAME);
  cr_assert_eq(state(&r), SLUICE__BRK_CLOSED);
  rig_close(&r);
}

Test(breaker, a_failed_trial_opens_it_for_another_interval) {
  rig r;
  sluice__breaker_params p = params();
  int t, late;
  rig_open(&r, &p);
  trip(&r);
  sluice_clock_advance(r.clock, 1000 * MSEC);
  late = sluice__breaker_admit(&r.b, now(&r));
  t = sluice__breaker_admit(&r.b, now(&r));
  cr_assert_eq(SLUICE__BRK_KIND(t), SLUICE__BRK_PROBE);
  sluice_clock_advance(r.clock, 20 * MSEC);
  cr_assert_eq(sluice__breaker_done(&r.b, now(&r), t, 1), SLUICE__BRK_OPENED);
  cr_assert_eq(state(&r), SLUICE__BRK_OPEN);
  sluice_clock_advance(r.clock, 999 * MSEC);
  cr_assert_eq(sluice__breaker_admit(&r.b, now(&r)), SLUICE__BRK_SKIP,
               "open a full interval from the failed trial");
  sluice_clock_advance(r.clock, MSEC);
  t = sluice__breaker_admit(&r.b, now(&r));
  cr_assert_eq(SLUICE__BRK_KIND(t), SLUICE__BRK_PROBE);
  /* A trial of the earlier episode, answering late, decides nothing. */
  cr_assert_eq(sluice__breaker_done(&r.b, now(&r), late, 0), SLUICE__BRK_SAME);
  cr_assert_eq(state(&r), SLUICE__BRK_HALF_OPEN);
  cr_assert_eq(sluice__breaker_done(&r.b, now(&r), t, 0),
               SLUICE__BRK_CLOSED_NOW);
  rig_close(&r);
}

Test(breaker, calls_admitted_before_it_opened_change_nothing) {
  rig r;
  sluice__breaker_params p = params();
  int t, i;
  rig_open(&r, &p);
  t = sluice__breaker_admit(&r.b, now(&r));
  for (i = 0; i < 20; i++)
    call(&r, 1);
  cr_assert_eq(sluice__breaker_done(&r.b, now(&r), t, 0), SLUICE__BRK_SAME);
  cr_assert_eq(state(&r), SLUICE__BRK_OPEN, "only trials close it");
  rig_close(&r);
}

Test(breaker, one_short_stall_alone_in_the_window_is_not_sustained) {
  /* Opened a moment before a 30 ms stall: the window holds nothing but
  ** failures, in two slots at most. */
  rig r;
  sluice__breaker_params p = params();
  int i;
  rig_open(&r, &p);
  sluice_clock_advance(r.clock, 85 * MSEC);
  step = MSEC / 2;
  for (i = 0; i < 60; i++)
    cr_assert_eq(call(&r, 1), SLUICE__BRK_SAME, "call %d", i);
  step = 10 * MSEC;
  for (i = 0; i < 100; i++)
    call(&r, 0);
  cr_assert_eq(state(&r), SLUICE__BRK_CLOSED);
  /* The same failures lasting over a slot more do open it. */
  for (i = 0; i < 30; i++)
    call(&r, 1);
  cr_assert_eq(state(&r), SLUICE__BRK_CLOSED, "a third of the window");
  for (i = 0; i < 100 && state(&r) == SLUICE__BRK_CLOSED; i++)
    call(&r, 1);
  cr_assert_eq(state(&r), SLUICE__BRK_OPEN);
  rig_close(&r);
}

Test(breaker, a_full_slot_keeps_its_share) {
  /* More calls in one slot than its 16-bit count holds. */
  rig r;
  sluice__breaker_params p = params();
  int i;
  rig_open(&r, &p);
  step = 0;
  for (i = 0; i < 200000; i++)
    cr_assert_eq(call(&r, i % 5 < 2), SLUICE__BRK_SAME, "40%%: call %d", i);
  rig_close(&r);
  rig_open(&r, &p);
  step = 0;
  for (i = 0; i < 200000 && state(&r) == SLUICE__BRK_CLOSED; i++) {
    call(&r, i % 5 < 3 || i < 20); /* 60% */
    if (i % 50000 == 49999)
      sluice_clock_advance(r.clock, 100 * MSEC);
  }
  cr_assert_eq(state(&r), SLUICE__BRK_OPEN);
  rig_close(&r);
}

/* --------------------------------------------------------- threads --- */

#define NTHREADS 8
#define EPISODES 4096

typedef struct race {
  sluice__breaker *b;
  sluice_clock *clock;
  _Atomic int out[EPISODES]; /* trials in flight, by half-open episode */
  _Atomic int max_out, opens, closes;
  _Atomic int failing;
} race;

typedef struct racer_arg {
  race *x;
  uint64_t seed;
} racer_arg;

static void *racer(void *arg) {
  racer_arg *a = arg;
  race *x = a->x;
  uint64_t s = a->seed;
  int i;
  for (i = 0; i < 20000; i++) {
    int64_t t_now = sluice_clock_now(x->clock);
    int t = sluice__breaker_admit(x->b, t_now), failed, ch, ep = 0;
    failed = atomic_load(&x->failing) || (splitmix64(&s) % 4 == 0);
    if (i % 64 == 0)
      sluice_clock_advance(x->clock, MSEC);
    if (SLUICE__BRK_KIND(t) == SLUICE__BRK_SKIP)
      continue;
    if (SLUICE__BRK_KIND(t) == SLUICE__BRK_PROBE) {
      int out, m;
      ep = ((unsigned)t >> 2) % EPISODES;
      out = atomic_fetch_add(&x->out[ep], 1) + 1;
      m = atomic_load(&x->max_out);
      while (out > m && !atomic_compare_exchange_weak(&x->max_out, &m, out))
        ;
    }
    ch = sluice__breaker_done(x->b, t_now, t, failed);
    if (SLUICE__BRK_KIND(t) == SLUICE__BRK_PROBE)
      atomic_fetch_sub(&x->out[ep], 1);
    if (ch == SLUICE__BRK_CLOSED_NOW)
      atomic_fetch_add(&x->closes, 1);
    if (ch == SLUICE__BRK_OPENED)
      atomic_fetch_add(&x->opens, 1);
  }
  return NULL;
}

Test(breaker, threads_never_get_more_trials_than_allowed) {
  sluice__breaker_params p = params();
  sluice__breaker b;
  static race x;
  racer_arg args[NTHREADS];
  pthread_t th[NTHREADS];
  int i, t, round;
  p.open_ns = 5 * MSEC;
  p.probes = 2;
  memset(&x, 0, sizeof x);
  cr_assert_eq(sluice__breaker_init(&b, &p), 0);
  cr_assert_eq(sluice_clock_manual(T0, &x.clock), SLUICE_OK);
  x.b = &b;
  /* Two rounds: a store down (opens, failed trials), then back with a
  ** quarter of calls failing (good trials close it). */
  for (round = 0; round < 2; round++) {
    atomic_store(&x.failing, round == 0);
    for (i = 0; i < NTHREADS; i++) {
      args[i].x = &x;
      args[i].seed = (uint64_t)(round * NTHREADS + i + 1);
      cr_assert_eq(pthread_create(&th[i], NULL, racer, &args[i]), 0);
    }
    for (i = 0; i < NTHREADS; i++)
      pthread_join(th[i], NULL);
  }
  cr_assert_leq(atomic_load(&x.max_out), 2, "trials of one episode at once");
  cr_assert_geq(atomic_load(&x.opens), 1);
  cr_assert_geq(atomic_load(&x.closes), 1, "a good trial closed it");
  /* Whatever the race left, a good trial after the interval closes it. */
  sluice_clock_advance(x.clock, 10 * MSEC);
  t = sluice__breaker_admit(&b, sluice_clock_now(x.clock));
  sluice__breaker_done(&b, sluice_clock_now(x.clock), t, 0);
  cr_assert_eq(sluice__breaker_state(&b), SLUICE__BRK_CLOSED);
  sluice__breaker_destroy(&b);
  sluice_clock_free(x.clock);
}

/*
** The store's circuit breaker (breaker.c): whether a request may call the
** store, and what each call's outcome does to that.  Pure: time comes in
** as `now`; no I/O, no clock, no allocation.  Safe from many threads.
*/
#ifndef SLUICE_LIB_POLICY_BREAKER_H
#define SLUICE_LIB_POLICY_BREAKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* The failure-rate window is this many slots of window_ns / SLOTS. */
#define SLUICE__BRK_SLOTS 10

enum sluice__brk_state {
  SLUICE__BRK_CLOSED = 0,   /* every request calls the store */
  SLUICE__BRK_OPEN = 1,     /* nobody does, until open_ns have passed */
  SLUICE__BRK_HALF_OPEN = 2 /* up to `probes` trial calls at a time */
};

/* What sluice__breaker_admit() lets a request do. */
enum sluice__brk_ticket {
  SLUICE__BRK_CALL = 0,  /* call the store (closed) */
  SLUICE__BRK_PROBE = 1, /* call the store as a trial (half-open) */
  SLUICE__BRK_SKIP = 2   /* leave the store alone: decide as failed */
};
/* A PROBE ticket carries its half-open episode above these bits. */
#define SLUICE__BRK_KIND(t) ((t)&3)

/* What sluice__breaker_done() did to the state. */
enum sluice__brk_change {
  SLUICE__BRK_SAME = 0,
  SLUICE__BRK_OPENED = 1, /* closed -> open, or a trial failed */
  SLUICE__BRK_CLOSED_NOW = 2
};

typedef struct sluice__breaker_params {
  int64_t window_ns;       /* failure-rate window */
  int64_t min_calls;       /* calls in the window before the rate counts */
  int64_t failure_percent; /* 1..100: open at this share of failures */
  int64_t run;             /* consecutive failures that open; 0: off */
  int64_t open_ns;         /* open this long before the first trial */
  int64_t probes;          /* trial calls at a time when half-open */
} sluice__breaker_params;

typedef struct sluice__breaker {
  sluice__breaker_params p;
  int64_t slot_ns;
  /* One word per slot, updated by CAS: epoch (slot number mod 2^32) in
  ** the high 32 bits, failures in the next 16, calls in the low 16. */
  _Atomic uint64_t slot[SLUICE__BRK_SLOTS];
  _Atomic int64_t run;      /* consecutive failures so far */
  _Atomic int state;        /* enum sluice__brk_state */
  _Atomic int64_t until_ns; /* OPEN: no trial before this */
  _Atomic int64_t probes_out; /* HALF_OPEN: trials in flight */
  _Atomic unsigned episode;   /* half-open episodes so far */
  /* Transitions only (rare): the fast paths are the atomics above. */
  pthread_mutex_t mu;
} sluice__breaker;

/* Start closed with an empty window.  p is within the bounds of the
** policy's settings table (settings.c: breaker.*, failure.probe_interval_ms),
** which the file loader enforces. */
int sluice__breaker_init(sluice__breaker *b, const sluice__breaker_params *p);
void sluice__breaker_destroy(sluice__breaker *b);

/* May a request at `now` call the store?  Returns a ticket to hand back
** to done(): its SLUICE__BRK_KIND is CALL, PROBE or SKIP (a SKIP ticket
** may be handed back too; it does nothing). */
int sluice__breaker_admit(sluice__breaker *b, int64_t now);
/* The outcome of an admitted call (failed: a store failure).  Returns
** what it changed. */
int sluice__breaker_done(sluice__breaker *b, int64_t now, int ticket,
                         int failed);
/* An admitted call that ended before saying anything about the store (a
** bad request): a trial's place goes back. */
void sluice__breaker_abandon(sluice__breaker *b, int ticket);
int sluice__breaker_state(const sluice__breaker *b);

#endif

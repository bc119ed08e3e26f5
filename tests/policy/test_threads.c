/*
** The policy under contention, at one frozen instant of a manual clock:
** threads racing on one ledger get one lease, threads racing for a
** tenant's slots get exactly the tier's number, and threads draining one
** key never get more than its burst.  Counts, not timings.
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define NTHREADS 16

typedef struct job {
  fixture *f;
  int id, rounds, distinct_ledgers;
  const char *tier;
  int reconcile; /* 1: reconciles, 0: standard requests */
  _Atomic int *allowed;
} job;

static void *worker(void *arg) {
  job *j = arg;
  char ledger[32];
  int i;
  for (i = 0; i < j->rounds; i++) {
    sluice_request r;
    sluice_decision d;
    snprintf(ledger, sizeof ledger, "ledger-%d",
             j->distinct_ledgers ? j->id * 1000 + i : 0);
    r = j->reconcile ? rq_reconcile("acme", "key-1", j->tier, ledger)
                     : rq_std("acme", "key-1", j->tier);
    if (sluice_policy_decide(j->f->pol, 1, &r, &d, NULL) == SLUICE_OK &&
        d.allowed)
      atomic_fetch_add(j->allowed, 1);
  }
  return NULL;
}

static int race(fixture *f, const char *tier, int reconcile, int rounds,
                int distinct) {
  pthread_t t[NTHREADS];
  job j[NTHREADS];
  _Atomic int allowed = 0;
  int i;
  for (i = 0; i < NTHREADS; i++) {
    j[i] = (job){f, i, rounds, distinct, tier, reconcile, &allowed};
    cr_assert_eq(pthread_create(&t[i], NULL, worker, &j[i]), 0);
  }
  for (i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  return atomic_load(&allowed);
}

Test(policy_threads, one_ledger_one_lease) {
  fixture f;
  fx_open(&f, NULL, 0);
  cr_assert_eq(race(&f, "enterprise", 1, 4, 0), 1);
  fx_close(&f);
}

Test(policy_threads, tenant_slots_are_never_oversold) {
  fixture f;
  fx_open(&f, NULL, 0);
  cr_assert_eq(race(&f, "enterprise", 1, 4, 1), 8);
  fx_close(&f);
}

Test(policy_threads, a_key_never_gets_more_than_its_burst) {
  fixture f;
  fx_open(&f, NULL, 0);
  cr_assert_eq(race(&f, "sandbox", 0, 40, 0), 300);
  cr_assert_eq(fx_count(&f, SLUICE_EVENT_BOX_TRIP), 1,
               "340 denials at one instant trip the box once");
  fx_close(&f);
}

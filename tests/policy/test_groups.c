/*
** Routes whose limits fall in different hash-tag groups (docs/policy.md
** "Declared limits"): one program per group, and a refusal by a later
** group gives back what the earlier ones took.  The policy is
** tests/policy/groups.conf: /login is limited per user (a sliding window
** of 5, in the user's group) and per client address (a bucket of 3, in
** the address's group); /job takes a user's lease (4) and a count of a
** fixed window (4) in the user's group, and the address's bucket.  The
** user's group runs first (no bucket there: its give-back is exact).
**
** On mem, shm, lmdb and a Redis Cluster (both engines and the module,
** tests/policy/meson.build): a refusal by the second group leaves the
** first group's records as they were, read with
** sluice_policy_inspect() of a limit.  On mem, threads racing over few users
** and addresses never admit more than either limit, and every charge a
** refused request made is given back.
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define GROUPS_CONF SLUICE_POLICY_TESTS "/groups.conf"

static sluice_request req(const char *route, const char *user, const char *ip,
                          sluice_attr *a) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.method = "POST";
  r.route = route;
  r.tenant_id = "acme";
  r.client_ip = ip;
  a->name = "user";
  a->value = user;
  r.attrs = a;
  r.nattrs = 1;
  return r;
}

/* Limit `name`'s state for the request's scope. */
static sluice_limit_state state(fixture *f, const char *name,
                                const sluice_request *r) {
  sluice_limit_state s;
  const char *field = NULL;
  int rc = inspect_limit(f->pol, name, r, &s, &field);
  cr_assert_eq(rc, SLUICE_OK, "inspect %s: %s (%s)", name, sluice_err_name(rc),
               field ? field : "");
  return s;
}

static const sluice_decision_limit *lim(const sluice_decision *d,
                                        const char *name) {
  int i;
  for (i = 0; i < d->nlimits; i++)
    if (!strcmp(d->limits[i].name, name))
      return &d->limits[i];
  cr_assert_fail("no limit %s in the decision", name);
  return NULL;
}

static void give_back_on(fixture *f) {
  sluice_attr a;
  sluice_request r;
  sluice_decision d;
  uint64_t lease[4];
  int i;

  /* u1 from one address: the address's bucket (3) refuses the 4th, and
  ** the user's window keeps the 3 admitted only. */
  for (i = 0; i < 3; i++) {
    r = req("/login", "u1", "10.0.0.1", &a);
    d = decide(f, &r);
    cr_assert_eq(d.allowed, 1, "login %d", i);
  }
  r = req("/login", "u1", "10.0.0.1", &a);
  cr_assert_eq(state(f, "per_user", &r).remaining, 2);
  d = decide(f, &r);
  cr_assert_eq(d.allowed, 0);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_THROTTLED);
  cr_assert_str_eq(d.limit_name, "per_ip");
  cr_assert_eq(d.remaining, 0);
  cr_assert(lim(&d, "per_ip")->flags & SLUICE_LIMIT_DENIED);
  /* The user's window ran, then was given back: it took nothing. */
  cr_assert(lim(&d, "per_user")->flags & SLUICE_LIMIT_NOT_RUN);
  cr_assert_eq(state(f, "per_user", &r).remaining, 2,
               "the refused login's count was given back");

  /* Two more from another address use up the user's window (5); a sixth,
  ** from a third address, is refused by the user's group, the first: the
  ** address's bucket is never asked. */
  for (i = 0; i < 2; i++) {
    r = req("/login", "u1", "10.0.0.2", &a);
    cr_assert_eq(decide(f, &r).allowed, 1, "login %d from .2", i);
  }
  r = req("/login", "u1", "10.0.0.3", &a);
  d = decide(f, &r);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "per_user");
  cr_assert(lim(&d, "per_ip")->flags & SLUICE_LIMIT_NOT_RUN);
  cr_assert_eq(state(f, "per_ip", &r).remaining, 3);
  cr_assert_eq(state(f, "per_user", &r).remaining, 0);

  /* /job: a lease and a window count in the user's group, the address's
  ** bucket in the other.  Three jobs from .4 hold three leases; the
  ** fourth is refused by the bucket, its lease released and its count
  ** given back. */
  for (i = 0; i < 3; i++) {
    r = req("/job", "u2", "10.0.0.4", &a);
    d = decide(f, &r);
    cr_assert_eq(d.allowed, 1, "job %d", i);
    cr_assert_neq(d.lease_id, 0);
    lease[i] = d.lease_id;
  }
  r = req("/job", "u2", "10.0.0.4", &a);
  d = decide(f, &r);
  cr_assert_eq(d.allowed, 0);
  cr_assert_str_eq(d.limit_name, "per_ip");
  cr_assert_eq(d.lease_id, 0);
  cr_assert_eq(state(f, "slots", &r).held, 3, "the refused job's lease");
  cr_assert_eq(state(f, "jobs", &r).remaining, 1, "the refused job's count");
  /* The leases of admitted jobs go back in both groups' calls. */
  for (i = 0; i < 3; i++)
    cr_assert_eq(sluice_policy_release(f->pol, &r,
                                       &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                      .lease_id = lease[i]}),
                 SLUICE_OK);
  cr_assert_eq(state(f, "slots", &r).held, 0);
  /* From a fresh address the user's fourth job passes: nothing leaked. */
  r = req("/job", "u2", "10.0.0.5", &a);
  d = decide(f, &r);
  cr_assert_eq(d.allowed, 1);
  cr_assert_eq(state(f, "jobs", &r).remaining, 0);
  cr_assert_eq(sluice_policy_release(f->pol, &r,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
}

Test(policy_groups, give_back_mem) {
  fixture f;
  cr_assert_eq(fx_open_file(&f, GROUPS_CONF, NULL, 0), SLUICE_OK);
  give_back_on(&f);
  fx_close(&f);
}

Test(policy_groups, give_back_shm) {
  char spec[96];
  fixture f;
  snprintf(spec, sizeof spec, "shm:name=/sluice-groups-%d;create=1",
           (int)getpid());
  cr_assert_eq(fx_open_file(&f, GROUPS_CONF, spec, SLUICE_OPEN_CREATE),
               SLUICE_OK);
  give_back_on(&f);
  fx_close(&f);
  snprintf(spec, sizeof spec, "/dev/shm/sluice-groups-%d", (int)getpid());
  unlink(spec);
}

Test(policy_groups, give_back_lmdb) {
  char dir[64], spec[128], cmd[160];
  fixture f;
  snprintf(dir, sizeof dir, "/tmp/sluice-groups-XXXXXX");
  cr_assert(mkdtemp(dir) != NULL);
  snprintf(spec, sizeof spec, "lmdb:path=%s", dir);
  cr_assert_eq(fx_open_file(&f, GROUPS_CONF, spec, SLUICE_OPEN_CREATE),
               SLUICE_OK);
  give_back_on(&f);
  fx_close(&f);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* A Redis Cluster when the harness names one: the user's and the address's
** records in different slots. */
Test(policy_groups, give_back_redis) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *extra = getenv("SLUICE_REDIS_STORE_EXTRA");
  char spec[512];
  fixture f;
  if (!nodes || !nodes[0])
    cr_skip_test("SLUICE_REDIS_NODES unset");
  /* A prefix of this run's own: reruns never meet old state. */
  snprintf(spec, sizeof spec,
           "redis:nodes=%s;timeout_ms=3000;prefix=grp%d-%ld:%s%s", nodes,
           (int)getpid(), (long)time(NULL), extra && extra[0] ? ";" : "",
           extra ? extra : "");
  cr_assert_eq(fx_open_file(&f, GROUPS_CONF, spec, SLUICE_OPEN_TESTCLOCK),
               SLUICE_OK);
  give_back_on(&f);
  fx_close(&f);
}

/* ------------------------------------------------------ contention --- */

#define USERS 3
#define IPS 3
#define THREADS 4
#define PER_THREAD 200

static const char *const users[USERS] = {"ua", "ub", "uc"};
static const char *const ips[IPS] = {"10.9.0.1", "10.9.0.2", "10.9.0.3"};

typedef struct racer {
  fixture *f;
  pthread_barrier_t *start; /* all threads decide at once */
  unsigned seed;
  int admitted[USERS][IPS];
} racer;

static void *race(void *arg) {
  racer *r = arg;
  int i;
  pthread_barrier_wait(r->start);
  for (i = 0; i < PER_THREAD; i++) {
    int u = rand_r(&r->seed) % USERS, k = rand_r(&r->seed) % IPS;
    sluice_attr a;
    sluice_request q = req("/login", users[u], ips[k], &a);
    sluice_decision d;
    cr_assert_eq(sluice_policy_decide(r->f->pol, 1, &q, &d, NULL), SLUICE_OK);
    r->admitted[u][k] += d.allowed;
  }
  return NULL;
}

/* The clock stands still: each user's window admits 5 in all and each
** address's bucket 3, whatever the interleaving.  Racing refusals may
** refuse a request that had room (a group charged for the moment before
** its give-back), never admit one beyond a limit; and once the race is
** over every refused request's charges are back: each limit's remaining
** is its size less what it admitted. */
static void race_on(const char *store, unsigned flags) {
  fixture f;
  pthread_t t[THREADS];
  racer r[THREADS];
  pthread_barrier_t start;
  int i, u, k, total = 0;
  cr_assert_eq(fx_open_file(&f, GROUPS_CONF, store, flags), SLUICE_OK);
  memset(r, 0, sizeof r);
  cr_assert_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
  for (i = 0; i < THREADS; i++) {
    r[i].f = &f;
    r[i].start = &start;
    r[i].seed = 17u + (unsigned)i;
    cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
  }
  for (i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_join(t[i], NULL), 0);
  pthread_barrier_destroy(&start);
  for (u = 0; u < USERS; u++) {
    int n = 0;
    sluice_attr a;
    sluice_request q = req("/login", users[u], ips[0], &a);
    for (k = 0; k < IPS; k++)
      for (i = 0; i < THREADS; i++)
        n += r[i].admitted[u][k];
    cr_assert_leq(n, 5, "user %s admitted %d", users[u], n);
    cr_assert_eq(state(&f, "per_user", &q).remaining, 5 - n,
                 "user %s: every refused request's count given back",
                 users[u]);
    total += n;
  }
  for (k = 0; k < IPS; k++) {
    int n = 0;
    sluice_attr a;
    sluice_request q = req("/login", users[0], ips[k], &a);
    for (u = 0; u < USERS; u++)
      for (i = 0; i < THREADS; i++)
        n += r[i].admitted[u][k];
    cr_assert_leq(n, 3, "address %s admitted %d", ips[k], n);
    cr_assert_eq(state(&f, "per_ip", &q).remaining, 3 - n,
                 "address %s: every refused request's tokens given back",
                 ips[k]);
  }
  /* 800 requests over 3 users and 3 addresses: the race ends with the
  ** smaller budget (3 users x 5 vs 3 addresses x 3) used up. */
  cr_assert_eq(total, 9, "admitted %d", total);
  fx_close(&f);
}

Test(policy_groups, threads_never_over_admit_and_give_everything_back) {
  race_on(NULL, 0);
}

/* The same race on shm (its records updated lock-free). */
Test(policy_groups, threads_on_shm) {
  char spec[96];
  snprintf(spec, sizeof spec, "shm:name=/sluice-groups-race-%d;create=1",
           (int)getpid());
  race_on(spec, SLUICE_OPEN_CREATE);
  snprintf(spec, sizeof spec, "/dev/shm/sluice-groups-race-%d", (int)getpid());
  unlink(spec);
}

/* A store failure in the second group: the first group's charge is given
** back and the route fails closed. */
Test(policy_groups, store_failure_in_the_second_group_gives_back) {
  fixture f;
  sluice_attr a;
  sluice_request r = req("/login", "u1", "10.0.0.1", &a);
  sluice_decision d;
  cr_assert_eq(fx_open_file(&f, GROUPS_CONF, NULL, 0), SLUICE_OK);
  {
  fail_plan plan = {2, 1, SLUICE_EUNAVAIL}; /* the address's call alone */
  cr_assert_eq(sluice_limiter_control(f.lim, FAIL_STORE_CTL_PLAN, &plan),
               SLUICE_OK);
  d = decide(&f, &r);
  }
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_UNAVAILABLE);
  cr_assert_eq(d.store_error, SLUICE_EUNAVAIL);
  cr_assert_eq(state(&f, "per_user", &r).remaining, 5);
  cr_assert_eq(state(&f, "per_ip", &r).remaining, 3);
  fx_close(&f);
}

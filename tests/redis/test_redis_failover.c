/*
** Failover: a master is killed (SIGKILL) in the middle of a run of
** decisions on a bucket it serves.  Until a replica is promoted the store
** must answer with the failure codes (SLUICE_EUNAVAIL / SLUICE_ETIMEDOUT),
** never a verdict from nowhere; after the promotion it must find the new
** master by itself and carry on, and the bucket must not have been
** refilled by the failover: with wait_replicas=1 every admission the
** caller saw was on a replica before it was reported, so the whole run
** admits at most the burst.
**
** The harness runs this on 3 masters with 2 replicas each, so that the
** promoted master still has a replica to acknowledge WAIT.
*/
#include <signal.h>
#include <unistd.h>

#include "redis_test.h"
#include "../common/units.h"


Test(failover, master_killed_mid_run, .timeout = 120) {
  sluice_limiter *l;
  sluice_redis_node_of q;
  sluice_redis_stats st;
  sluice_verdict v;
  /* 60 points, one more per hour: the run lasts well under an hour. */
  const sluice_gcra_params p = {1, 3600 * SEC, 60};
  char tag[64], key[96], other[96];
  int victim, pid, i, admitted = 0, errors = 0, after = 0, denied = 0;
  int64_t t0;
  if (!rt_is_cluster())
    cr_skip_test("needs a cluster with replicas");
  l = rt_limiter("wait_replicas=1;timeout_ms=200;connect_timeout_ms=200;"
                 "backoff_max_ms=100",
                 0);
  rt_tag(tag, sizeof tag, "fo");
  snprintf(key, sizeof key, "k:%s", tag);
  memset(&q, 0, sizeof q);
  q.key = key;
  q.keylen = strlen(key);
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_REDIS_NODE_OF, &q),
               SLUICE_OK);
  victim = q.port;
  pid = rt_pid_of(victim);
  cr_assert_gt(pid, 0, "harness knows the pid of %d", victim);
  /* A key on another master, for the check at the end.  (The old fixed
  ** name hashed to one slot, on the victim in a third of the runs, whose
  ** new master may still be waiting for its replica when the check runs;
  ** the tag carries braces of its own, so the hash tag here is the
  ** number.) */
  for (i = 0;; i++) {
    cr_assert_lt(i, 1000, "a key on another master");
    snprintf(other, sizeof other, "o:{%d}%s", i, tag);
    q.key = other;
    q.keylen = strlen(other);
    cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_REDIS_NODE_OF, &q),
                 SLUICE_OK);
    if (q.port != victim)
      break;
  }

  for (i = 0; i < 20; i++) {
    int rc = sluice_limiter_take(l, key, strlen(key), &p, 1, &v);
    cr_assert_eq(rc, SLUICE_OK, "before the kill: %s (%s)",
                 sluice_err_name(rc), sluice_limiter_errmsg(l));
    admitted += v.allowed;
  }
  cr_assert_eq(admitted, 20);
  cr_assert_eq(kill(pid, SIGKILL), 0);

  /* Keep deciding until 10 decisions in a row succeed after the kill. */
  t0 = rt_mono_ms();
  while (after < 10) {
    int rc = sluice_limiter_take(l, key, strlen(key), &p, 1, &v);
    cr_assert_lt(rt_mono_ms() - t0, 60000, "no recovery within 60 s");
    if (rc == SLUICE_OK) {
      after++;
      admitted += v.allowed;
      continue;
    }
    cr_assert(rc == SLUICE_EUNAVAIL || rc == SLUICE_ETIMEDOUT,
              "errors in the window are failure codes, got %s (%s)",
              sluice_err_name(rc), sluice_limiter_errmsg(l));
    after = 0;
    errors++;
    usleep(20000);
  }
  cr_assert_gt(errors, 0, "the window was seen");
  memset(&q, 0, sizeof q);
  q.key = key;
  q.keylen = strlen(key);
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_REDIS_NODE_OF, &q),
               SLUICE_OK);
  cr_assert_neq(q.port, victim, "rerouted to the promoted replica");

  /* Drain the bucket: the total ever admitted is the burst, no more. */
  for (i = 0; i < 200 && denied < 5; i++) {
    int rc = sluice_limiter_take(l, key, strlen(key), &p, 1, &v);
    if (rc != SLUICE_OK) {
      usleep(20000);
      continue;
    }
    if (v.allowed)
      admitted++;
    else
      denied++;
  }
  cr_assert_eq(denied, 5, "the bucket runs dry");
  cr_assert_leq(admitted, 61, "no over-admission across the failover: %d",
                admitted);
  cr_assert_geq(admitted, 30, "admissions continued after the failover");

  /* Keys on the surviving masters decide once their master sees the
  ** cluster whole again.  Each node flips its own cluster state: with
  ** cluster-require-full-coverage (Redis's default) a surviving master
  ** answers CLUSTERDOWN until it has heard of the promotion, which can be
  ** after the promoted replica already answers (seen in CI: 0.7 s).  In
  ** that window only failure codes are acceptable. */
  {
    int64_t t1 = rt_mono_ms();
    int rc;
    while ((rc = sluice_limiter_take(l, other, strlen(other), &p, 1, &v)) !=
           SLUICE_OK) {
      cr_assert(rc == SLUICE_EUNAVAIL || rc == SLUICE_ETIMEDOUT,
                "a key on a surviving master: %s (%s)", sluice_err_name(rc),
                sluice_limiter_errmsg(l));
      cr_assert_lt(rt_mono_ms() - t1, 20000,
                   "a key on a surviving master: still %s after 20 s (%s)",
                   sluice_err_name(rc), sluice_limiter_errmsg(l));
      usleep(20000);
    }
  }
  cr_assert_eq(sluice_limiter_control(l, SLUICE_CTL_REDIS_STATS, &st),
               SLUICE_OK);
  cr_assert_gt(st.refreshes, 1, "the slot map was reloaded");
  sluice_limiter_close(l);
}

/*
** One host, one set of limits (issue 18): several real processes fork()ed
** over shared segments, each with its own policy and its own store (a
** "mem" store behind the failing wrapper of helpers.c, which counts store
** calls and fails on demand).
**
**  - the degraded limiter (options.degraded_store = shm:name=/NAME): while
**    the store fails, a host of 1, 2, 4 or 8 workers admits at most the
**    host's share (degraded_percent of the tier's bucket), not workers x
**    the share;
**  - the deny cache (options.deny_cache): a key boxed in one process is
**    denied in the others through a store outage, a level-2 edge deny is
**    held for its hour with no store call, and a full cache caches nothing
**    new (counted) without evicting a live entry.
**
** SLUICE_TEST_NO_HOSTWIDE=1 (or =degraded, =deny: one of them) opens every
** policy without the segments (the features disabled): then the share
** tests, or the box tests, must fail.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

typedef struct worker {
  sluice_clock *clock;
  sluice_limiter *lim;
  sluice_policy *pol;
} worker;

static char deg_uri[96], deg_name[64], deny_uri[96], deny_name[64];

static void setup(void) {
  snprintf(deg_name, sizeof deg_name, "/sluice-hw-deg-%d", (int)getpid());
  snprintf(deg_uri, sizeof deg_uri, "shm:name=%s;capacity=1024", deg_name);
  snprintf(deny_name, sizeof deny_name, "/sluice-hw-deny-%d", (int)getpid());
  snprintf(deny_uri, sizeof deny_uri, "shm:name=%s", deny_name);
  shm_unlink(deg_name);
  shm_unlink(deny_name);
}

static void teardown(void) {
  shm_unlink(deg_name);
  shm_unlink(deny_name);
}

/* SLUICE_TEST_NO_HOSTWIDE: 1 both segments off, "degraded" or "deny"
** only that one. */
static int off(const char *which) {
  const char *e = getenv("SLUICE_TEST_NO_HOSTWIDE");
  return e && (strcmp(e, "1") == 0 || strcmp(e, which) == 0);
}

static int disabled(void) { return off("degraded") || off("deny"); }

static sluice_policy_config *strict_config(void) {
  sluice_policy_config *cfg = cfg_new();
  cfg_set(cfg, "penalties.keys.strikes", 2); /* sandbox */
  return cfg;
}

/* A worker: manual clock at T0, failing-wrapper store, policy over both. */
static int w_open(worker *w, const char *degraded, const char *deny) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_policy_config *cfg;
  int rc;
  memset(w, 0, sizeof *w);
  if ((rc = sluice_clock_manual(T0, &w->clock)))
    return rc;
  memset(&lo, 0, sizeof lo);
  lo.backend = &fail_store_backend;
  lo.store = FAILING_STORE;
  lo.clock = w->clock;
  if ((rc = sluice_limiter_open(&lo, &w->lim, NULL, 0)))
    return rc;
  cfg = strict_config();
  memset(&po, 0, sizeof po);
  po.limiter = w->lim;
  po.config = cfg;
  memset(po.secret, 9, sizeof po.secret);
  po.degraded_store = off("degraded") ? NULL : degraded;
  po.deny_cache = off("deny") ? NULL : deny;
  return sluice_policy_open(&po, &w->pol);
}

static void w_close(worker *w) {
  sluice_policy_close(w->pol);
  sluice_limiter_close(w->lim);
  sluice_clock_free(w->clock);
}

static void w_fail(worker *w, int rc) {
  fail_plan p = fail_plan_from(rc, 0);
  sluice_limiter_control(w->lim, FAIL_STORE_CTL_PLAN, &p);
}

static int64_t w_calls(worker *w) {
  fail_stats st = {.passed = -1};
  sluice_limiter_control(w->lim, FAIL_STORE_CTL_STATS, &st);
  return st.passed;
}

static int w_decide(worker *w, const char *key, sluice_decision *d) {
  sluice_request r = rq_std("acme", key, "sandbox");
  return sluice_policy_decide(w->pol, 1, &r, d, NULL);
}

/* Requests on key until one trips a box; its level, or -1. */
static int w_trip(worker *w, const char *key) {
  sluice_decision d;
  int i;
  for (i = 0; i < 2000; i++) {
    if (w_decide(w, key, &d) != SLUICE_OK)
      return -1;
    if (d.flags & SLUICE_DECISION_TRIPPED)
      return d.penalty_level;
  }
  return -1;
}

static uint64_t metric(sluice_policy *p, const char *line) {
  char buf[16384];
  const char *at;
  cr_assert_eq(sluice_policy_metrics(p, buf, sizeof buf, NULL), SLUICE_OK);
  at = strstr(buf, line);
  cr_assert(at, "metrics lack %s", line);
  return strtoull(at + strlen(line), NULL, 10);
}

/* ------------------------------------------------- degraded share --- */

#define PER_WORKER 400
#define STEP_NS (50 * MS) /* 400 requests over 20 s of each worker's clock */

/* A worker's run: the store down, PER_WORKER requests on one key, its
** clock advancing; the admissions go to *allowed. */
static int degraded_worker(int64_t *allowed) {
  worker w;
  sluice_decision d;
  int i;
  if (w_open(&w, deg_uri, deny_uri) != SLUICE_OK)
    return 1;
  w_fail(&w, SLUICE_EUNAVAIL);
  for (i = 0; i < PER_WORKER; i++) {
    sluice_clock_set(w.clock, T0 + (int64_t)i * STEP_NS);
    if (w_decide(&w, "key-1", &d) != SLUICE_OK ||
        !(d.flags & SLUICE_DECISION_DEGRADED))
      return 2;
    *allowed += d.allowed;
  }
  w_close(&w);
  return 0;
}

Test(policy_hostwide, degraded_share_with_1_2_4_8_workers, .init = setup,
     .fini = teardown, .timeout = 120) {
  static const int counts[] = {1, 2, 4, 8};
  sluice_policy_config *cfg;
  int64_t *allowed = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int64_t burst, cap, elapsed = (PER_WORKER - 1) * STEP_NS;
  size_t c;
  cr_assert_neq(allowed, MAP_FAILED);
  cfg = strict_config();
  /* The binding degraded bucket of sandbox: the key's, at 25%: 75 burst,
  ** 1.25/s.  The host may admit its burst plus what refills in 20 s. */
  burst = cfg_int(cfg, "limits.key.burst") * cfg_int(cfg, "failure.degraded_percent") / 100;
  cap = burst + cfg_int(cfg, "limits.key.rate") * cfg_int(cfg, "failure.degraded_percent") * elapsed /
                    (100 * cfg_ns(cfg, "limits.key.period_ms")) + 1;
  cr_assert_gt(PER_WORKER, cap, "one worker alone must reach the cap");
  for (c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    pid_t pids[8];
    int64_t total = 0;
    int i, n = counts[c];
    setup(); /* a fresh segment for each host size */
    memset(allowed, 0, 4096);
    for (i = 0; i < n; i++) {
      pids[i] = fork();
      cr_assert_geq(pids[i], 0);
      if (pids[i] == 0)
        _exit(degraded_worker(&allowed[i]));
    }
    fx_wait_children(pids, n);
    for (i = 0; i < n; i++)
      total += allowed[i];
    cr_assert_leq(total, cap,
                  "%d workers admitted %lld, the host's share is %lld", n,
                  (long long)total, (long long)cap);
    cr_assert_geq(total, burst, "%d workers: the share is given (%lld)", n,
                  (long long)total);
  }
  munmap(allowed, 4096);
}

/* ----------------------------------------------------- deny cache --- */

/* Three tries on key-1 with the store down: how many were admitted, or -1
** if one was not refused as a box from the cache. */
static int outage_tries(void) {
  worker w;
  sluice_decision d;
  int i, admitted = 0;
  if (w_open(&w, deg_uri, deny_uri) != SLUICE_OK)
    return -1;
  w_fail(&w, SLUICE_EIO);
  for (i = 0; i < 3; i++) {
    if (w_decide(&w, "key-1", &d) != SLUICE_OK)
      return -1;
    admitted += d.allowed;
    if (d.outcome != SLUICE_OUTCOME_BOXED ||
        !(d.flags & SLUICE_DECISION_DENY_CACHED) || d.retry_after_ns <= 0)
      admitted += 100;
  }
  w_close(&w);
  return admitted;
}

Test(policy_hostwide, boxed_key_gets_nothing_through_outage, .init = setup,
     .fini = teardown) {
  worker a;
  sluice_decision d;
  pid_t pids[3];
  int i;
  cr_assert_eq(w_open(&a, deg_uri, deny_uri), SLUICE_OK);
  cr_assert_eq(w_trip(&a, "key-1"), 1, "level-1 box");
  /* Other workers of the host, whose store is down (the issue: 3 of 3
  ** tries admitted on a full LMDB disk). */
  for (i = 0; i < 3; i++) {
    pids[i] = fork();
    cr_assert_geq(pids[i], 0);
    if (pids[i] == 0)
      _exit(outage_tries() == 0 ? 0 : 1);
  }
  fx_wait_children(pids, 3);
  /* The worker that saw the trip, its store down too. */
  w_fail(&a, SLUICE_ETIMEDOUT);
  for (i = 0; i < 3; i++) {
    cr_assert_eq(w_decide(&a, "key-1", &d), SLUICE_OK);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED, "try %d: %s", i,
                 sluice_name(SLUICE_NAME_OUTCOME, d.outcome));
  }
  /* Another key is admitted by the degraded limiter meanwhile. */
  cr_assert_eq(w_decide(&a, "key-2", &d), SLUICE_OK);
  cr_assert(d.allowed && (d.flags & SLUICE_DECISION_DEGRADED));
  w_close(&a);
}

/* Another process's view of an edge deny: each minute of the hour
** denied with no store call; 0 when all held. */
static int edge_watch(int64_t from, int64_t until) {
  worker w;
  sluice_decision d;
  int64_t t;
  if (w_open(&w, NULL, deny_uri) != SLUICE_OK)
    return 1;
  for (t = from; t < until; t += 60 * SEC) {
    int64_t before = w_calls(&w);
    sluice_clock_set(w.clock, t);
    if (w_decide(&w, "key-1", &d) != SLUICE_OK ||
        d.outcome != SLUICE_OUTCOME_BOXED ||
        !(d.flags & SLUICE_DECISION_EDGE_DENY) || d.penalty_level != 2 ||
        w_calls(&w) != before)
      return 2;
  }
  /* Its hour over: the store decides again. */
  sluice_clock_set(w.clock, until + SEC);
  {
    int64_t before = w_calls(&w);
    if (w_decide(&w, "key-1", &d) != SLUICE_OK || w_calls(&w) != before + 1 ||
        !d.allowed)
      return 3;
  }
  w_close(&w);
  return 0;
}

Test(policy_hostwide, edge_deny_holds_its_hour_without_store_call,
     .init = setup, .fini = teardown) {
  worker a;
  sluice_decision d;
  sluice_policy_config *cfg;
  int64_t start, end, before, t;
  pid_t pid;
  cfg = strict_config();
  cr_assert_eq(w_open(&a, NULL, deny_uri), SLUICE_OK);
  cr_assert_eq(w_trip(&a, "key-1"), 1);
  sluice_clock_set(a.clock, T0 + cfg_ns(cfg, "penalties.keys.levels.[0].box_s") + SEC);
  cr_assert_eq(w_trip(&a, "key-1"), 2, "the second offence: level 2");
  start = sluice_clock_now(a.clock);
  end = start + cfg_ns(cfg, "penalties.keys.levels.[1].box_s");
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0)
    _exit(edge_watch(start, end));
  fx_wait_children(&pid, 1);
  /* The process that tripped it: no store call either. */
  before = w_calls(&a);
  for (t = start; t < end; t += 600 * SEC) {
    sluice_clock_set(a.clock, t);
    cr_assert_eq(w_decide(&a, "key-1", &d), SLUICE_OK);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
    cr_assert_neq(d.flags & SLUICE_DECISION_EDGE_DENY, 0);
  }
  cr_assert_eq(w_calls(&a), before, "the hour cost no store call");
  w_close(&a);
}

Test(policy_hostwide, full_cache_keeps_live_entries, .init = setup,
     .fini = teardown) {
  worker a, b;
  sluice_decision d;
  sluice_policy_config *cfg;
  char key[16];
  int i;
  int64_t before;
  if (disabled())
    cr_skip_test("needs the deny cache");
  cfg = strict_config();
  snprintf(deny_uri, sizeof deny_uri, "shm:name=%s;slots=4", deny_name);
  cr_assert_eq(w_open(&a, NULL, deny_uri), SLUICE_OK);
  for (i = 0; i < 5; i++) {
    snprintf(key, sizeof key, "key-%d", i);
    cr_assert_eq(w_trip(&a, key), 1, "%s", key);
  }
  cr_assert_eq(metric(a.pol, "sluice_policy_deny_cache_total{result=\"stored\"} "), 4);
  cr_assert_eq(metric(a.pol, "sluice_policy_deny_cache_total{result=\"full\"} "), 1);
  /* Another process: the four cached boxes hold with the store down, the
  ** fifth (not cached) falls to the degraded limiter. */
  cr_assert_eq(w_open(&b, NULL, deny_uri), SLUICE_OK);
  w_fail(&b, SLUICE_EUNAVAIL);
  for (i = 0; i < 4; i++) {
    snprintf(key, sizeof key, "key-%d", i);
    cr_assert_eq(w_decide(&b, key, &d), SLUICE_OK);
    cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED, "%s", key);
  }
  cr_assert_eq(w_decide(&b, "key-4", &d), SLUICE_OK);
  cr_assert_neq(d.flags & SLUICE_DECISION_DEGRADED, 0);
  cr_assert_eq(d.flags & SLUICE_DECISION_DENY_CACHED, 0);
  w_close(&b);
  /* The fifth key, seen again while the others are live: not cached, and
  ** decided by the store (one call). */
  before = w_calls(&a);
  cr_assert_eq(w_decide(&a, "key-4", &d), SLUICE_OK);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(w_calls(&a), before + 1);
  cr_assert_eq(metric(a.pol, "sluice_policy_deny_cache_total{result=\"full\"} "), 2);
  /* Once the boxes end, their slots are taken by new ones. */
  sluice_clock_set(a.clock, T0 + cfg_ns(cfg, "penalties.keys.levels.[0].box_s") + SEC);
  cr_assert_eq(w_trip(&a, "key-9"), 1);
  cr_assert_eq(metric(a.pol, "sluice_policy_deny_cache_total{result=\"stored\"} "), 5);
  w_close(&a);
}

/* No segment configured: the worker's own cache holds the box through an
** outage, and is not read while the store answers (a release made by
** another process must take effect). */
Test(policy_hostwide, in_process_cache_holds_in_outage_only) {
  worker a;
  sluice_decision d;
  int64_t before;
  if (off("deny"))
    cr_skip_test("needs the deny cache");
  cr_assert_eq(w_open(&a, NULL, NULL), SLUICE_OK);
  cr_assert_eq(w_trip(&a, "key-1"), 1);
  before = w_calls(&a);
  cr_assert_eq(w_decide(&a, "key-1", &d), SLUICE_OK);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(w_calls(&a), before + 1, "the store decides while it answers");
  w_fail(&a, SLUICE_EIO);
  cr_assert_eq(w_decide(&a, "key-1", &d), SLUICE_OK);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_neq(d.flags & SLUICE_DECISION_DENY_CACHED, 0);
  w_close(&a);
}

Test(policy_hostwide, release_drops_the_cached_box, .init = setup,
     .fini = teardown) {
  worker a;
  sluice_decision d;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  cr_assert_eq(w_open(&a, NULL, deny_uri), SLUICE_OK);
  cr_assert_eq(w_trip(&a, "key-1"), 1);
  cr_assert_eq(sluice_policy_release(a.pol, &r,
                                     &(sluice_hold){.kind = SLUICE_HOLD_BOX,
                                                    .scope = SLUICE_SCOPE_KEY,
                                                    .who = "ops",
                                                    .why = "test"}),
               SLUICE_OK);
  cr_assert_eq(w_decide(&a, "key-1", &d), SLUICE_OK);
  cr_assert_neq(d.outcome, SLUICE_OUTCOME_BOXED);
  w_close(&a);
}

Test(policy_hostwide, bad_segments_are_refused, .init = setup,
     .fini = teardown) {
  static const char *bad[] = {"shm:", "mem:", "shm:name=x", "shm:name=/a/b"};
  worker w;
  char other[128];
  size_t i;
  if (disabled())
    cr_skip_test("needs the segments");
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(w_open(&w, bad[i], NULL), SLUICE_EINVAL, "%s", bad[i]);
    sluice_limiter_close(w.lim);
    sluice_clock_free(w.clock);
    cr_assert_eq(w_open(&w, NULL, bad[i]), SLUICE_EINVAL, "%s", bad[i]);
    sluice_limiter_close(w.lim);
    sluice_clock_free(w.clock);
  }
  snprintf(other, sizeof other, "shm:name=%s;slots=0", deny_name);
  cr_assert_eq(w_open(&w, NULL, other), SLUICE_EINVAL);
  sluice_limiter_close(w.lim);
  sluice_clock_free(w.clock);
  cr_assert_eq(w_open(&w, NULL, deny_uri), SLUICE_OK); /* 4096 slots */
  w_close(&w);
  snprintf(other, sizeof other, "shm:name=%s;slots=8", deny_name);
  cr_assert_eq(w_open(&w, NULL, other), SLUICE_ECONFIG, "another size");
  sluice_limiter_close(w.lim);
  sluice_clock_free(w.clock);
}

/* sluice_policy_check(): what open refuses before it attaches anything,
** in open's words, with nothing created; and what it accepts, open opens. */
Test(policy_hostwide, check_refuses_what_open_refuses_and_creates_nothing,
     .init = setup, .fini = teardown) {
  char slots0[128], badparam[128], err[512], err2[512];
  const char *bad[][3] = {
      /* counters, degraded_store, deny_cache */
      {"bogus", NULL, NULL},          {"shm:name=/a/b", NULL, NULL},
      {NULL, "shm:name=x", NULL},     {NULL, badparam, NULL},
      {NULL, NULL, "mem:"},           {NULL, NULL, slots0}};
  sluice_policy_options po;
  sluice_policy *p = NULL;
  struct stat st;
  char path[128];
  size_t i;
  snprintf(slots0, sizeof slots0, "shm:name=%s;slots=0", deny_name);
  snprintf(badparam, sizeof badparam, "shm:name=%s;capacty=10", deg_name);
  memset(&po, 0, sizeof po);
  memset(po.secret, 7, sizeof po.secret);
  po.limiter_options = NULL; /* open's own mem limiter */
  po.errbuf = err;
  po.errlen = sizeof err;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    po.counters = bad[i][0];
    po.degraded_store = bad[i][1];
    po.deny_cache = bad[i][2];
    cr_assert_eq(sluice_policy_check(&po), SLUICE_EINVAL, "case %zu", i);
    snprintf(err2, sizeof err2, "%s", err);
    cr_assert_eq(sluice_policy_open(&po, &p), SLUICE_EINVAL, "case %zu", i);
    cr_assert_str_eq(err, err2, "case %zu: open's words", i);
  }
  po.counters = NULL;
  po.degraded_store = NULL;
  po.deny_cache = NULL;
  memset(po.secret, 0, sizeof po.secret);
  cr_assert_eq(sluice_policy_check(&po), SLUICE_EINVAL);
  cr_assert_not_null(strstr(err, "secret"), "%s", err);
  memset(po.secret, 7, sizeof po.secret);
  po.config_path = "/no/such/policy.conf";
  cr_assert_eq(sluice_policy_check(&po), SLUICE_EIO, "%s", err);
  po.config_path = fx_default_conf;
  /* Good strings: accepted, and nothing is created by the check. */
  po.degraded_store = deg_uri;
  po.deny_cache = deny_uri;
  cr_assert_eq(sluice_policy_check(&po), SLUICE_OK, "%s", err);
  snprintf(path, sizeof path, "/dev/shm%s", deg_name);
  cr_assert_neq(stat(path, &st), 0, "the check created %s", path);
  snprintf(path, sizeof path, "/dev/shm%s", deny_name);
  cr_assert_neq(stat(path, &st), 0, "the check created %s", path);
  cr_assert_eq(sluice_policy_open(&po, &p), SLUICE_OK, "%s", err);
  sluice_policy_close(p);
}

/* ------------------------------------------------ on a real Redis --- */

/* Run under tests/redis/harness.py (single): SLUICE_REDIS_NODES and
** SLUICE_REDIS_PIDS name the server, which the test stops with SIGSTOP
** (a hung Redis: connections stay up, replies never come) and resumes. */
#define RW 4        /* workers */
#define RW_TRIES 60 /* degraded requests per worker */

static pid_t redis_pid(void) {
  const char *p = getenv("SLUICE_REDIS_PIDS");
  const char *c = p ? strchr(p, ':') : NULL;
  return c ? (pid_t)atoi(c + 1) : 0;
}

static int r_open(sluice_limiter **l, sluice_policy **p) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_policy_config *cfg;
  char spec[256];
  int rc;
  snprintf(spec, sizeof spec, "redis:nodes=%s;timeout_ms=100",
           getenv("SLUICE_REDIS_NODES"));
  memset(&lo, 0, sizeof lo);
  lo.store = spec;
  if ((rc = sluice_limiter_open(&lo, l, NULL, 0)))
    return rc;
  cfg = strict_config();
  memset(&po, 0, sizeof po);
  po.limiter = *l;
  po.config = cfg;
  memset(po.secret, 9, sizeof po.secret);
  po.degraded_store = off("degraded") ? NULL : deg_uri;
  po.deny_cache = off("deny") ? NULL : deny_uri;
  return sluice_policy_open(&po, p);
}

static int r_decide(sluice_policy *p, const char *key, sluice_decision *d) {
  /* Named once, by the process that boxes the key (before it forks the
  ** workers, which inherit it): the file's key box is scoped by tenant
  ** and key, so every process must name the same tenant. */
  static char tenant[32];
  sluice_request r;
  if (!tenant[0])
    snprintf(tenant, sizeof tenant, "t-%d", (int)getpid());
  r = rq_std(tenant, key, "sandbox");
  return sluice_policy_decide(p, 1, &r, d, NULL);
}

/* A worker: ready, wait for the stop, then 3 tries on the boxed key and
** RW_TRIES on a free one; out[0] boxed-key admissions (100 for a try not
** refused as a box), out[1] free-key admissions. */
static int redis_worker(int ready, int go, int64_t *out) {
  sluice_limiter *l;
  sluice_policy *p;
  sluice_decision d;
  char b;
  int i;
  if (r_open(&l, &p) != SLUICE_OK || write(ready, "r", 1) != 1 ||
      read(go, &b, 1) != 1)
    return 1;
  for (i = 0; i < 3; i++) {
    if (r_decide(p, "boxed", &d) != SLUICE_OK)
      return 2;
    out[0] += d.allowed + (d.outcome != SLUICE_OUTCOME_BOXED) * 100;
  }
  for (i = 0; i < RW_TRIES; i++) {
    if (r_decide(p, "free", &d) != SLUICE_OK)
      return 3;
    out[1] += d.allowed;
  }
  sluice_policy_close(p);
  sluice_limiter_close(l);
  return 0;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* With Redis stopped, the workers keep the key the declared penalty
** boxed out (the host-wide deny cache) and admit the others within the
** degraded bucket. */
Test(policy_hostwide, redis_stopped, .init = setup, .fini = teardown,
     .timeout = 120) {
  sluice_limiter *l;
  sluice_policy *p;
  sluice_decision d;
  sluice_policy_config *cfg;
  int64_t *res, boxed = 0, admitted = 0, cap;
  int ready[2], go[2], i, st, failed = 0;
  pid_t rp = redis_pid(), pids[RW];
  double t0, secs;
  char b;
  if (!getenv("SLUICE_REDIS_NODES") || rp <= 0)
    cr_skip_test("no Redis (run under tests/redis/harness.py)");
  cfg = strict_config();
  res = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
             -1, 0);
  cr_assert_neq(res, MAP_FAILED);
  memset(res, 0, 4096);
  /* Box the key on the live Redis. */
  memset(&d, 0, sizeof d);
  cr_assert_eq(r_open(&l, &p), SLUICE_OK);
  for (i = 0; i < 2000 && !(d.flags & SLUICE_DECISION_TRIPPED); i++)
    cr_assert_eq(r_decide(p, "boxed", &d), SLUICE_OK);
  cr_assert_neq(d.flags & SLUICE_DECISION_TRIPPED, 0);
  cr_assert_eq(pipe(ready), 0);
  cr_assert_eq(pipe(go), 0);
  for (i = 0; i < RW; i++) {
    pids[i] = fork();
    cr_assert_geq(pids[i], 0);
    if (pids[i] == 0)
      _exit(redis_worker(ready[1], go[0], &res[2 * i]));
  }
  for (i = 0; i < RW; i++)
    cr_assert_eq(read(ready[0], &b, 1), 1);
  cr_assert_eq(kill(rp, SIGSTOP), 0);
  t0 = mono_s();
  for (i = 0; i < RW; i++)
    cr_assert_eq(write(go[1], "g", 1), 1);
  for (i = 0; i < RW; i++)
    if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) ||
        WEXITSTATUS(st) != 0)
      failed++;
  secs = mono_s() - t0;
  kill(rp, SIGCONT); /* before any assertion can end the test */
  cr_assert_eq(failed, 0, "%d workers failed", failed);
  for (i = 0; i < RW; i++) {
    boxed += res[2 * i];
    admitted += res[2 * i + 1];
  }
  cr_assert_eq(boxed, 0, "the boxed key: %lld (3 tries x %d workers)",
               (long long)boxed, RW);
  /* The key's degraded bucket: 75 burst, 1.25/s, host-wide. */
  cap = cfg_int(cfg, "limits.key.burst") * cfg_int(cfg, "failure.degraded_percent") / 100 +
        (int64_t)(secs * (double)cfg_int(cfg, "limits.key.rate") *
                  cfg_int(cfg, "failure.degraded_percent") / 100) + 2;
  cr_assert_leq(admitted, cap, "%d workers admitted %lld in %.1f s, cap %lld",
                RW, (long long)admitted, secs, (long long)cap);
  /* Redis is back: the store decides again. */
  sluice_policy_close(p);
  sluice_limiter_close(l);
  munmap(res, 4096);
}

/* ------------------------------------------ from the config file --- */

static int open_file(const char *path, sluice_clock *clk, sluice_limiter **l,
                     sluice_policy **p, char *err, size_t errlen) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  int rc;
  memset(&lo, 0, sizeof lo);
  lo.backend = &fail_store_backend;
  lo.store = FAILING_STORE;
  lo.clock = clk;
  if ((rc = sluice_limiter_open(&lo, l, NULL, 0)))
    return rc;
  memset(&po, 0, sizeof po);
  po.limiter = *l;
  po.config_path = path;
  memset(po.secret, 9, sizeof po.secret);
  po.errbuf = err;
  po.errlen = errlen;
  if ((rc = sluice_policy_open(&po, p)))
    sluice_limiter_close(*l);
  return rc;
}

Test(policy_hostwide, segments_from_the_config_file, .init = setup,
     .fini = teardown) {
  char host[512], err[256];
  const char *path;
  sluice_clock *clk;
  sluice_limiter *la, *lb;
  sluice_policy *a, *b;
  sluice_decision d;
  sluice_request r = rq_std("acme", "key-1", "sandbox");
  FILE *f;
  int i, rc = 0;
  snprintf(host, sizeof host,
           "host = { degraded_store = \"%s\"; deny_cache = \"%s\"; };\n",
           deg_uri, deny_uri);
  path = fx_write_ledger(host);
  cr_assert_eq(sluice_clock_manual(T0, &clk), SLUICE_OK);
  cr_assert_eq(open_file(path, clk, &la, &a, err, sizeof err), SLUICE_OK,
               "%s", err);
  cr_assert_eq(open_file(path, clk, &lb, &b, err, sizeof err), SLUICE_OK,
               "%s", err);
  for (i = 0; i < 2000 && !(rc & 1); i++) {
    cr_assert_eq(sluice_policy_decide(a, 1, &r, &d, NULL), SLUICE_OK);
    rc = (d.flags & SLUICE_DECISION_TRIPPED) != 0;
  }
  cr_assert(rc, "tripped");
  /* b has never seen the key in its own store: the file's deny cache. */
  cr_assert_eq(sluice_policy_decide(b, 1, &r, &d, NULL), SLUICE_OK);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_neq(d.flags & SLUICE_DECISION_DENY_CACHED, 0);
  sluice_policy_close(a);
  sluice_policy_close(b);
  sluice_limiter_close(la);
  sluice_limiter_close(lb);
  /* A setting of the wrong type names its line. */
  f = fopen(path, "w");
  fprintf(f, "host = {\n  deny_cache = 4096;\n};\n");
  fclose(f);
  cr_assert_eq(open_file(path, clk, &la, &a, err, sizeof err), SLUICE_ECONFIG);
  cr_assert(strstr(err, "host.deny_cache") && strstr(err, ":2"), "%s", err);
  sluice_clock_free(clk);
  unlink(path);
}

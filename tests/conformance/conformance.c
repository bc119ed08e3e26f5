/*
** The backend conformance suite.  Every backend must give the verdicts the
** algorithm layer gives, field for field, because they all run the same
** steps.  Two kinds of evidence:
**
**  1. Golden traces (the .trace files in traces/): hand-derived from the spec and the
**     algorithm essays, with the arithmetic in their comments.  They pin
**     the semantics themselves.
**  2. Differential runs: seeded random operations through the store under
**     test and, beside it, through sluice__op_step() over a plain array of
**     records; every verdict and every stored record must match, and a
**     record must read as absent exactly when its expiry has passed.
**
** The store comes from SLUICE_CONFORMANCE_STORE (default "mem"), opened with
** SLUICE_OPEN_CREATE | SLUICE_OPEN_TESTCLOCK so that stores with their own
** clock use the trace's time.  Keys live under a hash tag unique to each
** test, so one persistent store can serve every run.
*/
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice.h"
#include "../common/one_step.h"
#include "trace.h"
#include "../common/splitmix.h"
#include "op.h"
#include "random.h"

static sluice_limiter *lim;
static sluice_clock *clk;
static char tag[64];

static void setup(void) {
  const char *store = getenv("SLUICE_CONFORMANCE_STORE");
  sluice_limiter_options o = {0};
  char err[256];
  uint64_t r = 0;
  int rc;
  o.store = store && *store ? store : "mem";
  o.flags = SLUICE_OPEN_CREATE | SLUICE_OPEN_TESTCLOCK;
  cr_assert_eq(sluice_clock_manual(0, &clk), SLUICE_OK);
  o.clock = clk;
  rc = sluice_limiter_open(&o, &lim, err, sizeof err);
  cr_assert_eq(rc, SLUICE_OK, "open %s: %s (%s)", o.store, sluice_strerror(rc),
               err);
  sluice__random_bytes(&r, sizeof r);
  snprintf(tag, sizeof tag, "conf-%ld-%016" PRIx64, (long)getpid(), r);
}

static void teardown(void) {
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

static void replay(const char *name) {
  char path[512], report[8192];
  int bad;
  snprintf(path, sizeof path, "%s/%s", TRACE_DIR, name);
  bad = trace_replay(lim, clk, path, tag, report, sizeof report);
  cr_assert_eq(bad, 0, "%s on %s: %d mismatches\n%s", name,
               sluice_limiter_backend(lim), bad, report);
}

TestSuite(conformance, .init = setup, .fini = teardown, .timeout = 120);

/* A shm store is this suite's own (tests/shm/meson.build names it after
** the build directory): removed once every test has run, so that a run
** leaves nothing in /dev/shm.  Runs in the runner, after the tests. */
ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
  const char *store = getenv("SLUICE_CONFORMANCE_STORE"), *n;
  char name[256];
  size_t len;
  (void)stats;
  if (!store || strncmp(store, "shm:", 4) != 0 ||
      !(n = strstr(store, "name=")))
    return;
  len = strcspn(n + 5, ";");
  if (len == 0 || len >= sizeof name)
    return;
  memcpy(name, n + 5, len);
  name[len] = '\0';
  shm_unlink(name);
}

Test(conformance, gcra_spec) { replay("gcra_spec.trace"); }
Test(conformance, gcra_group) { replay("gcra_group.trace"); }
Test(conformance, swindow) { replay("swindow.trace"); }
Test(conformance, fwindow) { replay("fwindow.trace"); }
Test(conformance, penalty) { replay("penalty.trace"); }
Test(conformance, lease) { replay("lease.trace"); }
Test(conformance, lease_count) { replay("lease_count.trace"); }
Test(conformance, distinct) { replay("distinct.trace"); }
Test(conformance, adjust) { replay("adjust.trace"); }

/* ------------------------------------------------------ differential --- */

#define NKEY 4
#define NOPS 2500

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
  return splitmix64(&rng_state);
}
static int64_t between(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

typedef struct model {
  char names[SLUICE_GROUP_MAX][96];
  sluice_key keys[SLUICE_GROUP_MAX];
  sluice_state st[SLUICE_GROUP_MAX];
  int n;
} model;

static void model_init(model *m, const char *what, int n) {
  memset(m, 0, sizeof *m);
  m->n = n;
  for (int i = 0; i < n; i++) {
    snprintf(m->names[i], sizeof m->names[i], "{%s}:%s:%d", tag, what, i);
    m->keys[i].data = m->names[i];
    m->keys[i].len = strlen(m->names[i]);
  }
}

static void same_verdict(const sluice_verdict *a, const sluice_verdict *b,
                         int step) {
  cr_assert_eq(a->allowed, b->allowed, "step %d allowed", step);
  cr_assert_eq(a->remaining, b->remaining, "step %d remaining", step);
  cr_assert_eq(a->limit, b->limit, "step %d limit", step);
  cr_assert_eq(a->retry_after_ns, b->retry_after_ns, "step %d retry", step);
  cr_assert_eq(a->reset_ns, b->reset_ns, "step %d reset", step);
  cr_assert_eq(a->level, b->level, "step %d level", step);
  cr_assert_eq(a->strikes_remaining, b->strikes_remaining, "step %d strikes",
               step);
  cr_assert_eq(a->offenses, b->offenses, "step %d offenses", step);
  cr_assert_eq(a->flags, b->flags, "step %d flags", step);
  cr_assert_eq(a->binding, b->binding, "step %d binding", step);
  cr_assert_eq(a->lease_id, b->lease_id, "step %d lease", step);
  cr_assert_eq(a->now_ns, b->now_ns, "step %d now", step);
}

/* The model's verdict of the last both() (a counted lease set's ids). */
static sluice_verdict last_verdict;

/* Run op on the store and on the model; compare; then check that the
** store holds exactly the model's live records. */
static void both(model *m, sluice_op *op, const int *idx, int64_t now,
                 int step) {
  sluice_state in[SLUICE_GROUP_MAX], out[SLUICE_GROUP_MAX];
  sluice_key keys[SLUICE_GROUP_MAX];
  sluice_verdict vm, vs;
  int rc, i;
  for (i = 0; i < op->nkeys; i++) {
    keys[i] = m->keys[idx[i]];
    in[i] = m->st[idx[i]];
  }
  op->keys = keys;
  /* The backend contract: a record past its expiry reads as zeroed. */
  for (i = 0; i < op->nkeys; i++)
    if (sluice__op_expiry(op, i, &in[i]) <= now)
      memset(&in[i], 0, sizeof in[i]);
  rc = sluice__op_step(op, in, out, now, &vm);
  cr_assert_eq(rc, SLUICE_OK, "model step %d: %s", step, sluice_strerror(rc));
  sluice_clock_set(clk, now);
  rc = op_decide(lim, op, SLUICE_NOW, &vs);
  cr_assert_eq(rc, SLUICE_OK, "store step %d: %s (%s)", step,
               sluice_strerror(rc), sluice_limiter_errmsg(lim));
  same_verdict(&vm, &vs, step);
  last_verdict = vm;
  for (i = 0; i < op->nkeys; i++)
    m->st[idx[i]] = out[i];
  if (step % 7 != 0)
    return;
  for (i = 0; i < op->nkeys; i++) {
    sluice_state got;
    int64_t exp = sluice__op_expiry(op, i, &out[i]), gexp = 0;
    rc = sluice_limiter_get(lim, keys[i].data, keys[i].len, &got, &gexp);
    if (rc == SLUICE_ENOTSUP)
      return;
    if (exp <= now) {
      cr_assert_eq(rc, SLUICE_ENOTFOUND,
                   "step %d key %d: a record past its expiry still reads",
                   step, i);
      continue;
    }
    cr_assert_eq(rc, SLUICE_OK, "get step %d: %s", step, sluice_strerror(rc));
    cr_assert_eq(gexp, exp, "step %d key %d: expiry", step, i);
    cr_assert(memcmp(&got, &out[i], sizeof got) == 0,
              "step %d key %d: stored record differs from the model", step, i);
  }
}

static int64_t advance(int64_t now) {
  switch (rnd() % 8) {
  case 0:
    return now; /* same instant */
  case 1:
    return now + between(1, 999);             /* sub-microsecond */
  case 2:
    return now + between(1, 5) * 60000000000; /* minutes: things expire */
  default:
    return now + between(1, 2000000000);      /* up to 2 s */
  }
}

/* adjust: half the ops settle (ADJUST), charging into debt and refunding
** past full. */
static void gcra_run(uint64_t seed, int adjust) {
  model m;
  sluice_gcra_params p[2];
  int64_t now = 1000000000000;
  rng_state = seed;
  model_init(&m, adjust ? "ag" : "g", NKEY);
  p[0] = (sluice_gcra_params){7, 1000000000, 20};  /* T is not whole ns */
  p[1] = (sluice_gcra_params){50, 60000000000, 13};
  for (int s = 0; s < NOPS; s++) {
    int idx[2] = {(int)(rnd() % NKEY), 0};
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, NULL, p, 1, 0};
    op.arg = between(1, 13);
    if (rnd() % 3 == 0) {
      op.nkeys = 2;
      idx[1] = (idx[0] + 1 + (int)(rnd() % (NKEY - 1))) % NKEY;
    }
    if (rnd() % 5 == 0)
      op.kind = SLUICE_OP_PEEK;
    now = advance(now);
    if (adjust && rnd() % 2) {
      op.kind = SLUICE_OP_ADJUST;
      op.arg = rnd() % 2 ? -between(1, 13) : between(1, 13);
    }
    both(&m, &op, idx, now, s);
  }
}

Test(conformance, differential_gcra) { gcra_run(1, 0); }

static void window_run(int algo, uint64_t seed) {
  model m;
  sluice_window_params p = {between(1, 40), between(1, 120) * 1000000000};
  int64_t now = 2000000000000;
  rng_state = seed;
  p.limit = between(1, 40);
  p.window_ns = between(1, 120) * 1000000000 + between(0, 999);
  model_init(&m, algo == SLUICE_ALGO_SWINDOW ? "s" : "f", NKEY);
  for (int s = 0; s < NOPS; s++) {
    int idx[1] = {(int)(rnd() % NKEY)};
    static const int kinds[3] = {SLUICE_OP_CONSUME, SLUICE_OP_COUNT,
                                 SLUICE_OP_PEEK};
    sluice_op op = {algo, kinds[rnd() % 3], 1, NULL, &p, 1, 0};
    op.arg = between(op.kind == SLUICE_OP_PEEK ? 0 : 1, p.limit);
    now = advance(now);
    both(&m, &op, idx, now, s);
  }
}

Test(conformance, differential_swindow) { window_run(SLUICE_ALGO_SWINDOW, 2); }
Test(conformance, differential_fwindow) { window_run(SLUICE_ALGO_FWINDOW, 3); }

Test(conformance, differential_penalty) {
  model m;
  sluice_penalty_params p = {4, 30000000000,
                             {60000000000, 300000000000, SLUICE_FOREVER},
                             900000000000};
  int64_t now = 3000000000000;
  rng_state = 4;
  model_init(&m, "p", NKEY);
  for (int s = 0; s < NOPS; s++) {
    int idx[1] = {(int)(rnd() % NKEY)};
    int r = (int)(rnd() % 20);
    sluice_op op = {SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 1, NULL, &p, 0, 0};
    if (r == 0) {
      op.kind = SLUICE_OP_TRIP;
      op.arg = between(1, 3);
    } else if (r == 1) {
      op.kind = SLUICE_OP_RELEASE;
    } else if (r < 5) {
      op.kind = SLUICE_OP_CHECK;
    }
    now = advance(now);
    both(&m, &op, idx, now, s);
  }
}

Test(conformance, differential_lease) {
  model m;
  sluice_lease_params p = {3, 20000000000};
  int64_t now = 4000000000000;
  int idx[3] = {0, 1, 2};
  static const int kinds[3] = {SLUICE_OP_ACQUIRE, SLUICE_OP_LEASE_RELEASE,
                               SLUICE_OP_RENEW};
  rng_state = 5;
  model_init(&m, "l", 3);
  for (int s = 0; s < NOPS; s++) {
    sluice_op op = {SLUICE_ALGO_LEASE, kinds[rnd() % 3], 3, NULL, &p, 0, 0};
    op.id = (uint64_t)between(1, 6);
    now = advance(now);
    both(&m, &op, idx, now, s);
  }
}

/* A counted set (one record): acquires fill it past max, releases and
** renewals use ids it granted (some released twice, some from buckets that
** ended) or made-up ones. */
Test(conformance, differential_lease_count) {
  model m;
  sluice_lease_params p = {40, 20000000000};
  int64_t now = 4000000000000;
  int idx[1] = {0};
  uint64_t ids[16] = {0};
  rng_state = 6;
  model_init(&m, "lc", 1);
  for (int s = 0; s < NOPS; s++) {
    int r = (int)(rnd() % 8);
    sluice_op op = {SLUICE_ALGO_LEASE,
                    r < 5   ? SLUICE_OP_ACQUIRE
                    : r < 7 ? SLUICE_OP_LEASE_RELEASE
                            : SLUICE_OP_RENEW,
                    1, NULL, &p, 0, 0};
    uint64_t *slot = &ids[rnd() % 16];
    op.id = op.kind == SLUICE_OP_ACQUIRE || !*slot ? rnd() | 1 : *slot;
    now = rnd() % 4 == 0 ? advance(now) : now + between(1, 300000000);
    both(&m, &op, idx, now, s);
    if (last_verdict.allowed && op.kind != SLUICE_OP_LEASE_RELEASE)
      *slot = last_verdict.lease_id;
  }
}

Test(conformance, differential_distinct) {
  model m;
  sluice_distinct_params p = {between(1, 60), 45000000000};
  int64_t now = 5000000000000;
  rng_state = 6;
  p.threshold = 25;
  model_init(&m, "d", NKEY);
  for (int s = 0; s < NOPS; s++) {
    int idx[1] = {(int)(rnd() % NKEY)};
    sluice_op op = {SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 1, NULL, &p, 0, 0};
    op.id = rnd();
    if (rnd() % 6 == 0)
      op.kind = SLUICE_OP_PEEK;
    now = advance(now);
    both(&m, &op, idx, now, s);
  }
}

/* ADJUST (settle) mixed with the consumes it settles: charges into debt,
** refunds past full, settled charges' times in this window, the last or
** long ago. */
Test(conformance, differential_adjust_gcra) { gcra_run(8, 1); }

static void adjust_windows(int algo, uint64_t seed) {
  model m;
  sluice_window_params p;
  int64_t now = 8000000000000;
  rng_state = seed;
  p.limit = between(1, 40);
  p.window_ns = between(1, 120) * 1000000000 + between(0, 999);
  model_init(&m, algo == SLUICE_ALGO_SWINDOW ? "as" : "af", NKEY);
  for (int s = 0; s < NOPS; s++) {
    int idx[1] = {(int)(rnd() % NKEY)};
    sluice_op op = {algo, SLUICE_OP_CONSUME, 1, NULL, &p, 1, 0};
    op.arg = between(1, p.limit);
    now = advance(now);
    if (rnd() % 2) {
      op.kind = SLUICE_OP_ADJUST;
      op.arg = rnd() % 2 ? -op.arg : op.arg;
      op.id = (uint64_t)(now - between(0, 3 * p.window_ns));
    }
    both(&m, &op, idx, now, s);
  }
}

Test(conformance, differential_adjust_swindow) {
  adjust_windows(SLUICE_ALGO_SWINDOW, 9);
}
Test(conformance, differential_adjust_fwindow) {
  adjust_windows(SLUICE_ALGO_FWINDOW, 10);
}

/* Run p on the store and on the model's records; compare the results
** and every record the store then holds. */
static void prog_both(model *m, const sluice_program *p, int64_t now, int s,
                      sluice_program_result *rm) {
  sluice_program_result rs;
  sluice_state in[SLUICE_PROGRAM_KEYS], out[SLUICE_PROGRAM_KEYS];
  int rc, i, n = p->nkeys;
  for (i = 0; i < n; i++) {
    in[i] = m->st[i];
    if (sluice_program_expiry(p, i, &in[i]) <= now)
      memset(&in[i], 0, sizeof in[i]);
  }
  rc = sluice_program_run(p, in, out, now, rm);
  cr_assert_eq(rc, SLUICE_OK, "model program %d: %s", s, sluice_strerror(rc));
  sluice_clock_set(clk, now);
  rc = sluice_limiter_decide(lim, 1, p, SLUICE_NOW, &rs, NULL);
  cr_assert_eq(rc, SLUICE_OK, "store program %d: %s (%s)", s,
               sluice_strerror(rc), sluice_limiter_errmsg(lim));
  cr_assert_eq(rs.allowed, rm->allowed, "program %d allowed", s);
  cr_assert_eq(rs.denied_by, rm->denied_by, "program %d denied_by", s);
  cr_assert_eq(rs.ran, rm->ran, "program %d ran", s);
  for (i = 0; i < p->nsteps; i++)
    same_verdict(&rm->v[i], &rs.v[i], s * 10 + i);
  memcpy(m->st, out, sizeof(sluice_state) * (size_t)n);
  for (i = 0; i < n; i++) {
    sluice_state got;
    int64_t exp = sluice_program_expiry(p, i, &out[i]), gexp = 0;
    rc = sluice_limiter_get(lim, m->keys[i].data, m->keys[i].len, &got, &gexp);
    if (rc == SLUICE_ENOTSUP)
      break;
    if (exp <= now) {
      cr_assert_eq(rc, SLUICE_ENOTFOUND, "program %d record %d", s, i);
      continue;
    }
    cr_assert_eq(rc, SLUICE_OK, "program %d record %d: %s", s, i,
                 sluice_strerror(rc));
    cr_assert_eq(gexp, exp, "program %d record %d: expiry", s, i);
    cr_assert(memcmp(&got, &out[i], sizeof got) == 0,
              "program %d record %d differs from the model", s, i);
  }
}

/* Programs (sluice/program.h): the store's xRun (or, for a backend without
** it, the step-by-step fallback) against sluice_program_run() over the
** model's records.  The standard request's shape (box, bucket pair, a
** notice with the denial's TTL, a strike) and a heavy request's gates after
** it (a window, a lease set), with random costs and lease ids, so that
** gates deny after earlier writes and notes run after denials. */
/* A record class (sluice/algo.h) never changes a verdict: the same
** programs on keys of either class. */
static void program_run(int cls, const char *what) {
  static const sluice_penalty_params pen = {
      3, 30000000000, {60000000000, 300000000000, SLUICE_FOREVER},
      900000000000};
  static const sluice_gcra_params gp[2] = {{20, 1000000000, 20},
                                           {3, 1000000000, 5}};
  static const sluice_lease_params notice = {1, 1}, slots = {2, 20000000000};
  static const sluice_window_params cap = {6, 60000000000};
  model m;
  int64_t now = 6000000000000;
  int undone = 0;
  rng_state = 7;
  model_init(&m, what, 7); /* box, tb, kb, notice, cap, 2 slots */
  for (int s = 0; s < NOPS / 2; s++) {
    sluice_step st[7];
    sluice_program p = {7, m.keys, 7, st, cls};
    sluice_program_result rm;
    memset(st, 0, sizeof st);
    st[0] = (sluice_step){SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &pen};
    st[1] = (sluice_step){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, 2, gp,
                          between(1, 5)};
    st[1].when = SLUICE_WHEN_PASSED;
    st[2] = (sluice_step){SLUICE_ALGO_LEASE, SLUICE_OP_RENEW, 3, 1, &notice,
                          0, 1};
    st[2].when = SLUICE_WHEN_DENIED;
    st[2].ref = 1;
    st[2].fold = SLUICE_FOLD_NOTE;
    st[2].ttl_from = SLUICE_TTL_OF(1);
    st[3] = st[2];
    st[3].kind = SLUICE_OP_ACQUIRE;
    st[3].ref = 2;
    st[4] = (sluice_step){SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, 0, 1, &pen};
    st[4].when = SLUICE_WHEN_ALLOWED;
    st[4].ref = 2;
    st[4].fold = SLUICE_FOLD_NOTE;
    st[5] = (sluice_step){SLUICE_ALGO_FWINDOW, SLUICE_OP_CONSUME, 4, 1, &cap,
                          1};
    st[5].when = SLUICE_WHEN_PASSED;
    st[6] = (sluice_step){SLUICE_ALGO_LEASE,
                          rnd() % 4 ? SLUICE_OP_ACQUIRE
                                    : SLUICE_OP_LEASE_RELEASE,
                          5, 2, &slots, 0, (uint64_t)between(1, 4)};
    st[6].when = SLUICE_WHEN_PASSED;
    now = advance(now);
    prog_both(&m, &p, now, s, &rm);
    undone += rm.denied_by > 1;
  }
  cr_assert_gt(undone, 20, "gates denied after the bucket charge");
}

Test(conformance, differential_program) {
  program_run(SLUICE_CLASS_SERVICE, "x");
}

Test(conformance, differential_program_untrusted) {
  program_run(SLUICE_CLASS_UNTRUSTED, "u");
}

Test(conformance, differential_program_untrusted_kept) {
  program_run(SLUICE_CLASS_UNTRUSTED_KEPT, "k");
}

/* A settle's program (lib/policy/settle.c) after the decisions it settles:
** three limits as gates (two buckets, a sliding window), then the same
** records adjusted, each by its own amount, always, as notes. */
Test(conformance, differential_program_settle) {
  static const sluice_gcra_params org = {10, 1000000000, 40},
                                  proj = {3, 1000000000, 15};
  static const sluice_window_params win = {30, 20000000000};
  model m;
  int64_t now = 9000000000000;
  int settled = 0;
  rng_state = 11;
  model_init(&m, "st", 3);
  for (int s = 0; s < NOPS / 2; s++) {
    sluice_step st[3];
    sluice_program p = {3, m.keys, 3, st, 0};
    sluice_program_result rm;
    int adj = (int)(rnd() % 2), i;
    memset(st, 0, sizeof st);
    st[0] = (sluice_step){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, &org,
                          between(1, 15)};
    st[1] = (sluice_step){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, 1, &proj,
                          st[0].arg};
    st[2] = (sluice_step){SLUICE_ALGO_SWINDOW, SLUICE_OP_CONSUME, 2, 1, &win,
                          st[0].arg};
    for (i = 0; i < 3; i++) {
      if (i > 0)
        st[i].when = SLUICE_WHEN_PASSED;
      if (!adj)
        continue;
      st[i].kind = SLUICE_OP_ADJUST;
      st[i].arg = rnd() % 2 ? -between(1, 15) : between(1, 15);
      st[i].id = (uint64_t)(now - between(0, 30000000000));
      st[i].when = SLUICE_WHEN_ALWAYS;
      st[i].fold = SLUICE_FOLD_NOTE;
    }
    now = advance(now);
    prog_both(&m, &p, now, s, &rm);
    settled += adj;
  }
  cr_assert_gt(settled, 100);
}

/* A batch of programs (one xRun of n: one transaction, one pipeline) over three
** groups, each against its own model; a bad program in the batch gets its
** own error and the others still run. */
Test(conformance, program_batch) {
  static const sluice_gcra_params gp = {3, 1000000000, 4};
  static const sluice_window_params win = {5, 10000000000};
  model m[3];
  int64_t now = 7000000000000;
  rng_state = 8;
  for (int g = 0; g < 3; g++) {
    char what[8];
    snprintf(what, sizeof what, "b%d", g);
    model_init(&m[g], what, 2);
    /* Three hash tags: "{tag}:b0" and friends share one; give each its own. */
    for (int i = 0; i < 2; i++) {
      snprintf(m[g].names[i], sizeof m[g].names[i], "{%s-%d}:b:%d", tag, g, i);
      m[g].keys[i].len = strlen(m[g].names[i]);
    }
  }
  for (int s = 0; s < 300; s++) {
    sluice_step st[3][2], bad[1];
    sluice_program ps[4];
    sluice_program_result res[4];
    int rcs[4], rc;
    now = advance(now);
    for (int g = 0; g < 3; g++) {
      memset(st[g], 0, sizeof st[g]);
      st[g][0] = (sluice_step){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, &gp,
                               between(1, 3)};
      st[g][1] = (sluice_step){SLUICE_ALGO_FWINDOW, SLUICE_OP_CONSUME, 1, 1,
                               &win, 1};
      st[g][1].when = SLUICE_WHEN_PASSED;
      ps[g] = (sluice_program){2, m[g].keys, 2, st[g]};
    }
    memset(bad, 0, sizeof bad);
    bad[0] = (sluice_step){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 0, 1, &gp, 99};
    ps[3] = (sluice_program){1, m[0].keys, 1, bad}; /* cost above burst */
    sluice_clock_set(clk, now);
    rc = sluice_limiter_decide(lim, 4, ps, SLUICE_NOW, res, rcs);
    cr_assert_eq(rc, SLUICE_OK, "batch %d: %s (%s)", s, sluice_strerror(rc),
                 sluice_limiter_errmsg(lim));
    cr_assert_eq(rcs[3], SLUICE_ERANGE, "batch %d: the bad program", s);
    for (int g = 0; g < 3; g++) {
      sluice_state in[2], out[2];
      sluice_program_result rm;
      cr_assert_eq(rcs[g], SLUICE_OK, "batch %d program %d: %s", s, g,
                   sluice_strerror(rcs[g]));
      for (int i = 0; i < 2; i++) {
        in[i] = m[g].st[i];
        if (sluice_program_expiry(&ps[g], i, &in[i]) <= now)
          memset(&in[i], 0, sizeof in[i]);
      }
      cr_assert_eq(sluice_program_run(&ps[g], in, out, now, &rm), SLUICE_OK);
      cr_assert_eq(res[g].denied_by, rm.denied_by, "batch %d program %d", s,
                   g);
      for (int i = 0; i < 2; i++)
        same_verdict(&rm.v[i], &res[g].v[i], s * 10 + i);
      memcpy(m[g].st, out, sizeof out);
    }
  }
}

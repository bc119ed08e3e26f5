/*
** CPU ns per policy decision on the in-process "mem" store, by request class:
** the cost of sluice_policy_decide() itself (scope ids, keys, the store
** call or calls, the answer).  Single thread; each figure the median of 5
** rounds.  Uses only the public API, so the same file measures an older
** build for a before/after comparison (docs/policy.md).
**
** Then the tenant cases once more with a shared deny cache (options
** .deny_cache = shm:..., read before the store on every decision), and
** their ratio to the first run (the in-process cache, not read while the
** store answers).
**
** SLUICE_BENCH_SCALE=<percent> shrinks the runs (default 100).
**
** `bench-policy --count CASE N` (CASE std, throttled, reconcile, auth or
** bare: the bare group step with the policy's keys) runs N decisions of
** the case, then N more inside counted(), for callgrind to count
** instructions in (`valgrind --tool=callgrind --toggle-collect=counted`),
** and prints the counted ones' CPU ns per decision (bench/
** ab_rounds.py compares two builds by it).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "../../tests/common/one_step.h"
#include "rounds.h"

#define NKEY 10000

static sluice_policy *pol;
static char tenants[NKEY][16], keys[NKEY][16], ips[NKEY][16];

static void must(int rc, const char *what) {
  if (rc != SLUICE_OK) {
    fprintf(stderr, "bench_policy: %s: %s\n", what, sluice_strerror(rc));
    exit(1);
  }
}

/* The yardstick: the bare tenant+key GCRA group step on a mem limiter, on
** the same 10k keys x 1000 tenants, with keys made before timing: of the
** policy's shape (rl:{t:T}:tb, rl:{t:T}:kb:K, scope ids of 32 hex digits),
** and short ones (rl:{t:0000123}:tb, bench-core's shape), both in the run. */
static sluice_limiter *bare;
static char bare_tb[NKEY][48], bare_kb[NKEY][80];
static char short_tb[NKEY][24], short_kb[NKEY][24];
static sluice_gcra_params bare_params[2];

static int64_t bare_at; /* > 0: a time for apply_at (no clock read) */

static void group_step(const char *tb, const char *kb) {
  sluice_key k[2];
  sluice_verdict v;
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 2, k, bare_params, 1,
                  0};
  k[0].data = tb;
  k[0].len = strlen(tb);
  k[1].data = kb;
  k[1].len = strlen(kb);
  if ((bare_at ? op_decide(bare, &op, bare_at += 1000, &v)
               : op_decide(bare, &op, SLUICE_NOW, &v)) != SLUICE_OK ||
      !v.allowed) {
    fprintf(stderr, "bench_policy: bare group step failed\n");
    exit(1);
  }
}

static void bare_group(long i) {
  group_step(bare_tb[i % NKEY], bare_kb[i % NKEY]);
}

static void bare_group_short(long i) {
  group_step(short_tb[i % NKEY], short_kb[i % NKEY]);
}

/* bench-core's "tenant+key group" case: short keys at a given time. */
static void bare_group_short_at(long i) {
  if (!bare_at)
    bare_at = sluice_limiter_now(bare);
  group_step(short_tb[i % NKEY], short_kb[i % NKEY]);
}

/* Enterprise's buckets in the bench: they never run out. */
#define BIG 40000000
#define BIG_BUCKET "{ rate = 40000000; burst = 40000000; }"

static void bare_open(void) {
  sluice_limiter_options lo;
  uint8_t secret[16] = {1, 2, 3};
  char t[SLUICE_SCOPE_ID_LEN + 1], k[SLUICE_SCOPE_ID_LEN + 1];
  memset(&lo, 0, sizeof lo);
  lo.store = "mem";
  must(sluice_limiter_open(&lo, &bare, NULL, 0), "bare limiter");
  bare_params[0] = (sluice_gcra_params){BIG, 1000000000, BIG};
  bare_params[1] = (sluice_gcra_params){BIG, 1000000000, BIG};
  for (long i = 0; i < NKEY; i++) {
    sluice_scope_id(secret, tenants[i], strlen(tenants[i]), t);
    sluice_scope_id(secret, keys[i], strlen(keys[i]), k);
    snprintf(bare_tb[i], sizeof bare_tb[i], "rl:{t:%s}:tb", t);
    snprintf(bare_kb[i], sizeof bare_kb[i], "rl:{t:%s}:kb:%s", t, k);
    snprintf(short_tb[i], sizeof short_tb[i], "rl:{t:%07ld}:tb", i % 1000);
    snprintf(short_kb[i], sizeof short_kb[i], "rl:{t:%07ld}:kb%ld", i % 1000,
             i);
  }
}

static void decide(const sluice_request *r, int want_allowed) {
  sluice_decision d;
  must(sluice_policy_decide(pol, 1, r, &d, NULL), "decide");
  if (want_allowed >= 0 && d.allowed != want_allowed) {
    fprintf(stderr, "bench_policy: unexpected %s\n",
            sluice_name(SLUICE_NAME_OUTCOME, d.outcome));
    exit(1);
  }
}

/* A request of etc/ledger.conf's: method and route pick its route. */
static sluice_request req(long i, const char *tier, const char *method,
                          const char *route) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.tenant_id = tenants[i % NKEY];
  r.api_key_id = keys[i % NKEY];
  r.tier = tier;
  r.method = method;
  r.route = route;
  r.client_ip = ips[i % NKEY];
  return r;
}

#define STD "GET", "/v1/ledgers/main/entries"

static void std_allowed(long i) {
  sluice_request r = req(i, "enterprise", STD);
  decide(&r, 1);
}

static sluice_request spent(void) {
  sluice_request r = req(0, "sandbox", STD);
  r.tenant_id = "spent-tenant";
  r.api_key_id = "spent-key";
  return r;
}

static void std_throttled(long i) {
  sluice_request r = spent();
  (void)i;
  decide(&r, -1); /* almost always a throttle: the key refills slowly */
}

static void reconcile_release(long i) {
  sluice_request r = req(i, "enterprise", "POST", "/v1/ledgers/reconcile");
  sluice_attr a = {"ledger", "ledger"};
  sluice_decision d;
  r.attrs = &a;
  r.nattrs = 1;
  must(sluice_policy_decide(pol, 1, &r, &d, NULL), "reconcile");
  if (d.allowed)
    must(sluice_policy_release(
             pol, &r,
             &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = d.lease_id}),
         "release");
}

static void auth_ok(long i) {
  sluice_request r = req(i, NULL, "POST", "/v1/auth/token");
  sluice_attr a[2] = {{"subject", keys[i % NKEY]}, {"result", "ok"}};
  r.attrs = a;
  r.nattrs = 2;
  decide(&r, -1);
}

/* Not inlined: callgrind counts from its entry (--toggle-collect). */
__attribute__((noinline)) void counted(one_fn f, long n);
__attribute__((noinline)) void counted(one_fn f, long n) {
  long i;
  for (i = 0; i < n; i++)
    f(n + i);
}

/* Spend the sandbox key first. */
static void spend(void) {
  int i;
  for (i = 0; i < 1000; i++) {
    sluice_request r = spent();
    sluice_decision d;
    must(sluice_policy_decide(pol, 1, &r, &d, NULL), "warm");
  }
}

int main(int argc, char **argv) {
  const char *sc = getenv("SLUICE_BENCH_SCALE");
  long scale = sc ? atol(sc) : 100, n;
  sluice_policy_config *cfg;
  sluice_policy_options po;
  sluice_limiter_options lo;
  /* tag: the case's name for --count (and "bare": the bare group step). */
  static const struct {
    const char *tag, *name;
    one_fn f;
  } cases[] = {{"std", "standard, allowed (10k keys)", std_allowed},
               {"throttled", "standard, throttled (1 key)", std_throttled},
               {"reconcile", "reconcile + lease release", reconcile_release},
               {"auth", "auth success (subject + IP)", auth_ok}};
  one_fn cf = NULL;
  long cn = 0;
  unsigned c;
  long i;
  int rc;
  char err[256], seg[64], uri[96];
  double ns[4], dc[2];

  if (argc == 4 && !strcmp(argv[1], "--count")) {
    if (!strcmp(argv[2], "bare"))
      cf = bare_group;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
      if (!strcmp(cases[c].tag, argv[2]))
        cf = cases[c].f;
  }
  if (argc > 1 && (!cf || (cn = atol(argv[3])) < 1)) {
    fprintf(stderr, "usage: bench-policy [--count "
                    "std|throttled|reconcile|auth|bare N]\n");
    return 2;
  }
  if (scale < 1)
    scale = 1;
  n = 200000 * scale / 100;
  for (i = 0; i < NKEY; i++) {
    snprintf(tenants[i], sizeof tenants[i], "t%ld", i % 1000);
    snprintf(keys[i], sizeof keys[i], "k%ld", i);
    snprintf(ips[i], sizeof ips[i], "10.0.%ld.%ld", i / 256, i % 256);
  }
  if (sluice_policy_config_new(&cfg, SLUICE_LEDGER_CONF, err, sizeof err) !=
      SLUICE_OK) {
    fprintf(stderr, "bench_policy: %s\n", err);
    return 1;
  }
  /* Enterprise never runs out; sandbox (the limits' own numbers) is spent
  ** at once and never strikes out (the throttled case stays a throttle). */
  must(sluice_policy_config_set(cfg, "limits.tenant.params.enterprise",
                                BIG_BUCKET, err, sizeof err),
       err);
  must(sluice_policy_config_set(cfg, "limits.key.params.enterprise",
                                BIG_BUCKET, err, sizeof err),
       err);
  must(sluice_policy_config_set(cfg, "penalties.keys.strikes", "1000000", err,
                                sizeof err),
       err);
  must(sluice_policy_config_set(cfg, "penalties.subject.strikes", "1000000",
                                err, sizeof err),
       err);
  memset(&lo, 0, sizeof lo);
  lo.store = "mem";
  memset(&po, 0, sizeof po);
  po.limiter_options = &lo;
  po.config = cfg;
  po.errbuf = err;
  po.errlen = sizeof err;
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 7);
  if (sluice_policy_open(&po, &pol) != SLUICE_OK) {
    fprintf(stderr, "bench_policy: open: %s\n", err);
    return 1;
  }
  spend();
  bare_open();
  if (cf) {
    double t0;
    for (i = 0; i < cn; i++)
      cf(i);
    t0 = cpu();
    counted(cf, cn);
    printf("%.1f CPU ns/decision\n", (cpu() - t0) / (double)cn);
    sluice_limiter_close(bare);
    sluice_policy_close(pol);
    sluice_policy_config_free(cfg);
    return 0;
  }
  printf("policy decisions on mem, one thread, CPU time, median of %d "
         "rounds of %ld\n",
         ROUNDS, n);
  {
    /* Interleaved, the lower of two medians each: a loaded machine slows
    ** whichever case it happens to hit. */
    double b[2], h[2], t[2], a[2], bg, bs, bt, sa;
    for (int r = 0; r < 2; r++) {
      b[r] = measure(bare_group, n);
      h[r] = measure(bare_group_short, n);
      t[r] = measure(bare_group_short_at, n);
      bare_at = 0;
      a[r] = measure(std_allowed, n);
    }
    bg = b[0] < b[1] ? b[0] : b[1];
    bs = h[0] < h[1] ? h[0] : h[1];
    bt = t[0] < t[1] ? t[0] : t[1];
    sa = a[0] < a[1] ? a[0] : a[1];
    printf("  %-34s %8.0f ns/decision %10.0f /s\n",
           "bare group step, policy's keys", bg, 1e9 / bg);
    printf("  %-34s %8.0f ns/decision %10.0f /s\n",
           "bare group step, short keys", bs, 1e9 / bs);
    printf("  %-34s %8.0f ns/decision %10.0f /s\n",
           "bare group step, short, no clock", bt, 1e9 / bt);
    printf("ratio: standard allowed / bare tenant+key group step, same run: "
           "%.2f with the policy's keys, %.2f with short keys, %.2f short "
           "keys at a given time (no clock read; target 4)\n",
           sa / bg, sa / bs, sa / bt);
  }
  sluice_limiter_close(bare);
  for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ns[c] = measure(cases[c].f, n);
    /* The line shape scripts/bench-all.sh reads into its table. */
    printf("  %-34s %8.0f ns/decision %10.0f /s\n", cases[c].name, ns[c],
           1e9 / ns[c]);
  }
  sluice_policy_close(pol);

  /* The same policy with a shared deny cache. */
  snprintf(seg, sizeof seg, "/sluice-bench-deny-%d", (int)getpid());
  snprintf(uri, sizeof uri, "shm:name=%s", seg);
  po.deny_cache = uri;
  rc = sluice_policy_open(&po, &pol);
  sluice_policy_config_free(cfg); /* both opens read it */
  shm_unlink(seg); /* the mapping keeps it while the policy is open */
  if (rc != SLUICE_OK) {
    fprintf(stderr, "bench_policy: open with a deny cache: %s\n", err);
    return 1;
  }
  spend();
  printf("with a shared deny cache (read before the store):\n");
  for (c = 0; c < 2; c++) {
    dc[c] = measure(cases[c].f, n);
    printf("  %-34s %8.0f ns/decision %10.0f /s\n", cases[c].name, dc[c],
           1e9 / dc[c]);
  }
  printf("ratios (shared deny cache / in-process, same run)\n");
  for (c = 0; c < 2; c++)
    printf("  %s: %.2f\n", cases[c].name, dc[c] / ns[c]);
  sluice_policy_close(pol);
  return 0;
}

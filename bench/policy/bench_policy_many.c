/*
** Batched policy decisions: ns per standard (allowed) decision made one by
** one (sluice_policy_decide) against the same decisions in batches of
** BATCH (one sluice_policy_decide of n), on the mem store, at a small and a
** big key set.  Each key is its own tenant's, so a decision reads two
** bucket records no other decision near it reads, in a shuffled order the
** hardware prefetcher cannot follow: on the big set they are DRAM misses,
** which the batch's prefetch overlaps.  The two modes alternate round by
** round on one policy; the table gives each mode's median round and the
** median of the rounds' ratios.  CPU time per decision (on a shared
** machine wall time also counts other processes' time).
**
** Usage: bench-policy-many [decisions-per-round [rounds]]
**        (defaults 300000, 5; SLUICE_BENCH_SCALE=<percent> shrinks them)
** Fails only on errors and on a decision that is not allowed.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shuffle.h"
#include "sluice.h"

#define BATCH 16
#define MAX_ROUNDS 15
#define IDLEN 16

static char (*tenant)[IDLEN], (*key)[IDLEN];
static int *order;

static double cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void must(int rc, const char *what) {
  if (rc != SLUICE_OK) {
    fprintf(stderr, "bench-policy-many: %s: %s\n", what, sluice_strerror(rc));
    exit(1);
  }
}

static void fill(sluice_request *r, int k) {
  memset(r, 0, sizeof *r);
  r->tenant_id = tenant[k];
  r->api_key_id = key[k];
  r->tier = "enterprise";
  r->method = "GET"; /* etc/ledger.conf's standard route */
  r->route = "/v1/ledgers/main/entries";
}

static void check(const sluice_decision *d) {
  if (!d->allowed) {
    fprintf(stderr, "bench-policy-many: unexpected %s\n",
            sluice_name(SLUICE_NAME_OUTCOME, d->outcome));
    exit(1);
  }
}

/* n decisions from position *at of the shuffled order, one by one or in
** batches; ns of CPU per decision. */
static double run(sluice_policy *pol, int nkeys, long n, long *at,
                  int batched) {
  sluice_request q[BATCH];
  sluice_decision d[BATCH];
  int rcs[BATCH], i, m;
  double t0 = cpu();
  for (long done = 0; done < n; done += m) {
    m = n - done < BATCH ? (int)(n - done) : BATCH;
    for (i = 0; i < m; i++)
      fill(&q[i], order[(*at)++ % nkeys]);
    if (batched) {
      must(sluice_policy_decide(pol, m, q, d, rcs), "decide_many");
      for (i = 0; i < m; i++) {
        must(rcs[i], "decide_many request");
        check(&d[i]);
      }
    } else {
      for (i = 0; i < m; i++) {
        must(sluice_policy_decide(pol, 1, &q[i], &d[i], NULL), "decide");
        check(&d[i]);
      }
    }
  }
  return (cpu() - t0) / (double)n;
}

static double median(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v[n / 2];
}

static void bench(int nkeys, long n, int rounds) {
  sluice_policy_config *cfg;
  sluice_policy_options po;
  sluice_limiter_options lo;
  sluice_policy *pol;
  double one[MAX_ROUNDS], many[MAX_ROUNDS], ratio[MAX_ROUNDS];
  char err[256];
  long at = 0;
  int r;

  must(sluice_policy_config_new(&cfg, SLUICE_LEDGER_CONF, NULL, 0),
       "etc/ledger.conf");
  /* Enterprise never runs out: every decision is an allowed one. */
  must(sluice_policy_config_set(cfg, "limits.tenant.params.enterprise",
                                "{ rate = 40000000; burst = 40000000; }",
                                err, sizeof err),
       err);
  must(sluice_policy_config_set(cfg, "limits.key.params.enterprise",
                                "{ rate = 40000000; burst = 40000000; }",
                                err, sizeof err),
       err);
  lo = (sluice_limiter_options){.store = "mem"};
  po = (sluice_policy_options){.limiter_options = &lo, .config = cfg,
                               .errbuf = err, .errlen = sizeof err};
  for (int i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 7);
  if (sluice_policy_open(&po, &pol) != SLUICE_OK) {
    fprintf(stderr, "bench-policy-many: open: %s\n", err);
    exit(1);
  }
  sluice_policy_config_free(cfg);
  shuffled_indices(order, nkeys, (uint64_t)nkeys);
  run(pol, nkeys, nkeys, &at, 1); /* every record made before timing */
  for (r = 0; r < rounds; r++) {
    one[r] = run(pol, nkeys, n, &at, 0);
    many[r] = run(pol, nkeys, n, &at, 1);
    ratio[r] = many[r] / one[r];
  }
  printf("  %8d keys %12.0f %12.0f %8.2f\n", nkeys, median(one, rounds),
         median(many, rounds), median(ratio, rounds));
  sluice_policy_close(pol);
}

int main(int argc, char **argv) {
  const char *sc = getenv("SLUICE_BENCH_SCALE");
  long scale = sc ? atol(sc) : 100;
  long n = argc > 1 ? atol(argv[1]) : 300000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  static const int sets[] = {1000, 1000000};
  int maxk = sets[sizeof sets / sizeof sets[0] - 1];

  if (scale < 1)
    scale = 1;
  n = n * scale / 100;
  if (n < BATCH || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: bench-policy-many [decisions-per-round (>= %d) "
                    "[rounds (1-%d)]]\n", BATCH, MAX_ROUNDS);
    return 2;
  }
  tenant = malloc((size_t)maxk * sizeof *tenant);
  key = malloc((size_t)maxk * sizeof *key);
  order = malloc((size_t)maxk * sizeof *order);
  if (!tenant || !key || !order) {
    fprintf(stderr, "bench-policy-many: out of memory\n");
    return 1;
  }
  for (int i = 0; i < maxk; i++) {
    snprintf(tenant[i], IDLEN, "t%d", i);
    snprintf(key[i], IDLEN, "k%d", i);
  }
  printf("standard decisions on mem, one thread, batches of %d, CPU ns per "
         "decision, median of %d rounds of %ld\n", BATCH, rounds, n);
  printf("  %14s %12s %12s %8s\n", "", "one by one", "decide_many",
         "ratio");
  for (unsigned s = 0; s < sizeof sets / sizeof sets[0]; s++)
    bench(sets[s], n, rounds);
  free(tenant);
  free(key);
  free(order);
  return 0;
}

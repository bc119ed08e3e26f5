#include <stdio.h>
#include <sluice.h>

int main(void) {
  sluice_clock *clock;
  sluice_limiter *lim;
  sluice_verdict v;
  /* 3000 points per minute, burst 3000: the growth tier's tenant bucket. */
  sluice_gcra_params growth = {.rate = 3000, .period_ns = 60000000000,
                               .burst = 3000};
  /* A manual clock makes the run reproducible; leave .clock NULL for the
  ** real one. */
  sluice_clock_manual(0, &clock);
  sluice_limiter_options opts = {.store = "mem", .clock = clock};
  int rc = sluice_limiter_open(&opts, &lim, NULL, 0);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "open: %s\n", sluice_strerror(rc));
    return 1;
  }
  for (int i = 0; i < 301; i++) {
    /* A reconcile costs 10 points. */
    rc = sluice_limiter_take(lim, "rl:{t:acme}:tb", 14, &growth, 10, &v);
    if (rc != SLUICE_OK) {
      fprintf(stderr, "take: %s\n", sluice_strerror(rc));
      break;
    }
    if (!v.allowed)
      printf("request %d: 429, retry after %lld ms, %lld points left\n", i,
             (long long)((v.retry_after_ns + 999999) / 1000000),
             (long long)v.remaining);
  }
  sluice_limiter_close(lim);
  sluice_clock_free(clock);
  return rc == SLUICE_OK ? 0 : 1;
}

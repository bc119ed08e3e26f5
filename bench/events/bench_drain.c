/*
** The webhook sink's reliability probe (issue 38): how fast a storm
** settles with the receiver down, and how fast a live destination is
** served beside one that hangs.  A benchmark (meson test --benchmark
** webhook-drain): figures, no pass/fail on speed.
**
**     bench_drain [N]        N events (1000)
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* receiver.h's checks, for a program that is not a test suite */
#define cr_assert(c, ...)                                                     \
  do {                                                                        \
    if (!(c)) {                                                               \
      fprintf(stderr, "bench_drain: %s failed\n", #c);                        \
      exit(2);                                                                \
    }                                                                         \
  } while (0)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b))

#include "receiver.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000, i;
  sluice_webhook_options o;
  sluice_webhook_dest d[2];
  sluice_webhook *w;
  sluice_webhook_stats s;
  sluice_event ev = event(SLUICE_EVENT_ALERT, 2, NULL);
  receiver live, hang;
  char u1[128], u2[128];
  double t0, t;
  setvbuf(stdout, NULL, _IONBF, 0);
  memset(&o, 0, sizeof o);
  url(u1, sizeof u1, dead_port(), "/a");
  o.url[SLUICE_EVENT_ALERT] = u1;
  o.flags = SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  if (n < 1 || sluice_webhook_open(&o, &w) != SLUICE_OK)
    return 2;
  t0 = now_s();
  for (i = 0; i < n; i++)
    sluice_webhook_on_event(w, &ev);
  do {
    usleep(20000);
    sluice_webhook_stats_get(w, &s);
  } while (s.failed + s.dropped < (uint64_t)n);
  t = now_s() - t0;
  printf("receiver down: %d events (5 attempts each, 500 ms base backoff): "
         "all settled in %.1f s (%.0f events/s), %llu dropped\n",
         n, t, n / t, (unsigned long long)s.dropped);
  sluice_webhook_close(w);

  live_and_hanging(&live, &hang, &o, d, u1, u2);
  if (sluice_webhook_open(&o, &w) != SLUICE_OK)
    return 2;
  t0 = now_s();
  for (i = 0; i < n; i++)
    sluice_webhook_on_event(w, &ev);
  while (rx_count(&live) < n && now_s() - t0 < 60)
    usleep(5000);
  t = now_s() - t0;
  printf("hanging + live: the live one got %d of %d events in %.2f s; the "
         "hanging one holds %d attempts (4 at once, 3 s timeout)\n",
         rx_count(&live), n, t, rx_count(&hang));
  i = rx_count(&live);
  sluice_webhook_close(w);
  rx_stop(&hang);
  rx_stop(&live);
  return i == n ? 0 : 1;
}

/*
** The nftables sink under a ban flood, in a network namespace (netns.sh):
**
**  1. Decision latency with and without the sink, in the same run: one
**     thread decides standard requests on a mem store for PHASE_S seconds
**     per phase, phases alternating off / on; in the "on" phases the same
**     thread also hands the sink BANS_PER_S level 2 IP bans a second (the
**     policy's EDGE_DENY events, each a new address), as a policy would on
**     the thread that decides.  p50 / p99 / p99.9 per mode, and what the
**     sink made of the flood (added, dropped, failed, transactions).
**  2. Ban to kernel: one ban at a time, the time from the event to the
**     transaction that put it in the set (sluice_nft_sync returning), and a
**     TCP connect from the banned address checked dropped.
**
** Timing never fails this program; it fails only when the sink does
** (refused bans, a connect that got through).
**
** SLUICE_BENCH_SCALE=<percent> shrinks the phases (default 100).
*/
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"

#define BANS_PER_S 10000
#define PHASES 4
#define NKEY 1000
#define MAXLAT 4000000
#define MAXBANS (1 << 20)

static int64_t mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void must(int rc, const char *what) {
  if (rc != SLUICE_OK) {
    fprintf(stderr, "bench_nft: %s: %s\n", what, sluice_strerror(rc));
    exit(1);
  }
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int64_t pct(int64_t *v, size_t n, double p) {
  size_t i = (size_t)(p / 100.0 * (double)(n - 1));
  return n ? v[i] : 0;
}

static int64_t *lat[2];
static size_t nlat[2];
/* The flood's addresses, made before timing: the policy hands the sink
** the request's own string, so making one is not the sink's cost. */
static char (*ips)[16];

int main(void) {
  sluice_policy_options po;
  sluice_policy *pol;
  sluice_nft_options no;
  sluice_nft *sink;
  sluice_nft_stats st;
  sluice_request q, bq;
  sluice_event ev;
  sluice_decision d;
  char tenants[NKEY][16], keys[NKEY][16], ip[32];
  const char *scale = getenv("SLUICE_BENCH_SCALE");
  double phase_s = 2.0 * (scale ? atof(scale) : 100.0) / 100.0;
  uint64_t bans = 0;
  int i, ph;

  memset(&po, 0, sizeof po);
  memset(po.secret, 9, sizeof po.secret);
  must(sluice_policy_open(&po, &pol), "policy");
  memset(&no, 0, sizeof no);
  no.flags = SLUICE_NFT_CREATE;
  no.max_elements = 1 << 20;
  must(sluice_nft_open(&no, &sink), "nft open");
  for (i = 0; i < NKEY; i++) {
    snprintf(tenants[i], sizeof tenants[i], "t%d", i % 100);
    snprintf(keys[i], sizeof keys[i], "k%d", i);
  }
  for (i = 0; i < 2; i++)
    if (!(lat[i] = malloc(MAXLAT * sizeof *lat[i])))
      return 1;
  if (!(ips = malloc(MAXBANS * sizeof *ips)))
    return 1;
  for (i = 0; i < MAXBANS; i++)
    snprintf(ips[i], sizeof ips[i], "10.%u.%u.%u", (unsigned)(i >> 16) & 255,
             (unsigned)(i >> 8) & 255, (unsigned)i & 255);
  memset(&q, 0, sizeof q);
  q.tier = "enterprise";
  q.method = "GET";
  q.route = "/v1/ledgers";
  memset(&bq, 0, sizeof bq);
  bq.client_ip = ip;
  memset(&ev, 0, sizeof ev);
  ev.type = SLUICE_EVENT_EDGE_DENY;
  ev.scope = SLUICE_SCOPE_IP;
  ev.level = 2;
  ev.request = &bq;
  ev.until_ns = 600 * INT64_C(1000000000);

  for (ph = 0; ph < PHASES; ph++) {
    int on = ph & 1;
    int64_t t0 = mono(), end = t0 + (int64_t)(phase_s * 1e9), now;
    uint64_t sent = 0;
    for (i = 0; (now = mono()) < end; i++) {
      int64_t a, b;
      q.tenant_id = tenants[i % NKEY];
      q.api_key_id = keys[i % NKEY];
      a = mono();
      must(sluice_policy_decide(pol, 1, &q, &d, NULL), "decide");
      if (on) {
        uint64_t due = (uint64_t)((now - t0) / (1000000000 / BANS_PER_S));
        for (; sent < due && bans < MAXBANS; sent++, bans++) {
          bq.client_ip = ips[bans];
          sluice_nft_on_event(sink, &ev);
        }
      }
      b = mono();
      if (nlat[on] < MAXLAT)
        lat[on][nlat[on]++] = b - a;
    }
  }
  must(sluice_nft_sync(sink, 60000), "sync");
  must(sluice_nft_stats_get(sink, &st), "stats");
  printf("nftables sink: decisions on a mem store, %.1f s per phase, %d "
         "phases (off/on alternating)\n", phase_s, PHASES);
  printf("%-22s %10s %10s %10s %10s\n", "mode", "decisions", "p50 ns",
         "p99 ns", "p99.9 ns");
  for (i = 0; i < 2; i++) {
    qsort(lat[i], nlat[i], sizeof *lat[i], cmp64);
    printf("%-22s %10zu %10lld %10lld %10lld\n",
           i ? "sink on (10k bans/s)" : "sink off", nlat[i],
           (long long)pct(lat[i], nlat[i], 50), (long long)pct(lat[i], nlat[i], 99),
           (long long)pct(lat[i], nlat[i], 99.9));
  }
  printf("bans sent %llu: added %llu, dropped %llu, failed %llu, "
         "transactions %llu (%.1f bans each)\n",
         (unsigned long long)bans, (unsigned long long)st.added,
         (unsigned long long)st.dropped, (unsigned long long)st.failed,
         (unsigned long long)st.transactions,
         st.transactions ? (double)st.added / (double)st.transactions : 0.0);
  if (st.failed || st.added + st.dropped != bans) {
    fprintf(stderr, "bench_nft: the sink refused bans\n");
    return 1;
  }

  /* 2. One ban at a time: event to kernel. */
  {
    int64_t t[50];
    struct sockaddr_in s, dst;
    socklen_t len = sizeof dst;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
    struct pollfd pf;
    memset(&dst, 0, sizeof dst);
    dst.sin_family = AF_INET;
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&dst, sizeof dst) ||
        listen(lfd, 8) || getsockname(lfd, (struct sockaddr *)&dst, &len))
      return 1;
    bq.client_ip = ip;
    for (i = 0; i < 50; i++) {
      int64_t a = mono();
      snprintf(ip, sizeof ip, "127.0.1.%d", i + 1);
      sluice_nft_on_event(sink, &ev);
      must(sluice_nft_sync(sink, 10000), "sync");
      t[i] = mono() - a;
    }
    qsort(t, 50, sizeof *t, cmp64);
    printf("ban to kernel set (50 bans, one at a time): p50 %.2f ms, "
           "max %.2f ms\n", (double)t[25] / 1e6, (double)t[49] / 1e6);
    memset(&s, 0, sizeof s);
    s.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.1.50", &s.sin_addr);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&s, sizeof s))
      return 1;
    connect(fd, (struct sockaddr *)&dst, sizeof dst);
    pf.fd = fd;
    pf.events = POLLOUT;
    if (poll(&pf, 1, 300) != 0) {
      fprintf(stderr, "bench_nft: a banned address connected\n");
      return 1;
    }
    printf("a connect from the last banned address: dropped\n");
    close(fd);
    close(lfd);
  }
  sluice_nft_close(sink);
  sluice_policy_close(pol);
  free(lat[0]);
  free(lat[1]);
  free(ips);
  return 0;
}

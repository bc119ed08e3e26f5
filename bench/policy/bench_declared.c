/*
** CPU ns per decision of a route of declared limits (docs/policy.md "Declared
** limits") on the in-process "mem" store: a route applying one limit, one
** applying four (two buckets, a fixed and a sliding window, over three
** scopes of one tenant), the ledger's standard request as etc/ledger.conf
** writes it (the tenant and key buckets as one group, the key's declared
** penalty), a route of two limits in two hash-tag groups (the client
** address's window, then a bucket of the tenant and a user: two store
** calls), and, in the same run, a standard request of the built-in
** ledger flow (two buckets, box, notice) for comparison, when the library
** still has it (a second policy of its own: the declared cases need
** nothing of it).  `--count same` (not in the timed rounds) counts a
** route of four limits of one scope, the tenant's (two buckets, a fixed
** and a sliding window): four's limits without its two more attributes
** to hash, so the two tell a limit's cost from an attribute's.  Single
** thread; each figure the lower of two medians of 5 rounds; nothing is
** ever refused.  SLUICE_BENCH_SCALE=<percent> shrinks the runs (default
** 100).
**
** `bench-declared --count CASE N` (CASE one, four, same, file, split
** or standard) runs N decisions of the case over the benchmark's keys, then
** N more inside counted(), for callgrind_declared.py to count
** instructions in (the records exist by then, as in the timed rounds),
** and prints the counted ones' CPU ns per decision
** (bench/ab_rounds.py compares two builds by it); exit 77 for
** standard when the built-in flow is gone.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "rounds.h"

#define NKEY 10000

static const char policy_text[] =
    "attributes = [ \"user\" ];\n"
    "limits = {\n"
    "  one = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 40000000;\n"
    "          period_ms = 1000; burst = 40000000; };\n"
    "  a = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 40000000;\n"
    "        period_ms = 1000; burst = 40000000; };\n"
    "  b = { algorithm = \"gcra\"; scope = [ \"tenant\", \"user\" ];\n"
    "        rate = 40000000; period_ms = 1000; burst = 40000000; };\n"
    "  c = { algorithm = \"fixed_window\"; scope = [ \"tenant\" ];\n"
    "        limit = 1000000000; window_ms = 60000; };\n"
    "  d = { algorithm = \"sliding_window\"; scope = [ \"tenant\", \"route\" "
    "];\n"
    "        limit = 1000000000; window_ms = 60000; };\n"
    "  b2 = { algorithm = \"gcra\"; scope = [ \"tenant\", \"key\" ];\n"
    "        rate = 40000000; period_ms = 1000; burst = 40000000; };\n"
    "  a1 = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 40000000;\n"
    "        period_ms = 1000; burst = 40000000; };\n"
    "  d1 = { algorithm = \"sliding_window\"; scope = [ \"tenant\" ];\n"
    "         limit = 1000000000; window_ms = 60000; };\n"
    "  per_ip = { algorithm = \"fixed_window\"; scope = [ \"ip\" ];\n"
    "             limit = 1000000000; window_ms = 60000; };\n"
    "};\n"
    "penalties = { keys = { scope = [ \"tenant\", \"key\" ]; strikes = 20;\n"
    "  strike_window_ms = 60000; offense_ttl_s = 86400;\n"
    "  levels = ( { box_s = 300; }, { box_s = 3600; }, { box_s = 7200; } ); "
    "}; };\n"
    "routes = (\n"
    "  { method = \"GET\"; route = \"/file\"; penalty = \"keys\";\n"
    "    limits = ( { group = [ \"a\", \"b2\" ]; } ); },\n"
    "  { method = \"GET\"; route = \"/one\"; limits = ( \"one\" ); },\n"
    "  { method = \"GET\"; route = \"/four\"; limits = ( \"a\", \"b\", \"c\", "
    "\"d\" ); },\n"
    "  { method = \"GET\"; route = \"/same\"; limits = ( \"a\", \"a1\", \"c\", "
    "\"d1\" ); },\n"
    "  { method = \"GET\"; route = \"/split\"; limits = ( \"per_ip\", \"b\" "
    "); }\n"
    ");\n";

/* The built-in ledger flow's standard request, as it was before the
** policy became declared limits only. */
static const char builtin_text[] =
    "routes = ( { method = \"*\"; route = \"/v1/*\"; class = \"standard\"; "
    "} );\n"
    "tiers = { enterprise = { tenant = { rate = 40000000; burst = 40000000; "
    "};\n"
    "  key = { rate = 40000000; burst = 40000000; }; }; };\n";

static sluice_policy *pol, *builtin; /* builtin: NULL when it will not load */
static char tenants[NKEY][16], keys[NKEY][16], ips[NKEY][16];
static sluice_attr attrs[NKEY];
static void decide(const char *route, long i) {
  sluice_request r;
  sluice_decision d;
  int std = !strcmp(route, "/v1/things");
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.route = route;
  r.tenant_id = tenants[i % NKEY];
  r.api_key_id = keys[i % NKEY];
  r.tier = std ? "enterprise" : NULL;
  r.client_ip = ips[i % NKEY];
  r.attrs = std ? NULL : &attrs[i % NKEY];
  r.nattrs = !std;
  if (sluice_policy_decide(std ? builtin : pol, 1, &r, &d, NULL) != SLUICE_OK ||
      !d.allowed) {
    fprintf(stderr, "bench_declared: %s refused (%s)\n", route,
            sluice_name(SLUICE_NAME_OUTCOME, d.outcome));
    exit(1);
  }
}

/* Not inlined: callgrind counts from its entry (--toggle-collect). */
__attribute__((noinline)) void counted(one_fn f, long n);
__attribute__((noinline)) void counted(one_fn f, long n) {
  long i;
  for (i = 0; i < n; i++)
    f(i);
}

static void one(long i) { decide("/one", i); }
static void four(long i) { decide("/four", i); }
static void same(long i) { decide("/same", i); }
static void standard(long i) { decide("/v1/things", i); }
static void file(long i) { decide("/file", i); }
static void split(long i) { decide("/split", i); }

static one_fn by_name(const char *name) {
  static const struct {
    const char *name;
    one_fn f;
  } cases[] = {{"one", one},   {"four", four},         {"file", file},
               {"split", split}, {"standard", standard}, {"same", same}};
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!strcmp(cases[i].name, name))
      return cases[i].f;
  return NULL;
}

/* A policy of the text (written to a file: the file is what a service
** gives). */
static int open_text(const char *text, size_t len, sluice_policy **out,
                     char *err, size_t errlen) {
  char path[] = "/tmp/sluice-bench-declared-XXXXXX";
  sluice_policy_options po;
  int fd = mkstemp(path), i, rc;
  if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
    perror("bench_declared: policy file");
    exit(1);
  }
  close(fd);
  memset(&po, 0, sizeof po);
  po.config_path = path;
  po.errbuf = err;
  po.errlen = errlen;
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 7);
  rc = sluice_policy_open(&po, out);
  unlink(path);
  return rc;
}

int main(int argc, char **argv) {
  const char *sc = getenv("SLUICE_BENCH_SCALE");
  one_fn cf = NULL;
  long cn = 0;
  long scale = sc ? atol(sc) : 100, n, i;
  char err[512];
  double s[2], o[2], f[2], l[2], sp[2], bs, bo, bf, bl, bsp;
  int r;
  if (argc > 1 && (argc != 4 || strcmp(argv[1], "--count") ||
                   !(cf = by_name(argv[2])) || (cn = atol(argv[3])) < 1)) {
    fprintf(stderr, "usage: bench-declared [--count "
                    "one|four|same|file|split|standard N]\n");
    return 2;
  }
  if (scale < 1)
    scale = 1;
  n = 200000 * scale / 100;
  for (i = 0; i < NKEY; i++) {
    snprintf(tenants[i], sizeof tenants[i], "t%ld", i % 1000);
    snprintf(keys[i], sizeof keys[i], "k%ld", i);
    snprintf(ips[i], sizeof ips[i], "10.0.%ld.%ld", i / 250 % 250, i % 250);
    attrs[i].name = "user";
    attrs[i].value = keys[i];
  }
  if ((r = open_text(policy_text, sizeof policy_text - 1, &pol, err,
                     sizeof err)) != SLUICE_OK) {
    fprintf(stderr, "bench_declared: open: %s\n", err);
    return 1;
  }
  if (open_text(builtin_text, sizeof builtin_text - 1, &builtin, err,
                sizeof err) != SLUICE_OK)
    builtin = NULL; /* the library has declared limits only */
  if (cf) {
    double t0;
    if (cf == standard && !builtin) {
      fprintf(stderr, "bench_declared: no built-in flow to count\n");
      return 77;
    }
    for (i = 0; i < cn; i++)
      cf(i);
    t0 = cpu();
    counted(cf, cn);
    printf("%.1f CPU ns/decision\n", (cpu() - t0) / (double)cn);
    sluice_policy_close(pol);
    sluice_policy_close(builtin);
    return 0;
  }
  printf("declared limits on mem, one thread, CPU time, lower of two "
         "medians of %d "
         "rounds of %ld\n",
         ROUNDS, n);
  for (r = 0; r < 2; r++) {
    s[r] = builtin ? measure(standard, n) : 0;
    o[r] = measure(one, n);
    f[r] = measure(four, n);
    l[r] = measure(file, n);
    sp[r] = measure(split, n);
  }
  bsp = sp[0] < sp[1] ? sp[0] : sp[1];
  bl = l[0] < l[1] ? l[0] : l[1];
  bs = s[0] < s[1] ? s[0] : s[1];
  bo = o[0] < o[1] ? o[0] : o[1];
  bf = f[0] < f[1] ? f[0] : f[1];
  if (builtin)
    printf("  %-34s %8.0f ns/decision %10.0f /s\n", "standard (ledger flow)",
           bs, 1e9 / bs);
  printf("  %-34s %8.0f ns/decision %10.0f /s\n", "route of 1 declared limit",
         bo, 1e9 / bo);
  printf("  %-34s %8.0f ns/decision %10.0f /s\n", "route of 4 declared limits",
         bf, 1e9 / bf);
  printf("  %-34s %8.0f ns/decision %10.0f /s\n", "standard (etc/ledger.conf)",
         bl, 1e9 / bl);
  printf("  %-34s %8.0f ns/decision %10.0f /s\n", "2 limits in 2 hash-tag groups",
         bsp, 1e9 / bsp);
  printf("ratio: 4 limits / 1 limit, same run: %.2f (target 2)\n", bf / bo);
  if (builtin)
    printf("ratio: the ledger file / the built-in flow, same run: %.2f\n",
           bl / bs);
  sluice_policy_close(pol);
  sluice_policy_close(builtin);
  return 0;
}

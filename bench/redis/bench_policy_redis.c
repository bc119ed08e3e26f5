/*
** The policy over one local redis-server, in one run:
**
**  1. EVALSHA calls per policy decision, by request class and outcome,
**     from INFO commandstats (CONFIG RESETSTAT before each decision);
**  2. wall time of a standard decision through sluice_policy_decide()
**     against one EVALSHA of the spec's section-6 script
**     (tests/redis/spec_reference.lua), one connection each, one call at a
**     time, interleaved in rounds (target: at most 1.1x);
**  3. Redis server time per standard decision (usec of FCALL / EVALSHA in
**     commandstats) against the spec script's (target: no more), in the
**     same interleaved rounds.
**
** The contenders: the Lua as a library (engine=lua: FCALL on Redis 7), the
** Lua as a script (engine=script: EVALSHA, the path of servers without
** Redis Functions), and, run with the harness's --module, the sluice Redis
** module (engine=module, SLUICE.RUN in commandstats).
**
** Uses only the public API, so the same file measures an older build.
** SLUICE_BENCH_SCALE=<percent> shrinks the runs (default 100).
** SLUICE_BENCH_POLICY=<file> decides by a policy file of declared limits
** (etc/ledger.conf: a standard GET is GET /v1/accounts, its tenant and key
** limits the group of the file's limits `tenant` and `key`) instead of the
** built-in endpoint classes; the store-calls table then lists the
** standard rows only.
**
** `--one spec|lua|script|module N [K]` runs one contender alone, for
** bench/redis/callgrind_policy.py: N decisions over K keys (100 by
** default; the records made; a tenant rate of 1 a second keeps every
** record live however slow the server runs), "measure" on stdout and a
** line awaited on stdin (the driver zeroes the server's counters), then N
** more over the same keys, "done".
*/
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice.h"

static redisContext *rc_;
static sluice_policy *pol, *pol_lua, *pol_scr, *pol_mod;
static char sha[41];
static char tag[48];
static const char *policy_file; /* SLUICE_BENCH_POLICY; NULL: etc/ledger.conf */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "bench_policy_redis: %s\n", what);
  exit(1);
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *b;
  long n;
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* Store calls (EVALSHA of a script, or the module's SLUICE.RUN) and their
** usec since the last CONFIG RESETSTAT. */
static void evalsha_stats(long *calls, double *usec) {
  static const char *const cmds[] = {"cmdstat_evalsha:", "cmdstat_fcall:",
                                     "cmdstat_sluice.run:"};
  redisReply *r = redisCommand(rc_, "INFO commandstats");
  size_t i;
  *calls = 0;
  *usec = 0;
  if (!r || r->type != REDIS_REPLY_STRING || !r->str)
    die("INFO commandstats");
  for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    const char *p = strstr(r->str, cmds[i]);
    long c = 0;
    double u = 0;
    if (p && sscanf(p + strlen(cmds[i]), "calls=%ld,usec=%lf", &c, &u) == 2) {
      *calls += c;
      *usec += u;
    }
  }
  freeReplyObject(r);
}

/* The server's CPU time so far (INFO cpu: user + system, seconds), in
** usec: what a decision costs Redis around the command too (reading and
** parsing it, the reply, the socket), as the gateway benchmark counts. */
static double server_cpu(void) {
  redisReply *r = redisCommand(rc_, "INFO cpu");
  const char *u, *y;
  double cu = 0, cs = 0;
  if (!r || r->type != REDIS_REPLY_STRING || !r->str)
    die("INFO cpu");
  u = strstr(r->str, "used_cpu_user:");
  y = strstr(r->str, "used_cpu_sys:");
  if (!u || !y || sscanf(u + 14, "%lf", &cu) != 1 ||
      sscanf(y + 13, "%lf", &cs) != 1)
    die("INFO cpu: no used_cpu_user / used_cpu_sys");
  freeReplyObject(r);
  return 1e6 * (cu + cs);
}

static void resetstat(void) {
  redisReply *r = redisCommand(rc_, "CONFIG RESETSTAT");
  if (!r)
    die("CONFIG RESETSTAT");
  freeReplyObject(r);
}

static sluice_decision decide(const sluice_request *q) {
  sluice_decision d;
  int rc = sluice_policy_decide(pol, 1, q, &d, NULL);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "decide: %s (%s)\n", sluice_strerror(rc),
            d.invalid_field ? d.invalid_field : "");
    die("decide");
  }
  if (d.flags & SLUICE_DECISION_DEGRADED)
    die("the store failed (degraded decision)");
  return d;
}

/* A request of etc/ledger.conf: method and route pick its route. */
static sluice_request rq(const char *tenant, const char *key, const char *tier,
                         const char *method, const char *route) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.tenant_id = tenant;
  r.api_key_id = key;
  r.tier = tier;
  r.method = method;
  r.route = route;
  r.client_ip = "10.1.2.3";
  return r;
}

#define STD "GET", "/v1/ledgers/main/entries"
#define RECONCILE "POST", "/v1/ledgers/reconcile"
#define EXPORT "GET", "/v1/reports/audit-export"
#define SIGN_IN "POST", "/v1/auth/token"

/* One decision of a class, EVALSHA calls counted around it alone. */
static long calls_of(const char *what, const sluice_request *q, int outcome,
                     sluice_decision *out) {
  long calls;
  double usec;
  sluice_decision d;
  resetstat();
  d = decide(q);
  evalsha_stats(&calls, &usec);
  if (outcome >= 0 && d.outcome != outcome) {
    fprintf(stderr, "%s: got %s\n", what,
            sluice_name(SLUICE_NAME_OUTCOME, d.outcome));
    die("unexpected outcome");
  }
  printf("  %-36s %-12s %ld\n", what,
         sluice_name(SLUICE_NAME_OUTCOME, d.outcome), calls);
  if (out)
    *out = d;
  return calls;
}

static void calls_table(void) {
  char t[80], k[80];
  sluice_request std, rec, rec2, exp, auth_ok, auth_bad;
  sluice_attr l1 = {"ledger", "L1"}, l2 = {"ledger", "L2"};
  sluice_attr range = {"export_range_s", "0"};
  sluice_attr ok[2] = {{"subject", NULL}, {"result", "ok"}};
  sluice_attr bad[2] = {{"subject", NULL}, {"result", "bad_secret"}};
  sluice_decision d, held, held_exp;
  long before, calls;
  double usec;
  int i;
  snprintf(t, sizeof t, "calls-%s", tag);
  snprintf(k, sizeof k, "key-%s", tag);
  std = rq(t, k, "sandbox", STD);
  printf("store calls per decision (INFO commandstats):\n");
  calls_of("standard", &std, SLUICE_OUTCOME_ALLOW, NULL);
  for (i = 0; i < 100000; i++) {
    d = decide(&std);
    if (!d.allowed)
      break;
  }
  calls_of("standard", &std, SLUICE_OUTCOME_THROTTLED, &d);
  calls_of("standard, strike", &std, SLUICE_OUTCOME_THROTTLED, NULL);
  for (i = 0; i < 1000 && d.outcome != SLUICE_OUTCOME_BOXED; i++)
    d = decide(&std);
  calls_of("standard", &std, SLUICE_OUTCOME_BOXED, NULL);
  if (policy_file)
    return;

  rec = rq(t, "k2", "sandbox", RECONCILE);
  rec.attrs = &l1;
  rec.nattrs = 1;
  rec2 = rec;
  rec2.attrs = &l2;
  calls_of("reconcile", &rec, SLUICE_OUTCOME_ALLOW, &held);
  calls_of("reconcile, same ledger", &rec, SLUICE_OUTCOME_CONFLICT, NULL);
  calls_of("reconcile, other ledger", &rec2, SLUICE_OUTCOME_CONCURRENCY, NULL);
  resetstat();
  if (sluice_policy_release(pol, &rec,
                            &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                           .lease_id = held.lease_id}) !=
      SLUICE_OK)
    die("release");
  evalsha_stats(&calls, &usec);
  printf("  %-36s %-12s %ld\n", "lease release (reconcile)", "-", calls);

  exp = rq(t, "k3", "sandbox", EXPORT);
  exp.attrs = &range; /* no dates given */
  exp.nattrs = 1;
  for (i = 0; i < 2; i++) {
    calls_of("export", &exp, SLUICE_OUTCOME_ALLOW, &held_exp);
    if (sluice_policy_release(pol, &exp,
                              &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                             .lease_id = held_exp.lease_id}) !=
        SLUICE_OK)
      die("release export");
  }
  /* the hourly cap is a declared limit: its refusal is a throttle */
  calls_of("export (sandbox: 2 an hour)", &exp, SLUICE_OUTCOME_THROTTLED,
           NULL);

  ok[0].value = bad[0].value = t;
  auth_ok = rq(NULL, NULL, NULL, SIGN_IN);
  auth_ok.attrs = ok;
  auth_ok.nattrs = 2;
  auth_bad = auth_ok;
  auth_bad.attrs = bad;
  calls_of("auth success", &auth_ok, SLUICE_OUTCOME_ALLOW, NULL);
  calls_of("auth failure", &auth_bad, SLUICE_OUTCOME_ALLOW, NULL);
  before = 0;
  for (i = 0; i < 50; i++) {
    d = decide(&auth_bad);
    if (!d.allowed)
      break;
  }
  calls_of("auth failure", &auth_bad, SLUICE_OUTCOME_BOXED, NULL);
  (void)before;
}

/* One spec-script EVALSHA for one of 1000 keys, cycled as sluice_run_one()
** cycles its keys, so both find their records live (the spec's bucket
** hash lives 2 s, capacity / rate * 2). */
static void spec_call(long id) {
  char k[4][96];
  const char *argv[16];
  size_t lens[16];
  static const char *args[9] = {"1000000", "1000000", "1", "60", "20",
                                "300",     "3600",    "86400", "86400"};
  static const char *fmt[4] = {"rl:%s:tb:%ld", "pb:%s:box:%ld",
                               "pb:%s:strikes:%ld", "pb:%s:off:%ld"};
  redisReply *r;
  int i, n = 0;
  argv[n] = "EVALSHA";
  lens[n++] = 7;
  argv[n] = sha;
  lens[n++] = 40;
  argv[n] = "4";
  lens[n++] = 1;
  for (i = 0; i < 4; i++) {
    snprintf(k[i], sizeof k[i], fmt[i], tag, id % 1000);
    argv[n] = k[i];
    lens[n++] = strlen(k[i]);
  }
  for (i = 0; i < 9; i++) {
    argv[n] = args[i];
    lens[n++] = strlen(args[i]);
  }
  r = redisCommandArgv(rc_, n, argv, lens);
  if (!r || r->type != REDIS_REPLY_ARRAY)
    die("spec EVALSHA");
  freeReplyObject(r);
}

static char keynames[1000][24];

/* Each engine on a tenant of its own: a value the other engine wrote
** would cost the module a conversion on its first write. */
static void sluice_run_one(long id) {
  sluice_request q =
      rq(pol == pol_mod   ? "bench-tenant-module"
         : pol == pol_scr ? "bench-tenant-script"
                          : "bench-tenant",
         keynames[id % 1000], "enterprise", STD);
  sluice_decision d = decide(&q);
  if (!d.allowed)
    die("a standard decision was refused (raise the enterprise burst)");
}

static sluice_policy *open_policy(const char *nodes, const char *engine,
                                  const sluice_policy_config *cfg) {
  static char uri[3][512], err[256];
  static int nth;
  sluice_policy_options po;
  sluice_limiter_options lo;
  sluice_policy *p;
  int i;
  memset(&lo, 0, sizeof lo);
  snprintf(uri[nth], sizeof uri[nth], "redis:nodes=%s;timeout_ms=2000;engine=%s",
           nodes, engine);
  lo.store = uri[nth++];
  memset(&po, 0, sizeof po);
  po.limiter_options = &lo;
  po.config = cfg;
  po.errbuf = err;
  po.errlen = sizeof err;
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 3);
  if (sluice_policy_open(&po, &p) != SLUICE_OK)
    die(err);
  return p;
}

/* The median of n values (sorted in place). */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int64_t run(void (*f)(long), long n, long base) {
  int64_t t0 = now_ns();
  long i;
  for (i = 0; i < n; i++)
    f(base + i);
  return now_ns() - t0;
}

/* One contender, paused between its warm-up and its measured calls. */
static int run_one(const char *who, long n, long keys) {
  char line[16];
  void (*f)(long) = sluice_run_one;
  long i;
  if (strcmp(who, "spec") == 0)
    f = spec_call;
  else if (strcmp(who, "lua") == 0)
    pol = pol_lua;
  else if (strcmp(who, "script") == 0)
    pol = pol_scr;
  else if (strcmp(who, "module") == 0 && pol_mod)
    pol = pol_mod;
  else
    die("--one: spec, lua, script or module (with SLUICE_REDIS_MODULE)");
  if (keys < 1 || keys > 1000)
    die("--one: 1 to 1000 keys");
  for (i = 0; i < n; i++)
    f(i % keys);
  printf("measure\n");
  fflush(stdout);
  if (!fgets(line, sizeof line, stdin))
    die("--one: no go-ahead on stdin");
  for (i = 0; i < n; i++)
    f(i % keys);
  printf("done\n");
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *sc = getenv("SLUICE_BENCH_SCALE");
  long scale = sc ? atol(sc) : 100, n, i;
  struct timeval tv = {5, 0};
  sluice_policy_config *cfg;
  redisReply *r;
  char *script;
  size_t slen;
  int64_t tspec = 0, tsl = 0, tscr = 0, tmod = 0;
  int round;
  long csl = 0, cscr = 0, cmod = 0;
  double uspec = 0, usl = 0, uscr = 0, usm = 0;
  /* Each round's ratios to the spec script's (lua, script, module; wall,
  ** server): their medians shrug off a round another process slowed. */
  enum { ROUNDS = 20 };
  double rw[3][ROUNDS], rsv[3][ROUNDS];
  double cpu[4] = {0, 0, 0, 0}; /* the server's CPU usec, by contender */

  if (!nodes)
    die("SLUICE_REDIS_NODES unset: run through tests/redis/harness.py");
  if (scale < 1)
    scale = 1;
  n = 20000 * scale / 100;
  snprintf(tag, sizeof tag, "%ld", (long)time(NULL));
  rc_ = redisConnectWithTimeout("127.0.0.1", atoi(strchr(nodes, ':') + 1), tv);
  if (!rc_ || rc_->err)
    die("connect");
  script = slurp(SPEC_SCRIPT, &slen);
  if (!script)
    die("cannot read " SPEC_SCRIPT);
  r = redisCommand(rc_, "SCRIPT LOAD %b", script, slen);
  if (!r || r->type != REDIS_REPLY_STRING)
    die("SCRIPT LOAD");
  snprintf(sha, sizeof sha, "%s", r->str);
  freeReplyObject(r);
  free(script);
  for (i = 0; i < 1000; i++)
    snprintf(keynames[i], sizeof keynames[i], "k%ld", i);

  /* Rates low enough that a key's records stay live between its visits
  ** (every 1000th decision: the TAT stays ahead of now, so the records do
  ** not expire and each decision reads and rewrites live records, as the
  ** spec script does its hash), bursts that never run out in a run. */
  /* Counted under valgrind a call takes milliseconds: a point a second
  ** keeps the tenant's bucket ahead of the clock there too (a bucket that
  ** expires between calls costs its deletion, which a busy tenant's does
  ** not). */
  policy_file = getenv("SLUICE_BENCH_POLICY");
  {
    const char *file = policy_file ? policy_file : SLUICE_LEDGER_CONF;
    char err[256];
    const char *rate = argc >= 4 ? "1" : "1000";
    char lim[96];
    snprintf(lim, sizeof lim, "{ rate = %s; burst = 1000000; }", rate);
    if (sluice_policy_config_new(&cfg, file, err, sizeof err) != SLUICE_OK ||
        sluice_policy_config_set(cfg, "limits.tenant.params.enterprise", lim,
                                 err, sizeof err) != SLUICE_OK ||
        sluice_policy_config_set(cfg, "limits.key.params.enterprise",
                                 "{ rate = 1; burst = 100000; }", err,
                                 sizeof err) != SLUICE_OK)
      die(err);
  }
  pol_lua = open_policy(nodes, "lua", cfg);
  pol_scr = open_policy(nodes, "script", cfg);
  if (getenv("SLUICE_REDIS_MODULE"))
    pol_mod = open_policy(nodes, "module", cfg);
  sluice_policy_config_free(cfg);
  pol = pol_lua;
  if (argc >= 4 && strcmp(argv[1], "--one") == 0)
    return run_one(argv[2], atol(argv[3]), argc > 4 ? atol(argv[4]) : 100);

  printf("policy over one local redis-server (%s), %s\n", nodes,
         policy_file ? policy_file : SLUICE_LEDGER_CONF);
  calls_table();

  /* Interleaved rounds: the spec script, then each engine, each round's
  ** wall time and server time (commandstats, reset before each) summed,
  ** and their ratios to the spec script's in the same round kept. */
  /* Who goes first turns with the rounds (0 the spec script, 1 lua,
  ** 2 script, 3 module): the call after another contender's meets the
  ** caches that one left. */
  for (round = 0; round < ROUNDS; round++) {
    static sluice_policy **const pols[4] = {NULL, &pol_lua, &pol_scr,
                                            &pol_mod};
    long base = round * (n / ROUNDS), m = n / ROUNDS;
    int64_t t[4] = {0, 0, 0, 0};
    double us[4] = {0, 0, 0, 0};
    long cs[4] = {0, 0, 0, 0};
    int k = pol_mod ? 4 : 3, c;
    for (c = 0; c < k; c++) {
      int w = (round + c) % k;
      double cpu0;
      if (w > 0)
        pol = *pols[w];
      resetstat();
      cpu0 = server_cpu();
      t[w] = run(w ? sluice_run_one : spec_call, m, base);
      cpu[w] += server_cpu() - cpu0;
      evalsha_stats(&cs[w], &us[w]);
    }
    tspec += t[0];
    uspec += us[0];
    tsl += t[1];
    usl += us[1];
    csl += cs[1];
    tscr += t[2];
    uscr += us[2];
    cscr += cs[2];
    tmod += t[3];
    usm += us[3];
    cmod += cs[3];
    for (c = 0; c + 1 < k; c++) {
      rw[c][round] = (double)t[c + 1] / (double)t[0];
      rsv[c][round] = us[c + 1] / us[0];
    }
  }
  n = n / ROUNDS * ROUNDS;
  printf("wall time, one call at a time, %ld decisions each, interleaved:\n",
         n);
  printf("  spec section-6 script EVALSHA     %8.0f ns/decision %8.0f /s\n",
         (double)tspec / (double)n, 1e9 * (double)n / (double)tspec);
  printf("  sluice standard, lua (FCALL)      %8.0f ns/decision %8.0f /s\n",
         (double)tsl / (double)n, 1e9 * (double)n / (double)tsl);
  printf("  ratio sluice lua / spec           %8.2f (target <= 1.00)\n",
         (double)tsl / (double)tspec);
  printf("  sluice standard, script (EVALSHA) %8.0f ns/decision %8.0f /s\n",
         (double)tscr / (double)n, 1e9 * (double)n / (double)tscr);
  printf("  ratio sluice script / spec        %8.2f\n",
         (double)tscr / (double)tspec);
  if (pol_mod) {
    printf("  sluice standard, module           %8.0f ns/decision %8.0f /s\n",
           (double)tmod / (double)n, 1e9 * (double)n / (double)tmod);
    printf("  ratio sluice module / spec        %8.2f\n",
           (double)tmod / (double)tspec);
  }
  uspec /= (double)n;
  printf("Redis server time (commandstats usec of EVALSHA / FCALL / "
         "SLUICE.RUN), same rounds:\n");
  printf("  spec section-6 script             %8.2f usec/decision\n", uspec);
  printf("  sluice standard, lua (FCALL)      %8.2f usec/decision "
         "(%.2f calls each)\n", usl / (double)n, (double)csl / (double)n);
  printf("  ratio sluice lua / spec           %8.2f (target <= 1.00)\n",
         usl / (double)n / uspec);
  printf("  sluice standard, script (EVALSHA) %8.2f usec/decision "
         "(%.2f calls each)\n", uscr / (double)n, (double)cscr / (double)n);
  printf("  ratio sluice script / spec        %8.2f\n",
         uscr / (double)n / uspec);
  if (pol_mod) {
    printf("  sluice standard, module           %8.2f usec/decision "
           "(%.2f SLUICE.RUN each)\n", usm / (double)n,
           (double)cmod / (double)n);
    printf("  ratio sluice module / spec        %8.2f (target <= 0.35)\n",
           usm / (double)n / uspec);
    sluice_policy_close(pol_mod);
  }
  printf("Redis CPU per decision (INFO cpu, user + system: the command "
         "and around it), same rounds:\n");
  printf("  spec section-6 script             %8.2f usec/decision\n",
         cpu[0] / (double)n);
  printf("  ratio sluice lua / spec           %8.2f\n", cpu[1] / cpu[0]);
  printf("  ratio sluice script / spec        %8.2f\n", cpu[2] / cpu[0]);
  if (pol_mod)
    printf("  ratio sluice module / spec        %8.2f\n", cpu[3] / cpu[0]);
  printf("median of the %d rounds' ratios to the spec script's, wall / "
         "server:\n", ROUNDS);
  printf("  lua (FCALL)                       %8.2f / %.2f\n",
         median(rw[0], ROUNDS), median(rsv[0], ROUNDS));
  printf("  script (EVALSHA)                  %8.2f / %.2f\n",
         median(rw[1], ROUNDS), median(rsv[1], ROUNDS));
  if (pol_mod)
    printf("  module                            %8.2f / %.2f\n",
           median(rw[2], ROUNDS), median(rsv[2], ROUNDS));
  sluice_policy_close(pol_scr);
  sluice_policy_close(pol_lua);
  redisFree(rc_);
  return 0;
}

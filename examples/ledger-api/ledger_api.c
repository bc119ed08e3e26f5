/*
** ledger-api: a small payment-ledger HTTP service with sluice enforcing
** everything the spec asks of the API tier: tenant and key buckets with
** endpoint costs, RateLimit headers, Retry-After, problem+json, the penalty
** box, concurrency leases for reconcile and export, the per-ledger mutex
** (409 on a second reconcile), the export cap and the auth lockout, all
** as etc/ledger.conf declares them: each request is named to the policy by
** its method, route and that file's attributes (ledger_http.c).
**
** Process model (nginx-style prefork): the master binds one listening
** socket on 127.0.0.1, creates the shared state, forks N workers and waits.
** Each worker runs libmicrohttpd on the inherited socket and opens its own
** limiter and policy on the shared store:
**   shm    (default) a memfd created by the master, inherited by the workers
**          ("shm:fd=N"); or "shm:name=/x" to share it with `sluice inspect`
**   lmdb   "lmdb:path=DIR", opened by every worker after fork
**   redis  "redis:nodes=127.0.0.1:7000"
** Jobs (reconcile, export) and ledger balances live in a MAP_SHARED mapping
** made before fork, so any worker answers for any job.  The master finishes
** jobs when their time is up and releases their leases; it forwards SIGTERM
** to the workers, waits for them and exits 0.
**
** Answers: every decision goes through the sluice_http renderer, so
** headers and problem bodies are the library's.
*/
#include "ledger_api.h"
#include "opt_int.h"
#include <sys/random.h>


server S;

static const api_key demo_keys[] = {
    {"sk_sandbox_demo", "demo-sandbox", "sandbox", "cli_sandbox",
     "secret-sandbox"},
    {"sk_growth_acme_1", "acme", "growth", "cli_acme_1", "secret-acme-1"},
    {"sk_growth_acme_2", "acme", "growth", "cli_acme_2", "secret-acme-2"},
    {"sk_enterprise_bank", "bigbank", "enterprise", "cli_bank",
     "secret-bank"},
};

static void usage(FILE *f) {
  fprintf(f,
      "usage: ledger-api [--port N] [--workers N] [--store STORE]\n"
      "                  [--config FILE] [--keys FILE] [--secret-file FILE]\n"
      "                  [--job-ms N] [--shadow] [--trust-forwarded]\n"
      "                  [--trusted-proxies LIST] [--header-form legacy|sf|both]\n"
      "                  [--idem-slots N] [--idem-ttl-s N] [--per-ip N]\n"
      "                  [--idem-tenant-share P]\n"
      "                  [--head-timeout-ms N] [--body-timeout-ms N]\n"
      "                  [--degraded-store URI|off] [--deny-cache URI|off]\n"
      "                  [--webhook EVENT=URL]... [--alert FORMAT=URL[,K=V]]...\n"
      "                  [--alert-contacts FILE] [--alert-spool PATH]\n"
      "                  [--alert-allow LIST] [--alert-proxy URL]\n"
      "                  [--nft [--nft-table NAME] [--nft-prefix N]\n"
      "                   [--nft-state FILE]]\n\n"
      "Serves the spec's ledger API on 127.0.0.1 with sluice enforcing it.\n"
      "  --port N         TCP port; 0 (default) picks a free one.  The first\n"
      "                   line on stdout is `listening 127.0.0.1:PORT`\n"
      "  --workers N      prefork worker processes (default 2, 1..64)\n"
      "  --store STORE    shm (default: a memfd shared by the workers),\n"
      "                   shm:name=/NAME, lmdb:path=DIR, redis:nodes=H:P\n"
      "  --config FILE    policy file (default: the default policy, the\n"
      "                   spec's ledger API, etc/ledger.conf; the service\n"
      "                   sends its routes and attributes: ledger,\n"
      "                   export_range_s, subject, result)\n"
      "  --keys FILE      API keys, CSV: api_key,tenant,tier,client_id,"
      "client_secret\n"
      "                   (default: four demo keys, see docs/cli.md)\n"
      "  --secret-file F  16-byte scope-id secret as 32 hex digits (default:\n"
      "                   random per run; give one to use `sluice inspect`)\n"
      "  --job-ms N       how long a reconcile or export job runs (2000)\n"
      "  --shadow         decide and report everything, enforce nothing\n"
      "  --trust-forwarded  take the client IP from X-Forwarded-For: the\n"
      "                   rightmost address not in --trusted-proxies\n"
      "  --trusted-proxies LIST  addresses and networks (ADDR/BITS), comma-\n"
      "                   separated, whose X-Forwarded-For entries are\n"
      "                   believed (default 127.0.0.1,::1)\n"
      "  --header-form F  RateLimit header generation (default legacy)\n"
      "  --idem-slots N   Idempotency-Key records kept (default 65536); a\n"
      "                   POST that cannot be recorded is refused (503)\n"
      "  --idem-ttl-s N   how long a record is kept (default 86400)\n"
      "  --idem-tenant-share P  percent of --idem-slots one tenant's records\n"
      "                   may hold (default 25); its POST beyond is refused\n"
      "                   (503), the other tenants' are not\n"
      "  --per-ip N       connections per client address and worker (64);\n"
      "                   with --trust-forwarded, requests in progress per\n"
      "                   client address for those through a trusted proxy\n"
      "  --head-timeout-ms N  time for a request's headers (10000)\n"
      "  --body-timeout-ms N  time for its body and answer (30000)\n"
      "  --degraded-store U  the limiter every worker charges while the\n"
      "                   store fails, shm:name=/NAME[;capacity=N], so the\n"
      "                   host admits degraded_percent whatever --workers is\n"
      "                   (default: the --config's host.degraded_store, else\n"
      "                   a segment of this run, removed at exit; off: one\n"
      "                   per worker)\n"
      "  --deny-cache U   the boxes every worker sees, shm:name=/NAME[;slots=N]\n"
      "                   (default as --degraded-store; off: one per worker)\n"
      "  --webhook EVENT=URL  post policy events of that type (alert,\n"
      "                   edge_deny, ip_ban, suspend, page, ...) as JSON\n"
      "  --alert FORMAT=URL[,K=V...]  send alerts as slack, pagerduty\n"
      "                   (routing_key=KEY), email (smtp://; from=ADDR,\n"
      "                   to=ADDR) or json; events=alert+page, name=LABEL\n"
      "  --alert-contacts FILE  tenants' contacts: TENANT tech|owner ADDRS\n"
      "  --alert-spool PATH  keep undelivered alerts in PATH.N (worker N)\n"
      "  --alert-allow LIST  loopback,private,link_local destinations\n"
      "  --alert-proxy URL  post through this proxy (env proxies ignored)\n"
      "  --nft            put client addresses boxed at level 2 or above\n"
      "                   into the kernel's nftables sets (docs/nft.md;\n"
      "                   needs CAP_NET_ADMIN); the table, sets and drop\n"
      "                   rule are made if missing\n"
      "  --nft-table NAME the table (default sluice: sets deny4, deny6)\n"
      "  --nft-prefix N   IPv6 addresses are banned by this prefix (the\n"
      "                   policy's ipv6_prefix)\n"
      "  --nft-state FILE each worker's list of banned addresses, in\n"
      "                   FILE.<worker>, so a restart reconciles them\n\n"
      "SIGTERM or SIGINT: the master stops the workers and exits 0.\n"
      "exit codes: 0 clean shutdown, 2 usage error, 3 system failure\n");
}

static int load_keys(const char *path) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int lineno = 0;
  if (!f) {
    fprintf(stderr, "ledger-api: --keys %s: %s\n", path, strerror(errno));
    return -1;
  }
  S.nkeys = 0;
  while (fgets(line, sizeof line, f)) {
    char *fld[5], *p = line;
    int n = 0;
    lineno++;
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0] || line[0] == '#')
      continue;
    while (n < 5) {
      fld[n++] = p;
      p = strchr(p, ',');
      if (!p)
        break;
      *p++ = 0;
    }
    if (n != 5 || p) {
      fprintf(stderr, "ledger-api: --keys %s:%d: expected 5 fields: "
                      "api_key,tenant,tier,client_id,client_secret\n",
              path, lineno);
      fclose(f);
      return -1;
    }
    if (S.nkeys == MAX_KEYS) {
      fprintf(stderr, "ledger-api: --keys %s: more than %d keys\n", path,
              MAX_KEYS);
      fclose(f);
      return -1;
    }
    {
      api_key *k = &S.keys[S.nkeys++];
      int i;
      for (i = 0; i < 5; i++)
        if (!fld[i][0] || strlen(fld[i]) > (i == 2 ? SLUICE_POLICY_NAME_MAX
                                                   : ID_MAX)) {
          fprintf(stderr, "ledger-api: --keys %s:%d: field %d is empty or "
                          "too long\n", path, lineno, i + 1);
          fclose(f);
          return -1;
        }
      snprintf(k->key, sizeof k->key, "%s", fld[0]);
      snprintf(k->tenant, sizeof k->tenant, "%s", fld[1]);
      snprintf(k->tier, sizeof k->tier, "%s", fld[2]);
      snprintf(k->client_id, sizeof k->client_id, "%s", fld[3]);
      snprintf(k->client_secret, sizeof k->client_secret, "%s", fld[4]);
      k->line = lineno;
    }
  }
  fclose(f);
  if (!S.nkeys) {
    fprintf(stderr, "ledger-api: --keys %s: no keys\n", path);
    return -1;
  }
  return 0;
}

/* Whether the policy refuses a tier: a standard request of it decided on
** a scratch in-memory store, as a worker would (the library says which
** tiers it takes; a declared policy's `by = "tier"` sets choose numbers,
** one they do not list takes the limits' own). */
static int tier_refused(sluice_policy *pol, const char *tier) {
  sluice_request rq;
  sluice_decision d;
  memset(&rq, 0, sizeof rq);
  rq.tenant_id = "probe";
  rq.api_key_id = "probe";
  rq.tier = tier;
  rq.method = "GET";
  rq.route = "/v1/ledgers/probe";
  return sluice_policy_decide(pol, 1, &rq, &d, NULL) != SLUICE_OK &&
         d.invalid_field && !strcmp(d.invalid_field, "tier");
}

/* Every key must be usable as written: its tier one the policy takes
** (else each of its requests is refused 400, the client blamed), the key
** not shaped like an access token, key and client id given once (else one
** of the two lines is silently dead). */
static int check_keys(const sluice_policy_config *cfg, const char *path) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_policy *pol;
  int i, j;
  memset(&lo, 0, sizeof lo);
  lo.store = "mem";
  memset(&po, 0, sizeof po);
  po.limiter_options = &lo;
  po.config = cfg;
  memcpy(po.secret, S.secret, sizeof po.secret);
  if (sluice_policy_open(&po, &pol) != SLUICE_OK) {
    fprintf(stderr, "ledger-api: --config: the policy does not open\n");
    return -1;
  }
  for (i = 0; i < S.nkeys; i++) {
    const api_key *k = &S.keys[i];
    char why[160] = "";
    if (!k->tier[0] || tier_refused(pol, k->tier))
      snprintf(why, sizeof why, "tier '%s' is not one the policy (--config) "
               "takes", k->tier);
    else if (!strncmp(k->key, "at_", 3))
      snprintf(why, sizeof why, "api_key starts with at_ (access tokens)");
    for (j = 0; !why[0] && j < i; j++)
      if (!strcmp(S.keys[j].key, k->key) ||
          !strcmp(S.keys[j].client_id, k->client_id))
        snprintf(why, sizeof why, "api_key or client_id of line %d again",
                 S.keys[j].line);
    if (why[0]) {
      fprintf(stderr, "ledger-api: --keys %s:%d: %s\n",
              path ? path : "(demo keys)", k->line, why);
      sluice_policy_close(pol);
      return -1;
    }
  }
  sluice_policy_close(pol);
  return 0;
}

/* ------------------------------------------------------- processes --- */

/* This worker's index: its alert spool, its --nft-state list. */
static int worker_slot;

/* The policy's events: the webhook sink and the nftables sink, each when
** configured. */
static void on_event(void *ud, const sluice_event *ev) {
  (void)ud;
  if (S.webhook)
    sluice_webhook_on_event(S.webhook, ev);
  if (S.nft_sink)
    sluice_nft_on_event(S.nft_sink, ev);
}

/* --nft: this worker's sink (after fork: its thread is this process's). */
static int open_nft(void) {
  sluice_nft_options o = S.nft_opts;
  sluice_policy_config *cfg;
  char err[256] = "", v[16];
  int rc;
  /* Without --nft-prefix: the policy's, so that a set element is what the
  ** policy counts as one client. */
  if (!o.ipv6_prefix &&
      sluice_policy_config_new(&cfg, S.config_path, NULL, 0) == SLUICE_OK) {
    if (sluice_policy_config_get(cfg, "client_ip.ipv6_prefix", v,
                                 sizeof v) == SLUICE_OK)
      o.ipv6_prefix = atoi(v);
    sluice_policy_config_free(cfg);
  }
  if (o.state_path) {
    snprintf(S.nft_state, sizeof S.nft_state, "%s.%d", o.state_path,
             worker_slot);
    o.state_path = S.nft_state;
  }
  o.flags = SLUICE_NFT_CREATE;
  o.errbuf = err;
  o.errlen = sizeof err;
  rc = sluice_nft_open(&o, &S.nft_sink);
  if (rc == SLUICE_OK)
    return 0;
  fprintf(stderr, "ledger-api worker %d: --nft: %s%s%s\n", (int)getpid(),
          sluice_strerror(rc), err[0] ? ": " : "", err);
  return -1;
}

static int open_policy(const char *who) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_http_options ho;
  char err[256];
  int rc;
  memset(&lo, 0, sizeof lo);
  lo.store = "lazy";
  lo.backend = &S.lazy; /* S.store_uri, opened when it answers */
  lo.flags = SLUICE_OPEN_CREATE;
  rc = sluice_limiter_open(&lo, &S.lim, err, sizeof err);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "ledger-api %s: --store %s: %s%s%s\n", who, S.store,
            sluice_strerror(rc), err[0] ? ": " : "", err);
    return -1;
  }
  memset(&po, 0, sizeof po);
  po.limiter = S.lim;
  po.config_path = S.config_path;
  memcpy(po.secret, S.secret, 16);
  po.flags = S.shadow ? SLUICE_POLICY_SHADOW : 0;
  po.degraded_store = S.degraded_store;
  po.deny_cache = S.deny_cache;
  if (S.webhook || S.nft_sink)
    po.on_event = on_event;
  po.errbuf = err;
  po.errlen = sizeof err;
  rc = sluice_policy_open(&po, &S.pol);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "ledger-api %s: --config %s: %s\n", who,
            S.config_path ? S.config_path : "(defaults)", err);
    return -1;
  }
  memset(&ho, 0, sizeof ho);
  ho.problem_base = PROBLEM_BASE;
  ho.header_form = S.header_form;
  ho.flags = SLUICE_HTTP_DATE_HEADER;
  rc = sluice_http_open(&ho, &S.http);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "ledger-api %s: http: %s\n", who, sluice_strerror(rc));
    return -1;
  }
  /* The addresses a previous run banned: the store says which still are. */
  if (S.nft_sink)
    sluice_nft_reconcile(S.nft_sink, S.pol);
  return 0;
}

static void close_policy(void) {
  sluice_nft_close(S.nft_sink); /* before the policy its reconcile reads */
  S.nft_sink = NULL;
  sluice_http_close(S.http);
  sluice_policy_close(S.pol);
  sluice_limiter_close(S.lim);
  S.http = NULL;
  S.pol = NULL;
  S.lim = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  fprintf(stderr, "ledger-api worker %d: ", (int)getpid());
  vfprintf(stderr, fmt, ap);
}


static int worker_main(void) {
  struct MHD_Daemon *d;
  char err[256] = "";
  sigset_t set;
  int sig, rc;
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1)
    return EX_RUNTIME;
  /* After fork: the sink's thread belongs to this process. */
  if (ledger_alerts_wanted() &&
      (rc = ledger_alerts_open(worker_slot, err, sizeof err)) != 0) {
    fprintf(stderr, "ledger-api worker %d: alerts: %s: %s\n", (int)getpid(),
            sluice_strerror(rc), err);
    return EX_RUNTIME;
  }
  if (S.nft && open_nft() != 0) {
    sluice_webhook_close(S.webhook);
    return EX_RUNTIME;
  }
  if (open_policy("worker") != 0) {
    close_policy();
    sluice_webhook_close(S.webhook);
    return EX_RUNTIME;
  }
  if (!(S.guard = conn_guard_start(S.head_ms, S.body_ms)) ||
      (S.trust_forwarded &&
       !(S.cap = ip_cap_new((unsigned)S.per_ip, &S.proxies)))) {
    conn_guard_stop(S.guard);
    close_policy();
    return EX_RUNTIME;
  }
  /* epoll: no FD_SETSIZE ceiling on connections.  Per-address limit: one
  ** client cannot take every connection (behind trusted proxies ip_cap
  ** counts, libmicrohttpd's limit would count the proxy).  The idle
  ** timeout stays as a backstop; the guard's deadlines do not restart on
  ** every byte. */
  d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0,
                       S.cap ? ip_cap_accept : NULL, S.cap, on_request, NULL,
                       MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                       MHD_OPTION_LISTEN_SOCKET, S.listen_fd,
                       MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
                       MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                       MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
                       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                       MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
                       MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                       (unsigned)(S.cap ? 0 : S.per_ip),
                       MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
                       MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "ledger-api worker %d: cannot start the HTTP server\n",
            (int)getpid());
    conn_guard_stop(S.guard);
    ip_cap_free(S.cap);
    close_policy();
    return EX_RUNTIME;
  }
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigwait(&set, &sig);
  MHD_stop_daemon(d);
  conn_guard_stop(S.guard);
  ip_cap_free(S.cap);
  close_policy();
  sluice_webhook_close(S.webhook);
  return EX_OK;
}

static pid_t spawn_worker(int slot) {
  pid_t pid;
  worker_slot = slot;
  pid = fork();
  if (pid == 0) {
    int rc = worker_main();
    fflush(stderr);
    _exit(rc);
  }
  return pid;
}

/* The master finishes jobs whose time is up and releases their leases. */
static void finish_jobs(void) {
  int64_t now = wall_ns();
  size_t i;
  for (i = 0; i < NJOBS; i++) {
    job *j = &S.sh->jobs[i];
    sluice_request rq;
    sluice_attr a;
    if (atomic_load(&j->state) != JOB_RUNNING || atomic_load(&j->seq) == 0 ||
        j->done_ns > now)
      continue;
    job_request(j, &rq, &a);
    if (j->lease_id)
      sluice_policy_release(
          S.pol, &rq,
          &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = j->lease_id});
    atomic_store(&j->state, JOB_DONE);
  }
}

/* The degraded limiter and the deny cache are the host's, as in the nginx
** module: without them a host of N workers admits N times the degraded
** share of a key during an outage, and a box one worker saw is unknown to
** the others.  Neither named by an option nor by the --config's host
** group: a segment of this run (the master's pid in its name, so two
** servers on one host do not share), made when the master opens its
** policy before the workers exist, and removed when it stops. */
static void host_segments_remove(void) {
  int i;
  for (i = 0; i < 2; i++)
    if (S.host_seg_own[i][0])
      shm_unlink(S.host_seg_own[i]);
}

static void host_segments(const sluice_policy_config *cfg) {
  static const char *const what[2] = {"degraded", "deny"};
  static const char *const conf[2] = {"host.degraded_store",
                                      "host.deny_cache"};
  const char **opt[2] = {&S.degraded_store, &S.deny_cache};
  static char uri[2][80];
  char v[160];
  int i;
  for (i = 0; i < 2; i++) {
    if (*opt[i] || (sluice_policy_config_get(cfg, conf[i], v, sizeof v) ==
                        SLUICE_OK &&
                    v[0]))
      continue;
    snprintf(S.host_seg_own[i], sizeof S.host_seg_own[i],
             "/ledger-api-%d-%s", (int)getpid(), what[i]);
    shm_unlink(S.host_seg_own[i]); /* a crashed run's, with our pid */
    snprintf(uri[i], sizeof uri[i], "shm:name=%s", S.host_seg_own[i]);
    *opt[i] = uri[i];
  }
  /* Whichever way the master ends (workers leave by _exit) */
  atexit(host_segments_remove);
}

/* --degraded-store and --deny-cache as the policy will read them, checked
** before anything is made: a typo is a usage error, named once. */
static int check_segments(const sluice_policy_config *cfg) {
  sluice_policy_options po;
  char err[256] = "";
  int rc;
  memset(&po, 0, sizeof po);
  po.config = cfg;
  memcpy(po.secret, S.secret, 16);
  po.degraded_store = S.degraded_store;
  po.deny_cache = S.deny_cache;
  po.errbuf = err;
  po.errlen = sizeof err;
  if ((rc = sluice_policy_check(&po)) == SLUICE_OK)
    return 0;
  fprintf(stderr, "ledger-api: %s (%s)\n", err, sluice_strerror(rc));
  return -1;
}

/* --nft-prefix N */
static int nft_prefix_arg(const char *arg) {
  int64_t v;
  if (ex_opt_int("ledger-api", "--nft-prefix", arg, 1, 128, &v))
    return -1;
  S.nft_opts.ipv6_prefix = (int)v;
  return 0;
}

/* --webhook EVENT=URL: EVENT as sluice_name() spells it. */
static int add_webhook(const char *arg) {
  const char *eq = strchr(arg, '=');
  int t;
  for (t = 1; eq && t < SLUICE_EVENT__COUNT; t++) {
    const char *name = sluice_name(SLUICE_NAME_EVENT, t);
    if (strlen(name) == (size_t)(eq - arg) &&
        !strncmp(arg, name, (size_t)(eq - arg)) &&
        (!strncmp(eq + 1, "http://", 7) || !strncmp(eq + 1, "https://", 8))) {
      S.hooks.url[t] = eq + 1;
      S.nhooks++;
      return 0;
    }
  }
  fprintf(stderr, "ledger-api: --webhook: expected EVENT=http(s)://..., "
                  "EVENT one of alert, edge_deny, ip_ban, suspend, page, "
                  "box_trip, stuffing, ...; got '%s'\n", arg);
  return -1;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {
      {"port", required_argument, 0, 'p'},
      {"workers", required_argument, 0, 'w'},
      {"store", required_argument, 0, 's'},
      {"config", required_argument, 0, 'c'},
      {"keys", required_argument, 0, 'k'},
      {"secret-file", required_argument, 0, 'S'},
      {"job-ms", required_argument, 0, 'j'},
      {"shadow", no_argument, 0, 'H'},
      {"trust-forwarded", no_argument, 0, 'F'},
      {"header-form", required_argument, 0, 'f'},
      {"trusted-proxies", required_argument, 0, 'T'},
      {"idem-slots", required_argument, 0, 'I'},
      {"idem-ttl-s", required_argument, 0, 'L'},
      {"idem-tenant-share", required_argument, 0, 'R'},
      {"per-ip", required_argument, 0, 'P'},
      {"head-timeout-ms", required_argument, 0, 'D'},
      {"body-timeout-ms", required_argument, 0, 'B'},
      {"webhook", required_argument, 0, 'W'},
      {"degraded-store", required_argument, 0, 'G'},
      {"deny-cache", required_argument, 0, 'N'},
      {"alert", required_argument, 0, 'A'},
      {"alert-contacts", required_argument, 0, 'A'},
      {"alert-spool", required_argument, 0, 'A'},
      {"alert-allow", required_argument, 0, 'A'},
      {"alert-proxy", required_argument, 0, 'A'},
      {"nft", no_argument, 0, 'Y'},
      {"nft-table", required_argument, 0, 'n'},
      {"nft-prefix", required_argument, 0, 'x'},
      {"nft-state", required_argument, 0, 'z'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *keys_path = NULL, *secret_path = NULL;
  const char *proxies = "127.0.0.1,::1";
  pid_t workers[MAX_WORKERS];
  int64_t respawn_at[MAX_WORKERS], backoff_ms = 0;
  struct rlimit nofile;
  char perr[160];
  struct sockaddr_in sa;
  socklen_t salen = sizeof sa;
  sigset_t set;
  int64_t v;
  int c, idx = 0, i, one = 1, running = 1, exit_code = EX_OK;

  memset(&S, 0, sizeof S);
  S.store = "shm";
  S.nworkers = 2;
  S.job_ms = 2000;
  S.shm_fd = -1;
  S.idem_slots = 65536;
  S.idem_ttl_s = 86400;
  S.idem_share = 25;
  S.per_ip = 64;
  S.head_ms = 10000;
  S.body_ms = 30000;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
    switch (c) {
    case 'p':
      if (ex_opt_int("ledger-api", "--port", optarg, 0, 65535, &v))
        return EX_USAGE_;
      S.port = (int)v;
      break;
    case 'w':
      if (ex_opt_int("ledger-api", "--workers", optarg, 1, MAX_WORKERS, &v))
        return EX_USAGE_;
      S.nworkers = (int)v;
      break;
    case 's':
      S.store = optarg;
      break;
    case 'c':
      S.config_path = optarg;
      break;
    case 'k':
      keys_path = optarg;
      break;
    case 'S':
      secret_path = optarg;
      break;
    case 'j':
      if (ex_opt_int("ledger-api", "--job-ms", optarg, 1, 86400000, &v))
        return EX_USAGE_;
      S.job_ms = v;
      break;
    case 'H':
      S.shadow = 1;
      break;
    case 'F':
      S.trust_forwarded = 1;
      break;
    case 'f':
      if (!strcmp(optarg, "legacy"))
        S.header_form = SLUICE_HTTP_FORM_LEGACY;
      else if (!strcmp(optarg, "sf"))
        S.header_form = SLUICE_HTTP_FORM_SF;
      else if (!strcmp(optarg, "both"))
        S.header_form = SLUICE_HTTP_FORM_BOTH;
      else {
        fprintf(stderr, "ledger-api: --header-form: expected legacy, sf or "
                        "both, got '%s'\n", optarg);
        return EX_USAGE_;
      }
      break;
    case 'T':
      proxies = optarg;
      break;
    case 'I':
      if (ex_opt_int("ledger-api", "--idem-slots", optarg, 1, 1 << 24,
                     &S.idem_slots))
        return EX_USAGE_;
      break;
    case 'L':
      if (ex_opt_int("ledger-api", "--idem-ttl-s", optarg, 1, 30 * 86400,
                     &S.idem_ttl_s))
        return EX_USAGE_;
      break;
    case 'R':
      if (ex_opt_int("ledger-api", "--idem-tenant-share", optarg, 1, 100,
                     &S.idem_share))
        return EX_USAGE_;
      break;
    case 'P':
      if (ex_opt_int("ledger-api", "--per-ip", optarg, 1, MAX_CONNECTIONS,
                     &S.per_ip))
        return EX_USAGE_;
      break;
    case 'D':
      if (ex_opt_int("ledger-api", "--head-timeout-ms", optarg, 100, 600000,
                     &S.head_ms))
        return EX_USAGE_;
      break;
    case 'B':
      if (ex_opt_int("ledger-api", "--body-timeout-ms", optarg, 100, 600000,
                     &S.body_ms))
        return EX_USAGE_;
      break;
    case 'W':
      if (add_webhook(optarg))
        return EX_USAGE_;
      break;
    case 'G':
      S.degraded_store = strcmp(optarg, "off") ? optarg : "";
      break;
    case 'N':
      S.deny_cache = strcmp(optarg, "off") ? optarg : "";
      break;
    case 'A':
      if (ledger_alert_option(opts[idx].name, optarg))
        return EX_USAGE_;
      break;
    case 'Y': S.nft = 1; break;
    case 'n': S.nft_opts.table = optarg; break;
    case 'x':
      if (nft_prefix_arg(optarg))
        return EX_USAGE_;
      break;
    case 'z':
      if (!optarg[0] || strlen(optarg) + 8 > sizeof S.nft_state) {
        fprintf(stderr, "ledger-api: --nft-state: a file name\n");
        return EX_USAGE_;
      }
      S.nft_opts.state_path = optarg;
      break;
    case 'h':
      usage(stdout);
      return EX_OK;
    default:
      fprintf(stderr, "ledger-api: unknown or incomplete option '%s'\n",
              argv[optind - 1]);
      usage(stderr);
      return EX_USAGE_;
    }
  }
  if (!S.nft && (S.nft_opts.table || S.nft_opts.ipv6_prefix ||
                 S.nft_opts.state_path)) {
    fprintf(stderr, "ledger-api: --nft-table, --nft-prefix and --nft-state "
                    "go with --nft\n");
    return EX_USAGE_;
  }
  if (S.nft && sluice_nft_schema(&S.nft_opts, NULL, 0, NULL) == SLUICE_EINVAL) {
    fprintf(stderr, "ledger-api: --nft-table: a letter, then letters, digits "
                    "or '_' (at most %d)\n", SLUICE_NFT_NAME_MAX);
    return EX_USAGE_;
  }
  if (optind != argc) {
    fprintf(stderr, "ledger-api: unexpected argument '%s'\n", argv[optind]);
    return EX_USAGE_;
  }
  if (realip_parse(&S.proxies, proxies, perr, sizeof perr) != 0) {
    fprintf(stderr, "ledger-api: --trusted-proxies: %s\n", perr);
    return EX_USAGE_;
  }
  if (ledger_alerts_check(perr, sizeof perr) != 0) {
    fprintf(stderr, "ledger-api: alerts: %s\n", perr);
    return EX_USAGE_;
  }
  /* epoll takes as many connections as there are descriptors */
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
      nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (keys_path) {
    if (load_keys(keys_path))
      return EX_USAGE_;
  } else {
    S.nkeys = (int)(sizeof demo_keys / sizeof demo_keys[0]);
    memcpy(S.keys, demo_keys, sizeof demo_keys);
  }
  if (secret_path) {
    char err[128];
    if (ex_read_secret_file(secret_path, S.secret, err, sizeof err)) {
      fprintf(stderr, "ledger-api: --secret-file %s: %s\n", secret_path, err);
      return EX_USAGE_;
    }
  } else if (getrandom(S.secret, 16, 0) != 16) {
    fprintf(stderr, "ledger-api: no OS randomness for the secret\n");
    return EX_RUNTIME;
  }
  if (getrandom(S.hash_key, 16, 0) != 16)
    return EX_RUNTIME;
  /* Check the configuration now, so a typo is reported once, by name;
  ** and the keys against it. */
  {
    sluice_policy_config *cfg;
    char err[256] = "";
    int rc = sluice_policy_config_new(&cfg, S.config_path, err, sizeof err);
    if (rc != SLUICE_OK) {
      fprintf(stderr, "ledger-api: --config %s: %s\n",
              S.config_path ? S.config_path : "(defaults)", err);
      return EX_USAGE_;
    }
    rc = check_keys(cfg, keys_path);
    if (!rc) {
      host_segments(cfg);
      rc = check_segments(cfg);
    }
    sluice_policy_config_free(cfg);
    if (rc)
      return EX_USAGE_;
  }
  /* One tenant's Idempotency-Key records hold at most its share of the
  ** table, so a tenant posting at its allowed rate cannot fill it for the
  ** others (every tenant's POST would be refused 503). */
  S.idem_tenant_max = S.idem_slots * S.idem_share / 100;
  if (S.idem_tenant_max < 1)
    S.idem_tenant_max = 1;
  for (i = 0; i < S.nkeys; i++) {
    int j = 0;
    while (strcmp(S.keys[j].tenant, S.keys[i].tenant))
      j++;
    S.keys[i].tenant_ix = j;
  }
  if (!strcmp(S.store, "shm")) {
    S.shm_fd = memfd_create("ledger-api-sluice", 0);
    if (S.shm_fd < 0) {
      fprintf(stderr, "ledger-api: memfd_create: %s\n", strerror(errno));
      return EX_RUNTIME;
    }
    snprintf(S.store_uri, sizeof S.store_uri,
             "shm:fd=%d;capacity=262144;create=1", S.shm_fd);
  } else if (!strncmp(S.store, "shm:", 4) || !strncmp(S.store, "lmdb:", 5) ||
             !strncmp(S.store, "redis:", 6) || !strncmp(S.store, "rediss:", 7) ||
             !strcmp(S.store, "mem")) {
    if (!strcmp(S.store, "mem") && S.nworkers > 1) {
      fprintf(stderr, "ledger-api: --store mem: workers would not share "
                      "state; use --workers 1 or a shared store\n");
      return EX_USAGE_;
    }
    snprintf(S.store_uri, sizeof S.store_uri, "%s", S.store);
  } else {
    fprintf(stderr, "ledger-api: --store: expected shm, shm:..., lmdb:..., "
                    "redis:..., rediss:... or mem, got '%s'\n", S.store);
    return EX_USAGE_;
  }
  S.shared_size = sizeof(shared) + (size_t)S.idem_slots * sizeof(idem_slot);
  S.sh = mmap(NULL, S.shared_size, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (S.sh == MAP_FAILED) {
    fprintf(stderr, "ledger-api: mmap: %s\n", strerror(errno));
    return EX_RUNTIME;
  }
  S.sh->nidem = (size_t)S.idem_slots;
  if (shared_lock_init() != 0) {
    fprintf(stderr, "ledger-api: cannot make a process-shared lock\n");
    return EX_RUNTIME;
  }
  lazy_store_backend(&S.lazy, S.store_uri);
  S.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  if (S.listen_fd < 0) {
    fprintf(stderr, "ledger-api: socket: %s\n", strerror(errno));
    return EX_RUNTIME;
  }
  setsockopt(S.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)S.port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(S.listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(S.listen_fd, 256) != 0 ||
      getsockname(S.listen_fd, (struct sockaddr *)&sa, &salen) != 0) {
    fprintf(stderr, "ledger-api: --port %d: %s\n", S.port, strerror(errno));
    return S.port ? EX_USAGE_ : EX_RUNTIME;
  }
  /* A store that cannot be opened as given fails here, before any worker
  ** exists; one that is only down (Redis restarting) is opened later, by
  ** every process on its own, and decisions are degraded until then. */
  {
    sluice_limiter_options lo;
    sluice_limiter *probe = NULL;
    char err[256] = "";
    int rc;
    memset(&lo, 0, sizeof lo);
    lo.store = S.store_uri;
    lo.flags = SLUICE_OPEN_CREATE;
    rc = sluice_limiter_open(&lo, &probe, err, sizeof err);
    sluice_limiter_close(probe);
    if (rc != SLUICE_OK) {
      /* Only Redis comes back by itself.  shm and lmdb are on this host:
      ** one that does not open now (a missing directory) never will, and
      ** serving degraded would fail reconcile, export and auth for good. */
      int bad_uri = rc == SLUICE_EINVAL || rc == SLUICE_ENOTSUP;
      int later = !bad_uri && !strncmp(S.store_uri, "redis", 5);
      fprintf(stderr, "ledger-api: --store %s: %s%s%s%s\n", S.store,
              sluice_strerror(rc), err[0] ? ": " : "", err,
              later ? "; serving degraded until it opens" : "");
      if (!later)
        return bad_uri ? EX_USAGE_ : EX_RUNTIME;
    }
  }
  /* The master's own store handle (job completion).  lmdb handles must
  ** not cross fork(): the master reopens after forking. */
  if (open_policy("master") != 0)
    return EX_RUNTIME;
  if (!strncmp(S.store_uri, "lmdb:", 5))
    close_policy();
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, NULL);
  fflush(stdout);
  for (i = 0; i < S.nworkers; i++) {
    respawn_at[i] = 0;
    workers[i] = spawn_worker(i);
    if (workers[i] < 0) {
      fprintf(stderr, "ledger-api: fork: %s\n", strerror(errno));
      return EX_RUNTIME;
    }
  }
  if (!S.pol && open_policy("master") != 0)
    return EX_RUNTIME;
  printf("listening 127.0.0.1:%d\n", ntohs(sa.sin_port));
  fflush(stdout);
  fprintf(stderr, "ledger-api: %d workers, store %s%s\n", S.nworkers, S.store,
          S.shadow ? ", shadow mode" : "");
  for (i = 0; i < 2; i++)
    if (S.host_seg_own[i][0])
      fprintf(stderr, "ledger-api: %s of this run: shm:name=%s\n",
              i ? "deny cache" : "degraded limiter", S.host_seg_own[i]);
  while (running) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    siginfo_t si;
    int sig = sigtimedwait(&set, &si, &ts);
    if (sig == SIGTERM || sig == SIGINT) {
      running = 0;
    } else if (sig == SIGCHLD) {
      pid_t pid;
      int st;
      while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        for (i = 0; i < S.nworkers; i++)
          if (workers[i] == pid) {
            /* Never stop serving for one worker: the others go on, and
            ** a worker that failed to start is retried with a backoff
            ** (100 ms doubling to 30 s, reset by any other exit). */
            workers[i] = 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) == EX_RUNTIME)
              backoff_ms = backoff_ms ? backoff_ms * 2 : 100;
            else
              backoff_ms = 0;
            if (backoff_ms > 30000)
              backoff_ms = 30000;
            respawn_at[i] = wall_ns() + backoff_ms * MS_NS;
            fprintf(stderr, "ledger-api: worker %d exited (status %d); "
                            "another in %" PRId64 " ms\n", (int)pid, st,
                    backoff_ms);
          }
    }
    for (i = 0; i < S.nworkers; i++)
      if (workers[i] == 0 && wall_ns() >= respawn_at[i] &&
          (workers[i] = spawn_worker(i)) < 0) {
        workers[i] = 0; /* fork failed: try again in a second */
        respawn_at[i] = wall_ns() + 1000 * MS_NS;
      }
    finish_jobs();
  }
  for (i = 0; i < S.nworkers; i++)
    if (workers[i] > 0)
      kill(workers[i], SIGTERM);
  for (i = 0; i < S.nworkers; i++)
    if (workers[i] > 0)
      waitpid(workers[i], NULL, 0);
  close_policy();
  close(S.listen_fd);
  if (S.shm_fd >= 0)
    close(S.shm_fd);
  fprintf(stderr, "ledger-api: stopped\n");
  return exit_code;
}

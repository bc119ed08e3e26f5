/*
** sluice replay --policy CONFIG LOG: the spec's shadow-mode rollout, offline.
** Every line of a request log goes through the whole policy (shadow mode:
** decided and recorded, nothing enforced) at the log's own time, and the
** report says what enforcement would have done: per tier the log names,
** how many requests would have been throttled, boxed, suspended, refused a
** lease; and which keys (addresses, other scopes) would have been boxed,
** at which level, when.
**
** Log format (CSV, no quoting, '#' comments): a header line naming its
** columns (t_ms, method, route, any declared attribute, cost, status,
** settle:ATTR: policy_replay_run.c), or the ledger API's legacy layout,
** headerless or under its own names:
**   t_ms,tenant,key,tier,method,route,ip[,subject,outcome]
** t_ms non-decreasing.  Sign-in lines (POST /v1/auth/token) need ip,
** subject and outcome (ok, unknown_client, bad_secret or pending) and may
** leave tenant, key and tier empty: they are etc/ledger.conf's subject and
** result attributes.  For a reconcile the 8th field, when given, is its
** ledger attribute (default: the route).  The leases a request got are
** held for --job-ms of log time (default 0: released right after the
** decision, since a log does not say how long the jobs ran).
**
** Speed: a file is mapped (stdin read in 1 MiB blocks) and split in place;
** with --threads the lines are partitioned by tenant, each partition in
** log order on its own thread with its own policy and store; --decisions
** output is formatted by hand.  With --batch N, consecutive lines of one
** t_ms are decided N at a time by sluice_policy_decide() (the same
** decisions); a line whose route lists a lease ends its batch, since its
** lease is released (or held) before the next line is decided.
*/
#include <getopt.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_cmds.h"
#include "policy_replay.h"

static void pr_usage(FILE *f) {
  fprintf(
      f,
      "usage: sluice replay --policy CONFIG [--decisions] [--job-ms N]\n"
      "                     [--backend STORE] [--enforce] [--batch N] "
      "LOG|-\n\n"
      "Replays a request log through the whole policy in shadow mode (the\n"
      "spec's rollout: decide and record everything, enforce nothing) and\n"
      "reports what would have been throttled per tier and which scopes "
      "would\nhave been boxed.  CONFIG is a policy file or `default` for "
      "the default\npolicy (the spec's ledger API, etc/ledger.conf).\n\n"
      "LOG: CSV whose header line names its columns:\n"
      "  t_ms,method,route (required, t_ms first), and any of tenant, key,\n"
      "  tier, ip, cost (the request's cost, 1..; empty: the policy's),\n"
      "  status (what the service answered, 100..599: checked and printed;\n"
      "  the policy has no call to take it back yet) and the attributes the\n"
      "  policy declares (`attributes`: etc/ledger.conf's ledger,\n"
      "  export_range_s, subject, result); an empty field is not given;\n"
      "  settle:ATTR columns give the real value of an attribute\n"
      "  the route's costs read (tokens used), settled for an admitted\n"
      "  request right after its decision (sluice_policy_settle()).  Such a\n"
      "  log runs on one thread.\n"
      "Without that header (or with the legacy names as header), the ledger\n"
      "API's legacy layout: t_ms,tenant,key,tier,method,route,ip[,subject,"
      "outcome]\n"
      "  sign-in lines: POST /v1/auth/token with ip, subject and outcome\n"
      "  (ok|unknown_client|bad_secret|pending), given as the subject and\n"
      "  result attributes; tenant, key, tier may be empty\n"
      "  reconcile lines: the 8th field is the ledger attribute (default: "
      "the route)\n"
      "A first line starting with t_ms or time that names other columns\n"
      "than these is read as a header: a column it cannot place is an "
      "error.\n\n"
      "  --decisions   also print one line per request; a named log:\n"
      "                t_ms,method,route,outcome,status,limit,remaining,\n"
      "                retry_after_ms[,reported_status] (limit: the binding\n"
      "                limit's name; remaining its)\n"
      "                the legacy layout:\n"
      "                t_ms,tenant,key,tier,method,route,outcome,status,"
      "remaining,\n"
      "                retry_after_ms,level,strikes_remaining\n"
      "  --job-ms N    hold the leases a request got N ms of log time (0)\n"
      "  --backend S   store string (default mem); the scope-id secret is\n"
      "                16 bytes of 0x3c (for sluice inspect)\n"
      "  --enforce     decide as the configuration says: enforce what it\n"
      "                does not leave in shadow (shadow, shadow_features:\n"
      "                the staged rollout)\n"
      "  --batch N     decide up to N (1-16, default 1) consecutive lines of\n"
      "                one t_ms in one sluice_policy_decide() call (the\n"
      "                same decisions as one by one; a line whose route\n"
      "                lists a lease ends its batch, so its lease is\n"
      "                released first)\n\n"
      "The report: per tier the log names what would have happened, `passed`\n"
      "(refusals served because their feature is in shadow) and\n"
      "`# not enforced:`, each tier's features in shadow; for a named log,\n"
      "per declared limit the requests it ran on (met), refused and bound.\n\n"
      "Malformed lines are reported on stderr with their line number and the\n"
      "field at fault, and skipped.\n"
      "exit codes: 0 ok, 1 malformed lines, 2 usage error (a header that\n"
      "cannot be read), 3 store or system failure\n");
}


static int pr_open(preplay *r, const char *config, const char *backend,
                   int enforce, char *err, size_t errlen, int *rc_out) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  int rc = sluice_clock_manual(0, &r->clock);
  memset(&lo, 0, sizeof lo);
  lo.store = backend;
  lo.clock = r->clock;
  /* TESTCLOCK: a store with its own clock (redis) decides at the log's
  ** time too, not at its wall clock. */
  lo.flags = SLUICE_OPEN_CREATE | SLUICE_OPEN_TESTCLOCK;
  err[0] = 0;
  if (rc == SLUICE_OK)
    rc = sluice_limiter_open(&lo, &r->lim, err, errlen);
  if (rc != SLUICE_OK) {
    *rc_out = rc;
    return 1; /* the store */
  }
  memset(&po, 0, sizeof po);
  po.limiter = r->lim;
  po.config_path = strcmp(config, "default") ? config : NULL;
  memset(po.secret, 0x3c, sizeof po.secret);
  po.on_event = preplay_on_event;
  po.userdata = r;
  po.flags = enforce ? 0 : SLUICE_POLICY_SHADOW;
  po.errbuf = err;
  po.errlen = errlen;
  rc = sluice_policy_open(&po, &r->pol);
  *rc_out = rc;
  return rc == SLUICE_OK ? 0 : 2; /* the config */
}

/* A replay into a store a tool reads afterwards (sluice inspect) at the
** wall clock: records written at log times long past have expired there,
** and inspect would find none.  Said once, so the log can be rewritten at
** the wall clock's time. */
static void stale_note(part *parts, int np, const char *backend, FILE *f) {
  struct timespec now;
  int64_t last = 0, wall;
  int i;
  if (!strncmp(backend, "mem", 3))
    return;
  for (i = 0; i < np; i++)
    if (parts[i].r.last_t > last)
      last = parts[i].r.last_t;
  clock_gettime(CLOCK_REALTIME, &now);
  wall = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
  last *= 1000000; /* t_ms */
  if (wall - last > (int64_t)60 * 1000000000)
    fprintf(f, "# note: the log ends %.0f s before the wall clock; a tool "
               "reading this store now (sluice inspect) reads at the wall "
               "clock, where the records the log wrote may have expired "
               "(write t_ms at the wall clock's time to read them back)\n",
            (double)(wall - last) / 1e9);
}

static void pr_close(preplay *r) {
  size_t i;
  sluice_policy_close(r->pol);
  sluice_limiter_close(r->lim);
  sluice_clock_free(r->clock);
  for (i = 0; i < r->bx_cap; i++)
    free(r->bx[i].name);
  free(r->bx);
  for (i = 0; i < r->lh_n; i++)
    free(r->lh[(r->lh_head + i) % r->lh_cap].line);
  free(r->lh);
  free(r->seen);
}


static int line_part(const char *s, size_t n, int np) {
  const char *c1 = memchr(s, ',', n), *c2;
  uint64_t h = UINT64_C(1469598103934665603);
  if (np == 1 || !c1)
    return 0;
  c2 = memchr(c1 + 1, ',', n - (size_t)(c1 + 1 - s));
  if (!c2 || c2 == c1 + 1)
    return 0;
  for (c1++; c1 < c2; c1++)
    h = (h ^ (unsigned char)*c1) * UINT64_C(1099511628211);
  return (int)((h >> 17) % (uint64_t)np);
}

static void *part_run(void *arg) {
  part *pt = arg;
  const char *d = pt->data, *end = d + pt->len, *nl;
  long lineno = 0;
  pt->rc = CLI_OK;
  while (d < end) {
    size_t n;
    nl = memchr(d, '\n', (size_t)(end - d));
    n = nl ? (size_t)(nl - d) : (size_t)(end - d);
    lineno++;
    if (line_part(d, n, pt->np) == pt->idx &&
        preplay_line(&pt->r, d, n, lineno) != CLI_OK) {
      pt->rc = CLI_RUNTIME;
      break;
    }
    d += n + 1;
  }
  if (pt->rc == CLI_OK && preplay_flush(&pt->r) != CLI_OK)
    pt->rc = CLI_RUNTIME;
  if (pt->r.fatal)
    pt->rc = pt->r.fatal;
  return NULL;
}

int cli_policy_replay(int argc, char **argv) {
  static const struct option opts[] = {
      {"policy", required_argument, 0, 'P'},
      {"decisions", no_argument, 0, 'd'},
      {"job-ms", required_argument, 0, 'j'},
      {"backend", required_argument, 0, 'B'},
      {"enforce", no_argument, 0, 'e'},
      {"threads", required_argument, 0, 't'},
      {"boxes", required_argument, 0, 'b'},
      {"batch", required_argument, 0, 'N'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *config = NULL, *backend = "mem";
  char err[256];
  int c, rc = CLI_OK, enforce = 0, decisions = 0, np = 0, boxes_max = 50,
         i, which, orc, batch_max = 1;
  int64_t v, job_ns = 0;
  struct timespec w0, w1;
  part *parts = NULL;
  const char *path;
  void *map = NULL;
  size_t maplen = 0;
  FILE *in = NULL;

  /* --help wins wherever it stands: `--policy --help` must not read
  ** "--help" as the CONFIG. */
  for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      pr_usage(stdout);
      return CLI_OK;
    }
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'P':
      config = optarg;
      break;
    case 'd':
      decisions = 1;
      break;
    case 'j':
      if (cli_parse_i64(optarg, strlen(optarg), &v) || v < 0 ||
          v > INT64_C(86400000) * 365) {
        fprintf(stderr, "sluice replay: --job-ms: expected milliseconds "
                        "from 0 to 31536000000, got '%s'\n", optarg);
        return CLI_USAGE;
      }
      job_ns = v * MS_NS;
      break;
    case 'B':
      if (cli_store_arg("replay", "--backend", optarg))
        return CLI_USAGE;
      backend = optarg;
      break;
    case 'e':
      enforce = 1;
      break;
    case 't':
      if (cli_parse_i64(optarg, strlen(optarg), &v) || v < 1 || v > 64) {
        fprintf(stderr, "sluice replay: --threads: expected 1 to 64, got "
                        "'%s'\n", optarg);
        return CLI_USAGE;
      }
      np = (int)v;
      break;
    case 'b':
      if (cli_parse_i64(optarg, strlen(optarg), &v) || v < 0 ||
          v > 100000000) {
        fprintf(stderr, "sluice replay: --boxes: expected a count, got "
                        "'%s'\n", optarg);
        return CLI_USAGE;
      }
      boxes_max = (int)v;
      break;
    case 'N':
      if (cli_parse_i64(optarg, strlen(optarg), &v) || v < 1 ||
          v > BATCH_MAX) {
        fprintf(stderr, "sluice replay: --batch: expected 1 to %d, got "
                        "'%s'\n", BATCH_MAX, optarg);
        return CLI_USAGE;
      }
      batch_max = (int)v;
      break;
    case 'h':
      pr_usage(stdout);
      return CLI_OK;
    default:
      fprintf(stderr, "sluice replay: unknown or incomplete option '%s'\n",
              argv[optind - 1]);
      pr_usage(stderr);
      return CLI_USAGE;
    }
  }
  if (!config) {
    fprintf(stderr, "sluice replay: --policy CONFIG is required here\n");
    return CLI_USAGE;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "sluice replay: expected exactly one LOG (or -)\n");
    return CLI_USAGE;
  }
  path = argv[optind];
  /* Threads need a mapped file; stdin, --decisions (one ordered output)
  ** and stores other than mem (shared state) run on one thread. */
  if (np == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    np = cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus;
  }
  if (decisions || !strcmp(path, "-") || strncmp(backend, "mem", 3) != 0)
    np = 1;
  if (!(in = cli_open_input("replay", path)))
    return CLI_USAGE;
  if (in != stdin) {
    /* A regular file is mapped (threads split it); anything else, a pipe
    ** or a file that cannot be mapped, is read as a stream. */
    struct stat stt;
    if (fstat(fileno(in), &stt) == 0 && S_ISREG(stt.st_mode) &&
        stt.st_size > 0) {
      maplen = (size_t)stt.st_size;
      map = mmap(NULL, maplen, PROT_READ, MAP_PRIVATE, fileno(in), 0);
      if (map == MAP_FAILED) {
        map = NULL;
      } else {
        madvise(map, maplen, MADV_SEQUENTIAL);
        fclose(in);
        in = NULL;
      }
    }
    if (!map) {
      maplen = 0;
      np = 1;
    }
  }
  /* A header naming its columns: one thread (its scopes are not known to
  ** follow the tenant column the partitions split on). */
  if (map && np > 1) {
    const char *d = map, *end = d + maplen, *nl;
    while (d < end) {
      size_t n;
      nl = memchr(d, '\n', (size_t)(end - d));
      n = nl ? (size_t)(nl - d) : (size_t)(end - d);
      if (n > 0 && d[0] != '#' && !(n == 1 && d[0] == '\r')) {
        if (preplay_named_header(d, n))
          np = 1;
        break;
      }
      d += n + 1;
    }
  }
  parts = calloc((size_t)np, sizeof *parts);
  if (!parts) {
    rc = CLI_RUNTIME;
    goto done;
  }
  for (i = 0; i < np; i++) {
    parts[i].idx = i;
    parts[i].np = np;
    parts[i].data = map;
    parts[i].len = maplen;
    parts[i].r.decisions = decisions;
    parts[i].r.job_ns = job_ns;
    parts[i].r.batch_max = batch_max;
    parts[i].r.out.f = stdout;
    preplay_layout_legacy(&parts[i].r.cl);
    which = pr_open(&parts[i].r, config, backend, enforce, err, sizeof err,
                    &orc);
    if (which == 1) {
      fprintf(stderr, "sluice replay: --backend %s: %s%s%s\n", backend,
              sluice_strerror(orc), *err ? ": " : "", err);
      rc = orc == SLUICE_EINVAL ? CLI_USAGE : CLI_RUNTIME;
      np = i + 1;
      goto done;
    }
    if (which == 2) {
      fprintf(stderr, "sluice replay: --policy %s: %s\n", config,
              err[0] ? err : sluice_strerror(orc));
      rc = orc == SLUICE_EIO ? CLI_USAGE : CLI_BADINPUT;
      np = i + 1;
      goto done;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &w0);
  if (!map) {
    rc = preplay_stream(&parts[0].r, in);
  } else if (np == 1) {
    part_run(&parts[0]);
    rc = parts[0].rc;
  } else {
    for (i = 0; i < np; i++)
      if (pthread_create(&parts[i].th, NULL, part_run, &parts[i]) != 0) {
        fprintf(stderr, "sluice replay: cannot start a thread\n");
        exit(CLI_RUNTIME);
      }
    for (i = 0; i < np; i++) {
      pthread_join(parts[i].th, NULL);
      if (parts[i].rc != CLI_OK)
        rc = parts[i].rc;
    }
  }
  for (i = 0; i < np; i++)
    if (parts[i].r.lh_n)
      preplay_release_due(&parts[i].r, 0, 1);
  if (decisions && rc == CLI_OK) /* a log with no request still has one */
    preplay_decisions_header(&parts[0].r);
  clock_gettime(CLOCK_MONOTONIC, &w1);
  if (cli_out_flush(&parts[0].r.out) != 0 && rc == CLI_OK)
    rc = CLI_RUNTIME;
  if (rc == CLI_OK) {
    long bad = 0;
    preplay_report(parts, np, decisions ? stderr : stdout,
              (double)(w1.tv_sec - w0.tv_sec) +
                  (double)(w1.tv_nsec - w0.tv_nsec) / 1e9,
              !enforce, boxes_max);
    for (i = 0; i < np; i++)
      bad += parts[i].r.bad;
    if (bad > 0)
      rc = CLI_BADINPUT;
    stale_note(parts, np, backend, decisions ? stderr : stdout);
  }
done:
  if (parts)
    for (i = 0; i < np; i++)
      pr_close(&parts[i].r);
  free(parts);
  if (map)
    munmap(map, maplen);
  if (in && in != stdin)
    fclose(in);
  return rc;
}

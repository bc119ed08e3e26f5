/*
** sluice inspect | release | lift: support tools against a live store (shm,
** lmdb, redis) that a service shares with its workers.
**
**   inspect  reads a scope's records without changing them: the tenant and
**            key buckets, strikes, offenses, box level and time left, the
**            Retry-After notice, concurrency lease holders, the ledger lock
**            and the hourly export count.
**   release  ends a box early (levels 1 and 2, the enterprise level 3 box),
**            keeping the offense count;
**   lift     lifts a level 3 suspension after review.
** Both go through sluice_policy_release_box() / _lift_suspension() and write
** an audit record (one JSON line, appended and fsync'ed) naming who, why,
** the scope and the level.
**
** Scope ids are keyed hashes: these tools need the service's secret
** (--secret-file, 32 hex digits) and its policy configuration (--config,
** for the tier parameters) to find and read the records.
*/
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "cli_cmds.h"
#include "secret_file.h"
#include "sluice.h"

#define S_NS INT64_C(1000000000)

typedef struct admin {
  const char *cmd;
  const char *store, *config, *secret_path, *audit, *who, *why;
  const char *tenant, *key, *tier, *ip, *subject, *ledger;
  int scope;
  uint8_t secret[16];
  sluice_limiter *lim;
  sluice_policy *pol;
  int released_level;
  /* inspect: where the report goes before it is known to be readable, the
  ** records found under the scope's ids, and the ones that cannot belong
  ** to the configuration given. */
  FILE *out;
  int found, unfit;
} admin;

static void admin_usage(FILE *f, const char *cmd) {
  if (!strcmp(cmd, "inspect"))
    fprintf(f,
        "usage: sluice inspect --store STORE --secret-file FILE "
        "--config FILE\n"
        "         (--tenant T --key K --tier TIER [--ledger L] | --ip IP | "
        "--subject S)\n\n"
        "Shows a scope's records in a live store without changing them: the\n"
        "tenant and key buckets, strikes, offenses, penalty level and box "
        "time\nleft, the Retry-After notice, concurrency lease holders (and "
        "the\nledger lock with --ledger), exports this hour.  Auth scopes "
        "(--ip,\n--subject) show their box and failure window.\n\n"
        "Scope ids are keyed hashes and every figure is computed with the\n"
        "service's tier parameters, so --config is required and the secret\n"
        "must be the service's.  When no record exists under the scope's ids\n"
        "(an idle scope, or another secret) or a record cannot come from\n"
        "--config, inspect says it cannot tell and exits 1.\n");
  else
    fprintf(f,
        "usage: sluice %s --store STORE --secret-file FILE [--config FILE]\n"
        "         (--tenant T --key K --tier TIER | --ip IP | --subject S)\n"
        "         --who NAME --reason TEXT [--audit FILE]\n\n"
        "%s, keeping the offense count, and appends an audit record (one\n"
        "JSON line, fsync'ed) to FILE (default ./sluice-audit.jsonl).\n",
        cmd,
        !strcmp(cmd, "release")
            ? "Ends a penalty box early (level 1, 2, or an enterprise level 3 "
              "box)"
            : "Lifts a level 3 suspension after review");
  fprintf(f,
      "\n  --store STORE       the service's store: shm:name=/NAME,\n"
      "                      lmdb:path=DIR, redis:nodes=HOST:PORT\n"
      "  --secret-file FILE  the service's scope-id secret (32 hex digits)\n"
      "  --config FILE       the service's policy (%s)\n\n"
      "exit codes: 0 ok, 1 %s,\n"
      "            2 usage error, 3 store or system failure\n",
      !strcmp(cmd, "inspect") ? "required" : "default: built-in",
      !strcmp(cmd, "inspect")
          ? "cannot tell (no record under these ids, or one that does\n"
            "            not fit --config)"
          : !strcmp(cmd, "release")
                ? "the scope is not boxed, or is suspended (use lift)"
                : "the scope is not suspended");
}

static int read_secret(admin *a) {
  char err[128];
  if (ex_read_secret_file(a->secret_path, a->secret, err, sizeof err) == 0)
    return 0;
  fprintf(stderr, "sluice %s: --secret-file %s: %s\n", a->cmd, a->secret_path,
          err);
  return -1;
}

static int open_store(admin *a) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  char err[256];
  int rc;
  memset(&lo, 0, sizeof lo);
  lo.store = a->store;
  rc = sluice_limiter_open2(&lo, &a->lim, err, sizeof err);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "sluice %s: --store %s: %s%s%s\n", a->cmd, a->store,
            sluice_strerror(rc), err[0] ? ": " : "", err);
    return rc == SLUICE_EINVAL ? CLI_USAGE : CLI_RUNTIME;
  }
  memset(&po, 0, sizeof po);
  po.limiter = a->lim;
  po.config_path = a->config;
  memcpy(po.secret, a->secret, 16);
  po.errbuf = err;
  po.errlen = sizeof err;
  rc = sluice_policy_open(&po, &a->pol);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "sluice %s: --config %s: %s\n", a->cmd,
            a->config ? a->config : "(defaults)", err);
    return rc == SLUICE_EIO ? CLI_USAGE : CLI_BADINPUT;
  }
  return CLI_OK;
}

static void close_store(admin *a) {
  sluice_policy_close(a->pol);
  sluice_limiter_close(a->lim);
}

/* ----------------------------------------------------------- inspect --- */

/* A record these parameters could not have written: the --config given is
** not the one the service runs, and nothing read from it can be trusted. */
static void unfit(admin *a, const char *what, const char *why) {
  a->unfit++;
  fprintf(a->out, "  %-14s cannot tell: the record does not fit --config "
                  "(%s)\n", what, why);
}

static void secs(char *buf, size_t n, int64_t ns) {
  if (ns == SLUICE_FOREVER)
    snprintf(buf, n, "forever");
  else
    snprintf(buf, n, "%.1f s", (double)ns / 1e9);
}

static void show_bucket(admin *a, const char *what, unsigned bit,
                        const sluice_inspect_report *r,
                        const sluice_inspect_bucket *b) {
  char t[32];
  secs(t, sizeof t, b->reset_ns);
  if (r->unfit & bit) {
    char why[96];
    snprintf(why, sizeof why, "full in %s, more than an empty bucket of %"
             PRId64 " points takes", t, b->burst);
    unfit(a, what, why);
    return;
  }
  fprintf(a->out, "  %-14s %" PRId64 "/%" PRId64 " points, full in %s (%" PRId64
         " per %.3g s)%s\n",
         what, b->remaining, b->burst, t, b->rate, (double)b->period_ns / 1e9,
         (r->present & bit) ? "" : " [no record: full]");
}

static void show_penalty(admin *a, const sluice_inspect_report *r) {
  char t[32];
  if (r->unfit & SLUICE_INSPECT_BOX) {
    unfit(a, "penalty:", "more strikes than the threshold, or a box longer "
                         "than its level's");
    return;
  }
  if (r->level) {
    secs(t, sizeof t, r->box_end_ns == SLUICE_FOREVER
                          ? SLUICE_FOREVER
                          : r->box_end_ns - r->now_ns);
    fprintf(a->out, "  level: %d (%s, %s left)\n", r->level,
           r->suspended ? "suspended pending review" : "boxed", t);
    fprintf(a->out, "  strikes: 0 (not counted while boxed)\n");
  } else {
    fprintf(a->out, "  level: 0 (not boxed)\n");
    fprintf(a->out, "  strikes: %" PRId64 " of %" PRId64 " in the %.0f s window\n",
           r->strikes, r->strike_threshold,
           (double)r->strike_window_ns / 1e9);
  }
  fprintf(a->out, "  offenses: %" PRId64 " (forgotten %.0f h after the last trip)\n",
         r->offenses, (double)r->offense_ttl_ns / 3.6e12);
}

static void show_leases(admin *a, const char *what,
                        const sluice_inspect_leases *l, int64_t now) {
  int i, held = 0;
  fprintf(a->out, "  %s:", what);
  for (i = 0; i < l->slots; i++)
    if (l->id[i]) {
      char t[32];
      secs(t, sizeof t, l->until_ns[i] - now);
      fprintf(a->out, "%s slot %d: lease %016" PRIx64 ", %s left",
             held ? ";" : "", i, l->id[i], t);
      held++;
    }
  fprintf(a->out, "%s (%d of %d slots held)\n", held ? "" : " none", held,
         l->slots);
}

static void show_key(admin *a, const sluice_inspect_report *r) {
  const int64_t now = r->now_ns;
  fprintf(a->out, "scope: key %s of tenant %s, tier %s (ids %.8s... / %.8s...)\n",
         a->key, a->tenant, a->tier, r->scope_id, r->tenant_scope_id);
  show_bucket(a, "tenant bucket:", SLUICE_INSPECT_TENANT_BUCKET, r,
              &r->tenant_bucket);
  show_bucket(a, "key bucket:", SLUICE_INSPECT_KEY_BUCKET, r, &r->key_bucket);
  show_penalty(a, r);
  if (r->notice_until_ns) {
    char tt[32];
    secs(tt, sizeof tt, r->notice_until_ns - now);
    fprintf(a->out, "  retry-after notice: live, %s left (a request before then "
           "is a strike)\n", tt);
  } else {
    fprintf(a->out, "  retry-after notice: none\n");
  }
  show_leases(a, "reconcile leases", &r->reconcile, now);
  show_leases(a, "export leases", &r->export_, now);
  if (a->ledger) {
    if (r->ledger_lease) {
      char tt[32];
      secs(tt, sizeof tt, r->ledger_until_ns - now);
      fprintf(a->out, "  ledger %s: locked by lease %016" PRIx64 ", %s left\n",
             a->ledger, r->ledger_lease, tt);
    } else {
      fprintf(a->out, "  ledger %s: not locked\n", a->ledger);
    }
  }
  if (r->unfit & SLUICE_INSPECT_EXPORT_CAP)
    unfit(a, "exports:", "more exports than the cap");
  else
    fprintf(a->out, "  exports this window: %" PRId64 " of %" PRId64 "\n",
           r->exports_used, r->exports_limit);
}

static void show_auth(admin *a, const sluice_inspect_report *r) {
  int ip = a->scope == SLUICE_SCOPE_IP;
  fprintf(a->out, "scope: %s %s (id %.8s...)\n", ip ? "ip" : "subject",
         ip ? a->ip : a->subject, r->scope_id);
  if (!(r->unfit & SLUICE_INSPECT_BOX)) {
    char tt[32];
    secs(tt, sizeof tt, r->box_end_ns == SLUICE_FOREVER
                            ? SLUICE_FOREVER
                            : r->box_end_ns - r->now_ns);
    if (!r->level)
      fprintf(a->out, "  level: 0 (not boxed)\n");
    else
      fprintf(a->out, "  level: %d (boxed, %s left)\n", r->level, tt);
    fprintf(a->out, "  offenses: %" PRId64 "\n", r->offenses);
  }
  if (r->unfit & SLUICE_INSPECT_FAILURES)
    unfit(a, "failures:", "more failures than the limit");
  else
    fprintf(a->out, "  failures: %" PRId64 " of %" PRId64 " in the %.0f s window\n",
           r->failures, r->failures_limit, (double)r->failures_window_ns / 1e9);
}

/* One sluice_policy_inspect() call: the keys and parameters are the
** library's (lib/policy/keys.c and the tier's derived parameters), so the
** report reads what the service's decisions wrote. */
static int inspect_scope(admin *a) {
  sluice_inspect_query q;
  sluice_inspect_report r;
  unsigned caps = sluice_limiter_capabilities(a->lim);
  int rc;
  memset(&q, 0, sizeof q);
  q.scope = a->scope;
  q.tenant_id = a->tenant;
  q.api_key_id = a->key;
  q.tier = a->tier;
  q.ledger_id = a->ledger;
  q.client_ip = a->ip;
  q.auth_subject = a->subject;
  rc = sluice_policy_inspect(a->pol, &q, &r);
  if (rc == SLUICE_ENOTFOUND) {
    fprintf(stderr, "sluice inspect: --tier: '%s' is not a tier of the "
                    "configuration\n", a->tier);
    return CLI_USAGE;
  }
  if (rc != SLUICE_OK) {
    fprintf(stderr, "sluice inspect: reading the scope's records: %s: %s\n",
            sluice_strerror(rc), sluice_limiter_errmsg(a->lim));
    return rc == SLUICE_EKEY || rc == SLUICE_EINVAL ? CLI_USAGE : CLI_RUNTIME;
  }
  a->found = r.present != 0;
  fprintf(a->out, "store: %s (%s%s%s)\n", a->store, sluice_limiter_backend(a->lim),
         (caps & SLUICE_CAP_CROSS_PROCESS) ? ", shared between processes" : "",
         (caps & SLUICE_CAP_DURABLE) ? ", durable" : "");
  if (a->scope == SLUICE_SCOPE_KEY)
    show_key(a, &r);
  else
    show_auth(a, &r);
  return CLI_OK;
}

/* The report is held back until it is known to say something: a scope
** with no record under its ids reads exactly like a scope read with the
** wrong secret (every bucket full, no strikes), so that is all it says. */
static int inspect(admin *a) {
  char *text = NULL;
  size_t len = 0;
  int rc;
  a->out = open_memstream(&text, &len);
  if (!a->out) {
    fprintf(stderr, "sluice inspect: out of memory\n");
    return CLI_RUNTIME;
  }
  rc = inspect_scope(a);
  if (fclose(a->out) != 0) {
    free(text);
    fprintf(stderr, "sluice inspect: out of memory\n");
    return CLI_RUNTIME;
  }
  a->out = NULL;
  if (rc == CLI_OK && a->found == 0) {
    printf("store: %s\n"
           "cannot tell: no record exists under this scope's ids.  Either the "
           "scope\nhas been idle long enough for every record to expire (all "
           "its buckets\nfull, nothing boxed), or --secret-file is not the "
           "service's secret and\nthe ids are not the service's; sluice "
           "cannot tell which.\n", a->store);
    rc = CLI_BADINPUT;
  } else {
    fwrite(text, 1, len, stdout);
    if (rc == CLI_OK && a->unfit) {
      printf("cannot tell: %d record%s above could not have been written "
             "with --config %s;\nis it the service's configuration?\n",
             a->unfit, a->unfit == 1 ? "" : "s", a->config);
      rc = CLI_BADINPUT;
    }
  }
  free(text);
  return rc;
}

/* ------------------------------------------------------ release, lift --- */

static void on_event(void *ud, const sluice_event *ev) {
  admin *a = ud;
  if (ev->type == SLUICE_EVENT_RELEASE || ev->type == SLUICE_EVENT_LIFT)
    a->released_level = ev->level;
}

/* jansson's own check, so the answer matches what json_pack accepts. */
static int is_utf8(const char *s) {
  json_t *j = json_string(s);
  json_decref(j);
  return j != NULL;
}

/* The audit record, built before the release so that input jansson
** refuses (text that is not UTF-8) stops the command with nothing changed.
** It names the scope by its ids (the hashed ids events carry), never by
** the raw key, IP or subject: an API key is a credential and the log is
** read by more people than the store.  NULL if a member is not UTF-8
** (*bad names the option) or memory ran out. */
static json_t *audit_record_new(const admin *a, int lift, const char **bad) {
  char when[32], sid[SLUICE_SCOPE_ID_LEN + 1], tid[SLUICE_SCOPE_ID_LEN + 1];
  time_t now = time(NULL);
  struct tm tm;
  const char *raw = a->scope == SLUICE_SCOPE_KEY  ? a->key
                    : a->scope == SLUICE_SCOPE_IP ? a->ip
                                                  : a->subject;
  json_t *o;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  sluice_scope_id(a->secret, raw, strlen(raw), sid);
  *bad = !is_utf8(a->who)                ? "--who"
         : !is_utf8(a->why)              ? "--reason"
         : a->tier && !is_utf8(a->tier)  ? "--tier"
         : !is_utf8(a->store)            ? "--store"
                                         : NULL;
  if (*bad)
    return NULL;
  o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s}", "time", when,
                "action", lift ? "lift" : "release", "scope",
                a->scope == SLUICE_SCOPE_KEY  ? "key"
                : a->scope == SLUICE_SCOPE_IP ? "ip"
                                              : "subject",
                "scope_id", sid, "level", 0, "who", a->who, "why", a->why,
                "store", a->store);
  if (o && a->scope == SLUICE_SCOPE_KEY) {
    sluice_scope_id(a->secret, a->tenant, strlen(a->tenant), tid);
    if (json_object_set_new(o, "tenant_scope_id", json_string(tid)) ||
        json_object_set_new(o, "tier", json_string(a->tier))) {
      json_decref(o);
      o = NULL;
    }
  }
  return o;
}

/* One line: the record in compact JSON (jansson escapes it). */
static int audit_record_write(json_t *rec, int level, FILE *f) {
  if (json_object_set_new(rec, "level", json_integer(level)) ||
      json_dumpf(rec, f, JSON_COMPACT) != 0 || fputc('\n', f) == EOF)
    return -1;
  return ferror(f) ? -1 : 0;
}

static int release_or_lift(admin *a, int lift) {
  sluice_request q;
  FILE *f = NULL;
  json_t *rec;
  const char *bad;
  int rc;
  if (!a->who || !a->who[0] || !a->why || !a->why[0]) {
    fprintf(stderr, "sluice %s: %s is required (the audit record)\n", a->cmd,
            !a->who || !a->who[0] ? "--who" : "--reason");
    return CLI_USAGE;
  }
  rec = audit_record_new(a, lift, &bad);
  if (!rec) {
    if (bad)
      fprintf(stderr, "sluice %s: %s is not valid UTF-8 text (the audit "
                      "record is JSON); nothing changed\n", a->cmd, bad);
    else
      fprintf(stderr, "sluice %s: out of memory; nothing changed\n", a->cmd);
    return bad ? CLI_USAGE : CLI_RUNTIME;
  }
  /* Open the audit log first: no release without a record. */
  f = fopen(a->audit, "a");
  if (!f) {
    fprintf(stderr, "sluice %s: --audit %s: %s\n", a->cmd, a->audit,
            strerror(errno));
    json_decref(rec);
    return CLI_USAGE;
  }
  memset(&q, 0, sizeof q);
  q.tenant_id = a->tenant;
  q.api_key_id = a->key;
  q.tier = a->tier;
  q.client_ip = a->ip;
  q.auth_subject = a->subject;
  rc = lift ? sluice_policy_lift_suspension(a->pol, a->scope, &q, a->who,
                                            a->why)
            : sluice_policy_release_box(a->pol, a->scope, &q, a->who, a->why);
  if (rc != SLUICE_OK) {
    fclose(f);
    json_decref(rec);
    if (rc == SLUICE_ENOTFOUND) {
      fprintf(stderr, "sluice %s: the scope is not %s; nothing changed\n",
              a->cmd, lift ? "suspended" : "boxed");
      return CLI_BADINPUT;
    }
    if (rc == SLUICE_EPERM) {
      fprintf(stderr, "sluice release: the scope is suspended (level 3): "
                      "use `sluice lift` after review; nothing changed\n");
      return CLI_BADINPUT;
    }
    if (rc == SLUICE_EINVAL || rc == SLUICE_EKEY) {
      fprintf(stderr, "sluice %s: invalid scope: %s\n", a->cmd,
              sluice_strerror(rc));
      return CLI_USAGE;
    }
    fprintf(stderr, "sluice %s: store error %s: %s\n", a->cmd,
            sluice_strerror(rc), sluice_limiter_errmsg(a->lim));
    return CLI_RUNTIME;
  }
  /* fclose() runs whatever happened before it. */
  rc = audit_record_write(rec, a->released_level, f) != 0 ||
       fflush(f) != 0 || fsync(fileno(f)) != 0;
  if (fclose(f) != 0 || rc) {
    fprintf(stderr, "sluice %s: the %s was done but the audit record could "
                    "not be written to %s\n", a->cmd, a->cmd, a->audit);
    json_decref(rec);
    return CLI_RUNTIME;
  }
  printf("%s: level %d %s; audit record appended to %s\n",
         lift ? "lifted" : "released", a->released_level,
         lift ? "suspension lifted" : "box ended", a->audit);
  audit_record_write(rec, a->released_level, stdout);
  json_decref(rec);
  return CLI_OK;
}

static int admin_main(const char *cmd, int argc, char **argv) {
  static const struct option opts[] = {
      {"store", required_argument, 0, 's'},
      {"config", required_argument, 0, 'c'},
      {"secret-file", required_argument, 0, 'S'},
      {"tenant", required_argument, 0, 't'},
      {"key", required_argument, 0, 'k'},
      {"tier", required_argument, 0, 'T'},
      {"ip", required_argument, 0, 'i'},
      {"subject", required_argument, 0, 'u'},
      {"ledger", required_argument, 0, 'l'},
      {"who", required_argument, 0, 'w'},
      {"reason", required_argument, 0, 'r'},
      {"audit", required_argument, 0, 'a'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  admin a;
  int c, rc, nscope;
  int is_inspect = !strcmp(cmd, "inspect");
  memset(&a, 0, sizeof a);
  a.cmd = cmd;
  a.audit = "sluice-audit.jsonl";
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 's': a.store = optarg; break;
    case 'c': a.config = optarg; break;
    case 'S': a.secret_path = optarg; break;
    case 't': a.tenant = optarg; break;
    case 'k': a.key = optarg; break;
    case 'T': a.tier = optarg; break;
    case 'i': a.ip = optarg; break;
    case 'u': a.subject = optarg; break;
    case 'l': a.ledger = optarg; break;
    case 'w': a.who = optarg; break;
    case 'r': a.why = optarg; break;
    case 'a': a.audit = optarg; break;
    case 'h':
      admin_usage(stdout, cmd);
      return CLI_OK;
    default:
      fprintf(stderr, "sluice %s: unknown or incomplete option '%s'\n", cmd,
              argv[optind - 1]);
      admin_usage(stderr, cmd);
      return CLI_USAGE;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "sluice %s: unexpected argument '%s'\n", cmd,
            argv[optind]);
    return CLI_USAGE;
  }
  if (!a.store || !a.secret_path) {
    fprintf(stderr, "sluice %s: %s is required\n", cmd,
            !a.store ? "--store" : "--secret-file");
    return CLI_USAGE;
  }
  nscope = (a.tenant || a.key || a.tier) + !!a.ip + !!a.subject;
  if (nscope != 1) {
    fprintf(stderr, "sluice %s: name exactly one scope: --tenant/--key/"
                    "--tier, --ip or --subject\n", cmd);
    return CLI_USAGE;
  }
  if ((a.tenant || a.key || a.tier) && !(a.tenant && a.key && a.tier)) {
    fprintf(stderr, "sluice %s: %s is required with --tenant/--key/--tier\n",
            cmd, !a.tenant ? "--tenant" : !a.key ? "--key" : "--tier");
    return CLI_USAGE;
  }
  if (a.ledger && !a.tenant) {
    fprintf(stderr, "sluice %s: --ledger needs a key scope\n", cmd);
    return CLI_USAGE;
  }
  if (is_inspect && !a.config) {
    fprintf(stderr, "sluice inspect: --config is required: every figure is "
                    "computed with the service's\ntier parameters, and "
                    "without them sluice cannot tell a bucket's state (the\n"
                    "built-in defaults are etc/sluice.conf)\n");
    return CLI_USAGE;
  }
  if (!is_inspect && a.ledger) {
    fprintf(stderr, "sluice %s: --ledger is for inspect only\n", cmd);
    return CLI_USAGE;
  }
  a.scope = a.tenant ? SLUICE_SCOPE_KEY
            : a.ip   ? SLUICE_SCOPE_IP
                     : SLUICE_SCOPE_SUBJECT;
  if (read_secret(&a) != 0)
    return CLI_USAGE;
  if ((rc = open_store(&a)) != CLI_OK) {
    close_store(&a);
    return rc;
  }
  if (is_inspect) {
    rc = inspect(&a);
  } else {
    /* The event carries the level released; reopen with the callback. */
    sluice_policy_options po;
    char err[256];
    sluice_policy_close(a.pol);
    memset(&po, 0, sizeof po);
    po.limiter = a.lim;
    po.config_path = a.config;
    memcpy(po.secret, a.secret, 16);
    po.on_event = on_event;
    po.userdata = &a;
    po.errbuf = err;
    po.errlen = sizeof err;
    if (sluice_policy_open(&po, &a.pol) != SLUICE_OK) {
      fprintf(stderr, "sluice %s: --config: %s\n", cmd, err);
      close_store(&a);
      return CLI_BADINPUT;
    }
    rc = release_or_lift(&a, !strcmp(cmd, "lift"));
  }
  if (fflush(stdout) != 0 && rc == CLI_OK)
    rc = CLI_RUNTIME;
  close_store(&a);
  return rc;
}

int cli_inspect(int argc, char **argv) {
  return admin_main("inspect", argc, argv);
}

int cli_release(int argc, char **argv) {
  return admin_main("release", argc, argv);
}

int cli_lift(int argc, char **argv) { return admin_main("lift", argc, argv); }

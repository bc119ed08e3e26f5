/*
** sluice inspect | release | lift | renew: support tools against a live store
*(shm,
** lmdb, redis) that a service shares with its workers.
**
**   inspect  reads a scope's records without changing them: each declared
**            limit its attributes name (what is left, leases held), the
**            policy's penalties, and the box of the key, address or
**            subject named (level and time left, strikes, offenses, the
**            Retry-After notice).
**   release  ends a box early (levels 1 and 2, the enterprise level 3 box),
**            keeping the offense count;
**   lift     lifts a level 3 suspension after review;
**   renew    renews a level 3 box (the 24 h IP ban) for another whole box.
** They go through sluice_policy_release() / _renew() of a box or a
** suspension (a sluice_hold) and write an audit record (one JSON line, appended
*and fsync'ed) naming who, why,
** the scope and the level.
**
** Scope ids are keyed hashes: these tools need the service's secret
** (--secret-file, 32 hex digits) and its policy (--config, for the
** limits' parameters) to find and read the records.
**
** This file is the command line (usage, options, the scope's checks) and
** the store and policy the commands open; admin_inspect.c and
** admin_release.c are the commands themselves.
*/
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cli.h"
#include "cli_cmds.h"
#include "secret_file.h"
#include "sluice.h"

static void admin_usage(FILE *f, const char *cmd) {
  if (!strcmp(cmd, "inspect"))
    fprintf(f,
        "usage: sluice inspect --store STORE --secret-file FILE "
        "--config FILE\n"
        "         [--tenant T] [--key K] [--tier TIER] [--ip IP] "
        "[--subject S]\n"
        "         [--ledger L] [--attr NAME=VALUE]... [--method M --route R]\n"
        "         [--limits | --limit NAME]\n\n"
        "Shows a scope's records in a live store without changing them: "
        "each limit\nthe policy declares whose scope these attributes give "
        "(what is left of it,\nuntil it is full, leases held), the "
        "penalties it declares, and the box of\nthe key (--tenant, --key, "
        "--tier), the address (--ip) or the subject\n(--subject): level and "
        "time left, strikes or sign-in failures, offenses,\nthe "
        "Retry-After notice.  --ledger and --subject are the ledger file's\n"
        "`ledger` and `subject` attributes; --attr names any attribute; "
        "--method and\n--route pick the declared route (the `pattern` "
        "attribute) and its parameter\nset, as a decision of that request "
        "would.  --limits (or --limit NAME) reads\nthe limits only (or "
        "that one).\n\n"
        "Scope ids are keyed hashes and every figure is computed with the\n"
        "service's policy, so --config is required and the secret must be\n"
        "the service's.  When no record exists under the scope's ids (an "
        "idle\nscope, or another secret) or a record cannot come from "
        "--config, inspect\nsays it cannot tell and exits 1.\n");
  else
    fprintf(f,
        "usage: sluice %s --store STORE --secret-file FILE [--config FILE]\n"
        "         (--tenant T --key K --tier TIER | --ip IP | --subject S)\n"
        "         --who NAME --reason TEXT [--audit FILE]\n"
        "         [--nft [--nft-table NAME] [--nft-prefix N]]\n\n"
        "%s, and appends an audit record (one\n"
        "JSON line, fsync'ed) to FILE (default ./sluice-audit.jsonl).\n\n"
        "  --nft               an --ip scope %s the kernel's nftables set\n"
        "                      too (docs/nft.md; needs CAP_NET_ADMIN)\n"
        "  --nft-table NAME    the service's table (default sluice; sets\n"
        "                      deny4 and deny6)\n"
        "  --nft-prefix N      the service's IPv6 prefix (default 64)\n",
        cmd,
        !strcmp(cmd, "release")
            ? "Ends a penalty box early (level 1, 2, or an enterprise level 3 "
              "box),\nkeeping the offense count"
        : !strcmp(cmd, "lift")
            ? "Lifts a level 3 suspension after review, keeping the offense "
              "count"
            : "Renews a level 3 box (the 24 h IP ban, an enterprise key's "
              "level 3\nbox) for another whole box from now",
        !strcmp(cmd, "renew") ? "goes back into" : "leaves");
  fprintf(f,
      "\n  --store STORE       the service's store: shm:name=/NAME,\n"
      "                      lmdb:path=DIR, redis:nodes=HOST:PORT\n"
      "  --secret-file FILE  the service's scope-id secret (32 hex digits)\n"
      "  --config FILE       the service's policy (%s)\n\n"
      "exit codes: 0 ok, 1 %s,\n"
      "            2 usage error, 3 store or system failure\n",
      !strcmp(cmd, "inspect") ? "required" : "default: etc/ledger.conf",
      !strcmp(cmd, "inspect")
          ? "cannot tell (no record under these ids, or one that does\n"
            "            not fit --config)"
      : !strcmp(cmd, "release")
          ? "the scope is not boxed, or is suspended (use lift)"
      : !strcmp(cmd, "lift")
          ? "the scope is not suspended"
          : "the scope is not boxed at level 3, or is suspended");
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
  rc = sluice_limiter_open(&lo, &a->lim, err, sizeof err);
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

/* --nft: a sink on the service's table (created if missing, so that a
** renewal after a flushed ruleset lands). */
static int open_sink(admin *a) {
  sluice_nft_options no;
  char err[256] = "";
  int rc;
  memset(&no, 0, sizeof no);
  no.table = a->nft_table;
  no.ipv6_prefix = a->nft_prefix;
  no.min_level = 1;
  no.flags = SLUICE_NFT_CREATE;
  no.resync_ms = -1;
  no.errbuf = err;
  no.errlen = sizeof err;
  rc = sluice_nft_open(&no, &a->sink);
  if (rc == SLUICE_OK)
    return CLI_OK;
  fprintf(stderr, "sluice %s: --nft: %s%s%s; nothing changed\n", a->cmd,
          sluice_strerror(rc), err[0] ? ": " : "", err);
  return rc == SLUICE_EINVAL ? CLI_USAGE : CLI_RUNTIME;
}

static void close_store(admin *a) {
  sluice_policy_close(a->pol);
  sluice_limiter_close(a->lim);
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
      {"nft", no_argument, 0, 'N'},
      {"nft-table", required_argument, 0, 'B'},
      {"nft-prefix", required_argument, 0, 'P'},
      {"limits", no_argument, 0, 'D'},
      {"limit", required_argument, 0, 'L'},
      {"attr", required_argument, 0, 'A'},
      {"method", required_argument, 0, 'M'},
      {"route", required_argument, 0, 'R'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  admin a;
  int c, rc, nscope, nsel = 0, nledger = 0;
  int is_inspect = !strcmp(cmd, "inspect");
  memset(&a, 0, sizeof a);
  a.cmd = cmd;
  a.audit = "sluice-audit.jsonl";
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 's':
      if (cli_store_arg(cmd, "--store", optarg))
        return CLI_USAGE;
      a.store = optarg;
      break;
    case 'c': a.config = optarg; break;
    case 'S': a.secret_path = optarg; break;
    case 't': a.tenant = optarg; break;
    case 'k': a.key = optarg; break;
    case 'T': a.tier = optarg; break;
    case 'i': a.ip = optarg; break;
    case 'u':
    case 'l':
      /* the ledger's attributes (etc/ledger.conf): --attr NAME=VALUE */
      if (c == 'u')
        a.subject = optarg;
      if (a.nattrs == sizeof a.attrs / sizeof a.attrs[0]) {
        fprintf(stderr, "sluice %s: at most 16 attributes\n", cmd);
        return CLI_USAGE;
      }
      if (c == 'l')
        nledger++;
      a.attrs[a.nattrs].name = c == 'u' ? "subject" : "ledger";
      a.attrs[a.nattrs++].value = optarg;
      break;
    case 'w': a.who = optarg; break;
    case 'r': a.why = optarg; break;
    case 'a': a.audit = optarg; break;
    case 'N': a.nft = 1; break;
    case 'B': a.nft_table = optarg; break;
    case 'P': {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (end == optarg || *end || v < 1 || v > 128) {
        fprintf(stderr, "sluice %s: --nft-prefix: 1..128\n", cmd);
        return CLI_USAGE;
      }
      a.nft_prefix = (int)v;
      break;
    }
    case 'D': a.only_limits = 1; nsel++; break;
    case 'L': a.limit = optarg; nsel++; break;
    case 'M': a.method = optarg; nsel++; break;
    case 'R': a.route = optarg; nsel++; break;
    case 'A': {
      char *eq = strchr(optarg, '=');
      if (!eq || eq == optarg || a.nattrs == sizeof a.attrs / sizeof a.attrs[0]) {
        fprintf(stderr, "sluice %s: --attr: expected NAME=VALUE (at most "
                        "16), got '%s'\n", cmd, optarg);
        return CLI_USAGE;
      }
      *eq = 0;
      a.attrs[a.nattrs].name = optarg;
      a.attrs[a.nattrs++].value = eq + 1;
      nsel++;
      break;
    }
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
  if (!is_inspect) {
    /* a box's scope: the key's, the address's or the subject's */
    if (nsel || nledger) {
      fprintf(stderr, "sluice %s: --limits, --limit, --attr, --ledger, "
                      "--method and --route are for inspect only\n", cmd);
      return CLI_USAGE;
    }
    if (nscope != 1) {
      fprintf(stderr, "sluice %s: name exactly one scope: --tenant/--key/"
                      "--tier, --ip or --subject\n", cmd);
      return CLI_USAGE;
    }
    if (a.tenant || a.key || a.tier) {
      if (!(a.tenant && a.key && a.tier)) {
        fprintf(stderr, "sluice %s: %s is required with --tenant/--key/"
                        "--tier\n",
                cmd, !a.tenant ? "--tenant" : !a.key ? "--key" : "--tier");
        return CLI_USAGE;
      }
    }
  } else if (!nscope && !nsel && !nledger) {
    /* a declared limit's scope is whatever attributes it names */
    fprintf(stderr, "sluice inspect: name a scope: --tenant/--key/--tier, "
                    "--ip, --subject or --attr NAME=VALUE\n");
    return CLI_USAGE;
  }
  if (is_inspect && !a.config) {
    fprintf(stderr, "sluice inspect: --config is required: every figure is "
                    "computed with the service's\npolicy (its limits' "
                    "parameters); without it sluice\ncannot tell a limit's "
                    "state (the default policy is etc/ledger.conf)\n");
    return CLI_USAGE;
  }
  if ((a.nft_table || a.nft_prefix) && !a.nft) {
    fprintf(stderr, "sluice %s: --nft-table and --nft-prefix go with --nft\n",
            cmd);
    return CLI_USAGE;
  }
  if (is_inspect && a.nft) {
    fprintf(stderr, "sluice inspect: --nft is for release, lift and renew\n");
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
    rc = admin_inspect(&a);
  } else {
    /* The event carries the level released; reopen with the callback. */
    sluice_policy_options po;
    char err[256];
    sluice_policy_close(a.pol);
    memset(&po, 0, sizeof po);
    po.limiter = a.lim;
    po.config_path = a.config;
    memcpy(po.secret, a.secret, 16);
    po.on_event = admin_on_event;
    po.userdata = &a;
    po.errbuf = err;
    po.errlen = sizeof err;
    if (sluice_policy_open(&po, &a.pol) != SLUICE_OK) {
      fprintf(stderr, "sluice %s: --config: %s\n", cmd, err);
      close_store(&a);
      return CLI_BADINPUT;
    }
    if (a.nft && (rc = open_sink(&a)) != CLI_OK) {
      close_store(&a);
      return rc;
    }
    rc = admin_release_or_lift(&a, !strcmp(cmd, "lift")    ? ADMIN_LIFT
                                   : !strcmp(cmd, "renew") ? ADMIN_RENEW
                                                           : ADMIN_RELEASE);
    sluice_nft_close(a.sink); /* on a failure: nothing was queued */
  }
  close_store(&a); /* stdout is checked by main (cli_stdout_done) */
  return rc;
}

int cli_inspect(int argc, char **argv) {
  return admin_main("inspect", argc, argv);
}

int cli_release(int argc, char **argv) {
  return admin_main("release", argc, argv);
}

int cli_lift(int argc, char **argv) { return admin_main("lift", argc, argv); }

int cli_renew(int argc, char **argv) {
  return admin_main("renew", argc, argv);
}

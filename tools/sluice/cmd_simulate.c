/*
** sluice simulate SCENARIO: the spec's scenarios run through the whole
** policy layer on the in-memory backend with a virtual (manual) clock, so
** hours of traffic take well under a second and every run prints the same
** numbers.
**
** Each scenario is a set of actors (clients), each with the time of its next
** request; the loop always runs the actor due first, sets the clock to that
** time and lets it send one request through sluice_policy_decide().  The
** answer is rendered by the HTTP layer exactly as a service would send it,
** and clients read only those header strings (Retry-After,
** RateLimit-Remaining...), so a client's behaviour is what it would be over
** a real connection.  Random draws (Retry-After jitter, backoff jitter) come
** from seeded generators: runs are reproducible.
**
** The backend-outage scenario runs the "mem" store behind the failing store
** (tools/common/fail_store.h), whose xRun returns SLUICE_ETIMEDOUT
** while the outage lasts: the policy sees what a timed-out Redis would give
** it, from the same vtable call.
*/
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_cmds.h"
#include "sim.h"

/* ------------------------------------------------------------ main --- */

/* A scenario's keys are all of one tier, named here and nowhere else (the
** scenario reads it from sim.tier); NULL: sign-ins only, no tier.  Its
** requests name method, route and the attributes of etc/ledger.conf: a
** --config whose routes match none of them is refused at the first. */
typedef struct scenario {
  const char *name, *what, *question;
  void (*run)(sim *);
  int64_t dur_s;
  int failing;
  int (*tweak)(sluice_policy_config *);
  const char *tier;
} scenario;

static int tweak_nat(sluice_policy_config *c) {
  return sluice_policy_config_set(c, "penalties.address.strikes", "1000",
                                  NULL, 0);
}

static const scenario scenarios[] = {
    {"growth-batch", "a growth tenant's end-of-day batch spike",
     "growth-batch: does the end-of-day spike pass without strikes?",
     scn_growth_batch, 1200, 0, NULL, "growth"},
    {"retry-ignorer",
     "a client that ignores Retry-After and climbs the penalty levels",
     "retry-ignorer: how does a client that ignores Retry-After climb the "
     "penalty levels?",
     scn_retry_ignorer, 4200, 0, NULL, "sandbox"},
    {"batch-backoff",
     "a batch client pacing itself and obeying the backoff planner",
     "batch-backoff: can a paced batch client post 20000 entries without "
     "a 429?",
     scn_batch_backoff, 1200, 0, NULL, "growth"},
    {"credential-stuffing",
     "password spraying from a few IPs while office users log in",
     "credential-stuffing: are the attackers banned while the office "
     "logs in?",
     scn_credential_stuffing, 1800, 0, tweak_nat, NULL},
    {"backend-outage",
     "the store times out: fail-closed and degraded answers",
     "backend-outage: what do clients get while the store times out?",
     scn_backend_outage, 360, 1, NULL, "growth"},
};
#define NSCEN (sizeof scenarios / sizeof scenarios[0])

static void simulate_usage(FILE *f) {
  size_t i;
  fprintf(f,
          "usage: sluice simulate [--plot FILE.svg] [--config FILE] SCENARIO\n"
          "       sluice simulate --list\n\n"
          "Runs one of the spec's scenarios through the whole policy on the\n"
          "in-memory backend with a virtual clock (hours of traffic in well\n"
          "under a second) and prints what happened: requests, allowed,\n"
          "throttled, boxed per tier, box trips per level, events.\n\n"
          "  --plot FILE    also write an SVG plot of the scenario's answer:\n"
          "                 what clients were answered over time (bars), the\n"
          "                 observed key's points remaining (line), boxes,\n"
          "                 bans and outages marked\n"
          "  --config FILE  a policy file instead of the default policy (the\n"
          "                 spec's ledger API, etc/ledger.conf, compiled\n"
          "                 in and installed as " SLUICE_CONF_PATH ");\n"
          "                 the scenarios' clients send its routes and\n"
          "                 attributes (ledger, subject, result)\n\n"
          "scenarios:\n");
  for (i = 0; i < NSCEN; i++)
    fprintf(f, "  %-20s %s\n", scenarios[i].name, scenarios[i].what);
  fprintf(f, "\nexit codes: 0 ok, 1 bad --config (or one whose routes do "
             "not match the\nscenario's requests), 2 usage error (unknown "
             "scenario, bad option),\n3 system failure\n");
}

int cli_simulate(int argc, char **argv) {
  static const struct option opts[] = {{"plot", required_argument, 0, 'p'},
                                       {"config", required_argument, 0, 'c'},
                                       {"list", no_argument, 0, 'l'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *plot = NULL, *config = NULL;
  const scenario *sc = NULL;
  sluice_policy_config *cfg = NULL;
  struct timespec w0, w1;
  static sim s; /* large: keep it off the stack */
  size_t i;
  int c, rc, list = 0;

  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'p':
      plot = optarg;
      break;
    case 'c':
      config = optarg;
      break;
    case 'l':
      list = 1;
      break;
    case 'h':
      simulate_usage(stdout);
      return CLI_OK;
    default:
      fprintf(stderr, "sluice simulate: unknown or incomplete option '%s'\n",
              argv[optind - 1]);
      simulate_usage(stderr);
      return CLI_USAGE;
    }
  }
  if (list) {
    if (optind != argc || plot || config) {
      fprintf(stderr, "sluice simulate: --list takes no other argument, "
                      "got '%s'\n",
              optind != argc ? argv[optind] : plot ? "--plot" : "--config");
      return CLI_USAGE;
    }
    for (i = 0; i < NSCEN; i++)
      printf("%s\n", scenarios[i].name);
    return CLI_OK;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "sluice simulate: expected exactly one SCENARIO%s\n",
            optind < argc - 1 ? ", got several" : "");
    simulate_usage(stderr);
    return CLI_USAGE;
  }
  for (i = 0; i < NSCEN; i++)
    if (!strcmp(argv[optind], scenarios[i].name))
      sc = &scenarios[i];
  if (!sc) {
    fprintf(stderr, "sluice simulate: unknown scenario '%s' (try --list)\n",
            argv[optind]);
    return CLI_USAGE;
  }
  {
    char err[256];
    rc = sluice_policy_config_new(&cfg, config, err, sizeof err);
    if (rc != SLUICE_OK) {
      fprintf(stderr, "sluice simulate: --config %s: %s\n", config, err);
      return rc == SLUICE_EIO ? CLI_USAGE : CLI_BADINPUT;
    }
  }
  if (sc->tweak && sc->tweak(cfg) != SLUICE_OK) {
    fprintf(stderr, "sluice simulate: scenario %s does not fit the policy\n",
            sc->name);
    sluice_policy_config_free(cfg);
    return CLI_BADINPUT;
  }
  memset(&s, 0, sizeof s);
  s.name = sc->name;
  s.tier = sc->tier;
  clock_gettime(CLOCK_MONOTONIC, &w0);
  rc = sim_open(&s, cfg, sc->failing, sc->dur_s * S_NS);
  sluice_policy_config_free(cfg); /* the policy keeps its own */
  if (rc != SLUICE_OK) {
    sim_close(&s);
    return CLI_RUNTIME;
  }
  printf("scenario %s: %s\n", sc->name, sc->what);
  snprintf(s.plot.title, sizeof s.plot.title, "%s", sc->question);
  sc->run(&s);
  clock_gettime(CLOCK_MONOTONIC, &w1);
  sim_report(&s, stdout,
         (double)(w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9);
  rc = CLI_OK;
  if (plot) {
    int err = sim_write_plot(&s, plot);
    if (err != 0) {
      fprintf(stderr,
              "sluice simulate: --plot %s: cannot write the file: %s\n",
              plot, strerror(err));
      rc = CLI_RUNTIME;
    } else {
      printf("plot written to %s\n", plot);
    }
  }
  sim_close(&s);
  return rc;
}

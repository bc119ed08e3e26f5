/* sluice check FILE...: a policy file loaded as a service would load it
** (sluice_policy_open() on an in-process store), its errors and warnings
** said with FILE:LINE, then what it declares: the caller's attributes and
** each limit with its algorithm, scope, unit and the attribute choosing its
** numbers.  The docs test checks every policy file docs/policy.md shows
** with it (tests/docs/run_docs.py). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_cmds.h"
#include "sluice.h"

static void check_usage(FILE *f) {
  fprintf(f,
      "usage: sluice check POLICY...\n"
      "Load each policy file as sluice_policy_open() does (on an in-process\n"
      "store) and say what is wrong with it, as FILE:LINE: SETTING: problem;\n"
      "then what loads but is likely a mistake (a warning: a limit no route\n"
      "applies), and what the file declares: the caller's attributes and each\n"
      "limit (algorithm, scope, unit, the attribute choosing its numbers).\n"
      "A store that decides fewer numbers exactly (redis: burst x period\n"
      "within 2^52 ns) may still refuse a limit at its own open.\n"
      "exit codes: 0 every file loads (warnings or not), 1 a file does not,\n"
      "2 usage error (a file that cannot be read)\n");
}

/* What the file declares, one line per limit. */
static void declared(const sluice_policy *pol) {
  sluice_declared_info li;
  int i, j;
  for (i = 0; sluice_policy_declared_at(pol, SLUICE_DECLARED_ATTRIBUTE, i,
                                        &li) == SLUICE_OK;
       i++)
    printf("%s %s", i ? "" : "attributes:", li.name);
  if (i)
    printf("\n");
  for (i = 0; sluice_policy_declared_at(pol, SLUICE_DECLARED_LIMIT, i, &li) ==
              SLUICE_OK;
       i++) {
    printf("limit %s: %s, scope", li.name, li.algorithm);
    for (j = 0; j < li.nscope; j++)
      printf(" %s", li.scope[j]);
    printf(", unit %s, denial %d", li.unit, li.status);
    if (li.by)
      printf(", numbers by %s", li.by);
    printf("\n");
  }
}

static int check_one(const char *path) {
  sluice_policy_options o;
  sluice_policy *pol = NULL;
  char err[600], warn[600];
  int rc;
  memset(&o, 0, sizeof o);
  o.config_path = path;
  memset(o.secret, 0x3c, sizeof o.secret); /* any: nothing is stored */
  o.errbuf = err;
  o.errlen = sizeof err;
  rc = sluice_policy_open(&o, &pol);
  if (rc != SLUICE_OK) {
    fprintf(stderr, "sluice check: %s\n", err[0] ? err : sluice_strerror(rc));
    return rc == SLUICE_EIO ? CLI_USAGE : CLI_BADINPUT;
  }
  printf("%s: loads\n", path);
  fflush(stdout); /* its warning after it */
  {
    /* A configuration made from the file says its first warning. */
    sluice_policy_config *cfg = NULL;
    if (sluice_policy_config_new(&cfg, path, warn, sizeof warn) ==
            SLUICE_OK &&
        warn[0])
      fprintf(stderr, "sluice check: warning: %s\n", warn);
    sluice_policy_config_free(cfg);
  }
  declared(pol);
  sluice_policy_close(pol);
  return CLI_OK;
}

int cli_check(int argc, char **argv) {
  int i, rc = CLI_OK;
  if (argc < 2 || argv[1][0] == '-') {
    int help = argc >= 2 && !strcmp(argv[1], "--help");
    if (!help && argc >= 2)
      fprintf(stderr, "sluice check: unknown option '%s'\n", argv[1]);
    check_usage(help ? stdout : stderr);
    return help ? CLI_OK : CLI_USAGE;
  }
  for (i = 1; i < argc; i++) {
    int r;
    fflush(stdout); /* the lines of each file in order with its errors */
    r = check_one(argv[i]);
    if (r > rc)
      rc = r;
  }
  return rc;
}

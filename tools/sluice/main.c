/* sluice: the command-line tool.  `sluice help` lists the subcommands;
** every subcommand takes --help. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_cmds.h"
#include "sluice.h"

static const struct {
  const char *name;
  int (*run)(int, char **);
  const char *what;
} cmds[] = {
    {"simulate", cli_simulate, "run a built-in scenario on a virtual clock"},
    {"replay", cli_replay,
     "replay a request log (--algo gcra: one algorithm; --policy: all)"},
    {"inspect", cli_inspect, "show a key's buckets, strikes, box, leases"},
    {"release", cli_release, "end a penalty box early (audited)"},
    {"lift", cli_lift, "lift a level 3 suspension (audited)"},
    {"renew", cli_renew, "renew a level 3 box, the 24 h IP ban (audited)"},
    {"nft-schema", cli_nft_schema, "the nftables sink's table, sets, rule"},
    {"settings", cli_settings, "the policy file's settings, defaults, bounds"},
    {"check", cli_check, "load a policy file: its errors, warnings, limits"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: sluice COMMAND [OPTIONS]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].what);
  fprintf(f, "\n`sluice COMMAND --help` describes a command.\n"
             "exit codes: 0 ok, 1 malformed input, 2 usage error, "
             "3 store or system failure\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
      !strcmp(argv[1], "-h")) {
    usage(stdout);
    return cli_stdout_done(NULL, CLI_OK);
  }
  if (!strcmp(argv[1], "--version")) {
    printf("sluice %s\n", sluice_version(NULL));
    return cli_stdout_done(NULL, CLI_OK);
  }
  /* `replay --policy CONFIG LOG` is the whole-policy replay
  ** (cmd_policy_replay.c); `replay --algo` stays in cmd_replay.c, which the
  ** fuzz and fault harnesses link on its own. */
  if (!strcmp(argv[1], "replay"))
    for (int i = 2; i < argc; i++)
      if (!strcmp(argv[i], "--policy") || !strncmp(argv[i], "--policy=", 9))
        return cli_stdout_done("replay",
                               cli_policy_replay(argc - 1, argv + 1));
  /* Every command's output is checked here, once, when it is done. */
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(argv[1], cmds[i].name))
      return cli_stdout_done(cmds[i].name, cmds[i].run(argc - 1, argv + 1));
  fprintf(stderr, "sluice: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return CLI_USAGE;
}

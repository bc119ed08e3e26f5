/* Subcommands added next to `replay --algo` (simulate, replay --policy,
** inspect / release / lift / renew, settings, check).  Same exit codes as cli.h. */
#ifndef SLUICE_CLI_CMDS_H
#define SLUICE_CLI_CMDS_H

int cli_simulate(int argc, char **argv);
int cli_policy_replay(int argc, char **argv);
int cli_inspect(int argc, char **argv);
int cli_release(int argc, char **argv);
int cli_lift(int argc, char **argv);
int cli_renew(int argc, char **argv);
int cli_nft_schema(int argc, char **argv);
int cli_settings(int argc, char **argv);
int cli_check(int argc, char **argv);

#endif

#include <stdio.h>
#include "cli.h"
#include "cli_cmds.h"
int cli_policy_replay(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "todo\n"); return CLI_USAGE; }

#include <stdio.h>
#include "cli.h"
#include "cli_cmds.h"
int cli_inspect(int argc, char **argv) { (void)argc; (void)argv; return CLI_USAGE; }
int cli_release(int argc, char **argv) { (void)argc; (void)argv; return CLI_USAGE; }
int cli_lift(int argc, char **argv) { (void)argc; (void)argv; return CLI_USAGE; }

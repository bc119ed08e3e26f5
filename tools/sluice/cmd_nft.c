/*
** sluice nft-schema: the nft commands that make the kernel IP set sink's
** table, sets and drop rule (sluice_nft_schema()), for an operator who
** loads them with the rest of the ruleset (`nft -f`) instead of letting
** the sink create them.  docs/nft.md shows this output and the docs test
** runs it, so the documented snippet is the library's.
*/
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_cmds.h"
#include "sluice.h"

static void nft_usage(FILE *f) {
  fprintf(f,
      "usage: sluice nft-schema [--table NAME] [--set4 NAME] [--set6 NAME]\n\n"
      "Prints the nft commands that make the nftables sink's table, its\n"
      "IPv4 and IPv6 sets and the rule that drops their addresses\n"
      "(docs/nft.md).  Load them with `nft -f -`.\n\n"
      "  --table NAME  the inet table (default sluice)\n"
      "  --set4 NAME   the IPv4 set (default deny4)\n"
      "  --set6 NAME   the IPv6 set (default deny6)\n");
}

int cli_nft_schema(int argc, char **argv) {
  static const struct option opts[] = {
      {"table", required_argument, 0, 't'},
      {"set4", required_argument, 0, '4'},
      {"set6", required_argument, 0, '6'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  sluice_nft_options o;
  char buf[2048];
  int c;
  memset(&o, 0, sizeof o);
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 't': o.table = optarg; break;
    case '4': o.set4 = optarg; break;
    case '6': o.set6 = optarg; break;
    case 'h':
      nft_usage(stdout);
      return CLI_OK;
    default:
      fprintf(stderr, "sluice nft-schema: unknown or incomplete option "
                      "'%s'\n", argv[optind - 1]);
      nft_usage(stderr);
      return CLI_USAGE;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "sluice nft-schema: unexpected argument '%s'\n",
            argv[optind]);
    return CLI_USAGE;
  }
  if (sluice_nft_schema(&o, buf, sizeof buf, NULL) != SLUICE_OK) {
    fprintf(stderr, "sluice nft-schema: a name is a letter, then letters, "
                    "digits or '_' (at most %d), and the sets differ\n",
            SLUICE_NFT_NAME_MAX);
    return CLI_USAGE;
  }
  fputs(buf, stdout);
  return CLI_OK;
}

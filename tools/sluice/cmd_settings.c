/* sluice settings: the policy file's scalar settings by their paths in
** the file, with their defaults and bounds, printed from the library's own
** table (sluice_policy_setting_at), as the Markdown table docs/policy.md
** shows (the docs test runs this and compares); then the declared limits'
** and routes' settings (sluice_policy_limit_setting_at). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_cmds.h"
#include "sluice.h"

/* A bound as the docs write it: powers of two above 2^20 as 2^N. */
static void bound(char *out, size_t n, int64_t v) {
  int b;
  for (b = 21; b < 63; b++)
    if (v == (int64_t)1 << b) {
      snprintf(out, n, "2^%d", b);
      return;
    }
  snprintf(out, n, "%" PRId64, v);
}

int cli_settings(int argc, char **argv) {
  const sluice_policy_setting *st;
  const sluice_limit_setting *ls;
  int i;
  if (argc > 1) {
    FILE *f = strcmp(argv[1], "--help") ? stderr : stdout;
    fprintf(f, "usage: sluice settings\n"
               "Print the policy file's scalar settings by their paths in "
               "the file: default,\nrange and what each does (a Markdown "
               "table); then the settings of declared\nlimits and routes: "
               "the algorithms each applies to, its range or form, what it\n"
               "does (a second table).\n");
    return f == stdout ? CLI_OK : CLI_USAGE;
  }
  printf("| setting | default | range | what |\n"
         "|---|---|---|---|\n");
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL; i++) {
    char lo[24], hi[24];
    bound(lo, sizeof lo, st->min);
    if (st->unit_ns > 1 && st->max == SLUICE_DURATION_MAX / st->unit_ns)
      snprintf(hi, sizeof hi, "2^62 ns"); /* any duration */
    else
      bound(hi, sizeof hi, st->max);
    printf("| `%s.%s` | %" PRId64 " | %s..%s | %s |\n", st->group,
           st->name, st->dflt, lo, hi, st->what);
  }
  /* The declared limits' and routes' settings (sluice_policy_limit_setting_at). */
  printf("\n| limit or route setting | algorithms | value | what |\n"
         "|---|---|---|---|\n");
  for (i = 0; (ls = sluice_policy_limit_setting_at(i)) != NULL; i++) {
    char lo[24], hi[24];
    if (ls->unit_ns) {
      bound(lo, sizeof lo, ls->min);
      bound(hi, sizeof hi, ls->max);
    }
    printf("| `%s.%s.%s` | %s | %s%s%s | %s |\n", ls->group,
           strcmp(ls->group, "routes") ? "NAME" : "[i]", ls->name,
           ls->algorithms, ls->unit_ns ? lo : ls->value,
           ls->unit_ns ? ".." : "", ls->unit_ns ? hi : "", ls->what);
  }
  return CLI_OK;
}

/* Integer options of the example programs (sluice, ledger-api,
** batch-client), parsed and refused alike. */
#ifndef SLUICE_EXAMPLES_OPT_INT_H
#define SLUICE_EXAMPLES_OPT_INT_H

#include <stdint.h>

/* v as a whole decimal integer from lo to hi (strtoll's syntax: leading
** blanks and a sign allowed, nothing after the digits).  0, or -1 after
** "PROG: OPT: expected an integer from LO to HI, got 'V'" on stderr. */
int ex_opt_int(const char *prog, const char *opt, const char *v, int64_t lo,
               int64_t hi, int64_t *out);

#endif

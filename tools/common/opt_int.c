#include "opt_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int ex_opt_int(const char *prog, const char *opt, const char *v, int64_t lo,
               int64_t hi, int64_t *out) {
  /* strtoll would skip blanks and take a '+': only digits, maybe '-' */
  const char *digits = v[0] == '-' ? v + 1 : v;
  char *end;
  long long x;
  errno = 0;
  x = strtoll(v, &end, 10);
  if (!isdigit((unsigned char)digits[0]) || errno || *end || x < lo ||
      x > hi) {
    fprintf(stderr,
            "%s: %s: expected an integer from %" PRId64 " to %" PRId64
            ", got '%s'\n",
            prog, opt, lo, hi, v);
    return -1;
  }
  *out = x;
  return 0;
}

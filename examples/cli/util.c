#include <string.h>

#include "cli.h"
#include "sluice.h"

void cli_out_str(cli_out *o, const char *s, size_t n) {
  if (o->n + n > sizeof o->buf) {
    cli_out_flush(o);
    if (n > sizeof o->buf) {
      fwrite(s, 1, n, o->f);
      return;
    }
  }
  memcpy(o->buf + o->n, s, n);
  o->n += n;
}

/* Two digits per division: the replay tool formats seven numbers a line. */
static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

char *cli_fmt_i64(char *p, int64_t v) {
  char tmp[20];
  int i = 20;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  while (u >= 100) {
    i -= 2;
    memcpy(tmp + i, digit_pairs + 2 * (u % 100), 2);
    u /= 100;
  }
  if (u >= 10) {
    i -= 2;
    memcpy(tmp + i, digit_pairs + 2 * u, 2);
  } else {
    tmp[--i] = (char)('0' + u);
  }
  if (v < 0)
    *p++ = '-';
  memcpy(p, tmp + i, (size_t)(20 - i));
  return p + (20 - i);
}

void cli_out_i64(cli_out *o, int64_t v) {
  char tmp[CLI_I64_MAX];
  const char *end = cli_fmt_i64(tmp, v);
  cli_out_str(o, tmp, (size_t)(end - tmp));
}

char *cli_out_reserve(cli_out *o, size_t n) {
  if (n > sizeof o->buf)
    return NULL;
  if (o->n + n > sizeof o->buf)
    cli_out_flush(o);
  return o->buf + o->n;
}

int cli_out_flush(cli_out *o) {
  size_t w = o->n ? fwrite(o->buf, 1, o->n, o->f) : 0;
  int ok = w == o->n;
  o->n = 0;
  return ok ? 0 : -1;
}

int cli_parse_i64(const char *s, size_t n, int64_t *out) {
  int64_t v = 0;
  size_t i = 0;
  int neg = 0;
  if (n > 0 && s[0] == '-') {
    neg = 1;
    i = 1;
  }
  if (i == n || n - i > 18)
    return -1;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = neg ? -v : v;
  return 0;
}

int cli_parse_ms_list(const char *s, int64_t *out, int n) {
  for (int i = 0; i < n; i++) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int64_t v;
    if ((end == NULL) != (i == n - 1))
      return -1;
    if (len == 7 && memcmp(s, "forever", 7) == 0) {
      out[i] = SLUICE_FOREVER;
    } else {
      if (cli_parse_i64(s, len, &v) || v < 1 || v > SLUICE_DURATION_MAX / 1000000)
        return -1;
      out[i] = v * 1000000;
    }
    s = end ? end + 1 : s + len;
  }
  return 0;
}

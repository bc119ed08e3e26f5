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

void cli_out_i64(cli_out *o, int64_t v) {
  char tmp[24];
  int i = 24;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    tmp[--i] = '-';
  cli_out_str(o, tmp + i, (size_t)(24 - i));
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

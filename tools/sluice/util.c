#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "sluice.h"

/* The errno of the first failed write of a cli_out: stdio keeps only an
** error flag, and a later successful fflush leaves errno as it finds it. */
static int out_errno;

static void out_failed(void) {
  if (!out_errno)
    out_errno = errno ? errno : EIO;
}

void cli_out_str(cli_out *o, const char *s, size_t n) {
  if (o->n + n > sizeof o->buf) {
    cli_out_flush(o);
    if (n > sizeof o->buf) {
      if (fwrite(s, 1, n, o->f) != n)
        out_failed();
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
  if (!ok)
    out_failed();
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

const char *cli_parse_t_ms(const char *s, size_t n, int64_t *out, char *buf,
                           size_t buflen) {
  const int64_t max = INT64_MAX / 1000000; /* in ns, it fits in int64 */
  size_t i = n > 0 && s[0] == '-';
  int digits = i < n;
  for (; i < n; i++)
    digits &= s[i] >= '0' && s[i] <= '9';
  if (!digits)
    return "not a non-negative integer";
  /* A number too long for cli_parse_i64 is out of range as well. */
  if (cli_parse_i64(s, n, out) || *out < 0 || *out > max) {
    snprintf(buf, buflen, "must be 0..%lld (got %.*s)", (long long)max,
             n > 40 ? 40 : (int)n, s);
    return buf;
  }
  return NULL;
}

int cli_stdout_done(const char *cmd, int rc) {
  /* After a failed write glibc drops what follows, so fflush may have
  ** nothing left to fail on: the errno the failure left is the best
  ** guess then, after the failure of a write of our own buffer. */
  int left = errno, e;
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout))
    return rc;
  e = errno ? errno : out_errno ? out_errno : left ? left : EIO;
  fprintf(stderr, "sluice%s%s: write error: %s\n", cmd ? " " : "",
          cmd ? cmd : "", strerror(e));
  return CLI_RUNTIME;
}

int cli_store_arg(const char *cmd, const char *opt, const char *v) {
  if (v[0])
    return 0;
  fprintf(stderr, "sluice %s: %s: expected a store (mem, shm:name=/NAME, "
                  "lmdb:path=DIR, redis:nodes=H:P), got ''\n", cmd, opt);
  return -1;
}

FILE *cli_open_input(const char *cmd, const char *path) {
  struct stat st;
  FILE *f;
  if (!strcmp(path, "-"))
    return stdin;
  f = fopen(path, "rb");
  if (f && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    f = NULL;
    errno = EISDIR;
  }
  if (!f)
    fprintf(stderr, "sluice %s: cannot read '%s': %s\n", cmd, path,
            strerror(errno));
  return f;
}

int cli_read_lines(FILE *in, const cli_lines *cb, long *nlines) {
  static char buf[1 << 20];
  size_t have = 0;
  long lineno = 0;
  int skipping = 0, rc = CLI_OK;
  for (;;) {
    size_t got = fread(buf + have, 1, sizeof buf - have, in), start = 0;
    const char *nl;
    int eof = got == 0;
    if (eof && ferror(in)) {
      fprintf(stderr, "sluice %s: read error: %s\n", cb->cmd,
              strerror(errno));
      rc = CLI_RUNTIME;
      break;
    }
    have += got;
    if (skipping) { /* the rest of a line too long to hold */
      if (!(nl = memchr(buf, '\n', have))) {
        have = 0;
        if (eof)
          break;
        continue;
      }
      start = (size_t)(nl - buf) + 1;
      skipping = 0;
    }
    while (start < have &&
           (nl = memchr(buf + start, '\n', have - start)) != NULL) {
      size_t i = (size_t)(nl - buf);
      if ((rc = cb->line(cb->ud, buf + start, i - start, ++lineno)))
        goto out;
      start = i + 1;
    }
    if (eof && start < have &&
        (rc = cb->line(cb->ud, buf + start, have - start, ++lineno)))
      break;
    if (cb->block_done && (rc = cb->block_done(cb->ud)))
      break;
    if (eof)
      break;
    if (start == 0 && have == sizeof buf) {
      /* Not a line of a log: malformed like any other, and skipped. */
      cb->too_long(cb->ud, ++lineno);
      skipping = 1;
      have = 0;
      continue;
    }
    memmove(buf, buf + start, have - start);
    have -= start;
  }
out:
  *nlines = lineno;
  return rc;
}

int64_t cli_setting(const sluice_policy_config *c, const char *path) {
  char v[32];
  return sluice_policy_config_get(c, path, v, sizeof v) == SLUICE_OK
             ? strtoll(v, NULL, 10)
             : 0;
}

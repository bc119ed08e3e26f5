/*
** Full-width integers for libconfig 1.5.
**
** libconfig 1.5 (Debian 12) reads an integer literal without an `L` suffix
** as a C int: `burst = 4294967306` loads as 10 and `burst = 3000000000` as
** a negative number, and an `L` literal past 2^63 - 1 saturates.  Nothing
** says so.  The settings of a policy are 64-bit (bursts up to 2^40), so
** before libconfig sees the text, every integer literal is checked here:
**
**   fits in 32 bits           left as it is;
**   fits in 64 bits           an `L` is appended, so libconfig reads it
**                             at full width (the number a user wrote is the
**                             number loaded, with or without the suffix);
**   does not fit in 64 bits   refused, with its line.
**
** The scan follows libconfig's lexer: comments (#, //, slash-star), strings
** with backslash escapes, names (which may hold digits: level1_box_s),
** floats (a '.' or an exponent), decimal and 0x hex integers with an
** optional L or LL.  Appending never adds a line, so libconfig's line
** numbers stay those of the file.  `@include` is refused: the included
** file would be read without this check.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '*';
}
static int is_name(char c) {
  return is_name_start(c) || is_digit(c) || c == '_' || c == '-';
}

int sluice__conf_name(const char *n) {
  if (!is_name_start(*n))
    return 0;
  while (*++n)
    if (!is_name(*n))
      return 0;
  return 1;
}

typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

static int put(buf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    char *q;
    while (cap < b->n + n + 1)
      cap *= 2;
    q = realloc(b->p, cap);
    if (!q)
      return SLUICE_ENOMEM;
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
  return SLUICE_OK;
}

/* Magnitude of the digits in [s, e), or UINT64_MAX + "over" when it does
** not fit in 64 bits. */
static uint64_t magnitude(const char *s, const char *e, int base, int *over) {
  uint64_t v = 0;
  *over = 0;
  for (; s < e; s++) {
    unsigned d = is_digit(*s)               ? (unsigned)(*s - '0')
                 : (*s >= 'a' && *s <= 'f') ? (unsigned)(*s - 'a' + 10)
                                            : (unsigned)(*s - 'A' + 10);
    if (v > (UINT64_MAX - d) / (uint64_t)base) {
      *over = 1;
      return UINT64_MAX;
    }
    v = v * (uint64_t)base + d;
  }
  return v;
}

int sluice__conf_widen(const char *in, size_t n, char **out, int *line,
                       char *what, size_t whatlen) {
  const char *p = in, *end = in + n, *copied = in;
  buf b = {NULL, 0, 0};
  int ln = 1, rc = SLUICE_OK;

  *out = NULL;
  *line = 0;
  if (whatlen)
    what[0] = '\0';
#define FAIL(...)                                                              \
  do {                                                                         \
    *line = ln;                                                                \
    if (whatlen)                                                               \
      snprintf(what, whatlen, __VA_ARGS__);                                    \
    free(b.p);                                                                 \
    return SLUICE_ECONFIG;                                                     \
  } while (0)
  while (p < end) {
    char c = *p;
    if (c == '\n') {
      ln++;
      p++;
    } else if (c == '#' || (c == '/' && p + 1 < end && p[1] == '/')) {
      while (p < end && *p != '\n')
        p++;
    } else if (c == '/' && p + 1 < end && p[1] == '*') {
      for (p += 2; p < end && !(*p == '*' && p + 1 < end && p[1] == '/'); p++)
        ln += *p == '\n';
      p = p < end ? p + 2 : end;
    } else if (c == '"') {
      for (p++; p < end && *p != '"'; p++) {
        if (*p == '\\' && p + 1 < end)
          p++;
        ln += *p == '\n';
      }
      p = p < end ? p + 1 : end;
    } else if (c == '@' && (size_t)(end - p) >= 8 &&
               memcmp(p, "@include", 8) == 0 &&
               (p + 8 == end || !is_name(p[8]))) {
      /* Only the directive: any other '@' is libconfig's syntax error,
      ** with its line. */
      FAIL("@include is not supported: the policy must be one file");
    } else if (is_name_start(c)) {
      while (p < end && is_name(*p))
        p++;
    } else if (is_digit(c) ||
               ((c == '-' || c == '+') && p + 1 < end && is_digit(p[1]))) {
      const char *start = p, *ds, *de;
      int neg = c == '-', base = 10, over, suffix = 0;
      uint64_t mag, lim32, lim64;
      if (c == '-' || c == '+')
        p++;
      if (p + 1 < end && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
          p + 2 < end && is_hex(p[2])) {
        base = 16;
        p += 2;
        ds = p;
        while (p < end && is_hex(*p))
          p++;
      } else {
        ds = p;
        while (p < end && is_digit(*p))
          p++;
        if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) {
          /* A float: skip it whole (libconfig reads doubles itself). */
          if (*p == '.')
            for (p++; p < end && is_digit(*p); p++)
              ;
          if (p < end && (*p == 'e' || *p == 'E')) {
            p++;
            if (p < end && (*p == '-' || *p == '+'))
              p++;
            while (p < end && is_digit(*p))
              p++;
          }
          continue;
        }
      }
      de = p;
      if (p < end && *p == 'L') {
        suffix = 1;
        p++;
        if (p < end && *p == 'L')
          p++;
      }
      mag = magnitude(ds, de, base, &over);
      /* Hex is read as a bit pattern: 0xffffffff is -1 to libconfig. */
      lim32 = base == 16 ? INT32_MAX : neg ? (uint64_t)INT32_MAX + 1 : INT32_MAX;
      lim64 = neg && base == 10 ? (uint64_t)INT64_MAX + 1 : INT64_MAX;
      if (over || mag > lim64)
        FAIL("%.*s does not fit in a 64-bit integer", (int)(p - start > 40 ? 40 : p - start),
             start);
      if (!suffix && mag > lim32) {
        if ((rc = put(&b, copied, (size_t)(de - copied))) != SLUICE_OK ||
            (rc = put(&b, "L", 1)) != SLUICE_OK) {
          free(b.p);
          return rc;
        }
        copied = de;
      }
    } else {
      p++;
    }
  }
#undef FAIL
  if ((rc = put(&b, copied, (size_t)(end - copied))) != SLUICE_OK) {
    free(b.p);
    return rc;
  }
  *out = b.p;
  return SLUICE_OK;
}

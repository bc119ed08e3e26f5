#include "secret_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int ex_hex_digit(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int ex_read_secret_file(const char *path, uint8_t out[16], char *err,
                        size_t errlen) {
  char buf[128];
  size_t n, i, j = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "cannot open: %s", strerror(errno));
    return -1;
  }
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  for (i = 0; i < n; i++) {
    int h, l;
    if (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')
      continue;
    if (j == 16 || i + 1 >= n || (h = ex_hex_digit(buf[i])) < 0 ||
        (l = ex_hex_digit(buf[i + 1])) < 0) {
      snprintf(err, errlen, "expected 32 hex digits");
      return -1;
    }
    out[j++] = (uint8_t)(h * 16 + l);
    i++;
  }
  if (j != 16) {
    snprintf(err, errlen, "expected 32 hex digits, got %zu", j * 2);
    return -1;
  }
  return 0;
}

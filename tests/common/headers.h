/*
** An answer's headers as text, for the tests and trace programs that print
** or compare them: each (name, value) through fmt (two %s), one after the
** other into out (len bytes, NUL-terminated, cut when full).
*/
#ifndef SLUICE_TEST_HEADERS_H
#define SLUICE_TEST_HEADERS_H

#include <stdio.h>

#include <sluice.h>

static inline int headers_text(const sluice_http *h,
                               const sluice_http_answer *a, const char *fmt,
                               char *out, size_t len) {
  sluice_http_header hv[SLUICE_HTTP_MAX_HEADERS];
  char buf[SLUICE_HTTP_HEADER_BUF];
  size_t n = 0, i, used = 0;
  int rc = sluice_http_answer_headers(h, a, hv, SLUICE_HTTP_MAX_HEADERS, &n,
                                      buf, sizeof buf, NULL);
  out[0] = '\0';
  for (i = 0; rc == SLUICE_OK && i < n && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, fmt, hv[i].name,
                             hv[i].value);
  return rc;
}

#endif

/* http_strict: see http_strict.h. */
#include "http_strict.h"

#include <string.h>
#include <strings.h>

#define HEAD_MAX ((size_t)1 << 20) /* farther apart: not one buffer */

void http_strict_uri_seen(http_strict_uri *u, const char *uri) {
  /* Only now: the path is decoded in place before the access handler. */
  size_t path = strcspn(uri, "?"), i;
  u->start = uri;
  u->len = strlen(uri);
  u->pct_nul = 0;
  for (i = 0; i + 2 < path; i++)
    if (uri[i] == '%' && uri[i + 1] == '0' && uri[i + 2] == '0')
      u->pct_nul = 1;
}

/* After a line's last character: CRLF left two NULs, a bare LF one.
** Trailing blanks the parser trimmed may sit in between. */
static int bare_lf_after(const char *p) {
  int nuls = 0;
  size_t i;
  for (i = 0; i < 256 && (p[i] == ' ' || p[i] == '\t' || !p[i]); i++)
    nuls = p[i] ? 0 : nuls + 1;
  return i < 256 && nuls == 1;
}

typedef struct scan {
  int content_length, transfer_encoding, bare_lf;
} scan;

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind,
                                   const char *key, size_t key_size,
                                   const char *value, size_t value_size) {
  scan *s = cls;
  (void)kind;
  if (key_size == 14 && !strncasecmp(key, "Content-Length", 14))
    s->content_length++;
  if (key_size == 17 && !strncasecmp(key, "Transfer-Encoding", 17))
    s->transfer_encoding++;
  if (value && bare_lf_after(value + value_size))
    s->bare_lf = 1;
  return MHD_YES;
}

const char *http_strict_check(struct MHD_Connection *c,
                              const http_strict_uri *u, const char *version) {
  scan s = {0, 0, 0};
  if (u->pct_nul)
    return "the path contains %00";
  if (u->start) {
    /* The version follows the target and one space, unless a NUL cut the
    ** target short. */
    if (version > u->start && (size_t)(version - u->start) < HEAD_MAX &&
        (size_t)(version - u->start) != u->len + 1)
      return "the request line contains a NUL or stray whitespace";
  }
  if (version && bare_lf_after(version + strlen(version)))
    return "the request line ends with a bare LF";
  MHD_get_connection_values_n(c, MHD_HEADER_KIND, each_header, &s);
  if (s.bare_lf)
    return "a header line ends with a bare LF";
  if (s.content_length > 1)
    return "more than one Content-Length";
  if (s.content_length && s.transfer_encoding)
    return "both Content-Length and Transfer-Encoding";
  return NULL;
}

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

#if MHD_VERSION < 0x01000000
/* The head is [start, end) in libmicrohttpd's buffer; a line's content
** ends at p, where its terminator begins (now NULs: two for CRLF, one for
** a bare LF).  The last line is followed by the empty line that ends the
** head, so CRLF CRLF leaves four NULs up to `end`, and a bare LF in
** either fewer.  NULL: fine, or p is not in the head (nothing known). */
static const char *line_end(const char *p, const char *start, const char *end,
                            const char *what_bare_lf) {
  size_t n = 0;
  if (!end || p < start || p >= end)
    return NULL;
  while (p + n < end && !p[n])
    n++;
  if (p + n == end)
    return n == 4 ? NULL
           : n < 4 ? "the header block ends with a bare LF"
                   : "a NUL ends the last header line";
  if (n == 1)
    return what_bare_lf;
  if (n > 2)
    return "a header line contains a NUL or has no field name";
  /* RFC 9112 5.2: a server rejects obs-fold (or replaces it, which
  ** libmicrohttpd 0.9.75 gets wrong: it splices the fold into the name). */
  if (p[n] == ' ' || p[n] == '\t')
    return "a header line is folded (obs-fold) or starts with whitespace";
  return NULL;
}
#endif

typedef struct scan {
  int content_length, transfer_encoding;
  const char *start, *end, *why;
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
  /* "Transfer-Encoding : chunked" is not Transfer-Encoding to
  ** libmicrohttpd, and may be to a proxy in front (RFC 9112 5.1: MUST
  ** reject); a bare CR is a line end to some readers (RFC 9112 2.2). */
  if (!s->why && (memchr(key, ' ', key_size) || memchr(key, '\t', key_size)))
    s->why = "whitespace in a header field name";
  if (!s->why && value && memchr(value, '\r', value_size))
    s->why = "a bare CR in a header line";
#if MHD_VERSION < 0x01000000
  if (!s->why && value)
    s->why = line_end(value + value_size, s->start, s->end,
                      "a header line ends with a bare LF or contains a NUL");
#else
  (void)value;
  (void)value_size;
#endif
  return MHD_YES;
}

const char *http_strict_check(struct MHD_Connection *c,
                              const http_strict_uri *u, const char *method,
                              const char *version) {
  scan s;
  memset(&s, 0, sizeof s);
  if (u->pct_nul)
    return "the path contains %00";
  if (u->start) {
    /* The version follows the target and one space, unless a NUL cut the
    ** target short. */
    if (version > u->start && (size_t)(version - u->start) < HEAD_MAX &&
        (size_t)(version - u->start) != u->len + 1)
      return "the request line contains a NUL or stray whitespace";
  }
#if MHD_VERSION < 0x01000000
  {
    /* The head's size in bytes, from its first (the method's) to just
    ** past the empty line: where the last line's terminator must end. */
    const union MHD_ConnectionInfo *hs =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (hs && method && hs->header_size < HEAD_MAX) {
      s.start = method;
      s.end = method + hs->header_size;
    }
    if (version && s.end)
      s.why = line_end(version + strlen(version), s.start, s.end,
                       "the request line ends with a bare LF");
  }
#else
  (void)method;
#endif
  MHD_get_connection_values_n(c, MHD_HEADER_KIND, each_header, &s);
  if (s.why)
    return s.why;
  if (s.content_length > 1)
    return "more than one Content-Length";
  if (s.content_length && s.transfer_encoding)
    return "both Content-Length and Transfer-Encoding";
  return NULL;
}

/*
** http_strict: refuse request framing that proxies and servers may read
** differently (request smuggling, path confusion), which libmicrohttpd
** 0.9.75 accepts: two Content-Length headers, Content-Length together
** with Transfer-Encoding, a bare LF ending the request line or a header
** line, a NUL in the path (raw, or %00 that decoding would turn into one).
** libmicrohttpd itself refuses HTTP/1.1 without Host when given
** MHD_OPTION_STRICT_FOR_CLIENT 1.
**
** libmicrohttpd offers no raw view of the request head, but it parses in
** place: it ends every line by overwriting its CR and LF with NULs, and
** the URI and version strings it hands out point into that buffer.  The
** bare-LF and raw-NUL checks read those bytes; where the layout is not as
** expected they conclude nothing (and refuse nothing).
*/
#ifndef LEDGER_HTTP_STRICT_H
#define LEDGER_HTTP_STRICT_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <microhttpd.h>

/* What the URI log callback saw of the raw request target. */
typedef struct http_strict_uri {
  const char *start; /* the target in libmicrohttpd's buffer */
  size_t len;        /* up to its first NUL */
  int pct_nul;       /* %00 in the path */
} http_strict_uri;

/* Called from the URI log callback (before any decoding). */
void http_strict_uri_seen(http_strict_uri *u, const char *uri);

/* NULL when the request head is acceptable, else why not.  `version` is
** the access handler's argument; call on its first call for a request. */
const char *http_strict_check(struct MHD_Connection *c,
                              const http_strict_uri *u, const char *version);

#endif

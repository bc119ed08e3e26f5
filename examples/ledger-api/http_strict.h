/*
** http_strict: refuse request framing that proxies and servers may read
** differently (request smuggling, path confusion), which libmicrohttpd
** 0.9.75 accepts: two Content-Length headers, Content-Length together
** with Transfer-Encoding, a bare LF ending any line of the head, obs-fold,
** whitespace before a header's colon, a bare CR or a NUL in a header line,
** a NUL in the path (raw, or %00 that decoding would turn into one).
** libmicrohttpd itself refuses HTTP/1.1 without Host when given
** MHD_OPTION_STRICT_FOR_CLIENT 1.
**
** libmicrohttpd offers no raw view of the request head, but it parses in
** place: it ends every line by overwriting its CR and LF with NULs, and
** the method, URI, version and header strings it hands out point into
** that buffer; MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE says where the head
** ends.  So every line's terminator can be read back: two NULs after a
** line (CRLF), one (a bare LF), and after the last line, with the empty
** line that ends the head, exactly four up to the head's end (CRLF CRLF;
** "\n\r\n", "\r\n\n" and "\n\n" leave fewer).  This covers every request,
** also the second on a kept-alive connection and pipelined ones, which a
** look at the socket before libmicrohttpd reads it would not.  Where a
** string is not inside the head they conclude nothing.  From
** libmicrohttpd 1.0, MHD_OPTION_STRICT_FOR_CLIENT 1 refuses bare LF
** itself, and only the other checks are compiled.
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

/* NULL when the request head is acceptable, else why not.  `method` and
** `version` are the access handler's arguments; call on its first call for
** a request. */
const char *http_strict_check(struct MHD_Connection *c,
                              const http_strict_uri *u, const char *method,
                              const char *version);

#endif

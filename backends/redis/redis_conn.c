/*
** The Redis store's transport (see redis_conn.h): store-string knobs for
** connecting, `redis://` URLs, and one connection's life: TCP or unix
** socket by hiredis, TLS by OpenSSL on the same descriptor, then AUTH and
** SELECT.
**
** Choices:
**  a) TLS verifies the server's certificate against tls_ca (or the system
**     store) and its name (tls_name, or the node's host; an IP literal is
**     matched against the certificate's IP addresses) on every connection.
**     There is no switch to turn verification off, and no fallback: a TLS
**     store that meets a plaintext port fails its handshake.
**  b) A node that answers but refuses us (AUTH, certificate, SELECT) is a
**     different failure from a node that does not answer: the first is a
**     configuration error the store reports at open, the second is an
**     outage the store rides out (see rcl_open).
**  c) Passwords never appear in an error message, and are wiped at close.
*/
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/sds.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "redis_conn.h"
#include "sluice.h"
#include "store.h"

int sluice__rcl_is_timeout_errno(int e) {
  return e == EAGAIN || e == EWOULDBLOCK || e == ETIMEDOUT || e == EINPROGRESS;
}

static struct timeval ms_tv(int ms) {
  struct timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

/* ------------------------------------------------------------ URLs --- */

/* Percent-decode p[0..n) into out (NUL-terminated); -1 if malformed or too
** long. */
static int pct_decode(const char *p, size_t n, char *out, size_t cap) {
  size_t i, o = 0;
  for (i = 0; i < n; i++) {
    int c = (unsigned char)p[i];
    if (c == '%') {
      char hex[3] = {0, 0, 0};
      if (i + 2 >= n || !isxdigit((unsigned char)p[i + 1]) ||
          !isxdigit((unsigned char)p[i + 2]))
        return -1;
      memcpy(hex, p + i + 1, 2);
      c = (int)strtol(hex, NULL, 16);
      i += 2;
    }
    if (c == 0 || o + 1 >= cap)
      return -1;
    out[o++] = (char)c;
  }
  out[o] = '\0';
  return (int)o;
}

static int url_err(sluice_store *s, const char *why) {
  return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                             "redis: bad URL (%s); want redis[s]://[user[:"
                             "password]@]host[:port][,host:port...][/db]"
                             "[?name=value&...]",
                             why);
}

int sluice__rcl_url_rewrite(sluice_store *s, const char *url, rcl_conf *cf,
                            char *out, size_t outlen) {
  const char *p = url + 2, *auth_end, *at = NULL, *q;
  size_t o = 0;
  int n;
#define PUT(...)                                                               \
  do {                                                                         \
    n = snprintf(out + o, outlen - o, __VA_ARGS__);                           \
    if (n < 0 || (size_t)n >= outlen - o)                                      \
      return url_err(s, "too long");                                           \
    o += (size_t)n;                                                            \
  } while (0)
  auth_end = p + strcspn(p, "/?");
  for (q = p; q < auth_end; q++)
    if (*q == '@')
      at = q;
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    const char *uend = colon ? colon : at;
    if (pct_decode(p, (size_t)(uend - p), cf->user, sizeof cf->user) < 0)
      return url_err(s, "user name");
    if (colon) {
      n = pct_decode(colon + 1, (size_t)(at - colon - 1), cf->password,
                     sizeof cf->password);
      if (n < 0)
        return url_err(s, "password");
      cf->password_len = (size_t)n;
    }
    p = at + 1;
  }
  if (p == auth_end)
    return url_err(s, "no host");
  PUT("nodes=");
  while (p < auth_end) {
    const char *e = memchr(p, ',', (size_t)(auth_end - p)), *hend, *port;
    if (!e)
      e = auth_end;
    if (*p == '[') { /* [v6]:port */
      hend = memchr(p, ']', (size_t)(e - p));
      if (!hend)
        return url_err(s, "unclosed '['");
      port = hend + 1 < e && hend[1] == ':' ? hend + 2 : NULL;
      PUT("%s%.*s", o > 6 ? "," : "", (int)(hend - p - 1), p + 1);
    } else {
      hend = memchr(p, ':', (size_t)(e - p));
      port = hend ? hend + 1 : NULL;
      if (!hend)
        hend = e;
      PUT("%s%.*s", o > 6 ? "," : "", (int)(hend - p), p);
    }
    if (port)
      PUT(":%.*s", (int)(e - port), port);
    else
      PUT(":6379");
    p = e < auth_end ? e + 1 : e;
  }
  if (*p == '/') {
    size_t dl = strcspn(p + 1, "?");
    if (dl > 0)
      PUT(";db=%.*s", (int)dl, p + 1);
    p += 1 + dl;
  }
  if (*p == '?') {
    p++;
    while (*p) {
      size_t seg = strcspn(p, "&");
      char dec[RCL_PATH_MAX + 32];
      if (seg > 0) {
        if (pct_decode(p, seg, dec, sizeof dec) < 0 || strchr(dec, ';'))
          return url_err(s, "query parameter");
        if (strncmp(dec, "nodes=", 6) == 0)
          return url_err(s, "nodes go in the host part");
        PUT(";%s", dec);
      }
      p += seg + (p[seg] == '&');
    }
  }
  return SLUICE_OK;
#undef PUT
}

/* -------------------------------------------------------- knobs --- */

static int str_param(sluice_store *s, const char *params, const char *name,
                     char *out, size_t cap) {
  const char *v;
  size_t len;
  if (sluice_uri_param(params, name, &v, &len) != SLUICE_OK)
    return 0;
  if (len == 0 || len >= cap)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: %s must be 1..%zu bytes", name,
                               cap - 1);
  memcpy(out, v, len);
  out[len] = '\0';
  return 1;
}

static int read_password_file(sluice_store *s, const char *path,
                              rcl_conf *cf) {
  FILE *f = fopen(path, "rb");
  size_t n;
  if (!f)
    return sluice_store_seterr(s, SLUICE_ECONFIG, errno,
                               "redis: password_file '%.100s': %s", path,
                               strerror(errno));
  n = fread(cf->password, 1, sizeof cf->password, f);
  fclose(f);
  /* One line: the password, with or without its newline. */
  while (n > 0 && (cf->password[n - 1] == '\n' || cf->password[n - 1] == '\r'))
    n--;
  if (n == 0 || n >= sizeof cf->password ||
      memchr(cf->password, '\n', n)) {
    explicit_bzero(cf->password, sizeof cf->password);
    return sluice_store_seterr(s, SLUICE_ECONFIG, 0,
                               "redis: password_file '%.100s' must hold one "
                               "line of 1..%zu bytes",
                               path, sizeof cf->password - 1);
  }
  cf->password[n] = '\0';
  cf->password_len = n;
  return SLUICE_OK;
}

static int tls_err(sluice_store *s, const char *what, const char *path) {
  char buf[160];
  unsigned long e = ERR_peek_last_error();
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return sluice_store_seterr(s, SLUICE_ECONFIG, (int)e,
                             "redis: %s '%.80s': %s", what, path, buf);
}

static int tls_ctx(sluice_store *s, rcl_conf *cf, const char *ca,
                   const char *cert, const char *key) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  ERR_clear_error();
  if (!ctx)
    return sluice_store_seterr(s, SLUICE_ENOMEM, 0,
                               "redis: cannot create a TLS context");
  cf->ssl_ctx = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
  /* A reply is read in one read() instead of a record header and then its
  ** body: every decision is a round trip, so system calls count. */
  SSL_CTX_set_read_ahead(ctx, 1);
  if (ca[0] ? SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1
            : SSL_CTX_set_default_verify_paths(ctx) != 1)
    return tls_err(s, "tls_ca", ca[0] ? ca : "(system store)");
  if (cert[0] && SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
    return tls_err(s, "tls_cert", cert);
  if (key[0] && (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
                 SSL_CTX_check_private_key(ctx) != 1))
    return tls_err(s, "tls_key", key);
  return SLUICE_OK;
}

int sluice__rcl_conf_parse(sluice_store *s, const char *params, int force_tls,
                           rcl_conf *cf) {
  char path[RCL_PATH_MAX], ca[RCL_PATH_MAX] = "", cert[RCL_PATH_MAX] = "",
                           key[RCL_PATH_MAX] = "";
  int64_t x;
  int rc, has_user = cf->user[0] != '\0', has_pw = cf->password_len > 0;
  const char *v;
  size_t len;

  if ((rc = str_param(s, params, "user", cf->user, sizeof cf->user)) < 0)
    return rc;
  if (rc && has_user)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: user given twice (URL and user=)");
  if (has_pw && sluice_uri_param(params, "password", &v, &len) == SLUICE_OK)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: password given twice");
  if ((rc = str_param(s, params, "password", cf->password,
                      sizeof cf->password)) < 0)
    return rc;
  if (rc) {
    cf->password_len = strlen(cf->password);
    has_pw = 1;
  }
  if ((rc = str_param(s, params, "password_file", path, sizeof path)) < 0)
    return rc;
  if (rc) {
    if (has_pw)
      return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                                 "redis: give password or password_file, "
                                 "not both");
    if ((rc = read_password_file(s, path, cf)) != SLUICE_OK)
      return rc;
  }
  if (cf->user[0] && !cf->password_len)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: user '%.60s' needs a password (password= "
                               "or password_file=)",
                               cf->user);
  if (sluice__uri_int(params, "db", 0, &x) != SLUICE_OK || x < 0 || x > 65535)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: db must be an integer in 0..65535");
  cf->db = (int)x;
  if ((rc = str_param(s, params, "socket", cf->socket, sizeof cf->socket)) < 0)
    return rc;
  if (rc && cf->socket[0] != '/')
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: socket must be an absolute path");
  if (sluice__uri_int(params, "tls", force_tls, &x) != SLUICE_OK || x < 0 ||
      x > 1)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0, "redis: tls must be 0 or 1");
  if (force_tls && !x)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: tls=0 contradicts rediss://");
  cf->tls = (int)x;
  if ((rc = str_param(s, params, "tls_ca", ca, sizeof ca)) < 0 ||
      (rc = str_param(s, params, "tls_cert", cert, sizeof cert)) < 0 ||
      (rc = str_param(s, params, "tls_key", key, sizeof key)) < 0 ||
      (rc = str_param(s, params, "tls_name", cf->tls_name,
                      sizeof cf->tls_name)) < 0)
    return rc;
  if (!cf->tls && (ca[0] || cert[0] || key[0] || cf->tls_name[0]))
    /* A CA given without tls=1 would otherwise connect in plaintext. */
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: tls_* parameters need tls=1 (or a "
                               "rediss:// URL)");
  if (!cert[0] != !key[0])
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: tls_cert and tls_key go together");
  if (cf->tls && cf->socket[0] && !cf->tls_name[0])
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "redis: TLS over a unix socket needs tls_name "
                               "(the name to verify)");
  if (cf->tls)
    return tls_ctx(s, cf, ca, cert, key);
  return SLUICE_OK;
}

void sluice__rcl_conf_free(rcl_conf *cf) {
  if (cf->ssl_ctx)
    SSL_CTX_free(cf->ssl_ctx);
  cf->ssl_ctx = NULL;
  explicit_bzero(cf->password, sizeof cf->password);
  cf->password_len = 0;
}

/* ---------------------------------------------------------- TLS I/O --- */

/* Turn a failed SSL call into hiredis's error fields and errno: a timeout
** reads as EAGAIN (what a socket timeout gives hiredis), the peer closing
** as REDIS_ERR_EOF, a TLS protocol failure as REDIS_ERR_OTHER. */
static int tls_io_fail(redisContext *c, SSL *ssl, int ret, int e) {
  int se = SSL_get_error(ssl, ret);
  unsigned long le = ERR_peek_last_error();
  if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) {
    c->err = REDIS_ERR_IO;
    e = EAGAIN;
    snprintf(c->errstr, sizeof c->errstr, "%s", strerror(e));
  } else if (se == SSL_ERROR_ZERO_RETURN || (se == SSL_ERROR_SYSCALL && !e)) {
    c->err = REDIS_ERR_EOF;
    snprintf(c->errstr, sizeof c->errstr, "Server closed the connection");
  } else if (se == SSL_ERROR_SYSCALL) {
    c->err = REDIS_ERR_IO;
    snprintf(c->errstr, sizeof c->errstr, "%s", strerror(e));
  } else {
    char buf[120];
    ERR_error_string_n(le, buf, sizeof buf);
    c->err = REDIS_ERR_OTHER;
    snprintf(c->errstr, sizeof c->errstr, "TLS: %s", buf);
  }
  ERR_clear_error();
  errno = e;
  return REDIS_ERR;
}

int sluice__rcl_link_write(redisContext *c, struct ssl_st *tls, int *done) {
  if (!tls)
    return redisBufferWrite(c, done);
  *done = 0;
  if (c->err)
    return REDIS_ERR;
  while (sdslen(c->obuf) > 0) {
    size_t len = sdslen(c->obuf);
    int n, e;
    ERR_clear_error();
    errno = 0;
    n = SSL_write(tls, c->obuf, len > 1 << 30 ? 1 << 30 : (int)len);
    e = errno;
    if (n <= 0)
      return tls_io_fail(c, tls, n, e);
    sdsrange(c->obuf, n, -1);
  }
  *done = 1;
  return REDIS_OK;
}

int sluice__rcl_link_reply(redisContext *c, struct ssl_st *tls, void **reply) {
  char buf[16 * 1024];
  int done = 0;
  if (!tls)
    return redisGetReply(c, reply);
  *reply = NULL;
  if (c->err)
    return REDIS_ERR;
  if (redisReaderGetReply(c->reader, reply) != REDIS_OK)
    goto proto;
  if (*reply)
    return REDIS_OK;
  if (sluice__rcl_link_write(c, tls, &done) != REDIS_OK)
    return REDIS_ERR;
  for (;;) {
    int n, e;
    ERR_clear_error();
    errno = 0;
    n = SSL_read(tls, buf, sizeof buf);
    e = errno;
    if (n <= 0)
      return tls_io_fail(c, tls, n, e);
    if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK ||
        redisReaderGetReply(c->reader, reply) != REDIS_OK)
      goto proto;
    if (*reply)
      return REDIS_OK;
  }
proto:
  c->err = REDIS_ERR_PROTOCOL;
  snprintf(c->errstr, sizeof c->errstr, "%s", c->reader->errstr);
  return REDIS_ERR;
}

/* ------------------------------------------------------- connecting --- */

static int is_ip_literal(const char *h) {
  unsigned char a[16];
  return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

static int tls_start(const rcl_conf *cf, const char *host, redisContext *c,
                     SSL **out, char *err, size_t n) {
  const char *name = cf->tls_name[0] ? cf->tls_name : host;
  SSL *ssl;
  int r, e, se;
  long vr;
  ERR_clear_error();
  ssl = SSL_new(cf->ssl_ctx);
  if (!ssl) {
    snprintf(err, n, "TLS: out of memory");
    return SLUICE_ENOMEM;
  }
  *out = ssl;
  /* The name checked against the certificate: an IP literal against its
  ** IP addresses, a host name against its DNS names (and sent as SNI). */
  if (is_ip_literal(name))
    r = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
  else
    r = SSL_set_tlsext_host_name(ssl, name) == 1 &&
        SSL_set1_host(ssl, name) == 1;
  if (r != 1 || SSL_set_fd(ssl, c->fd) != 1) {
    snprintf(err, n, "TLS: cannot set up the session for '%.60s'", name);
    return SLUICE_ECONFIG;
  }
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  errno = 0;
  r = SSL_connect(ssl);
  e = errno;
  if (r == 1)
    return SLUICE_OK;
  vr = SSL_get_verify_result(ssl);
  se = SSL_get_error(ssl, r);
  if (vr != X509_V_OK) {
    snprintf(err, n, "TLS: server certificate not accepted for '%.60s': %s",
             name, X509_verify_cert_error_string(vr));
    r = SLUICE_ECONFIG;
  } else if (se == SSL_ERROR_SSL) {
    char buf[120];
    ERR_error_string_n(ERR_peek_last_error(), buf, sizeof buf);
    snprintf(err, n, "TLS handshake failed (is this a TLS port?): %s", buf);
    r = SLUICE_ECONFIG;
  } else if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE ||
             sluice__rcl_is_timeout_errno(e)) {
    /* A plaintext Redis reads a ClientHello as the start of an inline
    ** command and waits for the rest: a timeout, not a refusal. */
    snprintf(err, n, "TLS handshake timed out (slow, or not a TLS port?)");
    r = SLUICE_ETIMEDOUT;
  } else {
    snprintf(err, n, "TLS handshake: %s",
             e ? strerror(e) : "connection closed");
    r = SLUICE_EUNAVAIL;
  }
  ERR_clear_error();
  return r;
}

/* Why a read or write on a connection being set up failed. */
static int setup_io_error(redisContext *c, SSL *tls, int e, const char *what,
                          char *err, size_t n) {
  if (c->err == REDIS_ERR_IO && sluice__rcl_is_timeout_errno(e)) {
    snprintf(err, n, "%s: %s", what, c->errstr);
    return SLUICE_ETIMEDOUT;
  }
  /* TLS 1.3 reports a refused client certificate after the handshake: an
  ** alert on the first read, or, when our first command crossed it, a
  ** reset.  A server that completed the handshake and then hung up is
  ** refusing us, not down. */
  if (tls) {
    snprintf(err, n, "%s: %s (after the TLS handshake: does the server "
             "want a client certificate?)", what, c->errstr);
    return SLUICE_ECONFIG;
  }
  snprintf(err, n, "%s: %s", what, c->errstr);
  return SLUICE_EUNAVAIL;
}

/* AUTH and SELECT, pipelined; over TLS always at least a PING, so that a
** refusal the server makes after the handshake shows up here. */
static int hello(const rcl_conf *cf, redisContext *c, SSL *tls, char *err,
                 size_t n) {
  const char *what[2];
  int nrep = 0, i, rc = SLUICE_OK;
  if (cf->password_len && cf->user[0])
    redisAppendCommand(c, "AUTH %s %b", cf->user, cf->password,
                       cf->password_len);
  else if (cf->password_len)
    redisAppendCommand(c, "AUTH %b", cf->password, cf->password_len);
  if (cf->password_len)
    what[nrep++] = "AUTH";
  if (cf->db > 0 && redisAppendCommand(c, "SELECT %d", cf->db) == REDIS_OK)
    what[nrep++] = "SELECT";
  if (nrep == 0 && tls && redisAppendCommand(c, "PING") == REDIS_OK)
    what[nrep++] = "PING";
  for (i = 0; i < nrep; i++) {
    void *v = NULL;
    redisReply *rep;
    int e;
    errno = 0;
    if (sluice__rcl_link_reply(c, tls, &v) != REDIS_OK || !v) {
      e = errno;
      return setup_io_error(c, tls, e, what[i], err, n);
    }
    rep = v;
    if (rep->type == REDIS_REPLY_ERROR && rc == SLUICE_OK) {
      if (strcmp(what[i], "AUTH") == 0) {
        snprintf(err, n, "AUTH%s%.60s refused: %.100s", cf->user[0] ? " as " : "",
                 cf->user, rep->str);
        rc = SLUICE_EPERM;
      } else if (strcmp(what[i], "SELECT") == 0) {
        snprintf(err, n, "SELECT %d refused: %.100s", cf->db, rep->str);
        rc = SLUICE_ECONFIG;
      } else {
        snprintf(err, n, "PING: %.100s", rep->str);
        /* NOAUTH: the server wants a password we were not given. */
        rc = strncmp(rep->str, "NOAUTH", 6) == 0 ? SLUICE_EPERM
                                                 : SLUICE_EUNAVAIL;
      }
    }
    freeReplyObject(rep);
  }
  return rc;
}

int sluice__rcl_link_open(const rcl_conf *cf, const char *host, int port,
                          redisContext **cp, struct ssl_st **tp, char *err,
                          size_t n) {
  redisContext *c;
  SSL *ssl = NULL;
  int e, rc;
  *cp = NULL;
  *tp = NULL;
  errno = 0;
  c = host ? redisConnectWithTimeout(host, port, ms_tv(cf->connect_timeout_ms))
           : redisConnectUnixWithTimeout(cf->socket,
                                         ms_tv(cf->connect_timeout_ms));
  e = errno;
  if (!c || c->err) {
    rc = (c && c->err == REDIS_ERR_IO && sluice__rcl_is_timeout_errno(e))
             ? SLUICE_ETIMEDOUT
             : SLUICE_EUNAVAIL;
    snprintf(err, n, "connect: %s", c ? c->errstr : "out of memory");
    if (c)
      redisFree(c);
    return rc;
  }
  /* The whole setup (handshake, AUTH, SELECT) runs under the connect
  ** budget; commands then get timeout_ms. */
  if (redisSetTimeout(c, ms_tv(cf->connect_timeout_ms)) != REDIS_OK) {
    snprintf(err, n, "cannot set the socket timeout");
    rc = SLUICE_EUNAVAIL;
  } else if (cf->tls &&
             (rc = tls_start(cf, host ? host : cf->socket, c, &ssl, err, n)) !=
                 SLUICE_OK) {
    /* rc set */
  } else if ((rc = hello(cf, c, ssl, err, n)) != SLUICE_OK) {
    /* rc set */
  } else if (redisSetTimeout(c, ms_tv(cf->timeout_ms)) != REDIS_OK) {
    snprintf(err, n, "cannot set the socket timeout");
    rc = SLUICE_EUNAVAIL;
  }
  if (rc != SLUICE_OK) {
    sluice__rcl_link_close(&c, &ssl);
    return rc;
  }
  *cp = c;
  *tp = ssl;
  return SLUICE_OK;
}

void sluice__rcl_link_close(redisContext **c, struct ssl_st **tls) {
  /* No SSL_shutdown: its close_notify would write on a descriptor a
  ** forked child shares with its parent.  SSL_free only frees memory and
  ** redisFree only closes the descriptor. */
  if (*tls)
    SSL_free(*tls);
  if (*c)
    redisFree(*c);
  *tls = NULL;
  *c = NULL;
}

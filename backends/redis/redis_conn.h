/*
** The Redis store's transport: how a connection to one node is made
** (TCP or a unix socket, TLS, AUTH, SELECT) and how bytes move over it.
** redis_route.c and redis_round.c route and pipeline; this layer only
** connects and carries.
**
** hiredis 0.14 (Debian 12) has no TLS.  hiredis still makes the TCP
** connection (name resolution, connect timeout, TCP_NODELAY) and stays the
** RESP codec (commands are appended to the context's output buffer, replies
** parsed by its redisReader); over TLS the bytes go through an OpenSSL
** session on the context's descriptor instead of hiredis's read()/write().
** A connection is a (redisContext *, SSL *) pair, the SSL NULL without TLS;
** sluice__rcl_link_write / sluice__rcl_link_reply are the two calls that
** differ, so plain and TLS connections share every other line.
*/
#ifndef SLUICE_REDIS_CONN_H
#define SLUICE_REDIS_CONN_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "sluice/backend.h"

struct ssl_st;
struct ssl_ctx_st;

#define RCL_USER_MAX 128
#define RCL_PASSWORD_MAX 512
#define RCL_PATH_MAX 256

/* How to connect, read-only once the store is open (shared by its lanes). */
typedef struct rcl_conf {
  char user[RCL_USER_MAX];         /* ACL user, "" for the default user */
  char password[RCL_PASSWORD_MAX]; /* "" for none; wiped at close */
  size_t password_len;
  int db;                          /* SELECT db when > 0 */
  char socket[RCL_PATH_MAX];       /* unix socket of the seed, or "" */
  int tls;
  char tls_name[256];              /* name to verify, "" = the node's host */
  struct ssl_ctx_st *ssl_ctx;
  int connect_timeout_ms, timeout_ms;
} rcl_conf;

/* The parameters this layer reads from the store string. */
#define RCL_CONN_PARAMS                                                        \
  "user", "password", "password_file", "db", "socket", "tls", "tls_ca",       \
      "tls_cert", "tls_key", "tls_name"

/* A `redis://[user[:password]@]host[:port][/db][?k=v&...]` URL (the part
** after "redis:" or "rediss:", starting with "//") rewritten as the store's
** own "k=v;k=v" form into out (user and password, percent-decoded, go
** straight into cf: they may hold ';').  Returns SLUICE_OK or SLUICE_EINVAL
** with the reason in s. */
int sluice__rcl_url_rewrite(sluice_store *s, const char *url, rcl_conf *cf,
                            char *out, size_t outlen);

/* Reads user, password / password_file, db, socket and the tls_* knobs
** (tls forced on by force_tls, the "rediss" scheme) and builds the TLS
** context.  On failure: a code and the reason in s; call
** sluice__rcl_conf_free. */
int sluice__rcl_conf_parse(sluice_store *s, const char *params, int force_tls,
                           rcl_conf *cf);
void sluice__rcl_conf_free(rcl_conf *cf);

/* Connect to host:port (or cf->socket when host is NULL), TLS handshake,
** AUTH and SELECT.  SLUICE_OK; SLUICE_EUNAVAIL or SLUICE_ETIMEDOUT when
** the node cannot be reached (try again later); SLUICE_EPERM (AUTH
** refused) or SLUICE_ECONFIG (certificate or host name not accepted, not a
** TLS port, SELECT refused) when it answered and said no.  errbuf gets the
** reason, never the password. */
int sluice__rcl_link_open(const rcl_conf *cf, const char *host, int port,
                          redisContext **c, struct ssl_st **tls, char *errbuf,
                          size_t errlen);

/* EAGAIN and friends: what a socket timeout leaves in errno. */
int sluice__rcl_is_timeout_errno(int e);

/* Close without writing anything (safe on a link inherited across fork). */
void sluice__rcl_link_close(redisContext **c, struct ssl_st **tls);

/* hiredis's redisBufferWrite and redisGetReply, over the TLS session when
** tls is not NULL.  Errors set c->err, c->errstr and errno as hiredis
** does (a TLS read or write timing out looks like a socket timeout). */
int sluice__rcl_link_write(redisContext *c, struct ssl_st *tls, int *done);
int sluice__rcl_link_reply(redisContext *c, struct ssl_st *tls, void **reply);

#endif

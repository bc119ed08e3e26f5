/*
** ip_cap: how many connections (or requests in progress) each client
** address holds in this worker, with a ceiling.  libmicrohttpd's per-IP
** limit counts the connecting peer; behind a trusted proxy (--trust-
** forwarded) that is the proxy, so every client would share the proxy's
** allowance.  There the worker counts instead: a connection from a peer
** that is not a trusted proxy counts for the peer (ip_cap_accept and
** ip_cap_notify), and a request that came through a trusted proxy counts,
** while it is in progress, for the client address the proxy vouches for.
*/
#ifndef LEDGER_IP_CAP_H
#define LEDGER_IP_CAP_H
#include <microhttpd.h>
#include <sys/socket.h>

#include "realip.h"

typedef struct ip_cap ip_cap;

/* limit per address; proxies: the trusted proxies (borrowed).  NULL when
** out of memory. */
ip_cap *ip_cap_new(unsigned limit, const realip *proxies);
void ip_cap_free(ip_cap *c); /* NULL: no-op */

/* Take one for addr (text): 0, or -1 when addr holds the limit already or
** memory is short (nothing taken). */
int ip_cap_take(ip_cap *c, const char *addr);
/* Give back one taken for addr. */
void ip_cap_give(ip_cap *c, const char *addr);

/* MHD_AcceptPolicyCallback (cls: the ip_cap): refuses a peer that is not
** a trusted proxy and holds the limit. */
enum MHD_Result ip_cap_accept(void *cls, const struct sockaddr *addr,
                              socklen_t addrlen);
/* For MHD_OPTION_NOTIFY_CONNECTION: counts a connection from a peer that
** is not a trusted proxy from STARTED to CLOSED. */
void ip_cap_notify(ip_cap *c, struct MHD_Connection *conn,
                   enum MHD_ConnectionNotificationCode toe);

/* The address of a peer as text ("unknown" when not IPv4 or IPv6). */
void ip_cap_peer_text(const struct sockaddr *sa, char *out, size_t n);

#endif

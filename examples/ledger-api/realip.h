/*
** realip: the client address of a request that came through proxies, as
** nginx's realip module finds it with real_ip_recursive on.  The header
** X-Forwarded-For is a list each proxy appends its peer to, and any client
** can write a prefix of its own: only entries appended by a trusted proxy
** can be believed.  So when the connecting peer is a trusted proxy, the
** list is read from the right, trusted addresses skipped, and the first
** address that is not trusted is the client.  A peer that is not trusted
** is the client whatever the header says.
*/
#ifndef LEDGER_REALIP_H
#define LEDGER_REALIP_H
#include <stddef.h>
#include <stdint.h>

#define REALIP_MAX_NETS 32

typedef struct realip_net {
  int family; /* AF_INET or AF_INET6 */
  int prefix; /* bits */
  uint8_t addr[16];
} realip_net;

typedef struct realip {
  int n;
  realip_net nets[REALIP_MAX_NETS];
} realip;

/* Parse a comma-separated list of addresses and CIDR networks
** ("127.0.0.1,10.0.0.0/8,::1").  -1 with a message in err on bad input. */
int realip_parse(realip *r, const char *list, char *err, size_t errlen);

/* The client: `peer` is the connecting address as text, `xff` the
** X-Forwarded-For header or NULL.  Writes at most n bytes to out. */
void realip_client(const realip *r, const char *peer, const char *xff,
                   char *out, size_t n);

/* addr (text) is one of the trusted proxies. */
int realip_trusted(const realip *r, const char *addr);

#endif

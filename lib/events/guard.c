/*
** Which addresses a destination may have (include/sluice/webhook.h).
**
** A sink posts from inside the operator's network, so a URL that someone
** could set (a config, a tenant's hook) must not reach what only that
** network reaches: loopback services, the cloud metadata address
** (169.254.169.254, fd00:ec2::254) and private ranges, unless the
** operator allows them.  Two checks, because a name can resolve anywhere:
**  a) at open, the URL's scheme and, when the host is an address literal,
**     its range ("localhost" counts as loopback);
**  b) at connect, every address libcurl is about to connect to
**     (CURLOPT_OPENSOCKETFUNCTION in deliver.c), so a name resolving to a
**     refused range, or rebinding to one later, is refused too.
** IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are judged as the IPv4
** address they carry.  0.0.0.0/8, ::, multicast and broadcast are never
** a destination.
*/
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "sink.h"

enum { NEVER = -1, PUBLIC = 0 };

static int v4_class(uint32_t a) {
  if ((a >> 24) == 0 || (a >> 28) == 0xe || (a >> 28) == 0xf)
    return NEVER; /* 0/8, multicast, reserved and broadcast */
  if ((a >> 24) == 127)
    return SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  if ((a >> 16) == 0xa9fe)
    return SLUICE_WEBHOOK_ALLOW_LINK_LOCAL;
  if ((a >> 24) == 10 || (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 ||
      (a >> 22) == (100u << 2 | 1u))
    return SLUICE_WEBHOOK_ALLOW_PRIVATE; /* 10/8 172.16/12 192.168/16 100.64/10 */
  return PUBLIC;
}

static int v6_class(const unsigned char b[16]) {
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                           0xff, 0xff};
  static const unsigned char zero[16];
  if (!memcmp(b, mapped, sizeof mapped))
    return v4_class((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
                    (uint32_t)b[14] << 8 | b[15]);
  if (!memcmp(b, zero, 15) && b[15] == 1)
    return SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  if (!memcmp(b, zero, 16) || b[0] == 0xff)
    return NEVER; /* unspecified, multicast */
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
    return SLUICE_WEBHOOK_ALLOW_LINK_LOCAL; /* fe80::/10 */
  if ((b[0] & 0xfe) == 0xfc)
    return SLUICE_WEBHOOK_ALLOW_PRIVATE; /* fc00::/7, fd00:ec2::254 too */
  return PUBLIC;
}

static int allowed(int cls, unsigned allow) {
  return cls == PUBLIC || (cls > 0 && (allow & (unsigned)cls));
}

int sluice__sink_addr_ok(const struct sockaddr *sa, unsigned allow) {
  if (sa->sa_family == AF_INET)
    return allowed(
        v4_class(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr)),
        allow);
  if (sa->sa_family == AF_INET6)
    return allowed(
        v6_class(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr),
        allow);
  return 0;
}

static const char *range_name(int cls) {
  return cls == SLUICE_WEBHOOK_ALLOW_LOOPBACK     ? "loopback"
         : cls == SLUICE_WEBHOOK_ALLOW_LINK_LOCAL ? "link-local"
         : cls == SLUICE_WEBHOOK_ALLOW_PRIVATE    ? "private"
                                                  : "never a destination";
}

/* The class of a host as the URL spells it: an address literal's range,
** "localhost" (and *.localhost, RFC 6761) as loopback, other names public
** until they resolve. */
static int host_class(const char *host) {
  char buf[64];
  unsigned char a[16];
  size_t n = strlen(host), dot = sizeof ".localhost" - 1;
  if (host[0] == '[' && n > 2 && n - 2 < sizeof buf && host[n - 1] == ']') {
    memcpy(buf, host + 1, n - 2);
    buf[n - 2] = 0;
    if (strchr(buf, '%')) /* a zone id: only link-local has one */
      return SLUICE_WEBHOOK_ALLOW_LINK_LOCAL;
    return inet_pton(AF_INET6, buf, a) == 1 ? v6_class(a) : NEVER;
  }
  if (inet_pton(AF_INET, host, a) == 1)
    return v4_class((uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 |
                    (uint32_t)a[2] << 8 | a[3]);
  if (!strcasecmp(host, "localhost") || !strcasecmp(host, "localhost.") ||
      (n > dot && !strcasecmp(host + n - dot, ".localhost")))
    return SLUICE_WEBHOOK_ALLOW_LOOPBACK;
  return PUBLIC;
}

int sluice__sink_url_ok(const char *url, int email, unsigned allow, char *err,
                        size_t errlen) {
  CURLU *u = curl_url();
  char *scheme = NULL, *host = NULL;
  int rc = SLUICE_EINVAL, cls;
  if (!u) {
    snprintf(err, errlen, "out of memory");
    return SLUICE_ENOMEM;
  }
  if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
    snprintf(err, errlen, "\"%s\" is not a URL", url);
  } else if (email ? strcmp(scheme, "smtp") && strcmp(scheme, "smtps")
                   : strcmp(scheme, "http") && strcmp(scheme, "https")) {
    snprintf(err, errlen, "\"%s\": expected %s", url,
             email ? "smtp:// or smtps://" : "http:// or https://");
  } else if (!allowed(cls = host_class(host), allow)) {
    snprintf(err, errlen, "\"%s\": %s is %s%s", url, host, range_name(cls),
             cls > 0 ? " (refused unless allowed)" : "");
  } else {
    rc = SLUICE_OK;
  }
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  return rc;
}

/* realip: see realip.h. */
#include "realip.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An address in text form; 0 when it is not one. */
static int parse_addr(const char *s, size_t len, int *family,
                      uint8_t addr[16]) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (len == 0 || len >= sizeof buf)
    return 0;
  memcpy(buf, s, len);
  buf[len] = 0;
  memset(addr, 0, 16);
  if (inet_pton(AF_INET, buf, addr) == 1) {
    *family = AF_INET;
    return 1;
  }
  if (inet_pton(AF_INET6, buf, addr) == 1) {
    *family = AF_INET6;
    return 1;
  }
  return 0;
}

static int in_net(const realip_net *net, int family, const uint8_t *a) {
  int full = net->prefix / 8, rest = net->prefix % 8;
  if (family != net->family || memcmp(a, net->addr, (size_t)full) != 0)
    return 0;
  return rest == 0 ||
         ((a[full] ^ net->addr[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static int trusted(const realip *r, int family, const uint8_t *a) {
  int i;
  for (i = 0; i < r->n; i++)
    if (in_net(&r->nets[i], family, a))
      return 1;
  return 0;
}

int realip_trusted(const realip *r, const char *addr) {
  uint8_t a[16];
  int family;
  return parse_addr(addr, strlen(addr), &family, a) && trusted(r, family, a);
}

int realip_parse(realip *r, const char *list, char *err, size_t errlen) {
  const char *p = list;
  r->n = 0;
  while (*p) {
    size_t len = strcspn(p, ","), alen = len;
    const char *slash = memchr(p, '/', len);
    realip_net *net = &r->nets[r->n];
    int max;
    if (slash)
      alen = (size_t)(slash - p);
    if (r->n == REALIP_MAX_NETS ||
        !parse_addr(p, alen, &net->family, net->addr)) {
      snprintf(err, errlen, "'%.*s': expected an address or a network "
               "(ADDR/BITS), at most %d", (int)len, p, REALIP_MAX_NETS);
      return -1;
    }
    max = net->family == AF_INET ? 32 : 128;
    net->prefix = max;
    if (slash) {
      char *end;
      long bits = strtol(slash + 1, &end, 10);
      if (end != p + len || end == slash + 1 || bits < 0 || bits > max) {
        snprintf(err, errlen, "'%.*s': the prefix must be 0..%d", (int)len, p,
                 max);
        return -1;
      }
      net->prefix = (int)bits;
    }
    r->n++;
    p += len;
    if (*p == ',')
      p++;
  }
  if (!r->n) {
    snprintf(err, errlen, "no address given");
    return -1;
  }
  return 0;
}

void realip_client(const realip *r, const char *peer, const char *xff,
                   char *out, size_t n) {
  uint8_t a[16];
  int family;
  const char *end;
  snprintf(out, n, "%s", peer);
  if (!xff || !parse_addr(peer, strlen(peer), &family, a) ||
      !trusted(r, family, a))
    return;
  /* Right to left: each trusted hop vouches for the entry before it. */
  end = xff + strlen(xff);
  while (end > xff) {
    const char *start = end, *s, *e;
    while (start > xff && start[-1] != ',')
      start--;
    for (s = start; s < end && (*s == ' ' || *s == '\t'); s++)
      ;
    for (e = end; e > s && (e[-1] == ' ' || e[-1] == '\t'); e--)
      ;
    /* Not an address: the hop that appended it is as far as we can go. */
    if (!parse_addr(s, (size_t)(e - s), &family, a))
      return;
    snprintf(out, n, "%.*s", (int)(e - s), s);
    if (!trusted(r, family, a))
      return;
    end = start > xff ? start - 1 : xff;
  }
}

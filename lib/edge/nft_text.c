/*
** The nftables sink's text: the names it is given, the schema it makes, and
** the set element of an address.  Built with or without libnftables, so
** sluice_nft_schema() (what docs/nft.md shows) is always there.
**
** Choices:
**  a) The drop rule sits in a prerouting chain at the raw priority (-300):
**     a banned address's packets are dropped before conntrack makes an
**     entry for them, so a ban flood does not fill the conntrack table.
**  b) The IPv6 set is an interval set, so an element can be a prefix (one
**     /64 element stops every address of an attacker's /64); the IPv4 set
**     holds single addresses and is a plain hash.
**  c) Every command names the table, sets and elements from text the sink
**     made itself (checked names, inet_ntop output), so nothing from a
**     request reaches the nft parser.
**  d) `flush chain` before the two rules makes the schema idempotent: it
**     runs at open and again whenever an update finds it missing, and never
**     adds a rule twice; `add table` and `add set` keep what exists (their
**     elements too).
*/
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "nft_int.h"

#define ALPHA "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

/* A letter, then letters, digits and '_': up to SLUICE_NFT_NAME_MAX. */
static int name_ok(const char *s) {
  size_t n = strlen(s);
  return n && n <= SLUICE_NFT_NAME_MAX && strchr(ALPHA, s[0]) &&
         strspn(s, ALPHA "0123456789_") == n;
}

static int name_set(char *dst, const char *src, const char *dflt) {
  if (!src)
    src = dflt;
  if (!name_ok(src))
    return SLUICE_EINVAL;
  strcpy(dst, src);
  return SLUICE_OK;
}

int sluice__nft_names(const sluice_nft_options *o, nft_names *n) {
  memset(n, 0, sizeof *n);
  if (name_set(n->table, o ? o->table : NULL, "sluice") ||
      name_set(n->set4, o ? o->set4 : NULL, "deny4") ||
      name_set(n->set6, o ? o->set6 : NULL, "deny6") ||
      !strcmp(n->set4, n->set6))
    return SLUICE_EINVAL;
  return SLUICE_OK;
}

int sluice__nft_schema_text(const nft_names *n, char *buf, size_t len,
                            size_t *needed) {
  int w = snprintf(
      buf, len,
      "add table inet %s\n"
      "add set inet %s %s { type ipv4_addr; flags timeout; }\n"
      "add set inet %s %s { type ipv6_addr; flags interval, timeout; }\n"
      "add chain inet %s deny { type filter hook prerouting priority raw; "
      "policy accept; }\n"
      "flush chain inet %s deny\n"
      "add rule inet %s deny ip saddr @%s drop\n"
      "add rule inet %s deny ip6 saddr @%s drop\n",
      n->table, n->table, n->set4, n->table, n->set6, n->table, n->table,
      n->table, n->set4, n->table, n->set6);
  if (w < 0)
    return SLUICE_EINVAL;
  if (needed)
    *needed = (size_t)w;
  return (size_t)w < len || (!buf && !len) ? SLUICE_OK : SLUICE_ERANGE;
}

int sluice_nft_schema(const sluice_nft_options *opts, char *buf, size_t len,
                      size_t *needed) {
  nft_names n;
  if ((!buf && len) || sluice__nft_names(opts, &n))
    return SLUICE_EINVAL;
  return sluice__nft_schema_text(&n, buf, len, needed);
}

int sluice__nft_element(const char *raw, int prefix6,
                        char elem[NFT_ELEM_MAX]) {
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0,
                                           0, 0, 0, 0, 0xff, 0xff};
  unsigned char a[16];
  size_t len = strnlen(raw, NFT_RAW_MAX);
  int i;
  if (len == 0 || len >= NFT_RAW_MAX)
    return 0;
  if (inet_pton(AF_INET, raw, a) == 1)
    return inet_ntop(AF_INET, a, elem, NFT_ELEM_MAX) ? 4 : 0;
  if (inet_pton(AF_INET6, raw, a) != 1)
    return 0;
  if (!memcmp(a, mapped, sizeof mapped))
    return inet_ntop(AF_INET, a + 12, elem, NFT_ELEM_MAX) ? 4 : 0;
  for (i = 0; i < 16; i++) {
    int bits = prefix6 - 8 * i;
    if (bits <= 0)
      a[i] = 0;
    else if (bits < 8)
      a[i] &= (unsigned char)(0xff00u >> bits);
  }
  if (!inet_ntop(AF_INET6, a, elem, NFT_ELEM_MAX))
    return 0;
  if (prefix6 < 128) {
    len = strlen(elem);
    snprintf(elem + len, NFT_ELEM_MAX - len, "/%d", prefix6);
  }
  return 6;
}

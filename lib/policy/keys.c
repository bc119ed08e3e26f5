/*
** The key schema: the only place a store key is spelled.  I is the
** scope id of a client address (a keyed hash, SLUICE_SCOPE_ID_LEN hex
** digits); the {...} part is the hash tag.
**
**   ipw:{ip:I}                 per-IP backstop (fixed window)
**
** Declared limits and penalties (declared.c) key their records by the
** file's scopes, with 128-bit ids in base64url (22 characters, the same
** keyed SipHash-2-4-128 as the hex ids, in 10 fewer bytes):
**
**   dl:{A}nNAME                limit NAME, scope [a]
**   dl:{A}hH                   a limit of scope [a, b...]: H the id of
**                              NAME with b...'s folded in
**   dl:{A}nNAME:<i>  dl:{A}hH:<i>   concurrency slot i (decimal)
**   dl:{A}nNAME:n    dl:{A}hH:n     a counted lease set's one record
**   dl:{A}hP:b  dl:{A}hP:r     a penalty's box and Retry-After notice (P
**                              the id of its name with every attribute's
**                              of its scope folded in)
**   dl:{A}hP:s  dl:{A}hP:d     its stuffing window and distinct values
**
** An attribute's id is the keyed hash of "name=value\x1f" (its value made
** once a request, whatever scopes name it); A is the id of the scope's
** first attribute: the hash tag, so every record of a scope's first
** attribute is in one group.  A name's id is the keyed hash of the name
** (made at open); ids fold in the scope's order (scope_id.h
** sluice__id_fold(): XOR, then two Feistel rounds of splitmix64's
** finaliser).  base64url has no '{', '}' or ':', so the tag ends at its
** '}' and a suffix at its ':'; a body's "h" (22 characters) or "n" (a
** name) keeps an id and a limit's name apart.  50 bytes for a limit of
** several attributes (72 with hex ids).
**
** Every key is literal + id [+ literal + id]: the literals' lengths are
** known at compile time and the ids' length is fixed, so a key is a few
** fixed copies (snprintf, or a template scan, cost a tenth of a standard
** decision).  Changing a key here changes the stored data's layout: a
** running service loses its state.
*/
#include <string.h>

#include "keys.h"
#include "policy_int.h"
#include "scope_id.h"

#define ID SLUICE_SCOPE_ID_LEN

/* Inlined into each builder, so its lengths are constants there (the copies
** become a few moves, as they were when the keys were built in policy.c). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline sluice_key key_id(char *buf, const char *pre, size_t pl, const char *a,
                         const char *mid, size_t ml, const char *b) {
  sluice_key k;
  size_t n = pl;
  memcpy(buf, pre, pl);
  memcpy(buf + n, a, ID);
  n += ID;
  memcpy(buf + n, mid, ml);
  n += ml;
  if (b) {
    memcpy(buf + n, b, ID);
    n += ID;
  }
  buf[n] = '\0';
  k.data = buf;
  k.len = n;
  return k;
}

/* PRE a MID [b], the literals' lengths taken at compile time. */
#define KEY(buf, pre, a, mid, b)                                             \
  key_id((buf), pre, sizeof pre - 1, (a), mid, sizeof mid - 1, (b))

sluice_key sluice__key_ip_window(char *buf, const char *I) {
  return KEY(buf, "ipw:{ip:", I, "}", NULL);
}

sluice_key sluice__key_declared(char *buf, const char *tag, const char *body,
                                size_t bodylen, int slot, char sfx) {
  sluice_key k;
  size_t n = 4;
  memcpy(buf, "dl:{", 4);
  memcpy(buf + n, tag, SLUICE__ID64_LEN);
  n += SLUICE__ID64_LEN;
  buf[n++] = '}';
  memcpy(buf + n, body, bodylen);
  n += bodylen;
  if (slot >= 0) {
    buf[n++] = ':';
    if (slot >= 10)
      buf[n++] = (char)('0' + slot / 10);
    buf[n++] = (char)('0' + slot % 10);
  }
  if (sfx) {
    buf[n++] = ':';
    buf[n++] = sfx;
  }
  buf[n] = '\0';
  k.data = buf;
  k.len = n;
  return k;
}

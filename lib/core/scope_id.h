/*
** Scope ids inside the library (scope_id.c): the keyed hash of a raw
** identifier and its two spellings, 32 lower-case hex digits (the public
** sluice_scope_id(): events, the deny cache, inspect) and 22 base64url
** characters (the declared limits' store keys: the same 128 bits in
** fewer bytes, and no '{', '}' or ':' to confuse a hash tag or a key's
** parts).
*/
#ifndef SLUICE_LIB_CORE_SCOPE_ID_H
#define SLUICE_LIB_CORE_SCOPE_ID_H

#include <stdint.h>

/* Characters of a 128-bit id in base64url, without padding. */
#define SLUICE__ID64_LEN 22

/* h (16 bytes, the hash) as 32 hex digits and a NUL. */
void sluice__id_hex(const uint8_t h[16], char out[33]);
/* h as SLUICE__ID64_LEN base64url characters (RFC 4648 section 5), no
** NUL. */
void sluice__id_b64(const uint8_t h[16], char out[SLUICE__ID64_LEN]);

/* splitmix64's finaliser: a cheap, well-mixed bijection of 64 bits. */
static inline uint64_t sluice__mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

/* Fold the 128-bit id a into h: h ^ a, then two Feistel rounds of
** sluice__mix64 over its halves.  A bijection of a for any h (and of h for
** any a), so ids made of the same keyed ids in the same order are equal,
** and ids differing in one of them never are; the order counts.  Its
** inputs are keyed hashes already (the policy's secret is in every one),
** so the result is as unguessable as they are, at no hashing of its own:
** a scope of several attributes is made of ids each hashed once a
** request (lib/policy/declared.c). */
static inline void sluice__id_fold(uint64_t h[2], const uint64_t a[2]) {
  uint64_t x = h[0] ^ a[0], y = h[1] ^ a[1];
  y ^= sluice__mix64(x);
  x ^= sluice__mix64(y);
  h[0] = x;
  h[1] = y;
}

#endif

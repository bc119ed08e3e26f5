/*
** SipHash (Aumasson & Bernstein, "SipHash: a fast short-input PRF",
** INDOCRYPT 2012), written from the paper.  SipHash-2-4, 64- and 128-bit
** outputs, keys the mem store's hash table against flooding and makes scope
** ids; it is checked against the paper's reference vectors in
** tests/unit/test_hash.c.  SipHash-1-3-128 (one compression round per word,
** three finalization rounds: the variant CPython and Rust hash tables use
** against flooding) makes shm fingerprints, which are computed on every
** decision; the same test checks it against a plain reference loop that is
** itself checked against the 2-4 vectors.
*/
#include <string.h>

#include "siphash.h"
#include "sluice/backend.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

/* Little-endian loads and stores whatever the host: the paper's vectors
** fix the byte order.  On a little-endian host the memcpy is one load. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint64_t load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline void store64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
#else
static inline uint64_t load64(const uint8_t *p) {
  return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
         (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
         (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}
static inline void store64(uint8_t *p, uint64_t v) {
  int i;
  for (i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
#endif

typedef struct sip {
  uint64_t v0, v1, v2, v3;
} sip;

/* A macro rather than a function: the compiler would otherwise keep it out
** of line, and it is most of the work of hashing a short key. */
#define SIPROUND(s)                                                            \
  do {                                                                         \
    (s)->v0 += (s)->v1;                                                        \
    (s)->v1 = ROTL((s)->v1, 13);                                               \
    (s)->v1 ^= (s)->v0;                                                        \
    (s)->v0 = ROTL((s)->v0, 32);                                               \
    (s)->v2 += (s)->v3;                                                        \
    (s)->v3 = ROTL((s)->v3, 16);                                               \
    (s)->v3 ^= (s)->v2;                                                        \
    (s)->v0 += (s)->v3;                                                        \
    (s)->v3 = ROTL((s)->v3, 21);                                               \
    (s)->v3 ^= (s)->v0;                                                        \
    (s)->v2 += (s)->v1;                                                        \
    (s)->v1 = ROTL((s)->v1, 17);                                               \
    (s)->v1 ^= (s)->v2;                                                        \
    (s)->v2 = ROTL((s)->v2, 32);                                               \
  } while (0)

#define SIPROUNDS(s, n)                                                        \
  do {                                                                         \
    int r_;                                                                    \
    for (r_ = 0; r_ < (n); r_++)                                               \
      SIPROUND(s);                                                             \
  } while (0)

static inline void sip_absorb(sip *s, uint64_t m, int c) {
  s->v3 ^= m;
  SIPROUNDS(s, c);
  s->v0 ^= m;
}

/* Inlined into every entry point so that `wide` and the round counts fold
** away and the state stays in registers: a short key is hashed on every
** decision. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void sip_run(const uint8_t key[16], const void *data, size_t len,
                           int wide, int c, int d, sip *s) {
  const uint8_t *in = (const uint8_t *)data;
  uint64_t k0 = load64(key), k1 = load64(key + 8), b = (uint64_t)len << 56;
  size_t i, j, tail = len & 7;

  s->v0 = k0 ^ UINT64_C(0x736f6d6570736575);
  s->v1 = k1 ^ UINT64_C(0x646f72616e646f6d);
  s->v2 = k0 ^ UINT64_C(0x6c7967656e657261);
  s->v3 = k1 ^ UINT64_C(0x7465646279746573);
  if (wide)
    s->v1 ^= 0xee;
  for (i = 0; i + 8 <= len; i += 8)
    sip_absorb(s, load64(in + i), c);
  /* The tail is gathered in a register: copied into a zeroed 8-byte buffer
  ** and loaded as one word, its byte stores could not be forwarded to the
  ** wide load, a stall that took a fifth of a short key's hashing time. */
  if (tail && len >= 8) /* the last 8 bytes in one load, shifted down */
    b |= load64(in + len - 8) >> (64 - 8 * tail);
  else
    for (j = 0; j < tail; j++)
      b |= (uint64_t)in[i + j] << (8 * j);
  sip_absorb(s, b, c);
  s->v2 ^= wide ? 0xee : 0xff;
  SIPROUNDS(s, d);
}

/* The 128-bit output: the second half is d more rounds after 0xdd. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void sip128(const uint8_t key[16], const void *data, size_t len,
                          int c, int d, uint8_t out[16]) {
  sip s;
  sip_run(key, data, len, 1, c, d, &s);
  store64(out, s.v0 ^ s.v1 ^ s.v2 ^ s.v3);
  s.v1 ^= 0xdd;
  SIPROUNDS(&s, d);
  store64(out + 8, s.v0 ^ s.v1 ^ s.v2 ^ s.v3);
}

uint64_t sluice__siphash64(const uint8_t key[16], const void *data,
                          size_t len) {
  sip s;
  sip_run(key, data, len, 0, 2, 4, &s);
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

void sluice__siphash128(const uint8_t key[16], const void *data, size_t len,
                       uint8_t out[16]) {
  sip128(key, data, len, 2, 4, out);
}

void sluice__siphash13_128(const uint8_t key[16], const void *data, size_t len,
                          uint8_t out[16]) {
  sip128(key, data, len, 1, 3, out);
}

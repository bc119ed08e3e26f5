/* Scope ids: secrets and raw identifiers become 128-bit keyed hashes before
** they are ever used as (or inside) a key, so a store dump, a Redis MONITOR
** or a log line never shows an API key, an IP or a subject. */
#include <string.h>

#include "scope_id.h"
#include "sluice.h"

/* Four bytes' eight lower-case hex digits, first byte first, as the bytes
** of a little-endian word: every byte's two nibbles spread into a 16-bit
** lane (high nibble in the lane's low byte, which is written first), then
** '0' added to each, and 'a' - '0' - 10 more to each nibble above 9 (a
** nibble + 6 carries into bit 4 exactly then).  No lane overflows: a digit
** is at most 'f'.  A decision makes one to four ids, and a loop over the
** nibbles cost as much as a third of the SipHash under it. */
static uint64_t hex4(const uint8_t *b) {
  const uint64_t lo = UINT64_C(0x000F000F000F000F);
  uint64_t x = (uint64_t)b[0] | (uint64_t)b[1] << 16 | (uint64_t)b[2] << 32 |
               (uint64_t)b[3] << 48;
  uint64_t n = ((x >> 4) & lo) | (x & lo) << 8;
  uint64_t over9 = ((n + UINT64_C(0x0606060606060606)) >> 4) &
                   UINT64_C(0x0101010101010101);
  return n + UINT64_C(0x3030303030303030) + over9 * ('a' - '0' - 10);
}

void sluice__id_hex(const uint8_t h[16], char out[33]) {
  int i;
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
  int j;
#endif
  for (i = 0; i < 4; i++) {
    uint64_t w = hex4(h + 4 * i);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(out + 8 * i, &w, 8);
#else
    for (j = 0; j < 8; j++)
      out[8 * i + j] = (char)(w >> (8 * j));
#endif
  }
  out[SLUICE_SCOPE_ID_LEN] = '\0';
}

/* base64url's character of six bits x (RFC 4648 section 5). */
#define B64(x)                                                                 \
  (char)((x) < 26   ? 'A' + (x)                                                \
         : (x) < 52 ? 'a' + (x) - 26                                           \
         : (x) < 62 ? '0' + (x) - 52                                           \
         : (x) == 62 ? '-'                                                     \
                     : '_')
/* The two characters of every 12 bits, spelled out by the preprocessor: a
** key's ids are encoded on every decision, and a table of pairs halves the
** lookups and shifts of one of single characters. */
#define PAIR(n) {B64((n) >> 6), B64((n)&63)},
#define PAIR8(n)                                                               \
  PAIR(n) PAIR(n + 1) PAIR(n + 2) PAIR(n + 3) PAIR(n + 4) PAIR(n + 5)          \
      PAIR(n + 6) PAIR(n + 7)
#define PAIR64(n)                                                              \
  PAIR8(n) PAIR8(n + 8) PAIR8(n + 16) PAIR8(n + 24) PAIR8(n + 32)              \
      PAIR8(n + 40) PAIR8(n + 48) PAIR8(n + 56)
#define PAIR512(n)                                                             \
  PAIR64(n) PAIR64(n + 64) PAIR64(n + 128) PAIR64(n + 192) PAIR64(n + 256)     \
      PAIR64(n + 320) PAIR64(n + 384) PAIR64(n + 448)
static const char b64_pair[4096][2] = {
    PAIR512(0) PAIR512(512) PAIR512(1024) PAIR512(1536) PAIR512(2048)
        PAIR512(2560) PAIR512(3072) PAIR512(3584)};

/* Three bytes at a time into four characters (two pairs), the last byte
** alone into two (its low four bits padded with zeros, as RFC 4648
** does). */
void sluice__id_b64(const uint8_t h[16], char out[SLUICE__ID64_LEN]) {
  int i;
  for (i = 0; i < 5; i++) {
    uint32_t w = (uint32_t)h[3 * i] << 16 | (uint32_t)h[3 * i + 1] << 8 |
                 h[3 * i + 2];
    memcpy(out + 4 * i, b64_pair[w >> 12], 2);
    memcpy(out + 4 * i + 2, b64_pair[w & 4095], 2);
  }
  memcpy(out + 20, b64_pair[(uint32_t)h[15] << 4], 2);
}

int sluice_scope_id(const uint8_t secret[16], const void *data, size_t len,
                    char out[SLUICE_SCOPE_ID_LEN + 1]) {
  uint8_t h[16];
  if (!secret || !out || (!data && len > 0))
    return SLUICE_EINVAL;
  sluice_siphash128(secret, data ? data : "", len, h);
  sluice__id_hex(h, out);
  return SLUICE_OK;
}

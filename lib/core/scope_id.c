/* Scope ids: secrets and raw identifiers become 128-bit keyed hashes before
** they are ever used as (or inside) a key, so a store dump, a Redis MONITOR
** or a log line never shows an API key, an IP or a subject. */
#include "sluice.h"

int sluice_scope_id(const uint8_t secret[16], const void *data, size_t len,
                    char out[SLUICE_SCOPE_ID_LEN + 1]) {
  static const char hex[] = "0123456789abcdef";
  uint8_t h[16];
  int i;
  if (!secret || !out || (!data && len > 0))
    return SLUICE_EINVAL;
  sluice_siphash128(secret, data ? data : "", len, h);
  for (i = 0; i < 16; i++) {
    out[2 * i] = hex[h[i] >> 4];
    out[2 * i + 1] = hex[h[i] & 15];
  }
  out[SLUICE_SCOPE_ID_LEN] = '\0';
  return SLUICE_OK;
}

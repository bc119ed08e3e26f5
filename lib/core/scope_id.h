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

#endif

/*
** SipHash, keyed against hash flooding: the store tables' fingerprints
** (mem, shm, lmdb), the policy's scope ids and deny cache.  Private to the
** library; an outside caller hashes with sluice_scope_id() (sluice.h).
*/
#ifndef SLUICE_CORE_SIPHASH_H
#define SLUICE_CORE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4, 64- and 128-bit outputs. */
uint64_t sluice__siphash64(const uint8_t key[16], const void *data, size_t len);
void sluice__siphash128(const uint8_t key[16], const void *data, size_t len,
                        uint8_t out[16]);
/* SipHash-1-3 with a 128-bit output: the cheaper variant, for a
** fingerprint computed on every decision (the shm table's).  Still keyed
** against flooding, as CPython's and Rust's hash tables use it. */
void sluice__siphash13_128(const uint8_t key[16], const void *data,
                           size_t len, uint8_t out[16]);

#endif

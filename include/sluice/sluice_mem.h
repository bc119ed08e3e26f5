/*
** The in-memory store ("mem"): the process heap, shared by the threads of
** one process.  URI parameters:
**
**   max_keys=N   refuse new keys with SLUICE_EFULL once N live records
**                exist (default 0: limited by memory only).  Expired
**                records are reclaimed first; live ones are never evicted.
**   untrusted=N  of those, at most N untrusted records (record class
**                SLUICE_CLASS_UNTRUSTED*: keyed by client IPs and auth
**                subjects; default max_keys/4, 0 with max_keys=0: no
**                bound), so that strangers cannot take the tenants' room.
**   huge_pages=1 put each table of 1 MiB or more (from about 800 000 keys
**                in all) on transparent huge pages: its own
**                mapping, advised MADV_HUGEPAGE (default 0: the allocator's
**                memory).  Where the system has none (THP "never", no THP)
**                the tables get normal pages and SLUICE_CTL_MEM_HUGE counts
**                them as fallbacks.  Big tables on huge pages cost far
**                fewer TLB misses (docs/hardening.md, "The hot path,
**                batches and huge pages").
**   memo=0       no hot-key memo (default 1): the store keeps the
**                fingerprints of up to 64 recently decided keys of 8 to
**                104 bytes, each confirmed against the whole key, so a key
**                decided again and again skips its SipHash (about a third
**                of a hot key's decision).  8 KiB a store; a stream of
**                distinct keys pays a few nanoseconds a decision for it.
**
** Thread-safe: 64 mutex-guarded shards; a group's shards are locked in
** ascending order, so groups never deadlock.  Keys are kept as 128-bit
** SipHash-1-3 fingerprints under a per-store random key (never the raw
** bytes), so an attacker who picks keys cannot aim them at one probe chain.
** 48 bytes per record, at most 4/3 of that with the table's slack.
**
** sluice_limiter_decide() of n programs hashes each run of 16 and prefetches
** their slots before deciding them in order, one by one (the verdicts of
** deciding them one at a time), so a batch's memory misses on a big table
** overlap instead of following each other.
*/
#ifndef SLUICE_MEM_H
#define SLUICE_MEM_H

#include <stdint.h>

/** xControl ops. */
#define SLUICE_CTL_MEM_COUNT 200 /**< arg: int64_t*, records held (live or
                                      not yet reclaimed) */
#define SLUICE_CTL_MEM_SWEEP 201 /**< arg: int64_t* now in, removed out */
#define SLUICE_CTL_MEM_HUGE 202  /**< arg: sluice_mem_huge* (out) */
#define SLUICE_CTL_MEM_MEMO 203  /**< arg: int64_t* (out): keys the hot-key
                                      memo holds now (0..64), -1 with
                                      memo=0 */

/** What huge_pages=1 got from the system. */
typedef struct sluice_mem_huge {
  int64_t asked;     /**< 1: opened with huge_pages=1 */
  int64_t tables;    /**< tables now on huge pages */
  int64_t bytes;     /**< their bytes */
  int64_t fallbacks; /**< tables (ever) that asked and got normal pages */
} sluice_mem_huge;

#endif

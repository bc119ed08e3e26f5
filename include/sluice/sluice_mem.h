/*
** The in-memory store ("mem"): the process heap, shared by the threads of
** one process.  URI parameters:
**
**   max_keys=N   refuse new keys with SLUICE_EFULL once N live records
**                exist (default 0: limited by memory only).  Expired
**                records are reclaimed first; live ones are never evicted.
**
** Thread-safe: 64 mutex-guarded shards; a group's shards are locked in
** ascending order, so groups never deadlock.  Keys are kept as 128-bit
** SipHash-2-4 fingerprints under a per-store random key (never the raw
** bytes), so an attacker who picks keys cannot aim them at one probe chain.
** 48 bytes per record, at most 4/3 of that with the table's slack.
**
** sluice_limiter_apply_many() hashes each run of 16 ops and prefetches
** their slots before deciding them in order, one by one (the verdicts of
** applying them one at a time), so a batch's memory misses on a big table
** overlap instead of following each other.
*/
#ifndef SLUICE_MEM_H
#define SLUICE_MEM_H

#include <stdint.h>

/** xControl ops. */
#define SLUICE_CTL_MEM_COUNT 200 /**< arg: int64_t*, records held (live or
                                      not yet reclaimed) */
#define SLUICE_CTL_MEM_SWEEP 201 /**< arg: int64_t* now in, removed out */

#endif

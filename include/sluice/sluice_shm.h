/*
** The shared-memory store ("shm"): one mapping shared by the worker
** processes of one host, updated lock-free with compare-and-swap.  See
** docs/shm.md for the design, the guarantees and the numbers.
**
** URI parameters (sluice_limiter_options.store = "shm:k=v;k=v"):
**
**   name=/NAME   a POSIX shared-memory object (shm_open).  Any process that
**                opens the same name shares the state.
**   fd=N         an inherited descriptor (a memfd or an shm_open fd), for
**                a master that creates the table and forks its workers.
**                Exactly one of name and fd.  The fd is borrowed: the store
**                never closes it.
**   capacity=N   live keys the table holds (default 65536, k/m/g allowed).
**                Only used when the mapping is created; when given for an
**                existing mapping it must match (SLUICE_ECONFIG otherwise).
**   untrusted=N  live keys of the untrusted region (default capacity/4,
**                at least 64): SLUICE_CLASS_UNTRUSTED records (keyed by
**                client IPs and auth subjects) live there and only there,
**                so a flood of them cannot take the service's room; when
**                it is full their counters are evicted, oldest first,
**                never a box.  Same rules as capacity when reopening.
**   create=1     create the mapping if missing (same as SLUICE_OPEN_CREATE;
**                with fd=, an empty file is initialised).
**   huge_pages=1 map the table at a huge-page boundary and advise it
**                MADV_HUGEPAGE (per process; default 0).  Shared memory
**                gets transparent huge pages only where the system allows
**                them: an fd= memfd where shmem_enabled says advise or
**                always, a name= table where /dev/shm is mounted with
**                huge=advise or always (a tmpfs mount's own option);
**                elsewhere the table stays on normal pages, which
**                SLUICE_CTL_SHM_HUGE reports (0: fell back), as the
**                kernel answers for the mapping (THPeligible).
**
** Errors at open: SLUICE_EINVAL (bad URI), SLUICE_ENOTFOUND (no such object
** and no create), SLUICE_EVERSION (another layout version or state layout),
** SLUICE_ECORRUPT (wrong magic, bad header checksum, truncated file),
** SLUICE_EBUSY (the creator never finished initialising), SLUICE_ECONFIG
** (capacity mismatch), SLUICE_EIO / SLUICE_EPERM (system calls), with the
** detail in sluice_limiter_errmsg().
**
** Concurrency: every method is lock-free and thread- and process-safe.  A
** limiter opened before fork() may be used by the child.  A process killed at
** any instruction loses at most its in-flight decision; it never leaves
** anything held.
*/
#ifndef SLUICE_SHM_H
#define SLUICE_SHM_H

#include <stdint.h>

/** xControl ops (sluice_limiter_control). */
#define SLUICE_CTL_SHM_STATS 300 /**< arg: sluice_shm_stats* */
#define SLUICE_CTL_SHM_HUGE 301  /**< arg: int64_t* out: 1 the table is on
                                      huge pages, 0 huge_pages=1 fell back
                                      to normal ones, -1 not asked */

/** Table statistics.  Set now_ns before the call (0: the real clock) and
 *  zero the rest (`sluice_shm_stats st = {0};`); live
 *  counts records that have not expired at now_ns (an O(slots) scan). */
typedef struct sluice_shm_stats {
  int64_t now_ns;        /**< in */
  int64_t capacity;      /**< keys asked for at creation */
  int64_t slots;         /**< slots in the table (capacity * 4/3) */
  int64_t live;          /**< records live at now_ns */
  int64_t pending;       /**< claims in progress or abandoned by a crash */
  int64_t slot_bytes;    /**< bytes per slot */
  int64_t bytes_per_key; /**< slot bytes / capacity, rounded up (the
                              mapping adds one 4 KiB header page) */
  int64_t mapping_bytes; /**< whole mapping, header included */
  int64_t probe_window;  /**< slots a key may live from its home slot */
  int64_t longest_reach; /**< farthest any key was ever placed from its home
                              slot; as it nears probe_window, new keys near
                              the longest clusters risk SLUICE_EFULL before
                              capacity (docs/shm.md) */
  /** The untrusted region (SLUICE_CLASS_UNTRUSTED records: what client
   *  IPs and auth subjects create; docs/shm.md "Record classes"). */
  int64_t untrusted_capacity; /**< keys asked for (untrusted=N) */
  int64_t untrusted_live;     /**< of `live`, those in that region */
  int64_t evictions;          /**< counters evicted for room in it, ever */
} sluice_shm_stats;

#endif

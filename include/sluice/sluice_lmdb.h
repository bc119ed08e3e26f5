/*
** The LMDB store ("lmdb"): state records in an LMDB environment on disk,
** shared by every process of one host that opens the same directory, and
** kept across restarts and reboots.  A penalty box, an offense counter or a
** suspension written here is still in force after the service restarts.
**
** URI parameters (after "lmdb:", separated by ';'):
**
**   path=DIR         the environment directory (required; holds data.mdb
**                    and lock.mdb).  Created (the last component only) when
**                    the store is opened with SLUICE_OPEN_CREATE; otherwise
**                    it must hold an existing environment.
**   mapsize=N[k|m|g] size of the memory map, the most the data file can
**                    grow to (default 64m).  A larger size than the
**                    environment already has grows it; a smaller one is
**                    ignored.  Grow later with SLUICE_CTL_LMDB_MAPSIZE.
**   sync=MODE        durability of each committed decision:
**                      full        fsync data and meta page on every commit
**                                  (default): power loss loses nothing that
**                                  was committed.
**                      nometasync  MDB_NOMETASYNC: data synced, meta page
**                                  not: power loss may undo the last
**                                  committed transaction(s); never corrupts.
**                      nosync      MDB_NOSYNC: nothing synced by the commit;
**                                  power loss loses whatever the OS had not
**                                  written yet (call SLUICE_CTL_LMDB_SYNC
**                                  to flush).  A process crash loses
**                                  nothing in any mode.
**   maxreaders=N     reader slots in the lock file (default 126).
**   mode=OCTAL       permissions of new files (default 0600).
**   busy_timeout_ms=N  how long a decision waits for another writer before
**                    failing with SLUICE_ETIMEDOUT (default 5000).
**
** Unknown parameters and malformed values are refused with SLUICE_EINVAL.
**
** See docs/lmdb.md for what each failure returns.
**
** Concurrency: thread-safe (SLUICE_CAP_THREADSAFE) and shared between
** processes (SLUICE_CAP_CROSS_PROCESS): every decision is one LMDB write
** transaction, serialised by LMDB's writer lock across all processes.
** Opening the same directory twice in one process shares one environment
** (LMDB forbids opening it twice: closing one copy would drop the other's
** file locks); both opens must ask for the same sync mode.  A store must not
** be used after fork(): in the child every call fails with SLUICE_EINVAL;
** open a new store there.
*/
#ifndef SLUICE_LMDB_H
#define SLUICE_LMDB_H

#include <stdint.h>

/** xControl ops (sluice_limiter_control). */
/** arg: int64_t*, in: new map size in bytes (0 = adopt the size another
 *  process grew the environment to), out: the map size now in effect.
 *  Never shrinks (a smaller size leaves the map as it is).  Waits until
 *  this process has no transaction running.  The size is
 *  recorded in the environment, so other processes adopt it when they next
 *  run out of room. */
#define SLUICE_CTL_LMDB_MAPSIZE 400
/** arg: sluice_lmdb_sweep*.  Remove expired records, examining at most
 *  max_records records per call, resuming where the previous call of this
 *  process stopped.  Live records (an active box, an offense counter, a
 *  bucket still refilling) are never removed. */
#define SLUICE_CTL_LMDB_SWEEP 401
/** arg: sluice_lmdb_stats*. */
#define SLUICE_CTL_LMDB_STATS 402
/** arg: int*, out: stale reader slots (left by dead processes) cleared. */
#define SLUICE_CTL_LMDB_READER_CHECK 403
/** arg: ignored (may be NULL).  Flush to disk now (for sync=nosync or
 *  nometasync users who flush on their own schedule). */
#define SLUICE_CTL_LMDB_SYNC 404

/** Sweep request and result. */
typedef struct sluice_lmdb_sweep {
  int64_t now_ns;      /**< in: the limiter's time (sluice_limiter_now) */
  int64_t max_records; /**< in: examine at most this many, 1..2^20 */
  int64_t examined;    /**< out: records looked at */
  int64_t removed;     /**< out: expired records deleted */
  int wrapped;         /**< out: 1 when this call reached the last record
                            (the next call starts over from the first) */
} sluice_lmdb_sweep;

/** Environment statistics. */
typedef struct sluice_lmdb_stats {
  int64_t mapsize;     /**< bytes mapped by this process */
  int64_t used_bytes;  /**< bytes of the map in use (pages incl. free list) */
  int64_t records;     /**< state records, live or not yet swept */
  int64_t page_size;   /**< bytes per page */
  int64_t max_readers; /**< reader slots */
  int64_t readers;     /**< reader slots held now, stale ones included */
} sluice_lmdb_stats;

#endif

/*
** sluice/algo.h -- the algorithm layer: pure, deterministic state transitions.
**
** Every algorithm is a step over a fixed 16-byte state record:
**
**     step(params, state_in, now_ns, input) -> (state_out, verdict)
**
** No I/O, no clock, no allocation, no globals.  A zeroed record is a fresh
** key.  Every backend stores the records as opaque bytes and runs these steps
** atomically where the state lives (Redis runs a Lua port over the same
** encoding), so a trace gives the same verdicts on every backend.
**
** Records are 16 bytes so that a lock-free backend can update one with a
** single double-width compare-and-swap.  The layout of every record is part
** of the on-disk / in-mapping format and is documented field by field below;
** changing it bumps SLUICE_STATE_LAYOUT.
**
** Operations work on a *group* of 1..SLUICE_GROUP_MAX keys that share one
** Redis hash tag and are read, stepped and written as one atomic unit: a
** tenant bucket with a key bucket (admit only if both admit, a denial consumes
** from neither), or the slots of a lease set.
**
** Time: int64 nanoseconds, any epoch, never negative.  A `now` earlier than
** the one a record was last written at is clamped where a step could
** otherwise refund (a window would reopen) and is otherwise harmless: GCRA
** simply sees fewer tokens.  Nothing here ever uses floating point.
*/
#ifndef SLUICE_ALGO_H
#define SLUICE_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "errno.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bump when any record layout or step semantics change: persisted state
 *  (shm mappings, LMDB files, Redis keys) of another layout is refused. */
#define SLUICE_STATE_LAYOUT 1

/** Largest group of keys one operation may touch atomically. */
#define SLUICE_GROUP_MAX 32
/** Longest key, in bytes.  Keys are opaque bytes, never empty. */
#define SLUICE_KEY_MAX 512
/** A duration meaning "until lifted by hand" (penalty level 3 suspension). */
#define SLUICE_FOREVER INT64_MAX
/** Largest cost, count or limit any step accepts (2^40). */
#define SLUICE_COUNT_MAX ((int64_t)1 << 40)
/** Largest rate period, window or TTL any step accepts (about 146 years). */
#define SLUICE_DURATION_MAX ((int64_t)1 << 62)

/** An opaque state record; see each algorithm for its layout. */
typedef struct sluice_state {
  uint64_t w[2];
} sluice_state;

/** A key: opaque bytes.  If it contains a Redis hash tag ("{...}": the
 *  bytes between the first '{' and the next '}', when non-empty), every key
 *  of one group must carry the same tag. */
typedef struct sluice_key {
  const void *data;
  size_t len;
} sluice_key;

/** Algorithms.  The numbers are part of the wire format (Redis scripts). */
enum sluice_algo {
  SLUICE_ALGO_GCRA = 1,     /**< cost-weighted token bucket */
  SLUICE_ALGO_SWINDOW = 2,  /**< sliding window counter */
  SLUICE_ALGO_FWINDOW = 3,  /**< fixed window counter */
  SLUICE_ALGO_PENALTY = 4,  /**< strikes, offenses, box */
  SLUICE_ALGO_LEASE = 5,    /**< one slot of a lease set */
  SLUICE_ALGO_DISTINCT = 6  /**< distinct-item estimate in a fixed window */
};

/* ---------------------------------------------------------------- GCRA --- */

/** GCRA: `rate` points refill every `period_ns`, up to `burst` points.  The
 *  bucket starts full.  Exactly the token bucket of spec section 6 in exact
 *  arithmetic: the emission interval period_ns/rate is kept as a fraction.
 *  Valid: 1 <= rate <= 2^32, 1 <= period_ns <= SLUICE_DURATION_MAX,
 *  1 <= burst <= SLUICE_COUNT_MAX, burst * period_ns <= 2^62. */
typedef struct sluice_gcra_params {
  int64_t rate;
  int64_t period_ns;
  int64_t burst;
} sluice_gcra_params;

/* GCRA record:  w[0] = theoretical arrival time, whole ns (uint64: it may
**                      pass INT64_MAX by up to one burst).
**               w[1] = fractional ns of the TAT, in units of 1/rate ns
**                      (0 <= frac < rate).
** tokens(now) = burst - max(0, TAT - now) * rate / period_ns. */

/* ----------------------------------------------------- window counters --- */

/** Sliding window counter (two aligned windows, the previous one weighted by
 *  its overlap with [now - window, now)) and fixed window counter. */
typedef struct sluice_window_params {
  int64_t limit;     /**< 1..SLUICE_COUNT_MAX (SWINDOW: 1..2^31) */
  int64_t window_ns; /**< 1..SLUICE_DURATION_MAX */
} sluice_window_params;

/* SWINDOW record: w[0] = start of the current aligned window (int64 ns),
**                 w[1] = count in current window (low 32 bits) |
**                        count in previous window (high 32 bits).
** FWINDOW record: w[0] = start of the current aligned window (int64 ns),
**                 w[1] = count in it.
** Counts saturate at 2^32 - 1 (SWINDOW) and INT64_MAX (FWINDOW), both
** above any valid limit, so a saturated counter stays over its limit. */

/* ------------------------------------------------------------- penalty --- */

/** Penalty ladder.  A strike opens a strike window of `strike_window_ns` (as
 *  the spec's INCR + EXPIRE on the first strike); reaching `strike_threshold`
 *  strikes in it trips the box: offenses += 1 (offenses are forgotten
 *  `offense_ttl_ns` after the last trip), level = min(offenses, 3), the box
 *  lasts box_ns[level - 1] (SLUICE_FOREVER: until released by hand) and the
 *  strike count restarts.  While boxed, nothing is counted. */
typedef struct sluice_penalty_params {
  int64_t strike_threshold; /**< 1..2^20 - 1 */
  int64_t strike_window_ns; /**< 1ms..SLUICE_DURATION_MAX */
  int64_t box_ns[3];        /**< 1ms.. or SLUICE_FOREVER */
  int64_t offense_ttl_ns;   /**< 1ms..SLUICE_DURATION_MAX */
} sluice_penalty_params;

/* PENALTY record (times in whole milliseconds, floor(now_ns / 1e6), +1 so
** that 0 means "never"):
**   w[0] bits  0..43  last trip time + 1
**        bits 44..55  offenses (saturating at 4095)
**        bit  56      box active (cleared by a manual release)
**   w[1] bits  0..43  strike window start + 1
**        bits 44..63  strikes in that window */

/* --------------------------------------------------------------- lease --- */

/** Lease set of `max` slots (key i of the group is slot i), each lease held
 *  for `ttl_ns` unless released or renewed.  Mutual exclusion is max = 1.
 *  A larger `max` (SLUICE_GROUP_MAX < max <= SLUICE_LEASE_COUNT_MAX) is a
 *  counted set: one record (a group of one key) counting live leases by
 *  expiry bucket; ACQUIRE and RENEW return the id to release it by in the
 *  verdict's lease_id, and a leaked lease ends less than ttl/3 + 4 ms late
 *  (lib/algo/lease_count.c says exactly). */
typedef struct sluice_lease_params {
  int64_t max;    /**< 1..SLUICE_LEASE_COUNT_MAX; the group has max keys
                       (1 key for a counted set, max > SLUICE_GROUP_MAX) */
  int64_t ttl_ns; /**< 1..SLUICE_DURATION_MAX */
} sluice_lease_params;

/** The largest counted lease set. */
#define SLUICE_LEASE_COUNT_MAX ((int64_t)1 << 20)

/* LEASE record (one slot): w[0] = lease id (0 = free), w[1] = expiry (ns).
** A counted set's record: lib/algo/lease_count.c. */

/* ------------------------------------------------------------ distinct --- */

/** Distinct items in an aligned fixed window, by linear counting over a
 *  64-bit bitmap (good to about 200 distinct items; saturates at 266).
 *  "Allowed" means the estimate is still below `threshold`. */
typedef struct sluice_distinct_params {
  int64_t threshold; /**< 1..200 */
  int64_t window_ns; /**< 1..SLUICE_DURATION_MAX */
} sluice_distinct_params;

/* DISTINCT record: w[0] = window start (int64 ns), w[1] = bitmap; item h
** sets bit (h >> 58). */

/* ---------------------------------------------------------- operations --- */

/** What an operation does.  Which kinds apply depends on the algorithm. */
enum sluice_op_kind {
  /* GCRA, SWINDOW, FWINDOW: */
  SLUICE_OP_CONSUME = 0, /**< take `arg` units if they fit, else deny */
  SLUICE_OP_PEEK = 1,    /**< report only, change nothing (arg may be 0) */
  SLUICE_OP_COUNT = 2,   /**< windows: add `arg` always; allowed = still
                              within the limit after adding */
  /** Settle an earlier charge (sluice_policy_settle()): `arg` > 0 charges
   *  arg more, `arg` < 0 refunds -arg; |arg| at most the burst or limit.
   *  Never denies (allowed = 1): a charge may leave the limit in debt,
   *  up to one burst or limit of it (a bucket down to -burst points, a
   *  window count up to twice its limit); a refund never fills a bucket
   *  past full nor takes a count below zero.  `id` is the time (ns) the
   *  settled charge was made: a window refunds only while the window that
   *  charge was counted in still weighs (the current one, or a sliding
   *  window's previous one), so a refund cannot free room in a window
   *  the charge never took it from; GCRA ignores it (<= INT64_MAX). */
  SLUICE_OP_ADJUST = 3,
  /* PENALTY: */
  SLUICE_OP_CHECK = 10,   /**< is the scope boxed?  changes nothing */
  SLUICE_OP_STRIKE = 11,  /**< record one strike unless boxed */
  SLUICE_OP_TRIP = 12,    /**< trip now; arg = minimum level (1..3) */
  SLUICE_OP_RELEASE = 13, /**< end the box now, keep the offense count */
  /* LEASE: */
  SLUICE_OP_ACQUIRE = 20, /**< take the lowest free slot for lease `id` */
  SLUICE_OP_LEASE_RELEASE = 21, /**< free the slot holding `id` */
  SLUICE_OP_RENEW = 22,   /**< extend lease `id` to now + ttl */
  /* DISTINCT: */
  SLUICE_OP_ADD = 30      /**< add item hash `id` */
};

/** Record classes: what a store whose room is finite keeps apart, so that
 *  records anyone can create cannot take the room of the records the
 *  service's paying clients need (docs/backends.md, "Record classes").
 *  A class never changes a verdict: every backend decides the same.  A
 *  key keeps its class: every op and program over it must give the same
 *  one (UNTRUSTED and UNTRUSTED_KEPT count as one here), since a store
 *  may keep the classes apart and look for a key only among its own. */
enum sluice_record_class {
  /** The service's own records (tenants, keys, leases): the default. */
  SLUICE_CLASS_SERVICE = 0,
  /** Records keyed by unauthenticated input (client IPs, auth subjects):
   *  kept within their own bound.  Their penalty records (boxes, offense
   *  counters) are never evicted; their counters (windows, distinct
   *  estimates) may be, oldest first, when that bound is reached. */
  SLUICE_CLASS_UNTRUSTED = 1,
  /** As UNTRUSTED (same bound, same place), but nothing of it is ever
   *  evicted: the failures of a real client (a wrong secret), which a
   *  flood of strangers must not be able to reset. */
  SLUICE_CLASS_UNTRUSTED_KEPT = 2
};

/** One atomic operation over a group of keys. */
typedef struct sluice_op {
  int algo;               /**< enum sluice_algo */
  int kind;               /**< enum sluice_op_kind */
  int nkeys;              /**< 1..SLUICE_GROUP_MAX (1 except GCRA, LEASE) */
  const sluice_key *keys; /**< nkeys keys, same hash tag */
  /** GCRA: an array of nkeys sluice_gcra_params (one per key); others: one
   *  params struct of the algorithm's type.  Borrowed for the call. */
  const void *params;
  int64_t arg; /**< cost / count (1..SLUICE_COUNT_MAX), minimum level, or
                    a signed ADJUST amount */
  uint64_t id; /**< lease id (nonzero), distinct item hash, or the time an
                    ADJUSTed charge was made */
  /** enum sluice_record_class of the records it creates (0: the service's
   *  own).  Only a store with finite room reads it. */
  int64_t record_class;
} sluice_op;

/** Verdict flags. */
#define SLUICE_V_TRIPPED 0x1u   /**< penalty: this step tripped the box */
#define SLUICE_V_SUSPENDED 0x2u /**< penalty: boxed until released by hand */
#define SLUICE_V_EXPIRED 0x4u   /**< lease: the released/renewed lease had
                                     already expired (or never existed) */

/** What a step decided.  Fields that do not apply to an algorithm are 0. */
typedef struct sluice_verdict {
  int allowed;               /**< 1: admitted / not boxed / lease granted */
  unsigned flags;            /**< SLUICE_V_* */
  int binding;               /**< group index that set remaining/limit/reset */
  int level;                 /**< penalty level 0..3 (0: not boxed) */
  int64_t limit;             /**< burst, window limit, lease max, threshold */
  int64_t remaining;         /**< points / count / free slots left, >= 0 */
  int64_t retry_after_ns;    /**< when denied: wait until this would pass;
                                  boxed: time left in the box (SLUICE_FOREVER
                                  when suspended) */
  int64_t reset_ns;          /**< until full / window empty / slot free */
  int64_t strikes_remaining; /**< penalty: strikes left before a trip */
  int64_t offenses;          /**< penalty: live offense count */
  uint64_t lease_id;         /**< lease granted, released or renewed */
  int64_t now_ns;            /**< the time the step ran at (a Redis
                                  backend reports the server's TIME) */
} sluice_verdict;

#ifdef __cplusplus
}
#endif
#endif

/*
** sluice/client.h -- the backoff planner and pacing helper for C clients of
** an API protected by sluice (spec section 7).
**
** The planner reads one failed (or finished) attempt and says what to do
** next: retry after N ms, poll the existing job after N ms, or stop and
** why.  It never sleeps, never reads a clock and never sends anything; the
** caller passes its own time (now_ns, deadline_ns: any one monotonic clock)
** and the raw header values, and sleeps as told.  Server times (Retry-After
** as an HTTP-date) are read against the response's Date header only, so a
** client whose clock is off still waits what the server asked.
**
** Rules, in the order they are applied:
**   1. 1xx/2xx/3xx: STOP (DONE).
**   2. X-Penalty-Box-Status: Active-Lockout: STOP (LOCKOUT); wait_ms says
**      how long nothing may be sent for that key (-1: unknown).
**   3. 409: POLL (the job already exists; never resubmit).
**   4. Not retryable (anything but no response, 408, 429, 500, 502, 503,
**      504): STOP (NOT_RETRYABLE).
**   5. Not idempotent and no Idempotency-Key: STOP (NOT_IDEMPOTENT).
**   6. Auth endpoint after auth_max_retries retries (2): STOP (AUTH_LIMIT).
**   7. attempt >= max_attempts (5): STOP (MAX_ATTEMPTS).
**   8. backoff = uniform(0, min(cap, base * 2^(attempt-1))) ms (full
**      jitter, base 500 ms, cap 30 s); wait = max(Retry-After, backoff),
**      plus uniform(0, wait / 10): never sooner than Retry-After.
**   9. now + wait past the deadline: STOP (DEADLINE), fail fast.
**   Otherwise RETRY after wait_ms.
*/
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "errno.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Spec section 7 defaults. */
#define SLUICE_BACKOFF_BASE_MS 500
#define SLUICE_BACKOFF_CAP_MS 30000
#define SLUICE_BACKOFF_MAX_ATTEMPTS 5
#define SLUICE_BACKOFF_AUTH_RETRIES 2

/** Options for sluice_backoff_open().  Zero-initialize; 0 means the
 *  default for every number. */
typedef struct sluice_backoff_options {
  int64_t base_ms;      /**< 1.. (0: 500) */
  int64_t cap_ms;       /**< >= base_ms (0: 30000) */
  int max_attempts;     /**< requests in all, 1.. (0: 5) */
  int auth_max_retries; /**< retries on the auth endpoint (0: 2; use
                             SLUICE_BACKOFF_NONE for none) */
  /** Random source: 64 uniform bits per call; thread-safe if the planner
   *  is shared.  NULL: a generator owned by the planner, seeded from
   *  sluice_random_bytes(). */
  uint64_t (*rand)(void *ud);
  void *rand_ud; /**< passed to rand; not touched otherwise */
} sluice_backoff_options;

/** auth_max_retries value meaning "never retry the auth endpoint". */
#define SLUICE_BACKOFF_NONE (-1)

typedef struct sluice_backoff sluice_backoff;

/** @brief Create a planner.
 *  @param[in] opts  NULL for the spec's defaults.
 *  @param[out] out  the planner, or NULL on failure.
 *  @return SLUICE_OK, SLUICE_EINVAL (negative numbers, cap below base,
 *  base above one hour, cap above 24 hours), SLUICE_ENOMEM, SLUICE_EIO (no OS randomness).
 *  The planner is thread-safe (with a thread-safe rand). */
SLUICE_EXPORT int sluice_backoff_open(const sluice_backoff_options *opts,
                                      sluice_backoff **out);
/** @brief Free a planner.  NULL is a no-op.  It must not be used again. */
SLUICE_EXPORT void sluice_backoff_close(sluice_backoff *b);

/** sluice_backoff_input.flags: what the request was. */
#define SLUICE_REQ_IDEMPOTENT 0x1u      /**< GET, PUT, DELETE ... */
#define SLUICE_REQ_IDEMPOTENCY_KEY 0x2u /**< carries an Idempotency-Key */
#define SLUICE_REQ_AUTH 0x4u            /**< the auth (token) endpoint */

/** One attempt's outcome.  Zero-initialize, then set fields.  Header
 *  values are the raw field values (NULL: absent), borrowed for the
 *  call; they need not be NUL-terminated if the matching *_len is set
 *  (0: use strlen). */
typedef struct sluice_backoff_input {
  int attempt;   /**< requests sent so far, including this one: 1.. */
  int status;    /**< HTTP status; 0 for no response (timeout, reset) */
  unsigned flags; /**< SLUICE_REQ_* */
  const char *retry_after;   /**< Retry-After */
  const char *date;          /**< Date */
  const char *penalty_box;   /**< X-Penalty-Box-Status */
  const char *remaining;     /**< RateLimit-Remaining */
  size_t retry_after_len, date_len, penalty_box_len, remaining_len;
  int64_t now_ns;      /**< the caller's clock, >= 0 */
  int64_t deadline_ns; /**< same clock; 0: no deadline */
} sluice_backoff_input;

/** What to do. */
enum sluice_backoff_action {
  SLUICE_BACKOFF_RETRY = 1, /**< send the same request after wait_ms */
  SLUICE_BACKOFF_POLL = 2,  /**< poll the existing job after wait_ms */
  SLUICE_BACKOFF_STOP = 3   /**< do not send it again; see reason */
};

/** Why. */
enum sluice_backoff_reason {
  SLUICE_BACKOFF_WHY_RETRYABLE = 0,   /**< RETRY: a retryable failure */
  SLUICE_BACKOFF_WHY_DONE = 1,        /**< not a failure (1xx-3xx) */
  SLUICE_BACKOFF_WHY_LOCKOUT = 2,     /**< Active-Lockout */
  SLUICE_BACKOFF_WHY_CONFLICT = 3,    /**< POLL: 409 */
  SLUICE_BACKOFF_WHY_NOT_RETRYABLE = 4, /**< status says do not retry */
  SLUICE_BACKOFF_WHY_NOT_IDEMPOTENT = 5, /**< unsafe to repeat */
  SLUICE_BACKOFF_WHY_AUTH_LIMIT = 6,  /**< auth retries used up */
  SLUICE_BACKOFF_WHY_MAX_ATTEMPTS = 7, /**< attempts used up */
  SLUICE_BACKOFF_WHY_DEADLINE = 8     /**< the wait passes the deadline */
};

/** sluice_backoff_plan.flags: header values that could not be used. */
#define SLUICE_BACKOFF_F_BAD_RETRY_AFTER 0x1u /**< malformed: the floor
                                                   became cap_ms; over 2^53
                                                   s: honoured as 2^53 s */
#define SLUICE_BACKOFF_F_NO_DATE 0x2u /**< Retry-After is a date but Date
                                           is absent or malformed: the
                                           floor became cap_ms */
#define SLUICE_BACKOFF_F_BAD_REMAINING 0x4u /**< remaining set to -1 */

/** The plan.  Caller-allocated. */
typedef struct sluice_backoff_plan {
  int action;        /**< enum sluice_backoff_action */
  int reason;        /**< enum sluice_backoff_reason */
  unsigned flags;    /**< SLUICE_BACKOFF_F_* */
  /** RETRY/POLL: wait this long first.  STOP on LOCKOUT or DEADLINE: the
   *  server's floor (nothing for this key before it), -1 if unknown.
   *  Other STOPs: 0. */
  int64_t wait_ms;
  int64_t floor_ms;  /**< Retry-After as read, ms; 0 when absent */
  int64_t remaining; /**< RateLimit-Remaining, -1 when absent */
} sluice_backoff_plan;

/** @brief Plan the next step after one attempt.
 *  Malformed server headers are not errors (the server's bytes are not
 *  the caller's input): they are flagged in plan->flags and replaced by
 *  the safe reading (a floor of cap_ms).
 *  @param[in] b    the planner.
 *  @param[in] in   the attempt.
 *  @param[out] plan the plan; unspecified on error.
 *  @return SLUICE_OK or SLUICE_EINVAL (NULL pointers, attempt < 1, status
 *  not 0 or 100..599, unknown flags, negative times). */
SLUICE_EXPORT int sluice_backoff_plan_next(sluice_backoff *b,
                                           const sluice_backoff_input *in,
                                           sluice_backoff_plan *plan);

/** @brief Read a Retry-After value: delta-seconds, or an HTTP-date taken
 *  relative to the response's Date (never the local clock).
 *  @param[in] s, len         the Retry-After value.
 *  @param[in] date, date_len the Date value (NULL if absent).
 *  @param[out] wait_ms       the wait; a date at or before Date gives 0.
 *  @return SLUICE_OK, SLUICE_EINVAL (malformed Retry-After, or a date
 *  without a usable Date), SLUICE_ERANGE (absurdly large). */
SLUICE_EXPORT int sluice_backoff_parse_retry_after(const char *s, size_t len,
                                                   const char *date,
                                                   size_t date_len,
                                                   int64_t *wait_ms);

/* ------------------------------------------------------------ pacing --- */

/** What the last response said about the bucket. */
typedef struct sluice_pace_input {
  int64_t limit;     /**< RateLimit-Limit (draft-10: the policy's q), >= 1 */
  int64_t remaining; /**< RateLimit-Remaining (draft-10: r), 0..limit */
  int64_t reset_ms;  /**< RateLimit-Reset (draft-10: t) in ms: until the
                          bucket is full */
  int64_t cost;      /**< points the next request costs, >= 1 */
  int64_t reserve;   /**< points to keep in hand, 0..limit-1 (10% of
                          limit is a good start) */
} sluice_pace_input;

/** @brief How long to wait before the next request of a batch so that it
 *  slows before the bucket empties instead of reacting to 429s.
 *
 *  The bucket refills at r = (limit - remaining) / reset, and the interval
 *  is cost * reset / (limit - reserve), rounded up to whole ms: 0 for a
 *  full bucket, growing as it drains, exactly the refill interval cost / r
 *  when `reserve` points are left and longer below, so the level settles
 *  at the reserve and no request is sent into a certain denial.
 *  Assumes the spec's semantics (token bucket, reset = until full).
 *  @param[in] in            the bucket as last seen.
 *  @param[out] interval_ms  wait this long before sending.
 *  @return SLUICE_OK or SLUICE_EINVAL (NULL; limit, cost or reserve
 *  outside the ranges above or over 2^40; cost above limit, which no
 *  bucket can ever admit; reset_ms negative or over 2^53). */
SLUICE_EXPORT int sluice_pace_interval(const sluice_pace_input *in,
                                       int64_t *interval_ms);

#ifdef __cplusplus
}
#endif
#endif

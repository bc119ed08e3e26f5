/*
** sluice/http.h -- what the service answers: status, RateLimit headers,
** Retry-After, X-Penalty-Box-Status and application/problem+json bodies
** (spec section 5).
**
** The HTTP layer never sees a limiter.  It reads the policy's decision,
** sluice_decision (sluice/policy.h; a caller without a policy fills one
** in), and renders it in three steps:
**
**     sluice_http_answer_make()     decision + request + now
**                                   -> sluice_http_answer
**                                   (status, the Retry-After actually sent;
**                                   the one random draw happens here)
**     sluice_http_answer_headers()  answer -> (name, value) pairs
**     sluice_http_answer_body()     answer -> problem+json bytes
**
** Splitting "decide" from "render" is what lets a render that failed for a
** small buffer be repeated with a bigger one and give the very same bytes,
** and keeps the Retry-After header and the body's retry_after_seconds equal.
**
** Header forms (sluice_http_options.header_form):
**   SLUICE_HTTP_FORM_LEGACY  the spec's three-header form, as defined by
**       draft-ietf-httpapi-ratelimit-headers-06 (22 December 2022), the
**       last revision with separate fields:
**       RateLimit-Policy: 1500;w=60   RateLimit-Limit: 1500
**       RateLimit-Remaining: 1412     RateLimit-Reset: 18
**       (Reset: seconds until the binding bucket is full, as the spec says)
**   SLUICE_HTTP_FORM_SF      the structured RateLimit-Policy and RateLimit
**       fields, in the syntax of draft-ietf-httpapi-ratelimit-headers-11
**       (23 May 2026; the same parameters as -10; docs/http.md says why
**       this revision):
**       RateLimit-Policy: "key";q=1500;qu="points";w=60,
**                         "tenant";q=3000;qu="points";w=60
**       RateLimit: "key";r=1412;t=1
**       RateLimit-Policy lists every limit of a route of declared limits,
**       in the route's order, each with its quota unit (a point is not a
**       request: a reconcile costs 10), w left out where a limit has no
**       window; otherwise the binding limit alone.  RateLimit reports the
**       binding one; its t is the draft's "effective window" (no more than
**       r can be used within it): until the next point comes back, left
**       out when the bucket is full, never after a Retry-After sent with
**       it.
**   SLUICE_HTTP_FORM_BOTH    RateLimit-Limit/-Remaining/-Reset of the old
**       form, plus RateLimit-Policy and RateLimit of the structured form
**       (both generations name a field RateLimit-Policy, so only one can
**       be sent: the structured one).
**
** Everything is integer: times are int64 ns, sent values whole seconds,
** rounded up so that nothing the service sends is earlier than the truth.
*/
#ifndef SLUICE_HTTP_H
#define SLUICE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "errno.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sluice_decision;
struct sluice_request;

/* ---------------------------------------------------------- decision --- */

/* The answer reads a sluice_decision (sluice/policy.h), as
** sluice_policy_decide() fills it; there is no second struct of "facts" to
** copy it into.  A caller without a policy (a bare limiter) zero-fills a
** sluice_decision and sets what it knows: allowed and outcome; limit,
** remaining, reset_ns (RateLimit fields; limit 0: none are sent),
** policy_window_ns (RateLimit-Policy's w), refill_rate / refill_period_ns
** (the detail's refill, the structured t); retry_after_ns; penalty_status,
** penalty_level, lockout_end_ns, strikes_remaining; cost, tier, cap_limit;
** with binding SLUICE_BINDING_LIMIT, limit_name / limit_unit and
** limits[0..nlimits).  The other fields are not read.
**
** How a decision is said:
**  - allowed wins over outcome: a shadow decision (allowed, outcome
**    THROTTLED) is answered as admitted, with its RateLimit fields; so is
**    outcome ALLOW (a zero-filled decision is a 200).
**  - status is the one sent (0: the outcome's, 200 when allowed); an
**    allowed decision may carry any 2xx or 3xx (a service answering 201
**    or 202), a refusal any 4xx or 5xx.
**  - A suspension is 403 key-suspended, Active-Lockout, no Retry-After; a
**    box of SLUICE_FOREVER promises no time either.
**  - Strikes remaining are sent only with Warning (THROTTLED), where the
**    spec's example body shows them.
**  - RateLimit fields only when 0 < limit and 0 <= remaining <= limit, and
**    never on UNAVAILABLE: figures from a degraded or absent store would
**    mislead.
**  - The structured t is until the binding bucket's next point (from
**    reset_ns, refill_rate and refill_period_ns), or reset_ns without a
**    refill (a window's end).  The per-IP backstop (SLUICE_BINDING_IP) is
**    named "ip", counted in "requests"; a declared limit
**    (SLUICE_BINDING_LIMIT) by its own name and unit, and its refusal lists
**    the limits flagged SLUICE_LIMIT_DENIED in the body's
**    violated-policies; otherwise "default", in "points".
**  - A route of declared limits lists every limit in the structured
**    RateLimit-Policy, in the route's order (the draft asks the field to
**    stay the same from one response to the next; which limit binds does
**    not), w a window's length or a bucket's time to refill from empty,
**    left out for leases. */

/* ----------------------------------------------------------- options --- */

/** Header forms; see the file comment. */
enum sluice_http_form {
  SLUICE_HTTP_FORM_LEGACY = 0,
  SLUICE_HTTP_FORM_SF = 1,
  SLUICE_HTTP_FORM_BOTH = 2
};

/** sluice_http_options.flags */
#define SLUICE_HTTP_NO_JITTER 0x1u   /**< no random addition to Retry-After */
#define SLUICE_HTTP_NO_DATES 0x2u    /**< always delta-seconds */
#define SLUICE_HTTP_DATE_HEADER 0x4u /**< also send Date (from now_ns) */
#define SLUICE_HTTP_PRETTY 0x8u      /**< indent bodies by 2 */

/** Options for sluice_http_open().  Zero-initialize, then set fields. */
typedef struct sluice_http_options {
  /** Absolute URI the problem types hang off, e.g.
   *  "https://api.example.com/errors/" (a '/' is added when missing).
   *  Copied at open.  NULL: bodies fail with SLUICE_ECONFIG. */
  const char *problem_base;
  int header_form; /**< enum sluice_http_form */
  unsigned flags;  /**< SLUICE_HTTP_* */
  /** Lockouts at least this long send Retry-After as an IMF-fixdate
   *  (0: 3600 s). */
  int64_t date_after_s;
  /** Random source for the jitter: 64 uniform bits per call.  Must be
   *  thread-safe if the handle is shared.  NULL: a generator owned by the
   *  handle, seeded from the OS random source (getrandom). */
  uint64_t (*rand)(void *ud);
  void *rand_ud; /**< passed to rand; not touched otherwise */
} sluice_http_options;

typedef struct sluice_http sluice_http;

/** @brief Create a response renderer.
 *  @param[in] opts  NULL for defaults (legacy form, jitter on, no body).
 *  @param[out] out  the handle, or NULL on failure.
 *  @return SLUICE_OK, or SLUICE_EINVAL (bad form, unknown flags, negative
 *  date_after_s, problem_base not an absolute URI of printable ASCII up to
 *  512 bytes), SLUICE_ENOMEM, SLUICE_EIO (no OS randomness for the default
 *  generator).  The handle is thread-safe. */
SLUICE_EXPORT int sluice_http_open(const sluice_http_options *opts,
                                   sluice_http **out);
/** @brief Free the handle.  NULL is a no-op.  It must not be used again
 *  after this call; answers made by it must not be rendered any more. */
SLUICE_EXPORT void sluice_http_close(sluice_http *h);

/* ------------------------------------------------------------ answer --- */

/** A decided answer.  Caller-allocated; filled by sluice_http_answer_make().
 *  Borrows the decision and the strings it was made from until its last
 *  render. */
typedef struct sluice_http_answer {
  int status;              /**< HTTP status to send */
  int outcome;             /**< enum sluice_outcome as answered: ALLOW for
                                an allowed (shadow) decision */
  int penalty;             /**< X-Penalty-Box-Status sent: enum
                                sluice_penalty_status */
  int retry_is_date;       /**< 1: Retry-After is an IMF-fixdate */
  int has_body;            /**< 1: a problem+json body goes with it */
  int64_t retry_after_s;   /**< seconds sent (jitter included), 0: none */
  int64_t retry_at_s;      /**< date form: the date sent, epoch seconds */
  int64_t lockout_ends_s;  /**< boxed: lockout end, epoch s (rounded up),
                                0: none (suspended) */
  int64_t now_s;           /**< floor(now_ns / 1 s): the Date */
  const struct sluice_decision *decision; /**< borrowed */
  const char *method;      /**< borrowed: the request's (detail) */
  const char *route;       /**< borrowed: the request's (detail, instance) */
  const char *request_id;  /**< borrowed: the body's request_id */
} sluice_http_answer;

/** @brief Decide status and Retry-After for a decision.
 *
 *  Retry-After (sent for every refusal but a suspension, nor for a box of
 *  SLUICE_FOREVER): S = ceil(retry_after_ns / 1 s), at least 1; then a
 *  jitter X drawn uniformly from the whole seconds 0..floor(S / 10) is
 *  added (none with SLUICE_HTTP_NO_JITTER), so the value sent is never
 *  below the true wait and at most 10% above S.  A box of date_after_s or
 *  more is sent as the IMF-fixdate ceil((now_ns + wait) / 1 s) + X
 *  instead (wait: the later of retry_after_ns and lockout_end_ns - now).
 *
 *  @param[in] h           the renderer.
 *  @param[in] d           the decision; borrowed until the last render.
 *  @param[in] req         the request it decided (NULL: none): its method
 *                         and route go into the body; borrowed likewise.
 *  @param[in] request_id  the body's request_id (NULL: left out);
 *                         borrowed likewise.
 *  @param[in] now_ns      current time, ns since the Unix epoch, >= 0
 *                         (lockout_end_ns must be on the same clock).
 *  @param[out] a          the answer; unspecified on error.
 *  @return SLUICE_OK or SLUICE_EINVAL (NULL pointer, unknown outcome,
 *  penalty status or binding, allowed neither 0 nor 1, status outside its
 *  range, a negative cost or cap_limit, penalty_level outside 0..3, a box
 *  without level 1..3 or without time left, SLUICE_FOREVER on a refusal
 *  that is neither boxed nor suspended, nlimits outside
 *  0..SLUICE_DECISION_LIMITS_MAX, limit names or units not printable ASCII
 *  of at most 64 and 32 bytes), SLUICE_ERANGE (a date past year 9999). */
SLUICE_EXPORT int sluice_http_answer_make(sluice_http *h,
                                          const struct sluice_decision *d,
                                          const struct sluice_request *req,
                                          const char *request_id,
                                          int64_t now_ns,
                                          sluice_http_answer *a);

/** One response header.  Both strings point into the caller's buffer
 *  (values) or to static storage (names). */
typedef struct sluice_http_header {
  const char *name;
  const char *value;
} sluice_http_header;

/** Most headers any answer has. */
#define SLUICE_HTTP_MAX_HEADERS 12
/** A header buffer of this size always suffices (values are numbers,
 *  dates, SLUICE_DECISION_LIMITS_MAX policy items with names of at most 64
 *  bytes and units of at most 32). */
#define SLUICE_HTTP_HEADER_BUF 4352

/** @brief Render an answer's headers, in the spec's order: Content-Type,
 *  Date, Retry-After, RateLimit-Policy, RateLimit-Limit,
 *  RateLimit-Remaining, RateLimit-Reset, RateLimit, X-Penalty-Box-Status.
 *  @param[in] h        the renderer that made the answer.
 *  @param[in] a        the answer.
 *  @param[out] hdrs    cap entries; each value is NUL-terminated in buf.
 *  @param[in] cap      entries available.
 *  @param[out] n       headers written, or needed on SLUICE_ERANGE.
 *  @param[out] buf     value storage, buflen bytes.
 *  @param[out] needed  bytes of buf used, or needed on SLUICE_ERANGE
 *                      (may be NULL).
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL pointers), SLUICE_ERANGE (cap or
 *  buflen too small: *n and *needed give the sizes that suffice).  The
 *  pointers stay valid while buf does.  The values are in buf one after
 *  the other, each with its NUL, in the order of hdrs; SLUICE_HTTP_MAX_HEADERS
 *  entries and SLUICE_HTTP_HEADER_BUF bytes always suffice. */
SLUICE_EXPORT int sluice_http_answer_headers(const sluice_http *h,
                                             const sluice_http_answer *a,
                                             sluice_http_header *hdrs,
                                             size_t cap, size_t *n, char *buf,
                                             size_t buflen, size_t *needed);

/** @brief Render the application/problem+json body (RFC 9457).  Members,
 *  in this order: type, title, status, detail, instance,
 *  retry_after_seconds, recommended_backoff, quota_tier,
 *  penalty_strikes_remaining, penalty_level, lockout_ends_at (RFC 3339
 *  UTC), request_id, violated-policies; members whose values are absent
 *  are left out.  The
 *  title is the problem type's (RFC 9457 3.1.3), kept under a status
 *  override; status is the one sent.
 *  @param[in] h        the renderer that made the answer.
 *  @param[in] a        the answer.
 *  @param[out] buf     buflen bytes; receives the body and a NUL.
 *  @param[out] len     body length without the NUL (0: this answer has no
 *                      body, e.g. 200 or 202), or on SLUICE_ERANGE the
 *                      buflen needed (body + NUL).
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL pointers; a string over 1024
 *  bytes, or not valid UTF-8), SLUICE_ECONFIG (no problem_base),
 *  SLUICE_ERANGE (buf too small; nothing else changed), SLUICE_ENOMEM. */
SLUICE_EXPORT int sluice_http_answer_body(const sluice_http *h,
                                          const sluice_http_answer *a,
                                          char *buf, size_t buflen,
                                          size_t *len);

/** @brief The standard reason phrase of a status ("Too Many Requests"),
 *  static; "" for codes it does not know. */
SLUICE_EXPORT const char *sluice_http_reason(int status);

/* -------------------------------------------------------- HTTP-dates --- */

/** Length of an IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT". */
#define SLUICE_HTTP_DATE_LEN 29


/** @brief Parse an HTTP-date in any of the three forms a recipient must
 *  accept (RFC 9110 5.6.7): IMF-fixdate, obsolete RFC 850
 *  ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime
 *  ("Sun Nov  6 08:49:37 1994").  Leading and trailing spaces/tabs are
 *  ignored; names are case-sensitive as the grammar says; the weekday
 *  must match the date; a leap second (:60) is read as :59.
 *  @param[in] s      the text (need not be NUL-terminated).
 *  @param[in] len    its length.
 *  @param[in] ref_s  reference time (epoch s) for RFC 850's two-digit
 *                    year: a year more than 50 years after ref_s is read
 *                    as the century before.  <= 0: years 70..99 are 19xx,
 *                    00..69 are 20xx.
 *  @param[out] epoch_s  the time.
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL, malformed, impossible date),
 *  SLUICE_ERANGE (before 1970). */
SLUICE_EXPORT int sluice_http_parse_date(const char *s, size_t len,
                                         int64_t ref_s, int64_t *epoch_s);

/** @brief Parse a non-negative decimal integer field value (delta-seconds,
 *  RateLimit-Remaining...), optional surrounding spaces/tabs.
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL, empty, not digits, sign),
 *  SLUICE_ERANGE (over 2^53). */
SLUICE_EXPORT int sluice_http_parse_uint(const char *s, size_t len,
                                         int64_t *out);

#ifdef __cplusplus
}
#endif
#endif

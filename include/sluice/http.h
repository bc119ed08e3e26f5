/*
** sluice/http.h -- what the service answers: status, RateLimit headers,
** Retry-After, X-Penalty-Box-Status and application/problem+json bodies
** (spec section 5).
**
** The HTTP layer never sees a limiter.  It reads one plain struct,
** sluice_http_facts, that says what was decided (the policy layer, or any
** caller, fills it in), and renders it in three steps:
**
**     sluice_http_answer_make()     facts + now -> sluice_http_answer
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
**       Every policy that applies is listed, the binding one first, with
**       its quota unit (a point is not a request: reconcile costs 10);
**       RateLimit reports the binding one.  With facts.policies (a policy
**       file's declared limits), those are listed instead, in their
**       order, w left out where a policy has no window.  t is the draft's "effective
**       window" (no more than r can be used within it): until the next
**       point comes back, left out when the bucket is full, never after a Retry-After
**       sent with it.
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

/* ------------------------------------------------------------- facts --- */

/** What was decided for one request. */
enum sluice_http_outcome {
  SLUICE_HTTP_ALLOWED = 0,     /**< 200 (or the status override) */
  SLUICE_HTTP_THROTTLED = 1,   /**< 429, rate-limit-exceeded */
  SLUICE_HTTP_BOXED = 2,       /**< 429, penalty-box-active */
  SLUICE_HTTP_CONCURRENCY = 3, /**< 429, concurrency-limit-exceeded */
  SLUICE_HTTP_CONFLICT = 4,    /**< 409, ledger-conflict (lock held) */
  SLUICE_HTTP_FAIL_CLOSED = 5, /**< 503, service-unavailable */
  SLUICE_HTTP_ACCEPTED = 6,    /**< 202, async job accepted */
  SLUICE_HTTP_SUSPENDED = 7    /**< 403, key-suspended: level 3 pending
                                    review; Active-Lockout, no Retry-After */
};

/** Why a client is boxed (sluice_http_facts.box_reason), for the detail. */
enum sluice_http_box_reason {
  SLUICE_HTTP_BOX_STRIKES = 0, /**< it kept coming back before Retry-After */
  SLUICE_HTTP_BOX_AUTH = 1     /**< too many failed sign-ins (auth lockout,
                                    credential stuffing) */
};

/** X-Penalty-Box-Status. */
enum sluice_http_penalty {
  SLUICE_HTTP_PENALTY_NONE = 0,   /**< header not sent */
  SLUICE_HTTP_PENALTY_WARNING = 1, /**< "Warning": strikes accumulating */
  SLUICE_HTTP_PENALTY_LOCKOUT = 2  /**< "Active-Lockout": boxed */
};

/** sluice_http_facts.flags */
#define SLUICE_HTTP_F_STRIKES 0x1u /**< strikes_remaining is known: send
                                        penalty_strikes_remaining */
#define SLUICE_HTTP_F_NAMED 0x2u   /**< a refusal by a named limit (a policy
                                        file's declared limit): the body's
                                        detail speaks of policy_name and
                                        quota_unit, and violated-policies
                                        lists policy_name (required) */

/** Most quota policies one answer lists (sluice_http_facts.policies). */
#define SLUICE_HTTP_POLICIES_MAX 8

/** sluice_http_policy.flags */
#define SLUICE_HTTP_P_VIOLATED 0x1u /**< this policy refused the request:
                                         the body's violated-policies names
                                         it */

/** One quota policy of the structured RateLimit-Policy field: an item
 *  "name";q=quota[;qu="unit"][;w=window_s]. */
typedef struct sluice_http_policy {
  const char *name; /**< printable ASCII, at most 64 bytes (required) */
  const char *unit; /**< qu; NULL: not sent (the draft reads "requests");
                         printable ASCII, at most 32 bytes */
  int64_t quota;    /**< q, >= 0 */
  int64_t window_s; /**< w, seconds; 0: not sent (a concurrency limit has
                         no window) */
  unsigned flags;   /**< SLUICE_HTTP_P_* */
  int reserved;     /**< must be 0 */
} sluice_http_policy;

/** Everything the answer needs, and nothing else: there is no field for a
 *  key, a backend or another tenant, so none can leak into a response.
 *  Zero-initialize, then set fields.  Strings are borrowed for the
 *  duration of each call that reads them (and by an answer made from the
 *  facts, until its last render); NULL means "absent" and the item that
 *  needs it is left out.  Strings must be valid UTF-8.
 *
 *  Time fields: durations are ns from `now_ns`; lockout_ends_ns is ns
 *  since the Unix epoch (now_ns must then be on the same clock). */
typedef struct sluice_http_facts {
  int outcome; /**< enum sluice_http_outcome */
  /** 0: the outcome's status.  Otherwise 200..399 for ALLOWED/ACCEPTED,
   *  400..599 for the others. */
  int status;
  int penalty;       /**< enum sluice_http_penalty (BOXED and SUSPENDED
                          imply LOCKOUT) */
  int penalty_level; /**< 1..3 when boxed (0..3 accepted, used only
                          when boxed; a suspension is level 3) */
  unsigned flags;    /**< SLUICE_HTTP_F_* */
  /** Policy quota (points per window) and window (s) for RateLimit-Policy;
   *  quota 0: no policy item.  A quota needs window_s >= 1. */
  int64_t quota;
  int64_t window_s;
  /** RateLimit-Limit (points; 0: no RateLimit headers at all). */
  int64_t limit;
  int64_t remaining;         /**< points left, 0..limit */
  int64_t reset_ns;          /**< until the bucket is full, >= 0 */
  /** The true wait before a retry can succeed (>= 0).  Denials send at
   *  least 1 s.  SLUICE_FOREVER: suspended until released by hand (no
   *  Retry-After is sent). */
  int64_t retry_after_ns;
  int64_t lockout_ends_ns;   /**< boxed: when the box ends (0: now +
                                  retry_after_ns) */
  int64_t strikes_remaining; /**< with SLUICE_HTTP_F_STRIKES, >= 0 */
  int64_t cost;              /**< points this request costs (detail) */
  int64_t refill_per_s;      /**< refill rate, points/s (detail; 0: omit) */
  const char *tier;          /**< "growth": quota_tier and detail */
  const char *method;        /**< "POST" (detail) */
  const char *route;         /**< "/v1/ledgers/reconcile" (detail) */
  const char *instance;      /**< problem "instance" (the request path) */
  const char *request_id;    /**< "req_01HV..." */
  const char *policy_name;   /**< structured-form policy name (NULL:
                                  "default"); printable ASCII */
  const char *location;      /**< ACCEPTED: job URL for Location */
  int box_reason;            /**< BOXED: enum sluice_http_box_reason */
  /** CONCURRENCY: the concurrency limit that was hit (detail; 0: omit). */
  int64_t concurrency_limit;
  /** Until the next unit of quota comes back (structured t; 0: unknown,
   *  then t is reset_ns, or left out when reset_ns is 0 too). */
  int64_t next_ns;
  /** A second policy that also applies (structured RateLimit-Policy only,
   *  listed after the first): quota 0: none; needs other_window_s >= 1
   *  and other_policy_name. */
  int64_t other_quota;
  int64_t other_window_s;
  const char *other_policy_name;
  /** The structured form's quota unit, qu (NULL: not sent, which the
   *  draft reads as "requests"); printable ASCII, at most 32 bytes. */
  const char *quota_unit;
  /** BOXED: who is locked out and why, the words the detail starts with
   *  (printable ASCII; NULL: by box_reason) */
  const char *box_detail;
  /** Every quota policy that applies, in a stable order (a policy file's
   *  declared limits: the route's order).  npolicies > 0 replaces the
   *  policy_name / other_policy_name pair in the structured
   *  RateLimit-Policy, which then lists these (RateLimit still reports
   *  policy_name: the binding one); a refusal (SLUICE_HTTP_F_NAMED) names
   *  the ones flagged SLUICE_HTTP_P_VIOLATED in violated-policies.  The
   *  legacy form is unchanged. */
  int npolicies;
  int reserved_int_; /**< must be 0 */
  sluice_http_policy policies[SLUICE_HTTP_POLICIES_MAX];
} sluice_http_facts;

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
  void *reserved[4];
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
 *  Holds a copy of the facts, whose strings stay borrowed. */
typedef struct sluice_http_answer {
  int status;              /**< HTTP status to send */
  int penalty;             /**< effective X-Penalty-Box-Status */
  int retry_is_date;       /**< 1: Retry-After is an IMF-fixdate */
  int has_body;            /**< 1: a problem+json body goes with it */
  int64_t retry_after_s;   /**< seconds sent (jitter included), 0: none */
  int64_t retry_at_s;      /**< date form: the date sent, epoch seconds */
  int64_t lockout_ends_s;  /**< boxed: lockout end, epoch s (rounded up),
                                0: none (suspended) */
  int64_t now_s;           /**< floor(now_ns / 1 s): the Date */
  sluice_http_facts facts; /**< the facts, copied */
  void *reserved[4];
} sluice_http_answer;

/** @brief Decide status and Retry-After for a set of facts.
 *
 *  Retry-After (sent for every outcome but ALLOWED, ACCEPTED and
 *  SUSPENDED, nor for a box of SLUICE_FOREVER): S = ceil(retry_after_ns / 1 s), at least 1 for a
 *  denial; then a jitter X drawn uniformly from the whole seconds
 *  0..floor(S / 10) is added (none with SLUICE_HTTP_NO_JITTER), so the
 *  value sent is never below the true wait and at most 10% above S.
 *  A lockout of date_after_s or more is sent as the IMF-fixdate
 *  ceil((now_ns + retry_after_ns) / 1 s) + X instead.
 *
 *  @param[in] h       the renderer.
 *  @param[in] f       the facts; copied (their strings stay borrowed).
 *  @param[in] now_ns  current time, ns since the Unix epoch, >= 0.
 *  @param[out] a      the answer; unspecified on error.
 *  @return SLUICE_OK or SLUICE_EINVAL (NULL pointer, unknown outcome,
 *  penalty or flag, status outside its range, negative numbers,
 *  remaining > limit, quota without window, boxed without level 1..3 or
 *  without a wait, a suspension at a level other than 3, lockout on an
 *  outcome that is neither boxed nor suspended, an unknown box_reason,
 *  other_quota without window or name, policy names or quota_unit not
 *  printable ASCII, location with control characters), SLUICE_ERANGE
 *  (a date past year 9999). */
SLUICE_EXPORT int sluice_http_answer_make(sluice_http *h,
                                          const sluice_http_facts *f,
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
 *  dates, SLUICE_HTTP_POLICIES_MAX policy items with names of at most 64
 *  bytes and units of at most 32, and a Location of at most 2048). */
#define SLUICE_HTTP_HEADER_BUF 4352

/** @brief Render an answer's headers, in the spec's order: Content-Type,
 *  Location, Date, Retry-After, RateLimit-Policy, RateLimit-Limit,
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
 *  pointers stay valid while buf does. */
SLUICE_EXPORT int sluice_http_answer_headers(const sluice_http *h,
                                             const sluice_http_answer *a,
                                             sluice_http_header *hdrs,
                                             size_t cap, size_t *n, char *buf,
                                             size_t buflen, size_t *needed);

/** @brief Called once per header; name and value are NUL-terminated and
 *  valid only during the call.  Return 0 to go on; anything else stops
 *  the walk and is returned by sluice_http_answer_foreach_header(). */
typedef int (*sluice_http_header_cb)(const char *name, const char *value,
                                     void *ud);

/** @brief Render an answer's headers through a callback (same order and
 *  values as sluice_http_answer_headers()).
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL pointers) or the callback's
 *  nonzero return. */
SLUICE_EXPORT int sluice_http_answer_foreach_header(const sluice_http *h,
                                                    const sluice_http_answer *a,
                                                    sluice_http_header_cb cb,
                                                    void *ud);

/** @brief Render the application/problem+json body (RFC 9457).  Members,
 *  in this order: type, title, status, detail, instance,
 *  retry_after_seconds, recommended_backoff, quota_tier,
 *  penalty_strikes_remaining, penalty_level, lockout_ends_at (RFC 3339
 *  UTC), request_id; members whose facts are absent are left out.  The
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

/** @brief Format epoch seconds as an IMF-fixdate (RFC 9110 5.6.7).
 *  @param[in] epoch_s  0 (1970) .. 253402300799 (9999-12-31T23:59:59).
 *  @param[out] out     SLUICE_HTTP_DATE_LEN + 1 bytes, NUL-terminated.
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL), SLUICE_ERANGE. */
SLUICE_EXPORT int sluice_http_format_date(int64_t epoch_s,
                                          char out[SLUICE_HTTP_DATE_LEN + 1]);

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

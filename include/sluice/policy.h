/*
** sluice/policy.h -- a policy file's whole request flow in one call.
**
** A service describes each request (method, route, tenant, API key, tier,
** client IP, and the attributes its policy file declares) in a
** sluice_request and calls sluice_policy_decide() once.  The policy file
** (etc/ledger.conf by default: the spec's ledger API) declares the limits
** each route applies, with their costs, and the penalties; the policy runs
** them, on any backend through the limiter's vtable:
**
**   1. the route's penalty box checks (no limit work and no strikes while
**      boxed),
**   2. the route's limits in order, one atomic program per hash-tag group
**      (buckets, windows, concurrency leases, locks, caps; a denial
**      consumes nothing anywhere), a strike as the penalty counts them,
**      box trips along its ladder,
**
** and fills a sluice_decision with everything an HTTP answer needs.  Store
** failures take each route's failure mode (fail closed, or a local
** degraded limiter); shadow mode decides and records everything but
** enforces nothing.  docs/policy.md is the guide to writing a policy file
** and its reference.
**
** Thread safety: a policy is safe to use from several threads at once when
** its limiter's store is (SLUICE_CAP_THREADSAFE: every built-in store).  Its
** configuration is immutable after open; counters are atomic.  The event
** callback runs on the thread that made the call, with no lock held.
*/
#ifndef SLUICE_POLICY_H
#define SLUICE_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "version.h"
#include "errno.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_policy sluice_policy;
struct sluice_limiter;
struct sluice_limiter_options;

/** Most tiers a configuration may name. */
#define SLUICE_POLICY_TIERS_MAX 8
/** Longest tier name, in bytes, without the NUL. */
#define SLUICE_POLICY_NAME_MAX 31
/** Longest segment URI in a configuration (the "host" group), NUL excluded. */
#define SLUICE_POLICY_URI_MAX 127
/** Longest route pattern, in bytes, without the NUL. */
#define SLUICE_POLICY_ROUTE_MAX 127
/** Longest raw identifier (tenant, key, IP, an attribute's value), in
 *  bytes. */
#define SLUICE_POLICY_ID_MAX 256

/* ------------------------------------------------------------ requests --- */

/** A request attribute: a name the policy file declares (its top-level
 *  `attributes` list) and its raw value.  Both borrowed for the call;
 *  values are hashed like every other id before they reach a key. */
typedef struct sluice_attr {
  const char *name;
  const char *value;
} sluice_attr;

/** One request, described by the caller.  Zero-initialize, then set the
 *  fields that apply.  Every pointer is borrowed for the duration of the
 *  call only; strings are NUL-terminated raw identifiers, hashed with the
 *  policy's secret (sluice_scope_id) before they reach any key. */
typedef struct sluice_request {
  const char *tenant_id;  /**< attribute `tenant` (NULL: not given) */
  const char *api_key_id; /**< attribute `key` (NULL: not given) */
  const char *tier;       /**< tier name ("growth"), or NULL */
  const char *method;     /**< "GET", "POST"... (required) */
  const char *route;      /**< "/v1/ledgers/reconcile" (required) */
  const char *client_ip;  /**< the client's address (the per-IP backstop,
                               attribute `ip`) */
  /** Must be 0: costs come from the policy file (a route's cost may be
   *  an attribute the caller supplies). */
  int64_t cost;
  /** Attributes beside the common fields, for the limits a policy file
   *  declares (docs/policy.md "Declared limits"): nattrs pairs, or NULL
   *  and 0.  A name given twice: the first wins. */
  const sluice_attr *attrs;
  size_t nattrs;
  void *reserved[6];
} sluice_request;

/* ----------------------------------------------------------- decisions --- */

/** What the policy decided (in shadow mode: what it would have decided). */
enum sluice_outcome {
  SLUICE_OUTCOME_ALLOW = 0,       /**< 200: go ahead */
  SLUICE_OUTCOME_THROTTLED = 1,   /**< 429: not enough points */
  SLUICE_OUTCOME_BOXED = 2,       /**< 429: penalty box (Active-Lockout) */
  SLUICE_OUTCOME_SUSPENDED = 3,   /**< 403: key suspended pending review */
  SLUICE_OUTCOME_CONCURRENCY = 4, /**< 429: a concurrency limit's leases are
                                       all held */
  SLUICE_OUTCOME_CONFLICT = 5,    /**< 409: a lock is held (a limit of
                                       status 409) */
  SLUICE_OUTCOME_UNAVAILABLE = 6, /**< 503: store failed, the route fails
                                       closed */
  SLUICE_OUTCOME__COUNT = 7
};

/** X-Penalty-Box-Status. */
enum sluice_penalty_status {
  SLUICE_PENALTY_NONE = 0,
  SLUICE_PENALTY_WARNING = 1,       /**< throttled: strikes accumulate */
  SLUICE_PENALTY_ACTIVE_LOCKOUT = 2 /**< boxed or suspended */
};

/** What set limit / remaining / reset (the values of earlier versions
 *  kept). */
enum sluice_binding {
  SLUICE_BINDING_NONE = 0,
  SLUICE_BINDING_IP = 4,   /**< the per-IP backstop's fixed window */
  SLUICE_BINDING_LIMIT = 5 /**< a declared limit: sluice_decision.limit_name */
};

/** Decision flags. */
#define SLUICE_DECISION_DEGRADED 0x01u    /**< local degraded limiter used */
#define SLUICE_DECISION_FAIL_CLOSED 0x02u /**< store failed: 503 */
#define SLUICE_DECISION_SHADOW 0x04u      /**< shadow mode: not enforced */
#define SLUICE_DECISION_EDGE_DENY 0x08u   /**< level >= 2: put the key (or
                                               IP) in the edge deny cache */
#define SLUICE_DECISION_TRIPPED 0x10u     /**< this request tripped a box */
#define SLUICE_DECISION_STRIKE 0x20u      /**< this request was a strike */
#define SLUICE_DECISION_STUFFING 0x40u    /**< credential-stuffing signature */
#define SLUICE_DECISION_DENY_CACHED 0x80u /**< a box from the deny cache: no
                                               store call (or store down) */
/** The store had no room for a record this decision needed
 *  (SLUICE_EFULL; d->store_error says it when the decision was then made
 *  without the store).  Full is not an outage: it opens no breaker and
 *  emits SLUICE_EVENT_STORE_FULL, not DEGRADED_ON.  With the per-IP
 *  backstop's window refused for room, the request is decided without the
 *  backstop, on its own limits. */
#define SLUICE_DECISION_STORE_FULL 0x100u
/** sluice_policy_settle() settled this decision (a second settle of it is
 *  refused). */
#define SLUICE_DECISION_SETTLED 0x200u

/** Most limits a route of declared limits may list: the room of
 *  sluice_decision.limits (a route listing more is refused at load). */
#define SLUICE_DECISION_LIMITS_MAX 8

/** sluice_decision_limit.flags */
#define SLUICE_LIMIT_DENIED 0x1u  /**< this limit refused the request */
#define SLUICE_LIMIT_BINDING 0x2u /**< the binding one (limit_name) */
#define SLUICE_LIMIT_NOT_RUN 0x4u /**< not reached: an earlier limit
                                       refused; remaining and reset_ns are
                                       -1 (unknown), nothing was taken */
#define SLUICE_LIMIT_GROUPED 0x8u /**< decided with other buckets as one
                                       group (`group` in the file): only
                                       the group's binding bucket has its
                                       remaining and reset_ns; the others'
                                       are -1 (unknown) */

/** One limit a request of a declared route passed (or met), in the
 *  route's order: sluice_decision.limits.  Strings are owned by the policy
 *  (valid until close). */
typedef struct sluice_decision_limit {
  const char *name;  /**< the limit's name in the policy file */
  const char *unit;  /**< what it counts ("requests", "tokens") */
  int64_t quota;     /**< its capacity: a bucket's burst, a window's
                          limit, a lease set's leases */
  int64_t window_ns; /**< a window's length; a bucket's time to refill
                          from empty (burst / rate); 0 for leases */
  int64_t remaining; /**< left after this request (-1: NOT_RUN) */
  int64_t reset_ns;  /**< until it is full again (a window: its end);
                          -1: NOT_RUN */
  int64_t cost;      /**< what this request takes of it (or would have) */
  unsigned flags;    /**< SLUICE_LIMIT_* */
} sluice_decision_limit;

/** The whole decision.  Caller-allocated; sluice_policy_decide() overwrites
 *  every field.  Holds no pointers into the request; `invalid_field` is a
 *  static string. */
typedef struct sluice_decision {
  int allowed;  /**< 1: serve the request (always 1 in shadow mode) */
  int outcome;  /**< enum sluice_outcome: the policy's verdict */
  int status;   /**< HTTP status to send: 200 when allowed, else the
                     outcome's (429, 403, 409, 503) */
  int verdict_status; /**< the outcome's status even in shadow mode */
  unsigned flags;     /**< SLUICE_DECISION_* */
  int64_t cost;       /**< points charged (or that would have been) */
  char tier[SLUICE_POLICY_NAME_MAX + 1]; /**< tier name ("" when none) */
  /* The binding limit (RateLimit-Limit / -Remaining / -Reset). */
  int binding;             /**< enum sluice_binding */
  int64_t limit;           /**< its capacity (burst), points */
  int64_t remaining;       /**< points left after this request */
  int64_t reset_ns;        /**< until the bucket is full again */
  /** RateLimit-Policy's w (its quota is limit): a bucket's time to refill
   *  from empty (burst / rate), a window's length; 0: none. */
  int64_t policy_window_ns;
  int64_t refill_rate;     /**< points per refill_period_ns (detail) */
  int64_t refill_period_ns;
  /** When not allowed (or would not be): the wait before a retry can
   *  pass.  0 for a suspension (no retry helps), for ALLOW. */
  int64_t retry_after_ns;
  /* Penalty box (X-Penalty-Box-Status, problem+json). */
  int penalty_status;        /**< enum sluice_penalty_status */
  int penalty_level;         /**< 0..3 */
  int64_t lockout_end_ns;    /**< absolute box end; SLUICE_FOREVER when
                                  suspended; 0 when not boxed */
  int64_t strikes_remaining; /**< strikes (or reported failures) left */
  /** Lease granted by the route's concurrency limits and locks (0: none;
   *  one id for all of them).  Release it with
   *  sluice_policy_release() (SLUICE_HOLD_LEASE) in the handler's finally
   *  path; if the worker dies, the lease is reclaimed after its TTL. */
  uint64_t lease_id;
  int64_t lease_ttl_ns;
  int64_t now_ns;            /**< the time the decision was made at (an
                                  admitted request on a route of declared
                                  limits: the store's, Redis's TIME) */
  int store_error;           /**< the SLUICE_E* the store gave, or 0 */
  /** On an input error: the request field at fault ("tier", "route"...),
   *  a static string; NULL otherwise. */
  const char *invalid_field;
  /** The limit a CONCURRENCY denial hit (0 otherwise): the leases its
   *  scope may hold at once. */
  int64_t cap_limit;
  /** A route of declared limits (binding SLUICE_BINDING_LIMIT): the
   *  binding limit's name, owned by the policy (valid until close);
   *  NULL otherwise.  Denied: the limit that refused; allowed: the one
   *  with the least left, as a fraction of its own limit. */
  const char *limit_name;
  /** ... and the unit it counts ("requests", "points", "tokens"), owned
   *  by the policy; NULL otherwise. */
  const char *limit_unit;
  /** An admitted request on a route of declared limits: what
   *  sluice_policy_settle() checks the request it is given against (the
   *  costs charged, the time); 0 when there is nothing to settle. */
  uint64_t settle_check;
  /** Every limit the route lists, in its order (limits[0..nlimits)), each
   *  with its figures for this request; the binding one is also in the
   *  fields above. */
  int nlimits;
  sluice_decision_limit limits[SLUICE_DECISION_LIMITS_MAX];
  /** BOXED by a declared penalty with a `detail`: who is locked out and
   *  why, the words the problem detail starts with ("Too many failed
   *  sign-in attempts; sign-in"), owned by the policy (valid until
   *  close); NULL otherwise (the generic wording). */
  const char *box_detail;
} sluice_decision;

/* -------------------------------------------------------- configuration --- */

/** A configuration: the settings of a policy file (docs/policy.md), held
 *  as a document.  Build it from the built-in defaults or a file, change
 *  settings by their path, read the values in force back, and pass it to
 *  sluice_policy_open() in sluice_policy_options.config.  Not thread-safe
 *  while being changed; any number of threads may read it otherwise. */
typedef struct sluice_policy_config sluice_policy_config;

/** @brief A configuration: the built-in defaults, or a file's settings
 *  (libconfig syntax; settings left out keep their default, an unknown
 *  setting is an error, listing `tiers` or `routes` replaces the built-in
 *  set).
 *  @param[out] out   the configuration, or NULL on failure.
 *  @param[in] path   NULL for the default policy (the ledger API's
 *                    etc/ledger.conf, compiled in; its messages name
 *                    "ledger.conf (built in)"), else the file (read during
 *                    the call only).
 *  @param[out] err   NULL, or a buffer: on failure "FILE:LINE: SETTING:
 *                    problem"; on success the file's first warning (a
 *                    declared limit no route applies), "" when none.
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL out), SLUICE_EIO (cannot read
 *  the file), SLUICE_ECONFIG (syntax or invalid setting), SLUICE_ENOMEM. */
SLUICE_EXPORT int sluice_policy_config_new(sluice_policy_config **out,
                                           const char *path, char *err,
                                           size_t errlen);

/** @brief Set one setting, creating it (and the groups above it) or
 *  replacing it, then check the whole configuration as a file's is checked.
 *  @param[in] path   the setting's path in the file: names joined by '.',
 *                    "[i]" for element i of a list ("penalty.strike_window_ms",
 *                    "tiers.growth.key.burst", "routes.[0].class"); "[n]"
 *                    one past a list's last element adds one.  Naming a
 *                    tier or a route while the configuration has the
 *                    built-in set starts from that set.
 *  @param[in] value  libconfig syntax: 5, true, "page", [ "penalty" ],
 *                    { rate = 5; burst = 10; }; a bare word is a string.
 *  @param[out] err   NULL, or a buffer for "set: SETTING: problem" (a
 *                    setting of the file stays "FILE:LINE: SETTING: ...").
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL arguments), SLUICE_ECONFIG (a bad
 *  path, value or resulting configuration: nothing changed), SLUICE_ENOMEM. */
SLUICE_EXPORT int sluice_policy_config_set(sluice_policy_config *c,
                                           const char *path,
                                           const char *value, char *err,
                                           size_t errlen);

/** @brief A setting's value in force, as text: a number in the unit its
 *  name says, true or false, a string without quotes; a list of names
 *  (shadow_features, failure.fail_closed) comma-separated; a group its
 *  members' names comma-separated ("tiers": "sandbox,growth,enterprise");
 *  a list its length ("routes"); "tiers.[i]" the name of tier i.
 *  Defaults are in force too: "penalty.strike_window_ms" reads 60000 in an
 *  empty file.
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL arguments), SLUICE_ENOTFOUND (no
 *  such setting), SLUICE_ERANGE (buf too small; it holds a truncated
 *  value). */
SLUICE_EXPORT int sluice_policy_config_get(const sluice_policy_config *c,
                                           const char *path, char *buf,
                                           size_t len);

/** @brief Free a configuration (NULL: nothing).  A policy opened from it
 *  keeps its own copy. */
SLUICE_EXPORT void sluice_policy_config_free(sluice_policy_config *c);

/** Features shadow mode can leave unenforced one by one (staged rollout:
 *  enforce the buckets while the penalty box only records).  A decision
 *  whose outcome belongs to a shadowed feature is served, flagged
 *  SLUICE_DECISION_SHADOW, with d->outcome saying what enforcement would
 *  have done. */
enum sluice_shadow_feature {
  SLUICE_SHADOW_BUCKETS = 0x1,     /**< THROTTLED */
  SLUICE_SHADOW_PENALTY = 0x2,     /**< BOXED, SUSPENDED */
  SLUICE_SHADOW_LEASES = 0x4,      /**< CONCURRENCY, CONFLICT */
  SLUICE_SHADOW_FAIL_CLOSED = 0x8, /**< UNAVAILABLE */
  SLUICE_SHADOW_ALL = 0xf
};

/** @brief The SLUICE_SHADOW_* features a policy leaves unenforced for the
 *  requests of a tier (NULL: for every request): the configuration's
 *  shadow_features, and those of its shadow_when entries that name this
 *  tier alone; all of them in whole shadow mode.
 *  @return the bits, or -1 for a NULL policy. */
SLUICE_EXPORT int sluice_policy_shadow_features(const sluice_policy *p,
                                                const char *tier);

/** One scalar setting of the configuration file (docs/policy.md has them
 *  all): the same table drives the defaults, the loader, the validator and
 *  the documentation. */
typedef struct sluice_policy_setting {
  const char *group;  /**< "breaker" */
  const char *name;   /**< "window_ms" (the unit is in the name) */
  const char *field;  /**< the library's internal field ("breaker_window_ns"),
                           for `sluice settings` */
  int64_t unit_ns;    /**< the field per unit of the file's value (1: none) */
  int64_t dflt;       /**< the default, in the file's unit */
  int64_t min, max;   /**< bounds in the file's unit */
  const char *what;   /**< one line */
} sluice_policy_setting;

/** @brief Setting i of the table (0, 1, ...), or NULL past its end. */
SLUICE_EXPORT const sluice_policy_setting *sluice_policy_setting_at(int i);

/** A setting of a policy file's declared limits and routes (docs/policy.md
 *  "Declared limits"): `limits.NAME.<name>` or `routes.[i].<name>`. */
typedef struct sluice_limit_setting {
  const char *group;      /**< "limits" or "routes" */
  const char *name;       /**< "rate", "limits[].cost"... */
  const char *algorithms; /**< the algorithms it applies to, or "every" */
  int64_t unit_ns;        /**< a number: the value per unit of the file's
                               (1e6 for _ms); 0: not a number */
  int64_t min, max;       /**< a number's bounds, in the file's unit */
  const char *value;      /**< not a number: the form it takes */
  const char *what;       /**< one line */
} sluice_limit_setting;

/** @brief Setting i of the declared limits' and routes' table (0, 1,
 *  ...), or NULL past its end.  The loader takes its numbers' bounds from
 *  it; `sluice settings` prints it. */
SLUICE_EXPORT const sluice_limit_setting *sluice_policy_limit_setting_at(int i);

/* ---------------------------------------------------------------- events --- */

enum sluice_event_type {
  SLUICE_EVENT_BOX_TRIP = 1,     /**< a box tripped (level, scope) */
  SLUICE_EVENT_EDGE_DENY = 2,    /**< level >= 2: add to the edge deny
                                      cache / WAF IP set until until_ns */
  SLUICE_EVENT_ALERT = 3,        /**< level 2: tell the tenant and support */
  SLUICE_EVENT_SUSPEND = 4,      /**< level 3: key suspended pending review */
  SLUICE_EVENT_PAGE = 5,         /**< a level whose action is page */
  SLUICE_EVENT_IP_BAN = 6,       /**< a level whose action is ban (an
                                      address's box) */
  SLUICE_EVENT_STUFFING = 7,     /**< credential-stuffing signature */
  SLUICE_EVENT_RELEASE = 8,      /**< manual early release (who, why) */
  SLUICE_EVENT_LIFT = 9,         /**< suspension lifted (who, why) */
  SLUICE_EVENT_DEGRADED_ON = 10, /**< store failing: degraded / fail-closed */
  SLUICE_EVENT_DEGRADED_OFF = 11, /**< store answering again */
  SLUICE_EVENT_LEASE_DENIED = 12, /**< a concurrency limit or lock refused */
  SLUICE_EVENT_STORE_FULL = 13,  /**< the store had no room (store_error
                                      SLUICE_EFULL); at most one per
                                      SLUICE_POLICY_FULL_EVENT_NS a process */
  SLUICE_EVENT__COUNT = 14
};

/** SLUICE_EVENT_STORE_FULL comes at most once per this many ns (1 s) from
 *  one policy: a full store is a state, not one event per request. */
#define SLUICE_POLICY_FULL_EVENT_NS INT64_C(1000000000)

/** Scopes a box applies to. */
enum sluice_scope_kind {
  SLUICE_SCOPE_KEY = 1,     /**< one API key of a tenant */
  SLUICE_SCOPE_IP = 2,      /**< a client IP */
  SLUICE_SCOPE_SUBJECT = 3, /**< a subject (a sign-in's account: a
                                 penalty scoped by an untrusted attribute) */
  SLUICE_SCOPE_TENANT = 4   /**< a tenant (a limit's lease denials) */
};

/** An event.  Every pointer is valid only during the callback. */
typedef struct sluice_event {
  int type;            /**< enum sluice_event_type */
  int scope;           /**< enum sluice_scope_kind, 0 for degraded events */
  int level;           /**< box level 1..3 (BOX_TRIP and after) */
  int outcome;         /**< LEASE_DENIED: the outcome */
  int store_error;     /**< DEGRADED_ON, STORE_FULL: the store's SLUICE_E* */
  const char *scope_id;  /**< hashed id (32 hex) of the scope, or NULL */
  const char *tenant_scope_id; /**< sluice_scope_id() of the tenant, or NULL */
  const char *tier;      /**< tier name, or NULL */
  const char *who, *why; /**< RELEASE / LIFT: the audit entry */
  /** The request that caused it (degraded off: NULL; release, lift and a
   *  renewal's EDGE_DENY: the operator's request naming the scope): lets
   *  the service name the raw key in an alert, or an address in a set. */
  const struct sluice_request *request;
  int64_t now_ns;
  int64_t until_ns;      /**< box end (SLUICE_FOREVER: suspended) */
} sluice_event;

/** Event callback.  Runs synchronously on the calling thread, no lock
 *  held; it may call back into the policy.  Must be thread-safe if the
 *  policy is used from several threads. */
typedef void (*sluice_policy_event_fn)(void *userdata, const sluice_event *ev);

/* ----------------------------------------------------------------- open --- */

/** Flags for sluice_policy_options. */
#define SLUICE_POLICY_SHADOW 0x1u /**< shadow mode, whatever the config says */

/** Options for sluice_policy_open().  Zero-initialize, then set fields. */
typedef struct sluice_policy_options {
  /** Borrowed: must outlive the policy.  NULL: the policy opens (and owns)
   *  a limiter from limiter_options. */
  struct sluice_limiter *limiter;
  /** Used only when limiter is NULL (NULL: a "mem" store, real clock). */
  const struct sluice_limiter_options *limiter_options;
  /** Read at open (the policy keeps its own copy).  NULL: load
   *  config_path, or the default policy when that is NULL too: the ledger
   *  API's etc/ledger.conf, compiled in. */
  const sluice_policy_config *config;
  const char *config_path; /**< read during open only */
  /** Key for scope ids (sluice_scope_id).  Must not be all zero.  Every
   *  process sharing a store must use the same secret. */
  uint8_t secret[16];
  sluice_policy_event_fn on_event; /**< NULL: no events */
  void *userdata;                  /**< passed to on_event; not touched */
  unsigned flags;                  /**< SLUICE_POLICY_* */
  /** NULL, or a buffer that gets a message on failure (the config file,
   *  line and setting at fault). */
  char *errbuf;
  size_t errlen;
  /** NULL or "": the counters live in the policy.  "shm:name=/NAME": in a
   *  POSIX shared-memory object (created when missing, never removed by
   *  the library) that every process opening the same name counts into
   *  with atomic adds, so any process's sluice_policy_metrics() shows the
   *  host's totals, which never decrease while the object exists.  Every
   *  process must configure the same tiers, in the same order
   *  (SLUICE_ECONFIG otherwise: pick a new name when the tiers change).
   *  Read during open only. */
  const char *counters;
  /** NULL or "": the degraded limiter (what decides while the store
   *  fails) is in-process memory, so a host of N workers admits N times
   *  degraded_percent of a tier's rate.  "shm:name=/NAME[;capacity=N]": a
   *  shm store (docs/shm.md; created when missing) shared by every process
   *  naming it, so the host admits degraded_percent whatever the number of
   *  workers.  Read during open only. */
  const char *degraded_store;
  /** The deny cache: the boxes, suspensions and edge denies seen, with
   *  their end times.  NULL or "": in-process, read in degraded mode only
   *  (a box holds through a store outage).  "shm:name=/NAME[;slots=N]": a
   *  segment (created when missing, never removed by the library; slots 1
   *  to 2^24, default 4096, the same in every process) that every process
   *  naming it fills and reads, before the store too (a cached box costs
   *  no store call).  A release drops the entry from the cache of the
   *  policy that releases: give sluice release the same segment.  NULL
   *  takes the configuration's host_deny_cache.  Read during open only. */
  const char *deny_cache;
} sluice_policy_options;

/** @brief Open a policy.
 *  @param[in] opts  required (the secret is).
 *  @param[out] out  the policy, or NULL on failure (nothing to free).
 *  @return SLUICE_OK or: SLUICE_EINVAL (NULL, zero secret, unknown flags),
 *  SLUICE_ECONFIG / SLUICE_EIO (configuration), SLUICE_ERANGE (a setting
 *  beyond what the store decides exactly, SLUICE_CTL_PARAMS_IN_RANGE; errbuf
 *  names it), SLUICE_ENOMEM, or the limiter's open error. */
SLUICE_EXPORT int sluice_policy_open(const sluice_policy_options *opts,
                                     sluice_policy **out);

/** @brief What sluice_policy_open() checks before it opens or attaches
 *  anything, alone: the flags, the secret, the configuration (`config`,
 *  else `config_path`, else the defaults) and the host segments' strings
 *  (their form and parameters, not what an existing segment holds).
 *  Nothing is opened, created or attached, and `limiter` and
 *  `limiter_options` are not looked at: a configuration test (`nginx -t`)
 *  can call it.  The reason for a refusal goes to `errbuf`.
 *  @return SLUICE_OK, or the error sluice_policy_open() would return. */
SLUICE_EXPORT int sluice_policy_check(const sluice_policy_options *opts);

/** @brief Close and free.  NULL is a no-op.  A limiter the policy opened is
 *  closed; a borrowed one is not.  The handle must not be used again. */
SLUICE_EXPORT void sluice_policy_close(sluice_policy *p);

/** @brief The configuration in force (owned by the policy, valid until
 *  close): read it with sluice_policy_config_get(). */
SLUICE_EXPORT const sluice_policy_config *
sluice_policy_config_of(const sluice_policy *p);

/* ------------------------------------------------------------ the call --- */

/** @brief Decide n requests in order (one: n = 1): the same decisions
 *  (and events, counters, deny-cache entries) as one call for each in
 *  that order at one time, the limiter's clock read once when the call
 *  begins.  A request's decision is made when it is its turn, so a caller
 *  that acts between decisions (releases a lease, say) must not put those
 *  decisions in one call.
 *  @param[in] p     the policy.
 *  @param[in] n     how many requests (0 or more).
 *  @param[in] reqs  n requests; borrowed for the call.
 *  @param[out] ds   n decisions, each fully overwritten.
 *  @param[out] rcs  n results, or NULL.  rcs[i] is SLUICE_OK when a
 *  decision was made for reqs[i] (look at ds[i].allowed: a store failure
 *  is a decision too, fail-closed or degraded), or an input error, with
 *  nothing recorded and ds[i].invalid_field naming the field:
 *  <ul><li>SLUICE_EINVAL - a required field or attribute missing, an
 *  attribute's value its cost cannot read
 *  <li>SLUICE_EKEY - an id empty or longer than SLUICE_POLICY_ID_MAX
 *  <li>SLUICE_ENOTFOUND - unknown tier, or no route matches
 *  <li>SLUICE_ERANGE - a caller cost that is negative or can never fit
 *  </ul>
 *  @return SLUICE_EINVAL for a NULL policy, n < 0, or NULL arrays with
 *  n > 0; otherwise, with rcs, SLUICE_OK (the results are in rcs), and
 *  without, the first result that is not SLUICE_OK, or SLUICE_OK: one
 *  request's own result is
 *  `rc = sluice_policy_decide(p, 1, &req, &d, NULL)`. */
SLUICE_EXPORT int sluice_policy_decide(sluice_policy *p, int n,
                                       const sluice_request *reqs,
                                       sluice_decision *ds, int *rcs);

/** @brief Settle an admitted request's cost once its real size is known
 *  (docs/policy.md "Settling a request's real cost"): the tokens an LLM
 *  request really used, the rows a report really wrote.  Each limit of
 *  the request's route whose cost reads a reported attribute is charged or
 *  refunded the difference between its cost with the reported values and
 *  what the decision charged, in one atomic store call; the request's
 *  other limits, its leases and locks are untouched.  A charge never
 *  turns the decision around: it may leave a limit in debt (the next
 *  requests wait), at most one burst (a window: one limit) of it.  A
 *  refund never takes a limit past full, and a window gives back only
 *  while the window the charge went into still weighs.
 *  @param[in] req     the request the decision was made for, as it was
 *                     (its attributes give what was charged).
 *  @param[in,out] d   its decision; SLUICE_DECISION_SETTLED is set in
 *                     d->flags once settled.  On an input error
 *                     d->invalid_field names the field at fault.
 *  @param[in] actual  the real values: nactual attributes that the route's
 *                     costs read (e.g. {"tokens", "1234"}), each a decimal
 *                     from 0 to the cost's `max`.
 *  @return SLUICE_OK (nothing changed needs no store call); or, with
 *  nothing changed anywhere:
 *  <ul><li>SLUICE_ENOTFOUND - the decision charged nothing to settle
 *  (denied, failed closed, not a route of declared limits)
 *  <li>SLUICE_EEXIST - the decision was settled already
 *  <li>SLUICE_EINVAL - a NULL argument; a request that is not the one the
 *  decision charged (invalid_field "request"); an attribute the route's
 *  costs do not read, given twice, or not a decimal
 *  <li>SLUICE_ERANGE - a negative value, or one above the cost's max
 *  </ul>
 *  or a store error, after which the settle may or may not have been
 *  applied (a Redis reply lost on the way back), and the decision is not
 *  marked: settling it again could apply it twice. */
SLUICE_EXPORT int sluice_policy_settle(sluice_policy *p,
                                       const sluice_request *req,
                                       sluice_decision *d,
                                       const sluice_attr *actual,
                                       size_t nactual);

/* ------------------------------------------------- release and renew --- */

/** What sluice_policy_release() and sluice_policy_renew() act on. */
enum sluice_hold_kind {
  SLUICE_HOLD_LEASE = 1,     /**< a lease a decision took (d->lease_id) */
  SLUICE_HOLD_BOX = 2,       /**< a scope's penalty box */
  SLUICE_HOLD_SUSPENSION = 3 /**< a level 3 suspension (release only:
                                  lifted after review) */
};

/** A hold to release or renew.  Zero it, then set the fields its kind
 *  reads. */
typedef struct sluice_hold {
  int kind;          /**< SLUICE_HOLD_* */
  int scope;         /**< BOX, SUSPENSION: SLUICE_SCOPE_KEY (req:
                          tenant_id, api_key_id, tier), SLUICE_SCOPE_IP
                          (req: client_ip) or SLUICE_SCOPE_SUBJECT (req:
                          auth_subject) */
  uint64_t lease_id; /**< LEASE: the decision's lease_id */
  const char *who;   /**< BOX, SUSPENSION: required, non-empty: the audit */
  const char *why;   /**< entry the event carries */
} sluice_hold;

/** @brief Release a hold.
 *  <ul><li>SLUICE_HOLD_LEASE: the lease of a decision (the handler's
 *  finally path).  `req` is the request that got it (its route and the
 *  attributes of its limits' scopes are used).  SLUICE_ENOTFOUND when the
 *  lease had already expired and was reclaimed (the work it protected was
 *  unprotected for a while); SLUICE_EINVAL for a bad request or lease id
 *  0.
 *  <li>SLUICE_HOLD_BOX: early release of a box by support (levels 1 and
 *  2, and the enterprise level 3 box).  The offense count is kept.  Emits
 *  SLUICE_EVENT_RELEASE with who and why.  SLUICE_ENOTFOUND when not
 *  boxed; SLUICE_EPERM when suspended (release the suspension instead).
 *  <li>SLUICE_HOLD_SUSPENSION: lift a level 3 suspension after review.
 *  Emits SLUICE_EVENT_LIFT.  SLUICE_ENOTFOUND when not suspended.
 *  </ul>
 *  @return SLUICE_OK, as above, SLUICE_EINVAL (NULL, an unknown kind or
 *  scope, who or why missing), input or store errors. */
SLUICE_EXPORT int sluice_policy_release(sluice_policy *p,
                                        const sluice_request *req,
                                        const sluice_hold *h);

/** @brief Renew a hold.
 *  <ul><li>SLUICE_HOLD_LEASE: extend a lease to now + its TTL (long jobs);
 *  as its release, and SLUICE_EINVAL on a route whose `concurrency` limit
 *  holds more than 32 leases (docs/policy.md).
 *  <li>SLUICE_HOLD_BOX: renew a level 3 box (the 24 h IP ban, an
 *  enterprise key's level 3 box) to a whole box of its length from now:
 *  the security team's "renewable" ban.  The offense count grows by one.
 *  Emits SLUICE_EVENT_EDGE_DENY with who, why, the request and the new
 *  end.  SLUICE_ENOTFOUND when not boxed at level 3 (also when released
 *  meanwhile); SLUICE_EPERM when suspended (nothing to renew).
 *  </ul>
 *  @return as sluice_policy_release(); SLUICE_EINVAL for
 *  SLUICE_HOLD_SUSPENSION. */
SLUICE_EXPORT int sluice_policy_renew(sluice_policy *p,
                                      const sluice_request *req,
                                      const sluice_hold *h);

/* -------------------------------------------------------------- inspect --- */

/** What sluice_policy_inspect() reads.  Zero it, then set one of
 *  `limit`, `penalty` (with `req`) or `scope` (with the ids):
 *  <ul><li>a declared limit's records for one scope, into the report's
 *  `limit`, with the keys and the parameter set a decision of `req` would
 *  use (req: the attributes its scope names: tenant_id, api_key_id,
 *  client_ip, method, route, tier, attrs; `pattern` is the declared route
 *  method + route match);
 *  <li>a declared penalty's box for one scope, the same way (req: the
 *  attributes its scope names, a sign-in's `subject`, client_ip...);
 *  <li>one scope's box by raw ids (hashed with the policy's secret like a
 *  request's): the policy file's first penalty of that scope kind whose
 *  scope the ids fill.
 *  </ul> */
typedef struct sluice_inspect_query {
  const char *limit;         /**< a declared limit's name */
  const char *penalty;       /**< a declared penalty's name */
  const sluice_request *req; /**< limit, penalty: the request */
  int scope;                 /**< by ids: SLUICE_SCOPE_KEY, SLUICE_SCOPE_IP or
                                  SLUICE_SCOPE_SUBJECT */
  const char *tenant_id;  /**< KEY: as the penalty's scope needs */
  const char *api_key_id; /**< KEY: as the penalty's scope needs */
  const char *tier;       /**< NULL, or a tier of the configuration (it
                               may pick the penalty's parameter set) */
  const char *client_ip;  /**< IP: required */
  const char *auth_subject; /**< SUBJECT: required */
} sluice_inspect_query;

/** Bits of sluice_inspect_report.present / .unfit, one per record. */
enum sluice_inspect_record {
  SLUICE_INSPECT_BOX = 1u << 0,      /**< the penalty's box (strikes, level,
                                          offenses) */
  SLUICE_INSPECT_NOTICE = 1u << 1,   /**< its Retry-After notice */
  SLUICE_INSPECT_FAILURES = 1u << 2, /**< its reported failures' window */
  SLUICE_INSPECT_STUFFING = 1u << 3  /**< its stuffing window */
};

/** The room of a scope id (SLUICE_SCOPE_ID_LEN hex digits and a NUL):
 *  repeated here, checked equal at build time, so that this header stands
 *  alone. */
#define SLUICE_INSPECT_ID_SIZE 33

/** What sluice_policy_inspect() reads of one declared limit. */
typedef struct sluice_limit_state {
  int present;   /**< 1: a record exists (0: none: full, unused) */
  int unfit;     /**< 1: a record these parameters could not have
                      written (another configuration's) */
  int64_t quota; /**< as sluice_decision_limit, for this scope's
                      parameter set */
  int64_t window_ns;
  int64_t remaining; /**< left now: tokens, room in the window, free
                          leases */
  int64_t reset_ns;  /**< until full again (a window: its end; leases:
                          until the last held one expires) */
  int held;          /**< leases held (concurrency, lock) */
  int64_t now_ns;    /**< the time it was read at */
} sluice_limit_state;

/** A scope's state, read without changing anything. Times are the
 *  limiter's clock (now_ns); a record not stored reads as fresh. */
typedef struct sluice_inspect_report {
  int scope;         /**< the query's */
  unsigned present;  /**< SLUICE_INSPECT_* records found in the store */
  unsigned unfit;    /**< SLUICE_INSPECT_* records these parameters could
                          not have written (another configuration's) */
  int64_t now_ns;
  char scope_id[SLUICE_INSPECT_ID_SIZE];  /**< the box's scope id */
  /* The penalty box: the key's, the IP's or the subject's. */
  int level;         /**< 0 not boxed, 1..3 */
  int suspended;     /**< level 3 pending review (no end) */
  int64_t box_end_ns; /**< when boxed: the end, SLUICE_FOREVER if none */
  int64_t strikes, strike_threshold, strike_window_ns;
  int64_t offenses, offense_ttl_ns;
  int64_t notice_until_ns; /**< a live Retry-After notice's end, or 0 */
  /* A penalty of reported failures: their window (sliding). */
  int64_t failures, failures_limit, failures_window_ns;
  /* A penalty with stuffing: its window (fixed). */
  int64_t stuffing_failures, stuffing_limit, stuffing_window_ns;
  /* A declared limit's records (a query by `limit`). */
  sluice_limit_state limit;
  /** SLUICE_EINVAL or SLUICE_EKEY on a query by name: the attribute at
   *  fault (a static or policy-owned name), else NULL. */
  const char *invalid_field;
} sluice_inspect_report;

/** @brief Read a declared limit's records, a declared penalty's box or a
 *  scope's box (the query says which) through the policy's limiter,
 *  changing nothing (a store get, then the algorithm's PEEK / CHECK on a
 *  copy), with the keys and parameters sluice_policy_decide() uses.
 *  @param[out] out  fully overwritten: a box's scope (its kind:
 *  SLUICE_SCOPE_IP, _SUBJECT or _KEY), scope_id (the id in events and the
 *  deny cache), now_ns, the box (SLUICE_INSPECT_BOX: level, suspended,
 *  box_end_ns, strikes, strike_threshold and window, offenses and their
 *  TTL; a penalty whose strikes are denials: SLUICE_INSPECT_NOTICE and
 *  notice_until_ns, the live Retry-After's end), for reported failures
 *  counted in a sliding window their count (SLUICE_INSPECT_FAILURES:
 *  failures, failures_limit, failures_window_ns), with stuffing detection
 *  its window (SLUICE_INSPECT_STUFFING); a limit's records in `limit`.
 *  @return SLUICE_OK; SLUICE_EINVAL (NULL, not one of limit, penalty or
 *  scope, a scope or field missing, `pattern` with no
 *  declared route matching); SLUICE_EKEY (an id or attribute empty or
 *  too long); SLUICE_ENOTFOUND (no such limit or penalty, no penalty of
 *  that scope kind, or a tier not configured); or the store's error. */
SLUICE_EXPORT int sluice_policy_inspect(sluice_policy *p,
                                        const sluice_inspect_query *q,
                                        sluice_inspect_report *out);

/* ------------------------------------------------ declared limits, read --- */

/** Most attributes in a declared limit's scope (sluice_declared_info.scope). */
#define SLUICE_LIMIT_SCOPE_MAX 4

/** What sluice_policy_declared_at() reads. */
enum sluice_declared_kind {
  SLUICE_DECLARED_LIMIT = 1,    /**< `limits` */
  SLUICE_DECLARED_PENALTY = 2,  /**< `penalties` */
  SLUICE_DECLARED_ATTRIBUTE = 3 /**< `attributes`: the caller's own,
                                     beside the built-in tenant, key, ip,
                                     method, route, pattern and tier */
};

/** A limit, penalty or attribute the policy file declares
 *  (sluice_policy_declared_at()): a penalty and an attribute fill the
 *  name alone.  Strings are owned by the policy (valid until close). */
typedef struct sluice_declared_info {
  const char *name;
  const char *unit;      /**< what it counts */
  const char *algorithm; /**< "gcra", "sliding_window", "fixed_window",
                              "concurrency", "lock", "cap" */
  int status;            /**< its denial's status: 429 or 409 */
  int nscope;            /**< attributes in its scope */
  const char *scope[SLUICE_LIMIT_SCOPE_MAX]; /**< their names, in order */
  const char *by; /**< the attribute choosing its parameters, or NULL */
} sluice_declared_info;

/** @brief The i-th limit, penalty or attribute (kind) the policy file
 *  declares (0-based, file order).
 *  @param[out] out  fully overwritten on SLUICE_OK.
 *  @return SLUICE_OK; SLUICE_ENOTFOUND past the last (or a policy that
 *  declares none); SLUICE_EINVAL (NULL, an unknown kind). */
SLUICE_EXPORT int sluice_policy_declared_at(const sluice_policy *p, int kind,
                                            int i, sluice_declared_info *out);

/* -------------------------------------------------------------- metrics --- */

/** @brief A counter: decisions of `tier` (NULL or "": the requests that
 *  name no tier) with `outcome`.  0 for unknown tiers. */
SLUICE_EXPORT uint64_t sluice_policy_count(const sluice_policy *p,
                                           const char *tier, int outcome);

/** @brief Render every counter in the Prometheus text exposition format
 *  (version 0.0.4).
 *  @param[out] buf     NULL (with len 0) to measure, or the buffer.
 *  @param[out] needed  NULL, or the bytes needed without the NUL.
 *  @return SLUICE_OK, SLUICE_ERANGE when buf is too small (buf holds a
 *  truncated, NUL-terminated prefix), SLUICE_EINVAL. */
SLUICE_EXPORT int sluice_policy_metrics(const sluice_policy *p, char *buf,
                                        size_t len, size_t *needed);

/* ---------------------------------------------------------- names --- */

/** What sluice_name() names. */
enum sluice_name_kind {
  SLUICE_NAME_OUTCOME = 1, /**< enum sluice_outcome: "allow", "throttled"... */
  SLUICE_NAME_EVENT = 2,   /**< enum sluice_event_type: "box_trip"... */
  SLUICE_NAME_SHADOW = 3   /**< a SLUICE_SHADOW_* feature as the config
                                file spells it: "buckets", "penalty",
                                "leases", "fail_closed" */
};

/** @brief A value's name (kind: SLUICE_NAME_*), for logs, metrics labels
 *  and the configuration file.  Static; "unknown" for a value (or a
 *  kind) without one. */
SLUICE_EXPORT const char *sluice_name(int kind, int value);

#ifdef __cplusplus
}
#endif
#endif

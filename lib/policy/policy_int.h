/*
** Private side of the policy layer.  The configuration is turned into
** algorithm parameters once, at open, so that a decision only builds keys
** and runs operations.  Counters are atomics indexed by tier (the extra last
** row is "none": auth requests, which have no tier) and outcome.
*/
#ifndef SLUICE_LIB_POLICY_INT_H
#define SLUICE_LIB_POLICY_INT_H

#include <stdatomic.h>

#include "sluice.h"
#include "breaker.h"

/* The built-in flow's endpoint classes, left in the built-in settings
** (routes' `class`, costs, fail_closed) until those go too (issue 37):
** no request reaches the built-in flow any more. */
enum {
  SLUICE_EP_AUTO = 0,
  SLUICE_EP_STANDARD = 1,
  SLUICE_EP_RECONCILE = 2,
  SLUICE_EP_EXPORT = 3,
  SLUICE_EP_JOB_POLL = 4,
  SLUICE_EP_AUTH = 5,
  SLUICE_EP__COUNT = 6
};
const char *sluice__class_name(int endpoint_class);

#define SLUICE__NS_PER_S INT64_C(1000000000)
#define SLUICE__NS_PER_MS INT64_C(1000000)

/** What level 3 does to an authenticated key of a tier. */
enum sluice_level3_action {
  SLUICE_L3_SUSPEND = 0, /**< suspended until lifted by hand */
  SLUICE_L3_PAGE = 1     /**< never auto-suspended: a PAGE event and a box
                              of `enterprise_level3_box_ns` */
};

/** One tier.  Rates are points per `*_period_ns`. */
typedef struct sluice__tier {
  char name[SLUICE_POLICY_NAME_MAX + 1];
  int64_t tenant_rate, tenant_period_ns, tenant_burst;
  int64_t key_rate, key_period_ns, key_burst;
  int64_t strike_threshold;      /**< strikes in strike_window_ns to trip */
  int64_t reconcile_concurrency; /**< leases per tenant, 1..SLUICE_GROUP_MAX */
  int64_t export_concurrency;    /**< leases per tenant, 1..SLUICE_GROUP_MAX */
  int64_t exports_per_window;    /**< export cap per export_cap_window_ns */
  int level3;                    /**< enum sluice_level3_action */
  /** Staged rollout: SLUICE_SHADOW_* features recorded but not enforced
   *  for this tier (on top of sluice__conf.shadow_features). */
  int64_t shadow_features;
} sluice__tier;

/** One route of the route table (first match wins).  `method` "*" matches
 *  any method; a `route` ending in '*' matches by prefix. */
typedef struct sluice__route {
  char method[8];
  char route[SLUICE_POLICY_ROUTE_MAX + 1];
  int endpoint_class; /**< enum sluice_endpoint_class, not AUTO */
} sluice__route;

/* The whole policy, resolved from a configuration's document (config.c,
** config_doc.c): what the decision path reads.  Internal, not ABI. */
typedef struct sluice__conf {
  int ntiers;
  sluice__tier tiers[SLUICE_POLICY_TIERS_MAX];
  int nroutes; /**< 1..SLUICE_POLICY_ROUTES_MAX: an empty table is refused */
  sluice__route routes[SLUICE_POLICY_ROUTES_MAX];
  /** Cost per class, indexed by enum sluice_endpoint_class (AUTH unused). */
  int64_t cost[SLUICE_EP__COUNT];
  int64_t export_long_cost;      /**< cost when the range exceeds: */
  int64_t export_long_range_ns;  /**< 90 days */
  /* Penalty ladder of authenticated keys. */
  int64_t strike_window_ns;      /**< 60 s */
  int64_t level1_box_ns;         /**< 5 min */
  int64_t level2_box_ns;         /**< 60 min */
  int64_t enterprise_level3_box_ns; /**< box with SLUICE_L3_PAGE: 60 min */
  int64_t offense_ttl_ns;        /**< 24 h after the last trip */
  /* Auth endpoint. */
  int64_t auth_subject_failures; /**< 5 per auth_window_ns */
  int64_t auth_ip_failures;      /**< 20 per auth_window_ns */
  int64_t auth_window_ns;        /**< 15 min */
  int64_t auth_box_ns[3];        /**< 5 min, 60 min, 24 h (IP ban) */
  int64_t stuffing_failures;     /**< 500 failures from one IP ... */
  int64_t stuffing_subjects;     /**< ... across 50 distinct subjects ... */
  int64_t stuffing_ips;          /**< or one subject from 20 distinct IPs */
  int64_t stuffing_window_ns;    /**< ... in 10 min */
  /* Heavy endpoints. */
  int64_t reconcile_lease_ttl_ns; /**< 15 min: max job time + margin */
  int64_t export_lease_ttl_ns;    /**< 30 min */
  int64_t export_cap_window_ns;   /**< 1 h */
  int64_t lease_retry_after_max_ns; /**< cap on 409/429 lease Retry-After:
                                         30 s (poll the job meanwhile) */
  /* Failure modes. */
  unsigned fail_closed_mask;     /**< bit (1u << class): reconcile, export,
                                      auth.  Auth fails closed whatever
                                      the mask says (no tier to degrade) */
  int64_t fail_closed_retry_after_ns; /**< 15 s */
  int64_t degraded_percent;      /**< local limiter at 25% of tier rates */
  int64_t degraded_probe_ns;     /**< once the circuit breaker opens,
                                      leave the store alone 1 s, then
                                      let trial requests probe it */
  int shadow;                    /**< 1: decide and record, enforce nothing */
  /** Staged rollout: SLUICE_SHADOW_* features recorded but not enforced
   *  for every tier and for auth (shadow = 1 is all of them). */
  int64_t shadow_features;
  /* The store's circuit breaker (docs/operations.md "The circuit breaker"): every
  ** request calls the store, each within its own timeout, until failures
  ** are sustained: breaker_failure_percent of at least breaker_min_calls
  ** calls in breaker_window_ns, or breaker_run failures in a row. */
  int64_t breaker_window_ns;       /**< 1 s (0.01 s..1 h) */
  int64_t breaker_min_calls;       /**< 20 (1..65535) */
  int64_t breaker_failure_percent; /**< 50 (1..100) */
  int64_t breaker_run;             /**< 0: off (0..10^6) */
  int64_t breaker_probes;          /**< trial requests at a time when
                                        half-open: 3 (1..1000) */
  /* The coarse per-IP backstop (the spec's WAF rate rule): a fixed window
  ** per client address, checked before anything else. */
  int64_t ip_limit;              /**< requests per ip_window_ns; 0: off */
  int64_t ip_window_ns;          /**< 60 s */
  /** 0: a strike is a bucket denial while the Retry-After of an earlier
   *  one still runs, so a client that waits it out never collects one
   *  (the spec's section 4).  1: every bucket denial is a strike, the
   *  first included, as the spec's section-6 script counts. */
  int64_t strike_every_denial;
  /** An IPv6 client address is one scope per prefix of this many bits
   *  (64: one /64, what one subscriber gets); IPv4 counts whole. */
  int64_t ipv6_prefix;
  /** Routes of the document that list declared limits (docs/policy.md
   *  "Declared limits"): they live in the policy's sluice__decl, so this
   *  counts them only (the route table may then be empty). */
  int64_t declared_routes;
  /** The host-wide segments (the file's "host" group; docs/policy.md):
   *  "" keeps each in the process, "shm:name=/NAME..." shares it between
   *  the processes of a host.  A non-NULL sluice_policy_options field of
   *  the same name wins. */
  char host_counters[SLUICE_POLICY_URI_MAX + 1];
  char host_degraded_store[SLUICE_POLICY_URI_MAX + 1];
  char host_deny_cache[SLUICE_POLICY_URI_MAX + 1];
} sluice__conf;

/* Parameters of one tier, derived from the configuration. */
typedef struct sluice__tier_rt {
  sluice_gcra_params bucket[2];   /* [0] tenant, [1] key */
  sluice_gcra_params degraded[2]; /* the same at degraded_percent */
  sluice_penalty_params penalty;
  sluice_lease_params reconcile, export_;
  sluice_window_params export_cap;
} sluice__tier_rt;

/* Rows of the counters by route: a shared segment gives each route label
** it meets a row for its life (routes come and go with reloads), row 0
** being "none" (counters.c). */
#define SLUICE__CTR_ROUTES 256
/* A route's label: "METHOD PATTERN" as declared, " #N" after it (N its
** place in the file's `routes`, from 1) when an earlier route has the
** same method and pattern (routes told apart by `when`). */
#define SLUICE__CTR_LABEL 144

/* Every counter the metrics text shows.  Plain atomics with no pointers,
** so the same struct lives in process memory or in a shared mapping. */
typedef struct sluice__counters {
  _Atomic uint64_t decisions[SLUICE_POLICY_TIERS_MAX + 1]
                            [SLUICE_OUTCOME__COUNT];
  _Atomic uint64_t degraded_decisions[SLUICE_POLICY_TIERS_MAX + 1];
  _Atomic uint64_t shadow_passed[SLUICE_POLICY_TIERS_MAX + 1];
  /* By route, in the rows ctr_row picks (row 0: no route). */
  _Atomic uint64_t fail_closed[SLUICE__CTR_ROUTES];
  _Atomic uint64_t lease_denials[SLUICE__CTR_ROUTES];
  _Atomic uint64_t store_full[SLUICE__CTR_ROUTES]; /* decisions the store
                                                      had no room for */
  _Atomic uint64_t trips[5][3]; /* [scope kind][level - 1] */
  _Atomic uint64_t events[SLUICE_EVENT__COUNT];
} sluice__counters;

typedef struct sluice__deny_cache sluice__deny_cache; /* deny_cache.c */

struct sluice_policy {
  sluice__conf cfg;
  sluice_limiter *lim;
  int own_lim;
  /* The degraded limiter: in-process, or on a shm store every process of
  ** the host shares (sluice_policy_options.degraded_store, degraded.c). */
  sluice_limiter *local;
  sluice__deny_cache *deny; /* boxes seen, read before the store */
  uint8_t secret[16];
  sluice_policy_event_fn on_event;
  void *userdata;
  int shadow;
  sluice__tier_rt rt[SLUICE_POLICY_TIERS_MAX];
  sluice_penalty_params auth_penalty;
  sluice_window_params auth_subject, auth_ip, stuffing;
  sluice_window_params auth_unknown; /* failures without a subject */
  sluice_distinct_params stuffing_subjects, stuffing_ips;
  sluice_lease_params ledger;
  sluice_lease_params notice; /* one slot; TTL from the denial's Retry-After */
  /* Lease sets as wide as the widest tier: releases cover any tier. */
  sluice_lease_params reconcile_all, export_all;
  _Atomic int degraded; /* the last store failure, 0 once one answered */
  _Atomic int64_t full_event_ns; /* the last SLUICE_EVENT_STORE_FULL's now */
  sluice__breaker brk;   /* when to leave the store alone (breaker.c) */
  _Atomic int split; /* the store's calls go in two halves: 0 not asked yet,
                        1 yes, 2 no (halves.c) */
  sluice_window_params ip_window; /* the per-IP backstop (backstop.c) */
  /* Counters: `own` in-process, or a shared segment every process of the
  ** host counts into (sluice_policy_options.counters, counters.c). */
  sluice__counters *ctr;
  sluice__counters own;
  /* The file's declared limits and their routes (declared.h), or NULL. */
  struct sluice__decl *decl;
  sluice_policy_config *conf; /* the configuration it opened from */
  void *ctr_map;
  size_t ctr_bytes;
  /* ctr_row[1 + i]: declared route i's row in ctr's counters by route;
  ** ctr_row[0]: the row of no route (0). */
  uint16_t ctr_row[SLUICE__CTR_ROUTES];
};

/* The row a decision on declared route droute (-1: none) counts in. */
#define SLUICE__CTR_ROW(p, droute) ((p)->ctr_row[(droute) + 1])
/* Declared route i's label (SLUICE__CTR_LABEL bytes); i = -1: "none". */
void sluice__route_label(const sluice_policy *p, int i,
                         char label[SLUICE__CTR_LABEL]);

/* Point p->ctr at its own counters (uri NULL or "") or at the shared
** segment the uri names ("shm:name=/NAME"), creating it when missing.
** Fills msg on failure. */
int sluice__counters_attach(sluice_policy *p, const char *uri, char *msg,
                            size_t msglen);
void sluice__counters_detach(sluice_policy *p);

/* Named shared segments (segment.c).  Every segment starts with this
** head; init fills the rest, then the magic is stored (release). */
typedef struct sluice__seg_head {
  _Atomic uint64_t magic;
  _Atomic uint32_t init_claim;
  uint32_t layout;
} sluice__seg_head;
typedef void (*sluice__seg_init_fn)(sluice__seg_head *h, void *arg);
/* The NAME of "shm:name=/NAME" (other parameters allowed) into name. */
int sluice__seg_name(const char *what, const char *uri, char name[256],
                     char *msg, size_t len);
/* Map (creating when missing) the segment uri names, `size` bytes. */
int sluice__seg_attach(const char *what, const char *uri, size_t size,
                       uint64_t magic, sluice__seg_init_fn init, void *arg,
                       void **out, char *msg, size_t len);
/* A millisecond's nap while another process initialises a segment. */
void sluice__seg_nap(void);
/* msg = "what name: problem[: strerror(err)]"; returns rc. */
int sluice__seg_fail(char *msg, size_t len, int rc, const char *what,
                     const char *name, const char *problem, int err);

/* The degraded limiter (degraded.c): uri NULL or "" is in-process memory,
** "shm:name=/NAME[;capacity=N]" a shm store shared by the host. */
int sluice__degraded_open(sluice_policy *p, const char *uri, char *msg,
                          size_t len);

/* The deny cache (deny_cache.c): boxes, suspensions and edge denies seen,
** with their end times.  uri NULL or "": in-process; "shm:name=/NAME
** [;slots=N]": a segment every process of the host reads and writes. */
typedef struct sluice__deny {
  int64_t until_ns; /* SLUICE_FOREVER: suspended */
  int level;
} sluice__deny;
/* Every parameter set a decision sends, in the store's range (range.c);
** fills msg, naming the setting, when one is not. */
int sluice__range_check(sluice_policy *p, char *msg, size_t len);
/* The deny cache's string (its name and slots=), nothing attached. */
int sluice__deny_check(const char *uri, char *msg, size_t len);
int sluice__deny_open(sluice_policy *p, const char *uri, char *msg,
                      size_t len);
void sluice__deny_close(sluice_policy *p);
/* Record a box of scope (kind, id) until until_ns, seen at now. */
void sluice__deny_put(sluice_policy *p, int kind, const char *id, int64_t now,
                      int64_t until_ns, int level);
/* 1 and *out when (kind, id) has a live entry at now. */
int sluice__deny_get(sluice_policy *p, int kind, const char *id, int64_t now,
                     sluice__deny *out);
void sluice__deny_drop(sluice_policy *p, int kind, const char *id);
/* 1 when the cache is a shared segment (read before the store too). */
int sluice__deny_shared(const sluice_policy *p);
/* Counters for the metrics text: hits, stored, not cached (full). */
void sluice__deny_stats(const sluice_policy *p, uint64_t *hits,
                        uint64_t *stored, uint64_t *full);

/* Validation that reports the setting at fault as a libconfig path
** ("tiers.growth.key.burst") and the problem separately, so that the file
** loader can turn the path into a line number. */
int sluice__policy_config_check2(const sluice__conf *cfg, char *path,
                                 size_t pathlen, char *msg, size_t msglen);

/* The built-in defaults (config.c). */
int sluice__conf_defaults(sluice__conf *c);
/* The default policy: etc/ledger.conf's text, embedded at build time
** (ledger_conf.c, made by embed_conf.py), and the name its messages
** give. */
extern const char sluice__ledger_conf[];
#define SLUICE__LEDGER_CONF_NAME "ledger.conf (built in)"
/* The index of the tier called name in c, or -1 (NULL or not configured). */
int sluice__conf_tier(const sluice__conf *c, const char *name);
/* Loading (config.c): a file's text; text parsed into a document
** (`file` names it in messages); a document read and validated into *out
** and *dl.  config_doc.c builds the handle's document from the same. */
struct config_t;
struct sluice__decl;
int sluice__conf_read_file(const char *path, char **text, char *err,
                           size_t errlen);
int sluice__conf_parse(const char *file, const char *text,
                       struct config_t *cf, char *err, size_t errlen);
int sluice__conf_resolve(const struct config_t *cf, const char *file,
                         sluice__conf *out, struct sluice__decl *dl,
                         char *err, size_t errlen, char *warn,
                         size_t warnlen);
/* The handle's document rebuilt into *out and *dl (the policy's open). */
int sluice__config_build(const sluice_policy_config *h, sluice__conf *out,
                         struct sluice__decl *dl, char *err, size_t errlen);
/* A copy of a handle (the policy keeps one), or NULL (no memory). */
sluice_policy_config *sluice__config_clone(const sluice_policy_config *h);
/* The handle's values in force and its document (config_get.c reads). */
const sluice__conf *sluice__config_values(const sluice_policy_config *h);
const struct config_t *sluice__config_doc(const sluice_policy_config *h);


/* The settings table (settings.c): setting i's field in a configuration
** (every scalar setting is an int64_t). */
int64_t *sluice__setting_field(sluice__conf *c, int i);
const int64_t *sluice__setting_cfield(const sluice__conf *c, int i);

const char *sluice__level3_name(int action);
/* The index of the tier called name, or -1 (NULL or not configured). */
int sluice__policy_tier(const sluice_policy *p, const char *name);
/* Rewrite libconfig text so that every integer literal is read at full
** width (conf_ints.c): *out is a malloc'ed NUL-terminated copy.  On
** SLUICE_ECONFIG, *line and what say which literal cannot be read. */
int sluice__conf_widen(const char *in, size_t n, char **out, int *line,
                       char *what, size_t whatlen);

/* Staged rollout (shadow.c): the SLUICE_SHADOW_* features not enforced for
** a tier (-1: auth); `forced`: shadow everything. */
unsigned sluice__shadow_mask(const sluice__conf *c, int forced,
                             int tier);
/* 1 when a box in shadow must not end the decision (a later check is
** still enforced). */
int sluice__shadow_past_box(unsigned mask);

/* request.c: the name a client address counts by: an IPv6 one by its
** prefix of cfg.ipv6_prefix bits ("2001:db8::/64": one /64 is one client),
** an IPv4-mapped one as its IPv4 address (both into name), anything else
** (IPv4, a caller's own name) returned whole; and its scope id. */
#define SLUICE__IP_NAME (46 + 8) /* INET6_ADDRSTRLEN + "/128" */
const char *sluice__ip_name(const sluice_policy *p, const char *raw,
                            char name[SLUICE__IP_NAME]);
void sluice__ip_scope(const sluice_policy *p, const char *raw,
                      char out[SLUICE_SCOPE_ID_LEN + 1]);

/* inspect.c: record k read as a decision would (a fresh, zero state when
** absent): 1 found, 0 absent, -1 on a store error (in *err). */
/* inspect.c: a box record read into r (its level, end, strikes and
** offenses, SLUICE_INSPECT_BOX in present / unfit), and a window's count
** (used of limit, bit in present / unfit), as sluice_policy_inspect()
** reads them; the declared penalties' inspect reads theirs the same way. */
int sluice__inspect_box(sluice_policy *p, sluice_key k,
                        const sluice_penalty_params *pp,
                        sluice_inspect_report *r);
int sluice__inspect_window(sluice_policy *p, sluice_key k, unsigned bit,
                           int sliding, const sluice_window_params *w,
                           sluice_inspect_report *r, int64_t *used,
                           int64_t *limit, int64_t *window_ns);
int sluice__inspect_get(sluice_policy *p, sluice_key k, sluice_state *s,
                        int *err);

#endif

/*
** Private side of the policy layer.  The configuration is turned into
** algorithm parameters once, at open, so that a decision only builds keys
** and runs operations.  Counters are atomics indexed by tier (the extra
** last row is "none": requests that name no tier) and outcome.
*/
#ifndef SLUICE_LIB_POLICY_INT_H
#define SLUICE_LIB_POLICY_INT_H

#include <stdatomic.h>

#include "sluice.h"
#include "breaker.h"

#define SLUICE__NS_PER_S INT64_C(1000000000)
#define SLUICE__NS_PER_MS INT64_C(1000000)

/** One tier: a value a request's tier may take, and a row of the
 *  counters.  What a tier changes is the policy file's (its limits' and
 *  penalties' parameter sets `by = "tier"`). */
typedef struct sluice__tier {
  char name[SLUICE_POLICY_NAME_MAX + 1];
} sluice__tier;

/* The whole policy, resolved from a configuration's document (config.c,
** config_doc.c): what the decision path reads.  Internal, not ABI. */
typedef struct sluice__conf {
  int ntiers;
  sluice__tier tiers[SLUICE_POLICY_TIERS_MAX];
  /* Failure modes. */
  int64_t fail_closed_retry_after_ns; /**< 15 s */
  int64_t degraded_percent;      /**< local limiter at 25% of the limits'
                                      rates (a route's failure =
                                      "degraded") */
  int64_t degraded_probe_ns;     /**< once the circuit breaker opens,
                                      leave the store alone 1 s, then
                                      let trial requests probe it */
  int shadow;                    /**< 1: decide and record, enforce nothing */
  /** Staged rollout: SLUICE_SHADOW_* features recorded but not enforced
   *  for every request (shadow = 1 is all of them; the file's shadow_when
   *  adds some by the request's attributes). */
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
  /** An IPv6 client address is one scope per prefix of this many bits
   *  (64: one /64, what one subscriber gets); IPv4 counts whole. */
  int64_t ipv6_prefix;
  /** The host-wide segments (the file's "host" group; docs/policy.md):
   *  "" keeps each in the process, "shm:name=/NAME..." shares it between
   *  the processes of a host.  A non-NULL sluice_policy_options field of
   *  the same name wins. */
  char host_counters[SLUICE_POLICY_URI_MAX + 1];
  char host_degraded_store[SLUICE_POLICY_URI_MAX + 1];
  char host_deny_cache[SLUICE_POLICY_URI_MAX + 1];
} sluice__conf;

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
  sluice_lease_params notice; /* one slot; TTL from the denial's Retry-After */
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
/* The loader's context: the file its messages name, where the message
** goes, and the declared limits being read (with the loader's scratch
** arrays, declared_conf.c). */
struct sluice__scratch;
struct config_setting_t;
struct sluice__amatch;
typedef struct sluice__rd {
  const char *file;
  char *err;
  size_t errlen;
  struct sluice__decl *dl;
  struct sluice__scratch *S;
} sluice__rd;
/* The readers' shared checks (config.c).  An error: "FILE:LINE: PATH:
** what" into x->err, SLUICE_ECONFIG returned.  Every member of group g
** (at path) is one of names (NULL-terminated); an integer member times
** unit, if present, within lo..hi in the file's unit; a setting that is
** an array or a list; a name of 1..31 of [A-Za-z0-9_-], not starting
** with a digit or '-'. */
int sluice__rd_err(const sluice__rd *x, const struct config_setting_t *s,
                   const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
int sluice__rd_known(const sluice__rd *x, const struct config_setting_t *g,
                     const char *path, const char *const *names);
int sluice__rd_int(const sluice__rd *x, const struct config_setting_t *g,
                   const char *gpath, const char *name, int64_t unit,
                   int64_t lo, int64_t hi, int64_t *out);
int sluice__rd_list(const struct config_setting_t *s);
int sluice__rd_name_ok(const char *n);

/* A limit's or a penalty's scope (`scope`, into scope[*nscope]), with the
** message for a scope of another form and for an attribute named twice
** (declared_conf.c). */
int sluice__rd_scope(sluice__rd *x, const struct config_setting_t *g,
                     const char *path, const char *form, const char *twice,
                     int *scope, int *nscope);
/* A limit's or a penalty's parameter sets: `by = ATTR; params = { VALUE =
** { numbers }; ... }` or `params = ( { when = { ... }; numbers }, ... )`
** (the first set the request matches), each over the base, then the base
** checked whole (declared_conf.c).  What the two kinds differ in: */
typedef struct sluice__psets {
  const char *const *names;  /* the members of a set of the list form */
  const char *const *gnames; /* of the group form (NULL: not checked) */
  int max;                   /* sets at most */
  const char *unknown_by;    /* `by` naming no attribute (%s: the name) */
  const char *group_form;    /* `params` no group (%d: max) */
  size_t size;               /* of one set */
  /* A set's numbers of group g over *ps; a set checked whole. */
  int (*load)(sluice__rd *x, const struct config_setting_t *g, const char *path,
              void *ps, const void *owner);
  int (*whole)(sluice__rd *x, const struct config_setting_t *g,
               const char *path, const void *ps, const void *owner);
  const void *owner; /* the limit or penalty, for load and whole */
  int *select;       /* `by`'s attribute */
  const void *base;
  void *ps;          /* max sets of `size` bytes */
  char (*psval)[32]; /* SLUICE__DNAME */
  struct sluice__amatch *psw;
  int *npsets;
} sluice__psets;
int sluice__rd_psets(sluice__rd *x, const struct config_setting_t *g,
                     const char *path, const sluice__psets *k);

/* declared_penalty_conf.c: the file's `penalties` into x->dl (after its
** limits), and route entry r's `penalty` and `failure` into dr (after its
** limits); shadow_when.c: the file's `shadow_when`. */
struct sluice__droute;
int sluice__decl_penalties_load(sluice__rd *x,
                                const struct config_setting_t *root);
int sluice__decl_route_penalty(sluice__rd *x, const struct config_setting_t *r,
                               const char *path, struct sluice__droute *dr);
int sluice__shadow_when_load(sluice__rd *x,
                             const struct config_setting_t *root);

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

/* The index of the tier called name, or -1 (NULL or not configured). */
int sluice__policy_tier(const sluice_policy *p, const char *name);
/* Rewrite libconfig text so that every integer literal is read at full
** width (conf_ints.c): *out is a malloc'ed NUL-terminated copy.  On
** SLUICE_ECONFIG, *line and what say which literal cannot be read. */
int sluice__conf_widen(const char *in, size_t n, char **out, int *line,
                       char *what, size_t whatlen);
/* 1 when n is a name libconfig takes: a letter or '*', then letters,
** digits, '-', '_' or '*' (conf_ints.c, its lexer's). */
int sluice__conf_name(const char *n);

/* Text appended to buf (len bytes, NULL with len 0: only counted), kept
** NUL-terminated; used counts what the whole text needs (metrics.c; the
** metrics text, config_get.c). */
typedef struct sluice__out {
  char *buf;
  size_t len, used;
} sluice__out;
void sluice__put(sluice__out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Staged rollout (shadow.c): the SLUICE_SHADOW_* features the
** configuration leaves in shadow for every request; `forced`: all. */
unsigned sluice__shadow_mask(const sluice__conf *c, int forced);
/* The feature an outcome belongs to (SLUICE_SHADOW_*), 0 for ALLOW. */
int sluice__shadow_feature_of(int outcome);
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

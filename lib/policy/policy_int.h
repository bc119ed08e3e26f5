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

#define SLUICE__NS_PER_S INT64_C(1000000000)
#define SLUICE__NS_PER_MS INT64_C(1000000)

/* Parameters of one tier, derived from the configuration. */
typedef struct sluice__tier_rt {
  sluice_gcra_params bucket[2];   /* [0] tenant, [1] key */
  sluice_gcra_params degraded[2]; /* the same at degraded_percent */
  sluice_penalty_params penalty;
  sluice_lease_params reconcile, export_;
  sluice_window_params export_cap;
} sluice__tier_rt;

/* Every counter the metrics text shows.  Plain atomics with no pointers,
** so the same struct lives in process memory or in a shared mapping. */
typedef struct sluice__counters {
  _Atomic uint64_t decisions[SLUICE_POLICY_TIERS_MAX + 1]
                            [SLUICE_OUTCOME__COUNT];
  _Atomic uint64_t degraded_decisions[SLUICE_POLICY_TIERS_MAX + 1];
  _Atomic uint64_t shadow_passed[SLUICE_POLICY_TIERS_MAX + 1];
  _Atomic uint64_t fail_closed[SLUICE_EP__COUNT];
  _Atomic uint64_t lease_denials[SLUICE_EP__COUNT];
  _Atomic uint64_t store_full[SLUICE_EP__COUNT]; /* decisions the store
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
};

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

/* sluice_policy_config_load() with the file's declared limits into *dl
** (declared.h) and its warning, if any, into warn (NULL: none wanted). */
struct sluice__decl;
int sluice__config_load2(const char *path, sluice__conf *out,
                         struct sluice__decl *dl, char *err, size_t errlen,
                         char *warn, size_t warnlen);
/* The steps of it (config.c): a file's text; text parsed into a document
** (`file` names it in messages); a document read and validated into *out
** and *dl.  config_doc.c builds the handle's document from the same. */
struct config_t;
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
int sluice__inspect_get(sluice_policy *p, sluice_key k, sluice_state *s,
                        int *err);

#endif

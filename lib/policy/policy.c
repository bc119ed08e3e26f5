/*
** The policy layer: one call per request runs the flow of the spec's
** section 1 diagram over the algorithm layer, on whatever backend the
** limiter has.
**
** Every decision is a program (sluice/program.h) per hash-tag group, run
** as ONE atomic store call: no other process's operation lands between a
** request's box check and its charge, and a request never half-happens.
**
** Tenant request (every class but auth), one program over {t:T}:
**
**   box CHECK pb:{t:T}:K  -- boxed: 429 Active-Lockout (403 if suspended),
**        |                   nothing else runs
**   GCRA group [rl:{t:T}:tb, rl:{t:T}:kb:K]  -- both or neither charged,
**        |        the stricter bucket reported (binding); heavy: PEEK
**        |-- denied: throttled; a strike when the client came back before
**        |   the Retry-After it was given (the notice record ra:{t:T}:K);
**        |   strikes trip the box, L1 -> L2 -> L3
**   heavy?  reconcile: ledger mutex lk:{t:T}:L; export: hourly cap
**        |  xh:{t:T} CONSUME; then the tenant's lease set
**        |  cc:{t:T}:<class>:<i>; then the bucket CONSUME
**   allow (lease id returned for heavy endpoints)
**
** Auth request: one program per scope.  The subject's ({s:S}): box CHECK,
** and on a failure its sliding window of failures, the distinct IPs it
** failed from, a trip at its limit.  The IP's ({ip:I}): box CHECK, and on
** a failure (subject not boxed) its failures window, the stuffing window,
** the distinct subjects it failed for, a level-3 trip on a stuffing
** signature (or when the subject's program saw too many IPs), else a
** level-1 trip at its limit.
**
** Choices where the spec is silent or loose:
**  a) A strike needs a Retry-After to ignore.  The spec says a strike is a
**     request "sent before its Retry-After elapsed" and that an honest
**     client "never accumulates strikes"; counting every 429 (its Lua)
**     would charge an honest client one strike per throttle episode.  So
**     each denial leaves a notice (a one-slot lease that lives for the
**     Retry-After given); a denial while a notice is live is a strike.
**  b) A denied heavy request consumes nothing: every step of its program
**     is a gate, and a gate's denial undoes what the steps before it wrote
**     (the export-cap slot, the ledger lock, the lease), all inside the
**     one atomic call.  The bucket is PEEKed before the leases so that a
**     throttled request reports a throttle (and strikes) first.
**  g) Auth: a failure from a boxed IP whose subject is not boxed is still
**     counted against the subject (its program runs before the IP's is
**     read); a boxed subject counts nothing.
**  c) Store failure: SLUICE_ETIMEDOUT, SLUICE_EUNAVAIL, SLUICE_EBACKEND,
**     SLUICE_EIO, SLUICE_EFULL (a store full of live records cannot decide
**     either) and SLUICE_ENOMEM switch to the failure mode (auth always
**     fails closed: it has no tier rate to degrade to); any other error is a bug
**     in the request and is returned.  Every request makes its own
**     attempt, so a short stall costs only the requests it delays; a
**     circuit breaker (breaker.c) that sees failures sustained leaves the
**     store alone for degraded_probe_ns, then lets trial requests probe
**     it, so a dead store does not cost every request its timeout.
**  d) The degraded limiter is a "mem" limiter, or a shm store the host's
**     processes share (degraded.c), with the same keys at degraded_percent
**     of the tier rates and bursts; it has no penalty box.  The boxes the
**     store reported are kept in the deny cache (deny_cache.c), read in
**     degraded mode (a failed call or an open breaker alike) and, when
**     shared, before the store and before the breaker is asked.
**  e) Suspension (L3, non-enterprise) is SUSPENDED / 403 without a
**     Retry-After: no wait helps.  Enterprise L3 pages and boxes the key
**     for enterprise_level3_box_ns (429 Active-Lockout).
**  f) "Unknown client" and "bad secret" run the same operations and give
**     the same decision: the decision never sees which one it was.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "policy_int.h"
#include "wide.h"

#define NS SLUICE__NS_PER_S
#define KEYLEN SLUICE__KEYLEN

/* ------------------------------------------------------------- names --- */

const char *sluice_outcome_name(int o) {
  static const char *const n[SLUICE_OUTCOME__COUNT] = {
      "allow",       "throttled", "boxed",      "suspended",
      "concurrency", "conflict",  "export_cap", "unavailable"};
  return (o >= 0 && o < SLUICE_OUTCOME__COUNT) ? n[o] : "unknown";
}

const char *sluice_endpoint_class_name(int c) {
  static const char *const n[SLUICE_EP__COUNT] = {
      "auto", "standard", "reconcile", "export", "job_poll", "auth"};
  return (c >= 0 && c < SLUICE_EP__COUNT) ? n[c] : "unknown";
}

const char *sluice_event_name(int t) {
  static const char *const n[SLUICE_EVENT__COUNT] = {
      "unknown",     "box_trip", "edge_deny",   "alert",        "suspend",
      "page",        "ip_ban",   "stuffing",    "release",      "lift",
      "degraded_on", "degraded_off", "lease_denied"};
  return (t > 0 && t < SLUICE_EVENT__COUNT) ? n[t] : "unknown";
}

static const char *scope_name(int s) {
  static const char *const n[5] = {"none", "key", "ip", "subject", "tenant"};
  return (s >= 0 && s < 5) ? n[s] : "none";
}

static int status_of(int outcome) {
  switch (outcome) {
  case SLUICE_OUTCOME_ALLOW:
    return 200;
  case SLUICE_OUTCOME_SUSPENDED:
    return 403;
  case SLUICE_OUTCOME_CONFLICT:
    return 409;
  case SLUICE_OUTCOME_UNAVAILABLE:
    return 503;
  default:
    return 429;
  }
}

/* --------------------------------------------------------------- open --- */

static void derive(sluice_policy *p) {
  const sluice_policy_config *c = &p->cfg;
  int64_t maxrec = 1, maxexp = 1;
  int i;
  for (i = 0; i < c->ntiers; i++) {
    const sluice_policy_tier *t = &c->tiers[i];
    sluice__tier_rt *r = &p->rt[i];
    int j;
    r->bucket[0] = (sluice_gcra_params){t->tenant_rate, t->tenant_period_ns,
                                        t->tenant_burst};
    r->bucket[1] =
        (sluice_gcra_params){t->key_rate, t->key_period_ns, t->key_burst};
    /* pct% of rate r per period P is exactly r*pct per P*100. */
    for (j = 0; j < 2; j++) {
      int64_t b = r->bucket[j].burst * c->degraded_percent / 100;
      r->degraded[j] = (sluice_gcra_params){
          r->bucket[j].rate * c->degraded_percent,
          r->bucket[j].period_ns * 100, b < 1 ? 1 : b};
    }
    r->penalty.strike_threshold = t->strike_threshold;
    r->penalty.strike_window_ns = c->strike_window_ns;
    r->penalty.box_ns[0] = c->level1_box_ns;
    r->penalty.box_ns[1] = c->level2_box_ns;
    r->penalty.box_ns[2] = t->level3 == SLUICE_L3_PAGE
                               ? c->enterprise_level3_box_ns
                               : SLUICE_FOREVER;
    r->penalty.offense_ttl_ns = c->offense_ttl_ns;
    r->reconcile = (sluice_lease_params){t->reconcile_concurrency,
                                         c->reconcile_lease_ttl_ns};
    r->export_ =
        (sluice_lease_params){t->export_concurrency, c->export_lease_ttl_ns};
    r->export_cap =
        (sluice_window_params){t->exports_per_window, c->export_cap_window_ns};
    if (t->reconcile_concurrency > maxrec)
      maxrec = t->reconcile_concurrency;
    if (t->export_concurrency > maxexp)
      maxexp = t->export_concurrency;
  }
  p->reconcile_all =
      (sluice_lease_params){maxrec, c->reconcile_lease_ttl_ns};
  p->export_all = (sluice_lease_params){maxexp, c->export_lease_ttl_ns};
  p->ledger = (sluice_lease_params){1, c->reconcile_lease_ttl_ns};
  /* The Retry-After notice: its TTL comes from the denial (ttl_from). */
  p->notice = (sluice_lease_params){1, 1};
  p->auth_penalty.strike_threshold = c->auth_subject_failures < (1 << 20) - 1
                                         ? c->auth_subject_failures
                                         : (1 << 20) - 1;
  p->auth_penalty.strike_window_ns = c->auth_window_ns;
  p->auth_penalty.box_ns[0] = c->auth_box_ns[0];
  p->auth_penalty.box_ns[1] = c->auth_box_ns[1];
  p->auth_penalty.box_ns[2] = c->auth_box_ns[2];
  p->auth_penalty.offense_ttl_ns = c->offense_ttl_ns;
  p->auth_subject =
      (sluice_window_params){c->auth_subject_failures, c->auth_window_ns};
  p->auth_ip = (sluice_window_params){c->auth_ip_failures, c->auth_window_ns};
  p->stuffing =
      (sluice_window_params){c->stuffing_failures, c->stuffing_window_ns};
  p->stuffing_subjects =
      (sluice_distinct_params){c->stuffing_subjects, c->stuffing_window_ns};
  p->stuffing_ips =
      (sluice_distinct_params){c->stuffing_ips, c->stuffing_window_ns};
  p->ip_window = (sluice_window_params){c->ip_limit, c->ip_window_ns};
}

/* The breaker's parameters: probe_interval_ms is how long it stays open. */
static void breaker_params(const sluice_policy_config *c,
                           sluice__breaker_params *b) {
  b->window_ns = c->breaker_window_ns;
  b->min_calls = c->breaker_min_calls;
  b->failure_percent = c->breaker_failure_percent;
  b->run = c->breaker_run;
  b->open_ns = c->degraded_probe_ns;
  b->probes = c->breaker_probes;
}

/* A segment: the option when given, else the configuration's "host". */
#define HOST_URI(o, c, f) ((o)->f ? (o)->f : (c)->host_##f)

static void seterr(const sluice_policy_options *o, const char *msg) {
  if (o->errbuf && o->errlen && !o->errbuf[0])
    snprintf(o->errbuf, o->errlen, "%s", msg);
}

int sluice_policy_open(const sluice_policy_options *o, sluice_policy **out) {
  sluice_policy_config cfg;
  sluice_policy *p;
  char msg[256];
  int rc, i, nonzero = 0;

  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  if (!o)
    return SLUICE_EINVAL;
  if (o->errbuf && o->errlen)
    o->errbuf[0] = '\0';
  if (o->flags & ~SLUICE_POLICY_SHADOW) {
    seterr(o, "unknown flags");
    return SLUICE_EINVAL;
  }
  for (i = 0; i < 16; i++)
    nonzero |= o->secret[i];
  if (!nonzero) {
    seterr(o, "secret: must not be all zero (scope ids would be guessable)");
    return SLUICE_EINVAL;
  }
  if (o->config) {
    cfg = *o->config;
    rc = sluice_policy_config_check(&cfg, msg, sizeof msg);
  } else if (o->config_path) {
    rc = sluice_policy_config_load(o->config_path, &cfg, msg, sizeof msg);
  } else {
    rc = sluice_policy_config_defaults(&cfg);
  }
  if (rc != SLUICE_OK) {
    seterr(o, msg);
    return rc;
  }
  p = calloc(1, sizeof *p);
  if (!p)
    return SLUICE_ENOMEM;
  p->cfg = cfg;
  memcpy(p->secret, o->secret, 16);
  p->on_event = o->on_event;
  p->userdata = o->userdata;
  p->shadow = cfg.shadow || (o->flags & SLUICE_POLICY_SHADOW);
  derive(p);
  {
    sluice__breaker_params bp;
    breaker_params(&cfg, &bp);
    if (sluice__breaker_init(&p->brk, &bp) != 0) {
      free(p);
      return SLUICE_ENOMEM;
    }
  }
  rc = sluice__counters_attach(p, HOST_URI(o, &p->cfg, counters), msg,
                               sizeof msg);
  if (rc != SLUICE_OK) {
    seterr(o, msg);
    sluice__breaker_destroy(&p->brk);
    free(p);
    return rc;
  }
  if (o->limiter) {
    p->lim = o->limiter;
  } else {
    rc = sluice_limiter_open2(o->limiter_options, &p->lim, msg, sizeof msg);
    if (rc != SLUICE_OK) {
      seterr(o, msg);
      sluice__counters_detach(p);
      sluice__breaker_destroy(&p->brk);
      free(p);
      return rc;
    }
    p->own_lim = 1;
  }
  /* degraded.c, deny_cache.c: in-process, or host-wide shm segments. */
  rc = sluice__degraded_open(p, HOST_URI(o, &p->cfg, degraded_store), msg,
                             sizeof msg);
  if (rc == SLUICE_OK &&
      (rc = sluice__deny_open(p, HOST_URI(o, &p->cfg, deny_cache), msg,
                              sizeof msg)) != SLUICE_OK)
    sluice_limiter_close(p->local);
  if (rc != SLUICE_OK) {
    if (p->own_lim)
      sluice_limiter_close(p->lim);
    sluice__counters_detach(p);
    sluice__breaker_destroy(&p->brk);
    free(p);
    seterr(o, msg);
    return rc;
  }
  *out = p;
  return SLUICE_OK;
}

void sluice_policy_close(sluice_policy *p) {
  if (!p)
    return;
  sluice_limiter_close(p->local);
  sluice__deny_close(p);
  if (p->own_lim)
    sluice_limiter_close(p->lim);
  sluice__counters_detach(p);
  sluice__breaker_destroy(&p->brk);
  free(p);
}

const sluice_policy_config *sluice_policy_config_get(const sluice_policy *p) {
  return p ? &p->cfg : NULL;
}

/* ------------------------------------------------------------ context --- */

/* Everything one decision needs, built before any store work. */
typedef struct ctx {
  sluice_policy *p;
  const sluice_request *req;
  int tier; /* index, or -1 for auth */
  int cls;
  int64_t cost;
  int64_t now;
  char T[SLUICE_SCOPE_ID_LEN + 1], K[SLUICE_SCOPE_ID_LEN + 1];
  char I[SLUICE_SCOPE_ID_LEN + 1], S[SLUICE_SCOPE_ID_LEN + 1];
  char L[SLUICE_SCOPE_ID_LEN + 1];
  int has_subject;
  int store_err; /* first store failure, 0 if none */
  int tripped;   /* a box trip emitted events already */
  unsigned shadow;       /* SLUICE_SHADOW_* not enforced (staged rollout) */
  int box_shadowed;      /* boxed, but the box is not enforced: */
  sluice_verdict box;    /* its verdict, reported if nothing else refuses */
} ctx;

static int id_ok(const char *s, int required, const char *field,
                 sluice_decision *d) {
  size_t n;
  if (!s) {
    if (!required)
      return SLUICE_OK;
    if (d)
      d->invalid_field = field;
    return SLUICE_EINVAL;
  }
  n = strnlen(s, SLUICE_POLICY_ID_MAX + 1);
  if (n == 0 || n > SLUICE_POLICY_ID_MAX) {
    if (d)
      d->invalid_field = field;
    return SLUICE_EKEY;
  }
  return SLUICE_OK;
}

static void scope(const sluice_policy *p, const char *raw,
                  char out[SLUICE_SCOPE_ID_LEN + 1]) {
  sluice_scope_id(p->secret, raw, strlen(raw), out);
}

int sluice__policy_tier(const sluice_policy *p, const char *name) {
  int i;
  if (!name)
    return -1;
  for (i = 0; i < p->cfg.ntiers; i++)
    if (strcmp(p->cfg.tiers[i].name, name) == 0)
      return i;
  return -1;
}

static int route_match(const sluice_policy_route *r, const char *method,
                       const char *route) {
  size_t rl = strcspn(route, "?"), pl = strlen(r->route);
  if (strcmp(r->method, "*") != 0 && strcmp(r->method, method) != 0)
    return 0;
  if (pl > 0 && r->route[pl - 1] == '*')
    return rl >= pl - 1 && memcmp(route, r->route, pl - 1) == 0;
  return rl == pl && memcmp(route, r->route, pl) == 0;
}

static int resolve(sluice_policy *p, const sluice_request *q, ctx *c,
                   sluice_decision *d) {
  int rc, i;
  memset(c, 0, sizeof *c);
  c->p = p;
  c->req = q;
  c->tier = -1;
  c->cls = q->endpoint_class;
  if (c->cls < 0 || c->cls >= SLUICE_EP__COUNT) {
    d->invalid_field = "endpoint_class";
    return SLUICE_EINVAL;
  }
  if (c->cls == SLUICE_EP_AUTO) {
    if (!q->method || !q->route) {
      d->invalid_field = q->method ? "route" : "method";
      return SLUICE_EINVAL;
    }
    for (i = 0; i < p->cfg.nroutes; i++)
      if (route_match(&p->cfg.routes[i], q->method, q->route)) {
        c->cls = p->cfg.routes[i].endpoint_class;
        break;
      }
    if (c->cls == SLUICE_EP_AUTO) {
      d->invalid_field = "route";
      return SLUICE_ENOTFOUND;
    }
  }
  d->endpoint_class = c->cls;
  if ((rc = id_ok(q->client_ip, c->cls == SLUICE_EP_AUTH, "client_ip", d)))
    return rc;
  if (c->cls == SLUICE_EP_AUTH) {
    int failed;
    if (q->auth_result < SLUICE_AUTH_PENDING ||
        q->auth_result > SLUICE_AUTH_BAD_SECRET) {
      d->invalid_field = "auth_result";
      return SLUICE_EINVAL;
    }
    failed = q->auth_result >= SLUICE_AUTH_UNKNOWN_CLIENT;
    if ((rc = id_ok(q->auth_subject, failed, "auth_subject", d)))
      return rc;
    /* An auth request may carry its tenant's tier for the metrics, but
    ** does not need one: the endpoint has its own limiter. */
    if (q->tier) {
      c->tier = sluice__policy_tier(p, q->tier);
      if (c->tier < 0) {
        d->invalid_field = "tier";
        return SLUICE_ENOTFOUND;
      }
    }
    scope(p, q->client_ip, c->I);
    if (q->auth_subject) {
      scope(p, q->auth_subject, c->S);
      c->has_subject = 1;
    }
    return SLUICE_OK;
  }
  if ((rc = id_ok(q->tenant_id, 1, "tenant_id", d)) ||
      (rc = id_ok(q->api_key_id, 1, "api_key_id", d)))
    return rc;
  if (!q->tier) {
    d->invalid_field = "tier";
    return SLUICE_EINVAL;
  }
  c->tier = sluice__policy_tier(p, q->tier);
  if (c->tier < 0) {
    d->invalid_field = "tier";
    return SLUICE_ENOTFOUND;
  }
  if (c->cls == SLUICE_EP_RECONCILE &&
      (rc = id_ok(q->ledger_id, 1, "ledger_id", d)))
    return rc;
  c->cost = p->cfg.cost[c->cls];
  if (c->cls == SLUICE_EP_EXPORT &&
      (q->export_from_ns != 0 || q->export_to_ns != 0)) {
    if (q->export_to_ns < q->export_from_ns) {
      d->invalid_field = "export_to_ns";
      return SLUICE_EINVAL;
    }
    /* Unsigned: to - from cannot overflow once to >= from. */
    if ((uint64_t)q->export_to_ns - (uint64_t)q->export_from_ns >
        (uint64_t)p->cfg.export_long_range_ns)
      c->cost = p->cfg.export_long_cost;
  }
  if (q->cost != 0) {
    const sluice__tier_rt *r = &p->rt[c->tier];
    int64_t cap = r->bucket[0].burst < r->bucket[1].burst
                      ? r->bucket[0].burst
                      : r->bucket[1].burst;
    if (q->cost < 0 || q->cost > cap) {
      d->invalid_field = "cost";
      return SLUICE_ERANGE;
    }
    c->cost = q->cost;
  }
  scope(p, q->tenant_id, c->T);
  scope(p, q->api_key_id, c->K);
  if (c->cls == SLUICE_EP_RECONCILE)
    scope(p, q->ledger_id, c->L);
  /* The client IP's scope id only for the per-IP backstop: the rest of a
  ** tenant request (keys, events, deny-cache reads) is the tenant's and
  ** the key's. */
  if (q->client_ip && p->cfg.ip_limit > 0)
    scope(p, q->client_ip, c->I);
  return SLUICE_OK;
}

/* ------------------------------------------------------------ helpers --- */

static int is_store_failure(int rc) {
  return rc == SLUICE_ETIMEDOUT || rc == SLUICE_EUNAVAIL ||
         rc == SLUICE_EBACKEND || rc == SLUICE_EIO || rc == SLUICE_EFULL ||
         rc == SLUICE_ENOMEM;
}

static void emit(ctx *c, int type, int scope_kind, int level,
                 const char *scope_id, int64_t until, int outcome) {
  sluice_policy *p = c->p;
  sluice_event ev;
  atomic_fetch_add_explicit(&p->ctr->events[type], 1, memory_order_relaxed);
  if (!p->on_event)
    return;
  memset(&ev, 0, sizeof ev);
  ev.type = type;
  ev.scope = scope_kind;
  ev.level = level;
  ev.endpoint_class = c->cls;
  ev.outcome = outcome;
  ev.store_error = c->store_err;
  ev.scope_id = scope_id;
  ev.tenant_scope_id = c->T[0] ? c->T : NULL;
  ev.tier = c->tier >= 0 ? p->cfg.tiers[c->tier].name : NULL;
  ev.request = c->req;
  ev.now_ns = c->now;
  ev.until_ns = until;
  p->on_event(p->userdata, &ev);
}

static int apply(ctx *c, int algo, int kind, int nkeys, const sluice_key *k,
                 const void *params, int64_t arg, uint64_t id,
                 sluice_verdict *v) {
  sluice_op op = {0}; /* the reserved words too */
  int rc;
  op.algo = algo;
  op.kind = kind;
  op.nkeys = nkeys;
  op.keys = k;
  op.params = params;
  op.arg = arg;
  op.id = id;
  rc = sluice_limiter_apply_at(c->p->lim, &op, c->now, v);
  if (rc != SLUICE_OK && is_store_failure(rc) && !c->store_err)
    c->store_err = rc;
  return rc;
}

static void fill_bucket(ctx *c, const sluice_gcra_params *ps,
                        const sluice_verdict *v, sluice_decision *d) {
  const sluice_gcra_params *b = &ps[v->binding];
  d->binding = v->binding == 0 ? SLUICE_BINDING_TENANT : SLUICE_BINDING_KEY;
  d->limit = v->limit;
  d->remaining = v->remaining;
  d->reset_ns = v->reset_ns;
  d->policy_quota = b->burst;
  /* The window in which the quota refills from empty: burst / rate. */
  d->policy_window_ns = sluice__clamp64((sluice__i128)b->burst * b->period_ns / b->rate);
  d->refill_rate = b->rate;
  d->refill_period_ns = b->period_ns;
  d->other_quota = ps[!v->binding].burst;
  d->other_window_ns = sluice__clamp64((sluice__i128)ps[!v->binding].burst *
                                       ps[!v->binding].period_ns /
                                       ps[!v->binding].rate);
  (void)c;
}

/* A box the store reported on a scope: into the deny cache (deny_cache.c),
** which keeps it out without a store call, and through an outage. */
static void box_seen(ctx *c, int kind, const char *id,
                     const sluice_verdict *v) {
  if (!v->allowed)
    sluice__deny_put(c->p, kind, id, c->now,
                     (v->flags & SLUICE_V_SUSPENDED)
                         ? SLUICE_FOREVER
                         : c->now + v->retry_after_ns,
                     v->level);
}

static void fill_box(ctx *c, const sluice_verdict *v, sluice_decision *d) {
  d->penalty_status = SLUICE_PENALTY_ACTIVE_LOCKOUT;
  d->penalty_level = v->level;
  d->strikes_remaining = 0;
  if (v->flags & SLUICE_V_SUSPENDED) {
    d->outcome = SLUICE_OUTCOME_SUSPENDED;
    d->lockout_end_ns = SLUICE_FOREVER;
    d->retry_after_ns = 0;
  } else {
    d->outcome = SLUICE_OUTCOME_BOXED;
    d->retry_after_ns = v->retry_after_ns;
    d->lockout_end_ns = c->now + v->retry_after_ns;
  }
  if (v->level >= 2)
    d->flags |= SLUICE_DECISION_EDGE_DENY;
}

/* Events of a box trip at v->level on a scope. */
static void tripped(ctx *c, int scope_kind, const char *scope_id,
                    const sluice_verdict *v, sluice_decision *d) {
  int lvl = v->level < 1 ? 1 : v->level > 3 ? 3 : v->level;
  int64_t until = (v->flags & SLUICE_V_SUSPENDED)
                      ? SLUICE_FOREVER
                      : c->now + v->retry_after_ns;
  d->flags |= SLUICE_DECISION_TRIPPED;
  box_seen(c, scope_kind, scope_id, v);
  atomic_fetch_add_explicit(&c->p->ctr->trips[scope_kind][lvl - 1], 1,
                            memory_order_relaxed);
  emit(c, SLUICE_EVENT_BOX_TRIP, scope_kind, lvl, scope_id, until, 0);
  if (lvl >= 2)
    emit(c, SLUICE_EVENT_EDGE_DENY, scope_kind, lvl, scope_id, until, 0);
  if (lvl == 2)
    emit(c, SLUICE_EVENT_ALERT, scope_kind, lvl, scope_id, until, 0);
  if (lvl == 3) {
    if (scope_kind == SLUICE_SCOPE_IP)
      emit(c, SLUICE_EVENT_IP_BAN, scope_kind, lvl, scope_id, until, 0);
    else if (scope_kind == SLUICE_SCOPE_KEY)
      emit(c,
           (v->flags & SLUICE_V_SUSPENDED) ? SLUICE_EVENT_SUSPEND
                                           : SLUICE_EVENT_PAGE,
           scope_kind, lvl, scope_id, until, 0);
  }
}

static int64_t cap_retry(const ctx *c, int64_t ra) {
  int64_t m = c->p->cfg.lease_retry_after_max_ns;
  return ra > m ? m : ra;
}

/* ------------------------------------------------------------ programs --- */

/* A program under construction: its records (keys built in place) and its
** steps.  Every decision is one of these per hash-tag group, run as one
** atomic store call. */
typedef struct prog {
  char kbuf[SLUICE_PROGRAM_KEYS][KEYLEN];
  sluice_key keys[SLUICE_PROGRAM_KEYS];
  sluice_step st[SLUICE_PROGRAM_STEPS];
  int nk, ns;
} prog;

/* Add a record built by one of keys.c's builders (the call's first
** argument is the buffer); returns its index. */
#define REC(g, fn, ...)                                                      \
  ((g)->keys[(g)->nk] = fn((g)->kbuf[(g)->nk], __VA_ARGS__), (g)->nk++)

/* Add a step; returns its index (guards and folds are set by the caller
** when they are not "always, gate"). */
static int step(prog *g, int algo, int kind, int key, int nkeys,
                const void *params, int64_t arg, uint64_t id) {
  sluice_step *s = &g->st[g->ns];
  memset(s, 0, sizeof *s);
  s->algo = algo;
  s->kind = kind;
  s->key = key;
  s->nkeys = nkeys;
  s->params = params;
  s->arg = arg;
  s->id = id;
  return g->ns++;
}

static void when(prog *g, int i, int w, int ref, int fold) {
  g->st[i].when = w;
  g->st[i].ref = ref;
  g->st[i].fold = fold;
}

static int run(ctx *c, prog *g, sluice_program_result *r) {
  sluice_program pr = {0}; /* the reserved words too */
  int rc;
  pr.nkeys = g->nk;
  pr.keys = g->keys;
  pr.nsteps = g->ns;
  pr.steps = g->st;
  rc = sluice_limiter_run_at(c->p->lim, &pr, c->now, r);
  if (rc != SLUICE_OK && is_store_failure(rc) && !c->store_err)
    c->store_err = rc;
  return rc;
}

static int ran(const sluice_program_result *r, int i) {
  return i >= 0 && ((r->ran >> i) & 1u);
}

/* ------------------------------------------------------ tenant flow --- */

/* The tenant's lease set of class cls: n slot records. */
static void slot_recs(ctx *c, prog *g, int cls, int n) {
  sluice_key first = sluice__key_slot(g->kbuf[g->nk], c->T, cls, 0);
  int i;
  g->keys[g->nk++] = first;
  for (i = 1; i < n; i++) {
    g->keys[g->nk] = sluice__key_slot_next(g->kbuf[g->nk], first, i);
    g->nk++;
  }
}

static void bucket_keys(ctx *c, char tb[KEYLEN], char kb[KEYLEN],
                        sluice_key k[2]) {
  k[0] = sluice__key_tenant_bucket(tb, c->T);
  k[1] = sluice__key_key_bucket(kb, c->T, c->K);
}

static void lease_denied(ctx *c, int outcome, int64_t limit, int64_t ra,
                         sluice_decision *d) {
  d->outcome = outcome;
  d->cap_limit = limit;
  d->retry_after_ns = cap_retry(c, ra);
  atomic_fetch_add_explicit(&c->p->ctr->lease_denials[c->cls], 1,
                            memory_order_relaxed);
  emit(c, SLUICE_EVENT_LEASE_DENIED, SLUICE_SCOPE_TENANT, 0, c->T, 0,
       outcome);
}

/* The hourly export cap refused: the wait is its window's, not a lease's
** (no lease_retry_after_max cap), and the decision carries the cap. */
static void export_capped(ctx *c, const sluice_window_params *cap, int64_t ra,
                          sluice_decision *d) {
  d->outcome = SLUICE_OUTCOME_EXPORT_CAP;
  d->retry_after_ns = ra;
  d->cap_limit = cap->limit;
  d->cap_window_ns = cap->window_ns;
  atomic_fetch_add_explicit(&c->p->ctr->lease_denials[c->cls], 1,
                            memory_order_relaxed);
  emit(c, SLUICE_EVENT_LEASE_DENIED, SLUICE_SCOPE_TENANT, 0, c->T, 0,
       d->outcome);
}

/* Step indices of the tenant program (-1: not in it). */
enum { S_BOX, S_BUCKET, S_RENEW, S_NOTICE, S_STRIKE, S_TENANT_STEPS };
typedef struct heavy_steps {
  int gate;   /* ledger lock (reconcile) or export cap (export) */
  int slots;  /* the tenant's lease set */
  int charge; /* the bucket charge after the bucket check (S_BUCKET) */
} heavy_steps;

/* One program over the tenant's group {t:T}:
**
**   0 box CHECK                       gate
**   1 buckets CONSUME (heavy: PEEK)   gate, if passed
**   2 notice RENEW  (TTL: step 1's Retry-After)  note, if 1 denied
**   3 notice ACQUIRE (same TTL)       note, if 2 denied (no live notice)
**   4 box STRIKE                      note, if 2 allowed (notice ignored)
**   heavy:
**   5 ledger ACQUIRE / export cap CONSUME   gate, if passed
**   6 lease slots ACQUIRE                   gate, if passed
**   7 buckets CONSUME                       gate, if passed
**
** A gate's denial undoes every earlier write, so a heavy request that is
** refused holds no lease and is charged nothing (choice b). */
static void tenant_prog(ctx *c, prog *g, uint64_t id, heavy_steps *h) {
  const sluice__tier_rt *r = &c->p->rt[c->tier];
  int heavy_cls = c->cls == SLUICE_EP_RECONCILE || c->cls == SLUICE_EP_EXPORT;
  int pb, tb, ra, s;
  g->nk = g->ns = 0;
  pb = REC(g, sluice__key_key_box, c->T, c->K);
  tb = REC(g, sluice__key_tenant_bucket, c->T);
  (void)REC(g, sluice__key_key_bucket, c->T, c->K);
  ra = REC(g, sluice__key_notice, c->T, c->K);
  s = step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, pb, 1, &r->penalty, 0, 0);
  /* Staged rollout: a box in shadow only records what it would have done,
  ** so the request goes on through the buckets (see shadow_apply()). */
  if (sluice__shadow_past_box(c->shadow))
    when(g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  s = step(g, SLUICE_ALGO_GCRA, heavy_cls ? SLUICE_OP_PEEK : SLUICE_OP_CONSUME,
           tb, 2, r->bucket, c->cost, 0);
  when(g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
  s = step(g, SLUICE_ALGO_LEASE, SLUICE_OP_RENEW, ra, 1, &c->p->notice, 0, 1);
  when(g, s, SLUICE_WHEN_DENIED, S_BUCKET, SLUICE_FOLD_NOTE);
  g->st[s].ttl_from = SLUICE_TTL_OF(S_BUCKET);
  s = step(g, SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, ra, 1, &c->p->notice, 0, 1);
  when(g, s, SLUICE_WHEN_DENIED, S_RENEW, SLUICE_FOLD_NOTE);
  g->st[s].ttl_from = SLUICE_TTL_OF(S_BUCKET);
  s = step(g, SLUICE_ALGO_PENALTY, SLUICE_OP_STRIKE, pb, 1, &r->penalty, 0, 0);
  when(g, s, SLUICE_WHEN_ALLOWED, S_RENEW, SLUICE_FOLD_NOTE);
  /* A boxed key takes no strikes; only a box in shadow gets this far. */
  g->st[s].when2 = SLUICE_WHEN_ALLOWED;
  g->st[s].ref2 = S_BOX;
  h->gate = h->slots = h->charge = -1;
  if (!heavy_cls)
    return;
  if (c->cls == SLUICE_EP_RECONCILE) {
    int lk = REC(g, sluice__key_ledger, c->T, c->L);
    h->gate = step(g, SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, lk, 1,
                   &c->p->ledger, 0, id);
  } else {
    int xh = REC(g, sluice__key_export_cap, c->T);
    h->gate = step(g, SLUICE_ALGO_FWINDOW, SLUICE_OP_CONSUME, xh, 1,
                   &r->export_cap, 1, 0);
  }
  when(g, h->gate, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
  {
    const sluice_lease_params *lp =
        c->cls == SLUICE_EP_RECONCILE ? &r->reconcile : &r->export_;
    int first = g->nk;
    slot_recs(c, g, c->cls, (int)lp->max);
    h->slots = step(g, SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, first,
                    (int)lp->max, lp, 0, id);
    when(g, h->slots, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
  }
  h->charge = step(g, SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, tb, 2, r->bucket,
                   c->cost, 0);
  when(g, h->charge, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
}

/* A denial by the bucket: a strike if the client ignored the Retry-After
** of an earlier denial (choice a); the program already did the store work. */
static void throttled(ctx *c, const sluice_program_result *r,
                      sluice_decision *d) {
  const sluice_verdict *pv = &r->v[S_STRIKE];
  d->outcome = SLUICE_OUTCOME_THROTTLED;
  d->retry_after_ns = r->v[S_BUCKET].retry_after_ns;
  d->penalty_status = SLUICE_PENALTY_WARNING;
  if (!ran(r, S_STRIKE))
    return;
  d->flags |= SLUICE_DECISION_STRIKE;
  if (pv->flags & SLUICE_V_TRIPPED) {
    if (sluice__shadow_past_box(c->shadow)) {
      c->box_shadowed = 1; /* the throttle stands unless it is shadowed */
      c->box = *pv;
    } else {
      fill_box(c, pv, d);
    }
    tripped(c, SLUICE_SCOPE_KEY, c->K, pv, d);
  } else {
    d->strikes_remaining = pv->strikes_remaining;
  }
}

static int decide_tenant(ctx *c, sluice_decision *d) {
  const sluice__tier_rt *r = &c->p->rt[c->tier];
  sluice_program_result res;
  heavy_steps h;
  uint64_t id = 0;
  prog g;
  int rc;

  if (c->cls == SLUICE_EP_RECONCILE || c->cls == SLUICE_EP_EXPORT)
    while (id == 0)
      if ((rc = sluice_random_bytes(&id, sizeof id)) != SLUICE_OK) {
        c->store_err = rc;
        return rc;
      }
  tenant_prog(c, &g, id, &h);
  rc = run(c, &g, &res);
  if (rc)
    return rc;
  box_seen(c, SLUICE_SCOPE_KEY, c->K, &res.v[S_BOX]);
  if (res.denied_by == S_BOX) {
    fill_box(c, &res.v[S_BOX], d);
    return SLUICE_OK;
  }
  if (!res.v[S_BOX].allowed) { /* boxed, the box in shadow */
    c->box_shadowed = 1;
    c->box = res.v[S_BOX];
  }
  d->strikes_remaining = res.v[S_BOX].strikes_remaining;
  fill_bucket(c, r->bucket,
              ran(&res, h.charge) ? &res.v[h.charge] : &res.v[S_BUCKET], d);
  if (res.denied_by == S_BUCKET) {
    throttled(c, &res, d);
  } else if (res.denied_by >= 0 && res.denied_by == h.gate) {
    if (c->cls == SLUICE_EP_RECONCILE)
      lease_denied(c, SLUICE_OUTCOME_CONFLICT, 0, res.v[h.gate].retry_after_ns,
                   d);
    else
      export_capped(c, &r->export_cap, res.v[h.gate].retry_after_ns, d);
  } else if (res.denied_by >= 0 && res.denied_by == h.slots) {
    lease_denied(c, SLUICE_OUTCOME_CONCURRENCY,
                 c->cls == SLUICE_EP_RECONCILE ? r->reconcile.max
                                               : r->export_.max,
                 res.v[h.slots].retry_after_ns, d);
  } else if (res.denied_by >= 0) {
    /* The charge after a bucket check that passed in the same atomic
    ** program cannot be denied; if it is, it is a throttle all the same. */
    d->outcome = SLUICE_OUTCOME_THROTTLED;
    d->retry_after_ns = res.v[res.denied_by].retry_after_ns;
  } else if (h.slots >= 0) {
    d->lease_id = id;
    d->lease_ttl_ns = c->cls == SLUICE_EP_RECONCILE ? r->reconcile.ttl_ns
                                                    : r->export_.ttl_ns;
  }
  return SLUICE_OK;
}

/* --------------------------------------------------------- auth flow --- */

/* Subject and IP live under different hash tags: one program each.  The
** subject's runs first, because a subject seen from too many IPs trips the
** IP (stuffing), which the IP's program then does in the same call. */
enum { A_BOX, A_FAIL, A_DISTINCT, A_TRIP };     /* subject program */
enum { I_BOX, I_FAIL, I_STUFF, I_DISTINCT, I_TRIP3, I_TRIP1 }; /* IP */

static int decide_auth(ctx *c, sluice_decision *d) {
  sluice_policy *p = c->p;
  int failed = c->req->auth_result >= SLUICE_AUTH_UNKNOWN_CLIENT;
  sluice_program_result rs, ri;
  const sluice_verdict *vs = NULL, *vi, *w;
  prog g;
  int rc, s, stuffing;

  if (c->has_subject) {
    g.nk = g.ns = 0;
    REC(&g, sluice__key_auth, SLUICE_SCOPE_SUBJECT, SLUICE__AK_BOX, c->S);
    step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &p->auth_penalty, 0,
         0);
    if (failed) {
      const char *ip = c->req->client_ip;
      REC(&g, sluice__key_auth, SLUICE_SCOPE_SUBJECT, SLUICE__AK_FAILS, c->S);
      REC(&g, sluice__key_auth, SLUICE_SCOPE_SUBJECT, SLUICE__AK_DISTINCT,
          c->S);
      s = step(&g, SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, 1, 1,
               &p->auth_subject, 1, 0);
      when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
      s = step(&g, SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 2, 1,
               &p->stuffing_ips, 0, sluice_siphash64(p->secret, ip, strlen(ip)));
      when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
      s = step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 0, 1, &p->auth_penalty,
               1, 0);
      when(&g, s, SLUICE_WHEN_REACHED, A_FAIL, SLUICE_FOLD_NOTE);
    }
    if ((rc = run(c, &g, &rs)))
      return rc;
    vs = &rs.v[A_BOX];
  }
  g.nk = g.ns = 0;
  REC(&g, sluice__key_auth, SLUICE_SCOPE_IP, SLUICE__AK_BOX, c->I);
  step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &p->auth_penalty, 0, 0);
  /* A boxed subject: the IP's box is only looked at (the longer one is
  ** reported), nothing is counted. */
  if (failed && vs->allowed) {
    const char *subj = c->req->auth_subject;
    REC(&g, sluice__key_auth, SLUICE_SCOPE_IP, SLUICE__AK_FAILS, c->I);
    REC(&g, sluice__key_auth, SLUICE_SCOPE_IP, SLUICE__AK_STUFFING, c->I);
    REC(&g, sluice__key_auth, SLUICE_SCOPE_IP, SLUICE__AK_DISTINCT, c->I);
    s = step(&g, SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, 1, 1, &p->auth_ip, 1, 0);
    when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
    s = step(&g, SLUICE_ALGO_FWINDOW, SLUICE_OP_COUNT, 2, 1, &p->stuffing, 1,
             0);
    when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
    s = step(&g, SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 3, 1,
             &p->stuffing_subjects, 0,
             sluice_siphash64(p->secret, subj, strlen(subj)));
    when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
    /* Stuffing: the IP's failures at their limit over too many subjects,
    ** or this subject failing from too many IPs: level 3 at once. */
    s = step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 0, 1, &p->auth_penalty,
             3, 0);
    if (ran(&rs, A_DISTINCT) && !rs.v[A_DISTINCT].allowed) {
      when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
    } else {
      when(&g, s, SLUICE_WHEN_REACHED, I_STUFF, SLUICE_FOLD_NOTE);
      g.st[s].when2 = SLUICE_WHEN_DENIED;
      g.st[s].ref2 = I_DISTINCT;
    }
    s = step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 0, 1, &p->auth_penalty,
             1, 0);
    when(&g, s, SLUICE_WHEN_REACHED, I_FAIL, SLUICE_FOLD_NOTE);
    g.st[s].when2 = SLUICE_WHEN_SKIPPED;
    g.st[s].ref2 = I_TRIP3;
  }
  if ((rc = run(c, &g, &ri)))
    return rc;
  vi = &ri.v[I_BOX];
  box_seen(c, SLUICE_SCOPE_IP, c->I, vi);
  if (vs)
    box_seen(c, SLUICE_SCOPE_SUBJECT, c->S, vs);
  if (!vi->allowed || (vs && !vs->allowed)) {
    /* Report the box that lasts longer: that is when a retry can pass. */
    w = vi;
    if (vi->allowed ||
        (vs && !vs->allowed && vs->retry_after_ns > vi->retry_after_ns))
      w = vs;
    fill_box(c, w, d);
    return SLUICE_OK;
  }
  d->strikes_remaining = p->cfg.auth_subject_failures;
  if (!failed)
    return SLUICE_OK;

  /* A failure, whichever kind: from here on the two are one path. */
  d->strikes_remaining = rs.v[A_FAIL].remaining < ri.v[I_FAIL].remaining
                             ? rs.v[A_FAIL].remaining
                             : ri.v[I_FAIL].remaining;
  stuffing = ran(&ri, I_TRIP3);
  if (stuffing) {
    d->flags |= SLUICE_DECISION_STUFFING;
    emit(c, SLUICE_EVENT_STUFFING, SLUICE_SCOPE_IP, 3, c->I, 0, 0);
  }
  if (stuffing || ran(&ri, I_TRIP1)) {
    const sluice_verdict *tv = &ri.v[stuffing ? I_TRIP3 : I_TRIP1];
    if (tv->flags & SLUICE_V_TRIPPED)
      tripped(c, SLUICE_SCOPE_IP, c->I, tv, d);
    fill_box(c, tv, d);
  }
  if (ran(&rs, A_TRIP)) {
    const sluice_verdict *sv = &rs.v[A_TRIP];
    if (sv->flags & SLUICE_V_TRIPPED)
      tripped(c, SLUICE_SCOPE_SUBJECT, c->S, sv, d);
    if (d->outcome == SLUICE_OUTCOME_ALLOW ||
        sv->retry_after_ns > d->retry_after_ns)
      fill_box(c, sv, d);
  }
  return SLUICE_OK;
}

/* ------------------------------------------------------ failure mode --- */

static void reset_verdict(sluice_decision *d) {
  d->outcome = SLUICE_OUTCOME_ALLOW;
  d->flags = 0;
  d->binding = SLUICE_BINDING_NONE;
  d->limit = d->remaining = d->reset_ns = 0;
  d->policy_quota = d->policy_window_ns = 0;
  d->refill_rate = d->refill_period_ns = 0;
  d->retry_after_ns = 0;
  d->penalty_status = SLUICE_PENALTY_NONE;
  d->penalty_level = 0;
  d->lockout_end_ns = 0;
  d->strikes_remaining = 0;
  d->lease_id = 0;
  d->lease_ttl_ns = 0;
  d->cap_limit = d->cap_window_ns = 0;
  d->other_quota = d->other_window_ns = 0;
}

/* The deny cache's answer for this request: 1 when a cached box decides
** it.  A box in shadow is not enforced, so it is not looked up.  Before
** the store only a shared cache is read: a release (sluice release, another
** process) drops the entry from the segment it opens too, never from this
** process's own cache.  Auth: a
** failed attempt from a cached IP still goes to the store unless its
** subject is cached too (choice g counts it against the subject). */
static int cached_box(ctx *c, int degraded, sluice_decision *d) {
  sluice__deny e[2];
  int n = 0, w;
  if (sluice__shadow_past_box(c->shadow) ||
      (!degraded && !sluice__deny_shared(c->p)))
    return 0;
  if (c->tier >= 0 && c->cls != SLUICE_EP_AUTH) {
    n = sluice__deny_get(c->p, SLUICE_SCOPE_KEY, c->K, c->now, &e[0]);
  } else {
    int s = c->has_subject &&
            sluice__deny_get(c->p, SLUICE_SCOPE_SUBJECT, c->S, c->now, &e[0]);
    int i = sluice__deny_get(c->p, SLUICE_SCOPE_IP, c->I, c->now, &e[s]);
    if (!s && i && !degraded &&
        c->req->auth_result >= SLUICE_AUTH_UNKNOWN_CLIENT && c->has_subject)
      return 0;
    n = s + i;
  }
  if (!n)
    return 0;
  w = n == 2 && e[1].until_ns > e[0].until_ns;
  {
    sluice_verdict v;
    memset(&v, 0, sizeof v);
    v.level = e[w].level;
    if (e[w].until_ns == SLUICE_FOREVER)
      v.flags = SLUICE_V_SUSPENDED;
    else
      v.retry_after_ns = e[w].until_ns - c->now;
    fill_box(c, &v, d);
  }
  d->flags |= SLUICE_DECISION_DENY_CACHED;
  return 1;
}

static void failure_mode(ctx *c, int err, sluice_decision *d) {
  sluice_policy *p = c->p;
  reset_verdict(d);
  d->store_error = err;
  /* A boxed key stays out through the outage. */
  if (cached_box(c, 1, d))
    return;
  /* Auth has no tier rate to degrade to: it always fails closed. */
  if (c->cls == SLUICE_EP_AUTH || c->tier < 0 ||
      (p->cfg.fail_closed_mask & (1u << c->cls))) {
    d->outcome = SLUICE_OUTCOME_UNAVAILABLE;
    d->flags |= SLUICE_DECISION_FAIL_CLOSED;
    d->retry_after_ns = p->cfg.fail_closed_retry_after_ns;
    atomic_fetch_add_explicit(&p->ctr->fail_closed[c->cls], 1,
                              memory_order_relaxed);
    return;
  }
  {
    const sluice__tier_rt *r = &p->rt[c->tier];
    char tb[KEYLEN], kb[KEYLEN];
    sluice_key kbk[2];
    sluice_op op = {0}; /* the reserved words too */
    sluice_verdict v;
    int rc;
    int64_t cap = r->degraded[0].burst < r->degraded[1].burst
                      ? r->degraded[0].burst
                      : r->degraded[1].burst;
    d->flags |= SLUICE_DECISION_DEGRADED;
    bucket_keys(c, tb, kb, kbk);
    if (c->cost > cap) {
      d->outcome = SLUICE_OUTCOME_THROTTLED;
      d->retry_after_ns = p->cfg.fail_closed_retry_after_ns;
      return;
    }
    op.algo = SLUICE_ALGO_GCRA;
    op.kind = SLUICE_OP_CONSUME;
    op.nkeys = 2;
    op.keys = kbk;
    op.params = r->degraded;
    op.arg = c->cost;
    op.id = 0;
    rc = sluice_limiter_apply_at(p->local, &op, c->now, &v);
    if (rc != SLUICE_OK) {
      d->flags = SLUICE_DECISION_FAIL_CLOSED;
      d->outcome = SLUICE_OUTCOME_UNAVAILABLE;
      d->retry_after_ns = p->cfg.fail_closed_retry_after_ns;
      atomic_fetch_add_explicit(&p->ctr->fail_closed[c->cls], 1,
                                memory_order_relaxed);
      return;
    }
    fill_bucket(c, r->degraded, &v, d);
    if (!v.allowed) {
      d->outcome = SLUICE_OUTCOME_THROTTLED;
      d->retry_after_ns = v.retry_after_ns;
    }
  }
}

/* ---------------------------------------------------------- decide --- */

/* Shadow mode, whole or per feature: a refusal of a feature not enforced
** is served, d->outcome keeping what enforcement would have done.  A box
** passed over (decide_tenant) is that outcome when nothing enforced
** refused. */
static void shadow_apply(ctx *c, int row, sluice_decision *d) {
  if (c->box_shadowed &&
      (d->outcome == SLUICE_OUTCOME_ALLOW ||
       (c->shadow & (unsigned)sluice_shadow_feature_of(d->outcome)))) {
    fill_box(c, &c->box, d);
    d->verdict_status = d->status = status_of(d->outcome);
    d->allowed = 0; /* passed below: the box is in shadow */
  }
  if (!c->shadow)
    return;
  d->flags |= SLUICE_DECISION_SHADOW;
  if (!d->allowed &&
      (c->shadow & (unsigned)sluice_shadow_feature_of(d->outcome))) {
    atomic_fetch_add_explicit(&c->p->ctr->shadow_passed[row], 1,
                              memory_order_relaxed);
    d->allowed = 1;
    d->status = 200;
  }
}

/* The store's part of a decision: the per-IP backstop first, then the
** request's own programs. */
static int decide_store(ctx *c, sluice_decision *d) {
  int rc, refused = 0;
  if (c->p->cfg.ip_limit > 0 && c->req->client_ip) {
    rc = sluice__backstop(c->p, c->I, c->now, d, &refused);
    if (rc != SLUICE_OK && is_store_failure(rc) && !c->store_err)
      c->store_err = rc;
    if (rc != SLUICE_OK || refused)
      return rc;
  }
  return c->cls == SLUICE_EP_AUTH ? decide_auth(c, d) : decide_tenant(c, d);
}

int sluice_policy_decide(sluice_policy *p, const sluice_request *q,
                         sluice_decision *d) {
  ctx c;
  int rc, row, skipped, cached, ticket;

  if (!d)
    return SLUICE_EINVAL;
  memset(d, 0, sizeof *d);
  if (!p || !q) {
    d->invalid_field = p ? "request" : "policy";
    return SLUICE_EINVAL;
  }
  rc = resolve(p, q, &c, d);
  if (rc != SLUICE_OK)
    return rc;
  c.shadow = sluice__shadow_mask(&p->cfg, p->shadow, c.tier);
  c.box_shadowed = 0;
  c.now = sluice_limiter_now(p->lim);
  d->now_ns = c.now;
  d->cost = c.cost;
  if (c.tier >= 0)
    memcpy(d->tier, p->cfg.tiers[c.tier].name,
           strnlen(p->cfg.tiers[c.tier].name, sizeof d->tier - 1));

  /* The shared deny cache first: a live box seen before costs no store
  ** call, and takes no ticket from the breaker (a half-open trial is not
  ** spent on a request that never reaches the store).  Then the breaker:
  ** while it is open the request is decided as failed, and failure_mode()
  ** reads the deny cache again, private or shared, so a boxed key stays
  ** out whatever the breaker does. */
  cached = cached_box(&c, 0, d);
  ticket = cached ? SLUICE__BRK_SKIP : sluice__breaker_admit(&p->brk, c.now);
  skipped = !cached && SLUICE__BRK_KIND(ticket) == SLUICE__BRK_SKIP;
  if (cached) {
    rc = SLUICE_OK; /* a live box seen before: no store call */
  } else if (skipped) {
    /* Circuit open: the store failed for a sustained stretch. */
    int last = atomic_load_explicit(&p->degraded, memory_order_relaxed);
    c.store_err = last < 0 ? last : SLUICE_EUNAVAIL;
    rc = c.store_err;
  } else {
    rc = decide_store(&c, d);
  }
  if (rc != SLUICE_OK && !is_store_failure(rc)) {
    sluice__breaker_abandon(&p->brk, ticket);
    return rc; /* nothing recorded that matters: a bug, not a decision */
  }
  if (!skipped)
    sluice__breaker_done(&p->brk,
                         rc != SLUICE_OK ? sluice_limiter_now(p->lim) : c.now,
                         ticket, rc != SLUICE_OK);
  if (rc != SLUICE_OK && skipped) {
    failure_mode(&c, rc, d);
  } else if (rc != SLUICE_OK) {
    int was = atomic_exchange(&p->degraded, rc);
    if (!was)
      emit(&c, SLUICE_EVENT_DEGRADED_ON, 0, 0, NULL, 0, 0);
    failure_mode(&c, rc, d);
  } else if (!cached &&
             atomic_load_explicit(&p->degraded, memory_order_relaxed) &&
             atomic_exchange(&p->degraded, 0)) {
    emit(&c, SLUICE_EVENT_DEGRADED_OFF, 0, 0, NULL, 0, 0);
  }

  d->verdict_status = status_of(d->outcome);
  d->allowed = d->outcome == SLUICE_OUTCOME_ALLOW;
  d->status = d->verdict_status;
  row = c.tier >= 0 ? c.tier : SLUICE_POLICY_TIERS_MAX;
  shadow_apply(&c, row, d);
  atomic_fetch_add_explicit(&p->ctr->decisions[row][d->outcome], 1,
                            memory_order_relaxed);
  if (d->flags & SLUICE_DECISION_DEGRADED)
    atomic_fetch_add_explicit(&p->ctr->degraded_decisions[row], 1,
                              memory_order_relaxed);
  return SLUICE_OK;
}

/* ----------------------------------------------------------- leases --- */

/* Release or renew: the lease set and (reconcile) the ledger lock are in
** the tenant's group, so both go in one program. */
static int lease_op(sluice_policy *p, const sluice_request *q, uint64_t id,
                    int kind) {
  sluice_decision d;
  sluice_program_result r;
  const sluice_lease_params *lp;
  prog g;
  ctx c;
  int rc, s, ok = 1;
  if (!p || !q || id == 0)
    return SLUICE_EINVAL;
  memset(&d, 0, sizeof d);
  rc = resolve(p, q, &c, &d);
  if (rc != SLUICE_OK)
    return rc;
  if (c.cls != SLUICE_EP_RECONCILE && c.cls != SLUICE_EP_EXPORT)
    return SLUICE_EINVAL;
  c.now = sluice_limiter_now(p->lim);
  lp = c.cls == SLUICE_EP_RECONCILE ? &p->reconcile_all : &p->export_all;
  g.nk = g.ns = 0;
  slot_recs(&c, &g, c.cls, (int)lp->max);
  s = step(&g, SLUICE_ALGO_LEASE, kind, 0, (int)lp->max, lp, 0, id);
  when(&g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  if (c.cls == SLUICE_EP_RECONCILE) {
    int lk = REC(&g, sluice__key_ledger, c.T, c.L);
    s = step(&g, SLUICE_ALGO_LEASE, kind, lk, 1, &p->ledger, 0, id);
    when(&g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  }
  rc = run(&c, &g, &r);
  if (rc)
    return rc;
  for (s = 0; s < g.ns; s++)
    ok = ok && r.v[s].allowed;
  return ok ? SLUICE_OK : SLUICE_ENOTFOUND;
}

int sluice_policy_release_lease(sluice_policy *p, const sluice_request *q,
                                uint64_t id) {
  return lease_op(p, q, id, SLUICE_OP_LEASE_RELEASE);
}

int sluice_policy_renew_lease(sluice_policy *p, const sluice_request *q,
                              uint64_t id) {
  return lease_op(p, q, id, SLUICE_OP_RENEW);
}

/* ------------------------------------------------- manual release --- */

static int release(sluice_policy *p, int scope_kind, const sluice_request *q,
                   const char *who, const char *why, int lift) {
  char kb[KEYLEN];
  sluice_key k;
  const sluice_penalty_params *pp;
  const char *sid;
  sluice_verdict v;
  sluice_event ev;
  ctx c;
  int rc;

  if (!p || !q || !who || !who[0] || !why || !why[0])
    return SLUICE_EINVAL;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.tier = -1;
  switch (scope_kind) {
  case SLUICE_SCOPE_KEY:
    if ((rc = id_ok(q->tenant_id, 1, "tenant_id", NULL)) ||
        (rc = id_ok(q->api_key_id, 1, "api_key_id", NULL)))
      return rc;
    if (!q->tier)
      return SLUICE_EINVAL;
    if ((c.tier = sluice__policy_tier(p, q->tier)) < 0)
      return SLUICE_ENOTFOUND;
    scope(p, q->tenant_id, c.T);
    scope(p, q->api_key_id, c.K);
    k = sluice__key_key_box(kb, c.T, c.K);
    pp = &p->rt[c.tier].penalty;
    sid = c.K;
    break;
  case SLUICE_SCOPE_IP:
    if ((rc = id_ok(q->client_ip, 1, "client_ip", NULL)))
      return rc;
    scope(p, q->client_ip, c.I);
    k = sluice__key_auth(kb, SLUICE_SCOPE_IP, SLUICE__AK_BOX, c.I);
    pp = &p->auth_penalty;
    sid = c.I;
    break;
  case SLUICE_SCOPE_SUBJECT:
    if ((rc = id_ok(q->auth_subject, 1, "auth_subject", NULL)))
      return rc;
    scope(p, q->auth_subject, c.S);
    k = sluice__key_auth(kb, SLUICE_SCOPE_SUBJECT, SLUICE__AK_BOX, c.S);
    pp = &p->auth_penalty;
    sid = c.S;
    break;
  default:
    return SLUICE_EINVAL;
  }
  c.now = sluice_limiter_now(p->lim);
  rc = apply(&c, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 1, &k, pp, 0, 0, &v);
  if (rc)
    return rc;
  if (v.allowed) {
    sluice__deny_drop(p, scope_kind, sid); /* released elsewhere */
    return SLUICE_ENOTFOUND;
  }
  if (!lift && (v.flags & SLUICE_V_SUSPENDED))
    return SLUICE_EPERM;
  if (lift && !(v.flags & SLUICE_V_SUSPENDED))
    return SLUICE_ENOTFOUND;
  {
    int level = v.level;
    rc = apply(&c, SLUICE_ALGO_PENALTY, SLUICE_OP_RELEASE, 1, &k, pp, 0, 0,
               &v);
    if (rc)
      return rc;
    sluice__deny_drop(p, scope_kind, sid);
    atomic_fetch_add_explicit(
        &p->ctr->events[lift ? SLUICE_EVENT_LIFT : SLUICE_EVENT_RELEASE], 1,
        memory_order_relaxed);
    if (p->on_event) {
      memset(&ev, 0, sizeof ev);
      ev.type = lift ? SLUICE_EVENT_LIFT : SLUICE_EVENT_RELEASE;
      ev.scope = scope_kind;
      ev.level = level;
      ev.scope_id = sid;
      ev.tenant_scope_id = c.T[0] ? c.T : NULL;
      ev.tier = c.tier >= 0 ? p->cfg.tiers[c.tier].name : NULL;
      ev.who = who;
      ev.why = why;
      ev.now_ns = c.now;
      p->on_event(p->userdata, &ev);
    }
  }
  return SLUICE_OK;
}

int sluice_policy_release_box(sluice_policy *p, int scope_kind,
                              const sluice_request *q, const char *who,
                              const char *why) {
  return release(p, scope_kind, q, who, why, 0);
}

int sluice_policy_lift_suspension(sluice_policy *p, int scope_kind,
                                  const sluice_request *q, const char *who,
                                  const char *why) {
  return release(p, scope_kind, q, who, why, 1);
}

/* ---------------------------------------------------------- metrics --- */

uint64_t sluice_policy_count(const sluice_policy *p, const char *tier,
                             int outcome) {
  int row;
  if (!p || outcome < 0 || outcome >= SLUICE_OUTCOME__COUNT)
    return 0;
  if (!tier || !tier[0])
    row = SLUICE_POLICY_TIERS_MAX;
  else if ((row = sluice__policy_tier(p, tier)) < 0)
    return 0;
  return atomic_load_explicit(&p->ctr->decisions[row][outcome],
                              memory_order_relaxed);
}

typedef struct out {
  char *buf;
  size_t len, used;
} out;

static void put(out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void put(out *o, const char *fmt, ...) {
  va_list ap;
  int n;
  char *dst = (o->buf && o->used < o->len) ? o->buf + o->used : NULL;
  size_t room = dst ? o->len - o->used : 0;
  va_start(ap, fmt);
  n = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (n > 0)
    o->used += (size_t)n;
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

int sluice_policy_metrics(const sluice_policy *cp, char *buf, size_t len,
                          size_t *needed) {
  sluice_policy *p = (sluice_policy *)cp;
  out o = {buf, len, 0};
  int t, i, l;
  if (!p || (!buf && len))
    return SLUICE_EINVAL;
  if (buf && len)
    buf[0] = '\0';
#define TIERNAME(t) ((t) < p->cfg.ntiers ? p->cfg.tiers[t].name : "none")
#define FOR_ROWS(t)                                                            \
  for (t = 0; t <= SLUICE_POLICY_TIERS_MAX; t++)                               \
    if (t < p->cfg.ntiers || t == SLUICE_POLICY_TIERS_MAX)
  put(&o, "# HELP sluice_policy_decisions_total Decisions by tier and "
          "outcome (in shadow mode: the outcome that was not enforced).\n"
          "# TYPE sluice_policy_decisions_total counter\n");
  FOR_ROWS(t) {
    for (i = 0; i < SLUICE_OUTCOME__COUNT; i++)
      put(&o, "sluice_policy_decisions_total{tier=\"%s\",outcome=\"%s\"} %llu\n",
          TIERNAME(t), sluice_outcome_name(i),
          (unsigned long long)LOAD(p->ctr->decisions[t][i]));
  }
  put(&o, "# HELP sluice_policy_degraded_decisions_total Decisions made by "
          "the local degraded limiter.\n"
          "# TYPE sluice_policy_degraded_decisions_total counter\n");
  FOR_ROWS(t) {
    put(&o, "sluice_policy_degraded_decisions_total{tier=\"%s\"} %llu\n",
        TIERNAME(t), (unsigned long long)LOAD(p->ctr->degraded_decisions[t]));
  }
  put(&o, "# HELP sluice_policy_shadow_passed_total Requests shadow mode let "
          "through that enforcement would have refused.\n"
          "# TYPE sluice_policy_shadow_passed_total counter\n");
  FOR_ROWS(t) {
    put(&o, "sluice_policy_shadow_passed_total{tier=\"%s\"} %llu\n",
        TIERNAME(t), (unsigned long long)LOAD(p->ctr->shadow_passed[t]));
  }
  put(&o, "# HELP sluice_policy_fail_closed_total 503s because the store "
          "failed, by endpoint class.\n"
          "# TYPE sluice_policy_fail_closed_total counter\n");
  for (i = 1; i < SLUICE_EP__COUNT; i++)
    put(&o, "sluice_policy_fail_closed_total{endpoint=\"%s\"} %llu\n",
        sluice_endpoint_class_name(i),
        (unsigned long long)LOAD(p->ctr->fail_closed[i]));
  put(&o, "# HELP sluice_policy_lease_denials_total Concurrency, ledger and "
          "export-cap denials.\n"
          "# TYPE sluice_policy_lease_denials_total counter\n");
  for (i = SLUICE_EP_RECONCILE; i <= SLUICE_EP_EXPORT; i++)
    put(&o, "sluice_policy_lease_denials_total{endpoint=\"%s\"} %llu\n",
        sluice_endpoint_class_name(i),
        (unsigned long long)LOAD(p->ctr->lease_denials[i]));
  put(&o, "# HELP sluice_policy_box_trips_total Penalty box trips by scope "
          "and level.\n# TYPE sluice_policy_box_trips_total counter\n");
  for (i = SLUICE_SCOPE_KEY; i <= SLUICE_SCOPE_SUBJECT; i++)
    for (l = 0; l < 3; l++)
      put(&o,
          "sluice_policy_box_trips_total{scope=\"%s\",level=\"%d\"} %llu\n",
          scope_name(i), l + 1, (unsigned long long)LOAD(p->ctr->trips[i][l]));
  put(&o, "# HELP sluice_policy_events_total Events emitted, by type.\n"
          "# TYPE sluice_policy_events_total counter\n");
  for (i = 1; i < SLUICE_EVENT__COUNT; i++)
    put(&o, "sluice_policy_events_total{event=\"%s\"} %llu\n",
        sluice_event_name(i), (unsigned long long)LOAD(p->ctr->events[i]));
  put(&o, "# HELP sluice_policy_degraded 1 while the store is failing "
          "(rl_degraded).\n# TYPE sluice_policy_degraded gauge\n"
          "sluice_policy_degraded %d\n",
      (LOAD(p->degraded) ||
       sluice__breaker_state(&p->brk) != SLUICE__BRK_CLOSED)
          ? 1
          : 0);
  put(&o, "# HELP sluice_policy_breaker_state The store's circuit breaker "
          "in this process: 0 closed, 1 open, 2 half-open.\n"
          "# TYPE sluice_policy_breaker_state gauge\n"
          "sluice_policy_breaker_state %d\n",
      sluice__breaker_state(&p->brk));
  {
    uint64_t h, st, f;
    sluice__deny_stats(p, &h, &st, &f);
    put(&o, "# HELP sluice_policy_deny_cache_total Deny cache: decisions it "
            "made (hit), boxes it took (stored), boxes that found no slot "
            "(full).\n# TYPE sluice_policy_deny_cache_total counter\n"
            "sluice_policy_deny_cache_total{result=\"hit\"} %llu\n"
            "sluice_policy_deny_cache_total{result=\"stored\"} %llu\n"
            "sluice_policy_deny_cache_total{result=\"full\"} %llu\n",
        (unsigned long long)h, (unsigned long long)st, (unsigned long long)f);
  }
#undef FOR_ROWS
#undef TIERNAME
  if (needed)
    *needed = o.used;
  if (buf && o.used >= len)
    return SLUICE_ERANGE;
  if (!buf)
    return SLUICE_OK;
  return SLUICE_OK;
}

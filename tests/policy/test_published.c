/*
** The shipped policy files of other APIs (etc/github.conf,
** etc/shopify.conf, etc/llm-gateway.conf, etc/stripe.conf, etc/cloudflare.conf,
** etc/discord.conf, etc/slack.conf, etc/anthropic.conf, etc/hubspot.conf,
** etc/reddit.conf)
** against their published figures,
** on mem, shm and lmdb: a generated trace (a fixed seed) is decided on a
** manual clock (on a Redis Cluster too, both engines, when the redis
** harness runs this), and each decision is compared with a model of the
** published policy written here, independently of the file:
**
**   - a request is admitted exactly when every limit of its route has room
**     (so requests under every limit are admitted), and a refusal names
**     the first limit of the route without room (the binding one);
**   - what was admitted never exceeds a limit: for a fixed window, the
**     cost in each window of each scope; for a bucket, the cost in any
**     interval [t0, t1] of a scope is at most burst + rate * (t1 - t0);
**   - where a refusal blocks the caller for a while (Cloudflare's five
**     minutes), every request of the scope in that time is refused as
**     boxed, with the block's end as its Retry-After, and nothing counted.
**
** The figures below are the published ones (the and the vendors'
** pages): the oracle the files are held to.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/rmtree.h"
#include "helpers.h"

/* LEASE: a concurrency limit of n; the replay releases each request's
** lease before the next request, so it always has room and reports n - 1
** (the request's own lease held); github_concurrency() holds them. */
enum { GCRA, FIXED, LEASE };

typedef struct lim {
  const char *name;
  int kind;
  int64_t n, period_ns; /* GCRA: burst n, refill n per period; FIXED: n per */
  int64_t rate;         /* GCRA: points per period (may differ from n) */
} lim;

/* A request of the trace and the limits its route passes, in order. */
#define MAXL 6
typedef struct treq {
  const char *method, *route;
  sluice_attr attrs[4];
  int nattrs;
  int nl;
  const lim *l[MAXL];
  int64_t cost[MAXL];
  int settles[MAXL]; /* the limit's cost is the settled attribute */
  char scope[MAXL][96];
  int64_t box_ns; /* > 0: a refusal boxes box_scope for this long */
  char box_scope[96];
} treq;

/* The model's state of one scope of one limit, and what it admitted. */
typedef struct mstate {
  char key[112];
  const lim *l;
  __int128 tat; /* GCRA: theoretical arrival time times rate */
  int64_t win, used; /* FIXED: the window's start and its cost */
  int nadm;
  int64_t *t, *c; /* admitted times and costs */
} mstate;

#define MAXS 256
typedef struct model {
  mstate s[MAXS];
  int ns;
} model;

static mstate *state(model *m, const lim *l, const char *scope) {
  char key[112];
  int i;
  snprintf(key, sizeof key, "%s|%s", l->name, scope);
  for (i = 0; i < m->ns; i++)
    if (!strcmp(m->s[i].key, key))
      return &m->s[i];
  cr_assert(m->ns < MAXS);
  memset(&m->s[m->ns], 0, sizeof m->s[0]);
  snprintf(m->s[m->ns].key, sizeof m->s[0].key, "%s", key);
  m->s[m->ns].l = l;
  m->s[m->ns].t = calloc(20000, sizeof(int64_t));
  m->s[m->ns].c = calloc(20000, sizeof(int64_t));
  return &m->s[m->ns++];
}

static int room(const lim *l, mstate *s, int64_t now, int64_t cost) {
  if (l->kind == LEASE)
    return 1;
  if (l->kind == GCRA) {
    __int128 nowr = (__int128)now * l->rate;
    __int128 base = s->tat > nowr ? s->tat : nowr;
    return base + (__int128)cost * l->period_ns - nowr <=
           (__int128)l->n * l->period_ns;
  }
  return (now / l->period_ns * l->period_ns != s->win ? 0 : s->used) + cost <=
         l->n;
}

static void take(const lim *l, mstate *s, int64_t now, int64_t cost) {
  if (l->kind == LEASE)
    return;
  if (l->kind == GCRA) {
    __int128 nowr = (__int128)now * l->rate;
    s->tat = (s->tat > nowr ? s->tat : nowr) + (__int128)cost * l->period_ns;
  } else {
    int64_t w = now / l->period_ns * l->period_ns;
    if (w != s->win) {
      s->win = w;
      s->used = 0;
    }
    s->used += cost;
  }
  cr_assert(s->nadm < 20000);
  s->t[s->nadm] = now;
  s->c[s->nadm++] = cost;
}

/* A settle of a bucket (lib/algo/adjust.c's rule, written here again): a
** charge of delta > 0 more, at most one burst of debt; a refund back to
** no earlier than now (never past full). */
static void settle_model(const lim *l, mstate *s, int64_t now, int64_t delta) {
  __int128 nowr = (__int128)now * l->rate;
  __int128 c = (__int128)(delta < 0 ? -delta : delta) * l->period_ns;
  __int128 tau = (__int128)l->n * l->period_ns;
  if (delta > 0) {
    __int128 base = s->tat > nowr ? s->tat : nowr;
    __int128 next = base + c < nowr + 2 * tau ? base + c : nowr + 2 * tau;
    if (next > s->tat)
      s->tat = next;
  } else if (s->tat > nowr) {
    s->tat = s->tat - c > nowr ? s->tat - c : nowr;
  }
}

/* What the limit has left at now, as sluice_verdict.remaining says it. */
static int64_t left_of(const lim *l, const mstate *s, int64_t now) {
  if (l->kind == LEASE)
    return l->n - 1;
  if (l->kind == GCRA) {
    __int128 nowr = (__int128)now * l->rate;
    __int128 span = s->tat > nowr ? s->tat - nowr : 0;
    __int128 r = ((__int128)l->n * l->period_ns - span) / l->period_ns;
    return r < 0 ? 0 : (int64_t)r;
  }
  return l->n - (now / l->period_ns * l->period_ns != s->win ? 0 : s->used);
}

/* What was admitted never exceeds a limit, checked from the log alone. */
static void check_bounds(const model *m) {
  int i, j, a;
  for (i = 0; i < m->ns; i++) {
    const mstate *s = &m->s[i];
    const lim *l = s->l;
    for (a = 0; a < s->nadm; a++) {
      __int128 sum = 0;
      for (j = a; j < s->nadm; j++) {
        sum += s->c[j];
        if (l->kind == FIXED) {
          if (s->t[j] / l->period_ns != s->t[a] / l->period_ns)
            break;
          cr_assert(sum <= l->n, "%s: over %lld in a window", s->key,
                    (long long)l->n);
        } else {
          cr_assert(sum * l->period_ns <=
                        (__int128)l->n * l->period_ns +
                            (__int128)l->rate * (s->t[j] - s->t[a]),
                    "%s: over burst + rate * dt", s->key);
        }
      }
    }
  }
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(uint64_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng % n;
}

typedef void (*gen_fn)(treq *r);

/* Settling (sluice_policy_settle()): when a test sets `settling`, a third
** of the admitted requests are settled a few requests later to a random
** real cost of the attribute their costs read (settle_attr), and the
** model settles the limits whose cost is that attribute. */
static int settling, settle_attr = -1;
static int64_t settle_max = 100000; /* the settled attribute's `max` */
typedef struct pend {
  treq r;
  char val[24];
  sluice_request q;
  sluice_decision d;
  int64_t actual;
} pend;
#define NPEND 4
static pend pending[NPEND];
static int npend, nsettled;

static void settle_one(fixture *f, model *m, int64_t now) {
  pend *p = &pending[0];
  sluice_attr a;
  char v[24];
  int k, rc;
  snprintf(v, sizeof v, "%lld", (long long)p->actual);
  a.name = p->r.attrs[settle_attr].name;
  a.value = v;
  rc = sluice_policy_settle(f->pol, &p->q, &p->d, &a, 1);
  cr_assert_eq(rc, SLUICE_OK, "settle: %s (%s)", sluice_strerror(rc),
               p->d.invalid_field ? p->d.invalid_field : "");
  cr_assert(p->d.flags & SLUICE_DECISION_SETTLED);
  cr_assert_eq(sluice_policy_settle(f->pol, &p->q, &p->d, &a, 1),
               SLUICE_EEXIST);
  for (k = 0; k < p->r.nl; k++)
    if (p->r.settles[k])
      settle_model(p->r.l[k], state(m, p->r.l[k], p->r.scope[k]), now,
                   p->actual - p->r.cost[k]);
  memmove(&pending[0], &pending[1], sizeof pending[0] * (NPEND - 1));
  npend--;
  nsettled++;
  for (k = 0; k < npend; k++) { /* re-point at the moved copies */
    pending[k].r.attrs[settle_attr].value = pending[k].val;
    pending[k].q.attrs = pending[k].r.attrs;
  }
}

/* The model's record of a block: its end in `win`. */
static const lim box_lim = {"(blocked)", FIXED, 1, SEC, 0};
static int nboxed; /* requests the model found blocked in the last replay */

/* Decide n generated requests on store and compare with the model;
** returns the number of refusals per limit in denied[]. */
static void replay(const char *file, const char *store, unsigned flags,
                   gen_fn gen, int n, int64_t max_step_ns,
                   const lim *const *ls, int nls, int denied[]) {
  fixture f;
  model *m = calloc(1, sizeof *m);
  int i, k, rc, admitted = 0;
  rng = 88172645463325252ull;
  nboxed = 0;
  rc = fx_open_file(&f, file, store, flags);
  if (rc == SLUICE_ENOTSUP)
    cr_skip_test("%s: compiled out", store);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s", store, sluice_strerror(rc));
  for (i = 0; i < n; i++) {
    treq r;
    sluice_request q;
    sluice_decision d;
    int64_t now = sluice_clock_now(f.clock);
    int want = 1, bind = -1;
    memset(&r, 0, sizeof r);
    if (settling && npend > 0 && (npend == NPEND || rnd(2)))
      settle_one(&f, m, now);
    gen(&r);
    if (r.box_ns > 0 && now < state(m, &box_lim, r.box_scope)->win) {
      /* Blocked: refused before any limit, and nothing counted. */
      int64_t until = state(m, &box_lim, r.box_scope)->win;
      memset(&q, 0, sizeof q);
      q.method = r.method;
      q.route = r.route;
      q.attrs = r.attrs;
      q.nattrs = (size_t)r.nattrs;
      rc = sluice_policy_decide(f.pol, 1, &q, &d, NULL);
      cr_assert_eq(rc, SLUICE_OK, "%s %d: %s", store, i, sluice_strerror(rc));
      cr_assert(!d.allowed && d.outcome == SLUICE_OUTCOME_BOXED &&
                    d.status == 429,
                "%s request %d: blocked until %lld, got outcome %d at %lld",
                store, i, (long long)until, d.outcome, (long long)now);
      cr_assert_eq(d.retry_after_ns, until - now,
                   "%s request %d: %lld, blocked for %lld more", store, i,
                   (long long)d.retry_after_ns, (long long)(until - now));
      nboxed++;
      sluice_clock_advance(f.clock, (int64_t)rnd((uint64_t)max_step_ns));
      continue;
    }
    for (k = 0; k < r.nl; k++)
      if (!room(r.l[k], state(m, r.l[k], r.scope[k]), now, r.cost[k])) {
        want = 0;
        bind = k;
        break;
      }
    memset(&q, 0, sizeof q);
    q.method = r.method;
    q.route = r.route;
    q.attrs = r.attrs;
    q.nattrs = (size_t)r.nattrs;
    rc = sluice_policy_decide(f.pol, 1, &q, &d, NULL);
    cr_assert_eq(rc, SLUICE_OK, "%s %d: %s (%s)", store, i,
                 sluice_strerror(rc), d.invalid_field ? d.invalid_field : "");
    cr_assert_eq(d.allowed, want, "%s request %d (%s %s): allowed %d, the "
                 "published limits say %d (%s)",
                 store, i, r.method, r.route, d.allowed, want,
                 d.limit_name ? d.limit_name : "-");
    cr_assert_eq(d.binding, SLUICE_BINDING_LIMIT);
    if (want) {
      int64_t best = INT64_MAX;
      for (k = 0; k < r.nl; k++)
        take(r.l[k], state(m, r.l[k], r.scope[k]), now, r.cost[k]);
      /* The binding limit: the least left as a fraction of its own (a
      ** lease binds only a route of leases alone). */
      for (k = 0; k < r.nl; k++) {
        int64_t lf;
        if (r.l[k]->kind == LEASE)
          continue;
        lf = left_of(r.l[k], state(m, r.l[k], r.scope[k]), now) *
                     1024 / r.l[k]->n;
        if (lf < best) {
          best = lf;
          bind = k;
        }
      }
      cr_assert_str_eq(d.limit_name, r.l[bind]->name, "%s request %d", store,
                       i);
      cr_assert_eq(d.remaining,
                   left_of(r.l[bind], state(m, r.l[bind], r.scope[bind]), now),
                   "%s request %d: %s", store, i, d.limit_name);
      /* Every limit of the route is reported, in its order, with what
      ** the model has left of it and the cost it took. */
      cr_assert_eq(d.nlimits, r.nl, "%s request %d", store, i);
      for (k = 0; k < r.nl; k++) {
        cr_assert_str_eq(d.limits[k].name, r.l[k]->name);
        cr_assert_eq(d.limits[k].remaining,
                     left_of(r.l[k], state(m, r.l[k], r.scope[k]), now),
                     "%s request %d: limit %s", store, i, r.l[k]->name);
        cr_assert_eq(d.limits[k].cost, r.cost[k], "%s request %d: %s", store,
                     i, r.l[k]->name);
        cr_assert_eq(d.limits[k].flags,
                     k == bind ? SLUICE_LIMIT_BINDING : 0u,
                     "%s request %d: %s", store, i, r.l[k]->name);
      }
      admitted++;
      if (d.lease_id)
        cr_assert_eq(
            sluice_policy_release(f.pol, &q,
                                  &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                 .lease_id = d.lease_id}),
            SLUICE_OK, "%s request %d: release", store, i);
      if (settling && rnd(3) == 0) {
        pend *p = &pending[npend++];
        int64_t was = strtoll(r.attrs[settle_attr].value, NULL, 10);
        p->r = r;
        snprintf(p->val, sizeof p->val, "%s", r.attrs[settle_attr].value);
        p->r.attrs[settle_attr].value = p->val;
        p->q = q;
        p->q.attrs = p->r.attrs;
        p->d = d;
        /* Mostly less than charged (max_tokens is an upper bound), a
        ** quarter more (the caller's estimate was low), now and then 0. */
        p->actual = rnd(4) == 0 ? was + (int64_t)rnd((uint64_t)was + 1)
                                : (int64_t)rnd((uint64_t)was + 1);
        if (p->actual > settle_max)
          p->actual = settle_max;
      }
    } else {
      cr_assert_eq(d.remaining,
                   left_of(r.l[bind], state(m, r.l[bind], r.scope[bind]), now),
                   "%s request %d: %s", store, i, d.limit_name);
      cr_assert_str_eq(d.limit_name, r.l[bind]->name, "%s request %d", store,
                       i);
      cr_assert_eq(d.status, 429);
      cr_assert(d.retry_after_ns > 0);
      /* The refusing limit is flagged; those after it did not run. */
      cr_assert_eq(d.nlimits, r.nl, "%s request %d", store, i);
      for (k = bind; k < r.nl; k++) {
        cr_assert_str_eq(d.limits[k].name, r.l[k]->name);
        cr_assert_eq(d.limits[k].flags,
                     k == bind ? SLUICE_LIMIT_DENIED | SLUICE_LIMIT_BINDING
                               : SLUICE_LIMIT_NOT_RUN,
                     "%s request %d: %s", store, i, r.l[k]->name);
      }
      cr_assert_eq(d.limits[bind].remaining, d.remaining);
      if (r.box_ns > 0) /* one refusal is the strike that boxes (a
                        ** penalty record keeps the trip's millisecond) */
        state(m, &box_lim, r.box_scope)->win = now / MS * MS + r.box_ns;
      for (k = 0; k < nls; k++)
        if (ls[k] == r.l[bind])
          denied[k]++;
    }
    sluice_clock_advance(f.clock, (int64_t)rnd((uint64_t)max_step_ns));
  }
  cr_assert(admitted > 0);
  /* The published bounds are on costs known up front; a settled run is
  ** held to the model decision by decision instead (a settle may leave a
  ** bucket one burst in debt, and a refund gives back what the charge
  ** still holds, which is not the same as having charged less). */
  if (!settling)
    check_bounds(m);
  npend = 0;
  for (i = 0; i < m->ns; i++) {
    free(m->s[i].t);
    free(m->s[i].c);
  }
  free(m);
  fx_close(&f);
}

/* Every limit refused something: the trace reached each bound. */
static void all_bound(const lim *const *ls, int nls, const int *denied) {
  int k;
  for (k = 0; k < nls; k++)
    cr_assert(denied[k] > 0, "the trace never reached %s (%d %d %d %d %d %d)",
              ls[k]->name, denied[0], nls > 1 ? denied[1] : 0,
              nls > 2 ? denied[2] : 0, nls > 3 ? denied[3] : 0,
              nls > 4 ? denied[4] : 0, nls > 5 ? denied[5] : 0);
}

/* Replay a file's generated trace and require that it reached every
** limit in ls. */
static void published(const char *file, const char *store, unsigned flags,
                      gen_fn gen, int n, int64_t max_step_ns,
                      const lim *const *ls, int nls) {
  int denied[MAXL] = {0};
  cr_assert(nls <= MAXL);
  replay(file, store, flags, gen, n, max_step_ns, ls, nls, denied);
  all_bound(ls, nls, denied);
}

/* ----------------------------------------------------------- GitHub --- */

static const lim gh_core = {"core", FIXED, 5000, 3600 * SEC, 0};
static const lim gh_points = {"points", FIXED, 900, 60 * SEC, 0};
static const lim gh_cmin = {"content_minute", FIXED, 80, 60 * SEC, 0};
static const lim gh_chour = {"content_hour", FIXED, 500, 3600 * SEC, 0};
static const lim gh_conc = {"concurrent", LEASE, 100, 10 * SEC, 0};
static const lim *const gh_all[] = {&gh_core, &gh_points, &gh_cmin,
                                    &gh_chour};

static void gh_gen(treq *r) {
  static const char *users[] = {"octocat", "hubot"};
  static const char *get_routes[] = {"/repos/a/b", "/repos/a/b",
                                     "/repos/a/b", "/repos/a/b/pulls",
                                     "/user"};
  const char *user = users[rnd(10) < 8 ? 0 : 1];
  uint64_t x = rnd(100);
  r->attrs[0] = (sluice_attr){"user", user};
  r->nattrs = 1;
  r->l[0] = &gh_core;
  r->cost[0] = 1;
  snprintf(r->scope[0], sizeof r->scope[0], "%s", user);
  r->l[1] = &gh_points;
  if (x < 20) { /* content creation */
    r->method = "POST";
    r->route = x < 15 ? "/repos/a/b/issues" : "/gists";
    r->cost[1] = 5;
    r->l[2] = &gh_cmin;
    r->l[3] = &gh_chour;
    r->cost[2] = r->cost[3] = 1;
    snprintf(r->scope[2], sizeof r->scope[2], "%s", user);
    snprintf(r->scope[3], sizeof r->scope[3], "%s", user);
    r->nl = 4;
  } else {
    static const char *methods[] = {"GET", "GET", "GET", "HEAD",
                                    "OPTIONS", "PATCH", "PUT", "DELETE"};
    r->method = methods[rnd(8)];
    r->route = get_routes[rnd(5)];
    r->cost[1] = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD") ||
                         !strcmp(r->method, "OPTIONS")
                     ? 1
                     : 5;
    r->nl = 2;
  }
  snprintf(r->scope[1], sizeof r->scope[1], "%s %s", user, r->route);
  r->l[r->nl] = &gh_conc;
  r->cost[r->nl] = 1;
  snprintf(r->scope[r->nl], sizeof r->scope[r->nl], "%s", user);
  r->nl++;
}

static void github(const char *store, unsigned flags) {
  published(SLUICE_ETC "/github.conf", store, flags, gh_gen, 12000,
            100 * MS, gh_all, 4);
}

/* GitHub's 100 concurrent requests per user, held: the 101st is refused
** (and takes nothing from the window it passed first), a release lets one
** more in, another user is not held back, a lease never released ends by
** itself: not before its TTL (10 s) and by TTL + TTL/3 + 4 ms. */
static void gh_decide(fixture *f, sluice_request *q, sluice_decision *d) {
  int rc = sluice_policy_decide(f->pol, 1, q, d, NULL);
  cr_assert_eq(rc, SLUICE_OK, "%s", sluice_strerror(rc));
}

static void github_concurrency(const char *store, unsigned flags) {
  /* Users of their own: a Redis run shares its servers with github(). */
  sluice_attr me = {"user", "monalisa"}, other = {"user", "defunkt"};
  sluice_request q, q2;
  sluice_decision d;
  fixture f;
  uint64_t ids[100];
  int64_t t0;
  int i, rc = fx_open_file(&f, SLUICE_ETC "/github.conf", store, flags);
  if (rc == SLUICE_ENOTSUP)
    cr_skip_test("%s: compiled out", store);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s", store, sluice_strerror(rc));
  memset(&q, 0, sizeof q);
  q.method = "GET";
  q.route = "/user";
  q.attrs = &me;
  q.nattrs = 1;
  q2 = q;
  q2.attrs = &other;
  t0 = sluice_clock_now(f.clock);
  for (i = 0; i < 100; i++) {
    gh_decide(&f, &q, &d);
    cr_assert(d.allowed, "%s: request %d of 100", store, i);
    cr_assert_neq(d.lease_id, 0);
    cr_assert_str_eq(d.limits[2].name, "concurrent");
    cr_assert_eq(d.limits[2].remaining, 99 - i);
    ids[i] = d.lease_id;
    sluice_clock_advance(f.clock, MS);
  }
  {
    /* What `sluice inspect` reads: the counted record holds 100. */
    sluice_limit_state ls;
    cr_assert_eq(inspect_limit(f.pol, "concurrent", &q, &ls, NULL), SLUICE_OK);
    cr_assert_eq(ls.held, 100, "%s: %lld held", store, (long long)ls.held);
    cr_assert_eq(ls.remaining, 0);
    cr_assert_not(ls.unfit);
  }
  gh_decide(&f, &q, &d);
  cr_assert_not(d.allowed, "%s: the 101st concurrent request", store);
  cr_assert_eq(d.status, 429);
  cr_assert_str_eq(d.limit_name, "concurrent");
  cr_assert_geq(d.retry_after_ns, t0 + 10 * SEC - sluice_clock_now(f.clock));
  cr_assert_leq(d.retry_after_ns, 10 * SEC + 10 * SEC / 3 + 4 * MS);
  gh_decide(&f, &q2, &d);
  cr_assert(d.allowed, "%s: another user has leases of its own", store);
  cr_assert_eq(sluice_policy_release(f.pol, &q2,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = d.lease_id}),
               SLUICE_OK);
  /* A release lets exactly one more in; the refusal charged nothing. */
  cr_assert_eq(sluice_policy_release(f.pol, &q,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = ids[0]}),
               SLUICE_OK);
  gh_decide(&f, &q, &d);
  cr_assert(d.allowed, "%s: after a release", store);
  cr_assert_eq(d.limits[0].remaining, 5000 - 101, "%s: core", store);
  cr_assert_eq(d.limits[1].remaining, 900 - 101, "%s: points", store);
  cr_assert_eq(d.limits[2].remaining, 0);
  gh_decide(&f, &q, &d);
  cr_assert_not(d.allowed, "%s: full again", store);
  cr_assert_eq(sluice_policy_renew(f.pol, &q,
                                   &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                  .lease_id = ids[1]}),
               SLUICE_EINVAL,
               "%s: a counted lease is not renewed through the policy", store);
  /* Leaked leases: held until their TTL, gone within TTL/3 + 4 ms after. */
  sluice_clock_set(f.clock, t0 + 10 * SEC - MS);
  gh_decide(&f, &q, &d);
  cr_assert_not(d.allowed, "%s: a lease ended before its TTL", store);
  sluice_clock_set(f.clock, t0 + 200 * MS + 10 * SEC + 10 * SEC / 3 + 4 * MS);
  gh_decide(&f, &q, &d);
  cr_assert(d.allowed, "%s: leaked leases still held", store);
  cr_assert_eq(d.limits[2].remaining, 99, "%s", store);
  cr_assert_eq(sluice_policy_release(f.pol, &q,
                                     &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                    .lease_id = ids[5]}),
               SLUICE_ENOTFOUND, "%s: a leaked lease's id after its end",
               store);
  fx_close(&f);
}

/* ---------------------------------------------------------- Shopify --- */

static const lim sh_basic = {"rest_admin", GCRA, 40, SEC, 2};
static const lim sh_plus = {"rest_admin", GCRA, 40, SEC, 20};
static const lim *const sh_all[] = {&sh_basic};

static void sh_gen(treq *r) {
  static const char *stores[] = {"shop-basic", "shop-plus"};
  static const char *apps[] = {"app-1", "app-2"};
  int s = (int)rnd(2), a = rnd(4) == 0;
  r->method = rnd(3) ? "GET" : "POST";
  r->route = "/admin/api/2024-01/orders.json";
  r->attrs[0] = (sluice_attr){"store", stores[s]};
  r->attrs[1] = (sluice_attr){"app", apps[a]};
  r->attrs[2] = (sluice_attr){"plan", s ? "plus" : "basic"};
  r->nattrs = 3;
  r->nl = 1;
  r->l[0] = s ? &sh_plus : &sh_basic;
  r->cost[0] = 1;
  snprintf(r->scope[0], sizeof r->scope[0], "%s %s", stores[s], apps[a]);
}

static void shopify(const char *store, unsigned flags) {
  published(SLUICE_ETC "/shopify.conf", store, flags, sh_gen, 6000,
            40 * MS, sh_all, 1);
}

/* ------------------------------------------------------ LLM gateway --- */

static const lim ll_oreq = {"org_requests", GCRA, 500, 60 * SEC, 500};
static const lim ll_otok = {"org_tokens", GCRA, 200000, 60 * SEC, 200000};
static const lim ll_preq = {"project_requests", GCRA, 300, 60 * SEC, 300};
static const lim ll_ptok = {"project_tokens", GCRA, 100000, 60 * SEC,
                            100000};
static const lim ll_mreq = {"model_requests", GCRA, 200, 60 * SEC, 200};
static const lim ll_mtok = {"model_tokens", GCRA, 150000, 60 * SEC, 150000};
static const lim *const ll_all[] = {&ll_oreq, &ll_otok, &ll_preq,
                                    &ll_ptok, &ll_mreq, &ll_mtok};

static void ll_gen(treq *r) {
  /* (Other organizations when settling: a Redis run shares the store.) */
  static const char *orgs[] = {"org-a", "org-b", "s-org-a", "s-org-b"};
  static const char *projects[] = {"p1", "p2", "p3"};
  static const char *models[] = {"small", "large", "code", "vision"};
  static char tokens[8][16];
  static int ti;
  /* Phases of 750 requests, each reaching another limit first: short
  ** prompts to one project (its requests), spread (the organization's
  ** requests), to one model (its requests), then long prompts, half of
  ** them to one model (the token limits). */
  int phase = ti / 750 % 4;
  const char *o = orgs[(rnd(5) == 0) + 2 * settling];
  const char *p = projects[phase == 0 ? 0 : rnd(3)];
  const char *m = models[phase == 2 || (phase == 3 && rnd(2)) ? 1 : rnd(4)];
  int64_t t = phase < 3 ? 1 + (int64_t)rnd(50) : 20000 + (int64_t)rnd(60001);
  int k;
  ti++;
  snprintf(tokens[ti % 8], sizeof tokens[0], "%lld", (long long)t);
  r->method = "POST";
  r->route = "/v1/chat/completions";
  r->attrs[0] = (sluice_attr){"org", o};
  r->attrs[1] = (sluice_attr){"project", p};
  r->attrs[2] = (sluice_attr){"model", m};
  r->attrs[3] = (sluice_attr){"tokens", tokens[ti % 8]};
  r->nattrs = 4;
  r->nl = 6;
  for (k = 0; k < 6; k++) {
    r->l[k] = ll_all[k];
    r->cost[k] = k % 2 ? t : 1;
    r->settles[k] = k % 2; /* the tokens limits */
  }
  snprintf(r->scope[0], sizeof r->scope[0], "%s", o);
  snprintf(r->scope[1], sizeof r->scope[1], "%s", o);
  snprintf(r->scope[2], sizeof r->scope[2], "%s %s", o, p);
  snprintf(r->scope[3], sizeof r->scope[3], "%s %s", o, p);
  snprintf(r->scope[4], sizeof r->scope[4], "%s %s", o, m);
  snprintf(r->scope[5], sizeof r->scope[5], "%s %s", o, m);
}

static void llm(const char *store, unsigned flags) {
  published(SLUICE_ETC "/llm-gateway.conf", store, flags, ll_gen, 6000,
            60 * MS, ll_all, 6);
}

/* The same trace with settles: the token limits of the organization,
** project and model move by each settle, the request limits do not (the
** model settles only the limits whose cost is the tokens: any other move
** would show in a later decision). */
static void llm_settle(const char *store, unsigned flags) {
  int denied[6] = {0};
  settling = 1;
  settle_attr = 3;
  nsettled = 0;
  replay(SLUICE_ETC "/llm-gateway.conf", store, flags, ll_gen, 6000, 60 * MS,
         ll_all, 6, denied);
  settling = 0;
  cr_assert_gt(nsettled, 500, "the trace settled (%d)", nsettled);
  all_bound(ll_all, 6, denied);
}

/* ----------------------------------------------------------- Stripe --- */

/* 100 reads and 100 writes a second per account in live mode, 25 in test
** mode; the mode is in the scope (two budgets per account). */
static const lim st_rlive = {"reads", GCRA, 100, SEC, 100};
static const lim st_rtest = {"reads", GCRA, 25, SEC, 25};
static const lim st_wlive = {"writes", GCRA, 100, SEC, 100};
static const lim st_wtest = {"writes", GCRA, 25, SEC, 25};
static const lim *const st_all[] = {&st_rlive, &st_rtest, &st_wlive,
                                    &st_wtest};

static void st_gen(treq *r) {
  static const char *accounts[] = {"acct_1", "acct_2"};
  static const char *writes[] = {"POST", "DELETE", "PATCH"};
  uint64_t x = rnd(100);
  int a = x >= 45 && x < 55 ? 1 : x >= 80, live = x < 55;
  int read = rnd(10) < 7;
  r->method = read ? "GET" : writes[rnd(3)];
  r->route = read ? "/v1/charges" : "/v1/refunds";
  r->attrs[0] = (sluice_attr){"account", accounts[a]};
  r->attrs[1] = (sluice_attr){"mode", live ? "live" : "test"};
  r->nattrs = 2;
  r->nl = 1;
  r->l[0] = read ? (live ? &st_rlive : &st_rtest)
                 : (live ? &st_wlive : &st_wtest);
  r->cost[0] = 1;
  snprintf(r->scope[0], sizeof r->scope[0], "%s %s", accounts[a],
           live ? "live" : "test");
}

static void stripe(const char *store, unsigned flags) {
  published(SLUICE_ETC "/stripe.conf", store, flags, st_gen, 8000,
            2 * MS, st_all, 4);
}

/* ------------------------------------------------------- Cloudflare --- */

/* 1200 requests per five minutes per user; a refusal blocks the user for
** the next five minutes. */
static const lim cf_api = {"client_api", FIXED, 1200, 300 * SEC, 0};
static const lim *const cf_all[] = {&cf_api};

static void cf_gen(treq *r) {
  static const char *users[] = {"alice@example.com", "bob@example.com"};
  static const char *methods[] = {"GET", "GET", "POST", "PATCH", "DELETE"};
  static const char *routes[] = {"/client/v4/zones",
                                 "/client/v4/zones/023e105f/dns_records",
                                 "/client/v4/accounts/01a7362d/workers"};
  const char *user = users[rnd(10) < 8 ? 0 : 1];
  r->method = methods[rnd(5)];
  r->route = routes[rnd(3)];
  r->attrs[0] = (sluice_attr){"user", user};
  r->nattrs = 1;
  r->nl = 1;
  r->l[0] = &cf_api;
  r->cost[0] = 1;
  snprintf(r->scope[0], sizeof r->scope[0], "%s", user);
  r->box_ns = 300 * SEC;
  snprintf(r->box_scope, sizeof r->box_scope, "%s", user);
}

static void cloudflare(const char *store, unsigned flags) {
  published(SLUICE_ETC "/cloudflare.conf", store, flags, cf_gen, 6000,
            200 * MS, cf_all, 1);
  cr_assert_gt(nboxed, 1000, "the trace met the block (%d)", nboxed);
}

/* ---------------------------------------------------------- Discord --- */

/* 50 requests a second per bot; per channel 5 messages per 5 s and a
** reaction per 250 ms; per guild 10 member edits per 10 s. */
static const lim dc_global = {"global", GCRA, 50, SEC, 50};
static const lim dc_msg = {"messages", GCRA, 5, 5 * SEC, 5};
static const lim dc_react = {"reactions", GCRA, 1, 250 * MS, 1};
static const lim dc_member = {"member_edits", GCRA, 10, 10 * SEC, 10};
static const lim *const dc_all[] = {&dc_global, &dc_msg, &dc_react,
                                    &dc_member};

static void dc_gen(treq *r) {
  static const char *bots[] = {"bot-1", "bot-2"};
  static const char *channels[] = {"1001", "1002", "1003"};
  static const char *guilds[] = {"2001", "2002"};
  static char path[8][96];
  static int pi;
  const char *bot = bots[rnd(10) < 8 ? 0 : 1];
  uint64_t x = rnd(100);
  char *p = path[pi++ % 8];
  r->attrs[0] = (sluice_attr){"bot", bot};
  r->nattrs = 1;
  r->l[0] = &dc_global;
  r->cost[0] = 1;
  r->nl = 1;
  snprintf(r->scope[0], sizeof r->scope[0], "%s", bot);
  if (x < 40) {
    const char *c = channels[rnd(3)];
    r->method = "POST";
    snprintf(p, 96, "/api/v10/channels/%s/messages", c);
    r->l[1] = &dc_msg;
    snprintf(r->scope[1], sizeof r->scope[1], "%s %s", bot, c);
    r->nl = 2;
  } else if (x < 60) {
    const char *c = channels[rnd(3)];
    r->method = "PUT";
    snprintf(p, 96,
             "/api/v10/channels/%s/messages/77/reactions/%%F0%%9F%%91%%8D/@me",
             c);
    r->l[1] = &dc_react;
    snprintf(r->scope[1], sizeof r->scope[1], "%s %s", bot, c);
    r->nl = 2;
  } else if (x < 70) {
    const char *g = guilds[rnd(2)];
    r->method = "PATCH";
    snprintf(p, 96, "/api/v10/guilds/%s/members/555", g);
    r->l[1] = &dc_member;
    snprintf(r->scope[1], sizeof r->scope[1], "%s %s", bot, g);
    r->nl = 2;
  } else {
    r->method = rnd(2) ? "GET" : "DELETE";
    snprintf(p, 96, "/api/v10/users/@me");
  }
  r->cost[1] = 1;
  r->route = p;
}

static void discord(const char *store, unsigned flags) {
  published(SLUICE_ETC "/discord.conf", store, flags, dc_gen, 8000,
            10 * MS, dc_all, 4);
}

/* Invalid requests: the service reports a 401, 403 or 429 back (the
** `result` attribute); the 10,000th in ten minutes bans the bot for an
** hour, and requests under every limit are refused meanwhile. */
static void discord_invalid(const char *store, unsigned flags) {
  fixture f;
  sluice_attr a[2] = {{"bot", "bot-9"}, {"result", "429"}};
  sluice_request q;
  sluice_decision d;
  int i, rc = fx_open_file(&f, SLUICE_ETC "/discord.conf", store, flags);
  cr_assert_eq(rc, SLUICE_OK, "%s: %s", store, sluice_strerror(rc));
  memset(&q, 0, sizeof q);
  q.method = "POST";
  q.route = "/api/v10/channels/1001/messages";
  q.attrs = a;
  for (i = 0; i < 9999; i++) {
    a[1].value = i % 3 == 0 ? "401" : i % 3 == 1 ? "403" : "429";
    q.nattrs = 2;
    cr_assert_eq(sluice_policy_decide(f.pol, 1, &q, &d, NULL), SLUICE_OK);
    cr_assert(!(d.flags & SLUICE_DECISION_TRIPPED), "report %d tripped", i);
    if (i % 1000 == 999)
      sluice_clock_advance(f.clock, 50 * SEC);
  }
  /* A 404 is no invalid request; a request is no report. */
  a[1].value = "404";
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &q, &d, NULL), SLUICE_OK);
  cr_assert(!(d.flags & SLUICE_DECISION_TRIPPED));
  q.nattrs = 1;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &q, &d, NULL), SLUICE_OK);
  cr_assert(d.allowed, "outcome %d", d.outcome);
  a[1].value = "401";
  q.nattrs = 2;
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &q, &d, NULL), SLUICE_OK);
  cr_assert(d.flags & SLUICE_DECISION_TRIPPED, "the 10,000th report");
  q.nattrs = 1;
  q.route = "/api/v10/users/@me";
  q.method = "GET";
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &q, &d, NULL), SLUICE_OK);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_BOXED);
  cr_assert_eq(d.retry_after_ns, 3600 * SEC);
  sluice_clock_advance(f.clock, 3600 * SEC);
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &q, &d, NULL), SLUICE_OK);
  cr_assert(d.allowed, "outcome %d after the ban", d.outcome);
  fx_close(&f);
}

/* ------------------------------------------------------------ Slack --- */

/* Per method per workspace per app: Tier 1 to 4 are 1, 20, 50 and 100 a
** minute; chat.postMessage 1 a second per channel. */
static const lim sl_t1 = {"tier1", FIXED, 1, 60 * SEC, 0};
static const lim sl_t2 = {"tier2", FIXED, 20, 60 * SEC, 0};
static const lim sl_t3 = {"tier3", FIXED, 50, 60 * SEC, 0};
static const lim sl_t4 = {"tier4", FIXED, 100, 60 * SEC, 0};
static const lim sl_post = {"post_message", GCRA, 1, SEC, 1};
static const lim *const sl_all[] = {&sl_t1, &sl_t2, &sl_t3, &sl_t4,
                                    &sl_post};

static void sl_gen(treq *r) {
  static const struct {
    const char *method;
    const lim *l;
    int weight;
  } m[] = {{"chat.postMessage", &sl_post, 15},
           {"rtm.connect", &sl_t1, 3},
           {"conversations.list", &sl_t2, 5},
           {"users.list", &sl_t2, 5},
           {"emoji.list", &sl_t2, 5}, /* not listed: Tier 2 */
           {"conversations.history", &sl_t3, 10},
           {"chat.update", &sl_t3, 10},
           {"reactions.add", &sl_t3, 7},
           {"users.info", &sl_t4, 40}};
  static const char *teams[] = {"T0001", "T0002"};
  static const char *apps[] = {"A0001", "A0002"};
  static const char *channels[] = {"C0001", "C0002"};
  static char path[8][64];
  static int pi;
  char *p = path[pi++ % 8];
  int x = (int)rnd(100), k = 0;
  const char *t = teams[rnd(10) < 8 ? 0 : 1], *a = apps[rnd(4) == 0];
  while (x >= m[k].weight) {
    x -= m[k].weight;
    k++;
  }
  snprintf(p, 64, "/api/%s", m[k].method);
  r->method = rnd(2) ? "GET" : "POST";
  r->route = p;
  r->attrs[0] = (sluice_attr){"team", t};
  r->attrs[1] = (sluice_attr){"app", a};
  r->nattrs = 2;
  r->nl = 1;
  r->l[0] = m[k].l;
  r->cost[0] = 1;
  if (m[k].l == &sl_post) {
    const char *c = channels[rnd(2)];
    r->attrs[2] = (sluice_attr){"channel", c};
    r->nattrs = 3;
    snprintf(r->scope[0], sizeof r->scope[0], "%s %s %s", t, a, c);
  } else {
    snprintf(r->scope[0], sizeof r->scope[0], "%s %s %s", t, a, p);
  }
}

static void slack(const char *store, unsigned flags) {
  published(SLUICE_ETC "/slack.conf", store, flags, sl_gen, 8000,
            100 * MS, sl_all, 5);
}

/* -------------------------------------------------------- Anthropic --- */

/* Tier 1, per organization and model class: 50 requests, 30,000 input
** and 8,000 output tokens a minute (Haiku 3.5: 50,000 and 10,000); output
** tokens are charged at max_tokens and settled to what was used. */
static const lim an_req = {"requests", GCRA, 50, 60 * SEC, 50};
static const lim an_in = {"input_tokens", GCRA, 30000, 60 * SEC, 30000};
static const lim an_in_h = {"input_tokens", GCRA, 50000, 60 * SEC, 50000};
static const lim an_out = {"output_tokens", GCRA, 8000, 60 * SEC, 8000};
static const lim an_out_h = {"output_tokens", GCRA, 10000, 60 * SEC, 10000};
static const lim *const an_all[] = {&an_req, &an_in, &an_in_h, &an_out,
                                    &an_out_h};

static void an_gen(treq *r) {
  static const char *orgs[] = {"org-1", "org-2", "s-org-1", "s-org-2"};
  static const char *models[] = {"claude-opus-4", "claude-sonnet-4",
                                 "claude-haiku-3-5"};
  static char in[256][16], out[256][16];
  static int ti;
  /* Phases of 600 requests: short requests (the request limit binds),
  ** long prompts (input tokens), long answers (output tokens). */
  int phase = ti / 600 % 3, mi = (int)rnd(3), k;
  const char *o = orgs[(rnd(5) == 0) + 2 * settling];
  int64_t ti_ = phase == 1 ? 4000 + (int64_t)rnd(26001) : 1 + (int64_t)rnd(200);
  int64_t to = phase == 2 ? 800 + (int64_t)rnd(7201) : 1 + (int64_t)rnd(100);
  ti++;
  snprintf(in[ti % 256], sizeof in[0], "%lld", (long long)ti_);
  snprintf(out[ti % 256], sizeof out[0], "%lld", (long long)to);
  r->method = "POST";
  r->route = "/v1/messages";
  r->attrs[0] = (sluice_attr){"org", o};
  r->attrs[1] = (sluice_attr){"model", models[mi]};
  r->attrs[2] = (sluice_attr){"input_tokens", in[ti % 256]};
  r->attrs[3] = (sluice_attr){"output_tokens", out[ti % 256]};
  r->nattrs = 4;
  r->nl = 3;
  r->l[0] = &an_req;
  r->l[1] = mi == 2 ? &an_in_h : &an_in;
  r->l[2] = mi == 2 ? &an_out_h : &an_out;
  r->cost[0] = 1;
  r->cost[1] = ti_;
  r->cost[2] = to;
  r->settles[2] = 1; /* only the output tokens settle */
  for (k = 0; k < 3; k++)
    snprintf(r->scope[k], sizeof r->scope[k], "%s %s", o, models[mi]);
}

static void anthropic(const char *store, unsigned flags) {
  published(SLUICE_ETC "/anthropic.conf", store, flags, an_gen, 5400,
            400 * MS, an_all, 5);
}

static void anthropic_settle(const char *store, unsigned flags) {
  int denied[5] = {0};
  settling = 1;
  settle_attr = 3;
  settle_max = 8000;
  nsettled = 0;
  replay(SLUICE_ETC "/anthropic.conf", store, flags, an_gen, 5400,
         400 * MS, an_all, 5, denied);
  settling = 0;
  settle_max = 100000;
  cr_assert_gt(nsettled, 300, "the trace settled (%d)", nsettled);
  all_bound(an_all, 5, denied);
}

/* ---------------------------------------------------------- HubSpot --- */

/* Per private app 100 requests per 10 s (190 on Professional and
** Enterprise); per account 250,000 a day (625,000 Professional,
** 1,000,000 Enterprise).  The trace does not reach a daily figure (it
** would take 250,000 requests), but every admitted decision reports the
** daily limit's remaining, which the model checks against the figure of
** the account's subscription. */
static const lim hs_10s = {"ten_seconds", FIXED, 100, 10 * SEC, 0};
static const lim hs_10s_paid = {"ten_seconds", FIXED, 190, 10 * SEC, 0};
static const lim hs_day_free = {"daily", FIXED, 250000, 86400 * SEC, 0};
static const lim hs_day_pro = {"daily", FIXED, 625000, 86400 * SEC, 0};
static const lim hs_day_ent = {"daily", FIXED, 1000000, 86400 * SEC, 0};
static const lim *const hs_all[] = {&hs_10s, &hs_10s_paid};

static void hs_gen(treq *r) {
  static const char *accounts[] = {"portal-free", "portal-starter",
                                   "portal-pro", "portal-ent"};
  static const char *subs[] = {"free", "starter", "professional",
                               "enterprise"};
  static const lim *const day[] = {&hs_day_free, &hs_day_free, &hs_day_pro,
                                   &hs_day_ent};
  static const char *apps[] = {"app-1", "app-2"};
  uint64_t x = rnd(100);
  int s = x < 30 ? 0 : x < 40 ? 1 : x < 80 ? 2 : 3, a = (int)rnd(2);
  r->method = rnd(3) ? "GET" : "POST";
  r->route = "/crm/v3/objects/contacts";
  r->attrs[0] = (sluice_attr){"account", accounts[s]};
  r->attrs[1] = (sluice_attr){"app", apps[a]};
  r->attrs[2] = (sluice_attr){"subscription", subs[s]};
  r->nattrs = 3;
  r->nl = 2;
  r->l[0] = s < 2 ? &hs_10s : &hs_10s_paid;
  r->l[1] = day[s];
  r->cost[0] = r->cost[1] = 1;
  snprintf(r->scope[0], sizeof r->scope[0], "%s %s", accounts[s], apps[a]);
  snprintf(r->scope[1], sizeof r->scope[1], "%s", accounts[s]);
}

static void hubspot(const char *store, unsigned flags) {
  published(SLUICE_ETC "/hubspot.conf", store, flags, hs_gen, 8000,
            20 * MS, hs_all, 2);
}

/* ----------------------------------------------------------- Reddit --- */

/* 100 queries a minute per OAuth client id, averaged over 10 minutes. */
static const lim rd_client = {"oauth_client", FIXED, 1000, 600 * SEC, 0};
static const lim *const rd_all[] = {&rd_client};

static void rd_gen(treq *r) {
  static const char *clients[] = {"p-jHk2x8", "q9Lm0aZ"};
  static const char *routes[] = {"/r/all/hot", "/api/v1/me",
                                 "/r/redditdev/comments/13wsiks"};
  const char *c = clients[rnd(10) < 8 ? 0 : 1];
  r->method = rnd(5) ? "GET" : "POST";
  r->route = routes[rnd(3)];
  r->attrs[0] = (sluice_attr){"client", c};
  r->nattrs = 1;
  r->nl = 1;
  r->l[0] = &rd_client;
  r->cost[0] = 1;
  snprintf(r->scope[0], sizeof r->scope[0], "%s", c);
}

static void reddit(const char *store, unsigned flags) {
  published(SLUICE_ETC "/reddit.conf", store, flags, rd_gen, 6000,
            600 * MS, rd_all, 1);
}

/* ------------------------------------------------------------ stores --- */

typedef void (*policy_fn)(const char *store, unsigned flags);

static void on_shm(policy_fn fn) {
  char spec[96];
  snprintf(spec, sizeof spec, "shm:name=/sluice-published-%d;create=1",
           (int)getpid());
  fn(spec, SLUICE_OPEN_CREATE);
  snprintf(spec, sizeof spec, "/dev/shm/sluice-published-%d", (int)getpid());
  unlink(spec);
}

static void on_lmdb(policy_fn fn) {
  char dir[] = "/tmp/sluice-published-XXXXXX", spec[96];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(spec, sizeof spec, "lmdb:path=%s;sync=nosync", dir);
  fn(spec, SLUICE_OPEN_CREATE);
  cr_expect_eq(rmtree(dir), 0, "%s left behind", dir);
}

/* A Redis Cluster when the harness names one (tests/redis/harness.py;
** SLUICE_REDIS_STORE_EXTRA picks the engine), on the test's clock. */
static void on_redis(policy_fn fn) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  const char *extra = getenv("SLUICE_REDIS_STORE_EXTRA");
  char spec[512];
  if (!nodes || !nodes[0])
    cr_skip_test("SLUICE_REDIS_NODES unset");
  snprintf(spec, sizeof spec, "redis:nodes=%s;timeout_ms=2000%s%s", nodes,
           extra && extra[0] ? ";" : "", extra ? extra : "");
  fn(spec, SLUICE_OPEN_TESTCLOCK);
}

/* A declared bucket the store cannot decide exactly is refused at open,
** naming the limit (here: 200000 over a 60 s period on Redis). */
Test(policy_published, range_redis) {
  const char *nodes = getenv("SLUICE_REDIS_NODES");
  char spec[512], err[512];
  const char *path;
  static const char text[] =
      "attributes = [ \"org\" ];\n"
      "limits = { wide = { algorithm = \"gcra\"; scope = [ \"org\" ];\n"
      "  rate = 200000; period_ms = 60000; burst = 200000; }; };\n"
      "routes = ( { method = \"*\"; route = \"/*\"; limits = ( \"wide\" "
      "); } );\n";
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_limiter *store;
  sluice_policy *pol = NULL;
  int rc;
  if (!nodes || !nodes[0])
    cr_skip_test("SLUICE_REDIS_NODES unset");
  path = fx_write_conf(text);
  snprintf(spec, sizeof spec, "redis:nodes=%s;timeout_ms=2000", nodes);
  memset(&lo, 0, sizeof lo);
  lo.store = spec;
  cr_assert_eq(sluice_limiter_open(&lo, &store, NULL, 0), SLUICE_OK);
  memset(&po, 0, sizeof po);
  po.limiter = store;
  po.config_path = path;
  po.secret[0] = 1;
  po.errbuf = err;
  po.errlen = sizeof err;
  rc = sluice_policy_open(&po, &pol);
  unlink(path);
  cr_assert_eq(rc, SLUICE_ERANGE, "%s: %s", sluice_strerror(rc), err);
  cr_assert_not_null(strstr(err, "limits.wide: the store cannot decide it"),
                     "%s", err);
  sluice_limiter_close(store);
}

/* A shipped file's test on mem, shm, lmdb and (under the harness) a
** Redis Cluster. */
#define ON_EVERY_STORE(fn)                                                     \
  Test(policy_published, fn##_mem) { fn("mem", 0); }                           \
  Test(policy_published, fn##_shm) { on_shm(fn); }                             \
  Test(policy_published, fn##_lmdb) { on_lmdb(fn); }                           \
  Test(policy_published, fn##_redis) { on_redis(fn); }

ON_EVERY_STORE(github)
ON_EVERY_STORE(github_concurrency)
ON_EVERY_STORE(shopify)
ON_EVERY_STORE(llm)
ON_EVERY_STORE(llm_settle)
ON_EVERY_STORE(stripe)
ON_EVERY_STORE(cloudflare)
ON_EVERY_STORE(discord)
Test(policy_published, discord_invalid_mem) { discord_invalid("mem", 0); }
Test(policy_published, discord_invalid_shm) { on_shm(discord_invalid); }
ON_EVERY_STORE(slack)
ON_EVERY_STORE(anthropic)
ON_EVERY_STORE(anthropic_settle)
ON_EVERY_STORE(hubspot)
ON_EVERY_STORE(reddit)

/* The files load without warnings. */
Test(policy_published, files_load_clean) {
  static const char *files[] = {SLUICE_ETC "/github.conf",
                                SLUICE_ETC "/shopify.conf",
                                SLUICE_ETC "/llm-gateway.conf",
                                SLUICE_ETC "/stripe.conf",
                                SLUICE_ETC "/cloudflare.conf",
                                SLUICE_ETC "/discord.conf",
                                SLUICE_ETC "/slack.conf",
                                SLUICE_ETC "/anthropic.conf",
                                SLUICE_ETC "/hubspot.conf",
                                SLUICE_ETC "/reddit.conf"};
  char buf[512];
  size_t i;
  for (i = 0; i < sizeof files / sizeof files[0]; i++) {
    cr_assert_eq(cfg_warnings(files[i], buf, sizeof buf),
                 SLUICE_OK, "%s", buf);
    cr_assert_str_eq(buf, "", "%s", files[i]);
  }
}

/*
** sluice simulate SCENARIO: the spec's scenarios run through the whole
** policy layer on the in-memory backend with a virtual (manual) clock, so
** hours of traffic take well under a second and every run prints the same
** numbers.
**
** Each scenario is a set of actors (clients), each with the time of its next
** request; the loop always runs the actor due first, sets the clock to that
** time and lets it send one request through sluice_policy_decide().  The
** answer is rendered by the HTTP layer exactly as a service would send it,
** and clients read only those header strings (Retry-After,
** RateLimit-Remaining...), so a client's behaviour is what it would be over
** a real connection.  Random draws (Retry-After jitter, backoff jitter) come
** from seeded generators: runs are reproducible.
**
** The backend-outage scenario runs the "mem" store behind a small wrapper
** whose xApply returns SLUICE_ETIMEDOUT while the outage lasts: the policy
** sees what a timed-out Redis would give it, from the same vtable call.
*/
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_cmds.h"
#include "sim_plot.h"
#include "sluice.h"

#define S_NS INT64_C(1000000000)
#define MS_NS INT64_C(1000000)
/* 2026-10-14T14:00:00Z, the date of the spec's examples. */
#define T0 (INT64_C(1791986400) * S_NS)
#define MAX_ACTORS 128
#define NROWS (SLUICE_POLICY_TIERS_MAX + 1)

/* ------------------------------------------------- the failing store --- */

typedef struct fail_store {
  sluice_store base;
  sluice_store *inner;
  int rc; /* single-threaded: the simulation flips it between requests */
} fail_store;

static int fs_close(sluice_store *s) {
  fail_store *f = (fail_store *)s;
  if (f->inner) {
    if (f->inner->pMethods && f->inner->pMethods->xClose)
      f->inner->pMethods->xClose(f->inner);
    sluice_store_free(s, f->inner, (size_t)f->inner->pBackend->szStore);
  }
  return SLUICE_OK;
}

static int fs_apply(sluice_store *s, const sluice_op *op, int64_t now,
                    sluice_verdict *v) {
  fail_store *f = (fail_store *)s;
  if (f->rc)
    return sluice_store_seterr(s, f->rc, 0, "simulated outage");
  return f->inner->pMethods->xApply(f->inner, op, now, v);
}

static int fs_get(sluice_store *s, const sluice_key *k, int64_t now,
                  sluice_state *out, int64_t *exp) {
  fail_store *f = (fail_store *)s;
  return f->inner->pMethods->xGet(f->inner, k, now, out, exp);
}

static int fs_delete(sluice_store *s, const sluice_key *k) {
  fail_store *f = (fail_store *)s;
  return f->inner->pMethods->xDelete(f->inner, k);
}

#define FS_CTL_SET 300

static int fs_control(sluice_store *s, int op, void *arg) {
  fail_store *f = (fail_store *)s;
  if (op != FS_CTL_SET)
    return SLUICE_ENOTFOUND;
  f->rc = *(int *)arg;
  return SLUICE_OK;
}

static unsigned fs_caps(sluice_store *s) {
  (void)s;
  return 0;
}

static const sluice_store_methods fs_methods = {
    1, fs_close, fs_apply, fs_get, fs_delete, fs_control, fs_caps, NULL};

static int fs_open(const sluice_backend *b, const char *uri,
                   const sluice_store_config *cfg, sluice_store *s) {
  fail_store *f = (fail_store *)s;
  const sluice_backend *mem = sluice_backend_find("mem");
  (void)b;
  s->pMethods = &fs_methods;
  f->inner = sluice_store_malloc(s, (size_t)mem->szStore);
  if (!f->inner)
    return SLUICE_ENOMEM;
  memset(f->inner, 0, (size_t)mem->szStore);
  f->inner->pBackend = mem;
  f->inner->pAlloc = s->pAlloc;
  return mem->xOpen(mem, uri, cfg, f->inner);
}

static const sluice_backend fail_backend = {1, sizeof(fail_store), "mem",
                                            NULL, fs_open};

/* ---------------------------------------------------------- the sim --- */

typedef struct sim sim;
typedef struct actor actor;

struct actor {
  int64_t next_ns; /* INT64_MAX: finished */
  void (*act)(sim *, actor *);
  const char *name;
  int observed; /* its answers feed the plot's "points remaining" line */
  int attacker;  /* credential stuffing: counted as attacker / office user */
  /* client state, used as each actor needs */
  sluice_request rq;
  char ip[48], subject[64], ledger[32];
  int64_t period_ns, until_ns, n, sent, got429, strikes, boxed, left;
  int64_t attempt, seq, fail_every, n503, ndeg;
  int64_t pending_release_ns; /* a job whose lease to release */
  uint64_t lease_id;
  sluice_request lease_rq;
  char lease_ledger[32];
};

typedef struct tier_stats {
  uint64_t n, outcome[SLUICE_OUTCOME__COUNT], degraded, strikes;
} tier_stats;

/* A rendered answer, as the client sees it. */
typedef struct heard {
  int status;
  const char *retry_after, *remaining, *limit, *reset, *penalty, *date;
  size_t n;
  sluice_http_header h[SLUICE_HTTP_MAX_HEADERS];
  char buf[SLUICE_HTTP_HEADER_BUF];
} heard;

struct sim {
  const char *name;
  sluice_clock *clock;
  sluice_limiter *lim;
  sluice_policy *pol;
  sluice_http *http;
  sluice_backoff *backoff;
  uint64_t seed_http, seed_client;
  sluice_policy_config cfg;
  int nact;
  actor a[MAX_ACTORS];
  int64_t end_ns;
  /* outcome counters */
  tier_stats ts[NROWS];
  uint64_t trips[5][3];
  uint64_t events[SLUICE_EVENT__COUNT];
  uint64_t requests;
  /* the plot: what each series counts (enum ser_kind), and the drawing */
  int ser_kind[PLOT_MAX_SERIES];
  sim_plot plot;
  /* scenario-specific lines for the report */
  char notes[2048];
  size_t notes_len;
};

/* What a plot series counts. */
enum ser_kind {
  SER_ALLOWED = 1, /* allowed, not by the degraded limiter */
  SER_THROTTLED,   /* 429 from a bucket */
  SER_BOXED,       /* refused by a penalty box */
  SER_BOXED_L1,    /* the same, by level (1 and 2; 3 is SER_SUSPENDED) */
  SER_BOXED_L2,
  SER_SUSPENDED,   /* 403, suspended */
  SER_503,         /* failed closed */
  SER_DEGRADED,    /* allowed by the local degraded limiter */
  SER_ATT_CHECKED, /* an attacker's attempt that reached the secret check */
  SER_ATT_REFUSED, /* an attacker's attempt refused by a box or ban */
  SER_USER_OK,     /* an office user's login that reached the check */
  SER_USER_REFUSED /* an office user's login refused */
};

static void add_series(sim *s, int kind, const char *label,
                       const char *color) {
  sim_plot *p = &s->plot;
  if (p->nseries >= PLOT_MAX_SERIES)
    return;
  s->ser_kind[p->nseries] = kind;
  p->series[p->nseries].label = label;
  p->series[p->nseries].color = color;
  p->nseries++;
}

static void count(sim *s, int kind, int64_t t_ns) {
  int i;
  for (i = 0; i < s->plot.nseries; i++)
    if (s->ser_kind[i] == kind)
      sim_plot_count(&s->plot, i, t_ns - T0, 1);
}

static uint64_t splitmix(void *ud) {
  uint64_t *st = ud, z = (*st += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Events the plots show: a key's boxes as shaded spans, bans and the
** store failing or recovering as marked instants. */
static void plot_event(sim *s, const sluice_event *ev) {
  static const char *const box_color[3] = {"#e8743b", "#c03030", "#5b2a86"};
  char label[64];
  int64_t t = ev->now_ns - T0;
  if (ev->type == SLUICE_EVENT_BOX_TRIP && ev->scope == SLUICE_SCOPE_KEY &&
      ev->level >= 1 && ev->level <= 3) {
    if (ev->until_ns == SLUICE_FOREVER)
      snprintf(label, sizeof label, "level %d: suspended (403)", ev->level);
    else
      snprintf(label, sizeof label, "level %d box (%lld min)", ev->level,
               (long long)((ev->until_ns - ev->now_ns + 59 * S_NS) /
                           (60 * S_NS)));
    sim_plot_span(&s->plot, t,
                  ev->until_ns == SLUICE_FOREVER ? s->end_ns - T0
                                                 : ev->until_ns - T0,
                  box_color[ev->level - 1], label);
  } else if (ev->type == SLUICE_EVENT_IP_BAN) {
    snprintf(label, sizeof label, "IP ban: %s",
             ev->request && ev->request->client_ip ? ev->request->client_ip
                                                   : "?");
    sim_plot_mark(&s->plot, t, "#c03030", label);
  } else if (ev->type == SLUICE_EVENT_DEGRADED_ON) {
    sim_plot_mark(&s->plot, t, "#555555", "store failing: degraded on");
  } else if (ev->type == SLUICE_EVENT_DEGRADED_OFF) {
    sim_plot_mark(&s->plot, t, "#555555", "store answers: degraded off");
  }
}

static void on_event(void *ud, const sluice_event *ev) {
  sim *s = ud;
  if (ev->type > 0 && ev->type < SLUICE_EVENT__COUNT)
    s->events[ev->type]++;
  if (ev->type == SLUICE_EVENT_BOX_TRIP && ev->scope >= 1 && ev->scope <= 4 &&
      ev->level >= 1 && ev->level <= 3)
    s->trips[ev->scope][ev->level - 1]++;
  plot_event(s, ev);
}

static void note(sim *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void note(sim *s, const char *fmt, ...) {
  va_list ap;
  int n;
  if (s->notes_len >= sizeof s->notes)
    return;
  va_start(ap, fmt);
  n = vsnprintf(s->notes + s->notes_len, sizeof s->notes - s->notes_len, fmt,
                ap);
  va_end(ap);
  if (n > 0)
    s->notes_len += (size_t)n;
  if (s->notes_len > sizeof s->notes)
    s->notes_len = sizeof s->notes;
}

static int sim_open(sim *s, const sluice_policy_config *cfg, int failing,
                    int64_t dur_ns) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_http_options ho;
  sluice_backoff_options bo;
  char err[256];
  int rc;

  s->seed_http = 20261014;
  s->seed_client = 42;
  s->end_ns = T0 + dur_ns;
  s->plot.dur_ns = dur_ns;
  s->plot.col_ns = sim_plot_col_ns(dur_ns);
  s->plot.ncol = (int)((dur_ns + s->plot.col_ns - 1) / s->plot.col_ns);
  if (s->plot.ncol > PLOT_COLS)
    s->plot.ncol = PLOT_COLS;
  if ((rc = sluice_clock_manual(T0, &s->clock)) != SLUICE_OK)
    return rc;
  memset(&lo, 0, sizeof lo);
  lo.store = "mem";
  lo.clock = s->clock;
  if (failing)
    lo.backend = &fail_backend;
  if ((rc = sluice_limiter_open2(&lo, &s->lim, err, sizeof err)) != SLUICE_OK) {
    fprintf(stderr, "sluice simulate: cannot open the mem store: %s %s\n",
            sluice_strerror(rc), err);
    return rc;
  }
  memset(&po, 0, sizeof po);
  po.limiter = s->lim;
  po.config = cfg;
  memset(po.secret, 0x5c, sizeof po.secret);
  po.on_event = on_event;
  po.userdata = s;
  po.errbuf = err;
  po.errlen = sizeof err;
  if ((rc = sluice_policy_open(&po, &s->pol)) != SLUICE_OK) {
    fprintf(stderr, "sluice simulate: policy: %s: %s\n", sluice_strerror(rc),
            err);
    return rc;
  }
  s->cfg = *sluice_policy_config_get(s->pol);
  memset(&ho, 0, sizeof ho);
  ho.problem_base = "https://api.example.com/errors/";
  ho.flags = SLUICE_HTTP_DATE_HEADER;
  ho.rand = splitmix;
  ho.rand_ud = &s->seed_http;
  if ((rc = sluice_http_open(&ho, &s->http)) != SLUICE_OK)
    return rc;
  memset(&bo, 0, sizeof bo);
  bo.rand = splitmix;
  bo.rand_ud = &s->seed_client;
  bo.max_attempts = 1000; /* batch jobs keep going while told to retry */
  return sluice_backoff_open(&bo, &s->backoff);
}

static void sim_close(sim *s) {
  sluice_backoff_close(s->backoff);
  sluice_http_close(s->http);
  sluice_policy_close(s->pol);
  sluice_limiter_close(s->lim);
  sluice_clock_free(s->clock);
}

static int64_t now_ns(sim *s) { return sluice_clock_now(s->clock); }

static int tier_row(sim *s, const char *tier) {
  int i;
  if (!tier || !tier[0])
    return SLUICE_POLICY_TIERS_MAX;
  for (i = 0; i < s->cfg.ntiers; i++)
    if (!strcmp(s->cfg.tiers[i].name, tier))
      return i;
  return SLUICE_POLICY_TIERS_MAX;
}

static const char *find_hdr(const heard *h, const char *name) {
  size_t i;
  for (i = 0; i < h->n; i++)
    if (!strcmp(h->h[i].name, name))
      return h->h[i].value;
  return NULL;
}

static int64_t hdr_int(const char *v, int64_t dflt) {
  int64_t x;
  if (!v || sluice_http_parse_uint(v, strlen(v), &x) != SLUICE_OK)
    return dflt;
  return x;
}

/* Decide one request and record it; fills *h with the answer's headers. */
static sluice_decision send(sim *s, actor *a, const sluice_request *rq,
                            heard *h) {
  sluice_decision d;
  sluice_http_facts f;
  sluice_http_answer ans;
  int rc = sluice_policy_decide(s->pol, rq, &d);
  int row;
  int64_t t = now_ns(s);
  if (rc != SLUICE_OK) {
    /* The scenarios only build valid requests: this is a bug. */
    fprintf(stderr, "sluice simulate: %s: decide: %s (field %s)\n", s->name,
            sluice_strerror(rc), d.invalid_field ? d.invalid_field : "-");
    exit(CLI_RUNTIME);
  }
  s->requests++;
  row = tier_row(s, d.tier);
  s->ts[row].n++;
  s->ts[row].outcome[d.outcome]++;
  if (d.flags & SLUICE_DECISION_DEGRADED)
    s->ts[row].degraded++;
  if (d.flags & SLUICE_DECISION_STRIKE) {
    s->ts[row].strikes++;
    a->strikes++;
  }
  if (a->observed && d.binding != SLUICE_BINDING_NONE &&
      d.binding != SLUICE_BINDING_AUTH) {
    sim_plot_line(&s->plot, t - T0, d.remaining);
    if (d.limit > s->plot.line_max)
      s->plot.line_max = d.limit;
  } else if (a->observed && (d.outcome == SLUICE_OUTCOME_BOXED ||
                             d.outcome == SLUICE_OUTCOME_SUSPENDED)) {
    sim_plot_line(&s->plot, t - T0, 0);
  }
  if (d.allowed) {
    count(s, d.flags & SLUICE_DECISION_DEGRADED ? SER_DEGRADED : SER_ALLOWED,
          t);
  } else if (d.outcome == SLUICE_OUTCOME_THROTTLED) {
    count(s, SER_THROTTLED, t);
  } else if (d.outcome == SLUICE_OUTCOME_BOXED) {
    count(s, SER_BOXED, t);
    count(s, d.penalty_level == 1 ? SER_BOXED_L1 : SER_BOXED_L2, t);
  } else if (d.outcome == SLUICE_OUTCOME_SUSPENDED) {
    count(s, SER_SUSPENDED, t);
  }
  if (d.verdict_status == 503)
    count(s, SER_503, t);
  a->sent++;
  if (d.verdict_status == 429)
    a->got429++;
  if (d.outcome == SLUICE_OUTCOME_BOXED || d.outcome == SLUICE_OUTCOME_SUSPENDED)
    a->boxed++;
  if (d.verdict_status == 503)
    a->n503++;
  if (d.flags & SLUICE_DECISION_DEGRADED)
    a->ndeg++;
  memset(h, 0, sizeof *h);
  if (sluice_decision_http_facts(&d, rq, "req_sim", &f) != SLUICE_OK ||
      sluice_http_answer_make(s->http, &f, t, &ans) != SLUICE_OK ||
      sluice_http_answer_headers(s->http, &ans, h->h, SLUICE_HTTP_MAX_HEADERS,
                                 &h->n, h->buf, sizeof h->buf,
                                 NULL) != SLUICE_OK) {
    fprintf(stderr, "sluice simulate: %s: cannot render an answer\n",
            s->name);
    exit(CLI_RUNTIME);
  }
  h->status = ans.status;
  h->retry_after = find_hdr(h, "Retry-After");
  h->remaining = find_hdr(h, "RateLimit-Remaining");
  h->limit = find_hdr(h, "RateLimit-Limit");
  h->reset = find_hdr(h, "RateLimit-Reset");
  h->penalty = find_hdr(h, "X-Penalty-Box-Status");
  h->date = find_hdr(h, "Date");
  return d;
}

static actor *add_actor(sim *s, const char *name, void (*act)(sim *, actor *),
                        int64_t start_ns) {
  actor *a;
  if (s->nact >= MAX_ACTORS) {
    fprintf(stderr, "sluice simulate: too many actors\n");
    exit(CLI_RUNTIME);
  }
  a = &s->a[s->nact++];
  memset(a, 0, sizeof *a);
  a->name = name;
  a->act = act;
  a->next_ns = T0 + start_ns;
  return a;
}

/* Hooks run between requests at fixed times (the outage switch). */
typedef struct hook {
  int64_t at_ns;
  void (*fn)(sim *, void *);
  void *arg;
  int done;
} hook;

static void sim_run(sim *s, hook *hooks, int nhooks) {
  for (;;) {
    actor *next = NULL;
    int i;
    for (i = 0; i < s->nact; i++)
      if (s->a[i].next_ns < s->end_ns &&
          (!next || s->a[i].next_ns < next->next_ns))
        next = &s->a[i];
    if (!next)
      break;
    for (i = 0; i < nhooks; i++)
      if (!hooks[i].done && hooks[i].at_ns <= next->next_ns) {
        sluice_clock_set(s->clock, hooks[i].at_ns);
        hooks[i].fn(s, hooks[i].arg);
        hooks[i].done = 1;
      }
    sluice_clock_set(s->clock, next->next_ns);
    next->act(s, next);
  }
  sluice_clock_set(s->clock, s->end_ns);
}

/* ------------------------------------------------------- scenarios --- */

/* A client that honours Retry-After: after a denial it waits what it was
** told, otherwise it sends every period. */
static void act_honest(sim *s, actor *a) {
  heard h;
  sluice_decision d = send(s, a, &a->rq, &h);
  int64_t wait = a->period_ns;
  (void)d;
  if (h.status != 200 && h.retry_after) {
    int64_t ms;
    if (sluice_backoff_parse_retry_after(h.retry_after,
                                         strlen(h.retry_after), h.date,
                                         h.date ? strlen(h.date) : 0,
                                         &ms) == SLUICE_OK &&
        ms * MS_NS > wait)
      wait = ms * MS_NS;
  }
  a->next_ns = now_ns(s) + wait;
  if (a->until_ns && a->next_ns >= a->until_ns)
    a->next_ns = INT64_MAX;
}

/* A client that ignores everything it is told. */
static void act_ignorer(sim *s, actor *a) {
  heard h;
  send(s, a, &a->rq, &h);
  a->next_ns = now_ns(s) + a->period_ns;
}

static sluice_request std_rq(const char *tenant, const char *key,
                             const char *tier, const char *method,
                             const char *route) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.tenant_id = tenant;
  r.api_key_id = key;
  r.tier = tier;
  r.method = method;
  r.route = route;
  r.client_ip = "192.0.2.10";
  return r;
}

/* A key of the growth tenant: 5 requests/s in the day, 100 requests/s
** during the end-of-day batch (600-720 s); honours Retry-After. */
static void act_growth_key(sim *s, actor *a) {
  int64_t t = now_ns(s) - T0;
  int batch = t >= 600 * S_NS && t < 720 * S_NS;
  a->rq.method = batch ? "POST" : "GET";
  a->period_ns = batch ? 10 * MS_NS : 200 * MS_NS;
  act_honest(s, a);
  /* the batch starts on time even after a slow daytime period */
  if (!batch && a->next_ns > T0 + 600 * S_NS && t < 600 * S_NS)
    a->next_ns = T0 + 600 * S_NS + (a - s->a) * MS_NS;
}

static void scn_growth_batch(sim *s) {
  /* Daytime: three keys of one growth tenant at 5 requests/s each for ten
  ** minutes; then the end-of-day batch: each key at 100 requests/s for two
  ** minutes, honouring Retry-After; then back to daytime traffic. */
  static const char *keys[3] = {"key-erp", "key-billing", "key-payouts"};
  int i;
  s->plot.line_label = "points remaining (key-erp's answers)";
  add_series(s, SER_ALLOWED, "allowed, 3 keys", "#9cc59a");
  add_series(s, SER_THROTTLED, "429 throttled", "#d62728");
  add_series(s, SER_BOXED, "boxed", "#5b2a86");
  sim_plot_span(&s->plot, 600 * S_NS, 720 * S_NS, "#b8860b",
                "end-of-day batch: 3 keys x 100 req/s");
  for (i = 0; i < 3; i++) {
    actor *k = add_actor(s, keys[i], act_growth_key, i * 7 * MS_NS);
    k->rq = std_rq("acme", keys[i], "growth", "GET",
                   "/v1/ledgers/main/entries");
    k->observed = i == 0;
  }
  sim_run(s, NULL, 0);
  {
    int64_t sent = 0, thr = 0, strikes = 0;
    for (i = 0; i < s->nact; i++) {
      sent += s->a[i].sent;
      thr += s->a[i].got429;
      strikes += s->a[i].strikes;
    }
    note(s, "batch window 600-720 s: 3 keys x 100 requests/s, honouring "
            "Retry-After\n");
    note(s, "the tenant bucket (3000 burst, 50/s) absorbs the first seconds "
            "of the spike, then binds\n");
    note(s, "requests sent %" PRId64 ", 429s %" PRId64 ", strikes %" PRId64
            " (clients that honour Retry-After are never struck)\n",
         sent, thr, strikes);
    snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
             "%" PRId64 " requests, %" PRId64 " answered 429, %" PRId64
             " strikes, no box: the tenant bucket binds, clients wait",
             sent, thr, strikes);
  }
}

static void scn_retry_ignorer(sim *s) {
  /* A sandbox key hammering at 20 requests/s, ignoring Retry-After and the
  ** box; a second key of the same tenant polls politely once a second. */
  actor *bad = add_actor(s, "key-hammer", act_ignorer, 0);
  actor *good = add_actor(s, "key-polite", act_honest, 3 * MS_NS);
  s->plot.line_label = "points remaining (key-hammer)";
  add_series(s, SER_THROTTLED, "429 throttled (strikes)", "#e6b800");
  add_series(s, SER_BOXED_L1, "429 boxed, level 1", "#e8743b");
  add_series(s, SER_BOXED_L2, "429 boxed, level 2", "#c03030");
  add_series(s, SER_SUSPENDED, "403 suspended", "#5b2a86");
  bad->rq = std_rq("sandbox-co", "key-hammer", "sandbox", "GET",
                   "/v1/ledgers/l1/entries");
  bad->period_ns = 50 * MS_NS;
  bad->observed = 1;
  good->rq = std_rq("sandbox-co", "key-polite", "sandbox", "GET",
                    "/v1/ledgers/l1/entries");
  good->period_ns = S_NS;
  sim_run(s, NULL, 0);
  {
    sluice_decision d;
    heard h;
    sluice_clock_set(s->clock, s->end_ns);
    d = send(s, bad, &bad->rq, &h);
    note(s, "key-hammer: sent %" PRId64 ", 429s %" PRId64 ", strikes %" PRId64
            ", boxed or suspended %" PRId64 "\n",
         bad->sent, bad->got429, bad->strikes, bad->boxed);
    note(s, "key-hammer at the end: %s, HTTP %d, penalty level %d\n",
         sluice_outcome_name(d.outcome), d.verdict_status, d.penalty_level);
    note(s, "key-polite (same tenant): sent %" PRId64 ", 429s %" PRId64
            ", strikes %" PRId64 " (a box is per key)\n",
         good->sent, good->got429, good->strikes);
    snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
             "key-hammer: %" PRId64 " strikes, boxed 5 min, then 60 min, "
             "then suspended (%s); key-polite: %" PRId64 " 429s",
             bad->strikes, d.verdict_status == 403 ? "403" : "not 403",
             good->got429);
  }
}

/* The paced batch client of spec section 7: paces on RateLimit-Remaining
** with sluice_pace_interval() and, should it be refused anyway, obeys the
** backoff planner. */
static void act_paced(sim *s, actor *a) {
  heard h;
  sluice_decision d;
  if (a->left == 0) {
    a->next_ns = INT64_MAX;
    return;
  }
  d = send(s, a, &a->rq, &h);
  (void)d;
  if (h.status == 200) {
    sluice_pace_input pi;
    int64_t iv = 0;
    a->left--;
    a->attempt = 0;
    memset(&pi, 0, sizeof pi);
    pi.limit = hdr_int(h.limit, 0);
    pi.remaining = hdr_int(h.remaining, 0);
    pi.reset_ms = hdr_int(h.reset, 0) * 1000;
    pi.cost = 1;
    pi.reserve = pi.limit / 10;
    if (pi.limit < 1 || sluice_pace_interval(&pi, &iv) != SLUICE_OK)
      iv = 1000;
    a->next_ns = now_ns(s) + (iv > 0 ? iv : 1) * MS_NS;
    if (a->left == 0)
      a->until_ns = now_ns(s); /* finished at */
  } else {
    sluice_backoff_input in;
    sluice_backoff_plan p;
    memset(&in, 0, sizeof in);
    in.attempt = (int)++a->attempt;
    in.status = h.status;
    in.flags = SLUICE_REQ_IDEMPOTENCY_KEY;
    in.retry_after = h.retry_after;
    in.date = h.date;
    in.penalty_box = h.penalty;
    in.remaining = h.remaining;
    in.now_ns = now_ns(s) - T0;
    if (sluice_backoff_plan_next(s->backoff, &in, &p) != SLUICE_OK ||
        p.action == SLUICE_BACKOFF_STOP) {
      a->next_ns = INT64_MAX;
      return;
    }
    a->next_ns = now_ns(s) + p.wait_ms * MS_NS;
  }
}

static void scn_batch_backoff(sim *s) {
  /* 20000 entries posted by one growth key (25 points/s, burst 1500). */
  actor *a = add_actor(s, "key-batch", act_paced, 0);
  a->rq = std_rq("ledgerco", "key-batch", "growth", "POST",
                 "/v1/ledgers/main/entries");
  a->left = 20000;
  a->observed = 1;
  s->plot.line_label = "points remaining (key-batch)";
  add_series(s, SER_ALLOWED, "201 posted", "#9cc59a");
  add_series(s, SER_THROTTLED, "429 throttled", "#d62728");
  add_series(s, SER_BOXED, "boxed", "#5b2a86");
  sim_run(s, NULL, 0);
  {
    int64_t took = (a->left == 0 ? a->until_ns : s->end_ns) - T0;
    int64_t ideal = (20000 - 1500) / 25;
    note(s, "entries posted %" PRId64 " of 20000 in %" PRId64
            " s of virtual time (the bucket allows %" PRId64 " s)\n",
         20000 - a->left, took / S_NS, ideal);
    note(s, "requests sent %" PRId64 ", 429s %" PRId64 ", strikes %" PRId64
            "\n",
         a->sent, a->got429, a->strikes);
    if (a->left == 0)
      sim_plot_mark(&s->plot, took, "#2a7a2a", "all 20000 entries posted");
    snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
             "%" PRId64 " of 20000 entries in %" PRId64 " s (the bucket "
             "allows %" PRId64 " s), %" PRId64 " 429s, %" PRId64 " strikes",
             20000 - a->left, took / S_NS, ideal, a->got429, a->strikes);
  }
}

/* Credential stuffing.  Attackers spray distinct subjects with bad secrets
** from one IP each; office users log in from their shared NAT address and
** mistype now and then. */
static void act_auth(sim *s, actor *a) {
  heard h;
  sluice_decision d;
  sluice_request rq;
  char subject[64];
  int fail;
  memset(&rq, 0, sizeof rq);
  rq.method = "POST";
  rq.route = "/v1/auth/token";
  rq.client_ip = a->ip;
  if (a->subject[0]) { /* a user: fails one attempt in fail_every */
    rq.auth_subject = a->subject;
    fail = a->fail_every && a->seq % a->fail_every == a->fail_every - 1;
  } else { /* an attacker: a new subject every time */
    snprintf(subject, sizeof subject, "user%05" PRId64 "@victim.example",
             (a->seq * 7919 + a->n) % 100000);
    rq.auth_subject = subject;
    fail = 1;
  }
  a->seq++;
  /* Box check before verifying, then the result (docs/policy.md). */
  rq.auth_result = SLUICE_AUTH_PENDING;
  d = send(s, a, &rq, &h);
  if (a->attacker)
    count(s, d.verdict_status == 200 ? SER_ATT_CHECKED : SER_ATT_REFUSED,
          now_ns(s));
  else
    count(s, d.verdict_status == 200 ? SER_USER_OK : SER_USER_REFUSED,
          now_ns(s));
  if (d.verdict_status == 200) {
    a->sent--; /* one attempt, two calls: count it once */
    rq.auth_result = fail ? SLUICE_AUTH_BAD_SECRET : SLUICE_AUTH_OK;
    send(s, a, &rq, &h);
  }
  a->next_ns = now_ns(s) + a->period_ns;
}

static void scn_credential_stuffing(sim *s) {
  int i;
  add_series(s, SER_USER_OK, "office logins checked", "#59a14f");
  add_series(s, SER_USER_REFUSED, "office logins refused", "#000000");
  add_series(s, SER_ATT_CHECKED, "attacker attempts checked", "#b0a8a4");
  add_series(s, SER_ATT_REFUSED, "attacker attempts refused (ban)", "#d62728");
  sim_plot_span(&s->plot, 120 * S_NS, s->end_ns - T0, "#666666",
                "attack: 3 IPs x 2 attempts/s, a new subject each");
  for (i = 0; i < 3; i++) {
    actor *a = add_actor(s, "attacker", act_auth, 120 * S_NS + i * MS_NS);
    snprintf(a->ip, sizeof a->ip, "203.0.113.%d", 10 + i);
    a->attacker = 1;
    a->period_ns = 500 * MS_NS; /* 2 attempts/s */
    a->n = i * 31;
  }
  for (i = 0; i < 40; i++) {
    actor *u = add_actor(s, "user", act_auth, i * 1500 * MS_NS);
    snprintf(u->ip, sizeof u->ip, "198.51.100.7");
    snprintf(u->subject, sizeof u->subject, "employee%02d@acme.example", i);
    u->period_ns = 60 * S_NS;
    u->fail_every = 10;
  }
  sim_run(s, NULL, 0);
  {
    int64_t users_sent = 0, users_refused = 0, att = 0, att_refused = 0;
    for (i = 0; i < s->nact; i++) {
      if (s->a[i].subject[0]) {
        users_sent += s->a[i].sent;
        users_refused += s->a[i].boxed;
      } else {
        att += s->a[i].sent;
        att_refused += s->a[i].boxed;
      }
    }
    note(s, "auth.ip_failures raised to %" PRId64
            " (an office behind NAT): the 500-failures-across-50-subjects "
            "signature is what catches the attack\n",
         s->cfg.auth_ip_failures);
    note(s, "attackers (3 IPs, 2 attempts/s, distinct subjects): %" PRId64
            " attempts, %" PRId64 " refused by a box or ban\n",
         att, att_refused);
    note(s, "stuffing signatures %" PRIu64 ", IP bans (level 3) %" PRIu64 "\n",
         s->events[SLUICE_EVENT_STUFFING], s->events[SLUICE_EVENT_IP_BAN]);
    note(s, "office users (40, one NAT address, 1 in 10 mistyped): %" PRId64
            " attempts, %" PRId64 " refused\n",
         users_sent, users_refused);
    snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
             "%" PRIu64 " attacking IPs banned by the stuffing signature; "
             "office users behind one NAT: %" PRId64 " of %" PRId64
             " logins refused",
             s->events[SLUICE_EVENT_IP_BAN], users_refused, users_sent);
  }
}

/* Backend outage: a growth tenant's mixed traffic while the store times
** out from 120 s to 240 s. */
static void act_reconcile(sim *s, actor *a) {
  heard h;
  sluice_decision d;
  sluice_request rq = a->rq;
  if (a->lease_id && now_ns(s) >= a->pending_release_ns) {
    sluice_policy_release_lease(s->pol, &a->lease_rq, a->lease_id);
    a->lease_id = 0;
  }
  snprintf(a->ledger, sizeof a->ledger, "ledger-%" PRId64, a->seq++ % 4);
  rq.ledger_id = a->ledger;
  d = send(s, a, &rq, &h);
  if (d.allowed && d.lease_id) {
    /* The job runs 5 s; its lease is released in the finally path. */
    if (a->lease_id)
      sluice_policy_release_lease(s->pol, &a->lease_rq, a->lease_id);
    a->lease_id = d.lease_id;
    a->lease_rq = rq;
    memcpy(a->lease_ledger, a->ledger, sizeof a->ledger);
    a->lease_rq.ledger_id = a->lease_ledger;
    a->pending_release_ns = now_ns(s) + 5 * S_NS;
  }
  a->next_ns = now_ns(s) + a->period_ns;
}

static void set_fail(sim *s, void *arg) {
  int rc = *(int *)arg;
  sluice_limiter_control(s->lim, FS_CTL_SET, &rc);
}

static void act_outage_std(sim *s, actor *a) {
  act_honest(s, a);
}

static void scn_backend_outage(sim *s) {
  static int timeout = SLUICE_ETIMEDOUT, heal = 0;
  hook hooks[2] = {{T0 + 120 * S_NS, set_fail, &timeout, 0},
                   {T0 + 240 * S_NS, set_fail, &heal, 0}};
  actor *std1 = add_actor(s, "key-app", act_outage_std, 0);
  actor *std2 = add_actor(s, "key-sync", act_outage_std, 5 * MS_NS);
  actor *rec = add_actor(s, "key-app", act_reconcile, 11 * MS_NS);
  actor *auth = add_actor(s, "token", act_auth, 13 * MS_NS);
  s->plot.line_label = "points remaining (key-app)";
  add_series(s, SER_ALLOWED, "allowed by the store", "#9cc59a");
  add_series(s, SER_DEGRADED, "allowed by the local degraded limiter",
             "#4e9fd1");
  add_series(s, SER_THROTTLED, "429", "#d62728");
  add_series(s, SER_503, "503 failed closed", "#ff7f0e");
  sim_plot_span(&s->plot, 120 * S_NS, 240 * S_NS, "#555555",
                "store times out (120-240 s)");
  std1->rq = std_rq("acme", "key-app", "growth", "GET",
                    "/v1/ledgers/main/entries");
  std1->period_ns = 100 * MS_NS;
  std1->observed = 1;
  std2->rq = std_rq("acme", "key-sync", "growth", "GET",
                    "/v1/ledgers/main/entries");
  std2->period_ns = 100 * MS_NS;
  rec->rq = std_rq("acme", "key-app", "growth", "POST",
                   "/v1/ledgers/reconcile");
  rec->period_ns = 15 * S_NS;
  snprintf(auth->ip, sizeof auth->ip, "192.0.2.10");
  snprintf(auth->subject, sizeof auth->subject, "acme-service");
  auth->period_ns = 10 * S_NS;
  sim_run(s, hooks, 2);
  note(s, "store times out (SLUICE_ETIMEDOUT) from 120 s to 240 s\n");
  note(s, "reconcile (every 15 s): sent %" PRId64 ", 503 fail-closed %" PRId64
          "\n", rec->sent, rec->n503);
  note(s, "auth token (every 10 s): sent %" PRId64 ", 503 fail-closed %" PRId64
          "\n", auth->sent, auth->n503);
  note(s, "standard GETs (2 keys, 10/s each): sent %" PRId64 ", degraded %"
          PRId64 ", 429s %" PRId64 ", 503s %" PRId64 "\n",
       std1->sent + std2->sent, std1->ndeg + std2->ndeg,
       std1->got429 + std2->got429, std1->n503 + std2->n503);
  note(s, "degraded decisions (local limiter at %" PRId64
          "%% of the tier rates): %" PRIu64 "\n",
       s->cfg.degraded_percent, s->ts[tier_row(s, "growth")].degraded);
  note(s, "events: degraded_on %" PRIu64 ", degraded_off %" PRIu64 "\n",
       s->events[SLUICE_EVENT_DEGRADED_ON],
       s->events[SLUICE_EVENT_DEGRADED_OFF]);
  snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
           "during the outage: reconcile and auth fail closed (%" PRId64
           " 503s), GETs run on the local limiter (%" PRId64 " degraded)",
           rec->n503 + auth->n503, std1->ndeg + std2->ndeg);
}

/* ---------------------------------------------------------- report --- */

static void report(sim *s, FILE *f, double wall_s) {
  static const char *cols[SLUICE_OUTCOME__COUNT] = {
      "allowed",     "throttled", "boxed",      "suspended",
      "concurrency", "conflict",  "export_cap", "unavailable"};
  int i, o;
  fprintf(f, "virtual time: %" PRId64 " s, decisions: %" PRIu64
             ", wall time: %.2f s\n\n",
          (s->end_ns - T0) / S_NS, s->requests, wall_s);
  fprintf(f, "%-11s %9s", "tier", "requests");
  for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
    fprintf(f, " %*s", (int)strlen(cols[o]) > 9 ? (int)strlen(cols[o]) : 9,
            cols[o]);
  fprintf(f, " %9s %9s\n", "degraded", "strikes");
  for (i = 0; i < NROWS; i++) {
    const char *name =
        i < s->cfg.ntiers ? s->cfg.tiers[i].name : "(auth)";
    if (!s->ts[i].n)
      continue;
    fprintf(f, "%-11s %9" PRIu64, name, s->ts[i].n);
    for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
      fprintf(f, " %*" PRIu64,
              (int)strlen(cols[o]) > 9 ? (int)strlen(cols[o]) : 9,
              s->ts[i].outcome[o]);
    fprintf(f, " %9" PRIu64 " %9" PRIu64 "\n", s->ts[i].degraded,
            s->ts[i].strikes);
  }
  fprintf(f, "\nbox trips     level 1   level 2   level 3\n");
  {
    static const char *sc[5] = {"", "key", "ip", "subject", "tenant"};
    for (i = 1; i <= 3; i++)
      fprintf(f, "  %-9s %9" PRIu64 " %9" PRIu64 " %9" PRIu64 "\n", sc[i],
              s->trips[i][0], s->trips[i][1], s->trips[i][2]);
  }
  fprintf(f, "\nevents:");
  for (i = 1; i < SLUICE_EVENT__COUNT; i++)
    if (s->events[i])
      fprintf(f, " %s=%" PRIu64, sluice_event_name(i), s->events[i]);
  fprintf(f, "%s\n\n", s->events[0] ? "" : "");
  fwrite(s->notes, 1, s->notes_len, f);
}

/* ------------------------------------------------------------ plot --- */

static int write_plot(sim *s, const char *path) {
  FILE *f = fopen(path, "w");
  int rc;
  if (!f)
    return -1;
  rc = sim_plot_write(&s->plot, f);
  return fclose(f) == 0 ? rc : -1;
}

/* ------------------------------------------------------------ main --- */

typedef struct scenario {
  const char *name, *what, *question;
  void (*run)(sim *);
  int64_t dur_s;
  int failing;
  void (*tweak)(sluice_policy_config *);
} scenario;

static void tweak_nat(sluice_policy_config *c) { c->auth_ip_failures = 1000; }

static const scenario scenarios[] = {
    {"growth-batch", "a growth tenant's end-of-day batch spike",
     "growth-batch: does the end-of-day spike pass without strikes?",
     scn_growth_batch, 1200, 0, NULL},
    {"retry-ignorer",
     "a client that ignores Retry-After and climbs the penalty levels",
     "retry-ignorer: how does a client that ignores Retry-After climb the "
     "penalty levels?",
     scn_retry_ignorer, 4200, 0, NULL},
    {"batch-backoff",
     "a batch client pacing itself and obeying the backoff planner",
     "batch-backoff: can a paced batch client post 20000 entries without "
     "a 429?",
     scn_batch_backoff, 1200, 0, NULL},
    {"credential-stuffing",
     "password spraying from a few IPs while office users log in",
     "credential-stuffing: are the attackers banned while the office "
     "logs in?",
     scn_credential_stuffing, 1800, 0, tweak_nat},
    {"backend-outage",
     "the store times out: fail-closed and degraded answers",
     "backend-outage: what do clients get while the store times out?",
     scn_backend_outage, 360, 1, NULL},
};
#define NSCEN (sizeof scenarios / sizeof scenarios[0])

static void simulate_usage(FILE *f) {
  size_t i;
  fprintf(f,
          "usage: sluice simulate [--plot FILE.svg] [--config FILE] SCENARIO\n"
          "       sluice simulate --list\n\n"
          "Runs one of the spec's scenarios through the whole policy on the\n"
          "in-memory backend with a virtual clock (hours of traffic in well\n"
          "under a second) and prints what happened: requests, allowed,\n"
          "throttled, boxed per tier, box trips per level, events.\n\n"
          "  --plot FILE    also write an SVG plot of the scenario's answer:\n"
          "                 what clients were answered over time (bars), the\n"
          "                 observed key's points remaining (line), boxes,\n"
          "                 bans and outages marked\n"
          "  --config FILE  a policy configuration (libconfig; the defaults,\n"
          "                 commented, are installed as\n"
          "                 " SLUICE_CONF_PATH ")\n"
          "                 instead of the built-in defaults\n\n"
          "scenarios:\n");
  for (i = 0; i < NSCEN; i++)
    fprintf(f, "  %-20s %s\n", scenarios[i].name, scenarios[i].what);
  fprintf(f, "\nexit codes: 0 ok, 2 usage error (unknown scenario, bad "
             "option), 3 system failure\n");
}

int cli_simulate(int argc, char **argv) {
  static const struct option opts[] = {{"plot", required_argument, 0, 'p'},
                                       {"config", required_argument, 0, 'c'},
                                       {"list", no_argument, 0, 'l'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *plot = NULL, *config = NULL;
  const scenario *sc = NULL;
  sluice_policy_config cfg;
  struct timespec w0, w1;
  static sim s; /* large: keep it off the stack */
  size_t i;
  int c, rc;

  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'p':
      plot = optarg;
      break;
    case 'c':
      config = optarg;
      break;
    case 'l':
      for (i = 0; i < NSCEN; i++)
        printf("%s\n", scenarios[i].name);
      return CLI_OK;
    case 'h':
      simulate_usage(stdout);
      return CLI_OK;
    default:
      fprintf(stderr, "sluice simulate: unknown or incomplete option '%s'\n",
              argv[optind - 1]);
      simulate_usage(stderr);
      return CLI_USAGE;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "sluice simulate: expected exactly one SCENARIO%s\n",
            optind < argc - 1 ? ", got several" : "");
    simulate_usage(stderr);
    return CLI_USAGE;
  }
  for (i = 0; i < NSCEN; i++)
    if (!strcmp(argv[optind], scenarios[i].name))
      sc = &scenarios[i];
  if (!sc) {
    fprintf(stderr, "sluice simulate: unknown scenario '%s' (try --list)\n",
            argv[optind]);
    return CLI_USAGE;
  }
  if (config) {
    char err[256];
    rc = sluice_policy_config_load(config, &cfg, err, sizeof err);
    if (rc != SLUICE_OK) {
      fprintf(stderr, "sluice simulate: --config %s: %s\n", config, err);
      return rc == SLUICE_EIO ? CLI_USAGE : CLI_BADINPUT;
    }
  } else {
    sluice_policy_config_defaults(&cfg);
  }
  if (sc->tweak)
    sc->tweak(&cfg);
  memset(&s, 0, sizeof s);
  s.name = sc->name;
  clock_gettime(CLOCK_MONOTONIC, &w0);
  if (sim_open(&s, &cfg, sc->failing, sc->dur_s * S_NS) != SLUICE_OK) {
    sim_close(&s);
    return CLI_RUNTIME;
  }
  printf("scenario %s: %s\n", sc->name, sc->what);
  snprintf(s.plot.title, sizeof s.plot.title, "%s", sc->question);
  sc->run(&s);
  clock_gettime(CLOCK_MONOTONIC, &w1);
  report(&s, stdout,
         (double)(w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9);
  rc = CLI_OK;
  if (plot) {
    if (write_plot(&s, plot) != 0) {
      fprintf(stderr, "sluice simulate: --plot %s: cannot write the file\n",
              plot);
      rc = CLI_RUNTIME;
    } else {
      printf("plot written to %s\n", plot);
    }
  }
  sim_close(&s);
  if (fflush(stdout) != 0)
    rc = CLI_RUNTIME;
  return rc;
}

/*
** The simulator's world (sim.h): actors due in time order on a manual
** clock, each request through sluice_policy_decide() and rendered by the
** HTTP layer, the events and outcome counters the report reads.  The
** store is "mem", or the failing store (tools/common/fail_store.h)
** for the outage scenario.
*/
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fail_store.h"
#include "sim.h"

/* ---------------------------------------------------------- the sim --- */

void sim_add_series(sim *s, int kind, const char *label,
                    const char *color) {
  sim_plot *p = &s->plot;
  if (p->nseries >= PLOT_MAX_SERIES)
    return;
  s->ser_kind[p->nseries] = kind;
  p->series[p->nseries].label = label;
  p->series[p->nseries].color = color;
  p->nseries++;
}

void sim_count(sim *s, int kind, int64_t t_ns) {
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

void sim_note(sim *s, const char *fmt, ...) {
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

int sim_open(sim *s, const sluice_policy_config *cfg, int failing,
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
  /* The failing store: each xRun call (one program, or a batch) fails
  ** or passes as one. */
  lo.store = failing ? "fail:" : "mem";
  lo.clock = s->clock;
  if (failing)
    lo.backend = &fail_store_backend;
  if ((rc = sluice_limiter_open(&lo, &s->lim, err, sizeof err)) != SLUICE_OK) {
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
  s->cfg = sluice_policy_config_of(s->pol);
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

void sim_close(sim *s) {
  sluice_backoff_close(s->backoff);
  sluice_http_close(s->http);
  sluice_policy_close(s->pol);
  sluice_limiter_close(s->lim);
  sluice_clock_free(s->clock);
}

int64_t sim_now(sim *s) { return sluice_clock_now(s->clock); }

int sim_tier_row(sim *s, const char *tier) {
  int i;
  for (i = 0; i < s->ntiers; i++)
    if (!strcmp(s->tiers[i], tier))
      return i;
  if (s->ntiers == NROWS) /* a scenario's tiers are a handful */
    return NROWS - 1;
  snprintf(s->tiers[s->ntiers], sizeof s->tiers[0], "%s", tier);
  return s->ntiers++;
}

static const char *find_hdr(const heard *h, const char *name) {
  size_t i;
  for (i = 0; i < h->n; i++)
    if (!strcmp(h->h[i].name, name))
      return h->h[i].value;
  return NULL;
}

int64_t sim_hdr_int(const char *v, int64_t dflt) {
  int64_t x;
  if (!v || sluice_http_parse_uint(v, strlen(v), &x) != SLUICE_OK)
    return dflt;
  return x;
}

/* Decide one request and record it; fills *h with the answer's headers. */
sluice_decision sim_send(sim *s, actor *a, const sluice_request *rq,
                         heard *h) {
  sluice_decision d;
  sluice_http_answer ans;
  int rc = sluice_policy_decide(s->pol, 1, rq, &d, NULL);
  int row;
  int64_t t = sim_now(s);
  if (rc == SLUICE_ENOTFOUND && d.invalid_field &&
      !strcmp(d.invalid_field, "route")) {
    /* A --config whose routes match none of the scenario's requests: the
    ** file does not fit the scenario. */
    fflush(stdout); /* the scenario's line first */
    fprintf(stderr, "sluice simulate: --config: scenario %s sends %s %s, "
                    "which no route of the policy matches\n",
            s->name, rq->method, rq->route);
    exit(CLI_BADINPUT);
  }
  if (rc != SLUICE_OK) {
    /* The scenarios only build valid requests: this is a bug. */
    fprintf(stderr, "sluice simulate: %s: decide: %s (field %s)\n", s->name,
            sluice_strerror(rc), d.invalid_field ? d.invalid_field : "-");
    exit(CLI_RUNTIME);
  }
  s->requests++;
  row = sim_tier_row(s, rq->tier ? rq->tier : ""); /* as the client names it */
  s->ts[row].n++;
  s->ts[row].outcome[d.outcome]++;
  if (d.flags & SLUICE_DECISION_DEGRADED)
    s->ts[row].degraded++;
  if (d.flags & SLUICE_DECISION_STRIKE) {
    s->ts[row].strikes++;
    a->strikes++;
  }
  if (a->observed && d.binding != SLUICE_BINDING_NONE) {
    sim_plot_line(&s->plot, t - T0, d.remaining);
    if (d.limit > s->plot.line_max)
      s->plot.line_max = d.limit;
  } else if (a->observed && (d.outcome == SLUICE_OUTCOME_BOXED ||
                             d.outcome == SLUICE_OUTCOME_SUSPENDED)) {
    sim_plot_line(&s->plot, t - T0, 0);
  }
  if (d.allowed) {
    sim_count(s, d.flags & SLUICE_DECISION_DEGRADED ? SER_DEGRADED : SER_ALLOWED,
          t);
  } else if (d.outcome == SLUICE_OUTCOME_THROTTLED) {
    sim_count(s, SER_THROTTLED, t);
  } else if (d.outcome == SLUICE_OUTCOME_BOXED) {
    sim_count(s, SER_BOXED, t);
    sim_count(s, d.penalty_level == 1 ? SER_BOXED_L1 : SER_BOXED_L2, t);
  } else if (d.outcome == SLUICE_OUTCOME_SUSPENDED) {
    sim_count(s, SER_SUSPENDED, t);
  }
  if (d.verdict_status == 503)
    sim_count(s, SER_503, t);
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
  if (sluice_http_answer_make(s->http, &d, rq, "req_sim", t, &ans) !=
          SLUICE_OK ||
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

actor *sim_add_actor(sim *s, const char *name, void (*act)(sim *, actor *),
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


void sim_run(sim *s, hook *hooks, int nhooks) {
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

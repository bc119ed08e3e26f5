/*
** The simulator behind `sluice simulate` (cmd_simulate.c): its types and
** the calls its parts share.  sim_core.c runs the world (actors, the
** policy over a store on a manual clock, answers rendered as HTTP);
** sim_scenarios.c has the spec's scenarios; sim_report.c the summary and
** the plot.
*/
#ifndef SLUICE_CLI_SIM_H
#define SLUICE_CLI_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "sim_plot.h"
#include "sluice.h"

#define S_NS INT64_C(1000000000)
#define MS_NS INT64_C(1000000)
/* 2026-10-14T14:00:00Z, the date of the spec's examples. */
#define T0 (INT64_C(1791986400) * S_NS)
#define MAX_ACTORS 128
/* Rows of the report: the tiers the decisions name, in the order first
** seen ("" for sign-ins, which have none). */
#define NROWS 16

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
  sluice_attr attrs[2]; /* the request's attributes (rq.attrs points here) */
  int64_t period_ns, until_ns, n, sent, got429, strikes, boxed, left;
  int64_t attempt, seq, fail_every, n503, ndeg;
  int64_t pending_release_ns; /* a job whose lease to release */
  uint64_t lease_id;
  sluice_request lease_rq; /* the request the lease was granted to */
  sluice_attr lease_attr;
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
  const char *tier; /* the tier of the scenario's keys */
  sluice_clock *clock;
  sluice_limiter *lim;
  sluice_policy *pol;
  sluice_http *http;
  sluice_backoff *backoff;
  uint64_t seed_http, seed_client;
  const sluice_policy_config *cfg; /* the policy's, in force */
  int nact;
  actor a[MAX_ACTORS];
  int64_t end_ns;
  /* outcome counters */
  tier_stats ts[NROWS];
  char tiers[NROWS][32];
  int ntiers;
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

/* Hooks run between requests at fixed times (the outage switch). */
typedef struct hook {
  int64_t at_ns;
  void (*fn)(sim *, void *);
  void *arg;
  int done;
} hook;

void sim_note(sim *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
actor *sim_add_actor(sim *s, const char *name, void (*act)(sim *, actor *),
                     int64_t start_ns);
void sim_add_series(sim *s, int kind, const char *label, const char *color);
void sim_count(sim *s, int kind, int64_t t_ns);
int64_t sim_hdr_int(const char *v, int64_t dflt);
int64_t sim_now(sim *s);
sluice_decision sim_send(sim *s, actor *a, const sluice_request *rq,
                         heard *h);
int sim_tier_row(sim *s, const char *tier);
void sim_report(sim *s, FILE *f, double wall_s);
/* 0, or the errno value of what failed (a missing directory: ENOENT). */
int sim_write_plot(sim *s, const char *path);
int sim_open(sim *s, const sluice_policy_config *cfg, int failing,
             int64_t dur_ns);
void sim_close(sim *s);
void sim_run(sim *s, hook *hooks, int nhooks);
void scn_backend_outage(sim *s);
void scn_batch_backoff(sim *s);
void scn_credential_stuffing(sim *s);
void scn_growth_batch(sim *s);
void scn_retry_ignorer(sim *s);

#endif

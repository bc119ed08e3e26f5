/*
** sluice replay --policy, private side: the replay's state per partition
** (policy_replay_run.c reads, batches and decides the lines;
** policy_replay_report.c sums the partitions into the report;
** cmd_policy_replay.c parses the options and runs the partitions).
*/
#ifndef SLUICE_CLI_POLICY_REPLAY_H
#define SLUICE_CLI_POLICY_REPLAY_H

#include <pthread.h>
#include <stdio.h>

#include "cli.h"
#include "sluice.h"

#define MS_NS INT64_C(1000000)
/* Report rows: the tiers the lines name, in the order first seen; a log
** naming more shares the last row ("(other)"). */
#define NROWS 32
#define BATCH_MAX 16

/* A scope that would have been boxed. */
typedef struct boxed {
  char *name; /* "key tenant/key", "ip 1.2.3.4", "subject alice" */
  uint64_t hash;
  int level, trips;
  int64_t first_ms, last_ms;
} boxed;

typedef struct lease_hold {
  int64_t release_ns;
  uint64_t id;
  struct pending *line; /* the line itself (its route and attributes name
                           the leases), owned */
} lease_hold;

#define COLS_MAX 32 /* columns a log's header may name */

/* Where each field of a line is: the legacy layout's fixed places, or the
** columns a header line names (docs/cli.md); -1 for a field not given.
** subject and outcome are the legacy layout's (its sign-ins' `subject`
** and `result` attributes); a named log names attributes as such. */
typedef struct layout {
  int named; /* 1: from a header line naming its columns */
  int n;     /* named: fields per line */
  int t, tenant, key, tier, method, route, ip, subject, outcome, cost, status;
  int nattr;
  int attr[COLS_MAX];              /* the column of each attribute */
  char aname[COLS_MAX][SLUICE_POLICY_NAME_MAX + 1]; /* its name */
  /* settle:ATTR columns: the real value of an attribute the route's costs
  ** read, reported once the request ended (sluice_policy_settle()). */
  int nsettle;
  int settle[COLS_MAX];
  char sname[COLS_MAX][SLUICE_POLICY_NAME_MAX + 1];
} layout;

/* A parsed line waiting for its batch: its fields point into s. */
typedef struct pending {
  char s[4096];
  char *f[COLS_MAX];
  int nf;
  const char *result; /* the legacy layout's outcome as the `result`
                         attribute (NULL: pending, not given) */
  int64_t t, cost;
  int status; /* the status the service reported back (0: none) */
  sluice_attr attrs[COLS_MAX];
  size_t nattrs;
  long lineno;
} pending;

/* A report row: one tier's decisions ("" for lines with no tier). */
typedef struct tier_row {
  char name[SLUICE_POLICY_NAME_MAX + 1];
  uint64_t n, outcome[SLUICE_OUTCOME__COUNT], strikes, degraded, passed;
} tier_row;

/* Whether a line's method and route may take a lease (a route listing a
** concurrency or lock limit): learnt from its first decision, which lists
** every limit of its route.  Open addressing; when full, a route not in
** it ends its batch (as an unknown one does). */
#define ROUTES_SEEN 4096
typedef struct route_seen {
  uint64_t hash; /* 0: free */
  int leases;
} route_seen;

/* What the report says per declared limit (named logs). */
typedef struct limit_count {
  const char *name; /* the policy's own string */
  uint64_t met, denied, binding;
} limit_count;

typedef struct preplay {
  sluice_clock *clock;
  sluice_limiter *lim;
  sluice_policy *pol;
  uint8_t hkey[16];
  int decisions;
  int64_t job_ns;
  cli_out out;
  int64_t last_t;
  long bad, lines;
  uint64_t n;
  tier_row rows[NROWS];
  int nrows;
  route_seen *seen; /* ROUTES_SEEN of them, or NULL (out of memory) */
  uint64_t settled; /* requests settled by a settle:ATTR column */
  /* boxed scopes: open addressing */
  boxed *bx;
  size_t bx_cap, bx_n;
  int64_t cur_ms;
  /* held leases: a FIFO (release times are non-decreasing) */
  lease_hold *lh;
  size_t lh_cap, lh_head, lh_n;
  int oom;
  /* lines of one t_ms decided in one sluice_policy_decide() call */
  pending pq[BATCH_MAX];
  int nq, batch_max;
  /* the layout: legacy until a header line names the columns */
  layout cl;
  int seen_first; /* a line other than a comment was read */
  int hdr_done;   /* --decisions: its header line is out */
  int fatal;      /* a CLI_* code that stops the replay (a bad header) */
  limit_count lc[SLUICE_DECISION_LIMITS_MAX * 4];
  int nlc;
  /* the legacy layout's attributes, when the policy declares them */
  int has_subject, has_result, has_ledger, has_range, attrs_known;
} preplay;

/* A partition of a mapped log: the lines whose tenant hashes to `idx`
** (auth lines, which have no tenant, all go to partition 0). */
typedef struct part {
  preplay r;
  int idx, np, rc;
  const char *data;
  size_t len;
  pthread_t th;
} part;

/* policy_replay_run.c: the policy's event callback (boxes for the
** report); a line into the batch; the batch decided; a whole stream;
** the held leases due at now_ns (all: every one) released. */
void preplay_on_event(void *ud, const sluice_event *ev);
int preplay_line(preplay *r, const char *line, size_t n, long lineno);
/* 1 when line (the log's first that is not a comment) is a header naming
** its columns, not the legacy layout: such a log runs on one thread. */
int preplay_named_header(const char *line, size_t n);
void preplay_layout_legacy(layout *cl);
/* --decisions: the output's header line, once (the layout's). */
void preplay_decisions_header(preplay *r);
int preplay_flush(preplay *r);
int preplay_stream(preplay *r, FILE *in);
void preplay_release_due(preplay *r, int64_t now_ns, int all);

/* policy_replay_report.c: the report, summed over np partitions. */
void preplay_report(part *ps, int np, FILE *f, double wall, int shadow,
                    int boxes_max);

#endif

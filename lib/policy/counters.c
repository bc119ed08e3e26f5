/*
** Where a policy's counters live: in the policy itself, or in a named
** shared-memory object that every process of a host counts into.  Prefork
** servers (nginx, ledger-api) answer a scrape from whichever worker took
** the connection; with per-process counters successive scrapes disagree and
** Prometheus sees counters go backwards.  A shared segment of plain atomics
** makes any worker's metrics text the host's monotonic totals.
**
** The segment (segment.c) is created on first open and never unlinked
** here: the totals must outlive reloads and binary upgrades.  So the
** counters by route (fail_closed, lease_denials, store_full) are kept by
** the route's label, not its place: a segment names a row for each label
** it meets, for good, and a reload that adds, drops or reorders routes
** keeps the rows of the routes it still has.
*/
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "declared.h"
#include "policy_int.h"

#define CTR_MAGIC UINT64_C(0x31727463636c73) /* "slcctr1" */
#define CTR_LAYOUT 5u /* 5: no export_cap outcome */

_Static_assert(SLUICE__DROUTES_MAX + 1 <= SLUICE__CTR_ROUTES,
               "a policy's routes and none fit the rows by route");
_Static_assert(7 + 1 + SLUICE_POLICY_ROUTE_MAX + 5 < SLUICE__CTR_LABEL,
               "a route's label fits");

/* A row by route of a segment: named once, for the segment's life. */
enum { ROW_FREE, ROW_NAMING, ROW_NAMED };
typedef struct ctr_row {
  _Atomic uint32_t state;
  char label[SLUICE__CTR_LABEL];
} ctr_row;

typedef struct ctr_segment {
  sluice__seg_head h; /* segment.c: magic, claim */
  uint64_t counters_bytes;
  uint32_t ntiers;
  char tiers[SLUICE_POLICY_TIERS_MAX][SLUICE_POLICY_NAME_MAX + 1];
  ctr_row rows[SLUICE__CTR_ROUTES]; /* the counters' rows by route */
  sluice__counters c;
} ctr_segment;

void sluice__route_label(const sluice_policy *p, int i,
                         char label[SLUICE__CTR_LABEL]) {
  const sluice__droute *r, *e;
  int j;
  if (i < 0 || !p->decl || i >= p->decl->nroutes) {
    snprintf(label, SLUICE__CTR_LABEL, "none");
    return;
  }
  r = &p->decl->routes[i];
  snprintf(label, SLUICE__CTR_LABEL, "%s %s", r->method, r->route);
  for (j = 0; j < i; j++) {
    e = &p->decl->routes[j];
    if (!strcmp(e->method, r->method) && !strcmp(e->route, r->route)) {
      size_t n = strlen(label);
      snprintf(label + n, SLUICE__CTR_LABEL - n, " #%d", i + 1);
      return;
    }
  }
}

static int same_tiers(const ctr_segment *g, const sluice__conf *cfg) {
  int t;
  if (g->ntiers != (uint32_t)cfg->ntiers)
    return 0;
  for (t = 0; t < cfg->ntiers; t++)
    if (strncmp(g->tiers[t], cfg->tiers[t].name, sizeof g->tiers[t]) != 0)
      return 0;
  return 1;
}

static void init_segment(sluice__seg_head *h, void *arg) {
  ctr_segment *g = (ctr_segment *)h;
  const sluice__conf *cfg = arg;
  int t;
  g->h.layout = CTR_LAYOUT;
  g->counters_bytes = sizeof g->c;
  g->ntiers = (uint32_t)cfg->ntiers;
  for (t = 0; t < cfg->ntiers; t++)
    memcpy(g->tiers[t], cfg->tiers[t].name, sizeof g->tiers[t]);
  snprintf(g->rows[0].label, sizeof g->rows[0].label, "none");
  atomic_store_explicit(&g->rows[0].state, ROW_NAMED, memory_order_release);
}

/* The segment's row of label: the one named so, else the first free one,
** named now (a row another process names is waited for, 1 s at most,
** then passed over).  -1: every row is named otherwise. */
static int row_of(ctr_segment *g, const char *label) {
  int i, ms;
  for (i = 0; i < SLUICE__CTR_ROUTES; i++) {
    ctr_row *r = &g->rows[i];
    uint32_t st = atomic_load_explicit(&r->state, memory_order_acquire);
    if (st == ROW_FREE &&
        atomic_compare_exchange_strong(&r->state, &st, ROW_NAMING)) {
      snprintf(r->label, sizeof r->label, "%s", label);
      atomic_store_explicit(&r->state, ROW_NAMED, memory_order_release);
      return i;
    }
    for (ms = 0; st == ROW_NAMING && ms < 1000; ms++) {
      sluice__seg_nap();
      st = atomic_load_explicit(&r->state, memory_order_acquire);
    }
    if (st == ROW_NAMED && !strncmp(r->label, label, sizeof r->label))
      return i;
  }
  return -1;
}

/* Each route's row in the segment g (NULL: the policy's own counters, a
** row per route in order). */
static int pick_rows(sluice_policy *p, ctr_segment *g, const char *name,
                     char *msg, size_t msglen) {
  int i, n = p->decl ? p->decl->nroutes : 0, row;
  char label[SLUICE__CTR_LABEL];
  p->ctr_row[0] = 0;
  for (i = 0; i < n; i++) {
    row = i + 1;
    if (g) {
      sluice__route_label(p, i, label);
      if ((row = row_of(g, label)) < 0)
        return sluice__seg_fail(msg, msglen, SLUICE_ECONFIG, "counters", name,
                                "holds as many routes as it can (name a new "
                                "segment)",
                                0);
    }
    p->ctr_row[i + 1] = (uint16_t)row;
  }
  return SLUICE_OK;
}

int sluice__counters_attach(sluice_policy *p, const char *uri, char *msg,
                            size_t msglen) {
  char name[256];
  void *m;
  ctr_segment *g;
  int rc;

  p->ctr = &p->own;
  if (!uri || !uri[0])
    return pick_rows(p, NULL, NULL, msg, msglen);
  if ((rc = sluice__seg_name("counters", uri, name, msg, msglen)))
    return rc;
  rc = sluice__seg_attach("counters", uri, sizeof(ctr_segment), CTR_MAGIC,
                          init_segment, &p->cfg, &m, msg, msglen);
  if (rc != SLUICE_OK)
    return rc;
  g = m;
  if (g->h.layout != CTR_LAYOUT || g->counters_bytes != sizeof g->c)
    rc = sluice__seg_fail(msg, msglen, SLUICE_EVERSION, "counters", name,
                          "made by another sluice version", 0);
  else if (!same_tiers(g, &p->cfg))
    rc = sluice__seg_fail(msg, msglen, SLUICE_ECONFIG, "counters", name,
                          "made for other tiers (name a new segment when "
                          "the tiers change)",
                          0);
  else
    rc = pick_rows(p, g, name, msg, msglen);
  if (rc != SLUICE_OK) {
    munmap(g, sizeof *g);
    return rc;
  }
  p->ctr_map = g;
  p->ctr_bytes = sizeof *g;
  p->ctr = &g->c;
  return SLUICE_OK;
}

void sluice__counters_detach(sluice_policy *p) {
  if (p->ctr_map)
    munmap(p->ctr_map, p->ctr_bytes);
  p->ctr_map = NULL;
  p->ctr = &p->own;
}

/*
** Where a policy's counters live: in the policy itself, or in a named
** shared-memory object that every process of a host counts into.  Prefork
** servers (nginx, ledger-api) answer a scrape from whichever worker took
** the connection; with per-process counters successive scrapes disagree and
** Prometheus sees counters go backwards.  A shared segment of plain atomics
** makes any worker's metrics text the host's monotonic totals.
**
** The segment (segment.c) is created on first open and never unlinked
** here: the totals must outlive reloads and binary upgrades.
*/
#include <string.h>
#include <sys/mman.h>

#include "policy_int.h"

#define CTR_MAGIC UINT64_C(0x31727463636c73) /* "slcctr1" */
#define CTR_LAYOUT 4u /* 4: no export_cap outcome */

typedef struct ctr_segment {
  sluice__seg_head h; /* segment.c: magic, claim */
  uint64_t counters_bytes;
  uint32_t ntiers;
  char tiers[SLUICE_POLICY_TIERS_MAX][SLUICE_POLICY_NAME_MAX + 1];
  sluice__counters c;
} ctr_segment;

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
}

int sluice__counters_attach(sluice_policy *p, const char *uri, char *msg,
                            size_t msglen) {
  char name[256];
  void *m;
  ctr_segment *g;
  int rc;

  p->ctr = &p->own;
  if (!uri || !uri[0])
    return SLUICE_OK;
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

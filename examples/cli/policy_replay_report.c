/*
** sluice replay --policy: the report, per tier what would have happened
** and the scopes that would have been boxed, summed over the partitions.
*/
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "policy_replay.h"

static int cmp_box(const void *a, const void *b) {
  const boxed *x = a, *y = b;
  if (x->level != y->level)
    return y->level - x->level;
  if (x->first_ms != y->first_ms)
    return x->first_ms < y->first_ms ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Which features each tier left unenforced: the staged rollout's split
** (the `passed` column counts the refusals this let through). */
static void pr_split(const sluice_policy *pol, const sluice_policy_config *c,
                     FILE *f) {
  int row, bit, n = 0;
  char buf[64];
  fprintf(f, "# not enforced:");
  while (cli_tier_name(c, n, buf, sizeof buf))
    n++;
  for (row = 0; row <= n; row++) {
    const char *name = row < n ? cli_tier_name(c, row, buf, sizeof buf)
                               : NULL;
    int m = sluice_policy_shadow_features(pol, name), any = 0;
    fprintf(f, " %s=", name ? name : "(auth)");
    for (bit = 1; bit <= SLUICE_SHADOW_ALL; bit <<= 1)
      if (m > 0 && (m & bit))
        fprintf(f, "%s%s", any++ ? "," : "", sluice_shadow_feature_name(bit));
    if (!any)
      fprintf(f, "-");
  }
  fprintf(f, "\n");
}

/* A named log: per declared limit, in the file's order, the requests that
** met it, those it refused and those it bound. */
static void pr_limits(part *ps, int np, FILE *f) {
  sluice_limit_info li;
  int i, j, p, any = 0;
  for (i = 0; sluice_policy_limit_at(ps[0].r.pol, i, &li) == SLUICE_OK; i++) {
    uint64_t met = 0, denied = 0, binding = 0;
    for (p = 0; p < np; p++)
      for (j = 0; j < ps[p].r.nlc; j++)
        if (!strcmp(ps[p].r.lc[j].name, li.name)) {
          met += ps[p].r.lc[j].met;
          denied += ps[p].r.lc[j].denied;
          binding += ps[p].r.lc[j].binding;
        }
    if (!any++)
      fprintf(f, "# %-20s %-10s %9s %9s %9s\n", "limit", "unit", "met",
              "denied", "binding");
    fprintf(f, "# %-20s %-10s %9" PRIu64 " %9" PRIu64 " %9" PRIu64 "\n",
            li.name, li.unit, met, denied, binding);
  }
}

/* The report, summed over the partitions (scopes never span two). */
void preplay_report(part *ps, int np, FILE *f, double wall, int shadow,
                      int boxes_max) {
  static const char *cols[SLUICE_OUTCOME__COUNT] = {
      "allowed",     "throttled", "boxed",      "suspended",
      "concurrency", "conflict",  "export_cap", "unavailable"};
  const sluice_policy_config *c = sluice_policy_config_of(ps[0].r.pol);
  char tbuf[64];
  size_t i, k = 0, nbx = 0;
  int row, o, p;
  uint64_t n = 0, settled = 0;
  long bad = 0;
  boxed *list;
  for (p = 0; p < np; p++) {
    n += ps[p].r.n;
    settled += ps[p].r.settled;
    bad += ps[p].r.bad;
    nbx += ps[p].r.bx_n;
  }
  fprintf(f, "# %s replay: %" PRIu64 " requests, %ld malformed lines, "
             "%d thread%s, %.3f s, %.0f requests/s\n",
          shadow ? "shadow-mode" : "as-configured", n, bad, np,
          np > 1 ? "s" : "",
          wall, wall > 0 ? (double)n / wall : 0.0);
  if (ps[0].r.cl.nsettle)
    fprintf(f, "# settled: %" PRIu64 " admitted requests reported their "
               "real cost\n", settled);
  fprintf(f, "# %-10s %9s", "tier", "requests");
  for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
    fprintf(f, " %11s", cols[o]);
  fprintf(f, " %9s %9s %9s\n", "strikes", "degraded", "passed");
  for (row = 0; row < NROWS; row++) {
    const char *name = ps[0].r.cl.named ? "(no tier)" : "(auth)";
    uint64_t tot = 0, v[SLUICE_OUTCOME__COUNT], st = 0, dg = 0, ps_ = 0;
    if (row < SLUICE_POLICY_TIERS_MAX &&
        cli_tier_name(c, row, tbuf, sizeof tbuf))
      name = tbuf;
    else if (row != SLUICE_POLICY_TIERS_MAX)
      continue;
    for (o = 0; o < SLUICE_OUTCOME__COUNT; o++) {
      v[o] = 0;
      for (p = 0; p < np; p++)
        v[o] += sluice_policy_count(
            ps[p].r.pol, row == SLUICE_POLICY_TIERS_MAX ? NULL : name, o);
      tot += v[o];
    }
    for (p = 0; p < np; p++) {
      st += ps[p].r.strikes[row];
      dg += ps[p].r.degraded[row];
      ps_ += ps[p].r.passed[row];
    }
    if (!tot)
      continue;
    fprintf(f, "# %-10s %9" PRIu64, name, tot);
    for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
      fprintf(f, " %11" PRIu64, v[o]);
    fprintf(f, " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 "\n", st, dg, ps_);
  }
  pr_split(ps[0].r.pol, c, f);
  if (ps[0].r.cl.named)
    pr_limits(ps, np, f);
  list = malloc((nbx ? nbx : 1) * sizeof *list);
  if (!list)
    return;
  for (p = 0; p < np; p++)
    for (i = 0; i < ps[p].r.bx_cap; i++)
      if (ps[p].r.bx[i].name)
        list[k++] = ps[p].r.bx[i];
  qsort(list, k, sizeof *list, cmp_box);
  fprintf(f, "# would have been boxed: %zu scopes%s\n", k,
          (int)k > boxes_max ? " (the worst listed; --boxes N for more)" : "");
  if (k)
    fprintf(f, "# %-7s %-40s %5s %5s %12s %12s\n", "scope", "id", "level",
            "trips", "first_t_ms", "last_t_ms");
  for (i = 0; i < k && (int)i < boxes_max; i++) {
    const char *sp = strchr(list[i].name, ' ');
    fprintf(f, "# %-7.*s %-40s %5d %5d %12" PRId64 " %12" PRId64 "\n",
            (int)(sp - list[i].name), list[i].name, sp + 1, list[i].level,
            list[i].trips, list[i].first_ms, list[i].last_ms);
  }
  free(list);
}

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

/* Tiers by name, the lines with no tier last. */
static int cmp_row(const void *a, const void *b) {
  const tier_row *x = a, *y = b;
  if (!x->name[0] || !y->name[0])
    return !x->name[0] - !y->name[0];
  return strcmp(x->name, y->name);
}

/* The report's rows: every partition's tiers (those the log names, not
** a configuration's list), by name; *n of them. */
static tier_row *merged_rows(part *ps, int np, int *n) {
  tier_row *m = calloc((size_t)np * NROWS, sizeof *m);
  int p, i, j, o;
  *n = 0;
  if (!m)
    return NULL;
  for (p = 0; p < np; p++)
    for (i = 0; i < ps[p].r.nrows; i++) {
      const tier_row *t = &ps[p].r.rows[i];
      for (j = 0; j < *n && strcmp(m[j].name, t->name); j++)
        ;
      if (j == *n)
        snprintf(m[(*n)++].name, sizeof m[0].name, "%s", t->name);
      m[j].n += t->n;
      for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
        m[j].outcome[o] += t->outcome[o];
      m[j].strikes += t->strikes;
      m[j].degraded += t->degraded;
      m[j].passed += t->passed;
    }
  qsort(m, (size_t)*n, sizeof *m, cmp_row);
  return m;
}

/* Which features each tier of the log left unenforced: the staged
** rollout's split (the `passed` column counts the refusals this let
** through). */
static void pr_split(const sluice_policy *pol, const tier_row *rows, int n,
                     const char *notier, FILE *f) {
  int row, bit;
  fprintf(f, "# not enforced:");
  for (row = 0; row < n; row++) {
    const char *name = rows[row].name[0] ? rows[row].name : NULL;
    int m = sluice_policy_shadow_features(pol, name), any = 0;
    fprintf(f, " %s=", name ? name : notier);
    for (bit = 1; bit <= SLUICE_SHADOW_ALL; bit <<= 1)
      if (m > 0 && (m & bit))
        fprintf(f, "%s%s", any++ ? "," : "",
                sluice_name(SLUICE_NAME_SHADOW, bit));
    if (!any)
      fprintf(f, "-");
  }
  fprintf(f, "\n");
}

/* A named log: per declared limit, in the file's order, the requests that
** met it, those it refused and those it bound. */
static void pr_limits(part *ps, int np, FILE *f) {
  sluice_declared_info li;
  int i, j, p, any = 0;
  for (i = 0; sluice_policy_declared_at(ps[0].r.pol, SLUICE_DECLARED_LIMIT, i,
                                        &li) == SLUICE_OK;
       i++) {
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
  const char *cols[SLUICE_OUTCOME__COUNT];
  const char *notier = ps[0].r.cl.named ? "(no tier)" : "(auth)";
  tier_row *rows;
  size_t i, k = 0, nbx = 0;
  int row, nrows, o, p;
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
  for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
    cols[o] = o == SLUICE_OUTCOME_ALLOW ? "allowed"
                                        : sluice_name(SLUICE_NAME_OUTCOME, o);
  fprintf(f, "# %-10s %9s", "tier", "requests");
  for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
    fprintf(f, " %11s", cols[o]);
  fprintf(f, " %9s %9s %9s\n", "strikes", "degraded", "passed");
  if (!(rows = merged_rows(ps, np, &nrows))) {
    fprintf(f, "# out of memory\n");
    return;
  }
  for (row = 0; row < nrows; row++) {
    const tier_row *t = &rows[row];
    fprintf(f, "# %-10s %9" PRIu64, t->name[0] ? t->name : notier, t->n);
    for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
      fprintf(f, " %11" PRIu64, t->outcome[o]);
    fprintf(f, " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 "\n", t->strikes,
            t->degraded, t->passed);
  }
  pr_split(ps[0].r.pol, rows, nrows, notier, f);
  free(rows);
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

/* The simulator's summary table and plot file (sim.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sim.h"

/* ---------------------------------------------------------- report --- */

void sim_report(sim *s, FILE *f, double wall_s) {
  const char *cols[SLUICE_OUTCOME__COUNT];
  int i, o;
  for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
    cols[o] = o == SLUICE_OUTCOME_ALLOW ? "allowed"
                                        : sluice_name(SLUICE_NAME_OUTCOME, o);
  fprintf(f, "virtual time: %" PRId64 " s, decisions: %" PRIu64
             ", wall time: %.2f s\n\n",
          (s->end_ns - T0) / S_NS, s->requests, wall_s);
  fprintf(f, "%-11s %9s", "tier", "requests");
  for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
    fprintf(f, " %*s", (int)strlen(cols[o]) > 9 ? (int)strlen(cols[o]) : 9,
            cols[o]);
  fprintf(f, " %9s %9s\n", "degraded", "strikes");
  for (i = 0; i < s->ntiers; i++) {
    const char *name = s->tiers[i][0] ? s->tiers[i] : "(auth)";
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
      fprintf(f, " %s=%" PRIu64, sluice_name(SLUICE_NAME_EVENT, i),
              s->events[i]);
  fprintf(f, "%s\n\n", s->events[0] ? "" : "");
  fwrite(s->notes, 1, s->notes_len, f);
}

/* ------------------------------------------------------------ plot --- */

int sim_write_plot(sim *s, const char *path) {
  FILE *f = fopen(path, "w");
  int rc;
  if (!f)
    return errno ? errno : EIO;
  errno = 0;
  rc = sim_plot_write(&s->plot, f) != 0 ? (errno ? errno : EIO) : 0;
  if (fclose(f) != 0 && rc == 0)
    rc = errno ? errno : EIO;
  return rc;
}

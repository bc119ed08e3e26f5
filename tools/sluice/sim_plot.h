/*
** The SVG plot of `sluice simulate --plot`: a time axis, stacked bars of
** counts per time bar (what the clients were answered), an optional line
** (the observed key's points remaining), shaded spans (an outage, a box)
** and marked instants (a ban, a signature), each labelled, with nice
** 1-2-5 ticks and units on every axis.  The simulation fills a sim_plot;
** sim_plot_write() only draws it.
*/
#ifndef SLUICE_SIM_PLOT_H
#define SLUICE_SIM_PLOT_H

#include <stdint.h>
#include <stdio.h>

#define PLOT_COLS 400
#define PLOT_MAX_SERIES 6
#define PLOT_MAX_MARKS 16
#define PLOT_MAX_SPANS 6

typedef struct plot_series {
  const char *label, *color;
  int64_t v[PLOT_COLS];
} plot_series;

/* Times are ns since the start of the run. */
typedef struct plot_mark {
  int64_t t_ns;
  char label[64];
  const char *color;
} plot_mark;

typedef struct plot_span {
  int64_t from_ns, to_ns;
  char label[64];
  const char *color;
} plot_span;

typedef struct sim_plot {
  char title[160];     /* the scenario's question */
  char subtitle[200];  /* its answer, in numbers */
  int64_t dur_ns;      /* the time axis: 0 .. dur_ns */
  int64_t col_ns;      /* one bar */
  int ncol;
  /* the line (left axis), if line_label is set */
  const char *line_label;
  int64_t line_max; /* the axis covers at least this (the bucket's size) */
  int64_t line[PLOT_COLS];
  unsigned char line_has[PLOT_COLS];
  /* stacked bars (right axis with a line, else left) */
  int nseries;
  plot_series series[PLOT_MAX_SERIES];
  int nmarks, nspans;
  plot_mark marks[PLOT_MAX_MARKS];
  plot_span spans[PLOT_MAX_SPANS];
} sim_plot;

/* One bar width for a run of dur_ns: a round number of seconds giving at
** most PLOT_COLS (and about 200) bars. */
int64_t sim_plot_col_ns(int64_t dur_ns);

/* Adds to series `si` in the bar holding t_ns (ns since the start). */
void sim_plot_count(sim_plot *p, int si, int64_t t_ns, int64_t n);

/* The line's value in the bar holding t_ns (the last one set wins). */
void sim_plot_line(sim_plot *p, int64_t t_ns, int64_t v);

void sim_plot_mark(sim_plot *p, int64_t t_ns, const char *color,
                   const char *label);
/* End the time axis at the column holding end_ns (a scenario that
** finished early), when that is before the planned duration. */
void sim_plot_trim(sim_plot *p, int64_t end_ns);
void sim_plot_span(sim_plot *p, int64_t from_ns, int64_t to_ns,
                   const char *color, const char *label);

/* The smallest 1, 2 or 5 times a power of ten that is at least max/n:
** at most n such steps cover 0..max (1 when max is 0). */
double sim_plot_nice_step(double max, int n);

/* 0 on success, -1 if the file could not be written. */
int sim_plot_write(const sim_plot *p, FILE *f);

#endif

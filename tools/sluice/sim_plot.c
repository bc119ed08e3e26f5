/*
** SVG for `sluice simulate --plot` (sim_plot.h).  Hand-written SVG: the
** format is text, the drawing is a few rectangles, lines and labels, and
** a dependency would outweigh it.  Elements carry a class (tick-x, tick-y,
** series, span, mark, legend) so that tests can read the plot's meaning
** back; tests/cli/plot_test.sh also renders it to PNG.
*/
#include "sim_plot.h"

#include <math.h>
#include <string.h>

#define S_NS INT64_C(1000000000)

/* Layout, in px. */
enum { W = 960, H = 510, L = 80, R = 80, TP = 140, B = 58 };
#define PW (W - L - R)
#define PH (H - TP - B)

int64_t sim_plot_col_ns(int64_t dur_ns) {
  static const int64_t secs[] = {1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600};
  size_t i;
  for (i = 0; i < sizeof secs / sizeof secs[0]; i++)
    if (dur_ns / (secs[i] * S_NS) <= 240)
      return secs[i] * S_NS;
  return (dur_ns + PLOT_COLS - 1) / PLOT_COLS;
}

static int col_of(const sim_plot *p, int64_t t_ns) {
  int64_t c = p->col_ns > 0 ? t_ns / p->col_ns : -1;
  return c >= 0 && c < p->ncol ? (int)c : -1;
}

void sim_plot_count(sim_plot *p, int si, int64_t t_ns, int64_t n) {
  int c = col_of(p, t_ns);
  if (c >= 0 && si >= 0 && si < p->nseries)
    p->series[si].v[c] += n;
}

void sim_plot_line(sim_plot *p, int64_t t_ns, int64_t v) {
  int c = col_of(p, t_ns);
  if (c >= 0) {
    p->line[c] = v;
    p->line_has[c] = 1;
  }
}

void sim_plot_mark(sim_plot *p, int64_t t_ns, const char *color,
                   const char *label) {
  plot_mark *m;
  if (p->nmarks >= PLOT_MAX_MARKS)
    return;
  m = &p->marks[p->nmarks++];
  m->t_ns = t_ns;
  m->color = color;
  snprintf(m->label, sizeof m->label, "%s", label);
}

void sim_plot_span(sim_plot *p, int64_t from_ns, int64_t to_ns,
                   const char *color, const char *label) {
  plot_span *sp;
  if (p->nspans >= PLOT_MAX_SPANS)
    return;
  sp = &p->spans[p->nspans++];
  sp->from_ns = from_ns;
  sp->to_ns = to_ns > p->dur_ns ? p->dur_ns : to_ns;
  sp->color = color;
  snprintf(sp->label, sizeof sp->label, "%s", label);
}

void sim_plot_trim(sim_plot *p, int64_t end_ns) {
  int i, n;
  if (p->col_ns <= 0 || end_ns < 0)
    return;
  n = (int)(end_ns / p->col_ns) + 1;
  if (n >= p->ncol)
    return;
  p->ncol = n;
  p->dur_ns = (int64_t)n * p->col_ns;
  for (i = 0; i < p->nspans; i++)
    if (p->spans[i].to_ns > p->dur_ns)
      p->spans[i].to_ns = p->dur_ns;
}

double sim_plot_nice_step(double max, int n) {
  double raw = max / n, mag;
  if (!(raw > 0))
    return 1;
  mag = pow(10, floor(log10(raw)));
  if (raw <= mag * 1.0000001)
    return mag;
  if (raw <= 2 * mag * 1.0000001)
    return 2 * mag;
  if (raw <= 5 * mag * 1.0000001)
    return 5 * mag;
  return 10 * mag;
}

/* A count axis: 0 .. a multiple of a nice step >= max (integers). */
static void count_axis(int64_t max, int64_t *top, int64_t *step) {
  double st = sim_plot_nice_step((double)(max > 0 ? max : 1), 5);
  *step = st < 1 ? 1 : (int64_t)st;
  *top = (max + *step - 1) / *step * *step;
  if (*top == 0)
    *top = *step;
}

static void esc(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", f);
    else if (*s == '>')
      fputs("&gt;", f);
    else if (*s == '&')
      fputs("&amp;", f);
    else
      fputc(*s, f);
  }
}

/* A label on a white ground, readable over bars; anchored at x on its
** left (or right) end. */
static void label(FILE *f, const char *cls, double x, int y, int right,
                  const char *color, const char *text) {
  double w = 6.3 * (double)strlen(text) + 6;
  double x0 = right ? x - w : x;
  if (x0 + w > W - 2)
    x0 = W - 2 - w;
  if (x0 < 2)
    x0 = 2;
  fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"15\" "
             "fill=\"white\" fill-opacity=\"0.9\" stroke=\"%s\" "
             "stroke-width=\"0.8\"/>\n"
             "<text class=\"%s\" x=\"%.1f\" y=\"%d\" fill=\"%s\" "
             "font-size=\"11\">",
          x0, y - 11, w, color, cls, x0 + 3, y, color);
  esc(f, text);
  fputs("</text>\n", f);
}

static double x_of(const sim_plot *p, int64_t t_ns) {
  return L + (double)PW * (double)t_ns / (double)p->dur_ns;
}

static void y_ticks(FILE *f, int64_t top, int64_t step, int right,
                    const char *color) {
  int64_t v;
  for (v = 0; v <= top; v += step) {
    double y = TP + PH - (double)PH * (double)v / (double)top;
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
               "stroke=\"black\"/>\n",
            right ? L + PW : L - 5, y, right ? L + PW + 5 : L, y);
    fprintf(f, "<text class=\"tick-y%s\" x=\"%d\" y=\"%.1f\" "
               "text-anchor=\"%s\" fill=\"%s\">%lld</text>\n",
            right ? "2" : "", right ? L + PW + 8 : L - 8, y + 4,
            right ? "start" : "end", color, (long long)v);
    if (!right && v > 0)
      fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                 "stroke=\"#dddddd\"/>\n", L, y, L + PW, y);
  }
}

static void axis_title(FILE *f, int right, const char *color,
                       const char *text) {
  int x = right ? W - 18 : 20;
  fprintf(f, "<text class=\"axis-y%s\" x=\"%d\" y=\"%d\" "
             "transform=\"rotate(%d %d %d)\" text-anchor=\"middle\" "
             "fill=\"%s\">",
          right ? "2" : "", x, TP + PH / 2, right ? 90 : -90, x, TP + PH / 2,
          color);
  esc(f, text);
  fputs("</text>\n", f);
}

int sim_plot_write(const sim_plot *p, FILE *f) {
  int i, c, minutes = p->dur_ns > 1800 * S_NS;
  double unit = minutes ? 60.0 * S_NS : (double)S_NS, dur_u, tstep, t;
  int64_t bar_max = 0, line_top = 0, line_step = 1, bar_top, bar_step;
  int bars_right = p->line_label != NULL;
  char buf[96];
  double lx;
  int ly;

  for (c = 0; c < p->ncol; c++) {
    int64_t sum = 0;
    for (i = 0; i < p->nseries; i++)
      sum += p->series[i].v[c];
    if (sum > bar_max)
      bar_max = sum;
  }
  count_axis(bar_max, &bar_top, &bar_step);
  if (p->line_label) {
    int64_t lm = p->line_max;
    for (c = 0; c < p->ncol; c++)
      if (p->line_has[c] && p->line[c] > lm)
        lm = p->line[c];
    count_axis(lm, &line_top, &line_step);
  }

  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
             "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
             "font-size=\"12\">\n"
             "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
             "<text class=\"title\" x=\"%d\" y=\"22\" font-size=\"16\" "
             "font-weight=\"bold\">",
          W, H, W, H, L);
  esc(f, p->title);
  fprintf(f, "</text>\n<text class=\"subtitle\" x=\"%d\" y=\"42\" "
             "font-size=\"13\" fill=\"#333333\">", L);
  esc(f, p->subtitle);
  fputs("</text>\n", f);

  /* Shaded spans first, under everything. */
  for (i = 0; i < p->nspans; i++) {
    const plot_span *sp = &p->spans[i];
    double x0 = x_of(p, sp->from_ns), x1 = x_of(p, sp->to_ns);
    /* shaded over the plot, and a solid band above it */
    fprintf(f, "<rect class=\"span\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
               "height=\"%d\" fill=\"%s\" fill-opacity=\"0.16\"/>\n"
               "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"6\" "
               "fill=\"%s\"/>\n",
            x0, TP, x1 - x0 < 1 ? 1 : x1 - x0, PH, sp->color, x0, TP - 6,
            x1 - x0 < 1 ? 1 : x1 - x0, sp->color);
  }

  /* Stacked bars. */
  for (c = 0; c < p->ncol; c++) {
    double x = L + (double)PW * c / p->ncol, w = (double)PW / p->ncol;
    double base = TP + PH;
    for (i = 0; i < p->nseries; i++) {
      double h;
      if (!p->series[i].v[c])
        continue;
      h = (double)PH * (double)p->series[i].v[c] / (double)bar_top;
      fprintf(f, "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                 "height=\"%.2f\" fill=\"%s\"/>\n",
              x, base - h, w > 1.2 ? w - 0.3 : w, h, p->series[i].color);
      base -= h;
    }
  }

  /* The line, broken where a bar has no value. */
  if (p->line_label) {
    int open = 0;
    for (c = 0; c < p->ncol; c++) {
      if (!p->line_has[c]) {
        if (open)
          fputs("\"/>\n", f);
        open = 0;
        continue;
      }
      if (!open)
        fputs("<polyline class=\"line\" fill=\"none\" stroke=\"#1f5fa8\" "
              "stroke-width=\"2\" points=\"", f);
      fprintf(f, "%s%.1f,%.1f", open ? " " : "",
              L + (double)PW * (c + 0.5) / p->ncol,
              TP + PH - (double)PH * (double)p->line[c] / (double)line_top);
      open = 1;
    }
    if (open)
      fputs("\"/>\n", f);
  }

  /* Marks: a dashed line and a label, labels staggered on three rows. */
  for (i = 0; i < p->nmarks; i++) {
    const plot_mark *m = &p->marks[i];
    double x = x_of(p, m->t_ns);
    int right_half = x > L + PW * 0.7;
    fprintf(f, "<line class=\"mark\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" "
               "y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"5 3\"/>\n",
            x, TP, x, TP + PH, m->color);
    label(f, "mark-label", right_half ? x - 3 : x + 3, TP + 20 + 18 * (i % 4),
          right_half, m->color, m->label);
  }

  /* Span labels above the plot, on two rows so neighbours do not collide. */
  for (i = 0; i < p->nspans; i++) {
    const plot_span *sp = &p->spans[i];
    label(f, "span-label", x_of(p, sp->from_ns), TP - 30 + 15 * (i % 2) - 3,
          0, sp->color, sp->label);
  }

  /* Axes and ticks. */
  fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
             "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
          L, TP, L, TP + PH, L, TP + PH, L + PW, TP + PH);
  if (bars_right)
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
               "stroke=\"black\"/>\n", L + PW, TP, L + PW, TP + PH);
  dur_u = (double)p->dur_ns / unit;
  tstep = sim_plot_nice_step(dur_u, 10);
  for (t = 0; t <= dur_u + 1e-9; t += tstep) {
    double x = L + PW * t / dur_u;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
               "stroke=\"black\"/>\n"
               "<text class=\"tick-x\" x=\"%.1f\" y=\"%d\" "
               "text-anchor=\"middle\">%g</text>\n",
            x, TP + PH, x, TP + PH + 5, x, TP + PH + 19, t);
  }
  snprintf(buf, sizeof buf, "time since the start (%s); one bar = %lld s",
           minutes ? "minutes" : "seconds", (long long)(p->col_ns / S_NS));
  fprintf(f, "<text class=\"axis-x\" x=\"%d\" y=\"%d\" "
             "text-anchor=\"middle\">%s</text>\n",
          L + PW / 2, H - 12, buf);
  if (p->line_label) {
    y_ticks(f, line_top, line_step, 0, "#1f5fa8");
    axis_title(f, 0, "#1f5fa8", p->line_label);
  }
  snprintf(buf, sizeof buf, "requests per %lld s bar",
           (long long)(p->col_ns / S_NS));
  y_ticks(f, bar_top, bar_step, bars_right, "black");
  axis_title(f, bars_right, "black", buf);

  /* Legend under the subtitle: the line, then each series with its total
  ** (a zero is part of the answer); a second row when the first is full. */
  lx = L;
  ly = 64;
  if (p->line_label) {
    fprintf(f, "<line class=\"legend\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" "
               "y2=\"%d\" stroke=\"#1f5fa8\" stroke-width=\"2\"/>\n"
               "<text class=\"legend\" x=\"%.1f\" y=\"%d\">",
            lx, ly, lx + 18, ly, lx + 22, ly + 4);
    esc(f, p->line_label);
    fputs("</text>\n", f);
    lx += 40 + 6.5 * (double)strlen(p->line_label);
  }
  for (i = 0; i < p->nseries; i++) {
    int64_t tot = 0;
    double wd;
    for (c = 0; c < p->ncol; c++)
      tot += p->series[i].v[c];
    snprintf(buf, sizeof buf, "%s (%lld)", p->series[i].label, (long long)tot);
    wd = 36 + 6.5 * (double)strlen(buf);
    if (lx + wd > W - R / 2 && lx > L) {
      lx = L;
      ly += 17;
    }
    fprintf(f, "<rect class=\"legend\" x=\"%.1f\" y=\"%d\" width=\"12\" "
               "height=\"12\" fill=\"%s\"/>\n"
               "<text class=\"legend\" x=\"%.1f\" y=\"%d\">",
            lx, ly - 6, p->series[i].color, lx + 16, ly + 4);
    esc(f, buf);
    fputs("</text>\n", f);
    lx += wd;
  }
  fputs("</svg>\n", f);
  return ferror(f) ? -1 : 0;
}

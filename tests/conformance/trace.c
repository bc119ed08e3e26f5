/* The trace reader and checker (see trace.h).  Kept free of Criterion so
** that the same replay can run from a fuzzer or a tool. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "../common/one_step.h"

#define MAXP 16

typedef struct pdef {
  char name[16];
  int algo;
  union {
    sluice_gcra_params g;
    sluice_window_params w;
    sluice_penalty_params p;
    sluice_lease_params l;
    sluice_distinct_params d;
  } u;
} pdef;

typedef struct ctx {
  pdef p[MAXP];
  int np;
  char *report;
  size_t len, used;
  int bad;
} ctx;

static void complain(ctx *c, int line, const char *fmt, ...) {
  va_list ap;
  int n;
  c->bad++;
  if (c->used + 1 >= c->len)
    return;
  n = snprintf(c->report + c->used, c->len - c->used, "line %d: ", line);
  if (n > 0)
    c->used += (size_t)n;
  if (c->used + 1 >= c->len)
    return;
  va_start(ap, fmt);
  n = vsnprintf(c->report + c->used, c->len - c->used, fmt, ap);
  va_end(ap);
  if (n > 0)
    c->used += (size_t)n;
  if (c->used + 1 < c->len) {
    c->report[c->used++] = '\n';
    c->report[c->used] = '\0';
  }
  if (c->used >= c->len)
    c->used = c->len - 1;
}

static int64_t ms(const char *s) {
  long long v;
  if (strcmp(s, "forever") == 0)
    return SLUICE_FOREVER;
  v = strtoll(s, NULL, 10);
  /* Out-of-range times saturate; the op then fails validation or runs at
  ** the edge, either of which the expectations can state. */
  if (v > INT64_MAX / 1000000)
    return INT64_MAX;
  if (v < INT64_MIN / 1000000)
    return INT64_MIN;
  return (int64_t)v * 1000000;
}

static int parse_param(ctx *c, char *rest, int line) {
  char *tok[10];
  int n = 0;
  pdef *d;
  for (char *t = strtok(rest, " \t\n"); t && n < 10; t = strtok(NULL, " \t\n"))
    tok[n++] = t;
  if (n < 2 || c->np == MAXP) {
    complain(c, line, "bad param line");
    return -1;
  }
  d = &c->p[c->np];
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "%s", tok[0]);
  if (strcmp(tok[1], "gcra") == 0 && n == 5) {
    d->algo = SLUICE_ALGO_GCRA;
    d->u.g.rate = strtoll(tok[2], NULL, 10);
    d->u.g.period_ns = ms(tok[3]);
    d->u.g.burst = strtoll(tok[4], NULL, 10);
  } else if ((strcmp(tok[1], "swindow") == 0 ||
              strcmp(tok[1], "fwindow") == 0) && n == 4) {
    d->algo = tok[1][0] == 's' ? SLUICE_ALGO_SWINDOW : SLUICE_ALGO_FWINDOW;
    d->u.w.limit = strtoll(tok[2], NULL, 10);
    d->u.w.window_ns = ms(tok[3]);
  } else if (strcmp(tok[1], "penalty") == 0 && n == 8) {
    d->algo = SLUICE_ALGO_PENALTY;
    d->u.p.strike_threshold = strtoll(tok[2], NULL, 10);
    d->u.p.strike_window_ns = ms(tok[3]);
    d->u.p.box_ns[0] = ms(tok[4]);
    d->u.p.box_ns[1] = ms(tok[5]);
    d->u.p.box_ns[2] = ms(tok[6]);
    d->u.p.offense_ttl_ns = ms(tok[7]);
  } else if (strcmp(tok[1], "lease") == 0 && n == 4) {
    d->algo = SLUICE_ALGO_LEASE;
    d->u.l.max = strtoll(tok[2], NULL, 10);
    d->u.l.ttl_ns = ms(tok[3]);
  } else if (strcmp(tok[1], "distinct") == 0 && n == 4) {
    d->algo = SLUICE_ALGO_DISTINCT;
    d->u.d.threshold = strtoll(tok[2], NULL, 10);
    d->u.d.window_ns = ms(tok[3]);
  } else {
    complain(c, line, "unknown param form");
    return -1;
  }
  c->np++;
  return 0;
}

static const pdef *find_param(ctx *c, const char *name) {
  for (int i = 0; i < c->np; i++)
    if (strcmp(c->p[i].name, name) == 0)
      return &c->p[i];
  return NULL;
}

static const struct {
  const char *name;
  int kind;
} kinds[] = {{"consume", SLUICE_OP_CONSUME}, {"peek", SLUICE_OP_PEEK},
             {"count", SLUICE_OP_COUNT},     {"check", SLUICE_OP_CHECK},
             {"strike", SLUICE_OP_STRIKE},   {"trip", SLUICE_OP_TRIP},
             {"release", SLUICE_OP_RELEASE}, {"acquire", SLUICE_OP_ACQUIRE},
             {"lrelease", SLUICE_OP_LEASE_RELEASE},
             {"renew", SLUICE_OP_RENEW},     {"add", SLUICE_OP_ADD},
             {"adjust", SLUICE_OP_ADJUST}};

static int err_by_name(const char *n) {
  static const struct {
    const char *n;
    int code;
  } e[] = {
#define XX(name, code, msg) {#name, code},
      SLUICE_ERRNO_MAP(XX)
#undef XX
  };
  for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
    if (strcmp(e[i].n, n) == 0)
      return e[i].code;
  return 1; /* never a real result */
}

typedef struct expect {
  int error;
  int64_t f[12];
} expect;

enum { F_ALLOWED, F_REMAINING, F_LIMIT, F_RETRY, F_RESET, F_LEVEL, F_STRIKES,
       F_OFFENSES, F_FLAGS, F_BINDING, F_LEASE, F_NOW };
static const char *const fname[12] = {"allowed", "remaining", "limit",
                                      "retry",   "reset",     "level",
                                      "strikes", "offenses",  "flags",
                                      "binding", "lease",     "now"};

static void verdict_fields(const sluice_verdict *v, int64_t *f) {
  f[F_ALLOWED] = v->allowed;
  f[F_REMAINING] = v->remaining;
  f[F_LIMIT] = v->limit;
  f[F_RETRY] = v->retry_after_ns;
  f[F_RESET] = v->reset_ns;
  f[F_LEVEL] = v->level;
  f[F_STRIKES] = v->strikes_remaining;
  f[F_OFFENSES] = v->offenses;
  f[F_FLAGS] = (int64_t)v->flags;
  f[F_BINDING] = v->binding;
  f[F_LEASE] = (int64_t)v->lease_id;
  f[F_NOW] = v->now_ns;
}

static int run_line(ctx *c, sluice_limiter *lim, sluice_clock *clk, char *s, const char *tag,
                    int line) {
  char *arrow = strstr(s, "=>");
  char *tok[8];
  int n = 0, kind = -1;
  char keybuf[SLUICE_GROUP_MAX][96];
  sluice_key keys[SLUICE_GROUP_MAX];
  sluice_gcra_params gp[SLUICE_GROUP_MAX];
  const pdef *pd[SLUICE_GROUP_MAX];
  int npd = 0, nk = 0;
  expect ex;
  sluice_op op;
  sluice_verdict v;
  int64_t t;
  int rc;

  if (!arrow) {
    complain(c, line, "missing =>");
    return -1;
  }
  *arrow = '\0';
  memset(&op, 0, sizeof op);
  for (char *x = strtok(s, " \t"); x && n < 8; x = strtok(NULL, " \t"))
    tok[n++] = x;
  if (n != 6) {
    complain(c, line, "expected 6 fields before =>");
    return -1;
  }
  t = ms(tok[0]);
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(kinds[i].name, tok[1]) == 0)
      kind = kinds[i].kind;
  for (char *x = strtok(tok[2], "+"); x; x = strtok(NULL, "+")) {
    if (npd == SLUICE_GROUP_MAX || !(pd[npd] = find_param(c, x))) {
      complain(c, line, "unknown params %s", x);
      return -1;
    }
    npd++;
  }
  if (kind < 0 || npd == 0) {
    complain(c, line, "bad kind or params");
    return -1;
  }
  for (int i = 1; i < npd; i++)
    if (pd[i]->algo != pd[0]->algo) {
      complain(c, line, "params of different algorithms in one group");
      return -1;
    }
  for (char *x = strtok(tok[3], "+"); x && nk < SLUICE_GROUP_MAX;
       x = strtok(NULL, "+")) {
    snprintf(keybuf[nk], sizeof keybuf[nk], "{%s}:%s", tag, x);
    nk++;
  }
  /* A lease set's slots are its keys; out-of-range sizes keep the keys as
  ** written so the library's own parameter check gets to reject them. */
  if (pd[0]->algo == SLUICE_ALGO_LEASE && nk > 0 && pd[0]->u.l.max >= 1 &&
      pd[0]->u.l.max <= SLUICE_GROUP_MAX) {
    char base[80];
    snprintf(base, sizeof base, "%.70s", keybuf[0]);
    nk = (int)pd[0]->u.l.max;
    for (int i = 0; i < nk; i++)
      snprintf(keybuf[i], sizeof keybuf[i], "%s:%d", base, i);
  }
  for (int i = 0; i < nk; i++) {
    keys[i].data = keybuf[i];
    keys[i].len = strlen(keybuf[i]);
  }
  memset(&op, 0, sizeof op);
  op.algo = pd[0]->algo;
  op.kind = kind;
  op.nkeys = nk;
  op.keys = keys;
  op.arg = strtoll(tok[4], NULL, 10);
  op.id = strtoull(tok[5], NULL, 0);
  if (op.algo == SLUICE_ALGO_GCRA) {
    /* A group carries one params entry per key and the library reads all
    ** nkeys of them; it cannot know the array is shorter. */
    if (npd != nk) {
      complain(c, line, "%d params for %d keys", npd, nk);
      return -1;
    }
    for (int i = 0; i < npd; i++)
      gp[i] = pd[i]->u.g;
    op.params = gp;
  } else {
    op.params = &pd[0]->u;
  }

  memset(&ex, 0, sizeof ex);
  ex.f[F_NOW] = t;
  for (char *x = strtok(arrow + 2, " \t\n"); x; x = strtok(NULL, " \t\n")) {
    char *eq = strchr(x, '=');
    int found = 0;
    if (!eq) {
      complain(c, line, "bad expectation %s", x);
      return -1;
    }
    *eq = '\0';
    if (strcmp(x, "error") == 0) {
      ex.error = err_by_name(eq + 1);
      found = 1;
    }
    for (int i = 0; i < 12 && !found; i++)
      if (strcmp(x, fname[i]) == 0) {
        ex.f[i] = strtoll(eq + 1, NULL, 0);
        found = 1;
      }
    if (!found) {
      complain(c, line, "unknown field %s", x);
      return -1;
    }
  }

  sluice_clock_set(clk, t);
  rc = op_decide(lim, &op, SLUICE_NOW, &v);
  if (ex.error) {
    if (rc != ex.error)
      complain(c, line, "expected %s, got %s (%s)", sluice_err_name(ex.error),
               sluice_err_name(rc), sluice_limiter_errmsg(lim));
    return 0;
  }
  if (rc != SLUICE_OK) {
    complain(c, line, "%s: %s", sluice_err_name(rc),
             sluice_limiter_errmsg(lim));
    return 0;
  }
  {
    int64_t got[12];
    verdict_fields(&v, got);
    for (int i = 0; i < 12; i++)
      if (got[i] != ex.f[i])
        complain(c, line, "%s: expected %" PRId64 ", got %" PRId64, fname[i],
                 ex.f[i], got[i]);
  }
  return 0;
}

int trace_replay(sluice_limiter *lim, sluice_clock *clk, const char *path, const char *tag,
                 char *report, size_t len) {
  ctx c;
  char buf[512];
  int line = 0;
  FILE *f = fopen(path, "r");
  memset(&c, 0, sizeof c);
  c.report = report;
  c.len = len;
  if (len)
    report[0] = '\0';
  if (!f) {
    complain(&c, 0, "cannot open %s", path);
    return c.bad;
  }
  while (fgets(buf, sizeof buf, f)) {
    char *s = buf;
    line++;
    while (*s == ' ' || *s == '\t')
      s++;
    if (*s == '#' || *s == '\n' || *s == '\0')
      continue;
    if (strncmp(s, "param ", 6) == 0)
      parse_param(&c, s + 6, line);
    else
      run_line(&c, lim, clk, s, tag, line);
  }
  fclose(f);
  return c.bad;
}

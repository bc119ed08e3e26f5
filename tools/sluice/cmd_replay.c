/*
** sluice replay --algo gcra: run a CSV trace (t_ms,key,cost) through one
** GCRA bucket per key, optionally behind the penalty ladder, and print one
** decision per line.  It is the offline simulator of the algorithm layer:
** the same store operations the policy layer makes, at explicit times.
**
** With penalty options, each request runs the spec's section-6 order: box
** check first (a boxed key is refused without bucket work or strikes), then
** the bucket, and a throttled request records a strike that may trip the
** box (reported as "boxed" on the tripping line, like the spec's script).
**
** Input is read in large blocks and output is formatted by hand: the tool
** is expected to replay millions of decisions per second.  Without the
** penalty ladder, consecutive lines of the same t_ms go to the store as
** one sluice_limiter_apply_many() batch (up to BATCH lines) at that time,
** on the limiter's manual clock: the store decides them in order, exactly
** as one by one, and overlaps their memory misses on a big key set.  (With
** the ladder each line is three dependent steps, so lines go one by one.)
*/
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opt_int.h"
#include "sluice.h"

#define NS_PER_MS 1000000
#define BATCH 16

/* A line waiting in the batch: where it is, and its op's key. */
typedef struct pending {
  const char *line;
  size_t len;
  long lineno;
  int64_t cost;
  char kbuf[SLUICE_KEY_MAX + 8];
  sluice_key k;
} pending;

typedef struct replay {
  sluice_limiter *lim;
  sluice_clock *clock; /* the limiter's, manual: a batch runs at its t */
  pending batch[BATCH];
  int nbatch, batch_max;
  int64_t batch_t; /* ns */
  sluice_gcra_params g;
  sluice_penalty_params p;
  int penalty;
  cli_out out;
  int64_t last_t;
  long bad;
} replay;

static void replay_usage(FILE *f) {
  fprintf(f,
      "usage: sluice replay --algo gcra --rate R --period-ms P --burst B\n"
      "         [--strike-threshold N --strike-window-ms W\n"
      "          --box-ms L1,L2,L3 --offense-ttl-ms O]\n"
      "         [--backend STORE] [--batch N] FILE|-\n"
      "       sluice replay --policy CONFIG ... LOG  (see --policy --help)\n\n"
      "Replays CSV lines `t_ms,key,cost` (t_ms non-decreasing, # comments)\n"
      "through a GCRA bucket of R points per P ms with burst B, one bucket\n"
      "per key.  The four penalty options together add the penalty ladder\n"
      "(box durations may be `forever`).  STORE is a store string such as\n"
      "`mem` (default) or `lmdb:path=/tmp/x`.  Without the penalty options,\n"
      "up to N (1-16, default 16) consecutive lines of one t_ms go to the\n"
      "store as one batch (the same decisions as one by one).\n\n"
      "Output: t_ms,key,cost,status,remaining,retry_after_ms,reset_ms,level,"
      "strikes_remaining\n"
      "with status allowed|throttled|boxed and times rounded up to whole ms\n"
      "(`forever` for a suspension).  Malformed lines are reported on stderr\n"
      "with their line number and get no output line.\n\n"
      "exit codes: 0 ok, 1 malformed input lines, 2 usage, 3 store failure\n");
}

static char *fmt_ms(char *p, int64_t ns) {
  if (ns == SLUICE_FOREVER) {
    memcpy(p, "forever", 7);
    return p + 7;
  }
  return cli_fmt_i64(p, ns / NS_PER_MS + (ns % NS_PER_MS != 0));
}

/* The input line, then the decision; formatted straight into the output
** buffer (a line longer than the buffer goes out in two writes). */
static void emit(replay *r, const char *line, size_t len, const char *st,
                 int64_t remaining, int64_t retry, int64_t reset, int level,
                 int64_t strikes) {
  char tail[16 + 5 * (CLI_I64_MAX + 1) + 2], *p = tail, *dst;
  size_t sl = strlen(st), tl;
  *p++ = ',';
  memcpy(p, st, sl);
  p += sl;
  *p++ = ',';
  p = cli_fmt_i64(p, remaining);
  *p++ = ',';
  p = fmt_ms(p, retry);
  *p++ = ',';
  p = fmt_ms(p, reset);
  *p++ = ',';
  p = cli_fmt_i64(p, level);
  *p++ = ',';
  p = cli_fmt_i64(p, strikes);
  *p++ = '\n';
  tl = (size_t)(p - tail);
  dst = cli_out_reserve(&r->out, len + tl);
  if (!dst) {
    cli_out_str(&r->out, line, len);
    cli_out_str(&r->out, tail, tl);
    return;
  }
  memcpy(dst, line, len);
  memcpy(dst + len, tail, tl);
  r->out.n += len + tl;
}

static int store_fail(replay *r, long lineno, int rc) {
  cli_out_flush(&r->out);
  fprintf(stderr, "sluice replay: line %ld: store error %s: %s\n", lineno,
          sluice_strerror(rc), sluice_limiter_errmsg(r->lim));
  return CLI_RUNTIME;
}

static void emit_gcra(replay *r, const char *s, size_t n,
                      const sluice_verdict *v) {
  if (v->allowed)
    emit(r, s, n, "allowed", v->remaining, 0, v->reset_ns, 0, 0);
  else
    emit(r, s, n, "throttled", v->remaining, v->retry_after_ns, v->reset_ns,
         0, 0);
}

/* Decide the batch's lines (one apply_many at its time) and print them in
** order.  The lines must still be in the input buffer. */
static int flush_batch(replay *r) {
  sluice_op ops[BATCH];
  sluice_verdict v[BATCH];
  int rcs[BATCH], i, n = r->nbatch, rc;
  if (n == 0)
    return CLI_OK;
  r->nbatch = 0;
  for (i = 0; i < n; i++) {
    memset(&ops[i], 0, sizeof ops[i]);
    ops[i].algo = SLUICE_ALGO_GCRA;
    ops[i].kind = SLUICE_OP_CONSUME;
    ops[i].nkeys = 1;
    ops[i].keys = &r->batch[i].k;
    ops[i].params = &r->g;
    ops[i].arg = r->batch[i].cost;
  }
  sluice_clock_set(r->clock, r->batch_t);
  rc = sluice_limiter_apply_many(r->lim, n, ops, v, rcs);
  if (rc != SLUICE_OK)
    return store_fail(r, r->batch[0].lineno, rc);
  for (i = 0; i < n; i++) {
    if (rcs[i] != SLUICE_OK)
      return store_fail(r, r->batch[i].lineno, rcs[i]);
    emit_gcra(r, r->batch[i].line, r->batch[i].len, &v[i]);
  }
  return CLI_OK;
}

/* Queue a line's op (no penalty ladder); a batch of another time, or a
** full one, is decided first. */
static int queue_line(replay *r, const char *s, size_t n, long lineno,
                      int64_t t, const char *key, size_t klen, int64_t cost) {
  pending *p;
  if (r->nbatch > 0 && (t != r->batch_t || r->nbatch == r->batch_max) &&
      flush_batch(r) != CLI_OK)
    return CLI_RUNTIME;
  r->batch_t = t;
  p = &r->batch[r->nbatch++];
  p->line = s;
  p->len = n;
  p->lineno = lineno;
  p->cost = cost;
  memcpy(p->kbuf, "tb:", 3);
  memcpy(p->kbuf + 3, key, klen);
  p->k.data = p->kbuf;
  p->k.len = klen + 3;
  return CLI_OK;
}

static void malformed(replay *r, long lineno, const char *why) {
  r->bad++;
  fprintf(stderr, "sluice replay: line %ld: %s\n", lineno, why);
}

/* One input line (without its newline).  Returns CLI_OK or CLI_RUNTIME. */
static int replay_line(void *ud, const char *s, size_t n, long lineno) {
  replay *r = ud;
  const char *c1, *c2, *why;
  char wbuf[80], msg[96];
  int64_t t, cost = 0;
  int cost_bad;
  char kbuf[SLUICE_KEY_MAX + 8];
  size_t klen;
  sluice_key k;
  sluice_op op;
  sluice_verdict v, pv;
  int rc;

  while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' '))
    n--;
  if (n == 0 || s[0] == '#')
    return CLI_OK;
  c1 = memchr(s, ',', n);
  c2 = c1 ? memchr(c1 + 1, ',', n - (size_t)(c1 + 1 - s)) : NULL;
  /* A fourth field can only hide in what should be the cost, so it is
  ** looked for only when the cost does not parse. */
  cost_bad = !c2 || cli_parse_i64(c2 + 1, n - (size_t)(c2 + 1 - s), &cost);
  if (!c1 || !c2 ||
      (cost_bad && memchr(c2 + 1, ',', n - (size_t)(c2 + 1 - s)))) {
    malformed(r, lineno, "expected 3 fields: t_ms,key,cost");
    return CLI_OK;
  }
  if ((why = cli_parse_t_ms(s, (size_t)(c1 - s), &t, wbuf, sizeof wbuf))) {
    snprintf(msg, sizeof msg, "t_ms: %s", why);
    malformed(r, lineno, msg);
    return CLI_OK;
  }
  if (t < r->last_t) {
    malformed(r, lineno, "t_ms goes backwards");
    return CLI_OK;
  }
  klen = (size_t)(c2 - c1 - 1);
  if (klen == 0 || klen > SLUICE_KEY_MAX - 3) {
    malformed(r, lineno, "key is empty or longer than 509 bytes");
    return CLI_OK;
  }
  if (cost_bad) {
    malformed(r, lineno, "cost is not an integer");
    return CLI_OK;
  }
  if (cost < 1 || cost > r->g.burst) {
    malformed(r, lineno, "cost must be between 1 and the burst");
    return CLI_OK;
  }
  r->last_t = t;
  t *= NS_PER_MS;
  if (!r->penalty)
    return queue_line(r, s, n, lineno, t, c1 + 1, klen, cost);
  /* One bucket and one penalty record per key, told apart by a prefix. */
  memcpy(kbuf, "pb:", 3);
  memcpy(kbuf + 3, c1 + 1, klen);
  k.data = kbuf;
  k.len = klen + 3;
  memset(&op, 0, sizeof op);
  op.nkeys = 1;
  op.keys = &k;
  op.algo = SLUICE_ALGO_PENALTY;
  op.kind = SLUICE_OP_CHECK;
  op.params = &r->p;
  rc = sluice_limiter_apply_at(r->lim, &op, t, &pv);
  if (rc != SLUICE_OK)
    return store_fail(r, lineno, rc);
  if (!pv.allowed) {
    emit(r, s, n, "boxed", 0, pv.retry_after_ns, pv.retry_after_ns, pv.level,
         0);
    return CLI_OK;
  }
  kbuf[0] = 't';
  kbuf[1] = 'b';
  op.algo = SLUICE_ALGO_GCRA;
  op.kind = SLUICE_OP_CONSUME;
  op.params = &r->g;
  op.arg = cost;
  rc = sluice_limiter_apply_at(r->lim, &op, t, &v);
  if (rc != SLUICE_OK)
    return store_fail(r, lineno, rc);
  if (v.allowed) {
    emit(r, s, n, "allowed", v.remaining, 0, v.reset_ns, 0,
         pv.strikes_remaining);
    return CLI_OK;
  }
  kbuf[0] = 'p';
  op.algo = SLUICE_ALGO_PENALTY;
  op.kind = SLUICE_OP_STRIKE;
  op.params = &r->p;
  op.arg = 0;
  rc = sluice_limiter_apply_at(r->lim, &op, t, &pv);
  if (rc != SLUICE_OK)
    return store_fail(r, lineno, rc);
  if (pv.flags & SLUICE_V_TRIPPED)
    emit(r, s, n, "boxed", 0, pv.retry_after_ns, pv.retry_after_ns, pv.level,
         0);
  else
    emit(r, s, n, "throttled", v.remaining, v.retry_after_ns, v.reset_ns, 0,
         pv.strikes_remaining);
  return CLI_OK;
}

static int batch_done(void *ud) { return flush_batch(ud); }

static void too_long(void *ud, long lineno) {
  malformed(ud, lineno, "line longer than 1 MiB");
}

static int replay_stream(replay *r, FILE *in) {
  /* The batch points into the reader's buffer: decided block by block. */
  cli_lines cb = {"replay", replay_line, batch_done, too_long, r};
  long lines;
  return cli_read_lines(in, &cb, &lines);
}

int cli_replay(int argc, char **argv) {
  static const struct option opts[] = {
      {"algo", required_argument, 0, 'a'},
      {"rate", required_argument, 0, 'r'},
      {"period-ms", required_argument, 0, 'p'},
      {"burst", required_argument, 0, 'b'},
      {"strike-threshold", required_argument, 0, 's'},
      {"strike-window-ms", required_argument, 0, 'w'},
      {"box-ms", required_argument, 0, 'x'},
      {"offense-ttl-ms", required_argument, 0, 'o'},
      {"backend", required_argument, 0, 'B'},
      {"batch", required_argument, 0, 'N'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  replay r;
  const char *backend = "mem", *algo = NULL;
  int64_t period_ms = 0, v;
  int npen = 0, c, rc;
  FILE *in;
  sluice_limiter_options lo = {0};
  char err[256];

  memset(&r, 0, sizeof r);
  r.batch_max = BATCH;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'a':
      algo = optarg;
      break;
    case 'r':
      if (ex_opt_int("sluice replay", "--rate", optarg, 1, (int64_t)1 << 32,
                     &r.g.rate))
        return CLI_USAGE;
      break;
    case 'p':
      if (ex_opt_int("sluice replay", "--period-ms", optarg, 1,
                     SLUICE_DURATION_MAX / NS_PER_MS, &period_ms))
        return CLI_USAGE;
      break;
    case 'b':
      if (ex_opt_int("sluice replay", "--burst", optarg, 1, SLUICE_COUNT_MAX,
                     &r.g.burst))
        return CLI_USAGE;
      break;
    case 's':
      if (ex_opt_int("sluice replay", "--strike-threshold", optarg, 1,
                     (1 << 20) - 1, &v))
        return CLI_USAGE;
      r.p.strike_threshold = v;
      npen++;
      break;
    case 'w':
      if (ex_opt_int("sluice replay", "--strike-window-ms", optarg, 1,
                     SLUICE_DURATION_MAX / NS_PER_MS, &v))
        return CLI_USAGE;
      r.p.strike_window_ns = v * NS_PER_MS;
      npen++;
      break;
    case 'x':
      if (cli_parse_ms_list(optarg, r.p.box_ns, 3)) {
        fprintf(stderr, "sluice replay: --box-ms: expected L1,L2,L3 in ms "
                        "(or forever), got '%s'\n", optarg);
        return CLI_USAGE;
      }
      npen++;
      break;
    case 'o':
      if (ex_opt_int("sluice replay", "--offense-ttl-ms", optarg, 1,
                     SLUICE_DURATION_MAX / NS_PER_MS, &v))
        return CLI_USAGE;
      r.p.offense_ttl_ns = v * NS_PER_MS;
      npen++;
      break;
    case 'B':
      if (cli_store_arg("replay", "--backend", optarg))
        return CLI_USAGE;
      backend = optarg;
      break;
    case 'N':
      if (ex_opt_int("sluice replay", "--batch", optarg, 1, BATCH, &v))
        return CLI_USAGE;
      r.batch_max = (int)v;
      break;
    case 'h':
      replay_usage(stdout);
      return CLI_OK;
    default:
      fprintf(stderr, "sluice replay: unknown or incomplete option '%s'\n",
              argv[optind - 1]);
      replay_usage(stderr);
      return CLI_USAGE;
    }
  }
  if (!algo || strcmp(algo, "gcra") != 0) {
    fprintf(stderr, "sluice replay: --algo: only 'gcra' is supported%s%s\n",
            algo ? ", got " : "", algo ? algo : " (missing)");
    return CLI_USAGE;
  }
  if (!r.g.rate || !period_ms || !r.g.burst) {
    fprintf(stderr, "sluice replay: --rate, --period-ms and --burst are "
                    "required\n");
    return CLI_USAGE;
  }
  r.g.period_ns = period_ms * NS_PER_MS;
  if (sluice_gcra_params_check(&r.g) != SLUICE_OK) {
    fprintf(stderr, "sluice replay: burst x period is too large\n");
    return CLI_USAGE;
  }
  if (npen != 0 && npen != 4) {
    fprintf(stderr, "sluice replay: the penalty ladder needs all of "
                    "--strike-threshold, --strike-window-ms, --box-ms and "
                    "--offense-ttl-ms\n");
    return CLI_USAGE;
  }
  r.penalty = npen == 4;
  if (r.penalty && sluice_penalty_params_check(&r.p) != SLUICE_OK) {
    fprintf(stderr, "sluice replay: invalid penalty parameters\n");
    return CLI_USAGE;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "sluice replay: expected exactly one FILE (or -)\n");
    return CLI_USAGE;
  }
  if (!(in = cli_open_input("replay", argv[optind])))
    return CLI_USAGE;
  lo.store = backend;
  /* TESTCLOCK: a store with its own clock (redis) decides at the log's
  ** time too, not at its wall clock. */
  lo.flags = SLUICE_OPEN_CREATE | SLUICE_OPEN_TESTCLOCK;
  if (sluice_clock_manual(0, &r.clock) != SLUICE_OK) {
    fprintf(stderr, "sluice replay: out of memory\n");
    if (in != stdin)
      fclose(in);
    return CLI_RUNTIME;
  }
  lo.clock = r.clock;
  rc = sluice_limiter_open2(&lo, &r.lim, err, sizeof err);
  if (rc != SLUICE_OK) {
    sluice_clock_free(r.clock);
    fprintf(stderr, "sluice replay: --backend %s: %s%s%s\n", backend,
            sluice_strerror(rc), *err ? ": " : "", err);
    if (in != stdin)
      fclose(in);
    return rc == SLUICE_EINVAL ? CLI_USAGE : CLI_RUNTIME;
  }
  r.out.f = stdout;
  {
    static const char hdr[] = "t_ms,key,cost,status,remaining,retry_after_ms,"
                              "reset_ms,level,strikes_remaining\n";
    cli_out_str(&r.out, hdr, sizeof hdr - 1);
  }
  rc = replay_stream(&r, in);
  if (cli_out_flush(&r.out) != 0 && rc == CLI_OK)
    rc = CLI_RUNTIME;
  if (in != stdin)
    fclose(in);
  sluice_limiter_close(r.lim);
  sluice_clock_free(r.clock);
  if (rc == CLI_OK && r.bad > 0)
    rc = CLI_BADINPUT;
  return rc;
}

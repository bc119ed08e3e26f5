/*
** sluice replay --policy CONFIG LOG: the spec's shadow-mode rollout, offline.
** Every line of a request log goes through the whole policy (shadow mode:
** decided and recorded, nothing enforced) at the log's own time, and the
** report says what enforcement would have done: per tier, how many requests
** would have been throttled, boxed, suspended, refused a lease; and which
** keys (IPs, auth subjects) would have been boxed, at which level, when.
**
** Log format (CSV, no quoting, '#' comments, an optional header line):
**   t_ms,tenant,key,tier,method,route,ip[,subject,outcome]
** t_ms non-decreasing.  Auth lines (POST /v1/auth/token) need ip, subject
** and outcome (ok, unknown_client, bad_secret or pending) and may leave
** tenant, key and tier empty.  For a reconcile the 8th field, when given,
** is the ledger id (default: the route).  Leases of heavy requests are held
** for --job-ms of log time (default 0: released right after the decision,
** since a log does not say how long the jobs ran).
**
** Speed: a file is mapped (stdin read in 1 MiB blocks) and split in place;
** with --threads the lines are partitioned by tenant, each partition in
** log order on its own thread with its own policy and store; --decisions
** output is formatted by hand.  With --batch N, consecutive lines of one
** t_ms are decided N at a time by sluice_policy_decide_many() (the same
** decisions); a reconcile or export line ends its batch, since its lease
** is released (or held) before the next line is decided.
*/
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_cmds.h"
#include "sluice.h"

#define MS_NS INT64_C(1000000)
#define NROWS (SLUICE_POLICY_TIERS_MAX + 1)
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
  char tenant[SLUICE_POLICY_ID_MAX + 1], key[SLUICE_POLICY_ID_MAX + 1];
  char tier[SLUICE_POLICY_NAME_MAX + 1], ledger[SLUICE_POLICY_ID_MAX + 1];
  int cls;
} lease_hold;

/* A parsed line waiting for its batch: its fields point into s. */
typedef struct pending {
  char s[4096];
  char *f[10];
  int nf, auth_result;
  int64_t t;
  long lineno;
} pending;

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
  uint64_t n, strikes[NROWS], degraded[NROWS], passed[NROWS];
  /* boxed scopes: open addressing */
  boxed *bx;
  size_t bx_cap, bx_n;
  int64_t cur_ms;
  /* held leases: a FIFO (release times are non-decreasing) */
  lease_hold *lh;
  size_t lh_cap, lh_head, lh_n;
  int oom;
  /* lines of one t_ms decided in one sluice_policy_decide_many() call */
  pending pq[BATCH_MAX];
  int nq, batch_max;
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

static void pr_usage(FILE *f) {
  fprintf(f,
      "usage: sluice replay --policy CONFIG [--decisions] [--job-ms N]\n"
      "                     [--backend STORE] [--enforce] [--batch N] "
      "LOG|-\n\n"
      "Replays a request log through the whole policy in shadow mode (the\n"
      "spec's rollout: decide and record everything, enforce nothing) and\n"
      "reports what would have been throttled per tier and which keys would\n"
      "have been boxed.  CONFIG is a policy file (the defaults, commented,\n"
      "are installed as " SLUICE_CONF_PATH ") or `default` for the\n"
      "built-in defaults.\n\n"
      "LOG lines: t_ms,tenant,key,tier,method,route,ip[,subject,outcome]\n"
      "  auth lines: POST /v1/auth/token with ip, subject and outcome\n"
      "  (ok|unknown_client|bad_secret|pending); tenant, key, tier may be "
      "empty\n"
      "  reconcile lines: the 8th field is the ledger id (default: the "
      "route)\n\n"
      "  --decisions   also print one line per request:\n"
      "                t_ms,tenant,key,tier,method,route,outcome,status,"
      "remaining,\n"
      "                retry_after_ms,level,strikes_remaining\n"
      "  --job-ms N    hold heavy-endpoint leases N ms of log time (0)\n"
      "  --backend S   store string (default mem); the scope-id secret is\n"
      "                16 bytes of 0x3c (for sluice inspect)\n"
      "  --enforce     decide as the configuration says: enforce what it\n"
      "                does not leave in shadow (shadow, shadow_features,\n"
      "                tiers.NAME.shadow_features: the staged rollout)\n"
      "  --batch N     decide up to N (1-16, default 1) consecutive lines of\n"
      "                one t_ms in one sluice_policy_decide_many() call (the\n"
      "                same decisions as one by one; a reconcile or export\n"
      "                line ends its batch, so its lease is released first)\n\n"
      "The report: per tier what would have happened, `passed` (refusals\n"
      "served because their feature is in shadow) and `# not enforced:`,\n"
      "each tier's features in shadow.\n\n"
      "Malformed lines are reported on stderr with their line number and the\n"
      "field at fault, and skipped.\n"
      "exit codes: 0 ok, 1 malformed lines, 2 usage error, 3 store or "
      "system failure\n");
}

static uint64_t fnv(const char *s) {
  uint64_t h = UINT64_C(1469598103934665603);
  while (*s)
    h = (h ^ (unsigned char)*s++) * UINT64_C(1099511628211);
  return h ? h : 1;
}

static int bx_grow(preplay *r) {
  size_t cap = r->bx_cap ? r->bx_cap * 2 : 1024, i;
  boxed *nb = calloc(cap, sizeof *nb);
  if (!nb)
    return -1;
  for (i = 0; i < r->bx_cap; i++) {
    size_t j;
    if (!r->bx[i].name)
      continue;
    for (j = r->bx[i].hash & (cap - 1); nb[j].name; j = (j + 1) & (cap - 1))
      ;
    nb[j] = r->bx[i];
  }
  free(r->bx);
  r->bx = nb;
  r->bx_cap = cap;
  return 0;
}

static void note_box(preplay *r, const char *kind, const char *a,
                     const char *b, int level) {
  char name[2 * SLUICE_POLICY_ID_MAX + 16];
  uint64_t h;
  size_t j;
  snprintf(name, sizeof name, "%s %s%s%s", kind, a ? a : "?", b ? "/" : "",
           b ? b : "");
  h = fnv(name);
  if ((r->bx_n + 1) * 2 > r->bx_cap && bx_grow(r) != 0) {
    r->oom = 1;
    return;
  }
  for (j = h & (r->bx_cap - 1); r->bx[j].name; j = (j + 1) & (r->bx_cap - 1))
    if (r->bx[j].hash == h && !strcmp(r->bx[j].name, name))
      break;
  if (!r->bx[j].name) {
    if (!(r->bx[j].name = strdup(name))) {
      r->oom = 1;
      return;
    }
    r->bx[j].hash = h;
    r->bx[j].first_ms = r->cur_ms;
    r->bx_n++;
  }
  r->bx[j].trips++;
  r->bx[j].last_ms = r->cur_ms;
  if (level > r->bx[j].level)
    r->bx[j].level = level;
}

static void on_event(void *ud, const sluice_event *ev) {
  preplay *r = ud;
  const sluice_request *q = ev->request;
  if (ev->type != SLUICE_EVENT_BOX_TRIP || !q)
    return;
  if (ev->scope == SLUICE_SCOPE_KEY)
    note_box(r, "key", q->tenant_id, q->api_key_id, ev->level);
  else if (ev->scope == SLUICE_SCOPE_IP)
    note_box(r, "ip", q->client_ip, NULL, ev->level);
  else if (ev->scope == SLUICE_SCOPE_SUBJECT)
    note_box(r, "subject", q->auth_subject, NULL, ev->level);
}

static void malformed(preplay *r, long lineno, const char *why,
                      const char *field) {
  r->bad++;
  if (field)
    fprintf(stderr, "sluice replay: line %ld: %s: %s\n", lineno, field, why);
  else
    fprintf(stderr, "sluice replay: line %ld: %s\n", lineno, why);
}

static void release_due(preplay *r, int64_t now_ns, int all) {
  while (r->lh_n) {
    lease_hold *h = &r->lh[r->lh_head];
    sluice_request q;
    if (!all && h->release_ns > now_ns)
      break;
    memset(&q, 0, sizeof q);
    q.tenant_id = h->tenant;
    q.api_key_id = h->key;
    q.tier = h->tier;
    q.endpoint_class = h->cls;
    q.ledger_id = h->ledger;
    (void)sluice_policy_release_lease(r->pol, &q, h->id);
    r->lh_head = (r->lh_head + 1) % r->lh_cap;
    r->lh_n--;
  }
}

static int hold(preplay *r, const sluice_request *q, const sluice_decision *d,
                int64_t now_ns) {
  lease_hold *h;
  if (r->lh_n == r->lh_cap) {
    size_t cap = r->lh_cap ? r->lh_cap * 2 : 256, i;
    lease_hold *nl = malloc(cap * sizeof *nl);
    if (!nl)
      return -1;
    for (i = 0; i < r->lh_n; i++)
      nl[i] = r->lh[(r->lh_head + i) % r->lh_cap];
    free(r->lh);
    r->lh = nl;
    r->lh_cap = cap;
    r->lh_head = 0;
  }
  h = &r->lh[(r->lh_head + r->lh_n) % r->lh_cap];
  h->release_ns = now_ns + r->job_ns;
  h->id = d->lease_id;
  h->cls = d->endpoint_class;
  snprintf(h->tenant, sizeof h->tenant, "%s", q->tenant_id);
  snprintf(h->key, sizeof h->key, "%s", q->api_key_id);
  snprintf(h->tier, sizeof h->tier, "%s", q->tier);
  snprintf(h->ledger, sizeof h->ledger, "%s", q->ledger_id ? q->ledger_id : "");
  r->lh_n++;
  return 0;
}

static void out_ms(cli_out *o, int64_t ns) {
  if (ns == SLUICE_FOREVER)
    cli_out_str(o, "forever", 7);
  else
    cli_out_i64(o, ns / MS_NS + (ns % MS_NS != 0));
}

static void out_s(cli_out *o, const char *s) { cli_out_str(o, s, strlen(s)); }

/* A decided line: the report's counts, its lease, its output line. */
static int pr_decided(preplay *r, const pending *pl, const sluice_request *q,
                      int rc, const sluice_decision *dp) {
  sluice_decision d = *dp;
  int i;
  if (rc != SLUICE_OK) {
    if (rc == SLUICE_EINVAL || rc == SLUICE_ENOTFOUND || rc == SLUICE_EKEY ||
        rc == SLUICE_ERANGE) {
      malformed(r, pl->lineno, sluice_strerror(rc),
                d.invalid_field ? d.invalid_field : "request");
      return CLI_OK;
    }
    cli_out_flush(&r->out);
    fprintf(stderr, "sluice replay: line %ld: store error %s: %s\n",
            pl->lineno, sluice_strerror(rc), sluice_limiter_errmsg(r->lim));
    return CLI_RUNTIME;
  }
  if (r->oom) {
    fprintf(stderr, "sluice replay: out of memory\n");
    return CLI_RUNTIME;
  }
  r->n++;
  {
    int row = SLUICE_POLICY_TIERS_MAX;
    if (d.tier[0]) {
      const sluice_policy_config *c = sluice_policy_config_get(r->pol);
      int k;
      for (k = 0; k < c->ntiers; k++)
        if (!strcmp(c->tiers[k].name, d.tier))
          row = k;
    }
    if (d.flags & SLUICE_DECISION_STRIKE)
      r->strikes[row]++;
    if (d.flags & SLUICE_DECISION_DEGRADED)
      r->degraded[row]++;
    /* refused by a feature in shadow, served all the same */
    if ((d.flags & SLUICE_DECISION_SHADOW) && d.allowed &&
        d.verdict_status != 200)
      r->passed[row]++;
  }
  if (d.lease_id) {
    if (r->job_ns == 0) {
      (void)sluice_policy_release_lease(r->pol, q, d.lease_id);
    } else if (hold(r, q, &d, pl->t * MS_NS) != 0) {
      fprintf(stderr, "sluice replay: out of memory\n");
      return CLI_RUNTIME;
    }
  }
  if (r->decisions) {
    cli_out *o = &r->out;
    cli_out_i64(o, pl->t);
    for (i = 1; i < 6; i++) {
      cli_out_char(o, ',');
      out_s(o, pl->f[i]);
    }
    cli_out_char(o, ',');
    out_s(o, sluice_outcome_name(d.outcome));
    cli_out_char(o, ',');
    cli_out_i64(o, d.verdict_status);
    cli_out_char(o, ',');
    cli_out_i64(o, d.remaining);
    cli_out_char(o, ',');
    out_ms(o, d.outcome == SLUICE_OUTCOME_SUSPENDED ? SLUICE_FOREVER
                                                    : d.retry_after_ns);
    cli_out_char(o, ',');
    cli_out_i64(o, d.penalty_level);
    cli_out_char(o, ',');
    cli_out_i64(o, d.strikes_remaining);
    cli_out_char(o, '\n');
  }
  return CLI_OK;
}

static sluice_request pr_request(const pending *pl) {
  sluice_request q;
  char *const *f = pl->f;
  memset(&q, 0, sizeof q);
  q.tenant_id = f[1][0] ? f[1] : NULL;
  q.api_key_id = f[2][0] ? f[2] : NULL;
  q.tier = f[3][0] ? f[3] : NULL;
  q.method = f[4];
  q.route = f[5];
  q.client_ip = f[6][0] ? f[6] : NULL;
  if (pl->nf >= 8 && f[7][0])
    q.auth_subject = f[7];
  q.auth_result = pl->auth_result;
  /* A reconcile names its ledger in the 8th field (or the route). */
  if (!strcmp(q.route, "/v1/ledgers/reconcile")) {
    q.ledger_id = q.auth_subject ? q.auth_subject : q.route;
    q.auth_subject = NULL;
  }
  return q;
}

/* Decide the waiting lines at their t_ms: one sluice_policy_decide() for
** one line, one sluice_policy_decide_many() for more (the same
** decisions). */
static int pr_flush(preplay *r) {
  sluice_request q[BATCH_MAX];
  sluice_decision d[BATCH_MAX];
  int rcs[BATCH_MAX], i, n = r->nq, rc = CLI_OK;
  if (n == 0)
    return CLI_OK;
  r->nq = 0;
  for (i = 0; i < n; i++)
    q[i] = pr_request(&r->pq[i]);
  r->cur_ms = r->pq[0].t;
  if (r->lh_n)
    release_due(r, r->pq[0].t * MS_NS, 0);
  sluice_clock_set(r->clock, r->pq[0].t * MS_NS);
  if (n == 1)
    rcs[0] = sluice_policy_decide(r->pol, &q[0], &d[0]);
  else if (sluice_policy_decide_many(r->pol, n, q, d, rcs) != SLUICE_OK)
    for (i = 0; i < n; i++)
      rcs[i] = SLUICE_EINVAL; /* cannot happen: the arguments are sound */
  for (i = 0; i < n && rc == CLI_OK; i++)
    rc = pr_decided(r, &r->pq[i], &q[i], rcs[i], &d[i]);
  return rc;
}

/* A line that is not the batch's first moves to the front after a flush:
** its fields point into its own copy. */
static void pq_move(preplay *r, int from) {
  pending *a = &r->pq[from], *b = &r->pq[0];
  int i;
  memcpy(b->s, a->s, sizeof b->s);
  for (i = 0; i < a->nf; i++)
    b->f[i] = b->s + (a->f[i] - a->s);
  b->nf = a->nf;
  b->auth_result = a->auth_result;
  b->t = a->t;
  b->lineno = a->lineno;
}

/* One line (copied, then split) into the batch, which is decided when it
** is full, when t_ms moves on, and after a heavy request (its lease is
** released, or held, before the next line is decided).  Returns CLI_OK or
** CLI_RUNTIME. */
static int pr_line(preplay *r, const char *line, size_t n, long lineno) {
  pending *pl = &r->pq[r->nq];
  char *s = pl->s;
  char **f = pl->f;
  int nf = 0, cls;
  size_t i;
  int64_t t;

  while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' '))
    n--;
  if (n == 0 || line[0] == '#')
    return CLI_OK;
  if (n >= sizeof pl->s) {
    malformed(r, lineno, "line longer than 4095 bytes", NULL);
    return CLI_OK;
  }
  memcpy(s, line, n);
  s[n] = 0;
  f[nf++] = s;
  for (i = 0; i < n; i++)
    if (s[i] == ',') {
      s[i] = 0;
      if (nf == 10) {
        malformed(r, lineno, "more than 9 fields", NULL);
        return CLI_OK;
      }
      f[nf++] = s + i + 1;
    }
  if (nf != 7 && nf != 9 && nf != 8) {
    if (lineno == 1 && (!strcmp(f[0], "t_ms") || !strcmp(f[0], "time")))
      return CLI_OK;
    malformed(r, lineno,
              "expected t_ms,tenant,key,tier,method,route,ip[,subject,"
              "outcome]", NULL);
    return CLI_OK;
  }
  if (cli_parse_i64(f[0], strlen(f[0]), &t) || t < 0 ||
      t > INT64_MAX / MS_NS) {
    if (lineno == 1 && (!strcmp(f[0], "t_ms") || !strcmp(f[0], "time")))
      return CLI_OK; /* header line */
    malformed(r, lineno, "not a non-negative integer", "t_ms");
    return CLI_OK;
  }
  if (t < r->last_t) {
    malformed(r, lineno, "goes backwards", "t_ms");
    return CLI_OK;
  }
  r->last_t = t;
  pl->nf = nf;
  pl->auth_result = SLUICE_AUTH_PENDING;
  if (nf == 9) {
    const char *o = f[8];
    if (!strcmp(o, "ok"))
      pl->auth_result = SLUICE_AUTH_OK;
    else if (!strcmp(o, "unknown_client"))
      pl->auth_result = SLUICE_AUTH_UNKNOWN_CLIENT;
    else if (!strcmp(o, "bad_secret"))
      pl->auth_result = SLUICE_AUTH_BAD_SECRET;
    else if (strcmp(o, "pending") != 0 && o[0]) {
      malformed(r, lineno,
                "expected ok, unknown_client, bad_secret or pending",
                "outcome");
      return CLI_OK;
    }
  }
  pl->t = t;
  pl->lineno = lineno;
  if (r->nq > 0 && t != r->pq[0].t) {
    int at = r->nq;
    if (pr_flush(r) != CLI_OK)
      return CLI_RUNTIME;
    pq_move(r, at);
  }
  r->nq++;
  cls = sluice_policy_endpoint_class(r->pol, f[4], f[5]);
  if (r->nq == r->batch_max || cls == SLUICE_EP_RECONCILE ||
      cls == SLUICE_EP_EXPORT)
    return pr_flush(r);
  return CLI_OK;
}

static int pr_stream(preplay *r, FILE *in) {
  static char buf[(1 << 20) + 1];
  size_t have = 0;
  long lineno = 0;
  for (;;) {
    size_t got = fread(buf + have, 1, (sizeof buf - 1) - have, in);
    size_t start = 0, i;
    int eof = got == 0;
    char *nl;
    have += got;
    while (start < have &&
           (nl = memchr(buf + start, '\n', have - start)) != NULL) {
      i = (size_t)(nl - buf);
      if (pr_line(r, buf + start, i - start, ++lineno) != CLI_OK)
        return CLI_RUNTIME;
      start = i + 1;
    }
    if (eof) {
      if (start < have &&
          pr_line(r, buf + start, have - start, ++lineno) != CLI_OK)
        return CLI_RUNTIME;
      break;
    }
    if (start == 0 && have == sizeof buf - 1) {
      malformed(r, lineno + 1, "line longer than 1 MiB", NULL);
      return CLI_RUNTIME;
    }
    memmove(buf, buf + start, have - start);
    have -= start;
  }
  r->lines = lineno;
  if (pr_flush(r) != CLI_OK)
    return CLI_RUNTIME;
  return ferror(in) ? CLI_RUNTIME : CLI_OK;
}

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
  int row, bit;
  fprintf(f, "# not enforced:");
  for (row = 0; row <= c->ntiers; row++) {
    const char *name = row < c->ntiers ? c->tiers[row].name : NULL;
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

/* The report, summed over the partitions (scopes never span two). */
static void pr_report(part *ps, int np, FILE *f, double wall, int shadow,
                      int boxes_max) {
  static const char *cols[SLUICE_OUTCOME__COUNT] = {
      "allowed",     "throttled", "boxed",      "suspended",
      "concurrency", "conflict",  "export_cap", "unavailable"};
  const sluice_policy_config *c = sluice_policy_config_get(ps[0].r.pol);
  size_t i, k = 0, nbx = 0;
  int row, o, p;
  uint64_t n = 0;
  long bad = 0;
  boxed *list;
  for (p = 0; p < np; p++) {
    n += ps[p].r.n;
    bad += ps[p].r.bad;
    nbx += ps[p].r.bx_n;
  }
  fprintf(f, "# %s replay: %" PRIu64 " requests, %ld malformed lines, "
             "%d thread%s, %.3f s, %.0f requests/s\n",
          shadow ? "shadow-mode" : "as-configured", n, bad, np,
          np > 1 ? "s" : "",
          wall, wall > 0 ? (double)n / wall : 0.0);
  fprintf(f, "# %-10s %9s", "tier", "requests");
  for (o = 0; o < SLUICE_OUTCOME__COUNT; o++)
    fprintf(f, " %11s", cols[o]);
  fprintf(f, " %9s %9s %9s\n", "strikes", "degraded", "passed");
  for (row = 0; row < NROWS; row++) {
    const char *name = "(auth)";
    uint64_t tot = 0, v[SLUICE_OUTCOME__COUNT], st = 0, dg = 0, ps_ = 0;
    if (row < c->ntiers && row < SLUICE_POLICY_TIERS_MAX)
      name = c->tiers[row].name;
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

static int pr_open(preplay *r, const char *config, const char *backend,
                   int enforce, char *err, size_t errlen, int *rc_out) {
  sluice_limiter_options lo;
  sluice_policy_options po;
  int rc = sluice_clock_manual(0, &r->clock);
  memset(&lo, 0, sizeof lo);
  lo.store = backend;
  lo.clock = r->clock;
  /* TESTCLOCK: a store with its own clock (redis) decides at the log's
  ** time too, not at its wall clock. */
  lo.flags = SLUICE_OPEN_CREATE | SLUICE_OPEN_TESTCLOCK;
  err[0] = 0;
  if (rc == SLUICE_OK)
    rc = sluice_limiter_open2(&lo, &r->lim, err, errlen);
  if (rc != SLUICE_OK) {
    *rc_out = rc;
    return 1; /* the store */
  }
  memset(&po, 0, sizeof po);
  po.limiter = r->lim;
  po.config_path = strcmp(config, "default") ? config : NULL;
  memset(po.secret, 0x3c, sizeof po.secret);
  po.on_event = on_event;
  po.userdata = r;
  po.flags = enforce ? 0 : SLUICE_POLICY_SHADOW;
  po.errbuf = err;
  po.errlen = errlen;
  rc = sluice_policy_open(&po, &r->pol);
  *rc_out = rc;
  return rc == SLUICE_OK ? 0 : 2; /* the config */
}

static void pr_close(preplay *r) {
  size_t i;
  sluice_policy_close(r->pol);
  sluice_limiter_close(r->lim);
  sluice_clock_free(r->clock);
  for (i = 0; i < r->bx_cap; i++)
    free(r->bx[i].name);
  free(r->bx);
  free(r->lh);
}


static int line_part(const char *s, size_t n, int np) {
  const char *c1 = memchr(s, ',', n), *c2;
  uint64_t h = UINT64_C(1469598103934665603);
  if (np == 1 || !c1)
    return 0;
  c2 = memchr(c1 + 1, ',', n - (size_t)(c1 + 1 - s));
  if (!c2 || c2 == c1 + 1)
    return 0;
  for (c1++; c1 < c2; c1++)
    h = (h ^ (unsigned char)*c1) * UINT64_C(1099511628211);
  return (int)((h >> 17) % (uint64_t)np);
}

static void *part_run(void *arg) {
  part *pt = arg;
  const char *d = pt->data, *end = d + pt->len, *nl;
  long lineno = 0;
  pt->rc = CLI_OK;
  while (d < end) {
    size_t n;
    nl = memchr(d, '\n', (size_t)(end - d));
    n = nl ? (size_t)(nl - d) : (size_t)(end - d);
    lineno++;
    if (line_part(d, n, pt->np) == pt->idx &&
        pr_line(&pt->r, d, n, lineno) != CLI_OK) {
      pt->rc = CLI_RUNTIME;
      break;
    }
    d += n + 1;
  }
  if (pt->rc == CLI_OK && pr_flush(&pt->r) != CLI_OK)
    pt->rc = CLI_RUNTIME;
  return NULL;
}

int cli_policy_replay(int argc, char **argv) {
  static const struct option opts[] = {
      {"policy", required_argument, 0, 'P'},
      {"decisions", no_argument, 0, 'd'},
      {"job-ms", required_argument, 0, 'j'},
      {"backend", required_argument, 0, 'B'},
      {"enforce", no_argument, 0, 'e'},
      {"threads", required_argument, 0, 't'},
      {"boxes", required_argument, 0, 'b'},
      {"batch", required_argument, 0, 'N'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *config = NULL, *backend = "mem";
  char err[256];
  int c, rc = CLI_OK, enforce = 0, decisions = 0, np = 0, boxes_max = 50,
         i, which, orc, batch_max = 1;
  int64_t v, job_ns = 0;
  struct timespec w0, w1;
  part *parts = NULL;
  const char *path;
  void *map = NULL;
  size_t maplen = 0;
  FILE *in = NULL;

  /* --help wins wherever it stands: `--policy --help` must not read
  ** "--help" as the CONFIG. */
  for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      pr_usage(stdout);
      return CLI_OK;
    }
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'P':
      config = optarg;
      break;
    case 'd':
      decisions = 1;
      break;
    case 'j':
      if (cli_parse_i64(optarg, strlen(optarg), &v) || v < 0 ||
          v > INT64_C(86400000) * 365) {
        fprintf(stderr, "sluice replay: --job-ms: expected milliseconds "
                        "from 0 to 31536000000, got '%s'\n", optarg);
        return CLI_USAGE;
      }
      job_ns = v * MS_NS;
      break;
    case 'B':
      backend = optarg;
      break;
    case 'e':
      enforce = 1;
      break;
    case 't':
      if (cli_parse_i64(optarg, strlen(optarg), &v) || v < 1 || v > 64) {
        fprintf(stderr, "sluice replay: --threads: expected 1 to 64, got "
                        "'%s'\n", optarg);
        return CLI_USAGE;
      }
      np = (int)v;
      break;
    case 'b':
      if (cli_parse_i64(optarg, strlen(optarg), &v) || v < 0 ||
          v > 100000000) {
        fprintf(stderr, "sluice replay: --boxes: expected a count, got "
                        "'%s'\n", optarg);
        return CLI_USAGE;
      }
      boxes_max = (int)v;
      break;
    case 'N':
      if (cli_parse_i64(optarg, strlen(optarg), &v) || v < 1 ||
          v > BATCH_MAX) {
        fprintf(stderr, "sluice replay: --batch: expected 1 to %d, got "
                        "'%s'\n", BATCH_MAX, optarg);
        return CLI_USAGE;
      }
      batch_max = (int)v;
      break;
    case 'h':
      pr_usage(stdout);
      return CLI_OK;
    default:
      fprintf(stderr, "sluice replay: unknown or incomplete option '%s'\n",
              argv[optind - 1]);
      pr_usage(stderr);
      return CLI_USAGE;
    }
  }
  if (!config) {
    fprintf(stderr, "sluice replay: --policy CONFIG is required here\n");
    return CLI_USAGE;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "sluice replay: expected exactly one LOG (or -)\n");
    return CLI_USAGE;
  }
  path = argv[optind];
  /* Threads need a mapped file; stdin, --decisions (one ordered output)
  ** and stores other than mem (shared state) run on one thread. */
  if (np == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    np = cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus;
  }
  if (decisions || !strcmp(path, "-") || strncmp(backend, "mem", 3) != 0)
    np = 1;
  if (strcmp(path, "-") != 0) {
    int fd = open(path, O_RDONLY);
    struct stat stt;
    if (fd < 0 || fstat(fd, &stt) != 0) {
      fprintf(stderr, "sluice replay: cannot open '%s'\n", path);
      if (fd >= 0)
        close(fd);
      return CLI_USAGE;
    }
    maplen = (size_t)stt.st_size;
    if (S_ISREG(stt.st_mode) && maplen > 0) {
      map = mmap(NULL, maplen, PROT_READ, MAP_PRIVATE, fd, 0);
      if (map == MAP_FAILED)
        map = NULL;
      else
        madvise(map, maplen, MADV_SEQUENTIAL);
    }
    close(fd);
    if (!map) {
      maplen = 0;
      np = 1;
      in = fopen(path, "rb");
      if (!in) {
        fprintf(stderr, "sluice replay: cannot open '%s'\n", path);
        return CLI_USAGE;
      }
    }
  } else {
    in = stdin;
  }
  parts = calloc((size_t)np, sizeof *parts);
  if (!parts) {
    rc = CLI_RUNTIME;
    goto done;
  }
  for (i = 0; i < np; i++) {
    parts[i].idx = i;
    parts[i].np = np;
    parts[i].data = map;
    parts[i].len = maplen;
    parts[i].r.decisions = decisions;
    parts[i].r.job_ns = job_ns;
    parts[i].r.batch_max = batch_max;
    parts[i].r.out.f = stdout;
    which = pr_open(&parts[i].r, config, backend, enforce, err, sizeof err,
                    &orc);
    if (which == 1) {
      fprintf(stderr, "sluice replay: --backend %s: %s%s%s\n", backend,
              sluice_strerror(orc), *err ? ": " : "", err);
      rc = orc == SLUICE_EINVAL ? CLI_USAGE : CLI_RUNTIME;
      np = i + 1;
      goto done;
    }
    if (which == 2) {
      fprintf(stderr, "sluice replay: --policy %s: %s\n", config,
              err[0] ? err : sluice_strerror(orc));
      rc = orc == SLUICE_EIO ? CLI_USAGE : CLI_BADINPUT;
      np = i + 1;
      goto done;
    }
  }
  if (decisions) {
    static const char hdr[] = "t_ms,tenant,key,tier,method,route,outcome,"
                              "status,remaining,retry_after_ms,level,"
                              "strikes_remaining\n";
    cli_out_str(&parts[0].r.out, hdr, sizeof hdr - 1);
  }
  clock_gettime(CLOCK_MONOTONIC, &w0);
  if (!map) {
    rc = pr_stream(&parts[0].r, in);
  } else if (np == 1) {
    part_run(&parts[0]);
    rc = parts[0].rc;
  } else {
    for (i = 0; i < np; i++)
      if (pthread_create(&parts[i].th, NULL, part_run, &parts[i]) != 0) {
        fprintf(stderr, "sluice replay: cannot start a thread\n");
        exit(CLI_RUNTIME);
      }
    for (i = 0; i < np; i++) {
      pthread_join(parts[i].th, NULL);
      if (parts[i].rc != CLI_OK)
        rc = parts[i].rc;
    }
  }
  for (i = 0; i < np; i++)
    if (parts[i].r.lh_n)
      release_due(&parts[i].r, 0, 1);
  clock_gettime(CLOCK_MONOTONIC, &w1);
  if (cli_out_flush(&parts[0].r.out) != 0 && rc == CLI_OK)
    rc = CLI_RUNTIME;
  if (rc == CLI_OK) {
    long bad = 0;
    pr_report(parts, np, decisions ? stderr : stdout,
              (double)(w1.tv_sec - w0.tv_sec) +
                  (double)(w1.tv_nsec - w0.tv_nsec) / 1e9,
              !enforce, boxes_max);
    for (i = 0; i < np; i++)
      bad += parts[i].r.bad;
    if (bad > 0)
      rc = CLI_BADINPUT;
  }
done:
  if (parts)
    for (i = 0; i < np; i++)
      pr_close(&parts[i].r);
  free(parts);
  if (map)
    munmap(map, maplen);
  if (in && in != stdin)
    fclose(in);
  return rc;
}

/*
** sluice replay --policy: reading the log's lines, batching those of one
** t_ms (--batch), deciding them, and counting what the report needs (the
** boxes the events name, the strikes, the leases held for --job-ms).
*/
#include <stdlib.h>
#include <string.h>

#include "policy_replay.h"

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

void preplay_on_event(void *ud, const sluice_event *ev) {
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

void preplay_release_due(preplay *r, int64_t now_ns, int all) {
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
      int k = sluice_policy_config_tier(sluice_policy_config_get(r->pol),
                                        d.tier);
      if (k >= 0)
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
int preplay_flush(preplay *r) {
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
    preplay_release_due(r, r->pq[0].t * MS_NS, 0);
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
int preplay_line(preplay *r, const char *line, size_t n, long lineno) {
  pending *pl = &r->pq[r->nq];
  char *s = pl->s;
  char **f = pl->f;
  int nf = 0, cls;
  size_t i;
  int64_t t;
  const char *why;
  char wbuf[80];

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
  if ((why = cli_parse_t_ms(f[0], strlen(f[0]), &t, wbuf, sizeof wbuf))) {
    if (lineno == 1 && (!strcmp(f[0], "t_ms") || !strcmp(f[0], "time")))
      return CLI_OK; /* header line */
    malformed(r, lineno, why, "t_ms");
    return CLI_OK;
  }
  if (t < r->last_t) {
    malformed(r, lineno, "goes backwards", "t_ms");
    return CLI_OK;
  }
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
  /* Only a line that is taken moves the clock: a malformed one (a t_ms
  ** far ahead, a bad outcome) must not make the next lines go backwards. */
  r->last_t = t;
  pl->t = t;
  pl->lineno = lineno;
  if (r->nq > 0 && t != r->pq[0].t) {
    int at = r->nq;
    if (preplay_flush(r) != CLI_OK)
      return CLI_RUNTIME;
    pq_move(r, at);
  }
  r->nq++;
  cls = sluice_policy_endpoint_class(r->pol, f[4], f[5]);
  if (r->nq == r->batch_max || cls == SLUICE_EP_RECONCILE ||
      cls == SLUICE_EP_EXPORT)
    return preplay_flush(r);
  return CLI_OK;
}

static int stream_line(void *ud, const char *s, size_t n, long lineno) {
  return preplay_line(ud, s, n, lineno);
}

static void too_long(void *ud, long lineno) {
  malformed(ud, lineno, "line longer than 1 MiB", NULL);
}

int preplay_stream(preplay *r, FILE *in) {
  /* preplay_line copies what it keeps: no work between blocks. */
  cli_lines cb = {"replay", stream_line, NULL, too_long, r};
  if (cli_read_lines(in, &cb, &r->lines) != CLI_OK)
    return CLI_RUNTIME;
  return preplay_flush(r);
}

/*
** sluice replay --policy: reading the log's lines, batching those of one
** t_ms (--batch), deciding them, and counting what the report needs (the
** boxes the events name, the strikes, the leases held for --job-ms).
*/
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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

/* The value of a request's attribute, or NULL. */
static const char *attr_of(const sluice_request *q, const char *name) {
  size_t i;
  for (i = 0; i < q->nattrs; i++)
    if (!strcmp(q->attrs[i].name, name))
      return q->attrs[i].value;
  return NULL;
}

void preplay_on_event(void *ud, const sluice_event *ev) {
  preplay *r = ud;
  const sluice_request *q = ev->request;
  if (ev->type != SLUICE_EVENT_BOX_TRIP || !q)
    return;
  if ((ev->scope == SLUICE_SCOPE_KEY && !(q->tenant_id && q->tenant_id[0])) ||
      (ev->scope == SLUICE_SCOPE_SUBJECT && !attr_of(q, "subject")))
    /* A declared penalty's scope (its attributes; a scope of an attribute
    ** the caller names is a SUBJECT box): the event names it by its
    ** hashed id only, which at least keeps two scopes apart. */
    note_box(r, "hashed", ev->scope_id, NULL, ev->level);
  else if (ev->scope == SLUICE_SCOPE_KEY)
    note_box(r, "key", q->tenant_id, q->api_key_id, ev->level);
  else if (ev->scope == SLUICE_SCOPE_IP)
    note_box(r, "ip", q->client_ip, NULL, ev->level);
  else if (ev->scope == SLUICE_SCOPE_SUBJECT)
    note_box(r, "subject", attr_of(q, "subject"), NULL, ev->level);
}

static void malformed(preplay *r, long lineno, const char *why,
                      const char *field) {
  r->bad++;
  if (field)
    fprintf(stderr, "sluice replay: line %ld: %s: %s\n", lineno, field, why);
  else
    fprintf(stderr, "sluice replay: line %ld: %s\n", lineno, why);
}

static sluice_request pr_request(preplay *r, pending *pl);

/* The value the request gave for a field the library refused, or NULL
** when it gave none (an empty field, or no such column). */
static const char *given(const sluice_request *q, const char *fld) {
  if (!strcmp(fld, "tenant"))
    return q->tenant_id;
  if (!strcmp(fld, "key"))
    return q->api_key_id;
  if (!strcmp(fld, "tier"))
    return q->tier;
  if (!strcmp(fld, "ip"))
    return q->client_ip;
  return attr_of(q, fld);
}

/* A line the library refused (rc, the field it named), said so that the
** log's writer can fix it: which route is missing, which attribute was not
** given, which value was refused.  vals: the settle values, or NULL. */
static void refused(preplay *r, long lineno, int rc, const char *fld,
                    const sluice_request *q, const sluice_attr *vals,
                    size_t nvals) {
  char why[600];
  const char *v = NULL;
  size_t i;
  if (!fld) {
    malformed(r, lineno, sluice_strerror(rc), "request");
    return;
  }
  for (i = 0; vals && i < nvals; i++)
    if (!strcmp(vals[i].name, fld))
      v = vals[i].value;
  if (!vals)
    v = given(q, fld);
  if (rc == SLUICE_ENOTFOUND && !strcmp(fld, "route"))
    snprintf(why, sizeof why, "no route of the policy matches %s %s",
             q->method, q->route);
  else if (!vals && !strcmp(fld, "cost") && q->cost)
    snprintf(why, sizeof why, "a route of declared limits takes its costs "
             "from the policy file (leave the column empty)");
  else if (!v && rc == SLUICE_EINVAL)
    snprintf(why, sizeof why, "not given (an empty field or no such "
             "column), and a limit of the route needs it");
  else if (v)
    snprintf(why, sizeof why, "%s (got \"%.200s\")", sluice_strerror(rc), v);
  else
    snprintf(why, sizeof why, "%s", sluice_strerror(rc));
  malformed(r, lineno, why, fld);
}

/* A copy of a pending line, its fields pointing into its own text. */
static void pending_copy(pending *b, const pending *a) {
  int i;
  memcpy(b->s, a->s, sizeof b->s);
  for (i = 0; i < a->nf; i++)
    b->f[i] = b->s + (a->f[i] - a->s);
  b->nf = a->nf;
  b->result = a->result;
  b->t = a->t;
  b->cost = a->cost;
  b->status = a->status;
  b->lineno = a->lineno;
}

void preplay_release_due(preplay *r, int64_t now_ns, int all) {
  while (r->lh_n) {
    lease_hold *h = &r->lh[r->lh_head];
    sluice_request q;
    if (!all && h->release_ns > now_ns)
      break;
    q = pr_request(r, h->line); /* its route and attributes name them */
    (void)sluice_policy_release(
        r->pol, &q,
        &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = h->id});
    free(h->line);
    h->line = NULL;
    r->lh_head = (r->lh_head + 1) % r->lh_cap;
    r->lh_n--;
  }
}

static int hold(preplay *r, const pending *pl, const sluice_decision *d,
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
  if (!(h->line = malloc(sizeof *h->line)))
    return -1;
  pending_copy(h->line, pl);
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

void preplay_decisions_header(preplay *r) {
  static const char legacy[] = "t_ms,tenant,key,tier,method,route,outcome,"
                               "status,remaining,retry_after_ms,level,"
                               "strikes_remaining\n";
  static const char named[] = "t_ms,method,route,outcome,status,limit,"
                              "remaining,retry_after_ms";
  if (r->hdr_done)
    return;
  r->hdr_done = 1;
  if (!r->cl.named) {
    cli_out_str(&r->out, legacy, sizeof legacy - 1);
    return;
  }
  cli_out_str(&r->out, named, sizeof named - 1);
  if (r->cl.status >= 0)
    out_s(&r->out, ",reported_status");
  cli_out_char(&r->out, '\n');
}

/* Each declared limit the decision reports: met (it ran), refused,
** binding. */
static void count_limits(preplay *r, const sluice_decision *d) {
  int i, j;
  for (i = 0; i < d->nlimits; i++) {
    const sluice_decision_limit *l = &d->limits[i];
    if (l->flags & SLUICE_LIMIT_NOT_RUN) /* an earlier limit refused */
      continue;
    for (j = 0; j < r->nlc && r->lc[j].name != l->name; j++)
      ;
    if (j == r->nlc) {
      if (j == (int)(sizeof r->lc / sizeof r->lc[0]))
        continue;
      r->lc[r->nlc++].name = l->name;
    }
    r->lc[j].met++;
    r->lc[j].denied += (l->flags & SLUICE_LIMIT_DENIED) != 0;
    r->lc[j].binding += (l->flags & SLUICE_LIMIT_BINDING) != 0;
  }
}

/* What bound a decision: a declared limit's name, or the backstop's. */
static const char *binding_name(const sluice_decision *d) {
  switch (d->binding) {
  case SLUICE_BINDING_LIMIT: return d->limit_name ? d->limit_name : "-";
  case SLUICE_BINDING_IP: return "ip";
  default: return "-";
  }
}

/* A named log's output line:
** t_ms,method,route,outcome,status,limit,remaining,retry_after_ms
** [,reported_status] (the last when the log has a status column). */
static void named_decision(preplay *r, const pending *pl,
                           const sluice_decision *d) {
  cli_out *o = &r->out;
  cli_out_i64(o, pl->t);
  cli_out_char(o, ',');
  out_s(o, pl->f[r->cl.method]);
  cli_out_char(o, ',');
  out_s(o, pl->f[r->cl.route]);
  cli_out_char(o, ',');
  out_s(o, sluice_name(SLUICE_NAME_OUTCOME, d->outcome));
  cli_out_char(o, ',');
  cli_out_i64(o, d->verdict_status);
  cli_out_char(o, ',');
  out_s(o, binding_name(d));
  cli_out_char(o, ',');
  cli_out_i64(o, d->remaining);
  cli_out_char(o, ',');
  out_ms(o, d->outcome == SLUICE_OUTCOME_SUSPENDED ? SLUICE_FOREVER
                                                   : d->retry_after_ns);
  if (r->cl.status >= 0) {
    cli_out_char(o, ',');
    if (pl->status)
      cli_out_i64(o, pl->status);
  }
  cli_out_char(o, '\n');
}

static const char *field(const pending *pl, int c);

/* A line's settle:ATTR values (the empty ones not given), reported for
** its admitted request: the difference to what was charged goes to the
** limits whose costs read them.  A request that charged nothing to settle
** (a route of the ledger's classes) is left alone. */
static int pr_settle(preplay *r, const pending *pl, const sluice_request *q,
                     sluice_decision *d) {
  sluice_attr a[COLS_MAX];
  size_t n = 0;
  int i, rc;
  for (i = 0; i < r->cl.nsettle; i++)
    if (field(pl, r->cl.settle[i])) {
      a[n].name = r->cl.sname[i];
      a[n++].value = pl->f[r->cl.settle[i]];
    }
  if (n == 0)
    return CLI_OK;
  rc = sluice_policy_settle(r->pol, q, d, a, n);
  if (rc == SLUICE_OK) {
    r->settled++;
  } else if (rc == SLUICE_EINVAL || rc == SLUICE_ERANGE) {
    refused(r, pl->lineno, rc, d->invalid_field ? d->invalid_field : "settle",
            q, a, n);
  } else if (rc != SLUICE_ENOTFOUND) {
    cli_out_flush(&r->out);
    fprintf(stderr, "sluice replay: line %ld: settle: store error %s: %s\n",
            pl->lineno, sluice_strerror(rc), sluice_limiter_errmsg(r->lim));
    return CLI_RUNTIME;
  }
  return CLI_OK;
}

/* The report's row of a tier, by name (the rows are the tiers the log
** names, whatever the policy's parameter sets). */
static tier_row *tier_row_of(preplay *r, const char *tier) {
  int i;
  for (i = 0; i < r->nrows; i++)
    if (!strcmp(r->rows[i].name, tier))
      return &r->rows[i];
  if (r->nrows == NROWS) /* the last row takes the rest */
    return &r->rows[NROWS - 1];
  snprintf(r->rows[r->nrows].name, sizeof r->rows[0].name, "%s",
           r->nrows == NROWS - 1 ? "(other)" : tier);
  return &r->rows[r->nrows++];
}

static uint64_t route_hash(const pending *pl, const layout *cl) {
  uint64_t h = fnv(pl->f[cl->method]) * 31 + fnv(pl->f[cl->route]);
  return h ? h : 1;
}

/* The slot of a line's method and route in r->seen, or NULL when the
** table is full (or was not allocated). */
static route_seen *route_slot(preplay *r, uint64_t h) {
  size_t j, k;
  if (!r->seen && !(r->seen = calloc(ROUTES_SEEN, sizeof *r->seen)))
    return NULL;
  for (k = 0, j = h % ROUTES_SEEN; k < ROUTES_SEEN;
       k++, j = (j + 1) % ROUTES_SEEN)
    if (r->seen[j].hash == h || r->seen[j].hash == 0)
      return &r->seen[j];
  return NULL;
}

/* After a line's decision (--batch): whether its route lists a lease (a
** concurrency or lock limit).  Its limits are all listed in the decision
** (a limit not reached too); a decision listing none and granting no
** lease teaches nothing (it may be a refusal before any limit ran). */
static void route_learn(preplay *r, const pending *pl,
                        const sluice_decision *d) {
  uint64_t h;
  route_seen *s;
  sluice_declared_info li;
  int i, j, leases = d->lease_id != 0;
  if (r->batch_max == 1 || (d->nlimits == 0 && !leases))
    return;
  h = route_hash(pl, &r->cl);
  if (!(s = route_slot(r, h)) || s->hash == h)
    return;
  for (i = 0; i < d->nlimits && !leases; i++)
    for (j = 0; sluice_policy_declared_at(r->pol, SLUICE_DECLARED_LIMIT, j,
                                          &li) == SLUICE_OK;
         j++)
      if (!strcmp(li.name, d->limits[i].name)) {
        leases = !strcmp(li.algorithm, "concurrency") ||
                 !strcmp(li.algorithm, "lock");
        break;
      }
  s->hash = h;
  s->leases = leases;
}

/* Whether a line must end its batch: its decision may grant a lease, to
** be released (or held) before the next line is decided, as one by one.
** A route not decided before may. */
static int may_lease(preplay *r, const pending *pl) {
  uint64_t h = route_hash(pl, &r->cl);
  route_seen *s = route_slot(r, h);
  return !s || s->hash != h || s->leases;
}

/* A decided line: the report's counts, its lease, its output line. */
static int pr_decided(preplay *r, const pending *pl, const sluice_request *q,
                      int rc, const sluice_decision *dp) {
  sluice_decision d = *dp;
  int i;
  if (rc != SLUICE_OK) {
    if (rc == SLUICE_EINVAL || rc == SLUICE_ENOTFOUND || rc == SLUICE_EKEY ||
        rc == SLUICE_ERANGE) {
      refused(r, pl->lineno, rc, d.invalid_field, q, NULL, 0);
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
    /* the request's tier, as the log names it ("": none) */
    tier_row *row = tier_row_of(r, q->tier ? q->tier : "");
    row->n++;
    if (d.outcome >= 0 && d.outcome < SLUICE_OUTCOME__COUNT)
      row->outcome[d.outcome]++;
    if (d.flags & SLUICE_DECISION_STRIKE)
      row->strikes++;
    if (d.flags & SLUICE_DECISION_DEGRADED)
      row->degraded++;
    /* refused by a feature in shadow, served all the same */
    if ((d.flags & SLUICE_DECISION_SHADOW) && d.allowed &&
        d.verdict_status != 200)
      row->passed++;
  }
  route_learn(r, pl, &d);
  if (d.lease_id) {
    if (r->job_ns == 0) {
      (void)sluice_policy_release(
          r->pol, q,
          &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = d.lease_id});
    } else if (hold(r, pl, &d, pl->t * MS_NS) != 0) {
      fprintf(stderr, "sluice replay: out of memory\n");
      return CLI_RUNTIME;
    }
  }
  if (r->cl.nsettle && d.allowed && (rc = pr_settle(r, pl, q, &d)) != CLI_OK)
    return rc;
  if (r->cl.named)
    count_limits(r, &d);
  if (r->decisions)
    preplay_decisions_header(r);
  if (r->decisions && r->cl.named) {
    named_decision(r, pl, &d);
  } else if (r->decisions) {
    cli_out *o = &r->out;
    cli_out_i64(o, pl->t);
    for (i = 1; i < 6; i++) {
      cli_out_char(o, ',');
      out_s(o, pl->f[i]);
    }
    cli_out_char(o, ',');
    out_s(o, sluice_name(SLUICE_NAME_OUTCOME, d.outcome));
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

/* Field c of the line, NULL when the layout has no such column or the
** field is empty. */
static const char *field(const pending *pl, int c) {
  return c >= 0 && c < pl->nf && pl->f[c][0] ? pl->f[c] : NULL;
}

/* The j-th attribute the policy declares (its `attributes`), or NULL. */
static const char *attribute_at(const preplay *r, int j) {
  sluice_declared_info di;
  return sluice_policy_declared_at(r->pol, SLUICE_DECLARED_ATTRIBUTE, j, &di) ==
                 SLUICE_OK
             ? di.name
             : NULL;
}

/* Whether the policy declares attribute `name` (its `attributes`). */
static int declares(const preplay *r, const char *name) {
  const char *a;
  int j;
  for (j = 0; (a = attribute_at(r, j)) != NULL; j++)
    if (!strcmp(a, name))
      return 1;
  return 0;
}

static void attr_add(pending *pl, const char *name, const char *value) {
  pl->attrs[pl->nattrs].name = name;
  pl->attrs[pl->nattrs++].value = value;
}

static sluice_request pr_request(preplay *r, pending *pl) {
  const layout *cl = &r->cl;
  sluice_request q;
  int i;
  memset(&q, 0, sizeof q);
  q.tenant_id = field(pl, cl->tenant);
  q.api_key_id = field(pl, cl->key);
  q.tier = field(pl, cl->tier);
  q.method = pl->f[cl->method];
  q.route = pl->f[cl->route];
  q.client_ip = field(pl, cl->ip);
  q.cost = pl->cost;
  /* Attributes: an empty field is not given (a scope needing it is
  ** refused naming it). */
  pl->nattrs = 0;
  for (i = 0; i < cl->nattr; i++)
    if (field(pl, cl->attr[i])) {
      pl->attrs[pl->nattrs].name = cl->aname[i];
      pl->attrs[pl->nattrs++].value = pl->f[cl->attr[i]];
    }
  /* The legacy layout (the spec's ledger API, etc/ledger.conf): a
  ** sign-in's subject and outcome are its `subject` and `result`
  ** attributes (no result while pending); a reconcile names its `ledger`
  ** in the 8th field (or the route); an export's range is not given
  ** (`export_range_s` "0").  Given when the policy declares them. */
  if (!cl->named) {
    const char *sub = field(pl, cl->subject);
    if (!r->attrs_known) {
      r->has_subject = declares(r, "subject");
      r->has_result = declares(r, "result");
      r->has_ledger = declares(r, "ledger");
      r->has_range = declares(r, "export_range_s");
      r->attrs_known = 1;
    }
    if (!strcmp(q.route, "/v1/ledgers/reconcile")) {
      if (r->has_ledger)
        attr_add(pl, "ledger", sub ? sub : q.route);
    } else if (!strcmp(q.route, "/v1/reports/audit-export")) {
      if (r->has_range) /* the layout has no range: not given */
        attr_add(pl, "export_range_s", "0");
    } else {
      if (sub && r->has_subject)
        attr_add(pl, "subject", sub);
      if (pl->result && r->has_result)
        attr_add(pl, "result", pl->result);
    }
  }
  q.attrs = pl->nattrs ? pl->attrs : NULL;
  q.nattrs = pl->nattrs;
  return q;
}

/* Decide the waiting lines at their t_ms: one sluice_policy_decide() for
** one line, one sluice_policy_decide() for more (the same
** decisions). */
int preplay_flush(preplay *r) {
  sluice_request q[BATCH_MAX];
  sluice_decision d[BATCH_MAX];
  int rcs[BATCH_MAX], i, n = r->nq, rc = CLI_OK;
  if (n == 0)
    return CLI_OK;
  r->nq = 0;
  for (i = 0; i < n; i++)
    q[i] = pr_request(r, &r->pq[i]);
  r->cur_ms = r->pq[0].t;
  if (r->lh_n)
    preplay_release_due(r, r->pq[0].t * MS_NS, 0);
  sluice_clock_set(r->clock, r->pq[0].t * MS_NS);
  if (n == 1)
    rcs[0] = sluice_policy_decide(r->pol, 1, &q[0], &d[0], NULL);
  else if (sluice_policy_decide(r->pol, n, q, d, rcs) != SLUICE_OK)
    for (i = 0; i < n; i++)
      rcs[i] = SLUICE_EINVAL; /* cannot happen: the arguments are sound */
  for (i = 0; i < n && rc == CLI_OK; i++)
    rc = pr_decided(r, &r->pq[i], &q[i], rcs[i], &d[i]);
  return rc;
}

/* A line that is not the batch's first moves to the front after a flush:
** its fields point into its own copy. */
static void pq_move(preplay *r, int from) {
  pending_copy(&r->pq[0], &r->pq[from]);
}

void preplay_layout_legacy(layout *cl) {
  memset(cl, 0, sizeof *cl);
  cl->t = 0;
  cl->tenant = 1;
  cl->key = 2;
  cl->tier = 3;
  cl->method = 4;
  cl->route = 5;
  cl->ip = 6;
  cl->subject = 7;
  cl->outcome = 8;
  cl->cost = cl->status = -1;
}

static const char *const legacy_names[] = {
    "t_ms", "tenant", "key", "tier", "method", "route", "ip", "subject",
    "outcome"};

/* Split s in place at commas into f (at most COLS_MAX fields); the count,
** or -1 when there are more. */
static int split(char *s, size_t n, char **f) {
  int nf = 0;
  size_t i;
  f[nf++] = s;
  for (i = 0; i < n; i++)
    if (s[i] == ',') {
      s[i] = 0;
      if (nf == COLS_MAX)
        return -1;
      f[nf++] = s + i + 1;
    }
  return nf;
}

/* A header in the legacy layout's own names (7 to 9 of them, in order;
** `time` for t_ms as before). */
static int legacy_header(char *const *f, int nf) {
  int i;
  if (nf < 7 || nf > 9)
    return 0;
  for (i = 1; i < nf; i++)
    if (strcmp(f[i], legacy_names[i]))
      return 0;
  return 1;
}

int preplay_named_header(const char *line, size_t n) {
  char s[4096], *f[COLS_MAX];
  int nf;
  while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' '))
    n--;
  if (n == 0 || n >= sizeof s || line[0] == '#')
    return 0;
  memcpy(s, line, n);
  s[n] = 0;
  nf = split(s, n, f);
  if (nf < 0)
    return 1; /* refused later, on one thread, with its message */
  return (!strcmp(f[0], "t_ms") || !strcmp(f[0], "time")) &&
         !legacy_header(f, nf);
}

/* A header line naming its columns into r->cl; CLI_OK, or CLI_USAGE with
** the message printed. */
static int named_layout(preplay *r, char *const *f, int nf, long lineno) {
  layout *cl = &r->cl;
  int i, j, *slot;
  memset(cl, 0, sizeof *cl);
  cl->named = 1;
  cl->n = nf;
  cl->tenant = cl->key = cl->tier = cl->method = cl->route = cl->ip =
      cl->subject = cl->outcome = cl->cost = cl->status = -1;
  /* subject and outcome: the legacy layout's; here an attribute is named
  ** as such (etc/ledger.conf's subject and result). */
  cl->t = 0;
  if (strcmp(f[0], "t_ms")) {
    fprintf(stderr, "sluice replay: line %ld: header: the first column must "
                    "be t_ms\n", lineno);
    return CLI_USAGE;
  }
  for (i = 1; i < nf; i++) {
    static const struct {
      const char *name;
      size_t off;
    } known[] = {{"tenant", offsetof(layout, tenant)},
                 {"key", offsetof(layout, key)},
                 {"tier", offsetof(layout, tier)},
                 {"method", offsetof(layout, method)},
                 {"route", offsetof(layout, route)},
                 {"ip", offsetof(layout, ip)},
                 {"cost", offsetof(layout, cost)},
                 {"status", offsetof(layout, status)}};
    const char *a;
    for (j = 1; j < i; j++)
      if (!strcmp(f[j], f[i])) {
        fprintf(stderr, "sluice replay: line %ld: header: column '%s' "
                        "named twice\n", lineno, f[i]);
        return CLI_USAGE;
      }
    slot = NULL;
    for (j = 0; j < (int)(sizeof known / sizeof known[0]); j++)
      if (!strcmp(f[i], known[j].name))
        slot = (int *)((char *)cl + known[j].off);
    if (slot) {
      *slot = i;
      continue;
    }
    if (!strncmp(f[i], "settle", 6)) {
      /* settle:ATTR, the real value of an attribute the route's costs
      ** read; a bare `settle` would not say which. */
      const char *an = f[i][6] == ':' ? f[i] + 7 : NULL;
      for (j = 0; an && (a = attribute_at(r, j)) != NULL; j++)
        if (!strcmp(a, an))
          break;
      if (!an || !a) {
        fprintf(stderr, "sluice replay: line %ld: header: column '%s': "
                        "a settle column names the attribute it reports, "
                        "one the policy declares: settle:ATTR\n",
                lineno, f[i]);
        return CLI_USAGE;
      }
      cl->settle[cl->nsettle] = i;
      snprintf(cl->sname[cl->nsettle], sizeof cl->sname[0], "%s", a);
      cl->nsettle++;
      continue;
    }
    for (j = 0; (a = attribute_at(r, j)) != NULL; j++)
      if (!strcmp(a, f[i]))
        break;
    if (!a) {
      fprintf(stderr, "sluice replay: line %ld: header: column '%s' is "
                      "neither a request field (t_ms, method, route, "
                      "tenant, key, tier, ip, cost, status) nor an attribute the policy declares "
                      "(`attributes`)\n", lineno, f[i][0] ? f[i] : "");
      return CLI_USAGE;
    }
    cl->attr[cl->nattr] = i;
    snprintf(cl->aname[cl->nattr], sizeof cl->aname[0], "%s", a);
    cl->nattr++;
  }
  if (cl->method < 0 || cl->route < 0) {
    fprintf(stderr, "sluice replay: line %ld: header: the columns method "
                    "and route are required\n", lineno);
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* A decimal field of a named line into *v (empty: 0), lo..hi; 0 or the
** problem. */
static const char *dec_field(const pending *pl, int c, int64_t lo, int64_t hi,
                             int64_t *v) {
  const char *s = c >= 0 ? pl->f[c] : "";
  *v = 0;
  if (!s[0])
    return NULL;
  if (cli_parse_i64(s, strlen(s), v) || *v < lo || *v > hi)
    return "out of range or not a decimal integer";
  return NULL;
}

/* One line (copied, then split) into the batch, which is decided when it
** is full, when t_ms moves on, and after a heavy request (its lease is
** released, or held, before the next line is decided).  Returns CLI_OK or
** CLI_RUNTIME (r->fatal says why when it is a bad header). */
int preplay_line(preplay *r, const char *line, size_t n, long lineno) {
  pending *pl = &r->pq[r->nq];
  char *s = pl->s;
  char **f = pl->f;
  int nf, first;
  int64_t t, v;
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
  nf = split(s, n, f);
  first = !r->seen_first;
  r->seen_first = 1;
  /* The first line may name the columns: the legacy layout's own names
  ** (skipped), or any others (the named layout). */
  if (first && nf != 0 && (nf < 0 || !strcmp(f[0], "t_ms") ||
                           !strcmp(f[0], "time"))) {
    if (nf > 0 && legacy_header(f, nf))
      return CLI_OK;
    if (nf < 0) {
      fprintf(stderr, "sluice replay: line %ld: header: more than %d "
                      "columns\n", lineno, COLS_MAX);
      r->fatal = CLI_USAGE;
    } else {
      r->fatal = named_layout(r, f, nf, lineno);
    }
    return r->fatal ? CLI_RUNTIME : CLI_OK;
  }
  if (r->cl.named) {
    if (nf != r->cl.n) {
      snprintf(wbuf, sizeof wbuf, "expected %d fields, as the header names",
               r->cl.n);
      malformed(r, lineno, wbuf, NULL);
      return CLI_OK;
    }
  } else if (nf < 0 || nf > 9) {
    malformed(r, lineno, "more than 9 fields", NULL);
    return CLI_OK;
  } else if (nf != 7 && nf != 9 && nf != 8) {
    malformed(r, lineno,
              "expected t_ms,tenant,key,tier,method,route,ip[,subject,"
              "outcome]", NULL);
    return CLI_OK;
  }
  if ((why = cli_parse_t_ms(f[0], strlen(f[0]), &t, wbuf, sizeof wbuf))) {
    malformed(r, lineno, why, "t_ms");
    return CLI_OK;
  }
  if (t < r->last_t) {
    malformed(r, lineno, "goes backwards", "t_ms");
    return CLI_OK;
  }
  pl->nf = nf;
  pl->result = NULL;
  pl->cost = 0;
  pl->status = 0;
  if (r->cl.outcome >= 0 && r->cl.outcome < nf) {
    const char *o = f[r->cl.outcome];
    static const char *const results[] = {"ok", "unknown_client",
                                          "bad_secret"};
    size_t k;
    for (k = 0; k < sizeof results / sizeof results[0]; k++)
      if (!strcmp(o, results[k]))
        pl->result = results[k];
    if (!pl->result && strcmp(o, "pending") != 0 && o[0]) {
      malformed(r, lineno,
                "expected ok, unknown_client, bad_secret or pending",
                "outcome");
      return CLI_OK;
    }
  }
  if (r->cl.named) {
    if (!f[r->cl.method][0] || !f[r->cl.route][0]) {
      malformed(r, lineno, "empty", f[r->cl.method][0] ? "route" : "method");
      return CLI_OK;
    }
    if ((why = dec_field(pl, r->cl.cost, 1, INT64_C(1) << 62, &pl->cost))) {
      malformed(r, lineno, why, "cost");
      return CLI_OK;
    }
    if ((why = dec_field(pl, r->cl.status, 100, 599, &v))) {
      malformed(r, lineno, "expected an HTTP status, 100 to 599", "status");
      return CLI_OK;
    }
    pl->status = (int)v;
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
  if (r->nq == r->batch_max ||
      (r->batch_max > 1 && may_lease(r, &r->pq[r->nq - 1])))
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
    return r->fatal ? r->fatal : CLI_RUNTIME;
  return preplay_flush(r);
}

/*
** A simulated batch client, end to end: the server decides (the core GCRA
** limiter, then the whole policy layer and its decision -> facts bridge),
** renders its answer through sluice_http, and the client reads only the header strings it was sent,
** pacing itself with sluice_pace_interval() and backing off with the
** planner.  Time is a manual clock; the client "sleeps" by advancing it.
**
** What is checked: the paced client finishes its batch without a single
** denial or strike, in a time close to what the bucket allows; a client
** that does not pace but honours Retry-After is throttled yet never
** struck; and a client that ignores Retry-After is struck (so the strike
** count being 0 above is a measurement, not a constant).
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sluice.h"
#include "../common/splitmix.h"
#include "../common/units.h"

#define START_NS (INT64_C(1791986400) * SEC) /* 2026-10-14T14:00:00Z */

/* ------------------------------------------------------------ server --- */

typedef struct server {
  sluice_clock *clock;
  sluice_limiter *lim;
  sluice_policy *pol; /* NULL: the bare GCRA bucket below */
  sluice_http *http;
  sluice_gcra_params bucket;
  int64_t strikes, throttles, served;
} server;

static void server_open(server *s, int with_policy) {
  sluice_limiter_options lo = {0};
  sluice_http_options ho = {0};
  memset(s, 0, sizeof *s);
  cr_assert_eq(sluice_clock_manual(START_NS, &s->clock), SLUICE_OK);
  lo.store = "mem";
  lo.clock = s->clock;
  cr_assert_eq(sluice_limiter_open(&lo, &s->lim, NULL, 0), SLUICE_OK);
  /* The sandbox key bucket of etc/ledger.conf: 5 points/s, burst 300. */
  s->bucket.rate = 5;
  s->bucket.period_ns = SEC;
  s->bucket.burst = 300;
  if (with_policy) {
    /* etc/ledger.conf, its standard route charging the request's
    ** `points` attribute (1 or 10 here) instead of 1. */
    sluice_policy_options po = {0};
    sluice_policy_config *cfg;
    char err[256];
    cr_assert_eq(sluice_policy_config_new(&cfg, SLUICE_LEDGER_CONF, err,
                                          sizeof err),
                 SLUICE_OK, "%s", err);
    cr_assert_eq(sluice_policy_config_set(
                     cfg, "attributes",
                     "[ \"ledger\", \"export_range_s\", \"subject\", "
                     "\"result\", \"points\" ]",
                     err, sizeof err),
                 SLUICE_OK, "%s", err);
    cr_assert_eq(sluice_policy_config_set(
                     cfg, "routes.[4].limits",
                     "( { group = [ \"tenant\", \"key\" ]; cost = { attr = "
                     "\"points\"; max = 300; }; } )",
                     err, sizeof err),
                 SLUICE_OK, "%s", err);
    po.config = cfg;
    po.limiter = s->lim;
    memset(po.secret, 0x5a, sizeof po.secret);
    cr_assert_eq(sluice_policy_open(&po, &s->pol), SLUICE_OK);
    sluice_policy_config_free(cfg);
  }
  ho.problem_base = "https://api.example.com/errors/";
  ho.header_form = SLUICE_HTTP_FORM_LEGACY;
  ho.flags = SLUICE_HTTP_DATE_HEADER;
  cr_assert_eq(sluice_http_open(&ho, &s->http), SLUICE_OK);
}

static void server_close(server *s) {
  sluice_http_close(s->http);
  sluice_policy_close(s->pol);
  sluice_limiter_close(s->lim);
  sluice_clock_free(s->clock);
}

/* A response as the client sees it: the status and header strings. */
typedef struct response {
  int status;
  size_t n;
  sluice_http_header h[SLUICE_HTTP_MAX_HEADERS];
  char buf[SLUICE_HTTP_HEADER_BUF];
} response;

static const char *hdr(const response *r, const char *name) {
  size_t i;
  for (i = 0; i < r->n; i++)
    if (strcmp(r->h[i].name, name) == 0)
      return r->h[i].value;
  return NULL;
}

static void serve(server *s, int64_t cost, response *r) {
  int64_t now = sluice_clock_now(s->clock);
  sluice_http_answer a;
  /* Function scope: the answer borrows both. */
  sluice_request q = {0};
  sluice_decision d;
  char points[24];
  sluice_attr pa = {"points", points};
  if (s->pol) {
    q.tenant_id = "tenant-acme";
    q.api_key_id = "key-batch";
    q.tier = "sandbox";
    q.method = "POST";
    q.route = "/v1/ledgers/main/entries";
    snprintf(points, sizeof points, "%lld", (long long)cost);
    q.attrs = &pa;
    q.nattrs = 1;
    cr_assert_eq(sluice_policy_decide(s->pol, 1, &q, &d, NULL), SLUICE_OK);
    if (d.flags & SLUICE_DECISION_STRIKE)
      s->strikes++;
  } else {
    sluice_verdict v;
    cr_assert_eq(sluice_limiter_take(s->lim, "k:batch", 7, &s->bucket, cost,
                                     &v),
                 SLUICE_OK);
    /* No policy: the verdict said as a decision (sluice/http.h). */
    memset(&d, 0, sizeof d);
    d.allowed = v.allowed;
    d.outcome = v.allowed ? SLUICE_OUTCOME_ALLOW : SLUICE_OUTCOME_THROTTLED;
    d.limit = v.limit;
    d.remaining = v.remaining;
    d.reset_ns = v.reset_ns;
    d.policy_window_ns =
        s->bucket.burst * s->bucket.period_ns / s->bucket.rate;
    d.retry_after_ns = v.retry_after_ns;
    d.cost = cost;
    /* The spec's strike: a request rejected for lack of tokens. */
    if (!v.allowed)
      s->strikes++;
  }
  if (d.allowed)
    s->served++;
  else
    s->throttles++;
  cr_assert_eq(sluice_http_answer_make(s->http, &d, s->pol ? &q : NULL,
                                       s->pol ? "req_batch" : NULL, now, &a),
               SLUICE_OK);
  r->status = a.status;
  cr_assert_eq(sluice_http_answer_headers(s->http, &a, r->h,
                                          SLUICE_HTTP_MAX_HEADERS, &r->n,
                                          r->buf, sizeof r->buf, NULL),
               SLUICE_OK);
}

/* ------------------------------------------------------------ client --- */

static uint64_t seq_rand(void *ud) {
  uint64_t *st = ud;
  return splitmix64(st);
}

enum mode { PACED, BACKOFF_ONLY, IGNORES_RETRY_AFTER };

static int64_t header_int(const response *r, const char *name) {
  const char *v = hdr(r, name);
  int64_t x;
  cr_assert_not_null(v, "server sent no %s", name);
  cr_assert_eq(sluice_http_parse_uint(v, strlen(v), &x), SLUICE_OK);
  return x;
}

/* Run `n` requests (every 25th an expensive 10-point one); returns the
** simulated time taken, ns. */
static int64_t run_batch(server *s, int n, enum mode mode) {
  sluice_backoff_options bo = {0};
  sluice_backoff *b;
  uint64_t seed = 20261014;
  int64_t t0 = sluice_clock_now(s->clock);
  int i;
  /* A seeded generator keeps the run reproducible; the assertions do not
  ** depend on the draws (any seed must pass). */
  bo.rand = seq_rand;
  bo.rand_ud = &seed;
  bo.max_attempts = 1000; /* a batch job keeps going */
  cr_assert_eq(sluice_backoff_open(&bo, &b), SLUICE_OK);
  for (i = 0; i < n; i++) {
    int64_t cost = i % 25 == 24 ? 10 : 1;
    int64_t next_cost = (i + 1) % 25 == 24 ? 10 : 1;
    int attempt = 1;
    response r;
    for (;;) {
      sluice_backoff_input in = {0};
      sluice_backoff_plan p;
      serve(s, cost, &r);
      if (r.status == 200)
        break;
      cr_assert_eq(r.status, 429);
      if (mode == IGNORES_RETRY_AFTER) {
        sluice_clock_advance(s->clock, 100 * MS);
        attempt++;
        continue;
      }
      in.attempt = attempt++;
      in.status = r.status;
      in.flags = SLUICE_REQ_IDEMPOTENT;
      in.retry_after = hdr(&r, "Retry-After");
      in.date = hdr(&r, "Date");
      in.penalty_box = hdr(&r, "X-Penalty-Box-Status");
      in.remaining = hdr(&r, "RateLimit-Remaining");
      in.now_ns = sluice_clock_now(s->clock);
      cr_assert_eq(sluice_backoff_plan_next(b, &in, &p), SLUICE_OK);
      cr_assert_eq(p.action, SLUICE_BACKOFF_RETRY, "reason %d", p.reason);
      cr_assert_geq(p.wait_ms, p.floor_ms);
      sluice_clock_advance(s->clock, p.wait_ms * MS);
    }
    if (mode == PACED) {
      sluice_pace_input pi = {0};
      int64_t iv;
      pi.limit = header_int(&r, "RateLimit-Limit");
      pi.remaining = header_int(&r, "RateLimit-Remaining");
      pi.reset_ms = header_int(&r, "RateLimit-Reset") * 1000;
      pi.cost = next_cost;
      pi.reserve = pi.limit / 10;
      cr_assert_eq(sluice_pace_interval(&pi, &iv), SLUICE_OK);
      sluice_clock_advance(s->clock, iv * MS);
    }
  }
  sluice_backoff_close(b);
  return sluice_clock_now(s->clock) - t0;
}

/* Points the batch needs, and the shortest time a 300-point bucket at
** 5 points/s can serve them in. */
static int64_t batch_points(int n) {
  int64_t pts = 0;
  int i;
  for (i = 0; i < n; i++)
    pts += i % 25 == 24 ? 10 : 1;
  return pts;
}

#define N_REQ 3000

static void check_paced(server *s, int64_t took) {
  int64_t ideal = (batch_points(N_REQ) - 300) * SEC / 5;
  cr_log_info("paced: %lld s (ideal %lld s), %lld throttles",
              (long long)(took / SEC), (long long)(ideal / SEC),
              (long long)s->throttles);
  cr_assert_eq(s->served, N_REQ);
  cr_assert_eq(s->throttles, 0, "paced client was throttled %lld times",
               (long long)s->throttles);
  cr_assert_eq(s->strikes, 0);
  /* Pacing must not buy safety by crawling: within 10% of the bucket's
  ** own limit (whole-second headers and the 10% reserve cost a little). */
  cr_assert_leq(took, ideal + ideal / 10, "took %lld s, ideal %lld s",
                (long long)(took / SEC), (long long)(ideal / SEC));
  cr_assert_geq(took, ideal, "faster than the bucket allows?");
}

Test(batch, gcra_paced_client_never_struck) {
  server s;
  int64_t took;
  server_open(&s, 0);
  took = run_batch(&s, N_REQ, PACED);
  check_paced(&s, took);
  server_close(&s);
}

Test(batch, gcra_unpaced_client_is_throttled) {
  /* Control: without pacing the same batch runs into the limiter, so the
  ** zero above is not a property of the workload. */
  server s;
  server_open(&s, 0);
  run_batch(&s, N_REQ, BACKOFF_ONLY);
  cr_assert_eq(s.served, N_REQ);
  cr_assert_gt(s.throttles, 100);
  server_close(&s);
}

Test(batch, policy_paced_client_never_struck) {
  server s;
  int64_t took;
  server_open(&s, 1);
  took = run_batch(&s, N_REQ, PACED);
  check_paced(&s, took);
  server_close(&s);
}

Test(batch, policy_backoff_client_throttled_but_never_struck) {
  /* Honouring Retry-After (through the planner) is enough to never be
  ** struck: the policy counts a strike only for a request sent before the
  ** Retry-After it was given. */
  server s;
  server_open(&s, 1);
  run_batch(&s, N_REQ, BACKOFF_ONLY);
  cr_log_info("backoff only: %lld throttles, %lld strikes",
              (long long)s.throttles, (long long)s.strikes);
  cr_assert_eq(s.served, N_REQ);
  cr_assert_gt(s.throttles, 100);
  cr_assert_eq(s.strikes, 0);
  server_close(&s);
}

Test(batch, policy_client_ignoring_retry_after_is_struck_and_boxed) {
  server s;
  response r;
  int i, boxed = 0;
  server_open(&s, 1);
  for (i = 0; i < 400 && !boxed; i++) {
    serve(&s, 1, &r);
    if (hdr(&r, "X-Penalty-Box-Status") &&
        strcmp(hdr(&r, "X-Penalty-Box-Status"), "Active-Lockout") == 0)
      boxed = 1;
    sluice_clock_advance(s.clock, 10 * MS);
  }
  cr_assert_gt(s.strikes, 0);
  cr_assert(boxed, "20 strikes in 60 s should trip the sandbox box");
  cr_assert_not_null(hdr(&r, "Retry-After"));
  server_close(&s);
}

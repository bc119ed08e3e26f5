/* The spec's scenarios for `sluice simulate` (sim.h): their actors,
** policies, hooks and report notes. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fail_store.h"
#include "sim.h"

/* ------------------------------------------------------- scenarios --- */

/* A client that honours Retry-After: after a denial it waits what it was
** told, otherwise it sends every period. */
static void act_honest(sim *s, actor *a) {
  heard h;
  sluice_decision d = sim_send(s, a, &a->rq, &h);
  int64_t wait = a->period_ns;
  (void)d;
  if (h.status != 200 && h.retry_after) {
    int64_t ms;
    if (sluice_backoff_parse_retry_after(h.retry_after,
                                         strlen(h.retry_after), h.date,
                                         h.date ? strlen(h.date) : 0,
                                         &ms) == SLUICE_OK &&
        ms * MS_NS > wait)
      wait = ms * MS_NS;
  }
  a->next_ns = sim_now(s) + wait;
  if (a->until_ns && a->next_ns >= a->until_ns)
    a->next_ns = INT64_MAX;
}

/* A client that ignores everything it is told. */
static void act_ignorer(sim *s, actor *a) {
  heard h;
  sim_send(s, a, &a->rq, &h);
  a->next_ns = sim_now(s) + a->period_ns;
}

static sluice_request std_rq(const char *tenant, const char *key,
                             const char *tier, const char *method,
                             const char *route) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.tenant_id = tenant;
  r.api_key_id = key;
  r.tier = tier;
  r.method = method;
  r.route = route;
  r.client_ip = "192.0.2.10";
  return r;
}

/* A key of the growth tenant: 5 requests/s in the day, 100 requests/s
** during the end-of-day batch (600-720 s); honours Retry-After. */
static void act_growth_key(sim *s, actor *a) {
  int64_t t = sim_now(s) - T0;
  int batch = t >= 600 * S_NS && t < 720 * S_NS;
  a->rq.method = batch ? "POST" : "GET";
  a->period_ns = batch ? 10 * MS_NS : 200 * MS_NS;
  act_honest(s, a);
  /* the batch starts on time even after a slow daytime period */
  if (!batch && a->next_ns > T0 + 600 * S_NS && t < 600 * S_NS)
    a->next_ns = T0 + 600 * S_NS + (a - s->a) * MS_NS;
}

void scn_growth_batch(sim *s) {
  /* Daytime: three keys of one growth tenant at 5 requests/s each for ten
  ** minutes; then the end-of-day batch: each key at 100 requests/s for two
  ** minutes, honouring Retry-After; then back to daytime traffic. */
  static const char *keys[3] = {"key-erp", "key-billing", "key-payouts"};
  int i;
  s->plot.line_label = "points remaining (key-erp's answers)";
  sim_add_series(s, SER_ALLOWED, "allowed, 3 keys", "#9cc59a");
  sim_add_series(s, SER_THROTTLED, "429 throttled", "#d62728");
  sim_add_series(s, SER_BOXED, "boxed", "#5b2a86");
  sim_plot_span(&s->plot, 600 * S_NS, 720 * S_NS, "#b8860b",
                "end-of-day batch: 3 keys x 100 req/s");
  for (i = 0; i < 3; i++) {
    actor *k = sim_add_actor(s, keys[i], act_growth_key, i * 7 * MS_NS);
    k->rq = std_rq("acme", keys[i], s->tier, "GET",
                   "/v1/ledgers/main/entries");
    k->observed = i == 0;
  }
  sim_run(s, NULL, 0);
  {
    int64_t sent = 0, thr = 0, strikes = 0;
    for (i = 0; i < s->nact; i++) {
      sent += s->a[i].sent;
      thr += s->a[i].got429;
      strikes += s->a[i].strikes;
    }
    sim_note(s, "batch window 600-720 s: 3 keys x 100 requests/s, honouring "
            "Retry-After\n");
    sim_note(s, "the tenant bucket (3000 burst, 50/s) absorbs the first seconds "
            "of the spike, then binds\n");
    sim_note(s, "requests sent %" PRId64 ", 429s %" PRId64 ", strikes %" PRId64
            " (clients that honour Retry-After are never struck)\n",
         sent, thr, strikes);
    snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
             "%" PRId64 " requests, %" PRId64 " answered 429, %" PRId64
             " strikes, no box: the tenant bucket binds, clients wait",
             sent, thr, strikes);
  }
}

void scn_retry_ignorer(sim *s) {
  /* A sandbox key hammering at 20 requests/s, ignoring Retry-After and the
  ** box; a second key of the same tenant polls politely once a second. */
  actor *bad = sim_add_actor(s, "key-hammer", act_ignorer, 0);
  actor *good = sim_add_actor(s, "key-polite", act_honest, 3 * MS_NS);
  s->plot.line_label = "points remaining (key-hammer)";
  sim_add_series(s, SER_ALLOWED, "allowed, both keys", "#9cc59a");
  sim_add_series(s, SER_THROTTLED, "429 throttled (strikes)", "#e6b800");
  sim_add_series(s, SER_BOXED_L1, "429 boxed, level 1", "#e8743b");
  sim_add_series(s, SER_BOXED_L2, "429 boxed, level 2", "#c03030");
  sim_add_series(s, SER_SUSPENDED, "403 suspended", "#5b2a86");
  bad->rq = std_rq("sandbox-co", "key-hammer", s->tier, "GET",
                   "/v1/ledgers/l1/entries");
  bad->period_ns = 50 * MS_NS;
  bad->observed = 1;
  good->rq = std_rq("sandbox-co", "key-polite", s->tier, "GET",
                    "/v1/ledgers/l1/entries");
  good->period_ns = S_NS;
  sim_run(s, NULL, 0);
  {
    sluice_decision d;
    heard h;
    sluice_clock_set(s->clock, s->end_ns);
    d = sim_send(s, bad, &bad->rq, &h);
    sim_note(s, "key-hammer: sent %" PRId64 ", 429s %" PRId64 ", strikes %" PRId64
            ", boxed or suspended %" PRId64 "\n",
         bad->sent, bad->got429, bad->strikes, bad->boxed);
    sim_note(s, "key-hammer at the end: %s, HTTP %d, penalty level %d\n",
             sluice_name(SLUICE_NAME_OUTCOME, d.outcome), d.verdict_status,
             d.penalty_level);
    sim_note(s, "key-polite (same tenant): sent %" PRId64 ", 429s %" PRId64
            ", strikes %" PRId64 " (a box is per key)\n",
         good->sent, good->got429, good->strikes);
    snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
             "key-hammer: %" PRId64 " strikes, boxed 5 min, then 60 min, "
             "then suspended (%s); key-polite: %" PRId64 " 429s",
             bad->strikes, d.verdict_status == 403 ? "403" : "not 403",
             good->got429);
  }
}

/* The paced batch client of spec section 7: paces on RateLimit-Remaining
** with sluice_pace_interval() and, should it be refused anyway, obeys the
** backoff planner. */
static void act_paced(sim *s, actor *a) {
  heard h;
  sluice_decision d;
  if (a->left == 0) {
    a->next_ns = INT64_MAX;
    return;
  }
  d = sim_send(s, a, &a->rq, &h);
  (void)d;
  if (h.status == 200) {
    sluice_pace_input pi;
    int64_t iv = 0;
    a->left--;
    a->attempt = 0;
    memset(&pi, 0, sizeof pi);
    pi.limit = sim_hdr_int(h.limit, 0);
    pi.remaining = sim_hdr_int(h.remaining, 0);
    pi.reset_ms = sim_hdr_int(h.reset, 0) * 1000;
    pi.cost = 1;
    pi.reserve = pi.limit / 10;
    if (pi.limit < 1 || sluice_pace_interval(&pi, &iv) != SLUICE_OK)
      iv = 1000;
    a->next_ns = sim_now(s) + (iv > 0 ? iv : 1) * MS_NS;
    if (a->left == 0)
      a->until_ns = sim_now(s); /* finished at */
  } else {
    sluice_backoff_input in;
    sluice_backoff_plan p;
    memset(&in, 0, sizeof in);
    in.attempt = (int)++a->attempt;
    in.status = h.status;
    in.flags = SLUICE_REQ_IDEMPOTENCY_KEY;
    in.retry_after = h.retry_after;
    in.date = h.date;
    in.penalty_box = h.penalty;
    in.remaining = h.remaining;
    in.now_ns = sim_now(s) - T0;
    if (sluice_backoff_plan_next(s->backoff, &in, &p) != SLUICE_OK ||
        p.action == SLUICE_BACKOFF_STOP) {
      a->next_ns = INT64_MAX;
      return;
    }
    a->next_ns = sim_now(s) + p.wait_ms * MS_NS;
  }
}

void scn_batch_backoff(sim *s) {
  /* 20000 entries posted by one growth key (25 points/s, burst 1500). */
  actor *a = sim_add_actor(s, "key-batch", act_paced, 0);
  a->rq = std_rq("ledgerco", "key-batch", s->tier, "POST",
                 "/v1/ledgers/main/entries");
  a->left = 20000;
  a->observed = 1;
  s->plot.line_label = "points remaining (key-batch)";
  sim_add_series(s, SER_ALLOWED, "201 posted", "#9cc59a");
  sim_add_series(s, SER_THROTTLED, "429 throttled", "#d62728");
  sim_add_series(s, SER_BOXED, "boxed", "#5b2a86");
  sim_run(s, NULL, 0);
  {
    int64_t took = (a->left == 0 ? a->until_ns : s->end_ns) - T0;
    int64_t ideal = (20000 - 1500) / 25;
    sim_note(s, "entries posted %" PRId64 " of 20000 in %" PRId64
            " s of virtual time (the bucket allows %" PRId64 " s)\n",
         20000 - a->left, took / S_NS, ideal);
    sim_note(s, "requests sent %" PRId64 ", 429s %" PRId64 ", strikes %" PRId64
            "\n",
         a->sent, a->got429, a->strikes);
    if (a->left == 0) {
      sim_plot_mark(&s->plot, took, "#2a7a2a", "all 20000 entries posted");
      sim_plot_trim(&s->plot, took);
    }
    snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
             "%" PRId64 " of 20000 entries in %" PRId64 " s (the bucket "
             "allows %" PRId64 " s), %" PRId64 " 429s, %" PRId64 " strikes",
             20000 - a->left, took / S_NS, ideal, a->got429, a->strikes);
  }
}

/* Credential stuffing.  Attackers spray distinct subjects with bad secrets
** from one IP each; office users log in from their shared NAT address and
** mistype now and then.  A sign-in is POST /v1/auth/token with its
** `subject` and, once the secret is checked, its `result` (the attributes
** of etc/ledger.conf). */
static void act_auth(sim *s, actor *a) {
  heard h;
  sluice_decision d;
  sluice_request rq;
  char subject[64];
  int fail;
  memset(&rq, 0, sizeof rq);
  rq.method = "POST";
  rq.route = "/v1/auth/token";
  rq.client_ip = a->ip;
  rq.attrs = a->attrs;
  a->attrs[0].name = "subject";
  if (a->subject[0]) { /* a user: fails one attempt in fail_every */
    a->attrs[0].value = a->subject;
    fail = a->fail_every && a->seq % a->fail_every == a->fail_every - 1;
  } else { /* an attacker: a new subject every time */
    snprintf(subject, sizeof subject, "user%05" PRId64 "@victim.example",
             (a->seq * 7919 + a->n) % 100000);
    a->attrs[0].value = subject;
    fail = 1;
  }
  a->seq++;
  /* Box check before verifying (no result yet), then the result
  ** (docs/policy.md). */
  rq.nattrs = 1;
  d = sim_send(s, a, &rq, &h);
  if (a->attacker)
    sim_count(s, d.verdict_status == 200 ? SER_ATT_CHECKED : SER_ATT_REFUSED,
          sim_now(s));
  else
    sim_count(s, d.verdict_status == 200 ? SER_USER_OK : SER_USER_REFUSED,
          sim_now(s));
  if (d.verdict_status == 200) {
    a->sent--; /* one attempt, two calls: count it once */
    a->attrs[1].name = "result";
    a->attrs[1].value = fail ? "bad_secret" : "ok";
    rq.nattrs = 2;
    sim_send(s, a, &rq, &h);
  }
  a->next_ns = sim_now(s) + a->period_ns;
}

void scn_credential_stuffing(sim *s) {
  int i;
  sim_add_series(s, SER_USER_OK, "office logins checked", "#59a14f");
  sim_add_series(s, SER_USER_REFUSED, "office logins refused", "#000000");
  sim_add_series(s, SER_ATT_CHECKED, "attacker attempts checked", "#b0a8a4");
  sim_add_series(s, SER_ATT_REFUSED, "attacker attempts refused (ban)", "#d62728");
  sim_plot_span(&s->plot, 120 * S_NS, s->end_ns - T0, "#666666",
                "attack: 3 IPs x 2 attempts/s, a new subject each");
  for (i = 0; i < 3; i++) {
    actor *a = sim_add_actor(s, "attacker", act_auth, 120 * S_NS + i * MS_NS);
    snprintf(a->ip, sizeof a->ip, "203.0.113.%d", 10 + i);
    a->attacker = 1;
    a->period_ns = 500 * MS_NS; /* 2 attempts/s */
    a->n = i * 31;
  }
  for (i = 0; i < 40; i++) {
    actor *u = sim_add_actor(s, "user", act_auth, i * 1500 * MS_NS);
    snprintf(u->ip, sizeof u->ip, "198.51.100.7");
    snprintf(u->subject, sizeof u->subject, "employee%02d@acme.example", i);
    u->period_ns = 60 * S_NS;
    u->fail_every = 10;
  }
  sim_run(s, NULL, 0);
  {
    int64_t users_sent = 0, users_refused = 0, att = 0, att_refused = 0;
    for (i = 0; i < s->nact; i++) {
      if (s->a[i].subject[0]) {
        users_sent += s->a[i].sent;
        users_refused += s->a[i].boxed;
      } else {
        att += s->a[i].sent;
        att_refused += s->a[i].boxed;
      }
    }
    sim_note(s, "penalties.address.strikes raised to %" PRId64
            " (an office behind NAT): the 500-failures-across-50-subjects "
            "signature is what catches the attack\n",
         cli_setting(s->cfg, "penalties.address.strikes"));
    sim_note(s, "attackers (3 IPs, 2 attempts/s, distinct subjects): %" PRId64
            " attempts, %" PRId64 " refused by a box or ban\n",
         att, att_refused);
    sim_note(s, "stuffing signatures %" PRIu64 ", IP bans (level 3) %" PRIu64 "\n",
         s->events[SLUICE_EVENT_STUFFING], s->events[SLUICE_EVENT_IP_BAN]);
    sim_note(s, "office users (40, one NAT address, 1 in 10 mistyped): %" PRId64
            " attempts, %" PRId64 " refused\n",
         users_sent, users_refused);
    snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
             "%" PRIu64 " attacking IPs banned by the stuffing signature; "
             "office users behind one NAT: %" PRId64 " of %" PRId64
             " logins refused",
             s->events[SLUICE_EVENT_IP_BAN], users_refused, users_sent);
  }
}

/* Backend outage: a growth tenant's mixed traffic while the store times
** out from 120 s to 240 s. */
static void act_reconcile(sim *s, actor *a) {
  heard h;
  sluice_decision d;
  sluice_request rq = a->rq;
  if (a->lease_id && sim_now(s) >= a->pending_release_ns) {
    sluice_policy_release(
        s->pol, &a->lease_rq,
        &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = a->lease_id});
    a->lease_id = 0;
  }
  snprintf(a->ledger, sizeof a->ledger, "ledger-%" PRId64, a->seq++ % 4);
  a->attrs[0] = (sluice_attr){"ledger", a->ledger};
  rq.attrs = a->attrs;
  rq.nattrs = 1;
  d = sim_send(s, a, &rq, &h);
  if (d.allowed && d.lease_id) {
    /* The job runs 5 s; its lease is released in the finally path. */
    if (a->lease_id)
      sluice_policy_release(
          s->pol, &a->lease_rq,
          &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = a->lease_id});
    a->lease_id = d.lease_id;
    a->lease_rq = rq;
    memcpy(a->lease_ledger, a->ledger, sizeof a->ledger);
    a->lease_attr = (sluice_attr){"ledger", a->lease_ledger};
    a->lease_rq.attrs = &a->lease_attr;
    a->pending_release_ns = sim_now(s) + 5 * S_NS;
  }
  a->next_ns = sim_now(s) + a->period_ns;
}

static void set_fail(sim *s, void *arg) {
  fail_plan p = fail_plan_from(*(int *)arg, 0);
  sluice_limiter_control(s->lim, FAIL_STORE_CTL_PLAN, &p);
}

static void act_outage_std(sim *s, actor *a) {
  act_honest(s, a);
}

void scn_backend_outage(sim *s) {
  static int timeout = SLUICE_ETIMEDOUT, heal = 0;
  hook hooks[2] = {{T0 + 120 * S_NS, set_fail, &timeout, 0},
                   {T0 + 240 * S_NS, set_fail, &heal, 0}};
  actor *std1 = sim_add_actor(s, "key-app", act_outage_std, 0);
  actor *std2 = sim_add_actor(s, "key-sync", act_outage_std, 5 * MS_NS);
  actor *rec = sim_add_actor(s, "key-app", act_reconcile, 11 * MS_NS);
  actor *auth = sim_add_actor(s, "token", act_auth, 13 * MS_NS);
  s->plot.line_label = "points remaining (key-app)";
  sim_add_series(s, SER_ALLOWED, "allowed by the store", "#9cc59a");
  sim_add_series(s, SER_DEGRADED, "allowed by the local degraded limiter",
             "#4e9fd1");
  sim_add_series(s, SER_THROTTLED, "429", "#d62728");
  sim_add_series(s, SER_503, "503 failed closed", "#ff7f0e");
  sim_plot_span(&s->plot, 120 * S_NS, 240 * S_NS, "#555555",
                "store times out (120-240 s)");
  std1->rq = std_rq("acme", "key-app", s->tier, "GET",
                    "/v1/ledgers/main/entries");
  std1->period_ns = 100 * MS_NS;
  std1->observed = 1;
  std2->rq = std_rq("acme", "key-sync", s->tier, "GET",
                    "/v1/ledgers/main/entries");
  std2->period_ns = 100 * MS_NS;
  rec->rq = std_rq("acme", "key-app", s->tier, "POST",
                   "/v1/ledgers/reconcile");
  rec->period_ns = 15 * S_NS;
  snprintf(auth->ip, sizeof auth->ip, "192.0.2.10");
  snprintf(auth->subject, sizeof auth->subject, "acme-service");
  auth->period_ns = 10 * S_NS;
  sim_run(s, hooks, 2);
  sim_note(s, "store times out (SLUICE_ETIMEDOUT) from 120 s to 240 s\n");
  sim_note(s, "reconcile (every 15 s): sent %" PRId64 ", 503 fail-closed %" PRId64
          "\n", rec->sent, rec->n503);
  sim_note(s, "auth token (every 10 s): sent %" PRId64 ", 503 fail-closed %" PRId64
          "\n", auth->sent, auth->n503);
  sim_note(s, "standard GETs (2 keys, 10/s each): sent %" PRId64 ", degraded %"
          PRId64 ", 429s %" PRId64 ", 503s %" PRId64 "\n",
       std1->sent + std2->sent, std1->ndeg + std2->ndeg,
       std1->got429 + std2->got429, std1->n503 + std2->n503);
  sim_note(s, "degraded decisions (local limiter at %" PRId64
          "%% of the tier rates): %" PRIu64 "\n",
       cli_setting(s->cfg, "failure.degraded_percent"), s->ts[sim_tier_row(s, s->tier)].degraded);
  sim_note(s, "events: degraded_on %" PRIu64 ", degraded_off %" PRIu64 "\n",
       s->events[SLUICE_EVENT_DEGRADED_ON],
       s->events[SLUICE_EVENT_DEGRADED_OFF]);
  snprintf(s->plot.subtitle, sizeof s->plot.subtitle,
           "during the outage: reconcile and auth fail closed (%" PRId64
           " 503s), GETs run on the local limiter (%" PRId64 " degraded)",
           rec->n503 + auth->n503, std1->ndeg + std2->ndeg);
}

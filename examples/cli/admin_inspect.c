/*
** sluice inspect: a scope's records in a live store, read without
** changing them (sluice_policy_inspect()) and printed: the tenant and key
** buckets, strikes, offenses, box level and time left, the Retry-After
** notice, concurrency lease holders, the ledger lock and the hourly
** export count; or, for an auth scope, its box and failure window.  A
** report that cannot be trusted (no record under the scope's ids, or a
** record --config could not have written) says so instead.
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cli.h"

/* A record these parameters could not have written: the --config given is
** not the one the service runs, and nothing read from it can be trusted. */
static void unfit(admin *a, const char *what, const char *why) {
  a->unfit++;
  fprintf(a->out, "  %-14s cannot tell: the record does not fit --config "
                  "(%s)\n", what, why);
}

static void secs(char *buf, size_t n, int64_t ns) {
  if (ns == SLUICE_FOREVER)
    snprintf(buf, n, "forever");
  else
    snprintf(buf, n, "%.1f s", (double)ns / 1e9);
}

static void show_bucket(admin *a, const char *what, unsigned bit,
                        const sluice_inspect_report *r,
                        const sluice_inspect_bucket *b) {
  char t[32];
  secs(t, sizeof t, b->reset_ns);
  if (r->unfit & bit) {
    char why[96];
    snprintf(why, sizeof why, "full in %s, more than an empty bucket of %"
             PRId64 " points takes", t, b->burst);
    unfit(a, what, why);
    return;
  }
  fprintf(a->out, "  %-14s %" PRId64 "/%" PRId64 " points, full in %s (%" PRId64
         " per %.3g s)%s\n",
         what, b->remaining, b->burst, t, b->rate, (double)b->period_ns / 1e9,
         (r->present & bit) ? "" : " [no record: full]");
}

static void show_penalty(admin *a, const sluice_inspect_report *r) {
  char t[32];
  if (r->unfit & SLUICE_INSPECT_BOX) {
    unfit(a, "penalty:", "more strikes than the threshold, or a box longer "
                         "than its level's");
    return;
  }
  if (r->level) {
    secs(t, sizeof t, r->box_end_ns == SLUICE_FOREVER
                          ? SLUICE_FOREVER
                          : r->box_end_ns - r->now_ns);
    fprintf(a->out, "  level: %d (%s, %s left)\n", r->level,
           r->suspended ? "suspended pending review" : "boxed", t);
    fprintf(a->out, "  strikes: 0 (not counted while boxed)\n");
  } else {
    fprintf(a->out, "  level: 0 (not boxed)\n");
    fprintf(a->out, "  strikes: %" PRId64 " of %" PRId64 " in the %.0f s window\n",
           r->strikes, r->strike_threshold,
           (double)r->strike_window_ns / 1e9);
  }
  fprintf(a->out, "  offenses: %" PRId64 " (forgotten %.0f h after the last trip)\n",
         r->offenses, (double)r->offense_ttl_ns / 3.6e12);
}

static void show_leases(admin *a, const char *what,
                        const sluice_inspect_leases *l, int64_t now) {
  int i, held = 0;
  fprintf(a->out, "  %s:", what);
  for (i = 0; i < l->slots; i++)
    if (l->id[i]) {
      char t[32];
      secs(t, sizeof t, l->until_ns[i] - now);
      fprintf(a->out, "%s slot %d: lease %016" PRIx64 ", %s left",
             held ? ";" : "", i, l->id[i], t);
      held++;
    }
  fprintf(a->out, "%s (%d of %d slots held)\n", held ? "" : " none", held,
         l->slots);
}

static void show_key(admin *a, const sluice_inspect_report *r) {
  const int64_t now = r->now_ns;
  fprintf(a->out, "scope: key %s of tenant %s, tier %s (ids %.8s... / %.8s...)\n",
         a->key, a->tenant, a->tier, r->scope_id, r->tenant_scope_id);
  show_bucket(a, "tenant bucket:", SLUICE_INSPECT_TENANT_BUCKET, r,
              &r->tenant_bucket);
  show_bucket(a, "key bucket:", SLUICE_INSPECT_KEY_BUCKET, r, &r->key_bucket);
  show_penalty(a, r);
  if (r->notice_until_ns) {
    char tt[32];
    secs(tt, sizeof tt, r->notice_until_ns - now);
    /* Under strike_every_denial the notice decides nothing: any 429 is
    ** a strike, sent before the notice ends or not. */
    fprintf(a->out, "  retry-after notice: live, %s left (%s)\n", tt,
            cli_setting(sluice_policy_config_of(a->pol),
                        "penalty.strike_every_denial")
                ? "every 429 is a strike: penalty.strike_every_denial"
                : "a request before then is a strike");
  } else {
    fprintf(a->out, "  retry-after notice: none\n");
  }
  show_leases(a, "reconcile leases", &r->reconcile, now);
  show_leases(a, "export leases", &r->export_, now);
  if (a->ledger) {
    if (r->ledger_lease) {
      char tt[32];
      secs(tt, sizeof tt, r->ledger_until_ns - now);
      fprintf(a->out, "  ledger %s: locked by lease %016" PRIx64 ", %s left\n",
             a->ledger, r->ledger_lease, tt);
    } else {
      fprintf(a->out, "  ledger %s: not locked\n", a->ledger);
    }
  }
  if (r->unfit & SLUICE_INSPECT_EXPORT_CAP)
    unfit(a, "exports:", "more exports than the cap");
  else
    fprintf(a->out, "  exports this window: %" PRId64 " of %" PRId64 "\n",
           r->exports_used, r->exports_limit);
}

static void show_auth(admin *a, const sluice_inspect_report *r) {
  int ip = a->scope == SLUICE_SCOPE_IP;
  fprintf(a->out, "scope: %s %s (id %.8s...)\n", ip ? "ip" : "subject",
         ip ? a->ip : a->subject, r->scope_id);
  if (!(r->unfit & SLUICE_INSPECT_BOX)) {
    char tt[32];
    secs(tt, sizeof tt, r->box_end_ns == SLUICE_FOREVER
                            ? SLUICE_FOREVER
                            : r->box_end_ns - r->now_ns);
    if (!r->level)
      fprintf(a->out, "  level: 0 (not boxed)\n");
    else
      fprintf(a->out, "  level: %d (boxed, %s left)\n", r->level, tt);
    fprintf(a->out, "  offenses: %" PRId64 "\n", r->offenses);
  }
  if (r->unfit & SLUICE_INSPECT_FAILURES)
    unfit(a, "failures:", "more failures than the limit");
  else
    fprintf(a->out, "  failures: %" PRId64 " of %" PRId64 " in the %.0f s window\n",
           r->failures, r->failures_limit, (double)r->failures_window_ns / 1e9);
}

/* One sluice_policy_inspect() call: the keys and parameters are the
** library's (lib/policy/keys.c and the tier's derived parameters), so the
** report reads what the service's decisions wrote. */
static int inspect_scope(admin *a) {
  sluice_inspect_query q;
  sluice_inspect_report r;
  unsigned caps = sluice_limiter_capabilities(a->lim);
  int rc;
  memset(&q, 0, sizeof q);
  q.scope = a->scope;
  q.tenant_id = a->tenant;
  q.api_key_id = a->key;
  q.tier = a->tier;
  q.ledger_id = a->ledger;
  q.client_ip = a->ip;
  q.auth_subject = a->subject;
  rc = sluice_policy_inspect(a->pol, &q, &r);
  if (rc == SLUICE_ENOTFOUND) {
    fprintf(stderr, "sluice inspect: --tier: '%s' is not a tier of the "
                    "configuration\n", a->tier);
    return CLI_USAGE;
  }
  if (rc != SLUICE_OK) {
    fprintf(stderr, "sluice inspect: reading the scope's records: %s: %s\n",
            sluice_strerror(rc), sluice_limiter_errmsg(a->lim));
    return rc == SLUICE_EKEY || rc == SLUICE_EINVAL ? CLI_USAGE : CLI_RUNTIME;
  }
  a->found = r.present != 0;
  fprintf(a->out, "store: %s (%s%s%s)\n", a->store, sluice_limiter_backend(a->lim),
         (caps & SLUICE_CAP_CROSS_PROCESS) ? ", shared between processes" : "",
         (caps & SLUICE_CAP_DURABLE) ? ", durable" : "");
  if (a->scope == SLUICE_SCOPE_KEY)
    show_key(a, &r);
  else
    show_auth(a, &r);
  return CLI_OK;
}

/* Declared limits: each one (or --limit's) whose scope the attributes
** given name, read with sluice_policy_inspect_limit() (the keys and the
** parameter set a decision of that request uses). */

/* Whether the query gives the attribute (a common field or an --attr). */
static int given_attr(const admin *a, const char *name) {
  size_t k;
  const char *common[][2] = {{"tenant", a->tenant}, {"key", a->key},
                             {"tier", a->tier},     {"ip", a->ip},
                             {"method", a->method}, {"route", a->route}};
  for (k = 0; k < sizeof common / sizeof common[0]; k++)
    if (!strcmp(name, common[k][0]))
      return common[k][1] != NULL;
  for (k = 0; k < a->nattrs; k++)
    if (!strcmp(a->attrs[k].name, name))
      return 1;
  return 0;
}
static int inspect_declared(admin *a) {
  sluice_request q;
  sluice_limit_info li;
  sluice_limit_state st;
  unsigned caps = sluice_limiter_capabilities(a->lim);
  const char *field;
  int i, rc, shown = 0, asked = 0;
  size_t k;
  memset(&q, 0, sizeof q);
  q.tenant_id = a->tenant;
  q.api_key_id = a->key;
  q.tier = a->tier;
  q.client_ip = a->ip;
  q.method = a->method;
  q.route = a->route;
  q.attrs = a->nattrs ? a->attrs : NULL;
  q.nattrs = a->nattrs;
  if (sluice_policy_limit_at(a->pol, 0, &li) != SLUICE_OK) {
    fprintf(stderr, "sluice inspect: --config %s declares no limits\n",
            a->config);
    return CLI_USAGE;
  }
  fprintf(a->out, "store: %s (%s%s%s)\n", a->store,
          sluice_limiter_backend(a->lim),
          (caps & SLUICE_CAP_CROSS_PROCESS) ? ", shared between processes"
                                            : "",
          (caps & SLUICE_CAP_DURABLE) ? ", durable" : "");
  fprintf(a->out, "scope:");
  if (a->tenant)
    fprintf(a->out, " tenant=%s", a->tenant);
  if (a->key)
    fprintf(a->out, " key=%s", a->key);
  if (a->tier)
    fprintf(a->out, " tier=%s", a->tier);
  if (a->ip)
    fprintf(a->out, " ip=%s", a->ip);
  if (a->method)
    fprintf(a->out, " method=%s", a->method);
  if (a->route)
    fprintf(a->out, " route=%s", a->route);
  for (k = 0; k < a->nattrs; k++)
    fprintf(a->out, " %s=%s", a->attrs[k].name, a->attrs[k].value);
  fprintf(a->out, "\n");
  for (i = 0; sluice_policy_limit_at(a->pol, i, &li) == SLUICE_OK; i++) {
    char t[32], what[48], own[96];
    if (a->limit && strcmp(a->limit, li.name))
      continue;
    asked++;
    rc = sluice_policy_inspect_limit(a->pol, li.name, &q, &st, &field);
    if (rc == SLUICE_EINVAL || rc == SLUICE_EKEY) {
      if (a->limit) {
        fprintf(stderr, "sluice inspect: --limit %s: its scope needs %s%s\n",
                li.name, field ? field : "?",
                rc == SLUICE_EKEY ? " (not empty, at most 64 bytes)" : "");
        return CLI_USAGE;
      }
      snprintf(what, sizeof what, "%s (%s):", li.name, li.algorithm);
      fprintf(a->out, "  %-28s not this scope's (it needs %s)\n", what,
              field ? field : "?");
      continue;
    }
    if (rc != SLUICE_OK) {
      fprintf(stderr, "sluice inspect: reading limit %s: %s: %s\n", li.name,
              sluice_strerror(rc), sluice_limiter_errmsg(a->lim));
      return CLI_RUNTIME;
    }
    shown++;
    a->found |= st.present;
    snprintf(what, sizeof what, "%s (%s):", li.name, li.algorithm);
    if (st.unfit) {
      unfit(a, what, "more than its parameters allow");
      continue;
    }
    secs(t, sizeof t, st.reset_ns);
    /* Numbers chosen by an attribute not given are the limit's own: said,
    ** since a record written under another value's numbers reads wrong. */
    snprintf(own, sizeof own, " [%s not given: the limit's own numbers]",
             li.by ? li.by : "");
    if (!li.by || given_attr(a, li.by))
      own[0] = '\0';
    if (!strcmp(li.algorithm, "concurrency") || !strcmp(li.algorithm, "lock"))
      fprintf(a->out, "  %-28s %d of %" PRId64 " leases held%s%s%s\n", what,
              st.held, st.quota, st.held ? ", the last ends in " : "",
              st.held ? t : "", own);
    else
      fprintf(a->out, "  %-28s %" PRId64 "/%" PRId64 " %s left, full in %s"
              "%s%s\n", what, st.remaining, st.quota, li.unit, t,
              st.present ? "" : " [no record: full]", own);
  }
  if (a->limit && !asked) {
    fprintf(stderr, "sluice inspect: --limit %s: not a limit of --config "
                    "%s\n", a->limit, a->config);
    return CLI_USAGE;
  }
  if (!shown) {
    fprintf(stderr, "sluice inspect: no declared limit's scope is given by "
                    "these attributes\n");
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* The report is held back until it is known to say something: a scope
** with no record under its ids reads exactly like a scope read with the
** wrong secret (every bucket full, no strikes), so that is all it says. */
int admin_inspect(admin *a) {
  char *text = NULL;
  size_t len = 0;
  int rc;
  a->out = open_memstream(&text, &len);
  if (!a->out) {
    fprintf(stderr, "sluice inspect: out of memory\n");
    return CLI_RUNTIME;
  }
  rc = a->declared ? inspect_declared(a) : inspect_scope(a);
  if (fclose(a->out) != 0) {
    free(text);
    fprintf(stderr, "sluice inspect: out of memory\n");
    return CLI_RUNTIME;
  }
  a->out = NULL;
  if (rc == CLI_OK && a->found == 0) {
    printf("store: %s\n"
           "cannot tell: no record exists under this scope's ids.  Either the "
           "scope\nhas been idle long enough for every record to expire (all "
           "its buckets\nfull, nothing boxed), or --secret-file is not the "
           "service's secret and\nthe ids are not the service's; sluice "
           "cannot tell which.\n", a->store);
    rc = CLI_BADINPUT;
  } else {
    fwrite(text, 1, len, stdout);
    if (rc == CLI_OK && a->unfit) {
      printf("cannot tell: %d record%s above could not have been written "
             "with --config %s;\nis it the service's configuration?\n",
             a->unfit, a->unfit == 1 ? "" : "s", a->config);
      rc = CLI_BADINPUT;
    }
  }
  free(text);
  return rc;
}

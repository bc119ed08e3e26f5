/*
** sluice inspect: a scope's records in a live store, read without
** changing them and printed: each declared limit whose scope the
** attributes given name (sluice_policy_inspect() of a limit: what is left,
** until full, leases held), the penalties the policy declares, and the
** penalty box of the key, address or subject named
** (sluice_policy_inspect(): level and time left, strikes or failures,
** offenses, the Retry-After notice).  A report that cannot be trusted (no
** record under the scope's ids, or a record --config could not have
** written) says so instead.
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

/* An address's or a subject's box: level, offenses, the failures window. */
static void show_auth(admin *a, const sluice_inspect_report *r) {
  if (r->unfit & SLUICE_INSPECT_BOX) {
    unfit(a, "penalty:", "a box longer than its level's");
  } else {
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
    fprintf(a->out, "  failures: %" PRId64 " of %" PRId64 " in the %.0f s "
                    "window\n",
            r->failures, r->failures_limit,
            (double)r->failures_window_ns / 1e9);
}

/* A setting of the configuration in force as text ("" when none). */
static const char *conf_str(const admin *a, const char *path, char *buf,
                            size_t n) {
  if (sluice_policy_config_get(sluice_policy_config_of(a->pol), path, buf,
                               n) != SLUICE_OK)
    buf[0] = 0;
  return buf;
}

/* The declared penalties whose scope these attributes give, with what
** they count as a strike: "keys (tenant, key; strike: early)"... and
** whether one of the key's counts every 429 ("every"). */
static void show_declared_penalties(admin *a, int *every) {
  char names[512], path[160], scope[160], strike[32];
  char *save = NULL, *n;
  *every = 0;
  conf_str(a, "penalties", names, sizeof names);
  if (!names[0])
    return;
  fprintf(a->out, "  penalties:");
  for (n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
    int i;
    size_t len = 0;
    scope[0] = 0;
    for (i = 0; i < SLUICE_LIMIT_SCOPE_MAX; i++) { /* a list: by element */
      char v[64];
      snprintf(path, sizeof path, "penalties.%s.scope.[%d]", n, i);
      if (!conf_str(a, path, v, sizeof v)[0])
        break;
      len += (size_t)snprintf(scope + len, sizeof scope - len, "%s%s",
                              i ? ", " : "", v);
      if (len >= sizeof scope)
        break;
    }
    snprintf(path, sizeof path, "penalties.%s.strike", n);
    conf_str(a, path, strike, sizeof strike);
    fprintf(a->out, " %s (%s; strike: %s)%s", n, scope, strike,
            save && *save ? "," : "");
    if (!strcmp(strike, "every") && !strcmp(scope, "tenant, key"))
      *every = 1;
  }
  fprintf(a->out, "\n");
}

/* The penalty box of the scope the common fields name (the key's, the
** address's, the subject's), read with sluice_policy_inspect(): level and
** time left, strikes or failures, offenses, the Retry-After notice. */
static int show_box(admin *a, int every) {
  sluice_inspect_query q;
  sluice_inspect_report r;
  int rc, scope = a->tenant && a->key && a->tier ? SLUICE_SCOPE_KEY
                  : a->ip                         ? SLUICE_SCOPE_IP
                  : a->subject                    ? SLUICE_SCOPE_SUBJECT
                                                  : 0;
  if (!scope)
    return CLI_OK;
  memset(&q, 0, sizeof q);
  q.scope = scope;
  q.tenant_id = a->tenant;
  q.api_key_id = a->key;
  q.tier = a->tier;
  q.client_ip = a->ip;
  q.auth_subject = a->subject;
  rc = sluice_policy_inspect(a->pol, &q, &r);
  if (rc == SLUICE_ENOTFOUND) {
    fprintf(stderr, "sluice inspect: --tier: '%s' is not a tier of the "
                    "configuration\n", a->tier);
    return CLI_USAGE;
  }
  if (rc != SLUICE_OK) {
    fprintf(stderr, "sluice inspect: reading the scope's box: %s: %s\n",
            sluice_strerror(rc), sluice_limiter_errmsg(a->lim));
    return rc == SLUICE_EKEY || rc == SLUICE_EINVAL ? CLI_USAGE : CLI_RUNTIME;
  }
  r.present &= SLUICE_INSPECT_BOX | SLUICE_INSPECT_NOTICE |
               SLUICE_INSPECT_FAILURES | SLUICE_INSPECT_STUFFING;
  a->found |= r.present != 0;
  fprintf(a->out, "  box of the %s (id %.8s...):\n",
          scope == SLUICE_SCOPE_KEY  ? "key"
          : scope == SLUICE_SCOPE_IP ? "address"
                                     : "subject",
          r.scope_id);
  if (!r.present) {
    fprintf(a->out, "  [no box record found under these ids]\n");
    return CLI_OK;
  }
  if (scope != SLUICE_SCOPE_KEY) {
    show_auth(a, &r);
    return CLI_OK;
  }
  show_penalty(a, &r);
  if (r.notice_until_ns) {
    char tt[32];
    secs(tt, sizeof tt, r.notice_until_ns - r.now_ns);
    /* When every 429 is a strike the notice decides nothing. */
    fprintf(a->out, "  retry-after notice: live, %s left (%s)\n", tt,
            every ? "every 429 is a strike: the penalty's strike = \"every\""
                  : "a request before then is a strike");
  } else {
    fprintf(a->out, "  retry-after notice: none\n");
  }
  return CLI_OK;
}

/* The policy's declared limits (each one, or --limit's, whose scope the
** attributes given name, read with sluice_policy_inspect(): the keys
** and the parameter set a decision of that request uses), then the
** penalty box of the scope named. */

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

static int inspect_policy(admin *a) {
  sluice_request q;
  sluice_declared_info li;
  sluice_inspect_query iq;
  sluice_inspect_report rep;
  const sluice_limit_state *st = &rep.limit;
  unsigned caps = sluice_limiter_capabilities(a->lim);
  const char *field;
  int i, rc, shown = 0, asked = 0, every;
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
  for (i = 0; sluice_policy_declared_at(a->pol, SLUICE_DECLARED_LIMIT, i,
                                        &li) == SLUICE_OK;
       i++) {
    char t[32], what[48], own[96];
    if (a->limit && strcmp(a->limit, li.name))
      continue;
    asked++;
    memset(&iq, 0, sizeof iq);
    iq.limit = li.name;
    iq.req = &q;
    rc = sluice_policy_inspect(a->pol, &iq, &rep);
    field = rep.invalid_field;
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
    if (rc == SLUICE_ENOTFOUND && field && !strcmp(field, "tier")) {
      fprintf(stderr, "sluice inspect: --tier %s: not a tier of the policy\n",
              a->tier ? a->tier : "?");
      return CLI_USAGE;
    }
    if (rc != SLUICE_OK) {
      fprintf(stderr, "sluice inspect: reading limit %s: %s: %s\n", li.name,
              sluice_strerror(rc), sluice_limiter_errmsg(a->lim));
      return CLI_RUNTIME;
    }
    shown++;
    a->found |= st->present;
    snprintf(what, sizeof what, "%s (%s):", li.name, li.algorithm);
    if (st->unfit) {
      unfit(a, what, "more than its parameters allow");
      continue;
    }
    secs(t, sizeof t, st->reset_ns);
    /* Numbers chosen by an attribute not given are the limit's own: said,
    ** since a record written under another value's numbers reads wrong. */
    snprintf(own, sizeof own, " [%s not given: the limit's own numbers]",
             li.by ? li.by : "");
    if (!li.by || given_attr(a, li.by))
      own[0] = '\0';
    if (!strcmp(li.algorithm, "concurrency") || !strcmp(li.algorithm, "lock"))
      fprintf(a->out, "  %-28s %d of %" PRId64 " leases held%s%s%s\n", what,
              st->held, st->quota, st->held ? ", the last ends in " : "",
              st->held ? t : "", own);
    else
      fprintf(a->out,
              "  %-28s %" PRId64 "/%" PRId64 " %s left, full in %s"
              "%s%s\n",
              what, st->remaining, st->quota, li.unit, t,
              st->present ? "" : " [no record: full]", own);
  }
  if (a->limit && !asked) {
    fprintf(stderr, "sluice inspect: --limit %s: not a limit of --config "
                    "%s\n", a->limit, a->config);
    return CLI_USAGE;
  }
  if (a->limit || a->only_limits) {
    if (!shown) {
      fprintf(stderr, "sluice inspect: no declared limit's scope is given "
                      "by these attributes\n");
      return CLI_USAGE;
    }
    return CLI_OK;
  }
  show_declared_penalties(a, &every);
  return show_box(a, every);
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
  rc = inspect_policy(a);
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

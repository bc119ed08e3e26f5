/*
** ledger-api's alert options (docs/cli.md): where the policy's events go
** besides --webhook's JSON, in the formats people read.
**
**   --alert FORMAT=URL[,KEY=VALUE...]   FORMAT slack, pagerduty, email or
**       json; KEYs routing_key (pagerduty), from and to (email), events
**       (names joined by '+': alert+page) and name (the metrics label)
**   --alert-contacts FILE   tenants' contacts (sluice/webhook.h's format)
**   --alert-spool PATH      an LMDB spool per worker: PATH.N for worker N
**   --alert-allow LIST      loopback,private,link_local: ranges a
**                           destination may be in (none by default)
**   --alert-proxy URL       the proxy to post through (none by default;
**                           the environment's is ignored)
** Every worker opens its own sink after the fork (the sink's thread does
** not survive one); a worker respawned in slot N takes over spool N.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_api.h"

#define ALERTS_MAX 8

static sluice_webhook_dest dests[ALERTS_MAX];
static int ndests;
static char spool_base[480], spool_path[512];

static int event_bits(const char *v, uint32_t *out) {
  char buf[256], *k, *save = NULL;
  snprintf(buf, sizeof buf, "%s", v);
  *out = 0;
  for (k = strtok_r(buf, "+", &save); k; k = strtok_r(NULL, "+", &save)) {
    int t;
    for (t = 1; t < SLUICE_EVENT__COUNT &&
                strcmp(k, sluice_name(SLUICE_NAME_EVENT, t));
         t++)
      ;
    if (t == SLUICE_EVENT__COUNT)
      return -1;
    *out |= SLUICE_WEBHOOK_EVENT(t);
  }
  return *out ? 0 : -1;
}

/* FORMAT=URL[,KEY=VALUE...]; the argument (argv) stays, cut in place. */
static int add_alert(char *arg) {
  static const char *const formats[] = {"json", "slack", "pagerduty",
                                        "email"};
  sluice_webhook_dest *d = &dests[ndests];
  char *eq = strchr(arg, '='), *kv, *save = NULL;
  int f;
  if (ndests == ALERTS_MAX || !eq)
    return -1;
  *eq = 0;
  for (f = 0; f < 4 && strcmp(arg, formats[f]); f++)
    ;
  if (f == 4)
    return -1;
  memset(d, 0, sizeof *d);
  d->format = f;
  d->url = strtok_r(eq + 1, ",", &save);
  while ((kv = strtok_r(NULL, ",", &save))) {
    char *v = strchr(kv, '=');
    if (!v)
      return -1;
    *v++ = 0;
    if (!strcmp(kv, "routing_key"))
      d->routing_key = v;
    else if (!strcmp(kv, "from"))
      d->mail_from = v;
    else if (!strcmp(kv, "to")) /* one address: repeat to= for more */
      d->mail_to = v;
    else if (!strcmp(kv, "name"))
      d->name = v;
    else if (strcmp(kv, "events") || event_bits(v, &d->events))
      return -1;
  }
  if (!d->url)
    return -1;
  ndests++;
  return 0;
}

static int allow_list(const char *arg, unsigned *out) {
  char buf[128], *k, *save = NULL;
  snprintf(buf, sizeof buf, "%s", arg);
  *out = 0;
  for (k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
    if (!strcmp(k, "loopback"))
      *out |= SLUICE_WEBHOOK_ALLOW_LOOPBACK;
    else if (!strcmp(k, "private"))
      *out |= SLUICE_WEBHOOK_ALLOW_PRIVATE;
    else if (!strcmp(k, "link_local"))
      *out |= SLUICE_WEBHOOK_ALLOW_LINK_LOCAL;
    else
      return -1;
  }
  return 0;
}

int ledger_alert_option(const char *name, char *arg) {
  char given[256];
  int bad = 0;
  snprintf(given, sizeof given, "%s", arg); /* add_alert cuts arg up */
  if (!strcmp(name, "alert"))
    bad = add_alert(arg);
  else if (!strcmp(name, "alert-contacts"))
    S.hooks.contacts_path = arg;
  else if (!strcmp(name, "alert-spool"))
    bad = snprintf(spool_base, sizeof spool_base, "%s", arg) >=
          (int)sizeof spool_base;
  else if (!strcmp(name, "alert-allow"))
    bad = allow_list(arg, &S.hooks.flags);
  else if (!strcmp(name, "alert-proxy"))
    S.hooks.proxy = arg;
  else
    return -1;
  if (bad) {
    fprintf(stderr,
            "ledger-api: --%s: cannot use '%s' (see ledger-api --help)\n",
            name, given);
    return -1;
  }
  return 0;
}

int ledger_alerts_wanted(void) { return S.nhooks || ndests; }

/* The library's verdict before any worker starts: a sink without its
** spool, opened and closed (a bad URL or contacts file is a usage error,
** not a worker that fails forever). */
int ledger_alerts_check(char *err, size_t errlen) {
  sluice_webhook *w = NULL;
  int rc;
  if (!ledger_alerts_wanted())
    return 0;
  S.hooks.dests = dests;
  S.hooks.ndests = (size_t)ndests;
  S.hooks.errbuf = err;
  S.hooks.errlen = errlen;
  S.hooks.spool_path = NULL;
  rc = sluice_webhook_open(&S.hooks, &w);
  sluice_webhook_close(w);
  return rc;
}

int ledger_alerts_open(int slot, char *err, size_t errlen) {
  S.hooks.dests = dests;
  S.hooks.ndests = (size_t)ndests;
  S.hooks.errbuf = err;
  S.hooks.errlen = errlen;
  if (spool_base[0]) {
    snprintf(spool_path, sizeof spool_path, "%s.%d", spool_base, slot);
    S.hooks.spool_path = spool_path;
  }
  return sluice_webhook_open(&S.hooks, &S.webhook);
}

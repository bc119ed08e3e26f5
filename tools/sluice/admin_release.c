/*
** sluice release | lift | renew: end a penalty box early (levels 1 and 2,
** the enterprise level 3 box), keeping the offense count, lift a level 3
** suspension after review, or renew a level 3 box (the 24 h IP ban) for
** another whole box, through sluice_policy_release() and _renew() of a
** SLUICE_HOLD_BOX or _SUSPENSION; and the audit record that goes with
** it (one JSON line, appended and fsync'ed) naming who, why, the scope and
** the level.  With --nft the policy's event also goes to an nftables sink
** (include/sluice/nft.h), so an IP scope leaves (or re-enters) the
** kernel's set at once.
*/
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "cli.h"

static const char *const action_name[] = {"release", "lift", "renew"};

void admin_on_event(void *ud, const sluice_event *ev) {
  admin *a = ud;
  if (ev->type == SLUICE_EVENT_RELEASE || ev->type == SLUICE_EVENT_LIFT ||
      ev->type == SLUICE_EVENT_EDGE_DENY)
    a->released_level = ev->level;
  if (ev->type == SLUICE_EVENT_EDGE_DENY)
    a->renewed_until_ns = ev->until_ns;
  if (a->sink)
    sluice_nft_on_event(a->sink, ev);
}

/* jansson's own check, so the answer matches what json_pack accepts. */
static int is_utf8(const char *s) {
  json_t *j = json_string(s);
  json_decref(j);
  return j != NULL;
}

/* The audit record, built before the release so that input jansson
** refuses (text that is not UTF-8) stops the command with nothing changed.
** It names the scope by its ids (the hashed ids events carry), never by
** the raw key, IP or subject: an API key is a credential and the log is
** read by more people than the store.  NULL if a member is not UTF-8
** (*bad names the option) or memory ran out. */
static json_t *audit_record_new(const admin *a, int mode, const char **bad) {
  char when[32], sid[SLUICE_SCOPE_ID_LEN + 1], tid[SLUICE_SCOPE_ID_LEN + 1];
  time_t now = time(NULL);
  struct tm tm;
  const char *raw = a->scope == SLUICE_SCOPE_KEY  ? a->key
                    : a->scope == SLUICE_SCOPE_IP ? a->ip
                                                  : a->subject;
  json_t *o;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  sluice_scope_id(a->secret, raw, strlen(raw), sid);
  *bad = !is_utf8(a->who)                ? "--who"
         : !is_utf8(a->why)              ? "--reason"
         : a->tier && !is_utf8(a->tier)  ? "--tier"
         : !is_utf8(a->store)            ? "--store"
                                         : NULL;
  if (*bad)
    return NULL;
  o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s}", "time", when,
                "action", action_name[mode], "scope",
                a->scope == SLUICE_SCOPE_KEY  ? "key"
                : a->scope == SLUICE_SCOPE_IP ? "ip"
                                              : "subject",
                "scope_id", sid, "level", 0, "who", a->who, "why", a->why,
                "store", a->store);
  if (o && a->scope == SLUICE_SCOPE_KEY) {
    sluice_scope_id(a->secret, a->tenant, strlen(a->tenant), tid);
    if (json_object_set_new(o, "tenant_scope_id", json_string(tid)) ||
        json_object_set_new(o, "tier", json_string(a->tier))) {
      json_decref(o);
      o = NULL;
    }
  }
  return o;
}

/* One line: the record in compact JSON (jansson escapes it). */
static int audit_record_write(json_t *rec, int level, FILE *f) {
  if (json_object_set_new(rec, "level", json_integer(level)) ||
      json_dumpf(rec, f, JSON_COMPACT) != 0 || fputc('\n', f) == EOF)
    return -1;
  return ferror(f) ? -1 : 0;
}

/* --nft: apply what the sink was given (close drains its queue); a CLI_*
** exit code. */
static int nft_done(admin *a) {
  sluice_nft_stats st;
  char err[256] = "";
  int bad;
  if (!a->sink)
    return CLI_OK;
  sluice_nft_sync(a->sink, 10000);
  sluice_nft_stats_get(a->sink, &st);
  sluice_nft_last_error(a->sink, err, sizeof err);
  bad = st.failed || st.dropped || st.invalid ||
        (a->scope == SLUICE_SCOPE_IP && st.added + st.removed == 0);
  sluice_nft_close(a->sink);
  a->sink = NULL;
  if (!bad) {
    if (a->scope == SLUICE_SCOPE_IP)
      printf("nft: %s %s the kernel set\n", a->ip,
             st.added ? "put back in" : "removed from");
    return CLI_OK;
  }
  fprintf(stderr, "sluice %s: the store is updated but the kernel set is "
                  "not%s%s\n", a->cmd, err[0] ? ": " : "", err);
  return CLI_RUNTIME;
}

int admin_release_or_lift(admin *a, int mode) {
  int lift = mode == ADMIN_LIFT;
  sluice_request q;
  sluice_hold h = {0};
  FILE *f = NULL;
  json_t *rec;
  const char *bad;
  int rc;
  if (!a->who || !a->who[0] || !a->why || !a->why[0]) {
    fprintf(stderr, "sluice %s: %s is required (the audit record)\n", a->cmd,
            !a->who || !a->who[0] ? "--who" : "--reason");
    return CLI_USAGE;
  }
  rec = audit_record_new(a, mode, &bad);
  if (!rec) {
    if (bad)
      fprintf(stderr, "sluice %s: %s is not valid UTF-8 text (the audit "
                      "record is JSON); nothing changed\n", a->cmd, bad);
    else
      fprintf(stderr, "sluice %s: out of memory; nothing changed\n", a->cmd);
    return bad ? CLI_USAGE : CLI_RUNTIME;
  }
  /* Open the audit log first: no release without a record. */
  f = fopen(a->audit, "a");
  if (!f) {
    fprintf(stderr, "sluice %s: --audit %s: %s\n", a->cmd, a->audit,
            strerror(errno));
    json_decref(rec);
    return CLI_USAGE;
  }
  memset(&q, 0, sizeof q);
  q.tenant_id = a->tenant;
  q.api_key_id = a->key;
  q.tier = a->tier;
  q.client_ip = a->ip;
  if (a->subject) { /* etc/ledger.conf's sign-in subject */
    q.attrs = a->attrs;
    q.nattrs = a->nattrs;
  }
  h.kind = lift ? SLUICE_HOLD_SUSPENSION : SLUICE_HOLD_BOX;
  h.scope = a->scope;
  h.who = a->who;
  h.why = a->why;
  rc = mode == ADMIN_RENEW ? sluice_policy_renew(a->pol, &q, &h)
                           : sluice_policy_release(a->pol, &q, &h);
  if (rc != SLUICE_OK) {
    fclose(f);
    json_decref(rec);
    if (rc == SLUICE_ENOTFOUND) {
      fprintf(stderr, "sluice %s: the scope is not %s; nothing changed\n",
              a->cmd,
              mode == ADMIN_RENEW ? "boxed at level 3"
              : lift              ? "suspended"
                                  : "boxed");
      return CLI_BADINPUT;
    }
    if (rc == SLUICE_EPERM) {
      fprintf(stderr, "sluice %s: the scope is suspended (level 3): "
                      "use `sluice lift` after review; nothing changed\n",
              a->cmd);
      return CLI_BADINPUT;
    }
    if (rc == SLUICE_EINVAL || rc == SLUICE_EKEY) {
      fprintf(stderr, "sluice %s: invalid scope: %s\n", a->cmd,
              sluice_strerror(rc));
      return CLI_USAGE;
    }
    fprintf(stderr, "sluice %s: store error %s: %s\n", a->cmd,
            sluice_strerror(rc), sluice_limiter_errmsg(a->lim));
    return CLI_RUNTIME;
  }
  /* fclose() runs whatever happened before it. */
  rc = audit_record_write(rec, a->released_level, f) != 0 ||
       fflush(f) != 0 || fsync(fileno(f)) != 0;
  if (fclose(f) != 0 || rc) {
    fprintf(stderr, "sluice %s: the %s was done but the audit record could "
                    "not be written to %s\n", a->cmd, a->cmd, a->audit);
    json_decref(rec);
    return CLI_RUNTIME;
  }
  if (mode == ADMIN_RENEW)
    printf("renewed: level %d box for another %lld s; audit record appended "
           "to %s\n", a->released_level,
           (long long)((a->renewed_until_ns - sluice_limiter_now(a->lim)) /
                       1000000000),
           a->audit);
  else
    printf("%s: level %d %s; audit record appended to %s\n",
           lift ? "lifted" : "released", a->released_level,
           lift ? "suspension lifted" : "box ended", a->audit);
  audit_record_write(rec, a->released_level, stdout);
  json_decref(rec);
  return nft_done(a);
}

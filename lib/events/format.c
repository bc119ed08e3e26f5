/*
** The bodies a destination gets, one per format (include/sluice/webhook.h).
**
**  a) JSON: the sink's own object, what the spec's level 2 notice names.
**  b) SLACK: an incoming-webhook message (api.slack.com/messaging/webhooks):
**     "text" (the notification line, required) and "blocks" (a section
**     with the details, a context with the backoff guidelines).
**  c) PAGERDUTY: an Events API v2 event (developer.pagerduty.com, "Send
**     an Alert Event").  dedup_key is the box's scope ("key:<id>"), so
**     the release or lift of that scope resolves the incident its trip
**     opened; severity follows the level (1 info, 2 warning, 3 critical;
**     a suspension is an error: nobody has to wake up for it).
**  d) EMAIL: an RFC 5322 plain-text message for the tenant's technical
**     contacts: the key, the offending endpoints and the backoff
**     guidelines (spec section 7) with its two rules in words.
** No body carries a secret: the key is its hashed id, plus the last four
** characters of the raw key (as card numbers are shown) in the email, so
** a tenant can tell which of its keys is meant.
** Every text field is built with jansson (JSON) or checked to hold no CR
** or LF (email headers), so an id cannot inject members or headers.
*/
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "sink.h"

const char *sluice__sink_format_name(int format) {
  static const char *const names[SLUICE_WEBHOOK__FORMATS] = {
      "json", "slack", "pagerduty", "email"};
  return format >= 0 && format < SLUICE_WEBHOOK__FORMATS ? names[format]
                                                         : "?";
}

#define EV(t) SLUICE_WEBHOOK_EVENT(SLUICE_EVENT_##t)

uint32_t sluice__sink_default_events(int format) {
  uint32_t notify = EV(ALERT) | EV(SUSPEND) | EV(PAGE) | EV(IP_BAN) |
                    EV(STUFFING) | EV(RELEASE) | EV(LIFT);
  return format == SLUICE_WEBHOOK_EMAIL ? EV(ALERT) | EV(SUSPEND) | EV(PAGE)
                                        : notify;
}

int sluice__sink_resolves(const item *it) {
  return it->type == SLUICE_EVENT_RELEASE || it->type == SLUICE_EVENT_LIFT;
}

static const char *scope_name(int scope) {
  static const char *const names[] = {"none", "key", "ip", "subject",
                                      "tenant"};
  return scope > 0 && scope <= SLUICE_SCOPE_TENANT ? names[scope] : "none";
}

/* RFC 3339 UTC, whole seconds rounded up (as lockout_ends_at). */
static void rfc3339(char out[32], int64_t ns) {
  time_t s = (time_t)(ns / NS_PER_S + (ns % NS_PER_S > 0));
  struct tm tm;
  if (!gmtime_r(&s, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
    snprintf(out, 32, "%" PRId64, ns / NS_PER_S);
}

/* "2026-12-03T20:00:00Z", "never", or "" (no end). */
static void ends_at(char out[32], const item *it) {
  if (it->until_ns == SLUICE_FOREVER)
    snprintf(out, 32, "never");
  else if (it->until_ns > 0)
    rfc3339(out, it->until_ns);
  else
    out[0] = 0;
}

/* Members with no value are left out (json_pack's "s*"). */
static const char *nz(const char *s) { return s && s[0] ? s : NULL; }

static char *dump(json_t *o) {
  char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return txt;
}

/* The JSON format's object (also PagerDuty's custom_details). */
static json_t *details(const sluice_webhook *w, const item *it) {
  json_t *eps = json_array(), *level = it->level ? json_integer(it->level)
                                                 : NULL;
  char ends[32], at[32];
  int i, bad = !eps || (it->level && !level);
  for (i = 0; !bad && i < it->nendpoints; i++)
    bad |= json_array_append_new(eps, json_string(it->endpoints[i]));
  if (bad) {
    json_decref(eps);
    json_decref(level);
    return NULL;
  }
  ends_at(ends, it);
  rfc3339(at, it->now_ns);
  /* The hashed scope id: for a key scope, the key's id. */
  return json_pack(
      "{s:s*, s:s*, s:o*, s:s*, s:s*, s:s*, s:s*, s:o, s:s*, s:s*, s:s*, "
      "s:s*, s:s*}",
      "event", nz(sluice_name(SLUICE_NAME_EVENT, it->type)), "scope",
      it->scope ? scope_name(it->scope) : NULL, "level", level, "tier",
      nz(it->tier), it->scope == SLUICE_SCOPE_KEY ? "key_id" : "scope_id",
      nz(it->scope_id), "tenant_id", nz(it->tenant_id), "outcome",
      it->type == SLUICE_EVENT_LEASE_DENIED
          ? nz(sluice_name(SLUICE_NAME_OUTCOME, it->outcome))
          : NULL,
      "offending_endpoints", eps, "backoff_guide", nz(w->guide), "ends_at",
      nz(ends), "at", nz(at), "who", nz(it->who), "why", nz(it->why));
}

/* One line for people: "level 2 alert: key 0123... (tier growth) boxed
** until 2026-12-03T20:00:00Z". */
static void headline(const item *it, char *out, size_t n) {
  static const char *const k_what[SLUICE_EVENT__COUNT] = {
      [SLUICE_EVENT_ALERT] = "boxed (hard quarantine)",
      [SLUICE_EVENT_SUSPEND] = "suspended pending review",
      [SLUICE_EVENT_PAGE] = "boxed at level 3: human review needed",
      [SLUICE_EVENT_IP_BAN] = "banned",
      [SLUICE_EVENT_STUFFING] = "credential stuffing",
      [SLUICE_EVENT_RELEASE] = "released early",
      [SLUICE_EVENT_LIFT] = "suspension lifted"};
  char when[32];
  const char *what = it->type > 0 && it->type < SLUICE_EVENT__COUNT &&
                             k_what[it->type]
                         ? k_what[it->type]
                         : sluice_name(SLUICE_NAME_EVENT, it->type);
  ends_at(when, it);
  snprintf(out, n, "sluice %s: %s %s%s%s%s%s%s%s",
           sluice_name(SLUICE_NAME_EVENT, it->type), scope_name(it->scope),
           it->scope_id, it->tier[0] ? " (tier " : "", it->tier,
           it->tier[0] ? ")" : "", " ", what,
           when[0] && strcmp(when, "never") ? " until " : "");
  if (when[0] && strcmp(when, "never"))
    snprintf(out + strlen(out), n - strlen(out), "%s", when);
  if (it->level)
    snprintf(out + strlen(out), n - strlen(out), ", level %d", it->level);
}

static void endpoints_line(const item *it, char *out, size_t n) {
  int i;
  out[0] = 0;
  for (i = 0; i < it->nendpoints; i++)
    snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? ", " : "",
             it->endpoints[i]);
  if (!it->nendpoints)
    snprintf(out, n, "none recorded");
}

static char *slack(const sluice_webhook *w, const item *it) {
  char head[512], eps[1024], txt[2048], guide[600];
  headline(it, head, sizeof head);
  endpoints_line(it, eps, sizeof eps);
  snprintf(txt, sizeof txt,
           "*%s*\nTenant: `%s`\nOffending endpoints: %s%s%s%s%s", head,
           it->tenant_id[0] ? it->tenant_id : "-", eps,
           it->who[0] ? "\nBy: " : "", it->who, it->why[0] ? "\nWhy: " : "",
           it->why);
  snprintf(guide, sizeof guide, "Backoff guidelines: <%s>", w->guide);
  return dump(json_pack("{s:s, s:[{s:s, s:{s:s, s:s}}, {s:s, s:[{s:s, s:s}]}]}",
                        "text", head, "blocks", "type", "section", "text",
                        "type", "mrkdwn", "text", txt, "type", "context",
                        "elements", "type", "mrkdwn", "text", guide));
}

static const char *severity(const item *it) {
  if (it->type == SLUICE_EVENT_SUSPEND)
    return "error";
  if (it->level >= 3 || it->type == SLUICE_EVENT_PAGE ||
      it->type == SLUICE_EVENT_IP_BAN || it->type == SLUICE_EVENT_STUFFING)
    return "critical";
  return it->level == 2 ? "warning" : "info";
}

static char *pagerduty(const sluice_webhook *w, const item *it,
                       const char *routing_key) {
  char dedup[64], head[512], when[32];
  snprintf(dedup, sizeof dedup, "%s:%s", scope_name(it->scope), it->scope_id);
  if (sluice__sink_resolves(it))
    return dump(json_pack("{s:s*, s:s, s:s}", "routing_key", nz(routing_key),
                          "dedup_key", dedup, "event_action", "resolve"));
  headline(it, head, sizeof head);
  rfc3339(when, it->now_ns);
  return dump(json_pack(
      "{s:s*, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s*, s:o}, "
      "s:[{s:s, s:s}]}",
      "routing_key", nz(routing_key), "dedup_key", dedup, "event_action",
      "trigger", "payload", "summary", head, "source", "sluice", "severity",
      severity(it), "timestamp", when, "component", scope_name(it->scope),
      "class", sluice_name(SLUICE_NAME_EVENT, it->type), "group",
      nz(it->tenant_id), "custom_details", details(w, it), "links", "href",
      w->guide, "text", "Client backoff guidelines"));
}

/* Header values must not break the header. */
static int one_line(const char *s) { return !strpbrk(s, "\r\n"); }

static char *email(const sluice_webhook *w, const dest *d, const item *it,
                   const char *rcpt) {
  char head[512], eps[1024], date[64], when[32];
  time_t now = (time_t)(it->now_ns / NS_PER_S);
  struct tm tm;
  char *msg = NULL;
  size_t len = 0;
  FILE *f;
  int i;
  if (!one_line(d->from) || !one_line(rcpt) || !one_line(w->guide))
    return NULL;
  if (!gmtime_r(&now, &tm) ||
      !strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S +0000", &tm))
    return NULL;
  headline(it, head, sizeof head);
  endpoints_line(it, eps, sizeof eps);
  ends_at(when, it);
  if (!(f = open_memstream(&msg, &len)))
    return NULL;
  fprintf(f,
          "From: %s\r\nTo: %s\r\nSubject: [rate limits] %s\r\nDate: %s\r\n"
          "Message-ID: <%s.%" PRId64 ".%d@sluice>\r\nMIME-Version: 1.0\r\n"
          "Content-Type: text/plain; charset=utf-8\r\n"
          "Content-Transfer-Encoding: 8bit\r\n\r\n",
          d->from, rcpt, head, date, it->scope_id, it->now_ns, it->type);
  fprintf(f, "%s.\r\n\r\n", head);
  if (it->scope == SLUICE_SCOPE_KEY)
    fprintf(f, "API key: id %s%s%s%s\r\n", it->scope_id,
            it->key_tail[0] ? " (ending in " : "", it->key_tail,
            it->key_tail[0] ? ")" : "");
  else
    fprintf(f, "Scope: %s %s\r\n", scope_name(it->scope), it->scope_id);
  if (it->tenant[0])
    fprintf(f, "Tenant: %s\r\n", it->tenant);
  if (it->tier[0])
    fprintf(f, "Tier: %s\r\n", it->tier);
  if (it->level)
    fprintf(f, "Penalty level: %d\r\n", it->level);
  if (when[0])
    fprintf(f, "Blocked until: %s\r\n", when);
  fprintf(f, "Offending endpoints:\r\n");
  for (i = 0; i < it->nendpoints; i++)
    fprintf(f, "  - %s\r\n", it->endpoints[i]);
  if (!it->nendpoints)
    fprintf(f, "  (none recorded)\r\n");
  fprintf(f,
          "\r\nWhat to do: back off as the client backoff guidelines say\r\n"
          "(%s):\r\n"
          "honour Retry-After, and otherwise wait a random time between 0 "
          "and\r\nmin(cap, base * 2^attempt) (full jitter) before each "
          "retry.\r\nA client that honours Retry-After never accumulates "
          "strikes.\r\n",
          w->guide);
  if (fclose(f)) {
    free(msg);
    return NULL;
  }
  return msg;
}

char *sluice__sink_body(const sluice_webhook *w, const dest *d,
                        const item *it, const char *extra) {
  switch (d->format) {
  case SLUICE_WEBHOOK_SLACK:
    return slack(w, it);
  case SLUICE_WEBHOOK_PAGERDUTY:
    return pagerduty(w, it, extra);
  case SLUICE_WEBHOOK_EMAIL:
    return email(w, d, it, extra);
  default:
    return dump(details(w, it));
  }
}

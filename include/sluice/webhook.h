/*
** sluice/webhook.h -- delivering the policy's events: JSON webhooks,
** Slack, PagerDuty and email.
**
** The spec's level 2 notifies the tenant's technical contacts and support,
** naming the key, the offending endpoints and the backoff guidelines; level
** 3 suspends, pages or bans.  The policy reports these as events
** (sluice_policy_options.on_event); a webhook sink posts them, one JSON
** object per event, to a URL configured per event type:
**
**     sluice_webhook_options wo = {0};
**     wo.url[SLUICE_EVENT_ALERT] = "https://hooks.example.com/rl-alert";
**     wo.url[SLUICE_EVENT_PAGE] = "https://pager.example.com/rl";
**     sluice_webhook_open(&wo, &wh);
**     po.on_event = sluice_webhook_on_event;
**     po.userdata = wh;
**
** Beside url[], dests[] adds destinations in other formats: a Slack
** incoming webhook, a PagerDuty Events API v2 event (trigger, and resolve
** when the scope is released or lifted), an email over SMTP to the
** tenant's technical contacts (docs/operations.md, "Delivering events").
**
** A decision never waits for delivery: sluice_webhook_on_event() copies
** the event into a bounded queue (a mutex held for that copy only) and
** returns; when the queue is full the event is dropped and counted.  One
** thread per sink delivers with libcurl's multi interface, a few attempts
** at once per destination, each with a short timeout, retrying a failed
** one (no connection, timeout, 5xx) with full jitter exponential backoff
** up to max_attempts, then counting it failed.  With spool_path, what is
** not delivered yet survives a restart or a kill.  Destinations in
** loopback, link-local and private ranges are refused unless allowed.
**
** The body (jansson) carries what the spec lists and never a secret: the
** hashed scope id stands for the key (the raw API key in ev->request is
** not sent), e.g.
**
**     {"event":"alert","scope":"key","level":2,"tier":"growth",
**      "key_id":"<32 hex>","tenant_id":"<32 hex>",
**      "offending_endpoints":["POST /v1/ledgers/reconcile"],
**      "backoff_guide":"https://docs.example.com/rate-limits#backoff",
**      "ends_at":"2026-12-03T20:00:00Z","at":"2026-12-03T19:00:00Z"}
**
** offending_endpoints: the endpoints of the requests that drew events for
** this scope (box trips at every level, lease denials), most recent first,
** at most 8.  ends_at: when the box ends, "never" while suspended, absent
** for events without one.
*/
#ifndef SLUICE_WEBHOOK_H
#define SLUICE_WEBHOOK_H
#include <stddef.h>
#include <stdint.h>
#include "policy.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_webhook sluice_webhook;

/** How a destination renders an event. */
enum sluice_webhook_format {
  SLUICE_WEBHOOK_JSON = 0,      /**< the sink's own JSON body (above) */
  SLUICE_WEBHOOK_SLACK = 1,     /**< a Slack incoming-webhook message */
  SLUICE_WEBHOOK_PAGERDUTY = 2, /**< a PagerDuty Events API v2 event */
  SLUICE_WEBHOOK_EMAIL = 3,     /**< a plain-text email over SMTP */
  SLUICE_WEBHOOK__FORMATS = 4
};

/** Bit of an event type in sluice_webhook_dest.events. */
#define SLUICE_WEBHOOK_EVENT(type) (1u << (type))

/** One destination (docs/operations.md, "Delivering events").  Strings are
 *  copied at open. */
typedef struct sluice_webhook_dest {
  int format; /**< enum sluice_webhook_format */
  /** http:// or https:// (JSON, SLACK, PAGERDUTY: the Events API v2
   *  endpoint, https://events.pagerduty.com/v2/enqueue); smtp:// or
   *  smtps:// for EMAIL. */
  const char *url;
  /** SLUICE_WEBHOOK_EVENT() bits of the event types sent; 0: the format's
   *  default (JSON, SLACK: alert, suspend, page, ip_ban, stuffing, release,
   *  lift; PAGERDUTY: those, release and lift resolving; EMAIL: alert,
   *  suspend, page). */
  uint32_t events;
  /** PAGERDUTY: the integration (routing) key of the on-call service. */
  const char *routing_key;
  /** EMAIL: the sender (envelope and From:), required. */
  const char *mail_from;
  /** EMAIL: addresses that get every mail besides the tenant's contacts
   *  (comma-separated; support, security), or NULL. */
  const char *mail_to;
  /** The dest="" label of the metrics; NULL: the format's name and the
   *  destination's index ("slack1"). */
  const char *name;
} sluice_webhook_dest;

/** Roles asked of the contacts callback and named in a contacts file. */
enum sluice_webhook_role {
  SLUICE_WEBHOOK_TECH = 1,  /**< the tenant's technical contacts: alerts */
  SLUICE_WEBHOOK_OWNER = 2  /**< the account owner: level 3 pages */
};

/** Contacts callback: write the addresses of the tenant's contacts in
 *  `role` into buf (NUL-terminated, comma-separated; an owner's entry
 *  "pagerduty:KEY" is a PagerDuty routing key that level 3 pages too) and
 *  return SLUICE_OK, or SLUICE_ENOTFOUND.  tenant_id is the raw id of the
 *  request that caused the event.  Runs on the sink's thread. */
typedef int (*sluice_webhook_contacts_fn)(void *userdata,
                                          const char *tenant_id, int role,
                                          char *buf, size_t len);

/** Flags for sluice_webhook_options.flags: the address ranges a
 *  destination may be in.  Refused by default, both in the URL and in the
 *  address a name resolves to when connecting. */
#define SLUICE_WEBHOOK_ALLOW_LOOPBACK 0x1u   /**< 127.0.0.0/8, ::1, localhost */
#define SLUICE_WEBHOOK_ALLOW_PRIVATE 0x2u    /**< 10/8, 172.16/12, 192.168/16,
                                                  100.64/10, fc00::/7 */
#define SLUICE_WEBHOOK_ALLOW_LINK_LOCAL 0x4u /**< 169.254/16 (the cloud
                                                  metadata address), fe80::/10 */

/** Options for sluice_webhook_open().  Zero-initialize, then set fields;
 *  strings are copied at open. */
typedef struct sluice_webhook_options {
  /** Where each event type goes as JSON (index: enum sluice_event_type);
   *  NULL: not delivered.  http:// or https:// URLs.  Shorthand for a JSON
   *  destination per type (labelled by the type's name). */
  const char *url[SLUICE_EVENT__COUNT];
  /** Link to the client backoff guidelines, sent in every body.  NULL:
   *  SLUICE_WEBHOOK_GUIDE_DEFAULT. */
  const char *backoff_guide;
  size_t queue_max;        /**< events waiting, and deliveries kept in
                              memory per destination; 0: 1024 */
  int max_attempts;        /**< attempts per delivery; 0: 5 */
  int64_t backoff_base_ms; /**< first retry within; 0: 500 */
  int64_t backoff_max_ms;  /**< cap of the retry wait; 0: 30000 */
  int64_t timeout_ms;      /**< one attempt, connect included; 0: 3000 */
  /* Destinations beyond url[], delivery and address settings. */
  const sluice_webhook_dest *dests; /**< more destinations, or NULL */
  size_t ndests;
  unsigned flags;           /**< SLUICE_WEBHOOK_ALLOW_* */
  int max_inflight;         /**< attempts at once per destination; 0: 4 */
  int64_t connect_timeout_ms; /**< 0: 1000 (at most timeout_ms) */
  /** A proxy for every destination ("http://proxy:3128").  NULL: none;
   *  the proxy environment variables are ignored either way. */
  const char *proxy;
  /** An LMDB file holding deliveries not done yet, so they survive a
   *  restart or a kill (created 0600; one process at a time: a second
   *  open gets SLUICE_EBUSY).  NULL: kept in memory only. */
  const char *spool_path;
  /** The tenants' contacts for EMAIL (and owners' PagerDuty keys), read
   *  at open: lines "TENANT_ID tech|owner ADDRESS[,ADDRESS...]", '#'
   *  comments.  Used when contacts is NULL. */
  const char *contacts_path;
  sluice_webhook_contacts_fn contacts; /**< or NULL */
  void *contacts_userdata;
  /** NULL, or a buffer that gets a message on failure (which URL, line or
   *  setting is at fault). */
  char *errbuf;
  size_t errlen;
} sluice_webhook_options;

#define SLUICE_WEBHOOK_GUIDE_DEFAULT \
  "https://api.example.com/docs/rate-limits#backoff"

/** Counters of a sink (each only grows, but depth).  Counts are of
 *  deliveries (an event to one destination) except queued and dropped,
 *  which count events. */
typedef struct sluice_webhook_stats {
  uint64_t queued;    /**< accepted into the queue */
  uint64_t dropped;   /**< queue or spool full (or no memory): never sent */
  uint64_t delivered; /**< a 2xx answer (EMAIL: the server took it) */
  uint64_t failed;    /**< every attempt failed, or a refused address */
  uint64_t retries;   /**< attempts after the first */
  uint64_t abandoned; /**< left undone at close without a spool */
  uint64_t depth;     /**< events and deliveries waiting now (a gauge) */
  uint64_t spooled;   /**< written to the spool */
  uint64_t restored;  /**< read from the spool a previous run left */
  uint64_t refused;   /**< attempts refused: a forbidden address */
} sluice_webhook_stats;

/** @brief Open a sink (and its spool) and start its thread.
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL, no destination at all, a URL of
 *  the wrong scheme or in a refused range, an EMAIL destination without
 *  mail_from, a negative setting), SLUICE_ECONFIG (a bad contacts file),
 *  SLUICE_EIO (the spool or contacts file could not be read or written),
 *  SLUICE_EBUSY (the spool is open in another sink), SLUICE_ENOMEM,
 *  SLUICE_ENOTSUP (built without libcurl / jansson, or a spool without
 *  liblmdb), SLUICE_EBACKEND (libcurl or the thread could not start).  On
 *  failure *out is NULL and errbuf says why. */
SLUICE_EXPORT int sluice_webhook_open(const sluice_webhook_options *opts,
                                      sluice_webhook **out);

/** @brief Stop the thread and free.  Attempts in flight are cut short.
 *  With a spool, what is not delivered stays in it (and is counted
 *  spooled) for the next open of the same spool, which delivers it: at
 *  least once, so an attempt cut short may arrive twice.  Without one it
 *  is counted abandoned.  NULL is a no-op. */
SLUICE_EXPORT void sluice_webhook_close(sluice_webhook *w);

/** @brief A sluice_policy_event_fn: userdata is the sink.  Thread-safe;
 *  never waits for the network. */
SLUICE_EXPORT void sluice_webhook_on_event(void *userdata,
                                           const sluice_event *ev);

/** @brief Read the counters. */
SLUICE_EXPORT int sluice_webhook_stats_get(const sluice_webhook *w,
                                           sluice_webhook_stats *out);

/** @brief The counters in the Prometheus text format, to append to
 *  sluice_policy_metrics(): sluice_webhook_events_total{result},
 *  sluice_webhook_deliveries_total{dest,result="sent|failed|spooled"} and
 *  sluice_webhook_queue_depth.  As sluice_policy_metrics(): NULL, 0 to
 *  measure; SLUICE_ERANGE when too small. */
SLUICE_EXPORT int sluice_webhook_metrics(const sluice_webhook *w, char *buf,
                                         size_t len, size_t *needed);

#ifdef __cplusplus
}
#endif
#endif

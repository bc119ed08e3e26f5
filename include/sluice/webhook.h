/*
** sluice/webhook.h -- delivering the policy's events as JSON webhooks.
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
** A decision never waits for delivery: sluice_webhook_on_event() copies
** the event into a bounded queue (a mutex held for that copy only) and
** returns; when the queue is full the event is dropped and counted.  One
** thread per sink posts the queue in order with libcurl, retrying a
** failed post (no connection, timeout, a status other than 2xx) with full
** jitter exponential backoff up to max_attempts, then counting it failed.
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

/** Options for sluice_webhook_open().  Zero-initialize, then set fields;
 *  strings are copied at open. */
typedef struct sluice_webhook_options {
  /** Where each event type goes (index: enum sluice_event_type); NULL: not
   *  delivered.  http:// or https:// URLs. */
  const char *url[SLUICE_EVENT__COUNT];
  /** Link to the client backoff guidelines, sent in every body.  NULL:
   *  SLUICE_WEBHOOK_GUIDE_DEFAULT. */
  const char *backoff_guide;
  size_t queue_max;        /**< events waiting; 0: 1024 */
  int max_attempts;        /**< posts per event; 0: 5 */
  int64_t backoff_base_ms; /**< first retry within; 0: 500 */
  int64_t backoff_max_ms;  /**< cap of the retry wait; 0: 30000 */
  int64_t timeout_ms;      /**< one post, connect included; 0: 5000 */
  void *reserved[4];
} sluice_webhook_options;

#define SLUICE_WEBHOOK_GUIDE_DEFAULT \
  "https://api.example.com/docs/rate-limits#backoff"

/** Counters of a sink (each only grows). */
typedef struct sluice_webhook_stats {
  uint64_t queued;    /**< accepted into the queue */
  uint64_t dropped;   /**< queue full (or no memory): never sent */
  uint64_t delivered; /**< a 2xx answer */
  uint64_t failed;    /**< every attempt failed */
  uint64_t retries;   /**< attempts after the first */
  uint64_t abandoned; /**< still queued when the sink was closed */
  uint64_t depth;     /**< waiting now (a gauge) */
  uint64_t reserved[5]; /**< zeroed: room for five more counters */
} sluice_webhook_stats;

/** @brief Open a sink and start its thread.
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL, no URL at all, a URL that is not
 *  http(s), a negative setting), SLUICE_ENOMEM, SLUICE_ENOTSUP (built
 *  without libcurl / jansson), SLUICE_EBACKEND (libcurl or the thread
 *  could not start).  On failure *out is NULL. */
SLUICE_EXPORT int sluice_webhook_open(const sluice_webhook_options *opts,
                                      sluice_webhook **out);

/** @brief Stop the thread and free.  A post in flight is cut short; events
 *  still queued are counted abandoned.  NULL is a no-op. */
SLUICE_EXPORT void sluice_webhook_close(sluice_webhook *w);

/** @brief A sluice_policy_event_fn: userdata is the sink.  Thread-safe;
 *  never waits for the network. */
SLUICE_EXPORT void sluice_webhook_on_event(void *userdata,
                                           const sluice_event *ev);

/** @brief Read the counters. */
SLUICE_EXPORT int sluice_webhook_stats_get(const sluice_webhook *w,
                                           sluice_webhook_stats *out);

/** @brief The counters in the Prometheus text format, to append to
 *  sluice_policy_metrics(): sluice_webhook_events_total{result} and
 *  sluice_webhook_queue_depth.  As sluice_policy_metrics(): NULL, 0 to
 *  measure; SLUICE_ERANGE when too small. */
SLUICE_EXPORT int sluice_webhook_metrics(const sluice_webhook *w, char *buf,
                                         size_t len, size_t *needed);

#ifdef __cplusplus
}
#endif
#endif

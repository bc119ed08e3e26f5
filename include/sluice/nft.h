/*
** sluice/nft.h -- banned addresses into the kernel's nftables sets.
**
** The spec sends its worst offenders past the application: at level 2 an
** abusive source IP goes into a TTL-managed IP set, at level 3 it gets a
** 24 h ban.  The self-hosted equivalent is an nftables named set with
** element timeouts.  This sink takes the policy's events
** (sluice_policy_options.on_event) and keeps such sets:
**
**   - SLUICE_EVENT_EDGE_DENY on an IP scope at min_level or above (the
**     auth failure and credential-stuffing boxes, and a box's renewal by
**     sluice_policy_renew()) adds the address -- an IPv6 address by its
**     ipv6_prefix -- with `timeout` = the box's time left (none while
**     suspended); an element already there gets the new timeout;
**   - SLUICE_EVENT_RELEASE and SLUICE_EVENT_LIFT on an IP scope remove it.
**
**     sluice_nft_options no = {0};
**     no.flags = SLUICE_NFT_CREATE;
**     no.state_path = "/var/lib/sluice/nft-bans";
**     sluice_nft_open(&no, &sink);
**     po.on_event = sluice_nft_on_event;
**     po.userdata = sink;
**     sluice_policy_open(&po, &pol);
**     sluice_nft_reconcile(sink, pol);
**
** A decision never waits for the kernel: sluice_nft_on_event() copies the
** address into a bounded queue (a mutex held for that copy only) and
** returns; when the queue is full the update is dropped and counted.  One
** thread per sink takes what is queued, up to batch_max updates, and
** applies them as one nftables transaction through libnftables.
**
** Where the address comes from.  Store keys hold only keyed hashes of
** scopes, so the store cannot say which address a box belongs to.  The
** event can: its request carries the raw client_ip.  The sink remembers
** every address it put in a set, with its scope id and end, in a table of
** its own, and with state_path in a file (rewritten at most once a second
** and at close) so that sluice_nft_reconcile() after a restart can ask the
** store (sluice_policy_inspect()) which of them are still boxed and for
** how long.  docs/nft.md says why the store does not carry the address.
**
** The table, the sets and the drop rule (docs/nft.md; sluice_nft_schema()
** renders them): with SLUICE_NFT_CREATE the sink makes them at open and
** whenever an update finds them missing; without it they must exist.
**
** Thread safety: sluice_nft_on_event() and the getters may be called from
** any thread; open, reconcile, sync and close from one thread at a time.
*/
#ifndef SLUICE_NFT_H
#define SLUICE_NFT_H
#include <stddef.h>
#include <stdint.h>
#include "policy.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_nft sluice_nft;

/** Flags for sluice_nft_options. */
#define SLUICE_NFT_CREATE 0x1u /**< create the table, sets and drop rule */

/** Longest table or set name, without the NUL (nftables' own limit is
 *  255; the sink keeps names short and plain). */
#define SLUICE_NFT_NAME_MAX 31

/** Options for sluice_nft_open().  Zero-initialize, then set fields;
 *  strings are copied at open.  Names: a letter, then letters, digits or
 *  '_', at most SLUICE_NFT_NAME_MAX. */
typedef struct sluice_nft_options {
  const char *table; /**< an `inet` table; NULL: "sluice" */
  const char *set4;  /**< the IPv4 set; NULL: "deny4" */
  const char *set6;  /**< the IPv6 set (interval); NULL: "deny6" */
  /** IPv6 addresses are banned by this prefix (1..128); 0: 64. */
  int ipv6_prefix;
  /** Boxes of this level and above go into the set (1..3); 0: 2. */
  int min_level;
  unsigned flags;         /**< SLUICE_NFT_* */
  /** NULL: the banned addresses live in memory only (a restart forgets
   *  them).  A file the sink reads at open and rewrites (write, fsync,
   *  rename) as its list changes. */
  const char *state_path;
  size_t queue_max;    /**< updates waiting; 0: 4096 */
  size_t batch_max;    /**< updates per transaction; 0: 1024 */
  size_t max_elements; /**< addresses remembered; 0: 65536 */
  /** Every this many ms the sink puts its list back into the sets (a
   *  reconcile with the store once sluice_nft_reconcile() gave it a
   *  policy), so a flushed ruleset converges; 0: 60000; -1: never. */
  int64_t resync_ms;
  /** NULL, or a buffer for the reason open failed (nftables' message). */
  char *errbuf;
  size_t errlen;
} sluice_nft_options;

/** Counters of a sink (each only grows, but depth and elements). */
typedef struct sluice_nft_stats {
  uint64_t queued;   /**< updates accepted into the queue */
  uint64_t dropped;  /**< queue full: never applied */
  uint64_t added;    /**< elements added (or re-added with a new timeout) */
  uint64_t removed;  /**< elements removed */
  uint64_t failed;   /**< updates nftables refused (or list full) */
  uint64_t invalid;  /**< events whose client_ip is not an IP address */
  uint64_t transactions; /**< nftables transactions run */
  uint64_t resyncs;  /**< whole-set rewrites (reconcile, periodic) */
  uint64_t depth;    /**< waiting now (a gauge) */
  uint64_t elements; /**< addresses in the list now (a gauge) */
} sluice_nft_stats;

/** @brief Open a sink and start its thread.  With SLUICE_NFT_CREATE the
 *  table, sets and rule are made before it returns; with state_path the
 *  file is read (its addresses wait for sluice_nft_reconcile()).
 *  @return SLUICE_OK, SLUICE_EINVAL (NULL, a bad name, prefix, level or
 *  flag), SLUICE_ENOMEM, SLUICE_ENOTSUP (built without
 *  libnftables, or no nfnetlink here), SLUICE_EPERM (no CAP_NET_ADMIN),
 *  SLUICE_EBACKEND (nftables refused the schema; errbuf says why),
 *  SLUICE_ECORRUPT (state_path is not a sink's list), SLUICE_EIO.  On
 *  failure *out is NULL. */
SLUICE_EXPORT int sluice_nft_open(const sluice_nft_options *opts,
                                  sluice_nft **out);

/** @brief Apply what is queued, write the list, stop the thread, free.
 *  The set elements stay (they expire by themselves).  NULL is a no-op. */
SLUICE_EXPORT void sluice_nft_close(sluice_nft *s);

/** @brief A sluice_policy_event_fn: userdata is the sink.  Thread-safe;
 *  never waits for the kernel. */
SLUICE_EXPORT void sluice_nft_on_event(void *userdata, const sluice_event *ev);

/** @brief Make the sets what the store holds: each remembered address is
 *  looked up with sluice_policy_inspect(); one still boxed at min_level or
 *  above is put back with the box's time left, one that is not is deleted,
 *  all in one transaction (a flushed set, or a release by another process,
 *  converges).  Runs on the sink's thread, which keeps `p` and asks it
 *  again at every periodic resync: `p` must stay open until the sink is
 *  closed.  NULL `p` puts back what the list holds without asking the
 *  store (and keeps a policy given before).
 *  @return SLUICE_OK (queued), SLUICE_EINVAL. */
SLUICE_EXPORT int sluice_nft_reconcile(sluice_nft *s, sluice_policy *p);

/** @brief Wait until everything queued before the call has been applied.
 *  @return SLUICE_OK, SLUICE_ETIMEDOUT, SLUICE_EINVAL. */
SLUICE_EXPORT int sluice_nft_sync(sluice_nft *s, int64_t timeout_ms);

/** @brief Read the counters. */
SLUICE_EXPORT int sluice_nft_stats_get(const sluice_nft *s,
                                       sluice_nft_stats *out);

/** @brief The last message nftables gave (a failed update), or "".
 *  Copied, NUL-terminated and truncated to len. */
SLUICE_EXPORT int sluice_nft_last_error(const sluice_nft *s, char *buf,
                                        size_t len);

/** @brief The counters in the Prometheus text format, to append to
 *  sluice_policy_metrics(): sluice_nft_updates_total{result="added",
 *  "removed","failed","dropped","invalid"}, sluice_nft_queue_depth and
 *  sluice_nft_elements.  As sluice_policy_metrics(): NULL, 0 to measure;
 *  SLUICE_ERANGE when too small. */
SLUICE_EXPORT int sluice_nft_metrics(const sluice_nft *s, char *buf,
                                     size_t len, size_t *needed);

/** @brief The nft commands that make the table, the sets and the drop rule
 *  for these options (only table, set4, set6 are read; NULL: defaults):
 *  what SLUICE_NFT_CREATE runs, and docs/nft.md shows.  Works in a build
 *  without libnftables.  As sluice_policy_metrics() for buf, len, needed.
 *  @return SLUICE_OK, SLUICE_ERANGE, SLUICE_EINVAL (a bad name). */
SLUICE_EXPORT int sluice_nft_schema(const sluice_nft_options *opts, char *buf,
                                    size_t len, size_t *needed);

#ifdef __cplusplus
}
#endif
#endif

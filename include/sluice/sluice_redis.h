/*
** The Redis store ("redis"): state in a Redis Cluster, or in one Redis
** server (a cluster of one), shared by every host of a fleet.  See
** docs/redis.md for the full story; the short form:
**
**   redis:nodes=127.0.0.1:7000,127.0.0.1:7001;timeout_ms=20
**
** URI parameters:
**   nodes=H:P,...          seed nodes (required); the rest is discovered
**   timeout_ms=N           longest wait for a reply (default 20)
**   connect_timeout_ms=N   longest wait for a connection (default 20)
**   prefix=S               prepended to every key (no '{' or '}')
**   wait_replicas=N        after each round trip, WAIT for N replicas; an
**                          unacknowledged write is reported as
**                          SLUICE_EUNAVAIL (admissions survive a failover)
**   backoff_max_ms=N       reconnect backoff ceiling (default 1000)
**   pool=N                 connection sets threads spread over (default 8)
**   user=U; password=P; password_file=PATH   AUTH (ACL user optional)
**   db=N                   SELECT N (a single server)
**   socket=PATH            the seed through a unix socket
**   tls=1; tls_ca=F; tls_cert=F; tls_key=F; tls_name=N   TLS, verified
**
** Or a URL: redis://[user[:password]@]host[:port][,host:port][/db][?k=v&..]
** and rediss://... (TLS).  A node that answers and refuses the store
** (AUTH, certificate, SELECT) fails the open (SLUICE_EPERM, SLUICE_ECONFIG);
** a store opened while no node answers opens anyway, its decisions fail
** with SLUICE_EUNAVAIL until Redis answers, and then it recovers by itself.
**
** Decisions run as a Lua port of the C steps (one EVALSHA per operation),
** with Redis's TIME as the clock.  Failures: SLUICE_ETIMEDOUT (no answer
** in time), SLUICE_EUNAVAIL (connection refused or lost, CLUSTERDOWN,
** redirections or TRYAGAIN exhausted), SLUICE_ERANGE (parameters outside
** the range the Lua port computes exactly), SLUICE_EBACKEND (any other
** server error).
**
** Thread-safe: threads spread over `pool` lanes, each with its own
** connections and mutex.  Fork-safe: a child drops the connections it
** inherited, without writing to them, and reconnects.
*/
#ifndef SLUICE_REDIS_H
#define SLUICE_REDIS_H

#include <stdint.h>

/** xControl ops (sluice_limiter_control). */
#define SLUICE_CTL_REDIS_REFRESH 500 /**< arg ignored: reload the slot map now */
#define SLUICE_CTL_REDIS_STATS 501   /**< arg: sluice_redis_stats* (filled) */
#define SLUICE_CTL_REDIS_NODE_OF 502 /**< arg: sluice_redis_node_of* */
#define SLUICE_CTL_REDIS_DROP 503    /**< arg ignored: close every connection */

/** Counters since open (SLUICE_CTL_REDIS_STATS). */
typedef struct sluice_redis_stats {
  uint64_t ops;          /**< operations sent (a batch call counts each) */
  uint64_t round_trips;  /**< pipelines flushed and read, one per node */
  uint64_t moved;        /**< MOVED redirections followed */
  uint64_t ask;          /**< ASK redirections followed */
  uint64_t noscript;     /**< NOSCRIPT replies (script reloaded) */
  uint64_t tryagain;     /**< TRYAGAIN replies */
  uint64_t connects;     /**< connections made */
  uint64_t connect_failures;
  uint64_t refreshes;    /**< slot maps loaded */
  uint64_t timeouts;     /**< SLUICE_ETIMEDOUT results */
  uint64_t unavailable;  /**< SLUICE_EUNAVAIL results */
  int nodes;             /**< nodes known */
  int cluster;           /**< 1: cluster mode, 0: a single server */
  uint64_t batches;      /**< batch script calls (2+ GCRA decisions each) */
  int pool;              /**< lanes: connection sets threads spread over */
} sluice_redis_stats;

/** Where a key lives (SLUICE_CTL_REDIS_NODE_OF): set key/keylen, get the
 *  slot and the master that serves it in the current map. */
typedef struct sluice_redis_node_of {
  const void *key;
  size_t keylen;
  int slot;       /**< out: 0..16383 */
  int port;       /**< out: 0 if unknown */
  char host[64];  /**< out */
} sluice_redis_node_of;

#endif

/*
** sluice/halves.h -- a decision in two halves, for hosts that run an event
** loop (an nginx worker, OpenResty cosockets, Node's main thread).
**
** sluice_policy_decide() blocks while the store answers: right for a
** thread of a C service, wrong for an event loop, where a Redis round trip
** stalls every request of the process.  Here the library never blocks:
**
**   sluice_policy_begin()   decides at once where no store call is needed
**                           (mem, shm and lmdb stores; a deny-cache hit;
**                           an open breaker), or hands the host the bytes
**                           of ONE store call and the node to send them to;
**   the host                sends them on its own non-blocking connection
**                           to that node and reads what comes back;
**   sluice_policy_finish()  reads the reply: the decision, or the next
**                           call to send (a redirection, a script to load,
**                           the request's next hash-tag group), or "more
**                           bytes, please"; given an error instead (the
**                           connection failed or timed out), the decision
**                           of the failure mode (fail closed or degraded,
**                           the breaker counting it), as in the blocking
**                           path.
**
** sluice_policy_decide() is these same halves with the store's own hiredis
** connections carrying the bytes: the same decisions, one code path.
**
**   sluice_call *call;
**   sluice_call_info ci;
**   sluice_decision d;
**   sluice_call_open(policy, &call);              // once; reuse per request
**   int rc = sluice_policy_begin(call, SLUICE_CALL_DECIDE, &req, &d, NULL, 0);
**   while (rc == SLUICE_CALL_SEND) {
**     sluice_call_get(call, &ci);
**     // connect to ci.host:ci.port (or reuse a connection to it), write
**     // ci.bytes (ci.len of them), then read; after every read:
**     rc = sluice_policy_finish(call, 0, all_bytes_read, total, &d);
**     while (rc == SLUICE_CALL_MORE) { read more; finish again; }
**     // on a connect/read/write error or a timeout:
**     //   rc = sluice_policy_finish(call, SLUICE_ETIMEDOUT, NULL, 0, &d);
**   }
**   if (rc == SLUICE_CALL_DONE) { answer d; }   // rc < 0: a request error
**
** The host's connections: plain TCP (or the unix socket the store names)
** to each node, kept open between calls and used for one call at a time.
** A store URL with a password, a database or TLS is the host's to set up
** on its connections (AUTH, SELECT, TLS), as the store's own would.  Close
** a connection after a failed call (finish given an error) and after a
** DONE whose store_error (sluice_call_get()) is < 0: what it carries next
** is out of step.
**
** Ownership: a handle is allocated once (sluice_call_open) and holds all
** of a decision in flight; begin and finish allocate nothing but, once,
** room for a call larger than any before it on that handle (and hiredis's
** reply tree while a reply is read, freed before they return).  The bytes
** and the host string of sluice_call_get() belong to the handle, valid
** until the next begin, finish or close on it.  The request given to
** begin (and every string it points to) must stay valid until the handle
** returns SLUICE_CALL_DONE: a later pass of the flow reads it again.  The
** reply bytes are the host's; the library reads them during the call only.
** One handle serves one decision at a time; handles of one policy may be
** used from different threads at once.
*/
#ifndef SLUICE_HALVES_H
#define SLUICE_HALVES_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One decision in flight (opaque). */
typedef struct sluice_call sluice_call;

/** What begin and finish return when they do not fail (< 0: a
 *  sluice_strerror() code; the handle keeps its state). */
enum sluice_call_status {
  SLUICE_CALL_DONE = 0, /**< the decision is in *d */
  SLUICE_CALL_SEND = 1, /**< send the bytes sluice_call_get() gives to
                             the node it names */
  SLUICE_CALL_MORE = 2  /**< the replies are not whole: read more, finish
                             again with every byte read since the send */
};

/** @brief A handle for decisions on p, in *out (SLUICE_ENOMEM, or
 *  SLUICE_EINVAL for a NULL argument).  Close it before the policy. */
SLUICE_EXPORT int sluice_call_open(sluice_policy *p, sluice_call **out);

/** @brief Free a handle.  A decision in flight is abandoned: its store
 *  call may have run (as a request whose client went away), nothing else
 *  of it is recorded. */
SLUICE_EXPORT void sluice_call_close(sluice_call *call);

/** What sluice_policy_begin() starts on a handle. */
enum sluice_call_kind {
  SLUICE_CALL_DECIDE = 0,  /**< decide q; the decision lands in *d */
  SLUICE_CALL_RELEASE = 1, /**< release the lease d->lease_id that q's
                                decision got (sluice_policy_release() with
                                SLUICE_HOLD_LEASE, in halves) */
  SLUICE_CALL_SETTLE = 2   /**< settle d, q's decision, with the real
                                values in `actual` (sluice_policy_settle(),
                                in halves, with the same checks and the
                                same one store call) */
};

/** @brief Start a decision, a lease's release or a settle on the handle
 *  (a call still in flight on it is abandoned first).
 *  SLUICE_CALL_DONE (no store call was needed: mem, shm and lmdb stores,
 *  a deny-cache hit, an open breaker; for a settle, no limit's cost
 *  changes), SLUICE_CALL_SEND, or an error returned at once:
 *  DECIDE: a request error as sluice_policy_decide() returns it
 *  (d->invalid_field says which field); RELEASE and SETTLE: an input
 *  error, or a decision that cannot be settled (SLUICE_ENOTFOUND,
 *  SLUICE_EEXIST), as the blocking call returns it.
 *  A release or a settle ends with SLUICE_CALL_DONE, its own result in
 *  sluice_call_info's `result`; a settle sets SLUICE_DECISION_SETTLED in
 *  d->flags when it is applied (not after a store error), so d must stay
 *  valid until SLUICE_CALL_DONE.
 *  @param[in] kind    SLUICE_CALL_DECIDE, _RELEASE or _SETTLE.
 *  @param[in] actual  SETTLE: nactual attributes; otherwise NULL and 0. */
SLUICE_EXPORT int sluice_policy_begin(sluice_call *call, int kind,
                                      const sluice_request *q,
                                      sluice_decision *d,
                                      const sluice_attr *actual,
                                      size_t nactual);

/** @brief What came back for the bytes sent.
 *  err 0: `reply` holds every byte read from the node since they were
 *  sent (not only the latest read).  SLUICE_CALL_DONE (*d filled),
 *  SLUICE_CALL_SEND (new bytes, maybe for another node), SLUICE_CALL_MORE,
 *  or SLUICE_EINVAL when no call is out or `len` is less than before.
 *  Bytes that are not Redis replies, or more bytes than the replies owed,
 *  end the call as a store failure (SLUICE_CALL_DONE with the failure
 *  mode's decision; sluice_call_info's store_error is SLUICE_EBACKEND).
 *  err < 0: the call out could not be carried (reply and len are not
 *  read): SLUICE_ETIMEDOUT (no whole reply in time), SLUICE_EUNAVAIL
 *  (connect refused, connection lost), SLUICE_EIO or SLUICE_EBACKEND.  The
 *  command may have run, so it is not sent again: SLUICE_CALL_DONE with
 *  the failure mode's decision (degraded or fail closed, the breaker
 *  counting the failure), or SLUICE_EINVAL (no call out, or another err).
 *  A release or a settle takes d NULL. */
SLUICE_EXPORT int sluice_policy_finish(sluice_call *call, int err,
                                       const void *reply, size_t len,
                                       sluice_decision *d);

/** Where a handle stands (sluice_call_get()). */
typedef struct sluice_call_info {
  const void *bytes; /**< SEND: the bytes to send (RESP: one or more
                          commands); NULL otherwise */
  size_t len;        /**< their length; 0 unless SEND */
  const char *host;  /**< the node to send them to: an IP or name as the
                          cluster announces it, a unix socket's path when
                          port is 0; "" when no call is out */
  int port;
  int slot;        /**< the hash slot of the call's keys (0..16383), -1
                        on a single server or when no call is out */
  int replies;     /**< how many replies the bytes draw (finish counts
                        them for you) */
  int result;      /**< the last release or settle's result, as the
                        blocking call would return it: SLUICE_OK,
                        SLUICE_ENOTFOUND (a lease had expired), a store
                        error */
  int store_error; /**< 0, or the store error that ended the decision's
                        last store call (the decision is then the
                        failure mode's): close that connection */
} sluice_call_info;

/** @brief Read where the handle stands into *out (fully overwritten;
 *  its pointers are the handle's, valid until the next begin, finish or
 *  close on it).  @return SLUICE_OK, or SLUICE_EINVAL for a NULL
 *  argument. */
SLUICE_EXPORT int sluice_call_get(const sluice_call *call,
                                  sluice_call_info *out);

#ifdef __cplusplus
}
#endif

#endif

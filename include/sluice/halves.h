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
**                           bytes, please";
**   sluice_policy_fail()    the connection failed or timed out: the
**                           decision of the failure mode (fail closed or
**                           degraded, the breaker counting it), as in the
**                           blocking path.
**
** sluice_policy_decide() is these same halves with the store's own hiredis
** connections carrying the bytes: the same decisions, one code path.
**
**   sluice_call *call;
**   sluice_decision d;
**   sluice_call_open(policy, &call);              // once; reuse per request
**   int rc = sluice_policy_begin(call, &req, &d);
**   while (rc == SLUICE_CALL_SEND) {
**     size_t n;
**     const void *b = sluice_call_bytes(call, &n);
**     // connect to sluice_call_host(call):sluice_call_port(call) (or reuse
**     // a connection to it), write b, then read; after every read:
**     rc = sluice_policy_finish(call, all_bytes_read, total, &d);
**     while (rc == SLUICE_CALL_MORE) { read more; finish again; }
**     // on a connect/read/write error or a timeout:
**     //   rc = sluice_policy_fail(call, SLUICE_ETIMEDOUT, &d);
**   }
**   if (rc == SLUICE_CALL_DONE) { answer d; }   // rc < 0: a request error
**
** The host's connections: plain TCP (or the unix socket the store names)
** to each node, kept open between calls and used for one call at a time.
** A store URL with a password, a database or TLS is the host's to set up
** on its connections (AUTH, SELECT, TLS), as the store's own would.  Close
** a connection after sluice_policy_fail() and after a DONE whose
** sluice_call_store_error() is < 0: what it carries next is out of step.
**
** Ownership: a handle is allocated once (sluice_call_open) and holds all
** of a decision in flight; begin/finish/fail allocate nothing but, once,
** room for a call larger than any before it on that handle (and hiredis's
** reply tree while a reply is read, freed before they return).  The bytes
** from sluice_call_bytes() and the host string belong to the handle, valid
** until the next begin/finish/fail/close on it.  The request given to
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

/** What begin / finish / fail return when they do not fail (< 0: a
 *  sluice_strerror() code; the handle keeps its state). */
enum sluice_call_status {
  SLUICE_CALL_DONE = 0, /**< the decision is in *d */
  SLUICE_CALL_SEND = 1, /**< send sluice_call_bytes() to the node named */
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

/** @brief Start deciding q.  SLUICE_CALL_DONE with *d filled (no store call
 *  was needed), SLUICE_CALL_SEND, or a request error as
 *  sluice_policy_decide() returns it (d->invalid_field says which field).
 *  A decision still in flight on the handle is abandoned first. */
SLUICE_EXPORT int sluice_policy_begin(sluice_call *call,
                                      const sluice_request *q,
                                      sluice_decision *d);

/** @brief The reply to the bytes sent: `reply` holds every byte read from
 *  the node since they were sent (not only the latest read).
 *  SLUICE_CALL_DONE (*d filled), SLUICE_CALL_SEND (new bytes, maybe for
 *  another node), SLUICE_CALL_MORE, or SLUICE_EINVAL when no call is out
 *  or `len` is less than before.  Bytes that are not Redis replies, or
 *  more bytes than the replies owed, end the call as a store failure
 *  (SLUICE_CALL_DONE with the failure mode's decision;
 *  sluice_call_store_error() says SLUICE_EBACKEND). */
SLUICE_EXPORT int sluice_policy_finish(sluice_call *call, const void *reply,
                                       size_t len, sluice_decision *d);

/** @brief The call out could not be carried: err is SLUICE_ETIMEDOUT (no
 *  whole reply in time), SLUICE_EUNAVAIL (connect refused, connection
 *  lost), SLUICE_EIO or SLUICE_EBACKEND.  The command may have run, so it
 *  is not sent again: SLUICE_CALL_DONE with the failure mode's decision
 *  (degraded or fail closed, the breaker counting the failure), or
 *  SLUICE_EINVAL (no call out, or another err). */
SLUICE_EXPORT int sluice_policy_fail(sluice_call *call, int err,
                                     sluice_decision *d);

/** @brief Start releasing a lease from a decision (what
 *  sluice_policy_release_lease() does, in halves): SLUICE_CALL_DONE or
 *  SLUICE_CALL_SEND as for begin; finish and fail then take d NULL and
 *  end with SLUICE_CALL_DONE, the release's own result in
 *  sluice_call_result().  A request error is returned at once. */
SLUICE_EXPORT int sluice_policy_begin_release(sluice_call *call,
                                              const sluice_request *q,
                                              uint64_t lease_id);

/** @brief Start settling an admitted request's real cost (what
 *  sluice_policy_settle() does, in halves, with the same checks and the
 *  same one store call): SLUICE_CALL_DONE (nothing to send: an in-process
 *  store, or no limit's cost changes) or SLUICE_CALL_SEND as for begin;
 *  finish and fail then take d NULL and end with SLUICE_CALL_DONE, the
 *  settle's own result in sluice_call_result().  An input error, or a
 *  decision that cannot be settled (SLUICE_ENOTFOUND, SLUICE_EEXIST), is
 *  returned at once, as sluice_policy_settle() returns it.  d must stay
 *  valid until SLUICE_CALL_DONE: SLUICE_DECISION_SETTLED is set in
 *  d->flags when the settle is applied (not after a store error). */
SLUICE_EXPORT int sluice_policy_begin_settle(sluice_call *call,
                                             const sluice_request *q,
                                             sluice_decision *d,
                                             const sluice_attr *actual,
                                             size_t nactual);

/** @brief What the last release or settle on the handle returned, as
 *  sluice_policy_release_lease() or sluice_policy_settle() would:
 *  SLUICE_OK, SLUICE_ENOTFOUND (a lease had expired), a store error. */
SLUICE_EXPORT int sluice_call_result(const sluice_call *call);

/** @brief The bytes to send (RESP: one or more commands), their length in
 *  *len; NULL and 0 unless the last result was SLUICE_CALL_SEND. */
SLUICE_EXPORT const void *sluice_call_bytes(const sluice_call *call,
                                            size_t *len);

/** @brief The node to send them to: host (an IP or name as the cluster
 *  announces it; a unix socket's path when the port is 0) and port. */
SLUICE_EXPORT const char *sluice_call_host(const sluice_call *call);
SLUICE_EXPORT int sluice_call_port(const sluice_call *call);

/** @brief The hash slot of the call's keys (0..16383), -1 on a single
 *  server. */
SLUICE_EXPORT int sluice_call_slot(const sluice_call *call);

/** @brief How many replies the bytes draw (finish counts them for you). */
SLUICE_EXPORT int sluice_call_replies(const sluice_call *call);

/** @brief 0, or the store error that ended the decision's last store call
 *  (the decision is then the failure mode's): close that connection. */
SLUICE_EXPORT int sluice_call_store_error(const sluice_call *call);

#ifdef __cplusplus
}
#endif

#endif

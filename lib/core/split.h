/*
** A store call in two halves (private to the library): the store builds
** the bytes of one call for one of its nodes, the host carries them and
** brings back the reply, the store reads it.  The policy's
** sluice_policy_begin()/finish() (lib/policy/halves.c) drive it; a store
** that can do it (the Redis backend, backends/redis/redis_split.c) answers
** the SLUICE__CTL_SPLIT_* control ops, any other answers SLUICE_ENOTFOUND
** and runs its calls as it always does.
**
** The protocol of one call:
**   OPEN    once per handle: the store's private state (priv) made ready;
**   BEGIN   an op or a program at now: out come the bytes to send, the
**           node (host, port) and slot, and how many replies they draw;
**   REPLY   every byte received since the bytes were sent: SLUICE__SPLIT_DONE
**           (rc and the verdict or result are in), _SEND (new bytes for a
**           node: a redirection, a reload), _MORE (not every reply whole);
**   FAIL    the host's link failed (err): done, with that error;
**   CARRY   a blocking host of its own: the store sends the bytes on one
**           of its connections and reads the replies itself (the path of
**           sluice_policy_decide());
**   CLOSE   the private state freed.
** Nothing here blocks but CARRY; nothing allocates but OPEN (and BEGIN,
** growing the byte buffer for a call larger than any before it).
*/
#ifndef SLUICE_LIB_SPLIT_H
#define SLUICE_LIB_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

/* Control ops (negative: out of the public SLUICE_CTL_* range). */
#define SLUICE__CTL_SPLIT_OPEN (-7301)
#define SLUICE__CTL_SPLIT_BEGIN (-7302)
#define SLUICE__CTL_SPLIT_REPLY (-7303)
#define SLUICE__CTL_SPLIT_FAIL (-7304)
#define SLUICE__CTL_SPLIT_CARRY (-7305)
#define SLUICE__CTL_SPLIT_CLOSE (-7306)

/* What REPLY and CARRY answer (>= 0; errors are negative). */
enum { SLUICE__SPLIT_DONE = 0, SLUICE__SPLIT_SEND = 1, SLUICE__SPLIT_MORE = 2 };

/* Room for the store's own state, inline, so that a blocking decision
** needs no allocation for it. */
#define SLUICE__SPLIT_PRIV 4096

typedef struct sluice__split {
  /* BEGIN's input: one of op / prog, at now (already clamped). */
  const sluice_op *op;
  const sluice_program *prog;
  int64_t now;
  /* Where the answer goes (the caller's). */
  sluice_verdict *v;
  sluice_program_result *res;
  int rc;     /* the call's result once done */
  int status; /* the last SLUICE__SPLIT_* */
  /* The call to carry (valid until the next op on this split). */
  const char *bytes;
  size_t len;
  char host[64];
  int port; /* 0: a unix socket, its path in host */
  int slot; /* -1: a single server */
  int replies;
  /* REPLY's input: every byte received since the bytes were sent. */
  const void *reply;
  size_t reply_len;
  int err; /* FAIL's input */
  /* The store's private state. */
  _Alignas(16) unsigned char priv[SLUICE__SPLIT_PRIV];
} sluice__split;

/* lib/core/limiter.c: the limiter's side (the clamp of now, validation),
** then the store's control op.  SLUICE_ENOTFOUND: this store does not
** split its calls. */
int sluice__limiter_split(sluice_limiter *l, int op, sluice__split *sp);
/* lib/core/limiter.c: a program valid by construction (the policy's,
** checked at open) run without validating it again: the policy's calls,
** made at once.  Internal: outside callers always
** go through sluice_limiter_decide(). */
int sluice__limiter_run_built(sluice_limiter *l, const sluice_program *p,
                              int64_t now, sluice_program_result *res);

#endif

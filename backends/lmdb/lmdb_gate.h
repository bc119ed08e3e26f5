/*
** Private to the lmdb backend (and its tests): the writer gate.
**
** LMDB's own writer lock has no timeout, so a writer that stops inside a
** transaction (SIGSTOP, a debugger, a swap storm) would hang every other
** process forever.  Every sluice writer therefore first takes this gate, a
** process-shared robust mutex in DIR/sluice.lock, with a deadline
** (busy_timeout_ms); past it the decision fails with SLUICE_ETIMEDOUT
** instead of hanging.  A holder that dies leaves the mutex "owner dead";
** the next locker marks it consistent and goes on (LMDB discards the dead
** writer's uncommitted transaction on its side).  Writers that do not use
** sluice (mdb_load, other programs) bypass the gate and can still block.
**
** The file is created complete under a temporary name and link()ed into
** place, so no process ever sees a half-initialised mutex.
*/
#ifndef SLUICE_LMDB_GATE_H
#define SLUICE_LMDB_GATE_H

#include <pthread.h>
#include <stdint.h>

#define SLUICE_LMDB_GATE_MAGIC "SLUICEGT"
#define SLUICE_LMDB_GATE_FILE "sluice.lock"

typedef struct sluice_lmdb_gate {
  char magic[8];
  uint32_t version;    /* 1 */
  uint32_t mutex_size; /* sizeof(pthread_mutex_t) of the creator */
  pthread_mutex_t mu;  /* PTHREAD_PROCESS_SHARED, PTHREAD_MUTEX_ROBUST */
} sluice_lmdb_gate;

#endif

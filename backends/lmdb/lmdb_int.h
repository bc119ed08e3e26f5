/*
** Private to the lmdb backend: its types, and the helpers its files share.
** lmdb_store.c has the design (layout, transactions, expiry, failure,
** processes); lmdb_txn.c the errors, record codec and transactions;
** lmdb_apply.c the decisions; lmdb_control.c SLUICE_CTL_LMDB_*;
** lmdb_store.c the environment's lifecycle (open, close, the table).
*/
#ifndef SLUICE_LMDB_INT_H
#define SLUICE_LMDB_INT_H

#include "backends.h"
#include "lmdb_gate.h"
#include "sluice.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <sluice/sluice_lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REC_SIZE 32
#define REC_FORMAT 1
#define META_MAGIC "SLUICELM"
#define META_FORMAT 1
#define META_KEY {6, (void *)"format"} /* the meta record's key */
#define DEFAULT_MAPSIZE ((int64_t)64 << 20)
#define MAX_SWEEP ((int64_t)1 << 20)
#define LOCK_WAIT_MS 2000

enum { SYNC_FULL, SYNC_NOMETASYNC, SYNC_NOSYNC };

/* On-disk identity of an environment (native byte order: an LMDB file is
** not portable across byte orders anyway). */
typedef struct meta_rec {
  char magic[8];
  uint32_t format;
  uint32_t layout;
  uint32_t rec_size;
  uint32_t raw_max;
  uint8_t secret[16];
  int64_t mapsize; /* last size set by SLUICE_CTL_LMDB_MAPSIZE */
} meta_rec;

/* One open environment, shared by every store of this process on it. */
typedef struct sluice_lmdb_env {
  struct sluice_lmdb_env *next;
  dev_t dev;
  ino_t ino;
  pid_t pid;
  int refs;
  int sync;
  int rdonly;
  MDB_env *env;
  MDB_dbi dbi_state;
  MDB_dbi dbi_meta;
  size_t raw_max;
  uint8_t secret[16];
  sluice_lmdb_gate *gate; /* NULL for a read-only environment */
  int64_t busy_ms;
  pthread_rwlock_t maplock;
  pthread_mutex_t sweep_mu;
  int sweep_has;
  size_t sweep_len;
  unsigned char sweep_key[SLUICE_KEY_MAX];
} sluice_lmdb_env;

typedef struct lmdb_store {
  sluice_store base;
  sluice_lmdb_env *e;
  pid_t pid;
  int rdonly;
} lmdb_store;

int sluice__lmdb_err(int rc);
int sluice__lmdb_fail(sluice_store *s, int mdbrc, const char *what);
void sluice__lmdb_rec_encode(unsigned char *b, int64_t exp,
                             const sluice_state *st);
int sluice__lmdb_rec_decode(const MDB_val *v, int64_t *exp, sluice_state *st);
void sluice__lmdb_key_map(const sluice_lmdb_env *e, const sluice_key *k,
                          unsigned char *buf, MDB_val *out);
int sluice__lmdb_fork_check(lmdb_store *s);
int sluice__lmdb_adopt_mapsize(sluice_lmdb_env *e, size_t want);
int sluice__lmdb_gate_lock(sluice_lmdb_env *e, sluice_store *base,
                           int nowait);
void sluice__lmdb_gate_unlock(lmdb_store *s);
int sluice__lmdb_txn_begin(lmdb_store *s, unsigned flags, MDB_txn **txn,
                           int nowait);
void sluice__lmdb_txn_abort(lmdb_store *s, MDB_txn *txn);
void sluice__lmdb_txn_abort_ro(lmdb_store *s, MDB_txn *txn);
int sluice__lmdb_txn_commit(lmdb_store *s, MDB_txn *txn);
int sluice__lmdb_meta_get(MDB_txn *txn, MDB_dbi dbi, meta_rec *m);
int sluice__lmdb_meta_mapsize(MDB_txn *txn, MDB_dbi dbi, meta_rec *m,
                              int64_t size);
int sluice__lmdb_adopt_recorded(lmdb_store *s);
int sluice__lmdb_recover_room(lmdb_store *s);
int sluice__lmdb_run(sluice_store *base, int n, const sluice_program *ps,
                     int64_t now, sluice_program_result *res, int *rcs);
int sluice__lmdb_get(sluice_store *base, const sluice_key *key, int64_t now,
                     sluice_state *out, int64_t *expires);
int sluice__lmdb_delete(sluice_store *base, const sluice_key *key);
int sluice__lmdb_control(sluice_store *base, int op, void *arg);
unsigned sluice__lmdb_caps(sluice_store *s);

#endif

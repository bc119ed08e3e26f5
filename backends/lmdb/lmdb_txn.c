/*
** LMDB store: errors as SLUICE_E* codes, the 32-byte record codec, key
** mapping, and transactions behind the writer gate (see lmdb_store.c).
*/
#include "lmdb_int.h"
#include "siphash.h"

#include <errno.h>

/* ------------------------------------------------------------- errors --- */

int sluice__lmdb_err(int rc) {
  switch (rc) {
  case MDB_SUCCESS:
    return SLUICE_OK;
  case MDB_NOTFOUND:
  case ENOENT:
    return SLUICE_ENOTFOUND;
  case MDB_MAP_FULL:
  case MDB_DBS_FULL:
    return SLUICE_EFULL;
  case MDB_TXN_FULL:
  case MDB_CURSOR_FULL:
  case MDB_PAGE_FULL:
    return SLUICE_ERANGE;
  case MDB_READERS_FULL:
  case MDB_MAP_RESIZED:
  case EAGAIN:
  case EBUSY:
    return SLUICE_EBUSY;
  case MDB_INVALID:
  case MDB_CORRUPTED:
  case MDB_PAGE_NOTFOUND:
  case MDB_PANIC:
  case MDB_INCOMPATIBLE:
    return SLUICE_ECORRUPT;
  case MDB_VERSION_MISMATCH:
    return SLUICE_EVERSION;
  case MDB_BAD_VALSIZE:
    return SLUICE_EKEY;
  case EACCES:
  case EPERM:
  case EROFS:
    return SLUICE_EPERM;
  case ENOMEM:
    return SLUICE_ENOMEM;
  case EIO:
  case ENOSPC:
  case EDQUOT:
    return SLUICE_EIO;
  default:
    return SLUICE_EBACKEND;
  }
}

int sluice__lmdb_fail(sluice_store *s, int mdbrc, const char *what) {
  int rc = sluice__lmdb_err(mdbrc);
  if (mdbrc == MDB_MAP_FULL)
    return sluice_store_seterr(s, rc, mdbrc,
                               "lmdb: %s: map full; grow it with "
                               "SLUICE_CTL_LMDB_MAPSIZE (nothing was written)",
                               what);
  return sluice_store_seterr(s, rc, mdbrc, "lmdb: %s: %s", what,
                             mdb_strerror(mdbrc));
}

/* ------------------------------------------------------------ records --- */

void sluice__lmdb_rec_encode(unsigned char *b, int64_t exp,
                             const sluice_state *st) {
  memset(b, 0, REC_SIZE);
  b[0] = 's';
  b[1] = REC_FORMAT;
  b[2] = SLUICE_STATE_LAYOUT;
  memcpy(b + 8, &exp, sizeof exp);
  memcpy(b + 16, st, sizeof *st);
}

int sluice__lmdb_rec_decode(const MDB_val *v, int64_t *exp, sluice_state *st) {
  const unsigned char *b = v->mv_data;
  if (v->mv_size != REC_SIZE || b[0] != 's' || b[1] != REC_FORMAT ||
      b[2] != SLUICE_STATE_LAYOUT)
    return SLUICE_ECORRUPT;
  memcpy(exp, b + 8, sizeof *exp);
  memcpy(st, b + 16, sizeof *st);
  return SLUICE_OK;
}

/* The LMDB key of a sluice key; buf holds at least raw_max + 1 bytes. */
void sluice__lmdb_key_map(const sluice_lmdb_env *e, const sluice_key *k,
                          unsigned char *buf, MDB_val *out) {
  if (k->len <= e->raw_max) {
    out->mv_data = (void *)(uintptr_t)k->data;
    out->mv_size = k->len;
    return;
  }
  memcpy(buf, k->data, e->raw_max + 1 - 16);
  sluice__siphash128(e->secret, k->data, k->len, buf + e->raw_max + 1 - 16);
  out->mv_data = buf;
  out->mv_size = e->raw_max + 1;
}

/* -------------------------------------------------------- transactions --- */

int sluice__lmdb_fork_check(lmdb_store *s) {
  pid_t now = getpid();
  if (s->pid == now)
    return SLUICE_OK;
  return sluice_store_seterr(&s->base, SLUICE_EINVAL, 0,
                             "lmdb: store opened in process %ld used in "
                             "process %ld after fork; open a new store",
                             (long)s->pid, (long)now);
}

/* Adopt the map size recorded in the environment (grown by another
** process).  Needs every transaction of this process to be finished. */
int sluice__lmdb_adopt_mapsize(sluice_lmdb_env *e, size_t want) {
  int rc;
  pthread_rwlock_wrlock(&e->maplock);
  rc = mdb_env_set_mapsize(e->env, want);
  pthread_rwlock_unlock(&e->maplock);
  return rc;
}

/* Take the writer gate (lmdb_gate.h) within busy_ms. */
int sluice__lmdb_gate_lock(sluice_lmdb_env *e, sluice_store *base,
                           int nowait) {
  struct timespec dl;
  int rc;
  if (!e->gate)
    return SLUICE_OK;
  if (nowait) {
    rc = pthread_mutex_trylock(&e->gate->mu);
    if (rc == EOWNERDEAD)
      pthread_mutex_consistent(&e->gate->mu);
    return (rc == 0 || rc == EOWNERDEAD) ? SLUICE_OK : SLUICE_EBUSY;
  }
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += e->busy_ms / 1000;
  dl.tv_nsec += (long)(e->busy_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  do
    rc = pthread_mutex_timedlock(&e->gate->mu, &dl);
  while (rc == EINTR);
  if (rc == EOWNERDEAD) {
    /* The holder died mid-decision; LMDB rolls its transaction back, and
    ** the gate itself guards no data, so it is consistent as it stands. */
    pthread_mutex_consistent(&e->gate->mu);
    return SLUICE_OK;
  }
  if (rc == 0)
    return SLUICE_OK;
  if (rc == ETIMEDOUT)
    return sluice_store_seterr(base, SLUICE_ETIMEDOUT, rc,
                               "lmdb: writer lock held by another writer "
                               "for more than %lld ms (a stopped or hung "
                               "process?); nothing was written",
                               (long long)e->busy_ms);
  return sluice_store_seterr(base, SLUICE_EBACKEND, rc, "lmdb: writer gate: %s",
                             strerror(rc));
}

void sluice__lmdb_gate_unlock(lmdb_store *s) {
  if (s->e->gate)
    pthread_mutex_unlock(&s->e->gate->mu);
}

/* Begin a transaction holding the map lock shared (and, for a write
** transaction, the writer gate).  On failure nothing is held and the
** store's errstr says why. */
int sluice__lmdb_txn_begin(lmdb_store *s, unsigned flags, MDB_txn **txn,
                           int nowait) {
  sluice_lmdb_env *e = s->e;
  int tries, rc = MDB_SUCCESS, write = !(flags & MDB_RDONLY);
  for (tries = 0; tries < 4; tries++) {
    if (write) {
      int grc = sluice__lmdb_gate_lock(e, &s->base, nowait);
      if (grc != SLUICE_OK)
        return grc;
    }
    pthread_rwlock_rdlock(&e->maplock);
    rc = mdb_txn_begin(e->env, NULL, flags, txn);
    if (rc == MDB_SUCCESS)
      return SLUICE_OK;
    pthread_rwlock_unlock(&e->maplock);
    if (write)
      sluice__lmdb_gate_unlock(s);
    if (rc == MDB_MAP_RESIZED) {
      if (sluice__lmdb_adopt_mapsize(e, 0) != MDB_SUCCESS)
        break;
      continue;
    }
    if (rc == MDB_READERS_FULL) {
      int dead = 0;
      if (mdb_reader_check(e->env, &dead) == MDB_SUCCESS && dead > 0)
        continue;
    }
    break;
  }
  return sluice__lmdb_fail(&s->base, rc, "begin transaction");
}

void sluice__lmdb_txn_abort(lmdb_store *s, MDB_txn *txn) {
  mdb_txn_abort(txn);
  pthread_rwlock_unlock(&s->e->maplock);
  sluice__lmdb_gate_unlock(s);
}

void sluice__lmdb_txn_abort_ro(lmdb_store *s, MDB_txn *txn) {
  mdb_txn_abort(txn);
  pthread_rwlock_unlock(&s->e->maplock);
}

int sluice__lmdb_txn_commit(lmdb_store *s, MDB_txn *txn) {
  int rc = mdb_txn_commit(txn);
  pthread_rwlock_unlock(&s->e->maplock);
  sluice__lmdb_gate_unlock(s);
  return rc;
}

/* The meta record in txn; MDB_CORRUPTED when it is not one. */
int sluice__lmdb_meta_get(MDB_txn *txn, MDB_dbi dbi, meta_rec *m) {
  MDB_val k = META_KEY, v;
  int mrc = mdb_get(txn, dbi, &k, &v);
  if (mrc == MDB_SUCCESS && v.mv_size != sizeof *m)
    return MDB_CORRUPTED;
  if (mrc == MDB_SUCCESS)
    memcpy(m, v.mv_data, sizeof *m);
  return mrc;
}

/* Raise the map size recorded in meta record m to `size` (never lower):
** LMDB publishes a new size to other processes only with a commit that
** writes pages, so the record carries it, and sluice__lmdb_recover_room()
** reads it back in processes that run out of room. */
int sluice__lmdb_meta_mapsize(MDB_txn *txn, MDB_dbi dbi, meta_rec *m,
                              int64_t size) {
  MDB_val k = META_KEY, v = {sizeof *m, m};
  if (m->mapsize >= size)
    return MDB_SUCCESS;
  m->mapsize = size;
  return mdb_put(txn, dbi, &k, &v, 0);
}

/* Adopt the map size recorded in the meta record if it is larger than
** ours (another process grew the map); 1 if the map grew. */
int sluice__lmdb_adopt_recorded(lmdb_store *s) {
  sluice_lmdb_env *e = s->e;
  MDB_envinfo info;
  MDB_txn *txn;
  meta_rec m;
  int grown;
  if (mdb_env_info(e->env, &info) != MDB_SUCCESS)
    return 0;
  if (sluice__lmdb_txn_begin(s, MDB_RDONLY, &txn, 0) != SLUICE_OK)
    return 0;
  grown = sluice__lmdb_meta_get(txn, e->dbi_meta, &m) == MDB_SUCCESS &&
          m.mapsize > (int64_t)info.me_mapsize;
  sluice__lmdb_txn_abort_ro(s, txn);
  return grown &&
         sluice__lmdb_adopt_mapsize(e, (size_t)m.mapsize) == MDB_SUCCESS;
}

/* After MDB_MAP_FULL: is there room to be had without growing the map?
** Stale readers pin pages that could be reused, and another process may
** have grown the map already. */
int sluice__lmdb_recover_room(lmdb_store *s) {
  int dead = 0;
  if (mdb_reader_check(s->e->env, &dead) == MDB_SUCCESS && dead > 0)
    return 1;
  return sluice__lmdb_adopt_recorded(s);
}

/*
** LMDB store: decisions.  The programs of one xRun are one write
** transaction (a read transaction first when they may change nothing).
*/
#include "lmdb_int.h"
#include "job.h"

enum { WROTE = 1, TIDY = 2 };

/* -------------------------------------------------------------- apply --- */

/* One program inside an open transaction.  *mdbrc gets the LMDB code of a
** failure that poisoned the transaction (0 when the failure was the
** program's own and the transaction can go on).  *dirty gets WROTE when
** anything was written; a dry run (a read transaction) writes nothing and
** sets WROTE where it would have written, TIDY where it would only drop
** an expired record. */
static int apply_in_txn(lmdb_store *s, MDB_txn *txn, const sluice__job *job,
                        int64_t now, int *dirty, int *mdbrc, int dry) {
  sluice_lmdb_env *e = s->e;
  sluice_state in[SLUICE_PROGRAM_KEYS], out[SLUICE_PROGRAM_KEYS];
  sluice_state old[SLUICE_PROGRAM_KEYS];
  int64_t oldexp[SLUICE_PROGRAM_KEYS];
  unsigned char present[SLUICE_PROGRAM_KEYS];
  unsigned char kbuf[SLUICE_KEY_MAX];
  int i, rc;

  *mdbrc = MDB_SUCCESS;
  for (i = 0; i < job->nkeys; i++) {
    MDB_val k, val;
    sluice__lmdb_key_map(e, &job->keys[i], kbuf, &k);
    rc = mdb_get(txn, e->dbi_state, &k, &val);
    if (rc == MDB_NOTFOUND) {
      present[i] = 0;
      memset(&in[i], 0, sizeof in[i]);
      continue;
    }
    if (rc != MDB_SUCCESS) {
      *mdbrc = rc;
      return sluice__lmdb_fail(&s->base, rc, "read record");
    }
    if (sluice__lmdb_rec_decode(&val, &oldexp[i], &old[i]) != SLUICE_OK)
      return sluice_store_seterr(&s->base, SLUICE_ECORRUPT, 0,
                                 "lmdb: record of key %d of the group is "
                                 "not a layout-%d record (%zu bytes)",
                                 i, SLUICE_STATE_LAYOUT, val.mv_size);
    present[i] = 1;
    if (oldexp[i] <= now)
      memset(&in[i], 0, sizeof in[i]);
    else
      in[i] = old[i];
  }
  rc = sluice__job_run(job, in, out, now);
  if (rc != SLUICE_OK)
    return rc;
  for (i = 0; i < job->nkeys; i++) {
    int64_t exp = sluice__job_expiry(job, i, &out[i]);
    MDB_val k, val;
    unsigned char rec[REC_SIZE];
    sluice__lmdb_key_map(e, &job->keys[i], kbuf, &k);
    if (exp <= now) {
      if (!present[i])
        continue;
      if (dry) {
        /* Dropping an expired record is only tidying; a live record
        ** turned fresh must really be written. */
        *dirty |= oldexp[i] > now ? WROTE : TIDY;
        continue;
      }
      rc = mdb_del(txn, e->dbi_state, &k, NULL);
    } else {
      if (present[i] && oldexp[i] == exp &&
          memcmp(&old[i], &out[i], sizeof out[i]) == 0)
        continue;
      if (dry) {
        *dirty |= WROTE;
        continue;
      }
      sluice__lmdb_rec_encode(rec, exp, &out[i]);
      val.mv_data = rec;
      val.mv_size = REC_SIZE;
      rc = mdb_put(txn, e->dbi_state, &k, &val, 0);
    }
    if (rc != MDB_SUCCESS) {
      *mdbrc = rc;
      return sluice__lmdb_fail(&s->base, rc, "write record");
    }
    *dirty |= WROTE;
  }
  return SLUICE_OK;
}

/* The n programs in one transaction: a write transaction (flags 0; with
** nowait, SLUICE_EBUSY rather than wait for another writer), or with
** MDB_RDONLY the dry run of programs that only read.  rcs[i] gets program
** i's own outcome, the return value the transaction's: a failure that
** poisoned it takes the whole call with it (nothing of it was written). */
static int run_txn(lmdb_store *s, unsigned flags, int nowait, int n,
                   const sluice_program *ps, int64_t now,
                   sluice_program_result *res, int *rcs, int *dirty,
                   int *mdbrc) {
  MDB_txn *txn;
  int i, dry = (flags & MDB_RDONLY) != 0;
  int rc = sluice__lmdb_txn_begin(s, flags, &txn, nowait);
  *dirty = 0;
  *mdbrc = MDB_SUCCESS;
  if (rc != SLUICE_OK)
    return rc;
  for (i = 0; i < n && *mdbrc == MDB_SUCCESS; i++) {
    sluice__job j;
    sluice__job_program(&j, &ps[i], &res[i]);
    rcs[i] = apply_in_txn(s, txn, &j, now, dirty, mdbrc, dry);
  }
  if (dry) {
    sluice__lmdb_txn_abort_ro(s, txn);
  } else if (*mdbrc != MDB_SUCCESS || !*dirty) {
    sluice__lmdb_txn_abort(s, txn);
  } else if ((*mdbrc = sluice__lmdb_txn_commit(s, txn)) != MDB_SUCCESS) {
    return sluice__lmdb_fail(&s->base, *mdbrc, "commit");
  }
  return sluice__lmdb_err(*mdbrc);
}

/* Programs of kinds documented to change nothing (PEEK, CHECK) run in a
** read transaction first and reach the writer only if a step would change
** a live record after all (so the stored state stays exactly what the mem
** store would hold), which keeps checks cheap and keeps them answering
** while a writer is stuck; expired records they met are dropped only if
** the writer is free right now, and their verdicts stand either way (each
** run answers from one consistent snapshot).  Otherwise one write
** transaction for all n, retried once after MDB_MAP_FULL if room could be
** found: a batch pays one commit. */
int sluice__lmdb_run(sluice_store *base, int n, const sluice_program *ps,
                     int64_t now, sluice_program_result *res, int *rcs) {
  lmdb_store *s = (lmdb_store *)base;
  int i, attempt, dirty, mdbrc, write = 0;
  int rc = sluice__lmdb_fork_check(s);
  if (rc == SLUICE_OK && s->rdonly)
    rc = sluice_store_seterr(base, SLUICE_EPERM, 0,
                             "lmdb: store opened read-only");
  for (i = 0; i < n && !write; i++) {
    sluice__job j;
    sluice__job_program(&j, &ps[i], &res[i]);
    write = !sluice__job_read_only(&j);
  }
  if (rc == SLUICE_OK && !write) {
    rc = run_txn(s, MDB_RDONLY, 0, n, ps, now, res, rcs, &dirty, &mdbrc);
    write = dirty & WROTE;
    /* Only expired records to drop: if the writer is free right now; the
    ** verdicts stand either way (a tidy that fails reads them again). */
    if (rc == SLUICE_OK && dirty == TIDY &&
        run_txn(s, 0, 1, n, ps, now, res, rcs, &dirty, &mdbrc) != SLUICE_OK)
      rc = run_txn(s, MDB_RDONLY, 0, n, ps, now, res, rcs, &dirty, &mdbrc);
  }
  for (attempt = 0; rc == SLUICE_OK && write && attempt < 2; attempt++) {
    rc = run_txn(s, 0, 0, n, ps, now, res, rcs, &dirty, &mdbrc);
    if (mdbrc != MDB_MAP_FULL || attempt > 0 || !sluice__lmdb_recover_room(s))
      break;
    rc = SLUICE_OK;
  }
  if (rc != SLUICE_OK)
    for (i = 0; i < n; i++)
      rcs[i] = rc;
  return rc;
}

/* ------------------------------------------------------ get / delete --- */

int sluice__lmdb_get(sluice_store *base, const sluice_key *key, int64_t now,
                     sluice_state *out, int64_t *expires) {
  lmdb_store *s = (lmdb_store *)base;
  unsigned char kbuf[SLUICE_KEY_MAX];
  MDB_txn *txn;
  MDB_val k, val;
  int64_t exp;
  sluice_state st;
  int rc = sluice__lmdb_fork_check(s), mrc;
  if (rc != SLUICE_OK)
    return rc;
  rc = sluice__lmdb_txn_begin(s, MDB_RDONLY, &txn, 0);
  if (rc != SLUICE_OK)
    return rc;
  sluice__lmdb_key_map(s->e, key, kbuf, &k);
  mrc = mdb_get(txn, s->e->dbi_state, &k, &val);
  if (mrc == MDB_NOTFOUND) {
    rc = SLUICE_ENOTFOUND;
  } else if (mrc != MDB_SUCCESS) {
    rc = sluice__lmdb_fail(base, mrc, "read record");
  } else if (sluice__lmdb_rec_decode(&val, &exp, &st) != SLUICE_OK) {
    rc = sluice_store_seterr(base, SLUICE_ECORRUPT, 0,
                             "lmdb: record is not a layout-%d record",
                             SLUICE_STATE_LAYOUT);
  } else if (exp <= now) {
    rc = SLUICE_ENOTFOUND;
  } else {
    *out = st;
    *expires = exp;
  }
  sluice__lmdb_txn_abort_ro(s, txn);
  return rc;
}

int sluice__lmdb_delete(sluice_store *base, const sluice_key *key) {
  lmdb_store *s = (lmdb_store *)base;
  unsigned char kbuf[SLUICE_KEY_MAX];
  MDB_txn *txn;
  MDB_val k;
  int rc = sluice__lmdb_fork_check(s), mrc;
  if (rc != SLUICE_OK)
    return rc;
  if (s->rdonly)
    return sluice_store_seterr(base, SLUICE_EPERM, 0,
                               "lmdb: store opened read-only");
  rc = sluice__lmdb_txn_begin(s, 0, &txn, 0);
  if (rc != SLUICE_OK)
    return rc;
  sluice__lmdb_key_map(s->e, key, kbuf, &k);
  mrc = mdb_del(txn, s->e->dbi_state, &k, NULL);
  if (mrc == MDB_NOTFOUND) {
    sluice__lmdb_txn_abort(s, txn);
    return SLUICE_ENOTFOUND;
  }
  if (mrc != MDB_SUCCESS) {
    sluice__lmdb_txn_abort(s, txn);
    return sluice__lmdb_fail(base, mrc, "delete record");
  }
  mrc = sluice__lmdb_txn_commit(s, txn);
  return mrc == MDB_SUCCESS ? SLUICE_OK
                            : sluice__lmdb_fail(base, mrc, "commit");
}

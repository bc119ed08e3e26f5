/*
** LMDB store: decisions. One op, program or batch is one write transaction
** (a read transaction first for steps that may change nothing).
*/
#include "lmdb_int.h"
#include "job.h"

/* -------------------------------------------------------------- apply --- */

/* One op inside an open write transaction.  *mdbrc gets the LMDB code of a
** failure that poisoned the transaction (0 when the failure was the op's
** own and the transaction can go on); *dirty is set when anything was
** written. */
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
        /* Dropping an expired record is only tidying (*dirty = 2); a live
        ** record turned fresh must really be written (*dirty = 1). */
        if (oldexp[i] > now)
          goto needs_write;
        *dirty = 2;
        continue;
      }
      rc = mdb_del(txn, e->dbi_state, &k, NULL);
    } else {
      if (present[i] && oldexp[i] == exp &&
          memcmp(&old[i], &out[i], sizeof out[i]) == 0)
        continue;
      if (dry)
        goto needs_write;
      sluice__lmdb_rec_encode(rec, exp, &out[i]);
      val.mv_data = rec;
      val.mv_size = REC_SIZE;
      rc = mdb_put(txn, e->dbi_state, &k, &val, 0);
    }
    if (rc != MDB_SUCCESS) {
      *mdbrc = rc;
      return sluice__lmdb_fail(&s->base, rc, "write record");
    }
    *dirty = 1;
  }
  return SLUICE_OK;
needs_write:
  *dirty = 1;
  return SLUICE_OK;
}

/* The write path: one write transaction, retried once after MDB_MAP_FULL
** if room could be found.  With nowait, give up (SLUICE_EBUSY) rather than
** wait for another writer. */
static int apply_write(lmdb_store *s, const sluice__job *job, int64_t now,
                       int nowait) {
  sluice_store *base = &s->base;
  int attempt, rc = SLUICE_OK;
  for (attempt = 0; attempt < 2; attempt++) {
    MDB_txn *txn;
    int dirty = 0, mdbrc = MDB_SUCCESS;
    rc = sluice__lmdb_txn_begin2(s, 0, &txn, nowait);
    if (rc != SLUICE_OK)
      return rc;
    rc = apply_in_txn(s, txn, job, now, &dirty, &mdbrc, 0);
    if (rc != SLUICE_OK || !dirty) {
      sluice__lmdb_txn_abort(s, txn);
    } else {
      mdbrc = sluice__lmdb_txn_commit(s, txn);
      if (mdbrc != MDB_SUCCESS)
        rc = sluice__lmdb_fail(base, mdbrc, "commit");
    }
    if (mdbrc == MDB_MAP_FULL && attempt == 0 && sluice__lmdb_recover_room(s))
      continue;
    break;
  }
  return rc;
}

/* Jobs of kinds documented to change nothing (PEEK, CHECK) run in a read
** transaction and reach the writer only if a step would change a live
** record after all (so the stored state stays exactly what the mem store
** would hold), which keeps checks cheap and keeps them answering while a
** writer is stuck.  An op or a whole program: one transaction either way. */
static int lmdb_job(sluice_store *base, const sluice__job *job, int64_t now) {
  lmdb_store *s = (lmdb_store *)base;
  sluice_verdict dv;
  sluice_program_result dres;
  sluice__job dry = *job;
  MDB_txn *txn;
  int dirty = 0, mdbrc = MDB_SUCCESS, rc = sluice__lmdb_fork_check(s);
  if (rc != SLUICE_OK)
    return rc;
  if (s->rdonly)
    return sluice_store_seterr(base, SLUICE_EPERM, 0,
                               "lmdb: store opened read-only");
  if (!sluice__job_read_only(job))
    return apply_write(s, job, now, 0);
  /* The dry run answers into its own result: the write below may fail and
  ** then the dry one stands. */
  dry.v = &dv;
  dry.res = &dres;
  rc = sluice__lmdb_txn_begin(s, MDB_RDONLY, &txn);
  if (rc != SLUICE_OK)
    return rc;
  rc = apply_in_txn(s, txn, &dry, now, &dirty, &mdbrc, 1);
  sluice__lmdb_txn_abort_ro(s, txn);
  if (rc == SLUICE_OK && dirty == 1)
    return apply_write(s, job, now, 0);
  /* Only expired records to drop: tidy up if the writer is free right now;
  ** the verdict stands either way. */
  if (rc != SLUICE_OK || dirty == 0 ||
      apply_write(s, job, now, 1) != SLUICE_OK) {
    if (job->v)
      *job->v = dv;
    else
      *job->res = dres;
  }
  return rc;
}

/* A batch of programs: one write transaction. */
static int lmdb_batch(sluice_store *base, int n, const sluice_program *ps,
                      int64_t now, sluice_program_result *res, int *rcs) {
  lmdb_store *s = (lmdb_store *)base;
  int attempt, i, rc = sluice__lmdb_fork_check(s);
  if (rc == SLUICE_OK && s->rdonly)
    rc = sluice_store_seterr(base, SLUICE_EPERM, 0,
                             "lmdb: store opened read-only");
  for (attempt = 0; rc == SLUICE_OK && attempt < 2; attempt++) {
    MDB_txn *txn;
    int dirty = 0, mdbrc = MDB_SUCCESS;
    rc = sluice__lmdb_txn_begin(s, 0, &txn);
    if (rc != SLUICE_OK)
      break;
    for (i = 0; i < n && mdbrc == MDB_SUCCESS; i++) {
      sluice__job j;
      sluice__job_program(&j, &ps[i], &res[i]);
      rcs[i] = apply_in_txn(s, txn, &j, now, &dirty, &mdbrc, 0);
    }
    if (mdbrc != MDB_SUCCESS) {
      /* A poisoned transaction takes the whole batch with it: nothing of
      ** it was written, so every op reports the failure. */
      sluice__lmdb_txn_abort(s, txn);
      rc = sluice__lmdb_err(mdbrc);
    } else if (!dirty) {
      sluice__lmdb_txn_abort(s, txn);
    } else {
      mdbrc = sluice__lmdb_txn_commit(s, txn);
      if (mdbrc != MDB_SUCCESS)
        rc = sluice__lmdb_fail(base, mdbrc, "commit batch");
    }
    if (mdbrc == MDB_MAP_FULL && attempt == 0 && sluice__lmdb_recover_room(s)) {
      rc = SLUICE_OK;
      continue;
    }
    break;
  }
  if (rc != SLUICE_OK)
    for (i = 0; i < n; i++)
      rcs[i] = rc;
  return rc;
}

/* One program: its own transaction (a read-only one when it only
** reads); more: one write transaction for the batch. */
int sluice__lmdb_run(sluice_store *base, int n, const sluice_program *ps,
                     int64_t now, sluice_program_result *res, int *rcs) {
  sluice__job job;
  if (n > 1)
    return lmdb_batch(base, n, ps, now, res, rcs);
  sluice__job_program(&job, ps, res);
  rcs[0] = lmdb_job(base, &job, now);
  return SLUICE_OK;
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
  rc = sluice__lmdb_txn_begin(s, MDB_RDONLY, &txn);
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
  rc = sluice__lmdb_txn_begin(s, 0, &txn);
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

/*
** LMDB store: SLUICE_CTL_LMDB_* (map size, sweep of expired records,
** statistics) and the capabilities.
*/
#include "lmdb_int.h"

/* ------------------------------------------------------------ control --- */

/* Raise the map size recorded in the meta record to `size`. */
static int write_meta_mapsize(lmdb_store *s, int64_t size) {
  MDB_txn *txn;
  meta_rec m;
  int rc = sluice__lmdb_txn_begin(s, 0, &txn, 0), mrc;
  if (rc != SLUICE_OK)
    return rc;
  mrc = sluice__lmdb_meta_get(txn, s->e->dbi_meta, &m);
  if (mrc == MDB_SUCCESS)
    mrc = sluice__lmdb_meta_mapsize(txn, s->e->dbi_meta, &m, size);
  if (mrc == MDB_SUCCESS)
    mrc = sluice__lmdb_txn_commit(s, txn);
  else
    sluice__lmdb_txn_abort(s, txn);
  return mrc == MDB_SUCCESS
             ? SLUICE_OK
             : sluice__lmdb_fail(&s->base, mrc, "record map size");
}

static int ctl_mapsize(lmdb_store *s, int64_t *arg) {
  MDB_envinfo info;
  int mrc;
  if (*arg < 0)
    return sluice_store_seterr(&s->base, SLUICE_EINVAL, 0,
                               "lmdb: map size must be >= 0");
  if (s->rdonly && *arg != 0)
    return sluice_store_seterr(&s->base, SLUICE_EPERM, 0,
                               "lmdb: store opened read-only");
  if (*arg != 0) {
    /* Only ever grow: a smaller size would be rounded up to the pages in
    ** use and fill up on the next write. */
    mrc = mdb_env_info(s->e->env, &info);
    if (mrc != MDB_SUCCESS)
      return sluice__lmdb_fail(&s->base, mrc, "read map size");
    if (*arg > (int64_t)info.me_mapsize) {
      mrc = sluice__lmdb_adopt_mapsize(s->e, (size_t)*arg);
      if (mrc != MDB_SUCCESS)
        return sluice__lmdb_fail(&s->base, mrc, "set map size");
    }
  } else {
    (void)sluice__lmdb_adopt_recorded(s);
  }
  mdb_env_info(s->e->env, &info);
  if (*arg != 0) { /* told to the other processes (meta_mapsize) */
    int rc = write_meta_mapsize(s, (int64_t)info.me_mapsize);
    if (rc != SLUICE_OK)
      return rc;
  }
  *arg = (int64_t)info.me_mapsize;
  return SLUICE_OK;
}

static int ctl_sweep(lmdb_store *s, sluice_lmdb_sweep *sw) {
  sluice_lmdb_env *e = s->e;
  MDB_txn *txn;
  MDB_cursor *cur;
  MDB_val k, v;
  int rc, mrc;
  sw->examined = sw->removed = 0;
  sw->wrapped = 0;
  if (sw->now_ns < 0 || sw->max_records < 1 || sw->max_records > MAX_SWEEP)
    return sluice_store_seterr(&s->base, SLUICE_EINVAL, 0,
                               "lmdb: sweep needs now_ns >= 0 and "
                               "1 <= max_records <= %lld",
                               (long long)MAX_SWEEP);
  if (s->rdonly)
    return sluice_store_seterr(&s->base, SLUICE_EPERM, 0,
                               "lmdb: store opened read-only");
  rc = sluice__lmdb_txn_begin(s, 0, &txn, 0);
  if (rc != SLUICE_OK)
    return rc;
  mrc = mdb_cursor_open(txn, e->dbi_state, &cur);
  if (mrc != MDB_SUCCESS) {
    sluice__lmdb_txn_abort(s, txn);
    return sluice__lmdb_fail(&s->base, mrc, "sweep");
  }
  pthread_mutex_lock(&e->sweep_mu);
  if (e->sweep_has) {
    k.mv_data = e->sweep_key;
    k.mv_size = e->sweep_len;
    mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    if (mrc == MDB_SUCCESS && k.mv_size == e->sweep_len &&
        memcmp(k.mv_data, e->sweep_key, k.mv_size) == 0)
      mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  } else {
    mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  }
  while (mrc == MDB_SUCCESS && sw->examined < sw->max_records) {
    int64_t exp;
    sluice_state st;
    sw->examined++;
    memcpy(e->sweep_key, k.mv_data, k.mv_size);
    e->sweep_len = k.mv_size;
    e->sweep_has = 1;
    /* A record we cannot read is left alone: deleting it could drop a
    ** live box of a newer layout. */
    if (sluice__lmdb_rec_decode(&v, &exp, &st) == SLUICE_OK &&
        exp <= sw->now_ns) {
      mrc = mdb_cursor_del(cur, 0);
      if (mrc != MDB_SUCCESS)
        break;
      sw->removed++;
    }
    mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  if (mrc == MDB_NOTFOUND) {
    sw->wrapped = 1;
    e->sweep_has = 0;
    mrc = MDB_SUCCESS;
  }
  pthread_mutex_unlock(&e->sweep_mu);
  mdb_cursor_close(cur);
  if (mrc != MDB_SUCCESS) {
    sluice__lmdb_txn_abort(s, txn);
    sw->removed = 0;
    return sluice__lmdb_fail(&s->base, mrc, "sweep");
  }
  if (sw->removed == 0) {
    sluice__lmdb_txn_abort(s, txn);
    return SLUICE_OK;
  }
  mrc = sluice__lmdb_txn_commit(s, txn);
  if (mrc != MDB_SUCCESS) {
    sw->removed = 0;
    return sluice__lmdb_fail(&s->base, mrc, "commit sweep");
  }
  return SLUICE_OK;
}

/* mdb_reader_list prints a header line, then one "pid thread txnid" line
** per held slot (or "(no active readers)"). */
static int count_reader(const char *msg, void *ctx) {
  while (*msg == ' ')
    msg++;
  if (*msg >= '0' && *msg <= '9')
    ++*(int64_t *)ctx;
  return 0;
}

static int ctl_stats(lmdb_store *s, sluice_lmdb_stats *st) {
  MDB_envinfo info;
  MDB_stat ms;
  MDB_txn *txn;
  int rc, mrc;
  memset(st, 0, sizeof *st);
  rc = sluice__lmdb_txn_begin(s, MDB_RDONLY, &txn, 0);
  if (rc != SLUICE_OK)
    return rc;
  mrc = mdb_stat(txn, s->e->dbi_state, &ms);
  if (mrc == MDB_SUCCESS)
    mrc = mdb_env_info(s->e->env, &info);
  sluice__lmdb_txn_abort_ro(s, txn);
  if (mrc != MDB_SUCCESS)
    return sluice__lmdb_fail(&s->base, mrc, "stats");
  st->mapsize = (int64_t)info.me_mapsize;
  st->page_size = ms.ms_psize;
  st->used_bytes = (int64_t)(info.me_last_pgno + 1) * ms.ms_psize;
  st->records = (int64_t)ms.ms_entries;
  st->max_readers = info.me_maxreaders;
  /* me_numreaders is a high-water mark; count the slots actually held. */
  mdb_reader_list(s->e->env, count_reader, &st->readers);
  return SLUICE_OK;
}

int sluice__lmdb_control(sluice_store *base, int op, void *arg) {
  lmdb_store *s = (lmdb_store *)base;
  int rc, mrc;
  if (op < SLUICE_CTL_LMDB_MAPSIZE || op > SLUICE_CTL_LMDB_SYNC)
    return SLUICE_ENOTFOUND;
  rc = sluice__lmdb_fork_check(s);
  if (rc != SLUICE_OK)
    return rc;
  if (!arg && op != SLUICE_CTL_LMDB_SYNC)
    return sluice_store_seterr(base, SLUICE_EINVAL, 0,
                               "lmdb: control op %d needs an argument", op);
  switch (op) {
  case SLUICE_CTL_LMDB_MAPSIZE:
    return ctl_mapsize(s, arg);
  case SLUICE_CTL_LMDB_SWEEP:
    return ctl_sweep(s, arg);
  case SLUICE_CTL_LMDB_STATS:
    return ctl_stats(s, arg);
  case SLUICE_CTL_LMDB_READER_CHECK:
    mrc = mdb_reader_check(s->e->env, (int *)arg);
    return mrc == MDB_SUCCESS ? SLUICE_OK
                              : sluice__lmdb_fail(base, mrc, "reader check");
  default:
    if (s->rdonly)
      return SLUICE_OK;
    mrc = mdb_env_sync(s->e->env, 1);
    return mrc == MDB_SUCCESS ? SLUICE_OK
                              : sluice__lmdb_fail(base, mrc, "sync");
  }
}

unsigned sluice__lmdb_caps(sluice_store *s) {
  (void)s;
  return SLUICE_CAP_THREADSAFE | SLUICE_CAP_CROSS_PROCESS | SLUICE_CAP_DURABLE;
}

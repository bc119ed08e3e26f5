/*
** The sink's spool: deliveries not done yet, in an LMDB file
** (spool_path), so a restart or a kill loses none of them.
**
**  a) One record per delivery, keyed by a big-endian sequence number so
**     a cursor walks them in the order they were queued; the value is a
**     versioned copy of the job's kept part (sink.h: the event, the
**     destination's fingerprint, attempts made, recipients).  A job is put
**     before its first attempt and deleted when it is delivered or fails
**     for good, so whatever a kill interrupts is attempted again by the
**     next open: delivery is at least once.
**  b) MDB_NOSYNC: a commit reaches the page cache, which outlives the
**     process (a kill, a crash) but not the machine; close syncs.  An
**     fsync per alert would put the disk on the alert path for a case
**     (power loss during an alert storm) the spool does not promise.
**  c) One sink per file: an exclusive flock on the data file, so two
**     processes never deliver the same spool twice over (prefork servers
**     give each worker its own file).
**  d) A full map (64 MiB, about 30,000 deliveries) refuses the put; the
**     event is counted dropped, as a full queue's would be.
*/
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "sink.h"

#ifdef SLUICE_HAVE_LMDB
#include <lmdb.h>

#define SPOOL_MAGIC UINT32_C(0x534c5331) /* "SLS1" */
#define SPOOL_MAP (64u << 20)

struct spool {
  MDB_env *env;
  MDB_dbi dbi;
  uint64_t next_seq;
};

/* A job's kept part behind a header, as stored. */
typedef struct record {
  uint32_t magic, size;
  kept kept;
} record;

/* A key: seq big-endian in *be, so keys sort as their numbers do. */
static MDB_val key_of(uint64_t seq, uint64_t *be) {
  MDB_val k;
  *be = htobe64(seq);
  k.mv_data = be;
  k.mv_size = sizeof *be;
  return k;
}

static uint64_t seq_of(const MDB_val *k) {
  uint64_t be = 0;
  memcpy(&be, k->mv_data, k->mv_size < sizeof be ? k->mv_size : sizeof be);
  return be64toh(be);
}

void sluice__spool_close(spool *s) {
  if (!s)
    return;
  if (s->env) {
    mdb_env_sync(s->env, 1);
    mdb_env_close(s->env);
  }
  free(s);
}

int sluice__spool_open(const char *path, spool **out, char *err,
                       size_t errlen) {
  spool *s = calloc(1, sizeof *s);
  MDB_txn *txn = NULL;
  MDB_cursor *cur = NULL;
  MDB_val k, v;
  int fd, rc;
  *out = NULL;
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return SLUICE_ENOMEM;
  }
  if ((rc = mdb_env_create(&s->env)) || (rc = mdb_env_set_mapsize(
                                             s->env, SPOOL_MAP)) ||
      (rc = mdb_env_open(s->env, path,
                         MDB_NOSUBDIR | MDB_NOSYNC | MDB_NOTLS, 0600))) {
    snprintf(err, errlen, "spool %s: %s", path, mdb_strerror(rc));
    sluice__spool_close(s);
    return SLUICE_EIO;
  }
  if (mdb_env_get_fd(s->env, &fd) || flock(fd, LOCK_EX | LOCK_NB)) {
    snprintf(err, errlen, "spool %s: in use by another sink", path);
    sluice__spool_close(s);
    return SLUICE_EBUSY;
  }
  if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) ||
      (rc = mdb_dbi_open(txn, NULL, 0, &s->dbi)) ||
      (rc = mdb_cursor_open(txn, s->dbi, &cur))) {
    if (txn)
      mdb_txn_abort(txn);
    snprintf(err, errlen, "spool %s: %s", path, mdb_strerror(rc));
    sluice__spool_close(s);
    return SLUICE_EIO;
  }
  s->next_seq = mdb_cursor_get(cur, &k, &v, MDB_LAST) == 0 ? seq_of(&k) + 1
                                                           : 1;
  mdb_cursor_close(cur);
  mdb_txn_commit(txn);
  *out = s;
  return SLUICE_OK;
}

int sluice__spool_put(spool *s, job *j) {
  MDB_txn *txn;
  MDB_val k, v;
  uint64_t kb;
  record r;
  int rc;
  memset(&r, 0, sizeof r);
  r.magic = SPOOL_MAGIC;
  r.size = (uint32_t)sizeof r;
  r.kept = j->kept;
  if (mdb_txn_begin(s->env, NULL, 0, &txn))
    return SLUICE_EIO;
  k = key_of(s->next_seq, &kb);
  v.mv_data = &r;
  v.mv_size = sizeof r;
  if ((rc = mdb_put(txn, s->dbi, &k, &v, 0)) != 0)
    mdb_txn_abort(txn); /* a failed commit frees its txn itself */
  else
    rc = mdb_txn_commit(txn);
  if (rc)
    return rc == MDB_MAP_FULL ? SLUICE_EFULL : SLUICE_EIO;
  j->seq = s->next_seq++;
  return SLUICE_OK;
}

int sluice__spool_del(spool *s, uint64_t seq) {
  MDB_txn *txn;
  uint64_t kb;
  MDB_val k = key_of(seq, &kb);
  int rc;
  if (mdb_txn_begin(s->env, NULL, 0, &txn))
    return SLUICE_EIO;
  rc = mdb_del(txn, s->dbi, &k, NULL);
  if (rc && rc != MDB_NOTFOUND) {
    mdb_txn_abort(txn);
    return SLUICE_EIO;
  }
  return mdb_txn_commit(txn) ? SLUICE_EIO : SLUICE_OK;
}

int sluice__spool_next(spool *s, uint64_t after, int for_dest, job *out) {
  MDB_txn *txn;
  MDB_cursor *cur;
  MDB_val k, v;
  uint64_t kb;
  int found = 0, rc;
  if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))
    return 0;
  if (mdb_cursor_open(txn, s->dbi, &cur)) {
    mdb_txn_abort(txn);
    return 0;
  }
  k = key_of(after + 1, &kb);
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0 && !found;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    record r;
    if (v.mv_size != sizeof r)
      continue; /* another layout: left alone */
    memcpy(&r, v.mv_data, sizeof r);
    if (r.magic != SPOOL_MAGIC || r.size != sizeof r ||
        (for_dest >= 0 && r.kept.dest != for_dest))
      continue;
    memset(out, 0, sizeof *out);
    out->seq = seq_of(&k);
    out->kept = r.kept;
    out->kept.extra[EXTRA_LEN - 1] = 0;
    found = 1;
  }
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  return found;
}

#else /* without liblmdb */

struct spool {
  int unused;
};

int sluice__spool_open(const char *path, spool **out, char *err,
                       size_t errlen) {
  *out = NULL;
  snprintf(err, errlen, "spool %s: built without liblmdb", path);
  return SLUICE_ENOTSUP;
}
void sluice__spool_close(spool *s) { (void)s; }
int sluice__spool_put(spool *s, job *j) {
  (void)s;
  (void)j;
  return SLUICE_ENOTSUP;
}
int sluice__spool_del(spool *s, uint64_t seq) {
  (void)s;
  (void)seq;
  return SLUICE_ENOTSUP;
}
int sluice__spool_next(spool *s, uint64_t after, int for_dest, job *out) {
  (void)s;
  (void)after;
  (void)for_dest;
  (void)out;
  return 0;
}
#endif

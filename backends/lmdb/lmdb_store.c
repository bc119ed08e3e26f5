/*
** LMDB store: durable state records, shared by the processes of one host.
**
** Layout.  One environment per directory with two named databases:
** "sluice.meta" holds one record that identifies the format (magic, record
** format, SLUICE_STATE_LAYOUT, the key-hashing secret), checked on every
** open so that files written by another layout are refused with
** SLUICE_EVERSION rather than misread; "sluice.state" maps a key to a
** 32-byte value: a 4-byte tag (format, layout), 4 reserved bytes, the expiry
** (int64 ns, from sluice_op_expiry) and the 16-byte algorithm record.
** LMDB keys stop at 511 bytes and sluice keys at 512, so a key longer than
** RAW_MAX is stored as its first bytes plus its SipHash-128 under the
** environment's secret, at a length no raw key has; the two spaces never
** meet.
**
** A decision is one write transaction: read the group's records (absent or
** past their expiry = zeroed), run sluice_op_step(), write back what
** changed, commit.  LMDB's writer lock serialises writers of all processes,
** which is what makes a group atomic and keeps two processes from
** over-admitting.  A step that changes nothing (a denial, a check of a live
** box) aborts instead of committing, so it costs no fsync.  PEEK and CHECK
** run in a read transaction first and reach the writer only if the step
** would change a record after all.  A batch (xApplyMany) runs many ops in
** one transaction and pays one commit.
**
** Writers first take a gate of our own (lmdb_gate.h), a robust mutex with
** a deadline, because LMDB's writer lock has none: a writer stopped inside
** a transaction costs the others SLUICE_ETIMEDOUT, not a hang.
**
** Expiry.  A record past its expiry is exactly a fresh one, so deleting it
** can never change a verdict.  Records are deleted lazily when a decision
** meets them expired and leaves them fresh, and by SLUICE_CTL_LMDB_SWEEP,
** which walks the key space in bounded slices from where the last call
** stopped.  Nothing is deleted before its expiry, and a full map is
** reported, never relieved by eviction: an abuser cannot flood keys to buy
** back a box.
**
** Failure.  Every LMDB failure aborts the transaction, so nothing of the
** decision is written, and is reported as a SLUICE_E* code with LMDB's
** message in the store's errstr and its code in backend_err.  MDB_MAP_FULL
** is first met by clearing stale reader slots (a dead process's reader pins
** old pages) and adopting a map size another process has grown to, then
** retried once; otherwise it is SLUICE_EFULL until the map is grown with
** SLUICE_CTL_LMDB_MAPSIZE.
**
** Processes, threads, fork.  LMDB forbids opening one environment twice in
** a process (closing either copy drops the other's fcntl locks), so opens of
** the same directory (by device and inode) share one environment through a
** small process-wide table; this is the only mutable global in the library
** and it exists to honour that rule.  MDB_NOTLS lets any thread run a read
** transaction.  mdb_env_set_mapsize needs no transaction running in the
** process, so each environment has a rwlock: transactions hold it shared,
** a resize holds it exclusive.  An environment must not be used across
** fork(); each store remembers its pid and refuses to run in a child.
**
** Deviations and choices:
**  a) Memory for the environment and LMDB's own allocations come from libc,
**     not the store's allocator: the environment can outlive the store that
**     opened it, and LMDB cannot be given an allocator.
**  b) The sweep cursor is per process; two processes sweeping share the work
**     only in the sense that a record removed by one is gone for both.
**  c) A lock file held exclusively by another process (not LMDB's own
**     transient first-open lock) is reported as SLUICE_EBUSY after a short
**     wait instead of blocking forever.
*/
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "algo/program_int.h"
#include "backends.h"
#include "sluice.h"
#include "lmdb_gate.h"
#include <sluice/sluice_lmdb.h>

#define REC_SIZE 32
#define REC_FORMAT 1
#define META_MAGIC "SLUICELM"
#define META_FORMAT 1
#define DEFAULT_MAPSIZE ((int64_t)64 << 20)
#define MAX_SWEEP ((int64_t)1 << 20)
#define LOCK_WAIT_MS 2000

enum { SYNC_FULL, SYNC_NOMETASYNC, SYNC_NOSYNC };
static const char *const sync_names[] = {"full", "nometasync", "nosync"};

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

static pthread_mutex_t env_table_mu = PTHREAD_MUTEX_INITIALIZER;
static sluice_lmdb_env *env_table;

/* ------------------------------------------------------------- errors --- */

static int map_err(int rc) {
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

static int lmdb_fail(sluice_store *s, int mdbrc, const char *what) {
  int rc = map_err(mdbrc);
  if (mdbrc == MDB_MAP_FULL)
    return sluice_store_seterr(s, rc, mdbrc,
                               "lmdb: %s: map full; grow it with "
                               "SLUICE_CTL_LMDB_MAPSIZE (nothing was written)",
                               what);
  return sluice_store_seterr(s, rc, mdbrc, "lmdb: %s: %s", what,
                             mdb_strerror(mdbrc));
}

/* ------------------------------------------------------------ records --- */

static void rec_encode(unsigned char *b, int64_t exp, const sluice_state *st) {
  memset(b, 0, REC_SIZE);
  b[0] = 's';
  b[1] = REC_FORMAT;
  b[2] = SLUICE_STATE_LAYOUT;
  memcpy(b + 8, &exp, sizeof exp);
  memcpy(b + 16, st, sizeof *st);
}

static int rec_decode(const MDB_val *v, int64_t *exp, sluice_state *st) {
  const unsigned char *b = v->mv_data;
  if (v->mv_size != REC_SIZE || b[0] != 's' || b[1] != REC_FORMAT ||
      b[2] != SLUICE_STATE_LAYOUT)
    return SLUICE_ECORRUPT;
  memcpy(exp, b + 8, sizeof *exp);
  memcpy(st, b + 16, sizeof *st);
  return SLUICE_OK;
}

/* The LMDB key of a sluice key; buf holds at least raw_max + 1 bytes. */
static void key_map(const sluice_lmdb_env *e, const sluice_key *k,
                    unsigned char *buf, MDB_val *out) {
  if (k->len <= e->raw_max) {
    out->mv_data = (void *)(uintptr_t)k->data;
    out->mv_size = k->len;
    return;
  }
  memcpy(buf, k->data, e->raw_max + 1 - 16);
  sluice_siphash128(e->secret, k->data, k->len, buf + e->raw_max + 1 - 16);
  out->mv_data = buf;
  out->mv_size = e->raw_max + 1;
}

/* -------------------------------------------------------- transactions --- */

static int fork_check(lmdb_store *s) {
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
static int adopt_mapsize(sluice_lmdb_env *e, size_t want) {
  int rc;
  pthread_rwlock_wrlock(&e->maplock);
  rc = mdb_env_set_mapsize(e->env, want);
  pthread_rwlock_unlock(&e->maplock);
  return rc;
}

/* Take the writer gate (lmdb_gate.h) within busy_ms. */
static int gate_lock_env(sluice_lmdb_env *e, sluice_store *base, int nowait) {
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
  return sluice_store_seterr(base, SLUICE_EBACKEND, rc,
                             "lmdb: writer gate: %s", strerror(rc));
}

static int gate_lock(lmdb_store *s, int nowait) {
  return gate_lock_env(s->e, &s->base, nowait);
}

static void gate_unlock(lmdb_store *s) {
  if (s->e->gate)
    pthread_mutex_unlock(&s->e->gate->mu);
}

/* Begin a transaction holding the map lock shared (and, for a write
** transaction, the writer gate).  On failure nothing is held and the
** store's errstr says why. */
static int txn_begin2(lmdb_store *s, unsigned flags, MDB_txn **txn,
                      int nowait) {
  sluice_lmdb_env *e = s->e;
  int tries, rc = MDB_SUCCESS, write = !(flags & MDB_RDONLY);
  for (tries = 0; tries < 4; tries++) {
    if (write) {
      int grc = gate_lock(s, nowait);
      if (grc != SLUICE_OK)
        return grc;
    }
    pthread_rwlock_rdlock(&e->maplock);
    rc = mdb_txn_begin(e->env, NULL, flags, txn);
    if (rc == MDB_SUCCESS)
      return SLUICE_OK;
    pthread_rwlock_unlock(&e->maplock);
    if (write)
      gate_unlock(s);
    if (rc == MDB_MAP_RESIZED) {
      if (adopt_mapsize(e, 0) != MDB_SUCCESS)
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
  return lmdb_fail(&s->base, rc, "begin transaction");
}

static int txn_begin(lmdb_store *s, unsigned flags, MDB_txn **txn) {
  return txn_begin2(s, flags, txn, 0);
}

static void txn_abort(lmdb_store *s, MDB_txn *txn) {
  mdb_txn_abort(txn);
  pthread_rwlock_unlock(&s->e->maplock);
  gate_unlock(s);
}

static void txn_abort_ro(lmdb_store *s, MDB_txn *txn) {
  mdb_txn_abort(txn);
  pthread_rwlock_unlock(&s->e->maplock);
}

static int txn_commit(lmdb_store *s, MDB_txn *txn) {
  int rc = mdb_txn_commit(txn);
  pthread_rwlock_unlock(&s->e->maplock);
  gate_unlock(s);
  return rc;
}

/* Adopt the map size recorded in the meta record if it is larger than
** ours (another process grew the map); 1 if the map grew. */
static int adopt_recorded(lmdb_store *s) {
  sluice_lmdb_env *e = s->e;
  MDB_envinfo info;
  MDB_txn *txn;
  MDB_val k = {6, (void *)"format"}, v;
  meta_rec m;
  int grown = 0;
  if (mdb_env_info(e->env, &info) != MDB_SUCCESS)
    return 0;
  if (txn_begin(s, MDB_RDONLY, &txn) != SLUICE_OK)
    return 0;
  if (mdb_get(txn, e->dbi_meta, &k, &v) == MDB_SUCCESS &&
      v.mv_size == sizeof m) {
    memcpy(&m, v.mv_data, sizeof m);
    grown = m.mapsize > (int64_t)info.me_mapsize;
  }
  txn_abort_ro(s, txn);
  return grown && adopt_mapsize(e, (size_t)m.mapsize) == MDB_SUCCESS;
}

/* After MDB_MAP_FULL: is there room to be had without growing the map?
** Stale readers pin pages that could be reused, and another process may
** have grown the map already. */
static int recover_room(lmdb_store *s) {
  int dead = 0;
  if (mdb_reader_check(s->e->env, &dead) == MDB_SUCCESS && dead > 0)
    return 1;
  return adopt_recorded(s);
}

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
    key_map(e, &job->keys[i], kbuf, &k);
    rc = mdb_get(txn, e->dbi_state, &k, &val);
    if (rc == MDB_NOTFOUND) {
      present[i] = 0;
      memset(&in[i], 0, sizeof in[i]);
      continue;
    }
    if (rc != MDB_SUCCESS) {
      *mdbrc = rc;
      return lmdb_fail(&s->base, rc, "read record");
    }
    if (rec_decode(&val, &oldexp[i], &old[i]) != SLUICE_OK)
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
    key_map(e, &job->keys[i], kbuf, &k);
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
      rec_encode(rec, exp, &out[i]);
      val.mv_data = rec;
      val.mv_size = REC_SIZE;
      rc = mdb_put(txn, e->dbi_state, &k, &val, 0);
    }
    if (rc != MDB_SUCCESS) {
      *mdbrc = rc;
      return lmdb_fail(&s->base, rc, "write record");
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
    rc = txn_begin2(s, 0, &txn, nowait);
    if (rc != SLUICE_OK)
      return rc;
    rc = apply_in_txn(s, txn, job, now, &dirty, &mdbrc, 0);
    if (rc != SLUICE_OK || !dirty) {
      txn_abort(s, txn);
    } else {
      mdbrc = txn_commit(s, txn);
      if (mdbrc != MDB_SUCCESS)
        rc = lmdb_fail(base, mdbrc, "commit");
    }
    if (mdbrc == MDB_MAP_FULL && attempt == 0 && recover_room(s))
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
  int dirty = 0, mdbrc = MDB_SUCCESS, rc = fork_check(s);
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
  rc = txn_begin(s, MDB_RDONLY, &txn);
  if (rc != SLUICE_OK)
    return rc;
  rc = apply_in_txn(s, txn, &dry, now, &dirty, &mdbrc, 1);
  txn_abort_ro(s, txn);
  if (rc == SLUICE_OK && dirty == 1)
    return apply_write(s, job, now, 0);
  /* Only expired records to drop: tidy up if the writer is free right now;
  ** the verdict stands either way. */
  if (rc != SLUICE_OK || dirty == 0 || apply_write(s, job, now, 1) != SLUICE_OK) {
    if (job->v)
      *job->v = dv;
    else
      *job->res = dres;
  }
  return rc;
}

static int lmdb_apply(sluice_store *base, const sluice_op *op, int64_t now,
                      sluice_verdict *v) {
  sluice__job job;
  sluice__job_op(&job, op, v);
  return lmdb_job(base, &job, now);
}

static int lmdb_run(sluice_store *base, const sluice_program *p, int64_t now,
                    sluice_program_result *res) {
  sluice__job job;
  sluice__job_prog(&job, p, res);
  return lmdb_job(base, &job, now);
}

/* A batch of jobs (job(i, &j) makes the i-th): one write transaction. */
static int lmdb_batch(sluice_store *base, int n, int64_t now, int *rcs,
                      void (*job)(const void *, int, sluice__job *),
                      const void *ctx) {
  lmdb_store *s = (lmdb_store *)base;
  int attempt, i, rc = fork_check(s);
  if (rc == SLUICE_OK && s->rdonly)
    rc = sluice_store_seterr(base, SLUICE_EPERM, 0,
                             "lmdb: store opened read-only");
  for (attempt = 0; rc == SLUICE_OK && attempt < 2; attempt++) {
    MDB_txn *txn;
    int dirty = 0, mdbrc = MDB_SUCCESS;
    rc = txn_begin(s, 0, &txn);
    if (rc != SLUICE_OK)
      break;
    for (i = 0; i < n && mdbrc == MDB_SUCCESS; i++) {
      sluice__job j;
      job(ctx, i, &j);
      rcs[i] = apply_in_txn(s, txn, &j, now, &dirty, &mdbrc, 0);
    }
    if (mdbrc != MDB_SUCCESS) {
      /* A poisoned transaction takes the whole batch with it: nothing of
      ** it was written, so every op reports the failure. */
      txn_abort(s, txn);
      rc = map_err(mdbrc);
    } else if (!dirty) {
      txn_abort(s, txn);
    } else {
      mdbrc = txn_commit(s, txn);
      if (mdbrc != MDB_SUCCESS)
        rc = lmdb_fail(base, mdbrc, "commit batch");
    }
    if (mdbrc == MDB_MAP_FULL && attempt == 0 && recover_room(s)) {
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

typedef struct batch_ops {
  const sluice_op *ops;
  sluice_verdict *vs;
} batch_ops;
typedef struct batch_progs {
  const sluice_program *ps;
  sluice_program_result *res;
} batch_progs;

static void op_job(const void *ctx, int i, sluice__job *j) {
  const batch_ops *b = ctx;
  sluice__job_op(j, &b->ops[i], &b->vs[i]);
}
static void prog_job(const void *ctx, int i, sluice__job *j) {
  const batch_progs *b = ctx;
  sluice__job_prog(j, &b->ps[i], &b->res[i]);
}

static int lmdb_apply_many(sluice_store *base, int n, const sluice_op *ops,
                           int64_t now, sluice_verdict *vs, int *rcs) {
  batch_ops b = {ops, vs};
  return lmdb_batch(base, n, now, rcs, op_job, &b);
}

static int lmdb_run_many(sluice_store *base, int n, const sluice_program *ps,
                         int64_t now, sluice_program_result *res, int *rcs) {
  batch_progs b = {ps, res};
  return lmdb_batch(base, n, now, rcs, prog_job, &b);
}

/* ------------------------------------------------------ get / delete --- */

static int lmdb_get(sluice_store *base, const sluice_key *key, int64_t now,
                    sluice_state *out, int64_t *expires) {
  lmdb_store *s = (lmdb_store *)base;
  unsigned char kbuf[SLUICE_KEY_MAX];
  MDB_txn *txn;
  MDB_val k, val;
  int64_t exp;
  sluice_state st;
  int rc = fork_check(s), mrc;
  if (rc != SLUICE_OK)
    return rc;
  rc = txn_begin(s, MDB_RDONLY, &txn);
  if (rc != SLUICE_OK)
    return rc;
  key_map(s->e, key, kbuf, &k);
  mrc = mdb_get(txn, s->e->dbi_state, &k, &val);
  if (mrc == MDB_NOTFOUND) {
    rc = SLUICE_ENOTFOUND;
  } else if (mrc != MDB_SUCCESS) {
    rc = lmdb_fail(base, mrc, "read record");
  } else if (rec_decode(&val, &exp, &st) != SLUICE_OK) {
    rc = sluice_store_seterr(base, SLUICE_ECORRUPT, 0,
                             "lmdb: record is not a layout-%d record",
                             SLUICE_STATE_LAYOUT);
  } else if (exp <= now) {
    rc = SLUICE_ENOTFOUND;
  } else {
    *out = st;
    *expires = exp;
  }
  txn_abort_ro(s, txn);
  return rc;
}

static int lmdb_delete(sluice_store *base, const sluice_key *key) {
  lmdb_store *s = (lmdb_store *)base;
  unsigned char kbuf[SLUICE_KEY_MAX];
  MDB_txn *txn;
  MDB_val k;
  int rc = fork_check(s), mrc;
  if (rc != SLUICE_OK)
    return rc;
  if (s->rdonly)
    return sluice_store_seterr(base, SLUICE_EPERM, 0,
                               "lmdb: store opened read-only");
  rc = txn_begin(s, 0, &txn);
  if (rc != SLUICE_OK)
    return rc;
  key_map(s->e, key, kbuf, &k);
  mrc = mdb_del(txn, s->e->dbi_state, &k, NULL);
  if (mrc == MDB_NOTFOUND) {
    txn_abort(s, txn);
    return SLUICE_ENOTFOUND;
  }
  if (mrc != MDB_SUCCESS) {
    txn_abort(s, txn);
    return lmdb_fail(base, mrc, "delete record");
  }
  mrc = txn_commit(s, txn);
  return mrc == MDB_SUCCESS ? SLUICE_OK : lmdb_fail(base, mrc, "commit");
}

/* ------------------------------------------------------------ control --- */

/* Raise the map size recorded in the meta record to `size` (never lower). */
static int write_meta_mapsize(lmdb_store *s, int64_t size) {
  MDB_txn *txn;
  MDB_dbi dbi = s->e->dbi_meta;
  MDB_val k = {6, (void *)"format"}, v;
  meta_rec m;
  int rc = txn_begin(s, 0, &txn), mrc;
  if (rc != SLUICE_OK)
    return rc;
  mrc = mdb_get(txn, dbi, &k, &v);
  if (mrc == MDB_SUCCESS && v.mv_size != sizeof m)
    mrc = MDB_CORRUPTED;
  if (mrc == MDB_SUCCESS) {
    memcpy(&m, v.mv_data, sizeof m);
    if (m.mapsize >= size) {
      txn_abort(s, txn);
      return SLUICE_OK;
    }
    m.mapsize = size;
    v.mv_data = &m;
    v.mv_size = sizeof m;
    mrc = mdb_put(txn, dbi, &k, &v, 0);
  }
  if (mrc != MDB_SUCCESS) {
    txn_abort(s, txn);
    return lmdb_fail(&s->base, mrc, "record map size");
  }
  mrc = txn_commit(s, txn);
  return mrc == MDB_SUCCESS ? SLUICE_OK
                            : lmdb_fail(&s->base, mrc, "record map size");
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
      return lmdb_fail(&s->base, mrc, "read map size");
    if (*arg > (int64_t)info.me_mapsize) {
      mrc = adopt_mapsize(s->e, (size_t)*arg);
      if (mrc != MDB_SUCCESS)
        return lmdb_fail(&s->base, mrc, "set map size");
    }
  } else {
    (void)adopt_recorded(s);
  }
  mdb_env_info(s->e->env, &info);
  /* LMDB publishes a new size to other processes only with a commit that
  ** writes pages, so record it in the meta record: that commit carries it,
  ** and recover_room() reads it back in processes that run out of room. */
  if (*arg != 0) {
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
  rc = txn_begin(s, 0, &txn);
  if (rc != SLUICE_OK)
    return rc;
  mrc = mdb_cursor_open(txn, e->dbi_state, &cur);
  if (mrc != MDB_SUCCESS) {
    txn_abort(s, txn);
    return lmdb_fail(&s->base, mrc, "sweep");
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
    if (rec_decode(&v, &exp, &st) == SLUICE_OK && exp <= sw->now_ns) {
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
    txn_abort(s, txn);
    sw->removed = 0;
    return lmdb_fail(&s->base, mrc, "sweep");
  }
  if (sw->removed == 0) {
    txn_abort(s, txn);
    return SLUICE_OK;
  }
  mrc = txn_commit(s, txn);
  if (mrc != MDB_SUCCESS) {
    sw->removed = 0;
    return lmdb_fail(&s->base, mrc, "commit sweep");
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
  rc = txn_begin(s, MDB_RDONLY, &txn);
  if (rc != SLUICE_OK)
    return rc;
  mrc = mdb_stat(txn, s->e->dbi_state, &ms);
  if (mrc == MDB_SUCCESS)
    mrc = mdb_env_info(s->e->env, &info);
  txn_abort_ro(s, txn);
  if (mrc != MDB_SUCCESS)
    return lmdb_fail(&s->base, mrc, "stats");
  st->mapsize = (int64_t)info.me_mapsize;
  st->page_size = ms.ms_psize;
  st->used_bytes = (int64_t)(info.me_last_pgno + 1) * ms.ms_psize;
  st->records = (int64_t)ms.ms_entries;
  st->max_readers = info.me_maxreaders;
  /* me_numreaders is a high-water mark; count the slots actually held. */
  mdb_reader_list(s->e->env, count_reader, &st->readers);
  return SLUICE_OK;
}

static int lmdb_control(sluice_store *base, int op, void *arg) {
  lmdb_store *s = (lmdb_store *)base;
  int rc, mrc;
  if (op < SLUICE_CTL_LMDB_MAPSIZE || op > SLUICE_CTL_LMDB_SYNC)
    return SLUICE_ENOTFOUND;
  rc = fork_check(s);
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
                              : lmdb_fail(base, mrc, "reader check");
  default:
    if (s->rdonly)
      return SLUICE_OK;
    mrc = mdb_env_sync(s->e->env, 1);
    return mrc == MDB_SUCCESS ? SLUICE_OK : lmdb_fail(base, mrc, "sync");
  }
}

static unsigned lmdb_caps(sluice_store *s) {
  (void)s;
  return SLUICE_CAP_THREADSAFE | SLUICE_CAP_CROSS_PROCESS | SLUICE_CAP_DURABLE;
}

/* ------------------------------------------------------- open / close --- */

static void env_destroy(sluice_lmdb_env *e) {
  if (e->env)
    mdb_env_close(e->env);
  if (e->gate)
    munmap(e->gate, sizeof *e->gate);
  pthread_rwlock_destroy(&e->maplock);
  pthread_mutex_destroy(&e->sweep_mu);
  free(e);
}

static int lmdb_close(sluice_store *base) {
  lmdb_store *s = (lmdb_store *)base;
  sluice_lmdb_env **pp;
  if (!s->e)
    return SLUICE_OK;
  pthread_mutex_lock(&env_table_mu);
  if (--s->e->refs == 0) {
    for (pp = &env_table; *pp; pp = &(*pp)->next)
      if (*pp == s->e) {
        *pp = s->e->next;
        break;
      }
    env_destroy(s->e);
  }
  pthread_mutex_unlock(&env_table_mu);
  s->e = NULL;
  return SLUICE_OK;
}

static const sluice_store_methods lmdb_methods = {
    3,               /* iVersion */
    lmdb_close,      /* xClose */
    lmdb_apply,      /* xApply: one write transaction */
    lmdb_get,        /* xGet: one read transaction */
    lmdb_delete,     /* xDelete */
    lmdb_control,    /* xControl: SLUICE_CTL_LMDB_* */
    lmdb_caps,       /* xCapabilities */
    lmdb_apply_many, /* xApplyMany: one write transaction per batch */
    lmdb_run,        /* xRun: a whole program in one write transaction */
    lmdb_run_many,   /* xRunMany: one write transaction per batch */
};

typedef struct open_args {
  char path[PATH_MAX];
  int64_t mapsize;
  int64_t maxreaders;
  int64_t busy_ms;
  int sync;
  unsigned mode;
} open_args;

/* The parameters the core lets through (sluice_backend.azParams): a
** misspelt "synk=nosync" never reaches parse_args, where silently ignored
** it would be a durability surprise. */
static const char *const lmdb_params[] = {
    "path", "mapsize", "sync", "maxreaders", "mode", "busy_timeout_ms", NULL};

static int parse_args(sluice_store *s, const char *uri, open_args *a) {
  const char *v;
  size_t n, i;
  int rc;
  if (sluice_uri_param(uri, "path", &v, &n) != SLUICE_OK || n == 0)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "lmdb: the path=DIR parameter is required");
  if (n >= sizeof a->path)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0, "lmdb: path too long");
  memcpy(a->path, v, n);
  a->path[n] = '\0';
  rc = sluice_uri_int(uri, "mapsize", DEFAULT_MAPSIZE, &a->mapsize);
  if (rc != SLUICE_OK || a->mapsize < 1)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "lmdb: mapsize must be a positive size such "
                               "as 64m");
  rc = sluice_uri_int(uri, "maxreaders", 126, &a->maxreaders);
  if (rc != SLUICE_OK || a->maxreaders < 1 || a->maxreaders > 65536)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "lmdb: maxreaders must be 1..65536");
  rc = sluice_uri_int(uri, "busy_timeout_ms", 5000, &a->busy_ms);
  if (rc != SLUICE_OK || a->busy_ms > 24 * 3600 * 1000)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "lmdb: busy_timeout_ms must be 0..86400000");
  a->sync = SYNC_FULL;
  if (sluice_uri_param(uri, "sync", &v, &n) == SLUICE_OK) {
    for (i = 0; i < 3; i++)
      if (strlen(sync_names[i]) == n && memcmp(sync_names[i], v, n) == 0)
        break;
    if (i == 3)
      return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                                 "lmdb: sync must be full, nometasync or "
                                 "nosync");
    a->sync = (int)i;
  }
  a->mode = 0600;
  if (sluice_uri_param(uri, "mode", &v, &n) == SLUICE_OK) {
    unsigned m = 0;
    for (i = 0; i < n && v[i] >= '0' && v[i] <= '7'; i++)
      m = m * 8 + (unsigned)(v[i] - '0');
    if (n == 0 || i != n || n > 4 || m > 0777)
      return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                                 "lmdb: mode must be octal permissions such "
                                 "as 0660");
    a->mode = m;
  }
  return SLUICE_OK;
}

/* LMDB takes the lock file's exclusive lock only briefly while the first
** opener sets it up; if someone holds it longer, mdb_env_open would block
** forever.  Wait a little, then say who holds it. */
static int probe_lock(sluice_store *s, const char *dir) {
  char lp[PATH_MAX + 16];
  struct flock fl;
  int fd, waited = 0, rc = SLUICE_OK;
  snprintf(lp, sizeof lp, "%s/lock.mdb", dir);
  fd = open(lp, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return SLUICE_OK; /* absent or unreadable: mdb_env_open will say */
  for (;;) {
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_RDLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 0;
    fl.l_len = 1;
    if (fcntl(fd, F_GETLK, &fl) != 0 || fl.l_type != F_WRLCK)
      break;
    if (waited >= LOCK_WAIT_MS) {
      rc = sluice_store_seterr(s, SLUICE_EBUSY, EAGAIN,
                               "lmdb: %s is locked exclusively by process "
                               "%ld",
                               lp, (long)fl.l_pid);
      break;
    }
    {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
      waited += 10;
    }
  }
  close(fd);
  return rc;
}

/* Map DIR/sluice.lock, creating it complete under a temporary name and
** linking it into place if it does not exist yet (lmdb_gate.h). */
static int gate_open(sluice_store *s, sluice_lmdb_env *e, const char *dir,
                     unsigned mode) {
  char gp[PATH_MAX + 32], tp[PATH_MAX + 64];
  int attempt, fd;
  snprintf(gp, sizeof gp, "%s/" SLUICE_LMDB_GATE_FILE, dir);
  for (attempt = 0; attempt < 3; attempt++) {
    sluice_lmdb_gate *g;
    struct stat sb;
    fd = open(gp, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)sizeof *g) {
        close(fd);
        return sluice_store_seterr(s, SLUICE_ECORRUPT, 0,
                                   "lmdb: %s is truncated", gp);
      }
      g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (g == MAP_FAILED)
        return sluice_store_seterr(s, map_err(errno), errno,
                                   "lmdb: map %s: %s", gp, strerror(errno));
      if (memcmp(g->magic, SLUICE_LMDB_GATE_MAGIC, 8) != 0 ||
          g->version != 1 || g->mutex_size != sizeof(pthread_mutex_t)) {
        munmap(g, sizeof *g);
        return sluice_store_seterr(s, SLUICE_EVERSION, 0,
                                   "lmdb: %s was made by another sluice "
                                   "version or C library",
                                   gp);
      }
      e->gate = g;
      return SLUICE_OK;
    }
    if (errno != ENOENT)
      return sluice_store_seterr(s, map_err(errno), errno, "lmdb: open %s: %s",
                                 gp, strerror(errno));
    snprintf(tp, sizeof tp, "%s/.sluice.lock.%ld", dir, (long)getpid());
    unlink(tp); /* a leftover of a dead process with our pid */
    fd = open(tp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
      return sluice_store_seterr(s, map_err(errno), errno,
                                 "lmdb: create %s: %s", tp, strerror(errno));
    if (ftruncate(fd, (off_t)sizeof *g) != 0 ||
        (g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                  0)) == MAP_FAILED) {
      int err = errno;
      close(fd);
      unlink(tp);
      return sluice_store_seterr(s, map_err(err), err, "lmdb: create %s: %s",
                                 tp, strerror(err));
    }
    close(fd);
    {
      pthread_mutexattr_t ma;
      pthread_mutexattr_init(&ma);
      pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
      pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
      pthread_mutex_init(&g->mu, &ma);
      pthread_mutexattr_destroy(&ma);
    }
    g->version = 1;
    g->mutex_size = sizeof(pthread_mutex_t);
    memcpy(g->magic, SLUICE_LMDB_GATE_MAGIC, 8);
    munmap(g, sizeof *g);
    /* link() fails if another process won the race: use theirs. */
    if (link(tp, gp) != 0 && errno != EEXIST) {
      int err = errno;
      unlink(tp);
      return sluice_store_seterr(s, map_err(err), err, "lmdb: create %s: %s",
                                 gp, strerror(err));
    }
    unlink(tp);
  }
  return sluice_store_seterr(s, SLUICE_EBACKEND, 0,
                             "lmdb: %s keeps disappearing", gp);
}

/* Open the state and meta databases and check (or write) the identity. */
static int env_setup_txn(sluice_store *s, sluice_lmdb_env *e, int create,
                         const char *path, int64_t *grown);

/* The setup transaction goes through the gate like any writer. */
static int env_setup(sluice_store *s, sluice_lmdb_env *e, int create,
                     const char *path, int64_t *grown) {
  int rc;
  if (!e->rdonly && (rc = gate_lock_env(e, s, 0)) != SLUICE_OK)
    return rc;
  rc = env_setup_txn(s, e, create, path, grown);
  if (e->gate)
    pthread_mutex_unlock(&e->gate->mu);
  return rc;
}

static int env_setup_txn(sluice_store *s, sluice_lmdb_env *e, int create,
                         const char *path, int64_t *grown) {
  MDB_txn *txn;
  MDB_dbi meta;
  MDB_val k = {6, (void *)"format"}, v;
  meta_rec m;
  unsigned dbflags = create ? MDB_CREATE : 0;
  int mrc, rc = SLUICE_OK;
  mrc = mdb_txn_begin(e->env, NULL, e->rdonly ? MDB_RDONLY : 0, &txn);
  if (mrc != MDB_SUCCESS)
    return lmdb_fail(s, mrc, "begin setup transaction");
  mrc = mdb_dbi_open(txn, "sluice.meta", dbflags, &meta);
  if (mrc == MDB_SUCCESS)
    mrc = mdb_get(txn, meta, &k, &v);
  if (mrc == MDB_NOTFOUND && create) {
    MDB_stat st;
    MDB_dbi main_dbi;
    /* A fresh environment has nothing but our meta database in its main
    ** database; anything else is somebody else's LMDB file. */
    if (mdb_dbi_open(txn, NULL, 0, &main_dbi) == MDB_SUCCESS &&
        mdb_stat(txn, main_dbi, &st) == MDB_SUCCESS && st.ms_entries > 1) {
      mdb_txn_abort(txn);
      return sluice_store_seterr(s, SLUICE_EVERSION, 0,
                                 "lmdb: %s holds an LMDB environment that is "
                                 "not a sluice store",
                                 path);
    }
    memset(&m, 0, sizeof m);
    memcpy(m.magic, META_MAGIC, 8);
    m.format = META_FORMAT;
    m.layout = SLUICE_STATE_LAYOUT;
    m.rec_size = REC_SIZE;
    m.raw_max = (uint32_t)e->raw_max;
    rc = sluice_random_bytes(m.secret, sizeof m.secret);
    if (rc != SLUICE_OK) {
      mdb_txn_abort(txn);
      return sluice_store_seterr(s, rc, 0, "lmdb: no random source");
    }
    v.mv_data = &m;
    v.mv_size = sizeof m;
    mrc = mdb_put(txn, meta, &k, &v, 0);
  } else if (mrc == MDB_SUCCESS) {
    if (v.mv_size != sizeof m) {
      mdb_txn_abort(txn);
      return sluice_store_seterr(s, SLUICE_EVERSION, 0,
                                 "lmdb: %s: meta record of %zu bytes, not a "
                                 "format-%d sluice store",
                                 path, v.mv_size, META_FORMAT);
    }
    memcpy(&m, v.mv_data, sizeof m);
    if (memcmp(m.magic, META_MAGIC, 8) != 0 || m.format != META_FORMAT ||
        m.rec_size != REC_SIZE) {
      rc = sluice_store_seterr(s, SLUICE_EVERSION, 0,
                               "lmdb: %s: not a format-%d sluice store", path,
                               META_FORMAT);
    } else if (m.layout != SLUICE_STATE_LAYOUT) {
      rc = sluice_store_seterr(s, SLUICE_EVERSION, 0,
                               "lmdb: %s was written with state layout %u, "
                               "this library uses layout %d",
                               path, m.layout, SLUICE_STATE_LAYOUT);
    } else if (m.raw_max != e->raw_max) {
      rc = sluice_store_seterr(s, SLUICE_EVERSION, 0,
                               "lmdb: %s was written by an LMDB with another "
                               "maximum key size",
                               path);
    }
    if (rc != SLUICE_OK) {
      mdb_txn_abort(txn);
      return rc;
    }
  } else if (mrc == MDB_NOTFOUND) {
    mdb_txn_abort(txn);
    return sluice_store_seterr(s, SLUICE_ENOTFOUND, 0,
                               "lmdb: %s holds no sluice store (open it "
                               "read-write with SLUICE_OPEN_CREATE first)",
                               path);
  }
  if (mrc == MDB_SUCCESS)
    mrc = mdb_dbi_open(txn, "sluice.state", dbflags, &e->dbi_state);
  if (mrc != MDB_SUCCESS) {
    mdb_txn_abort(txn);
    return lmdb_fail(s, mrc, "open databases");
  }
  memcpy(e->secret, m.secret, sizeof e->secret);
  e->dbi_meta = meta;
  *grown = m.mapsize;
  {
    /* A process that opens with a larger mapsize= tells the others, which
    ** adopt it when they run out of room (recover_room). */
    MDB_envinfo info;
    if (!e->rdonly && mdb_env_info(e->env, &info) == MDB_SUCCESS &&
        (int64_t)info.me_mapsize > m.mapsize) {
      m.mapsize = (int64_t)info.me_mapsize;
      v.mv_data = &m;
      v.mv_size = sizeof m;
      mrc = mdb_put(txn, meta, &k, &v, 0);
      if (mrc != MDB_SUCCESS) {
        mdb_txn_abort(txn);
        return lmdb_fail(s, mrc, "record map size");
      }
    }
  }
  /* Committed even when read-only: that is what makes the database handles
  ** outlive this transaction. */
  mrc = mdb_txn_commit(txn);
  if (mrc != MDB_SUCCESS)
    return lmdb_fail(s, mrc, "commit setup transaction");
  return SLUICE_OK;
}

static int env_open(sluice_store *s, const open_args *a, int create,
                    int rdonly, const struct stat *dst, sluice_lmdb_env **out) {
  static const unsigned sync_flags[] = {0, MDB_NOMETASYNC, MDB_NOSYNC};
  sluice_lmdb_env *e;
  unsigned flags = MDB_NOTLS | sync_flags[a->sync] | (rdonly ? MDB_RDONLY : 0);
  int mrc, rc, dead = 0;
  int64_t grown = 0;

  *out = NULL;
  rc = probe_lock(s, a->path);
  if (rc != SLUICE_OK)
    return rc;
  e = calloc(1, sizeof *e);
  if (!e)
    return sluice_store_seterr(s, SLUICE_ENOMEM, 0, "lmdb: out of memory");
  {
    /* Writer preference: a resize must not starve behind a steady stream
    ** of decisions, each of which holds the lock shared. */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&e->maplock, &ra);
    pthread_rwlockattr_destroy(&ra);
  }
  pthread_mutex_init(&e->sweep_mu, NULL);
  e->dev = dst->st_dev;
  e->ino = dst->st_ino;
  e->pid = getpid();
  e->sync = a->sync;
  e->rdonly = rdonly;
  mrc = mdb_env_create(&e->env);
  if (mrc != MDB_SUCCESS) {
    e->env = NULL;
    env_destroy(e);
    return lmdb_fail(s, mrc, "create environment");
  }
  mrc = mdb_env_set_maxdbs(e->env, 4);
  if (mrc == MDB_SUCCESS)
    mrc = mdb_env_set_maxreaders(e->env, (unsigned)a->maxreaders);
  if (mrc == MDB_SUCCESS)
    mrc = mdb_env_set_mapsize(e->env, (size_t)a->mapsize);
  if (mrc != MDB_SUCCESS) {
    env_destroy(e);
    return lmdb_fail(s, mrc, "configure environment");
  }
  mrc = mdb_env_open(e->env, a->path, flags, (mdb_mode_t)a->mode);
  if (mrc != MDB_SUCCESS) {
    env_destroy(e);
    if (mrc == MDB_INVALID)
      return sluice_store_seterr(s, SLUICE_ECORRUPT, mrc,
                                 "lmdb: %s/data.mdb is not an LMDB file "
                                 "(corrupt or foreign); left untouched",
                                 a->path);
    return sluice_store_seterr(s, map_err(mrc), mrc, "lmdb: open %s: %s",
                               a->path, mdb_strerror(mrc));
  }
  /* Clear reader slots of processes that died holding a read transaction:
  ** they pin pages and would otherwise grow the file until the map fills. */
  (void)mdb_reader_check(e->env, &dead);
  e->raw_max = (size_t)mdb_env_get_maxkeysize(e->env) - 16;
  e->busy_ms = a->busy_ms;
  if (!rdonly && (rc = gate_open(s, e, a->path, a->mode)) != SLUICE_OK) {
    env_destroy(e);
    return rc;
  }
  rc = env_setup(s, e, create, a->path, &grown);
  if (rc != SLUICE_OK) {
    env_destroy(e);
    return rc;
  }
  {
    MDB_envinfo info;
    /* A map grown with SLUICE_CTL_LMDB_MAPSIZE stays grown: a restart with
    ** the old, smaller mapsize= in its configuration must not bring back
    ** the MDB_MAP_FULL the operator already fixed. */
    if (grown > 0 && mdb_env_info(e->env, &info) == MDB_SUCCESS &&
        (int64_t)info.me_mapsize < grown)
      (void)mdb_env_set_mapsize(e->env, (size_t)grown);
  }
  *out = e;
  return SLUICE_OK;
}

static int lmdb_open(const sluice_backend *b, const char *uri,
                     const sluice_store_config *cfg, sluice_store *base) {
  lmdb_store *s = (lmdb_store *)base;
  open_args *a;
  struct stat dst;
  sluice_lmdb_env *e;
  int create, rdonly, rc;
  pid_t pid = getpid();
  (void)b;
  base->pMethods = &lmdb_methods;
  if (cfg->flags & ~(unsigned)(SLUICE_OPEN_CREATE | SLUICE_OPEN_READONLY |
                               SLUICE_OPEN_TESTCLOCK))
    return sluice_store_seterr(base, SLUICE_EINVAL, 0,
                               "lmdb: unknown open flags 0x%x", cfg->flags);
  rdonly = (cfg->flags & SLUICE_OPEN_READONLY) != 0;
  create = (cfg->flags & SLUICE_OPEN_CREATE) != 0 && !rdonly;
  a = sluice_store_malloc(base, sizeof *a);
  if (!a)
    return sluice_store_seterr(base, SLUICE_ENOMEM, 0, "lmdb: out of memory");
  rc = parse_args(base, uri, a);
  if (rc != SLUICE_OK)
    goto done;
  if (stat(a->path, &dst) != 0) {
    if (errno != ENOENT || !create) {
      rc = sluice_store_seterr(base, map_err(errno), errno,
                               "lmdb: %s: %s%s", a->path, strerror(errno),
                               errno == ENOENT
                                   ? " (open with SLUICE_OPEN_CREATE to "
                                     "create it)"
                                   : "");
      goto done;
    }
    /* Whoever may use the files may search the directory. */
    mode_t dmode = 0700;
    int sh;
    for (sh = 0; sh <= 3; sh += 3)
      if ((a->mode >> sh) & 7)
        dmode |= (mode_t)((((a->mode >> sh) & 7) | 1) << sh);
    if (mkdir(a->path, dmode) != 0 ||
        stat(a->path, &dst) != 0) {
      rc = sluice_store_seterr(base, map_err(errno), errno,
                               "lmdb: cannot create directory %s: %s",
                               a->path, strerror(errno));
      goto done;
    }
  }
  if (!S_ISDIR(dst.st_mode)) {
    rc = sluice_store_seterr(base, SLUICE_EINVAL, ENOTDIR,
                             "lmdb: %s is not a directory", a->path);
    goto done;
  }
  if (!create) {
    char dp[PATH_MAX + 16];
    snprintf(dp, sizeof dp, "%s/data.mdb", a->path);
    if (access(dp, F_OK) != 0) {
      rc = sluice_store_seterr(base, SLUICE_ENOTFOUND, errno,
                               "lmdb: no environment in %s (open with "
                               "SLUICE_OPEN_CREATE to create one)",
                               a->path);
      goto done;
    }
  }
  pthread_mutex_lock(&env_table_mu);
  for (e = env_table; e; e = e->next)
    if (e->dev == dst.st_dev && e->ino == dst.st_ino && e->pid == pid)
      break;
  if (e) {
    if (e->sync != a->sync) {
      rc = sluice_store_seterr(base, SLUICE_EBUSY, 0,
                               "lmdb: %s is already open in this process "
                               "with sync=%s",
                               a->path, sync_names[e->sync]);
    } else if (e->rdonly && !rdonly) {
      rc = sluice_store_seterr(base, SLUICE_EBUSY, 0,
                               "lmdb: %s is already open read-only in this "
                               "process",
                               a->path);
    } else {
      MDB_envinfo info;
      e->refs++;
      if (mdb_env_info(e->env, &info) == MDB_SUCCESS &&
          (int64_t)info.me_mapsize < a->mapsize && !e->rdonly)
        (void)adopt_mapsize(e, (size_t)a->mapsize);
    }
  } else {
    rc = env_open(base, a, create, rdonly, &dst, &e);
    if (rc == SLUICE_OK) {
      e->refs = 1;
      e->next = env_table;
      env_table = e;
    }
  }
  pthread_mutex_unlock(&env_table_mu);
  if (rc == SLUICE_OK) {
    s->e = e;
    s->pid = pid;
    s->rdonly = rdonly;
  }
done:
  sluice_store_free(base, a, sizeof *a);
  return rc;
}

const sluice_backend sluice__backend_lmdb = {2, (int)sizeof(lmdb_store),
                                             "lmdb", NULL, lmdb_open,
                                             lmdb_params};

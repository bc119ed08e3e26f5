/*
** LMDB store: durable state records, shared by the processes of one host.
**
** Layout.  One environment per directory with two named databases:
** "sluice.meta" holds one record that identifies the format (magic, record
** format, SLUICE_STATE_LAYOUT, the key-hashing secret), checked on every
** open so that files written by another layout are refused with
** SLUICE_EVERSION rather than misread; "sluice.state" maps a key to a
** 32-byte value: a 4-byte tag (format, layout), 4 reserved bytes, the expiry
** (int64 ns, from sluice__op_expiry) and the 16-byte algorithm record.
** LMDB keys stop at 511 bytes and sluice keys at 512, so a key longer than
** RAW_MAX is stored as its first bytes plus its SipHash-128 under the
** environment's secret, at a length no raw key has; the two spaces never
** meet.
**
** A decision is one write transaction: read the group's records (absent or
** past their expiry = zeroed), run the program, write back what
** changed, commit.  LMDB's writer lock serialises writers of all processes,
** which is what makes a group atomic and keeps two processes from
** over-admitting.  A step that changes nothing (a denial, a check of a live
** box) aborts instead of committing, so it costs no fsync.  PEEK and CHECK
** run in a read transaction first and reach the writer only if the step
** would change a record after all.  A batch (xRun of several programs)
** runs in one transaction and pays one commit.
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
** message as the store's error detail (sluice_store_seterr) and its code as
** the backend code.  MDB_MAP_FULL
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
#include "lmdb_int.h"
#include "random.h"
#include "store.h"

static const char *const sync_names[] = {"full", "nometasync", "nosync"};

static pthread_mutex_t env_table_mu = PTHREAD_MUTEX_INITIALIZER;
static sluice_lmdb_env *env_table;

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
    SLUICE_BACKEND_VERSION,
    lmdb_close,
    sluice__lmdb_run, /* xRun: one write transaction per call */
    sluice__lmdb_get,
    sluice__lmdb_delete,
    sluice__lmdb_control,
    sluice__lmdb_caps,
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
  rc = sluice__uri_int(uri, "mapsize", DEFAULT_MAPSIZE, &a->mapsize);
  if (rc != SLUICE_OK || a->mapsize < 1)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "lmdb: mapsize must be a positive size such "
                               "as 64m");
  rc = sluice__uri_int(uri, "maxreaders", 126, &a->maxreaders);
  if (rc != SLUICE_OK || a->maxreaders < 1 || a->maxreaders > 65536)
    return sluice_store_seterr(s, SLUICE_EINVAL, 0,
                               "lmdb: maxreaders must be 1..65536");
  rc = sluice__uri_int(uri, "busy_timeout_ms", 5000, &a->busy_ms);
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
        return sluice_store_seterr(s, sluice__lmdb_err(errno), errno,
                                   "lmdb: map %s: %s", gp, strerror(errno));
      if (memcmp(g->magic, SLUICE_LMDB_GATE_MAGIC, 8) != 0 || g->version != 1 ||
          g->mutex_size != sizeof(pthread_mutex_t)) {
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
      return sluice_store_seterr(s, sluice__lmdb_err(errno), errno,
                                 "lmdb: open %s: %s", gp, strerror(errno));
    snprintf(tp, sizeof tp, "%s/.sluice.lock.%ld", dir, (long)getpid());
    unlink(tp); /* a leftover of a dead process with our pid */
    fd = open(tp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
      return sluice_store_seterr(s, sluice__lmdb_err(errno), errno,
                                 "lmdb: create %s: %s", tp, strerror(errno));
    if (ftruncate(fd, (off_t)sizeof *g) != 0 ||
        (g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                  0)) == MAP_FAILED) {
      int err = errno;
      close(fd);
      unlink(tp);
      return sluice_store_seterr(s, sluice__lmdb_err(err), err,
                                 "lmdb: create %s: %s", tp, strerror(err));
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
      return sluice_store_seterr(s, sluice__lmdb_err(err), err,
                                 "lmdb: create %s: %s", gp, strerror(err));
    }
    unlink(tp);
  }
  return sluice_store_seterr(s, SLUICE_EBACKEND, 0,
                             "lmdb: %s keeps disappearing", gp);
}

/* Open the state and meta databases and check (or write) the identity. */
static int env_setup_txn(sluice_store *s, sluice_lmdb_env *e, int create,
                         const char *path, int64_t *grown) {
  MDB_txn *txn;
  MDB_dbi meta;
  MDB_val k = META_KEY, v;
  meta_rec m;
  unsigned dbflags = create ? MDB_CREATE : 0;
  int mrc, rc = SLUICE_OK;
  mrc = mdb_txn_begin(e->env, NULL, e->rdonly ? MDB_RDONLY : 0, &txn);
  if (mrc != MDB_SUCCESS)
    return sluice__lmdb_fail(s, mrc, "begin setup transaction");
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
    rc = sluice__random_bytes(m.secret, sizeof m.secret);
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
    return sluice__lmdb_fail(s, mrc, "open databases");
  }
  memcpy(e->secret, m.secret, sizeof e->secret);
  e->dbi_meta = meta;
  *grown = m.mapsize;
  {
    /* A process that opens with a larger mapsize= tells the others, which
    ** adopt it when they run out of room (sluice__lmdb_recover_room). */
    MDB_envinfo info;
    if (!e->rdonly && mdb_env_info(e->env, &info) == MDB_SUCCESS &&
        (mrc = sluice__lmdb_meta_mapsize(txn, meta, &m,
                                         (int64_t)info.me_mapsize)) !=
            MDB_SUCCESS) {
      mdb_txn_abort(txn);
      return sluice__lmdb_fail(s, mrc, "record map size");
    }
  }
  /* Committed even when read-only: that is what makes the database handles
  ** outlive this transaction. */
  mrc = mdb_txn_commit(txn);
  if (mrc != MDB_SUCCESS)
    return sluice__lmdb_fail(s, mrc, "commit setup transaction");
  return SLUICE_OK;
}

/* The setup transaction goes through the gate like any writer. */
static int env_setup(sluice_store *s, sluice_lmdb_env *e, int create,
                     const char *path, int64_t *grown) {
  int rc;
  if (!e->rdonly && (rc = sluice__lmdb_gate_lock(e, s, 0)) != SLUICE_OK)
    return rc;
  rc = env_setup_txn(s, e, create, path, grown);
  if (e->gate)
    pthread_mutex_unlock(&e->gate->mu);
  return rc;
}

/* LMDB reads its pages through a mapping of data.mdb and trusts the meta
** page's last page number: a data file cut short (a copy that stopped, a
** full disk during a restore, a truncate) opens without complaint, and the
** first read past its end raises SIGBUS in the caller.  Every page up to
** the last one a committed transaction used was written before that meta
** page, and the file never shrinks, so a shorter file is corrupt. */
static int check_length(sluice_store *s, MDB_env *env, const char *path) {
  MDB_envinfo info;
  MDB_stat st;
  mdb_filehandle_t fd;
  struct stat sb;
  uint64_t need;
  if (mdb_env_info(env, &info) != MDB_SUCCESS ||
      mdb_env_stat(env, &st) != MDB_SUCCESS ||
      mdb_env_get_fd(env, &fd) != MDB_SUCCESS || fstat(fd, &sb) != 0)
    return SLUICE_OK; /* nothing to compare: the first read says */
  need = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
  if ((uint64_t)sb.st_size >= need)
    return SLUICE_OK;
  return sluice_store_seterr(s, SLUICE_ECORRUPT, 0,
                             "lmdb: %s/data.mdb is truncated (%lld of %llu "
                             "bytes); left untouched",
                             path, (long long)sb.st_size,
                             (unsigned long long)need);
}

static int env_open(sluice_store *s, const open_args *a, int create, int rdonly,
                    const struct stat *dst, sluice_lmdb_env **out) {
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
    return sluice__lmdb_fail(s, mrc, "create environment");
  }
  mrc = mdb_env_set_maxdbs(e->env, 4);
  if (mrc == MDB_SUCCESS)
    mrc = mdb_env_set_maxreaders(e->env, (unsigned)a->maxreaders);
  if (mrc == MDB_SUCCESS)
    mrc = mdb_env_set_mapsize(e->env, (size_t)a->mapsize);
  if (mrc != MDB_SUCCESS) {
    env_destroy(e);
    return sluice__lmdb_fail(s, mrc, "configure environment");
  }
  mrc = mdb_env_open(e->env, a->path, flags, (mdb_mode_t)a->mode);
  if (mrc != MDB_SUCCESS) {
    env_destroy(e);
    if (mrc == MDB_INVALID)
      return sluice_store_seterr(s, SLUICE_ECORRUPT, mrc,
                                 "lmdb: %s/data.mdb is not an LMDB file "
                                 "(corrupt or foreign); left untouched",
                                 a->path);
    return sluice_store_seterr(s, sluice__lmdb_err(mrc), mrc,
                               "lmdb: open %s: %s", a->path, mdb_strerror(mrc));
  }
  rc = check_length(s, e->env, a->path);
  if (rc != SLUICE_OK) {
    env_destroy(e);
    return rc;
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
  a = sluice__store_malloc(base, sizeof *a);
  if (!a)
    return sluice_store_seterr(base, SLUICE_ENOMEM, 0, "lmdb: out of memory");
  rc = parse_args(base, uri, a);
  if (rc != SLUICE_OK)
    goto done;
  if (stat(a->path, &dst) != 0) {
    if (errno != ENOENT || !create) {
      rc = sluice_store_seterr(base, sluice__lmdb_err(errno), errno,
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
    /* EEXIST: another process of the service made it since the stat
    ** above (they start together); what it made is checked below. */
    if ((mkdir(a->path, dmode) != 0 && errno != EEXIST) ||
        stat(a->path, &dst) != 0) {
      rc = sluice_store_seterr(base, sluice__lmdb_err(errno), errno,
                               "lmdb: cannot create directory %s: %s", a->path,
                               strerror(errno));
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
        (void)sluice__lmdb_adopt_mapsize(e, (size_t)a->mapsize);
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
  sluice__store_free(base, a, sizeof *a);
  return rc;
}

const sluice_backend sluice__backend_lmdb = {
    SLUICE_BACKEND_VERSION, (int)sizeof(lmdb_store), "lmdb", NULL, lmdb_open, lmdb_params};

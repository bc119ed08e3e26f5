/*
** fuzz_shm: the lock-free shared-memory table under a random sequence of
** operations, then under a damaged mapping.
**
** Phase 1, differential: a table on a fresh memfd runs random operations
** (every algorithm, groups, deletes, reads) over a few keys at fuzzed,
** non-decreasing times; beside it a model keeps the records in a plain
** array and runs sluice__op_step() on them, zeroing a record once its
** sluice__op_expiry() has passed (the backend contract).  Every verdict must
** equal the model's field for field, every read must return the model's
** record (and SLUICE_ENOTFOUND exactly when the model's is fresh), and no
** valid operation may fail: the table is far larger than the key set.
**
** Phase 2, damage: the mapping is closed, fuzzed bytes are written over it
** (mostly into the slots, sometimes into the header) and it is opened
** again.  Open must either refuse with a documented error or succeed, and
** then every operation must return (no crash, no hang: libFuzzer's
** -timeout catches a livelock) with a documented result.
*/
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "sluice.h"
#include "../tests/common/one_step.h"
#include "op.h"
#include <sluice/sluice_shm.h>

#define NKEYS 8

static const sluice_gcra_params g_par[2] = {{5, 1000000000, 10},
                                            {1, 100000000, 3}};
static const sluice_window_params w_par = {4, 2000000000};
static const sluice_penalty_params p_par = {
    3, 5000000000, {1000000000, 4000000000, SLUICE_FOREVER}, 20000000000};
static const sluice_lease_params l_par = {2, 1500000000};
static const sluice_distinct_params d_par = {5, 3000000000};

/* Records of different algorithms never share a key: a record's expiry
** is the writer's algorithm's, so the model keeps one namespace each. */
typedef struct model {
  sluice_state st[7][NKEYS];
  char name[7][NKEYS][16];
  sluice_key key[7][NKEYS];
  sluice_gcra_params gp[SLUICE_GROUP_MAX]; /* per-key GCRA params */
} model;

/* Build op #sel over keys starting at k0; returns the key indexes. */
static void make_op(fz *f, sluice_op *op, int *idx, sluice_key *keys,
                    model *m) {
  unsigned sel = fz_u8(f) % 9;
  int k0 = (int)(fz_u8(f) % NKEYS), i;
  memset(op, 0, sizeof *op);
  op->nkeys = 1;
  op->arg = 1;
  switch (sel) {
  case 0: case 1:
    op->algo = SLUICE_ALGO_GCRA;
    op->kind = fz_u8(f) % 4 ? SLUICE_OP_CONSUME : SLUICE_OP_PEEK;
    op->arg = fz_range(f, op->kind == SLUICE_OP_PEEK ? 0 : 1, 3);
    break;
  case 2:
    op->algo = SLUICE_ALGO_GCRA; /* a tenant + key group */
    op->nkeys = 2;
    op->kind = SLUICE_OP_CONSUME;
    op->arg = fz_range(f, 1, 3);
    break;
  case 3:
  case 4:
    op->algo = sel == 3 ? SLUICE_ALGO_SWINDOW : SLUICE_ALGO_FWINDOW;
    op->kind = (int)(fz_u8(f) % 3); /* CONSUME, PEEK, COUNT */
    op->arg = fz_range(f, op->kind == SLUICE_OP_PEEK ? 0 : 1, 4);
    op->params = &w_par;
    break;
  case 5:
  case 6:
    op->algo = SLUICE_ALGO_PENALTY;
    op->kind = SLUICE_OP_CHECK + (int)(fz_u8(f) % 4);
    op->arg = op->kind == SLUICE_OP_TRIP ? fz_range(f, 1, 3) : 0;
    op->params = &p_par;
    break;
  case 7:
    op->algo = SLUICE_ALGO_LEASE;
    op->nkeys = 2;
    op->kind = SLUICE_OP_ACQUIRE + (int)(fz_u8(f) % 3);
    op->id = (uint64_t)fz_range(f, 1, 4);
    op->arg = 0;
    op->params = &l_par;
    break;
  default:
    op->algo = SLUICE_ALGO_DISTINCT;
    op->kind = fz_u8(f) % 3 ? SLUICE_OP_ADD : SLUICE_OP_PEEK;
    op->id = fz_u64(f, 8);
    op->arg = 0;
    op->params = &d_par;
    break;
  }
  for (i = 0; i < op->nkeys; i++) {
    idx[i] = (k0 + i) % NKEYS;
    keys[i] = m->key[op->algo][idx[i]];
    /* Key j always has the same GCRA parameters: its expiry depends on them. */
    m->gp[i] = g_par[idx[i] % 2];
  }
  if (op->algo == SLUICE_ALGO_GCRA)
    op->params = m->gp;
  op->keys = keys;
}

static void same(const sluice_verdict *a, const sluice_verdict *b, int step) {
  CHECK(a->allowed == b->allowed && a->flags == b->flags &&
            a->binding == b->binding && a->level == b->level &&
            a->limit == b->limit && a->remaining == b->remaining &&
            a->retry_after_ns == b->retry_after_ns &&
            a->reset_ns == b->reset_ns &&
            a->strikes_remaining == b->strikes_remaining &&
            a->offenses == b->offenses && a->lease_id == b->lease_id &&
            a->now_ns == b->now_ns,
        "step %d: shm verdict differs from the model (allowed %d/%d, "
        "remaining %lld/%lld, retry %lld/%lld)",
        step, a->allowed, b->allowed, (long long)a->remaining,
        (long long)b->remaining, (long long)a->retry_after_ns,
        (long long)b->retry_after_ns);
}

static int known_error(int rc) {
  return rc == SLUICE_EINVAL || rc == SLUICE_ECORRUPT || rc == SLUICE_EVERSION ||
         rc == SLUICE_EBUSY || rc == SLUICE_ECONFIG || rc == SLUICE_EFULL ||
         rc == SLUICE_ENOTFOUND || rc == SLUICE_EIO || rc == SLUICE_EBACKEND;
}

static int open_on(int fd, int create, sluice_clock *clk,
                   sluice_limiter **lim) {
  char uri[96];
  sluice_limiter_options o = {0};
  snprintf(uri, sizeof uri, "shm:fd=%d;capacity=16%s", fd,
           create ? ";create=1" : "");
  o.store = uri;
  o.clock = clk;
  return sluice_limiter_open(&o, lim, NULL, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f = {data, size};
  model m;
  sluice_clock *clk = NULL;
  sluice_limiter *lim = NULL;
  int64_t now = (int64_t)fz_u64(&f, 4) * 1000;
  int fd, rc, nops, k;
  struct stat sb;

  memset(&m, 0, sizeof m);
  for (int a = 0; a < 7; a++)
    for (k = 0; k < NKEYS; k++) {
      snprintf(m.name[a][k], sizeof m.name[a][k], "{fz}:%d:%d", a, k);
      m.key[a][k].data = m.name[a][k];
      m.key[a][k].len = strlen(m.name[a][k]);
    }
  fd = memfd_create("fuzz-shm", MFD_CLOEXEC);
  CHECK(fd >= 0, "memfd");
  CHECK(sluice_clock_manual(now, &clk) == SLUICE_OK, "clock");
  rc = open_on(fd, 1, clk, &lim);
  CHECK(rc == SLUICE_OK, "open a fresh table: %s", sluice_strerror(rc));

  /* Phase 1: differential. */
  nops = (int)(fz_u8(&f) % 64);
  for (k = 0; k < nops; k++) {
    sluice_op op;
    sluice_key keys[SLUICE_GROUP_MAX];
    sluice_state in[SLUICE_GROUP_MAX], out[SLUICE_GROUP_MAX];
    sluice_verdict vs, vm;
    int idx[SLUICE_GROUP_MAX], i;
    unsigned what = fz_u8(&f) % 16;
    now += fz_bool(&f) ? fz_range(&f, 0, 2000) * 1000000
                       : fz_range(&f, 0, 30) * 1000000000;
    sluice_clock_set(clk, now);
    if (what == 0) { /* delete */
      int a = 1 + (int)(fz_u8(&f) % 6), j = (int)(fz_u8(&f) % NKEYS);
      rc = sluice_limiter_delete(lim, m.key[a][j].data, m.key[a][j].len);
      CHECK(rc == SLUICE_OK || rc == SLUICE_ENOTFOUND, "delete: %s",
            sluice_strerror(rc));
      memset(&m.st[a][j], 0, sizeof m.st[a][j]);
      continue;
    }
    make_op(&f, &op, idx, keys, &m);
    for (i = 0; i < op.nkeys; i++) {
      in[i] = m.st[op.algo][idx[i]];
      if (sluice__op_expiry(&op, i, &in[i]) <= now)
        memset(&in[i], 0, sizeof in[i]);
    }
    CHECK(sluice__op_step(&op, in, out, now, &vm) == SLUICE_OK, "model step");
    rc = op_decide(lim, &op, SLUICE_NOW, &vs);
    CHECK(rc == SLUICE_OK, "step %d: shm apply: %s (%s)", k,
          sluice_strerror(rc), sluice_limiter_errmsg(lim));
    same(&vs, &vm, k);
    for (i = 0; i < op.nkeys; i++)
      m.st[op.algo][idx[i]] = out[i];
    if (what == 1) { /* read one record back */
      sluice_state got;
      int64_t exp;
      int j = idx[0], fresh, a = op.algo;
      fresh = sluice__op_expiry(&op, 0, &m.st[a][j]) <= now;
      rc = sluice_limiter_get(lim, m.key[a][j].data, m.key[a][j].len, &got,
                              &exp);
      if (fresh)
        CHECK(rc == SLUICE_ENOTFOUND, "get of an expired record: %s",
              sluice_strerror(rc));
      else
        CHECK(rc == SLUICE_OK && memcmp(&got, &m.st[a][j], sizeof got) == 0,
              "get: %s, record differs from the model", sluice_strerror(rc));
    }
  }
  sluice_limiter_close(lim);
  lim = NULL;

  /* Phase 2: damage the mapping and open it again. */
  CHECK(fstat(fd, &sb) == 0 && sb.st_size > 4096, "mapping size");
  {
    int nw = (int)(fz_u8(&f) % 16);
    for (k = 0; k < nw && f.n > 0; k++) {
      int hdr = fz_u8(&f) % 8 == 0;
      off_t off = hdr ? (off_t)fz_range(&f, 0, 255)
                      : (off_t)fz_range(&f, 4096, sb.st_size - 1);
      size_t len = 1 + fz_u8(&f) % 48;
      if (len > f.n)
        len = f.n;
      if (off + (off_t)len > sb.st_size)
        len = (size_t)(sb.st_size - off);
      CHECK(pwrite(fd, f.p, len, off) == (ssize_t)len, "pwrite");
      f.p += len;
      f.n -= len;
    }
  }
  rc = open_on(fd, 0, clk, &lim);
  CHECK(rc == SLUICE_OK || known_error(rc), "reopen: undocumented %d", rc);
  if (rc == SLUICE_OK) {
    sluice_shm_stats st;
    for (k = 0; k < 48; k++) {
      sluice_op op;
      sluice_key keys[SLUICE_GROUP_MAX];
      sluice_verdict v;
      int idx[SLUICE_GROUP_MAX];
      now += 250000000;
      sluice_clock_set(clk, now);
      make_op(&f, &op, idx, keys, &m);
      rc = op_decide(lim, &op, SLUICE_NOW, &v);
      CHECK(rc == SLUICE_OK || known_error(rc), "apply on a damaged table: %d",
            rc);
      if (rc == SLUICE_OK)
        CHECK(v.allowed == 0 || v.allowed == 1, "allowed %d", v.allowed);
    }
    memset(&st, 0, sizeof st);
    st.now_ns = now;
    rc = sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st);
    CHECK(rc == SLUICE_OK || known_error(rc), "stats: %d", rc);
    sluice_limiter_close(lim);
  }
  sluice_clock_free(clk);
  close(fd);
  return 0;
}

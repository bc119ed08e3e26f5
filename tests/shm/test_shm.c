/*
** shm backend behaviour: opening (names, inherited fds, fork), refusing bad
** mappings, table-full behaviour with penalty boxes, reclamation in place,
** statistics, and recovery from claims abandoned by a crashed process.
*/
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "shm_test_util.h"
#include "../common/units.h"


/* Header offsets (layouts 1 and 2, see shm_store.c). */
#define OFF_LAYOUT 8
#define OFF_STATE_LAYOUT 12
#define OFF_CAPACITY 32
#define OFF_HKEY 56

static char name[128];

static void unlink_name(void) {
  if (name[0])
    shm_unlink(name);
  name[0] = '\0';
}

TestSuite(shm, .fini = unlink_name, .timeout = 60);

static int try_open(const char *store, unsigned flags, sluice_limiter **out,
                    char *err, size_t errlen) {
  sluice_limiter_options o = {0};
  o.store = store;
  o.flags = flags;
  return sluice_limiter_open2(&o, out, err, errlen);
}

static void must_fail(const char *store, unsigned flags, int want,
                      const char *needle) {
  sluice_limiter *lim = (sluice_limiter *)1;
  char err[256] = "";
  int rc = try_open(store, flags, &lim, err, sizeof err);
  cr_assert_eq(rc, want, "%s: got %s (%s), want %s", store, sluice_err_name(rc),
               err, sluice_err_name(want));
  cr_assert_null(lim, "a failed open leaves *out NULL");
  cr_assert(strstr(err, needle) != NULL, "%s: detail '%s' lacks '%s'", store,
            err, needle);
}

Test(shm, bad_uri_is_refused) {
  must_fail("shm:", SLUICE_OPEN_CREATE, SLUICE_EINVAL, "exactly one");
  must_fail("shm:name=/a;fd=3", SLUICE_OPEN_CREATE, SLUICE_EINVAL,
            "exactly one");
  must_fail("shm:name=noslash", SLUICE_OPEN_CREATE, SLUICE_EINVAL, "name");
  must_fail("shm:name=/a/b", SLUICE_OPEN_CREATE, SLUICE_EINVAL, "name");
  must_fail("shm:name=/x;capacity=0", SLUICE_OPEN_CREATE, SLUICE_EINVAL,
            "capacity");
  must_fail("shm:name=/x;capacity=12q", SLUICE_OPEN_CREATE, SLUICE_EINVAL,
            "capacity");
  must_fail("shm:fd=abc", SLUICE_OPEN_CREATE, SLUICE_EINVAL, "fd");
  must_fail("shm:fd=987", SLUICE_OPEN_CREATE, SLUICE_EIO, "fd 987");
}

Test(shm, missing_without_create_is_not_found) {
  char store[200];
  shm_test_name(name, sizeof name, "missing");
  snprintf(store, sizeof store, "shm:name=%s", name);
  must_fail(store, 0, SLUICE_ENOTFOUND, name);
  /* and nothing was created by the failed attempt */
  cr_assert_eq(shm_open(name, O_RDONLY, 0), -1);
  cr_assert_eq(errno, ENOENT);
}

/* A valid mapping, then a byte image of it to tamper with. */
static void make_valid(char *store, size_t n, int64_t capacity) {
  sluice_limiter *lim;
  char err[256];
  shm_test_name(name, sizeof name, "bad");
  snprintf(store, n, "shm:name=%s;capacity=%lld", name, (long long)capacity);
  cr_assert_eq(try_open(store, SLUICE_OPEN_CREATE, &lim, err, sizeof err),
               SLUICE_OK, "%s", err);
  sluice_limiter_close(lim);
}

static void poke(size_t off, const void *bytes, size_t n) {
  int fd = shm_open(name, O_RDWR, 0);
  cr_assert(fd >= 0);
  cr_assert_eq(pwrite(fd, bytes, n, (off_t)off), (ssize_t)n);
  close(fd);
}

static off_t size_of_name(void) {
  struct stat sb;
  int fd = shm_open(name, O_RDONLY, 0);
  cr_assert(fd >= 0);
  cr_assert_eq(fstat(fd, &sb), 0);
  close(fd);
  return sb.st_size;
}

Test(shm, wrong_magic_is_refused) {
  char store[200];
  make_valid(store, sizeof store, 1000);
  poke(0, "NOTSLUIC", 8);
  must_fail(store, SLUICE_OPEN_CREATE, SLUICE_ECORRUPT, "bad magic");
  /* refusing it did not repair or reinitialise it */
  {
    char m[8];
    int fd = shm_open(name, O_RDONLY, 0);
    cr_assert_eq(pread(fd, m, 8, 0), 8);
    close(fd);
    cr_assert(memcmp(m, "NOTSLUIC", 8) == 0);
  }
}

Test(shm, wrong_layout_version_is_refused) {
  char store[200];
  uint32_t v = 99;
  make_valid(store, sizeof store, 1000);
  poke(OFF_LAYOUT, &v, sizeof v);
  must_fail(store, 0, SLUICE_EVERSION, "layout 99");
}

Test(shm, wrong_state_layout_is_refused) {
  char store[200];
  uint32_t v = SLUICE_STATE_LAYOUT + 1;
  make_valid(store, sizeof store, 1000);
  poke(OFF_STATE_LAYOUT, &v, sizeof v);
  must_fail(store, 0, SLUICE_EVERSION, "state layout");
}

Test(shm, corrupt_header_is_refused) {
  char store[200];
  uint64_t cap = 5000; /* valid-looking, but the checksum no longer holds */
  make_valid(store, sizeof store, 1000);
  poke(OFF_CAPACITY, &cap, sizeof cap);
  must_fail(store, 0, SLUICE_ECORRUPT, "corrupt header");
}

Test(shm, truncated_file_is_refused) {
  char store[200];
  int fd;
  make_valid(store, sizeof store, 1000);
  fd = shm_open(name, O_RDWR, 0);
  cr_assert_eq(ftruncate(fd, size_of_name() / 2), 0);
  close(fd);
  must_fail(store, SLUICE_OPEN_CREATE, SLUICE_ECORRUPT, "truncated");
  /* shorter than the header itself */
  fd = shm_open(name, O_RDWR, 0);
  cr_assert_eq(ftruncate(fd, 100), 0);
  close(fd);
  must_fail(store, 0, SLUICE_ECORRUPT, "truncated");
}

Test(shm, garbage_file_is_refused) {
  char store[200], junk[4096];
  int fd;
  shm_test_name(name, sizeof name, "junk");
  snprintf(store, sizeof store, "shm:name=%s", name);
  fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  cr_assert(fd >= 0);
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (char)(i * 7 + 1);
  cr_assert_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
  cr_assert_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
  close(fd);
  must_fail(store, SLUICE_OPEN_CREATE, SLUICE_ECORRUPT, "bad magic");
}

/* A full /dev/shm (or memfd's memory cgroup at its limit): the pages of a
** new table are allocated when first touched, and one that cannot be
** raised SIGBUS in the caller once it wrote to it.  The open must reserve
** them and fail with a clear error instead.  Runs in a child with its own
** mount namespace and a 256 KiB tmpfs over /dev/shm (user namespaces; the
** test is skipped where they are not allowed).  Exit codes: 0 ok,
** 2 no namespace, 10+ what went wrong; a signal is the bug. */
static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY), ok;
  if (fd < 0)
    return 0;
  ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
  close(fd);
  return ok;
}

static int small_shm_child(void) {
  char err[256] = "", map[64];
  sluice_limiter *lim = NULL;
  sluice_gcra_params p = {1, MIN, 10};
  int rc, efull = 0, fd;
  unsigned uid = (unsigned)getuid(), gid = (unsigned)getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0 ||
      !write_file("/proc/self/setgroups", "deny") ||
      !write_file("/proc/self/uid_map",
                  (snprintf(map, sizeof map, "0 %u 1", uid), map)) ||
      !write_file("/proc/self/gid_map",
                  (snprintf(map, sizeof map, "0 %u 1", gid), map)) ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=256k") != 0)
    return 2;
  /* 50,000 keys (3.2 MB) cannot fit: refused, nothing left behind */
  rc = try_open("shm:name=/big;capacity=50000", SLUICE_OPEN_CREATE, &lim,
                err, sizeof err);
  if (rc != SLUICE_ENOMEM || lim != NULL || !strstr(err, "/big"))
    return 10;
  if (shm_open("/big", O_RDONLY, 0) >= 0 || errno != ENOENT)
    return 11;
  /* the same through an inherited descriptor of an empty file */
  fd = open("/dev/shm/fd", O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    return 12;
  {
    char store[64];
    snprintf(store, sizeof store, "shm:fd=%d;capacity=50000", fd);
    rc = try_open(store, SLUICE_OPEN_CREATE, &lim, err, sizeof err);
    if (rc != SLUICE_ENOMEM || !strstr(err, "reserve"))
      return 13;
  }
  close(fd);
  unlink("/dev/shm/fd");
  /* a table that fits works up to its slots, then refuses keys */
  rc = try_open("shm:name=/fits;capacity=2000", SLUICE_OPEN_CREATE, &lim,
                err, sizeof err);
  if (rc != SLUICE_OK)
    return 14;
  for (int i = 0; i < 3000; i++) {
    char k[24];
    sluice_verdict v;
    snprintf(k, sizeof k, "k%d", i);
    rc = sluice_limiter_take(lim, k, strlen(k), &p, 1, &v);
    if (rc == SLUICE_EFULL)
      efull++;
    else if (rc != SLUICE_OK)
      return 15;
  }
  sluice_limiter_close(lim);
  return efull > 0 ? 0 : 16;
}

Test(shm, full_dev_shm_is_an_error_not_a_crash) {
  int status;
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0)
    _exit(small_shm_child());
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(!WIFSIGNALED(status), "the child died of signal %d",
            WTERMSIG(status));
  if (WEXITSTATUS(status) == 2)
    cr_skip_test("no user and mount namespaces here");
  cr_assert_eq(WEXITSTATUS(status), 0, "child check %d failed",
               WEXITSTATUS(status));
}

Test(shm, never_initialised_is_busy) {
  char store[200];
  int fd;
  shm_test_name(name, sizeof name, "zero");
  snprintf(store, sizeof store, "shm:name=%s", name);
  fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  cr_assert(fd >= 0);
  cr_assert_eq(ftruncate(fd, 1 << 20), 0);
  /* a creator that died after sizing the object: claim word taken */
  {
    uint32_t one = 1;
    cr_assert_eq(pwrite(fd, &one, 4, 28), 4);
  }
  close(fd);
  must_fail(store, SLUICE_OPEN_CREATE, SLUICE_EBUSY, "never initialised");
}

Test(shm, capacity_mismatch_is_refused) {
  char store[200];
  make_valid(store, sizeof store, 1000);
  snprintf(store, sizeof store, "shm:name=%s;capacity=2000", name);
  must_fail(store, 0, SLUICE_ECONFIG, "capacity 1000");
  /* without capacity= the existing table opens */
  {
    sluice_limiter *lim;
    snprintf(store, sizeof store, "shm:name=%s", name);
    cr_assert_eq(try_open(store, 0, &lim, NULL, 0), SLUICE_OK);
    sluice_limiter_close(lim);
  }
}

/* ------------------------------------------------------------ sharing --- */

static const sluice_gcra_params slow = {1, MIN, 10}; /* 10 then 1/min */

static int64_t take_all(sluice_limiter *lim, const char *key, int64_t now) {
  sluice_key k = {key, strlen(key)};
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &slow, 1, 0};
  sluice_verdict v;
  int64_t n = 0;
  for (int i = 0; i < 100; i++) {
    cr_assert_eq(sluice_limiter_apply_at(lim, &op, now, &v), SLUICE_OK);
    n += v.allowed;
  }
  return n;
}

Test(shm, fork_child_and_fresh_open_share_state) {
  char store[200];
  sluice_limiter *lim;
  pid_t pid;
  int status;
  shm_test_name(name, sizeof name, "fork");
  snprintf(store, sizeof store, "shm:name=%s;capacity=1000;create=1", name);
  cr_assert_eq(try_open(store, 0, &lim, NULL, 0), SLUICE_OK);
  pid = fork();
  if (pid == 0) {
    /* the inherited handle ... */
    int64_t a = take_all(lim, "k1", SEC);
    /* ... and an independent open of the same name */
    sluice_limiter *l2;
    char s2[200];
    snprintf(s2, sizeof s2, "shm:name=%s", name);
    if (try_open(s2, 0, &l2, NULL, 0) != SLUICE_OK)
      _exit(10);
    a = a * 100 + take_all(l2, "k2", SEC);
    sluice_limiter_close(l2);
    _exit(a == 1010 ? 0 : 11);
  }
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d",
            WEXITSTATUS(status));
  /* the child emptied both buckets */
  cr_assert_eq(take_all(lim, "k1", SEC), 0);
  cr_assert_eq(take_all(lim, "k2", SEC), 0);
  cr_assert_eq(take_all(lim, "k3", SEC), 10);
  cr_assert_eq(sluice_limiter_capabilities(lim) & SLUICE_CAP_CROSS_PROCESS,
               SLUICE_CAP_CROSS_PROCESS);
  sluice_limiter_close(lim);
}

Test(shm, memfd_inherited_by_fd) {
  char store[64];
  sluice_limiter *lim;
  pid_t pid;
  int status, fd = memfd_create("sluice-test", 0);
  cr_assert(fd >= 0);
  snprintf(store, sizeof store, "shm:fd=%d;capacity=500", fd);
  cr_assert_eq(try_open(store, SLUICE_OPEN_CREATE, &lim, NULL, 0), SLUICE_OK);
  cr_assert_eq(take_all(lim, "m", SEC), 10);
  pid = fork();
  if (pid == 0) {
    sluice_limiter *l2;
    char s2[64];
    snprintf(s2, sizeof s2, "shm:fd=%d", fd); /* no create: must exist */
    if (try_open(s2, 0, &l2, NULL, 0) != SLUICE_OK)
      _exit(10);
    /* one minute later exactly one point has come back */
    _exit(take_all(l2, "m", SEC + MIN) == 1 ? 0 : 11);
  }
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d",
            WEXITSTATUS(status));
  cr_assert_eq(take_all(lim, "m", SEC + MIN), 0);
  sluice_limiter_close(lim);
  /* the fd is borrowed: still open after close */
  cr_assert_eq(fcntl(fd, F_GETFD), 0);
  close(fd);
}

/* --------------------------------------------------------- table full --- */

static const sluice_penalty_params pen = {
    3, MIN, {5 * MIN, 60 * MIN, SLUICE_FOREVER}, 24 * 60 * MIN};

static sluice_verdict pen_op(sluice_limiter *lim, const char *key, int kind,
                             int64_t arg, int64_t now) {
  sluice_key k = {key, strlen(key)};
  sluice_op op = {SLUICE_ALGO_PENALTY, kind, 1, &k, &pen, arg, 0};
  sluice_verdict v;
  int rc = sluice_limiter_apply_at(lim, &op, now, &v);
  cr_assert_eq(rc, SLUICE_OK, "penalty op: %s", sluice_strerror(rc));
  return v;
}

/* Insert fresh keys with hour-long buckets until the table refuses one;
** returns how many fitted. */
static int flood(sluice_limiter *lim, const char *prefix, int max,
                 int64_t now, int *efull) {
  static const sluice_gcra_params hour = {1, 60 * MIN, 1};
  int fitted = 0;
  *efull = 0;
  for (int i = 0; i < max; i++) {
    char key[64];
    sluice_verdict v;
    int rc;
    snprintf(key, sizeof key, "%s-%d", prefix, i);
    rc = sluice_limiter_take(lim, key, strlen(key), &hour, 1, &v);
    (void)now;
    if (rc == SLUICE_EFULL) {
      (*efull)++;
      cr_assert(strstr(sluice_limiter_errmsg(lim), "no free slot") != NULL);
      continue;
    }
    cr_assert_eq(rc, SLUICE_OK, "%s", sluice_strerror(rc));
    cr_assert_eq(v.allowed, 1);
    fitted++;
  }
  return fitted;
}

static _Atomic int64_t full_now;

Test(shm, flood_cannot_evict_a_box) {
  char store[200];
  sluice_limiter *lim;
  sluice_clock *clk;
  sluice_verdict v;
  sluice_shm_stats st = {0};
  int efull, fitted;
  int64_t t0 = 1000 * SEC;
  shm_test_name(name, sizeof name, "full");
  snprintf(store, sizeof store, "shm:name=%s;capacity=64", name);
  atomic_store(&full_now, t0);
  lim = shm_test_open(store, &full_now, &clk);

  v = pen_op(lim, "boxed", SLUICE_OP_TRIP, 1, t0);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.level, 1);

  /* far more new keys than slots (at least one probe window, 1024): some
  ** fit, the rest are refused */
  fitted = flood(lim, "a", 2000, t0, &efull);
  cr_assert_gt(efull, 0, "the table never filled up");
  cr_assert_lt(fitted, 2000);
  st.now_ns = t0;
  cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.live, fitted + 1, "live %lld, fitted %d + the box",
               (long long)st.live, fitted);
  cr_assert_geq(fitted + 1, 64, "capacity 64 must hold 64 keys");

  /* the box survived the flood, with its full remaining time */
  v = pen_op(lim, "boxed", SLUICE_OP_CHECK, 0, t0 + MIN);
  cr_assert_eq(v.allowed, 0);
  cr_assert_eq(v.retry_after_ns, 4 * MIN);

  /* still full while the flood's buckets live: a second flood fails too */
  atomic_store(&full_now, t0 + 2 * MIN);
  flood(lim, "b", 200, t0 + 2 * MIN, &efull);
  cr_assert_eq(efull, 200);
  v = pen_op(lim, "boxed", SLUICE_OP_CHECK, 0, t0 + 4 * MIN);
  cr_assert_eq(v.allowed, 0, "still boxed one minute before the end");

  /* the box ends on time; the offense counter is still there */
  v = pen_op(lim, "boxed", SLUICE_OP_CHECK, 0, t0 + 5 * MIN);
  cr_assert_eq(v.allowed, 1);
  cr_assert_eq(v.offenses, 1);

  /* after the flood's hour, its slots are reclaimed in place */
  atomic_store(&full_now, t0 + 61 * MIN);
  fitted = flood(lim, "c", 40, t0 + 61 * MIN, &efull);
  cr_assert_eq(efull, 0);
  cr_assert_eq(fitted, 40);
  /* and the offense counter (24 h) was not among them: a second trip is
  ** level 2 */
  v = pen_op(lim, "boxed", SLUICE_OP_TRIP, 1, t0 + 62 * MIN);
  cr_assert_eq(v.level, 2);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

Test(shm, capacity_is_met_and_bytes_per_key_measured) {
  char store[64];
  sluice_limiter *lim;
  sluice_shm_stats st = {0};
  const int cap = 50000;
  int fd = memfd_create("sluice-cap", 0), efull, fitted;
  cr_assert(fd >= 0);
  snprintf(store, sizeof store, "shm:fd=%d;capacity=%d", fd, cap);
  cr_assert_eq(try_open(store, SLUICE_OPEN_CREATE, &lim, NULL, 0), SLUICE_OK);
  fitted = flood(lim, "cap", cap, 0, &efull);
  cr_assert_eq(efull, 0, "%d of %d keys refused below capacity", efull, cap);
  cr_assert_eq(fitted, cap);
  cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.capacity, cap);
  cr_assert_eq(st.live, cap);
  cr_assert_eq(st.pending, 0);
  cr_assert_leq(st.bytes_per_key, 64, "bytes per key %lld",
                (long long)st.bytes_per_key);
  cr_assert_eq(sluice_limiter_control(lim, 999, &st), SLUICE_ENOTFOUND);
  sluice_limiter_close(lim);
  close(fd);
}

static _Atomic int64_t del_now;

Test(shm, delete_and_get) {
  char store[200];
  sluice_limiter *lim;
  sluice_clock *clk;
  sluice_state s;
  int64_t exp, t = 10 * SEC;
  shm_test_name(name, sizeof name, "del");
  snprintf(store, sizeof store, "shm:name=%s;capacity=100", name);
  atomic_store(&del_now, t);
  lim = shm_test_open(store, &del_now, &clk);
  cr_assert_eq(sluice_limiter_get(lim, "d", 1, &s, &exp), SLUICE_ENOTFOUND);
  cr_assert_eq(take_all(lim, "d", t), 10);
  cr_assert_eq(sluice_limiter_get(lim, "d", 1, &s, &exp), SLUICE_OK);
  /* 10 points at 1/min: full again 10 minutes from now */
  cr_assert_eq(exp, t + 10 * MIN);
  cr_assert_eq((int64_t)s.w[0], t + 10 * MIN);
  cr_assert_eq(take_all(lim, "d", t), 0);
  cr_assert_eq(sluice_limiter_delete(lim, "d", 1), SLUICE_OK);
  cr_assert_eq(sluice_limiter_delete(lim, "d", 1), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_limiter_get(lim, "d", 1, &s, &exp), SLUICE_ENOTFOUND);
  cr_assert_eq(take_all(lim, "d", t), 10, "deleted: a fresh bucket");
  cr_assert_eq(sluice_limiter_delete(lim, "never", 5), SLUICE_ENOTFOUND);
  /* past its expiry the record reads as absent */
  atomic_store(&del_now, t + 10 * MIN);
  cr_assert_eq(sluice_limiter_get(lim, "d", 1, &s, &exp), SLUICE_ENOTFOUND);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

/* --------------------------------------- claims abandoned by a crash --- */
/* White-box: these write slot metadata the way a claimer killed between
** its claim and its commit leaves it (layout 4: a 4096-byte header, then
** 48-byte slots; meta.hi = status | gen << 2 | fpx << 12 (11 bits) |
** evictable << 23 | units << 24; the home slot's reach at byte 40). */

#define HDR 4096
#define SLOT 48
#define REACH 40

typedef struct raw {
  int fd;
  uint8_t hkey[16];
  uint64_t nslots;
} raw;

static void raw_open(raw *r) {
  r->fd = shm_open(name, O_RDWR, 0);
  cr_assert(r->fd >= 0);
  cr_assert_eq(pread(r->fd, r->hkey, 16, OFF_HKEY), 16);
  cr_assert_eq(pread(r->fd, &r->nslots, 8, 40), 8);
}

/* Slot index and meta words of `key` bound with `status` at its home. */
static uint64_t raw_home(const raw *r, const char *key, unsigned status,
                         uint64_t units, uint64_t m[2]) {
  uint8_t h[16];
  uint64_t h0, h1;
  sluice_siphash13_128(r->hkey, key, strlen(key), h);
  memcpy(&h0, h, 8);
  memcpy(&h1, h + 8, 8);
  m[0] = h0;
  m[1] = status | (UINT64_C(5) << 2) | ((h1 & 0x7ff) << 12) | (units << 24);
  return (uint64_t)(((unsigned __int128)h1 * r->nslots) >> 64);
}

static void raw_write(const raw *r, uint64_t slot, const uint64_t m[2],
                      const uint64_t st[2]) {
  off_t off = (off_t)(HDR + slot * SLOT);
  cr_assert_eq(pwrite(r->fd, m, 16, off), 16);
  if (st)
    cr_assert_eq(pwrite(r->fd, st, 16, off + 16), 16);
}

static void raw_reach(const raw *r, uint64_t slot, uint64_t reach) {
  cr_assert_eq(pwrite(r->fd, &reach, 8, (off_t)(HDR + slot * SLOT + REACH)),
               8);
}

static _Atomic int64_t ab_now;

Test(shm, abandoned_claim_of_same_key_is_finished) {
  char store[200];
  sluice_limiter *lim;
  sluice_clock *clk;
  sluice_shm_stats st = {0};
  raw r;
  uint64_t m[2], junk[2] = {UINT64_C(0xdeadbeefdeadbeef), 12345}, slot;
  int64_t t = 50 * SEC;
  shm_test_name(name, sizeof name, "aband");
  snprintf(store, sizeof store, "shm:name=%s;capacity=100", name);
  atomic_store(&ab_now, t);
  lim = shm_test_open(store, &ab_now, &clk);
  raw_open(&r);
  /* a claim for "victim" that was never reset nor committed */
  slot = raw_home(&r, "victim", 1, ((uint64_t)t >> 24) + 1, m);
  raw_write(&r, slot, m, junk);
  st.now_ns = t;
  cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.pending, 1);
  /* the next user of the key finishes the claim: a fresh bucket, none of
  ** the junk state */
  cr_assert_eq(take_all(lim, "victim", t), 10);
  cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.pending, 0);
  cr_assert_eq(st.live, 1);
  cr_assert_eq(take_all(lim, "victim", t), 0);
  close(r.fd);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

Test(shm, abandoned_claim_of_other_key_is_reclaimed) {
  char store[200];
  sluice_limiter *lim;
  sluice_clock *clk;
  raw r;
  uint64_t m[2], slot;
  int64_t t = 70 * SEC;
  int efull, fitted;
  shm_test_name(name, sizeof name, "aband2");
  /* 768 keys: 1024 slots, one probe window: the whole table */
  snprintf(store, sizeof store, "shm:name=%s;capacity=768", name);
  atomic_store(&ab_now, t);
  lim = shm_test_open(store, &ab_now, &clk);
  fitted = flood(lim, "f", 1100, t, &efull);
  cr_assert_eq(fitted, 1024);
  raw_open(&r);
  /* one slot turns into a dead process's claim for some other key */
  slot = raw_home(&r, "ghost", 1, ((uint64_t)t >> 24) + 1, m);
  raw_write(&r, slot, m, NULL);
  /* not before its claim unit and the reclaim grace have passed */
  flood(lim, "g", 1, t, &efull);
  cr_assert_eq(efull, 1);
  atomic_store(&ab_now, t + 2 * SEC);
  fitted = flood(lim, "g", 2, t, &efull);
  cr_assert_eq(fitted, 1, "exactly the abandoned slot was reclaimed");
  cr_assert_eq(efull, 1);
  close(r.fd);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

Test(shm, a_claim_gives_way_to_the_live_binding_of_its_key) {
  char store[200];
  sluice_limiter *lim;
  sluice_clock *clk;
  sluice_shm_stats st = {0};
  raw r;
  uint64_t m[2], home;
  uint8_t slot[SLOT];
  int64_t t = 90 * SEC;
  shm_test_name(name, sizeof name, "giveway");
  snprintf(store, sizeof store, "shm:name=%s;capacity=100", name);
  atomic_store(&ab_now, t);
  lim = shm_test_open(store, &ab_now, &clk);
  cr_assert_eq(take_all(lim, "dup", t), 10); /* empty bucket, live */
  raw_open(&r);
  /* Move the live record one slot on (its home's reach covering it, as a
  ** claimer leaves it) and leave, at its home, a claim for the same key:
  ** what two processes inserting "dup" at once, from different views of
  ** the chain, can leave behind. */
  home = raw_home(&r, "dup", 1, ((uint64_t)t >> 24) + 1, m);
  cr_assert_eq(pread(r.fd, slot, REACH, (off_t)(HDR + home * SLOT)), REACH);
  cr_assert_eq(pwrite(r.fd, slot, REACH,
                      (off_t)(HDR + ((home + 1) % r.nslots) * SLOT)),
               REACH);
  raw_reach(&r, home, 1);
  raw_write(&r, home, m, NULL);
  /* The claim must not commit as a second, fresh bucket for "dup". */
  cr_assert_eq(take_all(lim, "dup", t), 0, "a duplicate binding refunded");
  st.now_ns = t;
  cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.live, 1);
  cr_assert_eq(st.pending, 0);
  close(r.fd);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

/* ------------------------------------------------------------- reach --- */

static _Atomic int64_t reach_now;

/* Invariant d, white-box: every key lies within its home slot's reach, and
** in a table that only one process filled, the reach is exactly as far as
** the farthest key of that home (so a scan reads no slot it need not).
** Deleting keys in front of others must not lose them. */
Test(shm, every_key_lies_within_its_home_reach) {
  enum { NK = 1000 };
  char store[200], key[32];
  sluice_limiter *lim;
  sluice_clock *clk;
  sluice_shm_stats st = {0};
  raw r;
  uint8_t *tab;
  uint64_t *far, m[2];
  int64_t t = 120 * SEC;
  uint64_t i, longest = 0;
  shm_test_name(name, sizeof name, "reach");
  /* 1024 slots, 1000 keys: long clusters */
  snprintf(store, sizeof store, "shm:name=%s;capacity=768", name);
  atomic_store(&reach_now, t);
  lim = shm_test_open(store, &reach_now, &clk);
  for (int k = 0; k < NK; k++) {
    snprintf(key, sizeof key, "r-%d", k);
    cr_assert_eq(take_all(lim, key, t), 10);
  }
  raw_open(&r);
  tab = malloc(r.nslots * SLOT);
  far = calloc(r.nslots, sizeof *far);
  cr_assert(tab && far);
  cr_assert_eq(pread(r.fd, tab, r.nslots * SLOT, HDR),
               (ssize_t)(r.nslots * SLOT));
  for (int k = 0; k < NK; k++) {
    uint64_t home, j, d, reach, found = UINT64_MAX;
    snprintf(key, sizeof key, "r-%d", k);
    home = raw_home(&r, key, 2, 0, m);
    for (j = 0; j < r.nslots; j++) {
      uint64_t sm[2];
      memcpy(sm, tab + j * SLOT, 16);
      if (sm[0] == m[0] && ((sm[1] ^ m[1]) & UINT64_C(0x7ff003)) == 0) {
        cr_assert_eq(found, UINT64_MAX, "key %s bound twice", key);
        found = j;
      }
    }
    cr_assert_neq(found, UINT64_MAX, "key %s has no live slot", key);
    d = (found + r.nslots - home) % r.nslots;
    memcpy(&reach, tab + home * SLOT + REACH, 8);
    cr_assert_leq(d, reach, "%s at distance %llu, its home's reach %llu",
                  key, (unsigned long long)d, (unsigned long long)reach);
    if (d > far[home])
      far[home] = d;
    if (d > longest)
      longest = d;
  }
  cr_assert_gt(longest, 8, "the fill made no long cluster to test");
  st.now_ns = t;
  cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.longest_reach, (int64_t)longest);
  for (i = 0; i < r.nslots; i++) {
    uint64_t reach;
    memcpy(&reach, tab + i * SLOT + REACH, 8);
    cr_assert_eq(reach, far[i], "slot %llu: reach %llu, farthest key %llu",
                 (unsigned long long)i, (unsigned long long)reach,
                 (unsigned long long)far[i]);
  }
  /* delete every even key: the odd ones behind them are still found (each
  ** is still drained, not a fresh bucket), and nothing got bound twice */
  for (int k = 0; k < NK; k += 2) {
    snprintf(key, sizeof key, "r-%d", k);
    cr_assert_eq(sluice_limiter_delete(lim, key, strlen(key)), SLUICE_OK);
  }
  for (int k = 1; k < NK; k += 2) {
    snprintf(key, sizeof key, "r-%d", k);
    cr_assert_eq(take_all(lim, key, t), 0, "%s lost behind deleted keys",
                 key);
  }
  cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.live, NK / 2);
  cr_assert_eq(st.longest_reach, (int64_t)longest, "a reach shrank");
  /* a damaged reach reads as the window's end, as scans clamp it */
  raw_reach(&r, 0, UINT64_MAX);
  cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_STATS, &st),
               SLUICE_OK);
  cr_assert_eq(st.longest_reach, st.probe_window - 1);
  free(tab);
  free(far);
  close(r.fd);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
}

/* huge_pages=1: the table is mapped at a huge-page boundary and advised;
** SLUICE_CTL_SHM_HUGE says whether the system backs it (shmem_enabled),
** 0 for a fallback, -1 when not asked.  The store works the same. */
#include "huge.h"

Test(shm, huge_pages_reported_and_the_table_works) {
  static const char *const spec[2] = {"shm:fd=%d;capacity=300000",
                                      "shm:fd=%d;capacity=300000;huge_pages=1"};
  for (int asked = 0; asked < 2; asked++) {
    char store[96];
    sluice_limiter *lim;
    int64_t huge = 7;
    int fd = memfd_create("sluice-huge", 0);
    cr_assert(fd >= 0);
    snprintf(store, sizeof store, spec[asked], fd);
    cr_assert_eq(try_open(store, SLUICE_OPEN_CREATE, &lim, NULL, 0),
                 SLUICE_OK);
    cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_HUGE, &huge),
                 SLUICE_OK);
    cr_assert_eq(huge, asked ? sluice__huge_thp(1) : -1, "asked %d: %lld",
                 asked, (long long)huge);
    cr_assert_eq(take_all(lim, "h", SEC), 10);
    sluice_limiter_close(lim);
    close(fd);
  }
}

/* SLUICE_CTL_SHM_HUGE against what the kernel then does: a table reported
** on huge pages is mapped with them once its pages are touched, and one
** reported as a fallback is not.  Both kinds of table: a memfd follows
** shmem_enabled, a shm_open() file the /dev/shm mount's huge= option (the
** report used to read shmem_enabled for both, and said 1 for a /dev/shm
** table that a mount without huge= kept on 4 KiB pages). */
static int64_t pmd_mapped_kb(const char *path_end) {
  char line[512];
  int64_t kb = 0;
  int in = 0;
  FILE *f = fopen("/proc/self/smaps", "re");
  cr_assert_not_null(f);
  while (fgets(line, sizeof line, f)) {
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n')
      line[--n] = '\0';
    if (strchr(line, '-') && !strstr(line, "kB") &&
        strncmp(line, "VmFlags", 7) != 0 && strncmp(line, "THP", 3) != 0)
      in = n >= strlen(path_end) &&
           strcmp(line + n - strlen(path_end), path_end) == 0;
    else if (in && (strncmp(line, "ShmemPmdMapped:", 15) == 0 ||
                    strncmp(line, "FilePmdMapped:", 14) == 0))
      kb += atoll(strchr(line, ':') + 1);
  }
  fclose(f);
  return kb;
}

Test(shm, huge_page_report_matches_the_kernel) {
  char shm_path[64], store[160], path[80];
  snprintf(shm_path, sizeof shm_path, "/sluice-huge-%d", (int)getpid());
  for (int kind = 0; kind < 2; kind++) {
    sluice_limiter *lim;
    int64_t huge = 7, kb;
    int fd = -1;
    if (kind == 0) {
      shm_unlink(shm_path);
      snprintf(store, sizeof store,
               "shm:name=%s;create=1;capacity=300000;huge_pages=1", shm_path);
      snprintf(path, sizeof path, "/dev/shm%s", shm_path);
    } else {
      fd = memfd_create("sluice-huge-report", 0);
      cr_assert(fd >= 0);
      snprintf(store, sizeof store, "shm:fd=%d;capacity=300000;huge_pages=1",
               fd);
      snprintf(path, sizeof path, "/memfd:sluice-huge-report (deleted)");
    }
    cr_assert_eq(try_open(store, SLUICE_OPEN_CREATE, &lim, NULL, 0),
                 SLUICE_OK, "%s", store);
    cr_assert_eq(sluice_limiter_control(lim, SLUICE_CTL_SHM_HUGE, &huge),
                 SLUICE_OK);
    cr_assert(huge == 0 || huge == 1);
    for (int i = 0; i < 60000; i++) { /* keys in every 2 MiB of the table */
      char k[24];
      sluice_verdict v;
      snprintf(k, sizeof k, "hp-%d", i);
      cr_assert_eq(sluice_limiter_take(lim, k, strlen(k), &slow, 1, &v),
                   SLUICE_OK);
    }
    kb = pmd_mapped_kb(path);
    cr_assert_eq(kb > 0, huge == 1, "%s: reported %lld, %lld kB on huge "
                 "pages", kind ? "memfd" : "/dev/shm", (long long)huge,
                 (long long)kb);
    sluice_limiter_close(lim);
    if (fd >= 0)
      close(fd);
    else
      shm_unlink(shm_path);
  }
}

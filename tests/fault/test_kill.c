/*
** SIGKILL of workers (issue 9).  On every available cross-process backend
** (shm, lmdb), WORKERS processes hammer one shared store with the real
** clock: a hot GCRA bucket, a tenant lease set of LEASE_MAX slots (acquire,
** a short hold, release) and a penalty box tripped by each worker at its
** start.  The parent SIGKILLs a random worker every few milliseconds and
** starts a new one, for SECONDS seconds; then it checks, with a fresh
** limiter of its own:
**
**  - over-admission: the bucket admitted at most burst + rate * elapsed
**    (workers count admissions in shared memory after each decision, so a
**    kill can only make the count smaller: the check can miss, never lie);
**  - lease concurrency never exceeded LEASE_MAX while workers held leases
**    (same one-sided counting), and no lease outlived its TTL: with the
**    clock moved past the TTL, all LEASE_MAX slots are free;
**  - no box was lost: every box a worker reported tripped is still boxed;
**  - the table still takes new keys (a killed claimer left nothing held).
**
** Figures printed per backend: decisions, kills, violations.
*/
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "harness.h"
#include "../common/one_step.h"

#define WORKERS 4
#define LEASE_MAX 2
#define LEASE_TTL (30LL * 1000000000) /* far beyond any hold: no false alarms */
#define MAXGEN 4096

static int seconds = 3;

typedef struct shared {
  _Atomic long decisions, admitted, held, max_held;
  _Atomic long holding[WORKERS]; /* 1 while worker slot i counts a lease */
  _Atomic int boxed[MAXGEN];     /* generation g tripped box "box:g" */
  _Atomic int gens;
} shared;

static const sluice_gcra_params hot = {200, 1000000000, 50};
static const sluice_lease_params lp = {LEASE_MAX, LEASE_TTL};
static const sluice_penalty_params pp = {
    5, 60000000000LL, {600000000000LL, 3600000000000LL, SLUICE_FOREVER},
    86400000000000LL};

static void lease_keys(sluice_key *k, char names[][24]) {
  for (int i = 0; i < LEASE_MAX; i++) {
    snprintf(names[i], sizeof names[i], "{kill}:cc:%d", i);
    k[i].data = names[i];
    k[i].len = strlen(names[i]);
  }
}

static void box_key(int gen, char *buf, size_t len, sluice_key *k) {
  snprintf(buf, len, "{kill}:box:%d", gen);
  k->data = buf;
  k->len = strlen(buf);
}

static void worker(const char *uri, sluice_limiter *inherited, shared *sh,
                   int slot, int gen) {
  sluice_limiter *lim = inherited;
  sluice_key hk = {"{kill}:hot", 10}, lk[LEASE_MAX], bk;
  char lnames[LEASE_MAX][24], bname[32];
  uint64_t rng = (uint64_t)getpid() * 7919u;
  sluice_verdict v;
  sluice_op op;
  if (!lim && h_open(uri, NULL, &lim) != SLUICE_OK)
    _exit(3);
  lease_keys(lk, lnames);
  box_key(gen, bname, sizeof bname, &bk);
  op = (sluice_op){SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 1, &bk, &pp, 1, 0};
  if (op_decide(lim, &op, SLUICE_NOW, &v) == SLUICE_OK && !v.allowed)
    atomic_store(&sh->boxed[gen], 1);
  for (;;) {
    uint64_t r = h_rnd(&rng) % 8;
    if (r < 6) {
      op = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &hk, &hot, 1,
                       0};
      if (op_decide(lim, &op, SLUICE_NOW, &v) != SLUICE_OK)
        _exit(4);
      if (v.allowed)
        atomic_fetch_add(&sh->admitted, 1);
    } else {
      uint64_t id = ((uint64_t)gen << 32) | (h_rnd(&rng) & 0xffffffffu) | 1;
      op = (sluice_op){SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, LEASE_MAX, lk,
                       &lp, 0, id};
      if (op_decide(lim, &op, SLUICE_NOW, &v) != SLUICE_OK)
        _exit(5);
      if (v.allowed) {
        long h;
        atomic_store(&sh->holding[slot], 1); /* flag first: see header */
        h = atomic_fetch_add(&sh->held, 1) + 1;
        long m = atomic_load(&sh->max_held);
        while (h > m && !atomic_compare_exchange_weak(&sh->max_held, &m, h))
          ;
        if (h_rnd(&rng) % 4 == 0)
          usleep(200); /* hold a while, so that holds overlap */
        atomic_fetch_sub(&sh->held, 1);
        atomic_store(&sh->holding[slot], 0);
        op.kind = SLUICE_OP_LEASE_RELEASE;
        if (op_decide(lim, &op, SLUICE_NOW, &v) != SLUICE_OK)
          _exit(6);
      }
    }
    atomic_fetch_add(&sh->decisions, 1);
  }
}

static int64_t skew_ns;
static int64_t skewed_now(void *ud) {
  (void)ud;
  return h_real_ns() + skew_ns;
}

static void run_backend(const char *backend) {
  char uri[256], dir[256], bname[32];
  sluice_limiter *parent_lim = NULL, *check = NULL;
  sluice_clock *skewed;
  pid_t pids[WORKERS];
  int slot_gen[WORKERS];
  shared *sh;
  int64_t t0, t1, deadline;
  long kills = 0, before = h_violations;
  uint64_t rng = 99;
  int rc, i, shm_shared;

  h_store_uri(backend, "kill", uri, sizeof uri, dir, sizeof dir);
  rc = h_open(uri, NULL, &parent_lim);
  if (rc == SLUICE_ENOTSUP) {
    printf("kill on %s: skipped (compiled out)\n", backend);
    return;
  }
  REQUIRE(rc == SLUICE_OK, "open %s", uri);
  /* shm: children inherit the parent's limiter (documented fork-safe);
  ** lmdb must not be used across fork, so its children open their own. */
  shm_shared = strcmp(backend, "shm") == 0;
  if (!shm_shared) {
    sluice_limiter_close(parent_lim);
    parent_lim = NULL;
  }
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(sh != MAP_FAILED, "mmap");
  memset(sh, 0, sizeof *sh);

  t0 = h_real_ns();
  for (i = 0; i < WORKERS; i++) {
    int gen = atomic_fetch_add(&sh->gens, 1);
    slot_gen[i] = gen;
    pids[i] = fork();
    REQUIRE(pids[i] >= 0, "fork");
    if (pids[i] == 0)
      worker(uri, parent_lim, sh, i, gen);
  }
  deadline = t0 + (int64_t)seconds * 1000000000;
  while (h_real_ns() < deadline) {
    int w;
    usleep(2000 + (useconds_t)(h_rnd(&rng) % 20000));
    w = (int)(h_rnd(&rng) % WORKERS);
    kill(pids[w], SIGKILL);
    waitpid(pids[w], &rc, 0);
    VIOLATION_IF(!WIFSIGNALED(rc), "%s: worker exited by itself (status %d)",
                 backend, rc);
    /* One-sided: forget a lease the dead worker was counting. */
    if (atomic_exchange(&sh->holding[w], 0))
      atomic_fetch_sub(&sh->held, 1);
    kills++;
    if (atomic_load(&sh->gens) >= MAXGEN)
      break;
    slot_gen[w] = atomic_fetch_add(&sh->gens, 1);
    pids[w] = fork();
    REQUIRE(pids[w] >= 0, "fork");
    if (pids[w] == 0)
      worker(uri, parent_lim, sh, w, slot_gen[w]);
  }
  for (i = 0; i < WORKERS; i++) {
    kill(pids[i], SIGKILL);
    waitpid(pids[i], &rc, 0);
    kills++;
  }
  t1 = h_real_ns();
  sluice_limiter_close(parent_lim);

  /* Over-admission on the hot bucket. */
  {
    long adm = atomic_load(&sh->admitted);
    __extension__ __int128 lhs = (__int128)adm * hot.period_ns,
                           rhs = (__int128)hot.burst * hot.period_ns +
                                 (__int128)(t1 - t0) * hot.rate;
    VIOLATION_IF(lhs > rhs, "%s: hot bucket admitted %ld in %lld ms", backend,
                 adm, (long long)((t1 - t0) / 1000000));
    VIOLATION_IF(adm < hot.burst, "%s: only %ld admitted (workers not "
                 "running?)", backend, adm);
  }
  VIOLATION_IF(atomic_load(&sh->max_held) > LEASE_MAX,
               "%s: %ld leases held at once (max %d)", backend,
               atomic_load(&sh->max_held), LEASE_MAX);

  /* A fresh limiter whose clock is past every lease's TTL. */
  skew_ns = LEASE_TTL + 1000000000;
  REQUIRE(sluice_clock_custom(skewed_now, NULL, &skewed) == 0, "clock");
  {
    sluice_limiter_options o = {0};
    char err[256];
    sluice_key lk[LEASE_MAX];
    char lnames[LEASE_MAX][24];
    sluice_op op;
    sluice_verdict v;
    int boxes = 0, lost = 0, gens = atomic_load(&sh->gens);
    o.store = uri;
    o.clock = skewed;
    rc = sluice_limiter_open(&o, &check, err, sizeof err);
    REQUIRE(rc == SLUICE_OK, "reopen %s: %s", uri, err);
    lease_keys(lk, lnames);
    for (i = 0; i < LEASE_MAX; i++) {
      op = (sluice_op){SLUICE_ALGO_LEASE, SLUICE_OP_ACQUIRE, LEASE_MAX, lk,
                       &lp, 0, UINT64_C(0xfeed0000) + (uint64_t)i};
      REQUIRE(op_decide(check, &op, SLUICE_NOW, &v) == SLUICE_OK, "acquire");
      VIOLATION_IF(!v.allowed, "%s: slot %d still held past its TTL "
                   "(leaked lease)", backend, i);
    }
    for (int g = 0; g < gens && g < MAXGEN; g++) {
      sluice_key bk;
      if (!atomic_load(&sh->boxed[g]))
        continue;
      boxes++;
      box_key(g, bname, sizeof bname, &bk);
      op = (sluice_op){SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 1, &bk, &pp, 0,
                       0};
      REQUIRE(op_decide(check, &op, SLUICE_NOW, &v) == SLUICE_OK, "check");
      lost += v.allowed;
    }
    VIOLATION_IF(lost > 0, "%s: %d of %d boxes lost", backend, lost, boxes);
    VIOLATION_IF(boxes == 0, "%s: no worker ever tripped its box", backend);
    for (i = 0; i < 200; i++) {
      char kn[32];
      sluice_key k;
      sluice_gcra_params g = {1, 1000000000, 5};
      snprintf(kn, sizeof kn, "{kill}:after:%d", i);
      k.data = kn;
      k.len = strlen(kn);
      op = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &g, 1, 0};
      rc = op_decide(check, &op, SLUICE_NOW, &v);
      VIOLATION_IF(rc != SLUICE_OK || !v.allowed,
                   "%s: new key %d after the kills: %s", backend, i,
                   sluice_strerror(rc));
    }
    printf("kill on %s: decisions=%ld kills=%ld admitted=%ld (bound %lld) "
           "max_leases_held=%ld boxes_checked=%d violations=%ld\n",
           backend, atomic_load(&sh->decisions), kills,
           atomic_load(&sh->admitted),
           (long long)(hot.burst + (t1 - t0) * hot.rate / hot.period_ns),
           atomic_load(&sh->max_held), boxes, h_violations - before);
    sluice_limiter_close(check);
  }
  sluice_clock_free(skewed);
  munmap(sh, sizeof *sh);
  h_store_cleanup(backend, "kill", dir);
}

int main(int argc, char **argv) {
  int ran = 0;
  if (getenv("SLUICE_KILL_SECONDS"))
    seconds = atoi(getenv("SLUICE_KILL_SECONDS"));
  for (size_t i = 0; i < sizeof h_backends / sizeof h_backends[0]; i++) {
    if (!h_backends[i].cross_process)
      continue;
    if (argc > 1 && strcmp(argv[1], h_backends[i].name) != 0)
      continue;
    run_backend(h_backends[i].name);
    ran++;
  }
  printf("figures: violations=%ld\n", h_violations);
  return h_violations ? 1 : 0;
}

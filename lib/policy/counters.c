/*
** Where a policy's counters live: in the policy itself, or in a named
** shared-memory object that every process of a host counts into.  Prefork
** servers (nginx, ledger-api) answer a scrape from whichever worker took
** the connection; with per-process counters successive scrapes disagree and
** Prometheus sees counters go backwards.  A shared segment of plain atomics
** makes any worker's metrics text the host's monotonic totals.
**
** The segment is created on first open and initialised by whoever wins its
** claim word (so a creator killed before finishing does not wedge it), then
** published by a release store of the magic.  It is never unlinked here:
** the totals must outlive reloads and binary upgrades.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy_int.h"

#define CTR_MAGIC UINT64_C(0x31727463636c73) /* "slcctr1" */
#define CTR_LAYOUT 1u
#define CTR_WAIT_MS 1000

typedef struct ctr_segment {
  _Atomic uint64_t magic; /* stored last, with release order */
  _Atomic uint32_t init_claim;
  uint32_t layout;
  uint64_t counters_bytes;
  uint32_t ntiers;
  char tiers[SLUICE_POLICY_TIERS_MAX][SLUICE_POLICY_NAME_MAX + 1];
  sluice__counters c;
} ctr_segment;

static void nap_ms(void) {
  struct timespec ts = {0, 1000000L};
  nanosleep(&ts, NULL);
}

static int fail(char *msg, size_t len, int rc, const char *fmt,
                const char *name, int err) {
  if (msg && len)
    snprintf(msg, len, fmt, name, err ? strerror(err) : "");
  return rc;
}

static int same_tiers(const ctr_segment *g, const sluice_policy_config *cfg) {
  int t;
  if (g->ntiers != (uint32_t)cfg->ntiers)
    return 0;
  for (t = 0; t < cfg->ntiers; t++)
    if (strncmp(g->tiers[t], cfg->tiers[t].name, sizeof g->tiers[t]) != 0)
      return 0;
  return 1;
}

static void init_segment(ctr_segment *g, const sluice_policy_config *cfg) {
  int t;
  g->layout = CTR_LAYOUT;
  g->counters_bytes = sizeof g->c;
  g->ntiers = (uint32_t)cfg->ntiers;
  for (t = 0; t < cfg->ntiers; t++)
    memcpy(g->tiers[t], cfg->tiers[t].name, sizeof g->tiers[t]);
  atomic_store_explicit(&g->magic, CTR_MAGIC, memory_order_release);
}

/* Map the object, waiting briefly for a creator between create and
** ftruncate. */
static int map_segment(int fd, const char *name, ctr_segment **out, char *msg,
                       size_t len) {
  struct stat sb;
  void *m;
  int i;
  for (i = 0;; i++) {
    if (fstat(fd, &sb) != 0)
      return fail(msg, len, SLUICE_EIO, "counters %s: stat: %s", name, errno);
    if ((size_t)sb.st_size >= sizeof(ctr_segment))
      break;
    if (i >= CTR_WAIT_MS)
      return fail(msg, len, SLUICE_ECORRUPT,
                  "counters %s: too small for this version%s", name, 0);
    nap_ms();
  }
  m = mmap(NULL, sizeof(ctr_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
           0);
  if (m == MAP_FAILED)
    return fail(msg, len, SLUICE_EIO, "counters %s: map: %s", name, errno);
  *out = m;
  return SLUICE_OK;
}

static int check_segment(ctr_segment *g, const sluice_policy_config *cfg,
                         const char *name, char *msg, size_t len) {
  uint32_t zero = 0;
  int i;
  for (i = 0; atomic_load_explicit(&g->magic, memory_order_acquire) == 0;
       i++) {
    if (atomic_compare_exchange_strong(&g->init_claim, &zero, 1)) {
      init_segment(g, cfg);
      break;
    }
    if (i >= CTR_WAIT_MS)
      return fail(msg, len, SLUICE_EBUSY,
                  "counters %s: its creator never finished%s", name, 0);
    nap_ms();
  }
  if (atomic_load_explicit(&g->magic, memory_order_acquire) != CTR_MAGIC)
    return fail(msg, len, SLUICE_ECORRUPT,
                "counters %s: not a sluice counters segment%s", name, 0);
  if (g->layout != CTR_LAYOUT || g->counters_bytes != sizeof g->c)
    return fail(msg, len, SLUICE_EVERSION,
                "counters %s: made by another sluice version%s", name, 0);
  if (!same_tiers(g, cfg))
    return fail(msg, len, SLUICE_ECONFIG,
                "counters %s: made for other tiers (name a new segment when "
                "the tiers change)%s",
                name, 0);
  return SLUICE_OK;
}

int sluice__counters_attach(sluice_policy *p, const char *uri, char *msg,
                            size_t msglen) {
  char name[256];
  const char *v;
  size_t n;
  ctr_segment *g = NULL;
  int fd, rc;

  p->ctr = &p->own;
  if (!uri || !uri[0])
    return SLUICE_OK;
  if (strncmp(uri, "shm:", 4) != 0 ||
      sluice_uri_param(uri + 4, "name", &v, &n) != SLUICE_OK || n < 2 ||
      n >= sizeof name || v[0] != '/' || memchr(v + 1, '/', n - 1))
    return fail(msg, msglen, SLUICE_EINVAL,
                "counters: expected shm:name=/NAME (NAME without '/')%s%s", "",
                0);
  memcpy(name, v, n);
  name[n] = '\0';
  fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    if (ftruncate(fd, (off_t)sizeof(ctr_segment)) != 0) {
      rc = fail(msg, msglen, SLUICE_EIO, "counters %s: size: %s", name, errno);
      shm_unlink(name);
      close(fd);
      return rc;
    }
  } else if (errno == EEXIST) {
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  }
  if (fd < 0)
    return fail(msg, msglen, errno == EACCES ? SLUICE_EPERM : SLUICE_EIO,
                "counters %s: open: %s", name, errno);
  rc = map_segment(fd, name, &g, msg, msglen);
  close(fd); /* the mapping keeps the object */
  if (rc != SLUICE_OK)
    return rc;
  rc = check_segment(g, &p->cfg, name, msg, msglen);
  if (rc != SLUICE_OK) {
    munmap(g, sizeof *g);
    return rc;
  }
  p->ctr_map = g;
  p->ctr_bytes = sizeof *g;
  p->ctr = &g->c;
  return SLUICE_OK;
}

void sluice__counters_detach(sluice_policy *p) {
  if (p->ctr_map)
    munmap(p->ctr_map, p->ctr_bytes);
  p->ctr_map = NULL;
  p->ctr = &p->own;
}

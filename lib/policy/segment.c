/*
** Named shared-memory segments of the policy layer (the host-wide counters,
** the deny cache): "shm:name=/NAME" opened or created, sized, mapped and
** initialised once.  Every segment starts with a sluice__seg_head.
**
** The creator is whoever wins the head's claim word, not whoever created
** the object, so a process killed between shm_open and its initialisation
** does not wedge the segment; the initialiser publishes it by a release
** store of the magic.  Segments are never unlinked here: what they hold
** must outlive reloads and binary upgrades.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy_int.h"

#define SEG_WAIT_MS 1000

void sluice__seg_nap(void) {
  struct timespec ts = {0, 1000000L};
  nanosleep(&ts, NULL);
}

int sluice__seg_fail(char *msg, size_t len, int rc, const char *what,
                     const char *name, const char *problem, int err) {
  if (msg && len)
    snprintf(msg, len, "%s %s: %s%s%s", what, name, problem, err ? ": " : "",
             err ? strerror(err) : "");
  return rc;
}

int sluice__seg_name(const char *what, const char *uri, char name[256],
                     char *msg, size_t len) {
  const char *v;
  size_t n;
  if (!uri || strncmp(uri, "shm:", 4) != 0 ||
      sluice_uri_param(uri + 4, "name", &v, &n) != SLUICE_OK || n < 2 ||
      n >= 256 || v[0] != '/' || memchr(v + 1, '/', n - 1)) {
    if (msg && len)
      snprintf(msg, len, "%s: expected shm:name=/NAME (NAME without '/')",
               what);
    return SLUICE_EINVAL;
  }
  memcpy(name, v, n);
  name[n] = '\0';
  return SLUICE_OK;
}

/* Map the object, waiting briefly for a creator between create and
** ftruncate. */
static int map_object(int fd, const char *what, const char *name, size_t size,
                      void **out, char *msg, size_t len) {
  struct stat sb;
  void *m;
  int i;
  for (i = 0;; i++) {
    if (fstat(fd, &sb) != 0)
      return sluice__seg_fail(msg, len, SLUICE_EIO, what, name, "stat", errno);
    if ((size_t)sb.st_size >= size)
      break;
    if (i >= SEG_WAIT_MS)
      return sluice__seg_fail(msg, len, SLUICE_ECORRUPT, what, name,
                              "smaller than this version makes it (another version, or other sizes)", 0);
    sluice__seg_nap();
  }
  m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED)
    return sluice__seg_fail(msg, len, SLUICE_EIO, what, name, "map", errno);
  *out = m;
  return SLUICE_OK;
}

/* Initialise (claim winner) or wait for the initialiser; then check the
** magic. */
static int publish(sluice__seg_head *h, uint64_t magic, const char *what,
                   const char *name, sluice__seg_init_fn init, void *arg,
                   char *msg, size_t len) {
  uint32_t zero = 0;
  int i;
  for (i = 0; atomic_load_explicit(&h->magic, memory_order_acquire) == 0;
       i++) {
    if (atomic_compare_exchange_strong(&h->init_claim, &zero, 1)) {
      init(h, arg);
      atomic_store_explicit(&h->magic, magic, memory_order_release);
      break;
    }
    zero = 0;
    if (i >= SEG_WAIT_MS)
      return sluice__seg_fail(msg, len, SLUICE_EBUSY, what, name,
                              "its creator never finished", 0);
    sluice__seg_nap();
  }
  if (atomic_load_explicit(&h->magic, memory_order_acquire) != magic)
    return sluice__seg_fail(msg, len, SLUICE_ECORRUPT, what, name,
                            "not a segment of this kind", 0);
  return SLUICE_OK;
}

int sluice__seg_attach(const char *what, const char *uri, size_t size,
                       uint64_t magic, sluice__seg_init_fn init, void *arg,
                       void **out, char *msg, size_t len) {
  char name[256];
  void *m = NULL;
  int fd, rc;

  *out = NULL;
  if ((rc = sluice__seg_name(what, uri, name, msg, len)) != SLUICE_OK)
    return rc;
  fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    if (ftruncate(fd, (off_t)size) != 0) {
      rc = sluice__seg_fail(msg, len, SLUICE_EIO, what, name, "size", errno);
      shm_unlink(name);
      close(fd);
      return rc;
    }
  } else if (errno == EEXIST) {
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  }
  if (fd < 0)
    return sluice__seg_fail(msg, len,
                            errno == EACCES ? SLUICE_EPERM : SLUICE_EIO, what,
                            name, "open", errno);
  rc = map_object(fd, what, name, size, &m, msg, len);
  close(fd); /* the mapping keeps the object */
  if (rc != SLUICE_OK)
    return rc;
  rc = publish(m, magic, what, name, init, arg, msg, len);
  if (rc != SLUICE_OK) {
    munmap(m, size);
    return rc;
  }
  *out = m;
  return SLUICE_OK;
}

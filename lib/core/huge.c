/* Huge pages (huge.h).  Transparent huge pages only: MAP_HUGETLB needs
** pages reserved by the administrator (vm.nr_hugepages), which a library
** cannot count on; THP in "madvise" mode (Debian's default) gives a region
** advised MADV_HUGEPAGE its huge pages as they are faulted in. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "huge.h"

/* The selected mode is the bracketed word: "always [madvise] never". */
int sluice__huge_thp(int shmem) {
  const char *path = shmem ? "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
                           : "/sys/kernel/mm/transparent_hugepage/enabled";
  char buf[160], *open, *close;
  size_t n;
  FILE *f = fopen(path, "re");
  if (!f)
    return 0;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  open = strchr(buf, '[');
  close = open ? strchr(open, ']') : NULL;
  if (!close)
    return 0;
  *close = '\0';
  open++;
  if (shmem) /* always, within_size, advise, force: advised regions get them */
    return strcmp(open, "never") != 0 && strcmp(open, "deny") != 0;
  return strcmp(open, "always") == 0 || strcmp(open, "madvise") == 0;
}

void *sluice__huge_map(size_t bytes, size_t *mapped, int *huge) {
  size_t len = (bytes + SLUICE__HUGE_PAGE - 1) & ~(SLUICE__HUGE_PAGE - 1);
  size_t head;
  char *p = mmap(NULL, len + SLUICE__HUGE_PAGE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  *huge = 0;
  if (p == MAP_FAILED)
    return NULL;
  /* Trim to a huge-page boundary at both ends: a huge page needs an
  ** aligned 2 MiB of the region. */
  head = (SLUICE__HUGE_PAGE - ((size_t)p & (SLUICE__HUGE_PAGE - 1))) &
         (SLUICE__HUGE_PAGE - 1);
  if (head)
    munmap(p, head);
  munmap(p + head + len, SLUICE__HUGE_PAGE - head);
  p += head;
  *mapped = len;
  *huge = sluice__huge_advise(p, len, 0);
  return p;
}

void sluice__huge_unmap(void *p, size_t mapped) {
  if (p)
    munmap(p, mapped);
}

/* The kernel's own answer for the mapping that starts at p: the
** THPeligible line of its entry in /proc/self/smaps (Linux 5.0 on).  For
** a shared mapping the sysfs switch is not the whole story: memfd and
** SysV memory follow shmem_enabled, but a file on a tmpfs mount (shm_open's
** /dev/shm) follows that mount's huge= option, "never" unless the
** administrator set it.  -1 when the file or the line is not there. */
static int huge_eligible(const void *p) {
  char line[256], want[40];
  size_t wl;
  int in = 0, got = -1;
  FILE *f = fopen("/proc/self/smaps", "re");
  if (!f)
    return -1;
  snprintf(want, sizeof want, "%lx-", (unsigned long)(uintptr_t)p);
  wl = strlen(want);
  /* Every entry has the line where any has it: the first after ours is
  ** ours. */
  while (fgets(line, sizeof line, f)) {
    if (!in) {
      in = strncmp(line, want, wl) == 0;
    } else if (strncmp(line, "THPeligible:", 12) == 0) {
      got = atoi(line + 12) != 0;
      break;
    }
  }
  fclose(f);
  return got;
}

int sluice__huge_advise(void *p, size_t bytes, int shmem) {
  int e;
  if (madvise(p, bytes, MADV_HUGEPAGE) != 0)
    return 0;
  e = shmem ? huge_eligible(p) : -1;
  return e >= 0 ? e : sluice__huge_thp(shmem);
}

void *sluice__huge_map_shared(int fd, size_t bytes) {
  /* Reserve an aligned range, then map the file over its start. */
  char *r = mmap(NULL, bytes + SLUICE__HUGE_PAGE, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0), *p;
  size_t head;
  if (r == MAP_FAILED)
    return MAP_FAILED;
  head = (SLUICE__HUGE_PAGE - ((size_t)r & (SLUICE__HUGE_PAGE - 1))) &
         (SLUICE__HUGE_PAGE - 1);
  p = mmap(r + head, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
           0);
  if (p == MAP_FAILED) {
    munmap(r, bytes + SLUICE__HUGE_PAGE);
    return MAP_FAILED;
  }
  if (head)
    munmap(r, head);
  /* The reservation's tail past the mapping (page-rounded). */
  {
    size_t pg = 4096, end = (head + bytes + pg - 1) & ~(pg - 1);
    if (end < bytes + SLUICE__HUGE_PAGE)
      munmap(r + end, bytes + SLUICE__HUGE_PAGE - end);
  }
  return p;
}

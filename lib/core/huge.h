/* Huge pages for big tables (the mem and shm stores' huge_pages=1).  A
** decision on a table of hundreds of MB misses the TLB as well as the
** cache on 4 KiB pages; on 2 MiB pages the page walk mostly hits.  What
** the system gives is reported, never assumed: see sluice__huge_map(). */
#ifndef SLUICE_LIB_HUGE_H
#define SLUICE_LIB_HUGE_H

#include <stddef.h>

#define SLUICE__HUGE_PAGE ((size_t)2 << 20)

/* Does the system back madvise(MADV_HUGEPAGE) regions with huge pages?
** shmem: for shared mappings (shmem_enabled), else anonymous ones
** (enabled).  0 also when the kernel has no transparent huge pages. */
int sluice__huge_thp(int shmem);

/* An anonymous private mapping of at least `bytes` (rounded up to whole
** huge pages), aligned to a huge page and advised MADV_HUGEPAGE, zeroed.
** *mapped: its length, for sluice__huge_unmap().  *huge: 1 when the
** advice was taken and the system backs it (sluice__huge_thp(0)), 0 when
** the mapping has normal pages.  NULL when mmap fails. */
void *sluice__huge_map(size_t bytes, size_t *mapped, int *huge);
void sluice__huge_unmap(void *p, size_t mapped);

/* Advise an existing mapping; 1 when the system backs it with huge pages,
** 0 when it stays on normal pages.  shmem: asks the kernel about this very
** mapping (its THPeligible in /proc/self/smaps), since a tmpfs file
** follows its mount's huge= option, not shmem_enabled; sysfs where the
** kernel cannot say. */
int sluice__huge_advise(void *p, size_t bytes, int shmem);

/* mmap(NULL, bytes, RW, MAP_SHARED, fd, 0) at a huge-page-aligned address
** (a huge page of a file needs one), or MAP_FAILED. */
void *sluice__huge_map_shared(int fd, size_t bytes);

#endif

/* A program built only from what `meson install` puts in a prefix, with
** the flags `pkg-config sluice` gives: the backends' headers are spelled
** as installed (<sluice/sluice_mem.h>, ...), as in the tree and the docs.
** Exits 0 only if a decision and a mem store control op both work. */
#include <sluice.h>
#include <sluice/sluice_lmdb.h>
#include <sluice/sluice_mem.h>
#include <sluice/sluice_redis.h>
#include <sluice/sluice_shm.h>

int main(void) {
  sluice_limiter *lim;
  sluice_verdict v;
  sluice_gcra_params p = {1, 1000000000, 1};
  int64_t held = -1;
  /* One struct from each backend's header, so each must compile. */
  sluice_lmdb_stats ls;
  sluice_shm_stats ss;
  sluice_redis_stats rs;
  (void)ls; (void)ss; (void)rs;
  if (sluice_limiter_open(NULL, &lim, NULL, 0) != SLUICE_OK)
    return 1;
  if (sluice_limiter_take(lim, "k", 1, &p, 1, &v) != SLUICE_OK || !v.allowed)
    return 2;
  if (sluice_limiter_control(lim, SLUICE_CTL_MEM_COUNT, &held) != SLUICE_OK ||
      held != 1)
    return 3;
  sluice_limiter_close(lim);
  return 0;
}

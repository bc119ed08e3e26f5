#include <sluice.h>

/* Exit 0 only if a decision can be made through the subproject's library. */
int main(void) {
  sluice_limiter *lim;
  sluice_verdict v;
  sluice_gcra_params p = {1, 1000000000, 1};
  if (sluice_limiter_open(NULL, &lim, NULL, 0) != SLUICE_OK)
    return 1;
  if (sluice_limiter_take(lim, "k", 1, &p, 1, &v) != SLUICE_OK || !v.allowed)
    return 2;
  if (sluice_limiter_take(lim, "k", 1, &p, 1, &v) != SLUICE_OK || v.allowed)
    return 3;
  sluice_limiter_close(lim);
  return 0;
}

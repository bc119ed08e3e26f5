/*
** sluice_policy_decide_many(): n requests decided in order, at one time,
** each as sluice_policy_decide() decides it.  (The built-in flow's
** requests were batched into one store call; a route of declared limits
** may run one program per hash-tag group, with a later group's refusal
** given back to the earlier ones, so its requests go one by one.)
*/
#include "flow.h"

int sluice_policy_decide_many(sluice_policy *p, int n,
                              const sluice_request *qs, sluice_decision *ds,
                              int *rcs) {
  int64_t now;
  int i;
  if (!p || n < 0 || (n > 0 && (!qs || !ds || !rcs)))
    return SLUICE_EINVAL;
  if (n == 0)
    return SLUICE_OK;
  now = sluice_limiter_now(p->lim);
  for (i = 0; i < n; i++)
    rcs[i] = sluice__decide_at(p, &qs[i], now, &ds[i]);
  return SLUICE_OK;
}

/*
** The degraded limiter: what decides the tier requests while the primary
** store fails (decide.c, "Degraded mode").  In process memory by default:
** then a host of N workers admits N times degraded_percent of the tier
** rate.
** Given "shm:name=/NAME", it is a shm store (backends/shm) shared by
** every process of the host that names it, so the host admits the
** configured share whatever the number of workers.  shm takes no locks
** and has no clock (decisions carry the policy's time), so it keeps
** working exactly when the real store does not.
*/
#include <stdio.h>
#include <string.h>

#include "policy_int.h"

int sluice__degraded_open(sluice_policy *p, const char *uri, char *msg,
                          size_t len) {
  sluice_limiter_options lo;
  char name[256], err[200];
  int rc;

  memset(&lo, 0, sizeof lo);
  if (!uri || !uri[0]) {
    lo.store = "mem:max_keys=1048576";
    rc = sluice_limiter_open(&lo, &p->local);
    if (rc != SLUICE_OK && msg && len)
      snprintf(msg, len, "cannot open the degraded limiter");
    return rc;
  }
  /* Only shm: a store that can fail like the primary would defeat it. */
  if ((rc = sluice__seg_name("degraded_store", uri, name, msg, len)))
    return rc;
  lo.store = uri;
  lo.flags = SLUICE_OPEN_CREATE;
  err[0] = '\0';
  rc = sluice_limiter_open2(&lo, &p->local, err, sizeof err);
  if (rc != SLUICE_OK && msg && len)
    snprintf(msg, len, "degraded_store %s: %s", name,
             err[0] ? err : sluice_strerror(rc));
  return rc;
}

/*
** Staged rollout: which features a decision enforces.  Shadow mode used to
** be all or nothing; the spec's rollout reviews the numbers "before enabling
** the penalty box", so each feature can stay in shadow on its own, for
** every request (shadow_features) or for those the file's shadow_when
** entries match (shadow_when.c).
*/
#include <string.h>

#include "declared.h"
#include "policy_int.h"

int sluice__shadow_feature_of(int outcome) {
  switch (outcome) {
  case SLUICE_OUTCOME_THROTTLED:
    return SLUICE_SHADOW_BUCKETS;
  case SLUICE_OUTCOME_BOXED:
  case SLUICE_OUTCOME_SUSPENDED:
    return SLUICE_SHADOW_PENALTY;
  case SLUICE_OUTCOME_CONCURRENCY:
  case SLUICE_OUTCOME_CONFLICT:
    return SLUICE_SHADOW_LEASES;
  case SLUICE_OUTCOME_UNAVAILABLE:
    return SLUICE_SHADOW_FAIL_CLOSED;
  default:
    return 0;
  }
}

unsigned sluice__shadow_mask(const sluice__conf *c, int forced) {
  int64_t m = c->shadow || forced ? SLUICE_SHADOW_ALL : c->shadow_features;
  return (unsigned)(m & SLUICE_SHADOW_ALL);
}

int sluice__shadow_past_box(unsigned mask) {
  /* A box whose enforcement is off does not end the decision while a
  ** later check (bucket, lease) is enforced: that one still applies. */
  const unsigned later = SLUICE_SHADOW_BUCKETS | SLUICE_SHADOW_LEASES;
  return (mask & SLUICE_SHADOW_PENALTY) && (mask & later) != later;
}

int sluice_policy_shadow_features(const sluice_policy *p, const char *tier) {
  unsigned m;
  if (!p)
    return -1;
  m = sluice__shadow_mask(&p->cfg, p->shadow);
  if (tier && p->decl) /* the file's shadow_when entries naming the tier */
    m |= sluice__shadow_when_tier(p->decl, tier);
  return (int)(m & SLUICE_SHADOW_ALL);
}

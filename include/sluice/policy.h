/* sluice/policy.h -- placeholder until the policy layer lands. */
#ifndef SLUICE_POLICY_H
#define SLUICE_POLICY_H
#endif

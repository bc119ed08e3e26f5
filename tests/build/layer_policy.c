/* The control of tests/build/layer_links.sh: a program that loads a policy
** file needs libconfig, so its static link without -lconfig must fail.
** If it did not, the check that the mem-only program links without
** libconfig would prove nothing. */
#include <sluice.h>

int main(int argc, char **argv) {
  sluice_policy_config *cfg = NULL;
  char err[256];
  int rc = argc > 1 && sluice_policy_config_new(&cfg, argv[1], err, sizeof err);
  sluice_policy_config_free(cfg);
  return rc;
}

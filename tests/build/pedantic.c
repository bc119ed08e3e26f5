/* The public headers must compile clean as strict ISO C11 with every
** warning on: users include them with flags we do not control. */
#include <sluice.h>

int main(void) {
  unsigned hex = 0;
  sluice_version(&hex);
  return hex == SLUICE_VERSION_HEX ? 0 : 1;
}

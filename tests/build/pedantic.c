/* The public headers must compile clean as strict ISO C11 with every
** warning on: users include them with flags we do not control. */
#include <sluice.h>

int main(void) { return sluice_version() == SLUICE_VERSION_HEX ? 0 : 1; }

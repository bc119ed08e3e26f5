#include "sluice/version.h"

unsigned sluice_version(void) { return SLUICE_VERSION_HEX; }
const char *sluice_version_string(void) { return SLUICE_VERSION_STRING; }

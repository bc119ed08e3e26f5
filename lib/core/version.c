#include "sluice/version.h"

const char *sluice_version(unsigned *hex) {
  if (hex)
    *hex = SLUICE_VERSION_HEX;
  return SLUICE_VERSION_STRING;
}

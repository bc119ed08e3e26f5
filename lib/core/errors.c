/* Error strings, generated from the one X-macro so they cannot drift. */
#include "sluice/errno.h"

const char *sluice_strerror(int err) {
  switch (err) {
  case SLUICE_OK:
    return "success";
#define SLUICE__ERR_STR(name, code, msg)                                       \
  case SLUICE_##name:                                                          \
    return msg;
    SLUICE_ERRNO_MAP(SLUICE__ERR_STR)
#undef SLUICE__ERR_STR
  default:
    return "unknown error";
  }
}

const char *sluice_err_name(int err) {
  switch (err) {
  case SLUICE_OK:
    return "SLUICE_OK";
#define SLUICE__ERR_NAME(name, code, msg)                                      \
  case SLUICE_##name:                                                          \
    return "SLUICE_" #name;
    SLUICE_ERRNO_MAP(SLUICE__ERR_NAME)
#undef SLUICE__ERR_NAME
  default:
    return "SLUICE_UNKNOWN";
  }
}

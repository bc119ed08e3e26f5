/* The shm backend compiled out: it is still found by name, and says why it
** cannot open, so a caller gets SLUICE_ENOTSUP rather than "unknown". */
#include "sluice.h"
#include "backends.h"

static int shm_stub_open(const sluice_backend *b, const char *uri,
                          const sluice_store_config *cfg, sluice_store *s) {
  (void)b;
  (void)uri;
  (void)cfg;
  return sluice_store_seterr(s, SLUICE_ENOTSUP, 0,
                             "the shm backend is not built into this library");
}

const sluice_backend sluice__backend_shm = {
    SLUICE_BACKEND_VERSION, (int)sizeof(sluice_store), "shm", NULL,
    shm_stub_open};

/* The lmdb backend compiled out: it is still found by name, and says why it
** cannot open, so a caller gets SLUICE_ENOTSUP rather than "unknown". */
#include "sluice.h"
#include "backends.h"

static int lmdb_stub_open(const sluice_backend *b, const char *uri,
                          const sluice_store_config *cfg, sluice_store *s) {
  (void)b;
  (void)uri;
  (void)cfg;
  return sluice_store_seterr(s, SLUICE_ENOTSUP, 0,
                             "the lmdb backend is not built into this library");
}

const sluice_backend sluice__backend_lmdb = {
    SLUICE_BACKEND_VERSION, (int)sizeof(sluice_store), "lmdb", NULL,
    lmdb_stub_open};

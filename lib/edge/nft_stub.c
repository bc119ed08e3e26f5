/* The nftables sink built without libnftables (or with -Dnft=disabled):
** the sink's thread and its transactions (nft_worker.c) are these, so
** sluice_nft_open() checks its options and the state file as always, then
** answers SLUICE_ENOTSUP where it would create the schema; no handle is
** ever made.  sluice_nft_schema() is real (nft_text.c). */
#include <stdio.h>

#include "nft_int.h"

int sluice__nft_create(sluice_nft *s) {
  snprintf(s->lasterr, sizeof s->lasterr, "built without libnftables");
  return SLUICE_ENOTSUP;
}

int sluice__nft_run(sluice_nft *s, const char *cmds) {
  (void)s;
  return cmds ? SLUICE_ENOTSUP : SLUICE_OK;
}

void *sluice__nft_thread(void *arg) { return arg; }

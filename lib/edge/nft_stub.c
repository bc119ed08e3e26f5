/* The nftables sink compiled out (no libnftables, or -Dnft=disabled): the
** API is there and says so, SLUICE_ENOTSUP, rather than failing to link.
** sluice_nft_schema() is real (nft_text.c). */
#include "sluice/nft.h"

int sluice_nft_open(const sluice_nft_options *opts, sluice_nft **out) {
  (void)opts;
  if (out)
    *out = NULL;
  return SLUICE_ENOTSUP;
}

void sluice_nft_close(sluice_nft *s) { (void)s; }

void sluice_nft_on_event(void *userdata, const sluice_event *ev) {
  (void)userdata;
  (void)ev;
}

int sluice_nft_reconcile(sluice_nft *s, sluice_policy *p) {
  (void)s;
  (void)p;
  return SLUICE_ENOTSUP;
}

int sluice_nft_sync(sluice_nft *s, int64_t timeout_ms) {
  (void)s;
  (void)timeout_ms;
  return SLUICE_ENOTSUP;
}

int sluice_nft_stats_get(const sluice_nft *s, sluice_nft_stats *out) {
  (void)s;
  (void)out;
  return SLUICE_ENOTSUP;
}

int sluice_nft_last_error(const sluice_nft *s, char *buf, size_t len) {
  (void)s;
  (void)buf;
  (void)len;
  return SLUICE_ENOTSUP;
}

int sluice_nft_metrics(const sluice_nft *s, char *buf, size_t len,
                       size_t *needed) {
  (void)s;
  (void)buf;
  (void)len;
  (void)needed;
  return SLUICE_ENOTSUP;
}

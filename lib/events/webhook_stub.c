/* The webhook sink compiled out (no libcurl, or -Dwebhook=disabled): the
** API is there and says so, SLUICE_ENOTSUP, rather than failing to link. */
#include "sluice/webhook.h"

int sluice_webhook_open(const sluice_webhook_options *opts,
                        sluice_webhook **out) {
  (void)opts;
  if (out)
    *out = NULL;
  return SLUICE_ENOTSUP;
}

void sluice_webhook_close(sluice_webhook *w) { (void)w; }

void sluice_webhook_on_event(void *userdata, const sluice_event *ev) {
  (void)userdata;
  (void)ev;
}

int sluice_webhook_stats_get(const sluice_webhook *w,
                             sluice_webhook_stats *out) {
  (void)w;
  (void)out;
  return SLUICE_ENOTSUP;
}

int sluice_webhook_metrics(const sluice_webhook *w, char *buf, size_t len,
                           size_t *needed) {
  (void)w;
  (void)buf;
  (void)len;
  (void)needed;
  return SLUICE_ENOTSUP;
}

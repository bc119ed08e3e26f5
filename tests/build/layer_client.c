/* A client that only plans retries: it must link libsluice-client alone,
** without libconfig, jansson, libcurl or any store library (tests/build/
** layer_links.sh).  Exit 0 when a 429 with Retry-After: 2 is retried after
** at least 2 s. */
#include <sluice.h>

int main(void) {
  sluice_backoff *b;
  sluice_backoff_input in = {0};
  sluice_backoff_plan plan;
  if (sluice_backoff_open(NULL, &b) != SLUICE_OK)
    return 1;
  in.attempt = 1;
  in.status = 429;
  in.flags = SLUICE_REQ_IDEMPOTENT;
  in.retry_after = "2";
  if (sluice_backoff_plan_next(b, &in, &plan) != SLUICE_OK)
    return 2;
  sluice_backoff_close(b);
  if (plan.action != SLUICE_BACKOFF_RETRY || plan.wait_ms < 2000)
    return 3;
  return sluice_strerror(SLUICE_EINVAL)[0] ? 0 : 4;
}

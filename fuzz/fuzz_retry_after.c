/*
** fuzz_retry_after: the client planner's header readers.
** sluice_backoff_parse_retry_after() on a (Retry-After, Date) pair, and a
** whole sluice_backoff_plan_next() over fuzzed headers and attempt facts.
**
** Input: 16 bytes of facts (attempt, status, flags, times, options), then
** the header values separated by '\n': Retry-After, Date,
** X-Penalty-Box-Status, RateLimit-Remaining.  Each value is copied into an
** exactly sized heap buffer and passed with its length (never
** NUL-terminated), so any over-read is an ASan report.
**
** Checks: a parsed wait is >= 0, and for delta-seconds it is exactly the
** seconds times 1000.  A plan has a known action and reason, a RETRY or
** POLL wait is >= 0, never below the floor the server gave, and never past
** the deadline; the planner's random draws come from a fixed generator so
** that a crash reproduces.
*/
#include "fuzz_common.h"
#include "sluice.h"
#include "../tests/common/splitmix.h"

static uint64_t det_rand(void *ud) { return splitmix64(ud); }

static char *take(fz *f, size_t *len) {
  const uint8_t *nl = memchr(f->p, '\n', f->n);
  size_t n = nl ? (size_t)(nl - f->p) : f->n;
  char *s = malloc(n ? n : 1);
  CHECK(s != NULL, "malloc");
  memcpy(s, f->p, n);
  f->p += n + (nl != NULL);
  f->n -= n + (nl != NULL);
  *len = n;
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const int statuses[] = {0,   200, 301, 400, 401, 403, 404, 408,
                                 409, 429, 500, 502, 503, 504, 599, 100};
  fz f = {data, size};
  sluice_backoff_options bo = {0};
  sluice_backoff_input in = {0};
  sluice_backoff_plan plan;
  sluice_backoff *b = NULL;
  uint64_t seed = 0;
  int64_t wait = -1, secs;
  size_t ral, dl, pbl, reml;
  char *ra, *date, *pb, *rem;
  unsigned sel;
  int rc, has_ra, has_date;

  in.attempt = (int)fz_range(&f, 1, 8);
  in.status = statuses[fz_u8(&f) % 16];
  in.flags = fz_u8(&f) & 7u;
  sel = fz_u8(&f);
  in.now_ns = (int64_t)fz_u64(&f, 5) * 1000;
  in.deadline_ns = (sel & 1) ? in.now_ns + (int64_t)fz_u64(&f, 4) * 1000000
                             : 0;
  bo.base_ms = (sel & 2) ? fz_range(&f, 1, 5000) : 0;
  bo.cap_ms = (sel & 2) ? bo.base_ms + fz_range(&f, 0, 60000) : 0;
  seed = fz_u64(&f, 2);
  bo.rand = det_rand;
  bo.rand_ud = &seed;
  has_ra = !(sel & 4);
  has_date = !(sel & 8);

  ra = take(&f, &ral);
  date = take(&f, &dl);
  pb = take(&f, &pbl);
  rem = take(&f, &reml);

  rc = sluice_backoff_parse_retry_after(ra, ral, has_date ? date : NULL,
                                        has_date ? dl : 0, &wait);
  CHECK(rc == SLUICE_OK || rc == SLUICE_EINVAL || rc == SLUICE_ERANGE,
        "parse_retry_after rc %d", rc);
  if (rc == SLUICE_OK)
    CHECK(wait >= 0, "wait %lld", (long long)wait);
  if (sluice_http_parse_uint(ra, ral, &secs) == SLUICE_OK)
    CHECK(rc == SLUICE_OK && wait == secs * 1000,
          "delta-seconds %lld read as %lld ms (rc %d)", (long long)secs,
          (long long)wait, rc);

  CHECK(sluice_backoff_open(&bo, &b) == SLUICE_OK, "backoff_open");
  in.retry_after = has_ra ? ra : NULL;
  in.retry_after_len = has_ra ? (ral ? ral : 0) : 0;
  in.date = has_date ? date : NULL;
  in.date_len = dl;
  in.penalty_box = (sel & 16) ? pb : NULL;
  in.penalty_box_len = pbl;
  in.remaining = (sel & 32) ? rem : NULL;
  in.remaining_len = reml;
  /* A length of 0 means "use strlen": only pass values that are not empty,
  ** or a NUL-terminated empty string. */
  if (in.retry_after && ral == 0)
    in.retry_after = "";
  if (in.date && dl == 0)
    in.date = "";
  if (in.penalty_box && pbl == 0)
    in.penalty_box = "";
  if (in.remaining && reml == 0)
    in.remaining = "";
  rc = sluice_backoff_plan_next(b, &in, &plan);
  CHECK(rc == SLUICE_OK, "plan_next rc %d", rc);
  CHECK(plan.action >= SLUICE_BACKOFF_RETRY &&
            plan.action <= SLUICE_BACKOFF_STOP,
        "action %d", plan.action);
  CHECK(plan.reason >= 0 && plan.reason <= SLUICE_BACKOFF_WHY_DEADLINE,
        "reason %d", plan.reason);
  CHECK(plan.remaining >= -1, "remaining %lld", (long long)plan.remaining);
  if (plan.action != SLUICE_BACKOFF_STOP) {
    CHECK(plan.wait_ms >= 0, "wait %lld", (long long)plan.wait_ms);
    CHECK(plan.wait_ms >= plan.floor_ms, "wait %lld below the floor %lld",
          (long long)plan.wait_ms, (long long)plan.floor_ms);
    if (in.deadline_ns)
      CHECK(plan.wait_ms <= (in.deadline_ns - in.now_ns) / 1000000 + 1,
            "wait %lld ms past the deadline", (long long)plan.wait_ms);
  }
  sluice_backoff_close(b);
  free(ra);
  free(date);
  free(pb);
  free(rem);
  return 0;
}

/*
** Pacing: turn what the last response said about the bucket
** (RateLimit-Limit, -Remaining, -Reset) into a send interval, so that a
** batch slows down before the bucket empties instead of learning about it
** from a 429 (spec section 7, rule 9).
**
** For the spec's token bucket, Reset is the time until the bucket is full
** again, so the refill rate is r = (limit - remaining) / reset: the
** headers give it away without the client knowing the tier table.  One
** rule follows from it:
**
**     interval = cost * reset / (limit - reserve)
**              = (cost / r) * (limit - remaining) / (limit - reserve)
**
** the refill interval scaled by how far the bucket has fallen relative to
** the reserve.  A full bucket is spent freely (interval 0); the brake
** comes on smoothly as it drains; at `remaining == reserve` the client
** sends exactly at the refill rate, and below it more slowly than that, so
** the level settles at the reserve from either side (a proportional
** controller, with no state).  It never sends into a certain denial: when
** fewer than `cost` points are left, the interval is at least the time
** the missing points take to refill, because limit >= cost.
**
** The headers are rounded toward safety by the server (remaining down,
** reset up), which makes r look smaller than it is and the interval a
** little longer, never shorter.  Arithmetic is in 128 bits: cost * reset
** can pass 2^63 for valid inputs.
*/
#include "sluice.h"

__extension__ typedef __int128 i128;

#define COUNT_MAX (INT64_C(1) << 40)
#define RESET_MAX (INT64_C(1) << 53)

static int64_t ceil_div128(i128 a, i128 b) {
  i128 q = a / b + (a % b != 0);
  return q > (i128)INT64_MAX ? INT64_MAX : (int64_t)q;
}

int sluice_pace_interval(const sluice_pace_input *in, int64_t *interval_ms) {
  int64_t deficit;
  if (!in || !interval_ms || in->limit < 1 || in->limit > COUNT_MAX ||
      in->remaining < 0 || in->remaining > in->limit || in->reset_ms < 0 ||
      in->reset_ms > RESET_MAX || in->cost < 1 || in->cost > in->limit ||
      in->reserve < 0 || in->reserve >= in->limit)
    return SLUICE_EINVAL;
  deficit = in->limit - in->remaining;
  if (deficit == 0 || in->reset_ms == 0) {
    /* Full, or refilling within the millisecond: nothing to wait for. */
    *interval_ms = 0;
    return SLUICE_OK;
  }
  *interval_ms =
      ceil_div128((i128)in->cost * in->reset_ms, in->limit - in->reserve);
  return SLUICE_OK;
}

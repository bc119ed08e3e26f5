/*
** The pacing helper: RateLimit-Limit / -Remaining / -Reset to a send
** interval that brakes before the bucket empties.
*/
#include <criterion/criterion.h>

#include "sluice.h"

static int64_t pace(int64_t limit, int64_t remaining, int64_t reset_ms,
                    int64_t cost, int64_t reserve) {
  sluice_pace_input in = {0};
  int64_t iv = -1;
  in.limit = limit;
  in.remaining = remaining;
  in.reset_ms = reset_ms;
  in.cost = cost;
  in.reserve = reserve;
  cr_assert_eq(sluice_pace_interval(&in, &iv), SLUICE_OK);
  return iv;
}

Test(pace, full_bucket_sends_freely) {
  cr_assert_eq(pace(3000, 3000, 0, 1, 300), 0);
  cr_assert_eq(pace(3000, 2999, 0, 1, 300), 0); /* refilled within 1 ms */
}

Test(pace, spec_example_above_reserve) {
  /* RateLimit-Remaining 2412, Reset 18 s: 588 points short, refilling at
  ** 588/18 s.  Above the reserve the interval is cost * reset /
  ** (limit - reserve) = 18000 / 2700 = 6.67 ms, rounded up. */
  cr_assert_eq(pace(3000, 2412, 18000, 1, 300), 7);
  cr_assert_eq(pace(3000, 2412, 18000, 10, 300), 67);
}

Test(pace, at_reserve_sends_at_refill_rate) {
  /* 300-point bucket at 5 points/s, 30 left: 270 short, 54 s to full.
  ** At the reserve, one point per 200 ms holds the level exactly. */
  cr_assert_eq(pace(300, 30, 54000, 1, 30), 200);
  /* Below it, slower than the refill (60000 / 270 = 222.2 ms), so the
  ** level climbs back to the reserve. */
  cr_assert_eq(pace(300, 0, 60000, 1, 30), 223);
}

Test(pace, never_sends_into_a_certain_denial) {
  /* Whatever the reserve, when fewer than `cost` points are left the
  ** interval covers the refill of the missing points. */
  int64_t r, c, res;
  for (c = 1; c <= 50; c += 7)
    for (res = 0; res < 100; res += 9)
      for (r = 0; r < c; r++) {
        int64_t reset = (100 - r) * 200; /* 5 points/s */
        int64_t iv = pace(100, r, reset, c, res);
        cr_assert_geq(iv, (c - r) * 200, "r=%lld c=%lld reserve=%lld",
                      (long long)r, (long long)c, (long long)res);
      }
}

Test(pace, brakes_progressively_and_never_outruns_refill) {
  /* For a 1000-point bucket refilling at 20 points/s, walk the level down
  ** from full: the interval never shrinks as the bucket drains, and at or
  ** below the reserve it is at least the refill interval (50 ms/point). */
  int64_t r, prev = 0;
  for (r = 1000; r >= 0; r--) {
    int64_t reset = (1000 - r) * 50; /* ms to full at 20/s */
    int64_t iv = pace(1000, r, reset, 1, 100);
    cr_assert_geq(iv, prev, "interval shrank at remaining %lld",
                  (long long)r);
    if (r - 1 < 100)
      cr_assert_geq(iv, 50, "outruns refill at remaining %lld", (long long)r);
    else
      cr_assert_leq(iv, 50, "too slow above the reserve at %lld",
                   (long long)r);
    prev = iv;
  }
}

Test(pace, large_values_do_not_overflow) {
  int64_t big = INT64_C(1) << 40;
  int64_t iv = pace(big, 0, INT64_C(1) << 53, big, 0);
  cr_assert_eq(iv, INT64_C(1) << 53);
}

Test(pace, validates) {
  sluice_pace_input in = {0};
  int64_t iv = 5;
#define BAD(l, r, t, c, res)                                                   \
  do {                                                                         \
    in.limit = (l), in.remaining = (r), in.reset_ms = (t), in.cost = (c),      \
    in.reserve = (res);                                                        \
    cr_assert_eq(sluice_pace_interval(&in, &iv), SLUICE_EINVAL,                \
                 "accepted %s", #l "," #r "," #t "," #c "," #res);             \
  } while (0)
  BAD(0, 0, 0, 1, 0);
  BAD(10, 11, 0, 1, 0);  /* remaining > limit */
  BAD(10, -1, 0, 1, 0);
  BAD(10, 5, -1, 1, 0);
  BAD(10, 5, 100, 0, 0);
  BAD(10, 5, 100, 11, 0); /* costs more than the bucket holds */
  BAD(10, 5, 100, 1, 10); /* reserve the whole bucket */
  BAD(10, 5, 100, 1, -1);
  BAD((INT64_C(1) << 40) + 1, 5, 100, 1, 0);
  BAD(10, 5, (INT64_C(1) << 53) + 1, 1, 0);
#undef BAD
  cr_assert_eq(iv, 5, "wrote on failure");
  cr_assert_eq(sluice_pace_interval(NULL, &iv), SLUICE_EINVAL);
  in.limit = 10, in.remaining = 5, in.reset_ms = 10, in.cost = 1,
  in.reserve = 0;
  cr_assert_eq(sluice_pace_interval(&in, NULL), SLUICE_EINVAL);
}

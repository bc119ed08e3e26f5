/*
** HTTP-dates (RFC 9110 5.6.7) and integer field values: the three forms a
** recipient must accept, the one a sender produces, and the malformed
** values a parser must refuse without guessing.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"
#include "http/http_int.h"
#include "../common/splitmix.h"

/* RFC 9110's own example instant, in each of its three spellings. */
#define RFC_EXAMPLE_S INT64_C(784111777) /* 1994-11-06T08:49:37Z */

static int parse(const char *s, int64_t ref, int64_t *out) {
  return sluice_http_parse_date(s, strlen(s), ref, out);
}

Test(date, formats_rfc9110_example) {
  char buf[SLUICE_HTTP_DATE_LEN + 1];
  cr_assert_eq(sluice__http_format_date(RFC_EXAMPLE_S, buf), SLUICE_OK);
  cr_assert_str_eq(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
  cr_assert_eq(strlen(buf), SLUICE_HTTP_DATE_LEN);
}

Test(date, formats_spec_lockout_example) {
  /* Spec section 5: "Retry-After: Wed, 14 Oct 2026 15:00:00 GMT". */
  char buf[SLUICE_HTTP_DATE_LEN + 1];
  int64_t t;
  cr_assert_eq(parse("Wed, 14 Oct 2026 15:00:00 GMT", 0, &t), SLUICE_OK);
  cr_assert_eq(sluice__http_format_date(t, buf), SLUICE_OK);
  cr_assert_str_eq(buf, "Wed, 14 Oct 2026 15:00:00 GMT");
  /* 2026-10-14 is 20740 days after the epoch. */
  cr_assert_eq(t, INT64_C(20740) * 86400 + 15 * 3600);
}

Test(date, parses_all_three_forms) {
  int64_t a = 0, b = 0, c = 0;
  cr_assert_eq(parse("Sun, 06 Nov 1994 08:49:37 GMT", 0, &a), SLUICE_OK);
  cr_assert_eq(parse("Sunday, 06-Nov-94 08:49:37 GMT", 0, &b), SLUICE_OK);
  cr_assert_eq(parse("Sun Nov  6 08:49:37 1994", 0, &c), SLUICE_OK);
  cr_assert_eq(a, RFC_EXAMPLE_S);
  cr_assert_eq(b, RFC_EXAMPLE_S);
  cr_assert_eq(c, RFC_EXAMPLE_S);
}

Test(date, asctime_two_digit_day_and_ows) {
  int64_t t;
  cr_assert_eq(parse("  Thu Oct 14 15:00:00 2027\t", 0, &t), SLUICE_OK);
  cr_assert_eq(parse("Thu, 14 Oct 2027 15:00:00 GMT", 0, &t), SLUICE_OK);
}

Test(date, round_trips_every_day_over_decades) {
  /* Each day from 1970 to 2100 at a changing time of day: formatting then
  ** parsing returns the same second, and the weekday check passes. */
  char buf[SLUICE_HTTP_DATE_LEN + 1];
  int64_t d, t, back;
  for (d = 0; d < 47846; d++) {
    t = d * 86400 + (d * 7919) % 86400;
    cr_assert_eq(sluice__http_format_date(t, buf), SLUICE_OK);
    cr_assert_eq(parse(buf, 0, &back), SLUICE_OK, "%s", buf);
    cr_assert_eq(back, t, "%s", buf);
  }
}

Test(date, leap_years) {
  int64_t t;
  cr_assert_eq(parse("Tue, 29 Feb 2000 00:00:00 GMT", 0, &t), SLUICE_OK);
  cr_assert_eq(parse("Thu, 29 Feb 2024 12:00:00 GMT", 0, &t), SLUICE_OK);
  /* 2100 and 2026 are common years; 1900 rules do not apply to 2000. */
  cr_assert_eq(parse("Mon, 29 Feb 2100 00:00:00 GMT", 0, &t), SLUICE_EINVAL);
  cr_assert_eq(parse("Sun, 29 Feb 2026 00:00:00 GMT", 0, &t), SLUICE_EINVAL);
}

Test(date, leap_second_reads_as_59) {
  int64_t a, b;
  cr_assert_eq(parse("Sat, 31 Dec 2016 23:59:60 GMT", 0, &a), SLUICE_OK);
  cr_assert_eq(parse("Sat, 31 Dec 2016 23:59:59 GMT", 0, &b), SLUICE_OK);
  cr_assert_eq(a, b);
}

Test(date, rfc850_two_digit_year_uses_reference) {
  int64_t t, ref;
  cr_assert_eq(parse("Wed, 14 Oct 2026 15:00:00 GMT", 0, &ref), SLUICE_OK);
  /* 30 -> 2030 (4 years ahead); 94 -> 1994 (2094 is > 50 years ahead). */
  cr_assert_eq(parse("Monday, 14-Oct-30 15:00:00 GMT", ref, &t), SLUICE_OK);
  cr_assert_eq(t, ref + (INT64_C(365) * 4 + 1) * 86400);
  cr_assert_eq(parse("Friday, 14-Oct-94 15:00:00 GMT", ref, &t), SLUICE_OK);
  cr_assert_lt(t, ref);
  /* 76 is exactly 50 years ahead: not "more than", so 2076. */
  cr_assert_eq(parse("Wednesday, 14-Oct-76 15:00:00 GMT", ref, &t),
               SLUICE_OK);
  cr_assert_gt(t, ref);
  /* 77 is more than 50 years ahead: 1977 (a Friday, not a Thursday). */
  cr_assert_eq(parse("Friday, 14-Oct-77 15:00:00 GMT", ref, &t), SLUICE_OK);
  cr_assert_lt(t, ref);
  cr_assert_eq(parse("Thursday, 14-Oct-77 15:00:00 GMT", ref, &t),
               SLUICE_EINVAL);
}

Test(date, rejects_malformed) {
  static const char *const bad[] = {
      "",
      "   ",
      "Sun, 06 Nov 1994 08:49:37",          /* no GMT */
      "Sun, 06 Nov 1994 08:49:37 UTC",      /* not GMT */
      "Sun, 06 Nov 1994 08:49:37 GMT x",    /* trailing junk */
      "Sun,  06 Nov 1994 08:49:37 GMT",     /* double space */
      "Sun, 6 Nov 1994 08:49:37 GMT",       /* one-digit day */
      "sun, 06 Nov 1994 08:49:37 GMT",      /* case-sensitive */
      "Sun, 06 nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 94 08:49:37 GMT",        /* two-digit year in fixdate */
      "Sun, 06 Nov 1994 24:00:00 GMT",      /* hour */
      "Sun, 06 Nov 1994 08:60:00 GMT",      /* minute */
      "Sun, 06 Nov 1994 08:49:61 GMT",      /* second */
      "Sun, 06 Nov 1994 8:49:37 GMT",
      "Sun, 31 Nov 1994 08:49:37 GMT",      /* 31 Nov */
      "Sun, 00 Nov 1994 08:49:37 GMT",
      "Mon, 06 Nov 1994 08:49:37 GMT",      /* wrong weekday */
      "Sun, 06 Foo 1994 08:49:37 GMT",
      "Sun 06 Nov 1994 08:49:37 GMT",
      "Sunday, 06 Nov 1994 08:49:37 GMT",   /* long name, fixdate body */
      "Sun, 06-Nov-94 08:49:37 GMT",        /* short name, 850 body */
      "Sunday, 06-Nov-1994 08:49:37 GMT",
      "Sun Nov 6 08:49:37 1994",            /* asctime needs 2 chars */
      "Sun Nov  6 08:49:37 94",
      "Sun Nov  6 08:49:37 1994 GMT",
      "12",
      "1994-11-06T08:49:37Z",
  };
  size_t i;
  int64_t t = 42;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(parse(bad[i], 0, &t), SLUICE_EINVAL, "accepted '%s'",
                 bad[i]);
    cr_assert_eq(t, 42, "wrote on failure for '%s'", bad[i]);
  }
}

Test(date, length_bounds_the_text) {
  /* A valid date followed by junk is valid when len stops before it. */
  const char *s = "Sun, 06 Nov 1994 08:49:37 GMTjunk";
  int64_t t;
  cr_assert_eq(sluice_http_parse_date(s, 29, 0, &t), SLUICE_OK);
  cr_assert_eq(t, RFC_EXAMPLE_S);
  cr_assert_eq(sluice_http_parse_date(s, 28, 0, &t), SLUICE_EINVAL);
}

Test(date, range) {
  char buf[SLUICE_HTTP_DATE_LEN + 1];
  int64_t t;
  cr_assert_eq(parse("Wed, 31 Dec 1969 23:59:59 GMT", 0, &t), SLUICE_ERANGE);
  cr_assert_eq(parse("Thu, 01 Jan 1970 00:00:00 GMT", 0, &t), SLUICE_OK);
  cr_assert_eq(t, 0);
  cr_assert_eq(parse("Fri, 31 Dec 9999 23:59:59 GMT", 0, &t), SLUICE_OK);
  cr_assert_eq(t, INT64_C(253402300799));
  cr_assert_eq(sluice__http_format_date(t, buf), SLUICE_OK);
  cr_assert_str_eq(buf, "Fri, 31 Dec 9999 23:59:59 GMT");
  cr_assert_eq(sluice__http_format_date(t + 1, buf), SLUICE_ERANGE);
  cr_assert_eq(sluice__http_format_date(-1, buf), SLUICE_ERANGE);
  cr_assert_eq(sluice__http_format_date(0, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_parse_date(NULL, 3, 0, &t), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_parse_date("x", 1, 0, NULL), SLUICE_EINVAL);
}

Test(uint, parses_and_refuses) {
  int64_t v = 7;
  cr_assert_eq(sluice_http_parse_uint(" 120 ", 5, &v), SLUICE_OK);
  cr_assert_eq(v, 120);
  cr_assert_eq(sluice_http_parse_uint("0", 1, &v), SLUICE_OK);
  cr_assert_eq(v, 0);
  v = 7;
  cr_assert_eq(sluice_http_parse_uint("-1", 2, &v), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_parse_uint("+1", 2, &v), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_parse_uint("1.5", 3, &v), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_parse_uint("1 2", 3, &v), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_parse_uint("", 0, &v), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_parse_uint("  ", 2, &v), SLUICE_EINVAL);
  cr_assert_eq(sluice_http_parse_uint("99999999999999999999", 20, &v),
               SLUICE_ERANGE);
  cr_assert_eq(v, 7, "wrote on failure");
}

static uint64_t mix(uint64_t *s) {
  return splitmix64(s);
}

Test(date, mutated_inputs_never_overread_or_misparse) {
  /* Valid dates of all three forms with one to three bytes changed,
  ** truncated or extended, each in a heap block of exactly its length (no
  ** NUL), so the ASan build catches any read past the end.  Whatever is
  ** accepted must be a real time that formats and re-parses to itself. */
  static const char *const seeds[] = {"Sun, 06 Nov 1994 08:49:37 GMT",
                                      "Sunday, 06-Nov-94 08:49:37 GMT",
                                      "Sun Nov  6 08:49:37 1994"};
  uint64_t st = 42;
  int i, accepted = 0;
  for (i = 0; i < 60000; i++) {
    const char *seed = seeds[i % 3];
    size_t len = strlen(seed), k, nmut = 1 + mix(&st) % 3;
    char *buf, canon[SLUICE_HTTP_DATE_LEN + 1];
    int64_t t = -1, back = -2;
    int rc;
    if (mix(&st) % 4 == 0)
      len = (size_t)(mix(&st) % (len + 4)); /* shorter or longer */
    buf = malloc(len ? len : 1);
    cr_assert_not_null(buf);
    for (k = 0; k < len; k++)
      buf[k] = k < strlen(seed) ? seed[k] : (char)(mix(&st) & 0xff);
    for (k = 0; k < nmut && len; k++)
      buf[mix(&st) % len] = (char)(mix(&st) & 0xff);
    rc = sluice_http_parse_date(buf, len, 0, &t);
    cr_assert(rc == SLUICE_OK || rc == SLUICE_EINVAL || rc == SLUICE_ERANGE);
    if (rc == SLUICE_OK) {
      accepted++;
      cr_assert_geq(t, 0);
      cr_assert_eq(sluice__http_format_date(t, canon), SLUICE_OK);
      cr_assert_eq(parse(canon, 0, &back), SLUICE_OK);
      cr_assert_eq(back, t);
    }
    free(buf);
  }
  /* Some mutations keep a valid date (a digit for a digit): the check
  ** above has seen real work, not only refusals. */
  cr_assert_gt(accepted, 100);
}

Test(uint, exact_length_buffers) {
  uint64_t st = 7;
  int i;
  for (i = 0; i < 20000; i++) {
    size_t len = (size_t)(mix(&st) % 24), k;
    char *buf = malloc(len ? len : 1);
    int64_t v = -1;
    int rc, digits = len > 0;
    cr_assert_not_null(buf);
    for (k = 0; k < len; k++) {
      buf[k] = mix(&st) % 5 ? (char)('0' + mix(&st) % 10) : (char)mix(&st);
      digits &= buf[k] >= '0' && buf[k] <= '9';
    }
    rc = sluice_http_parse_uint(buf, len, &v);
    if (digits && len <= 15)
      cr_assert_eq(rc, SLUICE_OK);
    if (rc == SLUICE_OK)
      cr_assert(v >= 0 && v <= (INT64_C(1) << 53));
    free(buf);
  }
}

/*
** HTTP-dates (RFC 9110 section 5.6.7) and plain integer field values.
**
** A sender must produce only IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT";
** a recipient must also accept the two obsolete forms, RFC 850
** ("Sunday, 06-Nov-94 08:49:37 GMT") and C's asctime()
** ("Sun Nov  6 08:49:37 1994").  This file does both without libc's time
** functions: gmtime/timegm depend on the process's TZ and locale, strptime
** on the locale, and none of them reject an impossible date.
**
** Choices:
**  a) The range is 1970..9999: a date before the epoch cannot be a
**     Retry-After anyone means (SLUICE_ERANGE), and IMF-fixdate has a
**     four-digit year.
**  b) The grammar is case-sensitive (day and month names are listed
**     literally in RFC 9110), and the weekday must agree with the date:
**     a disagreement means the value is broken, and a broken value is
**     better refused than guessed at.
**  c) A leap second, hh:mm:60, is accepted (RFC 9110 allows it) and read
**     as :59, so it never moves a wait later than the sender meant.
**  d) RFC 850's two-digit year is resolved against a reference time as
**     RFC 9110 requires: more than 50 years ahead means the century
**     before.
**
** Civil dates are counted in days since 1970-01-01 with integer
** arithmetic only: whole years times 365, plus leap days before the year,
** plus the days of the months before the month.
*/
#include <string.h>

#include "http_int.h"

static const char *const k_wday[7] = {"Sun", "Mon", "Tue", "Wed",
                                      "Thu", "Fri", "Sat"};
static const char *const k_wday_long[7] = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
    "Saturday"};
static const char *const k_month[12] = {"Jan", "Feb", "Mar", "Apr",
                                        "May", "Jun", "Jul", "Aug",
                                        "Sep", "Oct", "Nov", "Dec"};
/* Days before each month in a common year. */
static const int k_cum[12] = {0,   31,  59,  90,  120, 151,
                              181, 212, 243, 273, 304, 334};

static int is_leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int64_t y, int m) {
  static const int k_len[12] = {31, 28, 31, 30, 31, 30,
                                31, 31, 30, 31, 30, 31};
  return k_len[m - 1] + (m == 2 && is_leap(y));
}

/* Leap years in [1, y). */
static int64_t leaps_before(int64_t y) {
  y -= 1;
  return y / 4 - y / 100 + y / 400;
}

int64_t sluice__days_from_civil(int64_t y, int m, int d) {
  return (y - 1970) * 365 + (leaps_before(y) - leaps_before(1970)) +
         k_cum[m - 1] + (m > 2 && is_leap(y)) + (d - 1);
}

void sluice__civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
  /* z / 365 overshoots by at most one year per 365 leap days, so the
  ** loop below runs a handful of times at most. */
  int64_t yy = 1970 + z / 365;
  int64_t doy;
  int mm = 1;
  while (sluice__days_from_civil(yy, 1, 1) > z)
    yy--;
  doy = z - sluice__days_from_civil(yy, 1, 1);
  while (mm < 12 && doy >= k_cum[mm] + (mm >= 2 && is_leap(yy)))
    mm++;
  *y = yy;
  *m = mm;
  *d = (int)(doy - (k_cum[mm - 1] + (mm > 2 && is_leap(yy)))) + 1;
}

static void put2(char *p, int v) {
  p[0] = (char)('0' + v / 10);
  p[1] = (char)('0' + v % 10);
}

int sluice__http_format_date(int64_t epoch_s,
                            char out[SLUICE_HTTP_DATE_LEN + 1]) {
  int64_t days, secs, y;
  int m, d;
  if (!out)
    return SLUICE_EINVAL;
  if (epoch_s < 0 || epoch_s > SLUICE__MAX_EPOCH_S)
    return SLUICE_ERANGE;
  days = epoch_s / 86400;
  secs = epoch_s % 86400;
  sluice__civil_from_days(days, &y, &m, &d);
  /* "Sun, 06 Nov 1994 08:49:37 GMT" */
  memcpy(out, k_wday[(days + 4) % 7], 3);
  memcpy(out + 3, ", ", 2);
  put2(out + 5, d);
  out[7] = ' ';
  memcpy(out + 8, k_month[m - 1], 3);
  out[11] = ' ';
  put2(out + 12, (int)(y / 100));
  put2(out + 14, (int)(y % 100));
  out[16] = ' ';
  put2(out + 17, (int)(secs / 3600));
  out[19] = ':';
  put2(out + 20, (int)(secs / 60 % 60));
  out[22] = ':';
  put2(out + 23, (int)(secs % 60));
  memcpy(out + 25, " GMT", 5); /* with the NUL */
  return SLUICE_OK;
}

/* ------------------------------------------------------------ parsing --- */

typedef struct cursor {
  const char *p, *end;
} cursor;

static int lit(cursor *c, const char *s) {
  size_t n = strlen(s);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
    return 0;
  c->p += n;
  return 1;
}

/* Exactly n digits. */
static int digits(cursor *c, int n, int *out) {
  int v = 0, i;
  if (c->end - c->p < n)
    return 0;
  for (i = 0; i < n; i++) {
    if (c->p[i] < '0' || c->p[i] > '9')
      return 0;
    v = v * 10 + (c->p[i] - '0');
  }
  c->p += n;
  *out = v;
  return 1;
}

/* Index of the name at the cursor in a table, or -1. */
static int name(cursor *c, const char *const *tab, int n) {
  int i;
  for (i = 0; i < n; i++)
    if (lit(c, tab[i]))
      return i;
  return -1;
}

/* "HH:MM:SS" */
static int time_of_day(cursor *c, int *h, int *mi, int *s) {
  return digits(c, 2, h) && lit(c, ":") && digits(c, 2, mi) && lit(c, ":") &&
         digits(c, 2, s) && *h <= 23 && *mi <= 59 && *s <= 60;
}

static int64_t resolve_2digit_year(int yy, int64_t ref_s) {
  int64_t ref_y, y;
  int m, dd;
  if (ref_s <= 0)
    return yy >= 70 ? 1900 + yy : 2000 + yy;
  if (ref_s > SLUICE__MAX_EPOCH_S)
    ref_s = SLUICE__MAX_EPOCH_S;
  sluice__civil_from_days(ref_s / 86400, &ref_y, &m, &dd);
  y = ref_y - ref_y % 100 + yy;
  if (y > ref_y + 50)
    y -= 100;
  else if (y <= ref_y - 50)
    y += 100;
  return y;
}

int sluice_http_parse_date(const char *s, size_t len, int64_t ref_s,
                           int64_t *epoch_s) {
  cursor c;
  int wday, mon = 0, day = 0, h = 0, mi = 0, sec = 0, y4 = 0, yy = 0;
  int64_t year, days;
  if (!s || !epoch_s)
    return SLUICE_EINVAL;
  c.p = s;
  c.end = s + len;
  while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
    c.p++;
  while (c.end > c.p && (c.end[-1] == ' ' || c.end[-1] == '\t'))
    c.end--;
  if (c.end - c.p < 4)
    return SLUICE_EINVAL;

  if (c.p[3] == ',') {
    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    wday = name(&c, k_wday, 7);
    if (wday < 0 || !lit(&c, ", ") || !digits(&c, 2, &day) || !lit(&c, " ") ||
        (mon = name(&c, k_month, 12)) < 0 || !lit(&c, " ") ||
        !digits(&c, 4, &y4) || !lit(&c, " ") ||
        !time_of_day(&c, &h, &mi, &sec) || !lit(&c, " GMT"))
      return SLUICE_EINVAL;
    year = y4;
  } else if (c.p[3] == ' ') {
    /* asctime: "Sun Nov  6 08:49:37 1994" (day is SP DIGIT or 2DIGIT) */
    wday = name(&c, k_wday, 7);
    if (wday < 0 || !lit(&c, " ") || (mon = name(&c, k_month, 12)) < 0 ||
        !lit(&c, " "))
      return SLUICE_EINVAL;
    if (!(lit(&c, " ") ? digits(&c, 1, &day) : digits(&c, 2, &day)) ||
        !lit(&c, " ") || !time_of_day(&c, &h, &mi, &sec) || !lit(&c, " ") ||
        !digits(&c, 4, &y4))
      return SLUICE_EINVAL;
    year = y4;
  } else {
    /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
    wday = name(&c, k_wday_long, 7);
    if (wday < 0 || !lit(&c, ", ") || !digits(&c, 2, &day) || !lit(&c, "-") ||
        (mon = name(&c, k_month, 12)) < 0 || !lit(&c, "-") ||
        !digits(&c, 2, &yy) || !lit(&c, " ") ||
        !time_of_day(&c, &h, &mi, &sec) || !lit(&c, " GMT"))
      return SLUICE_EINVAL;
    year = resolve_2digit_year(yy, ref_s);
  }
  if (c.p != c.end)
    return SLUICE_EINVAL; /* trailing junk */
  if (day < 1 || year < 1 || day > month_days(year, mon + 1))
    return SLUICE_EINVAL; /* "31 Feb", "29 Feb" of a common year, "00" */
  /* An RFC 850 year resolved against a reference near the end of 9999 can
  ** land past it: outside the documented range, like a pre-1970 date. */
  if (year < 1970 || year > 9999)
    return SLUICE_ERANGE;
  days = sluice__days_from_civil(year, mon + 1, day);
  if ((days + 4) % 7 != wday)
    return SLUICE_EINVAL;
  if (sec == 60)
    sec = 59;
  *epoch_s = days * 86400 + h * 3600 + mi * 60 + sec;
  return SLUICE_OK;
}

int sluice_http_parse_uint(const char *s, size_t len, int64_t *out) {
  const char *p, *end;
  int64_t v = 0;
  if (!s || !out)
    return SLUICE_EINVAL;
  p = s;
  end = s + len;
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
    end--;
  if (p == end)
    return SLUICE_EINVAL;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9')
      return SLUICE_EINVAL;
    v = v * 10 + (*p - '0');
    if (v > (INT64_C(1) << 53))
      return SLUICE_ERANGE;
  }
  *out = v;
  return SLUICE_OK;
}

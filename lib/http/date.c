/*
** HTTP-dates (RFC 9110 section 5.6.7) and plain integer field values.
**
** A sender must produce only IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT";
** a recipient must also accept the two obsolete forms, RFC 850
** ("Sunday, 06-Nov-94 08:49:37 GMT") and C's asctime()
** ("Sun Nov  6 08:49:37 1994").  The calendar is libc's: gmtime_r() and
** timegm() work in UTC whatever the process's TZ.  The names are not:
** strftime's %a and %b, and strptime, follow the process's locale (and
** strptime takes any case and one-digit fields), so the day and month
** names are this file's own tables and the grammar is parsed here.
**
** Choices:
**  a) The range is 1970..9999: a date before the epoch cannot be a
**     Retry-After anyone means (SLUICE_ERANGE), and IMF-fixdate has a
**     four-digit year.
**  b) The grammar is case-sensitive (day and month names are listed
**     literally in RFC 9110), and the weekday must agree with the date:
**     a disagreement means the value is broken, and a broken value is
**     better refused than guessed at.  So must the day of the month:
**     timegm() would read "31 Nov" as 1 Dec.
**  c) A leap second, hh:mm:60, is accepted (RFC 9110 allows it) and read
**     as :59, so it never moves a wait later than the sender meant.
**  d) RFC 850's two-digit year is resolved against a reference time as
**     RFC 9110 requires: more than 50 years ahead means the century
**     before.
*/
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "http_int.h"

static const char *const k_wday[7] = {"Sun", "Mon", "Tue", "Wed",
                                      "Thu", "Fri", "Sat"};
static const char *const k_wday_long[7] = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
    "Saturday"};
static const char *const k_month[12] = {"Jan", "Feb", "Mar", "Apr",
                                        "May", "Jun", "Jul", "Aug",
                                        "Sep", "Oct", "Nov", "Dec"};

int sluice__http_format_date(int64_t epoch_s,
                             char out[SLUICE_HTTP_DATE_LEN + 1]) {
  time_t t = (time_t)epoch_s;
  struct tm tm;
  char buf[64]; /* what the compiler can prove int fields fit in */
  if (!out)
    return SLUICE_EINVAL;
  if (epoch_s < 0 || epoch_s > SLUICE__MAX_EPOCH_S || !gmtime_r(&t, &tm))
    return SLUICE_ERANGE;
  snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT",
           k_wday[tm.tm_wday], tm.tm_mday, k_month[tm.tm_mon],
           tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  memcpy(out, buf, SLUICE_HTTP_DATE_LEN + 1);
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
  time_t t = (time_t)(ref_s < SLUICE__MAX_EPOCH_S ? ref_s
                                                  : SLUICE__MAX_EPOCH_S);
  struct tm tm;
  int64_t ref_y, y;
  if (ref_s <= 0 || !gmtime_r(&t, &tm))
    return yy >= 70 ? 1900 + yy : 2000 + yy;
  ref_y = tm.tm_year + 1900;
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
  struct tm tm = {0};
  time_t t;
  int wday, mon = 0, day = 0, h = 0, mi = 0, sec = 0, y4 = 0, yy = 0;
  int64_t year;
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
  tm.tm_year = (int)(year - 1900);
  tm.tm_mon = mon;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec == 60 ? 59 : sec;
  t = timegm(&tm); /* normalizes tm: "31 Nov" comes back as 1 Dec */
  if (day < 1 || year < 1 || tm.tm_mday != day || tm.tm_mon != mon)
    return SLUICE_EINVAL; /* "31 Feb", "29 Feb" of a common year, "00" */
  /* An RFC 850 year resolved against a reference near the end of 9999 can
  ** land past it: outside the documented range, like a pre-1970 date. */
  if (year < 1970 || year > 9999)
    return SLUICE_ERANGE;
  if (tm.tm_wday != wday)
    return SLUICE_EINVAL;
  *epoch_s = (int64_t)t;
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

/*
** fuzz_http_date: sluice_http_parse_date() (all three HTTP-date forms) and
** sluice_http_parse_uint() on arbitrary bytes.  The first 8 input bytes are
** the RFC 850 reference time; the rest is the field value.
**
** Checks: a parsed date is within 1970..9999; formatting it gives a
** 29-character IMF-fixdate that parses back to the same second (with any
** reference time); the parse of a value never depends on bytes past `len`
** (the value is copied into an exactly sized heap buffer, so ASan sees any
** over-read).  A parsed integer equals the digits of the input read by a
** simple reference, and is at most 2^53.
*/
#include "fuzz_common.h"
#include "sluice.h"
#include "http/http_int.h"

static int ref_uint(const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  uint64_t v = 0;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  while (i < n && (s[i] == ' ' || s[i] == '\t'))
    i++;
  if (i == n)
    return -1;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (uint64_t)(s[i] - '0');
    if (v > ((uint64_t)1 << 53))
      return 1; /* too large */
  }
  *out = (int64_t)v;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f = {data, size};
  int64_t ref = (int64_t)fz_u64(&f, 8), t = -1, t2 = -1, u = -1, ru = -1;
  size_t n = f.n;
  char *s = malloc(n ? n : 1);
  char buf[SLUICE_HTTP_DATE_LEN + 1];
  int rc, rr;

  CHECK(s != NULL, "malloc");
  memcpy(s, f.p, n);
  rc = sluice_http_parse_date(s, n, ref, &t);
  CHECK(rc == SLUICE_OK || rc == SLUICE_EINVAL || rc == SLUICE_ERANGE,
        "parse_date rc %d", rc);
  if (rc == SLUICE_OK) {
    CHECK(t >= 0 && t <= INT64_C(253402300799), "date %lld out of range",
          (long long)t);
    CHECK(sluice__http_format_date(t, buf) == SLUICE_OK, "format %lld",
          (long long)t);
    CHECK(strlen(buf) == SLUICE_HTTP_DATE_LEN, "formatted length %zu",
          strlen(buf));
    CHECK(sluice_http_parse_date(buf, strlen(buf), ref, &t2) == SLUICE_OK &&
              t2 == t,
          "round trip: '%s' is %lld, reads back as %lld", buf, (long long)t,
          (long long)t2);
    CHECK(sluice_http_parse_date(buf, strlen(buf), 0, &t2) == SLUICE_OK &&
              t2 == t,
          "IMF-fixdate depends on the reference time");
  }
  rc = sluice_http_parse_uint(s, n, &u);
  rr = ref_uint(s, n, &ru);
  CHECK(rc == SLUICE_OK || rc == SLUICE_EINVAL || rc == SLUICE_ERANGE,
        "parse_uint rc %d", rc);
  CHECK((rc == SLUICE_OK) == (rr == 0), "parse_uint rc %d, reference %d", rc,
        rr);
  if (rc == SLUICE_OK)
    CHECK(u == ru, "parse_uint %lld, reference %lld", (long long)u,
          (long long)ru);
  free(s);
  return 0;
}

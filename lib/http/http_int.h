/*
** Internals of the HTTP surface: the renderer handle, date arithmetic and
** small integer helpers.  The jitter source is lib/util/rng.h, shared with
** the client planner and the webhook sink, which may not see this header.
*/
#ifndef SLUICE_HTTP_INT_H
#define SLUICE_HTTP_INT_H

#include <stdint.h>

#include "rng.h"
#include "sluice.h"

/* ceil(a / b) for a >= 0, b > 0, without overflow. */
static inline int64_t sluice__ceil_div64(int64_t a, int64_t b) {
  return a / b + (a % b != 0);
}

/* The last second an IMF-fixdate can carry: 9999-12-31T23:59:59Z. */
#define SLUICE__MAX_EPOCH_S INT64_C(253402300799)

/* Epoch seconds, 0 .. SLUICE__MAX_EPOCH_S, as an IMF-fixdate (RFC 9110
** 5.6.7) into SLUICE_HTTP_DATE_LEN + 1 bytes: what the answer's Retry-After
** and reset dates are written with.  SLUICE_OK, SLUICE_EINVAL (NULL) or
** SLUICE_ERANGE. */
int sluice__http_format_date(int64_t epoch_s,
                             char out[SLUICE_HTTP_DATE_LEN + 1]);

/* The renderer handle (sluice/http.h). */
struct sluice_http {
  int form;             /* enum sluice_http_form */
  unsigned flags;       /* SLUICE_HTTP_* */
  int64_t date_after_s; /* lockouts this long or longer get a date */
  char *base;           /* problem type base URI ending in '/', or NULL */
  sluice__rng rng;
};

#define SLUICE__NS_PER_S INT64_C(1000000000)
#define SLUICE__NS_PER_MS INT64_C(1000000)

/* Per outcome: the status sent unless the decision names another, and
** the problem type's name (problem.c: under the configured base; its
** title is the reason phrase of this status, RFC 9457 3.1.3). */
typedef struct sluice__http_kind {
  int status;
  const char *slug;
} sluice__http_kind;
extern const sluice__http_kind sluice__http_kinds[];

/* What answer.c decides and problem.c says too: whether the binding
** limit's RateLimit figures are sent, and its name and unit (NULL name:
** none of its own). */
int sluice__http_figures(const sluice_http_answer *a);
const char *sluice__http_policy_name(const sluice_decision *d);
const char *sluice__http_policy_unit(const sluice_decision *d);

#endif

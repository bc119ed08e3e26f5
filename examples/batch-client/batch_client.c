/*
** batch-client: posts a batch of ledger entries to the ledger API the way
** spec section 7 asks a batch job to behave.
**
**   - Every POST carries an Idempotency-Key, so a retry can never double-post.
**   - After each success it paces itself on RateLimit-Limit / -Remaining /
**     -Reset (sluice_pace_interval(), keeping a reserve of 10% of the limit),
**     slowing down before the bucket empties instead of reacting to 429s.
**   - After a failure it asks the backoff planner (sluice_backoff_plan_next):
**     Retry-After is a hard floor, full-jitter exponential backoff on top,
**     stop on Active-Lockout, on a non-retryable status, after max attempts
**     or when the wait would pass the deadline.
**
** It prints how many requests it sent, how many 429s it got and how long it
** took.  Exit codes: 0 every entry posted, 1 stopped early (the reason is
** printed), 2 usage error, 3 system failure.
*/
#include <curl/curl.h>
#include <stddef.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "opt_int.h"
#include "sluice.h"

#define MS_NS INT64_C(1000000)

typedef struct hdrs {
  char retry_after[64], date[64], penalty[32], limit[32], remaining[32],
      reset[32];
} hdrs;

static void usage(FILE *f) {
  fprintf(f,
      "usage: batch-client --url URL --key API_KEY [--ledger ID] [--count N]\n"
      "                    [--amount N] [--reserve-pct P] [--deadline-ms N]\n"
      "                    [--max-attempts N] [--verbose]\n\n"
      "Posts N entries (default 100) to URL/v1/ledgers/ID/entries (ledger\n"
      "`batch`), pacing on the RateLimit headers and obeying the backoff\n"
      "planner, then prints what it took.\n"
      "  --reserve-pct P   points kept in hand, %% of RateLimit-Limit (10)\n"
      "  --deadline-ms N   give up when a wait would pass it (0: none)\n"
      "  --max-attempts N  tries per entry (5, the spec's default)\n"
      "exit codes: 0 all posted, 1 stopped early, 2 usage error, "
      "3 system failure\n");
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts;
  if (ms <= 0)
    return;
  ts.tv_sec = (time_t)(ms / 1000);
  ts.tv_nsec = (long)(ms % 1000) * 1000000;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static void keep(char *dst, size_t n, const char *v, size_t len) {
  while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' ||
                 v[len - 1] == ' '))
    len--;
  while (len && *v == ' ') {
    v++;
    len--;
  }
  if (len >= n)
    len = n - 1;
  memcpy(dst, v, len);
  dst[len] = 0;
}

static size_t on_header(char *buf, size_t sz, size_t n, void *ud) {
  hdrs *h = ud;
  size_t len = sz * n;
  const char *colon = memchr(buf, ':', len);
  static const struct {
    const char *name;
    size_t off, cap;
  } want[] = {
      {"Retry-After", offsetof(hdrs, retry_after), 64},
      {"Date", offsetof(hdrs, date), 64},
      {"X-Penalty-Box-Status", offsetof(hdrs, penalty), 32},
      {"RateLimit-Limit", offsetof(hdrs, limit), 32},
      {"RateLimit-Remaining", offsetof(hdrs, remaining), 32},
      {"RateLimit-Reset", offsetof(hdrs, reset), 32},
  };
  size_t i;
  if (!colon)
    return len;
  for (i = 0; i < sizeof want / sizeof want[0]; i++) {
    size_t nl = strlen(want[i].name);
    if ((size_t)(colon - buf) == nl && !strncasecmp(buf, want[i].name, nl))
      keep((char *)h + want[i].off, want[i].cap, colon + 1,
           len - (size_t)(colon + 1 - buf));
  }
  return len;
}

static size_t on_body(char *buf, size_t sz, size_t n, void *ud) {
  (void)buf;
  (void)ud;
  return sz * n;
}

static int64_t num(const char *s) {
  int64_t v;
  if (!s[0] || sluice_http_parse_uint(s, strlen(s), &v) != SLUICE_OK)
    return -1;
  return v;
}

static const char *why_name(int r) {
  switch (r) {
  case SLUICE_BACKOFF_WHY_LOCKOUT:
    return "penalty box active (Active-Lockout)";
  case SLUICE_BACKOFF_WHY_CONFLICT:
    return "conflict";
  case SLUICE_BACKOFF_WHY_NOT_RETRYABLE:
    return "status not retryable";
  case SLUICE_BACKOFF_WHY_NOT_IDEMPOTENT:
    return "request not idempotent";
  case SLUICE_BACKOFF_WHY_AUTH_LIMIT:
    return "auth retries used up";
  case SLUICE_BACKOFF_WHY_MAX_ATTEMPTS:
    return "max attempts reached";
  case SLUICE_BACKOFF_WHY_DEADLINE:
    return "deadline";
  default:
    return "done";
  }
}

int main(int argc, char **argv) {
  static const struct option opts[] = {
      {"url", required_argument, 0, 'u'},
      {"key", required_argument, 0, 'k'},
      {"ledger", required_argument, 0, 'l'},
      {"count", required_argument, 0, 'n'},
      {"amount", required_argument, 0, 'a'},
      {"reserve-pct", required_argument, 0, 'r'},
      {"deadline-ms", required_argument, 0, 'd'},
      {"max-attempts", required_argument, 0, 'm'},
      {"verbose", no_argument, 0, 'v'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *url = NULL, *key = NULL, *ledger = "batch";
  int64_t count = 100, amount = 1, reserve_pct = 10, deadline_ms = 0,
          max_attempts = SLUICE_BACKOFF_MAX_ATTEMPTS;
  int verbose = 0, c, rc = 0;
  int64_t t0, sent = 0, n429 = 0, retries = 0, posted = 0, i;
  char target[1024], auth[512], idem[128], body[64];
  struct curl_slist *hl = NULL;
  sluice_backoff_options bo;
  sluice_backoff *planner;
  CURL *cu;
  const char *stopped = NULL;

  opterr = 0;
  while ((c = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
    switch (c) {
    case 'u':
      url = optarg;
      break;
    case 'k':
      key = optarg;
      break;
    case 'l':
      ledger = optarg;
      break;
    case 'n':
      if (ex_opt_int("batch-client", "--count", optarg, 1, 100000000,
                     &count))
        return 2;
      break;
    case 'a':
      if (ex_opt_int("batch-client", "--amount", optarg, -1000000000,
                     1000000000, &amount))
        return 2;
      break;
    case 'r':
      if (ex_opt_int("batch-client", "--reserve-pct", optarg, 0, 90,
                     &reserve_pct))
        return 2;
      break;
    case 'd':
      if (ex_opt_int("batch-client", "--deadline-ms", optarg, 0,
                     INT64_C(86400000) * 30, &deadline_ms))
        return 2;
      break;
    case 'm':
      if (ex_opt_int("batch-client", "--max-attempts", optarg, 1, 1000,
                     &max_attempts))
        return 2;
      break;
    case 'v':
      verbose = 1;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      fprintf(stderr, "batch-client: unknown or incomplete option '%s'\n",
              argv[optind - 1]);
      usage(stderr);
      return 2;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "batch-client: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  if (!url || !key) {
    fprintf(stderr, "batch-client: %s is required\n", url ? "--key" : "--url");
    return 2;
  }
  if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
    fprintf(stderr, "batch-client: --url: expected http://HOST:PORT, got "
                    "'%s'\n", url);
    return 2;
  }
  if (snprintf(target, sizeof target, "%s/v1/ledgers/%s/entries", url,
               ledger) >= (int)sizeof target ||
      snprintf(auth, sizeof auth, "Authorization: Bearer %s", key) >=
          (int)sizeof auth) {
    fprintf(stderr, "batch-client: --url or --key too long\n");
    return 2;
  }
  memset(&bo, 0, sizeof bo);
  bo.max_attempts = (int)max_attempts;
  if (sluice_backoff_open(&bo, &planner) != SLUICE_OK) {
    fprintf(stderr, "batch-client: cannot create the backoff planner\n");
    return 3;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || !(cu = curl_easy_init())) {
    fprintf(stderr, "batch-client: cannot initialise libcurl\n");
    return 3;
  }
  hl = curl_slist_append(hl, auth);
  hl = curl_slist_append(hl, "Content-Type: application/json");
  t0 = mono_ns();
  for (i = 0; i < count && !stopped; i++) {
    int attempt = 0;
    int64_t next_cost = 1;
    char run_id[32];
    snprintf(run_id, sizeof run_id, "%d-%" PRId64, (int)getpid(), t0);
    snprintf(idem, sizeof idem, "Idempotency-Key: batch-%s-%" PRId64, run_id,
             i);
    snprintf(body, sizeof body, "{\"amount\":%" PRId64 "}", amount);
    for (;;) {
      struct curl_slist *rh = curl_slist_append(NULL, idem);
      struct curl_slist *p;
      hdrs h;
      long status = 0;
      CURLcode cr;
      for (p = hl; p; p = p->next)
        rh = curl_slist_append(rh, p->data);
      memset(&h, 0, sizeof h);
      curl_easy_setopt(cu, CURLOPT_URL, target);
      curl_easy_setopt(cu, CURLOPT_HTTPHEADER, rh);
      curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
      curl_easy_setopt(cu, CURLOPT_HEADERFUNCTION, on_header);
      curl_easy_setopt(cu, CURLOPT_HEADERDATA, &h);
      curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_body);
      curl_easy_setopt(cu, CURLOPT_TIMEOUT_MS, 30000L);
      cr = curl_easy_perform(cu);
      curl_slist_free_all(rh);
      sent++;
      attempt++;
      if (cr == CURLE_OK)
        curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &status);
      else if (verbose)
        fprintf(stderr, "batch-client: entry %" PRId64 ": %s\n", i,
                curl_easy_strerror(cr));
      if (status == 429)
        n429++;
      if (verbose)
        fprintf(stderr, "entry %" PRId64 " attempt %d: %ld remaining=%s "
                        "retry-after=%s\n", i, attempt, status, h.remaining,
                h.retry_after);
      if (status >= 200 && status < 300) {
        sluice_pace_input pi;
        int64_t iv = 0;
        posted++;
        memset(&pi, 0, sizeof pi);
        pi.limit = num(h.limit);
        pi.remaining = num(h.remaining);
        pi.reset_ms = num(h.reset) * 1000;
        pi.cost = next_cost;
        if (pi.limit >= 1 && pi.remaining >= 0 && pi.reset_ms >= 0) {
          pi.reserve = pi.limit * reserve_pct / 100;
          if (pi.reserve >= pi.limit)
            pi.reserve = pi.limit - 1;
          if (sluice_pace_interval(&pi, &iv) == SLUICE_OK)
            sleep_ms(iv);
        }
        break;
      }
      {
        sluice_backoff_input in;
        sluice_backoff_plan plan;
        memset(&in, 0, sizeof in);
        in.attempt = attempt;
        in.status = (int)status;
        in.flags = SLUICE_REQ_IDEMPOTENCY_KEY;
        in.retry_after = h.retry_after[0] ? h.retry_after : NULL;
        in.date = h.date[0] ? h.date : NULL;
        in.penalty_box = h.penalty[0] ? h.penalty : NULL;
        in.remaining = h.remaining[0] ? h.remaining : NULL;
        in.now_ns = mono_ns();
        in.deadline_ns = deadline_ms ? t0 + deadline_ms * MS_NS : 0;
        if (sluice_backoff_plan_next(planner, &in, &plan) != SLUICE_OK ||
            plan.action != SLUICE_BACKOFF_RETRY) {
          static char msg[160];
          snprintf(msg, sizeof msg, "entry %" PRId64 ": HTTP %ld: %s", i,
                   status, why_name(plan.reason));
          stopped = msg;
          break;
        }
        retries++;
        sleep_ms(plan.wait_ms);
      }
    }
  }
  {
    int64_t took = (mono_ns() - t0) / MS_NS;
    printf("batch-client: posted %" PRId64 "/%" PRId64 " entries: %" PRId64
           " requests, %" PRId64 " 429s, %" PRId64 " retries, %" PRId64
           " ms\n",
           posted, count, sent, n429, retries, took);
  }
  if (stopped) {
    fprintf(stderr, "batch-client: stopped: %s\n", stopped);
    rc = 1;
  }
  curl_slist_free_all(hl);
  curl_easy_cleanup(cu);
  curl_global_cleanup();
  sluice_backoff_close(planner);
  return rc;
}

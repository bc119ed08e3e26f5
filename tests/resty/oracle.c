/*
** The C library's answers to a request trace, for test_resty.py to hold
** resty.sluice's against: the same policy file on a "mem" store whose
** manual clock is set, before each request, to the time the Lua side
** decided it at (its decision's now_ns), so both decide at the same
** instants; each answer rendered by the C renderer without jitter.
**
**   resty-oracle POLICY PROBLEM_BASE FORM < TRACE
**
** TRACE lines: NOW_NS METHOD ROUTE REQUEST_ID NAME=VALUE...  (REQUEST_ID
** "-" for none).  For each line it prints the status, one "H NAME: VALUE"
** line per header, "B BODY" when the answer has a body, then ".".  A line
** the policy refuses to decide prints "E SLUICE_E... FIELD".
*/
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice.h>
#include <sluice/http.h>
#include <sluice/policy.h>

#include "../common/headers.h"

#define MAXA 32


int main(int argc, char **argv) {
  sluice_clock *clock = NULL;
  sluice_policy *pol = NULL;
  sluice_http *http = NULL;
  char err[512] = "", line[8192];
  int rc;

  if (argc != 4) {
    fprintf(stderr, "usage: resty-oracle POLICY PROBLEM_BASE FORM < TRACE\n");
    return 2;
  }
  sluice_clock_manual(0, &clock);
  sluice_limiter_options lo = {.store = "mem", .clock = clock};
  sluice_policy_options po = {.limiter_options = &lo,
                              .config_path = argv[1],
                              .errbuf = err,
                              .errlen = sizeof err};
  /* The tests' secret: 00112233445566778899aabbccddeeff. */
  for (int i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i * 0x11);
  if ((rc = sluice_policy_open(&po, &pol)) != SLUICE_OK) {
    fprintf(stderr, "resty-oracle: %s: %s\n", sluice_strerror(rc), err);
    return 1;
  }
  sluice_http_options ho = {.problem_base = argv[2],
                            .header_form = atoi(argv[3]),
                            .flags = SLUICE_HTTP_NO_JITTER};
  if (sluice_http_open(&ho, &http) != SLUICE_OK) {
    fprintf(stderr, "resty-oracle: sluice_http_open failed\n");
    return 1;
  }
  while (fgets(line, sizeof line, stdin)) {
    char *save = NULL, *now = strtok_r(line, " \n", &save);
    char *method = strtok_r(NULL, " \n", &save);
    char *route = strtok_r(NULL, " \n", &save);
    char *rid = strtok_r(NULL, " \n", &save), *kv;
    sluice_attr attrs[MAXA];
    size_t n = 0;
    if (!now || !method || !route || !rid) {
      fprintf(stderr, "resty-oracle: a line needs NOW_NS METHOD ROUTE ID\n");
      return 2;
    }
    while ((kv = strtok_r(NULL, " \n", &save)) && n < MAXA) {
      char *eq = strchr(kv, '=');
      if (!eq)
        return 2;
      *eq = '\0';
      attrs[n].name = kv;
      attrs[n++].value = eq + 1;
    }
    sluice_request q = {.method = method, .route = route, .attrs = attrs,
                        .nattrs = n};
    sluice_decision d;
    sluice_http_answer a;
    char body[8192];
    size_t len = 0;
    sluice_clock_set(clock, strtoll(now, NULL, 10));
    if ((rc = sluice_policy_decide(pol, 1, &q, &d, NULL)) != SLUICE_OK) {
      printf("E %s %s\n.\n", sluice_err_name(rc),
             d.invalid_field ? d.invalid_field : "-");
      continue;
    }
    if (sluice_http_answer_make(http, &d, &q, strcmp(rid, "-") ? rid : NULL,
                                d.now_ns, &a) != SLUICE_OK ||
        sluice_http_answer_body(http, &a, body, sizeof body, &len) !=
            SLUICE_OK) {
      fprintf(stderr, "resty-oracle: rendering failed\n");
      return 1;
    }
    printf("%d\n", a.status);
    if (d.allowed == 0 || d.limit > 0) {
      char ht[2 * SLUICE_HTTP_HEADER_BUF];
      headers_text(http, &a, "H %s: %s\n", ht, sizeof ht);
      fputs(ht, stdout);
    }
    if (len)
      printf("B %s\n", body);
    printf(".\n");
    fflush(stdout);
  }
  sluice_http_close(http);
  sluice_policy_close(pol);
  sluice_clock_free(clock);
  return 0;
}

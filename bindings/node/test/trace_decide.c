/*
** The C library's answers to a trace, for the Node suites to compare the
** plugin's with:
**
**   trace_decide POLICY TRACE.csv
**
** TRACE.csv's header names its columns: t_ms, method, route, then the
** policy's attributes ("-": the request has none).  Every line is decided on a mem store at t_ms (a
** manual clock) and answered by the HTTP renderer without jitter; printed
** as one line: status, the binding limit, its remaining, every header as
** name=value, and the body, separated by tabs.  A line's input error
** prints "error NAME FIELD".  A column "settle:ATTR" is no attribute: an
** admitted line whose value there is not "-" is settled at once, ATTR
** reported at that value (sluice_policy_settle), as the plugin's settle
** option does when the response ends.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice.h>

#include "../../../tests/common/headers.h"

#define COLS 16

int main(int argc, char **argv) {
  sluice_clock *clock = NULL;
  sluice_limiter_options lo = {.store = "mem"};
  sluice_policy_options po = {.config_path = argv[1]};
  sluice_http_options ho = {.problem_base = "https://api.example.com/errors/",
                            .header_form = SLUICE_HTTP_FORM_BOTH,
                            .flags = SLUICE_HTTP_NO_JITTER};
  sluice_policy *pol = NULL;
  sluice_http *http = NULL;
  char line[4096], err[256] = "", *names[COLS], head[4096], body[4096];
  char ht[2 * SLUICE_HTTP_HEADER_BUF];
  int ncols = 0, i;
  FILE *in;
  if (argc != 3 || (in = fopen(argv[2], "r")) == NULL) {
    fprintf(stderr, "usage: trace_decide POLICY TRACE.csv\n");
    return 2;
  }
  memset(po.secret, 7, sizeof po.secret);
  po.limiter_options = &lo;
  po.errbuf = err;
  po.errlen = sizeof err;
  if (sluice_clock_manual(0, &clock) != SLUICE_OK || (lo.clock = clock, 0) ||
      sluice_policy_open(&po, &pol) != SLUICE_OK ||
      sluice_http_open(&ho, &http) != SLUICE_OK) {
    fprintf(stderr, "trace_decide: %s\n", err);
    return 1;
  }
  if (fgets(head, sizeof head, in) == NULL)
    return 1;
  head[strcspn(head, "\r\n")] = '\0';
  for (char *s = strtok(head, ","); s && ncols < COLS; s = strtok(NULL, ","))
    names[ncols++] = s;
  while (fgets(line, sizeof line, in) != NULL) {
    char *vals[COLS];
    int n = 0;
    sluice_attr attrs[COLS];
    sluice_request rq;
    sluice_attr used = {NULL, NULL};
    sluice_decision d;
    sluice_http_answer a;
    size_t len = 0;
    int rc;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *s = strtok(line, ","); s && n < ncols; s = strtok(NULL, ","))
      vals[n++] = s;
    if (n != ncols)
      return 1;
    memset(&rq, 0, sizeof rq);
    rq.attrs = attrs;
    for (i = 0; i < n; i++) {
      if (strcmp(names[i], "t_ms") == 0)
        sluice_clock_set(clock, strtoll(vals[i], NULL, 10) * 1000000);
      else if (strcmp(names[i], "method") == 0)
        rq.method = vals[i];
      else if (strcmp(names[i], "route") == 0)
        rq.route = vals[i];
      else if (strncmp(names[i], "settle:", 7) == 0) {
        if (strcmp(vals[i], "-") != 0)
          used = (sluice_attr){names[i] + 7, vals[i]};
      } else if (strcmp(vals[i], "-") != 0) /* "-": absent */
        attrs[rq.nattrs++] = (sluice_attr){names[i], vals[i]};
    }
    rc = sluice_policy_decide(pol, 1, &rq, &d, NULL);
    if (rc != SLUICE_OK) {
      printf("error %s %s\n", sluice_err_name(rc),
             d.invalid_field ? d.invalid_field : "-");
      continue;
    }
    if (sluice_http_answer_make(http, &d, &rq, NULL, d.now_ns, &a) !=
            SLUICE_OK ||
        sluice_http_answer_body(http, &a, body, sizeof body, &len) !=
            SLUICE_OK)
      return 1;
    printf("%d\t%s\t%lld", a.status,
           d.binding == SLUICE_BINDING_LIMIT ? d.limit_name : "-",
           (long long)d.remaining);
    headers_text(http, &a, "\t%s=%s", ht, sizeof ht);
    fputs(ht, stdout);
    printf("\t%s\n", len ? body : "-");
    if (d.lease_id != 0)
      sluice_policy_release(pol, &rq,
                            &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                           .lease_id = d.lease_id});
    if (used.name != NULL && d.allowed &&
        (rc = sluice_policy_settle(pol, &rq, &d, &used, 1)) != SLUICE_OK) {
      fprintf(stderr, "trace_decide: settle: %s\n", sluice_err_name(rc));
      return 1;
    }
  }
  fclose(in);
  sluice_http_close(http);
  sluice_policy_close(pol);
  sluice_clock_free(clock);
  return 0;
}

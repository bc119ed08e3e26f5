/*
** Host-wide counters (sluice_policy_options.counters): several real
** processes, each with its own policy over its own in-process store, count
** into one shared segment; any process's counts and metrics text are the
** sum of what every process decided, and they survive close and reopen.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#define NPROC 4
#define PER_PROC 400

static char uri[96], name[64];

static void setup(void) {
  snprintf(name, sizeof name, "/sluice-ctr-test-%d", (int)getpid());
  snprintf(uri, sizeof uri, "shm:name=%s", name);
  shm_unlink(name);
}

static void teardown(void) { shm_unlink(name); }

static int open_pol(const sluice_policy_config *cfg, const char *counters,
                    sluice_policy **p, char *err, size_t errlen) {
  sluice_policy_options o;
  memset(&o, 0, sizeof o);
  memset(o.secret, 7, sizeof o.secret);
  o.config = cfg;
  o.config_path = cfg ? NULL : fx_default_conf;
  o.counters = counters;
  o.errbuf = err;
  o.errlen = errlen;
  return sluice_policy_open(&o, p);
}

/* One process: `n` decisions on one key of the sandbox tier; returns how many
** were allowed (the sandbox tier's burst caps them, so both outcomes occur). */
static int run(int n, int id) {
  sluice_policy *p;
  char key[32];
  int i, allowed = 0;
  if (open_pol(NULL, uri, &p, NULL, 0) != SLUICE_OK)
    return -1;
  snprintf(key, sizeof key, "key-%d", id);
  for (i = 0; i < n; i++) {
    sluice_request r = rq_std("acme", key, "sandbox");
    sluice_decision d;
    if (sluice_policy_decide(p, 1, &r, &d, NULL) != SLUICE_OK)
      return -1;
    allowed += d.allowed;
  }
  sluice_policy_close(p);
  return allowed;
}

TestSuite(policy_counters, .init = setup, .fini = teardown);

Test(policy_counters, processes_sum_into_one_segment) {
  int fds[NPROC][2], i, st, allowed = 0, got;
  sluice_policy *p;
  char *text;
  size_t need;
  char line[128];
  for (i = 0; i < NPROC; i++) {
    cr_assert_eq(pipe(fds[i]), 0);
    if (fork() == 0) {
      got = run(PER_PROC, i);
      if (write(fds[i][1], &got, sizeof got) != sizeof got)
        _exit(2);
      _exit(0);
    }
    close(fds[i][1]);
  }
  for (i = 0; i < NPROC; i++) {
    cr_assert_eq(read(fds[i][0], &got, sizeof got), (ssize_t)sizeof got);
    cr_assert_geq(got, 1, "child %d failed", i);
    allowed += got;
    close(fds[i][0]);
    wait(&st);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  cr_assert_lt(allowed, NPROC * PER_PROC, "the burst should deny some");
  cr_assert_eq(open_pol(NULL, uri, &p, NULL, 0), SLUICE_OK);
  cr_assert_eq(sluice_policy_count(p, "sandbox", SLUICE_OUTCOME_ALLOW),
               (uint64_t)allowed);
  cr_assert_eq(sluice_policy_count(p, "sandbox", SLUICE_OUTCOME_ALLOW) +
                   sluice_policy_count(p, "sandbox", SLUICE_OUTCOME_THROTTLED) +
                   sluice_policy_count(p, "sandbox", SLUICE_OUTCOME_BOXED),
               (uint64_t)(NPROC * PER_PROC));
  cr_assert_eq(sluice_policy_metrics(p, NULL, 0, &need), SLUICE_OK);
  text = malloc(need + 1);
  cr_assert_eq(sluice_policy_metrics(p, text, need + 1, NULL), SLUICE_OK);
  snprintf(line, sizeof line,
           "sluice_policy_decisions_total{tier=\"sandbox\",outcome=\"allow\"} "
           "%d\n",
           allowed);
  cr_assert(strstr(text, line), "metrics lack %s", line);
  free(text);
  sluice_policy_close(p);
}

Test(policy_counters, totals_outlive_every_handle) {
  sluice_policy *p;
  uint64_t before;
  cr_assert_eq(run(10, 0), 10);
  cr_assert_eq(open_pol(NULL, uri, &p, NULL, 0), SLUICE_OK);
  before = sluice_policy_count(p, "sandbox", SLUICE_OUTCOME_ALLOW);
  cr_assert_eq(before, 10);
  sluice_policy_close(p);
  cr_assert_eq(run(5, 1), 5);
  cr_assert_eq(open_pol(NULL, uri, &p, NULL, 0), SLUICE_OK);
  cr_assert_eq(sluice_policy_count(p, "sandbox", SLUICE_OUTCOME_ALLOW), 15);
  sluice_policy_close(p);
}

Test(policy_counters, without_the_option_each_policy_counts_alone) {
  sluice_policy *a, *b;
  sluice_request r = rq_std("acme", "k", "sandbox");
  sluice_decision d;
  cr_assert_eq(open_pol(NULL, NULL, &a, NULL, 0), SLUICE_OK);
  cr_assert_eq(open_pol(NULL, "", &b, NULL, 0), SLUICE_OK);
  cr_assert_eq(sluice_policy_decide(a, 1, &r, &d, NULL), SLUICE_OK);
  cr_assert_eq(sluice_policy_count(a, "sandbox", SLUICE_OUTCOME_ALLOW), 1);
  cr_assert_eq(sluice_policy_count(b, "sandbox", SLUICE_OUTCOME_ALLOW), 0);
  sluice_policy_close(a);
  sluice_policy_close(b);
}

/* A segment's rows are the policy's tiers (the file's `tiers` names):
** a policy naming other tiers cannot count into it. */
Test(policy_counters, other_tiers_are_refused) {
  sluice_policy_config *cfg;
  sluice_policy *p;
  char err[256] = "";
  cr_assert_eq(open_pol(NULL, uri, &p, NULL, 0), SLUICE_OK);
  sluice_policy_close(p);
  cfg = cfg_new();
  cfg_sets(cfg, "tiers", "[ \"renamed\", \"growth\", \"enterprise\" ]");
  cr_assert_eq(open_pol(cfg, uri, &p, err, sizeof err), SLUICE_ECONFIG);
  cr_assert_null(p);
  cr_assert(strstr(err, name) && strstr(err, "other tiers"), "%s", err);
}

Test(policy_counters, bad_uris_are_refused) {
  static const char *const bad[] = {"shm:", "shm:name=", "shm:name=x",
                                    "shm:name=/a/b", "lmdb:path=/tmp/x",
                                    "name=/x"};
  sluice_policy *p;
  char err[256];
  size_t i;
  for (i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = '\0';
    cr_assert_eq(open_pol(NULL, bad[i], &p, err, sizeof err), SLUICE_EINVAL,
                 "%s", bad[i]);
    cr_assert(strstr(err, "shm:name=/NAME"), "%s: %s", bad[i], err);
  }
}

/* ------------------------------------------------- counters by route --- */

/* Three routes, two of them the same method and pattern told apart by
** `when`; a lease set on the first. */
#define BY_ROUTE_LIMITS                                                        \
  "attributes = [ \"job\" ];\n"                                                \
  "limits = {\n"                                                               \
  "  runs = { algorithm = \"concurrency\"; scope = [ \"tenant\" ];\n"          \
  "           max = 1; ttl_ms = 60000; };\n"                                   \
  "  b = { algorithm = \"gcra\"; scope = [ \"tenant\" ];\n"                    \
  "        rate = 100; period_ms = 1000; burst = 100; };\n"                    \
  "};\n"
static const char by_route_text[] =
    BY_ROUTE_LIMITS
    "routes = (\n"
    "  { method = \"POST\"; route = \"/jobs\"; limits = ( \"runs\" ); },\n"
    "  { method = \"GET\"; route = \"/jobs/*\"; when = { job = \"slow\"; };\n"
    "    limits = ( \"b\" ); },\n"
    "  { method = \"GET\"; route = \"/jobs/*\"; limits = ( \"b\" ); }\n"
    ");\n";

static sluice_request job_rq(const char *method, const char *route,
                             const sluice_attr *a) {
  sluice_request q;
  memset(&q, 0, sizeof q);
  q.method = method;
  q.route = route;
  q.tenant_id = "acme";
  q.api_key_id = "k";
  q.tier = "sandbox";
  q.attrs = a;
  q.nattrs = a != NULL;
  return q;
}

/* The metrics text's counter `metric` by route: every line of it, in order,
** as "LABEL=VALUE;..." (so a count under the wrong label shows). */
static void by_route_lines(sluice_policy *p, const char *metric, char *out,
                           size_t len) {
  char text[65536], head[128];
  const char *s;
  size_t n = 0;
  cr_assert_eq(sluice_policy_metrics(p, text, sizeof text, NULL), SLUICE_OK);
  snprintf(head, sizeof head, "\n%s{route=\"", metric);
  out[0] = '\0';
  for (s = strstr(text, head); s; s = strstr(s + 1, head)) {
    const char *v = s + strlen(head), *e = strchr(v, '\n');
    const char *q = strstr(v, "\"} ");
    cr_assert(e && q && q < e, "%.80s", s);
    n += (size_t)snprintf(out + n, len - n, "%.*s=%.*s;", (int)(q - v), v,
                          (int)(e - q - 3), q + 3);
    cr_assert_lt(n, len);
  }
}

/* fail_closed, lease_denials and store_full count under the route that
** counted them; a request no route matches is counted nowhere (it is
** refused before the store), its row "none" stays 0. */
Test(policy_counters, counted_by_the_route_that_counted) {
  fixture f;
  sluice_attr slow = {"job", "slow"};
  sluice_request q;
  sluice_decision d;
  char got[1024];
  int i;
  fx_open_text(&f, by_route_text);
  q = job_rq("POST", "/jobs", NULL);
  cr_assert_eq(decide(&f, &q).allowed, 1);
  for (i = 0; i < 2; i++) /* the one slot is taken */
    cr_assert_eq(decide(&f, &q).outcome, SLUICE_OUTCOME_CONCURRENCY);
  q = job_rq("GET", "/nowhere", NULL);
  cr_assert_eq(sluice_policy_decide(f.pol, 1, &q, &d, NULL), SLUICE_ENOTFOUND);
  fx_fail(&f, SLUICE_EUNAVAIL, 0);
  q = job_rq("GET", "/jobs/1", &slow);
  cr_assert_eq(decide(&f, &q).outcome, SLUICE_OUTCOME_UNAVAILABLE);
  q = job_rq("GET", "/jobs/2", NULL);
  for (i = 0; i < 3; i++)
    cr_assert_eq(decide(&f, &q).outcome, SLUICE_OUTCOME_UNAVAILABLE);
  by_route_lines(f.pol, "sluice_policy_lease_denials_total", got, sizeof got);
  cr_assert_str_eq(got, "POST /jobs=2;GET /jobs/*=0;GET /jobs/* #3=0;none=0;");
  by_route_lines(f.pol, "sluice_policy_fail_closed_total", got, sizeof got);
  cr_assert_str_eq(got, "POST /jobs=0;GET /jobs/*=1;GET /jobs/* #3=3;none=0;");
  by_route_lines(f.pol, "sluice_policy_store_full_total", got, sizeof got);
  cr_assert_str_eq(got, "POST /jobs=0;GET /jobs/*=0;GET /jobs/* #3=0;none=0;");
  fx_close(&f);
  /* A store of two records: the third tenant finds it full. */
  {
    const char *path = fx_write_conf(by_route_text);
    cr_assert_eq(fx_open_file(&f, path, "mem:max_keys=2", 0), SLUICE_OK);
    unlink(path);
  }
  for (i = 0; i < 3; i++) {
    char t[8];
    snprintf(t, sizeof t, "t%d", i);
    q = job_rq("GET", "/jobs/1", &slow);
    q.tenant_id = t;
    d = decide(&f, &q);
    cr_assert_eq(d.store_error, i < 2 ? 0 : SLUICE_EFULL, "tenant %d", i);
  }
  by_route_lines(f.pol, "sluice_policy_store_full_total", got, sizeof got);
  cr_assert_str_eq(got, "POST /jobs=0;GET /jobs/*=1;GET /jobs/* #3=0;none=0;");
  fx_close(&f);
}

static int load_text(sluice_policy_config **cfg, const char *text) {
  char err[256] = "";
  const char *path = fx_write_conf(text);
  int rc = cfg_load(cfg, path, err, sizeof err);
  unlink(path);
  cr_assert_eq(rc, SLUICE_OK, "%s", err);
  return rc;
}

/* On a shared segment a route keeps its counts by its label: a reload
** whose file reorders its routes and adds one reads them where they were. */
Test(policy_counters, a_shared_segment_keeps_counts_by_route_label) {
  static const char reordered[] =
      BY_ROUTE_LIMITS
      "routes = (\n"
      "  { method = \"DELETE\"; route = \"/jobs/*\"; limits = ( \"b\" ); },\n"
      "  { method = \"GET\"; route = \"/jobs/*\"; limits = ( \"b\" ); },\n"
      "  { method = \"POST\"; route = \"/jobs\"; limits = ( \"runs\" ); }\n"
      ");\n";
  sluice_policy_config *cfg;
  sluice_policy *p;
  sluice_request q = job_rq("POST", "/jobs", NULL);
  sluice_decision d;
  char err[256] = "", got[1024];
  int i;
  cr_assert_eq(load_text(&cfg, by_route_text), SLUICE_OK);
  cr_assert_eq(open_pol(cfg, uri, &p, err, sizeof err), SLUICE_OK, "%s", err);
  for (i = 0; i < 3; i++)
    cr_assert_eq(sluice_policy_decide(p, 1, &q, &d, NULL), SLUICE_OK);
  sluice_policy_close(p);
  cr_assert_eq(load_text(&cfg, reordered), SLUICE_OK);
  cr_assert_eq(open_pol(cfg, uri, &p, err, sizeof err), SLUICE_OK, "%s", err);
  cr_assert_eq(sluice_policy_decide(p, 1, &q, &d, NULL), SLUICE_OK);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_ALLOW, "a new policy's own store");
  cr_assert_eq(sluice_policy_decide(p, 1, &q, &d, NULL), SLUICE_OK);
  cr_assert_eq(d.outcome, SLUICE_OUTCOME_CONCURRENCY);
  by_route_lines(p, "sluice_policy_lease_denials_total", got, sizeof got);
  cr_assert_str_eq(got, "DELETE /jobs/*=0;GET /jobs/*=0;POST /jobs=3;none=0;");
  sluice_policy_close(p);
}

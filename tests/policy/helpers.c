/*
** Fixtures for the policy suites.  The failing store (tools/common/
** fail_store.h) wraps a real "mem" store so that the policy sees exactly
** the records it would see in production until the test flips the switch,
** and then gets the error a timed-out or unreachable backend gives, from
** the same vtable call.
*/
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void on_event(void *ud, const sluice_event *ev) {
  fixture *f = ud;
  logged_event *l;
  pthread_mutex_lock(&f->mu);
  if (f->nev >= (int)(sizeof f->ev / sizeof f->ev[0])) {
    pthread_mutex_unlock(&f->mu);
    return;
  }
  l = &f->ev[f->nev++];
  memset(l, 0, sizeof *l);
  l->type = ev->type;
  l->scope = ev->scope;
  l->level = ev->level;
  l->outcome = ev->outcome;
  l->store_error = ev->store_error;
  l->until_ns = ev->until_ns;
  if (ev->who)
    snprintf(l->who, sizeof l->who, "%s", ev->who);
  if (ev->why)
    snprintf(l->why, sizeof l->why, "%s", ev->why);
  if (ev->scope_id)
    snprintf(l->scope_id, sizeof l->scope_id, "%s", ev->scope_id);
  if (ev->tenant_scope_id)
    snprintf(l->tenant_scope_id, sizeof l->tenant_scope_id, "%s",
             ev->tenant_scope_id);
  pthread_mutex_unlock(&f->mu);
}

static void fx_policy(fixture *f, const sluice_policy_config *cfg,
                      const char *path, unsigned flags);

/* The one place the suites name their default policy: the ledger API as
** a file (issue 37 stage B). */
const char *const fx_default_conf = SLUICE_ETC "/ledger.conf";

static sluice_policy_config **made;
static int nmade;

static void free_made(void) {
  int i;
  for (i = 0; i < nmade; i++)
    sluice_policy_config_free(made[i]);
  free(made);
}

sluice_policy_config *cfg_new(void) {
  sluice_policy_config *c;
  char err[256];
  cr_assert_eq(cfg_load(&c, fx_default_conf, err, sizeof err), SLUICE_OK,
               "%s", err);
  return c;
}

int cfg_load(sluice_policy_config **c, const char *path, char *err,
             size_t errlen) {
  sluice_policy_config **m;
  int rc = sluice_policy_config_new(c, path, err, errlen);
  if (rc != SLUICE_OK)
    return rc;
  if (nmade == 0)
    atexit(free_made);
  m = realloc(made, sizeof *m * (size_t)(nmade + 1));
  cr_assert_not_null(m);
  made = m;
  made[nmade++] = *c;
  return rc;
}

int cfg_warnings(const char *path, char *buf, size_t len) {
  sluice_policy_config *c;
  int rc = sluice_policy_config_new(&c, path, buf, len);
  sluice_policy_config_free(c);
  return rc;
}

void cfg_sets(sluice_policy_config *c, const char *path, const char *value) {
  char err[256];
  cr_assert_eq(sluice_policy_config_set(c, path, value, err, sizeof err),
               SLUICE_OK, "%s = %s: %s", path, value, err);
}

void cfg_set(sluice_policy_config *c, const char *path, int64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%lld", (long long)v);
  cfg_sets(c, path, s);
}

/* The ns in one unit of a duration setting, by its name's suffix. */
static int64_t unit_of(const char *path) {
  size_t n = strlen(path);
  if (n > 3 && strcmp(path + n - 3, "_ms") == 0)
    return MS;
  if (n > 5 && strcmp(path + n - 5, "_days") == 0)
    return 86400 * SEC;
  cr_assert(n > 2 && strcmp(path + n - 2, "_s") == 0, "%s: no unit", path);
  return SEC;
}

void cfg_set_ns(sluice_policy_config *c, const char *path, int64_t ns) {
  int64_t u = unit_of(path);
  cr_assert_eq(ns % u, 0, "%s: %lld ns is not whole", path, (long long)ns);
  cfg_set(c, path, ns / u);
}

const char *cfg_str(const sluice_policy_config *c, const char *path) {
  static char v[512];
  cr_assert_eq(sluice_policy_config_get(c, path, v, sizeof v), SLUICE_OK,
               "%s", path);
  return v;
}

int64_t cfg_int(const sluice_policy_config *c, const char *path) {
  return strtoll(cfg_str(c, path), NULL, 10);
}

int64_t cfg_ns(const sluice_policy_config *c, const char *path) {
  return cfg_int(c, path) * unit_of(path);
}

void fx_open(fixture *f, const sluice_policy_config *cfg, unsigned flags) {
  sluice_limiter_options lo;
  memset(f, 0, sizeof *f);
  cr_assert_eq(sluice_clock_manual(T0, &f->clock), SLUICE_OK);
  memset(&lo, 0, sizeof lo);
  lo.backend = &fail_store_backend;
  lo.store = FAILING_STORE;
  lo.clock = f->clock;
  cr_assert_eq(sluice_limiter_open(&lo, &f->lim, NULL, 0), SLUICE_OK);
  fx_policy(f, cfg, cfg ? NULL : fx_default_conf, flags);
}

/* The clock and a limiter over store (NULL: the failing mem store). */
static int fx_limiter(fixture *f, const char *store, unsigned open_flags) {
  sluice_limiter_options lo;
  int rc;
  memset(f, 0, sizeof *f);
  cr_assert_eq(sluice_clock_manual(T0, &f->clock), SLUICE_OK);
  memset(&lo, 0, sizeof lo);
  if (!store) {
    lo.backend = &fail_store_backend;
    store = FAILING_STORE;
  }
  lo.store = store;
  lo.clock = f->clock;
  lo.flags = open_flags;
  rc = sluice_limiter_open(&lo, &f->lim, NULL, 0);
  if (rc != SLUICE_OK)
    sluice_clock_free(f->clock);
  return rc;
}

int fx_open_store(fixture *f, const sluice_policy_config *cfg,
                  const char *store, unsigned open_flags) {
  int rc = fx_limiter(f, store, open_flags);
  if (rc == SLUICE_OK)
    fx_policy(f, cfg, cfg ? NULL : fx_default_conf, 0);
  return rc;
}

int fx_open_file(fixture *f, const char *path, const char *store,
                 unsigned open_flags) {
  int rc = fx_limiter(f, store, open_flags);
  if (rc == SLUICE_OK)
    fx_policy(f, NULL, path, 0);
  return rc;
}

static void fx_policy(fixture *f, const sluice_policy_config *cfg,
                      const char *path, unsigned flags) {
  sluice_policy_options po;
  char err[256];
  int i;
  pthread_mutex_init(&f->mu, NULL);
  memset(&po, 0, sizeof po);
  po.limiter = f->lim;
  po.config = cfg;
  po.config_path = path;
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 1);
  po.on_event = on_event;
  po.userdata = f;
  po.flags = flags;
  po.errbuf = err;
  po.errlen = sizeof err;
  cr_assert_eq(sluice_policy_open(&po, &f->pol), SLUICE_OK, "open: %s", err);
}

void fx_close(fixture *f) {
  sluice_policy_close(f->pol);
  sluice_limiter_close(f->lim);
  sluice_clock_free(f->clock);
  pthread_mutex_destroy(&f->mu);
}

void fx_fail(fixture *f, int rc, int after) {
  fail_plan p = fail_plan_from(rc, after);
  cr_assert_eq(sluice_limiter_control(f->lim, FAIL_STORE_CTL_PLAN, &p),
               SLUICE_OK);
}

static fail_stats fx_stats(fixture *f) {
  fail_stats st;
  cr_assert_eq(sluice_limiter_control(f->lim, FAIL_STORE_CTL_STATS, &st),
               SLUICE_OK);
  return st;
}

/* Store calls (xRun) that reached mem.  The same count as
** fx_calls(): once two counters, of which only one is left. */
int64_t fx_applies(fixture *f) {
  return fx_stats(f).passed;
}

int64_t fx_calls(fixture *f) {
  return fx_stats(f).passed;
}

int64_t fx_attempts(fixture *f) {
  return fx_stats(f).attempts;
}

int fx_count(const fixture *f, int type) {
  int i, n = 0;
  for (i = 0; i < f->nev; i++)
    n += f->ev[i].type == type;
  return n;
}

const logged_event *fx_last(const fixture *f, int type) {
  int i;
  for (i = f->nev - 1; i >= 0; i--)
    if (f->ev[i].type == type)
      return &f->ev[i];
  return NULL;
}

/* The ring of attribute arrays requests point to (see helpers.h). */
#define RQ_ATTRS 4
typedef struct rq_slot {
  sluice_attr a[RQ_ATTRS];
  char num[24]; /* a number's text (rq_export) */
} rq_slot;
static _Thread_local rq_slot ring[1024];
static _Thread_local unsigned ring_next;

#define RING_N (sizeof ring / sizeof ring[0])

/* The ring slot attributes a are in, NULL for a test's own array. */
static const rq_slot *slot_of(const sluice_attr *a) {
  uintptr_t p = (uintptr_t)a, lo = (uintptr_t)ring;
  if (p < lo || p >= (uintptr_t)(ring + RING_N))
    return NULL;
  return &ring[(p - lo) / sizeof ring[0]];
}

/* rq_with(), the value copied into the slot's number when copy. */
static sluice_request rq_set(sluice_request r, const char *name,
                             const char *value, int copy) {
  rq_slot *s = &ring[ring_next++ % RING_N];
  const rq_slot *from = slot_of(r.attrs);
  const char *from_num = from ? from->num : NULL;
  size_t i, n = 0;
  for (i = 0; i < r.nattrs; i++) {
    const char *v = r.attrs[i].value;
    if (!strcmp(r.attrs[i].name, name))
      continue;
    cr_assert_lt(n, RQ_ATTRS);
    if (v && v == from_num) { /* a number moves with its slot */
      snprintf(s->num, sizeof s->num, "%s", from_num);
      v = s->num;
    }
    s->a[n++] = (sluice_attr){r.attrs[i].name, v};
  }
  if (value) {
    cr_assert_lt(n, RQ_ATTRS);
    if (copy) {
      snprintf(s->num, sizeof s->num, "%s", value);
      value = s->num;
    }
    s->a[n++] = (sluice_attr){name, value};
  }
  r.attrs = n ? s->a : NULL;
  r.nattrs = n;
  return r;
}

sluice_request rq_with(sluice_request r, const char *name, const char *value) {
  return rq_set(r, name, value, 0);
}

static sluice_request rq_route(const char *tenant, const char *key,
                               const char *tier, const char *method,
                               const char *route) {
  sluice_request r;
  memset(&r, 0, sizeof r);
  r.tenant_id = tenant;
  r.api_key_id = key;
  r.tier = tier;
  r.method = method;
  r.route = route;
  return r;
}

sluice_request rq_std(const char *tenant, const char *key, const char *tier) {
  return rq_route(tenant, key, tier, "GET", "/v1/ledgers/l1/entries");
}

sluice_request rq_reconcile(const char *tenant, const char *key,
                            const char *tier, const char *ledger) {
  return rq_with(rq_route(tenant, key, tier, "POST", "/v1/ledgers/reconcile"),
                 "ledger", ledger);
}

sluice_request rq_export(const char *tenant, const char *key,
                         const char *tier, int64_t range_s) {
  char v[24];
  snprintf(v, sizeof v, "%lld", (long long)range_s);
  return rq_set(
      rq_route(tenant, key, tier, "GET", "/v1/reports/audit-export"),
      "export_range_s", v, 1);
}

sluice_request rq_poll(const char *tenant, const char *key, const char *tier) {
  return rq_route(tenant, key, tier, "GET", "/v1/jobs/j1");
}

sluice_request rq_signin(const char *ip, const char *subject,
                         const char *result) {
  sluice_request r = rq_route(NULL, NULL, NULL, "POST", "/v1/auth/token");
  r.client_ip = ip;
  if (subject)
    r = rq_with(r, "subject", subject);
  if (result)
    r = rq_with(r, "result", result);
  return r;
}

sluice_decision decide(fixture *f, const sluice_request *r) {
  sluice_decision d;
  int rc = sluice_policy_decide(f->pol, 1, r, &d, NULL);
  cr_assert_eq(rc, SLUICE_OK, "decide: %s (field %s)", sluice_strerror(rc),
               d.invalid_field ? d.invalid_field : "-");
  return d;
}

void fx_wait_children(const pid_t *pids, int n) {
  int i, st;
  for (i = 0; i < n; i++) {
    cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "child %d failed (status %d)", i, st);
  }
}

const char *fx_write_conf(const char *text) {
  static char path[64];
  int fd;
  snprintf(path, sizeof path, "/tmp/sluice-policy-XXXXXX");
  fd = mkstemp(path);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

const char *fx_write_ledger(const char *text) {
  static char buf[16384];
  FILE *fp = fopen(fx_default_conf, "r");
  size_t n;
  cr_assert_not_null(fp, "%s", fx_default_conf);
  n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  cr_assert_lt(n + strlen(text), sizeof buf - 1, "%s is too long",
               fx_default_conf);
  memcpy(buf + n, text, strlen(text) + 1);
  return fx_write_conf(buf);
}

void fx_open_text(fixture *f, const char *text) {
  const char *path = fx_write_conf(text);
  cr_assert_eq(fx_open_file(f, path, NULL, 0), SLUICE_OK);
  unlink(path);
}

int inspect_limit(sluice_policy *p, const char *limit, const sluice_request *q,
                  sluice_limit_state *st, const char **field) {
  sluice_inspect_query iq = {0};
  sluice_inspect_report r;
  int rc;
  iq.limit = limit;
  iq.req = q;
  rc = sluice_policy_inspect(p, &iq, &r);
  if (rc == SLUICE_OK)
    *st = r.limit;
  if (field)
    *field = r.invalid_field;
  return rc;
}

int inspect_penalty(sluice_policy *p, const char *penalty,
                    const sluice_request *q, sluice_inspect_report *r,
                    const char **field) {
  sluice_inspect_query iq = {0};
  int rc;
  iq.penalty = penalty;
  iq.req = q;
  rc = sluice_policy_inspect(p, &iq, r);
  if (field)
    *field = r->invalid_field;
  return rc;
}

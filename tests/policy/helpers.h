/*
** Shared fixtures of the policy suites: a manual clock, a limiter on a
** store that can be told to fail (a "mem" store behind the failing store of
** tools/common/fail_store.h, which returns an injected error from xRun
** on demand), a policy over them, and an event log that copies
** every event the policy emits.
*/
#ifndef SLUICE_TEST_POLICY_HELPERS_H
#define SLUICE_TEST_POLICY_HELPERS_H

#include <pthread.h>
#include <sys/types.h>
#include <sluice.h>
#include "../common/units.h"

#define T0 (INT64_C(1767225600) * 1000000000) /* 2026-01-01T00:00:00Z */

#include "fail_store.h"

/* The failing store as the policy suites open it: each xRun (one
** program, or a batch of them) is one store call. */
#define FAILING_STORE "fail:"

typedef struct logged_event {
  int type, scope, level, outcome, store_error;
  int64_t until_ns;
  char who[32], why[64], scope_id[SLUICE_SCOPE_ID_LEN + 1];
  char tenant_scope_id[SLUICE_SCOPE_ID_LEN + 1]; /* "": NULL */
} logged_event;

typedef struct fixture {
  sluice_clock *clock;
  sluice_limiter *lim;
  sluice_policy *pol;
  pthread_mutex_t mu; /* events may come from several threads */
  int nev;
  logged_event ev[512];
} fixture;

/* The suites' default policy file (etc/ledger.conf of the source tree):
** what fx_open() and cfg_new() open when given no configuration. */
extern const char *const fx_default_conf;

/* A configuration of the default policy file, freed when the process
** exits (a test may read it after its policies close). */
sluice_policy_config *cfg_new(void);
/* sluice_policy_config_new() of path, freed at exit the same way. */
int cfg_load(sluice_policy_config **c, const char *path, char *err,
             size_t errlen);
/* A file's first warning (or its error) into buf, "" when none; the rc of
** sluice_policy_config_new(). */
int cfg_warnings(const char *path, char *buf, size_t len);
/* Set a setting (asserting it is taken): an integer, a duration in ns
** (the path's unit, _ms, _s or _days, must divide it), a value in file
** syntax. */
void cfg_set(sluice_policy_config *c, const char *path, int64_t v);
void cfg_set_ns(sluice_policy_config *c, const char *path, int64_t ns);
void cfg_sets(sluice_policy_config *c, const char *path, const char *value);
/* A value in force: an integer, a duration in ns, a string (static). */
int64_t cfg_int(const sluice_policy_config *c, const char *path);
int64_t cfg_ns(const sluice_policy_config *c, const char *path);
const char *cfg_str(const sluice_policy_config *c, const char *path);

/* Open everything; cfg NULL = the default policy file. */
void fx_open(fixture *f, const sluice_policy_config *cfg, unsigned flags);
/* The same over a real store ("shm:...", "lmdb:..."): returns the
** limiter's open error (the fixture is then unusable) for skipping. */
int fx_open_store(fixture *f, const sluice_policy_config *cfg,
                  const char *store, unsigned open_flags);
/* Open with the policy file at path, over store (NULL: the failing mem
** store of fx_open()); returns the limiter's open error as above. */
int fx_open_file(fixture *f, const char *path, const char *store,
                 unsigned open_flags);
void fx_close(fixture *f);
/* Make the store fail with rc (0 heals) after `after` more applies. */
void fx_fail(fixture *f, int rc, int after);
int64_t fx_applies(fixture *f);
/* Store calls so far (each xApply and each program's xRun is one). */
int64_t fx_calls(fixture *f);
/* sluice_policy_inspect() of a declared limit (its records into *st) or
** a declared penalty (its box into *r) by name, for the scope q names;
** *field (may be NULL): the attribute at fault. */
int inspect_limit(sluice_policy *p, const char *limit, const sluice_request *q,
                  sluice_limit_state *st, const char **field);
int inspect_penalty(sluice_policy *p, const char *penalty,
                    const sluice_request *q, sluice_inspect_report *r,
                    const char **field);
/* The same, counting the calls that got the injected failure too. */
int64_t fx_attempts(fixture *f);
int fx_count(const fixture *f, int type);
const logged_event *fx_last(const fixture *f, int type);

/* Wait for forked children, asserting each exited 0. */
void fx_wait_children(const pid_t *pids, int n);

/* Requests of etc/ledger.conf, by method + route + attributes (the
** file's header names them).  Attribute values are borrowed, but for
** rq_export's number; the attribute array a request points to is one of a
** per-thread ring of 1024, so a request stays valid for the next 1023
** requests built by these helpers in its thread. */
/* A standard request: GET /v1/ledgers/l1/entries. */
sluice_request rq_std(const char *tenant, const char *key, const char *tier);
/* POST /v1/ledgers/reconcile on ledger (NULL: no `ledger`). */
sluice_request rq_reconcile(const char *tenant, const char *key,
                            const char *tier, const char *ledger);
/* GET /v1/reports/audit-export of range_s seconds (0: not given). */
sluice_request rq_export(const char *tenant, const char *key,
                         const char *tier, int64_t range_s);
/* GET /v1/jobs/j1 (a job poll). */
sluice_request rq_poll(const char *tenant, const char *key, const char *tier);
/* POST /v1/auth/token from ip for subject (NULL: none) with the credential
** check's result ("ok", "bad_secret", "unknown_client"; NULL before the
** check). */
sluice_request rq_signin(const char *ip, const char *subject,
                         const char *result);
/* r with attribute name set to value (NULL: removed), in a fresh slot of
** the ring (r's own attributes are left as they were). */
sluice_request rq_with(sluice_request r, const char *name, const char *value);

/* The decision's binding limit is the declared limit name. */
#define assert_binding(d, name)                                                \
  do {                                                                         \
    cr_assert_eq((d).binding, SLUICE_BINDING_LIMIT);                           \
    cr_assert_str_eq((d).limit_name, (name));                                  \
  } while (0)

/* Decide, asserting the call itself worked. */
sluice_decision decide(fixture *f, const sluice_request *r);

/* text written to a fresh temporary file, whose path is returned (static:
** valid until the next call; the caller unlinks it). */
const char *fx_write_conf(const char *text);
/* The default policy file with text after it (settings of groups it does
** not have), written as fx_write_conf() does. */
const char *fx_write_ledger(const char *text);
/* Open everything on mem with the policy file text. */
void fx_open_text(fixture *f, const char *text);

#endif


/*
** Core plumbing: error codes, clocks, the limiter's monotonic clamp, limiter
** open/close failure rules, custom backends through
** sluice_limiter_options.backend (version 1 fallback of apply_many, version 2
** batching, ENOTSUP, broken method tables), injected allocators, URI
** parameters, key and hash-tag validation.
*/
#include <limits.h>
#include <sys/stat.h>

#include "unit.h"
#include "../common/one_step.h"
#include "op.h"
#include "random.h"
#include "store.h"

/* ------------------------------------------------------------- errors --- */

static const struct {
  int code;
  const char *name;
} all_errs[] = {
#define E(name, code, msg) {SLUICE_##name, "SLUICE_" #name},
    SLUICE_ERRNO_MAP(E)
#undef E
};
#define NERRS ((int)(sizeof all_errs / sizeof all_errs[0]))

Test(errors, every_code_has_distinct_message_and_name) {
  int i, j;
  cr_assert_eq(NERRS, 17);
  for (i = 0; i < NERRS; i++) {
    const char *m = sluice_strerror(all_errs[i].code);
    cr_assert_not_null(m);
    cr_assert_str_neq(m, "unknown error");
    cr_assert_str_neq(m, "success");
    cr_assert_str_eq(sluice_err_name(all_errs[i].code), all_errs[i].name);
    cr_assert_lt(all_errs[i].code, -30900, "codes live below -30900");
    for (j = 0; j < i; j++) {
      cr_assert_neq(all_errs[i].code, all_errs[j].code);
      cr_assert_str_neq(m, sluice_strerror(all_errs[j].code));
      cr_assert_str_neq(sluice_err_name(all_errs[i].code),
                        sluice_err_name(all_errs[j].code));
    }
  }
  cr_assert_eq(SLUICE_ERRNO_LAST, -30917);
  cr_assert_eq(SLUICE_EINVAL, -30901);
  cr_assert_eq(SLUICE_EEXIST, -30917);
}

Test(errors, ok_and_unknown_codes) {
  static const int unknown[] = {1, -1, -2, 22, -30900, -30918, INT_MIN, INT_MAX};
  size_t i;
  cr_assert_str_eq(sluice_strerror(SLUICE_OK), "success");
  cr_assert_str_eq(sluice_err_name(SLUICE_OK), "SLUICE_OK");
  for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    cr_assert_str_eq(sluice_strerror(unknown[i]), "unknown error");
    cr_assert_str_eq(sluice_err_name(unknown[i]), "SLUICE_UNKNOWN");
  }
}

/* ------------------------------------------------------------- clocks --- */

Test(clock, manual_set_and_advance) {
  sluice_clock *c = (sluice_clock *)1;
  cr_assert_eq(sluice_clock_manual(-1, &c), SLUICE_EINVAL);
  cr_assert_null(c, "failed open leaves *out NULL");
  cr_assert_eq(sluice_clock_manual(0, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_clock_manual(5 * SEC, &c), SLUICE_OK);
  cr_assert_eq(sluice_clock_now(c), 5 * SEC);
  cr_assert_eq(sluice_clock_advance(c, 250), SLUICE_OK);
  cr_assert_eq(sluice_clock_now(c), 5 * SEC + 250);
  cr_assert_eq(sluice_clock_advance(c, -250), SLUICE_OK);
  cr_assert_eq(sluice_clock_now(c), 5 * SEC);
  cr_assert_eq(sluice_clock_set(c, 2 * SEC), SLUICE_OK, "may go backwards");
  cr_assert_eq(sluice_clock_now(c), 2 * SEC);
  cr_assert_eq(sluice_clock_set(c, -1), SLUICE_EINVAL);
  cr_assert_eq(sluice_clock_now(c), 2 * SEC);
  cr_assert_neq(sluice_clock_advance(c, -2 * SEC - 1), SLUICE_OK,
                "advance below zero");
  cr_assert_eq(sluice_clock_now(c), 2 * SEC);
  cr_assert_eq(sluice_clock_set(c, INT64_MAX - 1), SLUICE_OK);
  cr_assert_eq(sluice_clock_advance(c, 2), SLUICE_ERANGE, "overflow");
  cr_assert_eq(sluice_clock_now(c), INT64_MAX - 1);
  cr_assert_eq(sluice_clock_advance(c, 1), SLUICE_OK);
  cr_assert_eq(sluice_clock_now(c), INT64_MAX);
  cr_assert_eq(sluice_clock_set(c, 0), SLUICE_OK);
  cr_assert_eq(sluice_clock_now(c), 0);
  sluice_clock_free(c);
}

Test(clock, real_clock_refuses_manual_ops) {
  sluice_clock *c;
  cr_assert_eq(sluice_clock_real(&c), SLUICE_OK);
  cr_assert_gt(sluice_clock_now(c), 0);
  cr_assert_eq(sluice_clock_set(c, SEC), SLUICE_EINVAL);
  cr_assert_eq(sluice_clock_advance(c, SEC), SLUICE_EINVAL);
  cr_assert_eq(sluice_clock_real(NULL), SLUICE_EINVAL);
  sluice_clock_free(c);
  sluice_clock_free(NULL);
  cr_assert_eq(sluice_clock_now(NULL), 0);
  cr_assert_eq(sluice_clock_set(NULL, 1), SLUICE_EINVAL);
  cr_assert_eq(sluice_clock_advance(NULL, 1), SLUICE_EINVAL);
}

static int64_t custom_now(void *ud) { return *(int64_t *)ud; }

Test(clock, custom_clock) {
  int64_t t = 42;
  sluice_clock *c = (sluice_clock *)1;
  cr_assert_eq(sluice_clock_custom(NULL, &t, &c), SLUICE_EINVAL);
  cr_assert_null(c);
  cr_assert_eq(sluice_clock_custom(custom_now, &t, &c), SLUICE_OK);
  cr_assert_eq(sluice_clock_now(c), 42);
  t = 7;
  cr_assert_eq(sluice_clock_now(c), 7);
  t = -5;
  cr_assert_eq(sluice_clock_now(c), 0, "negative readings are clamped to 0");
  cr_assert_eq(sluice_clock_set(c, 1), SLUICE_EINVAL);
  sluice_clock_free(c);
}

/* ------------------------------------------------------------ limiter --- */

static sluice_limiter *open_manual(sluice_clock *c, const char *store) {
  sluice_limiter_options o;
  sluice_limiter *l = NULL;
  memset(&o, 0, sizeof o);
  o.clock = c;
  o.store = store;
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_OK);
  cr_assert_not_null(l);
  return l;
}

Test(limiter, never_sees_time_go_backwards) {
  const sluice_gcra_params p = {1, SEC, 1};
  sluice_clock *c;
  sluice_limiter *l;
  sluice_verdict v;
  cr_assert_eq(sluice_clock_manual(100 * SEC, &c), SLUICE_OK);
  l = open_manual(c, "mem");
  cr_assert_eq(sluice_limiter_now(l), 100 * SEC);
  cr_assert_eq(sluice_limiter_take(l, "k", 1, &p, 1, &v), SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(v.now_ns, 100 * SEC);
  /* Clock stepped back 50 s: the limiter stands still at 100 s. */
  cr_assert_eq(sluice_clock_set(c, 50 * SEC), SLUICE_OK);
  cr_assert_eq(sluice_limiter_now(l), 100 * SEC);
  cr_assert_eq(sluice_limiter_take(l, "k", 1, &p, 1, &v), SLUICE_OK);
  cr_assert(!v.allowed);
  cr_assert_eq(v.now_ns, 100 * SEC);
  cr_assert_eq(v.retry_after_ns, SEC, "decided as at 100 s");
  /* A fresh key at the stepped-back time is also decided at 100 s. */
  cr_assert_eq(sluice_limiter_take(l, "other", 5, &p, 1, &v), SLUICE_OK);
  cr_assert_eq(v.now_ns, 100 * SEC);
  cr_assert_eq(v.reset_ns, SEC);
  /* Forward again, but not yet past 100 s: still standing still. */
  cr_assert_eq(sluice_clock_set(c, 99 * SEC), SLUICE_OK);
  cr_assert_eq(sluice_limiter_now(l), 100 * SEC);
  cr_assert_eq(sluice_clock_set(c, 100 * SEC + 500 * MS), SLUICE_OK);
  cr_assert_eq(sluice_limiter_take(l, "k", 1, &p, 1, &v), SLUICE_OK);
  cr_assert(!v.allowed);
  cr_assert_eq(v.retry_after_ns, 500 * MS);
  cr_assert_eq(sluice_clock_set(c, 101 * SEC), SLUICE_OK);
  cr_assert_eq(sluice_limiter_take(l, "k", 1, &p, 1, &v), SLUICE_OK);
  cr_assert(v.allowed);
  /* apply_at is clamped too. */
  {
    sluice_key k = KEY("k");
    sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_PEEK, 1, &k, &p, 0, 0};
    cr_assert_eq(op_decide(l, &op, 3 * SEC, &v), SLUICE_OK);
    cr_assert_eq(v.now_ns, 101 * SEC);
    cr_assert_eq(v.remaining, 0);
    cr_assert_eq(op_decide(l, &op, 102 * SEC, &v), SLUICE_OK);
    cr_assert_eq(v.now_ns, 102 * SEC);
    cr_assert_eq(v.remaining, 1);
    /* ... and raises the limiter's time for later clock reads. */
    cr_assert_eq(sluice_limiter_now(l), 102 * SEC);
    cr_assert_eq(op_decide(l, &op, -1, &v), SLUICE_EINVAL);
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

/* The slack: a time within SLUICE_CLOCK_SLACK_NS of the published one is
** used as it is, even when an earlier call used a later one; further back,
** the published time.  Over a random walk of the clock with steps back of
** every size, no time used is more than the slack before any used before
** it, nor before the clock's own reading. */
Test(limiter, time_goes_back_by_at_most_the_slack) {
  const int64_t S = SLUICE_CLOCK_SLACK_NS;
  sluice_clock *c;
  sluice_limiter *l;
  int64_t t = 100 * SEC, most, got;
  rng r = {0x51ac};
  cr_assert_eq(sluice_clock_manual(t, &c), SLUICE_OK);
  l = open_manual(c, "mem");
  cr_assert_eq(sluice_limiter_now(l), t); /* published: past 0 + S */
  cr_assert_eq(sluice_clock_set(c, t + S / 2), SLUICE_OK);
  cr_assert_eq(sluice_limiter_now(l), t + S / 2); /* within: not published */
  cr_assert_eq(sluice_clock_set(c, t + S / 4), SLUICE_OK);
  cr_assert_eq(sluice_limiter_now(l), t + S / 4, "within the slack: as is");
  cr_assert_eq(sluice_clock_set(c, t - 1), SLUICE_OK);
  cr_assert_eq(sluice_limiter_now(l), t, "before the published time");
  cr_assert_eq(sluice_clock_set(c, t + 2 * S), SLUICE_OK);
  cr_assert_eq(sluice_limiter_now(l), t + 2 * S); /* published */
  cr_assert_eq(sluice_clock_set(c, t + S), SLUICE_OK);
  cr_assert_eq(sluice_limiter_now(l), t + 2 * S);
  most = t + 2 * S;
  for (int i = 0; i < 100000; i++) {
    int64_t step = rng_range(&r, 0, 9) < 7 ? rng_range(&r, 0, S / 3)
                                           : -rng_range(&r, 0, 3 * S);
    t = t + step > 0 ? t + step : t;
    cr_assert_eq(sluice_clock_set(c, t), SLUICE_OK);
    got = sluice_limiter_now(l);
    cr_assert_geq(got, t, "step %d: earlier than the clock", i);
    cr_assert_geq(got, most - S, "step %d: %lld ns before a time used "
                  "before", i, (long long)(most - got));
    if (got > most)
      most = got;
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(limiter, open_failures_leave_out_null) {
  sluice_limiter_options o;
  sluice_limiter *l = (sluice_limiter *)1;
  char err[128];
  memset(&o, 0, sizeof o);
  cr_assert_eq(sluice_limiter_open(&o, NULL, NULL, 0), SLUICE_EINVAL);
  o.store = "nosuchbackend";
  cr_assert_eq(sluice_limiter_open(&o, &l, err, sizeof err), SLUICE_EINVAL);
  cr_assert_null(l);
  cr_assert_str_eq(err, "unknown backend 'nosuchbackend'");
  l = (sluice_limiter *)1;
  o.store = "nosuchbackend:x=1";
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_EINVAL);
  cr_assert_null(l);
  l = (sluice_limiter *)1;
  o.store = "a-backend-name-that-is-far-too-long-to-be-real";
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_EINVAL);
  cr_assert_null(l);
  l = (sluice_limiter *)1;
  o.store = "mem:max_keys=lots";
  cr_assert_eq(sluice_limiter_open(&o, &l, err, sizeof err), SLUICE_EINVAL);
  cr_assert_null(l);
  cr_assert_not_null(strstr(err, "max_keys"), "detail kept: '%s'", err);
  /* errbuf is truncated, NUL-terminated. */
  {
    char small[8];
    memset(small, 'x', sizeof small);
    o.store = "nosuchbackend";
    cr_assert_eq(sluice_limiter_open(&o, &l, small, sizeof small),
                 SLUICE_EINVAL);
    cr_assert_eq(strlen(small), 7);
  }
  sluice_limiter_close(NULL);
}

/* The check a configuration test (nginx -t) makes: what open would refuse
** for the string itself, with open's words, and nothing opened. */
Test(limiter, store_check_refuses_what_open_refuses_by_its_words) {
  static const char *bad[] = {"nosuchbackend", "nosuchbackend:x=1",
                              "a-backend-name-that-is-far-too-long-to-be-real",
                              "shm:name=/x;capacty=10", "shm:name=/x;name=/y",
                              "lmdb:pth=/tmp/x", "mem:nokey=1"};
  static const char *good[] = {NULL, "mem", "mem:", "shm:name=/no-such-seg",
                               "lmdb:path=/no/such/dir",
                               "redis:nodes=127.0.0.1:1",
                               "redis://127.0.0.1:1"};
  char err[256], err2[256];
  size_t i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sluice_limiter_options o;
    sluice_limiter *l = NULL;
    memset(&o, 0, sizeof o);
    o.store = bad[i];
    cr_assert_eq(sluice_store_check(bad[i], err, sizeof err), SLUICE_EINVAL,
                 "%s", bad[i]);
    cr_assert_eq(sluice_limiter_open(&o, &l, err2, sizeof err2),
                 SLUICE_EINVAL, "%s", bad[i]);
    cr_assert_str_eq(err, err2, "%s: the same words as open", bad[i]);
  }
  for (i = 0; i < sizeof good / sizeof good[0]; i++)
    cr_assert_eq(sluice_store_check(good[i], err, sizeof err), SLUICE_OK,
                 "%s: %s", good[i] ? good[i] : "NULL", err);
  {
    struct stat st;
    cr_assert_neq(stat("/no/such/dir", &st), 0, "the check created nothing");
  }
}

Test(limiter, defaults_and_introspection) {
  sluice_limiter *l = NULL;
  sluice_limiter_options o;
  sluice_state st;
  int64_t exp;
  cr_assert_eq(sluice_limiter_open(NULL, &l, NULL, 0), SLUICE_OK);
  cr_assert_str_eq(sluice_limiter_backend(l), "mem");
  cr_assert(sluice_limiter_capabilities(l) & SLUICE_CAP_THREADSAFE);
  cr_assert_str_eq(sluice_limiter_errmsg(l), "");
  cr_assert_gt(sluice_limiter_now(l), 0);
  cr_assert_eq(sluice_limiter_get(l, "k", 1, &st, &exp), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_limiter_get(l, "", 0, &st, &exp), SLUICE_EKEY);
  cr_assert_eq(sluice_limiter_get(l, "k", 1, NULL, &exp), SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_delete(l, "k", 1), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_limiter_delete(l, NULL, 3), SLUICE_EKEY);
  cr_assert_eq(sluice_limiter_control(l, 99999, &exp), SLUICE_ENOTFOUND);
  sluice_limiter_close(l);
  /* "" and "mem:" are mem too. */
  memset(&o, 0, sizeof o);
  o.store = "mem:";
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_OK);
  cr_assert_str_eq(sluice_limiter_backend(l), "mem");
  sluice_limiter_close(l);
  /* NULL handles. */
  cr_assert_eq(op_decide(NULL, NULL, SLUICE_NOW, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_get(NULL, "k", 1, &st, &exp), SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_control(NULL, 1, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_capabilities(NULL), 0);
}

Test(limiter, take_get_delete_roundtrip) {
  const sluice_gcra_params p = {1, SEC, 10};
  sluice_clock *c;
  sluice_limiter *l;
  sluice_verdict v;
  sluice_state st;
  int64_t exp = 0;
  cr_assert_eq(sluice_clock_manual(10 * SEC, &c), SLUICE_OK);
  l = open_manual(c, NULL);
  cr_assert_eq(sluice_limiter_take(l, "key", 3, &p, 4, &v), SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 6);
  cr_assert_eq(sluice_limiter_get(l, "key", 3, &st, &exp), SLUICE_OK);
  cr_assert_eq((int64_t)st.w[0], 14 * SEC, "TAT = 10 s + 4 points");
  cr_assert_eq(exp, 14 * SEC);
  cr_assert_eq(sluice_limiter_get(l, "key", 3, &st, NULL), SLUICE_OK);
  cr_assert_eq(sluice_limiter_delete(l, "key", 3), SLUICE_OK);
  cr_assert_eq(sluice_limiter_get(l, "key", 3, &st, &exp), SLUICE_ENOTFOUND);
  /* Errors from validation come back unchanged and change nothing. */
  cr_assert_eq(sluice_limiter_take(l, "key", 3, &p, 0, &v), SLUICE_ERANGE);
  cr_assert_eq(sluice_limiter_take(l, "key", 3, &p, 11, &v), SLUICE_ERANGE);
  cr_assert_eq(sluice_limiter_take(l, "", 0, &p, 1, &v), SLUICE_EKEY);
  cr_assert_eq(sluice_limiter_take(l, "key", 3, &p, 1, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_get(l, "key", 3, &st, &exp), SLUICE_ENOTFOUND);
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(limiter, backend_find) {
  const sluice_backend *m = sluice_backend_find("mem");
  cr_assert_not_null(m);
  cr_assert_str_eq(m->zName, "mem");
  cr_assert_eq(sluice_backend_find(NULL), m);
  cr_assert_eq(sluice_backend_find(""), m);
  cr_assert_null(sluice_backend_find("nosuch"));
  cr_assert_null(sluice_backend_find("mem "));
}

/* ----------------------------------------------------- custom backends --- */

typedef struct tstats {
  int opens, closes, applies, many, open_rc, set_methods_first;
  int apply_rc; /* forced result of each program when nonzero */
  int many_rc;  /* forced xRun result (with apply_rc > 0) */
  int version;  /* method table to hand out: 1 good, 2 of another
                   version, 3 without xRun, 0 none */
  const char *last_uri;
} tstats;

typedef struct trec {
  char key[64];
  size_t len;
  sluice_state st;
} trec;

typedef struct tstore {
  sluice_store base;
  tstats *stats;
  int n;
  trec rec[64];
} tstore;

static trec *tfind(tstore *t, const sluice_key *k) {
  int i;
  for (i = 0; i < t->n; i++)
    if (t->rec[i].len == k->len && memcmp(t->rec[i].key, k->data, k->len) == 0)
      return &t->rec[i];
  return NULL;
}

static int t_close(sluice_store *s) {
  ((tstore *)s)->stats->closes++;
  return SLUICE_OK;
}

/* One program: applies counts the programs a batch holds. */
static int t_run_one(sluice_store *s, const sluice_program *p, int64_t now,
                     sluice_program_result *res) {
  tstore *t = (tstore *)s;
  sluice_state in[SLUICE_PROGRAM_KEYS], out[SLUICE_PROGRAM_KEYS];
  int i, rc;
  t->stats->applies++;
  if (t->stats->apply_rc)
    return t->stats->apply_rc;
  for (i = 0; i < p->nkeys; i++) {
    trec *r = tfind(t, &p->keys[i]);
    in[i] = r ? r->st : zst();
  }
  rc = sluice_program_run(p, in, out, now, res);
  if (rc != SLUICE_OK)
    return rc;
  for (i = 0; i < p->nkeys; i++) {
    trec *r = tfind(t, &p->keys[i]);
    if (!r) {
      if (t->n == 64 || p->keys[i].len > 64)
        return sluice_store_seterr(s, SLUICE_EFULL, 7, "test store full");
      r = &t->rec[t->n++];
      memcpy(r->key, p->keys[i].data, p->keys[i].len);
      r->len = p->keys[i].len;
    }
    r->st = out[i];
  }
  return SLUICE_OK;
}

/* many counts the calls, applies the programs in them. */
static int t_run(sluice_store *s, int n, const sluice_program *ps,
                 int64_t now, sluice_program_result *res, int *rcs) {
  tstore *t = (tstore *)s;
  int i;
  t->stats->many++;
  for (i = 0; i < n; i++)
    rcs[i] = t_run_one(s, &ps[i], now, &res[i]);
  if (t->stats->apply_rc > 0 && t->stats->many_rc)
    return t->stats->many_rc;
  return SLUICE_OK;
}

static const sluice_store_methods t_methods = {
    SLUICE_BACKEND_VERSION, t_close, t_run, NULL, NULL, NULL, NULL};
static const sluice_store_methods t_methods_old = {
    SLUICE_BACKEND_VERSION - 1, t_close, t_run, NULL, NULL, NULL, NULL};
static const sluice_store_methods t_methods_norun = {
    SLUICE_BACKEND_VERSION, t_close, NULL, NULL, NULL, NULL, NULL};

static int t_open(const sluice_backend *b, const char *uri,
                  const sluice_store_config *cfg, sluice_store *s) {
  tstats *st = (tstats *)b->pAppData;
  tstore *t = (tstore *)s;
  (void)cfg;
  st->opens++;
  st->last_uri = uri;
  t->stats = st;
  if (st->set_methods_first || st->open_rc == 0)
    s->pMethods = st->version == 1   ? &t_methods
                  : st->version == 2 ? &t_methods_old
                  : st->version == 3 ? &t_methods_norun
                                     : NULL;
  if (st->open_rc)
    return sluice_store_seterr(s, st->open_rc, 99, "test open failed (%d)",
                               st->open_rc);
  return SLUICE_OK;
}

static sluice_backend make_backend(tstats *st) {
  sluice_backend b = {SLUICE_BACKEND_VERSION, (int)sizeof(tstore),
                      "test", st, t_open};
  return b;
}

static int open_custom(sluice_backend *b, const char *store, sluice_limiter **l,
                       char *err, size_t errlen) {
  sluice_limiter_options o;
  memset(&o, 0, sizeof o);
  o.backend = b;
  o.store = store;
  return sluice_limiter_open(&o, l, err, errlen);
}

Test(backend, enotsup_from_xopen) {
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = (sluice_limiter *)1;
  char err[64];
  st.open_rc = SLUICE_ENOTSUP;
  b = make_backend(&st);
  cr_assert_eq(open_custom(&b, NULL, &l, err, sizeof err), SLUICE_ENOTSUP);
  cr_assert_null(l);
  cr_assert_eq(st.opens, 1);
  cr_assert_eq(st.closes, 0, "no method table: nothing to close");
  cr_assert_str_eq(err, "test open failed (-30909)");
}

Test(backend, failed_open_after_methods_closes_once) {
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = (sluice_limiter *)1;
  st.open_rc = SLUICE_EIO;
  st.set_methods_first = 1;
  st.version = 1;
  b = make_backend(&st);
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EIO);
  cr_assert_null(l);
  cr_assert_eq(st.closes, 1, "xClose exactly once");
}

Test(backend, positive_open_code_is_ebackend) {
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = (sluice_limiter *)1;
  st.open_rc = 5;
  b = make_backend(&st);
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EBACKEND);
  cr_assert_null(l);
}

Test(backend, broken_tables_are_refused) {
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = (sluice_limiter *)1;
  /* OK from xOpen without a method table. */
  st.version = 0;
  b = make_backend(&st);
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EVERSION);
  cr_assert_null(l);
  /* A table without xRun: refused, and closed. */
  st.version = 3;
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EVERSION);
  cr_assert_null(l);
  cr_assert_eq(st.closes, 1);
  /* A table of another version: refused, and closed. */
  st.version = 2;
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EVERSION);
  cr_assert_null(l);
  cr_assert_eq(st.closes, 2);
  /* Bad class: version 0, no xOpen, szStore too small. */
  st.version = 1;
  b = make_backend(&st);
  b.iVersion = 0;
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EVERSION);
  /* A class built against another backend.h. */
  b.iVersion = SLUICE_BACKEND_VERSION - 1;
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EVERSION);
  b = make_backend(&st);
  b.xOpen = NULL;
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EVERSION);
  b = make_backend(&st);
  b.szStore = (int)sizeof(sluice_store) - 1;
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_EVERSION);
  cr_assert_null(l);
}

Test(backend, custom_backend_takes_precedence_and_gets_params) {
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = NULL;
  st.version = 1;
  b = make_backend(&st);
  cr_assert_eq(open_custom(&b, "mem:alpha=1;beta=2", &l, NULL, 0), SLUICE_OK);
  cr_assert_str_eq(sluice_limiter_backend(l), "test");
  cr_assert_str_eq(st.last_uri, "alpha=1;beta=2");
  /* Missing optional methods. */
  {
    sluice_state s;
    int64_t e;
    cr_assert_eq(sluice_limiter_get(l, "k", 1, &s, &e), SLUICE_ENOTSUP);
    cr_assert_eq(sluice_limiter_delete(l, "k", 1), SLUICE_ENOTSUP);
    cr_assert_eq(sluice_limiter_control(l, 200, &e), SLUICE_ENOTFOUND);
    cr_assert_eq(sluice_limiter_capabilities(l), 0);
  }
  sluice_limiter_close(l);
  cr_assert_eq(st.closes, 1);
}

/* One rule for every store string, checked by the core against the
** parameters a backend declares (sluice_backend.azParams, version 2):
** a misspelt parameter used to open an unlimited mem store. */
Test(backend, store_strings_follow_declared_parameters) {
  static const char *const bad[] = {
      "mem:max_kyes=10",
      "unknown parameter 'max_kyes' (known: max_keys, untrusted, huge_pages, "
      "memo)",
      "mem:max_keys=10;untrusted=11", "mem: untrusted must be 0..max_keys",
      "mem:huge_pages=2",       "mem: huge_pages must be 0 or 1",
      "mem:memo=2",             "mem: memo must be 0 or 1",
      "mem:memo=-1",            "mem: memo must be 0 or 1",
      "mem:memo=yes",           "mem: memo must be 0 or 1",
      "mem:max_keys=10;max_keys=20", "parameter 'max_keys' given twice",
      "mem:max_keys",           "parameter without '='",
      "shm:name=/x;capacity=10;capactiy=20",
      "unknown parameter 'capactiy' (known: name, fd, capacity, create, "
      "huge_pages, untrusted)",
      "shm:name=/x;untrusted=63", "shm: untrusted must be 64..2^32 keys",
      "shm:name=/x;huge_pages=yes", "shm: huge_pages must be 0 or 1",
      "shm:name=/x;name=/y",    "parameter 'name' given twice",
      "lmdb:path=/tmp/x;synk=nosync", "unknown parameter 'synk'",
      "redis:nodes=127.0.0.1:1;colour=blue", "unknown parameter 'colour'",
      NULL};
  sluice_limiter_options o;
  sluice_limiter *l;
  char err[512];
  int i;
  memset(&o, 0, sizeof o);
  for (i = 0; bad[i]; i += 2) {
    l = (sluice_limiter *)1;
    o.store = bad[i];
    cr_assert_eq(sluice_limiter_open(&o, &l, err, sizeof err), SLUICE_EINVAL,
                 "%s opened", bad[i]);
    cr_assert_null(l);
    cr_assert(strstr(err, bad[i + 1]), "%s: '%s'", bad[i], err);
  }
  /* Empty segments are allowed, and so is every declared parameter. */
  o.store = "mem:;max_keys=10;";
  cr_assert_eq(sluice_limiter_open(&o, &l, err, sizeof err), SLUICE_OK, "%s",
               err);
  sluice_limiter_close(l);
}

Test(backend, a_backend_extends_its_parameters_by_declaring_them) {
  static const char *const params[] = {"alpha", "beta", NULL};
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = NULL;
  char err[256];
  st.version = 1;
  b = make_backend(&st);
  b.azParams = params;
  cr_assert_eq(open_custom(&b, "x:alpha=1;beta=2", &l, err, sizeof err),
               SLUICE_OK, "%s", err);
  sluice_limiter_close(l);
  cr_assert_eq(open_custom(&b, "x:alpha=1;gamma=2", &l, err, sizeof err),
               SLUICE_EINVAL);
  cr_assert_str_eq(err, "test: unknown parameter 'gamma' (known: alpha, beta)");
  cr_assert_eq(st.opens, 1, "a refused string never reaches xOpen");
  /* No list: the backend reads its own string. */
  b.azParams = NULL;
  cr_assert_eq(open_custom(&b, "x:gamma=2;gamma=3", &l, err, sizeof err),
               SLUICE_OK);
  sluice_limiter_close(l);
}

Test(backend, invalid_ops_never_reach_the_backend) {
  const sluice_gcra_params p = {1, SEC, 5};
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = NULL;
  sluice_verdict v;
  st.version = 1;
  b = make_backend(&st);
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_OK);
  cr_assert_eq(sluice_limiter_take(l, "k", 1, &p, 6, &v), SLUICE_ERANGE);
  cr_assert_eq(sluice_limiter_take(l, "", 0, &p, 1, &v), SLUICE_EKEY);
  cr_assert_eq(sluice_limiter_take(l, "k", 1, &p, 1, NULL), SLUICE_EINVAL);
  cr_assert_eq(st.applies, 0);
  /* A positive code from a backend is turned into SLUICE_EBACKEND. */
  st.apply_rc = 3;
  cr_assert_eq(sluice_limiter_take(l, "k", 1, &p, 1, &v), SLUICE_EBACKEND);
  st.apply_rc = SLUICE_ETIMEDOUT;
  cr_assert_eq(sluice_limiter_take(l, "k", 1, &p, 1, &v), SLUICE_ETIMEDOUT);
  sluice_limiter_close(l);
}

/* Three independent ops: two buckets and one invalid op in the middle. */
static void batch_ops(sluice_op ops[3], sluice_key ks[3],
                      const sluice_gcra_params *p) {
  ks[0] = KEY("a");
  ks[1] = KEY("b");
  ks[2] = KEY("c");
  memset(ops, 0, 3 * sizeof ops[0]);
  ops[0] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &ks[0], p, 3, 0};
  ops[1] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &ks[1], p, 2, 0};
  ops[2] = (sluice_op){SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &ks[2], p, 5, 0};
}

static void check_many(int with_invalid) {
  const sluice_gcra_params p = {1, SEC, 5};
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = NULL;
  sluice_clock *c;
  sluice_limiter_options o;
  sluice_op ops[3];
  sluice_key ks[3];
  sluice_verdict vs[3];
  int rcs[3] = {99, 99, 99}, round;
  st.version = 1;
  b = make_backend(&st);
  cr_assert_eq(sluice_clock_manual(7 * SEC, &c), SLUICE_OK);
  memset(&o, 0, sizeof o);
  o.backend = &b;
  o.clock = c;
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_OK);
  batch_ops(ops, ks, &p);
  if (with_invalid)
    ops[1].arg = 0;
  for (round = 0; round < 2; round++) {
    cr_assert_eq(ops_decide(l, 3, ops, SLUICE_NOW, vs, rcs), SLUICE_OK);
    cr_assert_eq(rcs[0], SLUICE_OK);
    cr_assert_eq(rcs[2], SLUICE_OK);
    cr_assert_eq(rcs[1], with_invalid ? SLUICE_ERANGE : SLUICE_OK);
    /* a: 5 - 3 = 2 left, then denied; c: 5 - 5 = 0, then denied. */
    cr_assert_eq(vs[0].allowed, round == 0);
    cr_assert_eq(vs[0].remaining, 2);
    cr_assert_eq(vs[2].allowed, round == 0);
    cr_assert_eq(vs[2].remaining, 0);
    cr_assert_eq(vs[0].now_ns, 7 * SEC);
    if (!with_invalid) {
      cr_assert_eq(vs[1].allowed, 1);
      cr_assert_eq(vs[1].remaining, round == 0 ? 3 : 1);
    }
  }
  /* An invalid program is answered by the core; the valid ones still go
  ** to the backend as one batch. */
  cr_assert_eq(st.many, 2, "one xRun call per decide");
  cr_assert_eq(st.applies, with_invalid ? 4 : 6, "the valid programs alone");
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(backend, decide_batches) { check_many(0); }
Test(backend, decide_with_invalid_program) { check_many(1); }

/* Positive codes from a backend read as success to a caller testing
** rc < 0: the core maps them to SLUICE_EBACKEND on every path. */
static void positive_codes(int many_rc) {
  const sluice_gcra_params p = {1, SEC, 5};
  tstats st = {0};
  sluice_backend b;
  sluice_limiter *l = NULL;
  sluice_op ops[3];
  sluice_key ks[3];
  sluice_verdict vs[3];
  int rcs[3], i, rc;
  st.version = 1;
  b = make_backend(&st);
  cr_assert_eq(open_custom(&b, NULL, &l, NULL, 0), SLUICE_OK);
  batch_ops(ops, ks, &p);
  st.apply_rc = 4;
  st.many_rc = many_rc;
  rc = ops_decide(l, 3, ops, SLUICE_NOW, vs, rcs);
  if (many_rc)
    cr_assert_eq(rc, SLUICE_EBACKEND, "batch result %d", rc);
  else
    cr_assert_eq(rc, SLUICE_OK);
  for (i = 0; i < 3 && !many_rc; i++)
    cr_assert_eq(rcs[i], SLUICE_EBACKEND, "rcs[%d] = %d", i, rcs[i]);
  sluice_limiter_close(l);
}

Test(backend, decide_positive_codes) { positive_codes(0); }
Test(backend, decide_positive_batch_code) { positive_codes(2); }

Test(backend, decide_arguments) {
  const sluice_gcra_params gp = {1, SEC, 5};
  sluice_key k = KEY("k");
  sluice_step st = {.algo = SLUICE_ALGO_GCRA, .kind = SLUICE_OP_CONSUME,
                    .nkeys = 1, .params = &gp, .arg = 1};
  sluice_program p = {.nkeys = 1, .keys = &k, .nsteps = 1, .steps = &st};
  sluice_limiter *l = NULL;
  sluice_program_result res[2];
  int rcs[2];
  cr_assert_eq(sluice_limiter_open(NULL, &l, NULL, 0), SLUICE_OK);
  /* One program without rcs: the return value is its own code; an
  ** explicit time is the one decided at (the first: nothing to clamp to). */
  cr_assert_eq(sluice_limiter_decide(l, 1, &p, 5 * SEC, res, NULL),
               SLUICE_OK);
  cr_assert(res[0].allowed);
  cr_assert_eq(res[0].now_ns, 5 * SEC);
  cr_assert_eq(sluice_limiter_decide(l, 0, &p, SLUICE_NOW, res, rcs),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_decide(l, -1, &p, SLUICE_NOW, res, rcs),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_decide(l, 1, NULL, SLUICE_NOW, res, rcs),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_decide(l, 1, &p, SLUICE_NOW, NULL, rcs),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_decide(NULL, 1, &p, SLUICE_NOW, res, rcs),
               SLUICE_EINVAL);
  /* A time before 0 that is not SLUICE_NOW; rcs left out of a batch. */
  cr_assert_eq(sluice_limiter_decide(l, 1, &p, -1, res, rcs), SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_decide(l, 2, &p, SLUICE_NOW, res, NULL),
               SLUICE_EINVAL);
  st.arg = 6; /* more than the burst */
  cr_assert_eq(sluice_limiter_decide(l, 1, &p, SLUICE_NOW, res, NULL),
               SLUICE_ERANGE);
  sluice_limiter_close(l);
}

/* ---------------------------------------------------------- allocator --- */

typedef struct acct {
  int64_t live_bytes, live_blocks, calls;
  int64_t fail_at; /* fail the n-th allocation (1-based), 0: never */
  int bad_size;
} acct;

static void *a_malloc(void *ud, size_t n) {
  acct *a = ud;
  size_t *p;
  a->calls++;
  if (a->fail_at && a->calls == a->fail_at)
    return NULL;
  p = malloc(n + sizeof(size_t) * 2);
  if (!p)
    return NULL;
  p[0] = n;
  a->live_bytes += (int64_t)n;
  a->live_blocks++;
  return p + 2;
}

static void *a_realloc(void *ud, void *q, size_t o, size_t n) {
  acct *a = ud;
  size_t *p = q ? (size_t *)q - 2 : NULL;
  if (p && p[0] != o)
    a->bad_size++;
  a->calls++;
  if (a->fail_at && a->calls == a->fail_at)
    return NULL;
  p = realloc(p, n + sizeof(size_t) * 2);
  if (!p)
    return NULL;
  a->live_bytes += (int64_t)n - (int64_t)o;
  if (!q)
    a->live_blocks++;
  p[0] = n;
  return p + 2;
}

static void a_free(void *ud, void *q, size_t n) {
  acct *a = ud;
  size_t *p = (size_t *)q - 2;
  if (p[0] != n)
    a->bad_size++;
  a->live_bytes -= (int64_t)p[0];
  a->live_blocks--;
  free(p);
}

Test(allocator, everything_freed_with_right_sizes) {
  acct a = {0};
  sluice_allocator al = {a_malloc, a_realloc, a_free, &a};
  const sluice_gcra_params p = {1, SEC, 5};
  sluice_limiter_options o;
  sluice_limiter *l = NULL;
  sluice_clock *c;
  sluice_verdict v;
  int i;
  cr_assert_eq(sluice_clock_manual(SEC, &c), SLUICE_OK);
  memset(&o, 0, sizeof o);
  o.alloc = &al;
  o.clock = c;
  o.store = "mem:max_keys=100000";
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_OK);
  cr_assert_gt(a.live_blocks, 0, "the injected allocator is used");
  for (i = 0; i < 3000; i++) {
    char k[16];
    snprintf(k, sizeof k, "key%d", i);
    cr_assert_eq(sluice_limiter_take(l, k, strlen(k), &p, 1, &v), SLUICE_OK);
  }
  sluice_limiter_close(l);
  cr_assert_eq(a.live_blocks, 0);
  cr_assert_eq(a.live_bytes, 0);
  cr_assert_eq(a.bad_size, 0, "free/realloc given a different size");
  sluice_clock_free(c);
}

Test(allocator, failing_allocations_leak_nothing) {
  sluice_clock *c;
  int64_t k;
  int opened = 0;
  cr_assert_eq(sluice_clock_manual(SEC, &c), SLUICE_OK);
  for (k = 1; k <= 80; k++) {
    acct a = {0};
    sluice_allocator al = {a_malloc, a_realloc, a_free, &a};
    sluice_limiter_options o;
    sluice_limiter *l = (sluice_limiter *)1;
    int rc;
    a.fail_at = k;
    memset(&o, 0, sizeof o);
    o.alloc = &al;
    o.clock = c;
    rc = sluice_limiter_open(&o, &l, NULL, 0);
    if (rc == SLUICE_OK) {
      const sluice_gcra_params p = {1, SEC, 5};
      sluice_verdict v;
      int i;
      opened++;
      for (i = 0; i < 40; i++) {
        char key[16];
        int r2;
        snprintf(key, sizeof key, "k%d", i);
        r2 = sluice_limiter_take(l, key, strlen(key), &p, 1, &v);
        cr_assert(r2 == SLUICE_OK || r2 == SLUICE_ENOMEM, "%s",
                  sluice_err_name(r2));
      }
      sluice_limiter_close(l);
    } else {
      cr_assert_eq(rc, SLUICE_ENOMEM, "fail at %lld: %s", (long long)k,
                   sluice_err_name(rc));
      cr_assert_null(l);
    }
    cr_assert_eq(a.live_blocks, 0, "fail at %lld leaked", (long long)k);
    cr_assert_eq(a.bad_size, 0);
  }
  cr_assert_gt(opened, 0);
  sluice_clock_free(c);
}

Test(allocator, incomplete_allocator_refused) {
  acct a = {0};
  sluice_allocator al = {NULL, a_realloc, a_free, &a};
  sluice_limiter_options o;
  sluice_limiter *l = (sluice_limiter *)1;
  memset(&o, 0, sizeof o);
  o.alloc = &al;
  cr_assert_eq(sluice_limiter_open(&o, &l, NULL, 0), SLUICE_EINVAL);
  cr_assert_null(l);
}

/* ---------------------------------------------------------------- uri --- */

Test(uri, params) {
  const char *v;
  size_t n;
  cr_assert_eq(sluice_uri_param("a=1;bb=22;c=", "bb", &v, &n), SLUICE_OK);
  cr_assert_eq(n, 2);
  cr_assert(memcmp(v, "22", 2) == 0);
  cr_assert_eq(sluice_uri_param("a=1;bb=22;c=", "a", &v, &n), SLUICE_OK);
  cr_assert_eq(n, 1);
  cr_assert_eq(*v, '1');
  cr_assert_eq(sluice_uri_param("a=1;bb=22;c=", "c", &v, &n), SLUICE_OK);
  cr_assert_eq(n, 0);
  cr_assert_eq(sluice_uri_param("a=1;bb=22", "b", &v, &n), SLUICE_ENOTFOUND,
               "a prefix of a name is not the name");
  cr_assert_eq(sluice_uri_param("abc=1", "ab", &v, &n), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_uri_param("flag;x=5", "x", &v, &n), SLUICE_OK);
  cr_assert_eq(*v, '5');
  cr_assert_eq(sluice_uri_param("flag;x=5", "flag", &v, &n), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_uri_param("", "x", &v, &n), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_uri_param("x=1;", "x", &v, &n), SLUICE_OK);
  cr_assert_eq(n, 1);
  cr_assert_eq(sluice_uri_param("path=/a=b;x=2", "path", &v, &n), SLUICE_OK);
  cr_assert_eq(n, 4, "value keeps later '='");
  cr_assert_eq(sluice_uri_param(NULL, "x", &v, &n), SLUICE_EINVAL);
  cr_assert_eq(sluice_uri_param("x=1", NULL, &v, &n), SLUICE_EINVAL);
  cr_assert_eq(sluice_uri_param("x=1", "x", NULL, &n), SLUICE_EINVAL);
}

Test(uri, ints) {
  int64_t x;
  cr_assert_eq(sluice__uri_int("n=42", "n", 7, &x), SLUICE_OK);
  cr_assert_eq(x, 42);
  cr_assert_eq(sluice__uri_int("m=42", "n", 7, &x), SLUICE_OK);
  cr_assert_eq(x, 7, "absent: default");
  cr_assert_eq(sluice__uri_int("n=3k", "n", 0, &x), SLUICE_OK);
  cr_assert_eq(x, 3072);
  cr_assert_eq(sluice__uri_int("n=2m", "n", 0, &x), SLUICE_OK);
  cr_assert_eq(x, 2 * 1024 * 1024);
  cr_assert_eq(sluice__uri_int("n=5g", "n", 0, &x), SLUICE_OK);
  cr_assert_eq(x, INT64_C(5) * 1024 * 1024 * 1024);
  cr_assert_eq(sluice__uri_int("n=0", "n", 9, &x), SLUICE_OK);
  cr_assert_eq(x, 0);
  cr_assert_eq(sluice__uri_int("n=999999999999999999", "n", 0, &x), SLUICE_OK);
  cr_assert_eq(x, INT64_C(999999999999999999));
  {
    static const char *bad[] = {"n=",     "n=-1",  "n=1x",  "n=k",
                                "n=1.5",  "n= 1",  "n=0x10", "n=1kk",
                                "n=9999999999999999999", "n=99999999999g"};
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      x = 123;
      cr_assert_eq(sluice__uri_int(bad[i], "n", 5, &x), SLUICE_EINVAL, "'%s'",
                   bad[i]);
    }
  }
  cr_assert_eq(sluice__uri_int("n=1", "n", 0, NULL), SLUICE_EINVAL);
}

/* --------------------------------------------------------------- keys --- */

Test(keys, hashtag_rules) {
  static const struct {
    const char *k;
    size_t off, len;
  } cases[] = {
      {"{t:acme}tb:k1", 1, 6}, {"abc", 0, 3},     {"{}x", 0, 3},
      {"a{b}c{d}", 2, 1},      {"{abc", 0, 4},    {"}{x}", 2, 1},
      {"x{}{y}", 0, 6},        {"{{a}}", 1, 2},   {"pre{t:1}", 4, 3},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sluice_key k = {cases[i].k, strlen(cases[i].k)};
    size_t off = 99, len = 99;
    sluice__key_hashtag(&k, &off, &len);
    cr_assert(off == cases[i].off && len == cases[i].len,
              "'%s': tag at %zu+%zu, want %zu+%zu", cases[i].k, off, len,
              cases[i].off, cases[i].len);
  }
}

/* The group check against its definition, on keys of braces and two
** letters, where tags start, end and repeat anywhere: one tag for all (by
** sluice__key_hashtag), no key twice. */
Test(keys, group_check_agrees_with_the_tag_rules) {
  static const char alphabet[] = "{}ab";
  rng r = {0x7a6};
  int trial, agree_ok = 0;
  for (trial = 0; trial < 200000; trial++) {
    char buf[4][10];
    sluice_key ks[4];
    sluice_op op;
    size_t off[4], len[4];
    int n = (int)rng_range(&r, 2, 4), i, j, want = SLUICE_OK;
    for (i = 0; i < n; i++) {
      size_t l = (size_t)rng_range(&r, 1, 9), c;
      /* half the time the first key's start, so tags line up often */
      size_t from = i > 0 && rng_range(&r, 0, 1) ? ks[0].len < l ? ks[0].len : l
                                                 : 0;
      memcpy(buf[i], buf[0], from);
      for (c = from; c < l; c++)
        buf[i][c] = alphabet[rng_range(&r, 0, 3)];
      ks[i] = (sluice_key){buf[i], l};
      sluice__key_hashtag(&ks[i], &off[i], &len[i]);
    }
    for (i = 1; i < n; i++) {
      if (len[i] != len[0] || memcmp(buf[i] + off[i], buf[0] + off[0], len[0]))
        want = SLUICE_EKEY;
      for (j = 0; j < i; j++)
        if (ks[i].len == ks[j].len && !memcmp(buf[i], buf[j], ks[i].len))
          want = SLUICE_EKEY;
    }
    memset(&op, 0, sizeof op);
    op.keys = ks;
    op.nkeys = n;
    cr_assert_eq(sluice__op_validate_keys(&op), want, "trial %d", trial);
    agree_ok += want == SLUICE_OK;
  }
  cr_assert_gt(agree_ok, 1000, "the trials must include valid groups");
}

static int gcra_group_rc(const sluice_key *ks, int n) {
  sluice_gcra_params ps[SLUICE_GROUP_MAX + 1];
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, n, ks, ps, 1, 0};
  int i;
  for (i = 0; i <= SLUICE_GROUP_MAX; i++)
    ps[i] = (sluice_gcra_params){1, SEC, 10};
  return sluice__op_validate(&op);
}

Test(keys, validation) {
  static char big[SLUICE_KEY_MAX + 1];
  sluice_key k1[1];
  memset(big, 'x', sizeof big);
  k1[0] = (sluice_key){big, SLUICE_KEY_MAX};
  cr_assert_eq(gcra_group_rc(k1, 1), SLUICE_OK, "512 bytes is allowed");
  k1[0].len = SLUICE_KEY_MAX + 1;
  cr_assert_eq(gcra_group_rc(k1, 1), SLUICE_EKEY, "oversized key");
  k1[0] = (sluice_key){"", 0};
  cr_assert_eq(gcra_group_rc(k1, 1), SLUICE_EKEY, "empty key");
  k1[0] = (sluice_key){NULL, 3};
  cr_assert_eq(gcra_group_rc(k1, 1), SLUICE_EKEY, "NULL key bytes");
  cr_assert_eq(gcra_group_rc(NULL, 1), SLUICE_EKEY, "NULL keys");
  {
    const sluice_key same[2] = {KEY("{t:acme}tenant"), KEY("{t:acme}key:1")};
    const sluice_key mixed[2] = {KEY("{t:acme}tenant"), KEY("{t:evil}key:1")};
    const sluice_key untag[2] = {KEY("{t:acme}tenant"), KEY("key:1")};
    const sluice_key dup[2] = {KEY("{t:acme}k"), KEY("{t:acme}k")};
    const sluice_key binary[2] = {{"{\0}a", 4}, {"{\0}b", 4}};
    const sluice_key bigtag[2] = {KEY("{t:acme}tenant"), {big, 20}};
    cr_assert_eq(gcra_group_rc(same, 2), SLUICE_OK);
    cr_assert_eq(gcra_group_rc(mixed, 2), SLUICE_EKEY, "mixed hash tags");
    cr_assert_eq(gcra_group_rc(untag, 2), SLUICE_EKEY, "tagged + untagged");
    cr_assert_eq(gcra_group_rc(dup, 2), SLUICE_EKEY, "duplicate keys");
    cr_assert_eq(gcra_group_rc(binary, 2), SLUICE_OK, "binary-safe tags");
    cr_assert_eq(gcra_group_rc(bigtag, 2), SLUICE_EKEY);
  }
  {
    /* The full 32 keys of one tag; a 33rd is too many. */
    sluice_key ks[SLUICE_GROUP_MAX + 1];
    char names[SLUICE_GROUP_MAX + 1][12];
    int i;
    for (i = 0; i <= SLUICE_GROUP_MAX; i++) {
      snprintf(names[i], sizeof names[i], "{g}%d", i);
      ks[i] = (sluice_key){names[i], strlen(names[i])};
    }
    cr_assert_eq(gcra_group_rc(ks, SLUICE_GROUP_MAX), SLUICE_OK);
    cr_assert_eq(gcra_group_rc(ks, SLUICE_GROUP_MAX + 1), SLUICE_EINVAL);
    cr_assert_eq(gcra_group_rc(ks, 0), SLUICE_EINVAL);
    ks[31] = ks[3];
    cr_assert_eq(gcra_group_rc(ks, SLUICE_GROUP_MAX), SLUICE_EKEY,
                 "duplicate at the end of a long group");
  }
}

Test(keys, op_shape_validation) {
  const sluice_gcra_params p = {1, SEC, 10};
  sluice_key k = KEY("k");
  sluice_op op = {SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, 1, &k, &p, 1, 0};
  sluice_state s = zst();
  cr_assert_eq(sluice__op_validate(NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice__op_validate(&op), SLUICE_OK);
  op.params = NULL;
  cr_assert_eq(sluice__op_validate(&op), SLUICE_EINVAL);
  op.params = &p;
  op.algo = 0;
  cr_assert_eq(sluice__op_validate(&op), SLUICE_EINVAL);
  op.algo = 7;
  cr_assert_eq(sluice__op_validate(&op), SLUICE_EINVAL);
  op.algo = SLUICE_ALGO_GCRA;
  op.nkeys = -1;
  cr_assert_eq(sluice__op_validate(&op), SLUICE_EINVAL);
  op.nkeys = 1;
  /* Expiry of nonsense is 0, never a crash. */
  cr_assert_eq(sluice__op_expiry(NULL, 0, &s), 0);
  cr_assert_eq(sluice__op_expiry(&op, 1, &s), 0);
  cr_assert_eq(sluice__op_expiry(&op, -1, &s), 0);
  cr_assert_eq(sluice__op_expiry(&op, 0, NULL), 0);
}

/* ------------------------------------------------- backend helpers --- */

Test(helpers, store_seterr) {
  sluice_store *s, bare;
  char longarg[300];
  cr_assert_eq(sluice_store_open(sluice_backend_find("mem"), "", NULL, 0, &s,
                                 NULL, 0),
               SLUICE_OK);
  memset(longarg, 'a', sizeof longarg - 1);
  longarg[sizeof longarg - 1] = '\0';
  cr_assert_eq(sluice_store_seterr(s, SLUICE_EIO, 13, "open %s: %d", "/x", 5),
               SLUICE_EIO);
  cr_assert_str_eq(sluice_store_errmsg(s), "open /x: 5");
  cr_assert_eq(sluice_store_errcode(s), 13);
  cr_assert_eq(sluice_store_seterr(s, SLUICE_EBUSY, 0, "%s", longarg),
               SLUICE_EBUSY);
  cr_assert_eq(strlen(sluice_store_errmsg(s)), SLUICE_STORE_ERRLEN - 1,
               "truncated, terminated");
  cr_assert_eq(sluice_store_seterr(s, SLUICE_EIO, 0, NULL), SLUICE_EIO);
  cr_assert_str_eq(sluice_store_errmsg(s), "");
  cr_assert_eq(sluice_store_seterr(NULL, SLUICE_EIO, 0, "x"), SLUICE_EIO);
  /* A struct the core never opened has nowhere to keep detail. */
  memset(&bare, 0, sizeof bare);
  cr_assert_eq(sluice_store_seterr(&bare, SLUICE_EIO, 1, "x"), SLUICE_EIO);
  cr_assert_str_eq(sluice_store_errmsg(&bare), "");
  cr_assert_eq(sluice_store_errcode(&bare), 0);
  sluice_store_close(s);
}

Test(helpers, random_bytes_and_store_alloc) {
  uint8_t buf[64], zero[64];
  void *p;
  memset(buf, 0, sizeof buf);
  memset(zero, 0, sizeof zero);
  cr_assert_eq(sluice__random_bytes(buf, sizeof buf), SLUICE_OK);
  cr_assert(memcmp(buf, zero, sizeof buf) != 0);
  cr_assert_eq(sluice__random_bytes(NULL, 0), SLUICE_OK);
  cr_assert_eq(sluice__random_bytes(NULL, 1), SLUICE_EINVAL);
  p = sluice__store_malloc(NULL, 32);
  cr_assert_not_null(p);
  memset(p, 1, 32);
  sluice__store_free(NULL, p, 32);
  sluice__store_free(NULL, NULL, 0);
}

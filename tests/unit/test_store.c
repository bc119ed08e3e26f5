/*
** The public store wrappers (sluice_store_open / apply / ... / close):
** what a decorator opens and calls its inner store with.  They validate as
** the limiter's calls do: a NULL store, one never opened or already closed,
** a bad op or program never reach a backend.
*/
#include "unit.h"
#include "../common/one_step.h"
#include "store.h"

static const sluice_gcra_params G = {.rate = 1, .period_ns = SEC, .burst = 2};
static const sluice_key K = {"k", 1};

static sluice_op take_op(void) { return op_take(&K, &G, 1); }

static sluice_store *open_mem(void) {
  sluice_store *s = NULL;
  char err[128];
  cr_assert_eq(sluice_store_open(sluice_backend_find("mem"), "", NULL, 0, &s,
                                 err, sizeof err),
               SLUICE_OK, "%s", err);
  cr_assert_not_null(s);
  return s;
}

Test(store, open_validates) {
  sluice_store *s = (sluice_store *)1;
  char err[128];
  cr_assert_eq(sluice_store_open(NULL, "", NULL, 0, &s, err, sizeof err),
               SLUICE_EINVAL);
  cr_assert_null(s, "*out is NULL on failure");
  cr_assert_str_not_empty(err);
  cr_assert_eq(sluice_store_open(sluice_backend_find("mem"), "", NULL, 0,
                                 NULL, NULL, 0),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_store_open(sluice_backend_find("mem"), "", NULL,
                                 0x80000000u, &s, err, sizeof err),
               SLUICE_EINVAL, "an unknown flag");
  cr_assert_str_eq(err, "unknown SLUICE_OPEN_* flag");
  cr_assert_eq(sluice_store_open(sluice_backend_find("mem"), "nope=1", NULL,
                                 0, &s, err, sizeof err),
               SLUICE_EINVAL, "a parameter mem does not read");
  cr_assert(strstr(err, "nope") != NULL, "%s", err);
  cr_assert_null(s);
}

Test(store, a_store_decides_like_a_limiter) {
  sluice_store *s = open_mem();
  sluice_op op = take_op();
  sluice_verdict v;
  sluice_state st;
  int64_t exp;
  cr_assert_eq(store_op(s, &op, SEC, &v), SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(store_op(s, &op, SEC, &v), SLUICE_OK);
  cr_assert_eq(store_op(s, &op, SEC, &v), SLUICE_OK);
  cr_assert(!v.allowed, "burst 2");
  cr_assert_eq(sluice_store_get(s, &K, SEC, &st, &exp), SLUICE_OK);
  cr_assert_gt(exp, SEC);
  cr_assert_eq(sluice_store_delete(s, &K), SLUICE_OK);
  cr_assert_eq(sluice_store_get(s, &K, SEC, &st, &exp), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_store_capabilities(s) & SLUICE_CAP_THREADSAFE,
               SLUICE_CAP_THREADSAFE);
  cr_assert_eq(sluice_store_control(s, 12345, &v), SLUICE_ENOTFOUND);
  sluice_store_close(s);
  sluice_store_close(NULL); /* NULL-safe */
}

/* A batch repeating one step array over many keys has each program's keys
** checked (the wrapper checks the repeated shape once): a bad key, a
** key array missing or a changed count is refused in its own slot only. */
Test(store, a_batch_of_one_shape_checks_every_program) {
  sluice_store *s = open_mem();
  static const char big[SLUICE_KEY_MAX + 1] = {0};
  sluice_key k[6] = {{"a", 1}, {"b", 0}, {"c", 1}, {big, sizeof big},
                     {"{t}x", 4}, {"{u}y", 4}};
  sluice_step st = {.algo = SLUICE_ALGO_GCRA, .kind = SLUICE_OP_CONSUME,
                    .nkeys = 1, .params = &G, .arg = 1};
  sluice_program ps[6];
  sluice_program_result res[6];
  int rcs[6], i;
  for (i = 0; i < 6; i++)
    ps[i] = (sluice_program){.nkeys = 1, .keys = &k[i], .nsteps = 1,
                             .steps = &st};
  ps[2].keys = NULL;  /* no key array: the program's own EINVAL */
  ps[4].nkeys = 2;    /* two records for a one-record step */
  cr_assert_eq(sluice_store_run(s, 6, ps, SEC, res, rcs), SLUICE_OK);
  cr_assert_eq(rcs[0], SLUICE_OK);
  cr_assert_eq(rcs[1], SLUICE_EKEY, "an empty key");
  cr_assert_eq(rcs[2], SLUICE_EINVAL, "no keys");
  cr_assert_eq(rcs[3], SLUICE_EKEY, "a key past SLUICE_KEY_MAX");
  cr_assert_eq(rcs[4], SLUICE_EINVAL, "a step not covering its records");
  cr_assert_eq(rcs[5], SLUICE_OK);
  cr_assert(res[0].allowed && res[5].allowed);
  sluice_store_close(s);
}

Test(store, null_and_bad_input_never_reach_the_backend) {
  sluice_store *s = open_mem();
  sluice_op op = take_op(), bad = take_op();
  sluice_program p;
  sluice_program_result res;
  sluice_verdict v, vs[2];
  sluice_state st;
  sluice_op two[2];
  int rcs[2];
  memset(&p, 0, sizeof p);
  cr_assert_eq(store_op(NULL, &op, SEC, &v), SLUICE_EINVAL);
  cr_assert_eq(store_ops(NULL, 1, &op, SEC, vs, rcs),
               SLUICE_EINVAL);
  cr_assert_eq(store_prog(NULL, &p, SEC, &res), SLUICE_EINVAL);
  cr_assert_eq(sluice_store_run(NULL, 1, &p, SEC, &res, rcs),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_store_get(NULL, &K, SEC, &st, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_store_delete(NULL, &K), SLUICE_EINVAL);
  cr_assert_eq(sluice_store_control(NULL, 1, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_store_capabilities(NULL), 0);
  cr_assert_eq(store_op(s, NULL, SEC, &v), SLUICE_EINVAL);
  cr_assert_eq(store_op(s, &op, -1, &v), SLUICE_EINVAL);
  cr_assert_eq(store_op(s, &op, SEC, NULL), SLUICE_EINVAL);
  bad.arg = 3; /* more than the burst */
  cr_assert_eq(store_op(s, &bad, SEC, &v), SLUICE_ERANGE);
  bad = take_op();
  bad.algo = 99;
  cr_assert_eq(store_op(s, &bad, SEC, &v), SLUICE_EINVAL);
  two[0] = op;
  two[1] = bad;
  cr_assert_eq(store_ops(s, 2, two, SEC, vs, rcs), SLUICE_OK);
  cr_assert_eq(rcs[0], SLUICE_OK);
  cr_assert_eq(rcs[1], SLUICE_EINVAL, "the bad op keeps its own code");
  cr_assert_eq(store_ops(s, -1, two, SEC, vs, rcs),
               SLUICE_EINVAL);
  cr_assert_eq(store_prog(s, &p, SEC, &res), SLUICE_EINVAL,
               "an empty program");
  cr_assert_eq(sluice_store_get(s, NULL, SEC, &st, NULL), SLUICE_EKEY);
  cr_assert_eq(sluice_store_delete(s, &(sluice_key){"", 0}), SLUICE_EKEY);
  /* None of it was charged: one take so far, a second still fits. */
  cr_assert_eq(store_op(s, &op, SEC, &v), SLUICE_OK);
  cr_assert(v.allowed);
  cr_assert_eq(v.remaining, 0);
  sluice_store_close(s);
}

/* An allocator that never gives memory back, so that a closed store can be
** called without a use after free. */
static void *keep_malloc(void *ud, size_t n) {
  (void)ud;
  return malloc(n);
}
static void *keep_realloc(void *ud, void *p, size_t o, size_t n) {
  (void)ud;
  (void)o;
  return realloc(p, n);
}
static void *kept[4096];
static int nkept;
static void keep_free(void *ud, void *p, size_t n) {
  (void)ud;
  (void)n;
  if (nkept < 4096)
    kept[nkept++] = p;
  else
    free(p);
}

Test(store, a_closed_store_is_refused) {
  static const sluice_allocator keep = {keep_malloc, keep_realloc, keep_free,
                                        NULL};
  sluice_store *s = NULL;
  sluice_op op = take_op();
  sluice_verdict v;
  sluice_state st;
  sluice_store bare;
  int i;
  cr_assert_eq(sluice_store_open(sluice_backend_find("mem"), "", &keep, 0, &s,
                                 NULL, 0),
               SLUICE_OK);
  cr_assert_eq(store_op(s, &op, SEC, &v), SLUICE_OK);
  sluice_store_close(s);
  cr_assert_lt(nkept, 4096, "every block kept: none was reused");
  cr_assert_eq(store_op(s, &op, SEC, &v), SLUICE_EINVAL);
  cr_assert_eq(sluice_store_get(s, &K, SEC, &st, NULL), SLUICE_EINVAL);
  cr_assert_eq(sluice_store_control(s, 1, NULL), SLUICE_EINVAL);
  sluice_store_close(s); /* a second close is a no-op */
  /* A struct the core never opened. */
  memset(&bare, 0, sizeof bare);
  cr_assert_eq(store_op(&bare, &op, SEC, &v), SLUICE_EINVAL);
  for (i = 0; i < nkept; i++)
    free(kept[i]);
}

Test(store, uri_check_is_the_core_rule) {
  static const char *const names[] = {"a", "b", NULL};
  char err[128];
  cr_assert_eq(sluice__uri_check("x", "a=1;b=2", names, err, sizeof err),
               SLUICE_OK);
  cr_assert_eq(sluice__uri_check("x", "", names, err, sizeof err), SLUICE_OK);
  cr_assert_eq(sluice__uri_check("x", "a=1;c=2", names, err, sizeof err),
               SLUICE_EINVAL);
  cr_assert_str_eq(err, "x: unknown parameter 'c' (known: a, b)");
  cr_assert_eq(sluice__uri_check("x", "a=1;a=2", names, err, sizeof err),
               SLUICE_EINVAL);
  cr_assert_str_eq(err, "x: parameter 'a' given twice");
  cr_assert_eq(sluice__uri_check(NULL, "a", names, NULL, 0), SLUICE_EINVAL,
               "no '=', and no buffer to say so");
  cr_assert_eq(sluice__uri_check("x", NULL, names, err, sizeof err),
               SLUICE_EINVAL);
  cr_assert_str_eq(err, "uri_check: NULL uri");
  cr_assert_eq(sluice__uri_check("x", "a=1", NULL, err, sizeof err),
               SLUICE_EINVAL);
}

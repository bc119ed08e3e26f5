/*
** The failing store (tools/common/fail_store.h), the one decorator the
** simulator and the policy and fault suites share: its plan, its figures,
** the method table its options choose (and so how many failable calls a
** batch or a program makes), and the error detail it leaves.
*/
#include "fail_store.h"
#include "unit.h"

static const sluice_gcra_params G = {.rate = 1, .period_ns = SEC, .burst = 5};
static const sluice_key K[2] = {{"{t}b", 4}, {"{t}p", 4}};

static sluice_limiter *open_fail(const char *params, sluice_clock **clk) {
  sluice_limiter_options o;
  sluice_limiter *l = NULL;
  char store[96], err[256];
  cr_assert_eq(sluice_clock_manual(SEC, clk), SLUICE_OK);
  memset(&o, 0, sizeof o);
  snprintf(store, sizeof store, "fail:%s", params);
  o.store = store;
  o.backend = &fail_store_backend;
  o.clock = *clk;
  cr_assert_eq(sluice_limiter_open2(&o, &l, err, sizeof err), SLUICE_OK,
               "%s", err);
  return l;
}

static fail_stats stats(sluice_limiter *l) {
  fail_stats st;
  cr_assert_eq(sluice_limiter_control(l, FAIL_STORE_CTL_STATS, &st),
               SLUICE_OK);
  return st;
}

static void plan(sluice_limiter *l, long nth, long count, int code) {
  fail_plan p = {nth, count, code};
  cr_assert_eq(sluice_limiter_control(l, FAIL_STORE_CTL_PLAN, &p), SLUICE_OK);
}

static int take(sluice_limiter *l) {
  sluice_verdict v;
  return sluice_limiter_take(l, "k", 1, &G, 1, &v);
}

Test(fail_store, fails_the_planned_calls_only) {
  sluice_clock *c;
  sluice_limiter *l = open_fail("nth=2;count=2;code=ETIMEDOUT", &c);
  fail_stats st;
  cr_assert_eq(take(l), SLUICE_OK);
  cr_assert_eq(take(l), SLUICE_ETIMEDOUT);
  cr_assert(strstr(sluice_limiter_errmsg(l), "injected") != NULL);
  cr_assert_eq(take(l), SLUICE_ETIMEDOUT);
  cr_assert_eq(take(l), SLUICE_OK);
  st = stats(l);
  cr_assert_eq(st.calls, 4);
  cr_assert_eq(st.attempts, 4);
  cr_assert_eq(st.injected, 2);
  cr_assert_eq(st.passed, 2);
  /* A new plan restarts the count; the totals go on. */
  plan(l, 1, 0, 7); /* every call, a positive code */
  cr_assert_eq(take(l), SLUICE_EBACKEND, "the core maps positive codes");
  cr_assert_eq(take(l), SLUICE_EBACKEND);
  st = stats(l);
  cr_assert_eq(st.calls, 2);
  cr_assert_eq(st.attempts, 6);
  cr_assert_eq(st.injected, 4);
  {
    fail_plan heal = fail_plan_from(0, 0);
    cr_assert_eq(sluice_limiter_control(l, FAIL_STORE_CTL_PLAN, &heal),
                 SLUICE_OK);
  }
  cr_assert_eq(take(l), SLUICE_OK);
  /* Failed calls wrote nothing: 3 takes of burst 5 reached the store. */
  {
    sluice_verdict v;
    cr_assert_eq(sluice_limiter_take(l, "k", 1, &G, 2, &v), SLUICE_OK);
    cr_assert(v.allowed);
    cr_assert_eq(v.remaining, 0);
  }
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

Test(fail_store, plan_from_lets_calls_pass_first) {
  sluice_clock *c;
  sluice_limiter *l = open_fail("", &c);
  fail_plan p = fail_plan_from(SLUICE_EUNAVAIL, 2);
  cr_assert_eq(sluice_limiter_control(l, FAIL_STORE_CTL_PLAN, &p), SLUICE_OK);
  cr_assert_eq(take(l), SLUICE_OK);
  cr_assert_eq(take(l), SLUICE_OK);
  cr_assert_eq(take(l), SLUICE_EUNAVAIL);
  cr_assert_eq(take(l), SLUICE_EUNAVAIL);
  cr_assert_eq(sluice_limiter_control(l, FAIL_STORE_CTL_PLAN, NULL),
               SLUICE_EINVAL);
  cr_assert_eq(sluice_limiter_control(l, FAIL_STORE_CTL_STATS, NULL),
               SLUICE_EINVAL);
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

/* many / run choose the table, and so what one failable call is. */
static long calls_of(const char *params) {
  sluice_clock *c;
  sluice_limiter *l = open_fail(params, &c);
  sluice_op ops[3];
  sluice_verdict vs[3];
  int rcs[3], i;
  sluice_step st[2];
  sluice_program p;
  sluice_program_result res;
  long n;
  for (i = 0; i < 3; i++)
    ops[i] = op_take(&K[0], &G, 1);
  cr_assert_eq(sluice_limiter_apply_many(l, 3, ops, vs, rcs), SLUICE_OK);
  memset(st, 0, sizeof st);
  st[0] = (sluice_step){.algo = SLUICE_ALGO_PENALTY, .kind = SLUICE_OP_CHECK,
                        .key = 1, .nkeys = 1, .params = &UNIT_LADDER};
  st[1] = (sluice_step){.algo = SLUICE_ALGO_GCRA, .kind = SLUICE_OP_CONSUME,
                        .key = 0, .nkeys = 1, .params = &G, .arg = 1};
  p = (sluice_program){.nkeys = 2, .keys = K, .nsteps = 2, .steps = st};
  cr_assert_eq(sluice_limiter_run(l, &p, &res), SLUICE_OK);
  cr_assert(res.allowed);
  n = stats(l).calls;
  sluice_limiter_close(l);
  sluice_clock_free(c);
  return n;
}

Test(fail_store, the_options_choose_the_table) {
  cr_assert_eq(calls_of(""), 3 + 2, "version 1: per op, per step");
  cr_assert_eq(calls_of("many=1"), 1 + 2, "a batch is one call");
  cr_assert_eq(calls_of("run=1"), 3 + 1, "a program is one call");
  cr_assert_eq(calls_of("many=1;run=1"), 1 + 1);
}

Test(fail_store, bad_options_are_refused) {
  sluice_limiter_options o;
  sluice_limiter *l = NULL;
  char err[256];
  const char *bad[] = {"fail:nth=x", "fail:code=ENOPE", "fail:many=2",
                       "fail:colour=red"};
  size_t i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&o, 0, sizeof o);
    o.store = bad[i];
    o.backend = &fail_store_backend;
    cr_assert_eq(sluice_limiter_open2(&o, &l, err, sizeof err), SLUICE_EINVAL,
                 "%s", bad[i]);
    cr_assert_null(l);
    cr_assert_str_not_empty(err, "%s says why", bad[i]);
  }
}

/* The inner store's own errors come through with their detail; what the
** decorator does not fail goes to the inner store untouched. */
Test(fail_store, passes_the_rest_through) {
  sluice_clock *c;
  sluice_limiter *l = open_fail("max_keys=1", &c);
  sluice_verdict v;
  sluice_state st;
  int64_t exp;
  cr_assert_eq(sluice_limiter_take(l, "a", 1, &G, 1, &v), SLUICE_OK);
  cr_assert_eq(sluice_limiter_take(l, "b", 1, &G, 1, &v), SLUICE_EFULL);
  cr_assert_str_not_empty(sluice_limiter_errmsg(l));
  cr_assert(strstr(sluice_limiter_errmsg(l), "injected") == NULL);
  cr_assert_eq(sluice_limiter_get(l, "a", 1, &st, &exp), SLUICE_OK);
  cr_assert_eq(sluice_limiter_delete(l, "a", 1), SLUICE_OK);
  cr_assert_eq(sluice_limiter_get(l, "a", 1, &st, &exp), SLUICE_ENOTFOUND);
  cr_assert_eq(sluice_limiter_capabilities(l), SLUICE_CAP_THREADSAFE);
  cr_assert_eq(sluice_limiter_control(l, 12345, &v), SLUICE_ENOTFOUND);
  cr_assert_str_eq(sluice_limiter_backend(l), "fail");
  sluice_limiter_close(l);
  sluice_clock_free(c);
}

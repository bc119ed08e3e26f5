/*
** sluice for Node: the N-API module (C, no node-addon-api).
**
**   open(opts)                  -> handle (an External)
**   out(h)                      -> the Float64Array decide() writes
**   decide(h, q, n)             -> text; numbers in out(h) (this thread)
**   decideAsync(h, q, n)        -> Promise<[Float64Array, text, names]>
**                                  (the store call on the thread pool;
**                                  names: the id table, after close())
**   str(h, id)                  -> the text of a string id of an answer
**   release(h, q, n, leaseId)   -> error name or null
**   releaseAsync(h, q, n, leaseId) -> Promise<error name or null>
**   settle(h, q, n, a, na, flags, checkLo, checkHi, nowLo, nowHi)
**                               -> error name or null
**   settleAsync(...the same)    -> Promise<error name or null>
**                                  (a: the reported attributes joined as
**                                  a request with no fields of its own)
**   setTime(h, ms)                 manual clock only
**   close(h)
**
** q is a request joined into one string, n its number of fields
** (request.c); an answer is numbers and one string (answer.c).
**
** lib/sluice.js is the API users see; this file keeps lifetimes right.  A
** handle's policy lives until close() and every async job started before
** it have completed (each job holds a reference on the External, so the
** garbage collector cannot finalize it under a job either); a handle
** dropped without close() is closed by its finalizer.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"

void sn_throw(napi_env env, int rc, const char *what) {
  char msg[160];
  snprintf(msg, sizeof msg, "sluice: %s: %s", what, sluice_strerror(rc));
  napi_throw_error(env, sluice_err_name(rc), msg);
}

/* The latest time in ms a manual clock takes: 2^53 / 1000, so that its ns
** fit an int64. */
#define SN_MS_MAX 9007199254740.0

static void policy_free_state(napi_env env, sn_policy *p) {
  if (p->out != NULL)
    napi_delete_reference(env, p->out);
  p->out = NULL, p->out_data = NULL;
  free(p->str);
  p->str = NULL, p->nstr = p->capstr = 0;
  sluice_policy_close(p->pol);
  sluice_http_close(p->http);
  sluice_clock_free(p->clock); /* after the limiter that borrowed it */
  p->pol = NULL, p->http = NULL, p->clock = NULL;
}

static void policy_finalize(napi_env env, void *data, void *hint) {
  sn_policy *p = data;
  (void)hint;
  policy_free_state(env, p); /* no job is in flight: each holds a reference */
  free(p);
}

/* The policy of handle args[0], or NULL with an exception pending. */
static sn_policy *get_policy(napi_env env, napi_value h) {
  void *data = NULL;
  napi_valuetype t;
  if (napi_typeof(env, h, &t) != napi_ok || t != napi_external ||
      napi_get_value_external(env, h, &data) != napi_ok || data == NULL) {
    napi_throw_type_error(env, NULL, "sluice: not a sluice handle");
    return NULL;
  }
  if (((sn_policy *)data)->closed) {
    napi_throw_error(env, "SLUICE_EINVAL", "sluice: the handle is closed");
    return NULL;
  }
  return data;
}

/* opts.name as a string into buf ("" when absent); -1 with a throw. */
static int opt_str(napi_env env, napi_value o, const char *name, char *buf,
                   size_t len) {
  napi_value v;
  napi_valuetype t;
  size_t n = 0;
  buf[0] = '\0';
  if (napi_get_named_property(env, o, name, &v) != napi_ok ||
      napi_typeof(env, v, &t) != napi_ok)
    return -1;
  if (t == napi_undefined || t == napi_null)
    return 0;
  if (t != napi_string ||
      napi_get_value_string_utf8(env, v, buf, len, &n) != napi_ok ||
      n + 1 >= len) {
    char msg[96];
    snprintf(msg, sizeof msg, "sluice: option '%s' must be a string", name);
    napi_throw_type_error(env, "SLUICE_EINVAL", msg);
    return -1;
  }
  return 0;
}

/* opts.name as a number (def when absent); -1 with a throw. */
static int opt_num(napi_env env, napi_value o, const char *name, double def,
                   double *out) {
  napi_value v;
  napi_valuetype t;
  *out = def;
  if (napi_get_named_property(env, o, name, &v) != napi_ok ||
      napi_typeof(env, v, &t) != napi_ok)
    return -1;
  if (t == napi_undefined || t == napi_null)
    return 0;
  if (t != napi_number) {
    char msg[96];
    snprintf(msg, sizeof msg, "sluice: option '%s' must be a number", name);
    napi_throw_type_error(env, "SLUICE_EINVAL", msg);
    return -1;
  }
  return napi_get_value_double(env, v, out) == napi_ok ? 0 : -1;
}

/* A Float64Array of SN_OUT_LEN (data off the V8 heap, so its address
** stays), with a reference on it kept in p. */
static int make_out_array(napi_env env, double **data, napi_value *arr) {
  napi_value buf;
  void *raw;
  if (napi_create_arraybuffer(env, SN_OUT_LEN * sizeof(double), &raw, &buf) !=
          napi_ok ||
      napi_create_typedarray(env, napi_float64_array, SN_OUT_LEN, buf, 0,
                             arr) != napi_ok)
    return -1;
  *data = raw;
  return 0;
}

static int make_out(napi_env env, sn_policy *p) {
  napi_value arr;
  return make_out_array(env, &p->out_data, &arr) == 0 &&
                 napi_create_reference(env, arr, 1, &p->out) == napi_ok
             ? 0
             : -1;
}

static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], secret_v, ext;
  char path[4096], store[1024], base[600], err[512] = "";
  void *secret = NULL;
  size_t secret_len = 0;
  bool is_buf = false;
  double form, clock_ms, jitter, create;
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_http_options ho;
  sn_policy *p;
  int rc;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1) {
    napi_throw_type_error(env, "SLUICE_EINVAL", "sluice: open(options)");
    return NULL;
  }
  if (opt_str(env, argv[0], "policy", path, sizeof path) ||
      opt_str(env, argv[0], "store", store, sizeof store) ||
      opt_str(env, argv[0], "problemBase", base, sizeof base) ||
      opt_num(env, argv[0], "headerForm", SLUICE_HTTP_FORM_LEGACY, &form) ||
      opt_num(env, argv[0], "clockMs", -1, &clock_ms) ||
      opt_num(env, argv[0], "jitter", 1, &jitter) ||
      opt_num(env, argv[0], "create", 0, &create))
    return NULL;
  SN_CALL(env, napi_get_named_property(env, argv[0], "secret", &secret_v));
  SN_CALL(env, napi_is_buffer(env, secret_v, &is_buf));
  if (is_buf)
    SN_CALL(env, napi_get_buffer_info(env, secret_v, &secret, &secret_len));
  if (path[0] == '\0' || secret_len != sizeof po.secret || base[0] == '\0') {
    napi_throw_type_error(env, "SLUICE_EINVAL",
                          "sluice: open() needs 'policy' (a policy file), "
                          "'secret' (a Buffer of 16 bytes) and 'problemBase' "
                          "(the URI the problem types hang off)");
    return NULL;
  }
  /* numbers a C int or int64 ns can hold, before they are converted */
  if (!(form == SLUICE_HTTP_FORM_LEGACY || form == SLUICE_HTTP_FORM_SF ||
        form == SLUICE_HTTP_FORM_BOTH) ||
      !(clock_ms < 0 || clock_ms <= SN_MS_MAX)) {
    napi_throw_range_error(env, "SLUICE_EINVAL",
                           "sluice: headerForm is 0..2, clockMs 0..9007199254740");
    return NULL;
  }
  if ((p = calloc(1, sizeof *p)) == NULL) {
    sn_throw(env, SLUICE_ENOMEM, "open");
    return NULL;
  }
  memset(&lo, 0, sizeof lo);
  memset(&po, 0, sizeof po);
  memset(&ho, 0, sizeof ho);
  lo.store = store[0] ? store : NULL;
  lo.flags = create != 0 ? SLUICE_OPEN_CREATE : 0;
  po.limiter_options = &lo;
  po.config_path = path;
  memcpy(po.secret, secret, sizeof po.secret);
  po.errbuf = err;
  po.errlen = sizeof err;
  ho.problem_base = base[0] ? base : NULL;
  ho.header_form = (int)form;
  ho.flags = jitter != 0 ? 0 : SLUICE_HTTP_NO_JITTER;
  rc = SLUICE_OK;
  if (clock_ms >= 0)
    rc = sluice_clock_manual((int64_t)(clock_ms * 1e6), &p->clock);
  lo.clock = p->clock;
  if (p->clock != NULL) /* Redis too decides at that time, as sluice replay */
    lo.flags |= SLUICE_OPEN_TESTCLOCK;
  if (rc == SLUICE_OK && (rc = sluice_policy_open(&po, &p->pol)) == SLUICE_OK &&
      (rc = sluice_http_open(&ho, &p->http)) != SLUICE_OK)
    snprintf(err, sizeof err, "the HTTP options (problemBase, headerForm)");
  if (rc != SLUICE_OK) {
    char msg[640];
    policy_free_state(env, p);
    free(p);
    snprintf(msg, sizeof msg, "sluice: open: %s%s%s", sluice_strerror(rc),
             err[0] ? ": " : "", err);
    napi_throw_error(env, sluice_err_name(rc), msg);
    return NULL;
  }
  if (make_out(env, p) != 0 ||
      napi_create_external(env, p, policy_finalize, NULL, &ext) != napi_ok) {
    policy_free_state(env, p);
    free(p);
    napi_throw_error(env, NULL, "sluice: cannot create the handle");
    return NULL;
  }
  return ext;
}

static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void *data = NULL;
  sn_policy *p;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok ||
      data == NULL) {
    napi_throw_type_error(env, NULL, "sluice: not a sluice handle");
    return NULL;
  }
  p = data;
  if (!p->closed) { /* a second close is a no-op, as sluice's destructors */
    p->closed = 1;
    if (p->inflight == 0)
      policy_free_state(env, p);
  }
  return NULL;
}

static napi_value js_set_time(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  double ms;
  sn_policy *p;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2 || (p = get_policy(env, argv[0])) == NULL)
    return NULL;
  if (p->clock == NULL || napi_get_value_double(env, argv[1], &ms) != napi_ok ||
      !(ms >= 0 && ms <= SN_MS_MAX)) {
    napi_throw_error(env, "SLUICE_EINVAL",
                     "sluice: setTime needs a handle opened with clockMs "
                     "and a time >= 0");
    return NULL;
  }
  sluice_clock_set(p->clock, (int64_t)(ms * 1e6));
  return NULL;
}

/* Release the lease of a decision whose answer could not be made, so that
** a failed render never strands one until its TTL. */
static void drop_lease(sn_policy *p, const sluice_request *rq,
                       const sluice_decision *d) {
  if (d->lease_id != 0)
    sluice_policy_release(
        p->pol, rq,
        &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = d->lease_id});
}

/* The answer of a decision into out and a JS string; NULL with an
** exception (and the decision's leases given back). */
static napi_value answer(napi_env env, sn_policy *p, int rc,
                         const sluice_request *rq, const sluice_decision *d,
                         double *out) {
  char room[SN_ROOM], *text;
  size_t len;
  int frc = sn_answer_fill(p, rc, rq, d, out, room, sizeof room, &text, &len);
  if (frc != SLUICE_OK) {
    if (rc == SLUICE_OK)
      drop_lease(p, rq, d);
    sn_throw(env, frc, "render");
    return NULL;
  }
  return sn_answer_text(env, room, text, len, out[SN_OUT_HAS_BODY] == 0);
}

static napi_value js_out(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], arr;
  sn_policy *p;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || (p = get_policy(env, argv[0])) == NULL)
    return NULL;
  SN_CALL(env, napi_get_reference_value(env, p->out, &arr));
  return arr;
}

static napi_value js_str(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], v;
  uint32_t id;
  sn_policy *p;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2 || (p = get_policy(env, argv[0])) == NULL)
    return NULL;
  if (napi_get_value_uint32(env, argv[1], &id) != napi_ok ||
      id >= (uint32_t)p->nstr) {
    napi_throw_range_error(env, "SLUICE_EINVAL", "sluice: no such string id");
    return NULL;
  }
  SN_CALL(env, napi_create_string_utf8(env, p->str[id], NAPI_AUTO_LENGTH, &v));
  return v;
}

static napi_value js_decide(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  sn_request r;
  sluice_decision d;
  sn_policy *p;
  int rc;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 3 || (p = get_policy(env, argv[0])) == NULL ||
      sn_request_read(env, argv[1], argv[2], &r) != 0)
    return NULL;
  rc = sluice_policy_decide(p->pol, 1, &r.rq, &d, NULL);
  return answer(env, p, rc, &r.rq, &d, p->out_data);
}

/* ---------------------------------------------------------- async jobs --- */

enum { JOB_DECIDE, JOB_RELEASE, JOB_SETTLE };

/* A settle's report and the decision it settles: the reported attributes
** (read as a request of attributes only) and the fields of the decision
** that sluice_policy_settle() reads, which JS kept from its answer
** (SN_OUT_CHECK_LO...: flags, settle_check, now_ns). */
typedef struct sn_settle {
  sn_request act;
  sluice_decision d;
} sn_settle;

typedef struct sn_job {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref handle; /* keeps the External (and so p) alive */
  sn_policy *p;
  int kind, rc;
  uint64_t lease_id;
  sluice_decision d;
  sn_request req;
  sn_settle *settle; /* JOB_SETTLE */
} sn_job;

static void job_execute(napi_env env, void *data) {
  sn_job *j = data;
  (void)env;
  if (j->kind == JOB_DECIDE)
    j->rc = sluice_policy_decide(j->p->pol, 1, &j->req.rq, &j->d, NULL);
  else if (j->kind == JOB_SETTLE)
    j->rc = sluice_policy_settle(j->p->pol, &j->req.rq, &j->settle->d,
                                 j->settle->act.rq.attrs,
                                 j->settle->act.rq.nattrs);
  else
    j->rc = sluice_policy_release(
        j->p->pol, &j->req.rq,
        &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = j->lease_id});
}

/* The whole id table as res[2]: a job completing after close() answers
** with the names, since the table goes with the policy before JS reads
** the answer. */
static int job_names(napi_env env, sn_policy *p, napi_value res) {
  napi_value names, v;
  int i;
  if (napi_create_array_with_length(env, (size_t)p->nstr, &names) != napi_ok)
    return -1;
  for (i = 0; i < p->nstr; i++)
    if (napi_create_string_utf8(env, p->str[i], NAPI_AUTO_LENGTH, &v) !=
            napi_ok ||
        napi_set_element(env, names, (uint32_t)i, v) != napi_ok)
      return -1;
  return napi_set_element(env, res, 2, names) == napi_ok ? 0 : -1;
}

/* A decide job's answer: [Float64Array, text, names (after close)]; NULL
** with an exception. */
static napi_value job_answer(napi_env env, sn_job *j) {
  napi_value arr, res, text;
  double *out;
  if (make_out_array(env, &out, &arr) != 0) {
    napi_throw_error(env, NULL, "sluice: out of memory");
    if (j->rc == SLUICE_OK)
      drop_lease(j->p, &j->req.rq, &j->d);
    return NULL;
  }
  if ((text = answer(env, j->p, j->rc, &j->req.rq, &j->d, out)) == NULL)
    return NULL;
  if (napi_create_array_with_length(env, 3, &res) != napi_ok ||
      napi_set_element(env, res, 0, arr) != napi_ok ||
      napi_set_element(env, res, 1, text) != napi_ok ||
      (j->p->closed && job_names(env, j->p, res) != 0)) {
    napi_throw_error(env, NULL, "sluice: out of memory");
    return NULL;
  }
  return res;
}

/* An error's name as a JS string, or null for SLUICE_OK. */
static napi_value rc_value(napi_env env, int rc) {
  napi_value res;
  if (rc == SLUICE_OK)
    SN_CALL(env, napi_get_null(env, &res));
  else
    SN_CALL(env, napi_create_string_utf8(env, sluice_err_name(rc),
                                         NAPI_AUTO_LENGTH, &res));
  return res;
}

static void job_complete(napi_env env, napi_status status, void *data) {
  sn_job *j = data;
  sn_policy *p = j->p;
  napi_value res = NULL, exc;
  if (status != napi_ok) {
    napi_create_string_utf8(env, "sluice: async work cancelled",
                            NAPI_AUTO_LENGTH, &exc);
    napi_create_error(env, NULL, exc, &exc);
    napi_reject_deferred(env, j->deferred, exc);
  } else if (j->kind == JOB_DECIDE) {
    if ((res = job_answer(env, j)) == NULL) {
      napi_get_and_clear_last_exception(env, &exc);
      napi_reject_deferred(env, j->deferred, exc);
    } else {
      napi_resolve_deferred(env, j->deferred, res);
    }
  } else if ((res = rc_value(env, j->rc)) != NULL) { /* release, settle */
    napi_resolve_deferred(env, j->deferred, res);
  } else {
    napi_get_and_clear_last_exception(env, &exc);
    napi_reject_deferred(env, j->deferred, exc);
  }
  napi_delete_async_work(env, j->work);
  if (--p->inflight == 0 && p->closed)
    policy_free_state(env, p); /* close() came while this job ran */
  napi_delete_reference(env, j->handle);
  free(j->settle);
  free(j);
}

/* argv[3]: a lease id (a BigInt, not 0) into *id; -1 with a throw. */
static int lease_arg(napi_env env, size_t argc, napi_value *argv,
                     uint64_t *id) {
  bool lossless = false;
  if (argc < 4 ||
      napi_get_value_bigint_uint64(env, argv[3], id, &lossless) != napi_ok ||
      !lossless || *id == 0) {
    napi_throw_type_error(env, "SLUICE_EINVAL",
                          "sluice: release needs the decision's leaseId");
    return -1;
  }
  return 0;
}

/* argv[3..9]: a settle's report and decision into *s; -1 with a throw. */
static int settle_args(napi_env env, size_t argc, napi_value *argv,
                       sn_settle *s) {
  double v[5];
  int i;
  if (argc < 10) {
    napi_throw_type_error(env, "SLUICE_EINVAL",
                          "sluice: settle(h, q, n, a, na, flags, checkLo, "
                          "checkHi, nowLo, nowHi)");
    return -1;
  }
  for (i = 0; i < 5; i++)
    if (napi_get_value_double(env, argv[5 + i], &v[i]) != napi_ok ||
        !(v[i] >= 0 && v[i] <= 4294967295.0)) {
      napi_throw_type_error(env, "SLUICE_EINVAL",
                            "sluice: settle needs the decision it settles");
      return -1;
    }
  if (sn_request_read(env, argv[3], argv[4], &s->act) != 0)
    return -1;
  memset(&s->d, 0, sizeof s->d);
  s->d.flags = (uint32_t)v[0];
  s->d.settle_check = (uint64_t)v[2] << 32 | (uint32_t)v[1];
  s->d.now_ns = (int64_t)((uint64_t)v[4] << 32 | (uint32_t)v[3]);
  return 0;
}

static napi_value start_job(napi_env env, napi_callback_info info, int kind) {
  size_t argc = 10;
  napi_value argv[10], promise, name;
  sn_policy *p;
  sn_job *j;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 3 || (p = get_policy(env, argv[0])) == NULL)
    return NULL;
  if ((j = calloc(1, sizeof *j)) == NULL) {
    sn_throw(env, SLUICE_ENOMEM, "async");
    return NULL;
  }
  j->p = p;
  j->kind = kind;
  if (kind == JOB_SETTLE && (j->settle = malloc(sizeof *j->settle)) == NULL) {
    sn_throw(env, SLUICE_ENOMEM, "async");
    goto fail;
  }
  if (sn_request_read(env, argv[1], argv[2], &j->req) != 0 ||
      (kind == JOB_RELEASE && lease_arg(env, argc, argv, &j->lease_id)) ||
      (kind == JOB_SETTLE && settle_args(env, argc, argv, j->settle)))
    goto fail;
  if (napi_create_promise(env, &j->deferred, &promise) != napi_ok ||
      napi_create_string_utf8(env, "sluice", NAPI_AUTO_LENGTH, &name) !=
          napi_ok ||
      napi_create_async_work(env, NULL, name, job_execute, job_complete, j,
                             &j->work) != napi_ok) {
    napi_throw_error(env, NULL, "sluice: cannot start async work");
    goto fail; /* a created promise that is never settled is collected */
  }
  if (napi_create_reference(env, argv[0], 1, &j->handle) != napi_ok ||
      napi_queue_async_work(env, j->work) != napi_ok) {
    if (j->handle)
      napi_delete_reference(env, j->handle);
    napi_delete_async_work(env, j->work);
    napi_throw_error(env, NULL, "sluice: cannot queue async work");
    goto fail;
  }
  p->inflight++;
  return promise;
fail:
  free(j->settle);
  free(j);
  return NULL;
}

static napi_value js_decide_async(napi_env env, napi_callback_info info) {
  return start_job(env, info, JOB_DECIDE);
}

static napi_value js_release_async(napi_env env, napi_callback_info info) {
  return start_job(env, info, JOB_RELEASE);
}

static napi_value js_settle_async(napi_env env, napi_callback_info info) {
  return start_job(env, info, JOB_SETTLE);
}

static napi_value js_settle(napi_env env, napi_callback_info info) {
  size_t argc = 10;
  napi_value argv[10];
  sn_request r;
  sn_settle *s;
  sn_policy *p;
  int rc;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 3 || (p = get_policy(env, argv[0])) == NULL)
    return NULL;
  if ((s = malloc(sizeof *s)) == NULL) { /* two requests: off the stack */
    sn_throw(env, SLUICE_ENOMEM, "settle");
    return NULL;
  }
  if (sn_request_read(env, argv[1], argv[2], &r) != 0 ||
      settle_args(env, argc, argv, s) != 0) {
    free(s);
    return NULL;
  }
  rc = sluice_policy_settle(p->pol, &r.rq, &s->d, s->act.rq.attrs,
                            s->act.rq.nattrs);
  free(s);
  return rc_value(env, rc);
}

static napi_value js_release(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  sn_request r;
  sn_policy *p;
  uint64_t id = 0;
  SN_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 3 || (p = get_policy(env, argv[0])) == NULL ||
      lease_arg(env, argc, argv, &id) ||
      sn_request_read(env, argv[1], argv[2], &r) != 0)
    return NULL;
  return rc_value(
      env, sluice_policy_release(
               p->pol, &r.rq,
               &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = id}));
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor fns[] = {
      {"open", NULL, js_open, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL},
      {"out", NULL, js_out, NULL, NULL, NULL, napi_default, NULL},
      {"str", NULL, js_str, NULL, NULL, NULL, napi_default, NULL},
      {"decide", NULL, js_decide, NULL, NULL, NULL, napi_default, NULL},
      {"decideAsync", NULL, js_decide_async, NULL, NULL, NULL, napi_default,
       NULL},
      {"release", NULL, js_release, NULL, NULL, NULL, napi_default, NULL},
      {"releaseAsync", NULL, js_release_async, NULL, NULL, NULL, napi_default,
       NULL},
      {"settle", NULL, js_settle, NULL, NULL, NULL, napi_default, NULL},
      {"settleAsync", NULL, js_settle_async, NULL, NULL, NULL, napi_default,
       NULL},
      {"setTime", NULL, js_set_time, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_value version, settled;
  SN_CALL(env, napi_define_properties(env, exports, sizeof fns / sizeof fns[0],
                                      fns));
  SN_CALL(env, napi_create_string_utf8(env, sluice_version(NULL),
                                       NAPI_AUTO_LENGTH, &version));
  SN_CALL(env, napi_set_named_property(env, exports, "version", version));
  /* the flag a settled decision carries, for JS to set after a settle */
  SN_CALL(env, napi_create_uint32(env, SLUICE_DECISION_SETTLED, &settled));
  SN_CALL(env, napi_set_named_property(env, exports, "SETTLED", settled));
  return exports;
}

/* The macro defines Node's two entry points without prototypes of their
** own (clang's -Wmissing-prototypes names them). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
#pragma GCC diagnostic pop

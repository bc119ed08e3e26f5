/*
** One request through the policy: the phase handler that decides (inline,
** or on a thread pool for a store that blocks), the denial the library
** renders, the RateLimit headers of an admission, what the upstream
** answered reported as an attribute (sluice_report, a sign-in's `result`),
** the lease released in the request's pool cleanup, and the $sluice_*
** variables.
*/
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <stdlib.h>
#include <time.h>

#include <jansson.h>

#include "ngx_http_sluice.h"

/* $sluice_status values, named after $limit_req_status. */
static ngx_str_t ngx_http_sluice_status_names[] = {
    ngx_string("PASSED"), ngx_string("REJECTED"),
    ngx_string("REJECTED_DRY_RUN"), ngx_string("ERROR")};

static ngx_http_output_header_filter_pt ngx_http_next_header_filter;
/* $request_body's index: an attribute read from the body (a map of it) at
** the first look, before the body is in, leaves it cached as "not
** found". */
static ngx_int_t ngx_http_sluice_request_body;
static ngx_http_output_body_filter_pt ngx_http_next_body_filter;

static void ngx_http_sluice_cleanup(void *data);

static ngx_http_sluice_ctx_t *
ngx_http_sluice_get_ctx(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t *cln;

    for (cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == ngx_http_sluice_cleanup) {
            return cln->data;
        }
    }
    return NULL;
}

static int64_t
ngx_http_sluice_wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* sluice_attr: each value evaluated into req's attributes; an empty one
** is left out (absent: the policy names it if a limit's scope needs it).
** `extra`, when not NULL, goes last (a reported result). */
static ngx_int_t
ngx_http_sluice_attrs(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx,
    sluice_request *req, const sluice_attr *extra)
{
    ngx_http_sluice_attr_t *a = NULL;
    sluice_attr *out;
    ngx_uint_t i, n = 0, na = 0;
    ngx_str_t v;

    if (ctx->lcf->attrs != NULL) {
        a = ctx->lcf->attrs->elts;
        na = ctx->lcf->attrs->nelts;
    }
    if (na == 0 && extra == NULL) {
        return NGX_OK;
    }
    out = ngx_palloc(r->pool, (na + 1) * sizeof(*out));
    if (out == NULL) {
        return NGX_ERROR;
    }
    for (i = 0; i < na; i++) {
        if (ngx_http_complex_value(r, &a[i].value, &v) != NGX_OK) {
            return NGX_ERROR;
        }
        if (v.len == 0) {
            continue;
        }
        out[n].name = a[i].name;
        out[n].value = ngx_http_sluice_cstr(r->pool, &v);
        if (out[n].value == NULL) {
            return NGX_ERROR;
        }
        n++;
    }
    if (extra != NULL) {
        out[n++] = *extra;
    }
    req->attrs = out;
    req->nattrs = n;
    return NGX_OK;
}

static ngx_int_t
ngx_http_sluice_fields(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    const char **slot[F__COUNT];
    ngx_str_t v;
    ngx_uint_t i;
    char *s;

    slot[F_TENANT] = &ctx->req.tenant_id;
    slot[F_KEY] = &ctx->req.api_key_id;
    slot[F_TIER] = &ctx->req.tier;
    slot[F_METHOD] = &ctx->req.method;
    slot[F_ROUTE] = &ctx->req.route;
    slot[F_IP] = &ctx->req.client_ip;
    for (i = 0; i < F__COUNT; i++) {
        ngx_str_null(&v);
        if (ctx->lcf->field[i] != NULL) {
            if (ngx_http_complex_value(r, ctx->lcf->field[i], &v) != NGX_OK) {
                return NGX_ERROR;
            }
        } else if (i == F_METHOD) {
            v = r->method_name;
        } else if (i == F_ROUTE) {
            v = r->uri;
        } else if (i == F_IP) {
            v = r->connection->addr_text;
        }
        if (v.len == 0) {
            *slot[i] = NULL; /* absent: the policy names it if required */
            continue;
        }
        s = ngx_http_sluice_cstr(r->pool, &v);
        if (s == NULL) {
            return NGX_ERROR;
        }
        *slot[i] = s;
    }
    return ngx_http_sluice_attrs(r, ctx, &ctx->req, NULL);
}

/* ---------------------------------------------- work off the event loop --- */

/* Work that needs no answer back in the request: a lease release, a
** settle, a report of the upstream's answer.  It owns a deep copy of the
** request, because the request's pool may be gone by the time a pool
** thread runs it (a release from the pool cleanup).  A release from the
** body filter names the request instead: its answer's end waits for it. */

/* r->buffered while the answer's end waits for the release (the bits
** nginx defines for r->buffered are 0x01..0x04: ssi, sub, copy). */
#define SLUICE_NGX_BUFFERED 0x08

static void
ngx_http_sluice_job_run(ngx_http_sluice_job_t *j)
{
    sluice_decision d;

    if (j->settle) {
        (void) sluice_policy_settle(j->pol, &j->req, &j->d, &j->used, 1);
    } else if (j->lease_id) {
        sluice_hold  h = { .kind = SLUICE_HOLD_LEASE, .lease_id = j->lease_id };

        (void) sluice_policy_release(j->pol, &j->req, &h);
    } else {
        (void) sluice_policy_decide(j->pol, 1, &j->req, &d, NULL);
    }
}

#if (NGX_THREADS)
static void
ngx_http_sluice_job_thread(void *data, ngx_log_t *log)
{
    ngx_http_sluice_job_run(data);
}

/* Back on the event loop: a request whose answer's end waited for the
** release is written on (its body filter passes what it held), as nginx's
** copy filter resumes after a read on a pool thread. */
static void
ngx_http_sluice_job_done(ngx_event_t *ev)
{
    ngx_http_sluice_job_t *j;
    ngx_http_request_t *r;

    j = (ngx_http_sluice_job_t *) ((u_char *) ev->data
                                   + sizeof(ngx_thread_task_t));
    r = j->resume;
    ngx_free(ev->data);
    if (r != NULL) {
        ngx_http_sluice_job_resumed(r);
    }
}
#endif

/* A job the request's answer waited for is done (a pool thread's, or the
** event loop's halves). */
void
ngx_http_sluice_job_resumed(ngx_http_request_t *r)
{
    ngx_http_sluice_ctx_t *ctx = ngx_http_sluice_get_ctx(r);

    if (ctx != NULL) {
        ctx->releasing = 0;
    }
    r->main->blocked--;
    r->aio = 0;
    r->connection->write->handler(r->connection->write);
}

static size_t
ngx_http_sluice_copy_str(const char **s, char *dst)
{
    size_t n;

    if (*s == NULL) {
        return 0;
    }
    n = ngx_strlen(*s) + 1;
    if (dst != NULL) {
        ngx_memcpy(dst, *s, n);
        *s = dst;
    }
    return n;
}

/* A job with its own copy of the request (its strings and attributes)
** and of a settle's decision and report (sd NULL: no settle), after
** `prefix` bytes the caller uses: the request's pool may be gone by the
** time the job runs.  NULL when out of memory. */
static u_char *
ngx_http_sluice_job_copy(ngx_log_t *log, size_t prefix, sluice_policy *pol,
    const sluice_request *req, uint64_t lease_id, ngx_http_request_t *resume,
    const sluice_decision *sd, const sluice_attr *used,
    ngx_http_sluice_job_t **out)
{
    ngx_http_sluice_job_t *j, tmp;
    const char **strs[6];
    size_t need = 0, i;
    u_char *mem;
    char *p;

    tmp.req = *req;
    strs[0] = &tmp.req.tenant_id;
    strs[1] = &tmp.req.api_key_id;
    strs[2] = &tmp.req.tier;
    strs[3] = &tmp.req.method;
    strs[4] = &tmp.req.route;
    strs[5] = &tmp.req.client_ip;
    for (i = 0; i < 6; i++) {
        need += ngx_http_sluice_copy_str(strs[i], NULL);
    }
    /* The attributes (a declared limit's lease is found by them): the
    ** pairs, then their strings. */
    need += req->nattrs * sizeof(sluice_attr) + sizeof(sluice_attr);
    for (i = 0; i < req->nattrs; i++) {
        sluice_attr t = req->attrs[i];
        need += ngx_http_sluice_copy_str(&t.name, NULL)
                + ngx_http_sluice_copy_str(&t.value, NULL);
    }
    if (sd != NULL) {
        sluice_attr t = *used;
        need += ngx_http_sluice_copy_str(&t.name, NULL)
                + ngx_http_sluice_copy_str(&t.value, NULL);
    }
    mem = ngx_calloc(prefix + sizeof(*j) + need, log);
    if (mem == NULL) {
        return NULL;
    }
    j = (ngx_http_sluice_job_t *) (mem + prefix);
    p = j->strs;
    for (i = 0; i < 6; i++) {
        p += ngx_http_sluice_copy_str(strs[i], p);
    }
    if (req->nattrs) {
        sluice_attr *at = (sluice_attr *) ngx_align_ptr(p, sizeof(void *));
        p = (char *) (at + req->nattrs);
        for (i = 0; i < req->nattrs; i++) {
            at[i] = req->attrs[i];
            p += ngx_http_sluice_copy_str(&at[i].name, p);
            p += ngx_http_sluice_copy_str(&at[i].value, p);
        }
        tmp.req.attrs = at;
    }
    if (sd != NULL) {
        j->settle = 1;
        j->d = *sd;
        j->used = *used;
        p += ngx_http_sluice_copy_str(&j->used.name, p);
        p += ngx_http_sluice_copy_str(&j->used.value, p);
    }
    j->pol = pol;
    j->req = tmp.req; /* its strings now point into j->strs */
    j->lease_id = lease_id;
    j->resume = resume;
    *out = j;
    return mem;
}

/* Run a job on the pool, on the event loop in halves (Redis without a
** pool), or inline.  With `resume`, a job that goes out holds that
** request (NGX_AGAIN) until it is done. */
static ngx_int_t
ngx_http_sluice_background(ngx_log_t *log, sluice_policy *pol,
    const sluice_request *req, uint64_t lease_id, ngx_http_request_t *resume,
    const sluice_decision *sd, const sluice_attr *used)
{
    ngx_http_sluice_job_t inline_job, *j;
    u_char *mem;
#if (NGX_THREADS)
    ngx_thread_task_t *task;

    if (ngx_http_sluice_worker.pool != NULL) {
        mem = ngx_http_sluice_job_copy(log, sizeof(*task), pol, req, lease_id,
                                       resume, sd, used, &j);
        if (mem == NULL) {
            return NGX_ERROR; /* a lease then expires by its TTL */
        }
        task = (ngx_thread_task_t *) mem;
        task->ctx = j;
        task->handler = ngx_http_sluice_job_thread;
        task->event.handler = ngx_http_sluice_job_done;
        task->event.data = mem;
        task->event.log = log;
        if (ngx_thread_task_post(ngx_http_sluice_worker.pool, task) != NGX_OK) {
            ngx_free(mem);
            return NGX_ERROR;
        }
        if (resume == NULL) {
            return NGX_OK;
        }
        resume->main->blocked++;
        resume->aio = 1;
        return NGX_AGAIN;
    }
#endif
    if (ngx_http_sluice_worker.event) {
        mem = ngx_http_sluice_job_copy(log, sizeof(ngx_http_sluice_ctx_t),
                                       pol, req, lease_id, resume, sd, used,
                                       &j);
        if (mem == NULL) {
            return NGX_ERROR;
        }
        return ngx_http_sluice_event_job((ngx_http_sluice_ctx_t *) mem, j);
    }
    /* A store that answers from memory: no reason to leave the loop. */
    inline_job.pol = pol;
    inline_job.req = *req;
    inline_job.lease_id = lease_id;
    inline_job.settle = sd != NULL;
    if (sd != NULL) {
        inline_job.d = *sd;
        inline_job.used = *used;
    }
    ngx_http_sluice_job_run(&inline_job);
    return NGX_OK;
}

/* Releases the request's lease, if it holds one: NGX_AGAIN when a pool
** thread does it and `resume` waits for it. */
static ngx_int_t
ngx_http_sluice_release(ngx_http_sluice_ctx_t *ctx, ngx_http_request_t *resume)
{
    uint64_t id = ctx->d.lease_id;

    if (!ctx->decided || ctx->rc != SLUICE_OK || id == 0) {
        return NGX_OK;
    }
    ctx->d.lease_id = 0;
    return ngx_http_sluice_background(ctx->r->connection->log, ctx->pol,
                                      &ctx->req, id, resume, NULL, NULL);
}

/* The log phase: sluice_settle's value, read from the answer, settles an
** admitted request's cost (a job: on the pool, on the event loop in
** halves, or inline on an in-process store).  No value (the upstream sent
** no header): the charge stays. */
static ngx_int_t
ngx_http_sluice_log(ngx_http_request_t *r)
{
    ngx_http_sluice_loc_conf_t *lcf;
    ngx_http_sluice_ctx_t *ctx;
    sluice_attr used;
    ngx_str_t v;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);
    if (lcf->settle == NULL) {
        return NGX_OK;
    }
    ctx = ngx_http_sluice_get_ctx(r);
    if (ctx == NULL || !ctx->decided || ctx->rc != SLUICE_OK
        || ctx->d.settle_check == 0)
    {
        return NGX_OK; /* nothing charged: nothing to settle */
    }
    if (ngx_http_complex_value(r, &lcf->settle->value, &v) != NGX_OK
        || v.len == 0)
    {
        return NGX_OK;
    }
    used.name = lcf->settle->name;
    used.value = ngx_http_sluice_cstr(r->pool, &v);
    if (used.value == NULL) {
        return NGX_OK;
    }
    (void) ngx_http_sluice_background(r->connection->log, ctx->pol,
                                      &ctx->req, 0, NULL, &ctx->d, &used);
    return NGX_OK;
}

/* The lease goes when the request's pool does (failed, aborted) if the
** body filter has not released it with the answer. */
static void
ngx_http_sluice_cleanup(void *data)
{
    (void) ngx_http_sluice_release(data, NULL);
}

/* ------------------------------------------------------------ answers --- */

/* One header of the answer into headers_out (allowed: an admission, whose
** Content-Type is the upstream's). */
static int
ngx_http_sluice_put_header(ngx_http_request_t *r, ngx_int_t allowed,
    const char *name, const char *value)
{
    ngx_table_elt_t *h;
    size_t nl = ngx_strlen(name), vl = ngx_strlen(value);

    if (ngx_strcasecmp((u_char *) name, (u_char *) "Content-Type") == 0) {
        if (allowed) {
            return 0;
        }
        r->headers_out.content_type.data = ngx_pnalloc(r->pool, vl);
        if (r->headers_out.content_type.data == NULL) {
            return -1;
        }
        ngx_memcpy(r->headers_out.content_type.data, value, vl);
        r->headers_out.content_type.len = vl;
        r->headers_out.content_type_len = vl;
        return 0;
    }
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return -1;
    }
    h->hash = 1;
    h->key.len = nl;
    h->key.data = ngx_pnalloc(r->pool, nl + vl);
    if (h->key.data == NULL) {
        return -1;
    }
    ngx_memcpy(h->key.data, name, nl);
    h->value.data = h->key.data + nl;
    h->value.len = vl;
    ngx_memcpy(h->value.data, value, vl);
    return 0;
}

/* Every header of the answer into headers_out. */
static ngx_int_t
ngx_http_sluice_put_headers(ngx_http_request_t *r, const sluice_http_answer *a,
    ngx_int_t allowed)
{
    sluice_http_header hv[SLUICE_HTTP_MAX_HEADERS];
    char buf[SLUICE_HTTP_HEADER_BUF];
    size_t i, n;

    if (sluice_http_answer_headers(ngx_http_sluice_worker.http, a, hv,
                                   SLUICE_HTTP_MAX_HEADERS, &n, buf,
                                   sizeof buf, NULL)
        != SLUICE_OK)
    {
        return NGX_ERROR;
    }
    for (i = 0; i < n; i++) {
        if (ngx_http_sluice_put_header(r, allowed, hv[i].name, hv[i].value)
            != 0)
        {
            return NGX_ERROR;
        }
    }
    return NGX_OK;
}

static ngx_int_t
ngx_http_sluice_answer(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx,
    const sluice_request *req, sluice_http_answer *a)
{
    ngx_str_t rid = ngx_null_string;
    ngx_http_variable_value_t *vv;
    static ngx_str_t rid_name = ngx_string("request_id");
    char *rid_c = NULL;

    /* Only problem bodies carry the request id ($request_id draws random
    ** bytes: not worth it for the RateLimit headers of an admission). */
    vv = ctx->d.allowed ? NULL
                        : ngx_http_get_variable(r, &rid_name,
                                                ngx_hash_key(rid_name.data,
                                                             rid_name.len));
    if (vv != NULL && !vv->not_found) {
        rid.data = vv->data;
        rid.len = vv->len;
        rid_c = ngx_http_sluice_cstr(r->pool, &rid);
    }
    if (sluice_http_answer_make(ngx_http_sluice_worker.http, &ctx->d, req,
                                rid_c, ngx_http_sluice_wall_ns(), a)
        != SLUICE_OK) {
        return NGX_ERROR;
    }
    return NGX_OK;
}

/* The problem body carries the method and the route as text of at most
** 1024 bytes of UTF-8 (sluice/http.h); the route is the decoded $uri, so
** a client can send any bytes (/v1/%ff) or length.  Such a value is sent
** percent-encoded and cut to the limit rather than failing the denial. */
#define SLUICE_NGX_TEXT_MAX 1024

static const char *
ngx_http_sluice_text(ngx_pool_t *pool, const char *s)
{
    size_t n, len;
    u_char *p;

    if (s == NULL) {
        return NULL;
    }
    n = ngx_min(ngx_strlen(s), SLUICE_NGX_TEXT_MAX);
    len = n + 2 * ngx_escape_uri(NULL, (u_char *) s, n, NGX_ESCAPE_URI);
    p = ngx_pnalloc(pool, len + 1);
    if (p == NULL) {
        return NULL; /* left out of the body */
    }
    (void) ngx_escape_uri(p, (u_char *) s, n, NGX_ESCAPE_URI);
    if (len > SLUICE_NGX_TEXT_MAX) {
        len = SLUICE_NGX_TEXT_MAX; /* every '%' starts an escape: keep whole */
        len -= p[len - 1] == '%' ? 1 : p[len - 2] == '%' ? 2 : 0;
    }
    p[len] = '\0';
    return (const char *) p;
}

/* Send an answer of our own: status, the headers already set, a body. */
ngx_int_t
ngx_http_sluice_send(ngx_http_request_t *r, ngx_uint_t status, char *body,
                     size_t len)
{
    ngx_buf_t *b;
    ngx_chain_t out;
    ngx_int_t rc;

    r->headers_out.status = status;
    r->headers_out.content_length_n = (off_t) len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only || len == 0) {
        return rc;
    }
    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }
    b->pos = (u_char *) body;
    b->last = (u_char *) body + len;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    out.buf = b;
    out.next = NULL;
    return ngx_http_output_filter(r, &out);
}

/* A denial: the library's status, headers and problem+json body. */
static ngx_int_t
ngx_http_sluice_deny(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    sluice_http_answer a;
    sluice_request safe;
    size_t len = 0;
    char *body;
    int src;

    if (ngx_http_sluice_answer(r, ctx, &ctx->req, &a) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (ngx_http_discard_request_body(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    src = sluice_http_answer_body(ngx_http_sluice_worker.http, &a, NULL, 0,
                                  &len);
    if (src == SLUICE_EINVAL) { /* a method or route the body cannot carry */
        safe = ctx->req;
        safe.method = ngx_http_sluice_text(r->pool, safe.method);
        safe.route = ngx_http_sluice_text(r->pool, safe.route);
        if (ngx_http_sluice_answer(r, ctx, &safe, &a) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        src = sluice_http_answer_body(ngx_http_sluice_worker.http, &a, NULL,
                                      0, &len);
    }
    if (src != SLUICE_ERANGE && len == 0) {
        len = 1;
    }
    body = ngx_pnalloc(r->pool, len);
    if (body == NULL
        || sluice_http_answer_body(ngx_http_sluice_worker.http, &a, body, len, &len)
               != SLUICE_OK) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "sluice: the problem body could not be rendered");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (ngx_http_sluice_put_headers(r, &a, 0) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->denied = 1;
    return ngx_http_sluice_send(r, (ngx_uint_t) a.status, body, len);
}

/* A request the policy refused to decide (a required field missing, an
** unknown tier, an id too long): 400, or 500 for anything else, as
** problem+json like every other answer of the module.  The detail names
** the field and the library's reason, never the value sent, which may be
** a key or a secret. */
static ngx_int_t
ngx_http_sluice_refuse(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    ngx_http_sluice_main_conf_t *mcf;
    const char *inst, *slash;
    char type[600], detail[200];
    ngx_uint_t status;
    size_t len;
    json_t *o;
    char *txt, *body;
    ngx_str_t *base;

    if (ngx_http_discard_request_body(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    status = ctx->rc == SLUICE_EINVAL || ctx->rc == SLUICE_EKEY
                     || ctx->rc == SLUICE_ENOTFOUND || ctx->rc == SLUICE_ERANGE
                 ? NGX_HTTP_BAD_REQUEST : NGX_HTTP_INTERNAL_SERVER_ERROR;
    mcf = ngx_http_get_module_main_conf(r, ngx_http_sluice_module);
    base = &mcf->problem_base; /* checked at start: printable, <= 512 */
    slash = base->len > 0 && base->data[base->len - 1] == '/' ? "" : "/";
    snprintf(type, sizeof type, "%.*s%s%s", (int) base->len,
             (const char *) base->data, slash,
             status == NGX_HTTP_BAD_REQUEST ? "bad-request" : "internal");
    snprintf(detail, sizeof detail, "request field '%s': %s",
             ctx->d.invalid_field ? ctx->d.invalid_field : "?",
             sluice_strerror(ctx->rc));
    inst = ngx_http_sluice_text(r->pool, ctx->req.route);
    o = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title",
                  sluice_http_reason((int) status), "status", (int) status,
                  "detail", detail, "instance", inst ? inst : "/");
    txt = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (txt == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    len = ngx_strlen(txt);
    body = ngx_pnalloc(r->pool, len);
    if (body != NULL) {
        ngx_memcpy(body, txt, len);
    }
    free(txt);
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_str_set(&r->headers_out.content_type, "application/problem+json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    ctx->denied = 1;
    return ngx_http_sluice_send(r, status, body, len);
}

/* A store that is full, or failing, is said in the error log once per
** SLUICE_NGX_STORE_LOG_MS per worker: a state, not a line per request.
** Full is not an outage (docs/backends.md, "Record classes"). */
static void
ngx_http_sluice_log_store(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    ngx_msec_t *last;
    int full = (ctx->d.flags & SLUICE_DECISION_STORE_FULL) != 0;

    if (!full && ctx->d.store_error == 0) {
        return;
    }
    last = full ? &ngx_http_sluice_worker.full_logged
                : &ngx_http_sluice_worker.failed_logged;
    if (*last != 0 && ngx_current_msec - *last < SLUICE_NGX_STORE_LOG_MS) {
        return;
    }
    *last = ngx_current_msec ? ngx_current_msec : 1;
    if (full) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "sluice: store full: no room for a record "
                      "(sluice_policy_store_full_total counts the "
                      "decisions; the untrusted records' bound, or the "
                      "store's capacity, is reached), not an outage; this "
                      "request (%s %s): %s",
                      ctx->req.method ? ctx->req.method : "-",
                      ctx->req.route ? ctx->req.route : "-",
                      ctx->d.outcome == SLUICE_OUTCOME_UNAVAILABLE
                          ? "failed closed (503)"
                          : "decided without it");
    } else {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "sluice: store unavailable: %s; deciding %s",
                      sluice_strerror(ctx->d.store_error),
                      (ctx->d.flags & SLUICE_DECISION_DEGRADED)
                          ? "on the degraded limiter"
                          : "fail-closed or from the deny cache");
    }
}

/* Act on a decision made inline or by a pool thread. */
static ngx_int_t
ngx_http_sluice_apply(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    ngx_int_t rc;

    ctx->applied = 1;
    if (ctx->rc == SLUICE_OK) {
        ngx_http_sluice_log_store(r, ctx);
    }
    if (ctx->rc != SLUICE_OK) {
        ctx->status = ST_ERROR;
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "sluice: request refused, field \"%s\": %s",
                      ctx->d.invalid_field ? ctx->d.invalid_field : "?",
                      sluice_strerror(ctx->rc));
        rc = ngx_http_sluice_refuse(r, ctx);
        ngx_http_finalize_request(r, rc);
        return NGX_DONE;
    }
    if (ctx->d.allowed) {
        ctx->status = ctx->d.outcome == SLUICE_OUTCOME_ALLOW
                          ? ST_PASSED : ST_REJECTED_DRY_RUN;
        return NGX_DECLINED;
    }
    ctx->status = ST_REJECTED;
    rc = ngx_http_sluice_deny(r, ctx);
    ngx_http_finalize_request(r, rc);
    return NGX_DONE;
}

#if (NGX_THREADS)
static void
ngx_http_sluice_decide_thread(void *data, ngx_log_t *log)
{
    ngx_http_sluice_ctx_t *ctx = data;

    ctx->rc = sluice_policy_decide(ctx->pol, 1, &ctx->req, &ctx->d, NULL);
}

static void
ngx_http_sluice_decided(ngx_event_t *ev)
{
    ngx_http_sluice_ctx_t *ctx = ev->data;
    ngx_http_request_t *r = ctx->r;
    ngx_connection_t *c = r->connection;

    ctx->pending = 0;
    ctx->decided = 1;
    r->main->blocked--;
    r->aio = 0;
    ngx_http_set_log_request(c->log, r);
    r->write_event_handler(r); /* the phases again, or the finalizer */
    ngx_http_run_posted_requests(c);
}
#endif

/* Decide: on a pool thread (NGX_AGAIN, the phases resume when it is
** done) or inline. */
static ngx_int_t
ngx_http_sluice_decide(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
#if (NGX_THREADS)
    ngx_thread_task_t *task;

    if (ngx_http_sluice_worker.pool != NULL) {
        task = ngx_thread_task_alloc(r->pool, 0);
        if (task == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        task->ctx = ctx;
        task->handler = ngx_http_sluice_decide_thread;
        task->event.handler = ngx_http_sluice_decided;
        task->event.data = ctx;
        if (ngx_thread_task_post(ngx_http_sluice_worker.pool, task) != NGX_OK) {
            return NGX_HTTP_SERVICE_UNAVAILABLE;
        }
        ctx->pending = 1;
        r->main->blocked++;
        r->aio = 1;
        return NGX_AGAIN;
    }
#endif
    if (ngx_http_sluice_worker.event) {
        if (ngx_http_sluice_event_decide(r, ctx) == NGX_AGAIN) {
            return NGX_AGAIN; /* the phases resume when the reply is in */
        }
    } else {
        ctx->rc = sluice_policy_decide(ctx->pol, 1, &ctx->req, &ctx->d, NULL);
    }
    ctx->decided = 1;
    return ngx_http_sluice_apply(r, ctx);
}

/* sluice_decide_after_body on (a route whose limits take a lease or a
** lock: a reconcile, an export): the request is decided once its whole
** body is in, so a client that trickles its body holds no lease and no
** lock while it does (taken with the headers, they were held for as long
** as the body took, and every other reconcile of the ledger got 409);
** nginx's client_body_timeout and client_max_body_size bound that read,
** as for any request.  The body is read as proxy_pass would read it, and
** stays for the upstream: the pattern of nginx's mirror module.  The
** location says it, not the policy: nginx must know before deciding. */
static void
ngx_http_sluice_body_read(ngx_http_request_t *r)
{
    ngx_http_sluice_ctx_t *ctx = ngx_http_sluice_get_ctx(r);

    if (ctx != NULL) {
        ctx->body_read = 1;
    }
    r->preserve_body = 1;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}

/* Registered twice: in the preaccess phase (with limit_req) and in the
** precontent phase, which runs once the whole access phase is through
** (auth_request, allow/deny, any `satisfy`), so that an authenticator's
** answer (auth_request_set) can name the tenant and tier.  `sluice_phase`
** picks one per location. */
static ngx_int_t
ngx_http_sluice_handler(ngx_http_request_t *r, ngx_uint_t phase)
{
    ngx_http_sluice_loc_conf_t *lcf;
    ngx_http_sluice_ctx_t *ctx;
    ngx_pool_cleanup_t *cln;
    ngx_int_t rc;

    if (r != r->main) {
        return NGX_DECLINED;
    }
    ctx = ngx_http_sluice_get_ctx(r);
    if (ctx != NULL) {
        if (ctx->decided && !ctx->applied) {
            return ngx_http_sluice_apply(r, ctx);
        }
        if (ctx->body_read && !ctx->decided && !ctx->pending) {
            /* Read again: an attribute may come from the body (a map of
            ** $request_body: a sign-in's subject in a form).
            ** $request_body is cacheable: forget what the first look saw. */
            r->variables[ngx_http_sluice_request_body].valid = 0;
            r->variables[ngx_http_sluice_request_body].not_found = 0;
            if (ngx_http_sluice_fields(r, ctx) != NGX_OK) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            return ngx_http_sluice_decide(r, ctx);
        }
        return ctx->pending ? NGX_AGAIN : NGX_DECLINED; /* once a request */
    }
    lcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);
    /* A metrics location inside a `sluice on` server is not limited. */
    if (lcf->mode == SLUICE_NGX_OFF || lcf->phase != phase || lcf->metrics) {
        return NGX_DECLINED;
    }
    if (ngx_http_sluice_ready(r) == NULL
        && (lcf->mode == SLUICE_NGX_SHADOW
            || ngx_http_sluice_worker.http == NULL)) {
        /* No store: a dry run lets everything through. */
        return lcf->mode == SLUICE_NGX_SHADOW ? NGX_DECLINED
                                              : NGX_HTTP_SERVICE_UNAVAILABLE;
    }
    cln = ngx_pool_cleanup_add(r->pool, sizeof(*ctx));
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx = cln->data;
    ngx_memzero(ctx, sizeof(*ctx));
    ctx->r = r;
    ctx->lcf = lcf;
    ctx->pol = ngx_http_sluice_worker.pol[lcf->mode == SLUICE_NGX_SHADOW];
    cln->handler = ngx_http_sluice_cleanup;
    if (ngx_http_sluice_fields(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (ctx->pol == NULL) {
        /* The store did not open (retried at most once a second): the
        ** fail-closed answer, problem+json and Retry-After, as for a
        ** store that fails once open. */
        ctx->d.outcome = SLUICE_OUTCOME_UNAVAILABLE;
        ctx->d.status = ctx->d.verdict_status = NGX_HTTP_SERVICE_UNAVAILABLE;
        ctx->d.retry_after_ns = 1000000000;
        ctx->decided = 1;
        return ngx_http_sluice_apply(r, ctx);
    }
    if (lcf->after_body) {
        rc = ngx_http_read_client_request_body(r, ngx_http_sluice_body_read);
        if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
            return rc;
        }
        ngx_http_finalize_request(r, NGX_DONE);
        return NGX_DONE;
    }
    return ngx_http_sluice_decide(r, ctx);
}

static ngx_int_t
ngx_http_sluice_preaccess(ngx_http_request_t *r)
{
    return ngx_http_sluice_handler(r, SLUICE_NGX_PREACCESS);
}

static ngx_int_t
ngx_http_sluice_postaccess(ngx_http_request_t *r)
{
    return ngx_http_sluice_handler(r, SLUICE_NGX_POSTACCESS);
}

/* ------------------------------------------------------ header filter --- */

/* The upstream has answered: what the location reports of it is decided
** as the request again with one more attribute (a route of reported
** strikes counts it; ctx->req stays as decided, for its lease).
** sluice_report NAME VALUE: NAME = VALUE, when VALUE is not empty.
** sluice_auth_failure_status (a sign-in): the verdict on the credentials
** as the attribute `result` (etc/ledger.conf's header names it and its
** values), so failures count (and lock out) at the gateway: a listed
** status "bad_secret", a 2xx "ok", anything else nothing. */
static void
ngx_http_sluice_report(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    ngx_http_sluice_loc_conf_t *lcf = ctx->lcf;
    sluice_request rep = ctx->req;
    sluice_attr said;
    ngx_uint_t i, *st, fail = 0;
    ngx_str_t v;

    if (lcf->report != NULL) {
        if (ngx_http_complex_value(r, &lcf->report->value, &v) != NGX_OK
            || v.len == 0)
        {
            return;
        }
        said.name = lcf->report->name;
        said.value = ngx_http_sluice_cstr(r->pool, &v);
        if (said.value == NULL) {
            return;
        }
    } else if (lcf->auth_fail != NULL) {
        st = lcf->auth_fail->elts;
        for (i = 0; i < lcf->auth_fail->nelts; i++) {
            fail |= st[i] == r->headers_out.status;
        }
        if (!fail && (r->headers_out.status < 200
                      || r->headers_out.status >= 300)) {
            return;
        }
        said.name = "result";
        said.value = fail ? "bad_secret" : "ok";
    } else {
        return;
    }
    /* The attributes as decided (a subject from the body needs
    ** sluice_decide_after_body: the decision had it too). */
    if (ngx_http_sluice_attrs(r, ctx, &rep, &said) == NGX_OK) {
        (void) ngx_http_sluice_background(r->connection->log, ctx->pol, &rep,
                                          0, NULL, NULL, NULL);
    }
}

static ngx_int_t
ngx_http_sluice_header_filter(ngx_http_request_t *r)
{
    ngx_http_sluice_ctx_t *ctx;
    sluice_http_answer a;

    if (r != r->main) {
        return ngx_http_next_header_filter(r);
    }
    ctx = ngx_http_sluice_get_ctx(r);
    if (ctx == NULL || !ctx->decided || ctx->denied || ctx->rc != SLUICE_OK) {
        return ngx_http_next_header_filter(r);
    }
    if (!ctx->reported) {
        ctx->reported = 1;
        ngx_http_sluice_report(r, ctx);
    }
    if (ctx->d.limit > 0
        && ngx_http_sluice_answer(r, ctx, &ctx->req, &a) == NGX_OK) {
        (void) ngx_http_sluice_put_headers(r, &a, 1);
    }
    return ngx_http_next_header_filter(r);
}

/* The last buffer of the main request's answer: the lease goes now, not
** when the pool does, which can be much later (a mirror or post_action
** subrequest still running, lingering close, the access log) -- the
** client has its answer and its next request would find the ledger still
** locked.  The release comes before that buffer goes on: inline, or on a
** pool thread while the buffer waits here (the request blocked, as for
** nginx's threaded reads), so a client holding its whole answer never
** finds its own lease or lock still held.  (Posted and passed on at once,
** the release raced the client's next request: a spurious 409 now and
** then.) */
static ngx_int_t
ngx_http_sluice_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_http_sluice_ctx_t *ctx;
    ngx_chain_t *cl;

    if (r != r->main || (ctx = ngx_http_sluice_get_ctx(r)) == NULL) {
        return ngx_http_next_body_filter(r, in);
    }
    if (ctx->held == NULL) {
        for (cl = in; cl; cl = cl->next) {
            if (cl->buf->last_buf) {
                break;
            }
        }
        if (cl == NULL) {
            return ngx_http_next_body_filter(r, in);
        }
        /* `in` may live on the caller's stack (ngx_http_send_special) */
        if (ngx_chain_add_copy(r->pool, &ctx->held, in) != NGX_OK) {
            return NGX_ERROR;
        }
        if (ngx_http_sluice_release(ctx, r) == NGX_AGAIN) {
            ctx->releasing = 1;
        }
    } else if (in != NULL
               && ngx_chain_add_copy(r->pool, &ctx->held, in) != NGX_OK) {
        return NGX_ERROR;
    }
    if (ctx->releasing) {
        r->buffered |= SLUICE_NGX_BUFFERED;
        return NGX_AGAIN;
    }
    r->buffered &= ~SLUICE_NGX_BUFFERED;
    cl = ctx->held;
    ctx->held = NULL;
    return ngx_http_next_body_filter(r, cl);
}

/* ---------------------------------------------------------- variables --- */

enum { V_STATUS, V_OUTCOME, V_REMAINING, V_COST, V_TIER, V_RETRY };

static ngx_int_t
ngx_http_sluice_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_http_sluice_ctx_t *ctx = ngx_http_sluice_get_ctx(r->main);
    const char *s = NULL;
    u_char *p;
    int64_t n = 0;

    if (ctx == NULL || ctx->status == 0) {
        v->not_found = 1;
        return NGX_OK;
    }
    switch (data) {
    case V_STATUS:
        v->data = ngx_http_sluice_status_names[ctx->status - 1].data;
        v->len = ngx_http_sluice_status_names[ctx->status - 1].len;
        goto found;
    case V_OUTCOME:
        s = ctx->rc == SLUICE_OK ? sluice_name(SLUICE_NAME_OUTCOME, ctx->d.outcome)
                                 : "invalid";
        break;
    case V_TIER:
        s = ctx->d.tier;
        break;
    case V_REMAINING:
        n = ctx->d.remaining;
        break;
    case V_COST:
        n = ctx->d.cost;
        break;
    default:
        n = (ctx->d.retry_after_ns + 999999999) / 1000000000;
        break;
    }
    if (s != NULL) {
        v->data = (u_char *) s;
        v->len = ngx_strlen(s);
    } else {
        p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }
        v->data = p;
        v->len = ngx_sprintf(p, "%L", n) - p;
    }
found:
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    return NGX_OK;
}

ngx_int_t
ngx_http_sluice_add_variables(ngx_conf_t *cf)
{
    static ngx_str_t names[] = {
        ngx_string("sluice_status"), ngx_string("sluice_outcome"),
        ngx_string("sluice_remaining"), ngx_string("sluice_cost"),
        ngx_string("sluice_tier"), ngx_string("sluice_retry_after")};
    ngx_http_variable_t *var;
    ngx_uint_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        var = ngx_http_add_variable(cf, &names[i], NGX_HTTP_VAR_NOCACHEABLE);
        if (var == NULL) {
            return NGX_ERROR;
        }
        var->get_handler = ngx_http_sluice_variable;
        var->data = i;
    }
    return NGX_OK;
}

ngx_int_t
ngx_http_sluice_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt *h;
    ngx_http_core_main_conf_t *cmcf;
    ngx_str_t rb = ngx_string("request_body");

    ngx_http_sluice_request_body = ngx_http_get_variable_index(cf, &rb);
    if (ngx_http_sluice_request_body == NGX_ERROR) {
        return NGX_ERROR;
    }

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_sluice_preaccess;
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_sluice_postaccess;
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_sluice_log;
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_sluice_header_filter;
    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_sluice_body_filter;
    return NGX_OK;
}

/*
** ngx_http_sluice_module: the sluice policy at the nginx gateway.
**
** Thin glue.  Every decision, header and body comes from libsluice
** (sluice/policy.h, sluice/http.h); these files only map nginx's model onto
** it:
**
**   - Process model.  The configuration is only validated where it is
**     parsed (init_module: the pre-daemon process, `nginx -t`, the master
**     on every HUP), so checking or reloading a configuration never touches
**     live state.  Each worker opens its own limiter, policies and renderer
**     in init_process: the stores are named (shm object, LMDB file, Redis),
**     so every worker, every reload generation and a binary upgrade's new
**     master share one state, and each worker seeds its own Retry-After
**     jitter instead of inheriting one generator through fork().
**   - Counters live in a named shared segment (sluice_counters), so the
**     metrics location shows the host's totals whichever worker answers;
**     so do the degraded limiter (sluice_degraded_store: the host admits
**     degraded_percent, not workers x it) and the deny cache
**     (sluice_deny_cache: boxes held without a store call, and through
**     a store outage).
**   - sluice_nft: each worker opens an nftables sink (sluice/nft.h) and
**     gives it the enforcing policy's events, so an address boxed at level
**     2 or above is dropped by the kernel before nginx accepts it.  The
**     shadow policy's events never reach it: shadow mode enforces nothing.
**   - The decision runs in the preaccess phase.  On Redis it goes in two
**     halves on the event loop's own connections (ngx_http_sluice_redis.c),
**     or, with sluice_thread_pool, on an nginx thread pool; either way the
**     request waits (r->main->blocked) while the event loop goes on.
**   - The per-request state lives in a pool cleanup entry (found again by
**     its handler, as the realip module does), which survives internal
**     redirects.  The request's lease goes with the last byte of its
**     answer (a body filter), or when the request ends without one.
*/
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_sluice.h"

ngx_http_sluice_worker_t ngx_http_sluice_worker;

static void *ngx_http_sluice_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_sluice_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_sluice_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_sluice_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_http_sluice_field(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_sluice_attr(ngx_conf_t *cf, ngx_command_t *cmd,
                                  void *conf);
static char *ngx_http_sluice_answer_attr(ngx_conf_t *cf, ngx_command_t *cmd,
                                         void *conf);
static char *ngx_http_sluice_thread_pool(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_sluice_auth_fail(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_sluice_metrics(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_sluice_init_module(ngx_cycle_t *cycle);
static ngx_int_t ngx_http_sluice_init_process(ngx_cycle_t *cycle);
static void ngx_http_sluice_exit_process(ngx_cycle_t *cycle);

static ngx_conf_enum_t ngx_http_sluice_modes[] = {
    {ngx_string("off"), SLUICE_NGX_OFF},
    {ngx_string("on"), SLUICE_NGX_ON},
    {ngx_string("shadow"), SLUICE_NGX_SHADOW},
    {ngx_null_string, 0}};

static ngx_conf_enum_t ngx_http_sluice_phases[] = {
    {ngx_string("preaccess"), SLUICE_NGX_PREACCESS},
    {ngx_string("postaccess"), SLUICE_NGX_POSTACCESS},
    {ngx_null_string, 0}};

static ngx_conf_enum_t ngx_http_sluice_forms[] = {
    {ngx_string("legacy"), SLUICE_HTTP_FORM_LEGACY},
    {ngx_string("sf"), SLUICE_HTTP_FORM_SF},
    {ngx_string("both"), SLUICE_HTTP_FORM_BOTH},
    {ngx_null_string, 0}};

#define MAIN_STR(name, field)                                                 \
    {ngx_string(name), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,                   \
     ngx_conf_set_str_slot, NGX_HTTP_MAIN_CONF_OFFSET,                        \
     offsetof(ngx_http_sluice_main_conf_t, field), NULL}
#define LOC_FIELD(name, idx)                                                  \
    {ngx_string(name),                                                        \
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF                \
         | NGX_CONF_TAKE1,                                                    \
     ngx_http_sluice_field, NGX_HTTP_LOC_CONF_OFFSET, idx, NULL}

static ngx_command_t ngx_http_sluice_commands[] = {
    MAIN_STR("sluice_policy", policy),
    MAIN_STR("sluice_store", store),
    MAIN_STR("sluice_counters", counters),
    MAIN_STR("sluice_degraded_store", degraded_store),
    MAIN_STR("sluice_deny_cache", deny_cache),
    MAIN_STR("sluice_secret", secret),
    MAIN_STR("sluice_problem_base", problem_base),
    {ngx_string("sluice_header_form"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_enum_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(ngx_http_sluice_main_conf_t, header_form),
     &ngx_http_sluice_forms},
    {ngx_string("sluice_retry_jitter"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(ngx_http_sluice_main_conf_t, jitter), NULL},
    {ngx_string("sluice_alert"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
     ngx_http_sluice_alert, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("sluice_alert_allow"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
     ngx_http_sluice_alert_allow, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    MAIN_STR("sluice_alert_contacts", alert_contacts),
    MAIN_STR("sluice_alert_spool", alert_spool),
    MAIN_STR("sluice_alert_proxy", alert_proxy),
    {ngx_string("sluice_thread_pool"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_http_sluice_thread_pool, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("sluice_nft"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(ngx_http_sluice_main_conf_t, nft), NULL},
    MAIN_STR("sluice_nft_table", nft_table),
    {ngx_string("sluice_nft_ipv6_prefix"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_num_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(ngx_http_sluice_main_conf_t, nft_prefix), NULL},
    MAIN_STR("sluice_nft_state", nft_state),
    {ngx_string("sluice"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_sluice_loc_conf_t, mode), &ngx_http_sluice_modes},
    {ngx_string("sluice_phase"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_sluice_loc_conf_t, phase), &ngx_http_sluice_phases},
    {ngx_string("sluice_decide_after_body"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_sluice_loc_conf_t, after_body), NULL},
    LOC_FIELD("sluice_tenant", F_TENANT),
    LOC_FIELD("sluice_key", F_KEY),
    LOC_FIELD("sluice_tier", F_TIER),
    LOC_FIELD("sluice_method", F_METHOD),
    LOC_FIELD("sluice_route", F_ROUTE),
    LOC_FIELD("sluice_client_ip", F_IP),
    {ngx_string("sluice_attr"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE2,
     ngx_http_sluice_attr, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("sluice_settle"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE2,
     ngx_http_sluice_answer_attr, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_sluice_loc_conf_t, settle),
     "the real cost comes from the answer ($upstream_http_x_tokens_used)"},
    {ngx_string("sluice_report"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE2,
     ngx_http_sluice_answer_attr, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_sluice_loc_conf_t, report),
     "what is reported comes from the answer ($status)"},
    {ngx_string("sluice_auth_failure_status"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_1MORE,
     ngx_http_sluice_auth_fail, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("sluice_metrics"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
     ngx_http_sluice_metrics, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    ngx_null_command};

static ngx_http_module_t ngx_http_sluice_module_ctx = {
    ngx_http_sluice_add_variables, ngx_http_sluice_init,
    ngx_http_sluice_create_main_conf, ngx_http_sluice_init_main_conf,
    NULL, NULL,
    ngx_http_sluice_create_loc_conf, ngx_http_sluice_merge_loc_conf};

ngx_module_t ngx_http_sluice_module = {
    NGX_MODULE_V1,
    &ngx_http_sluice_module_ctx,
    ngx_http_sluice_commands,
    NGX_HTTP_MODULE,
    NULL,                          /* init master */
    ngx_http_sluice_init_module,   /* init module */
    ngx_http_sluice_init_process,  /* init process */
    NULL,                          /* init thread */
    NULL,                          /* exit thread */
    ngx_http_sluice_exit_process,  /* exit process */
    NULL,                          /* exit master */
    NGX_MODULE_V1_PADDING};

/* ------------------------------------------------------------ config --- */

static void *
ngx_http_sluice_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_sluice_main_conf_t *mcf;

    mcf = ngx_pcalloc(cf->pool, sizeof(*mcf));
    if (mcf == NULL) {
        return NULL;
    }
    mcf->header_form = NGX_CONF_UNSET_UINT;
    mcf->jitter = NGX_CONF_UNSET;
    mcf->nft = NGX_CONF_UNSET;
    mcf->nft_prefix = NGX_CONF_UNSET;
    return mcf;
}

/* sluice_nft_*: checked where the configuration is parsed (nginx -t). */
static char *
ngx_http_sluice_nft_conf(ngx_conf_t *cf, ngx_http_sluice_main_conf_t *mcf)
{
    sluice_nft_options no;

    ngx_conf_init_value(mcf->nft, 0);
    if (!mcf->nft) {
        if (mcf->nft_table.len || mcf->nft_state.len
            || mcf->nft_prefix != NGX_CONF_UNSET) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_nft_table, sluice_nft_ipv6_prefix and "
                               "sluice_nft_state need \"sluice_nft on\"");
            return NGX_CONF_ERROR;
        }
        return NGX_CONF_OK;
    }
    if (mcf->nft_prefix != NGX_CONF_UNSET
        && (mcf->nft_prefix < 1 || mcf->nft_prefix > 128)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_nft_ipv6_prefix %i: must be 1..128",
                           mcf->nft_prefix);
        return NGX_CONF_ERROR;
    }
    ngx_memzero(&no, sizeof(no));
    no.table = mcf->nft_table.len
                   ? ngx_http_sluice_cstr(cf->pool, &mcf->nft_table)
                   : NULL;
    if (sluice_nft_schema(&no, NULL, 0, NULL) == SLUICE_EINVAL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_nft_table \"%V\": a letter, then letters, "
                           "digits or '_' (at most %d)", &mcf->nft_table,
                           SLUICE_NFT_NAME_MAX);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

static char *
ngx_http_sluice_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_sluice_main_conf_t *mcf = conf;
    const char *why = NULL;

    ngx_conf_init_uint_value(mcf->header_form, SLUICE_HTTP_FORM_LEGACY);
    ngx_conf_init_value(mcf->jitter, 1);
    if (mcf->store.len == 0) {
        ngx_str_set(&mcf->store, "shm:name=/sluice-nginx;create=1");
    }
    /* A Redis round trip must not block the event loop: without a thread
    ** pool the decision goes in two halves on nginx's own connections
    ** (ngx_http_sluice_redis.c), which speak plain TCP to IP addresses;
    ** anything more (TLS, a password, a database, a socket) takes the
    ** pool. */
    if (mcf->pool == NULL && mcf->store.len >= 6
        && ngx_strncmp(mcf->store.data, "redis", 5) == 0
        && !ngx_http_sluice_event_store(&mcf->store, &why)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_store \"%V\" needs sluice_thread_pool "
                           "(%s: the event loop's connections are plain TCP "
                           "to IP addresses)",
                           &mcf->store, why ? why : "rediss");
        return NGX_CONF_ERROR;
    }
    if (mcf->counters.len == 0) {
        ngx_str_set(&mcf->counters, "shm:name=/sluice-nginx-counters");
    }
    /* The host's workers share one degraded limiter and one deny cache
    ** ("off": each worker its own). */
    if (mcf->degraded_store.len == 0) {
        ngx_str_set(&mcf->degraded_store, "shm:name=/sluice-nginx-degraded");
    }
    if (mcf->deny_cache.len == 0) {
        ngx_str_set(&mcf->deny_cache, "shm:name=/sluice-nginx-deny");
    }
    if (mcf->problem_base.len == 0) {
        ngx_str_set(&mcf->problem_base, "https://errors.invalid/");
    }
    return ngx_http_sluice_nft_conf(cf, mcf);
}

static void *
ngx_http_sluice_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_sluice_loc_conf_t *lcf;

    lcf = ngx_pcalloc(cf->pool, sizeof(*lcf));
    if (lcf == NULL) {
        return NULL;
    }
    lcf->mode = NGX_CONF_UNSET_UINT;
    lcf->phase = NGX_CONF_UNSET_UINT;
    lcf->after_body = NGX_CONF_UNSET;
    lcf->auth_fail = NGX_CONF_UNSET_PTR;
    lcf->metrics = NGX_CONF_UNSET;
    return lcf;
}

static char *
ngx_http_sluice_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_sluice_loc_conf_t *prev = parent, *conf = child;
    ngx_http_sluice_main_conf_t *mcf;
    ngx_uint_t i;

    ngx_conf_merge_uint_value(conf->mode, prev->mode, SLUICE_NGX_OFF);
    ngx_conf_merge_uint_value(conf->phase, prev->phase, SLUICE_NGX_PREACCESS);
    ngx_conf_merge_value(conf->after_body, prev->after_body, 0);
    ngx_conf_merge_value(conf->metrics, prev->metrics, 0);
    for (i = 0; i < F__COUNT; i++) {
        if (conf->field[i] == NULL) {
            conf->field[i] = prev->field[i];
        }
    }
    if (conf->attrs == NULL) {
        conf->attrs = prev->attrs;
    }
    if (conf->settle == NULL) {
        conf->settle = prev->settle;
    }
    if (conf->report == NULL) {
        conf->report = prev->report;
    }
    /* Unset: the location reports no sign-in result. */
    ngx_conf_merge_ptr_value(conf->auth_fail, prev->auth_fail, NULL);
    if (conf->auth_fail != NULL && conf->report != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_report and sluice_auth_failure_status "
                           "both report the upstream's answer: give one");
        return NGX_CONF_ERROR;
    }
    if (conf->mode != SLUICE_NGX_OFF || conf->metrics) {
        mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_sluice_module);
        mcf->used = 1;
    }
    return NGX_CONF_OK;
}

/* A directive's VALUE: an nginx complex value. */
static ngx_int_t
ngx_http_sluice_compile(ngx_conf_t *cf, ngx_str_t *value,
    ngx_http_complex_value_t *cv)
{
    ngx_http_compile_complex_value_t ccv;

    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = value;
    ccv.complex_value = cv;
    return ngx_http_compile_complex_value(&ccv);
}

static char *
ngx_http_sluice_field(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_complex_value_t *cv;

    if (lcf->field[cmd->offset] != NULL) {
        return "is duplicate";
    }
    cv = ngx_palloc(cf->pool, sizeof(*cv));
    if (cv == NULL || ngx_http_sluice_compile(cf, &value[1], cv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }
    lcf->field[cmd->offset] = cv;
    return NGX_CONF_OK;
}

/* sluice_attr NAME VALUE: a location's list replaces its parent's, as
** proxy_set_header's does. */
static char *
ngx_http_sluice_attr(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_sluice_attr_t *a;
    ngx_uint_t i;

    (void) cmd;
    if (lcf->attrs == NULL) {
        lcf->attrs = ngx_array_create(cf->pool, 4, sizeof(*a));
        if (lcf->attrs == NULL) {
            return NGX_CONF_ERROR;
        }
    }
    a = lcf->attrs->elts;
    for (i = 0; i < lcf->attrs->nelts; i++) {
        if (ngx_strlen(a[i].name) == value[1].len
            && ngx_strncmp(a[i].name, value[1].data, value[1].len) == 0)
        {
            return "is duplicate";
        }
    }
    a = ngx_array_push(lcf->attrs);
    if (a == NULL) {
        return NGX_CONF_ERROR;
    }
    a->name = ngx_http_sluice_cstr(cf->pool, &value[1]);
    if (a->name == NULL) {
        return NGX_CONF_ERROR;
    }
    if (ngx_http_sluice_compile(cf, &value[2], &a->value) != NGX_OK) {
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/* sluice_settle NAME VALUE: settle an admitted request's cost in the log
** phase at VALUE (evaluated then: $upstream_http_x_tokens_used), the
** attribute NAME its route's costs read.  sluice_report NAME VALUE:
** once the upstream answers, decide the request again with NAME = VALUE
** among its attributes (a reported strike: sluice_report result $status).
** NAME is an attribute's name as a policy file spells one; VALUE needs a
** variable, a constant would say the same of every answer
** (docs/nginx.md).  cmd->post: what VALUE is for. */
static char *
ngx_http_sluice_answer_attr(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_attr_t **slot, *a;
    ngx_str_t *value = cf->args->elts;
    ngx_uint_t i;

    slot = (ngx_http_sluice_attr_t **) ((char *) conf + cmd->offset);
    if (*slot != NULL) {
        return "is duplicate";
    }
    for (i = 0; i < value[1].len; i++) {
        u_char c = value[1].data[i];
        if (!(c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')))
        {
            break;
        }
    }
    if (value[1].len == 0 || i < value[1].len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: \"%V\" is no attribute name "
                           "(letters, digits and _)", &cmd->name, &value[1]);
        return NGX_CONF_ERROR;
    }
    if (ngx_http_script_variables_count(&value[2]) == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V: \"%V\" has no variable: %s", &cmd->name,
                           &value[2], (const char *) cmd->post);
        return NGX_CONF_ERROR;
    }
    a = ngx_pcalloc(cf->pool, sizeof(*a));
    if (a == NULL) {
        return NGX_CONF_ERROR;
    }
    a->name = ngx_http_sluice_cstr(cf->pool, &value[1]);
    if (a->name == NULL
        || ngx_http_sluice_compile(cf, &value[2], &a->value) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }
    *slot = a;
    return NGX_CONF_OK;
}

static char *
ngx_http_sluice_thread_pool(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
#if (NGX_THREADS)
    ngx_http_sluice_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;

    if (mcf->pool != NULL) {
        return "is duplicate";
    }
    mcf->pool = ngx_thread_pool_add(cf, &value[1]);
    return mcf->pool ? NGX_CONF_OK : NGX_CONF_ERROR;
#else
    return "needs nginx built --with-threads";
#endif
}

/* sluice_auth_failure_status CODE...: the location is a sign-in; once
** the upstream answers, its status is reported to the policy as the
** attribute `result` (etc/ledger.conf's header names it and its values):
** a listed status "bad_secret", a 2xx "ok". */
static char *
ngx_http_sluice_auth_fail(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_uint_t i, *st;
    ngx_int_t n;

    if (lcf->auth_fail != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }
    lcf->auth_fail = ngx_array_create(cf->pool, cf->args->nelts - 1,
                                      sizeof(ngx_uint_t));
    if (lcf->auth_fail == NULL) {
        return NGX_CONF_ERROR;
    }
    for (i = 1; i < cf->args->nelts; i++) {
        n = ngx_atoi(value[i].data, value[i].len);
        if (n < 300 || n > 599) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_auth_failure_status: \"%V\" is not "
                               "a status from 300 to 599", &value[i]);
            return NGX_CONF_ERROR;
        }
        st = ngx_array_push(lcf->auth_fail);
        if (st == NULL) {
            return NGX_CONF_ERROR;
        }
        *st = (ngx_uint_t) n;
    }
    return NGX_CONF_OK;
}

static char *
ngx_http_sluice_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_loc_conf_t *lcf = conf;
    ngx_http_core_loc_conf_t *clcf;

    if (lcf->metrics != NGX_CONF_UNSET) {
        return "is duplicate";
    }
    lcf->metrics = 1;
    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_sluice_metrics_handler;
    return NGX_CONF_OK;
}

/* ------------------------------------------------- process lifecycle --- */

static int
ngx_http_sluice_parse_secret(ngx_str_t *s, uint8_t out[16])
{
    ngx_int_t v;
    size_t i;

    if (s->len != 32) {
        return -1;
    }
    for (i = 0; i < 16; i++) {
        v = ngx_hextoi(s->data + 2 * i, 2);
        if (v == NGX_ERROR) {
            return -1;
        }
        out[i] = (uint8_t) v;
    }
    return 0;
}

char *
ngx_http_sluice_cstr(ngx_pool_t *pool, ngx_str_t *s)
{
    char *p;

    p = ngx_pnalloc(pool, s->len + 1);
    if (p != NULL) {
        ngx_memcpy(p, s->data, s->len);
        p[s->len] = '\0';
    }
    return p;
}

/* A segment directive: its URI, or "" (in the worker) for "off". */
static char *
ngx_http_sluice_segment(ngx_pool_t *pool, ngx_str_t *s)
{
    if (s->len == 3 && ngx_strncmp(s->data, "off", 3) == 0) {
        return "";
    }
    return ngx_http_sluice_cstr(pool, s);
}

/* The library's own checks of what the workers will open, made without
** touching live state: the policy with its secret and host segments, the
** store string, the problem base.  A value only a real open can judge (a
** capacity, a path, what a segment holds) is still the worker's to
** report. */
static ngx_int_t
ngx_http_sluice_dry_run(ngx_cycle_t *cycle, ngx_http_sluice_main_conf_t *mcf,
    const sluice_policy_config *cfg, const uint8_t *secret)
{
    sluice_policy_options po;
    sluice_http_options ho;
    sluice_http *http = NULL;
    char err[512], *s;
    int rc;

    ngx_memzero(&po, sizeof(po));
    po.config = cfg;
    ngx_memcpy(po.secret, secret, 16);
    po.counters = ngx_http_sluice_cstr(cycle->pool, &mcf->counters);
    po.degraded_store = ngx_http_sluice_segment(cycle->pool,
                                                &mcf->degraded_store);
    po.deny_cache = ngx_http_sluice_segment(cycle->pool, &mcf->deny_cache);
    if (po.counters == NULL || po.degraded_store == NULL
        || po.deny_cache == NULL)
    {
        return NGX_ERROR;
    }
    po.errbuf = err;
    po.errlen = sizeof(err);
    rc = sluice_policy_check(&po);
    if (rc != SLUICE_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "sluice: %s (%s)", err,
                      sluice_strerror(rc));
        return NGX_ERROR;
    }
    s = ngx_http_sluice_cstr(cycle->pool, &mcf->store);
    if (s == NULL) {
        return NGX_ERROR;
    }
    if (sluice_store_check(s, err, sizeof(err)) != SLUICE_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "sluice_store \"%V\": %s",
                      &mcf->store, err);
        return NGX_ERROR;
    }
    ngx_memzero(&ho, sizeof(ho));
    ho.problem_base = ngx_http_sluice_cstr(cycle->pool, &mcf->problem_base);
    if (ho.problem_base == NULL) {
        return NGX_ERROR;
    }
    if (sluice_http_open(&ho, &http) != SLUICE_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "sluice_problem_base \"%V\": an absolute URI of "
                      "visible ASCII is required (scheme \":\" ...)",
                      &mcf->problem_base);
        return NGX_ERROR;
    }
    sluice_http_close(http);
    return NGX_OK;
}

/* Runs where the configuration is parsed (nginx -t, start, every HUP in
** the master): checks what can be checked without touching live state, so
** a bad policy file fails `nginx -t` and a reload keeps the old workers. */
static ngx_int_t
ngx_http_sluice_init_module(ngx_cycle_t *cycle)
{
    ngx_http_sluice_main_conf_t *mcf;
    sluice_policy_config *cfg;
    uint8_t secret[16];
    char err[512], *path = NULL;
    ngx_int_t ok;
    int rc;

    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_sluice_module);
    if (mcf == NULL || !mcf->used) {
        return NGX_OK;
    }
    if (ngx_http_sluice_parse_secret(&mcf->secret, secret) != 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "sluice_secret: 32 hex digits are required (every "
                      "host sharing a store must use the same)");
        return NGX_ERROR;
    }
    if (mcf->policy.len) {
        path = ngx_http_sluice_cstr(cycle->pool, &mcf->policy);
        if (path == NULL) {
            return NGX_ERROR;
        }
    }
    rc = sluice_policy_config_new(&cfg, path, err, sizeof(err));
    if (rc != SLUICE_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "sluice_policy: %s (%s)", err, sluice_strerror(rc));
        return NGX_ERROR;
    }
    /* What loads but is likely a mistake (a limit no route applies). */
    if (err[0]) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0, "sluice_policy: %s", err);
    }
    ok = ngx_http_sluice_dry_run(cycle, mcf, cfg, secret);
    sluice_policy_config_free(cfg);
    if (ok != NGX_OK) {
        return NGX_ERROR;
    }
    return ngx_http_sluice_alerts_check(cycle, mcf);
}

/* The store's handles; the renderer stays, to answer 503 without them. */
static void
ngx_http_sluice_close_state(void)
{
    /* Before the policy a reconcile of the sink may still read. */
    sluice_nft_close(ngx_http_sluice_worker.nft);
    ngx_http_sluice_worker.nft = NULL;
    ngx_http_sluice_calls_close(); /* handles of the policies */
    sluice_policy_close(ngx_http_sluice_worker.pol[0]);
    sluice_policy_close(ngx_http_sluice_worker.pol[1]);
    sluice_limiter_close(ngx_http_sluice_worker.lim);
    ngx_http_sluice_worker.pol[0] = ngx_http_sluice_worker.pol[1] = NULL;
    ngx_http_sluice_worker.lim = NULL;
}

static void
ngx_http_sluice_close_all(void)
{
    ngx_http_sluice_close_state();
    sluice_http_close(ngx_http_sluice_worker.http);
    ngx_http_sluice_worker.http = NULL;
}

/* Each worker opens its own handles on the named state.  A store that
** cannot be opened (a Redis that is down when the worker starts) must not
** take the worker with it: enforcing locations answer 503 and the open is
** tried again, at most once a second, by the requests that need it. */
/* The enforcing policy's events: to the alert sink and the kernel IP set
** sink, each if this worker has one. */
static void
ngx_http_sluice_on_event(void *ud, const sluice_event *ev)
{
    (void) ud;
    if (ngx_http_sluice_worker.webhook != NULL) {
        sluice_webhook_on_event(ngx_http_sluice_worker.webhook, ev);
    }
    if (ngx_http_sluice_worker.nft != NULL) {
        sluice_nft_on_event(ngx_http_sluice_worker.nft, ev);
    }
}

/* sluice_nft on: this worker's sink (its list in sluice_nft_state.<N>).
** A sink that cannot open (no CAP_NET_ADMIN, no nf_tables) is logged and
** the worker goes on deciding without it. */
static void
ngx_http_sluice_open_nft(ngx_cycle_t *cycle, ngx_http_sluice_main_conf_t *mcf)
{
    sluice_nft_options no;
    char err[256], *state = NULL;
    int rc;

    if (!mcf->nft || ngx_http_sluice_worker.nft != NULL) {
        return;
    }
    ngx_memzero(&no, sizeof(no));
    no.table = mcf->nft_table.len
                   ? ngx_http_sluice_cstr(cycle->pool, &mcf->nft_table)
                   : NULL;
    no.ipv6_prefix = mcf->nft_prefix == NGX_CONF_UNSET ? 0
                                                       : (int) mcf->nft_prefix;
    /* Without sluice_nft_ipv6_prefix: the policy's, so that a set element
    ** is what the policy counts as one client. */
    if (no.ipv6_prefix == 0) {
        sluice_policy_config *cfg;
        char v[16];
        char *path = mcf->policy.len
                         ? ngx_http_sluice_cstr(cycle->pool, &mcf->policy)
                         : NULL;
        if (sluice_policy_config_new(&cfg, path, NULL, 0) == SLUICE_OK) {
            if (sluice_policy_config_get(cfg, "client_ip.ipv6_prefix", v,
                                         sizeof(v)) == SLUICE_OK)
            {
                no.ipv6_prefix = atoi(v);
            }
            sluice_policy_config_free(cfg);
        }
    }
    if (mcf->nft_state.len) {
        state = ngx_pnalloc(cycle->pool, mcf->nft_state.len + NGX_INT_T_LEN + 2);
        if (state == NULL) {
            return;
        }
        *ngx_sprintf((u_char *) state, "%V.%ui", &mcf->nft_state, ngx_worker)
            = '\0';
    }
    no.state_path = state;
    no.flags = SLUICE_NFT_CREATE;
    no.errbuf = err;
    no.errlen = sizeof(err);
    err[0] = '\0';
    rc = sluice_nft_open(&no, &ngx_http_sluice_worker.nft);
    if (rc != SLUICE_OK) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "sluice_nft: %s %s (this worker bans no addresses in "
                      "the kernel)", sluice_strerror(rc), err);
    }
}

static ngx_int_t
ngx_http_sluice_open_all(ngx_cycle_t *cycle, ngx_http_sluice_main_conf_t *mcf)
{
    const char *why;
    sluice_limiter_options lo;
    sluice_policy_options po;
    sluice_http_options ho;
    char err[512];
    int rc, i;

    /* First, and kept when the store fails: it renders that 503. */
    if (ngx_http_sluice_worker.http == NULL) {
        ngx_memzero(&ho, sizeof(ho));
        ho.problem_base = ngx_http_sluice_cstr(cycle->pool,
                                               &mcf->problem_base);
        ho.header_form = (int) mcf->header_form;
        ho.flags = mcf->jitter ? 0 : SLUICE_HTTP_NO_JITTER;
        /* rand NULL: a generator seeded here, in this worker, from the OS. */
        rc = sluice_http_open(&ho, &ngx_http_sluice_worker.http);
        if (rc != SLUICE_OK) {
            ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                          "sluice_problem_base \"%V\": %s",
                          &mcf->problem_base, sluice_strerror(rc));
            return NGX_ERROR;
        }
    }
    ngx_memzero(&lo, sizeof(lo));
    lo.store = ngx_http_sluice_cstr(cycle->pool, &mcf->store);
    lo.flags = SLUICE_OPEN_CREATE;
    err[0] = '\0';
    rc = lo.store ? sluice_limiter_open(&lo, &ngx_http_sluice_worker.lim, err, sizeof(err))
                  : SLUICE_ENOMEM;
    if (rc != SLUICE_OK) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "sluice_store \"%V\": %s %s (sluice locations answer "
                      "503 until it opens)", &mcf->store,
                      sluice_strerror(rc), err);
        return NGX_ERROR;
    }
    ngx_memzero(&po, sizeof(po));
    po.limiter = ngx_http_sluice_worker.lim;
    (void) ngx_http_sluice_parse_secret(&mcf->secret, po.secret);
    po.config_path = mcf->policy.len
                         ? ngx_http_sluice_cstr(cycle->pool, &mcf->policy)
                         : NULL;
    po.counters = ngx_http_sluice_cstr(cycle->pool, &mcf->counters);
    po.degraded_store = ngx_http_sluice_segment(cycle->pool,
                                                &mcf->degraded_store);
    po.deny_cache = ngx_http_sluice_segment(cycle->pool, &mcf->deny_cache);
    po.errbuf = err;
    po.errlen = sizeof(err);
    ngx_http_sluice_open_nft(cycle, mcf);
    for (i = 0; i < 2; i++) {
        po.flags = i ? SLUICE_POLICY_SHADOW : 0;
        /* alerts and kernel bans for what is enforced only */
        po.on_event = i == 0 && (ngx_http_sluice_worker.webhook
                                 || ngx_http_sluice_worker.nft)
                          ? ngx_http_sluice_on_event
                          : NULL;
        po.userdata = NULL;
        rc = sluice_policy_open(&po, &ngx_http_sluice_worker.pol[i]);
        if (rc == SLUICE_ECONFIG && po.counters != NULL
            && ngx_strncmp(err, "counters", 8) == 0) {
            /* The segment counts other tiers (the policy's tiers changed
            ** on a reload): keep enforcing, with per-worker counters,
            ** rather than answer 503 until someone renames it. */
            ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                          "sluice: %s; this worker counts on its own until "
                          "sluice_counters names a new segment", err);
            po.counters = NULL;
            rc = sluice_policy_open(&po, &ngx_http_sluice_worker.pol[i]);
        }
        if (rc != SLUICE_OK) {
            ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "sluice: %s (%s)",
                          err, sluice_strerror(rc));
            ngx_http_sluice_close_state();
            return NGX_ERROR;
        }
    }
    ngx_http_sluice_worker.pool = mcf->pool;
    ngx_http_sluice_worker.event =
        mcf->pool == NULL && ngx_http_sluice_event_store(&mcf->store, &why)
        && ngx_http_sluice_event_init(mcf, cycle->log) == NGX_OK;
    /* What a previous worker banned: the store says which still hold. */
    if (ngx_http_sluice_worker.nft != NULL) {
        (void) sluice_nft_reconcile(ngx_http_sluice_worker.nft,
                                    ngx_http_sluice_worker.pol[0]);
    }
    return NGX_OK;
}

static ngx_msec_t sl_retry_at;

static ngx_int_t
ngx_http_sluice_init_process(ngx_cycle_t *cycle)
{
    ngx_http_sluice_main_conf_t *mcf;

    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_sluice_module);
    if (mcf != NULL && mcf->used) {
        ngx_http_sluice_alerts_open(cycle, mcf); /* before the policies */
    }
    if (mcf != NULL && mcf->used
        && ngx_http_sluice_open_all(cycle, mcf) != NGX_OK) {
        sl_retry_at = ngx_current_msec + 1000;
    }
    return NGX_OK;
}

/* The handles, opening them again if the first open failed. */
sluice_policy *
ngx_http_sluice_ready(ngx_http_request_t *r)
{
    ngx_http_sluice_main_conf_t *mcf;

    if (ngx_http_sluice_worker.pol[0] == NULL && ngx_current_msec >= sl_retry_at) {
        sl_retry_at = ngx_current_msec + 1000;
        mcf = ngx_http_get_module_main_conf(r, ngx_http_sluice_module);
        (void) ngx_http_sluice_open_all((ngx_cycle_t *) ngx_cycle, mcf);
    }
    return ngx_http_sluice_worker.pol[0];
}

static void
ngx_http_sluice_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_sluice_close_all();
    ngx_http_sluice_alerts_close(); /* after the policies: nothing to post */
}


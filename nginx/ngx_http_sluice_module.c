/*
** ngx_http_sluice_module: the sluice policy at the nginx gateway.
**
** Thin glue.  Every decision, header and body comes from libsluice
** (sluice/policy.h, sluice/http.h); this file only maps nginx's model onto
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
**     metrics location shows the host's totals whichever worker answers.
**   - The decision runs in the preaccess phase.  On a store whose calls
**     block on the network (redis) it runs on an nginx thread pool and the
**     request waits (r->main->blocked) while the event loop goes on.
**   - The per-request state lives in a pool cleanup entry (found again by
**     its handler, as the realip module does), which survives internal
**     redirects and releases the request's lease when the request ends.
*/
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <time.h>

#include <sluice.h>

#define SLUICE_NGX_OFF 0
#define SLUICE_NGX_ON 1
#define SLUICE_NGX_SHADOW 2

/* $sluice_status values, named after $limit_req_status. */
static ngx_str_t ngx_http_sluice_status_names[] = {
    ngx_string("PASSED"), ngx_string("REJECTED"),
    ngx_string("REJECTED_DRY_RUN"), ngx_string("ERROR")};
#define ST_PASSED 1
#define ST_REJECTED 2
#define ST_REJECTED_DRY_RUN 3
#define ST_ERROR 4

enum { F_TENANT, F_KEY, F_TIER, F_METHOD, F_ROUTE, F_LEDGER, F_IP,
       F_SUBJECT, F__COUNT };

typedef struct {
    ngx_str_t policy;        /* sluice_policy FILE */
    ngx_str_t store;         /* sluice_store URI */
    ngx_str_t counters;      /* sluice_counters URI */
    ngx_str_t secret;        /* sluice_secret: 32 hex digits */
    ngx_str_t problem_base;  /* sluice_problem_base URI */
    ngx_uint_t header_form;  /* sluice_header_form */
    ngx_flag_t jitter;       /* sluice_retry_jitter */
    ngx_thread_pool_t *pool; /* sluice_thread_pool */
    ngx_flag_t used;         /* some location enforces or serves metrics */
} ngx_http_sluice_main_conf_t;

#define SLUICE_NGX_PREACCESS 0
#define SLUICE_NGX_POSTACCESS 1

typedef struct {
    ngx_uint_t mode;
    ngx_uint_t phase;        /* sluice_phase */
    ngx_http_complex_value_t *field[F__COUNT];
    ngx_uint_t cls;          /* sluice_class */
    ngx_array_t *auth_fail;  /* sluice_auth_failure_status: ngx_uint_t */
    ngx_flag_t metrics;
} ngx_http_sluice_loc_conf_t;

/* One request's state: lives in its pool cleanup entry. */
typedef struct {
    ngx_http_request_t *r;
    sluice_policy *pol;
    sluice_request req;
    sluice_decision d;
    int rc;              /* sluice_policy_decide's return */
    unsigned pending:1;  /* a pool thread is deciding */
    unsigned decided:1;
    unsigned applied:1;  /* the phase handler acted on it */
    unsigned denied:1;   /* we answered it ourselves */
    unsigned auth_done:1;
    ngx_uint_t status;   /* ST_* */
    ngx_http_sluice_loc_conf_t *lcf;
} ngx_http_sluice_ctx_t;

/* Per worker: opened in init_process, never inherited through fork(). */
static sluice_limiter *sl_lim;
static sluice_policy *sl_pol[2]; /* [0] enforcing, [1] shadow */
static sluice_http *sl_http;
static ngx_thread_pool_t *sl_pool;

static ngx_http_output_header_filter_pt ngx_http_next_header_filter;

static ngx_int_t ngx_http_sluice_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_sluice_init(ngx_conf_t *cf);
static void *ngx_http_sluice_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_sluice_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_sluice_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_sluice_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_http_sluice_field(ngx_conf_t *cf, ngx_command_t *cmd,
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
static void ngx_http_sluice_cleanup(void *data);

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

static ngx_conf_enum_t ngx_http_sluice_classes[] = {
    {ngx_string("auto"), SLUICE_EP_AUTO},
    {ngx_string("standard"), SLUICE_EP_STANDARD},
    {ngx_string("reconcile"), SLUICE_EP_RECONCILE},
    {ngx_string("export"), SLUICE_EP_EXPORT},
    {ngx_string("job_poll"), SLUICE_EP_JOB_POLL},
    {ngx_string("auth"), SLUICE_EP_AUTH},
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
    MAIN_STR("sluice_secret", secret),
    MAIN_STR("sluice_problem_base", problem_base),
    {ngx_string("sluice_header_form"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_enum_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(ngx_http_sluice_main_conf_t, header_form),
     &ngx_http_sluice_forms},
    {ngx_string("sluice_retry_jitter"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(ngx_http_sluice_main_conf_t, jitter), NULL},
    {ngx_string("sluice_thread_pool"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_http_sluice_thread_pool, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
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
    {ngx_string("sluice_class"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_sluice_loc_conf_t, cls), &ngx_http_sluice_classes},
    LOC_FIELD("sluice_tenant", F_TENANT),
    LOC_FIELD("sluice_key", F_KEY),
    LOC_FIELD("sluice_tier", F_TIER),
    LOC_FIELD("sluice_method", F_METHOD),
    LOC_FIELD("sluice_route", F_ROUTE),
    LOC_FIELD("sluice_ledger", F_LEDGER),
    LOC_FIELD("sluice_client_ip", F_IP),
    LOC_FIELD("sluice_auth_subject", F_SUBJECT),
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
    return mcf;
}

static char *
ngx_http_sluice_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_sluice_main_conf_t *mcf = conf;

    ngx_conf_init_uint_value(mcf->header_form, SLUICE_HTTP_FORM_LEGACY);
    ngx_conf_init_value(mcf->jitter, 1);
    if (mcf->store.len == 0) {
        ngx_str_set(&mcf->store, "shm:name=/sluice-nginx;create=1");
    }
    if (mcf->counters.len == 0) {
        ngx_str_set(&mcf->counters, "shm:name=/sluice-nginx-counters");
    }
    if (mcf->problem_base.len == 0) {
        ngx_str_set(&mcf->problem_base, "https://errors.invalid/");
    }
    return NGX_CONF_OK;
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
    lcf->cls = NGX_CONF_UNSET_UINT;
    lcf->auth_fail = NGX_CONF_UNSET_PTR;
    lcf->metrics = NGX_CONF_UNSET;
    return lcf;
}

static char *
ngx_http_sluice_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_sluice_loc_conf_t *prev = parent, *conf = child;
    ngx_http_sluice_main_conf_t *mcf;
    ngx_uint_t i, *st;

    ngx_conf_merge_uint_value(conf->mode, prev->mode, SLUICE_NGX_OFF);
    ngx_conf_merge_uint_value(conf->phase, prev->phase, SLUICE_NGX_PREACCESS);
    ngx_conf_merge_uint_value(conf->cls, prev->cls, SLUICE_EP_AUTO);
    ngx_conf_merge_value(conf->metrics, prev->metrics, 0);
    for (i = 0; i < F__COUNT; i++) {
        if (conf->field[i] == NULL) {
            conf->field[i] = prev->field[i];
        }
    }
    if (conf->auth_fail == NGX_CONF_UNSET_PTR) {
        if (prev->auth_fail == NGX_CONF_UNSET_PTR) {
            prev->auth_fail = ngx_array_create(cf->pool, 1,
                                               sizeof(ngx_uint_t));
            if (prev->auth_fail == NULL) {
                return NGX_CONF_ERROR;
            }
            st = ngx_array_push(prev->auth_fail);
            if (st == NULL) {
                return NGX_CONF_ERROR;
            }
            *st = NGX_HTTP_UNAUTHORIZED;
        }
        conf->auth_fail = prev->auth_fail;
    }
    if (conf->mode != SLUICE_NGX_OFF || conf->metrics) {
        mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_sluice_module);
        mcf->used = 1;
    }
    return NGX_CONF_OK;
}

static char *
ngx_http_sluice_field(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_compile_complex_value_t ccv;
    ngx_http_complex_value_t *cv;

    if (lcf->field[cmd->offset] != NULL) {
        return "is duplicate";
    }
    cv = ngx_palloc(cf->pool, sizeof(*cv));
    if (cv == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = cv;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }
    lcf->field[cmd->offset] = cv;
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

static ngx_int_t ngx_http_sluice_metrics_handler(ngx_http_request_t *r);

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

static char *
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

/* Runs where the configuration is parsed (nginx -t, start, every HUP in
** the master): checks what can be checked without touching live state, so
** a bad policy file fails `nginx -t` and a reload keeps the old workers. */
static ngx_int_t
ngx_http_sluice_init_module(ngx_cycle_t *cycle)
{
    ngx_http_sluice_main_conf_t *mcf;
    sluice_policy_config cfg;
    uint8_t secret[16];
    char err[512], *path;
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
        rc = sluice_policy_config_load(path, &cfg, err, sizeof(err));
        if (rc != SLUICE_OK) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "sluice_policy: %s (%s)", err, sluice_strerror(rc));
            return NGX_ERROR;
        }
    }
    return NGX_OK;
}

static void
ngx_http_sluice_close_all(void)
{
    sluice_policy_close(sl_pol[0]);
    sluice_policy_close(sl_pol[1]);
    sluice_limiter_close(sl_lim);
    sluice_http_close(sl_http);
    sl_pol[0] = sl_pol[1] = NULL;
    sl_lim = NULL;
    sl_http = NULL;
}

/* Each worker opens its own handles on the named state.  A store that
** cannot be opened (a Redis that is down when the worker starts) must not
** take the worker with it: sluice locations answer 503 and the open is
** tried again, at most once a second, by the requests that need it. */
static ngx_int_t
ngx_http_sluice_open_all(ngx_cycle_t *cycle, ngx_http_sluice_main_conf_t *mcf)
{
    sluice_limiter_options lo;
    sluice_policy_options po;
    sluice_http_options ho;
    char err[512];
    int rc, i;

    ngx_memzero(&lo, sizeof(lo));
    lo.store = ngx_http_sluice_cstr(cycle->pool, &mcf->store);
    lo.flags = SLUICE_OPEN_CREATE;
    err[0] = '\0';
    rc = lo.store ? sluice_limiter_open2(&lo, &sl_lim, err, sizeof(err))
                  : SLUICE_ENOMEM;
    if (rc != SLUICE_OK) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "sluice_store \"%V\": %s %s (sluice locations answer "
                      "503 until it opens)", &mcf->store,
                      sluice_strerror(rc), err);
        return NGX_ERROR;
    }
    ngx_memzero(&po, sizeof(po));
    po.limiter = sl_lim;
    (void) ngx_http_sluice_parse_secret(&mcf->secret, po.secret);
    po.config_path = mcf->policy.len
                         ? ngx_http_sluice_cstr(cycle->pool, &mcf->policy)
                         : NULL;
    po.counters = ngx_http_sluice_cstr(cycle->pool, &mcf->counters);
    po.errbuf = err;
    po.errlen = sizeof(err);
    for (i = 0; i < 2; i++) {
        po.flags = i ? SLUICE_POLICY_SHADOW : 0;
        rc = sluice_policy_open(&po, &sl_pol[i]);
        if (rc == SLUICE_ECONFIG && po.counters != NULL
            && ngx_strncmp(err, "counters", 8) == 0) {
            /* The segment counts other tiers (the policy's tiers changed
            ** on a reload): keep enforcing, with per-worker counters,
            ** rather than answer 503 until someone renames it. */
            ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                          "sluice: %s; this worker counts on its own until "
                          "sluice_counters names a new segment", err);
            po.counters = NULL;
            rc = sluice_policy_open(&po, &sl_pol[i]);
        }
        if (rc != SLUICE_OK) {
            ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "sluice: %s (%s)",
                          err, sluice_strerror(rc));
            ngx_http_sluice_close_all();
            return NGX_ERROR;
        }
    }
    ngx_memzero(&ho, sizeof(ho));
    ho.problem_base = ngx_http_sluice_cstr(cycle->pool, &mcf->problem_base);
    ho.header_form = (int) mcf->header_form;
    ho.flags = mcf->jitter ? 0 : SLUICE_HTTP_NO_JITTER;
    /* rand NULL: a generator seeded here, in this worker, from the OS. */
    rc = sluice_http_open(&ho, &sl_http);
    if (rc != SLUICE_OK) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "sluice_problem_base \"%V\": %s", &mcf->problem_base,
                      sluice_strerror(rc));
        ngx_http_sluice_close_all();
        return NGX_ERROR;
    }
    sl_pool = mcf->pool;
    return NGX_OK;
}

static ngx_msec_t sl_retry_at;

static ngx_int_t
ngx_http_sluice_init_process(ngx_cycle_t *cycle)
{
    ngx_http_sluice_main_conf_t *mcf;

    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_sluice_module);
    if (mcf != NULL && mcf->used
        && ngx_http_sluice_open_all(cycle, mcf) != NGX_OK) {
        sl_retry_at = ngx_current_msec + 1000;
    }
    return NGX_OK;
}

/* The handles, opening them again if the first open failed. */
static sluice_policy *
ngx_http_sluice_ready(ngx_http_request_t *r)
{
    ngx_http_sluice_main_conf_t *mcf;

    if (sl_pol[0] == NULL && ngx_current_msec >= sl_retry_at) {
        sl_retry_at = ngx_current_msec + 1000;
        mcf = ngx_http_get_module_main_conf(r, ngx_http_sluice_module);
        (void) ngx_http_sluice_open_all((ngx_cycle_t *) ngx_cycle, mcf);
    }
    return sl_pol[0];
}

static void
ngx_http_sluice_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_sluice_close_all();
}

/* ----------------------------------------------------------- requests --- */

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
    slot[F_LEDGER] = &ctx->req.ledger_id;
    slot[F_IP] = &ctx->req.client_ip;
    slot[F_SUBJECT] = &ctx->req.auth_subject;
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
    ctx->req.endpoint_class = (int) ctx->lcf->cls;
    ctx->req.auth_result = SLUICE_AUTH_PENDING;
    return NGX_OK;
}

/* ---------------------------------------------- work off the event loop --- */

/* Work that needs no answer back in the request: a lease release when the
** request ends, an auth outcome learnt from the upstream.  It owns a deep
** copy of the request, because the request's pool may be gone by the time
** a pool thread runs it. */
typedef struct {
    sluice_policy *pol;
    sluice_request req;
    uint64_t lease_id;  /* 0: record req.auth_result */
    char strs[1];
} ngx_http_sluice_job_t;

static void
ngx_http_sluice_job_run(ngx_http_sluice_job_t *j)
{
    sluice_decision d;

    if (j->lease_id) {
        (void) sluice_policy_release_lease(j->pol, &j->req, j->lease_id);
    } else {
        (void) sluice_policy_decide(j->pol, &j->req, &d);
    }
}

#if (NGX_THREADS)
static void
ngx_http_sluice_job_thread(void *data, ngx_log_t *log)
{
    ngx_http_sluice_job_run(data);
}

static void
ngx_http_sluice_job_done(ngx_event_t *ev)
{
    ngx_free(ev->data);
}
#endif

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

static void
ngx_http_sluice_background(ngx_log_t *log, sluice_policy *pol,
    const sluice_request *req, uint64_t lease_id)
{
    ngx_http_sluice_job_t inline_job;
#if (NGX_THREADS)
    ngx_http_sluice_job_t *j;
    const char **strs[8];
    ngx_thread_task_t *task;
    size_t need = 0, i;
    u_char *mem;
    char *p;
#endif

    inline_job.pol = pol;
    inline_job.req = *req;
    inline_job.lease_id = lease_id;
#if (NGX_THREADS)
    if (sl_pool != NULL) {
        j = &inline_job;
        strs[0] = &j->req.tenant_id;
        strs[1] = &j->req.api_key_id;
        strs[2] = &j->req.tier;
        strs[3] = &j->req.method;
        strs[4] = &j->req.route;
        strs[5] = &j->req.client_ip;
        strs[6] = &j->req.auth_subject;
        strs[7] = &j->req.ledger_id;
        for (i = 0; i < 8; i++) {
            need += ngx_http_sluice_copy_str(strs[i], NULL);
        }
        mem = ngx_calloc(sizeof(ngx_thread_task_t) + sizeof(*j) + need, log);
        if (mem == NULL) {
            return; /* a lease then expires by its TTL */
        }
        task = (ngx_thread_task_t *) mem;
        j = (ngx_http_sluice_job_t *) (mem + sizeof(*task));
        p = j->strs;
        for (i = 0; i < 8; i++) {
            p += ngx_http_sluice_copy_str(strs[i], p);
        }
        j->pol = pol;
        j->req = inline_job.req; /* its strings now point into j->strs */
        j->lease_id = lease_id;
        task->ctx = j;
        task->handler = ngx_http_sluice_job_thread;
        task->event.handler = ngx_http_sluice_job_done;
        task->event.data = mem;
        task->event.log = log;
        if (ngx_thread_task_post(sl_pool, task) == NGX_OK) {
            return;
        }
        ngx_free(mem);
        return;
    }
#endif
    /* A store that answers from memory: no reason to leave the loop. */
    ngx_http_sluice_job_run(&inline_job);
}

static void
ngx_http_sluice_cleanup(void *data)
{
    ngx_http_sluice_ctx_t *ctx = data;

    if (ctx->decided && ctx->rc == SLUICE_OK && ctx->d.lease_id != 0) {
        ngx_http_sluice_background(ctx->r->connection->log, ctx->pol,
                                   &ctx->req, ctx->d.lease_id);
        ctx->d.lease_id = 0;
    }
}

/* ------------------------------------------------------------ answers --- */

typedef struct {
    ngx_http_request_t *r;
    ngx_int_t allowed; /* skip the problem's Content-Type */
} ngx_http_sluice_hdr_ud_t;

static int
ngx_http_sluice_put_header(const char *name, const char *value, void *ud)
{
    ngx_http_sluice_hdr_ud_t *u = ud;
    ngx_http_request_t *r = u->r;
    ngx_table_elt_t *h;
    size_t nl = ngx_strlen(name), vl = ngx_strlen(value);

    if (ngx_strcasecmp((u_char *) name, (u_char *) "Content-Type") == 0) {
        if (u->allowed) {
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

static ngx_int_t
ngx_http_sluice_answer(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx,
    sluice_http_answer *a)
{
    sluice_http_facts f;
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
    if (sluice_decision_http_facts(&ctx->d, &ctx->req, rid_c, &f)
            != SLUICE_OK
        || sluice_http_answer_make(sl_http, &f, ngx_http_sluice_wall_ns(), a)
               != SLUICE_OK) {
        return NGX_ERROR;
    }
    return NGX_OK;
}

/* A denial: the library's status, headers and problem+json body. */
static ngx_int_t
ngx_http_sluice_deny(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    sluice_http_answer a;
    ngx_http_sluice_hdr_ud_t ud = {r, 0};
    ngx_buf_t *b;
    ngx_chain_t out;
    size_t len = 0;
    ngx_int_t rc;
    char *body;

    if (ngx_http_sluice_answer(r, ctx, &a) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (ngx_http_discard_request_body(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (sluice_http_answer_body(sl_http, &a, NULL, 0, &len) != SLUICE_ERANGE
        && len == 0) {
        len = 1;
    }
    body = ngx_pnalloc(r->pool, len);
    if (body == NULL
        || sluice_http_answer_body(sl_http, &a, body, len, &len)
               != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (sluice_http_answer_foreach_header(sl_http, &a,
                                          ngx_http_sluice_put_header, &ud)
        != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->denied = 1;
    r->headers_out.status = (ngx_uint_t) a.status;
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

/* Act on a decision made inline or by a pool thread. */
static ngx_int_t
ngx_http_sluice_apply(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    ngx_int_t rc;

    ctx->applied = 1;
    if (ctx->rc != SLUICE_OK) {
        ctx->status = ST_ERROR;
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "sluice: request refused, field \"%s\": %s",
                      ctx->d.invalid_field ? ctx->d.invalid_field : "?",
                      sluice_strerror(ctx->rc));
        return NGX_HTTP_BAD_REQUEST;
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

    ctx->rc = sluice_policy_decide(ctx->pol, &ctx->req, &ctx->d);
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
#if (NGX_THREADS)
    ngx_thread_task_t *task;
#endif

    if (r != r->main) {
        return NGX_DECLINED;
    }
    ctx = ngx_http_sluice_get_ctx(r);
    if (ctx != NULL) {
        if (ctx->decided && !ctx->applied) {
            return ngx_http_sluice_apply(r, ctx);
        }
        return ctx->pending ? NGX_AGAIN : NGX_DECLINED; /* once a request */
    }
    lcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);
    /* A metrics location inside a `sluice on` server is not limited. */
    if (lcf->mode == SLUICE_NGX_OFF || lcf->phase != phase || lcf->metrics) {
        return NGX_DECLINED;
    }
    if (ngx_http_sluice_ready(r) == NULL) {
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }
    cln = ngx_pool_cleanup_add(r->pool, sizeof(*ctx));
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx = cln->data;
    ngx_memzero(ctx, sizeof(*ctx));
    ctx->r = r;
    ctx->lcf = lcf;
    ctx->pol = sl_pol[lcf->mode == SLUICE_NGX_SHADOW];
    cln->handler = ngx_http_sluice_cleanup;
    if (ngx_http_sluice_fields(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
#if (NGX_THREADS)
    if (sl_pool != NULL) {
        task = ngx_thread_task_alloc(r->pool, 0);
        if (task == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        task->ctx = ctx;
        task->handler = ngx_http_sluice_decide_thread;
        task->event.handler = ngx_http_sluice_decided;
        task->event.data = ctx;
        if (ngx_thread_task_post(sl_pool, task) != NGX_OK) {
            return NGX_HTTP_SERVICE_UNAVAILABLE;
        }
        ctx->pending = 1;
        r->main->blocked++;
        r->aio = 1;
        return NGX_AGAIN;
    }
#endif
    ctx->rc = sluice_policy_decide(ctx->pol, &ctx->req, &ctx->d);
    ctx->decided = 1;
    return ngx_http_sluice_apply(r, ctx);
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

static ngx_int_t
ngx_http_sluice_header_filter(ngx_http_request_t *r)
{
    ngx_http_sluice_ctx_t *ctx;
    ngx_http_sluice_hdr_ud_t ud = {r, 1};
    sluice_http_answer a;
    ngx_uint_t i, *st, fail = 0;

    if (r != r->main) {
        return ngx_http_next_header_filter(r);
    }
    ctx = ngx_http_sluice_get_ctx(r);
    if (ctx == NULL || !ctx->decided || ctx->denied || ctx->rc != SLUICE_OK) {
        return ngx_http_next_header_filter(r);
    }
    /* The auth endpoint: the upstream's answer is the verdict on the
    ** credentials, so failures count (and lock out) at the gateway. */
    if (ctx->d.endpoint_class == SLUICE_EP_AUTH && !ctx->auth_done) {
        ctx->auth_done = 1;
        st = ctx->lcf->auth_fail->elts;
        for (i = 0; i < ctx->lcf->auth_fail->nelts; i++) {
            fail |= st[i] == r->headers_out.status;
        }
        if (fail || (r->headers_out.status >= 200
                     && r->headers_out.status < 300)) {
            ctx->req.auth_result = fail ? SLUICE_AUTH_BAD_SECRET
                                        : SLUICE_AUTH_OK;
            ngx_http_sluice_background(r->connection->log, ctx->pol,
                                       &ctx->req, 0);
        }
    }
    if (ctx->d.limit > 0 && ngx_http_sluice_answer(r, ctx, &a) == NGX_OK) {
        (void) sluice_http_answer_foreach_header(
            sl_http, &a, ngx_http_sluice_put_header, &ud);
    }
    return ngx_http_next_header_filter(r);
}

/* ------------------------------------------------------------ metrics --- */

static ngx_int_t
ngx_http_sluice_metrics_handler(ngx_http_request_t *r)
{
    ngx_buf_t *b;
    ngx_chain_t out;
    size_t need = 0;
    ngx_int_t rc;
    char *text;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    if (ngx_http_sluice_ready(r) == NULL) {
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }
    /* Both policies count into the same host-wide segment: the enforcing
    ** one's text is the whole host's. */
    if (sluice_policy_metrics(sl_pol[0], NULL, 0, &need) != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    text = ngx_pnalloc(r->pool, need + 1);
    if (text == NULL
        || sluice_policy_metrics(sl_pol[0], text, need + 1, &need)
               != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = (off_t) need;
    ngx_str_set(&r->headers_out.content_type,
                "text/plain; version=0.0.4; charset=utf-8");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }
    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    b->pos = (u_char *) text;
    b->last = (u_char *) text + need;
    b->memory = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;
    out.buf = b;
    out.next = NULL;
    return ngx_http_output_filter(r, &out);
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
        s = ctx->rc == SLUICE_OK ? sluice_outcome_name(ctx->d.outcome)
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

static ngx_int_t
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

static ngx_int_t
ngx_http_sluice_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt *h;
    ngx_http_core_main_conf_t *cmcf;

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
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_sluice_header_filter;
    return NGX_OK;
}

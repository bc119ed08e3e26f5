/*
** Shared by the files of ngx_http_sluice_module: the configuration, one
** request's state, and the handles each worker opens for itself.
*/
#ifndef NGX_HTTP_SLUICE_H
#define NGX_HTTP_SLUICE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <sluice.h>

#define SLUICE_NGX_OFF 0
#define SLUICE_NGX_ON 1
#define SLUICE_NGX_SHADOW 2

/* $sluice_status values (ngx_http_sluice_status_names[status - 1]). */
#define ST_PASSED 1
#define ST_REJECTED 2
#define ST_REJECTED_DRY_RUN 3
#define ST_ERROR 4

enum { F_TENANT, F_KEY, F_TIER, F_METHOD, F_ROUTE, F_IP, F__COUNT };

typedef struct {
    ngx_str_t policy;        /* sluice_policy FILE */
    ngx_str_t store;         /* sluice_store URI */
    ngx_str_t counters;      /* sluice_counters URI */
    ngx_str_t degraded_store; /* sluice_degraded_store URI, or "off" */
    ngx_str_t deny_cache;    /* sluice_deny_cache URI, or "off" */
    ngx_str_t secret;        /* sluice_secret: 32 hex digits */
    ngx_str_t problem_base;  /* sluice_problem_base URI */
    ngx_uint_t header_form;  /* sluice_header_form */
    ngx_flag_t jitter;       /* sluice_retry_jitter */
    ngx_thread_pool_t *pool; /* sluice_thread_pool */
    ngx_flag_t nft;          /* sluice_nft */
    ngx_str_t nft_table;     /* sluice_nft_table */
    ngx_int_t nft_prefix;    /* sluice_nft_ipv6_prefix */
    ngx_str_t nft_state;     /* sluice_nft_state FILE (FILE.<worker>) */
    ngx_flag_t used;         /* some location enforces or serves metrics */
    ngx_array_t *alerts;     /* sluice_alert: sluice_webhook_dest */
    ngx_uint_t alert_allow;  /* sluice_alert_allow: SLUICE_WEBHOOK_ALLOW_* */
    ngx_str_t alert_contacts; /* sluice_alert_contacts FILE */
    ngx_str_t alert_spool;   /* sluice_alert_spool PATH (PATH.N per worker) */
    ngx_str_t alert_proxy;   /* sluice_alert_proxy URL */
} ngx_http_sluice_main_conf_t;

#define SLUICE_NGX_PREACCESS 0
#define SLUICE_NGX_POSTACCESS 1

/* sluice_attr NAME VALUE: a request attribute for a policy file's
** declared limits (docs/policy.md "Declared limits"). */
typedef struct {
    char *name;                       /* NUL-terminated */
    ngx_http_complex_value_t value;
} ngx_http_sluice_attr_t;

typedef struct {
    ngx_uint_t mode;
    ngx_uint_t phase;        /* sluice_phase */
    ngx_http_complex_value_t *field[F__COUNT];
    ngx_array_t *attrs;      /* sluice_attr: ngx_http_sluice_attr_t */
    ngx_http_sluice_attr_t *settle; /* sluice_settle NAME VALUE, or NULL */
    ngx_http_sluice_attr_t *report; /* sluice_report NAME VALUE, or NULL */
    ngx_flag_t after_body;   /* sluice_decide_after_body */
    ngx_array_t *auth_fail;  /* sluice_auth_failure_status: ngx_uint_t,
                                or NULL: the location reports nothing */
    ngx_flag_t metrics;
} ngx_http_sluice_loc_conf_t;

typedef struct ngx_http_sluice_link_s ngx_http_sluice_link_t;

/* Work that needs no answer back in the request: a lease release, a
** settle, a report of the upstream's answer (the request decided again
** with one more attribute).  It owns a deep copy of the
** request, because the request's pool may be gone by the time it runs (a
** release from the pool cleanup).  A release from the body filter names
** the request instead: its answer's end waits for it. */
typedef struct {
    sluice_policy *pol;
    sluice_request req;
    uint64_t lease_id;  /* 0: decide req again (a report), or settle */
    ngx_http_request_t *resume; /* NULL: nothing waits for this job */
    unsigned settle:1;  /* sluice_settle: settle d at `used` */
    sluice_decision d;
    sluice_attr used;
    char strs[1];
} ngx_http_sluice_job_t;

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
    unsigned reported:1;  /* the upstream's answer was reported */
    unsigned body_read:1; /* sluice_decide_after_body: the body is in */
    unsigned releasing:1; /* a pool thread releases the lease: the */
    ngx_chain_t *held;    /* answer's end waits here until it is done */
    ngx_uint_t status;   /* ST_* */
    ngx_http_sluice_loc_conf_t *lcf;
    sluice_call *call;   /* deciding on the event loop: the halves */
    ngx_http_sluice_job_t *job; /* r NULL: a job's, on the event loop */
    ngx_http_sluice_link_t *link; /* ... and the link carrying them */
    unsigned sync:1;     /* inside the phase handler still */
} ngx_http_sluice_ctx_t;

/* Decision handles a worker keeps for reuse, per policy. */
#define SLUICE_NGX_CALLS 64

/* Per worker: opened after the fork (init_process), never inherited. */
typedef struct {
    sluice_limiter *lim;
    sluice_policy *pol[2]; /* [0] enforcing, [1] shadow */
    sluice_http *http;
    sluice_nft *nft;         /* sluice_nft on: the kernel IP set sink */
    ngx_thread_pool_t *pool; /* NULL: decide inline */
    ngx_flag_t event;        /* Redis on the event loop (the halves) */
    ngx_msec_t timeout, connect_timeout; /* the store's, for the links */
    sluice_call *calls[2][SLUICE_NGX_CALLS];
    int ncalls[2];
    sluice_webhook *webhook; /* sluice_alert's sink, or NULL */
    /* When this worker last logged a full store / a failing one: once
    ** per SLUICE_NGX_STORE_LOG_MS each, not once per request. */
    ngx_msec_t full_logged, failed_logged;
} ngx_http_sluice_worker_t;

extern ngx_module_t ngx_http_sluice_module;
extern ngx_http_sluice_worker_t ngx_http_sluice_worker;

#define SLUICE_NGX_STORE_LOG_MS 10000

/* ngx_http_sluice_module.c */
char *ngx_http_sluice_cstr(ngx_pool_t *pool, ngx_str_t *s);
sluice_policy *ngx_http_sluice_ready(ngx_http_request_t *r);

/* ngx_http_sluice_request.c */
ngx_int_t ngx_http_sluice_add_variables(ngx_conf_t *cf);
ngx_int_t ngx_http_sluice_init(ngx_conf_t *cf);
ngx_int_t ngx_http_sluice_send(ngx_http_request_t *r, ngx_uint_t status,
                               char *body, size_t len);
void ngx_http_sluice_job_resumed(ngx_http_request_t *r);

/* ngx_http_sluice_redis.c */
ngx_int_t ngx_http_sluice_event_store(ngx_str_t *store, const char **why);
ngx_int_t ngx_http_sluice_event_init(ngx_http_sluice_main_conf_t *mcf,
    ngx_log_t *log);
ngx_int_t ngx_http_sluice_event_decide(ngx_http_request_t *r,
    ngx_http_sluice_ctx_t *ctx);
void ngx_http_sluice_call_put(ngx_http_sluice_ctx_t *ctx);
void ngx_http_sluice_calls_close(void);
ngx_int_t ngx_http_sluice_event_job(ngx_http_sluice_ctx_t *ctx,
    ngx_http_sluice_job_t *j);

/* ngx_http_sluice_alerts.c */
char *ngx_http_sluice_alert(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_sluice_alert_allow(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_sluice_alerts_check(ngx_cycle_t *cycle,
    ngx_http_sluice_main_conf_t *mcf);
void ngx_http_sluice_alerts_open(ngx_cycle_t *cycle,
    ngx_http_sluice_main_conf_t *mcf);
void ngx_http_sluice_alerts_close(void);

/* ngx_http_sluice_metrics.c */
ngx_int_t ngx_http_sluice_metrics_handler(ngx_http_request_t *r);

#endif

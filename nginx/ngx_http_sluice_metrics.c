/*
** The metrics location: the policy's Prometheus text.  The counters are the
** host's (sluice_counters), so any worker's text is the whole host's.
*/
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_sluice.h"


ngx_int_t
ngx_http_sluice_metrics_handler(ngx_http_request_t *r)
{
    size_t need = 0, hook = 0, nft_need = 0;
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
    if (sluice_policy_metrics(ngx_http_sluice_worker.pol[0], NULL, 0, &need) != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    /* The alert sink's counters are this worker's (each has its sink). */
    if (ngx_http_sluice_worker.webhook != NULL
        && sluice_webhook_metrics(ngx_http_sluice_worker.webhook, NULL, 0,
                                  &hook) != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    /* So is the kernel IP set sink's. */
    if (ngx_http_sluice_worker.nft != NULL
        && sluice_nft_metrics(ngx_http_sluice_worker.nft, NULL, 0,
                              &nft_need) != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    text = ngx_pnalloc(r->pool, need + hook + nft_need + 512); /* room to grow */
    if (text == NULL
        || sluice_policy_metrics(ngx_http_sluice_worker.pol[0], text, need + 1, &need)
               != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (hook
        && sluice_webhook_metrics(ngx_http_sluice_worker.webhook, text + need,
                                  hook + 256, &hook) != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    need += hook;
    if (nft_need
        && sluice_nft_metrics(ngx_http_sluice_worker.nft, text + need,
                              nft_need + 256, &nft_need) != SLUICE_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    need += nft_need;
    ngx_str_set(&r->headers_out.content_type,
                "text/plain; version=0.0.4; charset=utf-8");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    return ngx_http_sluice_send(r, NGX_HTTP_OK, text, need);
}


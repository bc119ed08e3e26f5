/*
** The alert directives: where the policy's events go (sluice/webhook.h).
**
**   sluice_alert FORMAT URL [routing_key=K] [from=ADDR] [to=ADDR]
**                [events=alert+page] [name=LABEL];       (repeatable)
**   sluice_alert_contacts FILE;   the tenants' contacts (email, owners)
**   sluice_alert_spool PATH;      an LMDB spool per worker: PATH.N
**   sluice_alert_allow loopback|private|link_local ...;
**   sluice_alert_proxy URL;       else no proxy (the environment's unused)
**
** FORMAT is json, slack, pagerduty or email.  The library checks the
** destinations where the configuration is parsed (nginx -t, reload: a sink
** opened without its spool and closed at once), and each worker opens its
** own sink after the fork, with spool PATH.<worker number>, so a respawned
** worker delivers what its predecessor left.  Only the enforcing policy's
** events are sent: a shadow location decides nothing anyone must hear of.
*/
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_sluice.h"

static const char *const ngx_http_sluice_alert_formats[] = {
    "json", "slack", "pagerduty", "email"};

static ngx_int_t
ngx_http_sluice_alert_events(ngx_str_t *v, uint32_t *out)
{
    u_char *p = v->data, *end = v->data + v->len, *plus;
    int t;

    *out = 0;
    while (p < end) {
        plus = ngx_strlchr(p, end, '+');
        if (plus == NULL) {
            plus = end;
        }
        for (t = 1; t < SLUICE_EVENT__COUNT; t++) {
            if (ngx_strlen(sluice_name(SLUICE_NAME_EVENT, t)) == (size_t) (plus - p)
                && ngx_strncmp(p, sluice_name(SLUICE_NAME_EVENT, t), plus - p) == 0)
            {
                break;
            }
        }
        if (t == SLUICE_EVENT__COUNT) {
            return NGX_ERROR;
        }
        *out |= SLUICE_WEBHOOK_EVENT(t);
        p = plus + 1;
    }
    return *out ? NGX_OK : NGX_ERROR;
}

char *
ngx_http_sluice_alert(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts, k, v;
    sluice_webhook_dest *d;
    ngx_uint_t i;
    u_char *eq;
    int f;

    if (mcf->alerts == NULL) {
        mcf->alerts = ngx_array_create(cf->pool, 4, sizeof(*d));
        if (mcf->alerts == NULL) {
            return NGX_CONF_ERROR;
        }
    }
    d = ngx_array_push(mcf->alerts);
    if (d == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(d, sizeof(*d));
    for (f = 0; f < SLUICE_WEBHOOK__FORMATS; f++) {
        if (value[1].len == ngx_strlen(ngx_http_sluice_alert_formats[f])
            && ngx_strncmp(value[1].data, ngx_http_sluice_alert_formats[f],
                           value[1].len) == 0)
        {
            break;
        }
    }
    if (f == SLUICE_WEBHOOK__FORMATS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "sluice_alert: unknown "
                           "format \"%V\" (json, slack, pagerduty, email)",
                           &value[1]);
        return NGX_CONF_ERROR;
    }
    d->format = f;
    d->url = ngx_http_sluice_cstr(cf->pool, &value[2]);
    if (d->url == NULL) {
        return NGX_CONF_ERROR;
    }
    for (i = 3; i < cf->args->nelts; i++) {
        eq = ngx_strlchr(value[i].data, value[i].data + value[i].len, '=');
        if (eq == NULL) {
            goto bad;
        }
        k.data = value[i].data;
        k.len = eq - value[i].data;
        v.data = eq + 1;
        v.len = value[i].data + value[i].len - v.data;
        if (k.len == 11 && ngx_strncmp(k.data, "routing_key", 11) == 0) {
            d->routing_key = ngx_http_sluice_cstr(cf->pool, &v);
        } else if (k.len == 4 && ngx_strncmp(k.data, "from", 4) == 0) {
            d->mail_from = ngx_http_sluice_cstr(cf->pool, &v);
        } else if (k.len == 2 && ngx_strncmp(k.data, "to", 2) == 0) {
            d->mail_to = ngx_http_sluice_cstr(cf->pool, &v);
        } else if (k.len == 4 && ngx_strncmp(k.data, "name", 4) == 0) {
            d->name = ngx_http_sluice_cstr(cf->pool, &v);
        } else if (k.len == 6 && ngx_strncmp(k.data, "events", 6) == 0) {
            if (ngx_http_sluice_alert_events(&v, &d->events) != NGX_OK) {
                goto bad;
            }
        } else {
            goto bad;
        }
    }
    return NGX_CONF_OK;

bad:
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "sluice_alert: \"%V\": expected "
                       "routing_key=, from=, to=, name= or events=EVENT+...",
                       &value[i]);
    return NGX_CONF_ERROR;
}

char *
ngx_http_sluice_alert_allow(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_uint_t i;

    for (i = 1; i < cf->args->nelts; i++) {
        if (ngx_strcmp(value[i].data, "loopback") == 0) {
            mcf->alert_allow |= SLUICE_WEBHOOK_ALLOW_LOOPBACK;
        } else if (ngx_strcmp(value[i].data, "private") == 0) {
            mcf->alert_allow |= SLUICE_WEBHOOK_ALLOW_PRIVATE;
        } else if (ngx_strcmp(value[i].data, "link_local") == 0) {
            mcf->alert_allow |= SLUICE_WEBHOOK_ALLOW_LINK_LOCAL;
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "sluice_alert_allow: "
                               "\"%V\" is not loopback, private or "
                               "link_local", &value[i]);
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}

/* The options every process builds alike; spool: with or without it. */
static ngx_int_t
ngx_http_sluice_alert_options(ngx_cycle_t *cycle,
    ngx_http_sluice_main_conf_t *mcf, sluice_webhook_options *o, int spool,
    char *err, size_t errlen)
{
    ngx_memzero(o, sizeof(*o));
    o->dests = mcf->alerts->elts;
    o->ndests = mcf->alerts->nelts;
    o->flags = (unsigned) mcf->alert_allow;
    o->errbuf = err;
    o->errlen = errlen;
    if (mcf->alert_contacts.len) {
        o->contacts_path = ngx_http_sluice_cstr(cycle->pool,
                                                &mcf->alert_contacts);
        if (o->contacts_path == NULL) {
            return NGX_ERROR;
        }
    }
    if (mcf->alert_proxy.len) {
        o->proxy = ngx_http_sluice_cstr(cycle->pool, &mcf->alert_proxy);
        if (o->proxy == NULL) {
            return NGX_ERROR;
        }
    }
    if (spool && mcf->alert_spool.len) {
        u_char *p = ngx_pnalloc(cycle->pool, mcf->alert_spool.len + 24);
        if (p == NULL) {
            return NGX_ERROR;
        }
        *ngx_sprintf(p, "%V.%ui", &mcf->alert_spool, ngx_worker) = '\0';
        o->spool_path = (char *) p;
    }
    return NGX_OK;
}

/* nginx -t, start and reload: the library's verdict on the destinations. */
ngx_int_t
ngx_http_sluice_alerts_check(ngx_cycle_t *cycle,
    ngx_http_sluice_main_conf_t *mcf)
{
    sluice_webhook_options o;
    sluice_webhook *w = NULL;
    char err[512] = "";
    int rc;

    if (mcf->alerts == NULL) {
        return NGX_OK;
    }
    if (ngx_http_sluice_alert_options(cycle, mcf, &o, 0, err, sizeof(err))
        != NGX_OK)
    {
        return NGX_ERROR;
    }
    rc = sluice_webhook_open(&o, &w);
    if (rc != SLUICE_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "sluice_alert: %s (%s)",
                      err, sluice_strerror(rc));
        return NGX_ERROR;
    }
    sluice_webhook_close(w);
    return NGX_OK;
}

/* A worker's sink; without it the policy runs on, alerts are not sent. */
void
ngx_http_sluice_alerts_open(ngx_cycle_t *cycle,
    ngx_http_sluice_main_conf_t *mcf)
{
    sluice_webhook_options o;
    char err[512] = "";
    int rc;

    if (mcf->alerts == NULL || ngx_http_sluice_worker.webhook != NULL) {
        return;
    }
    if (ngx_http_sluice_alert_options(cycle, mcf, &o, 1, err, sizeof(err))
        != NGX_OK)
    {
        return;
    }
    rc = sluice_webhook_open(&o, &ngx_http_sluice_worker.webhook);
    if (rc != SLUICE_OK) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "sluice_alert: %s (%s); "
                      "this worker sends no alerts", err,
                      sluice_strerror(rc));
    }
}

void
ngx_http_sluice_alerts_close(void)
{
    sluice_webhook_close(ngx_http_sluice_worker.webhook);
    ngx_http_sluice_worker.webhook = NULL;
}

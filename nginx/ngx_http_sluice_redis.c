/*
** Deciding on Redis on the worker's event loop: the decision in two halves
** (sluice/halves.h), the bytes carried on nginx's own non-blocking
** connections.  No thread pool: while a request waits for its Redis
** reply (r->main->blocked, as for a pool thread) the worker serves every
** other request.
**
**   - Links: a connection to one Redis node, carrying one call at a time.
**     A link whose call is done waits in the worker's idle list for the
**     next call to that node (keepalive); an idle link that turns readable
**     (the server closed it, or said something unasked) is closed.
**   - Timeouts: the store's timeout_ms (sluice_store's parameter, 20 ms by
**     default, as the store's own connections) bounds the connect, the
**     write and the wait for a whole reply; connect_timeout_ms the connect.
**     A timeout, a refused connect or a lost connection is reported to the
**     library (sluice_policy_finish given the error), which decides as the
**     failure mode says (degraded or fail closed, the breaker counting it)
**     and never sends the command again; the link is closed.
**   - Nodes are IP literals (what a cluster announces); a store naming a
**     host name, a unix socket, TLS, a password or a database needs
**     sluice_thread_pool (checked when the configuration is read).
**   - A request whose client goes away while its call is out stays until
**     the reply or the timeout (it is blocked, as on a thread pool), so
**     nothing points at freed memory.
*/
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <arpa/inet.h>

#include "ngx_http_sluice.h"

#define SL_LINK_BUF 16384
#define SL_IDLE_MAX 256

struct ngx_http_sluice_link_s {
    ngx_http_sluice_link_t *next;    /* the idle list */
    ngx_peer_connection_t pc;
    ngx_http_sluice_ctx_t *ctx;      /* the request whose call it carries */
    struct sockaddr_storage sa;
    ngx_str_t name;
    char host[64];
    int port;
    unsigned connecting:1;
    const u_char *out;               /* the bytes to write, and how far */
    size_t out_len, sent;
    u_char *buf;                     /* every byte read since the send */
    size_t len, cap;
};

static ngx_http_sluice_link_t *sl_idle;
static ngx_uint_t sl_nidle;

static void sl_write_handler(ngx_event_t *wev);
static void sl_read_handler(ngx_event_t *rev);
static void sl_send(ngx_http_sluice_ctx_t *ctx);
void ngx_http_sluice_call_put(ngx_http_sluice_ctx_t *ctx);

/* The store's timeouts, read once from its parameters. */
static ngx_msec_t
sl_param_ms(const char *store, const char *name, ngx_msec_t dflt)
{
    const char *p = store;
    size_t n = ngx_strlen(name);

    while ((p = ngx_strstr(p, name)) != NULL) {
        if ((p == store || p[-1] == ';' || p[-1] == ':') && p[n] == '=') {
            return (ngx_msec_t) ngx_atoi((u_char *) p + n + 1,
                                         ngx_strlen(p + n + 1)
                                         - ngx_strlen(p + n + 1
                                               + strcspn(p + n + 1, ";")));
        }
        p += n;
    }
    return dflt;
}

/* Whether a store goes on the event loop: redis:, plain TCP to IP
** literals, nothing to say to a node before the first call. */
ngx_int_t
ngx_http_sluice_event_store(ngx_str_t *store, const char **why)
{
    static const char *const need_pool[] = {
        "user=", "password=", "password_file=", "db=", "socket=", "tls",
        NULL};
    u_char buf[1024], *p;
    ngx_uint_t i;

    *why = NULL;
    if (store->len < 6 || ngx_strncmp(store->data, "redis:", 6) != 0) {
        return 0;
    }
    if (store->len >= sizeof(buf)) {
        *why = "a store string this long";
        return 0;
    }
    p = ngx_cpymem(buf, store->data, store->len);
    *p = '\0';
    if (ngx_strstr(buf, "//") != NULL) {
        *why = "a redis:// URL (give nodes=)";
        return 0;
    }
    for (i = 0; need_pool[i]; i++) {
        if (ngx_strstr(buf, need_pool[i]) != NULL) {
            *why = need_pool[i];
            return 0;
        }
    }
    return 1;
}

ngx_int_t
ngx_http_sluice_event_init(ngx_http_sluice_main_conf_t *mcf, ngx_log_t *log)
{
    char *s = ngx_alloc(mcf->store.len + 1, log);

    if (s == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(s, mcf->store.data, mcf->store.len);
    s[mcf->store.len] = '\0';
    ngx_http_sluice_worker.timeout = sl_param_ms(s, "timeout_ms", 20);
    ngx_http_sluice_worker.connect_timeout =
        sl_param_ms(s, "connect_timeout_ms", 20);
    ngx_free(s);
    return NGX_OK;
}

/* ------------------------------------------------------------- links --- */

static void
sl_link_free(ngx_http_sluice_link_t *l)
{
    if (l->pc.connection != NULL) {
        ngx_close_connection(l->pc.connection);
        l->pc.connection = NULL;
    }
    ngx_free(l->buf);
    ngx_free(l);
}

static void
sl_idle_remove(ngx_http_sluice_link_t *l)
{
    ngx_http_sluice_link_t **pp;

    for (pp = &sl_idle; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == l) {
            *pp = l->next;
            sl_nidle--;
            return;
        }
    }
}

/* An idle link that turns readable: the server closed it, or it speaks
** out of turn; either way it is done. */
static void
sl_idle_handler(ngx_event_t *ev)
{
    ngx_connection_t *c = ev->data;
    ngx_http_sluice_link_t *l = c->data;

    if (ev->write) {
        return;
    }
    sl_idle_remove(l);
    sl_link_free(l);
}

/* Nothing to read and not closed: a link fit to wait for the next call. */
static ngx_int_t
sl_link_quiet(ngx_connection_t *c)
{
    u_char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK);

    return n == -1 && (ngx_socket_errno == NGX_EAGAIN
                       || ngx_socket_errno == NGX_EINTR);
}

static void
sl_link_idle(ngx_http_sluice_link_t *l)
{
    ngx_connection_t *c = l->pc.connection;

    l->ctx = NULL;
    if (c->read->timer_set) {
        ngx_del_timer(c->read);
    }
    if (c->write->timer_set) {
        ngx_del_timer(c->write);
    }
    /* The reply was whole: anything more (or the server's close) means the
    ** link is done.  A read event still "ready" (a read that filled the
    ** buffer; greedy reads without EPOLLRDHUP) may be nothing: the socket
    ** says. */
    if (sl_nidle >= SL_IDLE_MAX || (c->read->ready && !sl_link_quiet(c))) {
        sl_link_free(l);
        return;
    }
    c->read->ready = 0;
    c->read->handler = sl_idle_handler;
    c->write->handler = sl_idle_handler;
    l->next = sl_idle;
    sl_idle = l;
    sl_nidle++;
}

static ngx_http_sluice_link_t *
sl_link_get(ngx_http_sluice_ctx_t *ctx, const char *host, int port)
{
    ngx_http_sluice_link_t *l, **pp;
    ngx_log_t *log = ctx->r ? ctx->r->connection->log : ngx_cycle->log;
    struct sockaddr_in *sin;
    struct sockaddr_in6 *sin6;
    size_t hlen = ngx_strlen(host);
    ngx_int_t rc;

    for (pp = &sl_idle; *pp != NULL; pp = &(*pp)->next) {
        l = *pp;
        if (l->port == port && ngx_strcmp(l->host, host) == 0) {
            *pp = l->next;
            sl_nidle--;
            return l;
        }
    }
    if (hlen >= sizeof(l->host) || port <= 0) {
        return NULL;
    }
    l = ngx_calloc(sizeof(*l), log);
    if (l == NULL) {
        return NULL;
    }
    l->buf = ngx_alloc(SL_LINK_BUF, log);
    if (l->buf == NULL) {
        ngx_free(l);
        return NULL;
    }
    l->cap = SL_LINK_BUF;
    ngx_memcpy(l->host, host, hlen + 1);
    l->port = port;
    sin = (struct sockaddr_in *) &l->sa;
    sin6 = (struct sockaddr_in6 *) &l->sa;
    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((in_port_t) port);
        l->pc.socklen = sizeof(*sin);
    } else if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((in_port_t) port);
        l->pc.socklen = sizeof(*sin6);
    } else {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "sluice: Redis node \"%s\" is not an IP address (the "
                      "event loop resolves no names: use sluice_thread_pool)",
                      host);
        sl_link_free(l);
        return NULL;
    }
    l->pc.sockaddr = (struct sockaddr *) &l->sa;
    l->name.data = (u_char *) l->host;
    l->name.len = hlen;
    l->pc.name = &l->name;
    l->pc.get = ngx_event_get_peer;
    l->pc.log = log;
    l->pc.log_error = NGX_ERROR_ERR;
    rc = ngx_event_connect_peer(&l->pc);
    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED
        || l->pc.connection == NULL) {
        sl_link_free(l);
        return NULL;
    }
    l->pc.connection->data = l;
    l->pc.connection->log = ngx_cycle->log;
    l->pc.connection->read->log = ngx_cycle->log;
    l->pc.connection->write->log = ngx_cycle->log;
    l->connecting = rc == NGX_AGAIN;
    return l;
}

/* ------------------------------------------------------------- calls --- */

/* The decision is in: the request goes on through its phases. */
static void
sl_done(ngx_http_sluice_ctx_t *ctx, int rc)
{
    ngx_http_request_t *r = ctx->r;
    ngx_connection_t *c;

    ctx->link = NULL;
    ctx->rc = rc == SLUICE_CALL_DONE ? SLUICE_OK : rc;
    ctx->pending = 0;
    ngx_http_sluice_call_put(ctx);
    if (ctx->sync) {
        return; /* still inside the phase handler: it goes on itself */
    }
    if (r == NULL) { /* a job: the request its answer waits, if any */
        r = ctx->job->resume;
        ngx_free(ctx); /* the job with it */
        if (r != NULL) {
            ngx_http_sluice_job_resumed(r);
        }
        return;
    }
    c = r->connection;
    ctx->decided = 1;
    r->main->blocked--;
    r->aio = 0;
    ngx_http_set_log_request(c->log, r);
    r->write_event_handler(r); /* the phases again, or the finalizer */
    ngx_http_run_posted_requests(c);
}

/* The link failed (err): closed, and the library decides without it. */
static void
sl_failed(ngx_http_sluice_link_t *l, int err)
{
    ngx_http_sluice_ctx_t *ctx = l->ctx;
    int rc;

    sl_link_free(l);
    ctx->link = NULL;
    rc = sluice_policy_finish(ctx->call, err, NULL, 0, &ctx->d);
    if (rc == SLUICE_CALL_SEND) { /* not today, but the API allows it */
        sl_send(ctx);
        return;
    }
    sl_done(ctx, rc);
}

static void
sl_write_handler(ngx_event_t *wev)
{
    ngx_connection_t *c = wev->data;
    ngx_http_sluice_link_t *l = c->data;
    ssize_t n;

    if (wev->timedout) {
        sl_failed(l, SLUICE_ETIMEDOUT);
        return;
    }
    if (l->connecting) {
        int err = 0;
        socklen_t len = sizeof(err);

        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, (void *) &err, &len) == -1
            || err != 0) {
            sl_failed(l, SLUICE_EUNAVAIL);
            return;
        }
        l->connecting = 0;
    }
    while (l->sent < l->out_len) {
        n = c->send(c, (u_char *) l->out + l->sent, l->out_len - l->sent);
        if (n == NGX_AGAIN) {
            if (!wev->timer_set) {
                ngx_add_timer(wev, ngx_http_sluice_worker.timeout);
            }
            if (ngx_handle_write_event(wev, 0) != NGX_OK) {
                sl_failed(l, SLUICE_EIO);
            }
            return;
        }
        if (n <= 0) {
            sl_failed(l, SLUICE_EUNAVAIL);
            return;
        }
        l->sent += (size_t) n;
    }
    if (wev->timer_set) {
        ngx_del_timer(wev);
    }
    c->read->handler = sl_read_handler;
    c->write->handler = sl_write_handler;
    if (!c->read->timer_set) {
        ngx_add_timer(c->read, ngx_http_sluice_worker.timeout);
    }
    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        sl_failed(l, SLUICE_EIO);
        return;
    }
    if (c->read->ready) {
        sl_read_handler(c->read);
    }
}

static void
sl_read_handler(ngx_event_t *rev)
{
    ngx_connection_t *c = rev->data;
    ngx_http_sluice_link_t *l = c->data;
    ngx_http_sluice_ctx_t *ctx = l->ctx;
    ssize_t n;
    u_char *nb;
    int rc;
    sluice_call_info ci;

    if (rev->timedout) {
        sl_failed(l, SLUICE_ETIMEDOUT);
        return;
    }
    for (;;) {
        if (l->len == l->cap) {
            nb = ngx_alloc(l->cap * 2, ngx_cycle->log);
            if (nb == NULL) {
                sl_failed(l, SLUICE_EIO);
                return;
            }
            ngx_memcpy(nb, l->buf, l->len);
            ngx_free(l->buf);
            l->buf = nb;
            l->cap *= 2;
        }
        n = c->recv(c, l->buf + l->len, l->cap - l->len);
        if (n == NGX_AGAIN) {
            if (ngx_handle_read_event(rev, 0) != NGX_OK) {
                sl_failed(l, SLUICE_EIO);
            }
            return; /* the timer set at the send still runs */
        }
        if (n <= 0) {
            sl_failed(l, SLUICE_EUNAVAIL);
            return;
        }
        l->len += (size_t) n;
        rc = sluice_policy_finish(ctx->call, 0, l->buf, l->len, &ctx->d);
        if (rc == SLUICE_CALL_MORE) {
            continue;
        }
        if (rc < 0) { /* the library refused the bytes: not a reply */
            sl_failed(l, SLUICE_EBACKEND);
            return;
        }
        if (rc == SLUICE_CALL_DONE
            && sluice_call_get(ctx->call, &ci) == SLUICE_OK
            && ci.store_error < 0) {
            sl_link_free(l); /* out of step, or the node is failing */
        } else {
            sl_link_idle(l);
        }
        if (rc == SLUICE_CALL_SEND) {
            sl_send(ctx); /* a redirection, a reload, the next group */
        } else {
            sl_done(ctx, rc);
        }
        return;
    }
}

/* Carry the handle's bytes to the node it names. */
static void
sl_send(ngx_http_sluice_ctx_t *ctx)
{
    ngx_http_sluice_link_t *l;
    ngx_connection_t *c;
    sluice_call_info ci;

    (void) sluice_call_get(ctx->call, &ci);
    l = ci.bytes ? sl_link_get(ctx, ci.host, ci.port) : NULL;
    if (l == NULL) {
        sl_done(ctx, sluice_policy_finish(ctx->call, SLUICE_EUNAVAIL, NULL, 0,
                                          &ctx->d));
        return;
    }
    ctx->link = l;
    l->ctx = ctx;
    l->out = ci.bytes;
    l->out_len = ci.len;
    l->sent = 0;
    l->len = 0;
    c = l->pc.connection;
    c->read->handler = sl_read_handler;
    c->write->handler = sl_write_handler;
    if (l->connecting) {
        ngx_add_timer(c->write, ngx_http_sluice_worker.connect_timeout);
        return; /* writable once connected */
    }
    sl_write_handler(c->write);
}

/* The handles of the worker, one per request in flight, kept for reuse. */
static sluice_call *
sl_call_get(sluice_policy *pol)
{
    ngx_http_sluice_worker_t *w = &ngx_http_sluice_worker;
    int i = pol == w->pol[1];
    sluice_call *call;

    if (w->ncalls[i] > 0) {
        return w->calls[i][--w->ncalls[i]];
    }
    return sluice_call_open(pol, &call) == SLUICE_OK ? call : NULL;
}

void
ngx_http_sluice_call_put(ngx_http_sluice_ctx_t *ctx)
{
    ngx_http_sluice_worker_t *w = &ngx_http_sluice_worker;
    int i = ctx->pol == w->pol[1];

    if (ctx->call == NULL) {
        return;
    }
    if (w->ncalls[i] < SLUICE_NGX_CALLS) {
        w->calls[i][w->ncalls[i]++] = ctx->call;
    } else {
        sluice_call_close(ctx->call);
    }
    ctx->call = NULL;
}

void
ngx_http_sluice_calls_close(void)
{
    ngx_http_sluice_worker_t *w = &ngx_http_sluice_worker;
    int i;

    for (i = 0; i < 2; i++) {
        while (w->ncalls[i] > 0) {
            sluice_call_close(w->calls[i][--w->ncalls[i]]);
        }
    }
    while (sl_idle != NULL) {
        ngx_http_sluice_link_t *l = sl_idle;

        sl_idle = l->next;
        sl_link_free(l);
    }
    sl_nidle = 0;
}

/* Decide on the event loop: SLUICE_CALL_DONE at once (ctx filled), or
** NGX_AGAIN with the call out (the phases resume when it is done). */
ngx_int_t
ngx_http_sluice_event_decide(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    int rc;

    ctx->call = sl_call_get(ctx->pol);
    if (ctx->call == NULL) {
        ctx->rc = SLUICE_ENOMEM;
        return NGX_OK;
    }
    rc = sluice_policy_begin(ctx->call, SLUICE_CALL_DECIDE, &ctx->req, &ctx->d,
                             NULL, 0);
    if (rc != SLUICE_CALL_SEND) {
        ctx->rc = rc == SLUICE_CALL_DONE ? SLUICE_OK : rc;
        ngx_http_sluice_call_put(ctx);
        return NGX_OK;
    }
    ctx->pending = 1;
    ctx->sync = 1;
    sl_send(ctx);
    ctx->sync = 0;
    if (!ctx->pending) {
        return NGX_OK; /* failed before anything went out */
    }
    r->main->blocked++;
    r->aio = 1;
    return NGX_AGAIN;
}

/* A job (a release, a settle, a report) in halves on the event
** loop; ctx is the start of the job's memory, freed when it is done.
** NGX_AGAIN: out, and j->resume (when set) waits for it. */
ngx_int_t
ngx_http_sluice_event_job(ngx_http_sluice_ctx_t *ctx, ngx_http_sluice_job_t *j)
{
    int rc;

    ctx->pol = j->pol;
    ctx->job = j;
    ctx->call = sl_call_get(j->pol);
    if (ctx->call == NULL) {
        ngx_free(ctx);
        return NGX_ERROR; /* a lease then expires by its TTL */
    }
    if (j->settle) {
        rc = sluice_policy_begin(ctx->call, SLUICE_CALL_SETTLE, &j->req, &j->d,
                                 &j->used, 1);
    } else if (j->lease_id) {
        j->d.lease_id = j->lease_id;
        rc = sluice_policy_begin(ctx->call, SLUICE_CALL_RELEASE, &j->req,
                                 &j->d, NULL, 0);
    } else {
        rc = sluice_policy_begin(ctx->call, SLUICE_CALL_DECIDE, &j->req,
                                 &ctx->d, NULL, 0);
    }
    if (rc == SLUICE_CALL_SEND) {
        ctx->pending = 1;
        ctx->sync = 1;
        sl_send(ctx);
        ctx->sync = 0;
    }
    if (!ctx->pending) {
        ngx_http_sluice_call_put(ctx);
        ngx_free(ctx);
        return NGX_OK;
    }
    if (j->resume != NULL) {
        j->resume->main->blocked++;
        j->resume->aio = 1;
        return NGX_AGAIN;
    }
    return NGX_OK;
}

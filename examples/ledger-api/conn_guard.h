/*
** conn_guard: deadlines for a connection's request head and body that run
** from when the phase began, not from the last byte received.
** libmicrohttpd's connection timeout is an idle timeout: it restarts on
** every byte, so a client sending one header byte every few seconds holds
** a connection for ever (slowloris).  Here a watchdog thread shuts down
** (shutdown(2), which libmicrohttpd sees as the peer closing) every
** connection whose phase is over its deadline:
**   head  from accept, or from the previous answer on a kept-alive
**         connection, until the request's headers are complete;
**   body  from then until the request is answered.
*/
#ifndef LEDGER_CONN_GUARD_H
#define LEDGER_CONN_GUARD_H
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <microhttpd.h>

typedef struct conn_guard conn_guard;

/* Start the watchdog.  NULL when out of memory or threads. */
conn_guard *conn_guard_start(int64_t head_ms, int64_t body_ms);
/* Stop it (after MHD_stop_daemon).  NULL is a no-op. */
void conn_guard_stop(conn_guard *g);

/* MHD_OPTION_NOTIFY_CONNECTION callback; cls is the guard. */
void conn_guard_notify(void *cls, struct MHD_Connection *c,
                       void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);
/* The headers are in: the body deadline starts. */
void conn_guard_head_done(conn_guard *g, struct MHD_Connection *c);
/* The request was answered: the next request's head deadline starts. */
void conn_guard_request_done(conn_guard *g, struct MHD_Connection *c);

#endif

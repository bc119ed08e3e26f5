/*
** small-api: the smallest complete service on sluice, to copy from.  An
** HTTP API (libmicrohttpd, one process, 127.0.0.1) whose every request goes
** through the policy (sluice_policy_decide) and is answered by the HTTP
** renderer: RateLimit headers on a 200, the 429 / 403 / 409 / 503 with
** Retry-After and a problem+json body.  State is in the "mem" store.
**
**   small-api [--port N] [--config POLICY]    (port 0: any free port)
**
** It prints "listening on 127.0.0.1:PORT" once it serves.  The key table
** stands in for real key authentication.  (A request's real cost, known
** after serving it, is reported with sluice_policy_settle() on a route of
** declared limits; this one charges the route's cost.)
*/
#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <sluice.h>

/* Who a key belongs to, as an authentication step would tell. */
static const struct {
  const char *key, *tenant, *tier;
} keys[] = {{"sk_demo_sandbox", "acme", "sandbox"},
            {"sk_demo_growth", "globex", "growth"}};

typedef struct { sluice_policy *pol; sluice_http *http; } service;

static const char unauthorized[] = "{\"type\":\"about:blank\",\"title\":"
    "\"Unauthorized\",\"status\":401,\"detail\":\"unknown API key\"}";

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static enum MHD_Result send_text(struct MHD_Connection *c, int status,
                                 const char *type, const char *body,
                                 struct MHD_Response **out) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  enum MHD_Result ok;
  if (r == NULL)
    return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  if (out != NULL) { /* the caller adds headers, then queues */
    *out = r;
    return MHD_YES;
  }
  ok = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ok;
}

/* The answer's headers onto r (Content-Type is set with the body). */
static enum MHD_Result add_headers(service *svc, const sluice_http_answer *a,
                                   struct MHD_Response *r) {
  sluice_http_header h[SLUICE_HTTP_MAX_HEADERS];
  char buf[SLUICE_HTTP_HEADER_BUF];
  size_t n = 0, i;
  if (sluice_http_answer_headers(svc->http, a, h, SLUICE_HTTP_MAX_HEADERS, &n,
                                 buf, sizeof buf, NULL) != SLUICE_OK)
    return MHD_NO;
  for (i = 0; i < n; i++)
    if (strcmp(h[i].name, "Content-Type") != 0 &&
        MHD_add_response_header(r, h[i].name, h[i].value) != MHD_YES)
      return MHD_NO;
  return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_len, void **state) {
  service *svc = cls;
  const char *auth, *tenant = NULL, *tier = NULL;
  const union MHD_ConnectionInfo *peer =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  char ip[INET6_ADDRSTRLEN] = "";
  sluice_request rq;
  sluice_decision d;
  sluice_http_answer a;
  struct MHD_Response *r = NULL;
  char body[2048];
  size_t len = 0, i;
  enum MHD_Result ok;
  int rc;
  (void)version, (void)upload;
  if (*state == NULL) { /* headers only so far: decide once they are all in */
    *state = c;
    return MHD_YES;
  }
  *upload_len = 0; /* bodies are not read in this example */
  auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_AUTHORIZATION);
  for (i = 0; auth && i < sizeof keys / sizeof keys[0]; i++)
    if (strncmp(auth, "Bearer ", 7) == 0 && strcmp(auth + 7, keys[i].key) == 0)
      tenant = keys[i].tenant, tier = keys[i].tier;
  if (tenant == NULL)
    return send_text(c, 401, "application/problem+json", unauthorized, NULL);

  memset(&rq, 0, sizeof rq);
  rq.tenant_id = tenant;
  rq.api_key_id = auth + 7; /* the policy hashes it before it is a key */
  rq.tier = tier;
  rq.method = method;
  rq.route = url;
  if (peer != NULL && peer->client_addr->sa_family == AF_INET)
    inet_ntop(AF_INET, &((struct sockaddr_in *)peer->client_addr)->sin_addr,
              ip, sizeof ip);
  rq.client_ip = ip[0] ? ip : NULL;
  rc = sluice_policy_decide(svc->pol, 1, &rq, &d, NULL);
  if (rc != SLUICE_OK) { /* no route matches, ...: the field, not its value */
    snprintf(body, sizeof body, "request field '%s': %s\n",
             d.invalid_field ? d.invalid_field : "?", sluice_strerror(rc));
    return send_text(c, 400, "text/plain", body, NULL);
  }
  if (sluice_http_answer_make(svc->http, &d, &rq, NULL, now_ns(), &a) !=
          SLUICE_OK ||
      sluice_http_answer_body(svc->http, &a, body, sizeof body, &len) !=
          SLUICE_OK)
    return MHD_NO;
  if (a.has_body)
    ok = send_text(c, a.status, "application/problem+json", body, &r);
  else /* admitted: the API's own answer */
    ok = send_text(c, a.status, "application/json", "{\"ok\":true}\n", &r);
  if (ok == MHD_YES && add_headers(svc, &a, r) == MHD_YES)
    ok = MHD_queue_response(c, (unsigned)a.status, r);
  else
    ok = MHD_NO;
  if (r != NULL)
    MHD_destroy_response(r);
  /* A heavy endpoint's lease is held while the work runs; here the work
  ** is done once the answer is queued. */
  if (d.lease_id != 0)
    sluice_policy_release(
        svc->pol, &rq,
        &(sluice_hold){.kind = SLUICE_HOLD_LEASE, .lease_id = d.lease_id});
  return ok;
}

int main(int argc, char **argv) {
  sluice_policy_options po;
  sluice_http_options ho = {.problem_base = "https://api.example.com/errors/"};
  service svc = {NULL, NULL};
  struct MHD_Daemon *mhd;
  const union MHD_DaemonInfo *info;
  unsigned port = 8080;
  char err[256] = "";
  sigset_t stop;
  int i, sig;
  memset(&po, 0, sizeof po);
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--port") == 0)
      port = (unsigned)atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--config") == 0)
      po.config_path = argv[i + 1];
    else
      break;
  }
  if (i != argc || port > 65535) {
    fprintf(stderr, "usage: small-api [--port N] [--config POLICY]\n");
    return 2;
  }
  po.errbuf = err;
  po.errlen = sizeof err;
  /* The key of the scope ids.  Random is right for one process on the mem
  ** store; processes sharing a store must share the secret. */
  if (getrandom(po.secret, sizeof po.secret, 0) != (ssize_t)sizeof po.secret ||
      sluice_policy_open(&po, &svc.pol) != SLUICE_OK ||
      sluice_http_open(&ho, &svc.http) != SLUICE_OK) {
    fprintf(stderr, "small-api: cannot open the policy: %s\n", err);
    return 1;
  }
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL); /* before MHD's threads start */
  mhd = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG,
                         (uint16_t)port, NULL, NULL, handle, &svc,
                         MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
                         MHD_OPTION_SOCK_ADDR,
                         (const struct sockaddr *)&(struct sockaddr_in){
                             .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)},
                         MHD_OPTION_END);
  info = mhd ? MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_BIND_PORT) : NULL;
  if (info == NULL) {
    fprintf(stderr, "small-api: cannot listen on 127.0.0.1:%u\n", port);
    return 1;
  }
  printf("listening on 127.0.0.1:%u\n", (unsigned)info->port);
  fflush(stdout);
  sigwait(&stop, &sig);
  MHD_stop_daemon(mhd);
  sluice_http_close(svc.http);
  sluice_policy_close(svc.pol);
  return 0;
}

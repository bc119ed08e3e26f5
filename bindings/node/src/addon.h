/*
** The sluice addon's shared declarations (N-API, C, no node-addon-api).
**
** One JS handle (an External) owns one sn_policy: a policy opened from a
** policy file on a store, the HTTP renderer the answers come from, and
** optionally a manual clock (tests replay traces at their own time).
** Calls come on the main thread; async calls run the store call on libuv's
** thread pool, so the policy and its store are used from several threads
** at once, which every built-in store allows (SLUICE_CAP_THREADSAFE).
*/
#ifndef SLUICE_NODE_ADDON_H
#define SLUICE_NODE_ADDON_H

#include <node_api.h>
#include <sluice.h>

/* Most attributes a request may carry to the addon; the policy file's own
** list is shorter (a scope has at most 4, a file a handful). */
#define SN_ATTRS_MAX 16
/* Room for a request's strings kept inline; a longer request is refused
** (each id is at most SLUICE_POLICY_ID_MAX bytes anyway). */
#define SN_STRBUF 4096

typedef struct sn_policy {
  sluice_policy *pol;
  sluice_http *http;
  sluice_clock *clock; /* a manual clock, or NULL: the real one */
  unsigned inflight;   /* async jobs not completed (main thread only) */
  int closed;          /* close() was called: free once inflight is 0 */
} sn_policy;

/* One request, copied out of JS so that it outlives the call (an async
** job) or is simply read in place (a sync one). */
typedef struct sn_request {
  sluice_request rq;
  sluice_attr attrs[SN_ATTRS_MAX];
  size_t used;
  char buf[SN_STRBUF];
} sn_request;

/* request.c: parse the flat array lib/sluice.js builds
** [method, route, tenant, key, tier, ip, cost, name1, value1, ...].
** Throws a JS error and returns non-zero on bad input. */
int sn_request_read(napi_env env, napi_value arr, sn_request *out);

/* answer.c: the decision and its rendered answer as a JS object. */
napi_value sn_answer_make(napi_env env, sn_policy *p, int rc,
                          const sluice_request *rq, const sluice_decision *d);

/* Throw a JS Error whose code is sluice's error name ("SLUICE_EINVAL"). */
void sn_throw(napi_env env, int rc, const char *what);

#define SN_CALL(env, call)                                                     \
  do {                                                                         \
    if ((call) != napi_ok) {                                                   \
      napi_throw_error((env), NULL, "N-API call failed: " #call);             \
      return NULL;                                                             \
    }                                                                          \
  } while (0)

#endif

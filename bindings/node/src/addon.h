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
  /* Strings whose storage outlives the policy's calls (the renderer's
  ** header names, the policy's limit names and units, sluice's error and
  ** outcome names), by address: JS gets their ids (answer.c) and asks for
  ** each text once.  Main thread only. */
  const char **str;
  int nstr, capstr;
  napi_ref out;  /* the Float64Array sync answers are written to */
  double *out_data;
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
  char buf[SN_STRBUF];
} sn_request;

/* request.c: read the NUL-separated request string lib/sluice.js joins
** (count: how many fields it joined).  Throws a JS error and returns
** non-zero on bad input. */
int sn_request_read(napi_env env, napi_value str, napi_value count,
                    sn_request *out);

/* The slots of an answer's Float64Array; lib/sluice.js reads the same. */
enum {
  SN_OUT_STATUS, SN_OUT_ALLOWED, SN_OUT_OUTCOME, SN_OUT_LIMIT, SN_OUT_UNIT,
  SN_OUT_REMAINING, SN_OUT_RETRY_MS, SN_OUT_COST, SN_OUT_FLAGS,
  SN_OUT_LEASE_LO, SN_OUT_LEASE_HI, SN_OUT_ERROR, SN_OUT_FIELD,
  SN_OUT_MESSAGE, SN_OUT_NHEADERS, SN_OUT_HAS_BODY,
  /* what sluice_policy_settle() reads of the decision, as 32-bit halves:
  ** its settle_check (0: nothing to settle) and its now_ns */
  SN_OUT_CHECK_LO, SN_OUT_CHECK_HI, SN_OUT_NOW_LO, SN_OUT_NOW_HI,
  SN_OUT_HEADERS, /* header name ids from here */
  SN_OUT_LEN = SN_OUT_HEADERS + SLUICE_HTTP_MAX_HEADERS
};

/* answer.c: a decision (or rc, its input error) and its rendered answer
** into out[SN_OUT_LEN] and *text (header values, one a line, then the
** body): room when it fits there (SN_ROOM fits every answer but one with
** a long body), else malloc'd; NULL for an input error.  Main thread only
** (the id table). */
int sn_answer_fill(sn_policy *p, int rc, const sluice_request *rq,
                   const sluice_decision *d, double *out, char *room,
                   size_t room_len, char **text, size_t *text_len);
/* answer.c: text as a JS string, text freed unless it is room; NULL with
** an exception. */
napi_value sn_answer_text(napi_env env, char *room, char *text, size_t len,
                          int ascii);
#define SN_ROOM (SLUICE_HTTP_HEADER_BUF + SLUICE_HTTP_MAX_HEADERS + 2048)

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

-- The part of libsluice's C API that resty.sluice calls, for LuaJIT's FFI.
--
-- Written out by hand, not generated from the headers: the headers are for
-- a C compiler (export macros, X-macros, #define constants, the 6.5 KB
-- configuration struct) and a rock installs plain Lua, with no compiler at
-- install time.  The text below is checked against the headers of the same
-- tree by the `resty-cdef` test (tests/resty/cdef_check.lua): every
-- function is redeclared after the real headers in a C file (a prototype
-- that differs does not compile), every constant of the enums is asserted
-- equal to the header's, and every field's offset and every struct's size
-- are compared between the C compiler and this FFI.  Names and spelling
-- follow the headers, so a change there is a change here.
local ffi = require "ffi"

local text = [[
typedef struct sluice_policy sluice_policy;
typedef struct sluice_http sluice_http;
typedef struct sluice_call sluice_call;
typedef struct sluice_clock sluice_clock;
typedef struct sluice_backend sluice_backend;
typedef struct sluice_allocator sluice_allocator;
struct sluice_event;
struct sluice_request;

enum {
  SLUICE_OK = 0,
  SLUICE_EINVAL = -30901,
  SLUICE_ERANGE = -30902,
  SLUICE_ENOTFOUND = -30905,
  SLUICE_EBACKEND = -30906,
  SLUICE_ETIMEDOUT = -30907,
  SLUICE_EUNAVAIL = -30908,
  SLUICE_CALL_DONE = 0,
  SLUICE_CALL_SEND = 1,
  SLUICE_CALL_MORE = 2,
  SLUICE_CALL_DECIDE = 0,
  SLUICE_CALL_RELEASE = 1,
  SLUICE_CALL_SETTLE = 2,
  SLUICE_HOLD_LEASE = 1,
  SLUICE_NAME_OUTCOME = 1,
  SLUICE_BINDING_LIMIT = 5,
  SLUICE_POLICY_SHADOW = 1,
  SLUICE_OPEN_TESTCLOCK = 4,
  SLUICE_HTTP_FORM_LEGACY = 0,
  SLUICE_HTTP_FORM_SF = 1,
  SLUICE_HTTP_FORM_BOTH = 2,
  SLUICE_HTTP_NO_JITTER = 1,
  SLUICE_HTTP_MAX_HEADERS = 12,
  SLUICE_HTTP_HEADER_BUF = 4352
};

typedef struct sluice_limiter_options {
  const char *store;
  const sluice_backend *backend;
  sluice_clock *clock;
  const sluice_allocator *alloc;
  unsigned flags;
} sluice_limiter_options;

typedef struct sluice_attr {
  const char *name;
  const char *value;
} sluice_attr;

typedef struct sluice_hold {
  int kind;
  int scope;
  uint64_t lease_id;
  const char *who;
  const char *why;
} sluice_hold;

typedef struct sluice_call_info {
  const void *bytes;
  size_t len;
  const char *host;
  int port;
  int slot;
  int replies;
  int result;
  int store_error;
} sluice_call_info;

typedef struct sluice_request {
  const char *tenant_id;
  const char *api_key_id;
  const char *tier;
  const char *method;
  const char *route;
  const char *client_ip;
  int64_t cost;
  const sluice_attr *attrs;
  size_t nattrs;
  void *reserved[6];
} sluice_request;

typedef struct sluice_decision_limit {
  const char *name;
  const char *unit;
  int64_t quota;
  int64_t window_ns;
  int64_t remaining;
  int64_t reset_ns;
  int64_t cost;
  unsigned flags;
} sluice_decision_limit;

typedef struct sluice_decision {
  int allowed;
  int outcome;
  int status;
  int verdict_status;
  unsigned flags;
  int64_t cost;
  char tier[32];
  int binding;
  int64_t limit;
  int64_t remaining;
  int64_t reset_ns;
  int64_t policy_window_ns;
  int64_t refill_rate;
  int64_t refill_period_ns;
  int64_t retry_after_ns;
  int penalty_status;
  int penalty_level;
  int64_t lockout_end_ns;
  int64_t strikes_remaining;
  uint64_t lease_id;
  int64_t lease_ttl_ns;
  int64_t now_ns;
  int store_error;
  const char *invalid_field;
  int64_t cap_limit;
  const char *limit_name;
  const char *limit_unit;
  uint64_t settle_check;
  int nlimits;
  sluice_decision_limit limits[8];
  const char *box_detail;
} sluice_decision;

typedef void (*sluice_policy_event_fn)(void *userdata,
                                       const struct sluice_event *ev);

typedef struct sluice_policy_options {
  struct sluice_limiter *limiter;
  const struct sluice_limiter_options *limiter_options;
  const struct sluice_policy_config *config;
  const char *config_path;
  uint8_t secret[16];
  sluice_policy_event_fn on_event;
  void *userdata;
  unsigned flags;
  char *errbuf;
  size_t errlen;
  const char *counters;
  const char *degraded_store;
  const char *deny_cache;
} sluice_policy_options;

typedef struct sluice_http_options {
  const char *problem_base;
  int header_form;
  unsigned flags;
  int64_t date_after_s;
  uint64_t (*rand)(void *ud);
  void *rand_ud;
} sluice_http_options;

typedef struct sluice_http_answer {
  int status;
  int outcome;
  int penalty;
  int retry_is_date;
  int has_body;
  int64_t retry_after_s;
  int64_t retry_at_s;
  int64_t lockout_ends_s;
  int64_t now_s;
  const sluice_decision *decision;
  const char *method;
  const char *route;
  const char *request_id;
} sluice_http_answer;

typedef struct sluice_http_header {
  const char *name;
  const char *value;
} sluice_http_header;

const char *sluice_strerror(int err);
const char *sluice_err_name(int err);
const char *sluice_version(unsigned *hex);
const char *sluice_name(int kind, int value);
int sluice_policy_open(const sluice_policy_options *opts, sluice_policy **out);
void sluice_policy_close(sluice_policy *p);
int sluice_policy_decide(sluice_policy *p, int n, const sluice_request *reqs,
                         sluice_decision *ds, int *rcs);
int sluice_policy_release(sluice_policy *p, const sluice_request *req,
                          const sluice_hold *h);
int sluice_call_open(sluice_policy *p, sluice_call **out);
void sluice_call_close(sluice_call *call);
int sluice_policy_begin(sluice_call *call, int kind, const sluice_request *q,
                        sluice_decision *d, const sluice_attr *actual,
                        size_t nactual);
int sluice_policy_finish(sluice_call *call, int err, const void *reply,
                         size_t len, sluice_decision *d);
int sluice_policy_settle(sluice_policy *p, const sluice_request *req,
                         sluice_decision *d, const sluice_attr *actual,
                         size_t nactual);
int sluice_call_get(const sluice_call *call, sluice_call_info *out);
int sluice_http_open(const sluice_http_options *opts, sluice_http **out);
void sluice_http_close(sluice_http *h);
int sluice_http_answer_make(sluice_http *h, const sluice_decision *d,
                            const sluice_request *req, const char *request_id,
                            int64_t now_ns, sluice_http_answer *a);
int sluice_http_answer_headers(const sluice_http *h,
                               const sluice_http_answer *a,
                               sluice_http_header *hdrs, size_t cap,
                               size_t *n, char *buf, size_t buflen,
                               size_t *needed);
int sluice_http_answer_body(const sluice_http *h, const sluice_http_answer *a,
                            char *buf, size_t buflen, size_t *len);
]]

-- Declared once per Lua state, whoever requires this first (a second
-- ffi.cdef of the same struct is an error).
if not pcall(ffi.typeof, "sluice_http_answer") then
  ffi.cdef(text)
end

return { text = text }

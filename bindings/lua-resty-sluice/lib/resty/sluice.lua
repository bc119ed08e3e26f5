-- resty.sluice: sluice's policy decisions in OpenResty, over LuaJIT's FFI
-- on libsluice.  The decision, the RateLimit headers, Retry-After and the
-- problem+json body all come from the C library (sluice_policy_decide,
-- sluice_http_answer_*): this file moves
-- values between Lua and C and nothing else, so an answer here is byte for
-- byte the one the C library gives.  docs/openresty.md has the usage.
local ffi = require "ffi"
require "resty.sluice.cdef"

local ffi_new, ffi_string, ffi_fill, ffi_copy, ffi_cast = ffi.new, ffi.string, ffi.fill, ffi.copy, ffi.cast
local tostring, tonumber, type, pairs, select = tostring, tonumber, type, pairs, select
local ngx = ngx -- nil outside OpenResty (the Kong adapter's tests)
local add_header = ngx and require("ngx.resp").add_header

local _M = { _VERSION = "0.1.0" }
local mt = { __index = _M }

-- The most attributes one request may carry (a policy's scopes use at most
-- 4 each; a request names what its routes need).
local MAX_ATTRS = 32
local HEADERS_MAX = 12   -- SLUICE_HTTP_MAX_HEADERS, checked by resty-cdef
local HEADER_BUF = 4352  -- SLUICE_HTTP_HEADER_BUF

local libs = {}
local function load_lib(path)
  local key = path or ""
  if libs[key] then return libs[key] end
  local ok, lib = pcall(ffi.load, path or "sluice")
  if not ok and not path then
    -- Only the runtime package installed (no libsluice.so symlink).
    ok, lib = pcall(ffi.load, "libsluice.so.0")
  end
  if not ok then return nil, "cannot load libsluice: " .. tostring(lib) end
  libs[key] = lib
  return lib
end

local function cerr(C, rc)
  return ffi_string(C.sluice_err_name(rc)) .. ": " .. ffi_string(C.sluice_strerror(rc))
end

local forms = { legacy = 0, sf = 1, both = 2 } -- SLUICE_HTTP_FORM_*

-- A header's name is in the library's static storage (sluice/http.h), so
-- its Lua string is made once, kept by the name's address, instead of
-- once per header sent.
local uintptr_t = ffi.typeof("uintptr_t")
local header_names = {}
local function header_name(p)
  local k = tonumber(ffi_cast(uintptr_t, p))
  local s = header_names[k]
  if not s then
    s = ffi_string(p)
    header_names[k] = s
  end
  return s
end
local decide_redis

local function hex16(s)
  if type(s) ~= "string" or not s:match("^%x+$") or #s ~= 32 then return nil end
  local b = ffi_new("uint8_t[16]")
  for i = 0, 15 do b[i] = tonumber(s:sub(2 * i + 1, 2 * i + 2), 16) end
  return b
end

--- Open a policy.  opts:
--   policy        path of the policy file (required)
--   store         the store string: "shm:name=/NAME;create=1;capacity=N"
--                 (every worker naming it shares it), "mem" (one worker's)
--   secret        32 hex digits (required): the key of the scope ids, the
--                 same in every process sharing the store
--   problem_base  the problem types' base URI (default https://errors.invalid/)
--   header_form   "legacy" (default), "sf" or "both"
--   admission_headers
--                 false: an admission is sent no RateLimit fields (a
--                 refusal's answer is whole); default true
--   jitter        false: no random addition to Retry-After (default true)
--   shadow        true: decide and record, enforce nothing
--   counters, degraded_store, deny_cache
--                 host segments, as sluice_policy_options' ("shm:name=/N")
--   library       path of libsluice.so (default: the loader's search)
--   redis_timeout_ms, redis_connect_timeout_ms (default 20 each),
--   redis_keepalive_ms (60000), redis_pool_size (64), redis_password
--                 a redis store's cosockets (the store string's own
--                 timeouts and password are its blocking client's)
--   test_clock    true: a store with its own clock (Redis) decides at the
--                 worker's instead (replaying tests; not for production)
-- Returns the object, or nil and a message.
function _M.new(opts)
  if type(opts) ~= "table" then return nil, "opts must be a table" end
  local C, err = load_lib(opts.library)
  if not C then return nil, err end
  if type(opts.policy) ~= "string" then return nil, "opts.policy (a file path) is required" end
  if type(opts.store) ~= "string" then return nil, "opts.store is required" end
  local secret = hex16(opts.secret)
  if not secret then return nil, "opts.secret must be 32 hex digits" end
  local form = forms[opts.header_form or "legacy"]
  if not form then return nil, "opts.header_form must be legacy, sf or both" end
  if opts.admission_headers ~= nil and type(opts.admission_headers) ~= "boolean" then
    return nil, "opts.admission_headers must be true or false"
  end

  local lo = ffi_new("sluice_limiter_options")
  lo.store = opts.store
  -- Tests: a store with its own clock (Redis's TIME) decides at the
  -- worker's instead, the decision's now_ns, so a replay can match it.
  if opts.test_clock then lo.flags = C.SLUICE_OPEN_TESTCLOCK end
  local errbuf = ffi_new("char[512]")
  local po = ffi_new("sluice_policy_options")
  po.limiter_options = lo
  po.config_path = opts.policy
  ffi_copy(po.secret, secret, 16)
  po.errbuf, po.errlen = errbuf, 512
  po.flags = opts.shadow and C.SLUICE_POLICY_SHADOW or 0
  po.counters = opts.counters
  po.degraded_store = opts.degraded_store
  po.deny_cache = opts.deny_cache
  local out = ffi_new("sluice_policy *[1]")
  local rc = C.sluice_policy_open(po, out)
  if rc ~= 0 then
    local msg = ffi_string(errbuf)
    return nil, "sluice_policy_open: " .. cerr(C, rc) .. (msg ~= "" and " (" .. msg .. ")" or "")
  end
  -- The decision handles of a Redis store go before their policy.
  local calls_all = {}
  local pol = ffi.gc(out[0], function(p)
    for i = 1, #calls_all do C.sluice_call_close(calls_all[i]) end
    C.sluice_policy_close(p)
  end)
  local redis
  if opts.store:match("^redis") then
    redis = {
      timeout = opts.redis_timeout_ms or 20,
      connect_timeout = opts.redis_connect_timeout_ms or opts.redis_timeout_ms or 20,
      keepalive = opts.redis_keepalive_ms or 60000,
      pool_size = opts.redis_pool_size or 64,
      password = opts.redis_password,
      free = {}, all = calls_all,
    }
  end

  local ho = ffi_new("sluice_http_options")
  ho.problem_base = opts.problem_base or "https://errors.invalid/"
  ho.header_form = form
  ho.flags = opts.jitter == false and C.SLUICE_HTTP_NO_JITTER or 0
  local hout = ffi_new("sluice_http *[1]")
  rc = C.sluice_http_open(ho, hout)
  if rc ~= 0 then return nil, "sluice_http_open: " .. cerr(C, rc) end

  return setmetatable({
    C = C, pol = pol, http = ffi.gc(hout[0], C.sluice_http_close), redis = redis,
    quiet = opts.admission_headers == false,
    -- Scratch space, used only within a stretch of code that does not
    -- yield (a worker runs one such stretch at a time): a shm or mem
    -- decision, and every rendering.  A Redis decision, which yields on
    -- its cosocket, has its own (take_call).
    q = ffi_new("sluice_request"), attrs = ffi_new("sluice_attr[?]", MAX_ATTRS),
    anchor = {}, ans = ffi_new("sluice_http_answer"),
    hdrs = ffi_new("sluice_http_header[?]", HEADERS_MAX),
    hbuf = ffi_new("char[?]", HEADER_BUF), n = ffi_new("size_t[1]"),
    blen = ffi_new("size_t[1]"),
    bcap = 2048, body = ffi_new("char[?]", 2048),
  }, mt)
end

-- The request table, into the scratch sluice_request.  Strings go in as
-- pointers into the Lua strings, which the table (or self.anchor, for
-- values converted here) keeps alive through the call.
local REQ_SIZE = ffi.sizeof("sluice_request")
-- ffi.new(string) parses its declaration every time: the types, once.
local decision_t = ffi.typeof("sluice_decision")
local DECISION_SIZE = ffi.sizeof(decision_t)
local function fill(self, req, q, a, anchor)
  -- The built-in endpoint classes' fields are gone: refused, never read
  -- as something else (a request would silently cost what its route says).
  if req.cost ~= nil or req.class ~= nil then
    return nil, "req." .. (req.cost ~= nil and "cost" or "class")
                .. " is not read: a request is its method, route and attrs,"
                .. " a cost an attribute its route's cost reads"
  end
  -- Zeroed, then only the fields given are stored: access_by_lua runs
  -- mostly in LuaJIT's interpreter, where each cdata store costs.
  ffi_fill(q, REQ_SIZE)
  local v = req.tenant
  if v then q.tenant_id = v end
  v = req.key
  if v then q.api_key_id = v end
  v = req.tier
  if v then q.tier = v end
  v = req.method
  if v then q.method = v end
  v = req.route
  if v then q.route = v end
  v = req.client_ip
  if v then q.client_ip = v end
  local attrs = req.attrs
  if attrs then
    local n = 0
    for k, v in pairs(attrs) do
      if n == MAX_ATTRS then return nil, "more than " .. MAX_ATTRS .. " attributes" end
      if type(k) ~= "string" then return nil, "an attribute's name must be a string" end
      if type(v) ~= "string" then
        v = tostring(v)
        anchor[n + 1] = v
      end
      a[n].name, a[n].value = k, v
      n = n + 1
    end
    q.attrs, q.nattrs = a, n
  end
  return q
end

local function input_error(C, rc, d)
  local f = d.invalid_field
  return cerr(C, rc) .. (f ~= nil and " (" .. ffi_string(f) .. ")" or "")
end

-- ------------------------------------------------------------- Redis ---
-- A Redis store decides in two halves (sluice/halves.h): the library hands
-- over the bytes of one call and the node to send them to, the call goes
-- out on a cosocket (nginx's event loop: the worker serves other requests
-- while Redis answers), and the reply goes back to the library, which
-- answers with the decision or the next call (a redirection, a script to
-- load).  Each decision in flight has its own handle and request, taken
-- from a pool of the worker's.

-- Phases where nginx lets Lua open cosockets.
local cosocket_phases = { rewrite = true, access = true, content = true, timer = true,
                          ssl_cert = true, ssl_session_fetch = true }

local function take_call(self)
  local r, C = self.redis, self.C
  local free = r.free
  local e = free[#free]
  if e then
    free[#free] = nil
    return e
  end
  local out = ffi_new("sluice_call *[1]")
  local rc = C.sluice_call_open(self.pol, out)
  if rc ~= 0 then return nil, "sluice_call_open: " .. cerr(C, rc) end
  r.all[#r.all + 1] = out[0]
  return { call = out[0], q = ffi_new("sluice_request"), ci = ffi_new("sluice_call_info"),
           attrs = ffi_new("sluice_attr[?]", MAX_ATTRS), anchor = {},
           d = ffi_new(decision_t) }
end

-- A cosocket's error, as the library's: a timeout, or the node unusable.
local function sock_err(C, err)
  return err == "timeout" and C.SLUICE_ETIMEDOUT or C.SLUICE_EUNAVAIL
end

local function resp(...)
  local t = { "*", select("#", ...), "\r\n" }
  for i = 1, select("#", ...) do
    local a = select(i, ...)
    t[#t + 1] = "$" .. #a .. "\r\n" .. a .. "\r\n"
  end
  return table.concat(t)
end

-- One read of a reply, handed with what came before to the library: its
-- status and the bytes so far, or nil and the cosocket's error.
local function take(C, sock, call, buf, d)
  local chunk, err = sock:receiveany(65536)
  if not chunk then return nil, err end
  buf = buf and buf .. chunk or chunk -- one read (the usual) is not copied
  return C.sluice_policy_finish(call, 0, buf, #buf, d), buf
end

-- Carry the call out on e's handle to its node; the library's next status.
-- The usual call is one send and one read: no loop is entered for it
-- (loops are where LuaJIT starts its traces; a loop run once a call
-- aborts the trace of everything around it, leaving it interpreted).
local function carry(self, e, d)
  local C, r, call, ci = self.C, self.redis, e.call, e.ci
  C.sluice_call_get(call, ci)
  local bytes = ffi_string(ci.bytes, ci.len)
  local host, port = ffi_string(ci.host), ci.port
  local sock = ngx.socket.tcp()
  sock:settimeouts(r.connect_timeout, r.timeout, r.timeout)
  local ok, err
  if port == 0 then
    ok, err = sock:connect("unix:" .. host)
  else
    ok, err = sock:connect(host, port)
  end
  if not ok then return C.sluice_policy_finish(call, sock_err(C, err), nil, 0, d) end
  if r.password and sock:getreusedtimes() == 0 then
    -- A new connection authenticates first, as the store's own would.
    ok, err = sock:send(resp("AUTH", r.password))
    local line = ok and sock:receive("*l")
    if line ~= "+OK" then
      sock:close()
      return C.sluice_policy_finish(call, C.SLUICE_EUNAVAIL, nil, 0, d)
    end
  end
  ok, err = sock:send(bytes)
  if not ok then
    sock:close()
    return C.sluice_policy_finish(call, sock_err(C, err), nil, 0, d)
  end
  local rc, buf = take(C, sock, call, nil, d)
  while rc == C.SLUICE_CALL_MORE do rc, buf = take(C, sock, call, buf, d) end
  if not rc then
    sock:close()
    return C.sluice_policy_finish(call, sock_err(C, buf), nil, 0, d)
  end
  if rc < 0 or (rc == C.SLUICE_CALL_DONE and C.sluice_call_get(call, ci) == 0
                and ci.store_error < 0) then
    sock:close() -- what it carries next would be out of step
  else
    sock:setkeepalive(r.keepalive, r.pool_size)
  end
  return rc
end

-- Carry calls until the library has its answer: one, or more for a
-- redirection, a script to load, the request's next group.
local SEND = ffi.C.SLUICE_CALL_SEND
local function carry_all(self, e, d, rc)
  if rc == SEND then rc = carry(self, e, d) end
  while rc == SEND do rc = carry(self, e, d) end
  return rc
end

decide_redis = function(self, req, d)
  local C = self.C
  if not cosocket_phases[ngx.get_phase()] then
    return nil, "a redis store decides where cosockets run (access_by_lua...), not in "
                .. ngx.get_phase()
  end
  local e, err = take_call(self)
  if not e then return nil, err end
  d = d or e.d
  local q
  q, err = fill(self, req, e.q, e.attrs, e.anchor)
  local rc = C.SLUICE_EINVAL
  if q then
    rc = C.sluice_policy_begin(e.call, C.SLUICE_CALL_DECIDE, q, d, nil, 0)
    rc = carry_all(self, e, d, rc)
  end
  -- The request and its strings are read until DONE: req and e.anchor
  -- held them; the handle goes back for the next decision.
  local free = self.redis.free
  free[#free + 1] = e
  if not q then return nil, err end
  if rc ~= C.SLUICE_CALL_DONE then return nil, input_error(C, rc, d) end
  -- q (and d, when it is the handle's) stays this request's until the
  -- worker yields again: enough to render the answer with.
  return d, q
end

-- What the release or settle just carried on e's handle returned.
local function call_result(C, e)
  C.sluice_call_get(e.call, e.ci)
  return e.ci.result
end

-- Give back a lease through the two halves (a cosocket phase only).
local function release_redis(self, req, lease_id)
  local C = self.C
  local e, err = take_call(self)
  if not e then return nil, err end
  local q
  q, err = fill(self, req, e.q, e.attrs, e.anchor)
  local rc = C.SLUICE_EINVAL
  if q then
    e.d.lease_id = lease_id
    rc = C.sluice_policy_begin(e.call, C.SLUICE_CALL_RELEASE, q, e.d, nil, 0)
    rc = carry_all(self, e, nil, rc)
    if rc == C.SLUICE_CALL_DONE then rc = call_result(C, e) end
  end
  local free = self.redis.free
  free[#free + 1] = e
  if not q then return nil, err end
  if rc ~= 0 then return nil, cerr(C, rc) end
  return true
end

-- The log phase has no cosockets: a timer of this worker carries a Redis
-- call (fn: release_redis or settle_redis), its error to the error log.
local function carried(premature, what, fn, self, req, x, y)
  local done, err = fn(self, req, x, y)
  if not done then ngx.log(ngx.ERR, "sluice: ", what, ": ", err) end
end

local function later(what, fn, self, req, x, y)
  local ok, err = ngx.timer.at(0, carried, what, fn, self, req, x, y)
  if not ok then return nil, "ngx.timer.at: " .. tostring(err) end
  return true
end

-- The reported attributes of a settle, as a request of attributes only
-- (fill's own reading of attrs) into e's second request: the attrs
-- pointer and count, or nil and a message.
local function fill_actual(self, e, actual)
  e.sq = e.sq or ffi_new("sluice_request")
  e.sattrs = e.sattrs or ffi_new("sluice_attr[?]", MAX_ATTRS)
  e.sanchor = e.sanchor or {}
  local q, err = fill(self, { attrs = actual }, e.sq, e.sattrs, e.sanchor)
  if not q then return nil, err end
  return q
end

-- Settle through the two halves (a cosocket phase only).
local function settle_redis(self, req, d, actual)
  local C = self.C
  local e, err = take_call(self)
  if not e then return nil, err end
  local q, a
  q, err = fill(self, req, e.q, e.attrs, e.anchor)
  if q then a, err = fill_actual(self, e, actual) end
  local rc = C.SLUICE_EINVAL
  if a then
    rc = C.sluice_policy_begin(e.call, C.SLUICE_CALL_SETTLE, q, d, a.attrs, a.nattrs)
    rc = carry_all(self, e, nil, rc)
    if rc == C.SLUICE_CALL_DONE then rc = call_result(C, e) end
  end
  local free = self.redis.free
  free[#free + 1] = e
  if not a then return nil, err end
  if rc ~= 0 then return nil, input_error(C, rc, d) end
  return true
end

--- Decide one request.  req: tenant, key, tier, method, route,
-- client_ip, and attrs: a table of the attributes the policy file
-- declares, name -> value (etc/ledger.conf's `ledger`, `export_range_s`,
-- `subject`, `result`; a cost the route reads from one, as `tokens`).  d: a
-- sluice_decision to fill (default: a new one).  Returns the decision
-- (d.allowed, d.status, d.limit_name...), or nil and a message for a
-- request the policy refuses to decide (nothing was recorded).
function _M.decide(self, req, d)
  d = d or decision_t()
  if self.redis then
    local err
    d, err = decide_redis(self, req, d)
    if not d then return nil, err end
    return d
  end
  local q, err = fill(self, req, self.q, self.attrs, self.anchor)
  if not q then return nil, err end
  local rc = self.C.sluice_policy_decide(self.pol, 1, q, d, nil)
  if rc ~= 0 then return nil, input_error(self.C, rc, d) end
  return d
end

-- Make the answer of decision d for the request q (filled), and
-- render its headers into self.hdrs (self.n[0] of them).  Returns 0 or
-- the library's error.
local function make(self, d, q, request_id)
  local C, ans = self.C, self.ans
  local rc = C.sluice_http_answer_make(self.http, d, q, request_id, d.now_ns, ans)
  if rc == 0 then
    rc = C.sluice_http_answer_headers(self.http, ans, self.hdrs, HEADERS_MAX, self.n,
                                      self.hbuf, HEADER_BUF, nil)
  end
  return rc
end

-- The problem+json body of the answer made last, or nil (an admission),
-- or nil and the library's error.
local function body_of(self)
  local C, ans, n = self.C, self.ans, self.blen
  if ans.has_body == 0 then return nil end
  local rc = C.sluice_http_answer_body(self.http, ans, self.body, self.bcap, n)
  if rc == C.SLUICE_ERANGE then
    self.bcap = tonumber(n[0])
    self.body = ffi_new("char[?]", self.bcap)
    rc = C.sluice_http_answer_body(self.http, ans, self.body, self.bcap, n)
  end
  if rc ~= 0 then return nil, rc end
  return ffi_string(self.body, n[0])
end

local function render(self, d, request_id)
  local C = self.C
  local rc = make(self, d, self.q, request_id)
  if rc ~= 0 then return nil, "rendering the answer: " .. cerr(C, rc) end
  local hdrs, out = self.hdrs, {}
  for i = 0, tonumber(self.n[0]) - 1 do
    out[2 * i + 1] = header_name(hdrs[i].name)
    out[2 * i + 2] = ffi_string(hdrs[i].value)
  end
  local body, brc = body_of(self)
  if brc then return nil, "rendering the body: " .. cerr(C, brc) end
  return self.ans.status, out, body
end

--- The answer of decision d to request req: status, the headers as a flat
-- list {name1, value1, name2, value2, ...} (RateLimit fields, Retry-After,
-- X-Penalty-Box-Status, Content-Type), and the problem+json body (nil for
-- an admission).  request_id (optional) goes into the body.  Or nil and a
-- message.
function _M.answer(self, d, req, request_id)
  local q, err = fill(self, req, self.q, self.attrs, self.anchor)
  if not q then return nil, err end
  local status, hdrs, body = render(self, d, request_id)
  if status and self.quiet and d.allowed ~= 0 then hdrs = {} end
  return status, hdrs, body
end

-- A route the problem body cannot carry (not UTF-8, over 1024 bytes):
-- percent-encoded and cut, as the nginx module does.
local function safe_text(s)
  s = ngx.escape_uri(s)
  if #s > 1024 then
    s = s:sub(1, 1024):gsub("%%%x?$", "")
  end
  return s
end

--- In access_by_lua*: decide the current request and answer it.  req as
-- for decide(); method, route and client_ip default to the request's.
-- Allowed: the RateLimit headers are set and the decision returned (the
-- request goes on).  Refused: the status, headers and problem+json body
-- are sent and the request ends here, its decision in ngx.ctx.sluice (for
-- log_by_lua: d.outcome, limit_name(d)...).  A lease the decision took is
-- remembered for log() to release.  Or nil and a message when the policy
-- refuses to decide the request (nothing is sent: answer it yourself).
-- d (optional, shm and mem stores): a sluice_decision to fill instead of
-- a new one, which a worker may reuse for every request (access() does not
-- yield there), sparing each request an allocation; a Redis store's
-- decision yields, so it always fills one of its own.
local admit
function _M.access(self, req, d)
  local var = ngx.var
  if not req.method then req.method = ngx.req.get_method() end
  if not req.route then req.route = var.uri end
  if not req.client_ip then req.client_ip = var.remote_addr end
  return admit(self, req, d)
end

-- The rest of access(), in a function of its own so that LuaJIT compiles
-- it: access_by_lua code runs in the interpreter, and a hot function is
-- compiled from its entry to its return only if nothing on the way
-- aborts the trace, which reading ngx.var does (its metamethod returns
-- ffi.string's result, a return LuaJIT does not record).  So ngx.var is
-- read above, and here only on the refusal's path.
admit = function(self, req, given)
  local C = self.C
  local d, q, err, rc
  if self.redis then
    -- Decided into the handle's decision (the call yields: a worker's d
    -- would be another request's meanwhile), then copied to the caller's
    -- d, or a new one, before anything can yield again.
    d, q = decide_redis(self, req, nil)
    if not d then return nil, q end
    local mine = given or decision_t()
    ffi_copy(mine, d, DECISION_SIZE)
    d = mine
  else
    q, err = fill(self, req, self.q, self.attrs, self.anchor)
    if not q then return nil, err end
    d = given or decision_t()
    rc = C.sluice_policy_decide(self.pol, 1, q, d, nil)
    if rc ~= 0 then return nil, input_error(C, rc, d) end
  end
  -- ngx.ctx only where needed: making it costs every request that asks.
  if d.lease_id ~= 0 then
    ngx.ctx.sluice_lease = { self, req, d.lease_id }
  end
  local allowed = d.allowed ~= 0
  if not allowed then
    -- kept for the log phase, when the caller's d serves other requests
    local kept = d
    if given then
      kept = decision_t()
      ffi_copy(kept, d, DECISION_SIZE)
    end
    ngx.ctx.sluice = kept
  end
  if allowed and (d.limit <= 0 or self.quiet) then return d end
  local rid = not allowed and ngx.var.request_id or nil
  rc = make(self, d, q, rid)
  local body, brc
  if rc == 0 and not allowed then body, brc = body_of(self) end
  if rc ~= 0 or brc then
    -- A method or route the body cannot hold: say them escaped.
    q.method, q.route = safe_text(req.method), safe_text(req.route)
    rc = make(self, d, q, rid)
    if rc == 0 and not allowed then body, brc = body_of(self) end
    if rc ~= 0 or brc then return nil, "rendering the answer: " .. cerr(C, rc ~= 0 and rc or brc) end
  end
  -- Added, not set: the answer's fields are new to this response (and a
  -- set would first look each name up among the headers already there).
  local hdrs = self.hdrs
  for i = 0, tonumber(self.n[0]) - 1 do
    add_header(header_name(hdrs[i].name), ffi_string(hdrs[i].value))
  end
  if allowed then return d end
  body = body or ""
  ngx.header["Content-Length"] = #body
  ngx.status = self.ans.status
  ngx.print(body)
  return ngx.exit(ngx.HTTP_OK)
end

--- Release a lease (d.lease_id) taken for req.  Returns true, or nil and a
-- message (SLUICE_ENOTFOUND: it had expired and was reclaimed).  On Redis,
-- in a phase without cosockets (log_by_lua), the release goes out from a
-- timer of the worker and true means it was scheduled.
function _M.release(self, req, lease_id)
  if self.redis then
    if cosocket_phases[ngx.get_phase()] then return release_redis(self, req, lease_id) end
    return later("releasing a lease", release_redis, self, req, lease_id)
  end
  local q, err = fill(self, req, self.q, self.attrs, self.anchor)
  if not q then return nil, err end
  local h = self.hold
  if not h then
    h = ffi_new("sluice_hold")
    h.kind = self.C.SLUICE_HOLD_LEASE
    self.hold = h
  end
  h.lease_id = lease_id
  local rc = self.C.sluice_policy_release(self.pol, q, h)
  if rc ~= 0 then return nil, cerr(self.C, rc) end
  return true
end

--- Settle decision d of req (as decided) at its real cost once the
-- response is known (docs/policy.md "Settling a request's real cost"):
-- actual is a table of the attributes the route's costs read and their
-- real values ({ tokens = 1234 }).  Returns true (d.flags then carries
-- SLUICE_DECISION_SETTLED), or nil and a message: SLUICE_ENOTFOUND
-- (nothing to settle), SLUICE_EEXIST (settled already), an input error,
-- a store error.  On Redis, in a phase without cosockets (log_by_lua),
-- the settle goes out from a timer of the worker (as release does) and
-- true means it was scheduled; req, d and actual must then be left as
-- they are.
function _M.settle(self, req, d, actual)
  if d.settle_check == 0 then
    return nil, cerr(self.C, self.C.SLUICE_ENOTFOUND) -- no store call, no timer
  end
  if self.redis then
    if cosocket_phases[ngx.get_phase()] then return settle_redis(self, req, d, actual) end
    return later("settling a cost", settle_redis, self, req, d, actual)
  end
  local q, err = fill(self, req, self.q, self.attrs, self.anchor)
  if not q then return nil, err end
  local a
  a, err = fill_actual(self, self, actual)
  if not a then return nil, err end
  local rc = self.C.sluice_policy_settle(self.pol, q, d, a.attrs, a.nattrs)
  if rc ~= 0 then return nil, input_error(self.C, rc, d) end
  return true
end

local function report_redis(self, req)
  return decide_redis(self, req, decision_t())
end

--- Report what the upstream said of req (as decided), once it has
-- answered (header_filter_by_lua*, log_by_lua*): req is decided again
-- with one more attribute, name = value (a sign-in's result = "bad_secret";
-- etc/ledger.conf's header names them), which a route's reported strikes
-- count (docs/policy.md "Declared penalties").  req itself is left as it
-- is.  Returns the report's decision; on Redis outside a cosocket phase a
-- timer of the worker carries it and true means it was scheduled; or nil
-- and a message.
function _M.report(self, req, name, value)
  local attrs = {}
  if req.attrs then
    for k, v in pairs(req.attrs) do attrs[k] = v end
  end
  attrs[name] = value
  local rep = { tenant = req.tenant, key = req.key, tier = req.tier,
                method = req.method, route = req.route,
                client_ip = req.client_ip, attrs = attrs }
  if self.redis and not cosocket_phases[ngx.get_phase()] then
    return later("reporting " .. tostring(name), report_redis, self, rep)
  end
  return self:decide(rep)
end

--- In log_by_lua*: release the lease access() took for this request, if
-- any.  Returns true, or nil and a message.
function _M.log()
  local l = ngx.ctx.sluice_lease
  if not l then return true end
  ngx.ctx.sluice_lease = nil
  return l[1]:release(l[2], l[3])
end

--- Names for logs: "allow", "throttled"...
function _M.outcome_name(self, d)
  return ffi_string(self.C.sluice_name(self.C.SLUICE_NAME_OUTCOME, d.outcome))
end

--- The binding limit's name (a policy's declared limit), or nil.
function _M.limit_name(d)
  return d.limit_name ~= nil and ffi_string(d.limit_name) or nil
end

return _M

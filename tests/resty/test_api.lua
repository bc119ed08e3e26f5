-- resty.sluice's calls outside nginx (plain LuaJIT, a mem store): what
-- new() refuses and says, what decide() and answer() return.  The nginx
-- suites (test_resty.py) hold the answers against the C library's.
--
--   luajit test_api.lua LIBSLUICE
local lib = arg[1]
local sluice = require "resty.sluice"
local SECRET = "00112233445566778899aabbccddeeff"

-- Limits that give nothing back while the test runs (an hour per unit).
local policy = os.tmpname()
do
  local f = assert(io.open(policy, "w"))
  f:write([[
attributes = [ "user", "tokens" ];
limits = {
  core = { algorithm = "gcra"; scope = [ "user" ];
           rate = 1; period_ms = 3600000; burst = 6; unit = "requests"; };
  tokens = { algorithm = "gcra"; scope = [ "user" ];
             rate = 1; period_ms = 3600000; burst = 300; unit = "tokens"; };
};
routes = (
  { method = "POST"; route = "/v1/complete";
    limits = ( { limit = "tokens"; cost = { attr = "tokens"; max = 300; }; } ); },
  { method = "*"; route = "/v1/*"; limits = ( "core" ); }
);
]])
  f:close()
end

-- Reported strikes: the upstream's status as the attribute result (the
-- bindings' tests' one sign-in policy).
local login_policy = (arg[0]:match("^(.*)/") or ".") .. "/../common/login.conf"

local failed, passed = 0, 0
local function test(name, fn)
  local ok, err = pcall(fn)
  if ok then passed = passed + 1; print("ok   " .. name)
  else failed = failed + 1; print("FAIL " .. name .. ": " .. tostring(err)) end
end
local function open(over)
  local o = { policy = policy, store = "mem", secret = SECRET, library = lib, jitter = false }
  for k, v in pairs(over or {}) do o[k] = v end
  return sluice.new(o)
end
local function refused(over, want)
  local lim, err = open(over)
  assert(lim == nil, "opened")
  assert(err and err:find(want, 1, true), tostring(err))
end

test("_VERSION", function() assert(sluice._VERSION:match("^%d+%.%d+%.%d+$")) end)

test("new() refuses what it cannot open, naming it", function()
  refused({ policy = false }, "opts.policy")
  refused({ store = false }, "opts.store")
  refused({ secret = "00" }, "32 hex digits")
  refused({ header_form = "xml" }, "header_form")
  refused({ admission_headers = "no" }, "admission_headers")
  refused({ library = "/nonexistent/libsluice.so" }, "cannot load libsluice")
  refused({ store = "nosuch:x=1" }, "SLUICE_EINVAL")
  local bad = os.tmpname()
  local f = assert(io.open(bad, "w"))
  f:write("limits = { x = { algorithm = \"gcra\"; scope = [ \"nosuch\" ]; };\n};\n")
  f:close()
  refused({ policy = bad }, bad .. ":")
  os.remove(bad)
end)

test("decide() and answer(): admissions, then the library's 429", function()
  local lim = assert(open())
  local req = { method = "GET", route = "/v1/items", attrs = { user = "ann" } }
  local d, status, hdrs, body
  for i = 1, 6 do
    d = assert(lim:decide(req))
    assert(d.allowed == 1, "request " .. i)
    assert(sluice.limit_name(d) == "core" and d.remaining == 6 - i)
  end
  status, hdrs, body = lim:answer(d, req)
  assert(status == 200 and body == nil and #hdrs % 2 == 0 and #hdrs > 0)
  d = assert(lim:decide(req))
  assert(d.allowed == 0 and lim:outcome_name(d) == "throttled", lim:outcome_name(d))
  status, hdrs, body = lim:answer(d, req, "rid-7")
  assert(status == 429, status)
  local h = {}
  for i = 1, #hdrs, 2 do h[hdrs[i]] = hdrs[i + 1] end
  assert(h["Content-Type"] == "application/problem+json" and h["Retry-After"])
  assert(body:find('"request_id":"rid-7"', 1, true), body)
  assert(body:find('"violated-policies":["core"]', 1, true), body)
end)

test("admission_headers = false: no RateLimit fields on an admission, a refusal whole", function()
  local lim = assert(open({ admission_headers = false }))
  local req = { method = "GET", route = "/v1/items", attrs = { user = "quiet" } }
  local d, status, hdrs, body
  for i = 1, 6 do
    d = assert(lim:decide(req))
    status, hdrs, body = lim:answer(d, req)
    assert(d.allowed == 1 and status == 200 and #hdrs == 0 and body == nil,
           "request " .. i .. ": " .. #hdrs .. " headers")
  end
  d = assert(lim:decide(req))
  status, hdrs, body = lim:answer(d, req)
  local h = {}
  for i = 1, #hdrs, 2 do h[hdrs[i]] = hdrs[i + 1] end
  assert(status == 429 and h["Retry-After"] and h["RateLimit-Limit"] == "6"
         and h["RateLimit-Remaining"] == "0" and body, status)
end)

test("a request the policy cannot decide: nil and the field", function()
  local lim = assert(open())
  local d, err = lim:decide({ method = "GET", route = "/v1/items" })
  assert(d == nil and err:find("SLUICE_EINVAL", 1, true) and err:find("(user)", 1, true), err)
  d, err = lim:decide({ method = "POST", route = "/v1/complete",
                        attrs = { user = "ann", tokens = 301 } })
  assert(d == nil and err:find("SLUICE_ERANGE", 1, true), err)
  d, err = lim:decide({ method = "GET", route = "/v1/items", attrs = { [1] = "x" } })
  assert(d == nil and err:find("attribute's name", 1, true), err)
  -- The built-in classes' fields are refused, not read as something else:
  -- a cost is an attribute the route's cost reads.
  for _, k in ipairs({ "cost", "class" }) do
    d, err = lim:decide({ method = "GET", route = "/v1/items", [k] = "reconcile",
                          attrs = { user = "cy" } })
    assert(d == nil and err:find("req." .. k .. " is not read", 1, true), tostring(err))
  end
end)

test("numbers as attribute values: a caller-given cost", function()
  local lim = assert(open())
  local d = assert(lim:decide({ method = "POST", route = "/v1/complete",
                                attrs = { user = "bo", tokens = 250 } }))
  assert(d.allowed == 1 and d.cost == 250, tostring(d.cost))
  d = assert(lim:decide({ method = "POST", route = "/v1/complete",
                          attrs = { user = "bo", tokens = 100 } }))
  assert(d.allowed == 0 and sluice.limit_name(d) == "tokens")
end)

test("report(): the upstream's answer as one more attribute", function()
  local lim = assert(open({ policy = login_policy }))
  local req = { method = "POST", route = "/login", attrs = { user = "ann" } }
  for _ = 1, 3 do -- a 200 is no failure: it strikes nothing
    assert(lim:decide(req).allowed == 1)
    assert(lim:report(req, "result", 200).allowed == 1)
  end
  for i = 1, 3 do
    assert(lim:decide(req).allowed == 1, i)
    assert(lim:report(req, "result", "401"), i)
  end
  assert(req.attrs.result == nil, "report() changed the caller's request")
  local d = assert(lim:decide(req))
  assert(d.allowed == 0 and d.status == 429 and d.penalty_status == 2,
         ("%d %d %d"):format(d.allowed, d.status, d.penalty_status))
  local other = { method = "POST", route = "/login", attrs = { user = "bob" } }
  assert(lim:decide(other).allowed == 1)
  local _, err = lim:report({ method = "POST", route = "/login" }, "result", "401")
  assert(err and err:find("(user)", 1, true), tostring(err))
end)

os.remove(policy)
print(("%d passed, %d failed"):format(passed, failed))
os.exit(failed == 0 and 0 or 1)

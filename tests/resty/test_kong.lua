-- The Kong plugin (kong/plugins/sluice) against a stand-in for the PDK
-- calls it makes: Kong is not packaged for Debian, so the plugin's phases
-- run here under plain LuaJIT with a fake `kong` global that records what
-- the plugin answered, over the real resty.sluice and libsluice (decisions
-- are the library's; only Kong is pretend).
--
--   luajit test_kong.lua LIBSLUICE POLICY
local lib, policy_path = arg[1], arg[2]

-- kong.db.schema.typedefs: the two entries the schema names.
package.preload["kong.db.schema.typedefs"] = function()
  return { no_consumer = { type = "foreign", eq = nil },
           protocols_http = { type = "set", default = { "http", "https" } } }
end

-- One request's worth of PDK state, and what the plugin did with it.
local R
local function request(t)
  R = { consumer = t.consumer, credential = t.credential, route = t.route,
        service = t.service, method = t.method or "GET", path = t.path or "/items",
        ip = t.ip or "192.0.2.7", id = t.id or "req-1", ctx = {}, set = {},
        errors = {}, headers = t.headers or {}, upstream = t.upstream or {},
        status = t.status or 200 }
  return R
end

kong = {
  client = {
    get_consumer = function() return R.consumer end,
    get_credential = function() return R.credential end,
    get_forwarded_ip = function() return R.ip end,
  },
  router = {
    get_route = function() return R.route end,
    get_service = function() return R.service end,
  },
  request = {
    get_method = function() return R.method end,
    get_path = function() return R.path end,
    get_id = function() return R.id end,
    get_header = function(k) return R.headers[k] end,
  },
  service = { response = { get_header = function(k) return R.upstream[k] end } },
  response = {
    exit = function(status, body, headers)
      assert(not R.exit, "kong.response.exit called twice")
      R.exit = { status = status, body = body, headers = headers or {} }
    end,
    set_header = function(k, v) R.set[k] = v end,
    get_status = function() return R.exit and R.exit.status or R.status end,
  },
  log = { err = function(...) R.errors[#R.errors + 1] = table.concat({ ... }) end },
}
setmetatable(kong, { __index = function(_, k)
  if k == "ctx" then return { plugin = R.ctx } end
end })

local handler = require "kong.plugins.sluice.handler"
local schema = require "kong.plugins.sluice.schema"
local sluice = require "resty.sluice"

local failed, passed = 0, 0
local function test(name, fn)
  local ok, err = pcall(fn)
  if ok then
    passed = passed + 1
    print("ok   " .. name)
  else
    failed = failed + 1
    print("FAIL " .. name .. ": " .. tostring(err))
  end
end

-- A configuration as Kong would build it: the schema's defaults, then ours.
local function conf(over)
  local c = {}
  for _, f in ipairs(schema.fields) do
    if f.config then
      for _, field in ipairs(f.config.fields) do
        local name, def = next(field)
        c[name] = def.default
      end
    end
  end
  c.policy, c.secret, c.library = policy_path, "00112233445566778899aabbccddeeff", lib
  c.store, c.jitter = "mem", false
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

-- One request through the plugin's phases, as Kong runs them.
local function run(c, t, keep)
  request(t)
  handler:access(c)
  if not R.exit then handler:header_filter(c) end
  if not keep then handler:log(c) end
  return R
end

local alice = { id = "c-alice", username = "alice" }
local bob = { id = "c-bob", username = "bob" }

test("priority after key-auth, version of the library", function()
  assert(handler.PRIORITY < 1250, "key-auth runs at 1250: the plugin must come after it")
  assert(handler.PRIORITY > 0)
  assert(handler.VERSION == sluice._VERSION)
  assert(schema.name == "sluice")
end)

test("schema fields are the ones the handler reads", function()
  local c = conf()
  for _, k in ipairs({ "policy", "store", "secret", "problem_base", "header_form",
                       "jitter", "admission_headers", "shadow", "fault_tolerant" }) do
    assert(c[k] ~= nil, k .. " has no value from the schema or the test")
  end
  assert(c.header_form == "legacy" and c.fault_tolerant == true)
end)

test("a consumer's burst, then the library's 429", function()
  local c = conf()
  for i = 1, 3 do
    local r = run(c, { consumer = alice, credential = { id = "k-1" } })
    assert(not r.exit, "request " .. i .. " refused")
    assert(r.set["RateLimit-Remaining"] == tostring(3 - i),
           "request " .. i .. ": RateLimit-Remaining " .. tostring(r.set["RateLimit-Remaining"]))
    assert(r.set["RateLimit-Limit"] == "3")
  end
  local r = run(c, { consumer = alice, id = "req-4" })
  assert(r.exit and r.exit.status == 429, "the 4th is refused")
  local h = r.exit.headers
  assert(h["Content-Type"] == "application/problem+json", tostring(h["Content-Type"]))
  assert(h["Retry-After"] and tonumber(h["Retry-After"]) >= 3600, tostring(h["Retry-After"]))
  assert(h["RateLimit-Remaining"] == "0")
  local body = r.exit.body
  assert(type(body) == "string", "the body is the rendered problem+json")
  assert(body:find('"violated-policies":["per_consumer"]', 1, true), body)
  assert(body:find('"request_id":"req-4"', 1, true), body)
  assert(body:find('"instance":"/items"', 1, true), body)
  -- The scope is the consumer Kong authenticated: bob is untouched.
  r = run(c, { consumer = bob })
  assert(not r.exit and r.set["RateLimit-Remaining"] == "2", "bob has his own budget")
end)

test("admission_headers = false: admissions without RateLimit fields, the 429 whole", function()
  local c = conf({ admission_headers = false })
  local carol = { id = "c-carol", username = "carol" }
  for i = 1, 3 do
    local r = run(c, { consumer = carol })
    assert(not r.exit, "request " .. i .. " refused")
    assert(next(r.set) == nil, "request " .. i .. ": a field was set: " .. tostring(next(r.set)))
  end
  local r = run(c, { consumer = carol })
  assert(r.exit and r.exit.status == 429, "the 4th is refused")
  assert(r.exit.headers["RateLimit-Remaining"] == "0" and r.exit.headers["Retry-After"])
end)

test("a lease per consumer and Kong route, released in the log phase", function()
  local c = conf()
  local route = { id = "r-1", name = "jobs" }
  local first = run(c, { consumer = alice, route = route, path = "/jobs/1" }, true)
  assert(not first.exit and first.ctx.lease, "the first takes the lease")
  local held = R
  local r = run(c, { consumer = alice, route = route, path = "/jobs/2" })
  assert(r.exit and r.exit.status == 429, "the lease is held")
  assert(r.exit.body:find("concurrency-limit-exceeded", 1, true), r.exit.body)
  r = run(c, { consumer = alice, route = { id = "r-2" }, path = "/jobs/3" })
  assert(not r.exit, "another Kong route has its own lease")
  R = held
  handler:log(c)
  assert(held.ctx.lease == nil and #held.errors == 0, table.concat(held.errors, "; "))
  r = run(c, { consumer = alice, route = route, path = "/jobs/4" })
  assert(not r.exit, "the lease came back in the log phase")
end)

test("the upstream's real tokens settled in the log phase", function()
  local c = conf({ cost_attribute = "tokens", cost_request_header = "X-Tokens-Max",
                   cost_response_header = "X-Tokens-Used" })
  local function llm(max, used)
    return run(c, { consumer = alice, method = "POST", path = "/llm/chat",
                    headers = { ["X-Tokens-Max"] = max },
                    upstream = { ["X-Tokens-Used"] = used } })
  end
  -- 1000 charged, 100 used: 900 back, so another 900 fit (an hour's
  -- refill would be 1 token).
  local r = llm("1000", "100")
  assert(not r.exit and #r.errors == 0, table.concat(r.errors, "; "))
  assert(r.ctx.settle == nil, "settled in the log phase")
  r = llm("900", "900")
  assert(not r.exit, "the refund made room for 900")
  assert(r.set["RateLimit-Remaining"] == "0", tostring(r.set["RateLimit-Remaining"]))
  -- No header from the upstream: the charge stays.
  r = run(c, { consumer = bob, method = "POST", path = "/llm/chat",
               headers = { ["X-Tokens-Max"] = "1000" } })
  assert(not r.exit)
  r = run(c, { consumer = bob, method = "POST", path = "/llm/chat",
               headers = { ["X-Tokens-Max"] = "1" } })
  assert(r.exit and r.exit.status == 429, "bob's 1000 were kept")
  -- An upstream header that is no number: logged, the request unharmed.
  local carol = { id = "c-carol", username = "carol" }
  r = run(c, { consumer = carol, method = "POST", path = "/llm/chat",
               headers = { ["X-Tokens-Max"] = "10" }, upstream = { ["X-Tokens-Used"] = "lots" } })
  assert(not r.exit and #r.errors == 1 and r.errors[1]:find("SLUICE_EINVAL", 1, true),
         table.concat(r.errors, "; "))
end)

test("the status Kong answered with, reported in the log phase", function()
  local c = conf({ report_attribute = "result" })
  local function private(who, status)
    return run(c, { consumer = who, path = "/private/x", status = status })
  end
  for i = 1, 3 do -- 200s strike nothing
    local r = private(alice, 200)
    assert(not r.exit and #r.errors == 0, i .. ": " .. table.concat(r.errors, "; "))
  end
  assert(not private(alice, 401).exit and not private(alice, 403).exit)
  local r = private(alice, 200)
  assert(r.exit and r.exit.status == 429, "two denials box the consumer")
  assert(r.exit.headers["X-Penalty-Box-Status"] == "Active-Lockout")
  assert(not private(bob, 200).exit, "bob is not boxed")
  -- Without report_attribute nothing is reported.
  c = conf()
  local carol = { id = "c-carol", username = "carol" }
  for _ = 1, 3 do
    r = run(c, { consumer = carol, path = "/private/x", status = 401 })
    assert(not r.exit and r.ctx.report == nil)
  end
end)

test("no consumer: fault tolerant passes and logs, otherwise 500", function()
  local r = run(conf(), { consumer = nil })
  assert(not r.exit, "fault_tolerant lets it through")
  assert(#r.errors == 1 and r.errors[1]:find("consumer", 1, true), table.concat(r.errors, "; "))
  r = run(conf({ fault_tolerant = false }), { consumer = nil })
  assert(r.exit and r.exit.status == 500, "fault_tolerant = false answers 500")
end)

test("a policy that does not open", function()
  local r = run(conf({ policy = "/nonexistent/policy.conf", fault_tolerant = false }),
                { consumer = alice })
  assert(r.exit and r.exit.status == 500)
  assert(r.errors[1]:find("policy", 1, true), r.errors[1])
end)

print(("%d passed, %d failed"):format(passed, failed))
os.exit(failed == 0 and 0 or 1)

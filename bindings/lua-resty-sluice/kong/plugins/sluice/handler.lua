-- Kong plugin "sluice": a thin adapter over resty.sluice.  It reads who is
-- calling and where from Kong's PDK, asks the sluice policy, and answers a
-- refusal with the library's status, headers and problem+json body.  What
-- it reads (the request a policy file can scope by):
--
--   tenant_id    the consumer's custom_id, else its id
--   api_key_id   the credential's id (key-auth's key), else the consumer's id
--   method, route (the path), client_ip (kong.client.get_forwarded_ip)
--   attributes   consumer (id), consumer_username, credential (id),
--                kong_route (the route's name, else id), service (name,
--                else id); a policy declares those it uses; and
--                config.cost_attribute, from the request header
--                config.cost_request_header
--
-- With config.cost_response_header, the log phase settles an admitted
-- request's cost at the value the upstream's response header gives (the
-- tokens it really used): a charge or a refund of the difference.  With
-- config.report_attribute, the log phase reports the status Kong answered
-- an admitted request with as that attribute (resty.sluice's report():
-- the request decided again with it), which a route's reported strikes
-- count: failed sign-ins, or 401s and 403s, boxing a consumer or address.
--
-- PDK calls: kong.client.get_consumer, get_credential, get_forwarded_ip;
-- kong.router.get_route, get_service; kong.request.get_method, get_path,
-- get_id (when there), get_header; kong.service.response.get_header;
-- kong.response.exit, set_header, get_status; kong.ctx.plugin;
-- kong.log.err.
local sluice = require "resty.sluice"

local Handler = {
  -- After every authentication plugin (key-auth 1250 ... hmac-auth 1030)
  -- and acl (950), so the consumer is known and a refused call counts
  -- nothing; beside Kong's own rate-limiting (910).
  PRIORITY = 905,
  VERSION = sluice._VERSION,
}

-- One policy per configuration and worker, opened at its first request.
local policies = {}

local function policy(conf)
  local k = table.concat({ conf.policy, conf.store, conf.secret, conf.problem_base or "",
                           conf.header_form or "", tostring(conf.jitter),
                           tostring(conf.admission_headers),
                           tostring(conf.shadow), conf.library or "" }, "\0")
  local lim = policies[k]
  if lim then return lim end
  local err
  lim, err = sluice.new {
    policy = conf.policy, store = conf.store, secret = conf.secret,
    problem_base = conf.problem_base, header_form = conf.header_form,
    jitter = conf.jitter, shadow = conf.shadow, library = conf.library,
    admission_headers = conf.admission_headers,
  }
  if not lim then return nil, err end
  policies[k] = lim
  return lim
end

local function fail(conf, err)
  kong.log.err("sluice: ", err)
  if conf.fault_tolerant then return end
  return kong.response.exit(500, { message = "An unexpected error occurred" })
end

local function name_or_id(e)
  return e and (e.name or e.id)
end

function Handler:access(conf)
  local lim, err = policy(conf)
  if not lim then return fail(conf, err) end
  local consumer = kong.client.get_consumer()
  local cred = kong.client.get_credential()
  local req = {
    tenant = consumer and (consumer.custom_id or consumer.id),
    key = (cred and cred.id) or (consumer and consumer.id),
    method = kong.request.get_method(),
    route = kong.request.get_path(),
    client_ip = kong.client.get_forwarded_ip(),
    attrs = {
      consumer = consumer and consumer.id,
      consumer_username = consumer and consumer.username,
      credential = cred and cred.id,
      kong_route = name_or_id(kong.router.get_route()),
      service = name_or_id(kong.router.get_service()),
    },
  }
  local cost_attr = conf.cost_attribute
  if cost_attr and conf.cost_request_header then
    req.attrs[cost_attr] = kong.request.get_header(conf.cost_request_header)
  end
  local d
  d, err = lim:decide(req)
  if not d then return fail(conf, err) end
  if d.lease_id ~= 0 then
    kong.ctx.plugin.lease = { lim, req, d.lease_id }
  end
  if cost_attr and conf.cost_response_header and d.settle_check ~= 0 then
    kong.ctx.plugin.settle = { lim, req, d }
  end
  if conf.report_attribute and d.allowed ~= 0 then
    kong.ctx.plugin.report = { lim, req }
  end
  if d.allowed ~= 0 and d.limit <= 0 then return end
  local rid = kong.request.get_id and kong.request.get_id() or nil
  local status, headers, body = lim:answer(d, req, d.allowed == 0 and rid or nil)
  if not status then return fail(conf, headers) end
  if d.allowed ~= 0 then
    -- Set when Kong has the upstream's answer, as its rate-limiting does.
    kong.ctx.plugin.headers = headers
    return
  end
  local h = {}
  for i = 1, #headers, 2 do h[headers[i]] = headers[i + 1] end
  return kong.response.exit(status, body, h)
end

function Handler:header_filter(conf)
  local headers = kong.ctx.plugin.headers
  if not headers then return end
  for i = 1, #headers, 2 do kong.response.set_header(headers[i], headers[i + 1]) end
end

-- The upstream's real cost, settled (nothing when it sent no header).
local function settle(conf, s)
  local used = kong.service.response.get_header(conf.cost_response_header)
  if not used then return end
  local ok, err = s[1]:settle(s[2], s[3], { [conf.cost_attribute] = used })
  if not ok then kong.log.err("sluice: settling a cost: ", err) end
end

function Handler:log(conf)
  local s = kong.ctx.plugin.settle
  if s then
    kong.ctx.plugin.settle = nil
    settle(conf, s)
  end
  local rp = kong.ctx.plugin.report
  if rp then
    kong.ctx.plugin.report = nil
    local ok, err = rp[1]:report(rp[2], conf.report_attribute, kong.response.get_status())
    if not ok then kong.log.err("sluice: reporting the status: ", err) end
  end
  local l = kong.ctx.plugin.lease
  if not l then return end
  kong.ctx.plugin.lease = nil
  local ok, err = l[1]:release(l[2], l[3])
  if not ok then kong.log.err("sluice: releasing a lease: ", err) end
end

return Handler

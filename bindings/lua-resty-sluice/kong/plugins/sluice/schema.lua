-- The sluice plugin's configuration (Kong 3.x schema).  The policy itself
-- (limits, scopes, costs, routes) lives in the sluice policy file; the
-- plugin only says where it is and where the state is kept.
local typedefs = require "kong.db.schema.typedefs"

return {
  name = "sluice",
  fields = {
    { consumer = typedefs.no_consumer },
    { protocols = typedefs.protocols_http },
    { config = {
        type = "record",
        fields = {
          -- A sluice policy file (docs/policy.md), readable by Kong's workers.
          { policy = { type = "string", required = true } },
          -- The store: a shm segment every worker of the node shares.
          { store = { type = "string", required = true,
                      default = "shm:name=/kong-sluice;create=1" } },
          -- The key of the scope ids: 32 hex digits, the same on every node
          -- that shares a store.
          { secret = { type = "string", required = true, referenceable = true,
                       match = "^%x+$", len_eq = 32 } },
          { problem_base = { type = "string", default = "https://errors.invalid/" } },
          { header_form = { type = "string", default = "legacy",
                            one_of = { "legacy", "sf", "both" } } },
          { jitter = { type = "boolean", default = true } },
          -- false: an admitted request is sent no RateLimit fields (a
          -- refusal's answer is whole), as Kong's hide_client_headers
          { admission_headers = { type = "boolean", default = true } },
          { shadow = { type = "boolean", default = false } },
          -- A request the policy cannot decide (its scope needs a consumer
          -- and there is none), or a policy that does not open: true lets
          -- it through with an error in the log, false answers 500.
          { fault_tolerant = { type = "boolean", default = true } },
          -- A cost the policy reads from an attribute (an LLM request's
          -- tokens): the attribute, the request header giving its value up
          -- front (the estimate charged), and the upstream's response
          -- header giving the real one, which settles the charge in the log
          -- phase (docs/policy.md "Settling a request's real cost").
          { cost_attribute = { type = "string", match = "^[%w_]+$" } },
          { cost_request_header = { type = "string" } },
          { cost_response_header = { type = "string" } },
          -- The attribute the status Kong answered an admitted request
          -- with is reported as, in the log phase ("result"), for a
          -- route's reported strikes (docs/policy.md "Declared
          -- penalties"); none: nothing is reported.
          { report_attribute = { type = "string", match = "^[%w_]+$" } },
          -- Where libsluice is, when not on the loader's path.
          { library = { type = "string" } },
        },
    } },
  },
}

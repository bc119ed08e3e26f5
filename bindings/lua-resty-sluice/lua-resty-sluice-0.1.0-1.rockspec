-- resty.sluice and the Kong plugin "sluice", pure Lua over LuaJIT's FFI:
-- libsluice itself comes from the system (the libsluice0 package, or a
-- meson install), found by the dynamic loader at run time.
rockspec_format = "3.0"
package = "lua-resty-sluice"
version = "0.1.0-1"
-- `luarocks make` in this folder installs from the files here and does not
-- read `source`; a published rock points it at the released tree.
source = {
  url = "git+file:///usr/src/sluice",
  tag = "v0.1.0",
  dir = "sluice/bindings/lua-resty-sluice",
}
description = {
  summary = "sluice's rate limits, quotas, leases and penalties in OpenResty and Kong",
  detailed = [[
    resty.sluice decides each request in access_by_lua with libsluice's
    policy (declared limits, GCRA, windows, concurrency leases, penalty
    box), keeps the state in sluice's shm store shared by every worker,
    and answers refusals with the library's RateLimit headers, Retry-After
    and problem+json body.  kong.plugins.sluice adapts it to Kong.
  ]],
  license = "MIT",
  labels = { "openresty", "kong", "rate-limiting" },
}
dependencies = {
  "lua == 5.1",
}
build = {
  type = "builtin",
  modules = {
    ["resty.sluice"] = "lib/resty/sluice.lua",
    ["resty.sluice.cdef"] = "lib/resty/sluice/cdef.lua",
    ["kong.plugins.sluice.handler"] = "kong/plugins/sluice/handler.lua",
    ["kong.plugins.sluice.schema"] = "kong/plugins/sluice/schema.lua",
  },
}

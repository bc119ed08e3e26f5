-- resty.sluice's FFI declarations against the C headers of this tree.
--
--   luajit cdef_check.lua CC INCLUDE_DIR LIBSLUICE WORKDIR
--
-- From the declarations' text (resty/sluice/cdef.lua) it writes a C file
-- that includes the real headers and then redeclares every function of the
-- text (a prototype that differs from the header's does not compile),
-- asserts every enum constant of the text equal to the header's
-- (_Static_assert) and prints sizeof of every struct and offsetof of every
-- field; it compiles and runs that file and compares the numbers with what
-- LuaJIT's FFI computes from the text.  Every function must also resolve
-- in LIBSLUICE (exported).  Exit 0 when all agree, 1 with each difference.
local ffi = require "ffi"
local bit = require "bit"

local cc, incdir, libpath, work = arg[1], arg[2], arg[3], arg[4]
if not work then
  io.stderr:write("usage: luajit cdef_check.lua CC INCLUDE_DIR LIBSLUICE WORKDIR\n")
  os.exit(2)
end

local cdef = require "resty.sluice.cdef"
local text = cdef.text:gsub("/%*.-%*/", "")

-- Top-level statements: split on ';' outside braces.
local stmts, depth, cur = {}, 0, {}
for ch in text:gmatch(".") do
  if ch == "{" then depth = depth + 1 elseif ch == "}" then depth = depth - 1 end
  if ch == ";" and depth == 0 then
    stmts[#stmts + 1] = table.concat(cur):gsub("^%s+", ""):gsub("%s+$", "")
    cur = {}
  else
    cur[#cur + 1] = ch
  end
end

local structs, protos, consts = {}, {}, {}
for _, s in ipairs(stmts) do
  local name, body = s:match("^typedef%s+struct%s+([%w_]+)%s*(%b{})")
  if name then
    local fields = {}
    body = body:sub(2, -2):gsub("union%s*{", ""):gsub("}", "")
    for decl in body:gmatch("[^;]+") do
      local fp = decl:match("%(%s*%*%s*([%w_]+)%s*%)")
      if fp then
        fields[#fields + 1] = fp
      else
        decl = decl:gsub("%b[]", "")
        for piece in decl:gmatch("[^,]+") do
          local id = piece:match("([%a_][%w_]*)%s*$")
          if id then fields[#fields + 1] = id end
        end
      end
    end
    structs[#structs + 1] = { name = name, fields = fields }
  elseif s:match("^enum%s*{") then
    for k, v in s:gmatch("([%u_][%w_]*)%s*=%s*(%-?%d+)") do
      consts[#consts + 1] = { k, v }
    end
  elseif not s:match("^typedef") and not s:match("^struct") and s:find("(", 1, true) then
    protos[#protos + 1] = s
  end
end

local c = { "#include <stdio.h>", "#include <stddef.h>", "#include <sluice.h>",
            "#include <sluice/policy.h>", "#include <sluice/http.h>",
            "#include <sluice/halves.h>", "" }
for _, p in ipairs(protos) do c[#c + 1] = p .. ";" end
for _, kv in ipairs(consts) do
  c[#c + 1] = ("_Static_assert(%s == %s, \"%s\");"):format(kv[1], kv[2], kv[1])
end
c[#c + 1] = "int main(void) {"
for _, st in ipairs(structs) do
  c[#c + 1] = ('  printf("%s %%zu\\n", sizeof(%s));'):format(st.name, st.name)
  for _, f in ipairs(st.fields) do
    c[#c + 1] = ('  printf("%s.%s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'):format(
      st.name, f, st.name, f, st.name, f)
  end
end
c[#c + 1] = "  return 0;\n}"

local src, exe = work .. "/cdef_probe.c", work .. "/cdef_probe"
local f = assert(io.open(src, "w"))
f:write(table.concat(c, "\n"), "\n")
f:close()
local cmd = ("%s -std=c11 -Wall -Werror -I%s -o %s %s"):format(cc, incdir, exe, src)
local rc = os.execute(cmd)
if rc ~= 0 and rc ~= true then
  print("cdef_check: the declarations do not compile against the headers (" .. cmd .. ")")
  os.exit(1)
end

local want = {}
local p = assert(io.popen(exe))
for line in p:lines() do
  local k, v, size = line:match("^(%S+) (%d+) ?(%d*)$")
  want[k] = tonumber(v)
  if size ~= "" then want[k .. " size"] = tonumber(size) end
end
p:close()

-- A field's size, from LuaJIT's type reflection (ffi.typeinfo, LuaJIT
-- 2.1): a field of another type at the same offset (int for int64_t
-- before a padded 8-byte field) moves nothing, so offsets alone would
-- not see it.  Anonymous unions are descended into.
local CT_TYPEDEF, CT_ATTRIB = 7, 8
local function kind(ti) return bit.rshift(ti.info, 28) end
local function size_of(cid)
  local ti = ffi.typeinfo(cid)
  while kind(ti) == CT_TYPEDEF or kind(ti) == CT_ATTRIB or ti.size == nil do
    cid = bit.band(ti.info, 0xffff)
    ti = ffi.typeinfo(cid)
  end
  return ti.size
end
local function field_sizes(cid, out)
  local s = ffi.typeinfo(cid).sib
  while s do
    local ti = ffi.typeinfo(s)
    local child = bit.band(ti.info, 0xffff)
    if ti.name then
      out[ti.name] = size_of(child)
    else
      field_sizes(child, out)
    end
    s = ti.sib
  end
  return out
end

local bad, nfields = 0, 0
local function check(k, got)
  if want[k] ~= got then
    print(("cdef_check: %s: C says %s, the FFI %s"):format(k, tostring(want[k]), tostring(got)))
    bad = bad + 1
  end
end
for _, st in ipairs(structs) do
  check(st.name, ffi.sizeof(st.name))
  local sizes = field_sizes(tonumber(ffi.typeof(st.name)), {})
  for _, fl in ipairs(st.fields) do
    check(st.name .. "." .. fl, ffi.offsetof(st.name, fl))
    check(st.name .. "." .. fl .. " size", sizes[fl])
    nfields = nfields + 1
  end
end

local lib = ffi.load(libpath)
for _, pr in ipairs(protos) do
  local fn = pr:match("([%a_][%w_]*)%s*%(")
  if not pcall(function() return lib[fn] end) then
    print("cdef_check: " .. fn .. " is not exported by " .. libpath)
    bad = bad + 1
  end
end

print(("cdef_check: %d structs, %d fields, %d functions, %d constants: %s"):format(
  #structs, nfields, #protos, #consts, bad == 0 and "as the headers" or bad .. " differ"))
os.exit(bad == 0 and 0 or 1)

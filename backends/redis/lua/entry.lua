-- entry.lua -- the first frame of sluice's Redis script: the algorithm
-- layer (lib/algo/*.c) ported to Redis Lua.
--
-- The script is assembled at build time (backends/redis/embed_lua.py) from
-- the generated prelude (wire_lua.c), the frames entry.lua, op.lua,
-- program.lua and dispatch.lua, and one file per algorithm as lib/algo
-- has them (gcra, window, distinct, penalty, lease), whose range check,
-- step and expiry blocks land where the frames say --@include.
--
-- One script runs every decision, and every decision is a program
-- (sluice/program.h; an operation is a program of one step), so that a
-- node loads one SHA and a call takes one path.  For each program of a
-- call it reads the group's records, runs the same sequencer and steps as
-- lib/algo over the same 16-byte encoding, writes back the records that
-- changed with the expiry lib/algo gives them, and returns the answer
-- packed as binary.  Redis runs a script atomically, which makes a group
-- one atomic unit, exactly as the C backends' locks do.
--
-- The wire contract (the call's numbers, the record value, the verdict
-- layouts) is defined once, in backends/redis/wire.h.  Every number the C
-- defines is spelled here by name (LAYOUT, ALGO_*, OP_*, WHEN_*, the
-- formats): wire_lua.c prints the names with their values at build time,
-- and the assembly puts the values in their place, as a C compiler folds
-- constants (as Lua locals they would cost every call upvalues).  A
-- record's value is its two words, its expiry in ns and the layout byte:
-- keeping the expiry in the value (not only as the Redis TTL) makes the
-- freshness test exact and independent of whose clock set the TTL: in the
-- conformance test mode the suite's manual clock runs apart from Redis's.
--
-- Exactness.  Lua 5.1 numbers are doubles, exact up to 2^53.  Absolute
-- times (int64 ns, ~2^61 today) are therefore carried as pairs
-- (hi, lo) = hi * 2^32 + lo with signed hi and 0 <= lo < 2^32; only
-- *differences* from now become plain numbers, and only once they are known
-- to be small.  The C side refuses parameters for which that is not enough
-- (SLUICE_ERANGE, see docs/redis.md): every duration <= 2^52 ns,
-- burst * period_ns <= 2^52 (GCRA), limit * window_ns <= 2^52 (sliding
-- window).  Within that range every quantity the C step computes in 128
-- bits fits a double exactly, or is provably above every bound it is
-- compared with; the comments at each step say which.  The script checks
-- the range again and answers "SLUICE ERANGE" rather than risk a verdict
-- that differs from the C step.
--
-- A call carries programs (dispatch.lua): each its numbers as one ARGV
-- entry of little-endian int64s (wire.h says why one binary argument),
-- its header unpacked with HDR_FMT: its record count, its step count (0:
-- read one record), now (hi, lo; hi < 0: use TIME), its id (three words),
-- the minimum TTL ms for writes (test mode keeps records around while the
-- manual clock stands still), then its steps (program.lua).  int64 ->
-- double rounds as the decimal strings of earlier versions did.

local T32 = 4294967296
local MS = 1000000
-- Bound by run() on its first call: a library's chunk may touch no global
-- but redis while Redis 7.0 loads it (FUNCTION LOAD).
local floor, spack, sunpack, rcall, rpcall

local function fail(code, msg)
  return redis.error_reply('SLUICE ' .. code .. ' ' .. msg)
end


-- ------------------------------------------------------------------- now

-- The program's KEYS and numbers, set by run1() (dispatch.lua) for each
-- program of a call.  The
-- helpers below are made once: at FUNCTION LOAD for the library form, so
-- a call creates none of them (the EVAL form still runs this chunk, and
-- makes them, on every call).
local CK, AV

-- Redis's TIME as an exact (hi, lo) pair of ns.  (x - x % 1 is floor(x),
-- exact, without the cost of calling math.floor: a C function call costs
-- the server about as much as twenty Lua operations.)  The seconds' pair,
-- sec * 10^9, is kept with TIME's string for them (Tsec: the library
-- keeps it from call to call), so within a second a call converts only
-- the microseconds (a string's conversion costs the server as much as
-- fifteen Lua operations, and equal strings are one string in Lua).
local Tsec, Tbh, Tbl
-- Tbh, Tbl from TIME's seconds s (a new second: Tsec is another string).
local function tsec(s)
  local sec = s + 0 -- (arithmetic converts, no call)
  local sh = sec / 65536
  sh = sh - sh % 1
  local a = sh * 1000000000 -- < 2^47
  local x = (sec - sh * 65536) * 1000000000 -- < 2^46
  local xh = x / T32
  xh = xh - xh % 1
  local nh = a / 65536 -- a * 2^16 = nh * 2^32 + (a mod 2^16) * 2^16
  nh = nh - nh % 1
  local nl = (a - nh * 65536) * 65536 + x - xh * T32
  nh = nh + xh
  if nl >= T32 then nl = nl - T32; nh = nh + 1 end
  Tsec, Tbh, Tbl = s, nh, nl
end
-- (run() in dispatch.lua has these lines inline for a program it knows:
-- a Lua call costs the server about as much as ten operations)
local function server_now()
  local t = rcall('TIME')
  if t[1] ~= Tsec then tsec(t[1]) end
  local nl = Tbl + t[2] * 1000 -- < 2^32 + 10^9
  if nl >= T32 then return Tbh + 1, nl - T32 end
  return Tbh, nl
end

-- Exact floor(a / b) and ceil(a / b) for integers below 2^53, b > 0 (a may
-- be negative): the quotient of two doubles can round to the next integer,
-- so correct it by the remainder.  The fast path and the general path's
-- helpers use them alike.
local function fd(a, b)
  local q = a / b
  q = q - q % 1
  local r = a - q * b
  if r < 0 then return q - 1 elseif r >= b then return q + 1 end
  return q
end
local function cd(a, b)
  local q = fd(a, b)
  if q * b < a then return q + 1 end
  return q
end

-- The Redis deadline of a record whose expiry's high half is xh, at
-- server time: ms since the epoch, the end of that half's step of 2^32 ns
-- rounded up (wire.h's sluice_wire_deadline_ms, which every writer uses,
-- the module's included).  2^32 ns = 4294 ms + 967296 ns; m < 2^52 and a
-- multiple of 1e-6 ms, so the quotient's rounding never reaches an integer.
local function deadline(xh)
  local h = xh + 1
  local q = h * 967296 / MS
  local c = q - q % 1
  if c < q then c = c + 1 end
  return h * 4294 + c
end

-- deadline(xh) as PXAT's argument: a string, made once per grid step
-- (Redis prints a number argument with "%.17g", a costly C call, on
-- every command; the library keeps the last two steps' strings from
-- call to call: a request's buckets and the next requests' mostly
-- expire in the same step or the one after).  '%d' prints the deadline
-- exactly (ms since the epoch, far below 2^53).
local DLh, DLs, DLh2, DLs2
local function pxat(xh)
  if xh == DLh then return DLs end
  if xh == DLh2 then return DLs2 end
  local s = string.format('%d', deadline(xh))
  DLh2, DLs2, DLh, DLs = DLh, DLs, xh, s
  return s
end

-- The SET of one record value v expiring at (xh, xl) ns.  At server time
-- (minttl false) its Redis deadline is deadline(xh), as PXAT, or kept
-- (KEEPTTL: Redis then neither sets nor propagates an expiry) when the
-- key holds a record (oh, ol: its stored expiry, live or not) whose
-- expiry has the same high half: every writer gives a key the deadline
-- of the expiry its value carries.  At a test clock (minttl: the least TTL)
-- the TTL counts from now, floor((expiry - now) / 1 ms) + 1 raised to
-- minttl, and is kept only for an expiry that did not move.
-- SLUICE_FOREVER: no TTL.
local function setrec(key, v, xh, xl, nh, nl, minttl, oh, ol)
  if xh == 2147483647 and xl == T32 - 1 then
    if minttl and oh == xh and ol == xl then
      rcall('SET', key, v, 'KEEPTTL')
    else
      rcall('SET', key, v)
    end
    return
  end
  if not minttl then
    if oh == xh then -- (a forever record's oh: xh is below it)
      rcall('SET', key, v, 'KEEPTTL')
    else
      rcall('SET', key, v, 'PXAT', pxat(xh))
    end
    return
  end
  if oh == xh and ol == xl then
    rcall('SET', key, v, 'KEEPTTL')
    return
  end
  local dh, dl = xh - nh, xl - nl
  if dl < 0 then dl = dl + T32; dh = dh - 1 end
  local ms
  if dh >= T52 / T32 then ms = TTL_CAP_MS
  else ms = fd(dh * T32 + dl, MS) + 1 end
  if ms < minttl then ms = minttl end
  rcall('SET', key, v, 'PX', ms)
end

--@include fast

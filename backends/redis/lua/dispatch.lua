-- dispatch.lua -- run(KEYS, ARGV), the one entry point.  A call carries n
-- programs: ARGV[k] is program k's numbers (wire.h), KEYS their records,
-- one program's after the other's in ARGV's order.  One program answers
-- its answer; n of them an array of n answers, in order (an error among
-- them is its program's alone: the others ran).  The script form ends
-- with `return run(KEYS, ARGV)`, the library form registers run as its
-- function (embed_lua.py adds either).

-- The program of a call whose numbers (av) are not a compiled program's
-- key, with now and the least TTL (false at server time): from the header
-- (test clocks), compiled, or found by its id; or nil and the reply (a
-- malformed call, an unknown id, or the record a call of no steps reads).
local function plookup(keys, av, snh, snl)
  if av and #av == PID_BYTES then
    -- An id alone (wire.h), of a program the library does not hold.
    return nil, redis.error_reply(NOPROGRAM .. ' program id unknown')
  end
  if not av or #av < HDR_BYTES or #av % 8 ~= 0 then
    return nil, fail('EINVAL', 'malformed arguments')
  end
  local nk, nsteps, nh, nl, _, _, _, minttl = sunpack(HDR_FMT, av)
  if nk ~= #keys or nk < 1 then
    return nil, fail('EINVAL', 'malformed arguments')
  end
  local tmode = nh >= 0 -- a test clock's now in the header
  -- (minttl false: server time, whose writes take the grid's deadlines;
  -- the least TTL is for test clocks, setrec in entry.lua)
  if not tmode then
    nh, nl = snh, snl
    if not nh then nh, nl = server_now() end
    minttl = false
  end
  if nsteps == 0 then
    -- No steps: the record as stored (an expired one goes) and now,
    -- {value | nil, now hi, now lo} (the store's xGet).
    if nk ~= 1 or #av ~= HDR_BYTES then
      return nil, fail('EINVAL', 'malformed arguments')
    end
    local v = rcall('GET', keys[1])
    if v and #v == REC_BYTES then
      local _, _, _, _, el, eh = sunpack(REC_FMT, v)
      if eh < nh or (eh == nh and el <= nl) then
        rcall('DEL', keys[1])
        v = false
      end
    end
    return nil, {v, nh, nl}
  end
  if nsteps < 0 or nsteps > PROGRAM_STEPS then
    return nil, fail('EINVAL', 'malformed program')
  end
  local prog, err
  if #av == HDR_BYTES then -- by id
    prog, err = pbyid(nsteps, nk, not tmode and av)
  elseif tmode then
    prog, err = pfind(TCACHE, string.sub(av, HDR_BYTES + 1), nsteps, nk)
  else
    prog, err = pfind(PCACHE, av, nsteps, nk)
  end
  if not prog then return nil, err end
  return prog, nh, nl, minttl
end

-- A call of several programs runs each as a call of its own, one TIME
-- for all, its records and numbers in MK and MA (made on the first such
-- call, refilled per program).
local run, MK, MA
-- One program, or from ARGV[2] on several.  snh, snl: the server's time
-- when the call of several read it.
run = function(keys, argv, snh, snl)
  if not floor then
    floor, spack, sunpack, rcall, rpcall = math.floor, struct.pack,
      struct.unpack, redis.call, redis.pcall
    NOREC = spack(REC_W1_FMT, 0, 0, 0, 0, 0, LAYOUT)
  end
  if argv[2] then
    -- Every program's records found (and its numbers whole int64s, a
    -- header at least) before any program runs: a malformed call runs
    -- none.
    local n, nks, at = #argv, {}, 0
    for k = 1, n do
      local av = argv[k]
      if #av < HDR_BYTES or #av % 8 ~= 0 then
        return fail('EINVAL', 'malformed arguments')
      end
      local nk = sunpack('<i8', av)
      if nk < 1 then return fail('EINVAL', 'malformed arguments') end
      nks[k], at = nk, at + nk
    end
    if at ~= #keys then return fail('EINVAL', 'malformed arguments') end
    if not MK then MK, MA = {}, {} end
    local out, nh, nl = {}, server_now()
    local last = #MK
    at = 0
    for k = 1, n do
      local nk = nks[k]
      for i = 1, nk do MK[i] = keys[at + i] end
      for i = nk + 1, last do MK[i] = nil end
      last, MA[1] = nk, argv[k]
      out[k] = run(MK, MA, nh, nl)
      at = at + nk
    end
    return out
  end
  local av = argv[1]
  CK, AV = keys, av
  -- A program seen before, at server time: its numbers are the key of its
  -- compiled form (program.lua), header included, so nothing is unpacked.
  local prog, nh, nl, minttl = PCACHE[av], snh, snl, false
  if not prog or prog.nkeys ~= #keys then
    prog, nh, nl, minttl = plookup(keys, av, snh, snl)
    if not prog then return nh end
  elseif not snh then
    -- (server_now(), inline)
    local t = rcall('TIME')
    if t[1] ~= Tsec then tsec(t[1]) end
    nh, nl = Tbh, Tbl + t[2] * 1000
    if nl >= T32 then nh, nl = nh + 1, nl - T32 end
  end
  local pre
  local std = prog.std
  if std then
    local r
    r, pre = pstd(std, nh, nl, minttl)
    if r then return r end
    pre = pstd_pre(std, pre)
  elseif prog.one then
    local r = pone(prog.one, nh, nl, minttl)
    if r then return r end
  end
  return program(prog, nh, nl, minttl, pre)
end

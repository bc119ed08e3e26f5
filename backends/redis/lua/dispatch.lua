-- dispatch.lua -- run(KEYS, ARGV), the one entry point: which path a call
-- takes (a program, a batch, the GCRA fast path, or the general step).
-- The script form ends with `return run(KEYS, ARGV)`, the library form
-- registers run as its function (embed_lua.py adds either).

local function run(keys, argv)
  if not floor then
    floor, spack, sunpack, rcall = math.floor, struct.pack, struct.unpack,
      redis.call
  end
  local av = argv[1]
  CK, AV = keys, av
  -- A program seen before, at server time: its ARGV[1] is the key of its
  -- compiled form (program.lua), header included, so nothing is unpacked.
  local prog = PCACHE[av]
  if prog and prog.nkeys == #keys then
    local nh, nl = server_now()
    local pre
    if prog.std then
      local r
      r, pre = pstd(prog.std, nh, nl, false)
      if r then return r end
      pre = pstd_pre(prog.std, pre)
    end
    return program(prog, nh, nl, false, pre)
  end
  if #keys < 1 or not AV or #AV < HDR_BYTES or #AV % 8 ~= 0 then
    return fail('EINVAL', 'malformed arguments')
  end
  local algo, kind, nh, nl, arg, idh, idl, minttl = sunpack(HDR_FMT, AV)
  local tmode = nh >= 0 -- a test clock's now in the header
  -- (minttl false: server time, whose writes take the grid's deadlines;
  -- the least TTL is for test clocks, setrec in entry.lua)
  if not tmode then
    nh, nl = server_now()
    minttl = false
  end

  if algo == WIRE_PROGRAM then
    local err
    if #AV == HDR_BYTES then -- by id (no program has no step)
      prog, err = pbyid(kind, #keys, not tmode and av)
    elseif tmode then
      prog, err = pfind(TCACHE, string.sub(av, HDR_BYTES + 1), kind, #keys)
    else
      prog, err = pfind(PCACHE, av, kind, #keys)
    end
    if not prog then return err end
    local pre
    if prog.std then
      local r
      r, pre = pstd(prog.std, nh, nl, minttl)
      if r then return r end
      pre = pstd_pre(prog.std, pre)
    end
    return program(prog, nh, nl, minttl, pre)
  end

  -- A batch (ARGV[2] present): KEYS[i] with the 88 bytes of ARGV[1] from
  -- (i - 1) * 88, each an ordinary single-bucket GCRA call (the client
  -- batches only those).  One script and one TIME for up to
  -- SLUICE_GROUP_MAX decisions: per decision Redis then pays for the step,
  -- not for a command around it.  Answers every verdict (or error), in
  -- order; a call the fast path refuses runs the general path in its place.
  if argv[2] then
    local out = {}
    if #AV ~= BATCH_BYTES * #keys then
      return fail('EINVAL', 'malformed batch')
    end
    local tnh, tnl = nh, nl
    for i = 1, #keys do
      local al, kd, bh, bl, cost, ih, il, mt, R, Pd, B =
        sunpack(BATCH_FMT, AV, (i - 1) * BATCH_BYTES + 1)
      if bh >= 0 then tnh, tnl = bh, bl else mt = false end
      local r = al == ALGO_GCRA and (kd == OP_CONSUME or kd == OP_PEEK) and
        gcra1(keys[i], kd, cost, mt, tnh, tnl, R, Pd, B)
      if not r then
        r = general({keys[i]}, {al, kd, bh, bl, cost, ih, il, mt, R, Pd, B},
          al, kd, tnh, tnl, cost, ih, il, mt)
      end
      out[i] = r
    end
    return out
  end

  if algo == ALGO_GCRA and #keys == 1 and #AV == BATCH_BYTES and
     (kind == OP_CONSUME or kind == OP_PEEK) then
    local R, Pd, B = sunpack(GCRA_FMT, AV, HDR_BYTES + 1)
    local r = gcra1(keys[1], kind, arg, minttl, nh, nl, R, Pd, B)
    if r then return r end
  end

  return general(keys, {sunpack('<' .. string.rep('i8', #AV / 8), AV)}, algo,
    kind, nh, nl, arg, idh, idl, minttl)
end

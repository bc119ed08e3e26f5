-- ---------------------------------------------------------- programs
--
-- A program (sluice/program.h, algo 7 in A[1], the step count in A[2]):
-- KEYS are its records; after the 8 header numbers each step is
--   algo kind key nkeys arg id_hi id_lo when ref when2 ref2 fold ttl_from
--   nparams params...
-- The same sequencer as lib/algo/program.c: every record read once, each
-- step that its guard lets run is the general step over its records in
-- memory, a gate's denial puts every record back as read, and at the end
-- the records that changed are written with the expiry of the last step
-- over them (program validation makes every step over a record use the same
-- parameters, so that is the C's expiry of the first).  Answers a 24-byte
-- header (allowed, denied_by, ran mask, 0, now) and each step's verdict.

-- The numbers of a program are read where they lie in ARGV[1], step by
-- step, rather than all unpacked up front.

local function program(nsteps, nh, nl, minttl)
  local n = #KEYS
  -- o: records as read, c: as the steps leave them (4 halves each);
  -- raw: the stored value (false: none; nil: not read yet).
  local o, c, xe, raw = {}, {}, {}, {}
  -- Records are read when a step first needs them (a step that does not
  -- run, the notice of an admitted request, costs no read), a step's group
  -- with one MGET.
  local function load1(i, v)
    local at = 4 * i
    raw[i] = v
    o[at - 3], o[at - 2], o[at - 1], o[at] = 0, 0, 0, 0
    if v and #v == REC_BYTES then
      local x0l, x0h, x1l, x1h, el, eh, lay = sunpack(REC_FMT, v)
      if lay ~= LAYOUT then return false end
      if nh < eh or (nh == eh and nl < el) then
        o[at - 3], o[at - 2], o[at - 1], o[at] = x0h, x0l, x1h, x1l
      else
        redis.call('DEL', KEYS[i]) -- expired: gone for good
        raw[i] = false
      end
    elseif v then
      return false
    end
    c[at - 3], c[at - 2], c[at - 1], c[at] = o[at - 3], o[at - 2], o[at - 1],
      o[at]
    return true
  end
  local function load(a, b)
    local fresh = a < b
    for i = a, b do
      if raw[i] ~= nil then fresh = false end
    end
    if not fresh then -- one record, or some read already: GET the others
      for i = a, b do
        if raw[i] == nil and not load1(i, redis.call('GET', KEYS[i])) then
          return i
        end
      end
      return 0
    end
    local vals = redis.call('MGET', unpack(KEYS, a, b))
    for i = a, b do
      if not load1(i, vals[i - a + 1]) then return i end
    end
    return 0
  end
  -- Per step: 0 skipped, 1 allowed, 2 denied; reached; the wait given.
  local st, reached, retry, out = {}, {}, {}, {}
  local nowl, nowh = nl, nh
  if nowh < 0 then nowh = nowh + T32 end
  local skipped
  local denied, mask = -1, 0
  local function cond(w, r)
    if w == WHEN_ALWAYS then return true end
    if w == WHEN_PASSED then return denied < 0 end
    local x = st[r + 1]
    if w == WHEN_DENIED then return x == 2 end
    if w == WHEN_ALLOWED then return x == 1 end
    if w == WHEN_REACHED then return x ~= 0 and reached[r + 1] end
    return x == 0
  end
  local off = HDR_BYTES + 1 -- after the header
  for s = 1, nsteps do
    local sa, sk, key, nk, arg, ih, il, w1, r1, w2, r2, fold, ttlf, np =
      sunpack(STEP_FMT, AV, off)
    local poff = off + STEP_BYTES
    off = poff + 8 * np
    if cond(w1, r1) and cond(w2, r2) then
      local bad = load(key + 1, key + nk)
      if bad > 0 then
        return fail('ECORRUPT', 'record of another layout at key ' .. bad)
      end
      local r, al, rem, rty
      local at = 4 * (key + 1)
      if sa == ALGO_GCRA and (sk == OP_CONSUME or sk == OP_PEEK) then
        r, al, rem, rty = gcra_prog(c, xe, key, nk, sk, arg, nh, nl, poff)
      elseif sa == ALGO_PENALTY and sk == OP_CHECK and nk == 1 and c[at - 3] == 0 and
             c[at - 2] == 0 and c[at - 1] == 0 and c[at] == 0 then
        -- A box check of a key never struck: not boxed, nothing changes.
        local th = sunpack('<i8', AV, poff)
        r = spack(VERDICT_NUMS, 1, 0, 0, 0, th, th, 0, 0,
          th, 0, 0, nl, nh)
        al, rem, rty = true, th, 0
      end
      if not r then
        local P = {sa, sk, nh, nl, arg, ih, il, minttl,
                   sunpack(string.rep('i8', np), AV, poff)}
        if ttlf > 0 then
          local t = retry[ttlf] or 0 -- a step that did not run: 0
          if t < 1 then t = 1 end
          if t > T52 then t = T52 end
          P[A_PARAMS + 1] = t
        end
        local M = {n = nk, a0h = {}, a0l = {}, a1h = {}, a1l = {}}
        for j = 1, nk do
          local q = 4 * (key + j)
          M.a0h[j], M.a0l[j], M.a1h[j], M.a1l[j] = c[q - 3], c[q - 2],
            c[q - 1], c[q]
        end
        r = general(nil, P, sa, sk, nh, nl, arg, ih, il, minttl, M)
        if type(r) ~= 'string' then return r end
        for j = 1, nk do
          local q = 4 * (key + j)
          c[q - 3], c[q - 2], c[q - 1], c[q] = M.b0h[j], M.b0l[j], M.b1h[j],
            M.b1l[j]
          xe[2 * (key + j) - 1], xe[2 * (key + j)] = M.eh[j], M.el[j]
        end
        local a, _, _, _, _, _, rml, rmh, rtl, rth = sunpack(
          VERDICT_PAIRS, r)
        al, rem, rty = a ~= 0, rmh * T32 + rml, rth * T32 + rtl
      end
      st[s] = al and 1 or 2
      reached[s] = not al or rem == 0
      retry[s] = rty
      mask = mask + 2 ^ (s - 1)
      out[s] = r
      if fold == FOLD_GATE and not al and denied < 0 then
        -- A gate's denial: every record back as read.
        denied = s - 1
        for i = 1, n do
          if raw[i] ~= nil then
            local q = 4 * i
            c[q - 3], c[q - 2], c[q - 1], c[q] = o[q - 3], o[q - 2], o[q - 1],
              o[q]
            xe[2 * i - 1], xe[2 * i] = nil, nil
          end
        end
      end
    else
      st[s] = 0
      if not skipped then
        skipped = spack(VERDICT_PAIRS, 0, 0,
          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, nowl, nowh)
      end
      out[s] = skipped
    end
  end
  for i = 1, n do
    local q = 4 * i
    if raw[i] ~= nil and (c[q - 3] ~= o[q - 3] or c[q - 2] ~= o[q - 2] or
       c[q - 1] ~= o[q - 1] or c[q] ~= o[q]) then
      local xh, xl = xe[2 * i - 1], xe[2 * i]
      if xh < nh or (xh == nh and xl <= nl) then
        if raw[i] then redis.call('DEL', KEYS[i]) end
      else
        write_rec(KEYS[i], c[q - 3], c[q - 2], c[q - 1], c[q], xh, xl, nh, nl,
          minttl)
      end
    end
  end
  return spack(PROG_HDR_FMT, denied < 0 and 1 or 0, denied, mask, 0, nowl,
    nowh) .. table.concat(out)
end

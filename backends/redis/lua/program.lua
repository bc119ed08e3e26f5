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
-- header (allowed, denied_by, ran mask, 0, now) and the verdicts of the
-- steps that ran, in order (the caller knows a skipped step's: zeros and
-- now), so a skipped step costs neither packing nor bytes.

-- The numbers of a program are read where they lie in ARGV[1], step by
-- step, rather than all unpacked up front: a step's guard first, the rest
-- only if it runs.

-- A program's state lives in tables made once, beside the functions (the
-- library form makes them at FUNCTION LOAD), so a call makes no tables or
-- closures of its own for Redis's Lua to collect.  Each call sets every
-- entry it reads.  PO: records as read, PC: as the steps leave them (4
-- halves each), PXE: their expiries (a pair each), POX: a live record's
-- stored expiry; PRAW: the stored value (false: none; nil: not taken in
-- yet); per step PST (0 skipped, 1 allowed, 2 denied), PREACH (reached),
-- PRETRY (the wait given; nil: did not run); POUT: the header and the
-- verdicts of the steps that ran.
local PO, PC, PXE, PRAW, POX = {}, {}, {}, {}, {}
local PST, PREACH, PRETRY, POUT = {}, {}, {}, {}
-- Records are taken in when a step first needs them (a step that does not
-- run, the notice of an admitted request, changes nothing), and read with
-- one MGET for every record of a small program when the first step needs
-- any (the box and both buckets of a request in one command instead of a
-- GET and an MGET); Ppre holds those values until a step takes them in (an
-- expired one is deleted only then).  Pnh, Pnl: now; Pdenied: the gate
-- that denied (-1: none).
local Ppre, Pnh, Pnl, Pdenied

local function pload1(i, v)
  local o, c = PO, PC
  local at = 4 * i
  PRAW[i] = v
  o[at - 3], o[at - 2], o[at - 1], o[at] = 0, 0, 0, 0
  if v and #v == REC_BYTES then
    local x0l, x0h, x1l, x1h, el, eh, lay = sunpack(REC_FMT, v)
    if lay ~= LAYOUT then return false end
    if Pnh < eh or (Pnh == eh and Pnl < el) then
      o[at - 3], o[at - 2], o[at - 1], o[at] = x0h, x0l, x1h, x1l
      POX[2 * i - 1], POX[2 * i] = eh, el
    else
      redis.call('DEL', CK[i]) -- expired: gone for good
      PRAW[i] = false
    end
  elseif v then
    return false
  end
  c[at - 3], c[at - 2], c[at - 1], c[at] = o[at - 3], o[at - 2], o[at - 1],
    o[at]
  return true
end

-- Takes in records a..b; 0, or the first that is not a record.
local function pload(a, b)
  local raw = PRAW
  if Ppre == nil and #CK <= 8 then -- (a larger program reads as before)
    Ppre = redis.call('MGET', unpack(CK))
  end
  if Ppre then
    for i = a, b do
      if raw[i] == nil and not pload1(i, Ppre[i]) then return i end
    end
    return 0
  end
  local fresh = a < b
  for i = a, b do
    if raw[i] ~= nil then fresh = false end
  end
  if not fresh then -- one record, or some read already: GET the others
    for i = a, b do
      if raw[i] == nil and not pload1(i, redis.call('GET', CK[i])) then
        return i
      end
    end
    return 0
  end
  local vals = redis.call('MGET', unpack(CK, a, b))
  for i = a, b do
    if not pload1(i, vals[i - a + 1]) then return i end
  end
  return 0
end

-- A step's guard (when, ref) as lib/algo/program.c tests it.
local function pcond(w, r)
  if w == WHEN_ALWAYS then return true end
  if w == WHEN_PASSED then return Pdenied < 0 end
  local x = PST[r + 1]
  if w == WHEN_DENIED then return x == 2 end
  if w == WHEN_ALLOWED then return x == 1 end
  if w == WHEN_REACHED then return x ~= 0 and PREACH[r + 1] end
  return x == 0
end

local function program(nsteps, nh, nl, minttl)
  local KEYS = CK
  local n = #KEYS
  local o, c, xe, raw = PO, PC, PXE, PRAW
  local st, reached, retry, out = PST, PREACH, PRETRY, POUT
  Ppre, Pnh, Pnl, Pdenied = nil, nh, nl, -1
  for i = 1, n do
    raw[i], xe[2 * i - 1], xe[2 * i] = nil, nil, nil
  end
  local nowl, nowh = nl, nh
  if nowh < 0 then nowh = nowh + T32 end
  local mask, sbit = 0, 1 -- sbit: step s's bit of the ran mask
  local off = HDR_BYTES + 1 -- after the header
  local nout = 0
  for s = 1, nsteps do
    local w1, r1, w2, r2, fold, ttlf, np = sunpack(STEP_GUARD_FMT, AV,
      off + STEP_GUARD_OFF)
    local soff, poff = off, off + STEP_BYTES
    off = poff + 8 * np
    -- (WHEN_ALWAYS, most second conditions, costs no call)
    if (w1 == WHEN_ALWAYS or pcond(w1, r1)) and
       (w2 == WHEN_ALWAYS or pcond(w2, r2)) then
      local sa, sk, key, nk, arg, ih, il = sunpack(STEP_HEAD_FMT, AV, soff)
      local bad = pload(key + 1, key + nk)
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
      mask = mask + sbit
      nout = nout + 1
      out[nout + 1] = r -- out[1]: the header, below
      if fold == FOLD_GATE and not al and Pdenied < 0 then
        -- A gate's denial: every record back as read.
        Pdenied = s - 1
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
      st[s], retry[s] = 0, nil
    end
    sbit = sbit * 2
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
          minttl, raw[i] and xh == POX[2 * i - 1] and xl == POX[2 * i])
      end
    end
  end
  out[1] = spack(PROG_HDR_FMT, Pdenied < 0 and 1 or 0, Pdenied, mask, 0, nowl,
    nowh)
  return table.concat(out, '', 1, nout + 1)
end

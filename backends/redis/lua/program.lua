-- ---------------------------------------------------------- programs
--
-- A program (sluice/program.h; wire.h's header: its record and step
-- counts first): KEYS are its records; after the header each step is
--   algo kind key nkeys arg id_hi id_lo when ref when2 ref2 fold ttl_from
--   nparams params...
-- The same sequencer as lib/algo/program.c: every record read once, each
-- step that its guard lets run is the general step over its records in
-- memory, a gate's denial puts every record back as read, and at the end
-- the records that changed are written with the expiry of the last step
-- over them (program validation makes every step over a record use the same
-- parameters, so that is the C's expiry of the first).  Answers a 24-byte
-- header (allowed, denied_by, ran mask, fresh mask, now) and the verdicts
-- of the steps that ran, in order, but those in the fresh mask: the caller
-- knows a skipped step's (zeros and now) and computes a fresh one's (a box
-- check over a record never struck: the C step over a fresh record, wire.h),
-- so neither costs packing or bytes.

-- A program is compiled before it runs: its steps' numbers unpacked into
-- a table, and what the hot steps need worked out from their parameters
-- (pcompile).  The library keeps compiled programs, keyed by ARGV[1]
-- itself: a policy sends the same bytes for every request of a class and
-- tier, and Redis hands the function the same interned Lua string for
-- them, so a request finds its program with one table lookup and unpacks
-- nothing (PCACHE; in test mode, where now and the least TTL change the
-- header of every call, the steps alone are the key, TCACHE).  The script
-- form compiles on every call, as it made everything else.  The caches
-- are emptied when they reach PCACHE_MAX programs (a program with a lease
-- id is new bytes every time).
--
-- A compiled step is a table: algo, kind, key, nkeys, arg, id, its guard
-- (w1, r1, w2, r2), fold, ttl_from, nparams, poff (where its parameters
-- start in ARGV[1]), and what its fast path needs (g: gcra_compile's
-- numbers; th: a box check's strike threshold, the remaining of its clean
-- verdict, which the guards read).  The step
-- functions: the fast paths are tried first (gcra_prog, the clean box),
-- anything else runs general() (op.lua).  A new fast step is one more
-- field made in pcompile and one more branch in program's step.

-- A program's state lives in tables made once, beside the functions (the
-- library form makes them at FUNCTION LOAD), so a call makes no tables or
-- closures of its own for Redis's Lua to collect.  Each call sets every
-- entry it reads.  PO: records as read, PC: as the steps leave them (4
-- halves each), PXE: their expiries (a pair each), POX: a live record's
-- stored expiry; PRAW: the stored value (false: none; nil: not taken in
-- yet); per step PST (0 skipped, 1 allowed, 2 denied), PREACH (reached),
-- PRETRY (the wait given; nil: did not run); POUT: the header, then each
-- step that ran's verdict and now (packed once a call; '' after a verdict
-- the general step packed whole).
local PO, PC, PXE, PRAW, POX, PABS = {}, {}, {}, {}, {}, {}
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
  PABS[i] = not v -- (absent as read: MGET reads a value of another type so)
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
      if raw[i] == nil then
        -- (false: no record; nil: not read, pstd reads only its own)
        local v = Ppre[i]
        if v == nil then v = redis.call('GET', CK[i]) end
        if not pload1(i, v) then return i end
      end
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

-- ------------------------------------------------ the standard request
--
-- The shape of a policy's request (sluice/program.h's example): a box
-- check (gate), a GCRA group consumed (gate, when passed), and steps that
-- run only after a denial (the Retry-After notice, the strike).  When
-- the box record is absent and every bucket admits, that is all that
-- happens, and pstd does it in straight-line code: one MGET, the buckets
-- decoded and written, the answer joined from parts made at compile time.
-- A bucket record whose expiry has passed is a full bucket, as in the
-- sequencer, and is overwritten.  Anything else (a record present in the
-- box, a bucket that refuses or that gcra_prog would not take) goes on to
-- program() with the values read, having written nothing.

-- Whether a guard condition is false for certain when the first two steps
-- ran and allowed and every later step up to this one was skipped.
local function never(w, r)
  if w == WHEN_DENIED then return true end
  if w == WHEN_ALLOWED or w == WHEN_REACHED then return r >= 2 end
  if w == WHEN_SKIPPED then return r < 2 end
  return false
end

-- The values of pstd's MGET by record index, for program(): those it did
-- not read are nil (read when a step needs them).
local function pstd_pre(std, vals)
  local mk = std.mk
  if not mk then return vals end
  local pre = {}
  for i = 1, std.nm do pre[mk[i]] = vals[i] end
  return pre
end

-- An absent bucket's record, as pstd reads it: zeros, expired at 0 (a
-- full bucket, written as a new key: its deadline never kept); packed by
-- run() on its first call.
local NOREC

-- Each bucket's record as pstd writes it (PW) and how the write sets the
-- key's Redis deadline (PM: false keeps it, else PXAT's step or PX's ms),
-- made once: filled for every bucket before any is written.
local PW, PM = {}, {}

local function pstd(std, nh, nl, minttl)
  local K, mk = CK, std.mk
  local vals
  if mk then
    if std.nm == 3 then
      vals = rcall('MGET', K[mk[1]], K[mk[2]], K[mk[3]])
    else
      local ks = {}
      for i = 1, std.nm do ks[i] = K[mk[i]] end
      vals = rcall('MGET', unpack(ks))
    end
  elseif std.nm == 3 then
    vals = rcall('MGET', K[1], K[2], K[3])
  else
    vals = rcall('MGET', unpack(K, 1, std.nm))
  end
  if vals[std.vb] then return nil, vals end
  local kg, vg = std.kg, std.vg
  local bv, bj, brs, bB
  for j = 1, std.nk do
    -- S: the bucket's rate, period, tau, floor(tau / rate), cost * period
    -- and burst (pstd_shape).
    local S, v = std[j], vals[vg + j]
    local R, tau = S[1], S[3]
    if not v then
      -- MGET reads a value of another type (a hash, a list) as absent:
      -- GET tells (Redis's WRONGTYPE error) before anything is written.
      local e = rpcall('GET', K[kg + j])
      if type(e) == 'table' then return e end
      v = NOREC
    elseif #v ~= REC_BYTES then
      return nil, vals
    end
    -- (oh, ol: the stored expiry, whose step the key's deadline is.)
    local x0l, x0h, fr, ol, oh, lay = sunpack(REC_W1_FMT, v)
    if lay ~= LAYOUT then return nil, vals end
    -- A record whose expiry has passed is a full bucket (D = 0), which
    -- the write below replaces (the sequencer would delete it first).
    local D = 0
    if nh < oh or (nh == oh and nl < ol) then
      -- A TAT the fast step would not take: the general path.
      if fr >= R or fr >= T32 then return nil, vals end
      local dh, dl = x0h - nh, x0l - nl
      if dl < 0 then dl = dl + T32; dh = dh - 1 end
      if dh >= 0 then
        if dh >= 2097152 then return nil, vals end
        local dn = dh * T32 + dl
        if dn > S[4] then return nil, vals end
        D = dn * R + fr
        if D > tau then return nil, vals end
      end
    end
    local Dn = D + S[5]
    if Dn > tau then return nil, vals end
    -- Points left, floor((tau - Dn) / period), and the new TAT, now +
    -- Dn / R as whole ns q and fraction f: 0 <= Dn <= tau <= 2^52 and
    -- rate and period are at most 2^52 (gcra_compile), where a quotient
    -- of two doubles never rounds up to the next integer (that takes a
    -- divisor times the quotient above 2^53), so x - x % 1 is the exact
    -- floor, without fd's correction.
    local ra = (tau - Dn) / S[2]
    ra = ra - ra % 1
    local q = Dn / R
    q = q - q % 1
    local f = Dn - q * R
    local th, tl = nh, nl + q
    if tl >= T32 then
      local cy = tl / T32
      cy = cy - cy % 1
      tl, th = tl - cy * T32, th + cy
    end
    -- Its expiry ceil(TAT), and q becomes ceil(Dn / R): the reset, and
    -- the expiry's distance from now.
    local xh, xl = th, tl
    if f > 0 then
      xl, q = tl + 1, q + 1
      if xl >= T32 then xl = xl - T32; xh = xh + 1 end
    end
    -- The binding bucket: the one left with the fewest points.
    if bv == nil or ra < bv then bv, bj, brs, bB = ra, j, q, S[6] end
    PW[j] = spack(REC_W1_FMT, tl, th, f, xl, xh, LAYOUT)
    -- (setrec's rules, inline: at server time the grid's, at a test
    -- clock the least TTL's)
    if not minttl then
      PM[j] = oh ~= xh and xh
    elseif oh == xh and ol == xl then
      PM[j] = false
    else
      local ms = TTL_CAP_MS
      if q < T52 then ms = fd(q, MS) + 1 end
      if ms < minttl then ms = minttl end
      PM[j] = ms
    end
  end
  for j = 1, std.nk do
    local m = PM[j]
    if not m then
      rcall('SET', K[kg + j], PW[j], 'KEEPTTL')
    elseif minttl then
      rcall('SET', K[kg + j], PW[j], 'PX', m)
    else
      rcall('SET', K[kg + j], PW[j], 'PXAT', pxat(m))
    end
  end
  return spack(STD_FMT, nl, nh, bB, bv, brs, bj - 1)
end

-- What pstd needs of a compiled program of the standard shape, or nil.
local function pstd_shape(prog, nkeys)
  local b, g = prog[1], prog[2]
  if prog.n < 2 or nkeys > 8 or not b.th or b.w1 ~= WHEN_ALWAYS or
     b.w2 ~= WHEN_ALWAYS or not g.g or g.sk ~= OP_CONSUME or g.arg < 1 or
     (g.w1 ~= WHEN_ALWAYS and g.w1 ~= WHEN_PASSED) or
     g.w2 ~= WHEN_ALWAYS then
    return nil
  end
  for s = 3, prog.n do
    local S = prog[s]
    if not (never(S.w1, S.r1) or never(S.w2, S.r2)) then return nil end
  end
  -- nm: the records pstd reads, the box's and the buckets' (the steps
  -- after a denial read theirs when they run): KEYS[1..nm] when they are
  -- the first records, else (a declared route's box is followed by its
  -- notice's record) mk, their indexes, the box's first.  vb, vg: where
  -- the MGET's answer has the box's value and the buckets' (vg + j).
  local kb, kg, nk = b.key + 1, g.key, g.nk
  local nm, mk, vb, vg = kb, nil, kb, kg
  if kg + nk > nm then nm = kg + nk end
  if nm > 1 + nk then
    mk, nm, vb, vg = {kb}, 1 + nk, 1, 1
    for j = 1, nk do mk[1 + j] = kg + j end
  end
  local std = {vb = vb, vg = vg, mk = mk, kg = kg, nk = nk, nm = nm}
  -- std[j]: bucket j's rate, period, tau, floor(tau / rate), cost *
  -- period and burst, in one table each (a field read costs the server
  -- about what three arithmetic operations do); a rate above 2^52 (where
  -- pstd's quotients would need fd's correction) leaves it to the
  -- sequencer.
  local G = g.g
  for j = 1, nk do
    local k = 6 * j
    if G[k - 5] > T52 then return nil end
    std[j] = {G[k - 5], G[k - 4], G[k - 2], G[k - 1], G[k], G[k - 3]}
  end
  return std
end

-- PIDS: the same compiled programs keyed by their id, the 24 bytes the
-- client puts in the header's arg and id fields (a SHA-256 of the steps'
-- bytes, redis_codec.c): a call that sends the header alone (HDR_BYTES)
-- names its program by id (pbyid).
local PCACHE, TCACHE, PIDS, PCN = {}, {}, {}, 0
local PCACHE_MAX = 64

-- Keeps prog under key in cache (one of the three), emptying them all
-- first when they hold PCACHE_MAX programs; the cache to use from now on.
local function pkeep(cache, key, prog)
  if PCN >= PCACHE_MAX then
    local c = cache == TCACHE and 1 or cache == PIDS and 2 or 0
    PCACHE, TCACHE, PIDS, PCN = {}, {}, {}, 0
    cache = c == 1 and TCACHE or c == 2 and PIDS or PCACHE
  end
  PCN = PCN + 1
  cache[key] = prog
end

-- Compiles the nsteps steps of ARGV[1] (AV); nil and a reply for
-- malformed arguments.
local function pcompile(nsteps, nkeys)
  local prog = {n = nsteps, nkeys = nkeys, av = AV}
  local off, len = HDR_BYTES + 1, #AV
  for s = 1, nsteps do
    if off + STEP_BYTES - 1 > len then
      return nil, fail('EINVAL', 'malformed program')
    end
    local sa, sk, key, nk, arg, ih, il, w1, r1, w2, r2, fold, ttlf, np =
      sunpack(STEP_FMT, AV, off)
    local poff = off + STEP_BYTES
    off = poff + 8 * np
    if np < 0 or off - 1 > len or key < 0 or nk < 1 or key + nk > nkeys then
      return nil, fail('EINVAL', 'malformed program')
    end
    local S = {sa = sa, sk = sk, key = key, nk = nk, arg = arg, ih = ih,
               il = il, w1 = w1, r1 = r1, w2 = w2, r2 = r2, fold = fold,
               ttlf = ttlf, np = np, poff = poff}
    if sa == ALGO_GCRA and (sk == OP_CONSUME or sk == OP_PEEK) and
       np == GCRA_PARAMS * nk and arg >= 0 then
      S.g = gcra_compile(nk, arg, poff)
    elseif sa == ALGO_PENALTY and sk == OP_CHECK and nk == 1 and np >= 1 then
      -- A box check of a key never struck: not boxed, nothing changes,
      -- strike_threshold strikes remaining; its verdict is the caller's.
      S.th = sunpack('<i8', AV, poff)
    end
    prog[s] = S
  end
  if off - 1 ~= len then return nil, fail('EINVAL', 'malformed program') end
  prog.std = pstd_shape(prog, nkeys)
  -- One GCRA step over one record (an operation's call): pone (gcra.lua).
  local S = prog[1]
  if nsteps == 1 and nkeys == 1 and S.g and S.nk == 1 then
    prog.one = {g = S.g, kind = S.sk, gate = S.fold == FOLD_GATE}
  end
  return prog
end

-- The compiled program of this call: from a cache, or compiled (and kept
-- there, and under its id if the header has one: in PIDS, and at server
-- time in PCACHE too).  key: ARGV[1] (server
-- time), or its steps (test mode).
local function pfind(cache, key, nsteps, nkeys)
  local prog = cache[key]
  if prog and prog.n == nsteps and prog.nkeys == nkeys then return prog end
  local err
  prog, err = pcompile(nsteps, nkeys)
  if not prog then return nil, err end
  local server = cache == PCACHE
  pkeep(cache, key, prog)
  local id = string.sub(AV, PID_FROM, PID_TO)
  if id ~= NOID then
    pkeep(PIDS, id, prog)
    -- (at server time a call may name it by the id alone: run() finds it
    -- by its argument, as it finds the whole program)
    if server then pkeep(PCACHE, id, prog) end
  end
  return prog
end

-- The program a header-only call names by its id, or nil and the error
-- the client answers by sending the whole program (redis_codec.c): the
-- library never had it, or lost it (FUNCTION FLUSH, a restart, another
-- node, the caches emptied).  Nothing is read or written before.  key:
-- ARGV[1] to keep it under (server time), or nil.
local function pbyid(nsteps, nkeys, key)
  local prog = PIDS[string.sub(AV, PID_FROM, PID_TO)]
  if not prog or prog.n ~= nsteps or prog.nkeys ~= nkeys then
    return nil, redis.error_reply(NOPROGRAM .. ' program id unknown')
  end
  if key then pkeep(PCACHE, key, prog) end
  return prog
end

-- What the end of a program does with record i: 0 nothing, 1 delete it,
-- 2 write it (PC's words, PXE's expiry).
local function pwrite(i, nh, nl)
  local raw, q = PRAW[i], 4 * i
  local xh, xl = PXE[2 * i - 1], PXE[2 * i]
  if raw == nil or xh == nil then return 0 end
  local c, o = PC, PO
  if c[q - 3] == o[q - 3] and c[q - 2] == o[q - 2] and c[q - 1] == o[q - 1]
     and c[q] == o[q] and
     (not raw or (xh == POX[2 * i - 1] and xl == POX[2 * i])) then
    return 0
  end
  if xh < nh or (xh == nh and xl <= nl) then
    if raw then return 1 end
    return 0
  end
  return 2
end

-- pre: the values of an MGET of every record already made (pstd's), or
-- nil.
local function program(prog, nh, nl, minttl, pre)
  local KEYS = CK
  local n = #KEYS
  local o, c, xe, raw = PO, PC, PXE, PRAW
  local st, reached, retry, out = PST, PREACH, PRETRY, POUT
  Ppre, Pnh, Pnl, Pdenied = pre, nh, nl, -1
  for i = 1, n do
    raw[i], xe[2 * i - 1], xe[2 * i] = nil, nil, nil
  end
  local now8 = spack(NOW_FMT, nl, nh)
  local mask, fresh, sbit = 0, 0, 1 -- sbit: step s's bit of the masks
  local nout = 1 -- out[1]: the header, below; then a verdict and now each
  for s = 1, prog.n do
    local S = prog[s]
    local w1, w2 = S.w1, S.w2
    -- (WHEN_ALWAYS, most second conditions, costs no call)
    if (w1 == WHEN_ALWAYS or pcond(w1, S.r1)) and
       (w2 == WHEN_ALWAYS or pcond(w2, S.r2)) then
      local sa, sk, key, nk, arg = S.sa, S.sk, S.key, S.nk, S.arg
      local bad = pload(key + 1, key + nk)
      if bad > 0 then
        return fail('ECORRUPT', 'record of another layout at key ' .. bad)
      end
      local r, al, rem, rty
      local at = 4 * (key + 1)
      if S.g then
        r, al, rem, rty = gcra_prog(c, xe, POX, key, nk, sk, arg, nh, nl,
          S.g)
      elseif S.th and c[at - 3] == 0 and c[at - 2] == 0 and
             c[at - 1] == 0 and c[at] == 0 then
        r, al, rem, rty = true, true, S.th, 0
        fresh = fresh + sbit
      end
      if r == true then
        -- (a fresh verdict: not sent)
      elseif r then
        out[nout + 1], out[nout + 2] = r, now8
        nout = nout + 2
      else
        local np, ttlf = S.np, S.ttlf
        local P = {sunpack(string.rep('i8', np), prog.av, S.poff)}
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
        r = general(P, sa, sk, nh, nl, arg, S.ih, S.il, M)
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
        out[nout + 1], out[nout + 2] = r, ''
        nout = nout + 2
      end
      st[s] = al and 1 or 2
      reached[s] = not al or rem == 0
      retry[s] = rty
      mask = mask + sbit
      if S.fold == FOLD_GATE and not al and Pdenied < 0 then
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
  -- As the C stores: a record a step changed, or whose expiry it moved
  -- (parameters can move the expiry of an untouched record), is written
  -- with its expiry, or goes when that has come; anything else is left
  -- alone.  Nothing is written where a record read as absent is a value
  -- of another type.
  for i = 1, n do
    if PABS[i] and pwrite(i, nh, nl) == 2 then
      local e = rpcall('GET', KEYS[i]) -- (as in pstd)
      if type(e) == 'table' then return e end
    end
  end
  for i = 1, n do
    local w, q = pwrite(i, nh, nl), 4 * i
    if w == 1 then
      redis.call('DEL', KEYS[i])
    elseif w == 2 then
      local oh, ol
      if raw[i] then oh, ol = POX[2 * i - 1], POX[2 * i] end
      write_rec(KEYS[i], c[q - 3], c[q - 2], c[q - 1], c[q], xe[2 * i - 1],
        xe[2 * i], nh, nl, minttl, oh, ol)
    end
  end
  out[1] = spack(PROG_HEAD_FMT, Pdenied < 0 and 1 or 0, Pdenied, mask, fresh) ..
    now8
  return table.concat(out, '', 1, nout)
end

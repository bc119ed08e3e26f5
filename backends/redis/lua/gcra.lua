-- gcra.lua -- the GCRA step (lib/algo/gcra.c) in Redis Lua.
--
-- Sections (backends/redis/embed_lua.py puts each where op.lua or entry.lua
-- names it): "fast", the straight-line hot paths at the top level; "range",
-- "step" and "expiry", blocks of general() (lua/op.lua) that see its locals.

--@section fast
-- ------------------------------------------------------------- fast path
--
-- The hot case, a GCRA group consumed or peeked with every TAT within one
-- tolerance of now, in straight-line code: the same arithmetic as the
-- general GCRA step below (its "not over" branch), without the helper
-- closures and tables that the general step allocates on every call.

-- A bucket's new TAT, now + Dn / R (Dn = D + cost * period, the scaled
-- TAT - now, at most 2^53): its whole ns as a pair and its fraction; its
-- expiry ceil(TAT) as a pair; and expiry - now in ns.
local function gcra_tat(Dn, R, nh, nl)
  local q = fd(Dn, R)
  local f = Dn - q * R
  local th, tl = nh, nl + q
  if tl >= T32 then
    local cy = tl / T32
    cy = cy - cy % 1
    tl = tl - cy * T32
    th = th + cy
  end
  if f == 0 then return th, tl, f, th, tl, q end
  local xh, xl = th, tl + 1
  if xl >= T32 then xl = xl - T32; xh = xh + 1 end
  return th, tl, f, xh, xl, q + 1
end

-- A program of one GCRA step over one record, consumed or peeked (an
-- operation's usual call), in straight-line code as the sequencer's own
-- fast step would run it: one GET, at most one SET, the program's answer
-- packed at once.  std: what pcompile (program.lua) made of it.  nil
-- for any other case (an expired or foreign value, a TAT out of reach, a
-- record whose stored expiry the general step would rewrite), having
-- written nothing: the sequencer then decides.
local function pone(std, nh, nl, minttl)
  local key, g, kind = CK[1], std.g, std.kind
  local R, Pd, B, tau = g[1], g[2], g[3], g[4]
  local v = rpcall('GET', key)
  if type(v) == 'table' then return v end -- a value of another type
  local w0l, w0h, fr, w1h, el, eh, lay = 0, 0, 0, 0, 0, 0, LAYOUT
  local stale, oh = false, nil
  if v and #v == REC_BYTES then
    w0l, w0h, fr, w1h, el, eh, lay = sunpack(REC_FMT, v)
    oh = eh
    if lay == LAYOUT and not (nh < eh or (nh == eh and nl < el)) then
      -- Expired (a bucket that is full again): a fresh record, and the
      -- stale one goes, as in the sequencer.
      w0l, w0h, fr, w1h = 0, 0, 0, 0
      stale = true
      v = false
    end
  elseif v then
    return nil
  end
  if lay ~= LAYOUT or w1h ~= 0 or fr >= R then return nil end
  local D
  local dh, dl = w0h - nh, w0l - nl
  if dl < 0 then dl = dl + T32; dh = dh - 1 end
  if dh < 0 then
    D = 0
  elseif dh < 2097152 then
    local dn = dh * T32 + dl
    if dn <= g[5] then
      D = dn * R + fr
      if D > tau then return nil end
    else
      return nil
    end
  else
    return nil
  end
  local Dn = D + g[6]
  local fits = Dn <= tau
  local rem, rst, rty
  if fits and kind == OP_CONSUME then
    rem, rst, rty = fd(tau - Dn, Pd), cd(Dn, R), 0
  else
    rem, rst = fd(tau - D, Pd), cd(D, R)
    rty = 0
    if not fits then rty = cd(Dn - tau, R) end
  end
  if fits and kind == OP_CONSUME and g[6] > 0 then
    local th, tl, f, xh, xl = gcra_tat(Dn, R, nh, nl)
    setrec(key, spack(REC_FMT, tl, th, f, 0, xl, xh, LAYOUT), xh, xl, nh,
      nl, minttl, oh, el)
  elseif v then
    -- Unchanged record: the general step would rewrite its expiry if it
    -- is not ceil(TAT) (a value another writer left).
    local xh, xl = w0h, w0l
    if fr > 0 then
      xl = xl + 1
      if xl >= T32 then xl = xl - T32; xh = xh + 1 end
    end
    if xh ~= eh or xl ~= el then return nil end
  elseif stale then
    rcall('DEL', key)
  end
  -- The program's answer: its header (a gate's denial denies it), now,
  -- the step's verdict (its int64 fields exact below 2^53) and now.
  local pal, pden = 1, -1
  if std.gate and not fits then pal, pden = 0, 0 end
  return spack(PONE_FMT, pal, pden, 1, 0, nl, nh, fits and 1 or 0, 0, 0, 0,
    B, rem, rty, rst, 0, 0, 0, nl, nh)
end

-- The hot step of a program, straight-line over the in-memory records
-- (c: four unsigned halves per record, record i at 4i-3 .. 4i; xe: its
-- expiry pair at 2i-1, 2i, once a step set it; ox: as stored): a GCRA group consumed or peeked with
-- every TAT within one tolerance of now.  g: what gcra_compile() made of
-- the step's parameters when the program was compiled.  Answers the
-- verdict but its last field, now (the program adds it), allowed,
-- remaining and the wait, and writes the outputs and expiries; or nil
-- having changed nothing (the general step then runs).  No tables of its
-- own (a program runs on every request): GE holds D, Dn per key, made
-- once, each entry set before it is read.
local GE, GX = {}, {} -- (GX: pstd's stored expiries)
local function gcra_prog(c, xe, ox, key, nk, kind, cost, nh, nl, g)
  local e = GE
  local all = true
  for j = 1, nk do
    local k = 6 * j
    local R, tau = g[k - 5], g[k - 2]
    local at = 4 * (key + j)
    local fr = c[at]
    if c[at - 1] ~= 0 or fr >= R then return nil end
    local D
    local dh, dl = c[at - 3] - nh, c[at - 2] - nl
    if dl < 0 then dl = dl + T32; dh = dh - 1 end
    if dh < 0 then
      D = 0
    elseif dh < 2097152 then
      local dn = dh * T32 + dl
      if dn <= g[k - 1] then
        D = dn * R + fr
        if D > tau then return nil end
      else
        return nil
      end
    else
      return nil
    end
    local Dn = D + g[k]
    e[2 * j - 1], e[2 * j] = D, Dn
    if Dn > tau then all = false end
  end
  -- The binding bucket (as the general step): admitted, the one left
  -- with the fewest points; refused, the one with the longest wait.
  local b, bv, rty = 1, nil, 0
  for j = 1, nk do
    local k = 6 * j
    local tau = g[k - 2]
    if all then
      local ra = fd(tau - e[2 * j], g[k - 4])
      if bv == nil or ra < bv then b, bv = j, ra end
    else
      local rt = 0
      if e[2 * j] > tau then rt = cd(e[2 * j] - tau, g[k - 5]) end
      if bv == nil or rt > bv then b, bv = j, rt end
      if rt > rty then rty = rt end
    end
  end
  local k = 6 * b
  local R, Pd, B, tau = g[k - 5], g[k - 4], g[k - 3], g[k - 2]
  local rem, rst
  if all and kind == OP_CONSUME then
    rem, rst = bv, cd(e[2 * b], R)
  else
    rem, rst = fd(tau - e[2 * b - 1], Pd), cd(e[2 * b - 1], R)
  end
  if all and kind == OP_CONSUME and cost > 0 then
    for j = 1, nk do
      local at = 4 * (key + j)
      local th, tl, f, xh, xl = gcra_tat(e[2 * j], g[6 * j - 5], nh, nl)
      c[at - 3], c[at - 2], c[at - 1], c[at] = th, tl, 0, f
      xe[2 * (key + j) - 1], xe[2 * (key + j)] = xh, xl
    end
  else
    -- Nothing written: the general step would rewrite the expiry of a
    -- record whose expiry (ox: as stored) is not ceil(TAT) (a record
    -- another path wrote), so it runs instead.
    for j = 1, nk do
      local i = key + j
      local at = 4 * i
      if c[at - 3] ~= 0 or c[at - 2] ~= 0 or c[at] ~= 0 then
        local xh, xl = xe[2 * i - 1], xe[2 * i]
        if xh == nil then xh, xl = ox[2 * i - 1], ox[2 * i] end
        local th, tl = c[at - 3], c[at - 2]
        if c[at] > 0 then
          tl = tl + 1
          if tl >= T32 then tl = tl - T32; th = th + 1 end
        end
        if th ~= xh or tl ~= xl then return nil end
      end
    end
  end
  return spack(VERDICT_NONOW, all and 1 or 0, 0, b - 1, 0, B, rem, rty, rst,
    0, 0, 0), all, rem, rty
end

-- A GCRA step's parameters as gcra_prog wants them, per key: rate, period,
-- burst, tau = burst * period, floor(tau / rate) and cost * period; nil if
-- a tau is beyond the exact range (the general step answers that).
local function gcra_compile(nk, cost, poff)
  local g = {}
  for j = 1, nk do
    local R, Pd, B = sunpack(GCRA_FMT, AV, poff + GCRA_BYTES * (j - 1))
    local tau = B * Pd
    if tau > T52 or R < 1 or Pd < 1 then return nil end
    local k = 6 * j
    g[k - 5], g[k - 4], g[k - 3], g[k - 2], g[k - 1], g[k] = R, Pd, B, tau,
      fd(tau, R), cost * Pd
  end
  return g
end

--@section range
if algo == ALGO_GCRA then
  known = true
  for i = 1, nkeys do
    local base = A_PARAMS - 1 + (i - 1) * GCRA_PARAMS
    if A[base + 3] * A[base + 2] > T52 then
      bad = true
    end
    if a1h[i] ~= 0 then
      return fail('ECORRUPT', 'record does not decode')
    end
  end
end

--@section step
-- ---------------------------------------------------------------- GCRA
if algo == ALGO_GCRA then
  local n = nkeys
  local e = {}
  local all = true
  local rh, rl = 0, 0 -- max retry
  for i = 1, n do
    local base = A_PARAMS - 1 + (i - 1) * GCRA_PARAMS
    local R, Pd, B = A[base + 1], A[base + 2],
      A[base + 3]
    local tau = B * Pd
    local cP = arg * Pd -- <= tau: cost <= burst is validated
    -- The TAT is unsigned: a charge near INT64_MAX may pass it.
    local th, tl = a0h[i], a0l[i]
    local frac = a1l[i]
    if frac >= R then
      -- Written under another rate: the same scaled TAT, renormalised.
      local qf = fd(frac, R)
      th, tl = add(th, tl, pair(qf))
      frac = frac - qf * R
    end
    local dh, dl = sub(th, tl, nh, nl) -- TAT - now, whole ns
    local D -- scaled TAT - now, when it is at most tau
    local over = false
    if dh < 0 then
      D = 0 -- dn <= -1 and frac < R: the bucket is full
    else
      local dn = num(dh, dl)
      if dn ~= nil and dn <= fd(tau, R) then
        D = dn * R + frac -- <= tau + R, exact
        if D > tau then over = true end
      else
        over = true
      end
    end
    -- All fields at once: one allocation instead of a growing hash.
    local x = {R = R, Pd = Pd, B = B, fits = false, rb = P0, ra = P0,
               rt = P0, sb = P0, sa = P0, Dn = 0}
    if not over then
      -- 0 <= D <= tau <= 2^52, so Dn <= 2 tau <= 2^53: all exact.
      local Dn = D + cP
      x.fits = Dn <= tau
      x.rb = P(fd(tau - D, Pd))
      if x.fits then x.ra = P(fd(tau - Dn, Pd)) else x.ra = P0 end
      if x.fits then x.rt = P0 else x.rt = P(cd(Dn - tau, R)) end
      x.sb = P(cd(D, R))
      x.sa = P(cd(Dn, R))
      x.Dn = Dn
    else
      -- The TAT lies beyond a full tolerance ahead (a clock that went
      -- back): no points left, and every wait is TAT - now plus a small
      -- exact correction, computed on the pair.
      x.fits = false
      x.rb, x.ra = P0, P0
      x.rt = {sat(add(dh, dl, pair(cd(frac + cP - tau, R))))}
      x.sb = {sat(add(dh, dl, pair(frac > 0 and 1 or 0)))}
      x.sa = {sat(add(dh, dl, pair(cd(frac + cP, R))))}
    end
    if not x.fits then all = false end
    if lt(rh, rl, x.rt[1], x.rt[2]) then rh, rl = x.rt[1], x.rt[2] end
    e[i] = x
  end
  local b = 1
  for i = 2, n do
    if all then
      if lt(e[i].ra[1], e[i].ra[2], e[b].ra[1], e[b].ra[2]) then b = i end
    else
      if lt(e[b].rt[1], e[b].rt[2], e[i].rt[1], e[i].rt[2]) then b = i end
    end
  end
  if all and kind == OP_CONSUME and arg > 0 then
    for i = 1, n do
      local q = fd(e[i].Dn, e[i].R)
      local h, l = add(nh, nl, pair(q))
      put(i, h, l, 0, e[i].Dn - q * e[i].R)
    end
  end
  V.allowed = all and 1 or 0
  V.binding = b - 1
  limit = P(e[b].B)
  if all and kind == OP_CONSUME then
    remaining, reset = e[b].ra, e[b].sa
  else
    remaining, reset = e[b].rb, e[b].sb
  end
  retry = {rh, rl}
end

--@section expiry
if algo == ALGO_GCRA then
    -- ceil((tat * rate + frac) / rate), the fraction renormalised first
    -- (a record written under another rate may hold frac >= rate).
    local R = A[A_PARAMS + (i - 1) * GCRA_PARAMS]
    local th, tl = b0h[i], b0l[i]
    local f = b1h[i] * T32 + b1l[i]
    if f >= R then
      local q = fd(f, R)
      th, tl = add(th, tl, pair(q))
      f = f - q * R
    end
    if th == 0 and tl == 0 and f == 0 then return 0, 0 end
    if f > 0 then return sat(add(th, tl, 0, 1)) end
    return th, tl
end

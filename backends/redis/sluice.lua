-- sluice.lua -- the algorithm layer (lib/algo/*.c) ported to Redis Lua.
--
-- One script runs every step so that a node loads one SHA.  It reads the
-- group's records, runs the same transition as sluice_op_step() over the
-- same 16-byte encoding, writes back the records that changed with the
-- expiry sluice_op_expiry() gives them, and returns the verdict packed as
-- binary.  Redis runs a script atomically, which makes a group one atomic
-- unit, exactly as the C backends' locks do.
--
-- The wire contract (the call's numbers, the record value, the verdict
-- layouts) is defined once, in backends/redis/wire.h; every number the C
-- defines reaches this script as a local of the prelude that wire_lua.c
-- prints at build time (LAYOUT, ALGO_*, OP_*, WHEN_*, the formats).  A
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
-- ARGV[1] holds every number of the call as little-endian int64s (wire.h
-- says why one binary argument), unpacked with HDR_FMT: algo (WIRE_GET
-- reads one record), kind, now (hi, lo; hi < 0: use TIME), arg, id (hi,
-- lo), the minimum TTL ms for writes (test mode keeps records around while
-- the manual clock stands still), then the parameters from A[A_PARAMS].
-- int64 -> double rounds as the decimal strings of earlier versions did.

local T32 = 4294967296
local MS = 1000000
local floor = math.floor
local spack, sunpack = struct.pack, struct.unpack

local function fail(code, msg)
  return redis.error_reply('SLUICE ' .. code .. ' ' .. msg)
end

-- ------------------------------------------------------------------- now

local AV = ARGV[1]
if #KEYS < 1 or #AV < HDR_BYTES or #AV % 8 ~= 0 then
  return fail('EINVAL', 'malformed arguments')
end
local algo, kind, nh, nl, arg, idh, idl, minttl =
  sunpack(HDR_FMT, AV)
if nh < 0 then
  local t = redis.call('TIME')
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  local sh = floor(sec / 65536)
  local a = sh * 1000000000 -- < 2^47
  local x = (sec - sh * 65536) * 1000000000 + usec * 1000 -- < 2^46
  local xh = floor(x / T32)
  nh = floor(a / 65536) -- a * 2^16 = nh * 2^32 + (a mod 2^16) * 2^16
  nl = (a - nh * 65536) * 65536 + x - xh * T32
  nh = nh + xh
  if nl >= T32 then nl = nl - T32; nh = nh + 1 end
end

-- ------------------------------------------------------------- fast path
--
-- The hot case, one GCRA bucket consumed or peeked with its TAT within one
-- tolerance of now, in straight-line code: the same arithmetic as the
-- general GCRA step below (its "not over" branch), without the helper
-- closures and tables that the general path allocates on every call.
-- gcra1 answers the packed verdict, or nil for any other case (an expired
-- or foreign value, a TAT out of reach, a record whose stored expiry the
-- general path would rewrite), and then it has written nothing.

-- Exact floor(a / b) and ceil(a / b) for integers below 2^53, b > 0 (a may
-- be negative): the quotient of two doubles can round to the next integer,
-- so correct it by the remainder.  The fast path and the general path's
-- helpers use them alike.
local function fd(a, b)
  local q = floor(a / b)
  local r = a - q * b
  if r < 0 then return q - 1 elseif r >= b then return q + 1 end
  return q
end
local function cd(a, b)
  local q = fd(a, b)
  if q * b < a then return q + 1 end
  return q
end

local function gcra1(key, kind, cost, minttl, nh, nl, R, Pd, B)
  local tau = B * Pd
  local v = redis.call('GET', key)
  local w0l, w0h, fr, w1h, el, eh, lay = 0, 0, 0, 0, 0, 0, LAYOUT
  local stale = false
  if v and #v == REC_BYTES then
    w0l, w0h, fr, w1h, el, eh, lay = sunpack(REC_FMT, v)
    if lay == LAYOUT and not (nh < eh or (nh == eh and nl < el)) then
      -- Expired (a bucket that is full again): a fresh record, and the
      -- stale one goes, as in the general path.
      w0l, w0h, fr, w1h = 0, 0, 0, 0
      stale = true
      v = false
    end
  elseif v then
    return nil
  end
  if tau > T52 or lay ~= LAYOUT or w1h ~= 0 or fr >= R then return nil end
  local D
  local dh, dl = w0h - nh, w0l - nl
  if dl < 0 then dl = dl + T32; dh = dh - 1 end
  if dh < 0 then
    D = 0
  elseif dh < 2097152 then
    local dn = dh * T32 + dl
    local m = floor(tau / R) -- exact floor(tau / R), corrected below
    if m * R > tau then m = m - 1 elseif (m + 1) * R <= tau then m = m + 1 end
    if dn <= m then
      D = dn * R + fr
      if D > tau then D = nil end
    end
  end
  if D == nil then return nil end
  local Dn = D + cost * Pd
  local fits = Dn <= tau
  local rem, rst, rty
  if fits and kind == OP_CONSUME then
    rem, rst, rty = fd(tau - Dn, Pd), cd(Dn, R), 0
  else
    rem, rst = fd(tau - D, Pd), cd(D, R)
    rty = 0
    if not fits then rty = cd(Dn - tau, R) end
  end
  if fits and kind == OP_CONSUME then
    local q = fd(Dn, R)
    local f = Dn - q * R
    local th, tl = nh, nl + q -- q < 2^53: carry below
    local c = floor(tl / T32)
    tl = tl - c * T32
    th = th + c
    local xh, xl = th, tl
    local ttl = q
    if f > 0 then
      xl = xl + 1
      ttl = ttl + 1
      if xl >= T32 then xl = xl - T32; xh = xh + 1 end
    end
    local ms = fd(ttl, MS) + 1
    if ms < minttl then ms = minttl end
    redis.call('SET', key,
      spack(REC_FMT, tl, th, f, 0, xl, xh, LAYOUT), 'PX', ms)
  elseif v then
    -- Unchanged record: the general path would rewrite its expiry if it
    -- differs from ceil(TAT) (a value another path wrote).
    local xh, xl = w0h, w0l
    if fr > 0 then
      xl = xl + 1
      if xl >= T32 then xl = xl - T32; xh = xh + 1 end
    end
    if xh ~= eh or xl ~= el then return nil end
  elseif stale then
    redis.call('DEL', key)
  end
  -- The verdict layout of the general path; its int64 fields are exact
  -- integers below 2^53 here, which struct packs as 'i8'.
  return spack(VERDICT_NUMS, fits and 1 or 0, 0, 0, 0,
    B, rem, rty, rst, 0, 0, 0, nl, nh)
end

-- ------------------------------------------------------- general path
--
-- Every algorithm and group, the port of sluice_op_step() proper.  A
-- function, so that a batch can run it for the call the fast path refuses
-- without leaving the batch (the calls after it must still follow it), and
-- so that its helpers are made only when it runs.

-- The SET of one record with its expiry as the stored value's and (in ms,
-- raised to minttl) as the Redis TTL; SLUICE_FOREVER: no TTL.
local function write_rec(key, w0h, w0l, w1h, w1l, xh, xl, nh, nl, minttl)
  local v = spack(REC_FMT, w0l, w0h, w1l, w1h, xl, xh, LAYOUT)
  if xh == 2147483647 and xl == T32 - 1 then
    redis.call('SET', key, v)
    return
  end
  local dh, dl = xh - nh, xl - nl
  if dl < 0 then dl = dl + T32; dh = dh - 1 end
  local ms
  if dh >= T52 / T32 then ms = TTL_CAP_MS
  else ms = fd(dh * T32 + dl, MS) + 1 end
  if ms < minttl then ms = minttl end
  redis.call('SET', key, v, 'PX', ms)
end

-- One step over a group.  KEYS given: it reads and writes the group's
-- records itself.  M given instead (a program's step): the records come
-- from M (M.n of them, unsigned halves in M.a0h, M.a0l, M.a1h, M.a1l) and
-- go back into M.b0h.., with their expiry pairs in M.eh, M.el; nothing is
-- read or written here.
local function general(KEYS, A, algo, kind, nh, nl, arg, idh, idl, minttl, M)
  -- ------------------------------------------------------------ int64 pairs

  local function sub(ah, al, bh, bl)
    local h, l = ah - bh, al - bl
    if l < 0 then l = l + T32; h = h - 1 end
    return h, l
  end
  local function add(ah, al, bh, bl)
    local h, l = ah + bh, al + bl
    if l >= T32 then l = l - T32; h = h + 1 end
    return h, l
  end
  -- Saturating at INT64_MAX, as sluice__sat_add / sluice__clamp64.
  local function sat(h, l)
    if h >= 2147483648 then return 2147483647, T32 - 1 end
    return h, l
  end
  -- An exact integer |x| < 2^53 as a pair (division by 2^32 is exact).
  local function pair(x)
    local h = floor(x / T32)
    return h, x - h * T32
  end
  -- A pair as a number when it is exact (|x| < 2^53), else nil.
  local function num(h, l)
    if h >= -2097152 and h < 2097152 then return h * T32 + l end
    return nil
  end
  local function lt(ah, al, bh, bl)
    return ah < bh or (ah == bh and al < bl)
  end
  local function le(ah, al, bh, bl)
    return ah < bh or (ah == bh and al <= bl)
  end
  local function s32(h) -- unsigned high half of a uint64 word -> signed
    if h >= 2147483648 then return h - T32 end
    return h
  end

  -- (hi, lo) mod w for a non-negative pair and 1 <= w <= 2^52, by Horner in
  -- chunks small enough that r * 2^k stays below 2^53.
  local function pmod(h, l, w)
    local k = 1
    while k < 16 and w * 2 ^ (k + 1) <= T52 * 2 do k = k + 1 end
    local r = 0
    for half = 1, 2 do
      local x = l
      if half == 1 then x = h end
      local bits = 32
      while bits > 0 do
        local take = k
        if take > bits then take = bits end
        bits = bits - take
        local c = floor(x / 2 ^ bits) % 2 ^ take
        r = r * 2 ^ take + c
        r = r - fd(r, w) * w
      end
    end
    return r
  end

  -- ms (0 <= ms < 2^53) * 1e6 as a pair: both halves times 1e6 < 2^53.
  local function ms2ns(ms)
    local mh, ml = pair(ms)
    local xh, xl = pair(ml * MS)
    return xh + mh * MS, xl
  end

  -- ---------------------------------------------------------------- records

  local nkeys = M and M.n or #KEYS
  local raw = {}
  -- w0h, w0l, w1h, w1l per key (unsigned halves), zero when absent/expired.
  local a0h, a0l, a1h, a1l = {}, {}, {}, {}
  local aeh, ael = {}, {} -- stored expiry of live records

  local function load(i)
    local v = redis.call('GET', KEYS[i])
    raw[i] = v
    if v and #v == REC_BYTES then
      local x0l, x0h, x1l, x1h, el, eh, lay = sunpack(REC_FMT, v)
      if lay ~= LAYOUT then return false end
      if lt(nh, nl, eh, el) then
        a0h[i], a0l[i], a1h[i], a1l[i] = x0h, x0l, x1h, x1l
        aeh[i], ael[i] = eh, el
        return true
      end
      -- Expired: gone for good, as in the C stores (a clock that later
      -- steps back must not bring it back).
      redis.call('DEL', KEYS[i])
      raw[i] = false
    elseif v then
      return false
    end
    a0h[i], a0l[i], a1h[i], a1l[i] = 0, 0, 0, 0
    return true
  end

  if algo == WIRE_GET then
    local v = redis.call('GET', KEYS[1])
    if v and #v == REC_BYTES then
      local _, _, _, _, el, eh = sunpack(REC_FMT, v)
      if le(eh, el, nh, nl) then
        redis.call('DEL', KEYS[1])
        v = false
      end
    end
    return {v, nh, nl}
  end

  if M then
    a0h, a0l, a1h, a1l = M.a0h, M.a0l, M.a1h, M.a1l
  else
    for i = 1, nkeys do
      if not load(i) then
        return fail('ECORRUPT', 'record of another layout at key ' .. i)
      end
    end
  end


  -- Output records (unsigned halves) and expiries (pairs) per key.
  local b0h, b0l, b1h, b1l = {}, {}, {}, {}
  local eh, el = {}, {}
  for i = 1, nkeys do
    b0h[i], b0l[i], b1h[i], b1l[i] = a0h[i], a0l[i], a1h[i], a1l[i]
  end
  local function put(i, w0h, w0l, w1h, w1l)
    if w0h < 0 then w0h = w0h + T32 end
    if w1h < 0 then w1h = w1h + T32 end
    b0h[i], b0l[i], b1h[i], b1l[i] = w0h, w0l, w1h, w1l
  end

  -- The verdict (int64 fields as pairs).
  local V = {allowed = 0, flags = 0, binding = 0, level = 0}
  local P0 = {0, 0}
  local limit, remaining, retry, reset = P0, P0, P0, P0
  local strikes_rem, offenses = P0, P0
  local lease = P0
  local function P(x) local h, l = pair(x); return {h, l} end
  local FOREVER = {2147483647, T32 - 1}


  -- The exact range (sluice.lua header), checked before anything runs; the
  -- C side refuses the same parameters, this is the second line of defence.
  do
    local bad = false
    if algo == ALGO_GCRA then
      for i = 1, nkeys do
        local base = A_PARAMS - 1 + (i - 1) * GCRA_PARAMS
        if A[base + 3] * A[base + 2] > T52 then
          bad = true
        end
        if a1h[i] ~= 0 then
          return fail('ECORRUPT', 'record does not decode')
        end
      end
    elseif algo == ALGO_SWINDOW then
      local l, w = A[A_PARAMS], A[A_PARAMS + 1]
      bad = w > T52 or l * w > T52
    elseif algo == ALGO_FWINDOW or algo == ALGO_DISTINCT or algo == ALGO_LEASE then
      bad = A[A_PARAMS + 1] > T52
    elseif algo == ALGO_PENALTY then
      bad = A[A_PARAMS + 1] > T52 or A[A_PARAMS + 5] > T52
      for j = A_PARAMS + 2, A_PARAMS + 4 do
        if A[j] > T52 then bad = true end
      end
    else
      return fail('EINVAL', 'unknown algorithm')
    end
    if bad then
      return fail('ERANGE', 'parameters or times beyond the exact range')
    end
  end

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

  -- ------------------------------------------------------ window helpers
  local L, W = A[A_PARAMS], A[A_PARAMS + 1]

  -- Roll an aligned window: returns start (pair), now (pair, held at the
  -- window start if the clock went back) and whether it moved on.
  local function roll(sh, sl, empty)
    local r = pmod(nh, nl, W)
    local wh, wl = sub(nh, nl, pair(r))
    if empty then return wh, wl, nh, nl, 'fresh' end
    if lt(wh, wl, sh, sl) then return sh, sl, sh, sl, 'held' end
    if lt(sh, sl, wh, wl) then
      local gh, gl = sub(wh, wl, sh, sl)
      return wh, wl, nh, nl, num(gh, gl) == W and 'next' or 'later'
    end
    return sh, sl, nh, nl, 'same'
  end

  -- ------------------------------------------------------ sliding window
  if algo == ALGO_SWINDOW then
    local lim = L * W
    local n = arg
    local cur, prev = a1l[1], a1h[1]
    local sh, sl, h2, l2, how = roll(s32(a0h[1]), a0l[1], cur == 0 and prev == 0)
    if how == 'next' then prev = cur; cur = 0
    elseif how == 'later' then prev = 0; cur = 0 end
    local el = num(sub(h2, l2, sh, sl)) -- in [0, W)
    -- Products below are exact when <= 2^53 and otherwise >= 2^53 > lim,
    -- so every comparison with lim is exact.
    local est = prev * (W - el) + cur * W
    local allowed = est + n * W <= lim
    if kind == OP_COUNT or (kind == OP_CONSUME and allowed) then
      cur = cur + n
      if cur > T32 - 1 then cur = T32 - 1 end
      est = prev * (W - el) + cur * W
      if kind == OP_COUNT then allowed = est <= lim end
    end
    if kind ~= OP_PEEK then put(1, sh, sl, prev, cur) end
    V.allowed = allowed and 1 or 0
    limit = P(L)
    if lim >= est then remaining = P(fd(lim - est, W)) end
    if not allowed then
      local m = n
      if m > L then m = L end
      local rt
      if cur + m <= L and prev > 0 then
        local d = (L - cur - m) * W
        local need = W - fd(d, prev)
        if need < W then
          rt = need - el
          if rt < 0 then rt = 0 end
        end
      end
      if rt == nil then
        local el2 = 0
        if cur > 0 then
          el2 = W - fd((L - m) * W, cur)
          if el2 < 0 then el2 = 0 end
        end
        rt = W - el + el2
      end
      retry = P(rt)
    end
    if cur > 0 then reset = P(2 * W - el)
    elseif prev > 0 then reset = P(W - el) end
  end

  -- -------------------------------------------- fixed window / distinct
  if algo == ALGO_FWINDOW or algo == ALGO_DISTINCT then
    local c1h, c1l = a1h[1], a1l[1]
    local empty = c1h == 0 and c1l == 0
    local sh, sl, h2, l2, how = roll(s32(a0h[1]), a0l[1], empty)
    if how == 'next' or how == 'later' then c1h, c1l = 0, 0 end
    local el = num(sub(h2, l2, sh, sl))
    local thr = L
    if algo == ALGO_FWINDOW then
      -- The count saturates at INT64_MAX, so it stays a pair; as a number
      -- only when exact (nil above 2^53, far over any limit <= 2^40).
      local count = num(c1h, c1l)
      local allowed = count ~= nil and count + arg <= L
      if kind == OP_COUNT or (kind == OP_CONSUME and allowed) then
        c1h, c1l = sat(add(c1h, c1l, pair(arg)))
        count = num(c1h, c1l)
        if kind == OP_COUNT then allowed = count ~= nil and count <= L end
      end
      if kind ~= OP_PEEK then put(1, sh, sl, c1h, c1l) end
      V.allowed = allowed and 1 or 0
      if count ~= nil and count < L then remaining = P(L - count) end
      if c1h ~= 0 or c1l ~= 0 then reset = P(W - el) end
    else
      if kind == OP_ADD then
        local bitn = floor(idh / 67108864) -- id >> 58
        if bitn >= 32 then
          c1h = bit.bor(c1h, bit.lshift(1, bitn - 32)) % T32
        else
          c1l = bit.bor(c1l, bit.lshift(1, bitn)) % T32
        end
        put(1, sh, sl, c1h, c1l)
      end
      local pc = 0
      for half = 1, 2 do
        local x = c1l
        if half == 1 then x = c1h end
        while x > 0 do
          x = bit.band(x, x - 1) % T32
          pc = pc + 1
        end
      end
      local est = ({[0] = 0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 15, 16,
        17, 18, 20, 21, 23, 24, 25, 27, 28, 30, 32, 33, 35, 37, 39, 40, 42,
        44, 46, 48, 51, 53, 55, 58, 60, 63, 65, 68, 71, 74, 78, 81, 85, 89,
        93, 97, 102, 107, 113, 119, 126, 133, 142, 151, 163, 177, 196, 222,
        266, 266})[pc]
      V.allowed = est < thr and 1 or 0
      if est < thr then remaining = P(thr - est) end
      if c1h ~= 0 or c1l ~= 0 then reset = P(W - el) end
    end
    if V.allowed == 0 then retry = reset end
    limit = P(L)
  end

  -- --------------------------------------------------------------- penalty
  if algo == ALGO_PENALTY then
    local thr, swin = A[A_PARAMS], A[A_PARAMS + 1]
    local box = {A[A_PARAMS + 2], A[A_PARAMS + 3], A[A_PARAMS + 4]}
    local ottl = A[A_PARAMS + 5]
    local w0h, w1h = a0h[1], a1h[1]
    local trip = (w0h % 4096) * T32 + a0l[1] - 1
    local off = floor(w0h / 4096) % 4096
    local boxflag = floor(w0h / 16777216) % 2
    local ss = (w1h % 4096) * T32 + a1l[1] - 1
    local strikes = floor(w1h / 4096)
    -- now in ms, and the ns left over, from the pair.
    local qh = floor(nh / MS)
    local rh = nh - qh * MS
    local lowms = fd(rh * T32 + nl, MS)
    local nowms = qh * T32 + lowms
    local nsub = rh * T32 + nl - lowms * MS
    local tnowms = nowms
    if trip >= 0 and tnowms < trip then tnowms = trip end
    -- now - t_ms * 1e6 as a number: exact when |now_ms - t_ms| <= 2^33;
    -- beyond it the magnitude exceeds every duration (<= 2^52) it meets.
    local function rel(t)
      local d = nowms - t
      if d > 8589934592 then return 2 * T52 end
      if d < -8589934592 then return -2 * T52 end
      return d * MS + nsub
    end
    local function lvl(o) if o >= 3 then return 3 end return o end
    local function boxed()
      if boxflag == 0 or trip < 0 or off == 0 then return false end
      local d = box[lvl(off)]
      if d < 0 then return true end
      return rel(trip) < d
    end
    local function liveoff()
      if off == 0 or trip < 0 then return 0 end
      if rel(trip) < ottl then return off end
      return 0
    end
    local function livestr()
      if strikes == 0 or ss < 0 then return 0 end
      if rel(ss) < swin then return strikes end
      return 0
    end
    local function dotrip(lo, minl)
      local o = lo + 1
      if o < minl then o = minl end
      if o > 4095 then o = 4095 end
      off, trip, boxflag, strikes, ss = o, tnowms, 1, 0, -1
    end
    local isb = boxed()
    -- Canonical form: forget what no longer counts (an ended box, forgotten
    -- offenses, a lapsed strike window), so that a write is the record the
    -- C step writes; verdicts only read the live parts.
    if not isb then
      boxflag = 0
      if liveoff() == 0 then off = 0; trip = -1 end
    end
    if livestr() == 0 then strikes = 0; ss = -1 end
    -- The clock-back clamp, after the canonical form (as in penalty.c): a
    -- forgotten trip no longer holds the clock.
    tnowms = nowms
    if trip >= 0 and tnowms < trip then tnowms = trip end
    local changed = false
    if kind == OP_STRIKE then
      if not isb then
        local s = livestr()
        if s == 0 then ss = tnowms end
        s = s + 1
        if s >= thr then
          dotrip(liveoff(), 1)
          V.flags = V_TRIPPED
        else
          strikes = s
        end
        changed = true
      end
    elseif kind == OP_TRIP then
      if not (isb and lvl(off) >= arg) then
        dotrip(liveoff(), arg)
        V.flags = V_TRIPPED
        changed = true
      end
    elseif kind == OP_RELEASE then
      if isb then boxflag = 0; changed = true end
    end
    if changed then
      local t1 = (trip + 1) % 17592186044416
      local s1 = (ss + 1) % 17592186044416
      local th = floor(t1 / T32)
      local sh2 = floor(s1 / T32)
      put(1, th + off * 4096 + boxflag * 16777216, t1 - th * T32,
        sh2 + strikes * 4096, s1 - sh2 * T32)
    end
    isb = boxed()
    V.allowed = isb and 0 or 1
    limit = P(thr)
    offenses = P(liveoff())
    if isb then
      local d = box[lvl(off)]
      V.level = lvl(off)
      if d < 0 then
        V.flags = V.flags + V_SUSPENDED
        retry = FOREVER
      else
        local r = rel(trip)
        if r < 0 then r = 0 end
        retry = P(d - r)
      end
      reset = retry
      strikes_rem = P0
    else
      local s = livestr()
      strikes_rem = P(thr - s)
      if s > 0 then reset = P(swin - rel(ss)) end
    end
    remaining = strikes_rem
    -- Expiry of the new record, absolute: max of box, offense, strikes.
    local xh, xl = 0, 0
    if boxflag == 1 and trip >= 0 and off > 0 then
      local d = box[lvl(off)]
      if d < 0 then xh, xl = FOREVER[1], FOREVER[2]
      else
        local th, tl = ms2ns(trip)
        local h, l = sat(add(th, tl, pair(d)))
        if lt(xh, xl, h, l) then xh, xl = h, l end
      end
    end
    if off > 0 and trip >= 0 then
      local th, tl = ms2ns(trip)
      local h, l = sat(add(th, tl, pair(ottl)))
      if lt(xh, xl, h, l) then xh, xl = h, l end
    end
    if strikes > 0 and ss >= 0 then
      local th, tl = ms2ns(ss)
      local h, l = sat(add(th, tl, pair(swin)))
      if lt(xh, xl, h, l) then xh, xl = h, l end
    end
    eh[1], el[1] = xh, xl
  end

  -- ----------------------------------------------------------------- lease
  if algo == ALGO_LEASE then
    local max, ttl = A[A_PARAMS], A[A_PARAMS + 1]
    local xh, xl = sat(add(nh, nl, pair(ttl)))
    -- An expiry saturated at INT64_MAX is held until the end of time.
    local function held(i)
      return (b0h[i] ~= 0 or b0l[i] ~= 0) and
               (lt(nh, nl, s32(b1h[i]), b1l[i]) or
                (b1h[i] == FOREVER[1] and b1l[i] == FOREVER[2]))
    end
    local mine, free = nil, nil
    for i = 1, max do
      if held(i) then
        if b0h[i] == idh and b0l[i] == idl then mine = i end
      elseif free == nil then
        free = i
      end
    end
    lease = {idh, idl}
    if kind == OP_ACQUIRE then
      if mine then
        put(mine, b0h[mine], b0l[mine], xh, xl)
        V.allowed = 1
      elseif free then
        put(free, idh, idl, xh, xl)
        V.allowed = 1
        mine = free
      end
    elseif kind == OP_RENEW then
      if mine then
        put(mine, b0h[mine], b0l[mine], xh, xl)
        V.allowed = 1
      else
        V.flags = V_EXPIRED
      end
    else
      for i = 1, max do
        if a0h[i] == idh and a0l[i] == idl then
          put(i, 0, 0, 0, 0)
          break
        end
      end
      if mine then V.allowed = 1 else V.flags = V_EXPIRED end
    end
    local nheld = 0
    local ea_h, ea_l = FOREVER[1], FOREVER[2]
    local la_h, la_l = nh, nl
    for i = 1, max do
      if held(i) then
        nheld = nheld + 1
        local h, l = s32(b1h[i]), b1l[i]
        if lt(h, l, ea_h, ea_l) then ea_h, ea_l = h, l end
        if lt(la_h, la_l, h, l) then la_h, la_l = h, l end
      end
    end
    V.binding = mine and (mine - 1) or 0
    limit = P(max)
    remaining = P(max - nheld)
    reset = {sub(la_h, la_l, nh, nl)}
    if kind == OP_ACQUIRE and V.allowed == 0 then
      retry = {sub(ea_h, ea_l, nh, nl)}
    end
    for i = 1, max do
      if b0h[i] ~= 0 or b0l[i] ~= 0 then
        eh[i], el[i] = s32(b1h[i]), b1l[i]
      else
        eh[i], el[i] = 0, 0
      end
    end
  end


  -- ----------------------------------------------------------- expiry

  local function expiry(i)
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
    elseif algo == ALGO_SWINDOW then
      local W = A[A_PARAMS + 1]
      local h, l = s32(b0h[i]), b0l[i]
      if b1l[i] > 0 then return sat(add(h, l, pair(2 * W))) end
      if b1h[i] > 0 then return sat(add(h, l, pair(W))) end
      return 0, 0
    elseif algo == ALGO_FWINDOW or algo == ALGO_DISTINCT then
      if b1h[i] == 0 and b1l[i] == 0 then return 0, 0 end
      return sat(add(s32(b0h[i]), b0l[i], pair(A[A_PARAMS + 1])))
    end
    return eh[i], el[i]
  end

  -- ------------------------------------------------------------ write back

  -- As the C stores: a record whose expiry has come is removed, one whose
  -- record or expiry changed (parameters can change the expiry of an
  -- untouched record) is rewritten, anything else is left alone.
  if M then
    M.b0h, M.b0l, M.b1h, M.b1l, M.eh, M.el = b0h, b0l, b1h, b1l, {}, {}
    for i = 1, nkeys do
      M.eh[i], M.el[i] = expiry(i)
    end
  else
    for i = 1, nkeys do
      local xh, xl = expiry(i)
      if le(xh, xl, nh, nl) then
        if raw[i] then redis.call('DEL', KEYS[i]) end
      elseif not raw[i] or b0h[i] ~= a0h[i] or b0l[i] ~= a0l[i] or
             b1h[i] ~= a1h[i] or b1l[i] ~= a1l[i] or xh ~= aeh[i] or
             xl ~= ael[i] then
        write_rec(KEYS[i], b0h[i], b0l[i], b1h[i], b1l[i], xh, xl, nh, nl,
          minttl)
      end
    end
  end

  local function p64(x)
    local h, l = x[1], x[2]
    if h < 0 then h = h + T32 end
    return l, h
  end
  local lim_l, lim_h = p64(limit)
  local rem_l, rem_h = p64(remaining)
  local ret_l, ret_h = p64(retry)
  local res_l, res_h = p64(reset)
  local sr_l, sr_h = p64(strikes_rem)
  local of_l, of_h = p64(offenses)
  local ls_l, ls_h = p64(lease)
  local no_l, no_h = p64({nh, nl})
  return spack(VERDICT_PAIRS, V.allowed, V.flags,
    V.binding, V.level, lim_l, lim_h, rem_l, rem_h, ret_l, ret_h, res_l, res_h,
    sr_l, sr_h, of_l, of_h, ls_l, ls_h, no_l, no_h)
end

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

-- The hot steps of a program, straight-line over the in-memory records
-- (c: four unsigned halves per record, record i at 4i-3 .. 4i; xe: its
-- expiry pair at 2i-1, 2i), as gcra1: a GCRA group consumed or peeked with
-- every TAT within one tolerance of now.  Answers the packed verdict,
-- allowed, remaining and the wait, and writes the outputs and expiries; or
-- nil having changed nothing (the general step then runs).  Few tables: a
-- program runs on every request.
local function gcra_prog(c, xe, key, nk, kind, cost, nh, nl, poff)
  local e = {} -- D, Dn per key
  local all = true
  for j = 1, nk do
    local R, Pd, B = sunpack(GCRA_FMT, AV, poff + GCRA_BYTES * (j - 1))
    local tau = B * Pd
    local at = 4 * (key + j)
    local fr = c[at]
    if tau > T52 or c[at - 1] ~= 0 or fr >= R then return nil end
    local D
    local dh, dl = c[at - 3] - nh, c[at - 2] - nl
    if dl < 0 then dl = dl + T32; dh = dh - 1 end
    if dh < 0 then
      D = 0
    elseif dh < 2097152 then
      local dn = dh * T32 + dl
      local m = floor(tau / R)
      if m * R > tau then m = m - 1 elseif (m + 1) * R <= tau then m = m + 1 end
      if dn <= m then
        D = dn * R + fr
        if D > tau then D = nil end
      end
    end
    if D == nil then return nil end
    e[2 * j - 1], e[2 * j] = D, D + cost * Pd
    if e[2 * j] > tau then all = false end
  end
  -- The binding bucket (as the general step): admitted, the one left
  -- with the fewest points; refused, the one with the longest wait.
  local b, bv, rty = 1, nil, 0
  for j = 1, nk do
    local R, Pd, B = sunpack(GCRA_FMT, AV, poff + GCRA_BYTES * (j - 1))
    local tau = B * Pd
    if all then
      local ra = fd(tau - e[2 * j], Pd)
      if bv == nil or ra < bv then b, bv = j, ra end
    else
      local rt = 0
      if e[2 * j] > tau then rt = cd(e[2 * j] - tau, R) end
      if bv == nil or rt > bv then b, bv = j, rt end
      if rt > rty then rty = rt end
    end
  end
  local R, Pd, B = sunpack(GCRA_FMT, AV, poff + GCRA_BYTES * (b - 1))
  local tau = B * Pd
  local rem, rst
  if all and kind == OP_CONSUME then
    rem, rst = fd(tau - e[2 * b], Pd), cd(e[2 * b], R)
  else
    rem, rst = fd(tau - e[2 * b - 1], Pd), cd(e[2 * b - 1], R)
  end
  if all and kind == OP_CONSUME and cost > 0 then
    for j = 1, nk do
      local Rj = sunpack('<i8', AV, poff + GCRA_BYTES * (j - 1))
      local at = 4 * (key + j)
      local q = fd(e[2 * j], Rj)
      local f = e[2 * j] - q * Rj
      local th, tl = nh, nl + q
      local cy = floor(tl / T32)
      tl = tl - cy * T32
      th = th + cy
      c[at - 3], c[at - 2], c[at - 1], c[at] = th, tl, 0, f
      if f > 0 then
        tl = tl + 1
        if tl >= T32 then tl = tl - T32; th = th + 1 end
      end
      xe[2 * (key + j) - 1], xe[2 * (key + j)] = th, tl
    end
  end
  return spack(VERDICT_NUMS, all and 1 or 0, 0, b - 1, 0,
    B, rem, rty, rst, 0, 0, 0, nl, nh), all, rem, rty
end

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

if algo == WIRE_PROGRAM then
  return program(kind, nh, nl, minttl)
end

-- A batch (ARGV[2] present): KEYS[i] with the 88 bytes of ARGV[1] from
-- (i - 1) * 88, each an ordinary single-bucket GCRA call (the client
-- batches only those).  One script and one TIME for up to
-- SLUICE_GROUP_MAX decisions: per decision Redis then pays for the step,
-- not for a command around it.  Answers every verdict (or error), in order;
-- a call the fast path refuses runs the general path in its place.
if ARGV[2] then
  local out = {}
  if #AV ~= BATCH_BYTES * #KEYS then return fail('EINVAL', 'malformed batch') end
  local tnh, tnl = nh, nl
  for i = 1, #KEYS do
    local al, kd, bh, bl, cost, ih, il, mt, R, Pd, B =
      sunpack(BATCH_FMT, AV, (i - 1) * BATCH_BYTES + 1)
    if bh >= 0 then tnh, tnl = bh, bl end
    local r = al == ALGO_GCRA and (kd == OP_CONSUME or kd == OP_PEEK) and
      gcra1(KEYS[i], kd, cost, mt, tnh, tnl, R, Pd, B)
    if not r then
      r = general({KEYS[i]}, {al, kd, bh, bl, cost, ih, il, mt, R, Pd, B},
        al, kd, tnh, tnl, cost, ih, il, mt)
    end
    out[i] = r
  end
  return out
end

if algo == ALGO_GCRA and #KEYS == 1 and #AV == BATCH_BYTES and
   (kind == OP_CONSUME or kind == OP_PEEK) then
  local R, Pd, B = sunpack(GCRA_FMT, AV, HDR_BYTES + 1)
  local r = gcra1(KEYS[1], kind, arg, minttl, nh, nl, R, Pd, B)
  if r then return r end
end

return general(KEYS, {sunpack('<' .. string.rep('i8', #AV / 8), AV)}, algo,
  kind, nh, nl, arg, idh, idl, minttl)

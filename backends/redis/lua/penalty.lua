-- penalty.lua -- the penalty ladder: strikes, offenses, box
--
-- (lib/algo/penalty.c).  Sections as in gcra.lua.

--@section range
if algo == ALGO_PENALTY then
  known = true
  bad = A[A_PARAMS + 1] > T52 or A[A_PARAMS + 5] > T52
  for j = A_PARAMS + 2, A_PARAMS + 4 do
    if A[j] > T52 then bad = true end
  end
end

--@section step
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

-- window.lua -- the sliding and fixed window steps (lib/algo/window.c).
--
-- Sections as in gcra.lua; the window helpers of "step" serve distinct.lua
-- too, which comes after this file.

--@section range
if algo == ALGO_SWINDOW then
  known = true
  local l, w = A[A_PARAMS], A[A_PARAMS + 1]
  bad = w > T52 or l * w > T52
end
if algo == ALGO_FWINDOW then
  known = true
  bad = A[A_PARAMS + 1] > T52
end

--@section step
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

-- A fixed window's count and aligned start (the count zeroed when the
-- window moved on) and the time elapsed in it: fixed window and distinct.
local function fixed_open()
  local c1h, c1l = a1h[1], a1l[1]
  local sh, sl, h2, l2, how = roll(s32(a0h[1]), a0l[1], c1h == 0 and c1l == 0)
  if how == 'next' or how == 'later' then c1h, c1l = 0, 0 end
  return c1h, c1l, sh, sl, num(sub(h2, l2, sh, sl))
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

-- ------------------------------------------------------- fixed window
if algo == ALGO_FWINDOW then
  local c1h, c1l, sh, sl, el = fixed_open()
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
  if V.allowed == 0 then retry = reset end
  limit = P(L)
end

--@section expiry
if algo == ALGO_SWINDOW then
    local W = A[A_PARAMS + 1]
    local h, l = s32(b0h[i]), b0l[i]
    if b1l[i] > 0 then return sat(add(h, l, pair(2 * W))) end
    if b1h[i] > 0 then return sat(add(h, l, pair(W))) end
    return 0, 0
end
if algo == ALGO_FWINDOW then
    if b1h[i] == 0 and b1l[i] == 0 then return 0, 0 end
    return sat(add(s32(b0h[i]), b0l[i], pair(A[A_PARAMS + 1])))
end

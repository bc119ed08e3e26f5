-- distinct.lua -- the distinct-item estimate (lib/algo/distinct.c).
--
-- Sections as in gcra.lua.  LC_ESTIMATE is distinct.c's table
-- (lib/algo/distinct_estimate.h), which wire_lua.c prints for the build.

--@section range
if algo == ALGO_DISTINCT then
  known = true
  bad = A[A_PARAMS + 1] > T52
end

--@section step
-- ----------------------------------------------------------- distinct
if algo == ALGO_DISTINCT then
  local c1h, c1l, sh, sl, el = fixed_open()
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
  local est = sunpack('<I2', LC_ESTIMATE, 2 * pc + 1)
  V.allowed = est < L and 1 or 0
  if est < L then remaining = P(L - est) end
  if c1h ~= 0 or c1l ~= 0 then reset = P(W - el) end
  if V.allowed == 0 then retry = reset end
  limit = P(L)
end

--@section expiry
if algo == ALGO_DISTINCT then
    if b1h[i] == 0 and b1l[i] == 0 then return 0, 0 end
    return sat(add(s32(b0h[i]), b0l[i], pair(A[A_PARAMS + 1])))
end

-- lease.lua -- one slot of a lease set (lib/algo/lease.c); a counted set
-- (max > SLUICE_GROUP_MAX) is lease_count.lua's.
--
-- Sections as in gcra.lua; the step sets each record's expiry itself.

--@section range
if algo == ALGO_LEASE then
  known = true
  bad = A[A_PARAMS + 1] > T52 or A[A_PARAMS] > LEASE_COUNT_MAX
end

--@section step
-- ----------------------------------------------------------------- lease
if algo == ALGO_LEASE and A[A_PARAMS] <= LEASE_SLOTS_MAX then
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

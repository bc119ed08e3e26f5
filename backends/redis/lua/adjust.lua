-- adjust.lua -- the ADJUST step (lib/algo/adjust.c): settling an earlier
-- charge for GCRA and the windows.  A positive arg charges more (debt at
-- most one burst or limit), a negative one refunds (never past full, never
-- below zero; a window only while the charge's window, at time id, still
-- weighs).  Never denies.  Its one section runs in general() (lua/op.lua)
-- in place of the algorithms' steps when the kind is ADJUST, seeing its
-- locals; the algorithms' range and expiry sections serve it unchanged.

--@section adjust
-- ------------------------------------------------------------- ADJUST
V.allowed = 1
if algo == ALGO_GCRA then
  local c = arg
  if c < 0 then c = -c end
  local bl -- fewest points left, over the group
  for i = 1, nkeys do
    local base = A_PARAMS - 1 + (i - 1) * GCRA_PARAMS
    local R, Pd, B = A[base + 1], A[base + 2], A[base + 3]
    local tau = B * Pd -- <= 2^52: the range section
    local cP = c * Pd -- <= tau: |arg| <= burst is validated
    local th, tl, f = a0h[i], a0l[i], a1l[i]
    if f >= R then -- written under another rate: renormalised
      local q = fd(f, R)
      th, tl = add(th, tl, pair(q))
      f = f - q * R
    end
    local dh, dl = sub(th, tl, nh, nl) -- TAT - now, whole ns
    if arg > 0 then
      -- D = max(TAT - now, 0) scaled; nil when two tolerances or more
      -- ahead already (a charge then changes nothing).
      local D
      if dh < 0 then
        D = 0
      else
        local dn = num(dh, dl)
        if dn ~= nil and dn <= fd(2 * tau, R) then
          D = dn * R + f -- exact, or above 2^53 >= 2 tau
          if D >= 2 * tau then D = nil end
        end
      end
      if D ~= nil then
        local Dn = D + cP
        if Dn > 2 * tau then Dn = 2 * tau end
        local q = fd(Dn, R)
        th, tl = add(nh, nl, pair(q))
        f = Dn - q * R
        put(i, th, tl, 0, f)
      end
    elseif dh > 0 or (dh == 0 and (dl > 0 or f > 0)) then
      -- TAT > now: back by c points, not below now.
      local x = f - cP
      local q = fd(x, R)
      th, tl = add(th, tl, pair(q))
      f = x - q * R
      if lt(th, tl, nh, nl) then th, tl, f = nh, nl, 0 end
      put(i, th, tl, 0, f)
    end
    -- The verdict of the bucket as it is now.
    local left, rs = B, P0
    local eh2, el2 = sub(th, tl, nh, nl)
    if eh2 >= 0 then
      local dn = num(eh2, el2)
      left = 0
      if dn ~= nil and dn <= fd(tau, R) then
        local x = fd(tau - (dn * R + f), Pd)
        if x > 0 then left = x end
      end
      rs = {sat(add(eh2, el2, 0, f > 0 and 1 or 0))}
    end
    if bl == nil or left < bl then
      bl = left
      V.binding = i - 1
      limit, remaining, reset = P(B), P(left), rs
    end
  end
end
if algo == ALGO_SWINDOW or algo == ALGO_FWINDOW then
  local L, W = A[A_PARAMS], A[A_PARAMS + 1]
  local cur, prev = a1l[1], a1h[1]
  -- The window rolled to now as the counting steps roll it: start (sh,
  -- sl), now held at the start if the clock went back (th, tl).
  local r = pmod(nh, nl, W)
  local wh, wl = sub(nh, nl, pair(r))
  local sh, sl, th, tl, how = s32(a0h[1]), a0l[1], nh, nl, 'same'
  if cur == 0 and prev == 0 then
    sh, sl = wh, wl
  elseif lt(wh, wl, sh, sl) then
    th, tl = sh, sl
  elseif lt(sh, sl, wh, wl) then
    local gh, gl = sub(wh, wl, sh, sl)
    how = 'later'
    if num(gh, gl) == W then how = 'next' end
    sh, sl = wh, wl
  end
  local el = num(sub(th, tl, sh, sl))
  -- The aligned window the settled charge was counted in.
  local ah, al = sub(idh, idl, pair(pmod(idh, idl, W)))
  if algo == ALGO_SWINDOW then
    if how == 'next' then prev, cur = cur, 0
    elseif how == 'later' then prev, cur = 0, 0 end
    local lim = L * W
    if arg > 0 then
      -- Up to where the estimate is twice the limit (products above 2^53
      -- are above 2 lim too, so room <= 0 stays right).
      local room = 2 * lim - prev * (W - el)
      local most = 0
      if room > 0 then most = fd(room, W) end
      local n = cur + arg
      if n > most then n = most end
      if n > cur then
        cur = n
        if cur > T32 - 1 then cur = T32 - 1 end
      end
    else
      local ph, pl = sub(sh, sl, pair(W))
      if ah == sh and al == sl then
        cur = cur + arg
        if cur < 0 then cur = 0 end
      elseif ah == ph and al == pl then
        prev = prev + arg
        if prev < 0 then prev = 0 end
      end
    end
    put(1, sh, sl, prev, cur)
    local est = prev * (W - el) + cur * W
    limit = P(L)
    if lim >= est then remaining = P(fd(lim - est, W)) end
    if cur > 0 then reset = P(2 * W - el)
    elseif prev > 0 then reset = P(W - el) end
  else
    local c1h, c1l = prev, cur -- the count's halves
    if how ~= 'same' then c1h, c1l = 0, 0 end -- a later window
    local count = num(c1h, c1l) -- nil above 2^53, far over 2 L
    if arg > 0 then
      if count ~= nil then
        local n = count + arg
        if n > 2 * L then n = 2 * L end
        if n > count then c1h, c1l = pair(n) end
      end
    elseif ah == sh and al == sl then
      if count == nil then c1h, c1l = sub(c1h, c1l, pair(-arg))
      elseif count + arg > 0 then c1h, c1l = pair(count + arg)
      else c1h, c1l = 0, 0 end
    end
    put(1, sh, sl, c1h, c1l)
    count = num(c1h, c1l)
    limit = P(L)
    if count ~= nil and count < L then remaining = P(L - count) end
    if c1h ~= 0 or c1l ~= 0 then reset = P(W - el) end
  end
end

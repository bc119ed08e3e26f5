-- lease_count.lua -- a counted lease set (lib/algo/lease_count.c, whose
-- header says the semantics and the record's layout): max above
-- SLUICE_GROUP_MAX leases in one record of four expiry-bucket counts.
--
-- Sections as in gcra.lua (lease.lua's range check covers it); the step
-- sets its record's expiry itself.

--@section step
-- --------------------------------------------------------- counted lease
if algo == ALGO_LEASE and A[A_PARAMS] > LEASE_SLOTS_MAX then
  local max, ttl = A[A_PARAMS], A[A_PARAMS + 1]
  local TU, TC, TK = 2 ^ 20, 2 ^ 21, 2 ^ 11
  local tu = fd(ttl + TU - 1, TU)
  local wu = fd(tu + 3, 3)
  local c = nh * 2 ^ 12 + fd(nl, TU)
  local function bucket_of(t) return fd(t + tu + wu, wu) end
  local lo = fd(c, wu) + 1
  -- Words 0..3 (w[0] low, w[0] high, w[1] low, w[1] high): a count of 21
  -- bits and 11 bits of the newest bucket K each.
  local function unpack4(wd)
    local n, k = {}, 0
    for j = 0, 3 do
      n[j] = wd[j + 1] % TC
      k = k + fd(wd[j + 1], TC) * TK ^ j
    end
    return n, k
  end
  local cnt, K = unpack4({a0l[1], a0h[1], a1l[1], a1h[1]})
  local function total()
    local n = 0
    for k = (K >= 3 and K - 3 or 0), K do n = n + cnt[k % 4] end
    return n
  end
  -- Keeps the live buckets only (lease_count.c's roll()).
  local function roll()
    local keep = {[0] = 0, 0, 0, 0}
    if K > 0 then
      for k = (K >= 3 and K - 3 or 0), K do
        if k >= lo then keep[k % 4] = cnt[k % 4] end
      end
    end
    cnt = keep
    local n = total()
    if n == 0 then K = 0 end
    return n
  end
  local function count_in(kn)
    if K == 0 then
      K = kn
    elseif kn > K then
      local k = K + 1
      while k <= kn and k <= K + 4 do cnt[k % 4] = 0; k = k + 1 end
      K = kn
    elseif kn + 3 < K then
      kn = K - 3
    end
    if cnt[kn % 4] < TC - 1 then cnt[kn % 4] = cnt[kn % 4] + 1 end
  end
  local function take(k)
    if K == 0 or k < lo or k > K or k + 3 < K or cnt[k % 4] == 0 then
      return false
    end
    cnt[k % 4] = cnt[k % 4] - 1
    if cnt[0] + cnt[1] + cnt[2] + cnt[3] == 0 then K = 0 end
    return true
  end
  -- Bucket k's end in ns as a pair, saturated.
  local function bend(k)
    local x = k * wu
    local h = fd(x, 2 ^ 12)
    if h >= 2147483648 then return FOREVER[1], FOREVER[2] end
    return h, (x - h * 2 ^ 12) * TU
  end
  local uh = idh
  if uh < 0 then uh = uh + T32 end
  local mine = bucket_of(uh * TK + fd(idl, TC))
  local function new_id()
    local h = fd(c, TK)
    return {h, (c - h * TK) * TC + TU + idl % TU}
  end
  local live = roll()
  lease = {idh, idl}
  if kind == OP_ACQUIRE then
    if live < max then
      count_in(bucket_of(c))
      live = live + 1
      V.allowed = 1
      lease = new_id()
    end
  elseif kind == OP_RENEW then
    if take(mine) then
      count_in(bucket_of(c))
      V.allowed = 1
      lease = new_id()
    else
      V.flags = V_EXPIRED
    end
  else
    if take(mine) then
      live = live - 1
      V.allowed = 1
    else
      V.flags = V_EXPIRED
    end
  end
  if V.allowed == 1 then
    local w = {}
    for j = 0, 3 do
      w[j + 1] = cnt[j] + (fd(K, TK ^ j) % TK) * TC
    end
    put(1, w[2], w[1], w[4], w[3])
  end
  limit = P(max)
  if live < max then remaining = P(max - live) end
  if K > 0 then
    for k = (K >= 3 and K - 3 or 0), K do
      if cnt[k % 4] > 0 then
        local bh, bl = bend(k)
        if kind == OP_ACQUIRE and V.allowed == 0 and retry == P0 then
          retry = {sub(bh, bl, nh, nl)}
        end
        reset = {sub(bh, bl, nh, nl)}
      end
    end
  end
  -- The record's expiry: the end of its newest bucket holding a lease.
  do
    local oc, OK = unpack4({b0l[1], b0h[1], b1l[1], b1h[1]})
    eh[1], el[1] = 0, 0
    if OK > 0 then
      for j = 0, 3 do
        if OK >= j and oc[(OK - j) % 4] > 0 then
          eh[1], el[1] = bend(OK - j)
          break
        end
      end
    end
  end
end


-- op.lua -- sluice_op_step() (lib/algo/op.c) in Redis Lua: general(), the
-- frame every algorithm's step runs in (records in, records and verdict
-- out); the algorithms' own blocks come from their files at the
-- --@include lines.

-- ------------------------------------------------------- general path
--
-- Every algorithm and group, the port of sluice_op_step() proper: the step
-- of a program that no fast path takes (program.lua).  A function, so that
-- its helpers are made only when it runs.

-- The SET of one record with its expiry as the stored value's and as the
-- Redis deadline (setrec, entry.lua).  oh, ol: the stored expiry of the
-- record the key holds, or nil.
local function write_rec(key, w0h, w0l, w1h, w1l, xh, xl, nh, nl, minttl,
                         oh, ol)
  setrec(key, spack(REC_FMT, w0l, w0h, w1l, w1h, xl, xh, LAYOUT), xh, xl,
    nh, nl, minttl, oh, ol)
end

-- One step over a group's records in memory: A, the step's parameters
-- (A[A_PARAMS] on); M.n records in (unsigned halves in M.a0h, M.a0l,
-- M.a1h, M.a1l), and back into M.b0h.., with their expiry pairs in M.eh,
-- M.el.  Nothing is read or written in Redis here.
local function general(A, algo, kind, nh, nl, arg, idh, idl, M)
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

  local nkeys = M.n
  local a0h, a0l, a1h, a1l = M.a0h, M.a0l, M.a1h, M.a1l

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

  -- The exact range (wire.h), checked before anything runs; the C side
  -- refuses the same parameters, this is the second line of defence.
  do
    local known, bad = false, false
    --@include range
    if not known then
      return fail('EINVAL', 'unknown algorithm')
    end
    if bad then
      return fail('ERANGE', 'parameters or times beyond the exact range')
    end
  end

  if kind ~= OP_ADJUST then -- (ADJUST: lua/adjust.lua)
  --@include step
  else
  --@include adjust
  end

  -- ----------------------------------------------------------- expiry

  local function expiry(i)
    --@include expiry
    return eh[i], el[i]
  end

  -- ------------------------------------------------------------ write back

  M.b0h, M.b0l, M.b1h, M.b1l, M.eh, M.el = b0h, b0l, b1h, b1l, {}, {}
  for i = 1, nkeys do
    M.eh[i], M.el[i] = expiry(i)
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

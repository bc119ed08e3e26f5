-- The reference script of spec section 6 (spec/rate-limit-architecture.txt),
-- verbatim: the benchmark's baseline for "raw EVALSHA of the spec's script".
-- KEYS[1] = rl:{t:T}:tb:<key_id>        token bucket (hash)
-- KEYS[2] = pb:{t:T}:box:<key_id>       active penalty box (value = level)
-- KEYS[3] = pb:{t:T}:strikes:<key_id>   strike counter
-- KEYS[4] = pb:{t:T}:off:<key_id>       offense counter (24h)
-- ARGV[1] = refill rate (points/sec)     ARGV[2] = bucket capacity (burst)
-- ARGV[3] = request cost (points)        ARGV[4] = strike window (s)
-- ARGV[5] = strike threshold             ARGV[6] = L1 box (s)
-- ARGV[7] = L2 box (s)                   ARGV[8] = L3 box (s)
-- ARGV[9] = offense TTL (s)

local rate      = tonumber(ARGV[1])
local capacity  = tonumber(ARGV[2])
local cost      = tonumber(ARGV[3])
local win       = tonumber(ARGV[4])
local threshold = tonumber(ARGV[5])

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- 1. Penalty box check: reject without touching the bucket or adding strikes
local box_ttl = redis.call('PTTL', KEYS[2])
if box_ttl > 0 then
  local lvl = tonumber(redis.call('GET', KEYS[2]))
  return {-1, 0, math.ceil(box_ttl / 1000), lvl, 0}
end

-- 2. Refill the bucket
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts     = tonumber(b[2])
if tokens == nil then
  tokens = capacity
  ts = now_ms
end
tokens = math.min(capacity, tokens + (math.max(0, now_ms - ts) / 1000) * rate)
local bucket_ttl = math.ceil(capacity / rate) * 2

-- 3. Allow
if tokens >= cost then
  tokens = tokens - cost
  redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now_ms)
  redis.call('EXPIRE', KEYS[1], bucket_ttl)
  return {1, math.floor(tokens), 0, 0, threshold}
end

-- 4. Throttle: persist the refill, compute Retry-After, record a strike
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now_ms)
redis.call('EXPIRE', KEYS[1], bucket_ttl)
local retry_after = math.ceil((cost - tokens) / rate)

local strikes = redis.call('INCR', KEYS[3])
if strikes == 1 then redis.call('EXPIRE', KEYS[3], win) end

if strikes >= threshold then
  local offenses = redis.call('INCR', KEYS[4])
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[9]))
  local level = math.min(offenses, 3)
  local dur = tonumber(ARGV[5 + level])        -- ARGV[6], [7], [8]
  redis.call('SET', KEYS[2], level, 'EX', dur)
  redis.call('DEL', KEYS[3])
  -- Caller (Kong plugin) inspects level: 2 -> alert + edge deny, 3 -> security escalation
  return {-1, 0, dur, level, 0}
end

return {0, math.floor(tokens), retry_after, 0, threshold - strikes}

-- The limiter's levels. A level (a source, or the scope's global gates)
-- is three keys:
--   slots  ZSET lease -> expiry of its concurrency slot (+inf: no expiry)
--   log    ZSET lease -> time of the acquire, one per grant in the last
--          60 s while the level's RPM or TPM gate is on
--   tok    HASH lease -> tokens counted for TPM, plus '_sum', their total

local WINDOW = 60000000 -- the sliding RPM/TPM window
local BATCH = 500       -- members per HMGET/HDEL (unpack has a limit)

-- purge drops expired slots and the log entries that left the window.
local function purge(slots, log, tok, now)
  redis.call('ZREMRANGEBYSCORE', slots, '-inf', int(now))
  local cutoff = int(now - WINDOW)
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', cutoff)
  if #old == 0 then
    return
  end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', cutoff)
  if redis.call('EXISTS', log) == 0 then
    redis.call('DEL', tok)
    return
  end
  local gone = 0
  for i = 1, #old, BATCH do
    local j = math.min(i + BATCH - 1, #old)
    local amounts = redis.call('HMGET', tok, unpack(old, i, j))
    for k = 1, #amounts do
      gone = gone + num(amounts[k], 0)
    end
    redis.call('HDEL', tok, unpack(old, i, j))
  end
  redis.call('HINCRBY', tok, '_sum', int(-gone))
end

-- tpm_retry is the time until tokens more fit under limit as the oldest
-- entries leave the window; 0 when they never can.
local function tpm_retry(log, tok, sum, limit, tokens, now)
  if tokens > limit then
    return 0
  end
  local left = sum
  local n = redis.call('ZCARD', log)
  for i = 0, n - 1, BATCH do
    local e = redis.call('ZRANGE', log, int(i), int(i + BATCH - 1), 'WITHSCORES')
    local leases = {}
    for k = 1, #e, 2 do
      leases[#leases + 1] = e[k]
    end
    if #leases == 0 then
      break
    end
    local amounts = redis.call('HMGET', tok, unpack(leases))
    for k = 1, #leases do
      left = left - num(amounts[k], 0)
      if left + tokens <= limit then
        return tonumber(e[2 * k]) + WINDOW - now
      end
    end
  end
  return 0
end

-- check returns the first of a level's gates that refuses (first = the
-- gate number of its concurrency gate; RPM and TPM follow) and the time
-- until it would let the request through (0 = unknown), or 0, 0.
local function check(slots, log, tok, conc, rpm, tpm, tokens, now, first)
  if conc > 0 and redis.call('ZCARD', slots) >= conc then
    return first, 0
  end
  if rpm > 0 then
    local n = redis.call('ZCARD', log)
    if n >= rpm then
      -- The request fits once n-rpm+1 of the oldest entries have left.
      local e = redis.call('ZRANGE', log, int(n - rpm), int(n - rpm), 'WITHSCORES')
      return first + 1, tonumber(e[2]) + WINDOW - now
    end
  end
  if tpm > 0 then
    local sum = num(redis.call('HGET', tok, '_sum'), 0)
    if sum + tokens > tpm then
      return first + 2, tpm_retry(log, tok, sum, tpm, tokens, now)
    end
  end
  return 0, 0
end

-- take counts one granted permit on a level and stretches the keys' TTLs
-- over what they hold, so an idle scope vanishes on its own.
local function take(slots, log, tok, rpm, tpm, lease, expires, tokens, now)
  redis.call('ZADD', slots, expires, lease)
  local last = redis.call('ZRANGE', slots, '-1', '-1', 'WITHSCORES')[2]
  if last == 'inf' or last == '+inf' then
    redis.call('PERSIST', slots)
  else
    redis.call('PEXPIRE', slots, int(math.ceil((tonumber(last) - now) / 1000) + 1000))
  end
  if rpm > 0 or tpm > 0 then
    redis.call('ZADD', log, int(now), lease)
    redis.call('HSET', tok, lease, int(tokens))
    redis.call('HINCRBY', tok, '_sum', int(tokens))
    local keep = int(WINDOW / 1000 + 1000)
    redis.call('PEXPIRE', log, keep)
    redis.call('PEXPIRE', tok, keep)
  end
end

-- settle sets the TPM amount of lease's entry, if it is still in the window.
local function settle(tok, lease, amount)
  local old = tonumber(redis.call('HGET', tok, lease))
  if old == nil then
    return
  end
  redis.call('HSET', tok, lease, int(amount))
  redis.call('HINCRBY', tok, '_sum', int(amount - old))
end

-- TryAcquire: check all six gates and take them all, or take nothing.
-- KEYS: source slots, log, tok; global slots, log, tok.
-- ARGV: now ('' = TIME), lease, tokens, lease ttl (µs, 0 = none),
--       source concurrency, rpm, tpm, global concurrency, rpm, tpm.
-- Returns {granted 1/0, gate, retry after µs, now µs}.
local function acquire(K, A)
  local now = now_us(A[1])
  local lease = A[2]
  local tokens = tonumber(A[3])
  local ttl = tonumber(A[4])
  local lim = {
    { tonumber(A[5]), tonumber(A[6]), tonumber(A[7]) },
    { tonumber(A[8]), tonumber(A[9]), tonumber(A[10]) },
  }
  for lv = 1, 2 do
    purge(K[3 * lv - 2], K[3 * lv - 1], K[3 * lv], now)
  end
  for lv = 1, 2 do
    local l = lim[lv]
    local gate, retry = check(K[3 * lv - 2], K[3 * lv - 1], K[3 * lv],
      l[1], l[2], l[3], tokens, now, 3 * lv - 2)
    if gate ~= 0 then
      return { 0, gate, retry, now }
    end
  end
  local expires = '+inf'
  if ttl > 0 then
    expires = int(now + ttl)
  end
  for lv = 1, 2 do
    local l = lim[lv]
    take(K[3 * lv - 2], K[3 * lv - 1], K[3 * lv], l[2], l[3], lease, expires, tokens, now)
  end
  return { 1, 0, 0, now }
end

-- Release: free the permit's slots and settle its TPM entries in place.
-- KEYS: source slots, log, tok; global slots, log, tok.
-- ARGV: now ('' = TIME), lease, kind (0 actual, 1 estimate, 2 refund), tokens.
-- Returns 1 when the permit was live, 0 when releasing it was a no-op.
local function release(K, A)
  local now = now_us(A[1])
  local lease = A[2]
  local kind = tonumber(A[3])
  local amount = tonumber(A[4])
  purge(K[1], K[2], K[3], now)
  purge(K[4], K[5], K[6], now)
  if redis.call('ZREM', K[1], lease) == 0 then
    return 0
  end
  redis.call('ZREM', K[4], lease)
  if kind == 0 or kind == 2 then
    if kind == 2 then
      amount = 0
    end
    settle(K[3], lease, amount)
    settle(K[6], lease, amount)
  end
  return 1
end

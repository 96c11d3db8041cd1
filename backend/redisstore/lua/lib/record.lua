-- Record. key: the circuit.
-- A[o+1..]: now ('' = TIME), admission epoch, admission probe (1/0), outcome
--       (0 success, 1 failure, 2 timeout, 3 rate limited, 4 dead,
--       5 abandoned), then the configuration: failure threshold, cooldown
--       (µs), max cooldown (µs), min calls, failure rate, window (µs),
--       half-open successes, timeout weight (see Breaker.cfgArgs).
-- now, when given, is the time already read from A[o+1].
-- Returns 1 when applied, 0 when fenced.
--
-- A success on a closed circuit is done here: it resets the consecutive
-- count and adds one sample to one bucket of the window, nothing else. The
-- field xt says until when the key's TTL runs at least, so the TTL is
-- renewed hourly rather than on every call. Everything else goes to the
-- full state machine (breaker.lua).
local function record(key, A, o, now)
  if A[o + 4] == '0' and A[o + 3] == '0' then
    local rate, window = tonumber(A[o + 9]), tonumber(A[o + 10])
    if not (window > 0 and rate > 0) then
      local h = redis.call('HMGET', key, 'open', 'epoch', 'cons')
      if num(h[2], 0) ~= tonumber(A[o + 2]) or h[1] == '1' then
        return 0
      end
      if num(h[3], 0) ~= 0 then
        redis.call('HSET', key, 'cons', '0')
        redis.call('PEXPIRE', key, int(IDLE_MS))
      end
      return 1
    end
    now = now or now_us(A[o + 1])
    local width = math.max(math.floor(window / BUCKETS), 1)
    local idx = math.floor(now / width)
    local field = 'b' .. (idx % BUCKETS)
    local h = redis.call('HMGET', key, 'open', 'epoch', 'ww', 'xt', field)
    if num(h[2], 0) ~= tonumber(A[o + 2]) or h[1] == '1' then
      return 0
    end
    if num(h[3], 0) == width then
      local b = bucket_parse(h[5])
      if b.idx ~= idx or b.s == 0 then
        b.idx, b.s, b.f = idx, 0, 0
      end
      b.s = b.s + 1
      if num(h[4], 0) >= now + (IDLE_MS - RENEW_MS) * 1000 then
        redis.call('HSET', key, field, bucket_encode(b), 'cons', '0')
      else
        redis.call('HSET', key, field, bucket_encode(b), 'cons', '0', 'xt', int(now + IDLE_MS * 1000))
        redis.call('PEXPIRE', key, int(IDLE_MS))
      end
      return 1
    end
    -- A new window width: the full path clears the window.
  end
  return breaker().record(key, A, o, now or now_us(A[o + 1]))
end

-- Record. key: the circuit.
-- r: { now = µs (absent: TIME), epoch = the admission's epoch, probe = true
--      when the admission holds the probe, outcome = the core.Outcome number
--      (0 success, 1 failure, 2 timeout, 3 rate limited, 4 dead,
--      5 abandoned), config = { threshold, cooldown (µs), max_cooldown (µs),
--      min_calls, fail_rate, window (µs), half_open_successes,
--      timeout_weight } (see Breaker.writeRecord), lease = the attempt's
--      lease, if known (a retry of a record with the same lease that was
--      applied, by the full path or as a sample of the window, is not
--      applied again) }.
-- now, when given, is the time already read.
-- Returns 1 when applied, 0 when fenced.
--
-- A success on a closed circuit is done here: it resets the consecutive
-- count and adds one sample to one bucket of the window (noting the lease, if any), nothing else. The
-- field xt says until when the key's TTL runs at least, so the TTL is
-- renewed hourly rather than on every call; a circuit switched off (off,
-- see switch.lua) keeps no TTL, and its xt is left as it is; one pushed
-- back keeps its key at least until the pushback ends (circuit_ms).
-- Everything else goes to the full state machine (breaker.lua).
local function record(key, r, now)
  if r.outcome == 0 and not r.probe then
    local rate, window = r.config.fail_rate, r.config.window
    if not (window > 0 and rate > 0) then
      local h = redis.call('HMGET', key, 'open', 'epoch', 'cons', 'off', 'pb')
      if num(h[2], 0) ~= r.epoch or h[1] == '1' then
        return 0
      end
      if num(h[3], 0) ~= 0 then
        redis.call('HSET', key, 'cons', '0')
        if h[4] ~= '1' then
          redis.call('PEXPIRE', key, int(circuit_ms(h[5], now, r.now)))
        end
      end
      return 1
    end
    now = now or now_us(r.now)
    local width = math.max(math.floor(window / BUCKETS), 1)
    local idx = math.floor(now / width)
    local field = 'b' .. (idx % BUCKETS)
    local h = redis.call('HMGET', key, 'open', 'epoch', 'ww', 'xt', field, 'off', 'pb', 'rlse')
    if r.lease and h[8] == r.lease then
      return 1 -- applied already: a retry of the same record
    end
    if num(h[2], 0) ~= r.epoch or h[1] == '1' then
      return 0
    end
    if num(h[3], 0) == width then
      local b = bucket_parse(h[5])
      if b.idx ~= idx or b.s == 0 then
        b.idx, b.s, b.f = idx, 0, 0
      end
      b.s = b.s + 1
      local set = { field, bucket_encode(b), 'cons', '0' }
      if r.lease then
        set[5], set[6] = 'rlse', r.lease
      end
      if h[6] == '1' or num(h[4], 0) >= now + (IDLE_MS - RENEW_MS) * 1000 then
        redis.call('HSET', key, unpack(set))
      else
        set[#set + 1], set[#set + 2] = 'xt', int(now + IDLE_MS * 1000)
        redis.call('HSET', key, unpack(set))
        redis.call('PEXPIRE', key, int(circuit_ms(h[7], now)))
      end
      return 1
    end
    -- A new window width: the full path clears the window.
  end
  return breaker().record(key, r, now or now_us(r.now))
end

-- Allow. key: the circuit. A[o+1..o+2]: now ('' = TIME), probe ttl (µs,
-- 0 = none). now, when given, is the time already read from A[o+1].
-- Returns {allowed, probe, epoch, state (0 closed, 1 open, 2 half-open), retry after µs}.
local function allow(key, A, o, now)
  local h = redis.call('HMGET', key, 'open', 'till', 'epoch', 'probe', 'pexp')
  local epoch = num(h[3], 0)
  if h[1] ~= '1' then
    return { 1, 0, epoch, 0, 0 }
  end
  now = now or now_us(A[o + 1])
  local state, left, held = circuit_state(h[2], h[4], h[5], now)
  if state == 1 or held then
    return { 0, 0, epoch, state, left }
  end
  local ttl = tonumber(A[o + 2])
  local pexp = -1
  if ttl > 0 then
    pexp = now + ttl
  end
  epoch = epoch + 1
  redis.call('HSET', key, 'epoch', int(epoch), 'probe', '1', 'pexp', int(pexp))
  redis.call('PEXPIRE', key, int(IDLE_MS))
  return { 1, 1, epoch, 2, 0 }
end

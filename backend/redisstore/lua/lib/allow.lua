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
  local till = num(h[2], 0)
  if now < till then
    return { 0, 0, epoch, 1, till - now }
  end
  local pexp = num(h[5], 0)
  if h[4] == '1' and (pexp < 0 or now < pexp) then
    local left = 0
    if pexp >= 0 then
      left = pexp - now
    end
    return { 0, 0, epoch, 2, left }
  end
  local ttl = tonumber(A[o + 2])
  pexp = -1
  if ttl > 0 then
    pexp = now + ttl
  end
  epoch = epoch + 1
  redis.call('HSET', key, 'epoch', int(epoch), 'probe', '1', 'pexp', int(pexp))
  redis.call('PEXPIRE', key, int(IDLE_MS))
  return { 1, 1, epoch, 2, 0 }
end

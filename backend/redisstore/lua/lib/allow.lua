-- Allow. key: the circuit. r: { now = µs (absent: TIME), probe_ttl = µs
-- (0 = none), holder = the lease of the attempt ('' = none) }: a granted
-- probe records its holder, so that reclaim.lua can give back the probe of
-- an attempt whose reply was lost. now, when given, is the time already read.
-- Returns {allowed, probe, epoch, state (0 closed, 1 open, 2 half-open), retry after µs}.
local function allow(key, r, now)
  local h = redis.call('HMGET', key, 'open', 'till', 'epoch', 'probe', 'pexp', 'plse')
  local epoch = num(h[3], 0)
  if h[1] ~= '1' then
    return { 1, 0, epoch, 0, 0 }
  end
  now = now or now_us(r.now)
  local state, left, held = circuit_state(h[2], h[4], h[5], now)
  if held and r.holder and h[6] == r.holder then
    return { 1, 1, epoch, 2, 0 } -- a retry of the Admit that took the probe
  end
  if state == 1 or held then
    return { 0, 0, epoch, state, left }
  end
  local ttl = r.probe_ttl or 0
  local pexp = -1
  if ttl > 0 then
    pexp = now + ttl
  end
  epoch = epoch + 1
  redis.call('HSET', key, 'epoch', int(epoch), 'probe', '1', 'pexp', int(pexp), 'plse', r.holder or '')
  redis.call('PEXPIRE', key, int(IDLE_MS))
  return { 1, 1, epoch, 2, 0 }
end

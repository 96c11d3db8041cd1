-- Allow. key: the circuit; its field pb holds the pushback (pushback.lua).
-- r: { now = µs (absent: TIME), probe_ttl = µs (0 = none), holder = the
-- lease of the attempt ('' = none) }: a granted probe records its holder,
-- so that reclaim.lua can give back the probe of an attempt whose reply was
-- lost. now, when given, is the time already read.
-- Returns {allowed, probe, epoch, state (0 closed, 1 open, 2 half-open),
-- retry after µs, disabled, pushed back}.
--
-- A source switched off (the circuit's field off, see switch.lua) is
-- refused with disabled = 1 and the circuit's state as of now, and grants
-- no probe; the circuit is left as it is. Otherwise, while the source's
-- pushback lasts (the field pb holds its end, µs, later than now), it is
-- refused with pushed back = 1, the circuit's state, and retry after the longer
-- of the pushback's time left and the circuit's own (the cooldown left
-- while open, the probe's lease left while it is out); no probe is
-- granted and the circuit is left as it is. The first Allow after a
-- pushback ended drops the field. The common call (no pushback) reads it
-- in the circuit's one HMGET, and reads no TIME for it.
local function allow(key, r, now)
  local h = redis.call('HMGET', key, 'open', 'till', 'epoch', 'probe', 'pexp', 'plse', 'off', 'pb')
  local epoch = num(h[3], 0)
  local state, left, held = 0, 0, false
  if h[1] == '1' then
    now = now or now_us(r.now)
    state, left, held = circuit_state(h[2], h[4], h[5], now)
    if held and r.holder and h[6] == r.holder then
      return { 1, 1, epoch, 2, 0, 0, 0 } -- a retry of the Admit that took the probe
    end
  end
  if h[7] == '1' then
    return { 0, 0, epoch, state, 0, 1, 0 }
  end
  if h[8] then
    now = now or now_us(r.now)
    local left_pb = num(h[8], 0) - now
    if left_pb > 0 then
      return { 0, 0, epoch, state, math.max(left_pb, left), 0, 1 }
    end
    redis.call('HDEL', key, 'pb')
  end
  if h[1] ~= '1' then
    return { 1, 0, epoch, 0, 0, 0, 0 }
  end
  if state == 1 or held then
    return { 0, 0, epoch, state, left, 0, 0 }
  end
  local ttl = r.probe_ttl or 0
  local pexp = -1
  if ttl > 0 then
    pexp = now + ttl
  end
  epoch = epoch + 1
  redis.call('HSET', key, 'epoch', int(epoch), 'probe', '1', 'pexp', int(pexp), 'plse', r.holder or '')
  redis.call('PEXPIRE', key, int(IDLE_MS))
  return { 1, 1, epoch, 2, 0, 0, 0 }
end

-- SetEnabled: the operator's switch of one source. KEYS: the circuit.
-- ARGV[1]: { now = µs (absent: TIME), on = true to switch the source on }.
--
-- A source is off while its circuit's field off is '1': Allow and Admit
-- refuse it (lib/allow.lua). An off circuit keeps no TTL, so that the
-- switch outlasts any idle time; the writes that renew a circuit's TTL
-- (record, reset) leave it so. Switching on drops the field and gives the
-- circuit its TTL back, a day from now (and any cooldown left; longer
-- while a pushback lasts, see pushback.lua): as long as any xt mark
-- (record.lua) promises.
-- The circuit's state, epoch and history are untouched either way, and a
-- Reset leaves the field. Returns 1.
local key = KEYS[1]
local r = cjson.decode(ARGV[1])
if not r.on then
  redis.call('HSET', key, 'off', '1')
  redis.call('PERSIST', key)
  return 1
end
local h = redis.call('HMGET', key, 'off', 'open', 'till', 'pb')
if h[1] ~= '1' then
  return 1
end
redis.call('HDEL', key, 'off')
local now, cooldown = nil, 0
if h[2] == '1' then
  now = now_us(r.now)
  cooldown = math.max(math.ceil((num(h[3], 0) - now) / 1000), 0)
end
redis.call('PEXPIRE', key, int(circuit_ms(h[4], now, r.now) + cooldown))
return 1

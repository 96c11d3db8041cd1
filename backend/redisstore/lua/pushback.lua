-- PushBack: an upstream's 429, shared. KEYS: the source's circuit, whose
-- field pb holds the end of the pushback (µs, on the clock of now).
-- ARGV[1]: { now = µs (absent: TIME), d = how long the source is to be
-- left alone (µs, > 0) }.
--
-- Allow and Admit refuse the source while now is before the end
-- (lib/allow.lua), and the first of them after it drops the field. A
-- pushback never shortens one that ends later; a longer one replaces it.
-- The circuit's state is not touched, but its key is kept at least MARGIN
-- past the pushback's end: a circuit that did not exist expires then, so
-- an idle source leaves nothing behind; one that expires sooner is given
-- that TTL; one switched off keeps none (switch.lua); and every later
-- write of the circuit keeps it so (circuit_ms). Returns 1 when the
-- pushback was recorded, 0 when one ending later already stands.
local r = cjson.decode(ARGV[1])
local key = KEYS[1]
local now = now_us(r.now)
local pend = now + r.d
if num(redis.call('HGET', key, 'pb'), 0) >= pend then
  return 0
end
local ttl = redis.call('PTTL', key)
redis.call('HSET', key, 'pb', int(pend))
local ms = math.ceil(r.d / 1000) + MARGIN / 1000
if ttl == -2 or (ttl >= 0 and ttl < ms) then
  redis.call('PEXPIRE', key, int(ms))
end
return 1

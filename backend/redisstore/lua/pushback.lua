-- PushBack: an upstream's 429, shared. KEYS: the source's pushback, a
-- STRING next to its circuit (the circuit's key and ':pb', in its slot).
-- ARGV[1]: { now = µs (absent: TIME), d = how long the source is to be
-- left alone (µs, > 0) }.
--
-- The key holds the end of the pushback (µs, on the clock of now): Allow
-- and Admit refuse the source while now is before it (lib/allow.lua). A
-- pushback never shortens one that ends later; a longer one replaces it.
-- The key expires by itself MARGIN after the pushback ends, so an idle
-- source leaves nothing behind; the circuit is not touched. Returns 1 when
-- the pushback was recorded, 0 when one ending later already stands.
local r = cjson.decode(ARGV[1])
local now = now_us(r.now)
local pend = now + r.d
if num(redis.call('GET', KEYS[1]), 0) >= pend then
  return 0
end
redis.call('SET', KEYS[1], int(pend), 'PX', int(math.ceil(r.d / 1000) + MARGIN / 1000))
return 1

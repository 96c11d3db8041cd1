-- Usage: one level's state as of now, on exact counts.
-- KEYS: slots, log, tok. ARGV[1]: { now = µs (absent: TIME), window = the
-- log's window (µs) }.
-- Returns {in flight, requests, amount}.
local r = cjson.decode(ARGV[1])
local now = now_us(r.now)
local v = { slots = KEYS[1], log = KEYS[2], tok = KEYS[3], conc = 1, rpm = 1, tpm = 1, logged = true, window = r.window }
peek(v)
limiter().purge(v, now)
return { v.card, redis.call('ZCARD', v.log), v.sum }

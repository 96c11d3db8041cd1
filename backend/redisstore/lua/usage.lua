-- Usage: one level's state as of now, on exact counts.
-- KEYS: slots, log, tok. ARGV: now ('' = TIME).
-- Returns {in flight, requests, tokens}.
local now = now_us(ARGV[1])
local v = { slots = KEYS[1], log = KEYS[2], tok = KEYS[3], conc = 1, rpm = 1, tpm = 1, logged = true }
peek(v)
limiter().purge(v, now)
return { v.card, redis.call('ZCARD', v.log), v.sum }

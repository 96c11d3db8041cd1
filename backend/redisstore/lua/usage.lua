-- Usage: one level's state as of now.
-- KEYS: slots, log, tok. ARGV: now ('' = TIME).
-- Returns {in flight, requests, tokens}.
local now = now_us(ARGV[1])
purge(KEYS[1], KEYS[2], KEYS[3], now)
return {
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  num(redis.call('HGET', KEYS[3], '_sum'), 0),
}

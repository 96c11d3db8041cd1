-- Release: free the permit's slots and settle its TPM entries in place.
-- KEYS: source slots, log, tok; global slots, log, tok.
-- ARGV: now ('' = TIME), lease, kind (0 actual, 1 estimate, 2 refund), tokens.
-- Returns 1 when the permit was live, 0 when releasing it was a no-op.
local now = now_us(ARGV[1])
local lease = ARGV[2]
local kind = tonumber(ARGV[3])
local amount = tonumber(ARGV[4])
purge(KEYS[1], KEYS[2], KEYS[3], now)
purge(KEYS[4], KEYS[5], KEYS[6], now)
if redis.call('ZREM', KEYS[1], lease) == 0 then
  return 0
end
redis.call('ZREM', KEYS[4], lease)
if kind == 0 or kind == 2 then
  if kind == 2 then
    amount = 0
  end
  settle(KEYS[3], lease, amount)
  settle(KEYS[6], lease, amount)
end
return 1

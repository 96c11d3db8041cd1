-- Admit: the breaker's Allow and, when it admits, the limiter's TryAcquire,
-- in one script. A probe granted here is given back when the limiter
-- refuses, so a refusal leaves the circuit as it was.
-- KEYS: the six limiter keys (see lib/acquire.lua), then the circuit.
-- ARGV: 1-2 the allow arguments (now, probe ttl), 3-13 the acquire
--       arguments (now, lease, tokens, lease ttl, six limits, global member).
-- Returns the allow reply (5 values) followed by the acquire reply (4).
local now = now_us(ARGV[3])
local bnow = now
if ARGV[1] ~= ARGV[3] then
  bnow = now_us(ARGV[1])
end
local a = allow(KEYS[7], ARGV, 0, bnow)
if a[1] ~= 1 then
  return { a[1], a[2], a[3], a[4], a[5], 0, 0, 0, 0 }
end
local g = acquire(KEYS, ARGV, 2, now)
if g[1] ~= 1 and a[2] == 1 then
  -- Return the probe just granted: no attempt will report on it.
  redis.call('HSET', KEYS[7], 'probe', '0')
end
return { a[1], a[2], a[3], a[4], a[5], g[1], g[2], g[3], g[4] }

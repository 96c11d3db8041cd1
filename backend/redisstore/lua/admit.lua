-- Admit: the breaker's Allow and, when it admits, the limiter's TryAcquire,
-- in one script. A probe granted here is given back when the limiter
-- refuses, so a refusal leaves the circuit as it was.
-- A source switched off or pushed back is refused by the breaker's part
-- (lib/allow.lua): the gates are not asked, nothing is taken.
-- KEYS: the levels' keys, the circuit, its pushback, then the budgets'
-- hashes.
-- ARGV[1]: { breaker = the allow request (lib/allow.lua), key = the
--            circuit's index in KEYS and pkey = its pushback's, limiter =
--            the acquire request (lib/acquire.lua) }.
-- Returns the allow reply (7 values) followed by the acquire reply (5).
local r = cjson.decode(ARGV[1])
local b, q = r.breaker, r.limiter
local now = now_us(q.now)
local bnow = now
if b.now ~= q.now then
  bnow = now_us(b.now)
end
local key = KEYS[b.key]
local a = allow(key, KEYS[b.pkey], b, bnow)
if a[1] ~= 1 then
  return { a[1], a[2], a[3], a[4], a[5], a[6], a[7], 0, 0, 0, 0, 0 }
end
local g = acquire(q, now)
if g[1] ~= 1 and a[2] == 1 then
  -- Return the probe just granted: no attempt will report on it.
  redis.call('HSET', key, 'probe', '0')
end
return { a[1], a[2], a[3], a[4], a[5], a[6], a[7], g[1], g[2], g[3], g[4], g[5] }

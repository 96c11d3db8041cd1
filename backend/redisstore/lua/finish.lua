-- Finish: the limiter's Release and the breaker's Record in one script.
-- KEYS: the levels' keys, the circuit, then the budgets' hashes.
-- ARGV[1]: { limiter = the release request (lib/release.lua), breaker =
--            the record request (lib/record.lua) and key = the circuit's
--            index in KEYS }.
-- Returns 1 when the record was applied, 0 when it was fenced.
local r = cjson.decode(ARGV[1])
local b, q = r.breaker, r.limiter
local now = now_us(q.now)
local bnow = now
if b.now ~= q.now then
  bnow = now_us(b.now)
end
release(q, now)
return record(KEYS[b.key], b, bnow)

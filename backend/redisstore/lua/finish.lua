-- Finish: the limiter's Release and the breaker's Record in one script.
-- KEYS: the six limiter keys (see lib/release.lua), then the circuit.
-- ARGV: 1-6 the release arguments, 7-18 the record arguments.
-- Returns 1 when the record was applied, 0 when it was fenced.
local now = now_us(ARGV[1])
local bnow = now
if ARGV[7] ~= ARGV[1] then
  bnow = now_us(ARGV[7])
end
release(KEYS, ARGV, 0, now)
return record(KEYS[7], ARGV, 6, bnow)

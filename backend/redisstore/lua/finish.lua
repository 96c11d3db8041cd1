-- Finish: the limiter's Release and the breaker's Record in one script.
-- KEYS: the six limiter keys (see release), then the circuit.
-- ARGV: 1-4 the release arguments, 5-16 the record arguments.
-- Returns {released 1/0, applied 1/0}.
local r = release(KEYS, { ARGV[1], ARGV[2], ARGV[3], ARGV[4] })
local rec = { }
for i = 5, #ARGV do
  rec[#rec + 1] = ARGV[i]
end
return { r, record({ KEYS[7] }, rec) }

-- Reset. KEYS: the circuit. ARGV[1]: { now = µs (absent: TIME) }.
-- Closes it, clears its history and bumps the epoch; opens is a lifetime
-- count and stays, and so do the operator's switch (off: see switch.lua;
-- an off circuit keeps no TTL) and the source's pushback (pb: see
-- pushback.lua; the key is kept while it lasts). Returns the new epoch.
local key = KEYS[1]
local h = redis.call('HMGET', key, 'epoch', 'off', 'pb')
local epoch = num(h[1], 0) + 1
redis.call('HSET', key,
  'open', '0', 'till', '0', 'cd', '0', 'epoch', int(epoch), 'cons', '0',
  'probe', '0', 'pexp', '0', 'wins', '0', 'ww', '0',
  'b0', '', 'b1', '', 'b2', '', 'b3', '', 'b4', '', 'b5', '', 'b6', '', 'b7', '', 'b8', '', 'b9', '')
if h[2] ~= '1' then
  redis.call('PEXPIRE', key, int(circuit_ms(h[3], nil, cjson.decode(ARGV[1]).now)))
end
return epoch

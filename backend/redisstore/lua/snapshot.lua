-- Snapshot. KEYS: the circuit. ARGV[1]: { now = µs (absent: TIME) }.
-- Returns {state, epoch, consecutive (string), opens, retry after µs,
-- probe held, disabled}.
local h = redis.call('HMGET', KEYS[1], 'open', 'till', 'epoch', 'opens', 'cons', 'probe', 'pexp', 'off')
local epoch = num(h[3], 0)
local opens = num(h[4], 0)
local cons = h[5] or '0'
local off = 0
if h[8] == '1' then
  off = 1
end
if h[1] ~= '1' then
  return { 0, epoch, cons, opens, 0, 0, off }
end
local state, left, held = circuit_state(h[2], h[6], h[7], now_us(cjson.decode(ARGV[1]).now))
if held then
  return { state, epoch, cons, opens, left, 1, off }
end
return { state, epoch, cons, opens, left, 0, off }

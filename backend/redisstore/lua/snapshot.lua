-- Snapshot. KEYS: the circuit. ARGV: now ('' = TIME).
-- Returns {state, epoch, consecutive (string), opens, retry after µs, probe held}.
local h = redis.call('HMGET', KEYS[1], 'open', 'till', 'epoch', 'opens', 'cons', 'probe', 'pexp')
local epoch = num(h[3], 0)
local opens = num(h[4], 0)
local cons = h[5] or '0'
if h[1] ~= '1' then
  return { 0, epoch, cons, opens, 0, 0 }
end
local now = now_us(ARGV[1])
local till = num(h[2], 0)
if now < till then
  return { 1, epoch, cons, opens, till - now, 0 }
end
local pexp = num(h[7], 0)
if h[6] == '1' and (pexp < 0 or now < pexp) then
  local left = 0
  if pexp >= 0 then
    left = pexp - now
  end
  return { 2, epoch, cons, opens, left, 1 }
end
return { 2, epoch, cons, opens, 0, 0 }

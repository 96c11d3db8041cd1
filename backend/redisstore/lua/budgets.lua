-- Budgets: the current window of each budget, on the hashes of
-- lib/budget.lua. KEYS: the budgets' hashes.
-- ARGV[1]: { now = µs (absent: TIME), windows = the window of KEYS[i] (s)
--            at i }.
-- Returns {now µs, then for each budget its window's start (s) and the
-- spend counted in it (0 when the hash holds an older window or none)}.
local r = cjson.decode(ARGV[1])
local now = now_us(r.now)
local out = { now }
for i, w in ipairs(r.windows) do
  local h = redis.call('HMGET', KEYS[i], 's', 'v')
  local s = tonumber(h[1])
  local ws = budget().start(now, w, s)
  local spent = 0
  if s == ws then
    spent = num(h[2], 0)
  end
  out[#out + 1] = ws
  out[#out + 1] = spent
end
return out

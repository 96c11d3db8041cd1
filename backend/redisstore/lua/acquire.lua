-- TryAcquire: check all six gates and take them all, or take nothing.
-- KEYS: source slots, log, tok; global slots, log, tok.
-- ARGV: now ('' = TIME), lease, tokens, lease ttl (µs, 0 = none),
--       source concurrency, rpm, tpm, global concurrency, rpm, tpm.
-- Returns {granted 1/0, gate, retry after µs, now µs}.
local now = now_us(ARGV[1])
local lease = ARGV[2]
local tokens = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local lim = {
  { tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]) },
  { tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]) },
}
for lv = 1, 2 do
  purge(KEYS[3 * lv - 2], KEYS[3 * lv - 1], KEYS[3 * lv], now)
end
for lv = 1, 2 do
  local l = lim[lv]
  local gate, retry = check(KEYS[3 * lv - 2], KEYS[3 * lv - 1], KEYS[3 * lv],
    l[1], l[2], l[3], tokens, now, 3 * lv - 2)
  if gate ~= 0 then
    return { 0, gate, retry, now }
  end
end
local expires = '+inf'
if ttl > 0 then
  expires = int(now + ttl)
end
for lv = 1, 2 do
  local l = lim[lv]
  take(KEYS[3 * lv - 2], KEYS[3 * lv - 1], KEYS[3 * lv], l[2], l[3], lease, expires, tokens, now)
end
return { 1, 0, 0, now }

-- Release through the queue: the limiter's Release (lib/release.lua), and
-- the unit it frees handed on (lib/queue.lua): while waiters are in line,
-- the permit's concurrency slots are reserved for the next one (its claim)
-- instead of freed, and it is woken.
-- KEYS: the levels' keys, the queue's, then the budgets'.
-- ARGV[1]: { limiter = the release request (lib/release.lua), queue = the
--   queue request with label = the unit's label, whose levels are among
--   the labels' }.
-- Returns { the id the unit went to (0: no one), the claim's end µs }.
local r = cjson.decode(ARGV[1])
local lim, a = r.limiter, r.queue
local now = now_us(lim.now)
-- Free the slots here rather than in release(), to know which were held.
local freed = {}
for _, l in ipairs(lim.levels) do
  if l.slots then
    if redis.call('ZREM', KEYS[l.key], l.member) == 1 then
      freed[#freed + 1] = (l.key - 1) / 3
    end
    l.slots = false
  end
end
release(lim, now)
if #freed == 0 then
  return { 0, 0 }
end
local q = qopen(a, now)
qlapse(q)
local to, till = 0, 0
if qbusy(q) then
  local id, t = qhand(q, a.label, freed)
  if id then
    to, till = id, t
  end
end
qchanged(q)
qsave(q)
return { to, till }

-- Release, and the hand-on of what it frees: a slot that frees while
-- waiters are in line in the scope's queue (kept by an Admitter with its
-- queue, lib/queue.lua) is reserved for the next of them (its claim)
-- instead of freed, as finish.lua does.
-- KEYS: the levels' keys, the queue's four, then the budgets' hashes.
-- ARGV[1]: { limiter = the release request (lib/release.lua), queue = the
--   queue request, without the discipline's settings (the queue's own
--   apply) and with proc = '', label = the unit's label, whose levels are
--   among the labels' }.
-- Returns { the id the unit went to (0: no one), the claim's end µs }.
local r = cjson.decode(ARGV[1])
local lim, a = r.limiter, r.queue
local freed = free_slots(lim)
release(lim)
if #freed == 0 then
  return { 0, 0 }
end
local q = qopen(a, 0)
if q.ne == 0 then
  return { 0, 0 }
end
q.now = now_us(lim.now)
qlapse(q)
return { qfree(q, a.label, freed) }

-- Finish: the limiter's Release, the unit it frees handed on through the
-- scope's fair queue (lib/queue.lua), and the breaker's Record, in one
-- script. While waiters are in line, the permit's concurrency slots are
-- reserved for the next one (its claim) instead of freed, and it is woken.
-- KEYS: the levels' keys, the circuit, the queue's four (lib/queue.lua),
-- then the budgets' hashes.
-- ARGV[1]: { limiter = the release request (lib/release.lua), breaker =
--            the record request (lib/record.lua) and key = the circuit's
--            index in KEYS, queue = the queue request with label = the
--            unit's label, whose levels are among the labels'; or only
--            off = true for an Admitter without a queue }.
-- Returns { 1 when the record was applied (0 when it was fenced), the id
-- the unit went to (0: no one), the claim's end µs }.
local r = cjson.decode(ARGV[1])
local b, lim, a = r.breaker, r.limiter, r.queue
local now = now_us(lim.now)
local bnow = now
if b.now ~= lim.now then
  bnow = now_us(b.now)
end
local freed = free_slots(lim)
release(lim, now)
local to, till = 0, 0
if #freed > 0 and not a.off then
  local q = qopen(a, now)
  qlapse(q)
  to, till = qfree(q, a.label, freed)
end
return { record(KEYS[b.key], b, bnow), to, till }

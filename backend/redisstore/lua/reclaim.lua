-- Reclaim: give back what an attempt may hold when its backend reply was
-- lost, by the attempt's lease. The client runs it in the background after
-- an Admit whose reply never came (the script may or may not have run) or
-- a Finish that failed; it is idempotent, and never records an outcome.
-- KEYS: the levels' keys, the circuit, the levels' tombstone registers,
-- then the budgets' hashes.
-- ARGV[1]: the release request (lib/release.lua) with tomb = true, and
--          circuit = { key = the circuit's index in KEYS, holder = the
--          lease } to give back the probe if this lease holds it, and
--          queue = the queue request with label = the permit's source
--          (lib/queue.lua; absent for an Admitter without a queue), whose
--          four keys follow the budgets': a slot the reclaim frees is
--          handed to the queue's next waiter, as Finish hands one on;
--          with mb = the lease of an Admit whose reply was lost, the
--          entry that Admit may have queued leaves the line (a claim it
--          held goes on), or a tombstone stops it from queueing if it
--          runs later (lib/queue.lua, qreclaim).
--
-- The release leaves a tombstone in each level's book where the member has
-- no entry (the Admit did not run, or not yet): the entry '0 -1', released
-- with nothing counted. An Admit that reaches Redis after its reclaim (a
-- command delayed on a dying connection) reads its member in the book it
-- peeks at anyway, finds it released, and takes nothing; a probe it was
-- granted goes back as for any refusal. A tombstone goes with its book
-- (the book's TTL, or the purge of a log whose TTL ran out). A budget's
-- reservation is refunded where the member holds one (settled, after a
-- failed Finish), and a budget whose current window holds none gets a
-- tombstone of its own, which goes with the window (lib/budget.lua).
-- Returns { the id of the queue's entry a freed slot or a passed claim
-- went to (0: none), then, when the entry of mb holds a claim of another
-- label (qreclaim), its id and that label, which the caller takes out
-- with a leave of that label; else 0, '' }.
local r = cjson.decode(ARGV[1])
local now = now_us(r.now)
local a = r.queue
local freed, to, hold, hlabel = {}, 0, 0, ''
if a then
  freed = free_slots(r)
end
release(r, now)
if #freed > 0 or (a and a.mb) then
  local q = qopen(a, now)
  qlapse(q)
  if a.mb then
    local h, l
    to, h, l = qreclaim(q, a.mb)
    hold, hlabel = h or 0, l or ''
  end
  local id = qfree(q, a.label, freed)
  if to == 0 then
    to = id
  end
end
local c = r.circuit
if c then
  local key = KEYS[c.key]
  local h = redis.call('HMGET', key, 'probe', 'plse')
  if h[1] == '1' and h[2] == c.holder then
    redis.call('HSET', key, 'probe', '0')
  end
end
return { to, hold, hlabel }

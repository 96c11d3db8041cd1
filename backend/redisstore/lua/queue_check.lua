-- Check the queue: let what is due lapse (claims of the labels with their
-- reserved slots), renew the leases of the caller's waiters that need it,
-- and report on them. A process runs it when a claim it granted was not
-- taken in time, when its waiters' leases run short, and when its
-- subscriber has reconnected (it may have missed its messages).
-- KEYS: the queue's, then the slots of the labels.
-- ARGV[1]: { queue = the queue request with ids = array of entries to
--   report on, renew = array of entries whose lease to renew, lease =
--   array of the µs each lasts from now (at most keep), in the same order }.
-- Returns, per id in ids, { state (0 gone, 1 waiting, 2 holding a claim),
-- the µs until the head's room is due (-1: not the head or none), the
-- claim's label ('' when none) }, flattened.
local a = cjson.decode(ARGV[1]).queue
local q = qopen(a, now_us(a.now))
qlapse(q)
local renew = a.renew or {}
for i = 1, #renew, BATCH do
  local args = {}
  for j = i, math.min(i + BATCH - 1, #renew) do
    args[#args + 1] = int(q.now + math.min(a.lease[j], q.keep))
    args[#args + 1] = 'l' .. int(renew[j])
  end
  redis.call('ZADD', q.x, 'XX', unpack(args))
end
qchanged(q)
q.dirty = q.dirty or #renew > 0
qsave(q)
local out = {}
for _, id in ipairs(a.ids or {}) do
  local e = qmine(q, id)
  if not e then
    out[#out + 1], out[#out + 2], out[#out + 3] = 0, -1, ''
  elseif e.st == 'c' then
    out[#out + 1], out[#out + 2], out[#out + 3] = 2, -1, e.lb
  else
    out[#out + 1], out[#out + 2], out[#out + 3] = 1, qturn(q, id), ''
  end
end
return out

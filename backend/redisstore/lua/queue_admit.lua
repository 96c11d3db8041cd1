-- Admit through the queue: the limiter's TryAcquire (lib/acquire.lua) for
-- a call that may try the gates, and the queue (lib/queue.lua) for one
-- that waits, in one script.
--   * A waiter holding a claim takes it — its reserved slots become free
--     for its own acquire — and acquires; refused, it goes to the front.
--   * A waiter at the head acquires; refused, it stays, and the refusal
--     says when room is due.
--   * Another waiter stays in line.
--   * A new call (or one whose entry is gone) queues behind waiters in
--     line; otherwise it acquires, and queues when a gate refuses it
--     (a concurrency gate, or a rate gate that says when it frees). A
--     call whose deadline cannot be met given the line is refused.
-- KEYS: the levels' keys, the queue's (lib/queue.lua), then the budgets'.
-- ARGV[1]: { limiter = the acquire request (lib/acquire.lua), queue = the
--   queue request (lib/queue.lua) with id = the caller's entry (0: none),
--   class, tenant (hex), left = µs to its deadline (absent: none), lease
--   = µs its entry lasts unless renewed,
--   conc = array of the concurrency gates' numbers, bgate = the budget
--   gate's }. The labels name the unit of the request's own source.
-- Returns the acquire reply (5 values), then: status (0 granted, 1
-- queued, 2 refused for its deadline, 3 refused and not queued), the
-- entry's id (queued), the position and the estimate µs (status 2), and
-- the µs until the head's room is due (-1: not the head, or none due).
local r = cjson.decode(ARGV[1])
local lim, a = r.limiter, r.queue
local now = now_us(lim.now)
local q = qopen(a, now)
qlapse(q)
local id = a.id or 0
local e
if id > 0 then
  e = qget(q, id)
end
local g = { 0, 0, 0, now, 0 }
local status, ahead, est = 1, 0, 0

local function queueable(gate, retry)
  for _, c in ipairs(a.conc) do
    if c == gate then
      return true
    end
  end
  return gate ~= 0 and retry > 0 and gate ~= a.bgate
end

if e and e.st == 'c' then
  qunreserve(q, id, e)
  q.nc = q.nc - 1
  redis.call('ZREM', q.x, 'c' .. int(id))
  qtell(q, e.g, qmsg('ack', id))
  g = acquire(lim, now)
  if g[1] == 1 then
    qforget(q, id)
    status = 0
  else
    qtofront(q, id, e)
    qdue(q, g[3])
  end
elseif e then
  if qhead(q) == id then
    g = acquire(lim, now)
    if g[1] == 1 then
      if e.st == 'w' then
        qunline(q, e, true)
      else
        qunfront(q, e)
      end
      qforget(q, id)
      status = 0
    else
      qdue(q, g[3])
    end
  end
else
  local retry = -1
  if not qbusy(q) then
    g = acquire(lim, now)
    if g[1] == 1 then
      status = 0
    elseif queueable(g[2], g[3]) then
      retry = g[3]
    else
      status = 3
    end
  end
  if status == 1 then
    local nid, n, t = qpush(q, { class = a.class, tenant = a.tenant, left = a.left, lease = a.lease, retry = retry })
    if nid then
      id = nid
    else
      id, status, ahead, est = 0, 2, n, t
    end
  end
end
qchanged(q)
qsave(q)
local turn = -1
if status == 1 then
  turn = qturn(q, id)
end
return { g[1], g[2], g[3], g[4], g[5], status, id, ahead, est, turn }

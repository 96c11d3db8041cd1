-- Admit: the breaker's Allow, then the limiter's TryAcquire through the
-- scope's fair queue (lib/queue.lua), in one script.
--   * The breaker first: a circuit that refuses is not queued, and a
--     caller woken in the queue whose circuit now refuses leaves it (a
--     claim it held goes on to the next waiter, with its reserved slots).
--   * A waiter holding a claim takes it — its reserved slots become free
--     for its own acquire — and acquires; refused by a gate the queue
--     waits out, it goes to the front.
--   * A waiter at the head acquires; refused by a gate the queue waits
--     out, it stays, and the refusal says when room is due.
--   * Another waiter stays in line.
--   * A new call (or one whose entry is gone) queues behind waiters in
--     line; otherwise it acquires, and queues when a gate refuses it (a
--     concurrency gate, or a rate gate that says when it frees). A call
--     whose deadline cannot be met given the line is refused.
--   * A woken waiter refused by a gate that says when it frees keeps its
--     place; refused otherwise (a budget, a request no window can ever
--     fit) it leaves, and a unit reserved for it goes on. A new call is
--     not queued for a budget either.
--   * A probe the breaker granted to a call that is not admitted is given
--     back, so a refusal leaves the circuit as it was.
-- A source switched off or pushed back is refused by the breaker's part
-- (lib/allow.lua): the gates are not asked, nothing is taken.
-- KEYS: the levels' keys, the circuit, the queue's four (lib/queue.lua),
-- then the budgets' hashes.
-- ARGV[1]: { breaker = the allow request (lib/allow.lua) with key = the
--   circuit's index in KEYS, limiter = the
--   acquire request (lib/acquire.lua), queue = the queue request
--   (lib/queue.lua) with id = the caller's entry (0: none), class, tenant
--   (hex), left = µs to its deadline (absent: none), lease = µs its entry
--   lasts unless renewed, conc = array of the concurrency gates' numbers,
--   bgate = the budget gate's; its labels name the unit of the request's
--   own source; or only off = true for an Admitter without a queue, whose
--   gates refuse as TryAcquire does }.
-- Returns the allow reply (7 values), the acquire reply (5), then: status
-- (0 granted, 1 queued, 2 refused for its deadline, 3 refused and not
-- queued), the entry's id (queued), the position and the estimate µs
-- (status 2), and the µs until the head's room is due (-1: not the head,
-- or none due).
local r = cjson.decode(ARGV[1])
local b, lim, a = r.breaker, r.limiter, r.queue
local now = now_us(lim.now)
local bnow = now
if b.now ~= lim.now then
  bnow = now_us(b.now)
end
local key = KEYS[b.key]
local al = allow(key, b, bnow)
local id = a.id or 0
-- A new call's entry is indexed by its attempt's lease (the breaker's
-- holder), so that the reclaim of an Admit whose reply was lost finds it.
local mb = nil
if id == 0 then
  mb = b.holder
end

if a.off and al[1] == 1 then
  -- An Admitter without a queue: a gate's refusal is the answer.
  local g = acquire(lim, now)
  local status = 0
  if g[1] ~= 1 then
    status = 3
    if al[2] == 1 then
      redis.call('HSET', key, 'probe', '0')
    end
  end
  return { al[1], al[2], al[3], al[4], al[5], al[6], al[7], g[1], g[2], g[3], g[4], g[5], status, 0, 0, 0, -1 }
end

if al[1] ~= 1 then
  if id > 0 then
    local q = qopen(a, now)
    qlapse(q)
    local e = qmine(q, id)
    if e then
      qleave(q, id, e)
    end
    qchanged(q)
    qsave(q)
  end
  return { al[1], al[2], al[3], al[4], al[5], al[6], al[7], 0, 0, 0, now, 0, 3, 0, 0, 0, -1 }
end

local q = qopen(a, now)
qlapse(q)
q.self = id
local e
if id > 0 then
  e = qmine(q, id)
end
local g = { 0, 0, 0, now, 0 }
local status, ahead, est = 1, 0, 0

-- waitable: a gate's refusal that a call waits out in the queue, new or
-- woken: a concurrency gate, or a rate gate that says when it frees. A
-- budget's is not: its window is hours long, and its refusal ends the
-- call.
local function waitable(gate, retry)
  for _, c in ipairs(a.conc) do
    if c == gate then
      return true
    end
  end
  return gate ~= 0 and gate ~= a.bgate and retry > 0
end

-- ran: whether this attempt's member already holds its first level's slot
-- or book entry (a grant not yet released): a second run of an Admit that
-- was granted, a new call's or a woken waiter's whose entry the first run
-- took out of line.
local function ran()
  local l = lim.levels[1]
  if not l then
    return false
  end
  if redis.call('ZSCORE', KEYS[l.key], l.member) then
    return true
  end
  for _, g in ipairs(lim.gates) do
    if g.level == 1 and g.kind == 'conc' then
      return false -- a grant there holds a slot
    end
  end
  local v = redis.call('HGET', KEYS[l.key + 2], l.member)
  return v and string.sub(v, -3) ~= ' -1'
end

-- wait_of: when a waiter refused by gate (g, acquire's reply) may find
-- room. A rate gate says when; a concurrency gate frees on a release,
-- which hands the slot on, but also when a slot lapses unreleased: the
-- lease of a holder that died or whose reclaim has not landed, a claim's
-- reservation that its passer held no key of. Nothing hands those on, so
-- the head holds a timer for the earliest end of a slot held there (the
-- refusal purged the ended ones): without it, a line whose gate is held
-- only by such slots would wait for a release that never comes, every
-- new call queueing behind it.
local function wait_of(g)
  if g[3] > 0 then
    return g[3], false
  end
  for _, gt in ipairs(lim.gates) do
    if gt.gate == g[2] and gt.kind == 'conc' then
      local m = redis.call('ZRANGEBYSCORE', KEYS[lim.levels[gt.level].key], '(' .. int(now), '(+inf', 'WITHSCORES',
        'LIMIT', 0, 1)
      if m[2] then
        return math.max(tonumber(m[2]) - now, 1), true
      end
      return 0, false
    end
  end
  return g[3], false
end

if e and e.st == 'c' then
  qunreserve(q, id, e)
  q.nc = q.nc - 1
  redis.call('ZREM', q.x, 'c' .. int(id))
  qtell(q, e.g, qmsg('ack', id))
  g = acquire(lim, now)
  if g[1] == 1 then
    qforget(q, id, e)
    status = 0
  elseif waitable(g[2], g[3]) then
    qtofront(q, id, e)
    qdue(q, wait_of(g))
  else
    -- No wait mends it: it leaves, and the unit reserved for it goes on.
    qforget(q, id, e)
    id, status = 0, 3
    qhand(q, e.lb, e.rl or {})
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
      qforget(q, id, e)
      status = 0
    elseif waitable(g[2], g[3]) then
      qdue(q, wait_of(g))
    else
      qleave(q, id, e)
      id, status = 0, 3
    end
  end
else
  local retry, lapse = -1, false
  if not qbusy(q) then
    g = acquire(lim, now)
    if g[1] == 1 then
      status = 0
    elseif waitable(g[2], g[3]) then
      retry, lapse = wait_of(g)
    else
      status = 3
    end
  end
  local known = status == 1 and mb and qknown(q, mb)
  if status == 1 and not known and retry < 0 and ran() then
    -- A second run of a granted Admit (the client resent it, its reply
    -- lost) while waiters are in line: its grant stands, as acquire's own.
    g, status, id = { 1, 0, 0, now, 0 }, 0, 0
  elseif known == '0' then
    -- Reclaimed before it came (its reply was lost): not queued.
    id, status = 0, 3
  elseif known then
    -- A second run of one Admit (the client resent it): its entry stands.
    id = tonumber(known)
    q.self = id
  elseif status == 1 then
    local nid, n, t = qpush(q, { class = a.class, tenant = a.tenant, left = a.left, lease = a.lease, retry = retry,
      lapse = lapse, mb = mb })
    if nid then
      id, q.self = nid, nid
    else
      id, status, ahead, est = 0, 2, n, t
    end
  else
    id = 0
  end
end
qchanged(q)
qsave(q)
if status ~= 0 and al[2] == 1 then
  -- Return the probe just granted: no attempt will report on it.
  redis.call('HSET', key, 'probe', '0')
end
local turn = -1
if status == 1 then
  turn = qturn(q, id)
end
return { al[1], al[2], al[3], al[4], al[5], al[6], al[7], g[1], g[2], g[3], g[4], g[5], status, id, ahead, est, turn }

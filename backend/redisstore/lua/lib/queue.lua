-- The fair queue of one scope: the discipline of internal/fairqueue, step
-- for step (see docs/explanation-queue.md), kept by the scripts so that
-- every process sharing the scope shares one line.
--
-- Keys (KEYS[r.qs] to KEYS[r.qs + 3]), all in the scope's (pool's) slot:
--   s  HASH: the scalars (QF below); the entries, 'e<id>' -> JSON; the
--      index of new calls' entries by their Admit's member, 'm<member>'
--      -> id, or '0' for a tombstone (qreclaim); the
--      count of each tenant's waiters in line in each class,
--      'n<class>:<tenant>'
--   o  ZSET, every score 0, ordered by member: the line,
--      '<class><tenant>.<id>', and the front, 'f<order>.<id>' (numbers
--      in 16 digits, so that the order of members is theirs)
--   r  ZSET: the rings of tenants with waiters, '<class>:<tenant>' scored
--      class * QB + turn: the least in a class is the tenant whose turn
--      is next
--   x  ZSET: what lapses, 'l<id>' at its entry's lease end, 'c<id>' at its
--      claim's end, 't<member>' at a tombstone's end (qreclaim)
-- The scalars: seq (the last id), w0..w2 (waiters in line per class),
-- k0..k2 (passes per class), nf (in front), fo (the front's last order),
-- nc (claims), ne (entries), turn (the rings' last turn), iv, last and
-- seen (the interval, as internal/fairqueue keeps it), due (when the
-- head's room is due, µs; 0 none), lp (1: that room is a slot's that may
-- lapse unreleased, see qdue), hd (the head last told), ttl (until
-- when the keys' TTLs run), and sh, cl, kp: the share, claim and keep of
-- the queue's last writer, for a script whose request does not carry
-- them (a Limiter's release that hands a unit on).
-- A queue request names them and says how it runs:
--   { qs = the index of s in KEYS, share, claim = the claim's length µs,
--     keep = the longest lease µs (these three absent: the queue's own),
--     chan = the start of every process's channel, proc = this process
--     ('' for a process that does not listen, whose claims no one checks:
--     they lapse at the queue's next step), self = the caller's entry
--     (told nothing: its reply says it), labels = array of { lb = a label,
--     lv = array of { i = a level's number, k = the index in KEYS of its
--     slots, s = the suffix of a claim's member there } }: the levels,
--     of the units of those labels, whose slots this script may reserve
--     or free }
-- Tenants come hex-encoded from the client, so '.' and ':' separate.
-- An entry: { c = class, t = tenant, p = its process, st = 'w' (in line),
-- 'f' (in front) or 'c' (holding a claim), m = its member in o, mb = the
-- member of the Admit that queued it (indexed), lb = the
-- label of its claim, rl = the numbers of the levels it reserved, g = the
-- process that granted the claim }.
--
-- A process is told by SPUBLISH on its channel, chan .. proc; the count
-- of receivers says whether it still listens: an entry whose process
-- does not is dropped when it would be woken.

local QB = 17592186044416 -- 2^44
local QF = { 'seq', 'w0', 'w1', 'w2', 'k0', 'k1', 'k2', 'nf', 'fo', 'nc', 'ne', 'turn', 'iv', 'last', 'seen', 'due', 'hd', 'ttl',
  'sh', 'cl', 'kp', 'lp' }
local QLAPSE = 100 -- lapses handled by one script at most

-- qopen reads the queue's scalars; only a queue with entries needs more.
local function qopen(r, now)
  local i = r.qs
  local q = { s = KEYS[i], o = KEYS[i + 1], r = KEYS[i + 2], x = KEYS[i + 3], now = now,
    share = r.share, ttl = r.claim, keep = r.keep, chan = r.chan, proc = r.proc, labels = {}, dirty = false }
  for _, l in ipairs(r.labels or {}) do
    local lv = {}
    for _, v in ipairs(l.lv) do
      lv[v.i] = v
    end
    q.labels[l.lb] = lv
  end
  local v = redis.call('HMGET', q.s, unpack(QF))
  local f = {}
  for j, name in ipairs(QF) do
    f[name] = tonumber(v[j]) or 0
  end
  q.seq, q.nf, q.fo, q.nc, q.ne, q.turn = f.seq, f.nf, f.fo, f.nc, f.ne, f.turn
  q.iv, q.last, q.seen, q.due, q.hd, q.mark, q.lp = f.iv, f.last, f.seen, f.due, f.hd, f.ttl, f.lp
  q.w = { f.w0, f.w1, f.w2 }
  q.k = { f.k0, f.k1, f.k2 }
  if not r.share then
    q.share, q.ttl, q.keep = math.max(f.sh, 1), math.max(f.cl, 1), math.max(f.kp, 1)
  end
  return q
end

-- qsave writes the scalars back, and renews the keys' TTLs when they
-- run short of the longest lease and claim (or a key may be new).
local function qsave(q)
  if not q.dirty then
    return
  end
  local need = q.now + q.keep + q.ttl + MARGIN
  local fresh = q.mark < need
  if fresh then
    q.mark = need + SLACK
  end
  redis.call('HSET', q.s, 'seq', int(q.seq), 'w0', int(q.w[1]), 'w1', int(q.w[2]), 'w2', int(q.w[3]),
    'k0', int(q.k[1]), 'k1', int(q.k[2]), 'k2', int(q.k[3]), 'nf', int(q.nf), 'fo', int(q.fo), 'nc', int(q.nc),
    'ne', int(q.ne), 'turn', int(q.turn), 'iv', int(q.iv), 'last', int(q.last), 'seen', int(q.seen),
    'due', int(q.due), 'hd', int(q.hd), 'ttl', int(q.mark), 'sh', int(q.share), 'cl', int(q.ttl), 'kp', int(q.keep),
    'lp', int(q.lp))
  local ms = int(math.ceil((q.mark - q.now) / 1000))
  if fresh then
    for _, k in ipairs({ q.s, q.o, q.r, q.x }) do
      redis.call('PEXPIRE', k, ms)
    end
    return
  end
  -- Keys made since the last renewal: the line's when it filled, the
  -- lapses' when the first entry came.
  if q.newline then
    redis.call('PEXPIRE', q.o, ms)
    redis.call('PEXPIRE', q.r, ms)
  end
  if q.newx then
    redis.call('PEXPIRE', q.x, ms)
  end
end

local function qline(q)
  return q.w[1] + q.w[2] + q.w[3]
end

-- qbusy: waiters in line or in front; a new call queues behind them.
local function qbusy(q)
  return qline(q) + q.nf > 0
end

local function qget(q, id)
  local v = redis.call('HGET', q.s, 'e' .. int(id))
  if v then
    return cjson.decode(v)
  end
end

-- qmine returns the entry id of the caller's process, or nil: an entry
-- of another process under that id is not the caller's, whose entry is
-- gone (the queue's keys were lost, a restart of Redis say, and the ids
-- count again from 1).
local function qmine(q, id)
  local e = qget(q, id)
  if e and e.p == q.proc then
    return e
  end
end

local function qput(q, id, e)
  redis.call('HSET', q.s, 'e' .. int(id), cjson.encode(e))
end

-- qtell sends msg (JSON text) to process p; it returns the receivers.
local function qtell(q, p, msg)
  return redis.call('SPUBLISH', q.chan .. p, msg)
end

local function qmsg(kind, id, extra)
  return '{"k":"' .. kind .. '","id":' .. int(id) .. (extra or '') .. '}'
end

local function qid(m)
  return tonumber(string.match(m, '%.(%d+)$'))
end

local function qpad(n)
  return string.format('%016d', n)
end

-- qring returns the first tenant of class c's ring (its member), or nil.
local function qring(q, c)
  return redis.call('ZRANGEBYSCORE', q.r, int(c * QB), '(' .. int((c + 1) * QB), 'LIMIT', 0, 1)[1]
end

-- qchoose returns the class to serve next: the due class passed over
-- most (a tie to the higher), else the highest with waiters; -1: none.
local function qchoose(q)
  local best = -1
  for c = 0, 2 do
    if q.w[c + 1] > 0 and q.k[c + 1] >= q.share and (best < 0 or q.k[c + 1] > q.k[best + 1]) then
      best = c
    end
  end
  if best >= 0 then
    return best
  end
  for c = 0, 2 do
    if q.w[c + 1] > 0 then
      return c
    end
  end
  return -1
end

-- qnext returns the id of the next waiter in line, or nil.
local function qnext(q)
  local c = qchoose(q)
  if c < 0 then
    return nil
  end
  local t = string.sub(qring(q, c), 3)
  local m = redis.call('ZRANGEBYLEX', q.o, '[' .. c .. t .. '.', '(' .. c .. t .. '/', 'LIMIT', 0, 1)[1]
  return qid(m)
end

-- qfirst returns the id of the first waiter in front, or nil.
local function qfirst(q)
  if q.nf == 0 then
    return nil
  end
  return qid(redis.call('ZRANGEBYLEX', q.o, '[f', '(g', 'LIMIT', 0, 1)[1])
end

-- qhead returns the id of the waiter a handoff would choose, or nil.
local function qhead(q)
  return qfirst(q) or qnext(q)
end

-- qunline takes e out of the line; chosen: as the one chosen (its tenant
-- goes to the back of the ring, the lower classes count a pass, and the
-- interval takes a sample).
local function qunline(q, e, chosen)
  local c = e.c
  redis.call('ZREM', q.o, e.m)
  local nk, rm = 'n' .. c .. ':' .. e.t, c .. ':' .. e.t
  if redis.call('HINCRBY', q.s, nk, -1) <= 0 then
    redis.call('HDEL', q.s, nk)
    redis.call('ZREM', q.r, rm)
  elseif chosen and qring(q, c) == rm then
    q.turn = q.turn + 1
    redis.call('ZADD', q.r, int(c * QB + q.turn), rm)
  end
  q.w[c + 1] = q.w[c + 1] - 1
  if q.w[c + 1] == 0 then
    q.k[c + 1] = 0
  end
  if chosen then
    q.k[c + 1] = 0
    for d = c + 1, 2 do
      if q.w[d + 1] > 0 then
        q.k[d + 1] = q.k[d + 1] + 1
      end
    end
    if q.seen == 1 then
      local s = math.max(q.now - q.last, 0)
      if q.iv == 0 then
        q.iv = math.max(s, 1)
      else
        q.iv = math.max(q.iv + math.floor((s - q.iv) / 8), 1)
      end
    end
    q.last, q.seen = q.now, 1
  end
  q.dirty = true
end

-- qtofront puts e (id) at the back of the front.
local function qtofront(q, id, e)
  if not qbusy(q) then
    q.newline = true
  end
  q.fo = q.fo + 1
  e.st, e.m, e.lb, e.g = 'f', 'f' .. qpad(q.fo) .. '.' .. int(id), nil, nil
  redis.call('ZADD', q.o, 0, e.m)
  q.nf = q.nf + 1
  qput(q, id, e)
  q.dirty = true
end

local function qunfront(q, e)
  redis.call('ZREM', q.o, e.m)
  q.nf = q.nf - 1
  q.dirty = true
end

-- qforget deletes the entry id (e), and its index.
local function qforget(q, id, e)
  if e and e.mb then
    redis.call('HDEL', q.s, 'e' .. int(id), 'm' .. e.mb)
  else
    redis.call('HDEL', q.s, 'e' .. int(id))
  end
  redis.call('ZREM', q.x, 'l' .. int(id), 'c' .. int(id))
  q.ne = q.ne - 1
  q.dirty = true
end

-- qreserve keeps the unit of the claim of id (e, label e.lb) reserved
-- until till on the levels numbered levels whose slots this script holds:
-- one member per level in the level's slots, which the gates count as a
-- slot held (and the limiter's purge drops once it has expired). The
-- levels reserved are noted in e.rl.
local function qreserve(q, id, e, levels, till)
  local lv = q.labels[e.lb] or {}
  local ms = int(math.ceil((till - q.now + MARGIN) / 1000))
  e.rl = {}
  for _, i in ipairs(levels) do
    local l = lv[i]
    if l then
      redis.call('ZADD', KEYS[l.k], int(till), 'c' .. int(id) .. l.s)
      redis.call('PEXPIRE', KEYS[l.k], ms, 'GT')
      e.rl[#e.rl + 1] = i
    end
  end
  qput(q, id, e)
end

-- qunreserve frees what the claim of id (e) reserved, where this script
-- holds the slots; elsewhere the reservation expires with the claim.
local function qunreserve(q, id, e)
  local lv = q.labels[e.lb] or {}
  for _, i in ipairs(e.rl or {}) do
    local l = lv[i]
    if l then
      redis.call('ZREM', KEYS[l.k], 'c' .. int(id) .. l.s)
    end
  end
end

-- qtimer notes that id, leaving the line, may be the head told of room
-- due: the new head is then told (qchanged), as it holds the timer now.
local function qtimer(q, id)
  if id == q.hd then
    q.tell = true
  end
end

-- qdrop takes id (e) out as gone: its process no longer listens.
local function qdrop(q, id, e)
  qtimer(q, id)
  if e.st == 'f' then
    qunfront(q, e)
  elseif e.st == 'w' then
    qunline(q, e, false)
  end
  qforget(q, id, e)
end

-- qhand hands a unit of label, held on the levels numbered levels, to
-- the next waiter whose process listens, as a claim granted by this
-- script's process; the unit stays reserved for it (qreserve). It returns
-- the waiter's id and the claim's end, or nil when no one waits.
local function qhand(q, label, levels)
  while true do
    local id = qhead(q)
    if not id then
      return nil
    end
    local e = qget(q, id)
    if qtell(q, e.p, qmsg('claim', id, ',"lb":' .. cjson.encode(label) .. ',"at":' .. int(q.ttl))) > 0 then
      if e.st == 'f' then
        qunfront(q, e)
      else
        qunline(q, e, true)
      end
      local till = q.now + q.ttl
      e.st, e.m, e.lb, e.g = 'c', nil, label, q.proc
      redis.call('ZADD', q.x, int(till), 'c' .. int(id))
      q.nc = q.nc + 1
      qreserve(q, id, e, levels, till)
      return id, till
    end
    qdrop(q, id, e)
  end
end

-- qpass passes the claim of id (e) on to the next waiter, with what it
-- reserved (where this script holds the slots; elsewhere that expires
-- with the claim and the next holder has no reservation), and tells the
-- process that granted it that it ended.
local function qpass(q, id, e)
  q.nc = q.nc - 1
  redis.call('ZREM', q.x, 'c' .. int(id))
  qtell(q, e.g, qmsg('ack', id))
  qunreserve(q, id, e)
  return qhand(q, e.lb, e.rl or {})
end

-- qleave takes id (e) out: its call ended. A claim it held goes on.
local function qleave(q, id, e)
  qtimer(q, id)
  if e.st == 'c' then
    qpass(q, id, e)
  elseif e.st == 'f' then
    qunfront(q, e)
  else
    qunline(q, e, false)
  end
  qforget(q, id, e)
end

-- qlapse ends the leases and claims whose time has come: an entry whose
-- lease ended leaves (its process did not renew it: gone, or out of
-- time); a claim not taken goes to the next waiter, and its holder is
-- told it lost its place.
local function qlapse(q)
  if q.ne == 0 then
    return
  end
  local due = redis.call('ZRANGEBYSCORE', q.x, '-inf', int(q.now), 'LIMIT', 0, QLAPSE)
  for _, m in ipairs(due) do
    local kind = string.sub(m, 1, 1)
    local id = tonumber(string.sub(m, 2))
    local e = kind ~= 't' and qget(q, id)
    if kind == 't' then
      -- A tombstone's time is up (qreclaim).
      redis.call('HDEL', q.s, 'm' .. string.sub(m, 2))
      redis.call('ZREM', q.x, m)
      q.ne, q.dirty = q.ne - 1, true
    elseif not e then
      redis.call('ZREM', q.x, m)
    elseif kind == 'l' or e.st == 'c' then
      qtell(q, e.p, qmsg('gone', id))
      qleave(q, id, e)
    else
      redis.call('ZREM', q.x, m)
    end
  end
end

-- qdue records when the head may find room: now + retry µs, or none;
-- lapse: the room is that of a slot that may lapse unreleased (admit.lua,
-- wait_of), which a new head is told of only once it is due.
local function qdue(q, retry, lapse)
  if retry > 0 then
    q.due = q.now + retry
  else
    q.due = 0
  end
  q.lp, q.tell, q.dirty = lapse and 1 or 0, true, true
end

-- qchanged tells the head when it is not the one last told and room is
-- due, so that it holds the timer; a head whose process no longer
-- listens is dropped, and the next one told. While no room is due no one
-- is told, and the head is not looked up.
local function qchanged(q)
  if q.due == 0 then
    -- No room is due: the head waits for a handoff and needs no word.
    if q.hd ~= 0 then
      q.hd, q.dirty = 0, true
    end
    return
  end
  if q.lp == 1 and q.due > q.now and not q.tell then
    -- The room of a slot that may lapse: most likely a release hands it
    -- on first. A head chosen by a handoff is told once it is due, by the
    -- first script that runs then; until then this costs nothing per
    -- handoff. (A head that left with its timer has q.tell set: qtimer.)
    return
  end
  while true do
    local h = qhead(q) or 0
    if h == q.hd then
      return
    end
    q.hd, q.dirty = h, true
    if h == 0 or q.due == 0 or h == q.self then
      return
    end
    local e = qget(q, h)
    if qtell(q, e.p, qmsg('turn', h, ',"at":' .. int(math.max(q.due - q.now, 0)))) > 0 then
      return
    end
    qdrop(q, h, e)
  end
end

-- qahead returns how many waiters are chosen before a new one of class
-- c and tenant t, as internal/fairqueue counts them.
local function qahead(q, c, t)
  local n = q.nf
  for d = 0, c - 1 do
    n = n + q.w[d + 1]
  end
  local ring = redis.call('ZRANGEBYSCORE', q.r, int(c * QB), '(' .. int((c + 1) * QB))
  if #ring == 0 then
    return n
  end
  local fields = {}
  for i, m in ipairs(ring) do
    fields[i] = 'n' .. m
  end
  local counts = redis.call('HMGET', q.s, unpack(fields))
  local r = tonumber(redis.call('HGET', q.s, 'n' .. c .. ':' .. t)) or 0
  n = n + r
  local after = false
  for i, m in ipairs(ring) do
    local k = tonumber(counts[i]) or 0
    if string.sub(m, 3) == t then
      after = true
    elseif after then
      n = n + math.min(k, r)
    else
      n = n + math.min(k, r + 1)
    end
  end
  return n
end

-- qpush adds a waiter: a = { class, tenant, left = µs to its deadline
-- (absent: none), lease = µs its entry lasts unless renewed, retry = µs
-- (-1: it did not try the gates), lapse = the retry is when a slot may
-- lapse unreleased (qdue), mb = the member of the Admit that
-- queues it (absent: none), indexed for qreclaim }. It returns
-- the entry's id, or nil and the position and estimate when its deadline
-- cannot be met.
local function qpush(q, a)
  local c = a.class
  if a.left then
    local ub = q.nf
    for d = 0, c do
      ub = ub + q.w[d + 1]
    end
    if a.left <= 0 or (q.iv > 0 and (ub + 1) * q.iv > a.left) then
      local ahead = qahead(q, c, a.tenant)
      local est = (ahead + 1) * q.iv
      if a.left <= 0 or (q.iv > 0 and est > a.left) then
        return nil, ahead, est
      end
    end
  end
  if not qbusy(q) then
    q.last, q.seen = q.now, 1
  end
  if qline(q) == 0 then
    q.newline = true
  end
  if q.ne == 0 then
    q.newx = true
  end
  q.seq = q.seq + 1
  local id = q.seq
  local e = { c = c, t = a.tenant, p = q.proc, st = 'w', m = c .. a.tenant .. '.' .. qpad(id), mb = a.mb }
  if a.mb then
    redis.call('HSET', q.s, 'e' .. int(id), cjson.encode(e), 'm' .. a.mb, int(id))
  else
    qput(q, id, e)
  end
  redis.call('ZADD', q.o, 0, e.m)
  if redis.call('HINCRBY', q.s, 'n' .. c .. ':' .. a.tenant, 1) == 1 then
    q.turn = q.turn + 1
    redis.call('ZADD', q.r, int(c * QB + q.turn), c .. ':' .. a.tenant)
  end
  q.w[c + 1] = q.w[c + 1] + 1
  redis.call('ZADD', q.x, int(q.now + math.min(a.lease, q.keep)), 'l' .. int(id))
  q.ne = q.ne + 1
  q.dirty = true
  if a.retry >= 0 and qhead(q) == id then
    qdue(q, a.retry, a.lapse)
  end
  return id
end

-- qturn returns the µs until the head's room is due when id is the head
-- and some is, else -1.
local function qturn(q, id)
  if q.hd == id and q.due > 0 then
    return math.max(q.due - q.now, 0)
  end
  return -1
end

-- qfree hands the unit of label freed on the levels numbered freed (the
-- slots a release freed) to the next waiter, when one waits (qhand), and
-- writes the queue back. It returns the waiter's id (0: none) and the
-- claim's end.
local function qfree(q, label, freed)
  local id, till
  if #freed > 0 and qbusy(q) then
    id, till = qhand(q, label, freed)
  end
  qchanged(q)
  qsave(q)
  return id or 0, till or 0
end

-- qknown returns what the index says of the Admit of member mb: the id
-- of the entry it made, '0' when a reclaim came first (a tombstone), or
-- false when it made none.
local function qknown(q, mb)
  return redis.call('HGET', q.s, 'm' .. mb)
end

-- qreclaim takes out the entry made by the Admit of member mb, whose
-- reply was lost, so that no one holds the line for a call that is not
-- waiting (a claim it held goes on); when the Admit made none (it did not
-- run, or not yet), a tombstone stops it from queueing later, until the
-- longest lease has passed. Tombstones count among the entries (ne), so
-- that qlapse ends them. It returns the id a claim went to, or 0; or 0
-- and the entry's id and its claim's label when the entry holds a claim
-- with slots reserved on a label whose keys the script does not hold: it
-- stays, for the caller to take out with a leave of that label (so that
-- the reserved slots go on with the claim).
local function qreclaim(q, mb)
  local known = qknown(q, mb)
  if known == '0' then
    return 0
  end
  if not known then
    if q.ne == 0 then
      q.newx = true
    end
    redis.call('HSET', q.s, 'm' .. mb, '0')
    redis.call('ZADD', q.x, int(q.now + q.keep), 't' .. mb)
    q.ne, q.dirty = q.ne + 1, true
    return 0
  end
  local id = tonumber(known)
  local e = qget(q, id)
  if not e then
    redis.call('HDEL', q.s, 'm' .. mb)
    return 0
  end
  if e.st == 'c' and e.rl and #e.rl > 0 and not q.labels[e.lb] then
    return 0, id, e.lb
  end
  local to = 0
  if e.st == 'c' then
    to = qpass(q, id, e) or 0
    qforget(q, id, e)
  else
    qleave(q, id, e)
  end
  return to
end

-- TryAcquire: check every gate, then every budget, and take them all, or
-- take nothing.
-- r: { now = µs (absent: the server's TIME), lease_ttl = µs (0 = none),
--      levels, gates (see gates.lua), and budgets, bmember, bgate, cost
--      when the request names budgets (see budget.lua) }.
-- now, when given, is the time already read.
-- Returns {granted 1/0, gate, retry after µs, now µs, the refusing
-- budget's index in r.budgets (0 = none)}.
--
-- A grant that needs no purge and no TTL extension is done here; the rest
-- is in limiter(). The client may send one acquire twice (go-redis retries
-- a command whose connection failed, and the first may have run): the
-- second takes the same members again, which holds no more slots and
-- counts nothing more in the windows, and is granted where the first was,
-- though the gates are full now.
local function acquire(r, now)
  now = now or now_us(r.now)
  local ttl = r.lease_ttl or 0
  local expires, exp = '+inf', nil
  if ttl > 0 then
    exp = now + ttl
    expires = int(exp)
  end
  local lv = levels(r)
  local refused = false
  for _, v in ipairs(lv) do
    peek(v)
    if v.gone then
      -- Released before it was acquired: a late copy of an Admit whose
      -- reclaim came first (see reclaim.lua). No one hears this reply.
      return { 0, 0, 0, now, 0 }
    end
    if v.logged and now - v.p >= PURGE_EVERY then
      limiter().purge(v, now)
    end
    if (v.conc > 0 and v.card >= v.conc) or (v.rpm > 0 and v.n >= v.rpm) or (v.tpm > 0 and v.sum + v.amount > v.tpm) then
      refused = true
    end
  end
  if refused then
    local gate, retry = limiter().refusal(lv, now)
    if gate ~= 0 then
      if limiter().holds(lv) then
        -- A retry of an acquire that ran: its grant stands.
        return { 1, 0, 0, now, 0 }
      end
      return { 0, gate, retry, now, 0 }
    end
  end
  if r.budgets then
    local i, left = budget().check(r, now)
    if i < 0 then
      return { 0, 0, 0, now, 0 }
    elseif i > 0 then
      return { 0, r.bgate, left, now, i }
    end
  end
  local nows = int(now)
  local state = expires
  if not exp then
    state = '0'
  end
  for _, v in ipairs(lv) do
    local book = {}
    if v.logged and v.entry and (not v.purged or redis.call('HEXISTS', v.tok, v.member) == 1) then
      -- A client's retry of an acquire that ran: its entry is counted
      -- already (unless the purge above dropped it), and stays as it is.
      if v.p == now then
        book = { '_p', nows }
      end
    elseif v.logged then
      redis.call('ZADD', v.log, nows, v.member)
      book = { v.member, int(v.amount) .. ' ' .. state, '_sum', int(v.sum + v.amount), '_n', int(v.n + 1) }
      if v.p == now then
        book[7], book[8] = '_p', nows
      end
    end
    if v.conc > 0 then
      if v.fresh then
        redis.call('ZADD', v.slots, expires, v.member, '-inf', '')
      else
        redis.call('ZADD', v.slots, expires, v.member)
      end
    end
    -- Which TTLs no longer cover this grant: the slots' when the key is
    -- new, when a lease without expiry joins, or when this lease outlasts
    -- the TTL (one that held a lease without expiry gets a TTL back once
    -- it holds no slot); the log's when the grant outlasts it.
    local slots = v.conc > 0 and (v.fresh or (not exp and v.xs ~= -1)
      or (exp and v.xs < exp + MARGIN and (v.xs ~= -1 or v.card == 0)))
    local log = v.logged and v.x < now + v.window + MARGIN
    if slots or log then
      limiter().extend(v, expires, now, book, slots, log)
    elseif #book > 0 then
      redis.call('HSET', v.tok, unpack(book))
    end
  end
  if r.budgets then
    budget().take(r, now, state)
  end
  return { 1, 0, 0, now, 0 }
end

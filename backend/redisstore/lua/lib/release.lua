-- Release: free the permit's slots, settle its log entries in place and
-- settle its budgets (see budget.lua).
-- r: { now = µs (absent: TIME), settle = 'actual' | 'estimate' | 'refund',
--      levels = array of { key = i (the level's slots, log and book are
--      KEYS[i..i+2]), member, slots = true when the level's slots hold the
--      permit, log = true when its log does, amount = the actual amount
--      (settle 'actual'), gone = the index in KEYS of the level's tombstone
--      register (with tomb), noexp = true when the level's slots hold the
--      permit with no expiry }, tomb = true to leave a tombstone in each
--      level's book where the member has no entry (see reclaim.lua), and
--      budgets, bmember, cost (the actual cost) when the permit reserved
--      on budgets }.
-- now, when given, is the time already read.
--
-- Settling marks the entry released and sets its amount (actual: to the
-- amount given, estimate: kept, refund: to zero), unless the permit expired
-- or was released before.
-- TOMB_TTL is how long a tombstone stands: longer than a command can be
-- held up on a dying TCP connection.
local TOMB_TTL = 900000000

-- tombstone registers the tombstone of member in book: the level's
-- register (a ZSET member -> end of its tombstone) lets the reclaims that
-- come later drop the tombstones that have served their time, so that a
-- busy book does not keep them. Only reclaims touch the register.
local function tombstone(book, register, member, now)
  redis.call('ZADD', register, int(now + TOMB_TTL), member)
  local old = redis.call('ZRANGEBYSCORE', register, '-inf', int(now), 'LIMIT', 0, BATCH)
  if #old > 0 then
    redis.call('HDEL', book, unpack(old))
    redis.call('ZREM', register, unpack(old))
  end
  redis.call('PEXPIRE', register, int(TOMB_TTL / 1000 + SLACK / 1000))
end

-- unpersist gives a level's slots and book (keys slots, tok) their TTL back
-- once no slot without expiry is left there, covering the slots that
-- remain: acquire.lua would only on a later grant, and an idle level
-- must vanish. Run after the release of a slot without expiry.
local function unpersist(slots, tok, now)
  if redis.call('ZCOUNT', slots, '+inf', '+inf') > 0 or redis.call('EXISTS', slots) == 0 then
    return
  end
  local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
  local xs = math.max(tonumber(last[2]) or now, now) + MARGIN + SLACK
  redis.call('PEXPIRE', slots, int(math.ceil((xs - now) / 1000)))
  local x = num(redis.call('HGET', tok, '_x'), 0)
  redis.call('HSET', tok, '_xs', int(xs))
  redis.call('PEXPIRE', tok, int(math.ceil((math.max(x, xs) - now) / 1000)))
end

-- free_slots frees the permit's concurrency slots ahead of release() and
-- returns the indexes of the levels whose slot it held, so that what
-- freed can be handed to the queue.
local function free_slots(lim)
  local freed = {}
  for _, l in ipairs(lim.levels) do
    if l.slots then
      if redis.call('ZREM', KEYS[l.key], l.member) == 1 then
        freed[#freed + 1] = (l.key - 1) / 3
      end
      l.slots = false
    end
  end
  return freed
end

local function release(r, now)
  local kind = r.settle
  for _, l in ipairs(r.levels) do
    local k = l.key
    if l.slots then
      redis.call('ZREM', KEYS[k], l.member)
    end
    if l.noexp then
      now = now or now_us(r.now)
      unpersist(KEYS[k], KEYS[k + 2], now)
    end
    if r.tomb and redis.call('EXISTS', KEYS[k + 2]) == 1 then
      -- Only into a book that exists: one made here would have no TTL.
      if redis.call('HSETNX', KEYS[k + 2], l.member, '0 -1') == 1 and l.gone then
        now = now or now_us(r.now)
        tombstone(KEYS[k + 2], KEYS[l.gone], l.member, now)
      end
    end
    if l.log then
      local tok = KEYS[k + 2]
      local m = redis.call('HMGET', tok, l.member, '_sum')
      if m[1] then
        now = now or now_us(r.now)
        local old, state = entry(m[1])
        if state ~= -1 and (state == 0 or state > now) then
          local amount = l.amount or 0
          if kind == 'estimate' then
            amount = old
          elseif kind == 'refund' then
            amount = 0
          end
          if amount == old then
            redis.call('HSET', tok, l.member, int(amount) .. ' -1')
          else
            redis.call('HSET', tok, l.member, int(amount) .. ' -1', '_sum', int(num(m[2], 0) + amount - old))
          end
        end
      end
    end
  end
  if r.budgets then
    budget().settle(r, now or now_us(r.now))
  end
  return 1
end

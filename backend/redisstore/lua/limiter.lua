-- The limiter's levels. A level (a source, or the scope's global gates)
-- has up to three keys:
-- A permit's member is its lease on its source's level and lease/source on
-- the global one, so that a permit of one source never frees another's.
--   slots  ZSET member -> expiry of its concurrency slot (+inf: no expiry),
--          kept while the level's concurrency gate is on; the member ''
--          scored -inf is a sentinel that keeps the key, and so its TTL,
--          alive while no slot is held
--   log    ZSET member -> time of the acquire, one per grant in the last
--          60 s, kept while its RPM or TPM gate is on
--   tok    HASH, the level's book:
--            <member> 'tokens state' of the member's log entry: the tokens
--                     counted for TPM, and the permit's expiry (µs; 0 = none,
--                     -1 = released)
--            _sum     the total tokens of the log's entries
--            _p       when the log was last purged (µs)
--            _x       until when the TTLs of log and tok run (µs)
--            _xs      until when the TTL of slots runs (µs; -1 = none)
--
-- Counts may still include expired slots and entries that left the window
-- until a purge drops them. Such leftovers only ever overstate, so a check
-- that passes on them passes on exact counts too; a check that refuses
-- purges and checks again, and RetryAfter is computed on exact counts. The
-- log is purged at least every PURGE_EVERY, which bounds its size.
--
-- TTLs run SLACK past what they must cover, so a busy level extends them
-- once per SLACK rather than on every grant.

local WINDOW = 60000000     -- the sliding RPM/TPM window
local BATCH = 500           -- members per HMGET/HDEL (unpack has a limit)
local PURGE_EVERY = 1000000 -- the longest a log goes unpurged while in use
local MARGIN = 1000000      -- a key outlives what it holds by at least this
local SLACK = 10000000      -- and by at most this more

-- entry splits a member's book value into its tokens and state.
local function entry(v)
  local t, s = string.match(v, '^(%S+) (%S+)$')
  return tonumber(t) or 0, tonumber(s) or 0
end

-- level describes level lv (1 source, 2 global) of the script's keys with
-- its limits; gate is the number of its concurrency gate.
local function level(K, lv, conc, rpm, tpm)
  local i = 3 * lv - 2
  return {
    slots = K[i], log = K[i + 1], tok = K[i + 2], gate = i,
    conc = conc, rpm = rpm, tpm = tpm, logged = rpm > 0 or tpm > 0,
  }
end

-- active reports whether any gate of the level is on.
local function active(v)
  return v.conc > 0 or v.logged
end

-- peek reads what the level's gates need: the slot count, the book's
-- totals and marks, and the log's length.
local function peek(v)
  v.card, v.n, v.fresh = 0, 0, false
  if v.conc > 0 then
    v.card = redis.call('ZCARD', v.slots) - 1 -- less the sentinel
    if v.card < 0 then
      v.card, v.fresh = 0, true
    end
  end
  local m = redis.call('HMGET', v.tok, '_sum', '_p', '_x', '_xs')
  v.sum, v.p, v.x, v.xs = num(m[1], 0), num(m[2], 0), num(m[3], 0), num(m[4], 0)
  if v.rpm > 0 then
    v.n = redis.call('ZCARD', v.log)
  end
end

-- purge drops the level's expired slots and the log entries that left the
-- window, and keeps v's counts in step. A log that empties takes its book
-- with it unless the slots still need the book's TTL mark.
local function purge(v, now)
  if v.conc > 0 and v.card > 0 then
    v.card = v.card - redis.call('ZREMRANGEBYSCORE', v.slots, '(-inf', int(now))
  end
  v.purged = true
  if not v.logged then
    return
  end
  v.p = now
  local cutoff = int(now - WINDOW)
  local old = redis.call('ZRANGEBYSCORE', v.log, '-inf', cutoff)
  if #old == 0 then
    return
  end
  redis.call('ZREMRANGEBYSCORE', v.log, '-inf', cutoff)
  v.n = math.max(v.n - #old, 0)
  local gone = 0
  for i = 1, #old, BATCH do
    local j = math.min(i + BATCH - 1, #old)
    local vals = redis.call('HMGET', v.tok, unpack(old, i, j))
    for k = 1, #vals do
      if vals[k] then
        gone = gone + entry(vals[k])
      end
    end
    redis.call('HDEL', v.tok, unpack(old, i, j))
  end
  v.sum = v.sum - gone
  if redis.call('EXISTS', v.log) == 1 then
    redis.call('HSET', v.tok, '_sum', int(v.sum))
    return
  end
  -- The log emptied, so Redis deleted it: a new one will need its TTL.
  v.sum, v.x, v.n = 0, 0, 0
  if redis.call('EXISTS', v.slots) == 0 then
    redis.call('DEL', v.tok)
    v.xs = 0
    return
  end
  redis.call('HSET', v.tok, '_sum', '0', '_x', '0')
end

-- tpm_retry is the time until tokens more fit under limit as the oldest
-- entries leave the window; 0 when they never can.
local function tpm_retry(v, limit, tokens, now)
  if tokens > limit then
    return 0
  end
  local left = v.sum
  local n = redis.call('ZCARD', v.log)
  for i = 0, n - 1, BATCH do
    local e = redis.call('ZRANGE', v.log, int(i), int(i + BATCH - 1), 'WITHSCORES')
    local leases = {}
    for k = 1, #e, 2 do
      leases[#leases + 1] = e[k]
    end
    if #leases == 0 then
      break
    end
    local vals = redis.call('HMGET', v.tok, unpack(leases))
    for k = 1, #leases do
      if vals[k] then
        left = left - entry(vals[k])
      end
      if left + tokens <= limit then
        return tonumber(e[2 * k]) + WINDOW - now
      end
    end
  end
  return 0
end

-- check returns the first gate of the levels that refuses and, when exact
-- (the counts are purged), the time until it would let the request through
-- (0 = unknown); or 0, 0.
local function check(lv, tokens, now, exact)
  for _, v in ipairs(lv) do
    if v.conc > 0 and v.card >= v.conc then
      return v.gate, 0
    end
    if v.rpm > 0 and v.n >= v.rpm then
      if not exact then
        return v.gate + 1, 0
      end
      -- The request fits once n-rpm+1 of the oldest entries have left.
      local e = redis.call('ZRANGE', v.log, int(v.n - v.rpm), int(v.n - v.rpm), 'WITHSCORES')
      return v.gate + 1, tonumber(e[2]) + WINDOW - now
    end
    if v.tpm > 0 and v.sum + tokens > v.tpm then
      if not exact then
        return v.gate + 2, 0
      end
      return v.gate + 2, tpm_retry(v, v.tpm, tokens, now)
    end
  end
  return 0, 0
end

-- take counts one granted permit on a level and extends the TTLs of its
-- keys where they would not cover it.
local function take(v, member, expires, tokens, now)
  local book = {}
  if v.logged then
    redis.call('ZADD', v.log, int(now), member)
    local state = '0'
    if expires ~= '+inf' then
      state = expires
    end
    book = { member, int(tokens) .. ' ' .. state, '_sum', int(v.sum + tokens) }
    if v.p == now then
      book[#book + 1], book[#book + 2] = '_p', int(now)
    end
  end
  local extend = false
  if v.conc > 0 then
    if v.fresh then
      redis.call('ZADD', v.slots, expires, member, '-inf', '')
    else
      redis.call('ZADD', v.slots, expires, member)
    end
    if expires == '+inf' then
      if v.xs ~= -1 then
        redis.call('PERSIST', v.slots)
        v.xs, extend = -1, true
      end
    elseif v.fresh or v.xs < tonumber(expires) + MARGIN and (v.xs ~= -1 or v.card == 0) then
      -- A new key has no TTL yet; one that held a slot without expiry
      -- gets one back once it holds no slot.
      v.xs, extend = tonumber(expires) + MARGIN + SLACK, true
      redis.call('PEXPIRE', v.slots, int(math.ceil((v.xs - now) / 1000)))
    end
  end
  if v.logged and v.x < now + WINDOW + MARGIN then
    v.x, extend = now + WINDOW + MARGIN + SLACK, true
    redis.call('PEXPIRE', v.log, int(math.ceil((v.x - now) / 1000)))
  end
  if extend then
    book[#book + 1], book[#book + 2] = '_x', int(v.x)
    book[#book + 1], book[#book + 2] = '_xs', int(v.xs)
  end
  if #book == 0 then
    return
  end
  redis.call('HSET', v.tok, unpack(book))
  if extend then
    -- The book outlives the slots and the log, whose marks it keeps.
    if v.xs == -1 then
      redis.call('PERSIST', v.tok)
    else
      redis.call('PEXPIRE', v.tok, int(math.ceil((math.max(v.x, v.xs) - now) / 1000)))
    end
  end
end

-- settle marks member's log entry on a level released and sets its tokens
-- (kind 0 to amount, 1 keeps them, 2 to zero), unless the member expired or
-- was released before.
local function settle(tok, member, kind, amount, now)
  local m = redis.call('HMGET', tok, member, '_sum')
  if not m[1] then
    return
  end
  local old, state = entry(m[1])
  if state == -1 or (state > 0 and state <= now) then
    return
  end
  if kind == 1 then
    amount = old
  elseif kind == 2 then
    amount = 0
  end
  if amount == old then
    redis.call('HSET', tok, member, int(amount) .. ' -1')
  else
    redis.call('HSET', tok, member, int(amount) .. ' -1', '_sum', int(num(m[2], 0) + amount - old))
  end
end

-- TryAcquire: check all six gates and take them all, or take nothing.
-- KEYS: source slots, log, tok; global slots, log, tok.
-- ARGV: now ('' = TIME), lease, tokens, lease ttl (µs, 0 = none),
--       source concurrency, rpm, tpm, global concurrency, rpm, tpm,
--       the global member.
-- now, when given, is the time already read from ARGV[1].
-- Returns {granted 1/0, gate, retry after µs, now µs}.
local function acquire(K, A, now)
  now = now or now_us(A[1])
  local members = { A[2], A[11] }
  local tokens = tonumber(A[3])
  local ttl = tonumber(A[4])
  local lv = {}
  for i = 1, 2 do
    local v = level(K, i, tonumber(A[3 * i + 2]), tonumber(A[3 * i + 3]), tonumber(A[3 * i + 4]))
    v.member = members[i]
    if active(v) then
      peek(v)
      if v.logged and now - v.p >= PURGE_EVERY then
        purge(v, now)
      end
      lv[#lv + 1] = v
    end
  end
  if check(lv, tokens, now, false) ~= 0 then
    for _, v in ipairs(lv) do
      if not v.purged then
        purge(v, now)
      end
    end
    local gate, retry = check(lv, tokens, now, true)
    if gate ~= 0 then
      return { 0, gate, retry, now }
    end
  end
  local expires = '+inf'
  if ttl > 0 then
    expires = int(now + ttl)
  end
  for _, v in ipairs(lv) do
    take(v, v.member, expires, tokens, now)
  end
  return { 1, 0, 0, now }
end

-- Release: free the permit's slots and settle its TPM entries in place.
-- KEYS: source slots, log, tok; global slots, log, tok.
-- ARGV: now ('' = TIME), lease, kind (0 actual, 1 estimate, 2 refund),
--       tokens, levels (bit 0: the source's slots hold the permit, bit 1:
--       its log; bits 2 and 3 the same for the global level), the global
--       member.
-- now, when given, is the time already read from ARGV[1].
local function release(K, A, now)
  local members = { A[2], A[6] }
  local kind = tonumber(A[3])
  local amount = tonumber(A[4])
  local levels = tonumber(A[5])
  for i = 0, 1 do
    local f = math.floor(levels / (4 ^ i)) % 4
    if f % 2 == 1 then
      redis.call('ZREM', K[3 * i + 1], members[i + 1])
    end
    if f >= 2 then
      now = now or now_us(A[1])
      settle(K[3 * i + 3], members[i + 1], kind, amount, now)
    end
  end
  return 1
end

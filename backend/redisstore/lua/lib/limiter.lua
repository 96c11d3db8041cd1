-- The limiter's levels. A level (a source, or the global gates of a scope
-- or of a pool) has up to three keys. A permit's member is its lease on its
-- source's level and lease/source (lease/scope:source in a pool) on the
-- global one, so that a permit of one source never frees another's.
--   slots  ZSET member -> expiry of its concurrency slot (+inf: no expiry),
--          kept while the level's conc gate is on; the member '' scored
--          -inf is a sentinel that keeps the key, and so its TTL, alive
--          while no slot is held
--   log    ZSET member -> time of the acquire, one per grant in the last
--          window, kept while its rate or sum gate is on
--   tok    HASH, the level's book:
--            <member> 'amount state' of the member's log entry: the amount
--                     counted for the sum gate, and the permit's expiry
--                     (µs; 0 = none, -1 = released); or '0 -1' alone, a
--                     tombstone (see reclaim.lua): an acquire that finds
--                     its member released takes nothing
--            _sum     the total amount of the log's entries
--            _n       the number of the log's entries
--            _p       when the log was last purged (µs)
--            _x       until when the TTLs of log and tok run (µs)
--            _xs      until when the TTL of slots runs (µs; -1 = none)
--   gone   ZSET member -> end of its tombstone: the tombstones in the book,
--          kept by reclaims only (see release.lua), so that they do not
--          outstay their use in a book that never goes idle
--
-- Counts may still include expired slots and entries that left the window
-- until a purge drops them. Such leftovers only ever overstate, so a check
-- that passes on them passes on exact counts too; a check that refuses
-- purges and checks again, and RetryAfter is computed on exact counts. The
-- log is purged at least every PURGE_EVERY, which bounds its size.
--
-- TTLs run up to SLACK past what they must cover, so a busy level extends
-- them once per SLACK rather than on every grant. The book outlives the
-- slots and the log; once now passes _x every entry of the log has left
-- the window, whether or not Redis has deleted the log yet, and a purge
-- clears the book's entries.
--
-- A level in a script is a table v (made by levels in gates.lua): its keys
-- (slots, log, tok), its limits (conc, rpm, tpm: the limits of its conc,
-- rate and sum gates, 0 = off; logged = a rate or sum gate is on), the
-- numbers of those gates (gconc, grate, gsum), window (the log's sliding
-- window), amount (what the request adds to the sum), member, and what peek
-- read: card (slots held, less the sentinel), fresh (no slots key yet), and
-- the book's n, sum, p, x, xs.
--
-- The book's entries hold the amount of the level's sum gate (tokens, for
-- TPM); a level with a rate gate and no sum gate keeps entries of amount 0.

-- entry splits a member's book value into its tokens and state.
local function entry(v)
  local t, s = string.match(v, '^(%S+) (%S+)$')
  return tonumber(t) or 0, tonumber(s) or 0
end

-- peek reads what the level's gates need, and (when v.member is set) the
-- member's book entry (v.entry) and whether it was released (v.gone).
local function peek(v)
  v.card, v.n, v.fresh = 0, 0, false
  if v.conc > 0 then
    v.card = redis.call('ZCARD', v.slots) - 1
    if v.card < 0 then
      v.card, v.fresh = 0, true
    end
  end
  local m = redis.call('HMGET', v.tok, '_sum', '_n', '_p', '_x', '_xs', v.member or '_')
  v.sum, v.n, v.p, v.x, v.xs = num(m[1], 0), num(m[2], 0), num(m[3], 0), num(m[4], 0), num(m[5], 0)
  v.entry = m[6]
  v.gone = m[6] and string.sub(m[6], -3) == ' -1'
end

-- limiter returns the limiter's rare paths, made on the first call of a
-- script run (see common.lua): purges, exact refusals, TTL extension.
local LIM
local function limiter()
  if LIM then
    return LIM
  end

  -- emptied clears the book of a level whose log is gone: a new log will
  -- need its TTL. The book goes too unless the slots need its TTL marks.
  local function emptied(v)
    v.sum, v.n, v.x = 0, 0, 0
    if redis.call('EXISTS', v.slots) == 0 then
      redis.call('DEL', v.tok)
      v.xs = 0
      return
    end
    redis.call('HSET', v.tok, '_sum', '0', '_n', '0', '_x', '0')
  end

  -- purge drops the level's expired slots and the log entries that left
  -- the window, and keeps v's counts in step. A log that empties takes its
  -- book with it unless the slots still need the book's TTL marks.
  local function purge(v, now)
    if v.conc > 0 and v.card > 0 then
      v.card = v.card - redis.call('ZREMRANGEBYSCORE', v.slots, '(-inf', int(now))
    end
    v.purged = true
    if not v.logged then
      return
    end
    v.p = now
    if v.x > 0 and now >= v.x then
      -- The log's TTL ran out: all its entries left the window.
      local fields = redis.call('HKEYS', v.tok)
      local gone = {}
      for _, f in ipairs(fields) do
        if string.sub(f, 1, 1) ~= '_' then
          gone[#gone + 1] = f
        end
      end
      for i = 1, #gone, BATCH do
        redis.call('HDEL', v.tok, unpack(gone, i, math.min(i + BATCH - 1, #gone)))
      end
      redis.call('DEL', v.log)
      emptied(v)
      return
    end
    local cutoff = int(now - v.window)
    local old = redis.call('ZRANGEBYSCORE', v.log, '-inf', cutoff)
    if #old == 0 then
      return
    end
    redis.call('ZREMRANGEBYSCORE', v.log, '-inf', cutoff)
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
    v.n = redis.call('ZCARD', v.log)
    if v.n > 0 then
      redis.call('HSET', v.tok, '_sum', int(v.sum), '_n', int(v.n))
      return
    end
    emptied(v)
  end

  -- tpm_retry is the time until tokens more fit under the level's sum gate
  -- as the oldest entries leave the window; 0 when they never can.
  local function tpm_retry(v, tokens, now)
    if tokens > v.tpm then
      return 0
    end
    local left = v.sum
    local n = redis.call('ZCARD', v.log)
    for i = 0, n - 1, BATCH do
      local e = redis.call('ZRANGE', v.log, int(i), int(i + BATCH - 1), 'WITHSCORES')
      local members = {}
      for k = 1, #e, 2 do
        members[#members + 1] = e[k]
      end
      if #members == 0 then
        break
      end
      local vals = redis.call('HMGET', v.tok, unpack(members))
      for k = 1, #members do
        if vals[k] then
          left = left - entry(vals[k])
        end
        if left + tokens <= v.tpm then
          return tonumber(e[2 * k]) + v.window - now
        end
      end
    end
    return 0
  end

  -- refusal purges the levels and checks them again on exact counts: it
  -- returns the first gate that still refuses and the time until it would
  -- let the request through (0 = unknown), or 0, 0.
  local function refusal(lv, now)
    for _, v in ipairs(lv) do
      if not v.purged then
        purge(v, now)
      end
      if v.rpm > 0 then
        v.n = redis.call('ZCARD', v.log)
      end
    end
    for _, v in ipairs(lv) do
      if v.conc > 0 and v.card >= v.conc then
        return v.gconc, 0
      end
      if v.rpm > 0 and v.n >= v.rpm then
        -- The request fits once n-rpm+1 of the oldest entries have left.
        local e = redis.call('ZRANGE', v.log, int(v.n - v.rpm), int(v.n - v.rpm), 'WITHSCORES')
        return v.grate, tonumber(e[2]) + v.window - now
      end
      if v.tpm > 0 and v.sum + v.amount > v.tpm then
        return v.gsum, tpm_retry(v, v.amount, now)
      end
    end
    return 0, 0
  end

  -- extend writes the level's book with new TTL marks and extends the TTLs
  -- acquire found short (slots, log: see there): slots to cover a grant
  -- expiring at expires (or none, for '+inf'), log to cover one made now,
  -- and the book to outlive both.
  local function extend(v, expires, now, book, slots, log)
    if slots then
      if expires == '+inf' then
        redis.call('PERSIST', v.slots)
        v.xs = -1
      else
        v.xs = tonumber(expires) + MARGIN + SLACK
        redis.call('PEXPIRE', v.slots, int(math.ceil((v.xs - now) / 1000)))
      end
    end
    if log then
      v.x = now + v.window + MARGIN + SLACK
      redis.call('PEXPIRE', v.log, int(math.ceil((v.x - now) / 1000)))
    end
    book[#book + 1], book[#book + 2] = '_x', int(v.x)
    book[#book + 1], book[#book + 2] = '_xs', int(v.xs)
    redis.call('HSET', v.tok, unpack(book))
    if v.xs == -1 then
      redis.call('PERSIST', v.tok)
    else
      redis.call('PEXPIRE', v.tok, int(math.ceil((math.max(v.x, v.xs) - now) / 1000)))
    end
  end

  -- holds reports whether the permit already holds the levels: this
  -- acquire is a client's retry of one that ran (its reply was lost).
  local function holds(lv)
    for _, v in ipairs(lv) do
      if v.conc > 0 then
        if redis.call('ZSCORE', v.slots, v.member) then
          return true
        end
      elseif v.entry then
        return true
      end
    end
    return false
  end

  LIM = { purge = purge, refusal = refusal, extend = extend, holds = holds }
  return LIM
end

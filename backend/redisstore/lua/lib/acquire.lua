-- TryAcquire: check all six gates and take them all, or take nothing.
-- K: source slots, log, tok; global slots, log, tok.
-- A[o+1..o+11]: now ('' = TIME), lease, tokens, lease ttl (µs, 0 = none),
--       source concurrency, rpm, tpm, global concurrency, rpm, tpm,
--       the global member.
-- now, when given, is the time already read from A[o+1].
-- Returns {granted 1/0, gate, retry after µs, now µs}.
--
-- A grant that needs no purge and no TTL extension is done here; the rest
-- is in limiter().
local function acquire(K, A, o, now)
  now = now or now_us(A[o + 1])
  local tokens = tonumber(A[o + 3])
  local ttl = tonumber(A[o + 4])
  local expires, exp = '+inf', nil
  if ttl > 0 then
    exp = now + ttl
    expires = int(exp)
  end
  local lv = {}
  local refused = false
  for i = 1, 2 do
    local conc, rpm, tpm = tonumber(A[o + 3 * i + 2]), tonumber(A[o + 3 * i + 3]), tonumber(A[o + 3 * i + 4])
    if conc > 0 or rpm > 0 or tpm > 0 then
      local k = 3 * i - 2
      local member = A[o + 2]
      if i == 2 then
        member = A[o + 11]
      end
      local v = {
        slots = K[k], log = K[k + 1], tok = K[k + 2], gate = k, member = member,
        conc = conc, rpm = rpm, tpm = tpm, logged = rpm > 0 or tpm > 0, purged = false,
        card = 0, fresh = false, sum = 0, n = 0, p = 0, x = 0, xs = 0,
      }
      peek(v)
      if v.logged and now - v.p >= PURGE_EVERY then
        limiter().purge(v, now)
      end
      if (conc > 0 and v.card >= conc) or (rpm > 0 and v.n >= rpm) or (tpm > 0 and v.sum + tokens > tpm) then
        refused = true
      end
      lv[#lv + 1] = v
    end
  end
  if refused then
    local gate, retry = limiter().refusal(lv, tokens, now)
    if gate ~= 0 then
      return { 0, gate, retry, now }
    end
  end
  local nows = int(now)
  local state = expires
  if not exp then
    state = '0'
  end
  for _, v in ipairs(lv) do
    local book = {}
    if v.logged then
      redis.call('ZADD', v.log, nows, v.member)
      book = { v.member, A[o + 3] .. ' ' .. state, '_sum', int(v.sum + tokens), '_n', int(v.n + 1) }
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
    local log = v.logged and v.x < now + WINDOW + MARGIN
    if slots or log then
      limiter().extend(v, expires, now, book, slots, log)
    elseif #book > 0 then
      redis.call('HSET', v.tok, unpack(book))
    end
  end
  return { 1, 0, 0, now }
end

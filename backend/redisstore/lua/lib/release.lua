-- Release: free the permit's slots and settle its TPM entries in place.
-- K: source slots, log, tok; global slots, log, tok.
-- A[o+1..o+6]: now ('' = TIME), lease, kind (0 actual, 1 estimate, 2 refund),
--       tokens, levels (bit 0: the source's slots hold the permit, bit 1:
--       its log; bits 2 and 3 the same for the global level), the global
--       member.
-- now, when given, is the time already read from A[o+1].
--
-- Settling marks the entry released and sets its tokens (actual: to the
-- tokens given, estimate: kept, refund: to zero), unless the permit expired
-- or was released before.
local function release(K, A, o, now)
  local kind = tonumber(A[o + 3])
  local levels = tonumber(A[o + 5])
  for i = 0, 1 do
    local f = math.floor(levels / (4 ^ i)) % 4
    local member = A[o + 2]
    if i == 1 then
      member = A[o + 6]
    end
    if f % 2 == 1 then
      redis.call('ZREM', K[3 * i + 1], member)
    end
    if f >= 2 then
      local tok = K[3 * i + 3]
      local m = redis.call('HMGET', tok, member, '_sum')
      if m[1] then
        now = now or now_us(A[o + 1])
        local old, state = entry(m[1])
        if state ~= -1 and (state == 0 or state > now) then
          local amount = tonumber(A[o + 4])
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
      end
    end
  end
  return 1
end

-- Spend budgets, checked and reserved in the same script as the gates.
--
-- A budget's spend is one HASH per (budget key, window length) (keys.go
-- names it), holding the current window of fixed windows aligned to the
-- Unix epoch:
--   s         the window's start (Unix seconds)
--   v         the spend counted in it (micro-USD): settled costs and the
--             reservations of the permits in flight
--   <member>  one permit's reservation, 'cost expiry': what it reserved
--             and when its lease ends (µs; 0 = never); or '0 -1', a
--             tombstone left by a reclaim (see reclaim.lua)
-- A grant in a later window deletes the hash and starts it anew: the
-- reservations of the ended window go with it, and are never settled (a
-- window that has ended is not changed). The hash's TTL runs MARGIN past
-- its window's end.
--
-- A request names its budgets in the order they are checked, with the
-- permit's member on them and a cost:
--   budgets  array of { key = i (KEYS[i] is the hash), limit = micro-USD,
--            window = s }
--   bmember  the permit's member: lease/scope:source
--   bgate    the core.Gate number of a budget's refusal (acquire)
--   cost     what the acquire reserves, or what a release settles to
--            (settle 'actual')
-- Amounts stay below 2^53, exact in a Lua number (the client checks).

-- budget returns the budgets' functions, made on the first call of a
-- script run (see common.lua): a request without budgets pays nothing.
local BUD
local function budget()
  if BUD then
    return BUD
  end

  -- start returns the start (s) of the window of w seconds holding now
  -- (µs), or s, the window the hash counts, when that one is later: time
  -- never runs backwards for a budget.
  local function start(now, w, s)
    local t = math.floor(now / 1000000)
    local ws = t - t % w
    if s and s > ws then
      return s
    end
    return ws
  end

  -- check reads r's budgets and returns the index of the first without
  -- room for r.cost and the time until its window ends (µs); 0 when all
  -- have room; -1 when one holds the member's tombstone (an Admit that
  -- reaches Redis after its reclaim: it takes nothing). A budget has no
  -- room when the cost would take its spend past its limit, or, for a
  -- cost of 0, when its spend has reached the limit. A budget whose
  -- current window holds the member already (a client's retry of an
  -- acquire that ran) is not checked or reserved again; the members of an
  -- ended window count for nothing.
  local function check(r, now)
    local cost = r.cost or 0
    for i, b in ipairs(r.budgets) do
      local h = redis.call('HMGET', KEYS[b.key], 's', 'v', r.bmember)
      local s = tonumber(h[1])
      local ws = start(now, b.window, s)
      b.ws, b.cur, b.old, b.spent = ws, s == ws, s ~= nil and s ~= ws, 0
      if b.cur then
        b.spent = num(h[2], 0)
      end
      if h[3] and b.cur then
        if string.sub(h[3], -3) == ' -1' then
          return -1, 0
        end
        b.held = true
      elseif (cost > 0 and b.spent + cost > b.limit) or (cost <= 0 and b.spent >= b.limit) then
        return i, (ws + b.window) * 1000000 - now
      end
    end
    return 0, 0
  end

  -- take reserves r.cost on every budget check passed, for a lease that
  -- ends at exp (µs as a string; '0' = never).
  local function take(r, now, exp)
    local cost = r.cost or 0
    local res = int(cost) .. ' ' .. exp
    for _, b in ipairs(r.budgets) do
      if not b.held then
        local key = KEYS[b.key]
        if b.cur then
          redis.call('HSET', key, 'v', int(b.spent + cost), r.bmember, res)
        else
          if b.old then
            redis.call('DEL', key)
          end
          redis.call('HSET', key, 's', int(b.ws), 'v', int(cost), r.bmember, res)
          redis.call('PEXPIRE', key, int(math.ceil(((b.ws + b.window) * 1000000 + MARGIN - now) / 1000)))
        end
      end
    end
  end

  -- settle settles the permit's reservation on each of r's budgets as
  -- r.settle says (see release.lua), once: its member goes with it. The
  -- spend is never below 0. A reservation whose lease has ended goes
  -- unsettled (as memory.Limiter, whose release of an expired permit is a
  -- no-op); one in a window that has ended is left as it is. With r.tomb
  -- (a reclaim), a budget whose current window holds no reservation of
  -- the member gets its tombstone.
  local function settle(r, now)
    for _, b in ipairs(r.budgets) do
      local key = KEYS[b.key]
      local h = redis.call('HMGET', key, 's', 'v', r.bmember)
      local s = num(h[1], 0)
      if h[3] then
        local cost, exp = entry(h[3])
        if exp ~= -1 and now < (s + b.window) * 1000000 then
          if exp == 0 or exp > now then
            local spent = num(h[2], 0)
            local new = spent
            if r.settle == 'actual' then
              new = spent + (r.cost or 0) - cost
            elseif r.settle == 'refund' then
              new = spent - cost
            end
            if new < 0 then
              new = 0
            end
            if new ~= spent then
              redis.call('HSET', key, 'v', int(new))
            end
          end
          redis.call('HDEL', key, r.bmember)
        end
      elseif r.tomb and h[1] and s >= start(now, b.window, nil) then
        redis.call('HSET', key, r.bmember, '0 -1')
      end
    end
  end

  BUD = { start = start, check = check, take = take, settle = settle }
  return BUD
end

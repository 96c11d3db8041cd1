-- Shared by every script. Times are integer microseconds.
--
-- Every script takes one argument, ARGV[1]: its request, a JSON object
-- with named fields (see the script's header), decoded by cjson. Keys are
-- in KEYS, as Redis Cluster needs them; a request names a key by its index
-- in KEYS. Numbers are JSON numbers (exact up to 2^53: microsecond times
-- and counts fit); leases and members are strings.
--
-- A script runs its whole text on every call, and each function it defines
-- is a closure made anew each time: a real cost next to the few commands of
-- a common call. So the common paths are written inline in a handful of
-- functions, and everything rare (purges, refusals, TTL extension, a
-- circuit that is not closed) is defined inside a loader that a script
-- calls only when it needs it.

local IDLE_MS = 86400000    -- an untouched circuit vanishes after a day
local RENEW_MS = 3600000    -- or up to an hour sooner: its TTL is renewed hourly
local BATCH = 500           -- members per HMGET/HDEL (unpack has a limit)
local PURGE_EVERY = 1000000 -- the longest a log goes unpurged while in use
local MARGIN = 1000000      -- a limiter key outlives what it holds by at least this
local SLACK = 10000000      -- and by at most this more

-- now_us returns the request's time when the caller passed one (a test
-- clock), else the server's TIME: every process then agrees on one clock.
local function now_us(now)
  if now then
    return now
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- circuit_ms returns how long (ms) a circuit written at now keeps its key:
-- IDLE_MS, or longer while its pushback lasts (pb: the circuit's field pb,
-- its end in µs, or false), so that no write cuts a pushback short. now
-- may be nil: the clock (now_us(rnow)) is then read only when pb is set.
local function circuit_ms(pb, now, rnow)
  if not pb then
    return IDLE_MS
  end
  local left = (tonumber(pb) or 0) - (now or now_us(rnow))
  if left > 0 then
    return math.max(IDLE_MS, math.ceil(left / 1000) + MARGIN / 1000)
  end
  return IDLE_MS
end

-- int formats an integral number for a command argument. Numbers passed to
-- redis.call as Lua numbers may be rendered in exponent form and lose
-- digits; microsecond timestamps need all sixteen.
local function int(n)
  return string.format('%d', n)
end

-- num reads an optional number (a missing hash field is false).
local function num(v, default)
  return tonumber(v) or default
end

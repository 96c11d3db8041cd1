-- Shared by every script. Times are integer microseconds.
--
-- A script runs its whole text on every call, and each function it defines
-- is a closure made anew each time: a real cost next to the few commands of
-- a common call. So the common paths are written inline in a handful of
-- functions, and everything rare (purges, refusals, TTL extension, a
-- circuit that is not closed) is defined inside a loader that a script
-- calls only when it needs it.

local IDLE_MS = 86400000    -- an untouched circuit vanishes after a day
local RENEW_MS = 3600000    -- or up to an hour sooner: its TTL is renewed hourly
local WINDOW = 60000000     -- the sliding RPM/TPM window
local BATCH = 500           -- members per HMGET/HDEL (unpack has a limit)
local PURGE_EVERY = 1000000 -- the longest a log goes unpurged while in use
local MARGIN = 1000000      -- a limiter key outlives what it holds by at least this
local SLACK = 10000000      -- and by at most this more

-- now_us returns ARGV's time when the caller passed one (a test clock),
-- else the server's TIME: every process then agrees on one clock.
local function now_us(arg)
  if arg ~= nil and arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
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

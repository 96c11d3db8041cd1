-- Shared by every script. Times are integer microseconds.

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

-- flt formats a float so that tonumber gives back the same double.
local function flt(n)
  return string.format('%.17g', n)
end

-- num reads an optional number (a missing hash field is false).
local function num(v, default)
  return tonumber(v) or default
end

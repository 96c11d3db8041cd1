-- Allow (see allow in breaker.lua).
return allow(KEYS, ARGV)

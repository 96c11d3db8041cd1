-- Allow (see allow in lib/allow.lua).
return allow(KEYS[1], ARGV, 0)

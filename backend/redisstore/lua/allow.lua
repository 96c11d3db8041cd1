-- Allow (see allow in lib/allow.lua).
return allow(KEYS, ARGV)

-- Release (see release in limiter.lua).
return release(KEYS, ARGV)

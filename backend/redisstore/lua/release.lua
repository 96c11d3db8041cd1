-- Release (see release in lib/release.lua).
return release(KEYS, ARGV, 0)

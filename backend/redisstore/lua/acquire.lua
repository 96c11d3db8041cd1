-- TryAcquire (see acquire in lib/acquire.lua).
return acquire(KEYS, ARGV, 0)

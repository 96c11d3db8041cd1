-- TryAcquire (see acquire in limiter.lua).
return acquire(KEYS, ARGV)

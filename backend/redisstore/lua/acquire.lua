-- TryAcquire. KEYS: the levels' keys. ARGV[1]: the acquire request (see
-- lib/acquire.lua).
return acquire(cjson.decode(ARGV[1]))

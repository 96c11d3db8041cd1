-- TryAcquire. KEYS: the levels' keys, then the budgets' hashes.
-- ARGV[1]: the acquire request (see lib/acquire.lua).
return acquire(cjson.decode(ARGV[1]))

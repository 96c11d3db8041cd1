-- Record (see record in breaker.lua).
return record(KEYS, ARGV)

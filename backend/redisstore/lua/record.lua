-- Record (see record in lib/record.lua).
return record(KEYS[1], ARGV, 0)

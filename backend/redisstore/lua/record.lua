-- Record (see record in lib/record.lua).
return record(KEYS, ARGV)

-- Record. KEYS: the circuit. ARGV[1]: the record request (see lib/record.lua).
return record(KEYS[1], cjson.decode(ARGV[1]))

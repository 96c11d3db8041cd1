-- Allow. KEYS: the circuit, its pushback. ARGV[1]: the allow request (see
-- lib/allow.lua).
return allow(KEYS[1], KEYS[2], cjson.decode(ARGV[1]))

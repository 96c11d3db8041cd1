-- Allow. KEYS: the circuit. ARGV[1]: the allow request (see lib/allow.lua).
return allow(KEYS[1], cjson.decode(ARGV[1]))

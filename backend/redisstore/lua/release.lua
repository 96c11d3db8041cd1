-- Release. KEYS: the levels' keys, then the budgets' hashes.
-- ARGV[1]: the release request (see lib/release.lua).
return release(cjson.decode(ARGV[1]))

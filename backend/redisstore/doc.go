// Package redisstore holds the Redis backends of the governance ports:
// Limiter (core.Limiter), Breaker (core.Breaker) and Cache (core.Cache).
// Processes that point at the same Redis share one set of rate limits, one
// state per circuit and one response cache.
//
// # Enabling
//
// Importing the package registers it under the name "redis" (like a
// database/sql driver), so a blank import is enough:
//
//	import _ "github.com/polygateway/polygateway/backend/redisstore"
//
// and then PGW_LIMITER_BACKEND=redis, PGW_BREAKER_BACKEND=redis and/or
// PGW_CACHE_BACKEND=redis with REDIS_URL (redis://, rediss:// or unix://;
// go-redis query parameters such as pool_size, dial_timeout or max_retries
// apply). The backends of one client share one go-redis client, which the
// GatewayClient closes on Close. NewLimiter, NewBreaker and NewCache build
// the backends on a client of your own (redis.UniversalClient: a single
// node, a failover or a cluster client) for WithLimiter, WithBreaker and
// WithCache; you then own and close that client.
//
// # Keys
//
// Every key starts with the prefix (WithPrefix; "pgw" by default). Scope
// and source names are escaped ('%', ':', '{', '}' become %25, %3A, %7B,
// %7D) and the scope is a hash tag, so all the keys of one scope fall in one
// Redis Cluster slot and one script may touch them all:
//
//	{prefix}:lim:{SCOPE}:src:{source}:slots   ZSET lease → slot expiry (µs), while MAX_CONCURRENCY is set
//	{prefix}:lim:{SCOPE}:src:{source}:log     ZSET lease → acquire time (µs), while RPM or TPM is set
//	{prefix}:lim:{SCOPE}:src:{source}:tok     HASH lease → "tokens expiry", and the level's totals and TTL marks
//	{prefix}:lim:{SCOPE}:global:slots|log|tok the same for the scope's global gates (members lease/source)
//	{prefix}:brk:{SCOPE}:{source}             HASH, one circuit
//	{prefix}:cache:{key}                      STRING, one cached answer
//
// Keys expire on their own: a log 61 to 71 s after the last grant, slots 1
// to 11 s after the latest lease ends, a level's tok hash when both are
// gone, a circuit 23 to 24 hours after it was last written (plus any
// remaining cooldown), a cache entry at its TTL. TTLs carry up to 10 s (a
// circuit's an hour) of slack so that a busy level extends them once per
// 10 s rather than on every call. An idle scope leaves nothing behind. The
// exact layout of the limiter's keys is described in lua/lib/limiter.lua;
// it is internal to this package.
//
// # Atomicity and round trips
//
// Each Limiter and Breaker method is exactly one Lua script, so each is
// atomic on the server and costs one round trip: EVALSHA, falling back to
// EVAL the first time a server meets the script (NOSCRIPT, for example
// after a restart). TryAcquire checks and takes all six gates in its one
// script; Release frees the slots and settles TPM in its one script; a
// breaker's Allow, Record, Snapshot and Reset are one script each. When the
// breaker is a Breaker on the same client, the governor uses the Limiter's
// Admit (Allow and TryAcquire in one script, a granted probe given back when
// a gate refuses) and Finish (Release and Record in one script): a governed
// call costs one round trip before the upstream call and one after. The
// keys of one scope share a hash tag, so both scripts also run on Redis
// Cluster.
//
// The scripts are built for the common call: a grant, a release and a
// success on a closed circuit run 13 Redis commands in all (7 before the
// upstream call, 6 after). Expired slots and log entries are dropped lazily
// (a log at least once a second, and everything whenever a gate would
// refuse, so refusals and RetryAfter are exact); the functions of those rare
// paths are made only by a script run that takes them.
//
// Scripts take "now" from the Redis server's TIME, so every process agrees
// on one clock whatever its own says. WithClock replaces it with a
// core.Clock read by the client; it exists so the conformance suites can
// drive windows and cooldowns with a fake clock, and must not be used by
// processes that share state.
//
// The semantics are those of backend/memory, held to the same conformance
// suites (backend/backendtest). The few differences a shared store brings
// are documented on Limiter, Breaker and Cache.
//
// # Degradation
//
// Every Redis failure is returned as an error wrapped with what failed
// ("polygateway: redisstore: limiter acquire: …"); nothing is logged here and
// errors never carry REDIS_URL, which may hold a password. The library turns
// limiter and breaker errors into GovernanceBackendError and makes no
// upstream call unprotected; cache errors become misses with one warning.
// A cache value without this package's version tag (corrupt, or written by
// something else) is a miss, not an error. The client dials once per command
// attempt (go-redis would dial five times), so with Redis down a call fails
// within milliseconds; once Redis is back the same client recovers.
package redisstore

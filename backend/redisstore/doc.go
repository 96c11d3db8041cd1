// Package redisstore holds the Redis backends of the governance ports:
// Limiter (core.Limiter, with its spend budgets), Breaker (core.Breaker,
// with the operator's switch and the upstream's pushback), Cache
// (core.Cache) and the native admission port Admitter (core.Admitter).
// Processes that point at the same Redis share one set of rate limits and
// budgets, one state (switch and pushback) per circuit and one response
// cache.
//
// # Enabling
//
// Importing the package registers it under the name "redis" (like a
// database/sql driver), so a blank import is enough:
//
//	import _ "github.com/polygateway/polygateway/backend/redisstore"
//
// and then PGW_LIMITER_BACKEND=redis, PGW_BREAKER_BACKEND=redis and/or
// PGW_CACHE_BACKEND=redis with REDIS_URL. With both the limiter and the
// breaker on Redis the client uses the native Admitter. REDIS_URL names one
// node (redis://, rediss:// or unix://), a Redis Cluster (seed nodes as
// addr parameters) or a Sentinel setup (a master_name parameter); see
// NewClientFromURL for the forms. go-redis query parameters such as
// pool_size, dial_timeout or max_retries apply. The backends of one client
// share one go-redis client, which the GatewayClient closes on Close (its
// Admitter first). NewLimiter, NewBreaker, NewCache and NewAdmitter build
// the backends on a client of your own (redis.UniversalClient: a single
// node, a failover or a cluster client) for WithLimiter, WithBreaker,
// WithCache and WithAdmitter; you then own and close that client (after the
// Admitter), and should set its ContextTimeoutEnabled (see Bounds).
//
// # Keys
//
// Every key starts with the prefix (WithPrefix; "pgw" by default). Scope,
// pool and source names are escaped ('%', ':', '{', '}' become %25, %3A,
// %7B, %7D). A scope without a pool is the hash tag of all its keys:
//
//	{prefix}:lim:{SCOPE}:src:{source}:slots   ZSET lease → slot expiry (µs), while MAX_CONCURRENCY is set
//	{prefix}:lim:{SCOPE}:src:{source}:log     ZSET lease → acquire time (µs), while RPM or TPM is set
//	{prefix}:lim:{SCOPE}:src:{source}:tok     HASH lease → "tokens state", and the level's totals and TTL marks
//	{prefix}:lim:{SCOPE}:global:slots|log|tok the same for the scope's global gates (members lease/source)
//	{prefix}:lim:{SCOPE}:…:gone               ZSET, a level's tombstones (after an outage only)
//	{prefix}:brk:{SCOPE}:{source}             HASH, one circuit, its switch and its pushback
//	{prefix}:bud:{budget key}:{window s}      HASH, one budget's current window
//	{prefix}:lim:{SCOPE}:q:s|o|r|x            the scope's admission queue (Admitter with WithQueue)
//	{prefix}:lim:{SCOPE}:q:w:{process}        SHARD CHANNEL, a process's wake-ups from that queue
//	{prefix}:cache:{key}                      STRING, one cached answer
//
// A scope in a pool (PermitRequest.Pool and BreakerConfig.Pool, from
// {SCOPE}__GLOBAL__POOL) keeps all its keys under the pool's hash tag
// instead, so that the pool's global gates, the scope's source gates and
// its circuits are in one Redis Cluster slot:
//
//	{prefix}:pool:{POOL}:src:{scope}:{source}:slots|log|tok
//	{prefix}:pool:{POOL}:global:slots|log|tok  shared by the pool's scopes (members lease/scope:source)
//	{prefix}:pool:{POOL}:brk:{scope}:{source}
//	{prefix}:pool:{POOL}:q:{scope}:s|o|r|x    and q:{scope}:w:{process}: the scope's queue, per scope
//
// A scope that changes its pool (or joins or leaves one) starts from fresh
// counts and closed circuits under the new keys; the old keys expire. A
// Limiter remembers the pool each scope named last, for Release and Usage.
// All the keys of a pool live on one cluster node: a pool is the unit of
// sharding, as a scope is without one.
//
// # Budgets and Redis Cluster
//
// A budget (PermitRequest.Budgets) is checked and reserved in the script
// of the gates, so its key must lie in their slot. On a single node and
// under Sentinel (a *redis.Client) budget keys carry no hash tag, and a
// budget's spend is shared by every scope and source that names its key,
// as the core contract says ("client:team-a" spans scopes). On a Redis
// Cluster (any other client type) budget keys carry the scope's hash tag,
// or the pool's for a pooled scope:
//
//	{prefix}:lim:{SCOPE}:bud:{budget key}:{window s}
//	{prefix}:pool:{POOL}:bud:{budget key}:{window s}
//
// so a budget is counted per scope there, or per pool: scopes that must
// share a budget on a cluster share a pool. Limiter.Budgets then reads the
// spend of the scope (or pool) it is given. A key checked with two window
// lengths has two spends. The hash holds its current window (s: the window's
// start, v: the spend, and one field per reservation in flight) and
// expires a second past the window's end; see lua/lib/budget.lua.
//
// Keys expire on their own: a log 61 to 71 s after the last grant, slots 1
// to 11 s after the latest lease ends, a level's tok hash when both are
// gone, a circuit 23 to 24 hours after it was last written (plus any
// remaining cooldown), a pushback a second after it ends, a cache entry at
// its TTL. TTLs carry up to 10 s (a
// circuit's an hour) of slack so that a busy level extends them once per
// 10 s rather than on every call. An idle scope leaves nothing behind. The
// exact layout of the limiter's keys is described in lua/lib/limiter.lua;
// it is internal to this package.
//
// # Scripts and their arguments
//
// Each Limiter and Breaker method, and each of Admit and Finish, is exactly
// one Lua script, so each is atomic on the server and costs one round trip:
// EVALSHA, falling back to EVAL the first time a server meets the script
// (NOSCRIPT, for example after a restart). Admit runs the breaker's Allow
// and all the gates (a probe the breaker grants is given back inside the
// same script when a gate refuses); Finish releases the permit, settles its
// tokens and records the outcome: a governed call costs one round trip
// before the upstream call and one after.
//
// A script's only argument is one JSON object with named fields, decoded
// by cjson; keys travel in KEYS, as Redis Cluster needs, and the request
// names them by index. A limiter request lists the levels (a source's
// gates, the global gates: each three keys and the permit's member there)
// and one record per gate that is on:
//
//	{"lease_ttl":35000000,
//	 "levels":[{"key":1,"member":"…"},{"key":4,"member":"…/openai_1"}],
//	 "gates":[{"gate":1,"kind":"conc","level":1,"limit":3},
//	          {"gate":3,"kind":"sum","level":1,"limit":100000,"window":60000000,"amount":800},
//	          {"gate":4,"kind":"conc","level":2,"limit":5}]}
//
// One Lua function (lua/lib/gates.lua) decodes the records, and one Go
// table (gateDefs in gates.go) writes them: a gate kind is conc (slots
// held at once), rate (grants in a sliding window) or sum (an amount
// reserved at the acquire, settled on release, summed over a sliding
// window). A new gate is one entry in that table; a spend budget, say, is a
// sum gate of micro-USD on a level of its own. Breaker requests name their
// configuration fields the same way ({"threshold":5,"cooldown":30000000,…}).
//
// The scripts are built for the common call: a grant, a release and a
// success on a closed circuit run 13 Redis commands in all (7 before the
// upstream call, 6 after; the circuit, its switch and its pushback are
// one HMGET) with a source's concurrency, RPM and TPM gates; each budget
// adds 5 (a read and a write before, a read and two writes after), still
// in the same two scripts. An
// Admitter with its queue (WithQueue) reads the queue's state once more
// in each (15 in all; 11 with a concurrency gate alone, 23 with the
// global concurrency and RPM gates on too), and a call that waits runs a third script (the Admit that
// queues it), about 43 commands in all, whatever the number of waiters;
// waiting runs none (docs/explanation-queue.md). Expired slots and log entries are dropped lazily
// (a log at least once a second, and everything whenever a gate would
// refuse, so refusals and RetryAfter are exact); the functions of those rare
// paths are made only by a script run that takes them.
//
// Scripts take "now" from the Redis server's TIME, so every process agrees
// on one clock whatever its own says: on the gates' windows, the budgets'
// (fixed, aligned to the Unix epoch), the cooldowns and the pushbacks. WithClock replaces it with a
// core.Clock read by the client; it exists so the conformance suites can
// drive windows and cooldowns with a fake clock, and must not be used by
// processes that share state.
//
// The semantics are those of backend/memory, held to the same conformance
// suites (backend/backendtest), on a single node and on a Redis Cluster.
// The few differences a shared store brings are documented on Limiter,
// Breaker and Cache.
//
// # Healing after an outage
//
// A call whose Redis reply is lost must not keep its slots for its whole
// lease (a blip would otherwise lock a scope out until the leases of the
// calls then in flight end). Leases are drawn by the client, so the
// Admitter knows what a failed script may have taken and gives it back by
// itself: after a failed Admit (the call is refused) and after a failed
// Finish, a reclaim script frees the lease's slots, settles its tokens and
// gives back a probe this lease holds, retried by one background worker
// until it has run once or the lease has ended. The reclaim of a lost
// Admit refunds the budgets the script reserved (a request with budgets
// and no gate is reclaimed too), and that of a failed Finish settles them
// as Finish would have. A failed Finish's outcome is dropped rather than
// retried, so that no outcome is ever counted twice. Reclaims leave tombstones, so that an Admit that reaches Redis
// after its reclaim (delayed on a dying connection) takes nothing, and the
// scripts tolerate the resends of go-redis (an Admit sent twice holds one
// slot and keeps its grant; a record sent twice counts once). No slot is
// given back while its call is in flight, so a blip never lets more calls
// through than the gates allow. A Redis that restarts without its data
// forgets the slots of the calls then in flight: exact limits through a
// restart need persistence (appendfsync always). See Admitter.
//
// # The operator's switch
//
// Breaker.SetEnabled switches a source off (or on) for every process at
// once: a field of its circuit's hash, read by the script of Allow and
// Admit at no extra command. A switched-off circuit keeps no TTL, so the
// switch outlasts any idle time; Reset leaves it. Like the circuit, it
// lives under the scope's pool.
//
// # Pushback
//
// Breaker.PushBack (and Admitter.PushBack) shares
// an upstream's 429 with every process at once: the source is not to be
// asked before d has passed on the server's clock (TIME, read inside the
// script, never the client's). It is one script writing the pushback's end
// (µs) in the circuit's hash, field pb; the key is kept at least a second
// past that end (a circuit that did not exist expires then, leaving
// nothing), and no later write of the circuit gives it a shorter TTL. A
// pushback never shortens one that ends later; d <= 0 records nothing. The
// scripts of Allow and Admit read it in the circuit's one HMGET (no extra
// command, no TIME when there is none): a source switched off is refused
// with Disabled first; otherwise, while the pushback lasts, it is refused
// with PushedBack, the circuit's state and RetryAfter the longer of the
// pushback's time left and the circuit's own (the cooldown left while
// open, the probe's lease left while it is out). No probe is granted, no
// gate is asked (nothing is taken, no budget reserved), and the circuit —
// state, epoch, failures, window — is not touched; Reset leaves a
// pushback, which ends by itself.
//
// # Bounds and degradation
//
// Every Redis failure is returned as an error wrapped with what failed
// ("polygateway: redisstore: limiter acquire: …"); errors never carry
// REDIS_URL, which may hold a password. The library turns limiter, breaker
// and admitter errors into GovernanceBackendError and makes no upstream
// call unprotected; cache errors become misses with one warning. A cache
// value without this package's version tag (corrupt, or written by
// something else) is a miss, not an error. Only the Admitter logs (its
// reclaims, rate-limited, through WithLogger).
//
// The clients made from REDIS_URL bound every command by the call's
// context (ContextTimeoutEnabled), so a slow or black-holed Redis fails a
// call by its deadline, and dial once per command attempt (go-redis would
// dial five times), so with Redis down a call fails within milliseconds;
// once Redis is back the same client recovers. A client of your own should
// set ContextTimeoutEnabled too: without it a command waits for the
// client's read timeout (3 s by default) whatever the caller's deadline.
package redisstore

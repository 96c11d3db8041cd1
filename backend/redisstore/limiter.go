package redisstore

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/internal/budget"
	"github.com/polygateway/polygateway/core"
)

// Limiter is the core.Limiter on Redis: the six
// gates of every scope and the spend budgets, shared by every process that
// uses the same Redis and prefix.
//
// Its semantics are those of the in-process memory.Limiter, computed by Lua
// scripts on the server:
//
//   - TryAcquire is one script (one round trip): it checks the gates in the
//     order of the core.Gate constants and either takes all of them or
//     refuses, naming the first refusing gate and counting nothing.
//
//   - RPM and TPM are exact sliding 60-second logs (a ZSET of lease→acquire
//     time and a HASH of lease→tokens per level, kept while the level's RPM
//     or TPM gate is on): a grant at t counts while now < t+60s. RetryAfter
//     is exact for RPM and TPM refusals and 0 for concurrency refusals and
//     for a request whose Tokens alone exceed the TPM.
//
//   - A permit holds a concurrency slot on each level whose concurrency
//     gate is on (a ZSET of lease→expiry), until Release or
//     PermitRequest.LeaseTTL after the acquire. A non-positive LeaseTTL
//     means no expiry.
//
//   - Release is one script: it frees the slots and settles TPM in place in
//     the log entries of the acquire; SettleActual sets them to
//     Settlement.Tokens, SettleRefund to zero, SettleEstimate keeps them. The
//     RPM count stays. A permit that expired, was released, or was never
//     granted is a no-op. A permit of a request with every gate off was
//     stored nowhere, and its Release makes no round trip. (Its acquire
//     still makes one: with Redis down it fails like any other, so no call
//     goes through while the limiter's backend is unreachable.)
//
//   - Expired slots and entries that left the window are dropped lazily:
//     a level's log at least once a second while it is used, and everything
//     whenever a gate would refuse, so refusals and RetryAfter are computed
//     on exact counts (leftovers only ever overstate a count). The common
//     grant is then a handful of commands inside the script.
//
//   - PermitRequest.Pool puts the scope's keys under the pool (its hash
//     tag): the global gates are then the pool's, shared by every scope
//     that names it, and each scope's source gates stay its own. A
//     Limiter remembers the pool each scope last named, for Release and
//     Usage; a scope that moves to another pool starts from fresh counts
//     there (its permits of the old pool lapse with their leases).
//
//   - Budgets (core.Limiter's spend budgets) are checked in the same
//     script, after the six gates, in the request's order: the first
//     without room for PermitRequest.Cost refuses with GateBudget, its key
//     and RetryAfter until its window ends, and nothing is counted. A grant reserves Cost
//     (a negative one as 0) on every budget's current window, fixed and
//     aligned to the Unix epoch by the server's clock. Release settles the
//     reservation once, in that window, as memory.Limiter does: actual,
//     estimate or refund; not after the permit's lease has ended, nor once
//     the window has ended. A budget that cannot be enforced is refused
//     with a *BudgetError before any round trip. Where a budget's spend is
//     counted (across scopes, or per scope on a cluster) is described in
//     the package documentation.
//
// Time is the Redis server's TIME, so every process agrees on it (WithClock
// replaces it in tests). Leases are drawn by the client: random bits, and
// low bits naming the keys the acquire stored the permit in, whether they
// are a pool's, and a bound of the lease's length (see gates.go).
// Keys carry a TTL so an idle scope vanishes from Redis; it runs 1 to 11 s
// past what a key must cover and is extended at most once per 10 s.
//
// Differences from memory.Limiter that a shared store brings: time is not
// clamped to run forwards per scope (every process reads the one server
// clock, so only a step back of that clock could matter, and the logs stay
// ordered by time regardless); and leases are random rather than
// sequential.
//
// A Limiter is safe for concurrent use. It does not own its client: close
// the client when done. Create one with NewLimiter.
type Limiter struct {
	c     redis.UniversalClient
	opt   options
	keys  keyCache[[3]string, *scriptKeys]
	qkeys keyCache[[2]string, *queueKeys]
	pools poolMap
	// tagged: budget keys carry the scope's (pool's) hash tag (a cluster).
	tagged     bool
	budgetKeys keyCache[budgetKeyID, string]
}

var _ core.Limiter = (*Limiter)(nil)

// NewLimiter returns a Limiter on c. WithPrefix and WithClock apply. The
// type of c decides where budgets are counted (see Budgets): across scopes
// on a *redis.Client (a single node, or Sentinel's failover client), per
// scope or pool on any other (a *redis.ClusterClient).
func NewLimiter(c redis.UniversalClient, opts ...Option) *Limiter {
	return &Limiter{c: c, opt: buildOptions(opts), tagged: tagsBudgets(c)}
}

// poolMap remembers the pool each scope named last. Scopes come from
// configuration, so the map stays small; only pooled scopes are in it.
type poolMap struct {
	mu sync.RWMutex
	m  map[string]string
}

// note records that scope names pool.
func (pm *poolMap) note(scope, pool string) {
	pm.mu.RLock()
	cur, ok := pm.m[scope]
	pm.mu.RUnlock()
	if ok && cur == pool {
		return
	}
	pm.mu.Lock()
	if pool == "" {
		delete(pm.m, scope)
	} else {
		if pm.m == nil {
			pm.m = make(map[string]string)
		}
		pm.m[scope] = pool
	}
	pm.mu.Unlock()
}

// of returns the pool scope named last ("" = none).
func (pm *poolMap) of(scope string) string {
	pm.mu.RLock()
	defer pm.mu.RUnlock()
	return pm.m[scope]
}

// permitPool returns the pool of p's keys; ok=false when p says it is
// pooled but this Limiter knows no pool of its scope (not its permit).
func (l *Limiter) permitPool(p core.Permit) (string, bool) {
	if p.Lease&leasePooled == 0 {
		return "", true
	}
	pool := l.pools.of(p.Scope)
	return pool, pool != ""
}

// TryAcquire checks every enabled gate of req's source and scope (or
// pool) and takes them all, or refuses and takes none, in one atomic
// script. It never waits for quota. An error means Redis failed.
func (l *Limiter) TryAcquire(ctx context.Context, req core.PermitRequest) (core.Grant, error) {
	if len(req.Budgets) > 0 {
		if err := checkBudgets(req.Budgets); err != nil {
			return core.Grant{}, err
		}
	}
	l.pools.note(req.Scope, req.Pool)
	lease := newLease(&req)
	sk := l.scriptKeys(req.Scope, req.Source, req.Pool)
	keys := sk.keys[:circuitIndex-1]
	if len(req.Budgets) > 0 {
		keys = l.withBudgets(keys, req.Scope, req.Pool, req.Budgets)
	}
	w := newRequest()
	w.open()
	l.writeAcquire(w, &req, sk, lease, circuitIndex-1)
	w.close()
	res, err := acquireScript.Run(ctx, l.c, keys, w.String()).Int64Slice()
	if err != nil {
		return core.Grant{}, fmt.Errorf("polygateway: redisstore: limiter acquire: %w", err)
	}
	return l.grant(res, &req, lease, "limiter acquire")
}

// grant reads an acquire reply {granted, gate, retry after, now, the
// refusing budget's index from 1}.
func (l *Limiter) grant(res []int64, req *core.PermitRequest, lease uint64, op string) (core.Grant, error) {
	if len(res) != 5 {
		return core.Grant{}, fmt.Errorf("polygateway: redisstore: %s: unexpected reply %v", op, res)
	}
	if res[0] != 1 {
		g := core.Grant{Gate: core.Gate(res[1]), RetryAfter: fromMicros(max(res[2], 0))}
		if i := res[4]; i > 0 {
			if i > int64(len(req.Budgets)) {
				return core.Grant{}, fmt.Errorf("polygateway: redisstore: %s: unexpected reply %v", op, res)
			}
			g.Budget = req.Budgets[i-1].Key
		}
		return g, nil
	}
	at := time.UnixMicro(res[3])
	if l.opt.clock != nil {
		at = l.opt.clock.Now()
	}
	return core.Grant{OK: true, Permit: core.Permit{
		Scope: req.Scope, Source: req.Source,
		Lease: lease, Tokens: max(req.Tokens, 0), AcquiredAt: at,
		Budgets: req.Budgets, Cost: budget.Clamp(req.Cost),
	}}, nil
}

// writeAcquire writes the fields of the acquire request of req (see
// lua/lib/acquire.lua, lua/lib/gates.lua and lua/lib/budget.lua): the
// levels the lease is stored in, one record per gate that is on, and the
// budgets, whose keys follow the first base keys of the script.
func (l *Limiter) writeAcquire(w *request, req *core.PermitRequest, sk *scriptKeys, lease uint64, base int64) {
	w.now(&l.opt)
	w.int("lease_ttl", micros(req.LeaseTTL))
	var index [numLevels]int64
	n := int64(0)
	w.array("levels")
	for i := range numLevels {
		if lease&(slotsBit(i)|logBit(i)) != 0 {
			n++
			index[i] = n
			w.open()
			w.int("key", int64(3*i+1))
			w.str("member", sk.member(lease, i))
			w.close()
		}
	}
	w.end()
	w.array("gates")
	for _, d := range gateDefs {
		limit, amount := d.limit(req)
		if limit <= 0 {
			continue
		}
		w.open()
		w.int("gate", int64(d.gate))
		w.str("kind", d.kind)
		w.int("level", index[d.level])
		w.int("limit", int64(limit))
		if d.window > 0 {
			w.int("window", micros(d.window))
		}
		if d.kind == kindSum {
			w.int("amount", int64(amount))
		}
		w.close()
	}
	w.end()
	if len(req.Budgets) > 0 {
		writeBudgets(w, req.Budgets, sk, lease, budget.Clamp(req.Cost), base, true)
	}
}

// writeRelease writes the fields of the release request of p settled as s
// (see lua/lib/release.lua); tomb asks for tombstones (reclaim.lua). The
// keys of p's budgets follow the first base keys of the script.
func (l *Limiter) writeRelease(w *request, p core.Permit, s core.Settlement, sk *scriptKeys, tomb bool, base int64) {
	w.now(&l.opt)
	w.str("settle", settleName(s.Kind))
	w.array("levels")
	for i := range numLevels {
		slots, log := p.Lease&slotsBit(i) != 0, p.Lease&logBit(i) != 0
		if !slots && !log {
			continue
		}
		w.open()
		w.int("key", int64(3*i+1))
		w.str("member", sk.member(p.Lease, i))
		if slots {
			w.bool("slots", true)
			if p.Lease&leaseTTLMask == 0 {
				w.bool("noexp", true)
			}
		}
		if log {
			w.bool("log", true)
			if f := levelSettle[i]; f != nil {
				w.int("amount", int64(f(s)))
			}
		}
		if tomb {
			w.int("gone", goneIndex(i))
		}
		w.close()
	}
	w.end()
	if tomb {
		w.bool("tomb", true)
	}
	if len(p.Budgets) > 0 {
		writeBudgets(w, p.Budgets, sk, p.Lease, budget.Clamp(s.Cost), base, false)
	}
}

// settleName names a settlement kind for the scripts; an unknown kind
// keeps the estimate, as in memory.Limiter.
func settleName(k core.SettleKind) string {
	switch k {
	case core.SettleActual:
		return "actual"
	case core.SettleRefund:
		return "refund"
	}
	return "estimate"
}

// Release frees p's concurrency slots and settles its TPM entries as s
// says, in the window of the acquire, in one atomic script. Releasing a
// permit that expired, was already released or was never granted is a
// no-op. A slot it frees while calls wait in the scope's queue (kept by
// an Admitter with WithQueue on the same Redis and prefix) is handed to
// the next of them in the same script; the claim, which no process of
// this Limiter checks, lapses to the next waiter at the queue's next step
// when it is not taken in time. An error means Redis failed.
func (l *Limiter) Release(ctx context.Context, p core.Permit, s core.Settlement) error {
	if p.Lease&leaseLevels == 0 && len(p.Budgets) == 0 {
		return nil // no gate was on and no budget named: the acquire stored nothing
	}
	pool, ok := l.permitPool(p)
	if !ok {
		return nil
	}
	sk := l.scriptKeys(p.Scope, p.Source, pool)
	k := l.queueKeysOf(p.Scope, pool)
	keys := append(append(make([]string, 0, circuitIndex+3+len(p.Budgets)), sk.keys[:circuitIndex-1]...), k.keys[:]...)
	if len(p.Budgets) > 0 {
		keys = l.withBudgets(keys, p.Scope, pool, p.Budgets)
	}
	w := newRequest()
	w.open()
	w.object("limiter")
	l.writeRelease(w, p, s, sk, false, circuitIndex+3)
	w.close()
	w.object("queue")
	l.writeQueueKeys(w, k, circuitIndex, sk, func(i int) int64 { return int64(3*i + 1) })
	w.str("proc", "")
	w.str("label", p.Source)
	w.close()
	w.close()
	if err := releaseScript.Run(ctx, l.c, keys, w.String()).Err(); err != nil {
		return fmt.Errorf("polygateway: redisstore: limiter release: %w", err)
	}
	return nil
}

// Usage reports the source's gates, or the global gates when source is ""
// (the pool's, for a scope this Limiter has seen name one), as of now. An
// unknown scope or source reports zero. An error means Redis failed.
func (l *Limiter) Usage(ctx context.Context, scope, source string) (core.LimiterUsage, error) {
	level := levelSource
	if source == "" {
		level = levelGlobal
	}
	w := newRequest()
	w.open()
	w.now(&l.opt)
	w.int("window", micros(levelWindow[level]))
	w.close()
	keys := usageKeys(l.opt.prefix, scope, source, l.pools.of(scope))
	res, err := usageScript.Run(ctx, l.c, keys, w.String()).Int64Slice()
	if err != nil {
		return core.LimiterUsage{}, fmt.Errorf("polygateway: redisstore: limiter usage: %w", err)
	}
	if len(res) != 3 {
		return core.LimiterUsage{}, fmt.Errorf("polygateway: redisstore: limiter usage: unexpected reply %v", res)
	}
	return core.LimiterUsage{InFlight: int(res[0]), Requests: int(res[1]), Tokens: int(res[2])}, nil
}

// newLease draws a random lease whose low bits say where the acquire of
// req stores it and how long it lives (see leaseLevels). Leases need only
// be unique among the permits of one source that are alive at once; 49
// random bits make a collision negligible and, unlike a counter, need no
// key of their own. A lease is never zero.
func newLease(req *core.PermitRequest) uint64 {
	var meta uint64
	for _, d := range gateDefs {
		if limit, _ := d.limit(req); limit > 0 {
			if d.kind == kindConc {
				meta |= slotsBit(d.level)
			} else {
				meta |= logBit(d.level)
			}
		}
	}
	if req.Pool != "" {
		meta |= leasePooled
	}
	if req.LeaseTTL > 0 {
		ms := uint64(max(req.LeaseTTL.Milliseconds(), 1))
		meta |= uint64(min(bits.Len64(ms), 63)) << leaseTTLShift
	}
	for {
		if v := rand.Uint64()&^leaseMeta | meta; v != 0 {
			return v
		}
	}
}

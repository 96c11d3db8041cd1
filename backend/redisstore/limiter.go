package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/internal/core"
)

// Limiter is the core.Limiter on Redis: the six gates of every scope,
// shared by every process that uses the same Redis and prefix.
//
// Its semantics are those of the in-process memory.Limiter, computed by Lua
// scripts on the server:
//
//   - TryAcquire is one script (one round trip): it checks the gates in the
//     order of the core.Gate constants and either takes all of them or
//     refuses, naming the first refusing gate and counting nothing.
//   - RPM and TPM are exact sliding 60-second logs (a ZSET of lease→acquire
//     time and a HASH of lease→tokens per level, kept while the level's RPM
//     or TPM gate is on): a grant at t counts while now < t+60s. RetryAfter
//     is exact for RPM and TPM refusals and 0 for concurrency refusals and
//     for a request whose Tokens alone exceed the TPM.
//   - A permit holds a concurrency slot on each level whose concurrency
//     gate is on (a ZSET of lease→expiry), until Release or
//     PermitRequest.LeaseTTL after the acquire. A non-positive LeaseTTL
//     means no expiry.
//   - Release is one script: it frees the slots and settles TPM in place in
//     the log entries of the acquire; SettleActual sets them to
//     Settlement.Tokens, SettleRefund to zero, SettleEstimate keeps them. The
//     RPM count stays. A permit that expired, was released, or was never
//     granted is a no-op. A permit of a request with every gate off was
//     stored nowhere, and its Release makes no round trip. (Its acquire
//     still makes one: with Redis down it fails like any other, so no call
//     goes through while the limiter's backend is unreachable.)
//   - Expired slots and entries that left the window are dropped lazily:
//     a level's log at least once a second while it is used, and everything
//     whenever a gate would refuse, so refusals and RetryAfter are computed
//     on exact counts (leftovers only ever overstate a count). The common
//     grant is then a handful of commands inside the script.
//
// Time is the Redis server's TIME, so every process agrees on it (WithClock
// replaces it in tests). Leases are drawn by the client: 60 random bits,
// and four low bits naming the keys the acquire stored the permit in.
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
	c    redis.UniversalClient
	opt  options
	keys keyCache
}

var _ core.Limiter = (*Limiter)(nil)

// NewLimiter returns a Limiter on c. WithPrefix and WithClock apply.
func NewLimiter(c redis.UniversalClient, opts ...Option) *Limiter {
	return &Limiter{c: c, opt: buildOptions(opts)}
}

// TryAcquire checks every enabled gate of req's source and scope and takes
// them all, or refuses and takes none, in one atomic script. It never waits
// for quota. An error means Redis failed.
func (l *Limiter) TryAcquire(ctx context.Context, req core.PermitRequest) (core.Grant, error) {
	now, nowT := l.opt.nowArg()
	s, g := req.SourceLimits, req.GlobalLimits
	lease := newLease(s, g)
	tokens := max(req.Tokens, 0)
	sk := l.scriptKeys(req.Scope, req.Source)
	member, global := sk.members(lease)
	res, err := acquireScript.Run(ctx, l.c, sk.limiter,
		now, member, tokens, micros(req.LeaseTTL),
		max(s.MaxConcurrency, 0), max(s.RPM, 0), max(s.TPM, 0),
		max(g.MaxConcurrency, 0), max(g.RPM, 0), max(g.TPM, 0), global,
	).Int64Slice()
	if err != nil {
		return core.Grant{}, fmt.Errorf("polygateway: redisstore: limiter acquire: %w", err)
	}
	if len(res) != 4 {
		return core.Grant{}, fmt.Errorf("polygateway: redisstore: limiter acquire: unexpected reply %v", res)
	}
	if res[0] != 1 {
		return core.Grant{Gate: core.Gate(res[1]), RetryAfter: fromMicros(max(res[2], 0))}, nil
	}
	if l.opt.clock == nil {
		nowT = time.UnixMicro(res[3])
	}
	return core.Grant{OK: true, Permit: core.Permit{
		Scope: req.Scope, Source: req.Source,
		Lease: lease, Tokens: tokens, AcquiredAt: nowT,
	}}, nil
}

// Release frees p's concurrency slots and settles its TPM entries as s
// says, in the window of the acquire, in one atomic script. Releasing a
// permit that expired, was already released or was never granted is a
// no-op. An error means Redis failed.
func (l *Limiter) Release(ctx context.Context, p core.Permit, s core.Settlement) error {
	if p.Lease&leaseLevels == 0 {
		return nil // no gate was on: the acquire stored nothing
	}
	now, _ := l.opt.nowArg()
	sk := l.scriptKeys(p.Scope, p.Source)
	member, global := sk.members(p.Lease)
	err := releaseScript.Run(ctx, l.c, sk.limiter,
		now, member, int(s.Kind), max(s.Tokens, 0), p.Lease&leaseLevels, global,
	).Err()
	if err != nil {
		return fmt.Errorf("polygateway: redisstore: limiter release: %w", err)
	}
	return nil
}

// Usage reports the source's gates, or the scope's global gates when
// source is "", as of now. An unknown scope or source reports zero. An
// error means Redis failed.
func (l *Limiter) Usage(ctx context.Context, scope, source string) (core.LimiterUsage, error) {
	now, _ := l.opt.nowArg()
	k := l.levelKeys(scope, source)
	res, err := usageScript.Run(ctx, l.c, k[:], now).Int64Slice()
	if err != nil {
		return core.LimiterUsage{}, fmt.Errorf("polygateway: redisstore: limiter usage: %w", err)
	}
	if len(res) != 3 {
		return core.LimiterUsage{}, fmt.Errorf("polygateway: redisstore: limiter usage: unexpected reply %v", res)
	}
	return core.LimiterUsage{InFlight: int(res[0]), Requests: int(res[1]), Tokens: int(res[2])}, nil
}

// leaseLevels masks the low bits of a lease that say where the acquire
// stored it: bit 0 the source's slots, bit 1 the source's log, bits 2 and 3
// the same for the scope's global gates. Release reads them back and
// touches only those keys.
const leaseLevels = 0xf

// newLease draws a random lease whose low bits name the structures the
// acquire with limits s and g stores it in (see leaseLevels). Leases need
// only be unique among the permits of one source that are alive at once;
// 60 random bits make a collision negligible and, unlike a counter, need no
// key of their own. A lease is never zero.
func newLease(s, g core.Limits) uint64 {
	var levels uint64
	if s.MaxConcurrency > 0 {
		levels |= 1
	}
	if s.RPM > 0 || s.TPM > 0 {
		levels |= 2
	}
	if g.MaxConcurrency > 0 {
		levels |= 4
	}
	if g.RPM > 0 || g.TPM > 0 {
		levels |= 8
	}
	for {
		if v := rand.Uint64()&^leaseLevels | levels; v != 0 {
			return v
		}
	}
}

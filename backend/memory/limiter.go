package memory

import (
	"context"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/backend/internal/budget"
	"github.com/polygateway/polygateway/core"
)

// rateWindow is the length of the sliding RPM and TPM windows, in nanoseconds.
const rateWindow = int64(60 * time.Second)

// never is the expiry of something that does not expire.
const never = int64(math.MaxInt64)

// Limiter is the in-process core.Limiter: the six gates of every scope,
// and the spend budgets, in this process's memory.
//
// Semantics:
//
//   - Gates are checked in the order of the core.Gate constants; the first
//     that refuses is named in the Grant and nothing is counted anywhere.
//     Only gates with a positive limit are checked.
//   - RPM and TPM are exact sliding 60-second logs: a grant at t counts while
//     now < t+60s. A level (a source, or the scope's global gates) keeps a log
//     entry (time, lease, tokens) per grant while its RPM or TPM gate is on,
//     and none while both are off; Usage reports Requests and Tokens only
//     from those entries. With RPM on, a log holds at most RPM entries.
//   - RetryAfter is exact for RPM and TPM refusals: the time until enough of
//     the oldest entries leave the window for the request to fit. It is 0 for
//     concurrency refusals (a slot frees on Release, which cannot be
//     foreseen) and for a request whose Tokens alone exceed the TPM: such a
//     request never fits and is always refused.
//   - Every permit holds a concurrency slot on its source and on its scope
//     (InFlight counts them whether or not a concurrency gate is on). A slot
//     lives until Release or until PermitRequest.LeaseTTL has passed since
//     the acquire, whichever is first; a non-positive LeaseTTL means the slot
//     lives until Release.
//   - Release settles TPM in place, in the log entry of the acquire (found by
//     lease): SettleActual sets its amount to Settlement.Tokens, SettleRefund
//     to zero, SettleEstimate (and any unknown kind) keeps the estimate. The
//     RPM count is never returned. Releasing a permit whose lease expired, a
//     permit already released, or one never granted is a no-op.
//
// Budgets (core.Limiter's spend budgets): after the six gates, TryAcquire
// checks the request's budgets in their order, in the same step under the
// same locks; the first without room for PermitRequest.Cost refuses with
// GateBudget, its key and RetryAfter until its window ends, and nothing is
// counted anywhere. A grant adds Cost (a negative one as 0) to every
// budget's current window. A budget's spend is shared by every scope and
// source that names its key (with the same Window), in fixed windows
// aligned to the Unix epoch. Release settles the budgets as it settles TPM,
// once, and only where it frees the permit's slot (a permit whose lease
// expired keeps its reservation as the estimate): SettleActual moves the
// reservation to Settlement.Cost (the spend may pass the Limit: the bounded
// overshoot of calls in flight), SettleRefund removes it, SettleEstimate
// keeps it, in the window holding Permit.AcquiredAt; if that window has
// ended, nothing changes. A budget that cannot be enforced (see
// BudgetError) is refused with an error. Budgets are held in one map under
// one lock of their own, taken inside a scope's lock only by requests that
// name budgets.
//
// Pools: a request naming PermitRequest.Pool counts its global gates in the
// pool's level, shared by every scope that names the pool; its source gates
// stay its scope's own. A source remembers the pool its scope last named
// (for Release and Usage); when a scope moves to another pool its sources
// start from fresh counts there, and permits of the old pool lapse with
// their leases (as on Redis, where the keys move).
//
// Queues (WithQueue): each scope has a fair admission queue in its lock
// domain (internal/fairqueue), and TryAcquire answers through it as
// core.Limiter's contract says. A slot freed by Release while waiters are
// in line stays held, reserved for the next waiter's claim (a slot entry
// of a lease of its own on the released permit's source and global
// levels, which InFlight counts); the claim holder's next TryAcquire
// frees it before it checks the gates, and a claim that comes back to no
// one frees it. The head of the line waits for a rate window on one
// timer of the clock, in its caller's goroutine. A slot that
// frees because its lease ended is handed on too, when the domain's global
// gates are next looked at (TryAcquire, Release, Usage). In a pool, a slot
// is handed within its permit's scope.
//
// Time never runs backwards within a lock domain (a scope, or a pool and its
// scopes): a clock reading older than one it has already acted at counts as
// that later time.
//
// A Limiter is safe for concurrent use. Each scope has its own lock; the
// lookup of scopes and sources is lock-free. Scopes and sources are kept for
// the Limiter's lifetime, so their names should come from configuration; a
// budget's spend is kept only until its window ends (budget keys may be the
// callers', a tenant's), so the budgets held are those of current windows.
// Create one with NewLimiter; the zero value is not usable.
type Limiter struct {
	clk    elapsed // times are kept as nanoseconds since its base
	leases atomic.Uint64

	mu sync.Mutex // serialises adding scopes, pools and sources
	// scopes maps a scope to the domain its global gates are in now: its
	// own, or its pool's.
	scopes  atomic.Pointer[map[string]*limScope]
	sources atomic.Pointer[map[sourceKey]*limSource]
	// own and pools are the domains of unpooled scopes and of pools (under mu).
	own, pools map[string]*limScope
	// budgets are the spends of every budget, shared across scopes.
	budgets budgetBook
	// queue is the admission queues' configuration; nil: no queues.
	queue *QueueConfig
}

var _ core.Limiter = (*Limiter)(nil)

// sourceKey identifies one source of one scope.
type sourceKey struct{ scope, source string }

// limScope is one lock domain: a scope, or a pool with all its scopes. It
// holds the lock and the global gates.
type limScope struct {
	mu     sync.Mutex
	global level
	// last is the latest time the scope has acted at. Clock readings are
	// taken before the lock, so a goroutine may bring an older one; time
	// never runs backwards inside a scope, which keeps every log in time
	// order.
	last int64
	// queues are the admission queues of the domain's scopes (with
	// WithQueue), one per scope, guarded by mu.
	queues map[string]*scopeQueue
}

// monotonic returns now, or the scope's latest time if that is later.
func (sc *limScope) monotonic(now int64) int64 {
	if now < sc.last {
		return sc.last
	}
	sc.last = now
	return now
}

// limSource is one source's gates, the domain they are locked with and
// the pool that domain is ("" = the scope's own).
type limSource struct {
	scope *limScope
	key   sourceKey
	pool  string
	level level
}

// NewLimiter returns an empty Limiter. WithClock and WithQueue apply.
func NewLimiter(opts ...Option) *Limiter {
	o := buildOptions(opts)
	l := &Limiter{clk: newElapsed(o.clock), own: map[string]*limScope{}, pools: map[string]*limScope{}, queue: o.queue}
	l.scopes.Store(&map[string]*limScope{})
	l.sources.Store(&map[sourceKey]*limSource{})
	return l
}

// TryAcquire checks every enabled gate of req's source and scope, then
// req's budgets, and takes them all, or refuses and takes none. It never
// blocks on quota; it fails only for a budget that cannot be enforced
// (*BudgetError). With WithQueue it answers through the scope's queue as
// core.Limiter's contract says (ctx gives the call's deadline); without,
// ctx is not used.
func (l *Limiter) TryAcquire(ctx context.Context, req core.PermitRequest) (core.Grant, error) {
	if err := l.checkRequest(&req); err != nil {
		leaveOnError(ctx, &req)
		return core.Grant{}, err
	}
	src := l.source(req.Scope, req.Source, req.Pool)
	sc := src.scope
	read := l.clk.now() // read outside the lock: a clock read can be slow
	sc.mu.Lock()
	now := sc.monotonic(read)
	src.level.purge(now)
	l.purgeGlobal(sc, now)
	if l.queue == nil {
		g := l.acquireLocked(&req, src, now)
		sc.mu.Unlock()
		return g, nil
	}
	g, stray, err := l.admitQueued(ctx, &req, src, now)
	sc.mu.Unlock()
	if stray != nil {
		stray.Leave(ctx) // a waiter of another queue: under its own lock
	}
	return g, err
}

// checkRequest refuses a request the Limiter cannot serve: a budget it
// cannot enforce, a place its queue cannot take.
func (l *Limiter) checkRequest(req *core.PermitRequest) error {
	if len(req.Budgets) > 0 {
		if err := checkBudgets(req.Budgets); err != nil {
			return err
		}
	}
	if l.queue != nil {
		return req.Place.Check()
	}
	return nil
}

// acquireLocked checks the gates and budgets and takes them all, or
// refuses (sc.mu held, the levels purged at now).
func (l *Limiter) acquireLocked(req *core.PermitRequest, src *limSource, now int64) core.Grant {
	sc := src.scope
	tokens := int64(max(req.Tokens, 0))
	gate, retry := src.level.check(req.SourceLimits, tokens, now, gatesOf(false))
	if gate == core.GateNone {
		gate, retry = sc.global.check(req.GlobalLimits, tokens, now, gatesOf(true))
	}
	if gate != core.GateNone {
		return core.Grant{Gate: gate, RetryAfter: retry}
	}
	nowT := l.clk.at(now)
	cost := budget.Clamp(req.Cost)
	if len(req.Budgets) > 0 {
		l.budgets.mu.Lock()
		i, retry := l.budgets.acquire(req.Budgets, cost, nowT)
		l.budgets.mu.Unlock()
		if i >= 0 {
			return core.Grant{Gate: core.GateBudget, Budget: req.Budgets[i].Key, RetryAfter: retry}
		}
	}
	lease := l.leases.Add(1)
	expires := addSat(now, req.LeaseTTL)
	src.level.take(req.SourceLimits, slot{lease, expires, src}, now, tokens)
	sc.global.take(req.GlobalLimits, slot{lease, expires, src}, now, tokens)
	return core.Grant{OK: true, Permit: core.Permit{
		Scope: req.Scope, Source: req.Source,
		Lease: lease, Tokens: int(tokens), AcquiredAt: nowT,
		Budgets: req.Budgets, Cost: cost,
	}}
}

// Release frees p's concurrency slots and settles its TPM entries and its
// budgets as s says, in the windows of the acquire. It is a no-op for a
// permit that expired, was already released or was never granted. With
// WithQueue a slot it frees is handed to the next waiter of the permit's
// scope, reserved for its claim. It never fails; ctx is not used.
func (l *Limiter) Release(_ context.Context, p core.Permit, s core.Settlement) error {
	src := l.lookupSource(p.Scope, p.Source)
	if src == nil || p.Lease == 0 {
		return nil
	}
	sc := src.scope
	read := l.clk.now()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	now := sc.monotonic(read)
	src.level.purge(now)
	l.purgeGlobal(sc, now)
	if !src.level.removeSlot(p.Lease) {
		return nil
	}
	sc.global.removeSlot(p.Lease)
	if sc.queues != nil {
		l.handOn(sc, src)
	}
	if len(p.Budgets) > 0 {
		l.budgets.mu.Lock()
		l.budgets.settle(&p, s, l.clk.at(now))
		l.budgets.mu.Unlock()
	}
	var amount int64
	switch s.Kind {
	case core.SettleActual:
		amount = int64(max(s.Tokens, 0))
	case core.SettleRefund:
		amount = 0
	default:
		return nil
	}
	src.level.log.settle(p.Lease, amount)
	sc.global.log.settle(p.Lease, amount)
	return nil
}

// Usage reports the source's gates, or the global gates of the scope (of
// the pool it named last) when source is "". An unknown scope or source
// reports zero. It never fails.
func (l *Limiter) Usage(_ context.Context, scope, source string) (core.LimiterUsage, error) {
	var (
		sc *limScope
		lv *level
	)
	if source == "" {
		if sc = (*l.scopes.Load())[scope]; sc == nil {
			return core.LimiterUsage{}, nil
		}
		lv = &sc.global
	} else {
		src := l.lookupSource(scope, source)
		if src == nil {
			return core.LimiterUsage{}, nil
		}
		sc, lv = src.scope, &src.level
	}
	read := l.clk.now()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	now := sc.monotonic(read)
	if lv == &sc.global {
		l.purgeGlobal(sc, now)
	} else {
		lv.purge(now)
	}
	return core.LimiterUsage{InFlight: len(lv.slots), Requests: lv.log.n, Tokens: int(lv.log.tokens)}, nil
}

func (l *Limiter) lookupSource(scope, source string) *limSource {
	return (*l.sources.Load())[sourceKey{scope, source}]
}

// source returns the source's state in pool, adding it (and its domain)
// on first use, or anew when its scope has moved to another pool.
func (l *Limiter) source(scope, source, pool string) *limSource {
	if s := l.lookupSource(scope, source); s != nil && s.pool == pool {
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := sourceKey{scope, source}
	old := *l.sources.Load()
	if s := old[key]; s != nil && s.pool == pool {
		return s
	}
	domains, name := l.own, scope
	if pool != "" {
		domains, name = l.pools, pool
	}
	sc := domains[name]
	if sc == nil {
		sc = &limScope{}
		domains[name] = sc
	}
	if (*l.scopes.Load())[scope] != sc {
		scopes := maps.Clone(*l.scopes.Load())
		scopes[scope] = sc
		l.scopes.Store(&scopes)
	}
	s := &limSource{scope: sc, key: key, pool: pool}
	sources := make(map[sourceKey]*limSource, len(old)+1)
	maps.Copy(sources, old)
	sources[key] = s
	l.sources.Store(&sources)
	return s
}

// levelGates names the three gates of one level.
type levelGates struct{ concurrency, rpm, tpm core.Gate }

// gatesOf returns the gates of the global level, or of a source level.
func gatesOf(global bool) levelGates {
	if global {
		return levelGates{core.GateGlobalConcurrency, core.GateGlobalRPM, core.GateGlobalTPM}
	}
	return levelGates{core.GateSourceConcurrency, core.GateSourceRPM, core.GateSourceTPM}
}

// level is the state of one level of gates: a source or a scope's global.
type level struct {
	// slots are the live concurrency slots, unordered.
	slots []slot
	// nextExpiry is a lower bound of the earliest slot expiry; purge scans
	// the slots only once it has passed.
	nextExpiry int64
	// log holds one entry per grant in the last 60 s while RPM or TPM is on.
	log ring
}

// slot is one permit's concurrency slot.
type slot struct {
	lease   uint64
	expires int64
	src     *limSource // the permit's source
}

// purge drops expired slots and log entries that left the window.
func (lv *level) purge(now int64) { lv.purgeInto(now, nil) }

// purgeInto is purge, appending the slots it drops to expired when it is
// not nil.
func (lv *level) purgeInto(now int64, expired *[]slot) {
	if now >= lv.nextExpiry {
		next := never
		s := lv.slots
		for i := 0; i < len(s); {
			if s[i].expires <= now {
				if expired != nil {
					*expired = append(*expired, s[i])
				}
				s[i] = s[len(s)-1]
				s = s[:len(s)-1]
				continue
			}
			next = min(next, s[i].expires)
			i++
		}
		lv.slots, lv.nextExpiry = s, next
	}
	lv.log.expire(now - rateWindow)
}

// check returns the first of the level's gates that refuses a request of
// tokens, and the time until it would let the request through (0 unknown).
func (lv *level) check(lim core.Limits, tokens, now int64, g levelGates) (core.Gate, time.Duration) {
	if lim.MaxConcurrency > 0 && len(lv.slots) >= lim.MaxConcurrency {
		return g.concurrency, 0
	}
	if lim.RPM > 0 && lv.log.n >= lim.RPM {
		// The request fits once n-RPM+1 of the oldest entries have left.
		oldest := lv.log.at(lv.log.n - lim.RPM)
		return g.rpm, time.Duration(oldest.at + rateWindow - now)
	}
	if limit := int64(lim.TPM); limit > 0 && lv.log.tokens+tokens > limit {
		return g.tpm, lv.log.tpmRetry(limit, tokens, now)
	}
	return core.GateNone, 0
}

// take counts one granted permit, holding its slot sl.
func (lv *level) take(lim core.Limits, sl slot, now, tokens int64) {
	lv.slots = append(lv.slots, sl)
	lv.nextExpiry = min(lv.nextExpiry, sl.expires)
	if lim.RPM > 0 || lim.TPM > 0 {
		lv.log.push(entry{at: now, lease: sl.lease, amount: tokens})
	}
}

// removeSlot frees the slot of lease and reports whether it was there.
func (lv *level) removeSlot(lease uint64) bool {
	s := lv.slots
	for i := range s {
		if s[i].lease == lease {
			s[i] = s[len(s)-1]
			lv.slots = s[:len(s)-1]
			return true
		}
	}
	return false
}

// addSat returns now+d, or never when d is not positive or the sum overflows.
func addSat(now int64, d time.Duration) int64 {
	if d <= 0 || now > never-int64(d) {
		return never
	}
	return now + int64(d)
}

package memory

import (
	"context"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

// QueueConfig tunes the Limiter's admission queues (WithQueue). The zero
// value is valid.
type QueueConfig struct {
	// Share is how many consecutive admissions of a higher class a class
	// with waiters lets pass before it is served (default, 0 or less: 9,
	// so a waiting class gets at least one admission in every 11).
	Share int
	// ClaimTTL is how long a unit handed to a waiter stays reserved for
	// it; a claim not taken in time lapses to the next waiter (default, 0
	// or less: 2s).
	ClaimTTL time.Duration
}

// WithQueue gives the Limiter a fair admission queue per scope (see
// core.Limiter's contract and docs/explanation-queue.md): calls that find
// the gates full wait in line, by class, by tenant in turn, in arrival
// order, and a slot freed by Release is handed to the next of them at
// once. Without it the Limiter refuses such calls and never queues.
// NewBreaker and NewCache ignore it.
func WithQueue(cfg QueueConfig) Option {
	return func(o *options) { o.queue = &cfg }
}

// scopeQueue is one scope's queue, in its lock domain (guarded by the
// domain's lock, which the queue takes itself in Wait), and the units
// reserved for its claims.
type scopeQueue struct {
	q *fairqueue.Queue
	// reserved holds, per source (a claim's label), the slots reserved
	// for the claims on it; they are interchangeable.
	reserved map[string][]reservation
}

// reservation is a slot held for a claim: on the source's level and on
// the domain's global level, under a lease of its own.
type reservation struct {
	lease uint64
	src   *limSource
}

// queueOf returns scope's queue in sc, making it on first use (sc.mu held).
func (l *Limiter) queueOf(sc *limScope, scope string) *scopeQueue {
	if sq := sc.queues[scope]; sq != nil {
		return sq
	}
	if sc.queues == nil {
		sc.queues = make(map[string]*scopeQueue)
	}
	sq := &scopeQueue{reserved: make(map[string][]reservation)}
	cfg := fairqueue.Config{Share: l.queue.Share, ClaimTTL: l.queue.ClaimTTL}
	sq.q = fairqueue.New(cfg, l.clk.clock, &sc.mu, func(label string) { sq.unreserve(sc, label) })
	sc.queues[scope] = sq
	return sq
}

// reserve holds a slot of src for the claim just handed on.
func (sq *scopeQueue) reserve(sc *limScope, src *limSource, lease uint64) {
	src.level.slots = append(src.level.slots, slot{lease: lease, expires: never, src: src})
	sc.global.slots = append(sc.global.slots, slot{lease: lease, expires: never, src: src})
	sq.reserved[src.key.source] = append(sq.reserved[src.key.source], reservation{lease: lease, src: src})
}

// unreserve frees one slot reserved for a claim on label (the claim came
// back to no one, or its holder takes it) and returns its source.
func (sq *scopeQueue) unreserve(sc *limScope, label string) *limSource {
	rs := sq.reserved[label]
	if len(rs) == 0 {
		return nil
	}
	r := rs[len(rs)-1]
	if len(rs) == 1 {
		delete(sq.reserved, label)
	} else {
		sq.reserved[label] = rs[:len(rs)-1]
	}
	r.src.level.removeSlot(r.lease)
	sc.global.removeSlot(r.lease)
	return r.src
}

// handOn hands a slot of src, just freed, to the next waiter of scope's
// queue (sc.mu held): it stays held, reserved for that waiter's claim.
func (l *Limiter) handOn(sc *limScope, src *limSource) {
	sq := sc.queues[src.key.scope]
	if sq == nil {
		return
	}
	if sq.q.Hand(src.key.source) != nil {
		sq.reserve(sc, src, l.leases.Add(1))
	}
}

// purgeGlobal purges sc's global level (sc.mu held); with queues, a slot
// freed because its lease ended is handed on as a released one is.
func (l *Limiter) purgeGlobal(sc *limScope, now int64) {
	if sc.queues == nil {
		sc.global.purge(now)
		return
	}
	var buf [4]slot
	expired := buf[:0]
	sc.global.purgeInto(now, &expired)
	for _, sl := range expired {
		if sl.src != nil && sl.src.scope == sc {
			sl.src.level.purge(now)
			l.handOn(sc, sl.src)
		}
	}
}

// waitable reports whether a refusal can be waited out in the queue: a
// concurrency gate (a release hands a slot on), or a rate gate that says
// when it frees. A budget's is not: its window is hours long, and its
// refusal ends the call (a woken waiter leaves, passing on its claim).
func waitable(g core.Grant) bool {
	switch g.Gate {
	case core.GateSourceConcurrency, core.GateGlobalConcurrency:
		return true
	case core.GateBudget:
		return false
	}
	return g.RetryAfter > 0
}

// admitQueued is TryAcquire through scope's queue (sc.mu held, the levels
// purged at now): see core.Limiter's contract. stray is a waiter of
// another queue passed in req (its scope moved to another pool): the call
// counts as new, and the caller makes stray leave once sc.mu is unlocked.
func (l *Limiter) admitQueued(ctx context.Context, req *core.PermitRequest, src *limSource, now int64) (g core.Grant, stray *fairqueue.Waiter, err error) {
	sc := src.scope
	sq := l.queueOf(sc, req.Scope)
	q := sq.q
	q.Lapse()
	w, _ := req.Waiter.(*fairqueue.Waiter)
	if w != nil && !q.Owns(w) {
		stray = w
	}
	g, err = l.admitIn(ctx, req, sq, src, now, w)
	return g, stray, err
}

// admitIn is admitQueued in the queue sq, w the caller's waiter (nil, or
// possibly not sq's).
func (l *Limiter) admitIn(ctx context.Context, req *core.PermitRequest, sq *scopeQueue, src *limSource, now int64, w *fairqueue.Waiter) (core.Grant, error) {
	sc, q := src.scope, sq.q
	if w != nil && q.Owns(w) && q.Queued(w) {
		var held *limSource // the source of the unit w's claim held
		label, claimed := q.Claim(w)
		switch {
		case claimed:
			held = sq.unreserve(sc, label)
		case q.Head() != w:
			return core.Grant{Queued: w}, nil
		}
		g := l.acquireLocked(req, src, now)
		switch {
		case g.OK:
			q.Admitted(w)
		case waitable(g):
			q.Requeue(w, g.RetryAfter)
			g.Queued = w
		default:
			// A refusal no wait mends: w goes, and its claim's unit
			// with it to the next waiter.
			if held != nil {
				sq.reserve(sc, held, l.leases.Add(1))
			}
			q.Leave(w)
		}
		return g, nil
	}
	retry, g := fairqueue.NoRetry, core.Grant{}
	if !q.Busy() {
		if g = l.acquireLocked(req, src, now); g.OK || !waitable(g) {
			return g, nil
		}
		retry = g.RetryAfter
	}
	nw, err := q.Enqueue(req.Place.Priority, req.Place.Tenant, l.deadline(ctx), retry)
	if err != nil {
		return core.Grant{}, err
	}
	g.Queued = nw
	return g, nil
}

// deadline returns ctx's deadline on the Limiter's clock (zero: none).
func (l *Limiter) deadline(ctx context.Context) time.Time {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return l.clk.clock.Now().Add(time.Until(dl))
}

// leaveOnError takes a waiter passed with a request that fails out of its
// queue, as the contract says.
func leaveOnError(ctx context.Context, req *core.PermitRequest) {
	if w, ok := req.Waiter.(*fairqueue.Waiter); ok {
		w.Leave(ctx)
	}
}

package fairqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

// gate is an owner of a Queue as the memory limiter is one: a
// concurrency gate of cap units and, when spacing > 0, a rate gate
// letting one admission through per spacing. It follows the protocol of
// the Queue's documentation and records every arrival, choice and
// departure in order, under its lock, for the watch.
type gate struct {
	t       testing.TB
	mu      sync.Mutex
	q       *fairqueue.Queue
	clock   core.Clock
	cap     int
	spacing time.Duration
	// held counts the units held by calls and reserved by claims.
	held     int
	reserved map[string]int
	next     time.Time // the rate gate lets the next admission through then
	w        *watch
	order    []uint64 // admissions, in order
	// idle is set when a unit was free while a waiter was in line.
	idle bool
}

func newGate(t testing.TB, clock core.Clock, cfg fairqueue.Config, capacity int, spacing time.Duration) *gate {
	g := &gate{t: t, clock: clock, cap: capacity, spacing: spacing, reserved: map[string]int{}}
	share := cfg.Share
	if share <= 0 {
		share = fairqueue.DefaultShare
	}
	g.w = newWatch(t, share)
	cfg.Chosen = func(w *fairqueue.Waiter) { g.w.choose(w.ID()) }
	g.q = fairqueue.New(cfg, clock, &g.mu, g.unclaimed)
	return g
}

// unclaimed frees a reserved unit no waiter is left to take.
func (g *gate) unclaimed(label string) {
	g.reserved[label]--
	g.held--
}

// try checks the gates (g.mu held): 0 and ok, or the refusal's retry
// (0 for the concurrency gate).
func (g *gate) try() (time.Duration, bool) {
	if g.held >= g.cap {
		return 0, false
	}
	if g.spacing > 0 {
		now := g.clock.Now()
		if now.Before(g.next) {
			return g.next.Sub(now), false
		}
		g.next = now.Add(g.spacing)
	}
	g.held++
	return 0, true
}

// errRefused is a refusal for the deadline.
var errRefused = errors.New("refused")

// acquire admits one call of class and tenant, waiting in the queue; it
// returns the waiter's id (0 if it never queued) or the error that ended
// the wait.
func (g *gate) acquire(ctx context.Context, class core.Priority, name string) (uint64, error) {
	var w *fairqueue.Waiter
	var first uint64
	dl, _ := ctx.Deadline()
	g.mu.Lock()
	for {
		retry, tried := fairqueue.NoRetry, false
		switch {
		case w != nil && func() bool { _, ok := g.q.Claim(w); return ok }():
			label, _ := g.q.Claim(w)
			g.reserved[label]--
			g.held-- // the reserved unit becomes the call's: try counts it again
			tried = true
		case w != nil && g.q.Head() == w:
			tried = true
		case w != nil && g.q.Queued(w):
		case !g.q.Busy():
			w, tried = nil, true
		default:
			w = nil
		}
		if tried {
			var ok bool
			if retry, ok = g.try(); ok {
				if w != nil {
					g.q.Admitted(w)
					g.order = append(g.order, w.ID())
				}
				g.check()
				g.mu.Unlock()
				return first, nil
			}
			if w != nil {
				g.q.Requeue(w, retry)
			}
		}
		if w == nil {
			var err error
			if w, err = g.q.Enqueue(class, name, dl, retry); err != nil {
				g.mu.Unlock()
				return 0, errors.Join(errRefused, err)
			}
			if first == 0 {
				first = w.ID()
			}
			g.w.arrive(w.ID(), class.Rank(), name)
		}
		g.check()
		g.mu.Unlock()
		ev, err := w.Wait(ctx)
		g.mu.Lock()
		if err != nil {
			g.w.leave(w.ID())
			g.check()
			g.mu.Unlock()
			return first, err
		}
		if ev.Kind == core.WaitLapsed {
			g.t.Errorf("waiter %d lapsed: in a bubble a woken waiter takes its claim before time moves", w.ID())
			w = nil
		}
	}
}

// release gives a unit back: it is handed on, or freed.
func (g *gate) release(label string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.q.Hand(label); w != nil {
		g.reserved[label]++
	} else {
		g.held--
	}
	g.check()
}

// check holds the gate's invariants (g.mu held): never more than cap
// units out, and no unit free while a waiter is in line (a rate gate
// aside, whose head waits for its time).
func (g *gate) check() {
	if g.held > g.cap || g.held < 0 {
		g.t.Errorf("%d units held of %d", g.held, g.cap)
	}
	if g.spacing == 0 && g.q.Busy() && g.held < g.cap {
		g.idle = true
	}
}

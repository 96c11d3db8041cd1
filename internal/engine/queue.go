package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

// A call whose admission the Admitter queued (Ticket.Queued) waits on its
// waiter, not by polling: the queue wakes it when a freed slot is reserved
// for it (WaitClaimed: it admits on that source at once), when it is the
// head of the line and the room it waits for is due (WaitTurn: it chooses
// as usual and admits with its waiter), or when it lost its place
// (WaitLapsed: it asks again as a new call). The wait keeps pause's bounds:
// it ends with the call's context (the waiter then leaves by itself) and is
// cut where the stall rule says the call gives up. A call that gives up for
// any other reason while it holds a place leaves the queue (leave).

// claim is the reservation a WaitClaimed event made for the call.
type claim struct {
	on     bool
	source int       // the source the reservation is on
	until  time.Time // when it lapses, on the engine's clock
}

// errStallCheck is the cause of a queue wait cut because the stall rule
// says the call gives up.
var errStallCheck = errors.New("polygateway: engine: stalled in the admission queue")

// waitInLine waits on the call's waiter after an admission queued it, and
// prepares the next admission from what woke it.
func (r *run) waitInLine(ctx context.Context) error {
	e := r.e
	r.inLine = false
	w := r.waiter
	now := e.clock.Now()
	sw := e.settings.Backpressure.StallWindow
	first, err := r.stallCap(ctx, now, max(sw, 0))
	if err != nil {
		r.leave(ctx)
		return err
	}
	wctx, stop := e.stallWatch(ctx, first)
	class := r.call.Place.Priority
	if !class.Valid() {
		class = core.PriorityNormal
	}
	e.queued[class].Add(1)
	ev, err := w.Wait(wctx)
	e.queued[class].Add(-1)
	stop()
	waited := core.Since(e.clock, now)
	r.waited += waited
	r.sinceAttempt += waited
	r.call.QueueWait += waited
	if e.obs != nil {
		e.obs.Waited(e.settings.Scope, waited)
		e.obs.QueueWaited(e.settings.Scope, class, waited)
	}
	r.newRound()
	if err != nil {
		// The wait ended with its context: the waiter left.
		r.waiter = nil
		switch {
		case ctx.Err() != nil:
			return &core.CanceledError{Err: ctx.Err()}
		case errors.Is(context.Cause(wctx), errStallCheck):
			u := r.unavailable(ctx, core.ReasonStalled)
			u.RetryAfter = max(u.RetryAfter, e.settings.Backpressure.PollInterval)
			return u
		}
		var gb *core.GovernanceBackendError
		if errors.As(err, &gb) {
			return err
		}
		return &core.GovernanceBackendError{Backend: "limiter", Op: "wait", Err: err}
	}
	r.woken(ctx, ev)
	return nil
}

// woken prepares the next admission from the event that ended a wait.
func (r *run) woken(ctx context.Context, ev core.WaitEvent) {
	e := r.e
	switch ev.Kind {
	case core.WaitClaimed:
		for i, s := range e.sources {
			if s.cfg.Name == ev.Source {
				left := ev.ClaimLeft
				if left <= 0 {
					left = core.DefaultClaimLeft
				}
				r.claim = claim{on: true, source: i, until: e.clock.Now().Add(left)}
				return
			}
		}
		// A reservation on a source the scope does not have: pass it on.
		r.leave(ctx)
	case core.WaitTurn:
		// The head's turn: choose as usual, and admit with the waiter.
	default:
		// The place is lost: ask again as a new call.
		r.waiter = nil
	}
}

// stallWatch returns ctx cut where the stall rule says a waiting call gives
// up (cause errStallCheck), and the function that ends the watch: first is
// when the rule is checked first (stallCap's cut of the wait); from then on
// the call gives up once the scope has made no progress for STALL_WINDOW_S,
// and the check is set again for as long as it has. Without a stall window
// the context is ctx itself. The watch starts no goroutine of its own: it
// is one AfterFunc timer of the engine's clock at a time, whose function
// checks the rule. Once the returned function has returned, the watch
// cancels nothing more with errStallCheck.
func (e *Engine) stallWatch(ctx context.Context, first time.Duration) (context.Context, func()) {
	sw := e.settings.Backpressure.StallWindow
	if sw <= 0 {
		return ctx, func() {}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	w := &stallCheck{e: e, window: sw, cancel: cancel}
	w.check = w.run
	w.mu.Lock()
	w.t = e.clock.AfterFunc(first, w.check)
	w.mu.Unlock()
	return wctx, w.stop
}

// stallCheck is the watch of one waiting call: its pending check is t.
type stallCheck struct {
	e      *Engine
	window time.Duration
	cancel context.CancelCauseFunc
	check  func() // run, made once

	mu      sync.Mutex // guards t and stopped
	t       core.Timer
	stopped bool
}

// run is the check the timer calls: it cuts the wait when the scope has
// made no progress for the stall window, and otherwise sets the check
// again for when the window would end.
func (w *stallCheck) run() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	quiet := w.e.clock.Now().Sub(time.Unix(0, w.e.lastProgress.Load()))
	if quiet >= w.window {
		w.stopped = true
		w.cancel(errStallCheck)
		return
	}
	w.t = w.e.clock.AfterFunc(w.window-quiet, w.check)
}

// stop ends the watch: a check already running finishes first, and none
// runs after.
func (w *stallCheck) stop() {
	w.mu.Lock()
	w.stopped = true
	w.t.Stop()
	w.mu.Unlock()
	w.cancel(nil)
}

// claimed admits the call on the source a WaitClaimed reservation is on.
// When that source's adaptive-concurrency limit is full, it waits for a
// slot until the reservation lapses (within pause's bounds); if none
// frees, it gives the place up (the reservation passes on) and the call
// asks again as a new call.
func (r *run) claimed(ctx context.Context) (i int, t core.Ticket, ok bool, err error) {
	e := r.e
	c := r.claim
	r.claim = claim{}
	s, n := e.sources[c.source], len(e.sources)
	for !s.claimSlot() {
		now := e.clock.Now()
		d := c.until.Sub(now)
		if d <= 0 {
			r.leave(ctx)
			return c.source, t, false, nil
		}
		if ctx.Err() != nil {
			r.leave(ctx)
			return c.source, t, false, &core.CanceledError{Err: ctx.Err()}
		}
		r.busy.add(c.source, n)
		if err := r.pause(ctx, now, d, true, true); err != nil {
			r.leave(ctx)
			return c.source, t, false, err
		}
	}
	t, ok, err = r.admitHolding(ctx, c.source)
	return c.source, t, ok, err
}

// elsewhere reports whether a source other than i may take the call in
// this round: not excluded or busy in it, of a model that fits, not in a
// hard hold, and in the call's tier while it holds to one. A call the
// queue refused on i tries such a source before it waits.
func (r *run) elsewhere(i int) bool {
	e := r.e
	n := len(e.sources)
	now := e.clock.Now()
	for j, s := range e.sources {
		if j == i || r.wrongModel.has(j, n) || r.excluded.has(j, n) || r.busy.has(j, n) {
			continue
		}
		if r.sticky.on && e.group(s) != r.sticky.group {
			continue
		}
		if k, _ := s.hold(now); k.hard() {
			continue
		}
		return true
	}
	return false
}

// leave gives up the call's place in the admission queue, if it holds one.
func (r *run) leave(ctx context.Context) {
	if r.waiter == nil {
		return
	}
	w := r.waiter
	r.waiter, r.inLine, r.claim = nil, false, claim{}
	// Detached from the caller's cancellation (a cancelled call leaves
	// too), bounded like finish for a backend across the network.
	lctx, cancel := r.e.finishContext(ctx)
	defer cancel()
	w.Leave(lctx)
}

// queueDeadline is the end of a call whose deadline the admission queue
// says cannot be met behind the calls ahead of it.
func (r *run) queueDeadline(ctx context.Context, qd *core.QueueDeadlineError) error {
	u := r.unavailable(ctx, core.ReasonQueueDeadline)
	u.Err = qd
	if scopePolicy[u.Reason].queueEstimate {
		u.RetryAfter = qd.Estimate
	}
	return u
}

// QueueDepth counts the calls of this process waiting in the scope's
// admission queue, by class.
func (e *Engine) QueueDepth() core.QueueDepth {
	var d core.QueueDepth
	for p := range d {
		d[p] = int(e.queued[p].Load())
	}
	return d
}

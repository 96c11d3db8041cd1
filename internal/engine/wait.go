package engine

import (
	"context"
	"time"

	"github.com/polygateway/polygateway/core"
)

// Every wait of a call — a hold on its sources, a backoff before asking a
// source again, a tier's patience, an adaptive-concurrency slot — goes
// through pause, which keeps the call's two bounds: it never sleeps past
// the call's deadline (a wait that cannot end before it is refused by the
// caller of pause, with a reason), and never past the next point where the
// stall rule must be checked. The stall rule: a call that has waited
// STALL_WINDOW_S in all, while no call of the scope made progress for as
// long, gives up (stalled). A long hold (a Retry-After of minutes) is
// therefore waited in steps, each ending where the rule is checked again.

// waitForEligible runs when no source can be tried right now: it gives up
// (every circuit open, fail_fast, throttled upstream without waiting,
// stalled, deadline) or waits until the earliest hold expires or, when a
// source is only waiting for an adaptive-concurrency slot, until an
// attempt finishes in the scope — each within pause's bounds.
func (r *run) waitForEligible(ctx context.Context, now time.Time) error {
	wait, slot, err := r.nothingEligible(ctx, now)
	if err != nil {
		return err
	}
	return r.pause(ctx, now, wait, slot, true)
}

// pause waits at most d (on a freed slot too, when slot), cut at the next
// stall-rule check point, and accounts the wait; observed waits (those for
// a source held back or at its limit, not a backoff) are reported to the
// Observer, a wait the caller's cancellation cut included. It returns a
// stalled GatewayUnavailableError when the rule says so, or the caller's
// cancellation.
func (r *run) pause(ctx context.Context, now time.Time, d time.Duration, slot, observed bool) error {
	e := r.e
	d, err := r.stallCap(ctx, now, d)
	if err != nil {
		return err
	}
	if left, ok := untilDeadline(ctx); ok && d > left {
		// The context ends the wait; never sleep past it.
		d = max(left, 0)
	}
	start := e.clock.Now()
	if slot {
		err = e.waitSlot(ctx, d, &r.busy)
	} else {
		err = core.Sleep(ctx, e.clock, d)
	}
	waited := core.Since(e.clock, start)
	if observed && e.obs != nil {
		e.obs.Waited(e.settings.Scope, waited)
	}
	if err != nil {
		return err
	}
	r.waited += waited
	r.sinceAttempt += waited
	r.newRound()
	return nil
}

// stallCap cuts a wait of d at the stall rule's next check point: the end
// of the call's STALL_WINDOW_S of waiting, or, once the call has waited
// that long, the moment the scope will have made no progress for as long.
// It returns the stalled error when that moment has come.
func (r *run) stallCap(ctx context.Context, now time.Time, d time.Duration) (time.Duration, error) {
	sw := r.e.settings.Backpressure.StallWindow
	if sw <= 0 {
		return d, nil
	}
	if left := sw - r.waited; left > 0 {
		return min(d, left), nil
	}
	last := time.Unix(0, r.e.lastProgress.Load())
	if quiet := now.Sub(last); quiet < sw {
		return min(d, max(sw-quiet, time.Millisecond)), nil
	}
	u := r.unavailable(ctx, core.ReasonStalled)
	u.RetryAfter = max(u.RetryAfter, d)
	return 0, u
}

// nothingEligible decides what to do when no source can be tried: give up
// (an error) or wait at most wait. slot=true means some source is only
// waiting for an adaptive-concurrency slot.
func (r *run) nothingEligible(ctx context.Context, now time.Time) (wait time.Duration, slot bool, err error) {
	e := r.e
	h := r.holds(now)
	switch {
	case h.allCircuit && !h.anyOn:
		// Every source is switched off.
		return 0, false, r.unavailable(ctx, core.ReasonDisabled)
	case h.allCircuit:
		return 0, false, r.unavailable(ctx, core.ReasonCircuitOpen)
	case r.quotaRefused && e.settings.QuotaFull == core.QuotaFullFailFast:
		// The limiter knows when its window frees; the hold only says when
		// to look again.
		u := r.unavailable(ctx, core.ReasonRateLimited)
		u.RetryAfter = max(u.RetryAfter, h.earliest.Sub(now), r.quotaRetryAfter)
		return 0, false, u
	case h.throttled() && r.call.NoPushbackWait:
		// Every source that could take the call is held back by its
		// upstream's 429: the caller is told when to come back.
		u := r.unavailable(ctx, core.ReasonRateLimited)
		u.RetryAfter = max(u.RetryAfter, h.earliestPushback.Sub(now))
		return 0, false, u
	}
	wait = max(h.earliest.Sub(now), time.Millisecond)
	if wait > e.settings.Backpressure.PollInterval && r.quotaRefused {
		wait = e.settings.Backpressure.PollInterval
	}
	if sw := e.settings.Backpressure.StallWindow; sw > 0 && r.waited+wait > sw {
		// The wait would outlast the call's window: give up at once when
		// the scope has made no progress for as long (pause cuts the wait
		// at the window otherwise).
		if last := time.Unix(0, e.lastProgress.Load()); now.Sub(last) >= sw {
			u := r.unavailable(ctx, core.ReasonStalled)
			u.RetryAfter = max(u.RetryAfter, wait)
			return 0, false, u
		}
	}
	if left, ok := untilDeadline(ctx); ok && wait > left && !h.slot {
		// A hold that ends after the deadline ends the call at once. A
		// wait for a slot is not refused: the poll only bounds it, a slot
		// may free at any moment, and pause cuts it at the deadline.
		u := r.unavailable(ctx, core.ReasonRateLimited)
		u.RetryAfter = max(u.RetryAfter, wait)
		return 0, false, u
	}
	return wait, h.slot, nil
}

// holdView is what holds the sources of a call back at one moment.
type holdView struct {
	// earliest is when the first source may be tried again.
	earliest time.Time
	// allCircuit: no source is held by anything but an open circuit or
	// an operator's switch; anyOn: some source is not switched off.
	allCircuit, anyOn bool
	// slot: some source waits only for an adaptive-concurrency slot.
	slot bool
	// pushed counts the sources held back by their upstream's 429 (until
	// earliestPushback at the soonest), others the sources held by
	// anything else but an open circuit or a switch.
	pushed, others   int
	earliestPushback time.Time
}

// throttled reports whether every source that could take the call is held
// back by its upstream's 429.
func (h holdView) throttled() bool { return h.pushed > 0 && h.others == 0 }

// holds reads the holds of the sources the call may still use.
func (r *run) holds(now time.Time) holdView {
	e := r.e
	n := len(e.sources)
	h := holdView{allCircuit: true}
	for i, s := range e.sources {
		if r.wrongModel.has(i, n) {
			continue
		}
		kind, until := s.hold(now)
		if kind == holdDisabled {
			// Switched off: never waited for.
			continue
		}
		h.anyOn = true
		switch kind {
		case holdNone:
			// Excluded for this round only: the AIMD limit was full. Slots
			// free as attempts finish: waitSlot wakes on that, and this is
			// only the longest it waits.
			h.allCircuit, h.slot = false, true
			h.others++
			until = now.Add(e.settings.Backpressure.PollInterval)
		case holdCircuitOpen:
		case holdPushedBack:
			h.allCircuit = false
			h.pushed++
			if h.earliestPushback.IsZero() || until.Before(h.earliestPushback) {
				h.earliestPushback = until
			}
		default:
			h.allCircuit = false
			h.others++
		}
		if h.earliest.IsZero() || until.Before(h.earliest) {
			h.earliest = until
		}
	}
	return h
}

// snapshotTimeout bounds the breaker reads of an unavailability report.
const snapshotTimeout = 100 * time.Millisecond

// unavailable builds the scope-level error from the call's history and the
// sources' state: PerSource names every source (those this call did not
// reach by their hold, else retry_exhausted), and RetryAfter is the
// earliest time any source becomes usable again.
func (r *run) unavailable(ctx context.Context, reason core.Reason) *core.GatewayUnavailableError {
	e := r.e
	now := e.clock.Now()
	u := &core.GatewayUnavailableError{Scope: e.settings.Scope, Reason: reason, Err: r.lastErr,
		PerSource: make(map[string]core.Reason, len(e.sources))}
	var soonest time.Duration = -1
	var sctx context.Context
	var cancel context.CancelFunc
	for _, s := range e.sources {
		name := s.cfg.Name
		kind, until := s.hold(now)
		if why, ok := r.perSource[name]; ok {
			u.PerSource[name] = why
		} else {
			u.PerSource[name] = kind.reason()
		}
		if kind == holdDisabled {
			// Switched off: not usable until an operator says so.
			continue
		}
		usable := time.Duration(0)
		if kind != holdNone {
			usable = until.Sub(now)
		}
		if kind != holdCircuitOpen && kind != holdRateLimited && kind != holdPushedBack {
			// The circuit may have opened under this call's failures:
			// ask the breaker when it admits a probe again.
			if sctx == nil {
				sctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), snapshotTimeout)
			}
			if snap, err := e.breaker.Snapshot(sctx, e.settings.Scope, name, s.breaker); err == nil && snap.State == core.StateOpen {
				usable = max(usable, snap.RetryAfter)
			}
		}
		if soonest < 0 || usable < soonest {
			soonest = usable
		}
	}
	if cancel != nil {
		cancel()
	}
	if scopePolicy[reason].breakerRetryAfter && r.retryAfter > 0 && (soonest <= 0 || r.retryAfter < soonest) {
		soonest = r.retryAfter
	}
	u.RetryAfter = max(soonest, 0)
	return u
}

// waitSlot waits until an attempt finishes somewhere in the scope (an
// adaptive-concurrency slot frees) or at most d. busy holds the sources the
// call found at their limit: it returns at once only when one of them has a
// slot again (a free slot elsewhere is not what the call waits for, and
// returning on it would spin).
func (e *Engine) waitSlot(ctx context.Context, d time.Duration, busy *sourceSet) error {
	e.slotWaiters.Add(1)
	defer e.slotWaiters.Add(-1)
	e.slotMu.Lock()
	if e.slotFreed == nil {
		e.slotFreed = make(chan struct{})
	}
	ch := e.slotFreed
	e.slotMu.Unlock()
	// A slot may have freed between the choice and the registration above.
	now := e.clock.Now()
	n := len(e.sources)
	for i, s := range e.sources {
		if busy.has(i, n) && slotFree(s.inflight.Load(), s.aimdLimit()) {
			if k, _ := s.hold(now); k == holdNone {
				return nil
			}
		}
	}
	t := e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &core.CanceledError{Err: ctx.Err()}
	case <-ch:
	case <-t.C():
	}
	return nil
}

// freeSlot gives back the adaptive-concurrency slot a call holds on s and
// wakes the calls waiting for one.
func (e *Engine) freeSlot(s *sourceState) {
	s.inflight.Add(-1)
	e.slotFree()
}

// slotFree wakes the calls waiting in waitSlot; cheap when none waits.
func (e *Engine) slotFree() {
	if e.slotWaiters.Load() == 0 {
		return
	}
	e.slotMu.Lock()
	if e.slotFreed != nil {
		close(e.slotFreed)
		e.slotFreed = nil
	}
	e.slotMu.Unlock()
}

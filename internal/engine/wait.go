package engine

import (
	"context"
	"time"

	"github.com/polygateway/polygateway/internal/core"
)

// waitForEligible runs when no source can be tried right now: it gives up
// (every circuit open, fail_fast, stalled, deadline) or waits until the
// earliest memo expires or, when a source is only waiting for an
// adaptive-concurrency slot, until an attempt finishes in the scope.
func (r *run) waitForEligible(ctx context.Context, now time.Time) error {
	e := r.e
	wait, slot, err := r.nothingEligible(ctx, now)
	if err != nil {
		return err
	}
	start := e.clock.Now()
	if slot {
		err = e.waitSlot(ctx, wait, &r.busy)
	} else {
		err = core.Sleep(ctx, e.clock, wait)
	}
	if err != nil {
		return err
	}
	waited := core.Since(e.clock, start)
	if e.obs != nil {
		e.obs.Waited(e.settings.Scope, waited)
	}
	r.waited += waited
	r.sinceAttempt += waited
	r.newRound()
	return nil
}

// nothingEligible decides what to do when no source can be tried: give up
// (an error) or wait at most wait. slot=true means some source is only
// waiting for an adaptive-concurrency slot.
func (r *run) nothingEligible(ctx context.Context, now time.Time) (wait time.Duration, slot bool, err error) {
	e := r.e
	n := len(e.sources)
	var earliest time.Time
	allCircuit, anyOn := true, false
	for i, s := range e.sources {
		if r.wrongModel.has(i, n) {
			continue
		}
		kind, until := s.memo(now)
		if kind == memoDisabled {
			// Switched off: never waited for.
			continue
		}
		anyOn = true
		if kind == memoNone {
			// Excluded for this round only: the AIMD limit was full. Slots
			// free as attempts finish: waitSlot wakes on that, and this is
			// only the longest it waits.
			allCircuit = false
			slot = true
			until = now.Add(e.settings.Backpressure.PollInterval)
		} else if kind != memoCircuitOpen {
			allCircuit = false
		}
		if earliest.IsZero() || until.Before(earliest) {
			earliest = until
		}
	}
	if allCircuit {
		if !anyOn {
			// Every source is switched off.
			return 0, false, r.unavailable(ctx, core.ReasonDisabled)
		}
		return 0, false, r.unavailable(ctx, core.ReasonCircuitOpen)
	}
	if r.quotaRefused && e.settings.QuotaFull == core.QuotaFullFailFast {
		// The limiter knows when its window frees; the memo only says when
		// to look again.
		u := r.unavailable(ctx, core.ReasonRateLimited)
		u.RetryAfter = max(u.RetryAfter, earliest.Sub(now), r.quotaRetryAfter)
		return 0, false, u
	}
	wait = earliest.Sub(now)
	if wait <= 0 {
		wait = time.Millisecond
	}
	if wait > e.settings.Backpressure.PollInterval && r.quotaRefused {
		wait = e.settings.Backpressure.PollInterval
	}
	if sw := e.settings.Backpressure.StallWindow; sw > 0 && r.waited+wait > sw {
		last := time.Unix(0, e.lastProgress.Load())
		if now.Sub(last) >= sw {
			u := r.unavailable(ctx, core.ReasonStalled)
			u.RetryAfter = max(u.RetryAfter, wait)
			return 0, false, u
		}
	}
	if left, ok := untilDeadline(ctx); ok && wait > left {
		u := r.unavailable(ctx, core.ReasonRateLimited)
		u.RetryAfter = max(u.RetryAfter, wait)
		return 0, false, u
	}
	return wait, slot, nil
}

// snapshotTimeout bounds the breaker reads of an unavailability report.
const snapshotTimeout = 100 * time.Millisecond

// unavailable builds the scope-level error from the call's history and the
// sources' state: PerSource names every source (those this call did not
// reach by their memo, else retry_exhausted), and RetryAfter is the
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
		kind, until := s.memo(now)
		if why, ok := r.perSource[name]; ok {
			u.PerSource[name] = why
		} else {
			u.PerSource[name] = kind.reason()
		}
		if kind == memoDisabled {
			// Switched off: not usable until an operator says so.
			continue
		}
		usable := time.Duration(0)
		if kind != memoNone {
			usable = until.Sub(now)
		}
		if kind != memoCircuitOpen && kind != memoRateLimited {
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
	if reason == core.ReasonCircuitOpen && r.retryAfter > 0 && (soonest <= 0 || r.retryAfter < soonest) {
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
		if busy.has(i, n) && float64(s.inflight.Load()) < s.aimdLimit() {
			if k, _ := s.memo(now); k == memoNone {
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

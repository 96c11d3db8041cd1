package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/polygateway/polygateway/core"
)

// Bounds of the work around an attempt.
const (
	// leaseSlack is what a concurrency slot's lease adds to the attempt's
	// timeout: the time to admit, finish and retry a lost release. A slot
	// whose release never lands frees by itself this long after the
	// attempt's deadline.
	leaseSlack = 5 * time.Second
	// finishTimeout bounds the release and record after an attempt; a
	// backend that cannot finish in time heals the slot itself (Admitter).
	finishTimeout = time.Second
	// finishGrace is how long finishing may run past the caller's deadline.
	finishGrace = 50 * time.Millisecond
	// warnEvery rate-limits the warnings about backend failures after an
	// attempt.
	warnEvery = 10 * time.Second
)

// leaseTTL is the lease of an attempt's slots: the attempt's timeout plus
// leaseSlack, never above PGW_LEASE_TTL_S (limit).
func leaseTTL(limit, timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return limit
	}
	if l := timeout + leaseSlack; limit <= 0 || l < limit {
		return l
	}
	return limit
}

// finishContext returns the context of the work after an attempt: not
// cancelled with the call and, unless the backends are in process (they
// never block and need no bound), bounded by finishTimeout and by the
// call's deadline plus finishGrace, so that a slow backend cannot hold the
// caller past its deadline.
func (e *Engine) finishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.inProcess {
		return context.WithoutCancel(ctx), func() {}
	}
	d := finishTimeout
	if left, ok := untilDeadline(ctx); ok {
		d = min(d, max(left+finishGrace, finishGrace))
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// untilDeadline is the time left before ctx's deadline. A deadline belongs
// to its context, whose timer runs on the time package's clock (the fake
// one inside a testing/synctest bubble), so it is measured with that clock,
// not the engine's: an injected Clock moves the engine's bookkeeping and
// waits, never the caller's deadline.
func untilDeadline(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(dl), true
}

// admit passes source i through AIMD, its breaker and its gates. ok=true
// means the call holds one of the source's adaptive-concurrency slots,
// claimed before the backends were asked (so calls racing for a cold or
// halved source never exceed its limit), and freed by apply. ok=false
// means the source was refused (it is excluded for this round and in the
// hold as the refusal says) or the call queued (r.inLine: it waits in the
// admission queue next); an error is a backend failure, the caller's
// cancellation or a queue deadline that cannot be met, and ends the call.
// Neither holds a slot.
func (r *run) admit(ctx context.Context, i int) (t core.Ticket, ok bool, err error) {
	e, s := r.e, r.e.sources[i]
	n := len(e.sources)
	name := s.cfg.Name
	if !s.claimSlot() {
		// The adaptive limit is full: no backend is asked.
		e.refused(name, core.ReasonRateLimited)
		r.excluded.add(i, n)
		r.busy.add(i, n)
		r.fail(name, core.ReasonRateLimited)
		return t, false, nil
	}
	return r.admitHolding(ctx, i)
}

// admitHolding is admit once the call holds an adaptive-concurrency slot
// of source i: it asks the Admitter, with the call's place in the queue
// and its waiter when it was woken, and frees the slot unless admitted.
func (r *run) admitHolding(ctx context.Context, i int) (t core.Ticket, ok bool, err error) {
	e, s := r.e, r.e.sources[i]
	woken := r.waiter != nil
	t, err = e.admitter.Admit(ctx, r.admitRequest(i))
	if err != nil {
		e.freeSlot(s)
		// Whatever the backend did with a waiter it was given, the call
		// no longer stands in line (Leave is idempotent).
		r.leave(ctx)
		var qd *core.QueueDeadlineError
		switch {
		case ctx.Err() != nil:
			return t, false, &core.CanceledError{Err: ctx.Err()}
		case errors.As(err, &qd) && r.elsewhere(i):
			// Another source may take the call without its queue.
			r.excluded.add(i, len(e.sources))
			return t, false, nil
		case errors.As(err, &qd):
			return t, false, r.queueDeadline(ctx, qd)
		}
		return t, false, err
	}
	if t.Queued != nil && e.settings.QuotaFull == core.QuotaFullFailFast {
		// A scope that fails fast on full gates does not wait in line:
		// the queued ticket is the gate's refusal.
		r.waiter = t.Queued
		r.leave(ctx)
		t.Queued = nil
	}
	if t.Queued != nil {
		// The gates are full and the call stands in line: the slot goes
		// back, to be claimed again when the queue wakes the call.
		e.freeSlot(s)
		r.waiter, r.inLine = t.Queued, true
		if !woken && r.elsewhere(i) {
			// A new call queued on a source while another may take it
			// now: it tries that one first (its place goes back; one
			// that was woken keeps its place).
			r.leave(ctx)
			r.excluded.add(i, len(e.sources))
		}
		return t, false, nil
	}
	e.observeState(ctx, r.call.ID, s, t.Admission.State)
	if t.Admission.Allowed && t.Grant.OK {
		// The admission took the waiter's place (and its reservation).
		r.waiter = nil
		if e.obs != nil {
			e.obs.Admitted(e.settings.Scope, r.call.Place)
		}
		return t, true, nil
	}
	// A woken call refused on its source gives its place up (a claim
	// passes on) and asks again as a new call.
	r.leave(ctx)
	// The refusal's hold is set before the slot frees, as apply does.
	err = r.refusal(i, t)
	e.freeSlot(s)
	return t, false, err
}

// admitRequest is the admission request of the call's attempt on source i.
func (r *run) admitRequest(i int) core.AdmitRequest {
	e, s := r.e, r.e.sources[i]
	place := r.call.Place
	if !place.Priority.Valid() {
		// An invalid class counts as normal (WithPriority).
		place.Priority = core.PriorityNormal
	}
	req := core.AdmitRequest{Breaker: s.breaker, Permit: core.PermitRequest{
		Scope:        e.settings.Scope,
		Source:       s.cfg.Name,
		SourceLimits: s.cfg.Limits,
		GlobalLimits: e.settings.Global,
		Tokens:       s.cfg.EstTokens,
		LeaseTTL:     leaseTTL(e.settings.LeaseTTL, s.cfg.Timeout),
		Pool:         e.settings.GlobalPool,
		Place:        place,
		Waiter:       r.waiter,
	}}
	if bs := e.budgets(r.call); len(bs) > 0 {
		req.Permit.Budgets, req.Permit.Cost = bs, estimateCost(s, r.call)
	}
	return req
}

// refusal records why the backends refused source i (t is their answer,
// with Admission.Allowed or Grant.OK false):
// the source is excluded for this round and held for as long as the
// refusal says; a spend budget's refusal ends the call (the error).
func (r *run) refusal(i int, t core.Ticket) error {
	e, s := r.e, r.e.sources[i]
	n := len(e.sources)
	name := s.cfg.Name
	now := e.clock.Now()
	if !t.Admission.Allowed && t.Admission.Disabled {
		// Switched off by an operator: skipped until the switch is read
		// again; it never counts as the earliest usable source.
		e.refused(name, core.ReasonDisabled)
		r.excluded.add(i, n)
		r.fail(name, core.ReasonDisabled)
		s.setHold(now, now.Add(disabledRecheck), holdDisabled)
		return nil
	}
	if !t.Admission.Allowed && t.Admission.PushedBack {
		// Another process (or client) of the backend saw the source answer
		// 429: it is left alone for as long as that pushback lasts.
		e.refused(name, core.ReasonRateLimited)
		r.excluded.add(i, n)
		r.fail(name, core.ReasonRateLimited)
		s.setHold(now, now.Add(max(t.Admission.RetryAfter, time.Millisecond)), holdPushedBack)
		return nil
	}
	if !t.Admission.Allowed {
		e.refused(name, core.ReasonCircuitOpen)
		r.excluded.add(i, n)
		r.fail(name, core.ReasonCircuitOpen)
		if r.retryAfter == 0 || t.Admission.RetryAfter < r.retryAfter {
			r.retryAfter = t.Admission.RetryAfter
		}
		wait := t.Admission.RetryAfter
		if t.Admission.State == core.StateHalfOpen && (wait <= 0 || wait > e.settings.Backpressure.PollInterval) {
			// A probe is out: its verdict may come long before the probe
			// lease ends (or the lease never ends: RetryAfter 0), so look
			// again after the poll interval rather than for the lease.
			wait = e.settings.Backpressure.PollInterval
		}
		s.setHold(now, now.Add(max(wait, time.Millisecond)), holdCircuitOpen)
		return nil
	}
	if !t.Grant.OK && t.Grant.Gate == core.GateBudget {
		// A spend budget has no room: no source of the call can be tried
		// until its window ends.
		e.refused(name, core.ReasonBudgetExhausted)
		return r.budgetExhausted(name, t.Grant)
	}
	// A gate is full (the only refusal left).
	e.refused(name, core.ReasonRateLimited)
	r.excluded.add(i, n)
	r.quotaRefused = true
	if ra := t.Grant.RetryAfter; ra > 0 && (r.quotaRetryAfter == 0 || ra < r.quotaRetryAfter) {
		r.quotaRetryAfter = ra
	}
	r.fail(name, core.ReasonRateLimited)
	wait := t.Grant.RetryAfter
	if wait <= 0 || wait > e.settings.Backpressure.PollInterval {
		wait = e.settings.Backpressure.PollInterval
	}
	s.setHold(now, now.Add(wait), holdRateLimited)
	return nil
}

// finish releases an attempt's permit and records its outcome, detached
// from the caller's cancellation and bounded by finishContext. A failure
// is logged (rate-limited); the Admitter heals what it could not release.
func (e *Engine) finish(ctx context.Context, callID string, s *sourceState, t *core.Ticket, settle core.Settlement, o core.Outcome) {
	fctx, cancel := e.finishContext(ctx)
	defer cancel()
	if _, err := e.admitter.Finish(fctx, *t, settle, o); err != nil {
		e.warnBackend(ctx, "polygateway: limiter release or breaker record failed", callID, s.cfg.Name, err)
	}
}

// pushBack shares the wait a 429 imposed on s with every process of the
// breaker's backend (core.Admitter.PushBack), detached from the caller's
// cancellation and bounded like finish. A failure is logged (rate-limited):
// the process's own hold still holds the source back.
func (e *Engine) pushBack(ctx context.Context, callID string, s *sourceState, d time.Duration) {
	fctx, cancel := e.finishContext(ctx)
	defer cancel()
	if err := e.admitter.PushBack(fctx, e.settings.Scope, s.cfg.Name, s.breaker, d); err != nil {
		e.warnBackend(ctx, "polygateway: sharing a 429 pushback failed", callID, s.cfg.Name, err)
	}
}

// warnBackend logs a backend failure after an attempt, at most once per
// warnEvery for the engine.
func (e *Engine) warnBackend(ctx context.Context, msg, callID, source string, err error) {
	now := e.clock.Now().UnixNano()
	last := e.warnAt.Load()
	if last != 0 && now-last < int64(warnEvery) || !e.warnAt.CompareAndSwap(last, now) {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("call_id", callID), slog.String("scope", e.settings.Scope), slog.String("source", source),
		slog.String("err", err.Error()))
}

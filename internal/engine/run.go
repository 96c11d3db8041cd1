package engine

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/polygateway/polygateway/core"
)

// run is the bookkeeping of one call's retry loop. It is used by one
// goroutine.
type run struct {
	e    *Engine
	call *core.Call

	tried, excluded sourceSet
	// busy are the sources refused this round only because their adaptive
	// concurrency limit was full (also in excluded).
	busy sourceSet
	// wrongModel are the sources whose MODEL refused the request as too
	// long for it: excluded for the rest of the call.
	wrongModel sourceSet
	attempts   []string
	perSource  map[string]core.Reason
	spent      int // attempts that consumed the retry budget
	waited     time.Duration
	// sinceAttempt is how long the call has waited since its last attempt;
	// that wait counts toward the next backoff.
	sinceAttempt time.Duration
	lastErr      error
	// ended is when the last attempt's upstream call returned (the clock
	// read once for its latency and for the effects applied after it).
	ended time.Time
	// lastAnswer is the answer of the last attempt that produced one but
	// was refused (the quality guard): returned with the error when the
	// budget runs out.
	lastAnswer *core.LLMResponse
	// quotaRefused is set when the limiter refused a source in this round;
	// quotaRetryAfter is the earliest time the limiter said a gate frees.
	quotaRefused    bool
	quotaRetryAfter time.Duration
	// retryAfter is the earliest breaker RetryAfter seen in this round.
	retryAfter time.Duration
	// sticky holds the call in the best tier after a healthy source there
	// blipped (see stick).
	sticky stickiness
	// cont is the continuation of an answer cut after part of it reached
	// the caller (see continueCut).
	cont continuation
	// waiter is the call's place in the admission queue: waited on while
	// inLine, then passed to the next admission (after WaitClaimed or
	// WaitTurn); nil when the call stands in no queue.
	waiter core.Waiter
	inLine bool
	// claim is the reservation the queue made for the call: its next
	// admission is on that source.
	claim claim
	// failed is the last failed attempt after which the call went on, not
	// yet logged: the next attempt logs it as tried again, the end of the
	// call as the last.
	failed *failedAttempt
}

// continuation is a call going on from what its caller already received.
type continuation struct {
	on bool
	// cut is the error that cut the answer: the call ends with it when no
	// continuation completes the answer.
	cut error
	// content and thinking were delivered before the cut; call is the
	// call with content as its trailing assistant prefill.
	content, thinking string
	call              *core.Call
}

// stickiness is a call's commitment to a tier: until the patience ends,
// only sources of group are chosen, source among them once ready.
type stickiness struct {
	on     bool
	group  int
	until  time.Time // the patience ends
	source int       // the source that blipped
	ready  time.Time // when it may be tried again
}

// readyAt is when the source that blipped may be tried again: its own
// ready time, or later when a hard hold keeps it back (a 429 seen by
// another call of the process or by another process, an open circuit):
// the tier's patience never goes around the source's pushback.
func (st *stickiness) readyAt(s *sourceState, now time.Time) time.Time {
	if kind, until := s.hold(now); kind.hard() && until.After(st.ready) {
		return until
	}
	return st.ready
}

func (r *run) fail(source string, reason core.Reason) {
	if r.perSource == nil {
		r.perSource = make(map[string]core.Reason, 4)
	}
	r.perSource[source] = reason
}

// newRound forgets what only held for the round of choices just made.
func (r *run) newRound() {
	r.excluded.clear()
	r.busy.clear()
	r.quotaRefused, r.quotaRetryAfter, r.retryAfter = false, 0, 0
}

// loop runs attempts until one ends the call.
func (r *run) loop(ctx context.Context) (*core.LLMResponse, error) {
	resp, err := r.retry(ctx)
	// A call that ends holding a place in the queue gives it up.
	r.leave(ctx)
	if r.failed != nil {
		r.e.gaveUp(ctx, r.failed, err)
	}
	return resp, err
}

// retry is the retry loop.
func (r *run) retry(ctx context.Context) (*core.LLMResponse, error) {
	e := r.e
	if err := r.fitWindows(); err != nil {
		return nil, err
	}
	if len(r.call.Place.Tenant) > core.MaxTenant {
		return nil, &core.RequestRejectedError{Code: "tenant_too_long", Param: "tenant",
			Message: fmt.Sprintf("the tenant name is %d bytes, longer than %d", len(r.call.Place.Tenant), core.MaxTenant), Err: core.ErrTenantTooLong}
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, &core.CanceledError{Err: err}
		}
		now := e.clock.Now()
		var (
			i      int
			ticket core.Ticket
			ok     bool
			err    error
		)
		if r.claim.on {
			// A slot was reserved for the call: admit on its source now.
			i, ticket, ok, err = r.claimed(ctx)
		} else {
			var again bool
			if i, again, err = r.pick(ctx, now); err == nil && !again {
				ticket, ok, err = r.admit(ctx, i)
			}
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			if r.inLine {
				// The gates are full: wait for the queue to wake the call.
				if err := r.waitInLine(ctx); err != nil {
					return nil, err
				}
			}
			continue
		}
		r.sinceAttempt = 0
		r.newRound()
		if r.failed != nil {
			e.failover(ctx, r.failed)
			r.failed = nil
		}
		resp, err, done := r.attempt(ctx, i, &ticket, now)
		if done {
			return resp, err
		}
	}
}

// pick chooses the source of the next attempt, or waits: again=true means
// the call waited (for a source held back, a slot, a backoff) and chooses
// anew.
func (r *run) pick(ctx context.Context, now time.Time) (i int, again bool, err error) {
	e := r.e
	n := len(e.sources)
	i, err = r.choose(ctx, now)
	if err != nil {
		return -1, false, err
	}
	if i < 0 && r.sticky.on {
		// Nothing of the tier is ready: wait for the source that
		// blipped, within the patience, or leave the tier.
		ready := r.sticky.readyAt(e.sources[r.sticky.source], now)
		left, dl := untilDeadline(ctx)
		if d := ready.Sub(now); d > 0 && ready.Before(r.sticky.until) && (!dl || d < left) {
			return -1, true, r.pause(ctx, now, d, false, false)
		}
		r.sticky.on = false
		return -1, true, nil
	}
	if i < 0 {
		return -1, true, r.waitForEligible(ctx, now)
	}
	if r.tried.has(i, n) && (!r.sticky.on || i != r.sticky.source) {
		// Retrying a source this call already used: back off first
		// (what the call waited since its last attempt counts).
		d := backoff(e.settings.Retry.BackoffBase, e.settings.Retry.BackoffMax, r.spent) - r.sinceAttempt
		if left, ok := untilDeadline(ctx); ok && d > 0 && d > left {
			return -1, false, r.unavailable(ctx, core.ReasonTimeout)
		}
		if d > 0 {
			// The backoff may be cut at a stall-rule check point:
			// choose again afterwards.
			return -1, true, r.pause(ctx, now, d, false, false)
		}
	}
	return i, false, nil
}

// attempt performs one admitted attempt on source i and applies its
// effect; now is when it was chosen. done reports that the call ends with
// (resp, err).
func (r *run) attempt(ctx context.Context, i int, t *core.Ticket, now time.Time) (resp *core.LLMResponse, err error, done bool) {
	s := r.e.sources[i]
	r.tried.add(i, len(r.e.sources))
	r.attempts = append(r.attempts, s.cfg.Name)
	// A blip is a failure of a source that was answering: healthy, and not
	// failing across calls before this attempt.
	healthy := s.blipReady(now)
	resp, ev, end, err := r.perform(ctx, s, t)
	if resp != nil {
		ev.UsageBounded = r.boundUsage(ctx, s, resp)
	}
	if r.cont.on && err == nil && resp != nil {
		// The source went on from the prefill: the answer is the whole.
		resp.Content, resp.Thinking = r.cont.content+resp.Content, r.cont.thinking+resp.Thinking
	}
	eff, class := effectOf(err)
	ev.Outcome, ev.Reason = eff.observe, class.Reason
	if end != nil {
		if resp != nil {
			ev.Model = resp.Model
		}
		end(ev, err)
		ev.Model = s.cfg.Model
	}
	r.apply(ctx, s, t, eff, ev.Latency, resp, err)
	r.e.finished(ctx, r.call, ev, err)
	if resp != nil {
		r.e.fillSource(s, resp)
		resp.Attempts, resp.Breaker = r.attempts, t.Admission.State
	}
	return r.next(ctx, i, healthy, eff, ev, resp, err)
}

// perform sends the attempt to s and reports its start and timing; end,
// when a Tracer is set, ends the attempt's span.
func (r *run) perform(ctx context.Context, s *sourceState, t *core.Ticket) (*core.LLMResponse, core.AttemptEvent, func(core.AttemptEvent, error), error) {
	e, call := r.e, r.call
	if call.Deltas != nil {
		call.Deltas.Reset()
	}
	ev := core.AttemptEvent{Scope: e.settings.Scope, Source: s.cfg.Name, Provider: s.cfg.Provider, Model: s.cfg.Model,
		CallID: call.ID, Attempt: len(r.attempts), Breaker: t.Admission.State}
	e.started(ctx, call, ev)
	var end func(core.AttemptEvent, error)
	if e.tracer != nil {
		ctx, end = e.tracer.StartAttempt(ctx, ev)
	}
	started := e.clock.Now()
	var (
		resp *core.LLMResponse
		err  error
	)
	switch {
	case call.Attempt != nil:
		resp, err = call.Attempt(ctx, &s.cfg)
	case r.cont.on && r.cont.call.Deltas != nil:
		// The caller has the prefix: a source that repeats it instead of
		// going on ends the continuation (see echoGuard).
		g := newEchoGuard(r.cont.call.Deltas, r.cont.content)
		cc := *r.cont.call
		cc.Deltas = g
		if resp, err = e.up.Do(ctx, &s.cfg, &cc); err == nil {
			if ferr := g.flush(); ferr != nil {
				// As the transport reports a sink that fails mid-stream:
				// the source answered; the call cannot take its answer.
				resp, err = nil, &core.RequestRejectedError{Source: s.cfg.Name, Code: core.CodeConsumerFailed, Reason: core.ReasonConsumerFailed,
					Message: "stream consumer failed: " + ferr.Error(), Err: ferr}
			}
		}
	case r.cont.on:
		resp, err = e.up.Do(ctx, &s.cfg, r.cont.call)
	default:
		resp, err = e.up.Do(ctx, &s.cfg, call)
	}
	// The attempt's adaptive-concurrency slot, claimed by admit, is freed
	// by apply, once the attempt's effect on the source is in place.
	ev.Latency = core.Since(e.clock, started)
	r.ended = started.Add(ev.Latency)
	if err == nil && resp == nil {
		err = &core.TransientError{Source: s.cfg.Name, Reason: core.ReasonNetworkError, Message: "upstream returned no response"}
	}
	if err != nil && ctx.Err() != nil {
		// The caller went away: whatever the attempt says, it is a cancellation.
		err = &core.CanceledError{Err: ctx.Err()}
	}
	if resp != nil {
		ev.TTFT, ev.MaxInterToken = resp.TTFT, resp.MaxInterToken
	}
	return resp, ev, end, err
}

// apply carries an attempt's effect out: on the backends (release, settle,
// record) and on the process-local state (health, hold, adaptive
// concurrency, progress).
func (r *run) apply(ctx context.Context, s *sourceState, t *core.Ticket, eff effect, latency time.Duration, resp *core.LLMResponse, err error) {
	e := r.e
	now := r.ended
	n := s.settle(now, eff.health, eff.aimd, eff.hold == holdClear, latency)
	var pushback time.Duration
	if eff.hold != holdClear {
		pushback = r.setHold(s, now, eff.hold, err, n)
	}
	// Only now does the attempt's slot free: a call woken by it finds the
	// source as this attempt left it (a 429's hold set, its limit halved),
	// never free to be asked again at once.
	e.freeSlot(s)

	e.finish(ctx, r.call.ID, s, t, e.settlement(s, t, eff, resp), eff.breaker)
	if pushback > 0 {
		e.pushBack(ctx, r.call.ID, s, pushback)
	}
	switch eff.breaker {
	case core.OutcomeFailure, core.OutcomeTimeout, core.OutcomeDead:
		// The failure may have opened the circuit: read it now, so that
		// the transition is observed (and logged) with this call's id,
		// not by some later admission.
		snap, ok := e.readState(ctx, r.call.ID, s)
		if ok && eff.hold == holdDead && snap.State == core.StateOpen {
			// A dead source is held while its circuit refuses: longer
			// than one cooldown when a failed probe doubled it.
			s.setHold(now, now.Add(snap.RetryAfter), holdCircuitOpen)
		}
	}
	if eff.progress {
		e.lastProgress.Store(now.UnixNano())
		if t.Admission.Probe {
			// This process's probe closed the circuit: drop the block
			// other calls put on the source while the probe was out.
			s.clearHolds()
		}
	}
}

// next decides, after an attempt's effect, whether the call ends (done)
// and with what, or goes round again.
func (r *run) next(ctx context.Context, i int, healthy bool, eff effect, ev core.AttemptEvent, resp *core.LLMResponse, err error) (*core.LLMResponse, error, bool) {
	s := r.e.sources[i]
	if r.cont.on && eff.end != endNo && eff.cut == cutEnds {
		// A source refused to continue the prefill (or its answer failed
		// a check): the honest end is the cut, never the refusal.
		return nil, r.cont.cut, true
	}
	switch eff.end {
	case endAnswer:
		return resp, nil, true
	case endAnswerError:
		return resp, err, true
	case endError:
		return nil, err, true
	}
	r.lastErr = err
	if eff.keepsAnswer {
		r.lastAnswer = resp
	}
	r.fail(s.cfg.Name, eff.perSource)
	if eff.spends {
		r.spent++
	}
	if eff.end == endOtherModel {
		r.excludeModel(s.cfg.Model)
		if !r.otherModelLeft() {
			return nil, err, true
		}
	}
	if r.call.Deltas != nil && r.call.Deltas.Committed() && !r.continueCut(eff, err) {
		// Part of this answer already went out and no source can continue
		// it: no failover can complete it honestly.
		if r.cont.on {
			return nil, r.cont.cut, true
		}
		return nil, err, true
	}
	if max := r.e.settings.Retry.MaxAttempts; r.spent >= max {
		switch {
		case r.cont.on:
			return nil, r.cont.cut, true
		case r.lastAnswer != nil && eff.keepsAnswer:
			return resp, err, true
		case max == 1:
			return nil, err, true
		}
		return nil, r.unavailable(ctx, core.ReasonRetryExhausted), true
	}
	if !r.cont.on {
		r.stick(ctx, i, healthy, eff, err)
	}
	r.failed = &failedAttempt{ev: ev, err: err}
	return nil, nil, false
}

// continueCut decides, after an answer part of which reached the caller
// was cut (a reset, a 5xx or a stall mid-stream), whether the call goes on
// as a continuation: on a source with CONTINUE=prefill, given what was
// delivered as an assistant prefill, whose deltas then follow the ones the
// caller has (the cut column of the policy table says which ends allow
// it). Only such sources remain eligible.
func (r *run) continueCut(eff effect, err error) bool {
	if eff.cut != cutContinues {
		return false
	}
	e, n := r.e, len(r.e.sources)
	if !r.cont.on {
		able := false
		for i, s := range e.sources {
			if s.cfg.Continue != core.ContinuePrefill {
				r.wrongModel.add(i, n)
			} else if !r.wrongModel.has(i, n) {
				able = true
			}
		}
		if !able {
			return false
		}
		r.cont.on, r.cont.cut = true, err
	}
	content, thinking := r.call.Deltas.Delivered()
	if r.cont.call == nil || content != r.cont.content || thinking != r.cont.thinking {
		c := *r.call
		c.Messages = append(append(make([]core.Message, 0, len(c.Messages)+1), c.Messages...), core.Assistant(content))
		c.Continuation = true
		r.cont.content, r.cont.thinking, r.cont.call = content, thinking, &c
	}
	return r.otherModelLeft()
}

// stick decides after a failure of source i whether the call stays in its
// tier (TIER_PATIENCE_S): a tier is a preference, so a blip of a source
// that was answering — a 5xx, a reset, a 429 whose Retry-After fits the
// patience — is retried in the tier (the source itself once its backoff or
// Retry-After passed, or a sibling at once) before a lower tier is used.
// Timeouts, stalls, dead sources and refusals fail over at once, and so
// does a source that was already failing (an outage, not a blip): which
// failures are blips is the patience column of the policy table. The
// patience never extends the call past its deadline, and never spends the
// attempt a lower tier needs.
func (r *run) stick(ctx context.Context, i int, healthy bool, eff effect, err error) {
	e, st := r.e, &r.sticky
	s := e.sources[i]
	set := e.settings.Retry
	now := e.clock.Now()
	var wait time.Duration
	switch {
	case eff.patience == patienceNone || set.TierPatience <= 0 || !healthy || errors.Is(err, syscall.ECONNREFUSED):
		// A refused connection is a server that is not there, not a blip.
		st.on = false
		return
	case eff.patience == patienceBackoff:
		wait = backoff(set.BackoffBase, set.BackoffMax, max(r.spent, 1))
	case eff.patience == patiencePushback:
		// The hold lasts max(Retry-After, backoff, floor) (see
		// pushbackWait): that is the wait.
		if _, until := s.hold(now); until.After(now) {
			wait = until.Sub(now)
		}
	default:
		st.on = false
		return
	}
	group := e.group(s)
	if !r.lowerTierLeft(group) || (eff.spends && r.spent >= set.MaxAttempts-1) {
		// No lower tier to save the attempt for, or the last attempt is
		// the lower tier's.
		st.on = false
		return
	}
	if !st.on || st.group != group {
		*st = stickiness{on: true, group: group, until: now.Add(set.TierPatience)}
	}
	ready := now.Add(wait)
	if left, ok := untilDeadline(ctx); ready.After(st.until) || ok && wait >= left {
		st.on = false
		return
	}
	st.source, st.ready = i, ready
}

// lowerTierLeft reports whether a source of a worse group than group can
// still take the call.
func (r *run) lowerTierLeft(group int) bool {
	n := len(r.e.sources)
	for i, s := range r.e.sources {
		if !r.wrongModel.has(i, n) && r.e.group(s) > group {
			return true
		}
	}
	return false
}

// setHold applies a hold rule that sets a hold to source s after an
// attempt; n is the source's consecutive 429s or failures. (holdClear is
// carried out by sourceState.settle, with the rest of the local effect;
// holdKeep does nothing.) It returns the pushback to share with other
// processes (holdPushback), else 0.
func (r *run) setHold(s *sourceState, now time.Time, rule holdRule, err error, n int) time.Duration {
	set := r.e.settings
	switch rule {
	case holdBackoff:
		// A source that keeps failing is asked again later and later, never
		// later than a breaker cooldown (so a recovered one comes back fast).
		d := backoff(set.Retry.BackoffBase, set.Retry.BackoffMax, max(n, 1))
		if cd := s.breaker.Cooldown; cd > 0 {
			d = min(d, cd)
		}
		s.setHold(now, now.Add(d), holdFailed)
	case holdCooldown:
		s.setHold(now, now.Add(s.breaker.Cooldown), holdTimeout)
	case holdPushback:
		wait := pushbackWait(retryAfterOf(err), set.Retry.BackoffBase, set.Retry.BackoffMax, n)
		s.setHold(now, now.Add(wait), holdPushedBack)
		return wait
	case holdDead:
		s.setHold(now, now.Add(s.breaker.Cooldown), holdCircuitOpen)
	}
	return 0
}

// The spacing a 429 imposes on its source, whatever the backoff settings:
// pushbackFloor doubled per 429 in a row, up to pushbackFloorMax. With it
// a source that keeps answering 429 is asked at most three times in any
// 3 s (at 0, 1 s and 3 s), by every call of the process together.
const (
	pushbackFloor    = time.Second
	pushbackFloorMax = 30 * time.Second
)

// pushbackWait is how long a source that answered its n-th 429 in a row
// (retryAfter: the upstream's hint, 0 without one) is left alone: the
// longest of the hint, the n-th backoff and the n-th floor.
func pushbackWait(retryAfter, base, maxBackoff time.Duration, n int) time.Duration {
	n = max(n, 1)
	floor := pushbackFloorMax
	if n <= 6 {
		floor = min(pushbackFloor<<(n-1), pushbackFloorMax)
	}
	return max(retryAfter, backoff(base, maxBackoff, n), floor)
}

// fitWindows excludes the sources whose CONTEXT_WINDOW cannot hold the
// call; when none can, the request is rejected before any attempt.
func (r *run) fitWindows() error {
	e, need := r.e, r.call.Tokens
	if !e.windows || need <= 0 || r.call.Attempt != nil {
		// A typed attempt's Tokens sizes a batch, not one prompt.
		return nil
	}
	n := len(e.sources)
	largest := 0
	for i, s := range e.sources {
		if w := s.cfg.ContextWindow; w > 0 && w < need {
			r.wrongModel.add(i, n)
			largest = max(largest, w)
		}
	}
	if r.otherModelLeft() {
		return nil
	}
	return &core.RequestRejectedError{Code: "context_length_exceeded", Reason: core.ReasonContextLength,
		Message: fmt.Sprintf("the request needs about %d tokens (prompt and max_tokens), more than the largest context window of the scope's sources (%d)", need, largest)}
}

// excludeModel excludes, for the rest of the call, every source of model.
func (r *run) excludeModel(model string) {
	n := len(r.e.sources)
	for i, s := range r.e.sources {
		if s.cfg.Model == model {
			r.wrongModel.add(i, n)
		}
	}
}

// otherModelLeft reports whether a source of another model remains.
func (r *run) otherModelLeft() bool {
	n := len(r.e.sources)
	for i := range r.e.sources {
		if !r.wrongModel.has(i, n) {
			return true
		}
	}
	return false
}

// fillSource completes the provenance and cost of an answer from s.
func (e *Engine) fillSource(s *sourceState, resp *core.LLMResponse) {
	if resp.Provider == "" {
		resp.Provider = s.cfg.Provider
	}
	if resp.SourceName == "" {
		resp.SourceName = s.cfg.Name
	}
	if resp.Model == "" {
		resp.Model = s.cfg.Model
	}
	if resp.Cost == nil && e.pricing != nil {
		resp.Cost = e.pricing.CostCached(s.cfg.Model, resp.PromptTokens, resp.CachedPromptTokens, resp.CompletionTokens)
	}
}

// retryAfterOf returns the upstream's Retry-After hint carried by err.
func retryAfterOf(err error) time.Duration {
	var te *core.TransientError
	if errors.As(err, &te) {
		return te.RetryAfter
	}
	return 0
}

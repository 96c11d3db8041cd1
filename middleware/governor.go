package middleware

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/internal/core"
)

// GovernorConfig configures the governor. The zero value of every optional
// field is valid.
type GovernorConfig struct {
	// Settings is the scope's configuration (required: at least one source).
	Settings core.GatewaySettings
	// Upstream performs attempts (required).
	Upstream core.Upstream
	// Limiter and Breaker are the governance backends (required).
	Limiter core.Limiter
	Breaker core.Breaker
	// Admitter passes attempts through the breaker and the limiter.
	// Default: core.ComposeAdmitter(Limiter, Breaker).
	Admitter core.Admitter
	// Pricing prices answers (Cost) and ranks sources for cost_aware. Optional.
	Pricing core.PricingTable
	// Clock defaults to the wall clock.
	Clock core.Clock
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Observer receives attempt, refusal, wait and breaker events. Optional.
	Observer core.Observer
}

// Governor is the innermost layer: per call it runs the retry loop across
// sources, re-selecting a source and passing the breaker and the limiter on
// every attempt. It is safe for concurrent use.
type Governor struct {
	settings core.GatewaySettings
	sources  []*sourceState
	up       core.Upstream
	limiter  core.Limiter
	breaker  core.Breaker
	admitter core.Admitter
	pricing  core.PricingTable
	clock    core.Clock
	log      *slog.Logger
	obs      core.Observer

	// lastProgress is the unix-nano time of the last successful attempt in
	// the scope (the stall rule reads it).
	lastProgress atomic.Int64
	// rrMu guards the smooth weighted round robin weights.
	rrMu sync.Mutex
	// slotMu guards slotFreed, closed (and replaced) when an attempt ends
	// while calls wait for an adaptive-concurrency slot.
	slotMu      sync.Mutex
	slotFreed   chan struct{}
	slotWaiters atomic.Int32
	// warned records backend release/record failures already logged.
	warned atomic.Bool
}

// NewGovernor builds a governor. It copies cfg.
func NewGovernor(cfg GovernorConfig) (*Governor, error) {
	if len(cfg.Settings.Sources) == 0 {
		return nil, errors.New("polygateway: governor: no sources")
	}
	if cfg.Upstream == nil || cfg.Limiter == nil || cfg.Breaker == nil {
		return nil, errors.New("polygateway: governor: upstream, limiter and breaker are required")
	}
	g := &Governor{
		settings: cfg.Settings,
		up:       cfg.Upstream,
		limiter:  cfg.Limiter,
		breaker:  cfg.Breaker,
		admitter: cfg.Admitter,
		pricing:  cfg.Pricing,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		obs:      cfg.Observer,
	}
	if g.clock == nil {
		g.clock = core.SystemClock{}
	}
	if g.admitter == nil {
		g.admitter = core.ComposeAdmitter(g.limiter, g.breaker)
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.settings.Retry.MaxAttempts < 1 {
		g.settings.Retry.MaxAttempts = 1
	}
	if g.settings.Backpressure.PollInterval <= 0 {
		g.settings.Backpressure.PollInterval = 250 * time.Millisecond
	}
	g.settings.Breaker.Pool = g.settings.GlobalPool
	g.settings.Sources = append([]core.SourceConfig(nil), cfg.Settings.Sources...)
	for _, sc := range g.settings.Sources {
		if sc.Weight <= 0 {
			sc.Weight = 1
		}
		g.sources = append(g.sources, newSourceState(sc, g.settings.Breaker, g.pricing))
	}
	g.lastProgress.Store(g.clock.Now().UnixNano())
	return g, nil
}

// callState is the bookkeeping of one call's retry loop.
type callState struct {
	tried, excluded sourceSet
	// busy are the sources refused this round only because their adaptive
	// concurrency limit was full (also in excluded).
	busy      sourceSet
	attempts  []string
	perSource map[string]core.Reason
	spent     int // attempts that consumed the retry budget
	waited    time.Duration
	// sinceAttempt is how long the call has waited since its last attempt;
	// that wait counts toward the next backoff.
	sinceAttempt time.Duration
	lastErr      error
	// quotaRefused is set when the limiter refused a source in this round;
	// quotaRetryAfter is the earliest time the limiter said a gate frees.
	quotaRefused    bool
	quotaRetryAfter time.Duration
	// retryAfter is the earliest breaker RetryAfter seen in this round.
	retryAfter time.Duration
}

func (st *callState) fail(source string, r core.Reason) {
	if st.perSource == nil {
		st.perSource = make(map[string]core.Reason, 4)
	}
	st.perSource[source] = r
}

// Handle runs one governed call.
func (g *Governor) Handle(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
	var st callState
	n := len(g.sources)
	for {
		if err := ctx.Err(); err != nil {
			return nil, &core.CanceledError{Err: err}
		}
		now := g.clock.Now()
		i := g.choose(now, &st.tried, &st.excluded, &st.busy)
		if i < 0 {
			wait, slot, err := g.nothingEligible(ctx, now, &st)
			if err != nil {
				return nil, err
			}
			if slot {
				// Wake as soon as an attempt finishes anywhere in the scope.
				wait, err = g.waitSlot(ctx, wait)
			} else {
				err = g.sleep(ctx, wait)
			}
			if err != nil {
				return nil, err
			}
			if g.obs != nil {
				g.obs.Waited(g.settings.Scope, wait)
			}
			st.waited += wait
			st.sinceAttempt += wait
			st.excluded.clear()
			st.busy.clear()
			st.quotaRefused, st.quotaRetryAfter, st.retryAfter = false, 0, 0
			continue
		}
		s := g.sources[i]
		if st.tried.has(i, n) {
			// Retrying a source this call already used: back off first.
			d := backoff(g.settings.Retry.BackoffBase, g.settings.Retry.BackoffMax, st.spent) - st.sinceAttempt
			if dl, ok := ctx.Deadline(); ok && d > 0 && d > time.Until(dl) {
				return nil, g.unavailable(&st, core.ReasonTimeout)
			}
			if err := g.sleep(ctx, d); err != nil {
				return nil, err
			}
		}
		resp, err, admitted := g.tryAttempt(ctx, call, i, &st)
		if !admitted {
			if err != nil {
				return nil, err
			}
			continue
		}
		st.sinceAttempt = 0
		st.excluded.clear()
		st.busy.clear()
		st.quotaRefused, st.quotaRetryAfter, st.retryAfter = false, 0, 0
		if resp != nil {
			resp.Attempts = st.attempts
		}
		if err == nil {
			return resp, nil
		}
		var invalid *core.ResultInvalidError
		if resp != nil && errors.As(err, &invalid) {
			if !errors.Is(err, errLowQuality) {
				return resp, err
			}
			// The quality guard: a bad answer, not a bad service. Try
			// another source while the budget lasts.
			st.spent++
			st.lastErr = err
			s.setMemo(g.clock.Now(), g.clock.Now().Add(backoff(g.settings.Retry.BackoffBase, g.settings.Retry.BackoffMax, 1)), memoFailed)
			if st.spent >= g.settings.Retry.MaxAttempts {
				return resp, err
			}
			continue
		}
		done, ferr := g.afterFailure(ctx, s, err, &st)
		if done {
			return nil, ferr
		}
		if call.Deltas != nil && call.Deltas.Committed() {
			// Part of this answer already went out: no failover can
			// complete it honestly.
			return nil, err
		}
	}
}

// tryAttempt passes the breaker, AIMD and the limiter for source i and, if
// all admit, performs the attempt. admitted=false means the source was
// refused (it is excluded for this round) or a backend failed (err != nil).
func (g *Governor) tryAttempt(ctx context.Context, call *core.Call, i int, st *callState) (resp *core.LLMResponse, err error, admitted bool) {
	s := g.sources[i]
	n := len(g.sources)
	name := s.cfg.Name
	if float64(s.inflight.Load()) >= s.aimdLimit() {
		// The adaptive limit is full: no backend is asked.
		if g.obs != nil {
			g.obs.Refused(g.settings.Scope, name, core.ReasonRateLimited)
		}
		st.excluded.add(i, n)
		st.busy.add(i, n)
		st.fail(name, core.ReasonRateLimited)
		return nil, nil, false
	}
	adm, grant, err := g.admit(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &core.CanceledError{Err: ctx.Err()}, false
		}
		return nil, err, false
	}
	now := g.clock.Now()
	g.observeState(s, adm.State)
	if !adm.Allowed {
		if g.obs != nil {
			g.obs.Refused(g.settings.Scope, name, core.ReasonCircuitOpen)
		}
		st.excluded.add(i, n)
		st.fail(name, core.ReasonCircuitOpen)
		if st.retryAfter == 0 || adm.RetryAfter < st.retryAfter {
			st.retryAfter = adm.RetryAfter
		}
		wait := adm.RetryAfter
		if adm.State == core.StateHalfOpen {
			// A probe is out: its verdict may come long before the probe
			// lease ends, so look again soon rather than for the lease.
			wait = min(wait, g.settings.Backpressure.PollInterval)
		}
		s.setMemo(now, now.Add(max(wait, time.Millisecond)), memoCircuitOpen)
		return nil, nil, false
	}
	if !grant.OK {
		if g.obs != nil {
			g.obs.Refused(g.settings.Scope, name, core.ReasonRateLimited)
		}
		st.excluded.add(i, n)
		st.quotaRefused = true
		if grant.RetryAfter > 0 && (st.quotaRetryAfter == 0 || grant.RetryAfter < st.quotaRetryAfter) {
			st.quotaRetryAfter = grant.RetryAfter
		}
		st.fail(name, core.ReasonRateLimited)
		wait := grant.RetryAfter
		if wait <= 0 || wait > g.settings.Backpressure.PollInterval {
			wait = g.settings.Backpressure.PollInterval
		}
		s.setMemo(now, now.Add(wait), memoRateLimited)
		return nil, nil, false
	}
	st.tried.add(i, n)
	st.attempts = append(st.attempts, name)
	if call.Deltas != nil {
		call.Deltas.Reset()
	}
	resp, err = g.attempt(ctx, call, s, adm, grant.Permit)
	return resp, err, true
}

// admit passes the breaker and, when it admits, the limiter: in one backend
// round trip when the limiter can admit with this breaker. When the limiter
// refuses, a probe the breaker granted has been given back. A backend
// failure is a GovernanceBackendError (nothing is left held).
func (g *Governor) admit(ctx context.Context, s *sourceState) (core.Admission, core.Grant, error) {
	req := core.PermitRequest{
		Scope:        g.settings.Scope,
		Source:       s.cfg.Name,
		SourceLimits: s.cfg.Limits,
		GlobalLimits: g.settings.Global,
		Tokens:       s.cfg.EstTokens,
		LeaseTTL:     leaseTTL(g.settings.LeaseTTL, s.cfg.Timeout),
		Pool:         g.settings.GlobalPool,
	}
	t, err := g.admitter.Admit(ctx, core.AdmitRequest{Permit: req, Breaker: s.breaker})
	return t.Admission, t.Grant, err
}

// attempt performs one upstream attempt holding the breaker admission and
// the limiter permit, and settles both whatever happens.
func (g *Governor) attempt(ctx context.Context, call *core.Call, s *sourceState, adm core.Admission, permit core.Permit) (*core.LLMResponse, error) {
	s.inflight.Add(1)
	started := g.clock.Now()
	resp, err := g.up.Do(ctx, &s.cfg, call)
	s.inflight.Add(-1)
	g.slotFree()
	took := g.clock.Now().Sub(started)
	if err == nil && resp == nil {
		err = &core.TransientError{Source: s.cfg.Name, Reason: core.ReasonNetworkError, Message: "upstream returned no response"}
	}
	var invalid error
	if err == nil && g.settings.Quality.Guard {
		if problem := qualityProblem(resp, g.settings.Quality); problem != "" {
			invalid = &core.ResultInvalidError{Source: s.cfg.Name, Raw: resp.Content, Message: problem, Err: errLowQuality}
		}
	}
	if err == nil && invalid == nil && call.Check != nil {
		if cerr := call.Check(resp); cerr != nil {
			invalid = &core.ResultInvalidError{Source: s.cfg.Name, Raw: resp.Content, Message: cerr.Error(), Err: cerr}
		}
	}
	if g.obs != nil {
		g.obs.Attempt(attemptEvent(g.settings.Scope, s.cfg.Name, took, resp, errors.Join(err, invalid), ctx.Err() != nil))
	}

	outcome, settle, verdict := core.OutcomeSuccess, core.Settlement{Kind: core.SettleActual}, verdictGood
	switch {
	case err == nil:
		settle.Tokens = resp.PromptTokens + resp.CompletionTokens
	case ctx.Err() != nil:
		outcome, settle.Kind, verdict = core.OutcomeAbandoned, core.SettleEstimate, verdictNone
		err = &core.CanceledError{Err: ctx.Err()}
	default:
		outcome, settle.Kind, verdict = classifyOutcome(err)
	}
	bg, cancel := finishContext(ctx)
	defer cancel()
	if rerr := g.finish(bg, s, permit, settle, adm, outcome); rerr != nil {
		g.warnOnce("limiter release or breaker record failed", rerr)
	} else if g.obs != nil && outcome != core.OutcomeSuccess && outcome != core.OutcomeAbandoned {
		// A failure may have opened the circuit: look, for the observer.
		if snap, serr := g.breaker.Snapshot(bg, g.settings.Scope, s.cfg.Name, s.breaker); serr == nil {
			g.observeState(s, snap.State)
		}
	}
	now := g.clock.Now()
	if invalid != nil {
		// A bad result is not a bad service, nor a good one.
		verdict = verdictNone
	}
	switch verdict {
	case verdictGood:
		s.observe(now, true)
	case verdictBad:
		s.observe(now, false)
	}
	if err != nil {
		return nil, err
	}
	s.aimdSuccess()
	if adm.Probe {
		// This process's probe closed the circuit: drop the block other
		// calls put on the source while the probe was out.
		s.clearAllMemo()
	}
	if invalid != nil {
		// The source answered: progress for the scope, alive for the
		// breaker; the answer goes back with the error so that telemetry
		// records the billed call.
		s.clearMemo()
		g.lastProgress.Store(now.UnixNano())
		g.fillSource(s, resp)
		return resp, invalid
	}
	s.clearMemo()
	g.lastProgress.Store(now.UnixNano())
	g.fillSource(s, resp)
	return resp, nil
}

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
)

// leaseTTL is the lease of an attempt's slots: the attempt's timeout plus
// leaseSlack, never above PGW_LEASE_TTL_S (max).
func leaseTTL(max, timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return max
	}
	if l := timeout + leaseSlack; max <= 0 || l < max {
		return l
	}
	return max
}

// finishContext returns the context of the work after an attempt: not
// cancelled with the call, bounded by finishTimeout and by the call's
// deadline plus finishGrace, so that a slow backend cannot hold the caller
// past its deadline.
func finishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := finishTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl)+finishGrace, finishGrace))
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// fillSource completes the provenance and cost of an answer from s.
func (g *Governor) fillSource(s *sourceState, resp *core.LLMResponse) {
	if resp.Provider == "" {
		resp.Provider = s.cfg.Provider
	}
	if resp.SourceName == "" {
		resp.SourceName = s.cfg.Name
	}
	if resp.Model == "" {
		resp.Model = s.cfg.Model
	}
	if resp.Cost == nil && g.pricing != nil {
		resp.Cost = g.pricing.CostCached(s.cfg.Model, resp.PromptTokens, resp.CachedPromptTokens, resp.CompletionTokens)
	}
}

type verdict uint8

const (
	verdictNone verdict = iota
	verdictGood
	verdictBad
)

// classifyOutcome maps an attempt error to the breaker outcome, the TPM
// settlement and the health verdict.
func classifyOutcome(err error) (core.Outcome, core.SettleKind, verdict) {
	c := core.Classify(err)
	switch c.Class {
	case core.ClassTransient:
		switch c.Reason {
		case core.ReasonRateLimited:
			return core.OutcomeRateLimited, core.SettleRefund, verdictBad
		case core.ReasonTimeout, core.ReasonStalled:
			return core.OutcomeTimeout, core.SettleEstimate, verdictBad
		}
		return core.OutcomeFailure, core.SettleEstimate, verdictBad
	case core.ClassSourceDead:
		return core.OutcomeDead, core.SettleRefund, verdictBad
	case core.ClassRejected:
		// The service answered: alive for the breaker, not the source's fault.
		return core.OutcomeSuccess, core.SettleRefund, verdictNone
	case core.ClassInvalid:
		// A bad result is not a bad service.
		return core.OutcomeSuccess, core.SettleEstimate, verdictNone
	}
	return core.OutcomeFailure, core.SettleEstimate, verdictBad
}

// afterFailure updates the memo and the call's budget after a failed
// attempt. done=true ends the call with err.
func (g *Governor) afterFailure(ctx context.Context, s *sourceState, err error, st *callState) (bool, error) {
	var (
		ce *core.CanceledError
		te *core.TransientError
		de *core.SourceDeadError
	)
	now := g.clock.Now()
	name := s.cfg.Name
	switch {
	case errors.As(err, &ce):
		return true, err
	case errors.As(err, &te) && te.Reason == core.ReasonRateLimited:
		// 429 pushback: no budget, no breaker failure; wait max(Retry-After,
		// backoff) on this source and prefer another.
		n := s.aimdPushback()
		wait := max(te.RetryAfter, backoff(g.settings.Retry.BackoffBase, g.settings.Retry.BackoffMax, n))
		s.setMemo(now, now.Add(wait), memoRateLimited)
		st.fail(name, core.ReasonRateLimited)
		st.lastErr = err
		return false, nil
	case errors.As(err, &te):
		st.spent++
		st.lastErr = err
		if te.Reason == core.ReasonTimeout || te.Reason == core.ReasonStalled {
			st.fail(name, core.ReasonTimeout)
			s.setMemo(now, now.Add(g.settings.Breaker.Cooldown), memoTimeout)
		} else {
			st.fail(name, core.ReasonNetworkError)
			s.setMemo(now, now.Add(backoff(g.settings.Retry.BackoffBase, g.settings.Retry.BackoffMax, 1)), memoFailed)
		}
	case errors.As(err, &de):
		st.spent++
		st.lastErr = err
		st.fail(name, core.ReasonSourceDead)
		s.setMemo(now, now.Add(g.settings.Breaker.Cooldown), memoCircuitOpen)
	default:
		// RequestRejected, ResultInvalid and foreign errors end the call as they are.
		var re *core.RequestRejectedError
		var ie *core.ResultInvalidError
		if errors.As(err, &re) || errors.As(err, &ie) {
			return true, err
		}
		st.spent++
		st.lastErr = err
		st.fail(name, core.ReasonNetworkError)
		s.setMemo(now, now.Add(backoff(g.settings.Retry.BackoffBase, g.settings.Retry.BackoffMax, 1)), memoFailed)
	}
	if st.spent >= g.settings.Retry.MaxAttempts {
		if g.settings.Retry.MaxAttempts == 1 {
			return true, err
		}
		return true, g.unavailable(st, core.ReasonRetryExhausted)
	}
	return false, nil
}

// nothingEligible decides what to do when no source can be tried right now:
// give up (circuit open, fail_fast, stalled, deadline) or wait until the
// earliest hard memo expires.
//
// slot=true means some source is only waiting for an adaptive-concurrency
// slot: the caller then waits until an attempt finishes (waitSlot), at most
// the returned duration.
func (g *Governor) nothingEligible(ctx context.Context, now time.Time, st *callState) (wait time.Duration, slot bool, err error) {
	var earliest time.Time
	allCircuit := true
	for _, s := range g.sources {
		kind, until := s.memo(now)
		if kind == memoNone {
			// Excluded for this round only: the AIMD limit was full. Slots
			// free as attempts finish: waitSlot wakes on that, and this is
			// only the longest it waits.
			allCircuit = false
			slot = true
			until = now.Add(g.settings.Backpressure.PollInterval)
		} else if kind != memoCircuitOpen {
			allCircuit = false
		}
		if earliest.IsZero() || until.Before(earliest) {
			earliest = until
		}
	}
	if allCircuit {
		e := g.unavailable(st, core.ReasonCircuitOpen)
		e.RetryAfter = earliest.Sub(now)
		return 0, false, e
	}
	if st.quotaRefused && g.settings.QuotaFull == core.QuotaFullFailFast {
		// The limiter knows when its window frees; the memo only says when
		// to look again.
		e := g.unavailable(st, core.ReasonRateLimited)
		e.RetryAfter = max(earliest.Sub(now), st.quotaRetryAfter)
		return 0, false, e
	}
	wait = earliest.Sub(now)
	if wait <= 0 {
		wait = time.Millisecond
	}
	if wait > g.settings.Backpressure.PollInterval && st.quotaRefused {
		wait = g.settings.Backpressure.PollInterval
	}
	if sw := g.settings.Backpressure.StallWindow; sw > 0 && st.waited+wait > sw {
		last := time.Unix(0, g.lastProgress.Load())
		if now.Sub(last) >= sw {
			e := g.unavailable(st, core.ReasonStalled)
			e.RetryAfter = wait
			return 0, false, e
		}
	}
	if dl, ok := ctx.Deadline(); ok && wait > time.Until(dl) {
		e := g.unavailable(st, core.ReasonRateLimited)
		e.RetryAfter = wait
		return 0, false, e
	}
	return wait, slot, nil
}

// unavailable builds the scope-level error from the call's history.
func (g *Governor) unavailable(st *callState, r core.Reason) *core.GatewayUnavailableError {
	e := &core.GatewayUnavailableError{Scope: g.settings.Scope, Reason: r, PerSource: st.perSource, Err: st.lastErr}
	if r == core.ReasonCircuitOpen {
		e.RetryAfter = st.retryAfter
	}
	return e
}

// abandon returns a breaker admission without a verdict (a held probe is
// given back).
func (g *Governor) abandon(ctx context.Context, s *sourceState, adm core.Admission) {
	if !adm.Probe {
		return
	}
	if _, err := g.breaker.Record(context.WithoutCancel(ctx), g.settings.Scope, s.cfg.Name, adm, core.OutcomeAbandoned, s.breaker); err != nil {
		g.warnOnce("breaker probe release failed", err)
	}
}

// sleep waits d or until ctx ends.
func (g *Governor) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &core.CanceledError{Err: ctx.Err()}
	case <-t.C:
		return nil
	}
}

func (g *Governor) warnOnce(msg string, err error) {
	if g.warned.CompareAndSwap(false, true) {
		g.log.Warn("polygateway: "+msg, "scope", g.settings.Scope, "err", err)
	}
}

// Sources reports the state of every source. Backend read failures are
// reported in SourceStatus.Err.
func (g *Governor) Sources(ctx context.Context) []core.SourceStatus {
	out := make([]core.SourceStatus, 0, len(g.sources))
	now := g.clock.Now()
	for _, s := range g.sources {
		st := core.SourceStatus{
			Name: s.cfg.Name, Provider: s.cfg.Provider, Model: s.cfg.Model, BaseURL: s.cfg.BaseURL,
			Priority: s.cfg.Priority, Weight: s.cfg.Weight, Region: s.cfg.Region,
			InFlight: int(s.inflight.Load()), Health: s.health(now), AdaptiveLimit: s.aimdLimit(),
			Limits: s.cfg.Limits,
		}
		snap, err := g.breaker.Snapshot(ctx, g.settings.Scope, s.cfg.Name, s.breaker)
		st.Breaker = snap
		usage, uerr := g.limiter.Usage(ctx, g.settings.Scope, s.cfg.Name)
		st.Usage = usage
		st.Err = errors.Join(err, uerr)
		out = append(out, st)
	}
	return out
}

// Reset closes the breaker of source (the operators' emergency key) and
// clears its local memo and health history.
func (g *Governor) Reset(ctx context.Context, source string) error {
	for _, s := range g.sources {
		if s.cfg.Name == source {
			if err := g.breaker.Reset(ctx, g.settings.Scope, source, s.breaker); err != nil {
				return &core.GovernanceBackendError{Backend: "breaker", Op: "reset", Err: err}
			}
			s.mu.Lock()
			s.memoKind, s.memoUntil, s.score, s.scoreAt = memoNone, time.Time{}, 1, time.Time{}
			s.mu.Unlock()
			return nil
		}
	}
	return errors.New("polygateway: governor: unknown source " + source)
}

// observeState reports a breaker state to the observer when it differs from
// the last one seen for s.
func (g *Governor) observeState(s *sourceState, state core.BreakerState) {
	if g.obs == nil {
		return
	}
	if prev := core.BreakerState(s.lastState.Swap(uint32(state))); prev != state {
		g.obs.BreakerState(g.settings.Scope, s.cfg.Name, state)
	}
}

// attemptEvent describes a finished attempt for the observer.
func attemptEvent(scope, source string, latency time.Duration, resp *core.LLMResponse, err error, cancelled bool) core.AttemptEvent {
	ev := core.AttemptEvent{Scope: scope, Source: source, Latency: latency, Outcome: core.AttemptSuccess}
	if resp != nil {
		ev.TTFT, ev.MaxInterToken = resp.TTFT, resp.MaxInterToken
	}
	if err == nil {
		return ev
	}
	c := core.Classify(err)
	switch {
	case cancelled:
		ev.Outcome = core.AttemptCancelled
	case c.Class == core.ClassTransient && c.Reason == core.ReasonRateLimited:
		ev.Outcome = core.AttemptRateLimited
	case c.Class == core.ClassTransient && (c.Reason == core.ReasonTimeout || c.Reason == core.ReasonStalled):
		ev.Outcome = core.AttemptTimeout
	case c.Class == core.ClassSourceDead:
		ev.Outcome = core.AttemptDead
	case c.Class == core.ClassRejected:
		ev.Outcome = core.AttemptRejected
	case c.Class == core.ClassInvalid:
		ev.Outcome = core.AttemptInvalid
	default:
		ev.Outcome = core.AttemptTransient
	}
	return ev
}

// finish releases the permit and records the breaker outcome: in one
// backend round trip when the limiter can finish with this breaker.
func (g *Governor) finish(ctx context.Context, s *sourceState, permit core.Permit, settle core.Settlement, adm core.Admission, o core.Outcome) error {
	_, err := g.admitter.Finish(ctx, core.Ticket{Admission: adm, Grant: core.Grant{OK: true, Permit: permit}, Breaker: s.breaker}, settle, o)
	return err
}

// waitSlot waits until an attempt finishes somewhere in the scope (an
// adaptive-concurrency slot frees) or at most d, and returns how long it
// waited.
func (g *Governor) waitSlot(ctx context.Context, d time.Duration) (time.Duration, error) {
	g.slotWaiters.Add(1)
	defer g.slotWaiters.Add(-1)
	g.slotMu.Lock()
	if g.slotFreed == nil {
		g.slotFreed = make(chan struct{})
	}
	ch := g.slotFreed
	g.slotMu.Unlock()
	// A slot may have freed between the choice and the registration above.
	for _, s := range g.sources {
		if float64(s.inflight.Load()) < s.aimdLimit() {
			if k, _ := s.memo(g.clock.Now()); k == memoNone {
				return 0, nil
			}
		}
	}
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return time.Since(start), &core.CanceledError{Err: ctx.Err()}
	case <-ch:
	case <-t.C:
	}
	return time.Since(start), nil
}

// slotFree wakes the calls waiting in waitSlot; cheap when none waits.
func (g *Governor) slotFree() {
	if g.slotWaiters.Load() == 0 {
		return
	}
	g.slotMu.Lock()
	if g.slotFreed != nil {
		close(g.slotFreed)
		g.slotFreed = nil
	}
	g.slotMu.Unlock()
}

package engine

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

func TestNewRejectsIncompleteConfig(t *testing.T) {
	t.Parallel()
	up, lim, br := newScriptedUpstream(), memory.NewLimiter(), memory.NewBreaker()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no sources", Config{Settings: testSettings(), Upstream: up, Limiter: lim, Breaker: br}},
		{"no upstream", Config{Settings: testSettings(src("a", 0)), Limiter: lim, Breaker: br}},
		{"no limiter", Config{Settings: testSettings(src("a", 0)), Upstream: up, Breaker: br}},
		{"no breaker", Config{Settings: testSettings(src("a", 0)), Upstream: up, Limiter: lim}},
	}
	for _, tc := range tests {
		if g, err := New(tc.cfg); err == nil || g != nil {
			t.Errorf("%s: New = (%v, %v), want an error", tc.name, g, err)
		}
	}
}

func TestEngineFillsTheAnswerFromTheAnsweringSource(t *testing.T) {
	t.Parallel()
	pricing := core.PricingTable{"model-a": {InputPer1M: 1, OutputPer1M: 2}}
	f := newFixture(t, testSettings(src("a", 0)), withPricing(pricing))
	resp, err := f.g.Handle(context.Background(), newCall())
	if err != nil {
		t.Fatal(err)
	}
	if resp.SourceName != "a" || resp.Provider != "prov" || resp.Model != "model-a" {
		t.Errorf("answer names (%q, %q, %q), want (a, prov, model-a)", resp.SourceName, resp.Provider, resp.Model)
	}
	if !slices.Equal(resp.Attempts, []string{"a"}) {
		t.Errorf("Attempts = %v, want [a]", resp.Attempts)
	}
	if resp.Cost == nil || math.Abs(*resp.Cost-(10*1+5*2)/1e6) > 1e-15 {
		t.Errorf("Cost = %v, want 2e-5", resp.Cost)
	}
	if u := f.usage(t, "a"); u.InFlight != 0 {
		t.Errorf("limiter in-flight = %d after the call", u.InFlight)
	}
}

func TestEngineKeepsWhatTheUpstreamReported(t *testing.T) {
	t.Parallel()
	pricing := core.PricingTable{"model-a": {InputPer1M: 1, OutputPer1M: 2}}
	cost := 0.5
	f := newFixture(t, testSettings(src("a", 0)), withPricing(pricing))
	f.up.script("a", step{resp: &core.LLMResponse{Content: "x", Model: "served-model", Provider: "p2", SourceName: "alias", Cost: &cost}})
	resp, err := f.g.Handle(context.Background(), newCall())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "served-model" || resp.Provider != "p2" || resp.SourceName != "alias" || resp.Cost == nil || *resp.Cost != 0.5 {
		t.Errorf("answer overwritten: %+v", resp)
	}
}

func TestEngineLeavesCostNilWithoutAPrice(t *testing.T) {
	t.Parallel()
	for _, pricing := range []core.PricingTable{nil, {"other": {InputPer1M: 1}}} {
		f := newFixture(t, testSettings(src("a", 0)), withPricing(pricing))
		resp, err := f.g.Handle(context.Background(), newCall())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Cost != nil {
			t.Errorf("Cost = %v with pricing %v, want nil", *resp.Cost, pricing)
		}
	}
}

func TestEngineFailsOverAndListsAttemptsInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0), src("b", 1), src("c", 2)))
	f.up.script("a", failStep(testkit.TransientErr("a")))
	f.up.script("b", failStep(testkit.TimeoutErr("b")))
	resp, err := f.g.Handle(context.Background(), newCall())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c"}
	if !slices.Equal(resp.Attempts, want) || !slices.Equal(f.up.callLog(), want) {
		t.Errorf("Attempts = %v, upstream calls = %v, want %v", resp.Attempts, f.up.callLog(), want)
	}
	if resp.SourceName != "c" {
		t.Errorf("SourceName = %q, want c", resp.SourceName)
	}
}

func TestEngineRetriesTheSameSourceWhenItIsTheOnlyOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0)))
	f.up.script("a", failStep(testkit.TransientErr("a")), failStep(testkit.StalledErr("a")), okStep())
	resp, err := f.g.Handle(context.Background(), newCall())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Attempts, []string{"a", "a", "a"}) {
		t.Errorf("Attempts = %v, want [a a a]", resp.Attempts)
	}
}

func TestEngineSpentRetryBudgetReturnsRetryExhausted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		errOf  func(string) error
		reason core.Reason
	}{
		{"network errors", testkit.TransientErr, core.ReasonNetworkError},
		{"timeouts", testkit.TimeoutErr, core.ReasonTimeout},
		{"stalls", testkit.StalledErr, core.ReasonTimeout},
		{"dead sources", testkit.DeadErr, core.ReasonSourceDead},
		{"foreign errors", func(s string) error { return errors.New("unclassified failure on " + s) }, core.ReasonNetworkError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := testSettings(src("a", 0), src("b", 1), src("c", 2))
			set.Retry.MaxAttempts = 2
			f := newFixture(t, set)
			lastErr := tc.errOf("b")
			f.up.script("a", failStep(tc.errOf("a")))
			f.up.script("b", failStep(lastErr))
			_, err := f.g.Handle(context.Background(), newCall())
			ue := asUnavailable(t, err)
			if ue.Reason != core.ReasonRetryExhausted || ue.Scope != testScope {
				t.Errorf("Reason, Scope = %q, %q; want retry_exhausted, %s", ue.Reason, ue.Scope, testScope)
			}
			if !errors.Is(err, core.ErrAllSourcesExhausted) || errors.Is(err, core.ErrCircuitOpen) || !errors.Is(err, core.ErrGateway) {
				t.Errorf("sentinels wrong for %v", err)
			}
			if ue.Err != lastErr || !errors.Is(err, lastErr) { //nolint:errorlint // the very error of the last attempt must be wrapped, not an equal one
				t.Errorf("wrapped error = %v, want the last attempt's %v", ue.Err, lastErr)
			}
			// Every source is named, attempted or not: c was never reached.
			wantPer := map[string]core.Reason{"a": tc.reason, "b": tc.reason, "c": core.ReasonRetryExhausted}
			if !maps.Equal(ue.PerSource, wantPer) {
				t.Errorf("PerSource = %v, want %v", ue.PerSource, wantPer)
			}
			if calls := f.up.callLog(); !slices.Equal(calls, []string{"a", "b"}) {
				t.Errorf("upstream calls = %v, want [a b]: MAX_ATTEMPTS includes the first", calls)
			}
		})
	}
}

func TestEngineSingleAttemptReturnsTheRawClassifiedError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		maxAttempts int
		err         error
	}{
		{"transient", 1, testkit.TransientErr("a")},
		{"timeout", 1, testkit.TimeoutErr("a")},
		{"source dead", 1, testkit.DeadErr("a")},
		{"zero max attempts means one", 0, testkit.TransientErr("a")},
		{"negative max attempts means one", -3, testkit.TransientErr("a")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := testSettings(src("a", 0), src("b", 1))
			set.Retry.MaxAttempts = tc.maxAttempts
			f := newFixture(t, set)
			f.up.script("a", failStep(tc.err))
			_, err := f.g.Handle(context.Background(), newCall())
			if err != tc.err { //nolint:errorlint // the upstream's error itself must come back, not wrapped
				t.Errorf("err = %v (%T), want the upstream's error itself", err, err)
			}
			if calls := f.up.callLog(); len(calls) != 1 {
				t.Errorf("upstream calls = %v, want exactly one", calls)
			}
		})
	}
}

func TestEngineReturnsRejectedAndInvalidAtOnceWithoutChargingTheBreaker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		errOf func(string) error
	}{
		{"request rejected", testkit.RejectedErr},
		{"result invalid", testkit.InvalidErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := testSettings(src("a", 0), src("b", 1))
			set.Breaker.FailThreshold = 1
			set.Breaker.MinCalls, set.Breaker.FailRate, set.Breaker.Window = 2, 0.5, time.Minute
			f := newFixture(t, set)
			want := tc.errOf("a")
			f.up.script("a", failStep(want))
			for i := range 25 {
				_, err := f.g.Handle(context.Background(), newCall())
				if err != want { //nolint:errorlint // the upstream's error must come back unchanged, not wrapped
					t.Fatalf("call %d: err = %v, want the upstream's error unchanged", i, err)
				}
			}
			if calls := f.up.callLog(); len(calls) != 25 || slices.Contains(calls, "b") {
				t.Errorf("upstream calls = %v, want 25 calls to a and no switch", calls)
			}
			snap := f.snapshot(t, "a")
			if snap.State != core.StateClosed || snap.ConsecutiveFailures != 0 || snap.Opens != 0 {
				t.Errorf("breaker = %+v, want closed with 0 consecutive failures", snap)
			}
			st := f.status(t, "a")
			if st.Health != 1 {
				t.Errorf("health = %v, want 1: a bad result is not a bad service", st.Health)
			}
			if st.Usage.InFlight != 0 || st.InFlight != 0 {
				t.Errorf("in flight after the calls: limiter %d, source %d", st.Usage.InFlight, st.InFlight)
			}
		})
	}
}

func TestEngineRateLimitDoesNotConsumeBudgetNorCountForTheBreaker(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Retry.MaxAttempts = 1
		set.Breaker.FailThreshold = 1
		set.Backpressure.StallWindow = time.Minute
		f := newFixture(t, set, withLiveBreaker)
		f.up.script("a",
			failStep(testkit.RateLimitedErr("a", 0)), failStep(testkit.RateLimitedErr("a", 0)), failStep(testkit.RateLimitedErr("a", 0)), okStep())
		resp, err := f.g.Handle(context.Background(), newCall())
		if err != nil {
			t.Fatalf("three 429s used up a budget of one attempt: %v", err)
		}
		if !slices.Equal(resp.Attempts, []string{"a", "a", "a", "a"}) {
			t.Errorf("Attempts = %v", resp.Attempts)
		}
		if snap := f.snapshot(t, "a"); snap.State != core.StateClosed || snap.ConsecutiveFailures != 0 {
			t.Errorf("breaker = %+v, want closed with 0 consecutive failures", snap)
		}
		// AIMD: 4 → 2 → 1 → 1, then +1/1 on the success.
		if got := f.status(t, "a").AdaptiveLimit; got != 2 {
			t.Errorf("adaptive limit = %v, want 2", got)
		}
	})
}

func TestEngineRateLimitPrefersAnotherSource(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f := newFixture(t, testSettings(src("a", 0), src("b", 1)))
		f.up.script("a", failStep(testkit.RateLimitedErr("a", time.Hour)))
		start := time.Now()
		resp, err := f.g.Handle(context.Background(), newCall())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(resp.Attempts, []string{"a", "b"}) {
			t.Errorf("Attempts = %v, want [a b]", resp.Attempts)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("failover after a 429 took %v", d)
		}
		// The pushed-back source stays out of the next call too.
		resp, err = f.g.Handle(context.Background(), newCall())
		if err != nil || !slices.Equal(resp.Attempts, []string{"b"}) {
			t.Errorf("next call = (%v, %v), want Attempts [b]", resp, err)
		}
	})
}

// Design §4: a 429 waits max(Retry-After, backoff, the 1 s floor) before
// the source is tried again, not Retry-After plus another backoff.
func TestEnginePushbackWaitIsTheMaxOfRetryAfterAndBackoffNotTheirSum(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Retry.BackoffBase, set.Retry.BackoffMax = 400*time.Millisecond, 400*time.Millisecond
		f := newFixture(t, set, withLiveBreaker)
		f.up.script("a", failStep(testkit.RateLimitedErr("a", 1300*time.Millisecond)), okStep())
		start := time.Now()
		if _, err := f.g.Handle(context.Background(), newCall()); err != nil {
			t.Fatal(err)
		}
		// max(1.3 s, backoff ∈ [200ms, 400ms], 1 s) = 1.3 s; a backoff on top
		// would make it at least 1.5 s.
		if d := time.Since(start); d < 1300*time.Millisecond || d >= 1480*time.Millisecond {
			t.Errorf("retry after a 429 with Retry-After 1.3 s and backoff ≤ 400ms took %v; want 1.3 s", d)
		}
	})
}

func TestEngineSourceDeadOpensItsBreakerAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0), src("b", 1)))
	f.up.script("a", failStep(testkit.DeadErr("a")))
	resp, err := f.g.Handle(context.Background(), newCall())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Attempts, []string{"a", "b"}) {
		t.Errorf("Attempts = %v, want [a b]", resp.Attempts)
	}
	snap := f.snapshot(t, "a")
	if snap.State != core.StateOpen || snap.Opens != 1 {
		t.Errorf("breaker of a = %+v, want open after one SourceDead (threshold %d)", snap, f.set.Breaker.FailThreshold)
	}
	resp, err = f.g.Handle(context.Background(), newCall())
	if err != nil || !slices.Equal(resp.Attempts, []string{"b"}) {
		t.Errorf("next call = (%v, %v), want only b", resp, err)
	}
	if calls := f.up.callLog(); !slices.Equal(calls, []string{"a", "b", "b"}) {
		t.Errorf("upstream calls = %v", calls)
	}
}

func TestEngineConsecutiveFailuresOpenTheBreaker(t *testing.T) {
	t.Parallel()
	set := testSettings(src("a", 0))
	set.Retry.MaxAttempts = 1
	set.Breaker.FailThreshold = 3
	f := newFixture(t, set)
	f.up.script("a", failStep(testkit.TransientErr("a")))
	for range 3 {
		if _, err := f.g.Handle(context.Background(), newCall()); err == nil {
			t.Fatal("scripted failure succeeded")
		}
	}
	if snap := f.snapshot(t, "a"); snap.State != core.StateOpen {
		t.Fatalf("breaker = %+v, want open after 3 failures", snap)
	}
	_, err := f.g.Handle(context.Background(), newCall())
	if !errors.Is(err, core.ErrCircuitOpen) {
		t.Errorf("err = %v, want circuit open", err)
	}
	if n := len(f.up.callLog()); n != 3 {
		t.Errorf("upstream called %d times, want 3", n)
	}
}

func TestEngineAllBreakersOpenReturnsCircuitOpenWithoutCallingUpstream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0), src("b", 1)))
	f.openBreaker(t, "a")
	f.brClock.Advance(5 * time.Second)
	f.openBreaker(t, "b")
	f.brClock.Advance(10 * time.Second)
	// a has 15s of cooldown left, b 20s.
	_, err := f.g.Handle(context.Background(), newCall())
	ue := asUnavailable(t, err)
	if ue.Reason != core.ReasonCircuitOpen || !errors.Is(err, core.ErrCircuitOpen) || errors.Is(err, core.ErrAllSourcesExhausted) {
		t.Errorf("err = %v, want circuit_open matching ErrCircuitOpen only", err)
	}
	if ue.RetryAfter <= 14*time.Second || ue.RetryAfter > 15*time.Second {
		t.Errorf("RetryAfter = %v, want ≈ 15s (the shortest remaining cooldown)", ue.RetryAfter)
	}
	if want := map[string]core.Reason{"a": core.ReasonCircuitOpen, "b": core.ReasonCircuitOpen}; !maps.Equal(ue.PerSource, want) {
		t.Errorf("PerSource = %v, want %v", ue.PerSource, want)
	}
	if calls := f.up.callLog(); len(calls) != 0 {
		t.Errorf("upstream called %v with every breaker open", calls)
	}
}

func TestEngineQuotaFullFailFastReturnsRateLimitedAtOnce(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		limits := core.Limits{MaxConcurrency: 1}
		a := src("a", 0)
		a.Limits = limits
		set := testSettings(a)
		set.QuotaFull = core.QuotaFullFailFast
		set.Backpressure.PollInterval = time.Second
		f := newFixture(t, set)
		held := f.holdSlot(t, "a", limits)
		start := time.Now()
		_, err := f.g.Handle(context.Background(), newCall())
		ue := asUnavailable(t, err)
		if ue.Reason != core.ReasonRateLimited || !errors.Is(err, core.ErrAllSourcesExhausted) {
			t.Errorf("err = %v, want rate_limited", err)
		}
		if ue.PerSource["a"] != core.ReasonRateLimited {
			t.Errorf("PerSource = %v", ue.PerSource)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("fail_fast took %v (poll interval 1s)", d)
		}
		if calls := f.up.callLog(); len(calls) != 0 {
			t.Errorf("upstream called %v with the quota full", calls)
		}
		if err := f.lim.Release(context.Background(), held, core.Settlement{Kind: core.SettleRefund}); err != nil {
			t.Fatal(err)
		}
		if u := f.usage(t, "a"); u.InFlight != 0 {
			t.Errorf("a refused acquire left %d in flight", u.InFlight)
		}
	})
}

func TestEngineQuotaRefusalFailsOverToAnotherSource(t *testing.T) {
	t.Parallel()
	limits := core.Limits{MaxConcurrency: 1}
	a := src("a", 0)
	a.Limits = limits
	set := testSettings(a, src("b", 1))
	set.QuotaFull = core.QuotaFullFailFast
	f := newFixture(t, set)
	f.holdSlot(t, "a", limits)
	resp, err := f.g.Handle(context.Background(), newCall())
	if err != nil || !slices.Equal(resp.Attempts, []string{"b"}) {
		t.Errorf("= (%v, %v), want an answer from b", resp, err)
	}
}

func TestEngineQuotaWaitStallsAfterTheStallWindow(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		limits := core.Limits{MaxConcurrency: 1}
		a := src("a", 0)
		a.Limits = limits
		set := testSettings(a)
		set.QuotaFull = core.QuotaFullWait
		set.Backpressure.StallWindow = 150 * time.Millisecond
		set.Backpressure.PollInterval = 10 * time.Millisecond
		f := newFixture(t, set)
		f.holdSlot(t, "a", limits)
		start := time.Now()
		_, err := f.g.Handle(context.Background(), newCall())
		elapsed := time.Since(start)
		ue := asUnavailable(t, err)
		if ue.Reason != core.ReasonStalled || !errors.Is(err, core.ErrAllSourcesExhausted) {
			t.Errorf("err = %v, want stalled", err)
		}
		if elapsed < 100*time.Millisecond || elapsed > 2*time.Second {
			t.Errorf("stalled after %v, want about the 150ms stall window", elapsed)
		}
		if calls := f.up.callLog(); len(calls) != 0 {
			t.Errorf("upstream called %v", calls)
		}
	})
}

func TestEngineQuotaWaitResumesWhenQuotaFrees(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		limits := core.Limits{MaxConcurrency: 1}
		a := src("a", 0)
		a.Limits = limits
		set := testSettings(a)
		set.Backpressure.PollInterval = 5 * time.Millisecond
		f := newFixture(t, set)
		held := f.holdSlot(t, "a", limits)
		released := make(chan struct{})
		time.AfterFunc(60*time.Millisecond, func() { // fake time: the bubble's clock
			defer close(released)
			_ = f.lim.Release(context.Background(), held, core.Settlement{Kind: core.SettleRefund})
		})
		start := time.Now()
		resp, err := f.g.Handle(context.Background(), newCall())
		<-released
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("answered after %v, before the quota freed", d)
		}
		if !slices.Equal(resp.Attempts, []string{"a"}) {
			t.Errorf("Attempts = %v", resp.Attempts)
		}
	})
}

func TestEngineBackendFailureNeverCallsUpstream(t *testing.T) {
	t.Parallel()
	backendErr := errors.New("redis: connection refused")
	tests := []struct {
		name        string
		limiter     core.Limiter
		breaker     core.Breaker
		wantBackend string
		wantOp      string
	}{
		{"limiter acquire fails", failingLimiter{backendErr}, memory.NewBreaker(), "limiter", "acquire"},
		{"breaker allow fails", memory.NewLimiter(), failingBreaker{backendErr}, "breaker", "allow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newScriptedUpstream()
			g, err := New(Config{
				Settings: testSettings(src("a", 0), src("b", 1)), Upstream: up, Limiter: tc.limiter, Breaker: tc.breaker,
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = g.Handle(context.Background(), newCall())
			var ge *core.GovernanceBackendError
			if !errors.As(err, &ge) {
				t.Fatalf("err = %v (%T), want GovernanceBackendError", err, err)
			}
			if ge.Backend != tc.wantBackend || ge.Op != tc.wantOp || !errors.Is(err, backendErr) || !errors.Is(err, core.ErrGateway) {
				t.Errorf("err = %+v", ge)
			}
			if calls := up.callLog(); len(calls) != 0 {
				t.Errorf("upstream called %v unprotected", calls)
			}
		})
	}
}

func TestEngineLimiterFailureGivesBackAHeldProbe(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0)))
	f.openBreaker(t, "a")
	f.brClock.Advance(time.Minute)
	g, err := New(Config{
		Settings: f.set, Upstream: f.up, Limiter: failingLimiter{errors.New("down")}, Breaker: f.br,
	})
	if err != nil {
		t.Fatal(err)
	}
	var ge *core.GovernanceBackendError
	if _, err := g.Handle(context.Background(), newCall()); !errors.As(err, &ge) {
		t.Fatalf("err = %v, want GovernanceBackendError", err)
	}
	if snap := f.snapshot(t, "a"); snap.State != core.StateHalfOpen || snap.ProbeHeld {
		t.Errorf("breaker = %+v, want half-open with the probe given back", snap)
	}
}

func TestEngineCancelledBeforeStartingCallsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.g.Handle(ctx, newCall())
	if !errors.Is(err, context.Canceled) || !errors.Is(err, core.ErrGateway) {
		t.Errorf("err = %v, want context.Canceled and ErrGateway", err)
	}
	if calls := f.up.callLog(); len(calls) != 0 {
		t.Errorf("upstream called %v", calls)
	}
}

func TestEngineCancellationDuringAnAttemptReturnsPromptlyAndFreesEverything(t *testing.T) {
	t.Parallel()
	for _, probe := range []bool{false, true} {
		name := "closed circuit"
		if probe {
			name = "half-open probe"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			inBubble(t, func(t *testing.T) {
				a := src("a", 0)
				a.Limits = core.Limits{MaxConcurrency: 4}
				f := newFixture(t, testSettings(a, src("b", 1)))
				if probe {
					f.openBreaker(t, "a")
					f.brClock.Advance(time.Minute)
				}
				f.up.script("a", hangStep())
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := f.g.Handle(ctx, newCall())
					done <- err
				}()
				waitStarted(t, f.up)
				st := f.status(t, "a")
				if st.InFlight != 1 || st.Usage.InFlight != 1 {
					t.Errorf("during the attempt: source in-flight %d, limiter in-flight %d, want 1 and 1", st.InFlight, st.Usage.InFlight)
				}
				if probe && !st.Breaker.ProbeHeld {
					t.Errorf("during the probe attempt the breaker shows no probe held: %+v", st.Breaker)
				}
				cancelled := time.Now()
				cancel()
				var err error
				select {
				case err = <-done:
				case <-time.After(2 * time.Second):
					t.Fatal("Handle did not return after cancellation")
				}
				if d := time.Since(cancelled); d > 500*time.Millisecond {
					t.Errorf("returned %v after cancellation", d)
				}
				if !errors.Is(err, context.Canceled) || !errors.Is(err, core.ErrGateway) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
				st = f.status(t, "a")
				if st.InFlight != 0 || st.Usage.InFlight != 0 || st.Breaker.ProbeHeld {
					t.Errorf("after cancellation: source in-flight %d, limiter in-flight %d, probe held %v",
						st.InFlight, st.Usage.InFlight, st.Breaker.ProbeHeld)
				}
				if probe && st.Breaker.State != core.StateHalfOpen {
					t.Errorf("a cancelled probe gave a verdict: %+v", st.Breaker)
				}
				if !probe && (st.Breaker.State != core.StateClosed || st.Breaker.ConsecutiveFailures != 0) {
					t.Errorf("a cancelled attempt counted for the breaker: %+v", st.Breaker)
				}
				if calls := f.up.callLog(); !slices.Equal(calls, []string{"a"}) {
					t.Errorf("upstream calls = %v: a cancelled call must not be retried", calls)
				}
			})
		})
	}
}

func TestEngineDeadlineDuringAnAttemptMatchesDeadlineExceeded(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f := newFixture(t, testSettings(src("a", 0)))
		f.up.script("a", hangStep())
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := f.g.Handle(ctx, newCall())
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, core.ErrGateway) {
			t.Errorf("err = %v, want DeadlineExceeded", err)
		}
		if u := f.usage(t, "a"); u.InFlight != 0 {
			t.Errorf("limiter in-flight %d", u.InFlight)
		}
	})
}

func TestEngineCancellationDuringBackoffReturnsPromptly(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Retry.BackoffBase, set.Retry.BackoffMax = 10*time.Second, 10*time.Second
		f := newFixture(t, set)
		f.up.script("a", failStep(testkit.TransientErr("a")), okStep())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := f.g.Handle(ctx, newCall())
			done <- err
		}()
		waitStarted(t, f.up)
		synctest.Wait() // the call is asleep in its 5–10s backoff
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Handle did not return after cancellation during backoff")
		}
		if calls := f.up.callLog(); len(calls) != 1 {
			t.Errorf("upstream calls = %v, want 1", calls)
		}
		if st := f.status(t, "a"); st.InFlight != 0 || st.Usage.InFlight != 0 {
			t.Errorf("in flight after cancellation: %+v", st)
		}
	})
}

func TestEngineCancellationDuringAQuotaWaitReturnsPromptly(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		limits := core.Limits{MaxConcurrency: 1}
		a := src("a", 0)
		a.Limits = limits
		set := testSettings(a)
		set.Backpressure.StallWindow = time.Minute
		set.Backpressure.PollInterval = 20 * time.Millisecond
		f := newFixture(t, set)
		held := f.holdSlot(t, "a", limits)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := f.g.Handle(ctx, newCall())
			done <- err
		}()
		synctest.Wait() // the call is waiting for quota
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Handle did not return after cancellation during a quota wait")
		}
		if u := f.usage(t, "a"); u.InFlight != 1 {
			t.Errorf("limiter in-flight = %d, want only the slot held by the test", u.InFlight)
		}
		_ = f.lim.Release(context.Background(), held, core.Settlement{Kind: core.SettleRefund})
		if u := f.usage(t, "a"); u.InFlight != 0 {
			t.Errorf("limiter in-flight = %d after releasing the held slot", u.InFlight)
		}
		if snap := f.snapshot(t, "a"); snap.ProbeHeld {
			t.Errorf("probe held: %+v", snap)
		}
		if calls := f.up.callLog(); len(calls) != 0 {
			t.Errorf("upstream calls = %v", calls)
		}
	})
}

func TestEngineGivesBackAHalfOpenProbeThatIsNotUsed(t *testing.T) {
	t.Parallel()
	t.Run("refused by the limiter", func(t *testing.T) {
		t.Parallel()
		inBubble(t, func(t *testing.T) {
			limits := core.Limits{MaxConcurrency: 1}
			a := src("a", 0)
			a.Limits = limits
			set := testSettings(a)
			set.QuotaFull = core.QuotaFullFailFast
			f := newFixture(t, set)
			f.openBreaker(t, "a")
			f.brClock.Advance(time.Minute)
			f.holdSlot(t, "a", limits)
			_, err := f.g.Handle(context.Background(), newCall())
			if ue := asUnavailable(t, err); ue.Reason != core.ReasonRateLimited {
				t.Fatalf("err = %v, want rate_limited", err)
			}
			if snap := f.snapshot(t, "a"); snap.State != core.StateHalfOpen || snap.ProbeHeld {
				t.Errorf("breaker = %+v, want half-open with the probe free", snap)
			}
			adm, err := f.br.Allow(context.Background(), testScope, "a", f.set.Breaker)
			if err != nil || !adm.Allowed || !adm.Probe {
				t.Errorf("next caller's Allow = %+v, %v; want the probe", adm, err)
			}
		})
	})
	t.Run("adaptive limit full", func(t *testing.T) {
		t.Parallel()
		inBubble(t, func(t *testing.T) {
			f := newFixture(t, testSettings(src("a", 0)))
			f.openBreaker(t, "a")
			f.brClock.Advance(time.Minute)
			s := f.g.sourceNamed("a")
			s.inflight.Store(int64(s.aimdLimit()))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Millisecond)
			defer cancel()
			if _, err := f.g.Handle(ctx, newCall()); err == nil {
				t.Fatal("call succeeded with the adaptive limit full")
			}
			s.inflight.Store(0)
			if snap := f.snapshot(t, "a"); snap.ProbeHeld {
				t.Errorf("breaker = %+v, want the probe given back", snap)
			}
			if calls := f.up.callLog(); len(calls) != 0 {
				t.Errorf("upstream calls = %v", calls)
			}
		})
	})
}

func TestEngineProbeSuccessClosesTheBreaker(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0)))
	f.openBreaker(t, "a")
	f.brClock.Advance(time.Minute)
	resp, err := f.g.Handle(context.Background(), newCall())
	if err != nil || !slices.Equal(resp.Attempts, []string{"a"}) {
		t.Fatalf("= (%v, %v)", resp, err)
	}
	if snap := f.snapshot(t, "a"); snap.State != core.StateClosed {
		t.Errorf("breaker = %+v, want closed after a probe success", snap)
	}
}

func TestEngineDeadlineShorterThanTheNextBackoffReturnsBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Retry.BackoffBase, set.Retry.BackoffMax = 5*time.Second, 5*time.Second
		f := newFixture(t, set)
		last := testkit.TransientErr("a")
		f.up.script("a", failStep(last), okStep())
		const budget = 400 * time.Millisecond
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		_, err := f.g.Handle(ctx, newCall())
		// The backoff cannot fit, so the call returns at once, well before the deadline.
		if d := time.Since(start); d >= budget/2 {
			t.Errorf("returned after %v, not before the %v deadline", d, budget)
		}
		if err == nil || !errors.Is(err, core.ErrGateway) {
			t.Fatalf("err = %v, want a gateway error", err)
		}
		if !errors.Is(err, last) {
			t.Errorf("err = %v, want it to wrap the last attempt's error", err)
		}
		if calls := f.up.callLog(); len(calls) != 1 {
			t.Errorf("upstream calls = %v, want 1", calls)
		}
	})
}

func TestEngineSourcesReportsBreakerHealthAndLimits(t *testing.T) {
	t.Parallel()
	a := weighted("a", 0, 0)
	a.Limits = core.Limits{MaxConcurrency: 100, RPM: 60, TPM: 1000}
	a.EstTokens = 10
	a.Region = "eu"
	b := weighted("b", 1, 2.5)
	f := newFixture(t, testSettings(a, b))
	f.up.script("a", failStep(testkit.DeadErr("a")))
	if _, err := f.g.Handle(context.Background(), newCall()); err != nil {
		t.Fatal(err)
	}
	all := f.g.Sources(context.Background())
	if len(all) != 2 || all[0].Name != "a" || all[1].Name != "b" {
		t.Fatalf("Sources = %+v, want a then b", all)
	}
	sa, sb := all[0], all[1]
	if sa.Breaker.State != core.StateOpen || sa.Breaker.Opens != 1 || sa.Breaker.RetryAfter != 30*time.Second {
		t.Errorf("a breaker = %+v, want open for 30s", sa.Breaker)
	}
	if sb.Breaker.State != core.StateClosed {
		t.Errorf("b breaker = %+v, want closed", sb.Breaker)
	}
	if math.Abs(sa.Health-0.8) > 1e-3 || sb.Health != 1 {
		t.Errorf("health a=%v b=%v, want 0.8 and 1", sa.Health, sb.Health)
	}
	if sa.Limits != a.Limits || sb.Limits != (core.Limits{}) {
		t.Errorf("limits a=%+v b=%+v", sa.Limits, sb.Limits)
	}
	if sa.AdaptiveLimit != aimdStart || sb.AdaptiveLimit != aimdStart+slowStartGrowth { // b's success in slow start adds slowStartGrowth
		t.Errorf("adaptive limits a=%v b=%v, want %v and %v", sa.AdaptiveLimit, sb.AdaptiveLimit, aimdStart, aimdStart+slowStartGrowth)
	}
	if sa.Usage.Requests != 1 || sa.Usage.Tokens != 0 || sa.Usage.InFlight != 0 {
		t.Errorf("a usage = %+v, want 1 request, tokens refunded, none in flight", sa.Usage)
	}
	if sa.Provider != "prov" || sa.Model != "model-a" || sa.BaseURL != a.BaseURL || sa.Region != "eu" || sa.Priority != 0 {
		t.Errorf("a identity = %+v", sa)
	}
	if sa.Weight != 1 || sb.Weight != 2.5 || sb.Priority != 1 {
		t.Errorf("weights a=%v b=%v, want a zero weight to default to 1", sa.Weight, sb.Weight)
	}
	if sa.Err != nil || sb.Err != nil {
		t.Errorf("errors: %v, %v", sa.Err, sb.Err)
	}
}

func TestEngineSourcesReportsBackendReadFailures(t *testing.T) {
	t.Parallel()
	limErr, brErr := errors.New("limiter down"), errors.New("breaker down")
	g, err := New(Config{
		Settings: testSettings(src("a", 0)), Upstream: newScriptedUpstream(),
		Limiter: failingLimiter{limErr}, Breaker: failingBreaker{brErr},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := g.Sources(context.Background())
	if len(st) != 1 || !errors.Is(st[0].Err, limErr) || !errors.Is(st[0].Err, brErr) {
		t.Errorf("Sources = %+v, want both backend errors", st)
	}
}

func TestEngineResetClosesTheBreakerAndClearsTheHold(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0), src("b", 1)))
	f.up.script("a", failStep(testkit.DeadErr("a")), okStep())
	if _, err := f.g.Handle(context.Background(), newCall()); err != nil {
		t.Fatal(err)
	}
	if snap := f.snapshot(t, "a"); snap.State != core.StateOpen {
		t.Fatalf("breaker = %+v, want open", snap)
	}
	if err := f.g.Reset(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if snap := f.snapshot(t, "a"); snap.State != core.StateClosed {
		t.Errorf("breaker after Reset = %+v, want closed", snap)
	}
	if h := f.status(t, "a").Health; h != 1 {
		t.Errorf("health after Reset = %v, want 1", h)
	}
	resp, err := f.g.Handle(context.Background(), newCall())
	if err != nil || !slices.Equal(resp.Attempts, []string{"a"}) {
		t.Errorf("call after Reset = (%v, %v), want the preferred source a straight away", resp, err)
	}
}

func TestEngineResetErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testSettings(src("a", 0)))
	if err := f.g.Reset(context.Background(), "nope"); err == nil {
		t.Error("Reset of an unknown source succeeded")
	}
	backendErr := errors.New("down")
	g, err := New(Config{
		Settings: testSettings(src("a", 0)), Upstream: newScriptedUpstream(),
		Limiter: memory.NewLimiter(), Breaker: failingBreaker{backendErr},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ge *core.GovernanceBackendError
	if err := g.Reset(context.Background(), "a"); !errors.As(err, &ge) || ge.Op != "reset" || !errors.Is(err, backendErr) {
		t.Errorf("Reset = %v, want a GovernanceBackendError", err)
	}
}

// A failing release is warned about while it lasts, at most once per
// warnEvery: not once for the process's life (an outage that comes back
// must show in the logs), not once per call (it would flood them).
func TestEngineWarnsAboutFailingSettlementAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	h := testkit.NewLogsFrom(slog.LevelWarn)
	clk := backendtest.NewFakeClock(testkit.Epoch)
	set := testSettings(src("a", 0))
	lim := &releaseFailingLimiter{Limiter: memory.NewLimiter()}
	g, err := New(Config{
		Settings: set, Upstream: newScriptedUpstream(), Limiter: lim, Breaker: memory.NewBreaker(),
		Logger: slog.New(h), Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := func(n int) {
		for range n {
			if _, err := g.Handle(context.Background(), newCall()); err != nil {
				t.Fatalf("a failing release broke the call: %v", err)
			}
		}
	}
	calls(5)
	if n := h.Count(); n != 1 {
		t.Errorf("5 calls in one interval logged %d warnings, want 1", n)
	}
	clk.Advance(warnEvery / 2)
	calls(3)
	if n := h.Count(); n != 1 {
		t.Errorf("after half an interval: %d warnings, want still 1", n)
	}
	clk.Advance(warnEvery)
	calls(3)
	if n := h.Count(); n != 2 {
		t.Errorf("after another interval: %d warnings, want 2 (the failure goes on)", n)
	}
}

type releaseFailingLimiter struct{ core.Limiter }

func (l *releaseFailingLimiter) Release(context.Context, core.Permit, core.Settlement) error {
	return errors.New("release failed")
}

// After a storm of concurrent calls with every outcome, cancellations and
// opening circuits, nothing is left in flight and no probe is held.
func TestEngineStormLeavesNothingInFlight(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		names := []string{"a", "b", "c"}
		var srcs []core.SourceConfig
		for i, n := range names {
			s := src(n, i%2)
			s.Limits = core.Limits{MaxConcurrency: 3}
			srcs = append(srcs, s)
		}
		set := testSettings(srcs...)
		set.Global = core.Limits{MaxConcurrency: 6}
		set.Breaker = core.BreakerConfig{FailThreshold: 3, Cooldown: 15 * time.Millisecond, MaxCooldown: 50 * time.Millisecond, ProbeTTL: time.Second}
		set.Backpressure = core.BackpressureSettings{StallWindow: 300 * time.Millisecond, PollInterval: 2 * time.Millisecond}
		up := upstreamFunc(func(ctx context.Context, src *core.SourceConfig, _ *core.Call) (*core.LLMResponse, error) {
			d := time.Duration(rand.IntN(3)) * time.Millisecond
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
			switch rand.IntN(8) {
			case 0:
				return nil, testkit.TransientErr(src.Name)
			case 1:
				return nil, testkit.RateLimitedErr(src.Name, time.Millisecond)
			case 2:
				return nil, testkit.DeadErr(src.Name)
			case 3:
				return nil, testkit.InvalidErr(src.Name)
			case 4:
				return nil, testkit.TimeoutErr(src.Name)
			}
			return &core.LLMResponse{Content: "ok", FinishReason: "stop"}, nil
		})
		lim, br := memory.NewLimiter(), memory.NewBreaker()
		g, err := New(Config{Settings: set, Upstream: up, Limiter: lim, Breaker: br})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := range 20 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+(w+i)%40)*time.Millisecond)
					resp, err := g.Handle(ctx, newCall())
					cancel()
					if err == nil && resp == nil {
						t.Error("nil response without error")
					}
					if err != nil && !errors.Is(err, core.ErrGateway) {
						t.Errorf("error outside the taxonomy: %v", err)
					}
				}
			})
		}
		wg.Wait()
		for _, st := range g.Sources(context.Background()) {
			if st.InFlight != 0 || st.Usage.InFlight != 0 || st.Breaker.ProbeHeld {
				t.Errorf("%s after the storm: source in-flight %d, limiter in-flight %d, probe held %v",
					st.Name, st.InFlight, st.Usage.InFlight, st.Breaker.ProbeHeld)
			}
		}
		if u, _ := lim.Usage(context.Background(), testScope, ""); u.InFlight != 0 {
			t.Errorf("global in-flight %d after the storm", u.InFlight)
		}
	})
}

// The caller's deadline is wall-clock time; an injected Clock (used for
// health and hold bookkeeping) must not change how it is honoured.
func TestEngineHonoursTheDeadlineWithAnInjectedClock(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Retry.BackoffBase, set.Retry.BackoffMax = 5*time.Second, 5*time.Second
		f := newFixture(t, set, withClock(backendtest.NewFakeClock(testkit.Epoch)))
		f.up.script("a", failStep(testkit.TransientErr("a")), okStep())
		const budget = 400 * time.Millisecond
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		_, err := f.g.Handle(ctx, newCall())
		// The backoff cannot fit, so the call returns at once, well before the deadline.
		if d := time.Since(start); d >= budget/2 {
			t.Errorf("returned after %v (err %v), not before the %v deadline: the 2.5–5s backoff cannot fit", d, err, budget)
		}
	})
}

// Design §4: a waiting call gives up only when its wait exceeds the stall
// window and no progress happened anywhere in the scope.
func TestEngineStallsOnlyWithoutProgressAnywhereInTheScope(t *testing.T) {
	t.Parallel()
	const window = 100 * time.Millisecond
	tests := []struct {
		name        string
		waited      time.Duration
		progressAgo time.Duration
		wantStalled bool
	}{
		{"long wait, no recent progress", time.Second, time.Second, true},
		{"long wait, progress elsewhere just now", time.Second, 10 * time.Millisecond, false},
		{"short wait, no recent progress", 10 * time.Millisecond, time.Second, false},
		{"progress exactly one window ago", time.Second, window, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inBubble(t, func(t *testing.T) {
				set := testSettings(src("a", 0))
				set.Backpressure.StallWindow = window
				set.Backpressure.PollInterval = 5 * time.Millisecond
				g := newFixture(t, set).g
				now := time.Now()
				g.sourceNamed("a").setHold(now, now.Add(5*time.Millisecond), holdRateLimited)
				g.lastProgress.Store(now.Add(-tc.progressAgo).UnixNano())
				r := &run{e: g, call: newCall(), waited: tc.waited, quotaRefused: true}
				wait, _, err := r.nothingEligible(context.Background(), now)
				if tc.wantStalled {
					if ue := asUnavailable(t, err); ue.Reason != core.ReasonStalled {
						t.Errorf("err = %v, want stalled", err)
					}
					return
				}
				if err != nil || wait <= 0 || wait > 5*time.Millisecond {
					t.Errorf("= (%v, %v), want to wait up to the poll interval", wait, err)
				}
			})
		})
	}
}

// probeTakenElsewhere has another process take source "a"'s probe: the
// source dies, the cooldown passes, the other process is granted it.
func probeTakenElsewhere(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	cfg := f.g.sources[0].breaker
	adm, _ := f.br.Allow(ctx, testScope, "a", cfg)
	if _, err := f.br.Record(ctx, testScope, "a", adm, core.OutcomeDead, cfg); err != nil {
		t.Fatal(err)
	}
	f.brClock.Advance(cfg.Cooldown + time.Second)
	if probe, _ := f.br.Allow(ctx, testScope, "a", cfg); !probe.Probe {
		t.Fatal("setup: no probe granted")
	}
}

func TestARefusalWhileAProbeIsOutBlocksTheSourceOnlyBriefly(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Backpressure.PollInterval = 50 * time.Millisecond
		f := newFixture(t, set)
		ctx := context.Background()
		probeTakenElsewhere(t, f)
		r := &run{e: f.g, call: &core.Call{}}
		now := time.Now()
		if _, admitted, err := r.admit(ctx, 0); admitted || err != nil {
			t.Fatalf("admitted=%v err=%v, want a refusal", admitted, err)
		}
		kind, until := f.g.sources[0].hold(now)
		if kind != holdCircuitOpen || until.Sub(now) > 100*time.Millisecond {
			t.Fatalf("hold %v until +%v; want a short block (the poll interval), not the probe lease", kind, until.Sub(now))
		}
	})
}

// TestAProbeWithoutLeaseExpiryBlocksTheSourceForThePollInterval: with
// PROBE_TTL 0 the probe's lease never expires and the breaker's refusal
// carries RetryAfter 0 while it is out; the source is then looked at again
// after the poll interval, and a call that finds nothing else ends with
// circuit_open telling its caller the same — never a 1 ms hold that has
// the call ask the breaker again and again.
func TestAProbeWithoutLeaseExpiryBlocksTheSourceForThePollInterval(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Breaker.ProbeTTL = 0
		set.Backpressure.PollInterval = 50 * time.Millisecond
		f := newFixture(t, set)
		ctx := context.Background()
		probeTakenElsewhere(t, f)
		now := time.Now()
		_, err := f.g.Handle(ctx, newCall())
		ue := asUnavailable(t, err)
		if ue.Reason != core.ReasonCircuitOpen || ue.RetryAfter != set.Backpressure.PollInterval {
			t.Errorf("err = %v (RetryAfter %v), want circuit_open after the %v poll interval", err, ue.RetryAfter, set.Backpressure.PollInterval)
		}
		if kind, until := f.g.sources[0].hold(now); kind != holdCircuitOpen || until.Sub(now) != set.Backpressure.PollInterval {
			t.Errorf("hold %v until +%v, want circuit_open for the poll interval", kind, until.Sub(now))
		}
	})
}

func TestCallsWaitingForAnAdaptiveSlotAreWokenWhenOneFrees(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Backpressure.PollInterval = 5 * time.Second // a poll would be far too slow
		set.Backpressure.StallWindow = 30 * time.Second
		up := upstreamFunc(func(ctx context.Context, _ *core.SourceConfig, _ *core.Call) (*core.LLMResponse, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			return &core.LLMResponse{Content: "ok", FinishReason: "stop"}, nil
		})
		g, err := New(Config{Settings: set, Upstream: up, Limiter: memory.NewLimiter(), Breaker: memory.NewBreaker()})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for range 12 { // the adaptive limit starts at 8: four calls must wait
			wg.Go(func() {
				if _, err := g.Handle(context.Background(), newCall()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Fatalf("12 calls of 100 ms over 8 slots took %v: waiters were not woken when slots freed", took)
		}
	})
}

// TestACallWaitsForAnAdaptiveSlotWithinADeadlineShorterThanThePoll: a
// call that finds its source at its adaptive limit waits for a slot until
// its deadline, however long the poll interval is: the poll bounds the
// wait, it does not say when a slot frees, so it is no reason to end the
// call at once. Only when no slot frees before the deadline does the call
// end, with its context's error.
func TestACallWaitsForAnAdaptiveSlotWithinADeadlineShorterThanThePoll(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Backpressure.PollInterval = 5 * time.Second
		set.Backpressure.StallWindow = 30 * time.Second
		f := newFixture(t, set, withLiveBreaker)
		f.up.script("a", step{delay: 100 * time.Millisecond})
		var wg sync.WaitGroup
		errs := make([]error, 6) // the adaptive limit starts at 4: two calls must wait
		for i := range errs {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, errs[i] = f.g.Handle(ctx, newCall())
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("call %d: %v, want an answer once a slot freed, before the 1 s deadline", i, err)
			}
		}

		// No slot frees before the deadline: the call ends with it, not before.
		s := f.g.sourceNamed("a")
		s.inflight.Store(int64(s.aimdLimit()))
		defer s.inflight.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := f.g.Handle(ctx, newCall())
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("err = %v after %v, want the deadline's error after 1 s", err, time.Since(start))
		}
	})
}

// TestADeadProbeHoldsItsSourceForTheCircuitsDoubledCooldown: a probe that
// finds the source still dead re-opens its circuit for twice the cooldown;
// the source's hold lasts as long, so the call's circuit_open error and
// the next call's tell the caller the remaining cooldown, not the first
// one.
func TestADeadProbeHoldsItsSourceForTheCircuitsDoubledCooldown(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		f := newFixture(t, set, withLiveBreaker)
		f.up.script("a", failStep(testkit.DeadErr("a")))
		if _, err := f.g.Handle(context.Background(), newCall()); !errors.Is(err, core.ErrCircuitOpen) {
			t.Fatalf("err = %v, want circuit_open", err)
		}
		time.Sleep(set.Breaker.Cooldown + time.Second)
		for i, name := range []string{"the probe's call", "the next call"} {
			_, err := f.g.Handle(context.Background(), newCall())
			ue := asUnavailable(t, err)
			if want := 2 * set.Breaker.Cooldown; ue.Reason != core.ReasonCircuitOpen || ue.RetryAfter != want {
				t.Errorf("%s: err = %v (RetryAfter %v), want circuit_open after the doubled cooldown %v", name, err, ue.RetryAfter, want)
			}
			if calls := f.up.callLog(); len(calls) != 2 {
				t.Errorf("after call %d the upstream was asked %v, want twice (the first call and the probe)", i+2, calls)
			}
		}
	})
}

// waitObserver records the waits reported to the Observer.
type waitObserver struct {
	recordingObserver
	mu    sync.Mutex
	waits []time.Duration
}

func (o *waitObserver) Waited(_ string, d time.Duration) {
	o.mu.Lock()
	o.waits = append(o.waits, d)
	o.mu.Unlock()
}

// TestEngineAQuotaWaitCutByCancellationIsObserved: a call waiting for
// quota when its caller gives up has waited all the same; the Observer
// (limiter_wait_seconds) is told, as it is of a queue stay so ended.
func TestEngineAQuotaWaitCutByCancellationIsObserved(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		limits := core.Limits{MaxConcurrency: 1}
		a := src("a", 0)
		a.Limits = limits
		set := testSettings(a)
		set.Backpressure.StallWindow = 10 * time.Minute
		set.Backpressure.PollInterval = time.Minute
		obs := &waitObserver{}
		f := newFixture(t, set, func(cfg *Config) { cfg.Observer = obs })
		held := f.holdSlot(t, "a", limits)
		defer func() { _ = f.lim.Release(context.Background(), held, core.Settlement{Kind: core.SettleRefund}) }()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(5*time.Second, cancel) // within the first one-minute poll
		if _, err := f.g.Handle(ctx, newCall()); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if len(obs.waits) != 1 || obs.waits[0] != 5*time.Second {
			t.Errorf("waits observed %v, want [5s]", obs.waits)
		}
	})
}

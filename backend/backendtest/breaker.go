package backendtest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// SuiteBreakerConfig is the configuration the breaker suite starts from;
// subtests change single fields. It is the documented default of every field
// with a ProbeTTL of one minute.
func SuiteBreakerConfig() core.BreakerConfig {
	return core.BreakerConfig{
		FailThreshold:     5,
		Cooldown:          30 * time.Second,
		MaxCooldown:       300 * time.Second,
		ProbeTTL:          60 * time.Second,
		MinCalls:          20,
		FailRate:          0.5,
		Window:            60 * time.Second,
		HalfOpenSuccesses: 1,
		TimeoutWeight:     1,
	}
}

// RunBreakerSuite runs the core.Breaker conformance suite. newBreaker is
// called once per subtest with that subtest's t and a fresh FakeClock; it may
// return the same shared backend every time, since each subtest uses its own
// scope names.
//
// Semantics pinned by the suite, beyond the port contract:
//
//   - Consecutive channel: success resets the consecutive failure weight,
//     OutcomeFailure adds 1, OutcomeTimeout adds cfg.TimeoutWeight; the
//     circuit opens when the weight reaches cfg.FailThreshold.
//   - Rate channel: every success, failure and timeout is one sample of the
//     window (a timeout weighs TimeoutWeight of a failure); when a failure or
//     timeout is recorded and the window holds at least MinCalls samples with
//     a failure rate of at least FailRate, the circuit opens. Samples older
//     than cfg.Window no longer count; samples up to Window/2 old still do
//     (in between, a backend may bucket time as it likes).
//   - Suppression: the consecutive channel does not open while the window
//     holds at least MinCalls samples and its failure rate is below
//     FailRate/2 (a busy, healthy source survives a short run of failures).
//   - OutcomeRateLimited is no sample, no failure and no success: it changes
//     nothing. OutcomeDead opens at once.
//   - Opening clears the consecutive weight and the window. The first open
//     lasts cfg.Cooldown; a failed probe (failure, timeout or dead) re-opens
//     for twice the previous open period, capped at cfg.MaxCooldown; a close
//     resets the doubling.
//   - Half-open admits one probe at a time with a lease of cfg.ProbeTTL. A
//     probe success counts toward cfg.HalfOpenSuccesses (closing once
//     reached, otherwise returning the probe); OutcomeAbandoned and
//     OutcomeRateLimited return the probe with no verdict.
//   - The epoch changes on every open, on every probe grant and on Reset, so
//     Record fences out admissions from before an open, a probe holder whose
//     lease expired and was taken over, and anything admitted before a Reset.
//     Record of a refused admission (Allowed=false) is never applied.
//   - A refused Allow carries RetryAfter = the remaining cooldown while open,
//     and the remaining probe lease while half-open with the probe out.
//   - Reset closes the circuit, clears the consecutive weight, the window,
//     the probe and the cooldown doubling; Opens is a lifetime count and stays.
//   - The switch (the Switch* subtests, SetEnabled). A source switched off
//     is refused by Allow with Disabled, RetryAfter 0 and the circuit's
//     state as of now; no probe is granted, Snapshot reports Disabled, and
//     the circuit keeps its state, epoch and history (an open one turns
//     half-open by time underneath; calls admitted before the switch still
//     report). Reset does not switch a source on; switching it on admits
//     again as the circuit says. The switch is per circuit.
//   - The pushback (the Pushback* subtests). After PushBack(d) Allow
//     refuses the source with PushedBack, the circuit's state as of now and
//     RetryAfter the longer of the pushback's time left and the circuit's
//     own (the remaining cooldown while open, the probe's remaining lease
//     while it is out), until d has passed; no probe is granted and the
//     circuit (state, epoch, history) is not touched. A pushback never
//     shortens one that ends later; d <= 0 records nothing; a switched-off
//     source is refused as Disabled (not PushedBack); Reset leaves a
//     pushback; it is per circuit.
func RunBreakerSuite(t *testing.T, newBreaker func(t *testing.T, clk *FakeClock) core.Breaker) {
	t.Helper()
	for _, tc := range slices.Concat(breakerCases, breakerSwitchCases, breakerPushbackCases) {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(epoch())
			tc.run(&breakerHarness{
				t: t, b: newBreaker(t, clk), clk: clk,
				scope: t.Name(), source: "src", cfg: SuiteBreakerConfig(),
			})
		})
	}
}

var breakerCases = []struct {
	name string
	run  func(h *breakerHarness)
}{
	{"ClosedAdmits", breakerClosedAdmits},
	{"ConsecutiveFailuresOpen", breakerConsecutiveOpen},
	{"SuccessResetsConsecutive", breakerSuccessResets},
	{"FailureRateOpensFlakySource", breakerRateOpensFlaky},
	{"RateWindowForgetsOldSamples", breakerRateWindowForgets},
	{"ConsecutiveSuppressedByHealthyWindow", breakerSuppressed},
	{"ConsecutiveActsOnModerateWindow", breakerNotSuppressed},
	{"RateLimitedNeverCounts", breakerRateLimited},
	{"TimeoutWeighted", breakerTimeoutWeighted},
	{"DeadOpensAtOnce", breakerDeadOpens},
	{"OpenRefusesWithRemainingCooldown", breakerOpenRefuses},
	{"SingleProbeUnderContention", breakerSingleProbe},
	{"ProbeSuccessCloses", breakerProbeSuccessCloses},
	{"HalfOpenSuccessesOneProbeAtATime", breakerHalfOpenSuccesses},
	{"ProbeFailureDoublesCooldown", breakerProbeFailureDoubles},
	{"ProbeLeaseExpires", breakerProbeLeaseExpires},
	{"AbandonedProbeReturnsAtOnce", breakerProbeAbandoned},
	{"EpochFencing", breakerEpochFencing},
	{"ResetClosesAndClearsHistory", breakerReset},
	{"SnapshotIsLazy", breakerSnapshotLazy},
	{"CircuitsAreIndependent", breakerIndependent},
}

// breakerHarness carries one subtest's breaker, clock, circuit and config.
type breakerHarness struct {
	t             *testing.T
	b             core.Breaker
	clk           *FakeClock
	scope, source string
	cfg           core.BreakerConfig
}

// on returns a harness for another circuit sharing the breaker and clock.
func (h *breakerHarness) on(scope, source string) *breakerHarness {
	c := *h
	c.scope, c.source = scope, source
	return &c
}

func (h *breakerHarness) allow() core.Admission {
	h.t.Helper()
	a, err := h.b.Allow(h.t.Context(), h.scope, h.source, h.cfg)
	if err != nil {
		h.t.Fatalf("Allow: %v", err)
	}
	return a
}

func (h *breakerHarness) admit() core.Admission {
	h.t.Helper()
	a := h.allow()
	if !a.Allowed {
		h.t.Fatalf("Allow refused (state %v, retry after %v), want admitted", a.State, a.RetryAfter)
	}
	return a
}

func (h *breakerHarness) refused(state core.BreakerState, retryAfter time.Duration) core.Admission {
	h.t.Helper()
	a := h.allow()
	if a.Allowed || a.Probe {
		h.t.Fatalf("Allow admitted (probe %v, state %v), want refused", a.Probe, a.State)
	}
	if a.State != state || a.RetryAfter != retryAfter {
		h.t.Fatalf("refused with state %v, RetryAfter %v; want %v, %v", a.State, a.RetryAfter, state, retryAfter)
	}
	return a
}

func (h *breakerHarness) probe() core.Admission {
	h.t.Helper()
	a := h.admit()
	if !a.Probe || a.State != core.StateHalfOpen {
		h.t.Fatalf("admitted with probe %v, state %v; want the half-open probe", a.Probe, a.State)
	}
	return a
}

func (h *breakerHarness) recordAdm(a core.Admission, o core.Outcome) bool {
	h.t.Helper()
	applied, err := h.b.Record(h.t.Context(), h.scope, h.source, a, o, h.cfg)
	if err != nil {
		h.t.Fatalf("Record: %v", err)
	}
	return applied
}

func (h *breakerHarness) apply(a core.Admission, o core.Outcome) {
	h.t.Helper()
	if !h.recordAdm(a, o) {
		h.t.Fatalf("Record(outcome %d, epoch %d) not applied", o, a.Epoch)
	}
}

// record admits one closed-state call and records its outcome.
func (h *breakerHarness) record(outcomes ...core.Outcome) {
	h.t.Helper()
	for _, o := range outcomes {
		a := h.admit()
		if a.State != core.StateClosed || a.Probe {
			h.t.Fatalf("admitted in state %v (probe %v), want closed", a.State, a.Probe)
		}
		h.apply(a, o)
	}
}

func (h *breakerHarness) snap() core.BreakerSnapshot {
	h.t.Helper()
	s, err := h.b.Snapshot(h.t.Context(), h.scope, h.source, h.cfg)
	if err != nil {
		h.t.Fatalf("Snapshot: %v", err)
	}
	return s
}

func (h *breakerHarness) wantState(want core.BreakerState) core.BreakerSnapshot {
	h.t.Helper()
	s := h.snap()
	if s.State != want {
		h.t.Fatalf("state %v, want %v (snapshot %+v)", s.State, want, s)
	}
	return s
}

func (h *breakerHarness) wantOpen(retryAfter time.Duration, opens int) core.BreakerSnapshot {
	h.t.Helper()
	s := h.wantState(core.StateOpen)
	if s.RetryAfter != retryAfter || s.Opens != opens || s.ProbeHeld {
		h.t.Fatalf("open snapshot %+v, want RetryAfter %v, Opens %d, no probe", s, retryAfter, opens)
	}
	return s
}

func repeat(o core.Outcome, n int) []core.Outcome {
	out := make([]core.Outcome, n)
	for i := range out {
		out[i] = o
	}
	return out
}

const (
	sOK   = core.OutcomeSuccess
	sFail = core.OutcomeFailure
	sTO   = core.OutcomeTimeout
	s429  = core.OutcomeRateLimited
	sDead = core.OutcomeDead
)

func breakerClosedAdmits(h *breakerHarness) {
	s := h.snap()
	if s.State != core.StateClosed || s.Opens != 0 || s.RetryAfter != 0 || s.ProbeHeld || s.ConsecutiveFailures != 0 {
		h.t.Fatalf("fresh snapshot %+v, want closed and empty", s)
	}
	for range 3 {
		a := h.admit()
		if a.Probe || a.State != core.StateClosed || a.RetryAfter != 0 || a.Epoch != s.Epoch {
			h.t.Fatalf("admission %+v, want closed at epoch %d", a, s.Epoch)
		}
		h.apply(a, sOK)
	}
	h.wantState(core.StateClosed)
}

func breakerConsecutiveOpen(h *breakerHarness) {
	h.cfg.FailThreshold = 3
	before := h.snap().Epoch
	h.record(sFail, sFail)
	if s := h.wantState(core.StateClosed); s.ConsecutiveFailures != 2 {
		h.t.Fatalf("ConsecutiveFailures = %v, want 2", s.ConsecutiveFailures)
	}
	h.record(sFail)
	s := h.wantOpen(h.cfg.Cooldown, 1)
	if s.Epoch <= before {
		h.t.Fatalf("epoch %d after opening, was %d: want it increased", s.Epoch, before)
	}
	h.refused(core.StateOpen, h.cfg.Cooldown)

	// The threshold is the one passed in: with 6, five failures do not open.
	h6 := h.on(h.scope, "six")
	h6.cfg.FailThreshold = 6
	h6.record(repeat(sFail, 5)...)
	h6.wantState(core.StateClosed)
	h6.record(sFail)
	h6.wantOpen(h.cfg.Cooldown, 1)
}

func breakerSuccessResets(h *breakerHarness) {
	h.cfg.FailThreshold = 3
	h.record(sFail, sFail, sOK, sFail, sFail)
	if s := h.wantState(core.StateClosed); s.ConsecutiveFailures != 2 {
		h.t.Fatalf("ConsecutiveFailures = %v, want 2", s.ConsecutiveFailures)
	}
	h.record(sOK)
	if s := h.wantState(core.StateClosed); s.ConsecutiveFailures != 0 {
		h.t.Fatalf("ConsecutiveFailures = %v after a success, want 0", s.ConsecutiveFailures)
	}
}

func breakerRateOpensFlaky(h *breakerHarness) {
	// One success in ten keeps resetting the consecutive count below its
	// threshold of 10; the window sees 90 % failures.
	h.cfg.FailThreshold = 10
	pattern := append([]core.Outcome{sOK}, repeat(sFail, 9)...)
	pattern = append(pattern, pattern...) // 20 samples, the last a failure
	h.record(pattern[:19]...)
	if s := h.wantState(core.StateClosed); s.ConsecutiveFailures != 8 {
		h.t.Fatalf("ConsecutiveFailures = %v, want 8", s.ConsecutiveFailures)
	}
	h.record(pattern[19])
	h.wantOpen(h.cfg.Cooldown, 1)
}

func breakerRateWindowForgets(h *breakerHarness) {
	h.cfg.FailThreshold = 1000
	// Within the window the old samples still count.
	h.record(repeat(sFail, 19)...)
	h.clk.Advance(h.cfg.Window / 2)
	h.wantState(core.StateClosed)
	h.record(sFail)
	h.wantOpen(h.cfg.Cooldown, 1)

	// Past the window they are gone.
	old := h.on(h.scope, "old")
	old.record(repeat(sFail, 19)...)
	h.clk.Advance(h.cfg.Window * 5 / 4)
	old.record(sFail)
	old.wantState(core.StateClosed)
	old.record(repeat(sFail, 18)...)
	old.wantState(core.StateClosed)
	old.record(sFail)
	old.wantOpen(h.cfg.Cooldown, 1)
}

func breakerSuppressed(h *breakerHarness) {
	// A busy healthy source: 100 successes, then a run of failures. The
	// consecutive channel (threshold 5) is held off while the window's
	// failure rate stays below FailRate/2 = 25 %.
	h.record(repeat(sOK, 100)...)
	h.record(repeat(sFail, 5)...)
	if s := h.wantState(core.StateClosed); s.ConsecutiveFailures != 5 {
		h.t.Fatalf("ConsecutiveFailures = %v, want 5", s.ConsecutiveFailures)
	}
	h.record(repeat(sFail, 28)...) // 33 failures in 133 samples: 24.8 %
	h.wantState(core.StateClosed)
	h.record(sFail) // 34 in 134: 25.4 %, no longer suppressed
	h.wantOpen(h.cfg.Cooldown, 1)

	// A quiet source has too few samples to suppress anything.
	quiet := h.on(h.scope, "quiet")
	quiet.record(repeat(sOK, 10)...)
	quiet.record(repeat(sFail, 5)...)
	quiet.wantOpen(h.cfg.Cooldown, 1)
}

func breakerNotSuppressed(h *breakerHarness) {
	// Forty samples at 25 % failures (one in four, never two in a row), then
	// five consecutive failures: the window rate is not low, so they open.
	for range 10 {
		h.record(sFail, sOK, sOK, sOK)
	}
	h.record(repeat(sFail, 4)...)
	h.wantState(core.StateClosed)
	h.record(sFail)
	h.wantOpen(h.cfg.Cooldown, 1)
}

func breakerRateLimited(h *breakerHarness) {
	// Consecutive channel: 429s neither add nor reset.
	h.cfg.FailThreshold = 3
	h.record(sFail, sFail)
	h.record(repeat(s429, 10)...)
	if s := h.wantState(core.StateClosed); s.ConsecutiveFailures != 2 {
		h.t.Fatalf("ConsecutiveFailures = %v after 429s, want 2", s.ConsecutiveFailures)
	}
	h.record(sFail)
	h.wantOpen(h.cfg.Cooldown, 1)

	// Rate channel: 429s are no samples. Counted as successes they would
	// dilute the last failure; counted as failures they would open early.
	w := h.on(h.scope, "window")
	w.cfg.FailThreshold = 1000
	w.cfg.MinCalls = 3
	w.record(sFail, sFail)
	w.record(repeat(s429, 20)...)
	w.wantState(core.StateClosed)
	w.record(sFail)
	w.wantOpen(h.cfg.Cooldown, 1)
}

func breakerTimeoutWeighted(h *breakerHarness) {
	h.cfg.FailThreshold = 2
	h.cfg.TimeoutWeight = 0.5
	h.cfg.MinCalls = 1000
	h.record(sTO, sTO, sTO)
	if s := h.wantState(core.StateClosed); s.ConsecutiveFailures != 1.5 {
		h.t.Fatalf("ConsecutiveFailures = %v after three half-weight timeouts, want 1.5", s.ConsecutiveFailures)
	}
	h.record(sTO)
	h.wantOpen(h.cfg.Cooldown, 1)

	mixed := h.on(h.scope, "mixed")
	mixed.record(sTO, sFail)
	mixed.wantState(core.StateClosed)
	mixed.record(sTO)
	mixed.wantOpen(h.cfg.Cooldown, 1)

	// In the window a timeout is a sample weighing half a failure: 10
	// failures and 20 timeouts in 40 samples is a rate of exactly 50 %.
	rate := h.on(h.scope, "rate")
	rate.cfg.FailThreshold = 1000
	rate.cfg.MinCalls = 40
	for range 10 {
		rate.record(sOK, sTO, sTO, sFail)
	}
	rate.wantOpen(h.cfg.Cooldown, 1)
	half := h.on(h.scope, "rate-below")
	half.cfg = rate.cfg
	for range 9 {
		half.record(sOK, sTO, sTO, sFail)
	}
	half.record(sOK, sTO, sOK, sTO) // 9 failures + 20 timeouts × 0.5 = 19 of 40: 47.5 %
	half.wantState(core.StateClosed)
}

func breakerDeadOpens(h *breakerHarness) {
	h.record(sOK, sOK)
	h.record(sDead)
	h.wantOpen(h.cfg.Cooldown, 1)
	h.refused(core.StateOpen, h.cfg.Cooldown)
}

func breakerOpenRefuses(h *breakerHarness) {
	h.record(sDead)
	h.clk.Advance(10 * time.Second)
	a := h.refused(core.StateOpen, 20*time.Second)
	if s := h.wantOpen(20*time.Second, 1); a.Epoch != s.Epoch {
		h.t.Fatalf("refusal epoch %d, circuit epoch %d", a.Epoch, s.Epoch)
	}
	h.clk.Advance(19*time.Second + 999*time.Millisecond)
	h.refused(core.StateOpen, time.Millisecond)
}

func breakerSingleProbe(h *breakerHarness) {
	h.record(sDead)
	h.clk.Advance(h.cfg.Cooldown)
	const callers = 100
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		mu     sync.Mutex
		admits []core.Admission
		errs   []error
	)
	for range callers {
		wg.Go(func() {
			<-start
			a, err := h.b.Allow(h.t.Context(), h.scope, h.source, h.cfg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			admits = append(admits, a)
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		h.t.Fatalf("Allow: %v", errs[0])
	}
	allowed, probes := 0, 0
	for _, a := range admits {
		if a.Allowed {
			allowed++
		}
		if a.Probe {
			probes++
		}
		if a.State != core.StateHalfOpen {
			h.t.Fatalf("admission in state %v, want half_open", a.State)
		}
		if !a.Allowed && a.RetryAfter != h.cfg.ProbeTTL {
			h.t.Fatalf("refused with RetryAfter %v, want the probe lease %v", a.RetryAfter, h.cfg.ProbeTTL)
		}
	}
	if allowed != 1 || probes != 1 {
		h.t.Fatalf("%d of %d callers admitted, %d probes; want exactly one probe", allowed, callers, probes)
	}
	if s := h.wantState(core.StateHalfOpen); !s.ProbeHeld || s.RetryAfter != h.cfg.ProbeTTL {
		h.t.Fatalf("snapshot %+v, want the probe held for %v", s, h.cfg.ProbeTTL)
	}
}

func breakerProbeSuccessCloses(h *breakerHarness) {
	h.cfg.FailThreshold = 2
	h.record(sFail, sFail)
	h.clk.Advance(h.cfg.Cooldown)
	p := h.probe()
	h.refused(core.StateHalfOpen, h.cfg.ProbeTTL)
	h.clk.Advance(time.Second)
	h.apply(p, sOK)
	s := h.wantState(core.StateClosed)
	if s.RetryAfter != 0 || s.ProbeHeld || s.ConsecutiveFailures != 0 || s.Opens != 1 {
		h.t.Fatalf("closed snapshot %+v, want no retry, no probe, no failures, one open", s)
	}
	h.record(sOK)
	// The history before the open is gone: one failure does not re-open.
	h.record(sFail)
	h.wantState(core.StateClosed)
}

func breakerHalfOpenSuccesses(h *breakerHarness) {
	h.cfg.HalfOpenSuccesses = 2
	h.record(sDead)
	h.clk.Advance(h.cfg.Cooldown)
	p1 := h.probe()
	h.refused(core.StateHalfOpen, h.cfg.ProbeTTL)
	h.apply(p1, sOK)
	if s := h.wantState(core.StateHalfOpen); s.ProbeHeld {
		h.t.Fatalf("probe still held after its success: %+v", s)
	}
	p2 := h.probe()
	h.refused(core.StateHalfOpen, h.cfg.ProbeTTL)
	h.apply(p2, sOK)
	h.wantState(core.StateClosed)
	h.record(sOK)

	// A failed probe starts the count again: a success before it does not carry over.
	h.record(sDead)
	h.clk.Advance(h.cfg.Cooldown)
	h.apply(h.probe(), sOK)
	h.apply(h.probe(), sFail)
	h.wantOpen(2*h.cfg.Cooldown, 3)
	h.clk.Advance(2 * h.cfg.Cooldown)
	h.apply(h.probe(), sOK)
	h.wantState(core.StateHalfOpen)
	h.apply(h.probe(), sOK)
	h.wantState(core.StateClosed)
}

func breakerProbeFailureDoubles(h *breakerHarness) {
	h.cfg.Cooldown = 10 * time.Second
	h.cfg.MaxCooldown = 35 * time.Second
	h.record(sDead)
	h.wantOpen(10*time.Second, 1)
	steps := []struct {
		o    core.Outcome
		next time.Duration
	}{
		{sFail, 20 * time.Second},
		{sFail, 35 * time.Second}, // 40 s capped
		{sTO, 35 * time.Second},
		{sDead, 35 * time.Second},
	}
	wait := 10 * time.Second
	for i, st := range steps {
		h.clk.Advance(wait)
		p := h.probe()
		before := p.Epoch
		h.apply(p, st.o)
		s := h.wantOpen(st.next, i+2)
		if s.Epoch <= before {
			h.t.Fatalf("re-open kept epoch %d", s.Epoch)
		}
		h.refused(core.StateOpen, st.next)
		wait = st.next
	}
	h.clk.Advance(wait)
	h.apply(h.probe(), sOK)
	h.wantState(core.StateClosed)
	// A close resets the doubling.
	h.record(sDead)
	h.wantOpen(10*time.Second, 6)
}

func breakerProbeLeaseExpires(h *breakerHarness) {
	h.cfg.ProbeTTL = 20 * time.Second
	h.record(sDead)
	h.clk.Advance(h.cfg.Cooldown)
	crashed := h.probe()
	h.clk.Advance(19 * time.Second)
	h.refused(core.StateHalfOpen, time.Second)
	if s := h.wantState(core.StateHalfOpen); !s.ProbeHeld || s.RetryAfter != time.Second {
		h.t.Fatalf("snapshot %+v, want the probe held for 1s more", s)
	}
	h.clk.Advance(time.Second)
	if s := h.wantState(core.StateHalfOpen); s.ProbeHeld || s.RetryAfter != 0 {
		h.t.Fatalf("snapshot %+v after the lease, want the probe free", s)
	}
	next := h.probe()
	if next.Epoch == crashed.Epoch {
		h.t.Fatalf("the new probe shares epoch %d with the expired one", next.Epoch)
	}
	// The old holder's late verdict is fenced out: it neither closes nor
	// takes the probe back.
	if h.recordAdm(crashed, sOK) {
		h.t.Fatal("Record of the expired probe holder applied")
	}
	if h.recordAdm(crashed, sFail) {
		h.t.Fatal("Record of the expired probe holder applied")
	}
	if s := h.wantState(core.StateHalfOpen); !s.ProbeHeld || s.Opens != 1 {
		h.t.Fatalf("snapshot %+v, want the new probe held and no re-open", s)
	}
	h.apply(next, sOK)
	h.wantState(core.StateClosed)
}

func breakerProbeAbandoned(h *breakerHarness) {
	h.record(sDead)
	h.clk.Advance(h.cfg.Cooldown)
	for _, o := range []core.Outcome{core.OutcomeAbandoned, s429} {
		p := h.probe()
		h.apply(p, o)
		s := h.wantState(core.StateHalfOpen)
		if s.ProbeHeld || s.Opens != 1 || s.RetryAfter != 0 {
			h.t.Fatalf("after outcome %d the snapshot is %+v, want the probe free, one open", o, s)
		}
	}
	// No verdict was taken: the next probe's failure re-opens with the
	// first doubling, not a later one.
	h.apply(h.probe(), sFail)
	h.wantOpen(2*h.cfg.Cooldown, 2)
}

func breakerEpochFencing(h *breakerHarness) {
	h.cfg.FailThreshold = 2
	stale := h.admit()
	h.record(sDead)
	s1 := h.wantOpen(h.cfg.Cooldown, 1)
	if s1.Epoch <= stale.Epoch {
		h.t.Fatalf("epoch %d after open, admission had %d", s1.Epoch, stale.Epoch)
	}
	for _, o := range []core.Outcome{sOK, sFail, sTO, sDead, core.OutcomeAbandoned} {
		if h.recordAdm(stale, o) {
			h.t.Fatalf("stale Record(outcome %d) applied", o)
		}
	}
	if s := h.snap(); s != s1 {
		h.t.Fatalf("stale records changed the snapshot: %+v, was %+v", s, s1)
	}

	// After the circuit closes again, the stale admission is still fenced.
	h.clk.Advance(h.cfg.Cooldown)
	h.apply(h.probe(), sOK)
	h.record(sFail)
	for range 3 {
		if h.recordAdm(stale, sFail) {
			h.t.Fatal("stale failure applied after the close")
		}
	}
	if s := h.wantState(core.StateClosed); s.ConsecutiveFailures != 1 {
		h.t.Fatalf("ConsecutiveFailures = %v, want 1", s.ConsecutiveFailures)
	}

	// A refused admission records nothing.
	h.record(sDead)
	refused := h.refused(core.StateOpen, h.cfg.Cooldown)
	before := h.snap()
	if h.recordAdm(refused, sOK) {
		h.t.Fatal("Record of a refused admission applied")
	}
	if s := h.snap(); s != before {
		h.t.Fatalf("refused record changed the snapshot: %+v, was %+v", s, before)
	}
}

func breakerReset(h *breakerHarness) {
	h.cfg.FailThreshold = 3
	h.cfg.Cooldown = 10 * time.Second
	// Open twice so the cooldown has doubled.
	h.record(sDead)
	h.clk.Advance(10 * time.Second)
	probe := h.probe()
	h.apply(probe, sFail)
	s := h.wantOpen(20*time.Second, 2)
	if err := h.b.Reset(h.t.Context(), h.scope, h.source, h.cfg); err != nil {
		h.t.Fatalf("Reset: %v", err)
	}
	r := h.wantState(core.StateClosed)
	if r.RetryAfter != 0 || r.ProbeHeld || r.ConsecutiveFailures != 0 || r.Epoch <= s.Epoch || r.Opens != 2 {
		h.t.Fatalf("after Reset %+v, want closed, clear, a newer epoch than %d, Opens kept at 2", r, s.Epoch)
	}
	h.admit()
	// The doubling is gone: the next open lasts the first cooldown.
	h.record(sDead)
	h.wantOpen(10*time.Second, 3)

	// Reset clears the consecutive count and fences earlier admissions.
	c := h.on(h.scope, "consecutive")
	c.record(sFail, sFail)
	early := c.admit()
	if err := c.b.Reset(c.t.Context(), c.scope, c.source, c.cfg); err != nil {
		c.t.Fatalf("Reset: %v", err)
	}
	if c.recordAdm(early, sFail) {
		c.t.Fatal("Record of an admission from before Reset applied")
	}
	c.record(sFail, sFail)
	c.wantState(core.StateClosed)
	c.record(sFail)
	c.wantOpen(10*time.Second, 1)

	// Reset clears the window.
	w := h.on(h.scope, "window")
	w.cfg.FailThreshold = 1000
	w.record(repeat(sFail, 19)...)
	if err := w.b.Reset(w.t.Context(), w.scope, w.source, w.cfg); err != nil {
		w.t.Fatalf("Reset: %v", err)
	}
	w.record(sFail)
	w.wantState(core.StateClosed)

	// Reset of a circuit never seen is harmless.
	if err := h.b.Reset(h.t.Context(), h.scope, "never", h.cfg); err != nil {
		h.t.Fatalf("Reset: %v", err)
	}
	h.on(h.scope, "never").wantState(core.StateClosed)
}

func breakerSnapshotLazy(h *breakerHarness) {
	h.record(sDead)
	h.clk.Advance(h.cfg.Cooldown - time.Second)
	h.wantOpen(time.Second, 1)
	h.clk.Advance(time.Second)
	s := h.wantState(core.StateHalfOpen)
	if s.RetryAfter != 0 || s.ProbeHeld || s.Opens != 1 {
		h.t.Fatalf("half-open snapshot %+v, want no retry, no probe", s)
	}
	// Still half-open much later: only a probe moves it on.
	h.clk.Advance(time.Hour)
	h.wantState(core.StateHalfOpen)
	h.probe()
}

func breakerIndependent(h *breakerHarness) {
	h.record(sDead)
	h.wantOpen(h.cfg.Cooldown, 1)
	for _, o := range []*breakerHarness{h.on(h.scope, "other"), h.on(h.scope+"/other", h.source)} {
		s := o.wantState(core.StateClosed)
		if s.Opens != 0 {
			o.t.Fatalf("%s/%s: %+v, want untouched", o.scope, o.source, s)
		}
		o.record(sOK)
	}
	h.refused(core.StateOpen, h.cfg.Cooldown)
}

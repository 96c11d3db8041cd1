package backendtest

import (
	"reflect"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// rateWindow is the length of the RPM and TPM windows.
const rateWindow = 60 * time.Second

// suiteLeaseTTL is the lease of every suite permit unless a subtest says otherwise.
const suiteLeaseTTL = 10 * time.Minute

// RunLimiterSuite runs the core.Limiter conformance suite. newLimiter is
// called once per subtest with that subtest's t and a fresh FakeClock; it may
// return the same shared backend every time, since each subtest uses its own
// scope names.
//
// Semantics pinned by the suite, beyond the port contract:
//
//   - Gates are checked in the order of the core.Gate constants (source
//     concurrency, RPM, TPM, then global concurrency, RPM, TPM); a refusal
//     names the first gate that refuses and counts nothing anywhere.
//   - RPM and TPM are exact sliding 60-second windows: a grant at t counts
//     while now < t+60s and is gone at t+60s. RetryAfter for an RPM or TPM
//     refusal is exact: the time until enough of the oldest entries leave the
//     window for the request to fit. A request whose Tokens alone exceed TPM
//     never fits and is refused (RetryAfter unspecified).
//   - Release settles TPM in place, in the entry made by the acquire: the
//     amount moves neither in time nor into later windows. SettleActual sets
//     it to Settlement.Tokens (more than the estimate too), SettleEstimate
//     keeps it, SettleRefund sets it to zero; the RPM count always stays.
//   - A concurrency slot lives until Release or until LeaseTTL after the
//     acquire (freed at exactly acquire+LeaseTTL). Releasing a permit whose
//     lease expired, a permit already released, or a permit the limiter never
//     granted changes nothing, TPM included.
//   - Global gates count every source of the same scope and nothing of other
//     scopes; Usage(scope, "") reports them.
//   - The clock never moves backwards within a subtest.
//   - Usage is pinned only for levels whose gates are on: InFlight where the
//     level's MaxConcurrency is set, Requests and Tokens where its RPM and TPM
//     are set. What a backend reports for gates that are off is its own choice.
//
// Budgets (the Budget* subtests): every limiter enforces spend budgets
// (core.Limiter), and these subtests fail for one that ignores them.
//
//   - After the six gates, TryAcquire checks the budgets in the request's
//     order; the first without room refuses with GateBudget, its key and
//     RetryAfter = the time until its window ends, and nothing is counted
//     on any gate or budget. A budget has no room when its spend plus Cost
//     exceeds Limit, or, for a Cost of 0 (or less), when its spend has
//     reached Limit. A grant reserves Cost (a negative one as 0) on every
//     budget; Permit.Budgets and Permit.Cost say what was reserved.
//   - Windows are fixed, aligned to the Unix epoch: Budget.WindowStart of
//     the limiter's time, for Window; a new window starts at 0.
//   - Release settles every budget once, in the window holding
//     AcquiredAt, when it frees the permit (a permit whose lease ended, one
//     released before or one never granted settles nothing): SettleActual
//     replaces the reservation by Settlement.Cost (above the Limit too),
//     SettleRefund removes it, SettleEstimate keeps it; never below 0. A
//     window that has ended is left as it is, and not made anew.
//   - Budgets of one key and Window share one spend across the sources and
//     scopes that name them (or, with BudgetsPerScope, across the sources
//     of a scope and the scopes of a pool); the same key with another
//     Window is another spend.
//   - Budgets reports each budget's current window as the given scope (in
//     the given pool) counts it: its bounds and the spend counted in it,
//     settled and reserved (0 when nothing is); a backend that shares a
//     spend across scopes reports it whichever scope asks.
//   - A budget without a key, with a Limit <= 0, a Window under one second
//     or of a fraction of a second, or named twice in one request, makes
//     TryAcquire and Budgets fail with an error, counting nothing.
func RunLimiterSuite(t *testing.T, newLimiter func(t *testing.T, clk *FakeClock) core.Limiter, opts ...SuiteOption) {
	t.Helper()
	o := buildSuiteOptions(opts)
	for _, tc := range append(limiterCases[:len(limiterCases):len(limiterCases)], limiterBudgetCases...) {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(epoch())
			lh := &limiterHarness{t: t, l: newLimiter(t, clk), clk: clk, scope: t.Name(), opt: o}
			tc.run(lh)
		})
	}
}

var limiterCases = []struct {
	name string
	run  func(h *limiterHarness)
}{
	{"GatesRefuseAllOrNothing", limiterGatesRefuse},
	{"GrantReportsPermit", limiterGrantReportsPermit},
	{"RPMSlidingWindow", limiterRPMSlidingWindow},
	{"RPMNoBoundaryBurst", limiterRPMNoBoundaryBurst},
	{"TPMRetryAfterWalksWindow", limiterTPMRetryAfter},
	{"TPMRequestLargerThanLimit", limiterTPMRequestTooLarge},
	{"TPMSettlesInAcquireWindow", limiterTPMSettlesInAcquireWindow},
	{"SettleActualAboveEstimate", limiterSettleActualAbove},
	{"SettleEstimateKeeps", limiterSettleEstimate},
	{"SettleRefundReturnsAll", limiterSettleRefund},
	{"ConcurrencyFreedOnRelease", limiterConcurrencyRelease},
	{"LeaseExpiryFreesSlot", limiterLeaseExpiry},
	{"DoubleReleaseIsNoop", limiterDoubleRelease},
	{"UnknownPermitIsNoop", limiterUnknownPermit},
	{"GlobalGatesSpanSourcesNotScopes", limiterGlobalScopes},
	{"SourceGatesAreIndependent", limiterSourcesIndependent},
	{"PoolsShareGlobalGates", limiterPoolsShare},
	{"PoolsAreIndependent", limiterPoolsIndependent},
}

// limiterHarness carries one subtest's limiter, clock and scope.
type limiterHarness struct {
	t     *testing.T
	l     core.Limiter
	clk   *FakeClock
	scope string
	opt   suiteOptions
}

func (h *limiterHarness) req(source string, src, glob core.Limits, tokens int) core.PermitRequest {
	return core.PermitRequest{
		Scope: h.scope, Source: source,
		SourceLimits: src, GlobalLimits: glob,
		Tokens: tokens, LeaseTTL: suiteLeaseTTL,
	}
}

func (h *limiterHarness) try(req core.PermitRequest) core.Grant {
	h.t.Helper()
	g, err := h.l.TryAcquire(h.t.Context(), req)
	if err != nil {
		h.t.Fatalf("TryAcquire(%s/%s): %v", req.Scope, req.Source, err)
	}
	return g
}

func (h *limiterHarness) grant(req core.PermitRequest) core.Permit {
	h.t.Helper()
	g := h.try(req)
	if !g.OK {
		h.t.Fatalf("TryAcquire(%s/%s, tokens %d) at %v: refused by %v, want granted",
			req.Scope, req.Source, req.Tokens, h.clk.Now().Sub(epoch()), g.Gate)
	}
	return g.Permit
}

func (h *limiterHarness) refuse(req core.PermitRequest, want core.Gate) core.Grant {
	h.t.Helper()
	g := h.try(req)
	if g.OK {
		h.t.Fatalf("TryAcquire(%s/%s, tokens %d) at %v: granted, want refused by %v",
			req.Scope, req.Source, req.Tokens, h.clk.Now().Sub(epoch()), want)
	}
	if g.Gate != want {
		h.t.Fatalf("refused by %v, want %v", g.Gate, want)
	}
	if !reflect.DeepEqual(g.Permit, core.Permit{}) {
		h.t.Fatalf("refusal carries a permit: %+v", g.Permit)
	}
	return g
}

func (h *limiterHarness) release(p core.Permit, s core.Settlement) {
	h.t.Helper()
	if err := h.l.Release(h.t.Context(), p, s); err != nil {
		h.t.Fatalf("Release: %v", err)
	}
}

func (h *limiterHarness) usageOf(scope, source string) core.LimiterUsage {
	h.t.Helper()
	u, err := h.l.Usage(h.t.Context(), scope, source)
	if err != nil {
		h.t.Fatalf("Usage(%s, %q): %v", scope, source, err)
	}
	return u
}

func (h *limiterHarness) usage(source string) core.LimiterUsage {
	h.t.Helper()
	return h.usageOf(h.scope, source)
}

func (h *limiterHarness) wantUsage(source string, want core.LimiterUsage) {
	h.t.Helper()
	if got := h.usage(source); got != want {
		h.t.Fatalf("Usage(%q) at %v = %+v, want %+v", source, h.clk.Now().Sub(epoch()), got, want)
	}
}

func limiterGatesRefuse(h *limiterHarness) {
	type retryWant int
	const (
		retryAny retryWant = iota
		retryExact50s
	)
	cases := []struct {
		name      string
		src, glob core.Limits
		// sameHeld and otherHeld permits of prefillTokens each are held on the
		// attempted source and on another source of the scope before the attempt.
		sameHeld, otherHeld int
		prefillTokens       int
		tokens              int
		want                core.Gate
		retry               retryWant
	}{
		{name: "source_concurrency_alone", src: core.Limits{MaxConcurrency: 1}, sameHeld: 1, want: core.GateSourceConcurrency},
		{name: "source_rpm_alone", src: core.Limits{RPM: 1}, sameHeld: 1, want: core.GateSourceRPM, retry: retryExact50s},
		{name: "source_tpm_alone", src: core.Limits{TPM: 100}, sameHeld: 1, prefillTokens: 60, tokens: 50, want: core.GateSourceTPM, retry: retryExact50s},
		{name: "global_concurrency_alone", glob: core.Limits{MaxConcurrency: 1}, otherHeld: 1, want: core.GateGlobalConcurrency},
		{name: "global_rpm_alone", glob: core.Limits{RPM: 1}, otherHeld: 1, want: core.GateGlobalRPM, retry: retryExact50s},
		{name: "global_tpm_alone", glob: core.Limits{TPM: 100}, otherHeld: 1, prefillTokens: 60, tokens: 50, want: core.GateGlobalTPM, retry: retryExact50s},
		{name: "global_tpm_while_source_gates_pass",
			src: core.Limits{MaxConcurrency: 5, RPM: 5, TPM: 1000}, glob: core.Limits{TPM: 100},
			otherHeld: 1, prefillTokens: 60, tokens: 50, want: core.GateGlobalTPM, retry: retryExact50s},
		{name: "source_rpm_while_global_gates_pass",
			src: core.Limits{RPM: 1}, glob: core.Limits{MaxConcurrency: 10, RPM: 10, TPM: 1000},
			sameHeld: 1, tokens: 10, want: core.GateSourceRPM, retry: retryExact50s},
		{name: "all_six",
			src: core.Limits{MaxConcurrency: 1, RPM: 1, TPM: 100}, glob: core.Limits{MaxConcurrency: 1, RPM: 1, TPM: 100},
			sameHeld: 1, prefillTokens: 60, tokens: 50, want: core.GateSourceConcurrency},
		{name: "source_rpm_and_tpm",
			src: core.Limits{RPM: 1, TPM: 100}, sameHeld: 1, prefillTokens: 60, tokens: 50, want: core.GateSourceRPM, retry: retryExact50s},
		{name: "source_tpm_and_global_concurrency",
			src: core.Limits{TPM: 100}, glob: core.Limits{MaxConcurrency: 1},
			sameHeld: 1, prefillTokens: 60, tokens: 50, want: core.GateSourceTPM, retry: retryExact50s},
		{name: "source_concurrency_and_global_rpm",
			src: core.Limits{MaxConcurrency: 1}, glob: core.Limits{RPM: 1}, sameHeld: 1, want: core.GateSourceConcurrency},
		{name: "global_all_three",
			glob: core.Limits{MaxConcurrency: 1, RPM: 1, TPM: 100}, otherHeld: 1, prefillTokens: 60, tokens: 50, want: core.GateGlobalConcurrency},
		{name: "global_rpm_and_tpm",
			glob: core.Limits{RPM: 1, TPM: 100}, otherHeld: 1, prefillTokens: 60, tokens: 50, want: core.GateGlobalRPM, retry: retryExact50s},
	}
	for _, tc := range cases {
		h.t.Run(tc.name, func(t *testing.T) {
			sub := &limiterHarness{t: t, l: h.l, clk: h.clk, scope: t.Name()}
			for range tc.sameHeld {
				sub.grant(sub.req("a", tc.src, tc.glob, tc.prefillTokens))
			}
			for range tc.otherHeld {
				sub.grant(sub.req("b", tc.src, tc.glob, tc.prefillTokens))
			}
			h.clk.Advance(10 * time.Second)
			beforeA, beforeB, beforeG := sub.usage("a"), sub.usage("b"), sub.usage("")
			g := sub.refuse(sub.req("a", tc.src, tc.glob, tc.tokens), tc.want)
			if tc.retry == retryExact50s && g.RetryAfter != 50*time.Second {
				t.Fatalf("RetryAfter = %v, want 50s (the prefill leaves the window at +60s, refused at +10s)", g.RetryAfter)
			}
			if g.RetryAfter < 0 || g.RetryAfter > rateWindow {
				t.Fatalf("RetryAfter = %v, want within [0, 60s]", g.RetryAfter)
			}
			if got := sub.usage("a"); got != beforeA {
				t.Fatalf("refusal counted on the source: usage %+v, was %+v", got, beforeA)
			}
			if got := sub.usage("b"); got != beforeB {
				t.Fatalf("refusal counted on the other source: usage %+v, was %+v", got, beforeB)
			}
			if got := sub.usage(""); got != beforeG {
				t.Fatalf("refusal counted on the global gates: usage %+v, was %+v", got, beforeG)
			}
		})
	}
}

func limiterGrantReportsPermit(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 10, RPM: 10, TPM: 10000}
	h.clk.Advance(1500 * time.Millisecond)
	p1 := h.grant(h.req("a", lim, lim, 300))
	if p1.Scope != h.scope || p1.Source != "a" || p1.Tokens != 300 || p1.Lease == 0 {
		h.t.Fatalf("permit = %+v, want scope %q, source a, tokens 300, a non-zero lease", p1, h.scope)
	}
	if !p1.AcquiredAt.Equal(h.clk.Now()) {
		h.t.Fatalf("AcquiredAt = %v, want the clock's %v", p1.AcquiredAt, h.clk.Now())
	}
	p2 := h.grant(h.req("a", lim, lim, 200))
	if p2.Lease == p1.Lease {
		h.t.Fatalf("two permits share lease %d", p1.Lease)
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 2, Requests: 2, Tokens: 500})
	h.wantUsage("", core.LimiterUsage{InFlight: 2, Requests: 2, Tokens: 500})
	h.release(p1, core.Settlement{Kind: core.SettleActual, Tokens: 100})
	h.release(p2, core.Settlement{Kind: core.SettleActual, Tokens: 50})
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 2, Tokens: 150})
	h.wantUsage("", core.LimiterUsage{InFlight: 0, Requests: 2, Tokens: 150})
}

func limiterRPMSlidingWindow(h *limiterHarness) {
	for _, level := range []string{"source", "global"} {
		h.t.Run(level, func(t *testing.T) {
			sub := &limiterHarness{t: t, l: h.l, clk: h.clk, scope: t.Name()}
			var src, glob core.Limits
			gate := core.GateSourceRPM
			if level == "source" {
				src.RPM = 30
			} else {
				glob.RPM = 30
				gate = core.GateGlobalRPM
			}
			t0 := h.clk.Now()
			for range 30 {
				sub.release(sub.grant(sub.req("a", src, glob, 0)), core.Settlement{Kind: core.SettleRefund})
			}
			for _, at := range []time.Duration{0, time.Second, 30 * time.Second, 59 * time.Second, 59*time.Second + 999*time.Millisecond} {
				h.clk.Set(t0.Add(at))
				g := sub.refuse(sub.req("a", src, glob, 0), gate)
				if want := rateWindow - at; g.RetryAfter != want {
					t.Fatalf("at +%v RetryAfter = %v, want %v", at, g.RetryAfter, want)
				}
			}
			h.clk.Set(t0.Add(rateWindow))
			for range 30 {
				sub.grant(sub.req("a", src, glob, 0))
			}
			g := sub.refuse(sub.req("a", src, glob, 0), gate)
			if g.RetryAfter != rateWindow {
				t.Fatalf("RetryAfter = %v, want 60s", g.RetryAfter)
			}
		})
	}
}

func limiterRPMNoBoundaryBurst(h *limiterHarness) {
	const rpm = 10
	lim := core.Limits{RPM: rpm}
	t0 := h.clk.Now()
	// A burst late in one calendar minute leaves no room early in the next.
	h.clk.Set(t0.Add(50 * time.Second))
	for range rpm {
		h.grant(h.req("late", lim, core.Limits{}, 0))
	}
	h.clk.Set(t0.Add(60 * time.Second))
	h.refuse(h.req("late", lim, core.Limits{}, 0), core.GateSourceRPM)
	h.clk.Set(t0.Add(109 * time.Second))
	h.refuse(h.req("late", lim, core.Limits{}, 0), core.GateSourceRPM)
	h.clk.Set(t0.Add(110 * time.Second))
	h.grant(h.req("late", lim, core.Limits{}, 0))

	// Three attempts every 500 ms for five minutes: no 60-second span may hold
	// more than rpm grants, and every minute is used to the full.
	t1 := h.clk.Now()
	var grants []time.Time
	for step := range 600 {
		h.clk.Set(t1.Add(time.Duration(step) * 500 * time.Millisecond))
		for range 3 {
			if g := h.try(h.req("steady", lim, core.Limits{}, 0)); g.OK {
				grants = append(grants, h.clk.Now())
			}
		}
	}
	if len(grants) != 5*rpm {
		h.t.Fatalf("%d grants in five minutes, want %d", len(grants), 5*rpm)
	}
	for i, g := range grants {
		n := 0
		for _, o := range grants[:i+1] {
			if g.Sub(o) < rateWindow {
				n++
			}
		}
		if n > rpm {
			h.t.Fatalf("%d grants in the 60 s ending %v, want at most %d", n, g.Sub(t1), rpm)
		}
	}
}

func limiterTPMRetryAfter(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 100, RPM: 100, TPM: 1000}
	t0 := h.clk.Now()
	h.grant(h.req("a", lim, core.Limits{}, 300))
	h.clk.Set(t0.Add(10 * time.Second))
	h.grant(h.req("a", lim, core.Limits{}, 600))
	h.clk.Set(t0.Add(20 * time.Second))
	// 900 in the window; 900 more fits only once both entries have left.
	if g := h.refuse(h.req("a", lim, core.Limits{}, 900), core.GateSourceTPM); g.RetryAfter != 50*time.Second {
		h.t.Fatalf("RetryAfter = %v, want 50s", g.RetryAfter)
	}
	// 200 more fits once the first entry (300) has left.
	if g := h.refuse(h.req("a", lim, core.Limits{}, 200), core.GateSourceTPM); g.RetryAfter != 40*time.Second {
		h.t.Fatalf("RetryAfter = %v, want 40s", g.RetryAfter)
	}
	h.grant(h.req("a", lim, core.Limits{}, 100))
	h.wantUsage("a", core.LimiterUsage{InFlight: 3, Requests: 3, Tokens: 1000})
	h.clk.Set(t0.Add(60 * time.Second))
	h.wantUsage("a", core.LimiterUsage{InFlight: 3, Requests: 2, Tokens: 700})
	h.grant(h.req("a", lim, core.Limits{}, 300))
}

func limiterTPMRequestTooLarge(h *limiterHarness) {
	lim := core.Limits{TPM: 1000}
	h.refuse(h.req("a", lim, core.Limits{}, 1001), core.GateSourceTPM)
	h.refuse(h.req("a", core.Limits{}, lim, 1001), core.GateGlobalTPM)
	h.wantUsage("a", core.LimiterUsage{})
	h.wantUsage("", core.LimiterUsage{})
	h.grant(h.req("a", lim, lim, 1000))
}

func limiterTPMSettlesInAcquireWindow(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 100, RPM: 100, TPM: 1000}
	t0 := h.clk.Now()
	p := h.grant(h.req("a", lim, lim, 1000))
	h.clk.Set(t0.Add(30 * time.Second))
	h.refuse(h.req("a", lim, lim, 1), core.GateSourceTPM)
	h.clk.Set(t0.Add(59 * time.Second))
	h.release(p, core.Settlement{Kind: core.SettleActual, Tokens: 200})
	h.wantUsage("a", core.LimiterUsage{Requests: 1, Tokens: 200})
	h.wantUsage("", core.LimiterUsage{Requests: 1, Tokens: 200})
	// Exactly 800 fits beside the settled 200.
	h.grant(h.req("a", lim, lim, 800))
	g := h.refuse(h.req("a", lim, lim, 1), core.GateSourceTPM)
	if g.RetryAfter != time.Second {
		h.t.Fatalf("RetryAfter = %v, want 1s (the settled 200 leaves at +60s)", g.RetryAfter)
	}
	// The settled 200 leaves with the acquire's window: nothing moved later.
	h.clk.Set(t0.Add(60 * time.Second))
	h.wantUsage("a", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 800})
	h.wantUsage("", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 800})
	h.grant(h.req("a", lim, lim, 200))
	h.clk.Set(t0.Add(119 * time.Second))
	h.wantUsage("a", core.LimiterUsage{InFlight: 2, Requests: 1, Tokens: 200})
	h.clk.Set(t0.Add(120 * time.Second))
	h.wantUsage("a", core.LimiterUsage{InFlight: 2})
	h.wantUsage("", core.LimiterUsage{InFlight: 2})
}

func limiterSettleActualAbove(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 100, RPM: 100, TPM: 10000}
	p := h.grant(h.req("a", lim, lim, 1000))
	h.clk.Advance(5 * time.Second)
	h.release(p, core.Settlement{Kind: core.SettleActual, Tokens: 1500})
	h.wantUsage("a", core.LimiterUsage{Requests: 1, Tokens: 1500})
	h.wantUsage("", core.LimiterUsage{Requests: 1, Tokens: 1500})
}

func limiterSettleEstimate(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 100, RPM: 100, TPM: 10000}
	p := h.grant(h.req("a", lim, lim, 1000))
	h.clk.Advance(5 * time.Second)
	h.release(p, core.Settlement{Kind: core.SettleEstimate, Tokens: 3})
	h.wantUsage("a", core.LimiterUsage{Requests: 1, Tokens: 1000})
	h.wantUsage("", core.LimiterUsage{Requests: 1, Tokens: 1000})
}

func limiterSettleRefund(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 1, RPM: 2, TPM: 1000}
	p := h.grant(h.req("a", lim, lim, 1000))
	h.clk.Advance(5 * time.Second)
	h.release(p, core.Settlement{Kind: core.SettleRefund, Tokens: 700})
	h.wantUsage("a", core.LimiterUsage{Requests: 1, Tokens: 0})
	h.wantUsage("", core.LimiterUsage{Requests: 1, Tokens: 0})
	// The tokens are back; the request count is not.
	h.grant(h.req("a", lim, lim, 1000))
	h.refuse(h.req("b", core.Limits{}, core.Limits{RPM: 2}, 0), core.GateGlobalRPM)
}

func limiterConcurrencyRelease(h *limiterHarness) {
	for _, level := range []string{"source", "global"} {
		h.t.Run(level, func(t *testing.T) {
			sub := &limiterHarness{t: t, l: h.l, clk: h.clk, scope: t.Name()}
			src, glob := core.Limits{MaxConcurrency: 100}, core.Limits{MaxConcurrency: 100}
			gate := core.GateSourceConcurrency
			if level == "source" {
				src.MaxConcurrency = 2
			} else {
				glob.MaxConcurrency = 2
				gate = core.GateGlobalConcurrency
			}
			p1 := sub.grant(sub.req("a", src, glob, 0))
			p2 := sub.grant(sub.req("a", src, glob, 0))
			sub.refuse(sub.req("a", src, glob, 0), gate)
			sub.wantInFlight(2)
			sub.release(p1, core.Settlement{Kind: core.SettleActual})
			sub.wantInFlight(1)
			p3 := sub.grant(sub.req("a", src, glob, 0))
			sub.refuse(sub.req("a", src, glob, 0), gate)
			sub.release(p2, core.Settlement{Kind: core.SettleEstimate})
			sub.release(p3, core.Settlement{Kind: core.SettleRefund})
			sub.wantInFlight(0)
		})
	}
}

// wantInFlight checks InFlight of source "a" and of the scope.
func (h *limiterHarness) wantInFlight(n int) {
	h.t.Helper()
	if u := h.usage("a"); u.InFlight != n {
		h.t.Fatalf("source InFlight = %d, want %d", u.InFlight, n)
	}
	if u := h.usage(""); u.InFlight != n {
		h.t.Fatalf("global InFlight = %d, want %d", u.InFlight, n)
	}
}

func limiterLeaseExpiry(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 1, RPM: 100, TPM: 10000}
	t0 := h.clk.Now()
	req := h.req("a", lim, lim, 1000)
	req.LeaseTTL = 30 * time.Second
	dead := h.grant(req) // its process dies: never released in time
	h.clk.Set(t0.Add(29 * time.Second))
	h.refuse(req, core.GateSourceConcurrency)
	h.wantUsage("a", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 1000})
	h.clk.Set(t0.Add(30 * time.Second))
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 1, Tokens: 1000})
	h.wantUsage("", core.LimiterUsage{InFlight: 0, Requests: 1, Tokens: 1000})
	alive := h.grant(req)
	// The late release of the expired permit is a no-op: it neither frees the
	// live permit's slot nor settles the dead permit's tokens.
	h.release(dead, core.Settlement{Kind: core.SettleRefund})
	h.wantUsage("a", core.LimiterUsage{InFlight: 1, Requests: 2, Tokens: 2000})
	h.wantUsage("", core.LimiterUsage{InFlight: 1, Requests: 2, Tokens: 2000})
	h.refuse(req, core.GateSourceConcurrency)
	h.release(alive, core.Settlement{Kind: core.SettleActual, Tokens: 10})
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 2, Tokens: 1010})
}

func limiterDoubleRelease(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 1, RPM: 100, TPM: 10000}
	a := h.grant(h.req("a", lim, lim, 1000))
	h.release(a, core.Settlement{Kind: core.SettleActual, Tokens: 100})
	b := h.grant(h.req("a", lim, lim, 1000))
	h.release(a, core.Settlement{Kind: core.SettleRefund})
	h.release(a, core.Settlement{Kind: core.SettleActual, Tokens: 5000})
	h.wantUsage("a", core.LimiterUsage{InFlight: 1, Requests: 2, Tokens: 1100})
	h.wantUsage("", core.LimiterUsage{InFlight: 1, Requests: 2, Tokens: 1100})
	h.refuse(h.req("a", lim, lim, 0), core.GateSourceConcurrency)
	h.release(b, core.Settlement{Kind: core.SettleEstimate})
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 2, Tokens: 1100})
}

func limiterUnknownPermit(h *limiterHarness) {
	lim := core.Limits{MaxConcurrency: 1, RPM: 100, TPM: 10000}
	p := h.grant(h.req("a", lim, lim, 1000))
	before, beforeG := h.usage("a"), h.usage("")
	forged := []core.Permit{
		{},
		{Scope: h.scope, Source: "a", Lease: p.Lease + 1000, Tokens: 1000, AcquiredAt: p.AcquiredAt},
		{Scope: h.scope, Source: "b", Lease: p.Lease, Tokens: 1000, AcquiredAt: p.AcquiredAt},
		{Scope: h.scope + "/other", Source: "a", Lease: p.Lease, Tokens: 1000, AcquiredAt: p.AcquiredAt},
	}
	for _, f := range forged {
		h.release(f, core.Settlement{Kind: core.SettleRefund})
	}
	if got := h.usage("a"); got != before {
		h.t.Fatalf("unknown permits changed the source: %+v, was %+v", got, before)
	}
	if got := h.usage(""); got != beforeG {
		h.t.Fatalf("unknown permits changed the scope: %+v, was %+v", got, beforeG)
	}
	if u := h.usageOf(h.scope+"/never", "x"); u != (core.LimiterUsage{}) {
		h.t.Fatalf("Usage of an unknown source = %+v, want zero", u)
	}
}

func limiterGlobalScopes(h *limiterHarness) {
	glob := core.Limits{MaxConcurrency: 3, RPM: 2, TPM: 1000}
	other := &limiterHarness{t: h.t, l: h.l, clk: h.clk, scope: h.scope + "/other"}
	h.grant(h.req("a", core.Limits{}, glob, 400))
	h.grant(h.req("b", core.Limits{}, glob, 400))
	h.refuse(h.req("a", core.Limits{}, glob, 0), core.GateGlobalRPM)
	h.refuse(h.req("c", core.Limits{}, glob, 0), core.GateGlobalRPM)
	h.wantUsage("", core.LimiterUsage{InFlight: 2, Requests: 2, Tokens: 800})
	// Another scope with the same source names has gates of its own.
	other.grant(other.req("a", core.Limits{}, glob, 1000))
	other.grant(other.req("b", core.Limits{}, glob, 0))
	other.wantUsage("", core.LimiterUsage{InFlight: 2, Requests: 2, Tokens: 1000})
	h.wantUsage("", core.LimiterUsage{InFlight: 2, Requests: 2, Tokens: 800})
}

func limiterSourcesIndependent(h *limiterHarness) {
	src := core.Limits{MaxConcurrency: 1, RPM: 1, TPM: 100}
	h.grant(h.req("a", src, core.Limits{}, 100))
	h.refuse(h.req("a", src, core.Limits{}, 0), core.GateSourceConcurrency)
	h.grant(h.req("b", src, core.Limits{}, 100))
	h.wantUsage("a", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 100})
	h.wantUsage("b", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 100})
}

// pooled returns req in pool.
func pooled(req core.PermitRequest, pool string) core.PermitRequest {
	req.Pool = pool
	return req
}

func limiterPoolsShare(h *limiterHarness) {
	glob := core.Limits{MaxConcurrency: 2, RPM: 3, TPM: 1000}
	pool := h.scope + "/pool"
	x := &limiterHarness{t: h.t, l: h.l, clk: h.clk, scope: h.scope + "/x"}
	y := &limiterHarness{t: h.t, l: h.l, clk: h.clk, scope: h.scope + "/y"}
	px := x.grant(pooled(x.req("a", core.Limits{}, glob, 300), pool))
	y.grant(pooled(y.req("a", core.Limits{}, glob, 300), pool))
	// The pool's two slots are taken by two scopes.
	x.refuse(pooled(x.req("b", core.Limits{}, glob, 0), pool), core.GateGlobalConcurrency)
	y.refuse(pooled(y.req("b", core.Limits{}, glob, 0), pool), core.GateGlobalConcurrency)
	x.wantUsage("", core.LimiterUsage{InFlight: 2, Requests: 2, Tokens: 600})
	y.wantUsage("", core.LimiterUsage{InFlight: 2, Requests: 2, Tokens: 600})
	x.release(px, core.Settlement{Kind: core.SettleActual, Tokens: 100})
	y.wantUsage("", core.LimiterUsage{InFlight: 1, Requests: 2, Tokens: 400})
	// A freed slot is anyone's in the pool; the third request is the RPM's last.
	y.grant(pooled(y.req("b", core.Limits{}, glob, 500), pool))
	x.refuse(pooled(x.req("a", core.Limits{}, core.Limits{RPM: 3}, 0), pool), core.GateGlobalRPM)
	// Source gates stay each scope's own, even for the same source name.
	src := core.Limits{MaxConcurrency: 1}
	x2 := &limiterHarness{t: h.t, l: h.l, clk: h.clk, scope: h.scope + "/x2"}
	y2 := &limiterHarness{t: h.t, l: h.l, clk: h.clk, scope: h.scope + "/y2"}
	x2.grant(pooled(x2.req("s", src, core.Limits{}, 0), pool+"2"))
	y2.grant(pooled(y2.req("s", src, core.Limits{}, 0), pool+"2"))
	x2.refuse(pooled(x2.req("s", src, core.Limits{}, 0), pool+"2"), core.GateSourceConcurrency)
}

func limiterPoolsIndependent(h *limiterHarness) {
	glob := core.Limits{MaxConcurrency: 1}
	p, q := h.scope+"/p", h.scope+"/q"
	x := &limiterHarness{t: h.t, l: h.l, clk: h.clk, scope: h.scope + "/x"}
	y := &limiterHarness{t: h.t, l: h.l, clk: h.clk, scope: h.scope + "/y"}
	z := &limiterHarness{t: h.t, l: h.l, clk: h.clk, scope: p} // a scope named like pool p
	x.grant(pooled(x.req("a", core.Limits{}, glob, 0), p))
	x.refuse(pooled(x.req("a", core.Limits{}, glob, 0), p), core.GateGlobalConcurrency)
	y.grant(pooled(y.req("a", core.Limits{}, glob, 0), q))
	z.grant(z.req("a", core.Limits{}, glob, 0))
	h.grant(h.req("a", core.Limits{}, glob, 0))
	x.wantUsage("", core.LimiterUsage{InFlight: 1})
	y.wantUsage("", core.LimiterUsage{InFlight: 1})
	z.wantUsage("", core.LimiterUsage{InFlight: 1})
}

package backendtest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// AdmitterBackend is what RunAdmitterSuite tests: an Admitter, and the
// Limiter and Breaker whose state it changes, through which the suite
// reads that state (Usage, Snapshot) and sets it up.
type AdmitterBackend struct {
	Admitter core.Admitter
	Limiter  core.Limiter
	Breaker  core.Breaker
}

// RunAdmitterSuite runs the core.Admitter conformance suite. newAdmitter
// is called once per subtest with that subtest's t and a fresh FakeClock;
// it may return the same shared backend every time, since each subtest
// uses its own scope names.
//
// Semantics pinned by the suite, beyond the port contract and the Limiter
// and Breaker suites:
//
//   - A ticket refused by the breaker carries no grant and the gates count
//     nothing; a ticket refused by a gate names the gate and holds nothing
//     (no slot, no request, no tokens); a probe the breaker granted to a
//     ticket a gate refused is given back (the probe is free again).
//   - Finish releases the permit, settles its tokens as the settlement says
//     and records the outcome, fenced by the admission's epoch: a ticket of
//     an epoch the circuit has left is applied=false, yet its slots are
//     freed and its tokens settled all the same.
//   - A slot whose ticket is never finished frees when its lease ends.
//   - PermitRequest.Pool (with BreakerConfig.Pool naming the same pool, as
//     the engine sends them): the global gates are the pool's, shared by
//     every scope naming it; source gates and circuits stay per scope.
//   - Budgets, as in the Limiter suite, in the same step as the breaker
//     and the gates: a ticket a budget refuses names it and holds nothing
//     (no slot, no reservation, the probe given back); Finish settles
//     the reservation as the settlement says; the scopes of a pool share a
//     budget.
//   - The switch (Breaker.SetEnabled): a source the Breaker has switched
//     off is refused by Admit with Disabled (no grant, nothing counted, no
//     probe granted), its circuit kept underneath, until it is switched on
//     again.
//   - The pushback: the Admitter's PushBack and its Breaker's share one
//     record: a source pushed back through either is refused by Admit
//     with PushedBack and the pushback's time left (no grant, nothing counted, no budget reserved, the circuit
//     untouched) and by the Breaker's Allow alike, until it ends; the
//     switch comes first.
func RunAdmitterSuite(t *testing.T, newAdmitter func(t *testing.T, clk *FakeClock) AdmitterBackend, opts ...SuiteOption) {
	t.Helper()
	o := buildSuiteOptions(opts)
	for _, tc := range slices.Concat(admitterCases, admitterBudgetCases, admitterPushbackCases) {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(epoch())
			b := newAdmitter(t, clk)
			tc.run(&admitterHarness{t: t, be: b, clk: clk, scope: t.Name(), cfg: SuiteBreakerConfig(), opt: o})
		})
	}
}

var admitterCases = []struct {
	name string
	run  func(h *admitterHarness)
}{
	{"GrantedTicketHoldsPermit", admitterGrant},
	{"BreakerRefusalHoldsNothing", admitterBreakerRefusal},
	{"GateRefusalHoldsNothing", admitterGateRefusal},
	{"ProbeGivenBackWhenGateRefuses", admitterProbeGivenBack},
	{"FinishReleasesSettlesRecords", admitterFinish},
	{"FinishFencedByEpochStillReleases", admitterFenced},
	{"ProbeSuccessCloses", admitterProbeCloses},
	{"LeaseExpiryFreesSlots", admitterLeaseExpiry},
	{"PoolsShareGlobalGates", admitterPools},
	{"PooledSourcesAndCircuitsPerScope", admitterPoolScopes},
}

// admitterHarness carries one subtest's backend, clock, scope and config.
type admitterHarness struct {
	t     *testing.T
	be    AdmitterBackend
	clk   *FakeClock
	scope string
	cfg   core.BreakerConfig
	opt   suiteOptions
}

// in returns a harness for another scope in pool, sharing the backend.
func (h *admitterHarness) in(scope, pool string) *admitterHarness {
	c := *h
	c.scope = scope
	c.cfg.Pool = pool
	return &c
}

func (h *admitterHarness) req(source string, src, glob core.Limits, tokens int) core.AdmitRequest {
	return core.AdmitRequest{Breaker: h.cfg, Permit: core.PermitRequest{
		Scope: h.scope, Source: source, SourceLimits: src, GlobalLimits: glob,
		Tokens: tokens, LeaseTTL: suiteLeaseTTL, Pool: h.cfg.Pool,
	}}
}

func (h *admitterHarness) admit(r core.AdmitRequest) core.Ticket {
	h.t.Helper()
	t, err := h.be.Admitter.Admit(h.t.Context(), r)
	if err != nil {
		h.t.Fatalf("Admit(%s/%s): %v", r.Permit.Scope, r.Permit.Source, err)
	}
	if t.Breaker != r.Breaker {
		h.t.Fatalf("ticket's breaker config %+v, want the request's %+v", t.Breaker, r.Breaker)
	}
	return t
}

func (h *admitterHarness) granted(r core.AdmitRequest) core.Ticket {
	h.t.Helper()
	t := h.admit(r)
	if !t.Admitted() {
		h.t.Fatalf("Admit(%s/%s) at %v = %+v, want admitted", r.Permit.Scope, r.Permit.Source, h.clk.Now().Sub(epoch()), t)
	}
	p := t.Grant.Permit
	if p.Scope != r.Permit.Scope || p.Source != r.Permit.Source || p.Lease == 0 || p.Tokens != max(r.Permit.Tokens, 0) {
		h.t.Fatalf("permit %+v does not match the request %+v", p, r.Permit)
	}
	return t
}

func (h *admitterHarness) refusedBy(r core.AdmitRequest, gate core.Gate) core.Ticket {
	h.t.Helper()
	t := h.admit(r)
	if !t.Admission.Allowed || t.Grant.OK || t.Grant.Gate != gate || !reflect.DeepEqual(t.Grant.Permit, core.Permit{}) {
		h.t.Fatalf("Admit(%s/%s) = %+v, want admitted by the breaker and refused by %v", r.Permit.Scope, r.Permit.Source, t, gate)
	}
	return t
}

func (h *admitterHarness) finish(t core.Ticket, s core.Settlement, o core.Outcome) bool {
	h.t.Helper()
	applied, err := h.be.Admitter.Finish(h.t.Context(), t, s, o)
	if err != nil {
		h.t.Fatalf("Finish: %v", err)
	}
	return applied
}

func (h *admitterHarness) usage(source string) core.LimiterUsage {
	h.t.Helper()
	u, err := h.be.Limiter.Usage(h.t.Context(), h.scope, source)
	if err != nil {
		h.t.Fatalf("Usage: %v", err)
	}
	return u
}

func (h *admitterHarness) wantUsage(source string, want core.LimiterUsage) {
	h.t.Helper()
	if got := h.usage(source); got != want {
		h.t.Fatalf("Usage(%s, %q) at %v = %+v, want %+v", h.scope, source, h.clk.Now().Sub(epoch()), got, want)
	}
}

func (h *admitterHarness) snap(source string) core.BreakerSnapshot {
	h.t.Helper()
	s, err := h.be.Breaker.Snapshot(h.t.Context(), h.scope, source, h.cfg)
	if err != nil {
		h.t.Fatalf("Snapshot: %v", err)
	}
	return s
}

// open opens source's circuit with a dead source and returns the snapshot.
func (h *admitterHarness) open(source string) {
	h.t.Helper()
	t := h.granted(h.req(source, core.Limits{}, core.Limits{}, 0))
	if !h.finish(t, core.Settlement{Kind: core.SettleRefund}, core.OutcomeDead) {
		h.t.Fatal("Finish(dead) not applied")
	}
	if s := h.snap(source); s.State != core.StateOpen {
		h.t.Fatalf("state after a dead source = %v, want open", s.State)
	}
}

var allGates = core.Limits{MaxConcurrency: 2, RPM: 10, TPM: 1000}

func admitterGrant(h *admitterHarness) {
	t := h.granted(h.req("a", allGates, allGates, 100))
	if t.Admission.State != core.StateClosed || t.Admission.Probe {
		h.t.Fatalf("admission %+v, want closed and no probe", t.Admission)
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 100})
	h.wantUsage("", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 100})
}

func admitterBreakerRefusal(h *admitterHarness) {
	h.open("a")
	before := h.usage("a")
	t := h.admit(h.req("a", allGates, allGates, 100))
	if t.Admission.Allowed || t.Admitted() || !reflect.DeepEqual(t.Grant, core.Grant{}) {
		h.t.Fatalf("Admit on an open circuit = %+v, want refused by the breaker with no grant", t)
	}
	if t.Admission.State != core.StateOpen || t.Admission.RetryAfter != h.cfg.Cooldown {
		h.t.Fatalf("refusal %+v, want open with RetryAfter %v", t.Admission, h.cfg.Cooldown)
	}
	h.wantUsage("a", before)
	h.wantUsage("", core.LimiterUsage{})
}

func admitterGateRefusal(h *admitterHarness) {
	one := core.Limits{MaxConcurrency: 1, RPM: 10, TPM: 1000}
	h.granted(h.req("a", one, allGates, 100))
	h.refusedBy(h.req("a", one, allGates, 100), core.GateSourceConcurrency)
	h.wantUsage("a", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 100})
	h.wantUsage("", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 100})
	// A global refusal holds nothing on the source either.
	h.granted(h.req("b", allGates, core.Limits{MaxConcurrency: 2}, 0))
	h.refusedBy(h.req("c", allGates, core.Limits{MaxConcurrency: 2}, 0), core.GateGlobalConcurrency)
	h.wantUsage("c", core.LimiterUsage{})
	if s := h.snap("c"); s.State != core.StateClosed || s.ConsecutiveFailures != 0 {
		h.t.Fatalf("a refused ticket changed the circuit: %+v", s)
	}
}

func admitterProbeGivenBack(h *admitterHarness) {
	full := core.Limits{MaxConcurrency: 1}
	h.open("a")
	h.clk.Advance(h.cfg.Cooldown)
	// Fill the only slot (through the limiter: the circuit is half-open).
	hold, err := h.be.Limiter.TryAcquire(h.t.Context(), h.req("a", full, core.Limits{}, 0).Permit)
	if err != nil || !hold.OK {
		h.t.Fatalf("TryAcquire = %+v, %v", hold, err)
	}
	t := h.refusedBy(h.req("a", full, core.Limits{}, 0), core.GateSourceConcurrency)
	if !t.Admission.Probe {
		h.t.Fatalf("admission %+v, want the probe (then given back)", t.Admission)
	}
	if s := h.snap("a"); s.ProbeHeld || s.State != core.StateHalfOpen {
		h.t.Fatalf("snapshot %+v, want half-open with the probe free", s)
	}
	if err := h.be.Limiter.Release(h.t.Context(), hold.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		h.t.Fatal(err)
	}
	p := h.granted(h.req("a", full, core.Limits{}, 0))
	if !p.Admission.Probe {
		h.t.Fatalf("admission %+v after the slot freed, want the probe", p.Admission)
	}
}

func admitterFinish(h *admitterHarness) {
	t := h.granted(h.req("a", allGates, allGates, 100))
	if !h.finish(t, core.Settlement{Kind: core.SettleActual, Tokens: 30}, core.OutcomeFailure) {
		h.t.Fatal("Finish not applied")
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 1, Tokens: 30})
	h.wantUsage("", core.LimiterUsage{InFlight: 0, Requests: 1, Tokens: 30})
	if s := h.snap("a"); s.ConsecutiveFailures != 1 || s.State != core.StateClosed {
		h.t.Fatalf("snapshot %+v, want one failure recorded", s)
	}
	// Estimate keeps, refund returns the tokens; a success resets the failures.
	e := h.granted(h.req("a", allGates, allGates, 100))
	r := h.granted(h.req("a", allGates, allGates, 100))
	h.finish(e, core.Settlement{Kind: core.SettleEstimate}, core.OutcomeTimeout)
	h.finish(r, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess)
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 3, Tokens: 130})
	if s := h.snap("a"); s.ConsecutiveFailures != 0 {
		h.t.Fatalf("snapshot %+v, want the success to reset the failures", s)
	}
}

func admitterFenced(h *admitterHarness) {
	a := h.granted(h.req("a", allGates, core.Limits{}, 100))
	b := h.granted(h.req("a", allGates, core.Limits{}, 100))
	if !h.finish(b, core.Settlement{Kind: core.SettleRefund}, core.OutcomeDead) {
		h.t.Fatal("Finish(dead) not applied")
	}
	if h.finish(a, core.Settlement{Kind: core.SettleActual, Tokens: 40}, core.OutcomeSuccess) {
		h.t.Fatal("a ticket of the epoch before the open was applied")
	}
	if s := h.snap("a"); s.State != core.StateOpen {
		h.t.Fatalf("state %v, want still open", s.State)
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 2, Tokens: 40})
}

func admitterProbeCloses(h *admitterHarness) {
	h.open("a")
	h.clk.Advance(h.cfg.Cooldown)
	p := h.granted(h.req("a", allGates, core.Limits{}, 0))
	if !p.Admission.Probe {
		h.t.Fatalf("admission %+v, want the probe", p.Admission)
	}
	if t := h.admit(h.req("a", allGates, core.Limits{}, 0)); t.Admission.Allowed {
		h.t.Fatalf("a second caller was admitted while the probe is out: %+v", t)
	}
	if !h.finish(p, core.Settlement{Kind: core.SettleActual, Tokens: 5}, core.OutcomeSuccess) {
		h.t.Fatal("the probe's Finish was not applied")
	}
	if s := h.snap("a"); s.State != core.StateClosed {
		h.t.Fatalf("state %v after the probe's success, want closed", s.State)
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 1, Tokens: 5})
}

func admitterLeaseExpiry(h *admitterHarness) {
	one := core.Limits{MaxConcurrency: 1}
	r := h.req("a", one, one, 0)
	r.Permit.LeaseTTL = 10 * time.Second
	old := h.granted(r)
	h.clk.Advance(10*time.Second - time.Millisecond)
	h.refusedBy(r, core.GateSourceConcurrency)
	h.clk.Advance(time.Millisecond)
	h.granted(r)
	// The late Finish of the expired ticket frees nothing of the new one.
	h.finish(old, core.Settlement{Kind: core.SettleActual}, core.OutcomeSuccess)
	h.wantUsage("a", core.LimiterUsage{InFlight: 1})
	h.wantUsage("", core.LimiterUsage{InFlight: 1})
}

func admitterPools(h *admitterHarness) {
	glob := core.Limits{MaxConcurrency: 2, RPM: 5}
	pool := h.scope + "/pool"
	x, y := h.in(h.scope+"/x", pool), h.in(h.scope+"/y", pool)
	other := h.in(h.scope+"/z", h.scope+"/other")
	free := h.in(h.scope+"/free", "")
	tx := x.granted(x.req("a", core.Limits{}, glob, 0))
	y.granted(y.req("a", core.Limits{}, glob, 0))
	x.refusedBy(x.req("b", core.Limits{}, glob, 0), core.GateGlobalConcurrency)
	y.refusedBy(y.req("b", core.Limits{}, glob, 0), core.GateGlobalConcurrency)
	x.wantUsage("", core.LimiterUsage{InFlight: 2, Requests: 2})
	y.wantUsage("", core.LimiterUsage{InFlight: 2, Requests: 2})
	// Another pool and an unpooled scope have gates of their own.
	other.granted(other.req("a", core.Limits{}, glob, 0))
	other.granted(other.req("b", core.Limits{}, glob, 0))
	free.granted(free.req("a", core.Limits{}, glob, 0))
	free.granted(free.req("b", core.Limits{}, glob, 0))
	// Finish frees the pool's slot for any of its scopes.
	x.finish(tx, core.Settlement{Kind: core.SettleActual}, core.OutcomeSuccess)
	y.wantUsage("", core.LimiterUsage{InFlight: 1, Requests: 2})
	y.granted(y.req("b", core.Limits{}, glob, 0))
}

func admitterPoolScopes(h *admitterHarness) {
	pool := h.scope + "/pool"
	x, y := h.in(h.scope+"/x", pool), h.in(h.scope+"/y", pool)
	one := core.Limits{MaxConcurrency: 1}
	// Same source name, two scopes of one pool: two source gates.
	x.granted(x.req("s", one, core.Limits{}, 0))
	y.granted(y.req("s", one, core.Limits{}, 0))
	x.refusedBy(x.req("s", one, core.Limits{}, 0), core.GateSourceConcurrency)
	x.wantUsage("s", core.LimiterUsage{InFlight: 1})
	// A circuit opened in one scope is that scope's alone.
	x.open("t")
	if s := y.snap("t"); s.State != core.StateClosed {
		h.t.Fatalf("y's circuit is %v after x's opened, want closed", s.State)
	}
	y.granted(y.req("t", core.Limits{}, core.Limits{}, 0))
}

package backendtest

import (
	"reflect"
	"time"

	"github.com/polygateway/polygateway/core"
)

var admitterPushbackCases = []struct {
	name string
	run  func(h *admitterHarness)
}{
	{"PushedBackSourceRefusedHoldsNothing", admitterPushback},
	{"PushbackSharedWithTheBreaker", admitterPushbackShared},
	{"PushbackWithBudgetReservesNothing", admitterPushbackBudget},
}

// pushBack records a pushback of source through the Admitter.
func (h *admitterHarness) pushBack(source string, d time.Duration) {
	h.t.Helper()
	if err := h.be.Admitter.PushBack(h.t.Context(), h.scope, source, h.cfg, d); err != nil {
		h.t.Fatalf("PushBack(%s/%s, %v): %v", h.scope, source, d, err)
	}
}

// pushedBack checks that Admit refuses r as pushed back for retryAfter
// with no grant.
func (h *admitterHarness) pushedBack(r core.AdmitRequest, retryAfter time.Duration) {
	h.t.Helper()
	t := h.admit(r)
	a := t.Admission
	if a.Allowed || a.Probe || !a.PushedBack || a.Disabled || a.RetryAfter != retryAfter || t.Admitted() || !reflect.DeepEqual(t.Grant, core.Grant{}) {
		h.t.Fatalf("Admit(%s/%s) = %+v, want refused as pushed back for %v with no grant", r.Permit.Scope, r.Permit.Source, t, retryAfter)
	}
}

func admitterPushback(h *admitterHarness) {
	r := h.req("a", allGates, allGates, 100)
	h.pushBack("a", 0) // nothing
	h.finish(h.granted(r), core.Settlement{Kind: core.SettleRefund}, core.OutcomeRateLimited)
	before, beforeG, snap := h.usage("a"), h.usage(""), h.snap("a")
	h.pushBack("a", 2*time.Second)
	h.pushedBack(r, 2*time.Second)
	h.clk.Advance(time.Second)
	h.pushedBack(r, time.Second)
	h.wantUsage("a", before)
	h.wantUsage("", beforeG)
	if s := h.snap("a"); s != snap {
		h.t.Fatalf("a pushback changed the circuit: %+v, was %+v", s, snap)
	}
	// Another source is not held back.
	h.granted(h.req("b", allGates, allGates, 0))
	h.clk.Advance(time.Second)
	h.granted(r)
}

func admitterPushbackShared(h *admitterHarness) {
	// Recorded through the Admitter: the Breaker's Allow refuses too.
	h.pushBack("a", 3*time.Second)
	a, err := h.be.Breaker.Allow(h.t.Context(), h.scope, "a", h.cfg)
	if err != nil || a.Allowed || !a.PushedBack || a.RetryAfter != 3*time.Second {
		h.t.Fatalf("Breaker.Allow = (%+v, %v), want refused as pushed back for 3s", a, err)
	}
	// Recorded through the Breaker: Admit refuses.
	if err := h.be.Breaker.PushBack(h.t.Context(), h.scope, "b", h.cfg, 4*time.Second); err != nil {
		h.t.Fatalf("Breaker.PushBack: %v", err)
	}
	h.pushedBack(h.req("b", allGates, allGates, 0), 4*time.Second)
	// The switch comes first.
	h.setEnabled("b", false)
	if t := h.admit(h.req("b", allGates, allGates, 0)); t.Admission.Allowed || !t.Admission.Disabled || t.Admission.PushedBack {
		h.t.Fatalf("Admit of a switched-off, pushed-back source = %+v, want refused as switched off", t)
	}
	h.setEnabled("b", true)
	h.pushedBack(h.req("b", allGates, allGates, 0), 4*time.Second)
}

func admitterPushbackBudget(h *admitterHarness) {
	b := h.budget("b", 1000, time.Hour)
	r := spend(h.req("a", allGates, allGates, 100), 400, b)
	h.pushBack("a", time.Second)
	h.pushedBack(r, time.Second)
	h.wantSpent(b, 0)
	h.clk.Advance(time.Second)
	h.granted(r)
	h.wantSpent(b, 400)
}

package backendtest

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

var breakerPushbackCases = []struct {
	name string
	run  func(h *breakerHarness)
}{
	{"PushbackRefusesUntilItEnds", breakerPushbackRefuses},
	{"PushbackNeverShortens", breakerPushbackNeverShortens},
	{"PushbackOfNothingRecordsNothing", breakerPushbackNothing},
	{"PushbackKeepsTheCircuit", breakerPushbackKeepsCircuit},
	{"PushbackOnAnOpenCircuitWaitsForBoth", breakerPushbackOnOpen},
	{"PushbackGrantsNoProbe", breakerPushbackNoProbe},
	{"SwitchedOffWinsOverPushback", breakerPushbackSwitchedOff},
	{"PushbackSurvivesReset", breakerPushbackSurvivesReset},
	{"PushbackIsPerCircuit", breakerPushbackPerCircuit},
}

func (h *breakerHarness) pushBack(d time.Duration) {
	h.t.Helper()
	if err := h.b.PushBack(h.t.Context(), h.scope, h.source, h.cfg, d); err != nil {
		h.t.Fatalf("PushBack(%v): %v", d, err)
	}
}

// pushedBack checks that Allow refuses the source as pushed back, with
// the circuit's state and retryAfter, and grants no probe.
func (h *breakerHarness) pushedBack(state core.BreakerState, retryAfter time.Duration) core.Admission {
	h.t.Helper()
	a := h.allow()
	if a.Allowed || a.Probe || !a.PushedBack || a.Disabled || a.State != state || a.RetryAfter != retryAfter {
		h.t.Fatalf("Allow = %+v, want refused as pushed back with state %v and RetryAfter %v", a, state, retryAfter)
	}
	return a
}

func breakerPushbackRefuses(h *breakerHarness) {
	h.admit()
	h.pushBack(10 * time.Second)
	h.pushedBack(core.StateClosed, 10*time.Second)
	h.clk.Advance(4 * time.Second)
	h.pushedBack(core.StateClosed, 6*time.Second)
	h.clk.Advance(6*time.Second - time.Millisecond)
	h.pushedBack(core.StateClosed, time.Millisecond)
	h.clk.Advance(time.Millisecond)
	if a := h.admit(); a.PushedBack || a.State != core.StateClosed {
		h.t.Fatalf("Allow once the pushback ended = %+v, want admitted and closed", a)
	}
}

func breakerPushbackNeverShortens(h *breakerHarness) {
	h.pushBack(10 * time.Second)
	h.pushBack(2 * time.Second)
	h.pushedBack(core.StateClosed, 10*time.Second)
	h.clk.Advance(time.Second)
	h.pushBack(20 * time.Second)
	h.pushedBack(core.StateClosed, 20*time.Second)
	h.clk.Advance(20 * time.Second)
	h.admit()
}

func breakerPushbackNothing(h *breakerHarness) {
	h.pushBack(0)
	h.pushBack(-time.Second)
	if a := h.admit(); a.PushedBack {
		h.t.Fatalf("Allow after PushBack(0) = %+v, want admitted", a)
	}
}

func breakerPushbackKeepsCircuit(h *breakerHarness) {
	h.record(core.OutcomeFailure, core.OutcomeFailure)
	before := h.snap()
	h.pushBack(5 * time.Second)
	for range 3 {
		h.pushedBack(core.StateClosed, 5*time.Second)
	}
	if s := h.snap(); s != before {
		h.t.Fatalf("snapshot %+v while pushed back, want the circuit as it was (%+v)", s, before)
	}
	h.clk.Advance(5 * time.Second)
	if a := h.admit(); a.Epoch != before.Epoch {
		h.t.Fatalf("admitted with epoch %d after the pushback, want the circuit's %d", a.Epoch, before.Epoch)
	}
	// The failures before the pushback still count: three more open it.
	h.record(core.OutcomeFailure, core.OutcomeFailure, core.OutcomeFailure)
	h.wantOpen(h.cfg.Cooldown, 1)
}

func breakerPushbackOnOpen(h *breakerHarness) {
	h.record(core.OutcomeDead)
	open := h.wantOpen(h.cfg.Cooldown, 1)
	// A shorter pushback: the cooldown is the longer wait.
	h.pushBack(5 * time.Second)
	h.pushedBack(core.StateOpen, h.cfg.Cooldown)
	// A longer one: the pushback is.
	h.pushBack(2 * h.cfg.Cooldown)
	h.pushedBack(core.StateOpen, 2*h.cfg.Cooldown)
	h.clk.Advance(h.cfg.Cooldown)
	h.pushedBack(core.StateHalfOpen, h.cfg.Cooldown)
	if s := h.snap(); s.ProbeHeld || s.Epoch != open.Epoch {
		h.t.Fatalf("snapshot %+v, want no probe out and the epoch of the open (%d)", s, open.Epoch)
	}
	h.clk.Advance(h.cfg.Cooldown)
	h.probe()
}

func breakerPushbackNoProbe(h *breakerHarness) {
	h.record(core.OutcomeDead)
	h.clk.Advance(h.cfg.Cooldown)
	p := h.probe()
	// The probe is out: a pushback shorter than its lease waits for the lease.
	h.pushBack(time.Second)
	h.pushedBack(core.StateHalfOpen, h.cfg.ProbeTTL)
	// The probe's holder still reports; the 429 returns the probe.
	h.apply(p, core.OutcomeRateLimited)
	h.pushedBack(core.StateHalfOpen, time.Second)
	if s := h.snap(); s.ProbeHeld {
		h.t.Fatalf("snapshot %+v: a probe was granted while pushed back", s)
	}
	h.clk.Advance(time.Second)
	h.probe()
}

func breakerPushbackSwitchedOff(h *breakerHarness) {
	h.pushBack(10 * time.Second)
	h.setEnabled(false)
	if a := h.disabled(core.StateClosed); a.PushedBack {
		h.t.Fatalf("Allow = %+v, want refused as switched off only", a)
	}
	h.setEnabled(true)
	h.pushedBack(core.StateClosed, 10*time.Second)
}

func breakerPushbackSurvivesReset(h *breakerHarness) {
	h.pushBack(10 * time.Second)
	if err := h.b.Reset(h.t.Context(), h.scope, h.source, h.cfg); err != nil {
		h.t.Fatalf("Reset: %v", err)
	}
	h.pushedBack(core.StateClosed, 10*time.Second)
}

func breakerPushbackPerCircuit(h *breakerHarness) {
	h.pushBack(10 * time.Second)
	if a := h.on(h.scope, h.source+"-other").admit(); a.PushedBack {
		h.t.Fatalf("another source = %+v, want admitted", a)
	}
	if a := h.on(h.scope+"-other", h.source).admit(); a.PushedBack {
		h.t.Fatalf("the source in another scope = %+v, want admitted", a)
	}
	h.pushedBack(core.StateClosed, 10*time.Second)
}

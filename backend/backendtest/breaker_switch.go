package backendtest

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

var breakerSwitchCases = []struct {
	name string
	run  func(h *breakerHarness)
}{
	{"SwitchRefusesUntilOn", breakerSwitchRefuses},
	{"SwitchKeepsOpenCircuit", breakerSwitchKeepsOpen},
	{"SwitchKeepsHistory", breakerSwitchKeepsHistory},
	{"SwitchSurvivesReset", breakerSwitchSurvivesReset},
	{"SwitchIsPerCircuit", breakerSwitchPerCircuit},
}

func (h *breakerHarness) setEnabled(on bool) {
	h.t.Helper()
	if err := h.b.SetEnabled(h.t.Context(), h.scope, h.source, h.cfg, on); err != nil {
		h.t.Fatalf("SetEnabled(%v): %v", on, err)
	}
}

// disabled checks that Allow refuses the switched-off source with the
// circuit's state underneath.
func (h *breakerHarness) disabled(state core.BreakerState) core.Admission {
	h.t.Helper()
	a := h.allow()
	if a.Allowed || a.Probe || !a.Disabled || a.State != state || a.RetryAfter != 0 {
		h.t.Fatalf("Allow = %+v, want refused as disabled with state %v and RetryAfter 0", a, state)
	}
	if s := h.snap(); !s.Disabled || s.State != state {
		h.t.Fatalf("Snapshot = %+v, want disabled and %v", s, state)
	}
	return a
}

func breakerSwitchRefuses(h *breakerHarness) {
	h.setEnabled(true) // on already: a no-op
	h.admit()
	h.setEnabled(false)
	h.setEnabled(false) // twice is once
	for range 3 {
		h.disabled(core.StateClosed)
		h.clk.Advance(time.Hour)
	}
	h.setEnabled(true)
	if a := h.admit(); a.Disabled || a.State != core.StateClosed {
		h.t.Fatalf("Allow after the switch went on = %+v", a)
	}
	if s := h.snap(); s.Disabled {
		h.t.Fatalf("Snapshot = %+v, want not disabled", s)
	}
}

func breakerSwitchKeepsOpen(h *breakerHarness) {
	h.record(core.OutcomeDead)
	open := h.wantOpen(h.cfg.Cooldown, 1)
	h.setEnabled(false)
	h.disabled(core.StateOpen)
	// The cooldown runs on underneath: half-open, and no probe is granted.
	h.clk.Advance(h.cfg.Cooldown)
	h.disabled(core.StateHalfOpen)
	if s := h.snap(); s.ProbeHeld || s.Epoch != open.Epoch || s.Opens != 1 {
		h.t.Fatalf("snapshot %+v while switched off, want the circuit as it was (%+v), no probe out", s, open)
	}
	h.setEnabled(true)
	p := h.probe()
	h.apply(p, core.OutcomeSuccess)
	h.wantState(core.StateClosed)
	// Switched off while closed, it stays closed when switched on.
	h.setEnabled(false)
	h.disabled(core.StateClosed)
	h.setEnabled(true)
	h.wantState(core.StateClosed)
}

func breakerSwitchKeepsHistory(h *breakerHarness) {
	h.record(core.OutcomeFailure, core.OutcomeFailure)
	a := h.admit() // in flight when the source is switched off
	h.setEnabled(false)
	// The call admitted before the switch still reports.
	if !h.recordAdm(a, core.OutcomeFailure) {
		h.t.Fatal("the outcome of a call admitted before the switch was not applied")
	}
	if s := h.snap(); s.ConsecutiveFailures != 3 || s.State != core.StateClosed || !s.Disabled {
		h.t.Fatalf("snapshot %+v, want 3 failures kept while switched off", s)
	}
	h.setEnabled(true)
	h.record(core.OutcomeFailure, core.OutcomeFailure)
	h.wantOpen(h.cfg.Cooldown, 1) // the fifth consecutive failure
}

func breakerSwitchSurvivesReset(h *breakerHarness) {
	h.record(core.OutcomeDead)
	h.setEnabled(false)
	if err := h.b.Reset(h.t.Context(), h.scope, h.source, h.cfg); err != nil {
		h.t.Fatal(err)
	}
	h.disabled(core.StateClosed)
	h.setEnabled(true)
	h.admit()
}

func breakerSwitchPerCircuit(h *breakerHarness) {
	h.setEnabled(false)
	for _, o := range []*breakerHarness{h.on(h.scope, "other"), h.on(h.scope+"/other", h.source)} {
		if a := o.admit(); a.Disabled {
			o.t.Fatalf("Allow of %s/%s = %+v, switched off with another circuit", o.scope, o.source, a)
		}
	}
	h.disabled(core.StateClosed)
}

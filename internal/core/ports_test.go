package core

import (
	"testing"
	"time"
)

func TestGateString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		g    Gate
		want string
	}{
		{GateNone, "none"},
		{GateSourceConcurrency, "source_concurrency"},
		{GateSourceRPM, "source_rpm"},
		{GateSourceTPM, "source_tpm"},
		{GateGlobalConcurrency, "global_concurrency"},
		{GateGlobalRPM, "global_rpm"},
		{GateGlobalTPM, "global_tpm"},
		{GateBudget, "budget"},
		{Gate(8), "unknown"},
		{Gate(255), "unknown"},
	}
	for _, tc := range tests {
		if got := tc.g.String(); got != tc.want {
			t.Errorf("Gate(%d).String() = %q, want %q", tc.g, got, tc.want)
		}
	}
}

func TestBreakerStateString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    BreakerState
		want string
	}{
		{StateClosed, "closed"},
		{StateOpen, "open"},
		{StateHalfOpen, "half_open"},
	}
	for _, tc := range tests {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("BreakerState(%d).String() = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestSystemClockTellsTheWallTime(t *testing.T) {
	t.Parallel()
	before := time.Now()
	got := SystemClock{}.Now()
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Errorf("SystemClock.Now() = %v, not within [%v, %v]", got, before, after)
	}
}

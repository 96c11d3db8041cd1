package core

import (
	"testing"
	"testing/synctest"
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

// stepClock is a Clock whose Now moves a fixed step on every read.
type stepClock struct {
	now  time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time                 { c.now = c.now.Add(c.step); return c.now }
func (c *stepClock) NewTimer(d time.Duration) Timer { return SystemClock{}.NewTimer(d) }
func (c *stepClock) AfterFunc(d time.Duration, f func()) Timer {
	return SystemClock{}.AfterFunc(d, f)
}

func TestSinceReadsTheClockItIsGiven(t *testing.T) {
	t.Parallel()
	c := &stepClock{now: time.Unix(1000, 0), step: 3 * time.Second}
	start := c.Now()
	if got := Since(c, start); got != 3*time.Second {
		t.Fatalf("Since on a clock that moved 3s = %v", got)
	}
	sys := SystemClock{}
	t0 := sys.Now()
	if got := Since(sys, t0); got < 0 || got > time.Minute {
		t.Fatalf("Since on the system clock = %v", got)
	}
	if got := Since(sys, t0.Add(-time.Hour)); got < time.Hour {
		t.Fatalf("Since an hour ago = %v, want at least an hour", got)
	}
}

// TestSystemClockAfterFuncCallsOnceAtItsTime: the function runs d after
// now, in a goroutine of its own, and not once Stop reported true.
func TestSystemClockAfterFuncCallsOnceAtItsTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := SystemClock{}
		start := c.Now()
		at := make(chan time.Time, 1)
		tm := c.AfterFunc(time.Minute, func() { at <- c.Now() })
		if tm.C() != nil {
			t.Fatal("an AfterFunc timer has a channel")
		}
		stopped := c.AfterFunc(time.Minute, func() { t.Error("a stopped AfterFunc ran") })
		if !stopped.Stop() {
			t.Fatal("Stop of a pending timer reported false")
		}
		if got := (<-at).Sub(start); got != time.Minute {
			t.Fatalf("the function ran %v after it was armed, want 1m", got)
		}
		synctest.Wait() // a wrongly kept timer, due at the same instant, has run
	})
}

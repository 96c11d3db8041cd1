package engine

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

func TestEWMAHealthFollowsVerdicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		verdicts []bool
		want     float64
	}{
		{"fresh source is healthy", nil, 1},
		{"success keeps a healthy source at 1", []bool{true, true}, 1},
		{"one failure", []bool{false}, 0.8},
		{"two failures", []bool{false, false}, 0.64},
		{"three failures are weak-ish", []bool{false, false, false}, 0.512},
		{"four failures fall below healthy", []bool{false, false, false, false}, 0.4096},
		{"failure then success", []bool{false, true}, 0.84},
		{"three failures then success", []bool{false, false, false, true}, 0.6096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSourceState(src("a", 0), core.BreakerConfig{}, nil)
			for _, good := range tc.verdicts {
				observe(s, testkit.Epoch, good)
			}
			if got := s.health(testkit.Epoch); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("health = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIdleWeakSourceRecoversTowardOne(t *testing.T) {
	t.Parallel()
	tests := []struct {
		idle time.Duration
		want float64
	}{
		{0, 0.512},
		{-time.Second, 0.512}, // a clock running backwards never changes the score
		{recoveryTau, 1 - 0.488*math.Exp(-1)},
		{2 * recoveryTau, 1 - 0.488*math.Exp(-2)},
		{10 * time.Minute, 1 - 0.488*math.Exp(-20)},
	}
	for _, tc := range tests {
		t.Run(tc.idle.String(), func(t *testing.T) {
			t.Parallel()
			clk := backendtest.NewFakeClock(testkit.Epoch)
			set := testSettings(src("a", 0))
			set.Retry.MaxAttempts = 1
			f := newFixture(t, set, withClock(clk))
			f.up.script("a", failStep(testkit.TransientErr("a")))
			for range 3 {
				if _, err := f.g.Handle(context.Background(), newCall()); err == nil {
					t.Fatal("a scripted failure succeeded")
				}
			}
			if got := f.status(t, "a").Health; math.Abs(got-0.512) > 1e-12 {
				t.Fatalf("health after three failures = %v, want 0.512", got)
			}
			clk.Advance(tc.idle)
			if got := f.status(t, "a").Health; math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("health after %v idle = %v, want %v", tc.idle, got, tc.want)
			}
		})
	}
}

func TestRecoveredHealthIsTheBaseOfTheNextObservation(t *testing.T) {
	t.Parallel()
	s := newSourceState(src("a", 0), core.BreakerConfig{}, nil)
	observe(s, testkit.Epoch, false) // 0.8
	later := testkit.Epoch.Add(recoveryTau)
	observe(s, later, false)
	want := (1 - 0.2*math.Exp(-1)) * 0.8
	if got := s.health(later); math.Abs(got-want) > 1e-12 {
		t.Errorf("health = %v, want %v", got, want)
	}
	if got := s.health(later.Add(time.Hour)); got < 0.999 || got > 1 {
		t.Errorf("health an hour later = %v, want close to 1", got)
	}
}

func TestAIMDAdaptiveLimit(t *testing.T) {
	t.Parallel()
	type op int
	const (
		success op = iota
		pushback
	)
	repeat := func(o op, n int) []op {
		out := make([]op, n)
		for i := range out {
			out[i] = o
		}
		return out
	}
	tests := []struct {
		name           string
		maxConcurrency int
		ops            []op
		want           float64
	}{
		// A cold source takes at most 4 attempts at once: a provider that
		// throttles from the first request sees no more than 4 before the
		// first 429 comes back.
		{"starts at 4", 0, nil, 4},
		{"slow start: one success adds 2", 0, []op{success}, 6},
		{"slow start: two successes", 0, []op{success, success}, 8},
		{"slow start triples in one round trip", 0, repeat(success, 4), 12},
		{"429 halves and ends slow start", 0, []op{pushback}, 2},
		{"after a 429 a success adds 1/limit", 0, []op{pushback, success}, 2.5},
		{"429 twice", 0, []op{pushback, pushback}, 1},
		{"floor is 1", 0, repeat(pushback, 10), 1},
		{"success after the floor", 0, append(repeat(pushback, 10), success), 2},
		{"cap is 64 without MAX_CONCURRENCY", 0, repeat(success, 10000), 64},
		{"cap is 64 with a small MAX_CONCURRENCY", 10, repeat(success, 10000), 64},
		{"cap is MAX_CONCURRENCY above 64", 100, repeat(success, 20000), 100},
		{"halving from the cap", 0, append(repeat(success, 10000), pushback), 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := src("a", 0)
			cfg.Limits.MaxConcurrency = tc.maxConcurrency
			s := newSourceState(cfg, core.BreakerConfig{}, nil)
			for _, o := range tc.ops {
				if o == success {
					s.settle(testkit.Epoch, healthNeutral, aimdGrow, false, time.Second)
				} else {
					s.settle(testkit.Epoch, healthNeutral, aimdHalve, false, 0)
				}
			}
			if got := s.aimdLimit(); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("limit = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAIMDPushbackCountsConsecutive429sUntilASuccess(t *testing.T) {
	t.Parallel()
	s := newSourceState(src("a", 0), core.BreakerConfig{}, nil)
	for want := 1; want <= 3; want++ {
		if got := s.settle(testkit.Epoch, healthNeutral, aimdHalve, false, 0); got != want {
			t.Fatalf("pushback #%d returned %d", want, got)
		}
	}
	s.settle(testkit.Epoch, healthNeutral, aimdGrow, false, time.Second)
	if got := s.settle(testkit.Epoch, healthNeutral, aimdHalve, false, 0); got != 1 {
		t.Errorf("pushback after a success returned %d, want 1", got)
	}
}

func TestEffectiveBreakerThresholdIsTwiceTheSourceConcurrency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		configured, maxConcurrency, want int
	}{
		{5, 0, 5},
		{5, 2, 5},
		{5, 3, 6},
		{5, 10, 20},
		{0, 1, 2},
	}
	for _, tc := range tests {
		cfg := src("a", 0)
		cfg.Limits.MaxConcurrency = tc.maxConcurrency
		s := newSourceState(cfg, core.BreakerConfig{FailThreshold: tc.configured}, nil)
		if s.breaker.FailThreshold != tc.want {
			t.Errorf("threshold(configured %d, concurrency %d) = %d, want %d",
				tc.configured, tc.maxConcurrency, s.breaker.FailThreshold, tc.want)
		}
	}
}

func TestCooldownHold(t *testing.T) {
	t.Parallel()
	t0 := testkit.Epoch
	at := t0.Add
	type set struct {
		at, until time.Duration
		kind      holdKind
	}
	tests := []struct {
		name      string
		sets      []set
		clear     bool
		readAt    time.Duration
		wantKind  holdKind
		wantUntil time.Duration
	}{
		{"no hold", nil, false, 0, holdNone, 0},
		{"soft hold while it lasts", []set{{0, 10, holdFailed}}, false, 5, holdFailed, 10},
		{"hold ends at its expiry", []set{{0, 10, holdFailed}}, false, 10, holdNone, 0},
		{"hard hold is not replaced by a soft one", []set{{0, 10, holdCircuitOpen}, {1, 20, holdTimeout}}, false, 5, holdCircuitOpen, 10},
		{"hard hold is extended by a later hard one", []set{{0, 10, holdRateLimited}, {1, 20, holdCircuitOpen}}, false, 15, holdCircuitOpen, 20},
		{"hard hold is not shortened", []set{{0, 10, holdCircuitOpen}, {1, 5, holdRateLimited}}, false, 7, holdCircuitOpen, 10},
		{"expired hard hold is replaced by a soft one", []set{{0, 10, holdCircuitOpen}, {11, 20, holdFailed}}, false, 15, holdFailed, 20},
		{"soft hold is replaced by a hard one", []set{{0, 20, holdTimeout}, {1, 10, holdRateLimited}}, false, 5, holdRateLimited, 10},
		{"success clears a soft hold", []set{{0, 10, holdTimeout}}, true, 5, holdNone, 0},
		{"success keeps a hard hold", []set{{0, 10, holdRateLimited}}, true, 5, holdRateLimited, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSourceState(src("a", 0), core.BreakerConfig{}, nil)
			for _, st := range tc.sets {
				s.setHold(at(st.at*time.Second), at(st.until*time.Second), st.kind)
			}
			if tc.clear {
				s.settle(testkit.Epoch, healthNeutral, aimdHold, true, 0)
			}
			kind, until := s.hold(at(tc.readAt * time.Second))
			if kind != tc.wantKind {
				t.Errorf("hold kind = %d, want %d", kind, tc.wantKind)
			}
			if tc.wantKind != holdNone && !until.Equal(at(tc.wantUntil*time.Second)) {
				t.Errorf("hold until = %v, want %v", until, at(tc.wantUntil*time.Second))
			}
		})
	}
}

func TestHoldHardness(t *testing.T) {
	t.Parallel()
	for kind, hard := range map[holdKind]bool{
		holdNone: false, holdFailed: false, holdTimeout: false, holdRateLimited: true, holdCircuitOpen: true,
	} {
		if kind.hard() != hard {
			t.Errorf("holdKind(%d).hard() = %v, want %v", kind, kind.hard(), hard)
		}
	}
}

func TestSlowStartEndsOnTheLatencySignal(t *testing.T) {
	t.Parallel()
	s := newSourceState(src("a", 0), core.BreakerConfig{}, nil)
	s.settle(testkit.Epoch, healthNeutral, aimdGrow, false, 100*time.Millisecond) // 6
	s.settle(testkit.Epoch, healthNeutral, aimdGrow, false, 150*time.Millisecond) // 8: within twice the fastest
	if got := s.aimdLimit(); got != 8 {
		t.Fatalf("limit = %v, want 8 in slow start", got)
	}
	s.settle(testkit.Epoch, healthNeutral, aimdGrow, false, 250*time.Millisecond) // more than twice the fastest: AIMD from here
	if got := s.aimdLimit(); math.Abs(got-(8+1.0/8)) > 1e-9 {
		t.Fatalf("limit = %v, want 8+1/8 (+1/limit once slow start ended)", got)
	}
	s.settle(testkit.Epoch, healthNeutral, aimdGrow, false, 100*time.Millisecond)
	if got := s.aimdLimit(); math.Abs(got-(8+1.0/8+1/(8+1.0/8))) > 1e-9 {
		t.Fatalf("limit = %v: slow start came back", got)
	}
}

// TestSettleCountsWhatTheHoldRuleScalesWith: a failure other than a 429
// counts one more failure since the last answer, a 429 one more pushback
// in a row (and no failure), an answer resets the failures, a success
// resets the pushbacks, and clearSoft drops a soft hold but not a hard one.
func TestSettleCountsWhatTheHoldRuleScalesWith(t *testing.T) {
	t.Parallel()
	s := newSourceState(src("a", 0), core.BreakerConfig{}, nil)
	steps := []struct {
		name   string
		health verdict
		aimd   aimdRule
		want   int
	}{
		{"first failure", healthBad, aimdHold, 1},
		{"second failure", healthBad, aimdHold, 2},
		{"a 429 counts a pushback, not a failure", healthBad, aimdHalve, 1},
		{"a second 429 in a row", healthBad, aimdHalve, 2},
		{"a third failure", healthBad, aimdHold, 3},
		{"an answer", healthGood, aimdGrow, 0},
		{"a failure after the answer", healthBad, aimdHold, 1},
		{"a 429 after the success", healthBad, aimdHalve, 1},
		{"nothing learned", healthNeutral, aimdHold, 0},
	}
	for _, st := range steps {
		if got := s.settle(testkit.Epoch, st.health, st.aimd, false, time.Second); got != st.want {
			t.Fatalf("%s: settle returned %d, want %d", st.name, got, st.want)
		}
	}
	fresh := newSourceState(src("b", 0), core.BreakerConfig{}, nil)
	if !fresh.blipReady(testkit.Epoch) {
		t.Fatal("a healthy source that never failed is ready for a blip")
	}
	fresh.settle(testkit.Epoch, healthBad, aimdHold, false, 0)
	if fresh.blipReady(testkit.Epoch) {
		t.Fatal("a source that failed since its last answer is not ready for a blip (its health is still above healthy)")
	}
	fresh.settle(testkit.Epoch, healthGood, aimdGrow, false, time.Second)
	if !fresh.blipReady(testkit.Epoch) {
		t.Fatal("a healthy source that just answered is ready for a blip")
	}
	later := testkit.Epoch.Add(time.Minute)
	s.setHold(testkit.Epoch, later, holdFailed)
	s.settle(testkit.Epoch, healthGood, aimdGrow, true, time.Second)
	if k, _ := s.hold(testkit.Epoch); k != holdNone {
		t.Fatalf("a soft hold survived clearSoft: %d", k)
	}
	s.setHold(testkit.Epoch, later, holdRateLimited)
	s.settle(testkit.Epoch, healthGood, aimdGrow, true, time.Second)
	if k, _ := s.hold(testkit.Epoch); k != holdRateLimited {
		t.Fatalf("a hard hold was cleared by clearSoft: %d", k)
	}
}

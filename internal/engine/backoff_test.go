package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

func TestBackoffStaysWithinEqualJitterBoundsAndCap(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	tests := []struct {
		name      string
		base, max time.Duration
		n         int
		d         time.Duration // nominal delay: the result lies in [d/2, d]
	}{
		{"first", 100 * ms, time.Second, 1, 100 * ms},
		{"second doubles", 100 * ms, time.Second, 2, 200 * ms},
		{"third", 100 * ms, time.Second, 3, 400 * ms},
		{"fourth", 100 * ms, time.Second, 4, 800 * ms},
		{"fifth is capped", 100 * ms, time.Second, 5, time.Second},
		{"far past the cap", 100 * ms, time.Second, 60, time.Second},
		{"huge n does not overflow", 100 * ms, time.Second, 1 << 30, time.Second},
		{"zero n is the base", 100 * ms, time.Second, 0, 100 * ms},
		{"base above max is capped", 2 * time.Second, time.Second, 1, time.Second},
		{"cap equal to base", time.Second, time.Second, 3, time.Second},
		{"odd nanoseconds", 3, 100, 1, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lo, hi := tc.d/2, tc.d
			seenLow, seenHigh := false, false
			for range 2000 {
				got := backoff(tc.base, tc.max, tc.n)
				if got < lo || got > hi {
					t.Fatalf("backoff(%v, %v, %d) = %v, want within [%v, %v]", tc.base, tc.max, tc.n, got, lo, hi)
				}
				// Jitter spreads the waits over the whole range.
				if got < lo+(hi-lo)/4 {
					seenLow = true
				}
				if got > hi-(hi-lo)/4 {
					seenHigh = true
				}
			}
			if hi-lo >= 4 && (!seenLow || !seenHigh) {
				t.Errorf("backoff(%v, %v, %d) is not jittered across [%v, %v]", tc.base, tc.max, tc.n, lo, hi)
			}
		})
	}
}

func TestBackoffWithZeroOrNegativeBaseIsZero(t *testing.T) {
	t.Parallel()
	for _, base := range []time.Duration{0, -time.Second} {
		for _, n := range []int{0, 1, 5, 100} {
			if got := backoff(base, time.Second, n); got != 0 {
				t.Errorf("backoff(%v, 1s, %d) = %v, want 0", base, n, got)
			}
		}
	}
}

// With no cap (BackoffMax 0, allowed for settings made by hand) the n-th
// backoff of a large base must not overflow: n counts a source's failures
// or 429s in a row, which an upstream can make as large as it likes.
func TestBackoffWithoutCapSaturatesInsteadOfOverflowing(t *testing.T) {
	t.Parallel()
	for _, base := range []time.Duration{5 * time.Second, time.Minute, time.Hour} {
		for _, n := range []int{31, 32, 33, 100, 1 << 30} {
			var got time.Duration
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("backoff(%v, 0, %d) panicked: %v", base, n, p)
					}
				}()
				got = backoff(base, 0, n)
			}()
			if got < base {
				t.Errorf("backoff(%v, 0, %d) = %v, want at least the base", base, n, got)
			}
		}
	}
}

// A source that keeps answering 429 to a scope without a backoff cap is
// held back, never crashing the call that read its n-th 429.
func TestPushbackWaitOfALongRunOf429sWithoutACapDoesNotPanic(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 40; n++ {
		if got := pushbackWait(0, 5*time.Second, 0, n); got < pushbackFloor {
			t.Fatalf("pushbackWait(0, 5s, 0, %d) = %v, want at least %v", n, got, pushbackFloor)
		}
	}
}

// A scope made by hand without a backoff cap (BackoffMax 0) and without
// the consecutive-failure channel: a source that fails call after call is
// held for a backoff that grows with its failures in a row. Its 32nd
// failure in a row ends its call with that failure, as the first did; the
// growing backoff never crashes the call.
func TestASourceFailingManyCallsInARowWithoutABackoffCapNeverCrashesACall(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Retry = core.RetrySettings{MaxAttempts: 1, BackoffBase: 5 * time.Second}
		set.Breaker.FailThreshold = 0
		f := newFixture(t, set)
		f.up.script("a", failStep(testkit.TransientErr("a")))
		for i := 1; i <= 40; i++ {
			_, err := f.g.Handle(context.Background(), newCall())
			var te *core.TransientError
			if !errors.As(err, &te) {
				t.Fatalf("call %d: err = %v, want the attempt's TransientError", i, err)
			}
		}
	})
}

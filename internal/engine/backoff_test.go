package engine

import (
	"testing"
	"time"
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

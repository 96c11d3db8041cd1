package engine

import (
	"math"
	"math/rand/v2"
	"time"
)

// backoff returns the n-th (1-based) exponential backoff: base·2^(n-1),
// capped at max (max <= 0: no cap), with equal jitter (half fixed, half uniform random), so
// waits stay spread out but never collapse to zero. Without a cap the
// doubling stops before it would overflow.
func backoff(base, max time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < n && i < 32 && (max <= 0 || d < max) && d <= math.MaxInt64/2; i++ {
		d *= 2
	}
	if max > 0 && d > max {
		d = max
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

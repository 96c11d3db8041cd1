package fairqueue

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// interval is the recent interval between admissions of a queue, the
// base of its estimates: an exponentially weighted mean of the time
// between one choice and the next while waiters were in line (weight 1/8
// to the newest), in whole microseconds, so that the Redis scripts compute
// the same numbers.
type interval struct {
	avg  int64 // µs; 0 before the first sample
	last int64 // µs since the Unix epoch: the last choice, or when the line last filled
	seen bool
}

// idle notes that the line was empty until now: the time before does not
// count as waiting for an admission.
func (iv *interval) idle(now time.Time) {
	iv.last, iv.seen = now.UnixMicro(), true
}

// sample notes a choice at now.
func (iv *interval) sample(now time.Time) {
	t := now.UnixMicro()
	if iv.seen {
		iv.avg = ewma(iv.avg, max(t-iv.last, 0))
	}
	iv.last, iv.seen = t, true
}

// ewma folds sample s into mean m: the first sample is the mean, then
// m + floor((s-m)/8).
func ewma(m, s int64) int64 {
	if m == 0 {
		return max(s, 1)
	}
	return max(m+floorDiv(s-m, 8), 1)
}

// floorDiv is a/b rounded down (Lua's math.floor(a/b) for these values).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// wait is when a waiter with ahead others before it is admitted at the
// mean interval: (ahead+1) intervals; 0 while the mean is unknown.
func (iv *interval) wait(ahead int) time.Duration {
	return time.Duration(int64(ahead+1)*iv.avg) * time.Microsecond
}

// check refuses a waiter with ahead others before it and left before its
// deadline when its wait is longer than left, or left is not positive.
func (iv *interval) check(ahead int, left time.Duration) error {
	est := iv.wait(ahead)
	if left <= 0 || (iv.avg > 0 && est > left) {
		return &core.QueueDeadlineError{Ahead: ahead, Estimate: est, Left: left}
	}
	return nil
}

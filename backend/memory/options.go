package memory

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// DefaultMaxEntries is the Cache's bound when WithMaxEntries is not given.
const DefaultMaxEntries = 10000

// Option configures NewLimiter, NewBreaker and NewCache.
type Option func(*options)

type options struct {
	clock      core.Clock
	maxEntries int
	queue      *QueueConfig
}

func buildOptions(opts []Option) options {
	o := options{clock: core.SystemClock{}, maxEntries: DefaultMaxEntries}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// WithClock makes the backend read time from c instead of the wall clock.
// A nil c keeps the wall clock.
func WithClock(c core.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithMaxEntries bounds the Cache to n entries (DefaultMaxEntries when
// n < 1). The Limiter and the Breaker ignore it.
func WithMaxEntries(n int) Option {
	return func(o *options) {
		if n < 1 {
			n = DefaultMaxEntries
		}
		o.maxEntries = n
	}
}

// elapsed reads a backend's clock as nanoseconds since a base reading.
// On the system clock it reads the monotonic clock alone (time.Since), half
// the cost of a full time.Now; any other clock is read through Now.
type elapsed struct {
	clock  core.Clock
	base   time.Time
	system bool
}

func newElapsed(c core.Clock) elapsed {
	_, system := c.(core.SystemClock)
	return elapsed{clock: c, base: c.Now(), system: system}
}

// now returns the nanoseconds since the base.
func (e *elapsed) now() int64 {
	if e.system {
		return int64(time.Since(e.base))
	}
	return int64(e.clock.Now().Sub(e.base))
}

// at returns the time ns nanoseconds after the base.
func (e *elapsed) at(ns int64) time.Time { return e.base.Add(time.Duration(ns)) }

package memory

import "github.com/polygateway/polygateway/internal/core"

// DefaultMaxEntries is the Cache's bound when WithMaxEntries is not given.
const DefaultMaxEntries = 10000

// Option configures NewLimiter, NewBreaker and NewCache.
type Option func(*options)

type options struct {
	clock      core.Clock
	maxEntries int
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

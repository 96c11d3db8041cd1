package redisstore

import (
	"log/slog"
	"strings"
	"time"

	"github.com/polygateway/polygateway/core"
)

// DefaultPrefix is the first part of every key when WithPrefix is not given.
const DefaultPrefix = "pgw"

// Option configures NewLimiter, NewBreaker, NewCache and NewAdmitter.
type Option func(*options)

type options struct {
	prefix string
	clock  core.Clock
	logger *slog.Logger
	queue  *QueueConfig
}

func buildOptions(opts []Option) options {
	o := options{prefix: DefaultPrefix}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// WithPrefix puts every key under prefix (DefaultPrefix when prefix is "").
// Backends that share a prefix and a Redis share their state; give each
// deployment that must not share its own prefix.
func WithPrefix(prefix string) Option {
	return func(o *options) {
		if prefix == "" {
			prefix = DefaultPrefix
		}
		o.prefix = prefix
	}
}

// WithClock makes the backend read "now" from c instead of the Redis
// server's TIME. It exists for tests: a fake clock drives windows,
// cooldowns, leases and cache expiry without sleeping. In production every
// process must use the server's clock (the default), so that all of them
// agree on time; a nil c keeps the server's clock.
func WithClock(c core.Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithLogger gives NewAdmitter the logger of its background work
// (rate-limited warnings when Redis cannot be reached to give back what a
// failed call held, or when its queue's subscriber must reconnect).
// Default: discard. The other constructors ignore it.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// clockOrSystem returns the test clock, or the wall clock.
func (o *options) clockOrSystem() core.Clock {
	if o.clock == nil {
		return core.SystemClock{}
	}
	return o.clock
}

// micros converts d to whole microseconds for a script; a positive d below
// one microsecond counts as one, a negative one as zero.
func micros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Microseconds(), 1)
}

// ceilMicros converts a positive d to microseconds for a script, rounded
// up, so that a wait is never cut short.
func ceilMicros(d time.Duration) int64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return int64(us)
}

// fromMicros converts a script's microseconds back to a Duration.
func fromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// keyEscaper makes a scope or source name safe inside a key: it cannot
// contain the separator ':' or the hash-tag braces, and the mapping is
// injective.
var keyEscaper = strings.NewReplacer("%", "%25", ":", "%3A", "{", "%7B", "}", "%7D")

// escape returns name as a key component.
func escape(name string) string { return keyEscaper.Replace(name) }

// hashTag returns the hash tag of a scope or pool: every key of one scope
// (of one pool, for a pooled scope) carries it, so a Redis Cluster puts
// them in one slot and one script may touch them all. An empty name gets
// "%", which no escaped name can be (an empty tag would hash the whole key).
func hashTag(name string) string {
	if name == "" {
		return "{%}"
	}
	return "{" + escape(name) + "}"
}

package sqlitesink

import (
	"log/slog"
	"time"
)

// Defaults of the options.
const (
	DefaultQueueSize     = 4096
	DefaultBatchSize     = 128
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultBackoffMin    = time.Second
	DefaultBackoffMax    = 30 * time.Second
	DefaultOpTimeout     = 10 * time.Second
	DefaultBusyTimeout   = 5 * time.Second
)

// settings is the resolved configuration of a Sink.
type settings struct {
	queueSize, batchSize   int
	flushInterval          time.Duration
	backoffMin, backoffMax time.Duration
	opTimeout              time.Duration
	busyTimeout            time.Duration
	logger                 *slog.Logger
}

// Option configures Open. A zero or negative value keeps the default.
type Option func(*settings)

// WithQueueSize sets how many records may wait for the writer (default
// DefaultQueueSize). When the queue is full, Write drops the record and
// counts it in Dropped.
func WithQueueSize(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.queueSize = n
		}
	}
}

// WithBatchSize sets how many records go into one transaction (default
// DefaultBatchSize).
func WithBatchSize(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.batchSize = n
		}
	}
}

// WithFlushInterval sets the longest time a record waits in a partial batch
// before it is written (default DefaultFlushInterval).
func WithFlushInterval(d time.Duration) Option {
	return func(s *settings) {
		if d > 0 {
			s.flushInterval = d
		}
	}
}

// WithLogger sets the logger for the degradation warnings (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) {
		if l != nil {
			s.logger = l
		}
	}
}

// WithBackoff sets the first and the largest wait between reconnection
// attempts while the database is unavailable (default DefaultBackoffMin,
// DefaultBackoffMax); the wait doubles after each failed attempt.
func WithBackoff(first, largest time.Duration) Option {
	return func(s *settings) {
		if first > 0 {
			s.backoffMin = first
		}
		if largest > 0 {
			s.backoffMax = largest
		}
	}
}

// WithOpTimeout bounds each database operation: one batch, one recovery
// attempt (default DefaultOpTimeout).
func WithOpTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d > 0 {
			s.opTimeout = d
		}
	}
}

// WithBusyTimeout sets SQLite's busy timeout: how long a write waits for a
// lock held by another connection or process before it fails (default
// DefaultBusyTimeout).
func WithBusyTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d > 0 {
			s.busyTimeout = d
		}
	}
}

// resolve applies opts over the defaults.
func resolve(opts []Option) settings {
	s := settings{
		queueSize: DefaultQueueSize, batchSize: DefaultBatchSize, flushInterval: DefaultFlushInterval,
		backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax, opTimeout: DefaultOpTimeout,
		busyTimeout: DefaultBusyTimeout, logger: slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&s)
		}
	}
	s.backoffMax = max(s.backoffMax, s.backoffMin)
	return s
}

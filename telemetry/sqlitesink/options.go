package sqlitesink

import (
	"log/slog"
	"time"

	"github.com/polygateway/polygateway/telemetry/internal/sinkengine"
)

// Defaults of the options: a queue of 4,096 records, transactions of up to
// 128 rows, a partial batch written after 200 ms, reconnection attempts
// 1 s to 30 s apart, 10 s per database operation and a 5 s busy timeout.
const (
	DefaultQueueSize     = sinkengine.DefaultQueueSize
	DefaultBatchSize     = sinkengine.DefaultBatchSize
	DefaultFlushInterval = sinkengine.DefaultFlushInterval
	DefaultBackoffMin    = sinkengine.DefaultBackoffMin
	DefaultBackoffMax    = sinkengine.DefaultBackoffMax
	DefaultOpTimeout     = sinkengine.DefaultOpTimeout
	DefaultBusyTimeout   = 5 * time.Second
)

// settings is the resolved configuration of a Sink: the engine's settings
// (shared with the Postgres sink) and SQLite's own.
type settings struct {
	sinkengine.Settings
	busyTimeout time.Duration
}

// Option configures Open. A zero or negative value keeps the default.
type Option func(*settings)

// WithQueueSize sets how many records may wait for the writer (default
// DefaultQueueSize). When the queue is full, Write drops the record and
// counts it in Dropped.
func WithQueueSize(n int) Option { return func(s *settings) { s.SetQueueSize(n) } }

// WithBatchSize sets how many records go into one transaction (default
// DefaultBatchSize).
func WithBatchSize(n int) Option { return func(s *settings) { s.SetBatchSize(n) } }

// WithFlushInterval sets the longest time a record waits in a partial batch
// before it is written (default DefaultFlushInterval).
func WithFlushInterval(d time.Duration) Option { return func(s *settings) { s.SetFlushInterval(d) } }

// WithLogger sets the logger for the degradation warnings (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.SetLogger(l) } }

// WithBackoff sets the first and the largest wait between reconnection
// attempts while the database is unavailable (default DefaultBackoffMin,
// DefaultBackoffMax); the wait doubles after each failed attempt.
func WithBackoff(first, largest time.Duration) Option {
	return func(s *settings) { s.SetBackoff(first, largest) }
}

// WithOpTimeout bounds each database operation: one batch, one recovery
// attempt (default DefaultOpTimeout).
func WithOpTimeout(d time.Duration) Option { return func(s *settings) { s.SetOpTimeout(d) } }

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
	s := settings{Settings: sinkengine.DefaultSettings(), busyTimeout: DefaultBusyTimeout}
	sinkengine.Apply(&s, opts)
	return s
}

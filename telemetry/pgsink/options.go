package pgsink

import (
	"log/slog"
	"time"

	"github.com/polygateway/polygateway/telemetry/internal/sinkengine"
)

// Defaults of the options: a queue of 4,096 records, INSERT statements of
// up to 128 rows, a partial batch written after 200 ms, reconnection
// attempts 1 s to 30 s apart and 10 s per database operation.
const (
	DefaultQueueSize     = sinkengine.DefaultQueueSize
	DefaultBatchSize     = sinkengine.DefaultBatchSize
	DefaultFlushInterval = sinkengine.DefaultFlushInterval
	DefaultBackoffMin    = sinkengine.DefaultBackoffMin
	DefaultBackoffMax    = sinkengine.DefaultBackoffMax
	DefaultOpTimeout     = sinkengine.DefaultOpTimeout
)

// settings is the resolved configuration of a Sink: the engine's settings
// (shared with the SQLite sink) and Postgres's own.
type settings struct {
	sinkengine.Settings
	schema string
}

// Option configures Open. A zero or negative value keeps the default.
type Option func(*settings)

// WithQueueSize sets how many records may wait for the writer (default
// DefaultQueueSize). When the queue is full, Write drops the record and
// counts it in Dropped.
func WithQueueSize(n int) Option { return func(s *settings) { s.SetQueueSize(n) } }

// WithBatchSize sets how many records go into one INSERT statement (default
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

// WithSchema puts the table into the named schema (created when missing)
// instead of the first schema of the connection's search_path. The name is
// quoted, so it is used exactly as given. A search_path in the DSN
// (…?search_path=name) is the alternative.
func WithSchema(name string) Option {
	return func(s *settings) { s.schema = name }
}

// resolve applies opts over the defaults.
func resolve(opts []Option) settings {
	s := settings{Settings: sinkengine.DefaultSettings()}
	sinkengine.Apply(&s, opts)
	return s
}

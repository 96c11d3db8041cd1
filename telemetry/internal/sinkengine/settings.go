package sinkengine

import (
	"log/slog"
	"time"
)

// Defaults of the settings; the sinks re-export them as their own
// Default… constants.
const (
	DefaultQueueSize     = 4096
	DefaultBatchSize     = 128
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultBackoffMin    = time.Second
	DefaultBackoffMax    = 30 * time.Second
	DefaultOpTimeout     = 10 * time.Second
)

// Settings configure an Engine. The sinks embed them in their own settings
// and expose them through their With… options, which call the Set…
// methods: a zero or negative value (a nil logger) keeps the current value.
type Settings struct {
	QueueSize     int           // records that may wait for the writer
	BatchSize     int           // records per store insert
	FlushInterval time.Duration // longest wait of a record in a partial batch
	BackoffMin    time.Duration // first wait between recovery attempts
	BackoffMax    time.Duration // largest wait between recovery attempts
	OpTimeout     time.Duration // bound of one store operation
	Logger        *slog.Logger  // degradation warnings
}

// DefaultSettings returns the Default… values and a logger that discards.
func DefaultSettings() Settings {
	return Settings{
		QueueSize: DefaultQueueSize, BatchSize: DefaultBatchSize, FlushInterval: DefaultFlushInterval,
		BackoffMin: DefaultBackoffMin, BackoffMax: DefaultBackoffMax, OpTimeout: DefaultOpTimeout,
		Logger: slog.New(slog.DiscardHandler),
	}
}

// Apply runs every non-nil option over s: the sinks' Option types are
// func(*theirSettings).
func Apply[S any, O ~func(*S)](s *S, opts []O) {
	for _, opt := range opts {
		if opt != nil {
			opt(s)
		}
	}
}

// SetQueueSize sets QueueSize when n > 0.
func (s *Settings) SetQueueSize(n int) { setPositive(&s.QueueSize, n) }

// SetBatchSize sets BatchSize when n > 0.
func (s *Settings) SetBatchSize(n int) { setPositive(&s.BatchSize, n) }

// SetFlushInterval sets FlushInterval when d > 0.
func (s *Settings) SetFlushInterval(d time.Duration) { setPositive(&s.FlushInterval, d) }

// SetOpTimeout sets OpTimeout when d > 0.
func (s *Settings) SetOpTimeout(d time.Duration) { setPositive(&s.OpTimeout, d) }

// SetBackoff sets BackoffMin to first and BackoffMax to largest, each when
// it is > 0. A largest below first is raised to first (by New).
func (s *Settings) SetBackoff(first, largest time.Duration) {
	setPositive(&s.BackoffMin, first)
	setPositive(&s.BackoffMax, largest)
}

// SetLogger sets Logger when l is not nil.
func (s *Settings) SetLogger(l *slog.Logger) {
	if l != nil {
		s.Logger = l
	}
}

// setPositive stores v in *dst when v > 0.
func setPositive[T int | time.Duration](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

// normalized fills unset fields with the defaults and keeps BackoffMax at
// least BackoffMin.
func (s Settings) normalized() Settings {
	d := DefaultSettings()
	setDefault(&s.QueueSize, d.QueueSize)
	setDefault(&s.BatchSize, d.BatchSize)
	setDefault(&s.FlushInterval, d.FlushInterval)
	setDefault(&s.BackoffMin, d.BackoffMin)
	setDefault(&s.BackoffMax, d.BackoffMax)
	setDefault(&s.OpTimeout, d.OpTimeout)
	if s.Logger == nil {
		s.Logger = d.Logger
	}
	s.BackoffMax = max(s.BackoffMax, s.BackoffMin)
	return s
}

// setDefault stores def in *dst when *dst is not positive.
func setDefault[T int | time.Duration](dst *T, def T) {
	if *dst <= 0 {
		*dst = def
	}
}

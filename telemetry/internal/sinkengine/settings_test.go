package sinkengine

import (
	"log/slog"
	"testing"
	"time"
)

func TestSettersKeepTheValueOnZeroNegativeOrNil(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	logger := s.Logger
	s.SetQueueSize(0)
	s.SetBatchSize(-1)
	s.SetFlushInterval(0)
	s.SetOpTimeout(-time.Second)
	s.SetBackoff(0, -1)
	s.SetLogger(nil)
	if d := DefaultSettings(); s.QueueSize != d.QueueSize || s.BatchSize != d.BatchSize || s.FlushInterval != d.FlushInterval ||
		s.OpTimeout != d.OpTimeout || s.BackoffMin != d.BackoffMin || s.BackoffMax != d.BackoffMax || s.Logger != logger {
		t.Fatalf("a zero, negative or nil value changed the settings: %+v", s)
	}
	l := slog.New(slog.DiscardHandler)
	s.SetQueueSize(7)
	s.SetBatchSize(3)
	s.SetFlushInterval(time.Minute)
	s.SetOpTimeout(time.Hour)
	s.SetBackoff(2*time.Second, 0) // only the first wait
	s.SetLogger(l)
	if s.QueueSize != 7 || s.BatchSize != 3 || s.FlushInterval != time.Minute || s.OpTimeout != time.Hour ||
		s.BackoffMin != 2*time.Second || s.BackoffMax != DefaultBackoffMax || s.Logger != l {
		t.Fatalf("settings = %+v", s)
	}
}

func TestApplySkipsNilOptions(t *testing.T) {
	t.Parallel()
	type option func(*Settings)
	s := DefaultSettings()
	Apply(&s, []option{nil, func(s *Settings) { s.SetQueueSize(5) }, nil})
	if s.QueueSize != 5 {
		t.Fatalf("QueueSize = %d", s.QueueSize)
	}
}

func TestNormalizedFillsDefaultsAndRaisesTheLargestBackoff(t *testing.T) {
	t.Parallel()
	s := Settings{BackoffMin: time.Minute, BackoffMax: time.Second}.normalized()
	d := DefaultSettings()
	if s.QueueSize != d.QueueSize || s.BatchSize != d.BatchSize || s.FlushInterval != d.FlushInterval ||
		s.OpTimeout != d.OpTimeout || s.Logger == nil {
		t.Fatalf("defaults not filled: %+v", s)
	}
	if s.BackoffMin != time.Minute || s.BackoffMax != time.Minute {
		t.Fatalf("backoff = %s..%s, want 1m..1m", s.BackoffMin, s.BackoffMax)
	}
}

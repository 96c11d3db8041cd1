package testkit

import (
	"context"
	"log/slog"
	"sync"
)

// Logs is a slog.Handler that keeps the records it is given, for a test
// to read. The zero value keeps records of every level; NewLogsFrom makes
// one that keeps only those at a level or above. WithAttrs and WithGroup
// return the handler itself: the attributes and groups of a derived
// logger are not kept, only those of each record.
type Logs struct {
	min     slog.Level
	atLeast bool
	mu      sync.Mutex
	recs    []slog.Record
}

// NewLogsFrom returns a Logs that is enabled for (and keeps) the records of
// level min and above only.
func NewLogsFrom(min slog.Level) *Logs { return &Logs{min: min, atLeast: true} }

// Enabled reports whether records of level l are kept.
func (h *Logs) Enabled(_ context.Context, l slog.Level) bool { return !h.atLeast || l >= h.min }

// Handle keeps r.
func (h *Logs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}

// WithAttrs returns h (the attributes are not kept).
func (h *Logs) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h (the group is not kept).
func (h *Logs) WithGroup(string) slog.Handler { return h }

// Count returns the number of records kept.
func (h *Logs) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.recs)
}

// Messages returns the messages of the records kept of level min and
// above, in the order they were logged.
func (h *Logs) Messages(min slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Level >= min {
			out = append(out, r.Message)
		}
	}
	return out
}

// Record is a record kept by Logs: its level, message and attributes
// (each value as slog.Value.String renders it).
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// Records returns the records kept, in the order they were logged.
func (h *Logs) Records() []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Record, 0, len(h.recs))
	for _, r := range h.recs {
		rec := Record{Level: r.Level, Message: r.Message, Attrs: map[string]string{}}
		r.Attrs(func(a slog.Attr) bool {
			rec.Attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, rec)
	}
	return out
}

// Find returns the records kept with message msg, in the order they were
// logged.
func (h *Logs) Find(msg string) []Record {
	var out []Record
	for _, r := range h.Records() {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

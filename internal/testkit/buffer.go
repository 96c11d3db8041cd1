package testkit

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// Buffer is a log destination (an io.Writer) safe for concurrent writes,
// whose content a test reads. The zero value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Len returns the number of bytes written so far.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Len()
}

// TextLogger returns a logger that writes every record, debug ones
// included, to b in slog's text format.
func (b *Buffer) TextLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// WaitFor polls cond every poll until it holds, and fails the test when
// it still does not after d, naming what it waited for.
func WaitFor(t testing.TB, d, poll time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(poll)
	}
}

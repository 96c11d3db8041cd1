// Package sinktest holds the test helpers shared by the engine and the
// database telemetry sinks: a capturing slog handler, a polling wait, and
// the queries and sample records of docs/telemetry.md. It is imported by
// tests only.
package sinktest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// LogCapture is a slog handler that keeps every record.
type LogCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

// Enabled reports true: every level is kept.
func (c *LogCapture) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a copy of r. It is safe for concurrent use.
func (c *LogCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r.Clone())
	return nil
}

// WithAttrs returns c: the attributes are not kept.
func (c *LogCapture) WithAttrs([]slog.Attr) slog.Handler { return c }

// WithGroup returns c: the group is not kept.
func (c *LogCapture) WithGroup(string) slog.Handler { return c }

// Logger returns a logger writing to c.
func (c *LogCapture) Logger() *slog.Logger { return slog.New(c) }

// Count returns how many records at level contain substr in their message.
func (c *LogCapture) Count(level slog.Level, substr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.recs {
		if r.Level == level && strings.Contains(r.Message, substr) {
			n++
		}
	}
	return n
}

// Text renders every captured record, attributes included.
func (c *LogCapture) Text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, r := range c.recs {
		fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		b.WriteByte('\n')
	}
	return b.String()
}

// Eventually polls cond for up to 5 s and fails the test when it never holds.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Reader is what the sinks' table readers offer (telemetrytest.Reader).
type Reader interface {
	Rows(ctx context.Context) ([]core.TelemetryRecord, error)
}

// IDs returns the call_ids of every row rd reads, in its order, failing
// the test on an error.
func IDs(t testing.TB, rd Reader) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := rd.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, row := range rows {
		out[i] = row.CallID
	}
	return out
}

// DocQueries returns the SQL blocks of docs/telemetry.md (found from the
// test's working directory upwards, at the module root) whose first line,
// "-- dialects: …", names dialect.
func DocQueries(t testing.TB, dialect string) []string {
	t.Helper()
	doc, err := os.ReadFile(docPath(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	blocks := strings.Split(string(doc), "```sql\n")
	for _, b := range blocks[1:] {
		q, _, _ := strings.Cut(b, "```")
		first, _, _ := strings.Cut(q, "\n")
		names, ok := strings.CutPrefix(first, "-- dialects: ")
		if !ok {
			t.Fatalf("SQL block without a dialects line: %q", first)
		}
		if slices.Contains(strings.Split(names, ", "), dialect) {
			out = append(out, q)
		}
	}
	return out
}

// docPath returns docs/telemetry.md of the module the test runs in.
func docPath(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "docs", "telemetry.md")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// SampleRecords are 200 calls over two days and two sources, with
// failures, cache hits and unpriced rows: the data the doc queries are
// checked against.
func SampleRecords() []core.TelemetryRecord {
	day := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	var recs []core.TelemetryRecord
	for i := range 200 {
		cost := float64(i) / 1000
		r := core.TelemetryRecord{
			CallID: fmt.Sprintf("c%03d", i), Model: []string{"m-a", "m-b"}[i%2], SourceName: []string{"src_1", "src_2"}[i%2],
			PromptTokens: 10 + i, CompletionTokens: i, LatencyMS: float64(i%100 + 1), Cost: &cost,
			CreatedAt: day.Add(time.Duration(i) * 15 * time.Minute),
		}
		switch i % 10 {
		case 3:
			r.Error, r.Cost = "TransientError: boom", nil
		case 7:
			r.CacheHit, r.LatencyMS, *r.Cost = true, 0.1, 0
		case 9:
			r.Cost = nil
		}
		recs = append(recs, r)
	}
	return recs
}

package sqlitesink

// Tests of the queue-and-batch engine over a fake store: deterministic, no
// database. The Postgres sink carries the same file.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/internal/core"
	"github.com/polygateway/polygateway/telemetry"
)

var (
	errConn = errors.New("fake: connection refused")
	errRow  = errors.New("fake: row violates a constraint")
)

// fakeStore keeps rows in memory and misbehaves on demand.
type fakeStore struct {
	mu       sync.Mutex
	rows     []core.TelemetryRecord
	ids      map[string]bool
	broken   bool                            // insert and recover fail with errConn
	poison   func(core.TelemetryRecord) bool // insert of such a row fails with errConn
	bad      func(core.TelemetryRecord) bool // insert of such a row fails with errRow
	gate     chan struct{}                   // when set, insert waits for it (or ctx)
	entered  chan struct{}                   // signalled when insert starts
	inserts  int
	recovers int
	closed   bool
}

func newFakeStore() *fakeStore { return &fakeStore{ids: map[string]bool{}} }

func (f *fakeStore) insert(ctx context.Context, recs []core.TelemetryRecord) error {
	f.mu.Lock()
	gate, entered := f.gate, f.entered
	f.inserts++
	f.mu.Unlock()
	if entered != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return errConn
	}
	for _, r := range recs {
		if f.poison != nil && f.poison(r) {
			return errConn
		}
		if f.bad != nil && f.bad(r) {
			return errRow
		}
	}
	for _, r := range recs {
		if !f.ids[r.CallID] {
			f.ids[r.CallID] = true
			f.rows = append(f.rows, r)
		}
	}
	return nil
}

func (f *fakeStore) rowLevel(err error) bool { return errors.Is(err, errRow) }

func (f *fakeStore) recover(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recovers++
	if f.broken {
		return errConn
	}
	return nil
}

func (f *fakeStore) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeStore) set(fn func(f *fakeStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeStore) storedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.rows))
	for i, r := range f.rows {
		out[i] = r.CallID
	}
	return out
}

// logCapture is a slog handler that keeps every record.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r.Clone())
	return nil
}
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

// count returns how many records at level contain substr in their message.
func (c *logCapture) count(level slog.Level, substr string) int {
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

// text renders every captured record, attributes included.
func (c *logCapture) text() string {
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

func testSettings(logs *logCapture, opts ...Option) settings {
	base := []Option{WithLogger(slog.New(logs)), WithFlushInterval(5 * time.Millisecond), WithBackoff(20*time.Millisecond, 80*time.Millisecond), WithOpTimeout(5 * time.Second)}
	return resolve(append(base, opts...))
}

func rec(id string) core.TelemetryRecord {
	return core.TelemetryRecord{CallID: id, LatencyMS: 1, CreatedAt: time.Unix(1700000000, 0)}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func closeEngine(t *testing.T, e *engine) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.close(ctx)
}

func TestEngineDropsAndCountsWhenTheQueueIsFullWithoutBlocking(t *testing.T) {
	t.Parallel()
	logs := &logCapture{}
	st := newFakeStore()
	gate := make(chan struct{})
	st.gate, st.entered = gate, make(chan struct{}, 1)
	e := newEngine("fake", st, testSettings(logs, WithQueueSize(4), WithBatchSize(1)), false)
	if err := e.write(rec("r0")); err != nil {
		t.Fatal(err)
	}
	<-st.entered // the writer holds r0 and is blocked in insert
	start := time.Now()
	for i := 1; i <= 14; i++ {
		if err := e.write(rec(fmt.Sprintf("r%d", i))); err != nil {
			t.Fatalf("Write r%d: %v", i, err)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("14 writes against a blocked writer took %s", took)
	}
	if n := e.dropped.Load(); n != 10 {
		t.Fatalf("Dropped = %d, want 10 (queue of 4 full)", n)
	}
	if n := logs.count(slog.LevelWarn, "queue full"); n != 1 {
		t.Fatalf("%d queue-full warnings, want 1:\n%s", n, logs.text())
	}
	close(gate)
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if got := st.storedIDs(); !slices.Equal(got, []string{"r0", "r1", "r2", "r3", "r4"}) {
		t.Fatalf("stored %v", got)
	}
}

func TestEngineDropsABadRowAloneAndKeepsTheRestOfItsBatch(t *testing.T) {
	t.Parallel()
	logs := &logCapture{}
	st := newFakeStore()
	st.bad = func(r core.TelemetryRecord) bool { return strings.HasPrefix(r.CallID, "bad") }
	e := newEngine("fake", st, testSettings(logs, WithFlushInterval(time.Hour), WithBatchSize(6)), false)
	for _, id := range []string{"a", "bad1", "b", "c", "bad2", "d"} {
		if err := e.write(rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the batch is written", func() bool { return len(st.storedIDs()) == 4 })
	if got := st.storedIDs(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("stored %v", got)
	}
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if n := e.dropped.Load(); n != 2 {
		t.Fatalf("Dropped = %d, want 2", n)
	}
	if st.inserts != 1+6 {
		t.Fatalf("inserts = %d, want 7 (the batch, then row by row)", st.inserts)
	}
	if w := logs.count(slog.LevelWarn, "refused a record"); w != 1 {
		t.Fatalf("%d warnings for bad rows, want 1:\n%s", w, logs.text())
	}
	if logs.count(slog.LevelWarn, "unavailable") != 0 {
		t.Fatalf("a bad row degraded the sink:\n%s", logs.text())
	}
}

func TestEngineWarnsOnceShortCircuitsWhileDownAndRecovers(t *testing.T) {
	t.Parallel()
	logs := &logCapture{}
	st := newFakeStore()
	e := newEngine("fake", st, testSettings(logs, WithBackoff(30*time.Millisecond, 60*time.Millisecond)), false)
	_ = e.write(rec("before"))
	eventually(t, "the first row is stored", func() bool { return len(st.storedIDs()) == 1 })

	st.set(func(f *fakeStore) { f.broken = true })
	_ = e.write(rec("held"))
	eventually(t, "the engine is down", e.down.Load)
	for i := range 50 {
		if err := e.write(rec(fmt.Sprintf("during-%d", i))); err != nil {
			t.Fatalf("Write while down: %v", err)
		}
	}
	eventually(t, "several recovery attempts failed", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.recovers >= 3
	})
	if n := e.dropped.Load(); n != 50 {
		t.Fatalf("Dropped = %d, want 50", n)
	}
	st.set(func(f *fakeStore) { f.broken = false })
	eventually(t, "the engine is up", func() bool { return !e.down.Load() })
	_ = e.write(rec("after"))
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if got := st.storedIDs(); !slices.Equal(got, []string{"before", "held", "after"}) {
		t.Fatalf("stored %v, want before, held (written after recovery), after", got)
	}
	if n := logs.count(slog.LevelWarn, "unavailable"); n != 1 {
		t.Fatalf("%d unavailable warnings, want exactly 1:\n%s", n, logs.text())
	}
	if n := logs.count(slog.LevelInfo, "available again"); n != 1 {
		t.Fatalf("%d recovery notes, want 1:\n%s", n, logs.text())
	}
}

func TestEngineStartsDownAndResumesWhenTheStoreAppears(t *testing.T) {
	t.Parallel()
	logs := &logCapture{}
	st := newFakeStore()
	st.broken = true
	e := newEngine("fake", st, testSettings(logs), true)
	_ = e.write(rec("lost"))
	if n := e.dropped.Load(); n != 1 {
		t.Fatalf("Dropped = %d, want 1", n)
	}
	st.set(func(f *fakeStore) { f.broken = false })
	eventually(t, "the engine is up", func() bool { return !e.down.Load() })
	_ = e.write(rec("kept"))
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if got := st.storedIDs(); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("stored %v", got)
	}
}

func TestEngineDropsABatchTheStoreKeepsRefusingAfterRecovery(t *testing.T) {
	t.Parallel()
	logs := &logCapture{}
	st := newFakeStore()
	st.poison = func(r core.TelemetryRecord) bool { return r.CallID == "poison" }
	e := newEngine("fake", st, testSettings(logs, WithBackoff(5*time.Millisecond, 10*time.Millisecond)), false)
	_ = e.write(rec("poison"))
	eventually(t, "the poisonous batch is dropped", func() bool { return e.dropped.Load() == 1 && !e.down.Load() })
	_ = e.write(rec("fine"))
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if got := st.storedIDs(); !slices.Equal(got, []string{"fine"}) {
		t.Fatalf("stored %v", got)
	}
	if n := logs.count(slog.LevelWarn, "keeps refusing"); n != 1 {
		t.Fatalf("%d keeps-refusing warnings, want 1:\n%s", n, logs.text())
	}
}

func TestEngineCloseWhileDownCountsAndReportsWhatItCouldNotWrite(t *testing.T) {
	t.Parallel()
	logs := &logCapture{}
	st := newFakeStore()
	e := newEngine("fake", st, testSettings(logs, WithBackoff(time.Hour, time.Hour)), false)
	st.set(func(f *fakeStore) { f.broken = true })
	_ = e.write(rec("a"))
	_ = e.write(rec("b"))
	eventually(t, "the engine is down", e.down.Load)
	err := closeEngine(t, e)
	if err == nil || !strings.Contains(err.Error(), "2 records not written at close") {
		t.Fatalf("Close = %v, want an error naming the 2 records", err)
	}
	if n := e.dropped.Load(); n != 2 {
		t.Fatalf("Dropped = %d, want 2", n)
	}
	if !st.closed {
		t.Fatal("the store was not closed")
	}
	if err := e.write(rec("c")); !errors.Is(err, telemetry.ErrClosed) {
		t.Fatalf("Write after Close = %v", err)
	}
}

func TestEngineCloseIsBoundedByItsContext(t *testing.T) {
	t.Parallel()
	logs := &logCapture{}
	st := newFakeStore()
	st.gate = make(chan struct{}) // never opens: the database hangs
	e := newEngine("fake", st, testSettings(logs, WithBatchSize(1)), false)
	for i := range 5 {
		_ = e.write(rec(fmt.Sprintf("r%d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.close(ctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %s with a 50 ms context", took)
	}
	if err == nil {
		t.Fatal("Close of a hung database reported no error")
	}
	if n := e.dropped.Load(); n != 5 {
		t.Fatalf("Dropped = %d, want 5", n)
	}
}

func TestEngineFillsAZeroCreatedAt(t *testing.T) {
	t.Parallel()
	st := newFakeStore()
	e := newEngine("fake", st, testSettings(&logCapture{}), false)
	before := time.Now()
	_ = e.write(core.TelemetryRecord{CallID: "z"})
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if at := st.rows[0].CreatedAt; at.Before(before) || at.After(time.Now()) {
		t.Fatalf("CreatedAt = %v, want the time of Write", at)
	}
}

func BenchmarkEngineWrite(b *testing.B) {
	st := newFakeStore()
	e := newEngine("fake", st, resolve([]Option{WithQueueSize(1 << 16)}), false)
	r := rec("bench")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = e.write(r)
		}
	})
	b.StopTimer()
	_ = e.close(context.Background())
}

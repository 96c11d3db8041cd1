package sinkengine

// Tests of the queue-and-batch engine over a fake store: deterministic, no
// database.

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

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/telemetry"
	"github.com/polygateway/polygateway/telemetry/internal/sinktest"
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

func (f *fakeStore) Insert(ctx context.Context, recs []core.TelemetryRecord) error {
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

func (f *fakeStore) RowLevel(err error) bool { return errors.Is(err, errRow) }

func (f *fakeStore) Recover(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recovers++
	if f.broken {
		return errConn
	}
	return nil
}

func (f *fakeStore) Close() error {
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

// testSettings are fast settings logging to logs, changed by edit.
func testSettings(logs *sinktest.LogCapture, edit ...func(*Settings)) Settings {
	s := DefaultSettings()
	s.Logger, s.FlushInterval, s.BackoffMin, s.BackoffMax, s.OpTimeout = logs.Logger(), 5*time.Millisecond, 20*time.Millisecond, 80*time.Millisecond, 5*time.Second
	Apply(&s, edit)
	return s
}

func rec(id string) core.TelemetryRecord {
	return core.TelemetryRecord{CallID: id, LatencyMS: 1, CreatedAt: time.Unix(1700000000, 0)}
}

func closeEngine(t *testing.T, e *Engine) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.Close(ctx)
}

func TestEngineDropsAndCountsWhenTheQueueIsFullWithoutBlocking(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	st := newFakeStore()
	gate := make(chan struct{})
	st.gate, st.entered = gate, make(chan struct{}, 1)
	e := New("fake", st, testSettings(logs, func(s *Settings) { s.QueueSize, s.BatchSize = 4, 1 }), nil)
	if err := e.Write(rec("r0")); err != nil {
		t.Fatal(err)
	}
	<-st.entered // the writer holds r0 and is blocked in insert
	start := time.Now()
	for i := 1; i <= 14; i++ {
		if err := e.Write(rec(fmt.Sprintf("r%d", i))); err != nil {
			t.Fatalf("Write r%d: %v", i, err)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("14 writes against a blocked writer took %s", took)
	}
	if n := e.Dropped(); n != 10 {
		t.Fatalf("Dropped = %d, want 10 (queue of 4 full)", n)
	}
	if n := logs.Count(slog.LevelWarn, "queue full"); n != 1 {
		t.Fatalf("%d queue-full warnings, want 1:\n%s", n, logs.Text())
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
	logs := &sinktest.LogCapture{}
	st := newFakeStore()
	st.bad = func(r core.TelemetryRecord) bool { return strings.HasPrefix(r.CallID, "bad") }
	e := New("fake", st, testSettings(logs, func(s *Settings) { s.FlushInterval, s.BatchSize = time.Hour, 6 }), nil)
	for _, id := range []string{"a", "bad1", "b", "c", "bad2", "d"} {
		if err := e.Write(rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	sinktest.Eventually(t, "the batch is written", func() bool { return len(st.storedIDs()) == 4 })
	if got := st.storedIDs(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("stored %v", got)
	}
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if n := e.Dropped(); n != 2 {
		t.Fatalf("Dropped = %d, want 2", n)
	}
	if st.inserts != 1+6 {
		t.Fatalf("inserts = %d, want 7 (the batch, then row by row)", st.inserts)
	}
	if w := logs.Count(slog.LevelWarn, "refused a record"); w != 1 {
		t.Fatalf("%d warnings for bad rows, want 1:\n%s", w, logs.Text())
	}
	if logs.Count(slog.LevelWarn, "unavailable") != 0 {
		t.Fatalf("a bad row degraded the sink:\n%s", logs.Text())
	}
}

func TestEngineWarnsOnceShortCircuitsWhileDownAndRecovers(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	st := newFakeStore()
	e := New("fake", st, testSettings(logs, func(s *Settings) { s.SetBackoff(30*time.Millisecond, 60*time.Millisecond) }), nil)
	_ = e.Write(rec("before"))
	sinktest.Eventually(t, "the first row is stored", func() bool { return len(st.storedIDs()) == 1 })

	st.set(func(f *fakeStore) { f.broken = true })
	_ = e.Write(rec("held"))
	sinktest.Eventually(t, "the engine is down", e.Down)
	for i := range 50 {
		if err := e.Write(rec(fmt.Sprintf("during-%d", i))); err != nil {
			t.Fatalf("Write while down: %v", err)
		}
	}
	sinktest.Eventually(t, "several recovery attempts failed", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.recovers >= 3
	})
	if n := e.Dropped(); n != 50 {
		t.Fatalf("Dropped = %d, want 50", n)
	}
	st.set(func(f *fakeStore) { f.broken = false })
	sinktest.Eventually(t, "the engine is up", func() bool { return !e.Down() })
	_ = e.Write(rec("after"))
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if got := st.storedIDs(); !slices.Equal(got, []string{"before", "held", "after"}) {
		t.Fatalf("stored %v, want before, held (written after recovery), after", got)
	}
	if n := logs.Count(slog.LevelWarn, "unavailable"); n != 1 {
		t.Fatalf("%d unavailable warnings, want exactly 1:\n%s", n, logs.Text())
	}
	if n := logs.Count(slog.LevelInfo, "available again"); n != 1 {
		t.Fatalf("%d recovery notes, want 1:\n%s", n, logs.Text())
	}
}

func TestEngineStartsDownAndResumesWhenTheStoreAppears(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	st := newFakeStore()
	st.broken = true
	e := New("fake", st, testSettings(logs), errConn)
	_ = e.Write(rec("lost"))
	if n := e.Dropped(); n != 1 {
		t.Fatalf("Dropped = %d, want 1", n)
	}
	st.set(func(f *fakeStore) { f.broken = false })
	sinktest.Eventually(t, "the engine is up", func() bool { return !e.Down() })
	_ = e.Write(rec("kept"))
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if got := st.storedIDs(); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("stored %v", got)
	}
	if n := logs.Count(slog.LevelWarn, "unavailable"); n != 1 {
		t.Fatalf("%d unavailable warnings for a store down from the start, want 1:\n%s", n, logs.Text())
	}
}

func TestEngineDropsABatchTheStoreKeepsRefusingAfterRecovery(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	st := newFakeStore()
	st.poison = func(r core.TelemetryRecord) bool { return r.CallID == "poison" }
	e := New("fake", st, testSettings(logs, func(s *Settings) { s.SetBackoff(5*time.Millisecond, 10*time.Millisecond) }), nil)
	_ = e.Write(rec("poison"))
	sinktest.Eventually(t, "the poisonous batch is dropped", func() bool { return e.Dropped() == 1 && !e.Down() })
	_ = e.Write(rec("fine"))
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if got := st.storedIDs(); !slices.Equal(got, []string{"fine"}) {
		t.Fatalf("stored %v", got)
	}
	if n := logs.Count(slog.LevelWarn, "keeps refusing"); n != 1 {
		t.Fatalf("%d keeps-refusing warnings, want 1:\n%s", n, logs.Text())
	}
}

func TestEngineCloseWhileDownCountsAndReportsWhatItCouldNotWrite(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	st := newFakeStore()
	e := New("fake", st, testSettings(logs, func(s *Settings) { s.SetBackoff(time.Hour, time.Hour) }), nil)
	st.set(func(f *fakeStore) { f.broken = true })
	_ = e.Write(rec("a"))
	_ = e.Write(rec("b"))
	sinktest.Eventually(t, "the engine is down", e.Down)
	err := closeEngine(t, e)
	if err == nil || !strings.Contains(err.Error(), "2 records not written at close") {
		t.Fatalf("Close = %v, want an error naming the 2 records", err)
	}
	if n := e.Dropped(); n != 2 {
		t.Fatalf("Dropped = %d, want 2", n)
	}
	if !st.closed {
		t.Fatal("the store was not closed")
	}
	if err := e.Write(rec("c")); !errors.Is(err, telemetry.ErrClosed) {
		t.Fatalf("Write after Close = %v", err)
	}
}

func TestEngineCloseIsBoundedByItsContext(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	st := newFakeStore()
	st.gate = make(chan struct{}) // never opens: the database hangs
	e := New("fake", st, testSettings(logs, func(s *Settings) { s.BatchSize = 1 }), nil)
	for i := range 5 {
		_ = e.Write(rec(fmt.Sprintf("r%d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.Close(ctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %s with a 50 ms context", took)
	}
	if err == nil {
		t.Fatal("Close of a hung database reported no error")
	}
	if n := e.Dropped(); n != 5 {
		t.Fatalf("Dropped = %d, want 5", n)
	}
}

func TestEngineFillsAZeroCreatedAt(t *testing.T) {
	t.Parallel()
	st := newFakeStore()
	e := New("fake", st, testSettings(&sinktest.LogCapture{}), nil)
	before := time.Now()
	_ = e.Write(core.TelemetryRecord{CallID: "z"})
	if err := closeEngine(t, e); err != nil {
		t.Fatal(err)
	}
	if at := st.rows[0].CreatedAt; at.Before(before) || at.After(time.Now()) {
		t.Fatalf("CreatedAt = %v, want the time of Write", at)
	}
}

func BenchmarkEngineWrite(b *testing.B) {
	st := newFakeStore()
	e := New("fake", st, Settings{QueueSize: 1 << 16}, nil)
	r := rec("bench")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = e.Write(r)
		}
	})
	b.StopTimer()
	_ = e.Close(context.Background())
}

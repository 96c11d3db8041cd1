package telemetry

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/polygateway/polygateway/core"
)

func TestMemoryKeepsRecordsInOrderAndTheFirstOnARepeatedCallID(t *testing.T) {
	t.Parallel()
	m := NewMemory()
	ctx := context.Background()
	for _, r := range []core.TelemetryRecord{{CallID: "a", Response: "1"}, {CallID: "b"}, {CallID: "a", Response: "2"}} {
		if err := m.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	recs := m.Records()
	if len(recs) != 2 || recs[0].CallID != "a" || recs[0].Response != "1" || recs[1].CallID != "b" || m.Len() != 2 {
		t.Fatalf("records = %+v, want a (the first write, Response 1), then b", recs)
	}
	recs[0].Response = "mutated"
	if m.Records()[0].Response != "1" {
		t.Fatal("Records returned the sink's own slice")
	}
}

func TestMemoryRefusesWritesAfterCloseAndCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	m := NewMemory()
	ctx := context.Background()
	_ = m.Write(ctx, core.TelemetryRecord{CallID: "a"})
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Write(ctx, core.TelemetryRecord{CallID: "b"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if m.Len() != 1 {
		t.Fatalf("len = %d", m.Len())
	}
}

func TestMemoryIsSafeForConcurrentWriters(t *testing.T) {
	t.Parallel()
	m := NewMemory()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				_ = m.Write(context.Background(), core.TelemetryRecord{CallID: string(rune('a'+g)) + string(rune(i))})
			}
		}()
	}
	wg.Wait()
	if m.Len() != 800 {
		t.Fatalf("len = %d, want 800", m.Len())
	}
}

func TestDiscardAcceptsEverything(t *testing.T) {
	t.Parallel()
	if err := (Discard{}).Write(context.Background(), core.TelemetryRecord{CallID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := (Discard{}).Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

package telemetry

import (
	"context"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// Memory keeps every record in process memory, in arrival order. It is meant
// for tests and demos. It is safe for concurrent use. Inserts are idempotent
// on call_id, as in the database sinks: writing a record whose CallID is
// already present keeps the first record and ignores the new one.
type Memory struct {
	mu      sync.Mutex
	records []core.TelemetryRecord
	seen    map[string]struct{} // the CallIDs in records
	closed  bool
}

var _ core.TelemetrySink = (*Memory)(nil)

// NewMemory returns an empty in-memory sink.
func NewMemory() *Memory { return &Memory{seen: make(map[string]struct{})} }

// Write stores rec, with its RawMessages rendered into Messages, unless a
// record with the same CallID is already stored (then it does nothing and
// returns nil). After Close it returns ErrClosed.
func (m *Memory) Write(_ context.Context, rec core.TelemetryRecord) error {
	rec.Render()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.seen[rec.CallID]; ok {
		return nil
	}
	m.seen[rec.CallID] = struct{}{}
	m.records = append(m.records, rec)
	return nil
}

// Records returns a copy of the stored records in arrival order.
func (m *Memory) Records() []core.TelemetryRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]core.TelemetryRecord(nil), m.records...)
}

// Len returns the number of stored records.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

// Close marks the sink closed; records stay readable. It is idempotent.
func (m *Memory) Close(context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

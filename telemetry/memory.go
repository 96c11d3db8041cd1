package telemetry

import (
	"context"
	"sync"

	"github.com/polygateway/polygateway/internal/core"
)

// Memory keeps every record in process memory, in arrival order. It is meant
// for tests and demos. It is safe for concurrent use. Writing a record whose
// CallID is already present replaces it (idempotent insert on call_id, as
// the database sinks do).
type Memory struct {
	mu      sync.Mutex
	records []core.TelemetryRecord
	index   map[string]int
	closed  bool
}

var _ core.TelemetrySink = (*Memory)(nil)

// NewMemory returns an empty in-memory sink.
func NewMemory() *Memory { return &Memory{index: make(map[string]int)} }

// Write stores rec. After Close it returns ErrClosed.
func (m *Memory) Write(_ context.Context, rec core.TelemetryRecord) error {
	rec.Render()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if i, ok := m.index[rec.CallID]; ok {
		m.records[i] = rec
		return nil
	}
	m.index[rec.CallID] = len(m.records)
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

package telemetry_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/telemetry"
	"github.com/polygateway/polygateway/telemetry/telemetrytest"
)

// memoryReader reads a Memory sink back in the order the suite expects of
// a table: created_at, then call_id (Records itself is in arrival order).
type memoryReader struct{ m *telemetry.Memory }

func (r memoryReader) Rows(context.Context) ([]core.TelemetryRecord, error) {
	rows := r.m.Records()
	slices.SortStableFunc(rows, func(a, b core.TelemetryRecord) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.CallID, b.CallID)
	})
	return rows, nil
}

// TestMemoryConformance runs the TelemetrySink suite against Memory. Memory
// has no queue and never drops a record, so it has no Dropped method and
// the suite's drop checks do not apply to it.
func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	telemetrytest.RunSinkSuite(t, func(t *testing.T) (core.TelemetrySink, telemetrytest.Reader) {
		m := telemetry.NewMemory()
		return m, memoryReader{m}
	})
}

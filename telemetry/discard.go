package telemetry

import (
	"context"

	"github.com/polygateway/polygateway/core"
)

// Discard is the "none" sink: it accepts every record and keeps nothing.
type Discard struct{}

var _ core.TelemetrySink = Discard{}

// Write drops rec.
func (Discard) Write(context.Context, core.TelemetryRecord) error { return nil }

// Close does nothing.
func (Discard) Close(context.Context) error { return nil }

package telemetry

import "errors"

// ErrClosed is returned by Write after the sink was closed.
var ErrClosed = errors.New("polygateway: telemetry: sink closed")

package core

import (
	"context"
	"net/http"
)

// CallInfo describes a governed call to a Tracer.
type CallInfo struct {
	// CallID and Scope identify the call.
	CallID, Scope string
	// Operation is "chat", "embeddings", "ocr_text" or "ocr_layout".
	Operation string
	// Stream is true when the upstream is asked to stream.
	Stream bool
	// SessionID and ParentCallID are the call's telemetry links.
	SessionID, ParentCallID string
}

// Tracer puts calls and attempts in spans (package tracing implements it
// with OpenTelemetry).
//
// Contract: StartCall is called once per governed call before any of its
// layers runs, StartAttempt once per upstream attempt; each returns the
// context the call or attempt runs with (carrying its span) and an end
// function that is called exactly once with the outcome. Inject writes the
// trace context of ctx into the headers of an upstream request (W3C
// traceparent). Methods are called on the call path: they must be cheap
// and safe for concurrent use.
type Tracer interface {
	StartCall(ctx context.Context, call CallInfo) (context.Context, func(resp *LLMResponse, err error))
	StartAttempt(ctx context.Context, ev AttemptEvent) (context.Context, func(ev AttemptEvent, err error))
	Inject(ctx context.Context, h http.Header)
}

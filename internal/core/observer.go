package core

import "time"

// Attempt outcomes reported to an Observer.
const (
	AttemptSuccess     = "success"
	AttemptTransient   = "transient"
	AttemptTimeout     = "timeout"
	AttemptRateLimited = "rate_limited"
	AttemptDead        = "source_dead"
	AttemptRejected    = "rejected"
	AttemptInvalid     = "invalid"
	AttemptCancelled   = "cancelled"
)

// AttemptEvent describes one finished upstream attempt.
type AttemptEvent struct {
	Scope, Source string
	// Outcome is one of the Attempt* constants.
	Outcome string
	Latency time.Duration
	// TTFT and MaxInterToken are zero when not streamed.
	TTFT, MaxInterToken time.Duration
}

// Observer receives the governor's events, for metrics.
//
// Contract: methods are called on the call path and must be cheap and
// non-blocking; they are safe for concurrent use. A nil Observer is valid
// wherever one is accepted.
type Observer interface {
	// Attempt reports a finished upstream attempt.
	Attempt(ev AttemptEvent)
	// Refused reports a source refused before an attempt: by its breaker
	// (ReasonCircuitOpen) or by the limiter or the adaptive limit
	// (ReasonRateLimited).
	Refused(scope, source string, reason Reason)
	// Waited reports time a call spent waiting for quota or pushback.
	Waited(scope string, d time.Duration)
	// BreakerState reports a breaker state the governor observed that
	// differs from the last one it saw for the source (a transition).
	BreakerState(scope, source string, state BreakerState)
}

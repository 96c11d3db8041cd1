package core

import "time"

// AttemptOutcome says how an upstream attempt ended.
type AttemptOutcome string

// Attempt outcomes reported to an Observer.
const (
	AttemptSuccess     AttemptOutcome = "success"
	AttemptTransient   AttemptOutcome = "transient"
	AttemptTimeout     AttemptOutcome = "timeout"
	AttemptRateLimited AttemptOutcome = "rate_limited"
	AttemptDead        AttemptOutcome = "source_dead"
	AttemptRejected    AttemptOutcome = "rejected"
	AttemptInvalid     AttemptOutcome = "invalid"
	AttemptCancelled   AttemptOutcome = "cancelled"
)

// AttemptEvent describes one upstream attempt: when it starts (Outcome is
// empty) and when it ends.
type AttemptEvent struct {
	Scope, Source string
	// Provider and Model are the source's.
	Provider, Model string
	// CallID is the call's id; Attempt the attempt's number in the call (1 = first).
	CallID  string
	Attempt int
	// Breaker is the state of the source's circuit when it admitted the
	// attempt (half_open: this attempt is the probe).
	Breaker BreakerState
	// Outcome is empty when the attempt starts.
	Outcome AttemptOutcome
	// Reason is the failure's reason, when it has one.
	Reason  Reason
	Latency time.Duration
	// TTFT and MaxInterToken are zero when not streamed.
	TTFT, MaxInterToken time.Duration
	// UsageBounded is true when the answer claimed more usage than its
	// request could use and was settled at the bound (an upstream anomaly).
	UsageBounded bool
}

// Observer receives the engine's events, for metrics.
//
// Contract: methods are called on the call path and must be cheap and
// non-blocking; they are safe for concurrent use. A nil Observer is valid
// wherever one is accepted.
type Observer interface {
	// AttemptStarted reports an upstream attempt about to be sent.
	AttemptStarted(ev AttemptEvent)
	// Attempt reports a finished upstream attempt.
	Attempt(ev AttemptEvent)
	// Refused reports a source refused before an attempt: by its breaker
	// (ReasonCircuitOpen), by the limiter, a 429's pushback or the
	// adaptive limit (ReasonRateLimited), switched off (ReasonDisabled),
	// or by a spend budget (ReasonBudgetExhausted).
	Refused(scope, source string, reason Reason)
	// Waited reports time a call spent waiting for quota or pushback.
	Waited(scope string, d time.Duration)
	// BreakerState reports a breaker state the engine observed that
	// differs from the last one it saw for the source (a transition).
	BreakerState(scope, source string, state BreakerState)
	// Admitted reports an attempt admitted through the gates, with its
	// call's place in the admission queue. place.Tenant is the call's
	// tenant as given (at most MaxTenant bytes): an implementation that
	// labels by it bounds its cardinality itself.
	Admitted(scope string, place Place)
	// QueueWaited reports one stay of a call in the admission queue, from
	// its queueing to the wait's end (admitted, or gave up).
	QueueWaited(scope string, class Priority, d time.Duration)
}

// AttemptListener receives the attempt events of one call (Call.Events):
// the gateway uses it to name the answering source before a relayed
// stream completes. Methods are called from the call's goroutine, in
// order, and must not block.
type AttemptListener interface {
	AttemptStarted(ev AttemptEvent)
	AttemptFinished(ev AttemptEvent)
}

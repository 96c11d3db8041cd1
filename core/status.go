package core

// SourceStatus is a read-only snapshot of one source, as a client's Sources
// reports it.
// It never contains the API key.
type SourceStatus struct {
	// Name, Provider and Model identify the source; BaseURL is its endpoint.
	Name, Provider, Model string
	BaseURL               string
	// Priority, Weight and Region are its tier, share and region label.
	Priority int
	Weight   float64
	Region   string
	// Breaker is the circuit's state.
	Breaker BreakerSnapshot
	// InFlight is this process's in-flight attempts on the source.
	InFlight int
	// Health is the EWMA success score in [0, 1] (1 = healthy; below 0.5
	// the source is weak and chosen only when nothing healthier is).
	Health float64
	// AdaptiveLimit is the adaptive concurrency limit.
	AdaptiveLimit float64
	// Limits are the configured per-source gates; Usage their current use.
	Limits Limits
	Usage  LimiterUsage
	// Queued counts the calls of this process waiting in the admission
	// queue of the source's scope, by class. The queue is the scope's, so
	// every source of a scope reports the same counts.
	Queued QueueDepth
	// Err is set when a backend could not be read.
	Err error
}

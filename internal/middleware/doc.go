// Package middleware holds the layers of the PolyGateway onion, one per file:
// Cache (outermost: a hit skips everything), Telemetry (one row per call,
// cache hits included) and Degrade (a stale or fallback answer when no source
// could answer). Inside them the engine (internal/engine) runs the attempts:
// every attempt re-selects a source and passes the breaker and the limiter
// again, with retry, failover, pushback and backoff.
//
// The package imports core only; it never imports the root package.
package middleware

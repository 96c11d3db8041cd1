// Package middleware holds the layers of the PolyGateway onion, one per file:
// Cache (outermost: a hit skips everything), Telemetry (one row per call,
// cache hits included) and the Governor (innermost, around the transport:
// every attempt re-selects a source and passes the breaker and the limiter
// again, with retry, failover, pushback and backoff).
//
// The package imports the kernel only; it never imports the root package.
package middleware

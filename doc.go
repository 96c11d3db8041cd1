// Package polygateway governs every call a Go program makes to
// OpenAI-compatible model endpoints (chat LLMs, VLMs, embeddings, OCR).
//
// One call of the library is one governed model call: it picks a source among
// many sources and accounts of a logical role (a scope), holds rate-limit
// permits, passes the circuit breaker, retries and fails over by error class,
// watches streams for stalls, caches, and records one telemetry row with
// cost. Task orchestration and parsing stay with the caller.
//
//	client, err := polygateway.FromEnv("LLM")
//	if err != nil { … }
//	defer client.Close()
//	resp, err := client.Chat(ctx, []polygateway.Message{polygateway.User("hello")})
//
// Failures reach the caller classified: RequestRejectedError (the request is
// wrong: do not retry), ResultInvalidError (the answer failed its checks),
// GatewayUnavailableError (no usable source now: reschedule after
// RetryAfter) and GovernanceBackendError (the limiter or breaker backend is
// down). Transient failures are absorbed by retries and failover.
//
// Redis, SQLite and Postgres backends are opt-in: import
// github.com/polygateway/polygateway/backend/redisstore,
// …/telemetry/sqlitesink or …/telemetry/pgsink (a blank import is enough).
package polygateway

// Package e2e holds the end-to-end behaviour tests of the library: each
// assembles clients through the public API only (FromEnv, FromSettings and
// the options of the root package, embed, ocr, proxy and telemetry) against
// fake upstreams (package polygatewaytest or an in-memory round tripper),
// and checks what a caller sees — answers, typed errors, streams, logs,
// telemetry rows, breaker and limiter state — under faults, load,
// cancellation and budgets.
//
// The package has no code of its own; run it with go test ./internal/e2e/.
// The tests that need the root package's unexported hooks, its examples
// and the checks of its docs stay in the root package.
package e2e

package polygateway

import "github.com/polygateway/polygateway/internal/core"

// Reason is the controlled vocabulary of why a source or a scope failed.
type Reason = core.Reason

// Reason values.
const (
	ReasonNetworkError   = core.ReasonNetworkError
	ReasonTimeout        = core.ReasonTimeout
	ReasonRateLimited    = core.ReasonRateLimited
	ReasonSourceDead     = core.ReasonSourceDead
	ReasonCircuitOpen    = core.ReasonCircuitOpen
	ReasonRetryExhausted = core.ReasonRetryExhausted
	ReasonStalled        = core.ReasonStalled
	ReasonServerError    = core.ReasonServerError
	ReasonContextLength  = core.ReasonContextLength
	ReasonContentFilter  = core.ReasonContentFilter
	ReasonLowQuality     = core.ReasonLowQuality
)

// Sentinels, matched with errors.Is.
var (
	// ErrGateway matches every error the library makes.
	ErrGateway = core.ErrGateway
	// ErrCircuitOpen matches a GatewayUnavailableError whose sources were all
	// refused by their breakers.
	ErrCircuitOpen = core.ErrCircuitOpen
	// ErrAllSourcesExhausted matches a GatewayUnavailableError for every
	// other reason (retry budget spent, stalled, quota full).
	ErrAllSourcesExhausted = core.ErrAllSourcesExhausted
)

// TransientError is one attempt's retryable failure: timeout, 5xx, network
// error, cut, stalled or malformed stream, 429. Governance switches source and
// retries with backoff (429 is pushback: no budget used). It reaches the
// caller only when MAX_ATTEMPTS is 1.
type TransientError = core.TransientError

// SourceDeadError means a source's account is unusable (401, 403, 402,
// insufficient quota). That source's breaker opens at once.
type SourceDeadError = core.SourceDeadError

// RequestRejectedError means the request itself was refused (400 and other
// 4xx: context length, content filter; or local validation). It is returned
// at once with the provider's code and message: no retry, no switch.
type RequestRejectedError = core.RequestRejectedError

// ResultInvalidError means the call worked but its result failed the checks.
// It never counts against the breaker.
type ResultInvalidError = core.ResultInvalidError

// GatewayUnavailableError means the scope has no usable source right now. Use
// RetryAfter to reschedule; errors.Is with ErrCircuitOpen or
// ErrAllSourcesExhausted tells the two cases apart.
type GatewayUnavailableError = core.GatewayUnavailableError

// GovernanceBackendError means the limiter or breaker backend failed. The
// call was not sent upstream unprotected.
type GovernanceBackendError = core.GovernanceBackendError

// CanceledError is returned when the caller's context ends; errors.Is(err,
// ctx.Err()) holds. A cancelled call writes no telemetry row.
type CanceledError = core.CanceledError

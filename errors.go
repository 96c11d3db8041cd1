package polygateway

import (
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
)

// Reason is the controlled vocabulary of why a source or a scope failed
// (GatewayUnavailableError.Reason and PerSource, TransientError.Reason, …):
// "network_error", "timeout", "rate_limited", "source_dead",
// "circuit_open", "retry_exhausted", "stalled", …; the core.Reason…
// constants name every value.
type Reason = core.Reason

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
	// ErrBudgetExhausted matches a GatewayUnavailableError refused before
	// any request because a spend budget had no room for the call's
	// estimated cost (Reason budget_exhausted; RetryAfter is when the
	// budget's window ends). It also matches ErrAllSourcesExhausted.
	ErrBudgetExhausted = core.ErrBudgetExhausted
	// ErrRedirect matches the failure of an attempt whose source answered
	// with a redirect (any 3xx), which is never followed: a TransientError
	// (network_error) of the source with the 3xx StatusCode.
	ErrRedirect = core.ErrRedirect
	// ErrClientClosed is returned by calls on a closed client.
	ErrClientClosed = kernel.ErrClosed
)

// The error types of the library, matched with errors.As; their fields
// and methods are documented in package core (go doc core.TransientError).
type (
	// TransientError is one attempt's retryable failure: timeout, 5xx,
	// network error, cut, stalled or malformed stream, 429.
	TransientError = core.TransientError
	// SourceDeadError means a source's account is unusable (401, 403, 402,
	// insufficient quota); that source's breaker opens at once.
	SourceDeadError = core.SourceDeadError
	// RequestRejectedError means the request itself was refused (400 and
	// other 4xx, or local validation): no retry, no switch.
	RequestRejectedError = core.RequestRejectedError
	// ResultInvalidError means the call worked but its result failed the
	// checks; it never counts against the breaker.
	ResultInvalidError = core.ResultInvalidError
	// GatewayUnavailableError means the scope has no usable source right
	// now; errors.Is with ErrCircuitOpen or ErrAllSourcesExhausted tells
	// the two cases apart.
	GatewayUnavailableError = core.GatewayUnavailableError
	// GovernanceBackendError means the limiter or breaker backend failed;
	// the call was not sent upstream unprotected.
	GovernanceBackendError = core.GovernanceBackendError
	// CanceledError is returned when the caller's context ends;
	// errors.Is(err, ctx.Err()) holds.
	CanceledError = core.CanceledError
	// UnknownSourceError names a source its scope does not have.
	UnknownSourceError = core.UnknownSourceError
	// SelectorError means the scope's Selector failed.
	SelectorError = core.SelectorError
)

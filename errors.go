package polygateway

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

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
	// ReasonBudgetExhausted: a spend budget had no room for the call.
	ReasonBudgetExhausted = core.ReasonBudgetExhausted
	// ReasonDisabled: an operator switched the source off.
	ReasonDisabled = core.ReasonDisabled
	// ReasonTaskFailed: the source answered but could not do the task (an
	// OCR server's "success": false): retried elsewhere, alive for the
	// breaker.
	ReasonTaskFailed = core.ReasonTaskFailed
	// ReasonQueueDeadline: the gates were full and the call's deadline
	// could not be met behind the calls waiting ahead of it; RetryAfter is
	// the queue's estimate of when it would have been admitted.
	ReasonQueueDeadline = core.ReasonQueueDeadline
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
	// ErrBudgetExhausted matches a GatewayUnavailableError refused before
	// any request because a spend budget had no room for the call's
	// estimated cost (Reason budget_exhausted; RetryAfter is when the
	// budget's window ends). It also matches ErrAllSourcesExhausted.
	ErrBudgetExhausted = core.ErrBudgetExhausted
	// ErrTenantTooLong matches the RequestRejectedError (Code
	// "tenant_too_long") of a call whose WithTenant name is longer than
	// MaxTenant bytes, refused before any request.
	ErrTenantTooLong = core.ErrTenantTooLong
)

// TransientError is one attempt's retryable failure: timeout, 5xx, network
// error, cut, stalled or malformed stream, 429. Governance switches source and
// retries with backoff (429 is pushback: no budget used). It reaches the
// caller only when MAX_ATTEMPTS is 1.
type TransientError struct {
	// Source names the source that failed.
	Source string
	// Reason is network_error, server_error, timeout, stalled or
	// rate_limited.
	Reason Reason
	// StatusCode is the HTTP status, when headers arrived.
	StatusCode int
	// Code is the provider's error code, when it sent one.
	Code string
	// Message is the provider's message (API keys redacted).
	Message string
	// RetryAfter is the upstream's hint (Retry-After, retry-after-ms); 0 if none.
	RetryAfter time.Duration
	// Err is the cause.
	Err error
}

// SourceDeadError means a source's account is unusable (401, 403, 402,
// insufficient quota). That source's breaker opens at once.
type SourceDeadError struct {
	// Source names the source.
	Source string
	// StatusCode, Code and Message are the provider's answer.
	StatusCode int
	Code       string
	Message    string
	// Err is the cause.
	Err error
}

// RequestRejectedError means the request itself was refused (400 and other
// 4xx: content filter, a plain bad request; or local validation). It is
// returned at once with the provider's code and message: no retry, no
// switch. A context-length refusal is first tried on a source of another
// model.
type RequestRejectedError struct {
	// Source names the source that refused ("" for a local refusal).
	Source string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the provider's error code (e.g. "context_length_exceeded").
	Code string
	// Param is the request field the provider named as the cause (its
	// error.param, e.g. "messages"), redacted and bounded; "" when none.
	Param string
	// Reason is set when the rejection is of a known kind:
	// ReasonContextLength or ReasonContentFilter; "" otherwise.
	Reason Reason
	// Message is the provider's message (API keys redacted).
	Message string
	// Err is the cause.
	Err error
}

// ResultInvalidError means the call worked but its result failed the checks.
// It never counts against the breaker.
type ResultInvalidError struct {
	// Source names the source that answered.
	Source string
	// Reason is ReasonLowQuality when the quality guard refused the answer
	// (it is then retried on another source); "" for a failed check.
	Reason Reason
	// Raw is the last raw text that failed.
	Raw string
	// Message says what is wrong with it.
	Message string
	// Err is the check's error.
	Err error
}

// GatewayUnavailableError means the scope has no usable source right now. Use
// RetryAfter to reschedule; errors.Is with ErrCircuitOpen or
// ErrAllSourcesExhausted tells the two cases apart.
type GatewayUnavailableError struct {
	// Scope is the scope that could not answer.
	Scope string
	// Reason is circuit_open, retry_exhausted, stalled, rate_limited,
	// timeout (the deadline cannot be met), budget_exhausted (a spend
	// budget had no room; nothing was sent) or disabled (every source is
	// switched off).
	Reason Reason
	// RetryAfter is how long until a source can be used again (breaker
	// cooldowns, holds, Retry-After; for budget_exhausted, the end of the
	// budget's window); 0 = now.
	RetryAfter time.Duration
	// PerSource names every source of the scope with the reason it was not
	// usable: its failure in this call, or why the call could not try it.
	PerSource map[string]Reason
	// Budget is the key of the refusing budget ("scope:LLM",
	// "client:team-a") when Reason is budget_exhausted.
	Budget string
	// Err is the last attempt's error, if any.
	Err error
}

// GovernanceBackendError means the limiter or breaker backend failed (Redis
// down, slow or unreachable). The call was not sent upstream unprotected.
type GovernanceBackendError struct {
	// Backend is "limiter" or "breaker".
	Backend string
	// Op is the operation that failed (e.g. "admit").
	Op string
	// Err is the backend's error.
	Err error
}

// CanceledError is returned when the caller's context ends; errors.Is(err,
// ctx.Err()) holds. A cancelled call writes no telemetry row.
type CanceledError struct {
	// Err is the context's error.
	Err error
}

// UnknownSourceError names a source its scope does not have: the answer
// to ResetSource, DisableSource or EnableSource naming a wrong source.
type UnknownSourceError struct {
	// Scope is the client's scope; Source the name asked for.
	Scope, Source string
}

// SelectorError means the scope's Selector failed: it returned an error or
// chose a candidate that does not exist.
type SelectorError struct {
	// Choice is the index the selector returned; Candidates how many it had.
	Choice, Candidates int
	// Err is the selector's error.
	Err error
}

// Error returns the message, naming the source and the reason.
func (e *TransientError) Error() string { return (*core.TransientError)(e).Error() }

// Unwrap returns the cause.
func (e *TransientError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *TransientError) Is(target error) bool { return target == ErrGateway }

// IsRateLimit reports whether the failure is a 429 pushback.
func (e *TransientError) IsRateLimit() bool { return e.Reason == ReasonRateLimited }

// Error returns the message, naming the source.
func (e *SourceDeadError) Error() string { return (*core.SourceDeadError)(e).Error() }

// Unwrap returns the cause.
func (e *SourceDeadError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *SourceDeadError) Is(target error) bool { return target == ErrGateway }

// Error returns the message with the provider's code.
func (e *RequestRejectedError) Error() string { return (*core.RequestRejectedError)(e).Error() }

// Unwrap returns the cause.
func (e *RequestRejectedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *RequestRejectedError) Is(target error) bool { return target == ErrGateway }

// Error returns the message.
func (e *ResultInvalidError) Error() string { return (*core.ResultInvalidError)(e).Error() }

// Unwrap returns the check's error.
func (e *ResultInvalidError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *ResultInvalidError) Is(target error) bool { return target == ErrGateway }

// Error returns the message: scope, reason, RetryAfter, every source's
// reason and the last attempt's error.
func (e *GatewayUnavailableError) Error() string { return (*core.GatewayUnavailableError)(e).Error() }

// Unwrap returns the last attempt's error.
func (e *GatewayUnavailableError) Unwrap() error { return e.Err }

// Is matches ErrGateway, and ErrCircuitOpen (Reason circuit_open) or
// ErrAllSourcesExhausted (every other reason), and ErrBudgetExhausted
// (Reason budget_exhausted).
func (e *GatewayUnavailableError) Is(target error) bool {
	return (*core.GatewayUnavailableError)(e).Is(target)
}

// Error returns the message naming the backend and the operation.
func (e *GovernanceBackendError) Error() string { return (*core.GovernanceBackendError)(e).Error() }

// Unwrap returns the backend's error.
func (e *GovernanceBackendError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *GovernanceBackendError) Is(target error) bool { return target == ErrGateway }

// Error returns the message.
func (e *CanceledError) Error() string { return (*core.CanceledError)(e).Error() }

// Unwrap returns the context's error.
func (e *CanceledError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *CanceledError) Is(target error) bool { return target == ErrGateway }

// Error returns the message.
func (e *SelectorError) Error() string { return (*core.SelectorError)(e).Error() }

// Unwrap returns the selector's error.
func (e *SelectorError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *SelectorError) Is(target error) bool { return target == ErrGateway }

// Error returns the message naming the scope and the source.
func (e *UnknownSourceError) Error() string { return (*core.UnknownSourceError)(e).Error() }

// Is reports whether target is ErrGateway.
func (e *UnknownSourceError) Is(target error) bool { return target == ErrGateway }

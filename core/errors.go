package core

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Reason is the controlled vocabulary for why a source or a scope failed.
type Reason string

// Reason values.
const (
	ReasonNetworkError   Reason = "network_error"
	ReasonTimeout        Reason = "timeout"
	ReasonRateLimited    Reason = "rate_limited"
	ReasonSourceDead     Reason = "source_dead"
	ReasonCircuitOpen    Reason = "circuit_open"
	ReasonRetryExhausted Reason = "retry_exhausted"
	ReasonStalled        Reason = "stalled"
	// ReasonServerError: the source answered with a 5xx status.
	ReasonServerError Reason = "server_error"
	// ReasonContextLength: the request does not fit the model's context
	// window (context_length_exceeded and its dialects' kin); another model
	// may take it.
	ReasonContextLength Reason = "context_length"
	// ReasonContentFilter: the provider's content filter refused the request.
	ReasonContentFilter Reason = "content_filter"
	// ReasonLowQuality: the quality guard refused the answer.
	ReasonLowQuality Reason = "low_quality"
	// ReasonBudgetExhausted: a spend budget has no room for the call's
	// estimated cost in its current window; nothing was sent.
	ReasonBudgetExhausted Reason = "budget_exhausted"
	// ReasonDisabled: an operator switched the source off.
	ReasonDisabled Reason = "disabled"
	// ReasonTaskFailed: the source answered, but reported that it could
	// not do the task (an OCR server's HTTP 200 with "success": false, e.g.
	// out of GPU memory). A TransientError: retried on another source, while
	// the answer proves the source alive for the breaker.
	ReasonTaskFailed Reason = "task_failed"
	// ReasonQueueDeadline: the gates were full and the call's deadline
	// could not be met given the calls waiting ahead of it in the admission
	// queue; RetryAfter is when it would have been admitted.
	ReasonQueueDeadline Reason = "queue_deadline"
	// ReasonConsumerFailed: the call's delta sink failed while the source
	// was streaming (a gateway client that stopped reading, an answer the
	// call cannot take): a RequestRejectedError of the caller's side. The
	// source answered, and what it generated until then is billed.
	ReasonConsumerFailed Reason = "consumer_failed"
)

// CodeConsumerFailed is the Code of a RequestRejectedError of reason
// ReasonConsumerFailed.
const CodeConsumerFailed = "stream_consumer_failed"

// Sentinel errors, matched with errors.Is.
var (
	// ErrGateway matches every error the library makes.
	ErrGateway = errors.New("polygateway")
	// ErrCircuitOpen matches a GatewayUnavailableError whose sources were all
	// refused by their breakers.
	ErrCircuitOpen = errors.New("polygateway: circuit open")
	// ErrAllSourcesExhausted matches a GatewayUnavailableError for any other
	// reason: retry budget spent, stalled, every source dead or rate limited.
	ErrAllSourcesExhausted = errors.New("polygateway: all sources exhausted")
	// ErrBudgetExhausted matches a GatewayUnavailableError refused by a
	// spend budget (Reason budget_exhausted); it also matches
	// ErrAllSourcesExhausted.
	ErrBudgetExhausted = errors.New("polygateway: budget exhausted")
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

// Error returns the message, naming the source and the reason.
func (e *TransientError) Error() string {
	return formatErr("transient error", e.Source, string(e.Reason), e.StatusCode, e.Code, e.Message, e.Err)
}

// Unwrap returns the cause.
func (e *TransientError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *TransientError) Is(target error) bool { return target == ErrGateway }

// IsRateLimit reports whether the failure is a 429 pushback.
func (e *TransientError) IsRateLimit() bool { return e.Reason == ReasonRateLimited }

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

// Error returns the message, naming the source.
func (e *SourceDeadError) Error() string {
	return formatErr("source dead", e.Source, "", e.StatusCode, e.Code, e.Message, e.Err)
}

// Unwrap returns the cause.
func (e *SourceDeadError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *SourceDeadError) Is(target error) bool { return target == ErrGateway }

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
	// ReasonContextLength, ReasonContentFilter or ReasonConsumerFailed;
	// "" otherwise.
	Reason Reason
	// Message is the provider's message (API keys redacted).
	Message string
	// Err is the cause.
	Err error
}

// Error returns the message with the provider's code.
func (e *RequestRejectedError) Error() string {
	return formatErr("request rejected", e.Source, "", e.StatusCode, e.Code, e.Message, e.Err)
}

// Unwrap returns the cause.
func (e *RequestRejectedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *RequestRejectedError) Is(target error) bool { return target == ErrGateway }

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

// Error returns the message.
func (e *ResultInvalidError) Error() string {
	return formatErr("result invalid", e.Source, "", 0, "", e.Message, e.Err)
}

// Unwrap returns the cause.
func (e *ResultInvalidError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *ResultInvalidError) Is(target error) bool { return target == ErrGateway }

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

// Error returns the message: scope, reason, RetryAfter, every source's
// reason and the last attempt's error.
func (e *GatewayUnavailableError) Error() string {
	var b strings.Builder
	b.WriteString("polygateway: scope ")
	b.WriteString(e.Scope)
	b.WriteString(" unavailable (")
	b.WriteString(string(e.Reason))
	if e.Budget != "" {
		b.WriteString(" of budget ")
		b.WriteString(e.Budget)
	}
	b.WriteString(")")
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, ", retry after %s", e.RetryAfter)
	}
	if len(e.PerSource) > 0 {
		b.WriteString(", sources:")
		for _, name := range slices.Sorted(maps.Keys(e.PerSource)) {
			b.WriteString(" ")
			b.WriteString(name)
			b.WriteString("=")
			b.WriteString(string(e.PerSource[name]))
		}
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the last attempt's error.
func (e *GatewayUnavailableError) Unwrap() error { return e.Err }

// Is matches ErrGateway, and ErrCircuitOpen (Reason circuit_open) or
// ErrAllSourcesExhausted (every other reason), and ErrBudgetExhausted
// (Reason budget_exhausted).
func (e *GatewayUnavailableError) Is(target error) bool {
	switch target {
	case ErrGateway:
		return true
	case ErrCircuitOpen:
		return e.Reason == ReasonCircuitOpen
	case ErrAllSourcesExhausted:
		return e.Reason != ReasonCircuitOpen
	case ErrBudgetExhausted:
		return e.Reason == ReasonBudgetExhausted
	}
	return false
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

// Error returns the message naming the backend and the operation.
func (e *GovernanceBackendError) Error() string {
	msg := "polygateway: " + e.Backend + " backend " + e.Op + " failed"
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the backend's error.
func (e *GovernanceBackendError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *GovernanceBackendError) Is(target error) bool { return target == ErrGateway }

// CanceledError is returned when the caller's context ends; errors.Is(err,
// ctx.Err()) holds. A cancelled call writes no telemetry row.
type CanceledError struct {
	// Err is the context's error.
	Err error
}

// Error returns the message.
func (e *CanceledError) Error() string { return "polygateway: call cancelled: " + e.Err.Error() }

// Unwrap returns the context error.
func (e *CanceledError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *CanceledError) Is(target error) bool { return target == ErrGateway }

// Class is the kind of an error as governance sees it.
type Class uint8

// Error classes, from the error types of this package.
const (
	ClassOther Class = iota
	ClassTransient
	ClassSourceDead
	ClassRejected
	ClassInvalid
	ClassUnavailable
	ClassBackend
	ClassCanceled
)

var classNames = [...]string{"Error", "TransientError", "SourceDeadError", "RequestRejectedError",
	"ResultInvalidError", "GatewayUnavailableError", "GovernanceBackendError", "CanceledError"}

// String returns the class's type name ("TransientError", …; "Error" for
// foreign errors).
func (c Class) String() string { return classNames[c] }

// Classified is an error's class with the source and reason it carries
// (for a GatewayUnavailableError, the source of its last attempt).
type Classified struct {
	Class  Class
	Source string
	// Reason is the error's Reason field: set for TransientError,
	// GatewayUnavailableError (the scope's reason), and for
	// RequestRejectedError and ResultInvalidError of a known kind.
	Reason Reason
}

// Classify finds the outermost error of this package in err's chain. The
// scope-level and cancellation classes win over the attempt classes they
// may wrap.
func Classify(err error) Classified {
	var (
		u  *GatewayUnavailableError
		g  *GovernanceBackendError
		c  *CanceledError
		t  *TransientError
		d  *SourceDeadError
		r  *RequestRejectedError
		iv *ResultInvalidError
	)
	switch {
	case err == nil:
		return Classified{}
	case errors.As(err, &u):
		// The source is the one of the last attempt, when there was one.
		return Classified{Class: ClassUnavailable, Reason: u.Reason, Source: Classify(u.Err).Source}
	case errors.As(err, &g):
		return Classified{Class: ClassBackend}
	case errors.As(err, &c):
		return Classified{Class: ClassCanceled}
	case errors.As(err, &t):
		return Classified{Class: ClassTransient, Source: t.Source, Reason: t.Reason}
	case errors.As(err, &d):
		return Classified{Class: ClassSourceDead, Source: d.Source}
	case errors.As(err, &r):
		return Classified{Class: ClassRejected, Source: r.Source, Reason: r.Reason}
	case errors.As(err, &iv):
		return Classified{Class: ClassInvalid, Source: iv.Source, Reason: iv.Reason}
	}
	return Classified{Class: ClassOther}
}

// ErrorClass returns the class name used as the telemetry error prefix
// ("TransientError", "SourceDeadError", …), or "Error" for foreign errors.
func ErrorClass(err error) string { return Classify(err).Class.String() }

func formatErr(kind, source, reason string, status int, code, msg string, cause error) string {
	var b strings.Builder
	b.WriteString("polygateway: ")
	b.WriteString(kind)
	if source != "" {
		b.WriteString(" from ")
		b.WriteString(source)
	}
	if reason != "" {
		b.WriteString(" (")
		b.WriteString(reason)
		b.WriteString(")")
	}
	if status != 0 {
		fmt.Fprintf(&b, ": http %d", status)
	}
	if code != "" {
		b.WriteString(" [")
		b.WriteString(code)
		b.WriteString("]")
	}
	if msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	if cause != nil && msg == "" {
		b.WriteString(": ")
		b.WriteString(cause.Error())
	}
	return b.String()
}

// SelectorError means the scope's Selector failed: it returned an error or
// chose a candidate that does not exist.
type SelectorError struct {
	// Choice is the index the selector returned; Candidates how many it had.
	Choice, Candidates int
	// Err is the selector's error.
	Err error
}

// Error returns the message.
func (e *SelectorError) Error() string {
	if e.Err != nil {
		return "polygateway: selector failed: " + e.Err.Error()
	}
	return fmt.Sprintf("polygateway: selector chose candidate %d of %d", e.Choice, e.Candidates)
}

// Unwrap returns the selector's error.
func (e *SelectorError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway.
func (e *SelectorError) Is(target error) bool { return target == ErrGateway }

// UnknownSourceError names a source its scope does not have: the answer
// to ResetSource, DisableSource or EnableSource naming a wrong source.
type UnknownSourceError struct {
	// Scope is the client's scope; Source the name asked for.
	Scope, Source string
}

// Error returns the message naming the scope and the source.
func (e *UnknownSourceError) Error() string {
	if e.Source == "" {
		return "polygateway: scope " + e.Scope + ": no source named"
	}
	return "polygateway: scope " + e.Scope + " has no source " + e.Source
}

// Is reports whether target is ErrGateway.
func (e *UnknownSourceError) Is(target error) bool { return target == ErrGateway }

package testkit

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// Epoch is the start of the fake clocks of the engine's and the
// middleware's tests.
var Epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// TransientErr is a network failure of source (status 503).
func TransientErr(source string) error {
	return &core.TransientError{Source: source, Reason: core.ReasonNetworkError, StatusCode: 503, Message: "service unavailable"}
}

// TimeoutErr is an attempt of source that timed out.
func TimeoutErr(source string) error {
	return &core.TransientError{Source: source, Reason: core.ReasonTimeout, Message: "attempt timed out"}
}

// StalledErr is a stream of source that stalled.
func StalledErr(source string) error {
	return &core.TransientError{Source: source, Reason: core.ReasonStalled, Message: "stream stalled"}
}

// RateLimitedErr is a 429 of source asking to retry after retryAfter.
func RateLimitedErr(source string, retryAfter time.Duration) error {
	return &core.TransientError{Source: source, Reason: core.ReasonRateLimited, StatusCode: 429, RetryAfter: retryAfter}
}

// DeadErr is a source refusing its API key (401 invalid_api_key).
func DeadErr(source string) error {
	return &core.SourceDeadError{Source: source, StatusCode: 401, Code: "invalid_api_key"}
}

// RejectedErr is a request that source rejects (400
// context_length_exceeded).
func RejectedErr(source string) error {
	return &core.RequestRejectedError{Source: source, StatusCode: 400, Code: "context_length_exceeded"}
}

// InvalidErr is an answer of source that is not JSON.
func InvalidErr(source string) error {
	return &core.ResultInvalidError{Source: source, Raw: "{", Message: "not JSON"}
}

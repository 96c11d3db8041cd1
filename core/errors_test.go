package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

func everyErrorType() []struct {
	name string
	err  error
} {
	cause := io.ErrUnexpectedEOF
	return []struct {
		name string
		err  error
	}{
		{"TransientError", &TransientError{Source: "a", Reason: ReasonNetworkError, Err: cause}},
		{"SourceDeadError", &SourceDeadError{Source: "a", StatusCode: 401, Err: cause}},
		{"RequestRejectedError", &RequestRejectedError{Source: "a", StatusCode: 400, Err: cause}},
		{"ResultInvalidError", &ResultInvalidError{Source: "a", Err: cause}},
		{"GatewayUnavailableError", &GatewayUnavailableError{Scope: "LLM", Reason: ReasonRetryExhausted, Err: cause}},
		{"GovernanceBackendError", &GovernanceBackendError{Backend: "limiter", Op: "acquire", Err: cause}},
		{"CanceledError", &CanceledError{Err: cause}},
	}
}

func TestEveryErrorTypeIsErrGatewayAndUnwrapsItsCause(t *testing.T) {
	t.Parallel()
	for _, tc := range everyErrorType() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !errors.Is(tc.err, ErrGateway) {
				t.Errorf("errors.Is(%T, ErrGateway) = false", tc.err)
			}
			if got := errors.Unwrap(tc.err); got != io.ErrUnexpectedEOF { //nolint:errorlint // one Unwrap must yield the cause itself
				t.Errorf("Unwrap = %v, want io.ErrUnexpectedEOF", got)
			}
			if !errors.Is(tc.err, io.ErrUnexpectedEOF) {
				t.Errorf("errors.Is(err, cause) = false")
			}
			wrapped := fmt.Errorf("outer: %w", fmt.Errorf("middle: %w", tc.err))
			if !errors.Is(wrapped, ErrGateway) {
				t.Errorf("errors.Is(wrapped, ErrGateway) = false")
			}
			if !errors.Is(wrapped, io.ErrUnexpectedEOF) {
				t.Errorf("errors.Is(wrapped, cause) = false")
			}
			if got := ErrorClass(wrapped); got != tc.name {
				t.Errorf("ErrorClass(wrapped) = %q, want %q", got, tc.name)
			}
			if got := ErrorClass(tc.err); got != tc.name {
				t.Errorf("ErrorClass = %q, want %q", got, tc.name)
			}
		})
	}
}

func TestErrorsAsFindsEachTypeThroughWrapping(t *testing.T) {
	t.Parallel()
	te := &TransientError{Source: "t"}
	de := &SourceDeadError{Source: "d"}
	re := &RequestRejectedError{Source: "r"}
	ie := &ResultInvalidError{Source: "i"}
	ue := &GatewayUnavailableError{Scope: "u"}
	ge := &GovernanceBackendError{Backend: "breaker"}
	ce := &CanceledError{Err: context.Canceled}
	wrap := func(err error) error { return fmt.Errorf("ctx: %w", err) }

	var gotT *TransientError
	if !errors.As(wrap(te), &gotT) || gotT != te {
		t.Error("errors.As TransientError through wrapping failed")
	}
	var gotD *SourceDeadError
	if !errors.As(wrap(de), &gotD) || gotD != de {
		t.Error("errors.As SourceDeadError through wrapping failed")
	}
	var gotR *RequestRejectedError
	if !errors.As(wrap(re), &gotR) || gotR != re {
		t.Error("errors.As RequestRejectedError through wrapping failed")
	}
	var gotI *ResultInvalidError
	if !errors.As(wrap(ie), &gotI) || gotI != ie {
		t.Error("errors.As ResultInvalidError through wrapping failed")
	}
	var gotU *GatewayUnavailableError
	if !errors.As(wrap(ue), &gotU) || gotU != ue {
		t.Error("errors.As GatewayUnavailableError through wrapping failed")
	}
	var gotG *GovernanceBackendError
	if !errors.As(wrap(ge), &gotG) || gotG != ge {
		t.Error("errors.As GovernanceBackendError through wrapping failed")
	}
	var gotC *CanceledError
	if !errors.As(wrap(ce), &gotC) || gotC != ce {
		t.Error("errors.As CanceledError through wrapping failed")
	}
	// A GatewayUnavailableError exposes the last attempt's error.
	outer := &GatewayUnavailableError{Scope: "LLM", Reason: ReasonRetryExhausted, Err: te}
	gotT = nil
	if !errors.As(wrap(outer), &gotT) || gotT != te {
		t.Error("errors.As did not reach the TransientError inside GatewayUnavailableError")
	}
}

func TestErrorsDoNotMatchForeignSentinels(t *testing.T) {
	t.Parallel()
	for _, tc := range everyErrorType() {
		if errors.Is(tc.err, context.Canceled) {
			t.Errorf("%s matches context.Canceled without wrapping it", tc.name)
		}
	}
	if errors.Is(errors.New("polygateway"), ErrGateway) {
		t.Error("a foreign error with the same text matches ErrGateway")
	}
}

func TestGatewayUnavailableMatchesCircuitOpenOnlyForCircuitOpenReason(t *testing.T) {
	t.Parallel()
	reasons := []Reason{
		ReasonNetworkError, ReasonTimeout, ReasonRateLimited, ReasonSourceDead,
		ReasonCircuitOpen, ReasonRetryExhausted, ReasonStalled,
	}
	for _, r := range reasons {
		t.Run(string(r), func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("wrapped: %w", &GatewayUnavailableError{Scope: "LLM", Reason: r})
			circuit := r == ReasonCircuitOpen
			if got := errors.Is(err, ErrCircuitOpen); got != circuit {
				t.Errorf("errors.Is(ErrCircuitOpen) = %v, want %v", got, circuit)
			}
			if got := errors.Is(err, ErrAllSourcesExhausted); got != !circuit {
				t.Errorf("errors.Is(ErrAllSourcesExhausted) = %v, want %v", got, !circuit)
			}
			if !errors.Is(err, ErrGateway) {
				t.Error("errors.Is(ErrGateway) = false")
			}
		})
	}
}

func TestOtherErrorTypesMatchNeitherScopeSentinel(t *testing.T) {
	t.Parallel()
	for _, tc := range everyErrorType() {
		if tc.name == "GatewayUnavailableError" {
			continue
		}
		if errors.Is(tc.err, ErrCircuitOpen) || errors.Is(tc.err, ErrAllSourcesExhausted) {
			t.Errorf("%s matches a scope sentinel", tc.name)
		}
	}
}

func TestCanceledErrorMatchesTheContextError(t *testing.T) {
	t.Parallel()
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		err := fmt.Errorf("call: %w", &CanceledError{Err: ctxErr})
		if !errors.Is(err, ctxErr) {
			t.Errorf("errors.Is(err, %v) = false", ctxErr)
		}
		if !errors.Is(err, ErrGateway) {
			t.Errorf("errors.Is(err, ErrGateway) = false for %v", ctxErr)
		}
	}
}

func TestErrorTexts(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp: connection refused")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{
			"transient with every field",
			&TransientError{Source: "openai_1", Reason: ReasonTimeout, StatusCode: 504, Code: "gateway_timeout", Message: "slow", Err: cause},
			"polygateway: transient error from openai_1 (timeout): http 504 [gateway_timeout]: slow",
		},
		{
			"transient with only a cause",
			&TransientError{Source: "openai_1", Reason: ReasonNetworkError, Err: cause},
			"polygateway: transient error from openai_1 (network_error): dial tcp: connection refused",
		},
		{"transient bare", &TransientError{}, "polygateway: transient error"},
		{
			"source dead",
			&SourceDeadError{Source: "qwen_2", StatusCode: 401, Code: "invalid_api_key", Message: "bad key"},
			"polygateway: source dead from qwen_2: http 401 [invalid_api_key]: bad key",
		},
		{
			"request rejected",
			&RequestRejectedError{Source: "qwen_2", StatusCode: 400, Code: "context_length_exceeded", Message: "too long"},
			"polygateway: request rejected from qwen_2: http 400 [context_length_exceeded]: too long",
		},
		{
			"result invalid",
			&ResultInvalidError{Source: "qwen_2", Raw: "{", Message: "not JSON"},
			"polygateway: result invalid from qwen_2: not JSON",
		},
		{
			"result invalid from its cause",
			&ResultInvalidError{Err: cause},
			"polygateway: result invalid: dial tcp: connection refused",
		},
		{
			"gateway unavailable, sources sorted, with cause",
			&GatewayUnavailableError{
				Scope: "LLM", Reason: ReasonRetryExhausted, RetryAfter: 2 * time.Second,
				PerSource: map[string]Reason{"b_1": ReasonTimeout, "a_1": ReasonNetworkError},
				Err:       &TransientError{Source: "b_1", Reason: ReasonTimeout},
			},
			"polygateway: scope LLM unavailable (retry_exhausted), retry after 2s, sources: a_1=network_error b_1=timeout: polygateway: transient error from b_1 (timeout)",
		},
		{
			"gateway unavailable bare",
			&GatewayUnavailableError{Scope: "OCR", Reason: ReasonCircuitOpen},
			"polygateway: scope OCR unavailable (circuit_open)",
		},
		{
			"governance backend",
			&GovernanceBackendError{Backend: "limiter", Op: "acquire", Err: errors.New("redis down")},
			"polygateway: limiter backend acquire failed: redis down",
		},
		{
			"governance backend without cause",
			&GovernanceBackendError{Backend: "breaker", Op: "reset"},
			"polygateway: breaker backend reset failed",
		},
		{
			"canceled",
			&CanceledError{Err: context.Canceled},
			"polygateway: call cancelled: context canceled",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

func TestErrorClass(t *testing.T) {
	t.Parallel()
	te := &TransientError{Source: "a"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, "Error"},
		{"foreign", errors.New("boom"), "Error"},
		{"context error", context.Canceled, "Error"},
		{"transient", te, "TransientError"},
		{"source dead", &SourceDeadError{}, "SourceDeadError"},
		{"rejected", &RequestRejectedError{}, "RequestRejectedError"},
		{"invalid", &ResultInvalidError{}, "ResultInvalidError"},
		{"unavailable", &GatewayUnavailableError{}, "GatewayUnavailableError"},
		{"backend", &GovernanceBackendError{}, "GovernanceBackendError"},
		{"canceled", &CanceledError{Err: context.Canceled}, "CanceledError"},
		// The scope-level class wins over the attempt error it wraps.
		{"unavailable wrapping transient", &GatewayUnavailableError{Err: te}, "GatewayUnavailableError"},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &SourceDeadError{})), "SourceDeadError"},
		{"joined", errors.Join(errors.New("x"), &RequestRejectedError{}), "RequestRejectedError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := ErrorClass(tc.err); got != tc.want {
				t.Errorf("ErrorClass = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTransientIsRateLimitOnlyForRateLimitedReason(t *testing.T) {
	t.Parallel()
	for _, r := range []Reason{ReasonNetworkError, ReasonTimeout, ReasonStalled, ReasonRateLimited, ""} {
		e := &TransientError{Reason: r}
		if got, want := e.IsRateLimit(), r == ReasonRateLimited; got != want {
			t.Errorf("IsRateLimit for %q = %v, want %v", r, got, want)
		}
	}
}

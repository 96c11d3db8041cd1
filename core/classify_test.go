package core

import (
	"fmt"
	"testing"
)

func TestClassifyFindsClassSourceAndReason(t *testing.T) {
	t.Parallel()
	te := &TransientError{Source: "a_1", Reason: ReasonTimeout}
	cases := []struct {
		name string
		err  error
		want Classified
	}{
		{"nil", nil, Classified{}},
		{"foreign", fmt.Errorf("boom"), Classified{Class: ClassOther}},
		{"transient wrapped", fmt.Errorf("x: %w", te), Classified{Class: ClassTransient, Source: "a_1", Reason: ReasonTimeout}},
		{"dead", &SourceDeadError{Source: "b_2"}, Classified{Class: ClassSourceDead, Source: "b_2"}},
		{"rejected", &RequestRejectedError{Source: "c_3"}, Classified{Class: ClassRejected, Source: "c_3"}},
		{"invalid", &ResultInvalidError{Source: "d_4"}, Classified{Class: ClassInvalid, Source: "d_4"}},
		{"unavailable keeps the last attempt's source", &GatewayUnavailableError{Reason: ReasonRetryExhausted, Err: te},
			Classified{Class: ClassUnavailable, Source: "a_1", Reason: ReasonRetryExhausted}},
		{"backend", &GovernanceBackendError{Backend: "limiter"}, Classified{Class: ClassBackend}},
		{"canceled wins over what it wraps", &CanceledError{Err: te}, Classified{Class: ClassCanceled}},
	}
	for _, tc := range cases {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

func TestScrubAddresses(t *testing.T) {
	for in, want := range map[string]string{
		"dial tcp 127.0.0.1:9102: connect: connection refused": "dial tcp [address]: connect: connection refused",
		"read tcp 10.1.2.3:8400->10.1.2.4:53422: i/o timeout":  "read tcp [address]->[address]: i/o timeout",
		"dial tcp [::1]:8000: refused":                         "dial tcp [address]: refused",
		"peer fe80::1%eth0 and 2001:db8::7 gone":               "peer [address] and [address] gone",
		`Post "http://10.0.0.5:7861/ocr/text?x=1": EOF`:        `Post "[url]": EOF`,
		"upstream api.internal.corp:8443 down":                 "upstream [address] down",
		"localhost:6379 refused":                               "[address] refused",
		"at 12:30:45 the model v1.2 said 3.14 [REDACTED]":      "at 12:30:45 the model v1.2 said 3.14 [REDACTED]",
		"This model's maximum context length is 8192 tokens":   "This model's maximum context length is 8192 tokens",
		"code:400 deadbeef cafe::beef":                         "code:400 deadbeef [address]",
	} {
		if got := scrubAddresses(in); got != want {
			t.Errorf("scrubAddresses(%q) = %q, want %q", in, got, want)
		}
	}
}

// Client messages name the sources and classes; addresses, URLs and dial
// errors stay out, whatever the error wraps.
func TestMapErrorHidesTopology(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "http://127.0.0.1:9102/v1/chat/completions", Err: errors.New("dial tcp 127.0.0.1:9102: connect: connection refused")}
	last := &polygateway.TransientError{Source: "primary_1", Reason: core.ReasonNetworkError, Message: dial.Error(), Err: dial}
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&polygateway.GatewayUnavailableError{Scope: "LLM", Reason: core.ReasonRetryExhausted,
			PerSource: map[string]core.Reason{"primary_1": core.ReasonNetworkError}, Err: last},
			[]string{"scope LLM unavailable (retry_exhausted)", "primary_1=network_error", "last attempt: polygateway: transient error from primary_1 (network_error)"}},
		{last, []string{"transient error from primary_1 (network_error)"}},
		{&polygateway.TransientError{Source: "a_1", Reason: core.ReasonTimeout, Message: "x", Err: fmt.Errorf("wrapped: %w", context.DeadlineExceeded)}, []string{"cancelled"}},
		{&polygateway.SourceDeadError{Source: "b_1", StatusCode: 401, Code: "invalid_api_key", Message: "Incorrect key at https://h/x"}, []string{"source dead from b_1: http 401 [invalid_api_key]"}},
		{&polygateway.RequestRejectedError{Source: "c_1", StatusCode: 400, Code: "context_length_exceeded", Message: "maximum context length is 8192 (see http://10.0.0.1/doc)"}, []string{"request rejected from c_1", "maximum context length is 8192", "[url]"}},
		{&polygateway.ResultInvalidError{Source: "d_1", Raw: "raw 10.0.0.9", Message: `unusable download_url "http://10.0.0.9:7861/x"`}, []string{"result invalid from d_1", "[url]"}},
		{&polygateway.GovernanceBackendError{Backend: "limiter", Op: "acquire", Err: errors.New("dial tcp 127.0.0.1:6379: refused")}, []string{"limiter backend acquire failed"}},
		{&polygateway.CanceledError{Err: context.Canceled}, []string{"cancelled"}},
		{errors.New("dial tcp 10.9.9.9:1: boom"), []string{"internal error"}},
	} {
		e := mapError(tc.err, false)
		body := string(e.body())
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%T: body %s lacks %q", tc.err, body, w)
			}
		}
		for _, bad := range []string{"127.0.0.1", "10.0.0", "10.9.9.9", "dial tcp", "http://", "raw "} {
			if strings.Contains(body, bad) {
				t.Errorf("%T: body shows %q: %s", tc.err, bad, body)
			}
		}
	}
}

// FuzzScrubAddresses: any text, with an address inserted between spaces,
// loses the address, and scrubbing twice changes nothing more.
func FuzzScrubAddresses(f *testing.F) {
	f.Add("dial tcp 127.0.0.1:9102: connect: connection refused", 5)
	f.Add("fe80::1%eth0 [::1]:80 http://h:1/x localhost:6379", 0)
	f.Add("12:30:45 v1.2.3 deadbeef", 3)
	f.Fuzz(func(t *testing.T, s string, at int) {
		once := scrubAddresses(s)
		if twice := scrubAddresses(once); twice != once {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, once, twice)
		}
		at = min(max(at, 0), len(s))
		in := s[:at] + " 10.11.12.13:8080 " + s[at:]
		if got := scrubAddresses(in); strings.Contains(got, "10.11.12.13") {
			t.Fatalf("scrubAddresses(%q) = %q keeps the address", in, got)
		}
	})
}

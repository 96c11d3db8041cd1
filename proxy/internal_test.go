package proxy

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pass@api.example/v1?key=sk-123#frag": "https://api.example/v1",
		"http://127.0.0.1:8000/v1":                         "http://127.0.0.1:8000/v1",
		"::not a url":                                      "(unparseable)",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCleanID(t *testing.T) {
	for in, want := range map[string]string{"abc-1.2_3:4": "abc-1.2_3:4", "": "", "a b": "", "x\r\ny": "", string(make([]byte, 129)): ""} {
		if got := cleanID(in); got != want {
			t.Errorf("cleanID(%q) = %q", in, got)
		}
	}
}

func TestClientLimiterBoundedWithIdleEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newClientLimiter(1, 2, 3, func() time.Time { return now })
	for _, k := range []string{"a", "b", "c"} {
		if ok, _ := l.allow(k); !ok {
			t.Fatal(k)
		}
	}
	// Full map, nobody idle long enough: one arbitrary bucket goes.
	if ok, _ := l.allow("d"); !ok || l.size() != 3 {
		t.Fatalf("size %d", l.size())
	}
	// After the refill time every bucket is full again: all are evicted.
	now = now.Add(3 * time.Second)
	if ok, _ := l.allow("e"); !ok || l.size() != 1 {
		t.Fatalf("idle buckets not evicted: size %d", l.size())
	}
	// Exhaust e: the wait is the time to one token.
	l.allow("e")
	ok, wait := l.allow("e")
	if ok || wait != time.Second {
		t.Fatalf("allow = %v, wait %v", ok, wait)
	}
	now = now.Add(time.Second)
	if ok, _ := l.allow("e"); !ok {
		t.Fatal("bucket did not refill")
	}
}

func TestMapErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{&polygateway.RequestRejectedError{Code: "content_filter", Message: "no"}, http.StatusBadRequest, "content_filter"},
		{&polygateway.GatewayUnavailableError{Reason: polygateway.ReasonRetryExhausted, RetryAfter: 1500 * time.Millisecond}, http.StatusServiceUnavailable, "retry_exhausted"},
		{&polygateway.ResultInvalidError{Message: "bad json"}, http.StatusUnprocessableEntity, "result_invalid"},
		{&polygateway.GovernanceBackendError{Backend: "limiter", Op: "acquire", Err: errors.New("redis down")}, http.StatusServiceUnavailable, "governance_backend_unavailable"},
		{&polygateway.TransientError{Reason: polygateway.ReasonTimeout}, http.StatusBadGateway, "timeout"},
		{polygateway.ErrClientClosed, http.StatusServiceUnavailable, "server_shutting_down"},
		{errors.New("boom"), http.StatusInternalServerError, "internal_error"},
	} {
		e := mapError(tc.err, false)
		if e.status != tc.status || e.code != tc.code {
			t.Errorf("%v: %d %s, want %d %s", tc.err, e.status, e.code, tc.status, tc.code)
		}
	}
	if e := mapError(&polygateway.GatewayUnavailableError{RetryAfter: 1500 * time.Millisecond}, false); retryAfterSeconds(e.retryAfter) != "2" {
		t.Errorf("Retry-After %s, want 2 (ceil)", retryAfterSeconds(e.retryAfter))
	}
	if e := mapError(errors.New("x"), true); e.status != StatusClientClosedRequest {
		t.Errorf("gone client: %d", e.status)
	}
}

package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// chatBody is a minimal chat request for the route gpt-4o.
const chatBody = `{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":"hi"}]}`

// gatewayOn starts the gateway with the scope LLM's one source on up.
func gatewayOn(t *testing.T, up *fakeupstream.Server, extra map[string]string) string {
	t.Helper()
	env := map[string]string{"LLM__ONE__1__BASE_URL": up.URL()}
	for k, v := range extra {
		env[k] = v
	}
	return gatewayFor(t, env)
}

// TestAThrottledScopeAnswers429WithTheUpstreamsRetryAfter: a scope whose
// only source answers 429 with Retry-After answers its client 429 with
// that Retry-After at once (the SDKs retry a 429 themselves), instead of
// holding the connection; a second client is answered the same without
// the upstream being asked again.
func TestAThrottledScopeAnswers429WithTheUpstreamsRetryAfter(t *testing.T) {
	up := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.RateLimited("5")))
	base := gatewayOn(t, up, map[string]string{"LLM__BACKPRESSURE__STALL_WINDOW_S": "60"})
	for i := range 2 {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(chatBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("request %d: status %d, want 429", i, resp.StatusCode)
		}
		if ra := resp.Header.Get("Retry-After"); ra != "5" && ra != "4" {
			t.Errorf("request %d: Retry-After %q, want the upstream's 5 s", i, ra)
		}
		if took > 4*time.Second {
			t.Errorf("request %d answered after %v: held through the Retry-After", i, took)
		}
	}
	if n := up.Requests(); n != 1 {
		t.Errorf("upstream asked %d times, want once", n)
	}
}

// TestAClientWithoutADeadlineIsAnsweredWithinTheStallWindow: a request
// that finds its scope's only source at its RPM limit for the rest of the
// minute, from a client that sets no deadline, is answered when the stall
// window ends — 503 stalled with Retry-After — not held for the minute.
func TestAClientWithoutADeadlineIsAnsweredWithinTheStallWindow(t *testing.T) {
	up := fakeupstream.NewServer(t)
	base := gatewayOn(t, up, map[string]string{
		"LLM__BACKPRESSURE__STALL_WINDOW_S": "2", "LLM__ONE__1__RPM": "1", "LLM__ONE__1__TTFT_TIMEOUT_S": "1", "LLM__ONE__1__INTER_TOKEN_TIMEOUT_S": "0.5",
	})
	post := func() (*http.Response, time.Duration) {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(chatBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp, time.Since(start)
	}
	if resp, _ := post(); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: status %d", resp.StatusCode)
	}
	resp, took := post()
	if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q: want 503 or 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if took > 10*time.Second {
		t.Errorf("answered after %v, want about the 2 s stall window", took)
	}
}

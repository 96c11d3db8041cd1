package proxy_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/fakeupstream"
	"github.com/polygateway/polygateway/proxy"
)

func TestNonStreamingClientStillFailsOverOnASilentFirstTokenWithAWatchdog(t *testing.T) {
	t.Parallel()
	silent := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(4).WithFirstTokenDelay(20*time.Second)))
	healthy := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(4)))
	e := baseEnv().
		source("LLM", "primary", 1, silent.URL(), secretKey1, "primary-model", "TTFT_TIMEOUT_S", "0.3", "INTER_TOKEN_TIMEOUT_S", "0.2", "TIMEOUT_S", "30").
		source("LLM", "fallback", 2, healthy.URL(), secretKey2, "fallback-model", "PRIORITY", "1")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
		Routes:  map[string]string{"gpt-4o": "LLM"},
	}})
	start := time.Now()
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the answer took %v: the silent first token was not cut by the watchdog", took)
	}
	if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "primary_1,fallback_2" {
		t.Fatalf("X-PolyGateway-Attempts = %q, want the failover primary_1,fallback_2", got)
	}
	var sent map[string]any
	if err := json.Unmarshal(silent.LastBody(), &sent); err != nil {
		t.Fatal(err)
	}
	if sent["stream"] != true {
		t.Errorf("a source with a TTFT watchdog was not asked to stream: %v", sent["stream"])
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Choices[0].Message.Content != tokens(4) {
		t.Fatalf("body %s (%v)", body, err)
	}
}
